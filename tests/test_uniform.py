"""uniform: the KIP-848 coordinator's UniformAssignor.

The ``test_kafka_homogeneous_*`` and ``test_kafka_heterogeneous_*`` tests are the coordinator's
own unit tests (OptimizedUniformAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest
at apache/kafka 1eb7644349cb07139d6a3c1ad1986979647cac99) with the assignments they expect. The
homogeneous ones depend on the order Java iterates the tests' topic ids in: they run with that
order (:mod:`kip848_java`) and, where ktk's default order answers differently, the default's
answer is pinned too. Then properties on random groups: valid, balanced, sticky, scale.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kip848_java import capacity_of_copy, hash_order, uuid_from_string, uuid_hash

from assignors.model import Assignment, Group, Member, Topic, TopicPartition
from assignors.registry import get
from assignors.uniform import (
    IterationOrder,
    UniformAssignor,
    assignment_of,
    plan_uniform,
    target_assignment,
)

# the topic ids of Kafka's tests
KAFKA_TOPIC_IDS = {
    "topic1": "T1-A4s3VTwiI5CTbEp6POw",
    "topic2": "T2-B4s3VTwiI5YHbPp6YUe",
    "topic3": "T3-CU8fVTLCz5YMkLoDQsa",
    "topic4": "T4-Tw9fVTLCz5HbPp6YQsa",
}


def _topic_hash(name: str) -> int:
    return uuid_hash(*uuid_from_string(KAFKA_TOPIC_IDS[name]))


def _kafka_order(
    group: Group, owned: dict[str, list[TopicPartition]] | None = None
) -> IterationOrder:
    """Members sorted (the tests' TreeMap), topics as ``new HashSet<>(subscribed ids)`` iterates,
    topic ids compared as Uuids, owned partitions as given."""
    names = sorted({t for m in group.members for t in m.topics if group.topic(t)})
    topics = hash_order(names, map(_topic_hash, names), capacity_of_copy(len(names)))
    by_id = sorted(names, key=lambda name: uuid_from_string(KAFKA_TOPIC_IDS[name]))
    members = tuple(m.member_id for m in group.members)
    owned_order = None
    if owned is not None:
        owned_order = {m.member_id: tuple(owned.get(m.member_id, ())) for m in group.members}
    return IterationOrder(members, tuple(topics), tuple(by_id), owned_order)


def _member(member_id: str, *topics: str, owned=()) -> Member:
    return Member(
        member_id,
        frozenset(topics),
        tuple(TopicPartition(t, p) for t, ps in owned for p in ps),
    )


def _owned_sequence(owned) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, ps in owned for p in ps]


def _by_topic(assignment: Assignment) -> dict[str, dict[str, list[int]]]:
    result: dict[str, dict[str, list[int]]] = {}
    for member, partitions in assignment.partitions.items():
        per_topic: dict[str, list[int]] = {}
        for tp in partitions:
            per_topic.setdefault(tp.topic, []).append(tp.partition)
        result[member] = per_topic
    return result


def _group(topics: dict[str, int], members: list[Member]) -> Group:
    return Group(tuple(Topic(name, count) for name, count in topics.items()), tuple(members))


def _kafka(topics: dict[str, int], members: list[tuple[str, tuple[str, ...], tuple]], **kw):
    """Assign with Kafka's test orders; members are (id, topics, owned as listed)."""
    group = _group(topics, [_member(m, *ts, owned=owned) for m, ts, owned in members])
    owned = {m: _owned_sequence(o) for m, _, o in members}
    plan = plan_uniform(group, _kafka_order(group, owned), **kw)
    return _by_topic(assignment_of(plan)), _by_topic(target_assignment(group))


def test_registered_as_uniform() -> None:
    assignor = get("uniform")
    assert assignor.name == "uniform" and assignor.rebalance_protocol == "cooperative"


def test_kafka_topic_ids_iterate_topic2_then_topic3_then_topic1() -> None:
    names = ["topic1", "topic2", "topic3"]
    assert hash_order(names, map(_topic_hash, names), 16) == ["topic2", "topic3", "topic1"]


# --------------------------------------------------------------------------- homogeneous


def test_kafka_homogeneous_one_member_no_topic_subscription() -> None:
    got, default = _kafka({"topic1": 3}, [("A", (), ())])
    assert got == default == {"A": {}}


def test_kafka_homogeneous_one_member_subscribed_to_nonexistent_topic_gets_nothing() -> None:
    # Java throws on a topic id it cannot describe; the coordinator never passes one, and ktk
    # ignores topics the group does not know
    got, default = _kafka({"topic1": 3}, [("A", ("topic2",), ())])
    assert got == default == {"A": {}}


def test_kafka_homogeneous_first_assignment_two_members_two_topics() -> None:
    both = ("topic1", "topic3")
    got, default = _kafka({"topic1": 3, "topic3": 2}, [("A", both, ()), ("B", both, ())])
    assert got == {"A": {"topic1": [0], "topic3": [0, 1]}, "B": {"topic1": [1, 2]}}
    # ktk's default iterates topics by name
    assert default == {"A": {"topic1": [0, 1, 2]}, "B": {"topic3": [0, 1]}}


def test_kafka_homogeneous_first_assignment_more_members_than_partitions() -> None:
    one = ("topic3",)
    got, default = _kafka({"topic3": 2}, [("A", one, ()), ("B", one, ()), ("C", one, ())])
    assert got == default == {"A": {"topic3": [0]}, "B": {"topic3": [1]}, "C": {}}


def test_kafka_homogeneous_validity_and_balance_for_large_sample_set() -> None:
    topics = {f"topic-{i}": 3 for i in range(1, 100)}
    members = [_member(f"member{i}", *topics) for i in range(1, 50)]
    assignment = UniformAssignor().assign(_group(topics, members))
    sizes = [len(tps) for tps in assignment.partitions.values()]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 297
    assert len({tp for tps in assignment.partitions.values() for tp in tps}) == 297


def test_kafka_homogeneous_reassignment_given_unbalanced_previous_assignment() -> None:
    both = ("topic1", "topic2")
    got, default = _kafka(
        {"topic1": 3, "topic2": 3},
        [
            ("A", both, (("topic1", (0, 1)), ("topic2", (0, 1)))),
            ("B", both, (("topic1", (2,)), ("topic2", (2,)))),
        ],
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 1], "topic2": [0]},
            "B": {"topic1": [2], "topic2": [1, 2]},
        }
    )


