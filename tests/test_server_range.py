"""server-range: the KIP-848 coordinator's RangeAssignor.

The ``test_kafka_*`` tests are the coordinator's own unit tests (RangeAssignorTest at apache/kafka
1eb7644349cb07139d6a3c1ad1986979647cac99) with the assignments they expect; then properties on
random groups (valid, per-topic balance, co-partitioning, racks and owned partitions ignored).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.model import Assignment, Group, Member, Topic, TopicPartition
from assignors.registry import get
from assignors.server_range import ServerRangeAssignor, plan_server_range
from assignors.uniform import assignment_of

ALL = ("topic1", "topic2", "topic3")


def _assign(topics: dict[str, int], members: list[Member]) -> dict[str, dict[str, list[int]]]:
    group = Group(tuple(Topic(name, count) for name, count in topics.items()), tuple(members))
    return _by_topic(assignment_of(plan_server_range(group)))


def _by_topic(assignment: Assignment) -> dict[str, dict[str, list[int]]]:
    result: dict[str, dict[str, list[int]]] = {}
    for member, partitions in assignment.partitions.items():
        per_topic: dict[str, list[int]] = {}
        for tp in partitions:
            per_topic.setdefault(tp.topic, []).append(tp.partition)
        result[member] = per_topic
    return result


def _member(member_id: str, *topics: str, owned=(), instance_id=None) -> Member:
    return Member(
        member_id,
        frozenset(topics),
        tuple(TopicPartition(t, p) for t, ps in dict(owned).items() for p in ps),
        instance_id=instance_id,
    )


def test_registered_as_server_range() -> None:
    assignor = get("server-range")
    assert assignor.name == "server-range" and assignor.rebalance_protocol == "cooperative"


def test_kafka_one_member_no_topic() -> None:
    assert _assign({"topic1": 3}, [_member("A")]) == {"A": {}}


def test_kafka_one_member_subscribed_to_non_existent_topic_gets_nothing() -> None:
    # the coordinator never hands the assignor an unknown topic id; ktk ignores unknown topics
    assert _assign({"topic1": 3}, [_member("A", "topic2")]) == {"A": {}}


def test_kafka_first_assignment_two_members_two_topics_same_subscriptions() -> None:
    got = _assign(
        {"topic1": 3, "topic3": 2},
        [_member("A", "topic1", "topic3"), _member("B", "topic1", "topic3")],
    )
    assert got == {
        "A": {"topic1": [0, 1], "topic3": [0]},
        "B": {"topic1": [2], "topic3": [1]},
    }


def test_kafka_first_assignment_three_members_three_topics_different_subscriptions() -> None:
    got = _assign(
        {"topic1": 3, "topic2": 3, "topic3": 2},
        [
            _member("A", "topic1", "topic2"),
            _member("B", "topic3"),
            _member("C", "topic2", "topic3"),
        ],
    )
    assert got == {
        "A": {"topic1": [0, 1, 2], "topic2": [0, 1]},
        "B": {"topic3": [0]},
        "C": {"topic2": [2], "topic3": [1]},
    }


def test_kafka_first_assignment_num_members_greater_than_num_partitions() -> None:
    both = ("topic1", "topic3")
    got = _assign(
        {"topic1": 3, "topic3": 2}, [_member("A", *both), _member("B", *both), _member("C", *both)]
    )
    assert got == {
        "A": {"topic1": [0], "topic3": [0]},
        "B": {"topic1": [1], "topic3": [1]},
        "C": {"topic1": [2]},
    }


def test_kafka_static_membership_keeps_ranges_under_a_new_member_id() -> None:
    first = _assign(
        {"topic1": 3},
        [
            _member("A", "topic1", instance_id="instanceA"),
            _member("B", "topic1", instance_id="instanceB"),
        ],
    )
    second = _assign(
        {"topic1": 3},
        [
            _member("memberA1", "topic1", instance_id="instanceA"),
            _member("B", "topic1", instance_id="instanceB"),
        ],
    )
    assert first["A"] == second["memberA1"] and first["B"] == second["B"]


def test_kafka_mixed_static_membership_puts_static_members_first() -> None:
    def members(a_id: str) -> list[Member]:
        return [
            _member(a_id, "topic1", instance_id="instanceA"),
            _member("C", "topic1", instance_id="instanceC"),
            _member("B", "topic1"),
        ]

    first, second = (
        _assign({"topic1": 5}, members("A")),
        _assign({"topic1": 5}, members("memberA1")),
    )
    assert first["A"] == second["memberA1"] and first["B"] == second["B"]
    assert first["C"] == second["C"]
    assert first == {"A": {"topic1": [0, 1]}, "B": {"topic1": [4]}, "C": {"topic1": [2, 3]}}


def test_kafka_reassignment_num_members_greater_than_num_partitions_when_one_member_added() -> None:
    both = ("topic1", "topic2")
    got = _assign(
        {"topic1": 2, "topic2": 2},
        [
            _member("A", *both, owned={"topic1": [0], "topic2": [0]}),
            _member("B", *both, owned={"topic1": [1], "topic2": [1]}),
            _member("C", *both),
        ],
    )
    assert got == {
        "A": {"topic1": [0], "topic2": [0]},
        "B": {"topic1": [1], "topic2": [1]},
        "C": {},
    }


def test_kafka_reassignment_when_one_partition_added_for_two_members_two_topics() -> None:
    both = ("topic1", "topic2")
    got = _assign(
        {"topic1": 4, "topic2": 4},
        [
            _member("A", *both, owned={"topic1": [0, 1], "topic2": [0, 1]}),
            _member("B", *both, owned={"topic1": [2], "topic2": [2]}),
        ],
    )
    assert got == {
        "A": {"topic1": [0, 1], "topic2": [0, 1]},
        "B": {"topic1": [2, 3], "topic2": [2, 3]},
    }


def test_kafka_reassignment_when_one_member_added_after_initial_assignment() -> None:
    both = ("topic1", "topic2")
    got = _assign(
        {"topic1": 3, "topic2": 3},
        [
            _member("A", *both, owned={"topic1": [0, 1], "topic2": [0, 1]}),
            _member("B", *both, owned={"topic1": [2], "topic2": [2]}),
            _member("C", *both),
        ],
    )
    assert got == {
        "A": {"topic1": [0], "topic2": [0]},
        "B": {"topic1": [1], "topic2": [1]},
        "C": {"topic1": [2], "topic2": [2]},
    }


def test_kafka_reassignment_when_one_member_and_one_partition_added() -> None:
    both = ("topic1", "topic2")
    got = _assign(
        {"topic1": 4, "topic2": 3},
        [
            _member("A", *both, owned={"topic1": [0, 1], "topic2": [0, 1]}),
            _member("B", *both, owned={"topic1": [2], "topic2": [2]}),
            _member("C", "topic1"),
        ],
    )
    assert got == {
        "A": {"topic1": [0, 1], "topic2": [0, 1]},
        "B": {"topic1": [2], "topic2": [2]},
        "C": {"topic1": [3]},
    }


def test_kafka_reassignment_when_one_member_removed() -> None:
    got = _assign(
        {"topic1": 3, "topic2": 3},
        [_member("B", "topic1", "topic2", owned={"topic1": [2], "topic2": [2]})],
    )
    assert got == {"B": {"topic1": [0, 1, 2], "topic2": [0, 1, 2]}}


def test_kafka_reassignment_when_multiple_subscriptions_removed() -> None:
    got = _assign(
        {"topic1": 3, "topic2": 3, "topic3": 2},
        [
            _member("A", "topic1", owned={"topic1": [0, 1, 2], "topic2": [0]}),
            _member("B", *ALL, owned={"topic2": [1]}),
            _member("C", "topic2", owned={"topic2": [2], "topic3": [0, 1]}),
        ],
    )
    assert got == {
        "A": {"topic1": [0, 1]},
        "B": {"topic1": [2], "topic2": [0, 1], "topic3": [0, 1]},
        "C": {"topic2": [2]},
    }


def test_server_range_orders_member_ids_as_java_strings() -> None:
    # U+FFFF sorts after U+1F600 in Python but before it in Java (UTF-16 code units)
    got = _assign({"t": 2}, [_member("\uffff", "t"), _member("\U0001f600", "t")])
    assert got == {"\U0001f600": {"t": [0]}, "\uffff": {"t": [1]}}


def test_server_range_ignores_racks() -> None:
    racks = tuple(frozenset({"r0"}) if p % 2 else frozenset({"r1"}) for p in range(4))
    members = (Member("c0", frozenset({"t"}), rack="r0"), Member("c1", frozenset({"t"}), rack="r1"))
    plain = ServerRangeAssignor().assign(Group((Topic("t", 4),), members))
    racked = ServerRangeAssignor().assign(Group((Topic("t", 4, replica_racks=racks),), members))
    assert plain == racked
    assert [tp.partition for tp in racked.partitions["c0"]] == [0, 1]


# --------------------------------------------------------------------------- properties


@st.composite
def groups(draw: st.DrawFn) -> Group:
    num_topics = draw(st.integers(1, 5))
    counts = draw(st.lists(st.integers(0, 9), min_size=num_topics, max_size=num_topics))
    names = [f"t{i}" for i in range(num_topics)]
    same = draw(st.booleans())
    shared = draw(st.sets(st.sampled_from(names), min_size=1))
    members = []
    for i in range(draw(st.integers(1, 7))):
        topics = shared if same else draw(st.sets(st.sampled_from(names)))
        instance = draw(st.one_of(st.none(), st.just(f"i{i}")))
        owned = draw(st.lists(st.tuples(st.sampled_from(names), st.integers(0, 9)), max_size=4))
        members.append(Member(f"m{i}", frozenset(topics), tuple(owned), instance_id=instance))
    return Group(tuple(Topic(n, c) for n, c in zip(names, counts, strict=True)), tuple(members))


@settings(max_examples=150, deadline=None)
@given(groups())
def test_server_range_is_valid_and_balanced_per_topic(group: Group) -> None:
    assignment = assignment_of(plan_server_range(group))
    owners = Counter(tp for tps in assignment.partitions.values() for tp in tps)
    assert set(owners) == set(group.subscribed_partitions())
    assert all(count == 1 for count in owners.values())
    for member_id, partitions in assignment.partitions.items():
        member = next(m for m in group.members if m.member_id == member_id)
        assert all(tp.topic in member.topics for tp in partitions)
    for topic in group.subscribed_topics():
        per_member = [
            sum(tp.topic == topic for tp in assignment.partitions[m.member_id])
            for m in group.members
            if topic in m.topics
        ]
        assert max(per_member) - min(per_member) <= 1


@settings(max_examples=150, deadline=None)
@given(groups())
def test_server_range_co_partitions_topics_with_same_count_and_subscribers(group: Group) -> None:
    assignment = assignment_of(plan_server_range(group))
    owner = {tp: m for m, tps in assignment.partitions.items() for tp in tps}
    topics = group.subscribed_topics()
    for first in topics:
        for second in topics:
            same_subscribers = all(
                (first in m.topics) == (second in m.topics) for m in group.members
            )
            if same_subscribers and group.num_partitions(first) == group.num_partitions(second):
                for p in range(group.num_partitions(first)):
                    assert owner[TopicPartition(first, p)] == owner[TopicPartition(second, p)]


@settings(max_examples=100, deadline=None)
@given(groups())
def test_server_range_target_ignores_owned_partitions_and_withholds_moves(group: Group) -> None:
    fresh = Group(
        group.topics,
        tuple(Member(m.member_id, m.topics, instance_id=m.instance_id) for m in group.members),
    )
    target = assignment_of(plan_server_range(group))
    assert target == ServerRangeAssignor().assign(fresh)
    round_one = ServerRangeAssignor().assign(group)
    given_now = {tp for tps in round_one.partitions.values() for tp in tps}
    targeted = {tp for tps in target.partitions.values() for tp in tps}
    assert given_now | set(round_one.withheld) == targeted
    assert not given_now & set(round_one.withheld)