def test_kafka_homogeneous_reassignment_when_partitions_are_added() -> None:
    both = ("topic1", "topic2")
    got, default = _kafka(
        {"topic1": 6, "topic2": 5},
        [
            ("A", both, (("topic1", (0, 2)), ("topic2", (0,)))),
            ("B", both, (("topic1", (1,)), ("topic2", (1, 2)))),
        ],
    )
    assert got == {
        "A": {"topic1": [0, 2, 3], "topic2": [0, 3, 4]},
        "B": {"topic1": [1, 4, 5], "topic2": [1, 2]},
    }
    # by name, all of topic1's new partitions come first: A fills up on them
    assert default == {
        "A": {"topic1": [0, 2, 3, 4, 5], "topic2": [0]},
        "B": {"topic1": [1], "topic2": [1, 2, 3, 4]},
    }


def test_kafka_homogeneous_reassignment_when_one_member_added() -> None:
    both = ("topic1", "topic2")
    got, default = _kafka(
        {"topic1": 3, "topic2": 3},
        [
            ("A", both, (("topic1", (0, 2)), ("topic2", (0,)))),
            ("B", both, (("topic1", (1,)), ("topic2", (1, 2)))),
            ("C", both, ()),
        ],
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 2]},
            "B": {"topic1": [1], "topic2": [1]},
            "C": {"topic2": [0, 2]},
        }
    )


def test_kafka_homogeneous_reassignment_when_one_member_removed() -> None:
    both = ("topic1", "topic2")
    owned_a = (("topic1", (0,)), ("topic2", (0,)))
    owned_b = (("topic1", (1,)), ("topic2", (1,)))
    got, default = _kafka({"topic1": 3, "topic2": 3}, [("A", both, owned_a), ("B", both, owned_b)])
    assert got == {"A": {"topic1": [0], "topic2": [0, 2]}, "B": {"topic1": [1, 2], "topic2": [1]}}
    # by name, topic1's free partition comes first and goes to A
    assert default == {
        "A": {"topic1": [0, 2], "topic2": [0]},
        "B": {"topic1": [1], "topic2": [1, 2]},
    }


def test_kafka_homogeneous_reassignment_when_one_subscription_removed() -> None:
    got, default = _kafka(
        {"topic1": 2, "topic2": 2},
        [
            ("A", ("topic2",), (("topic1", (0,)), ("topic2", (0,)))),
            ("B", ("topic2",), (("topic1", (1,)), ("topic2", (1,)))),
        ],
    )
    assert got == default == {"A": {"topic2": [0]}, "B": {"topic2": [1]}}


# --------------------------------------------------------------------------- heterogeneous
# Kafka's heterogeneous tests iterate members sorted and its topic ids compare in name order:
# ktk's default order is the same, so the default answer must be Kafka's.


def test_kafka_heterogeneous_two_members_no_topic_subscription() -> None:
    got, default = _kafka({"topic1": 3}, [("A", (), ()), ("B", (), ())])
    assert got == default == {"A": {}, "B": {}}


def test_kafka_heterogeneous_two_members_subscribed_to_nonexistent_topics_get_nothing() -> None:
    got, default = _kafka({"topic1": 3}, [("A", ("topic3",), ()), ("B", ("topic2",), ())])
    assert got == default == {"A": {}, "B": {}}


def test_kafka_heterogeneous_first_assignment_two_members_two_topics() -> None:
    got, default = _kafka(
        {"topic1": 3, "topic3": 6}, [("A", ("topic1", "topic3"), ()), ("B", ("topic3",), ())]
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 1, 2], "topic3": [4]},
            "B": {"topic3": [0, 1, 2, 3, 5]},
        }
    )


def test_kafka_heterogeneous_first_assignment_more_members_than_partitions() -> None:
    got, default = _kafka(
        {"topic3": 1, "topic1": 2},
        [("A", ("topic3",), ()), ("B", ("topic3",), ()), ("C", ("topic1",), ())],
    )
    assert got == default == {"A": {"topic3": [0]}, "B": {}, "C": {"topic1": [0, 1]}}


def test_kafka_heterogeneous_reassignment_given_unbalanced_previous_assignment() -> None:
    got, default = _kafka(
        {"topic1": 6, "topic2": 4, "topic3": 4},
        [
            ("A", ("topic1",), (("topic1", (0, 1, 2)),)),
            ("B", ("topic1", "topic2"), (("topic1", (3,)), ("topic2", (0,)))),
            (
                "C",
                ("topic1", "topic2", "topic3"),
                (("topic1", (4, 5)), ("topic2", (1, 2, 3)), ("topic3", (0, 1, 2, 3))),
            ),
        ],
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 1, 2, 5]},
            "B": {"topic1": [3], "topic2": [0, 1, 2, 3]},
            "C": {"topic1": [4], "topic3": [0, 1, 2, 3]},
        }
    )


def test_kafka_heterogeneous_reassignment_when_partitions_are_added() -> None:
    every = ("topic1", "topic2", "topic3", "topic4")
    got, default = _kafka(
        {"topic1": 6, "topic2": 5, "topic3": 3, "topic4": 3},
        [
            ("A", ("topic1", "topic3"), (("topic1", (0, 1, 2, 3)), ("topic3", (0, 1)))),
            ("B", every, (("topic2", (0, 1, 2)), ("topic4", (0, 1, 2)))),
        ],
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 1, 2, 3, 4, 5], "topic3": [0, 1, 2]},
            "B": {"topic2": [0, 1, 2, 3, 4], "topic4": [0, 1, 2]},
        }
    )


def test_kafka_heterogeneous_reassignment_when_one_member_and_partitions_added() -> None:
    both = ("topic1", "topic2")
    got, default = _kafka(
        {"topic1": 6, "topic2": 7},
        [
            ("A", ("topic1",), (("topic1", (0, 2)), ("topic2", (0,)))),
            ("B", both, (("topic1", (1,)), ("topic2", (1, 2)))),
            ("C", both, ()),
        ],
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 2, 3, 4, 5]},
            "B": {"topic1": [1], "topic2": [1, 2, 6]},
            "C": {"topic2": [0, 3, 4, 5]},
        }
    )


def test_kafka_heterogeneous_reassignment_when_one_member_removed() -> None:
    got, default = _kafka(
        {"topic1": 3, "topic2": 8, "topic3": 3},
        [
            ("A", ("topic1", "topic3"), (("topic1", (0, 1, 2)), ("topic3", (0, 1)))),
            ("B", ("topic2",), (("topic2", (3, 4, 5, 6)),)),
        ],
    )
    assert (
        got
        == default
        == {
            "A": {"topic1": [0, 1, 2], "topic3": [0, 1, 2]},
            "B": {"topic2": [0, 1, 2, 3, 4, 5, 6, 7]},
        }
    )


def test_kafka_heterogeneous_reassignment_when_one_subscription_removed() -> None:
    got, default = _kafka(
        {"topic1": 3, "topic2": 5},
        [
            ("A", ("topic1",), (("topic1", (0, 2)), ("topic2", (1, 3)))),
            ("B", ("topic1", "topic2"), (("topic1", (1,)), ("topic2", (0, 2, 4)))),
        ],
    )
    assert got == default == {"A": {"topic1": [0, 1, 2]}, "B": {"topic2": [0, 1, 2, 3, 4]}}


def test_kafka_heterogeneous_topic_partitions_run_out_before_members_balance() -> None:
    # Kafka's test forces the heterogeneous builder on identical subscriptions
    every = ("topic1", "topic2", "topic3")
    owned = (("topic1", (0, 1)), ("topic2", (0, 1)), ("topic3", (0, 1)))
    got, default = _kafka(
        {"topic1": 2, "topic2": 2, "topic3": 2},
        [("A", every, owned), ("B", every, ())],
        subscription_type="heterogeneous",
    )
    assert got == {"A": {"topic2": [0], "topic3": [0, 1]}, "B": {"topic1": [0, 1], "topic2": [1]}}
    # ktk sees identical subscriptions and runs the homogeneous builder, as the coordinator does
    assert default == {
        "A": {"topic1": [0, 1], "topic2": [0]},
        "B": {"topic2": [1], "topic3": [0, 1]},
    }


def test_kafka_heterogeneous_first_assignment_with_one_member_without_subscriptions() -> None:
    got, default = _kafka({"topic1": 3}, [("A", ("topic1",), ()), ("B", (), ())])
    assert got == default == {"A": {"topic1": [0, 1, 2]}, "B": {}}


# --------------------------------------------------------------------------- behaviour


def test_uniform_homogeneous_gives_extra_partitions_to_first_members_in_order() -> None:
    both = ("a",)
    group = _group({"a": 5}, [_member("m2", *both), _member("m0", *both), _member("m1", *both)])
    assert [len(tps) for tps in UniformAssignor().assign(group).partitions.values()] == [2, 2, 1]


def test_uniform_homogeneous_revokes_owned_partitions_past_the_quota_in_owned_order() -> None:
    owned = (("a", (0, 1, 2, 3)),)
    group = _group({"a": 4}, [_member("m0", "a", owned=owned), _member("m1", "a")])
    assert _by_topic(target_assignment(group)) == {"m0": {"a": [0, 1]}, "m1": {"a": [2, 3]}}


def test_uniform_withholds_partitions_changing_hands_for_one_round() -> None:
    owned = (("a", (0, 1, 2, 3)),)
    group = _group({"a": 4}, [_member("m0", "a", owned=owned), _member("m1", "a")])
    first = UniformAssignor().assign(group)
    assert _by_topic(first) == {"m0": {"a": [0, 1]}, "m1": {}}
    assert first.withheld == (TopicPartition("a", 2), TopicPartition("a", 3))
    second = UniformAssignor().assign(
        _group({"a": 4}, [Member(m, frozenset({"a"}), first.partitions[m]) for m in ("m0", "m1")])
    )
    assert _by_topic(second) == {"m0": {"a": [0, 1]}, "m1": {"a": [2, 3]}}
    assert second.withheld == ()


def test_uniform_overlapping_claims_go_to_the_newest_generation_or_to_nobody() -> None:
    old = Member("m0", frozenset({"a"}), (TopicPartition("a", 0),), generation=1)
    new = Member("m1", frozenset({"a"}), (TopicPartition("a", 0),), generation=2)
    group = Group((Topic("a", 2),), (old, new))
    assert _by_topic(target_assignment(group)) == {"m0": {"a": [1]}, "m1": {"a": [0]}}
    tied = Group((Topic("a", 2),), (old, Member("m1", frozenset({"a"}), old.owned_partitions, 1)))
    # neither keeps partition 0: it is dealt as unowned (to m0, first in order), and withheld
    # this round since both may still be consuming it
    assert _by_topic(target_assignment(tied)) == {"m0": {"a": [0]}, "m1": {"a": [1]}}
    assert UniformAssignor().assign(tied).withheld == (TopicPartition("a", 0),)


def test_uniform_ignores_racks() -> None:
    racks = tuple(frozenset({f"r{p % 2}"}) for p in range(6))
    members = [Member(f"c{i}", frozenset({"t", "u"}), rack=f"r{i % 2}") for i in range(3)]
    plain = UniformAssignor().assign(Group((Topic("t", 6), Topic("u", 2)), tuple(members)))
    racked = UniformAssignor().assign(
        Group((Topic("t", 6, replica_racks=racks), Topic("u", 2)), tuple(members))
    )
    assert plain == racked


def test_uniform_feeding_the_answer_back_changes_nothing() -> None:
    rng = np.random.default_rng(5)
    names = [f"t{i}" for i in range(8)]
    members = [
        Member(f"c{i}", frozenset(rng.choice(names, size=4, replace=False).tolist()))
        for i in range(9)
    ]
    group = Group(tuple(Topic(n, int(rng.integers(1, 20))) for n in names), tuple(members))
    first = UniformAssignor().assign(group)
    again = Group(
        group.topics,
        tuple(Member(m.member_id, m.topics, first.partitions[m.member_id]) for m in members),
    )
    assert UniformAssignor().assign(again) == first


def test_uniform_members_differing_only_in_missing_topics_get_the_heterogeneous_builder() -> None:
    # as in the coordinator, which compares subscribed topic names
    group = _group({"a": 3}, [_member("m0", "a", "gone"), _member("m1", "a")])
    assert not plan_uniform(group).homogeneous
    assert plan_uniform(_group({"a": 3}, [_member("m0", "a"), _member("m1", "a")])).homogeneous


def test_uniform_iteration_order_must_name_every_member() -> None:
    group = _group({"a": 2}, [_member("m0", "a"), _member("m1", "a")])
    with pytest.raises(ValueError, match="every member"):
        plan_uniform(group, IterationOrder(("m0",), ("a",), ("a",)))


# --------------------------------------------------------------------------- properties


@st.composite
def groups(draw: st.DrawFn, same: bool | None = None) -> Group:
    num_topics = draw(st.integers(1, 6))
    counts = draw(st.lists(st.integers(0, 12), min_size=num_topics, max_size=num_topics))
    names = [f"t{i}" for i in range(num_topics)]
    homogeneous = draw(st.booleans()) if same is None else same
    shared = draw(st.sets(st.sampled_from(names), min_size=1))
    num_members = draw(st.integers(1, 8))
    member_topics = [
        shared if homogeneous else draw(st.sets(st.sampled_from(names))) for _ in range(num_members)
    ]
    # a previous assignment with one owner per partition (as the coordinator's always is)
    owned: list[list[TopicPartition]] = [[] for _ in range(num_members)]
    if draw(st.booleans()):
        for name, count in zip(names, counts, strict=True):
            for p in range(count + draw(st.integers(0, 1))):  # sometimes a vanished partition
                holder = draw(st.integers(-1, num_members - 1))
                if holder >= 0:
                    owned[holder].append(TopicPartition(name, p))
    members = tuple(
        Member(f"m{i}", frozenset(member_topics[i]), tuple(owned[i])) for i in range(num_members)
    )
    return Group(tuple(Topic(n, c) for n, c in zip(names, counts, strict=True)), members)


def _valid_claims(group: Group) -> dict[str, list[TopicPartition]]:
    return {
        m.member_id: [
            tp
            for tp in m.owned_partitions
            if tp.topic in m.topics and tp.partition < group.num_partitions(tp.topic)
        ]
        for m in group.members
    }


def _check_valid(group: Group, assignment: Assignment) -> None:
    owners = Counter(tp for tps in assignment.partitions.values() for tp in tps)
    assert set(owners) == set(group.subscribed_partitions())
    assert all(count == 1 for count in owners.values())
    for member in group.members:
        assert all(tp.topic in member.topics for tp in assignment.partitions[member.member_id])


@settings(max_examples=200, deadline=None)
@given(groups(same=True))
def test_uniform_homogeneous_is_valid_balanced_and_keeps_a_prefix_of_each_quota(
    group: Group,
) -> None:
    assignment = target_assignment(group)
    _check_valid(group, assignment)
    total = sum(group.num_partitions(t) for t in group.subscribed_topics())
    members = group.members
    quotas = [total // len(members) + (i < total % len(members)) for i in range(len(members))]
    if not group.subscribed_topics():
        quotas = [0] * len(members)
    claims = _valid_claims(group)
    for member, quota in zip(members, quotas, strict=True):
        got = assignment.partitions[member.member_id]
        assert len(got) == quota  # the first P % M members (by id) get the extra partition
        # sticky: keeps its first `quota` valid claims, gives up only what exceeds the quota
        assert set(claims[member.member_id][:quota]) <= set(got)


@settings(max_examples=300, deadline=None)
@given(groups(same=False))
def test_uniform_heterogeneous_is_valid_balanced_per_topic_and_keeps_claims(group: Group) -> None:
    assignment = target_assignment(group)
    _check_valid(group, assignment)
    sizes = {m: len(tps) for m, tps in assignment.partitions.items()}
    # the coordinator's balance rule: no subscriber of a topic is two or more partitions below a
    # member holding one of that topic's partitions
    for member in group.members:
        for tp in assignment.partitions[member.member_id]:
            for other in group.members:
                if tp.topic in other.topics:
                    assert sizes[member.member_id] - sizes[other.member_id] <= 1
    # sticky: a claim is given up only by a member above the emptiest subscriber of its topic
    owner = {tp: m for m, tps in assignment.partitions.items() for tp in tps}
    for member_id, valid in _valid_claims(group).items():
        for tp in valid:
            if owner[tp] != member_id:
                emptiest = min(sizes[m.member_id] for m in group.members if tp.topic in m.topics)
                assert sizes[member_id] >= emptiest


@settings(max_examples=150, deadline=None)
@given(groups())
def test_uniform_round_is_the_target_minus_the_partitions_changing_hands(group: Group) -> None:
    target, round_one = target_assignment(group), UniformAssignor().assign(group)
    holder = {tp: m.member_id for m in group.members for tp in m.owned_partitions}
    for member_id, partitions in target.partitions.items():
        given_now = set(round_one.partitions[member_id])
        assert given_now <= set(partitions)
        for tp in set(partitions) - given_now:
            assert tp in round_one.withheld and holder.get(tp, member_id) != member_id
    assert len(round_one.withheld) == sum(map(len, target.partitions.values())) - sum(
        map(len, round_one.partitions.values())
    )
    if len({m.topics for m in group.members}) == 1:
        # homogeneous: the next round hands the withheld partitions out and withholds nothing
        rejoined = Group(
            group.topics,
            tuple(Member(m, t.topics, round_one.partitions[m]) for m, t in _members(group)),
        )
        round_two = UniformAssignor().assign(rejoined)
        assert round_two.withheld == ()
        _check_valid(group, round_two)


def _members(group: Group) -> list[tuple[str, Member]]:
    return [(m.member_id, m) for m in group.members]


@settings(max_examples=100, deadline=None)
@given(groups())
def test_uniform_answer_does_not_depend_on_request_order(group: Group) -> None:
    reversed_group = Group(group.topics[::-1], group.members[::-1])
    assert UniformAssignor().assign(group) == UniformAssignor().assign(reversed_group)


# --------------------------------------------------------------------------- scale


def _random_half(topics: int, per_topic: int, members: int, seed: int) -> Group:
    rng = np.random.default_rng(seed)
    names = [f"topic-{t:04d}" for t in range(topics)]
    chosen = [np.sort(rng.permutation(topics)[: topics // 2]) for _ in range(members)]
    return Group(
        tuple(Topic(name, per_topic) for name in names),
        tuple(
            Member(f"consumer-{c:05d}", frozenset(names[t] for t in chosen[c].tolist()))
            for c in range(members)
        ),
    )


def _check_scale(group: Group, seconds: float) -> None:
    started = time.perf_counter()
    plan = plan_uniform(group)
    elapsed = time.perf_counter() - started
    owner = plan.owner
    assert (owner >= 0).all()
    sizes = np.bincount(owner, minlength=len(group.members))
    if plan.homogeneous:
        assert sizes.max() - sizes.min() <= 1
    else:
        # per topic, subscribers differ by at most one partition overall
        assert sizes.max() - sizes.min() <= 2
    assert elapsed < seconds, f"{elapsed:.2f} s"


def test_uniform_scale_100k_partitions() -> None:
    _check_scale(_random_half(100, 1_000, 500, seed=1), seconds=20)
    names = [f"topic-{t:04d}" for t in range(100)]
    everyone = tuple(Member(f"c{i:04d}", frozenset(names)) for i in range(500))
    _check_scale(Group(tuple(Topic(n, 1_000) for n in names), everyone), seconds=20)


@pytest.mark.slow
def test_uniform_scale_1m_partitions() -> None:
    _check_scale(_random_half(500, 2_000, 2_000, seed=2), seconds=120)
