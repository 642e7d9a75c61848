"""Owned partitions kept as integer arrays (``OwnedPartitions``) from the request reader on: the
object view they stand for, the answers they give (the same as object members give, for every
built-in assignor), the claim rule uniform and the array assignors share, and the object view
left unmade on the assignors' path."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from random import Random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import groups

from assignors import registry
from assignors.arrays import GroupArrays, claims_subscribed, owned_claims, resolve_claims
from assignors.errors import InputError
from assignors.model import Group, Member, OwnedPartitions, PartitionSpace, Topic, TopicPartition
from assignors.protocol.request import group_to_request, parse_request, read_requests, run_text
from assignors.uniform import current_holders

TP = TopicPartition
BUILTINS = registry.builtin_names()
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
REQUEST = {
    "assignor": "uniform",
    "topics": [
        {"name": "b", "partitions": 3},
        {"name": "a", "partitions": 4},
        {"name": "z", "partitions": 2},
    ],
    "members": [
        {
            "id": "c0",
            "topics": ["a", "b"],
            "owned": [["a", 1], ["a", 0], ["b", 2], ["z", 1], ["gone", 0], ["a", 9], ["a", 1]],
            "generation": 2,
        },
        {"id": "c1", "topics": ["a"], "owned": [["b", 0], ["a", 3]], "generation": 2},
        {"id": "c2", "topics": ["a", "b"]},
    ],
}


def _read(request: dict[str, object]) -> Group:
    [entry] = read_requests(json.dumps(request), source="r.jsonl")
    assert entry.request is not None, entry.error
    return entry.request.group


def _with_objects(group: Group) -> Group:
    """The same group with every member's owned partitions given as TopicPartition objects."""
    return Group(
        group.topics,
        tuple(replace(m, owned_partitions=tuple(m.owned_partitions)) for m in group.members),
    )


def test_owned_partitions_equal_the_object_view_they_stand_for():
    space = PartitionSpace(("a", "b"), (2, 3))
    owned = OwnedPartitions(space, np.array([1, 2, 4]))
    view = (TP("a", 1), TP("b", 0), TP("b", 2))
    assert owned == view and view == owned and hash(owned) == hash(view)
    assert repr(owned) == repr(view) and tuple(owned) == view and list(owned[1:]) == [*view[1:]]
    assert len(owned) == 3 and bool(OwnedPartitions(space, [])) is False
    as_arrays = Member("c0", frozenset({"a"}), owned, 4)
    as_objects = Member("c0", frozenset({"a"}), view[::-1] + view[:1], 4)  # unsorted, repeated
    assert as_arrays == as_objects and hash(as_arrays) == hash(as_objects)
    assert repr(as_arrays) == repr(as_objects)
    assert pickle.loads(pickle.dumps(as_arrays)) == as_objects


def test_owned_partitions_refuse_indexes_out_of_order_repeated_or_outside_the_space():
    space = PartitionSpace(("a", "b"), (2, 3))
    for bad in ([2, 1], [1, 1], [-1], [5], [[0, 1]], [0.5]):
        with pytest.raises(InputError, match="owned_partitions"):
            OwnedPartitions(space, np.array(bad))
    with pytest.raises(InputError, match="by name"):
        OwnedPartitions(PartitionSpace(("b", "a"), (1, 1)), [0])


def test_request_reader_gives_owned_partitions_as_sorted_distinct_indexes():
    group = _read(REQUEST)
    c0, c1, c2 = group.members
    assert isinstance(c0.owned_partitions, OwnedPartitions)
    assert c0.owned_partitions.space.topic_names == ("a", "b", "z")  # every topic of the request
    assert c0.owned_partitions.indexes.tolist() == [0, 1, 6, 8]
    # unknown topics and partitions past a topic's end are dropped, repeats kept once
    assert c0.owned_partitions == (TP("a", 0), TP("a", 1), TP("b", 2), TP("z", 1))
    assert c1.owned_partitions == (TP("a", 3), TP("b", 0)) and c2.owned_partitions == ()
    assert group == _with_objects(group)


def test_owned_partition_indexes_are_read_only_and_leave_the_callers_array_alone():
    given = np.array([0, 2])
    owned = OwnedPartitions(PartitionSpace(("a",), (3,)), given)
    with pytest.raises(ValueError, match="read-only"):
        owned.indexes[0] = 1
    given[0] = 1  # the caller's array is still its own, and a change to it changes nothing
    assert owned.indexes.tolist() == [0, 2]
    with pytest.raises(ValueError, match="read-only"):
        _read(REQUEST).members[0].owned_partitions.indexes[0] = 5  # type: ignore[union-attr]


@given(st.lists(st.integers(0, 5), max_size=6), st.randoms(use_true_random=False))
@settings(max_examples=80, deadline=None, database=None)
def test_owned_partitions_cut_from_one_array_equal_each_run_checked_alone(
    sizes: list[int], random: Random
) -> None:
    space = PartitionSpace(("a", "b"), (4, 3))
    runs_list = [sorted(random.sample(range(space.size), size)) for size in sizes]
    runs = np.asarray([index for run in runs_list for index in run], dtype=np.int64)
    runs.flags.writeable = False
    ends = np.cumsum(sizes).tolist() if sizes else []
    starts = [end - size for end, size in zip(ends, sizes, strict=True)]
    made = OwnedPartitions.all_checked(space, runs, starts, ends)
    assert [owned.space for owned in made] == [space] * len(sizes)
    assert [owned.indexes.tolist() for owned in made] == runs_list
    assert made == [OwnedPartitions(space, run) for run in runs_list]
    assert not any(owned.is_made for owned in made)


def test_request_reader_refuses_a_bad_owned_pair_naming_it():
    for pair, shown in ((["a", True], "['a', True]"), (["a"], "['a']"), (7, "7")):
        request = json.loads(json.dumps(REQUEST))
        request["members"][2]["owned"] = [["a", 0], pair]
        [entry] = read_requests(json.dumps(request), source="r.jsonl")
        assert str(entry.error) == (
            "r.jsonl:1: members[2].owned[1]: an owned partition is a [topic, partition] pair "
            f"(got {shown})"
        )


def test_request_reader_drops_owned_partition_numbers_beyond_64_bits():
    request = json.loads(json.dumps(REQUEST))
    request["members"][2]["owned"] = [["a", 2**64], ["a", -(2**63) - 1], ["a", 2]]
    assert _read(request).members[2].owned_partitions == (TP("a", 2),)


def test_owned_arrays_of_another_space_are_read_by_topic_name():
    # the reader numbers every topic; the group's space holds the subscribed ones only
    group = _read(REQUEST)
    space = group.partition_space()
    assert space.topic_names == ("a", "b")
    claims = owned_claims(group, space)
    assert claims.member.tolist() == [0, 0, 0, 1, 1]
    assert [space.partition(i) for i in claims.index.tolist()] == [
        TP("a", 0), TP("a", 1), TP("b", 2), TP("a", 3), TP("b", 0)
    ]  # fmt: skip


def test_owned_claims_read_arrays_and_objects_alike_in_any_member_order():
    group = _read(REQUEST)
    mixed = Group(
        group.topics,
        (group.members[0], replace(group.members[1], owned_partitions=(TP("a", 3), TP("b", 0)))),
    )
    for members in ([0, 1], [1, 0]):
        arrays = owned_claims(group, group.partition_space(), members)
        objects = owned_claims(_with_objects(group), group.partition_space(), members)
        half = owned_claims(mixed, group.partition_space(), members)
        for other in (objects, half):
            assert np.array_equal(arrays.member, other.member)
            assert np.array_equal(arrays.index, other.index)


def test_owned_claims_translate_each_foreign_space_by_topic_name():
    topics = (Topic("a", 2), Topic("b", 3))
    wide = PartitionSpace(("a", "b", "c"), (2, 3, 1))  # a topic the group lacks
    shrunk = PartitionSpace(("b",), (5,))  # a topic that had more partitions
    group = Group(
        topics,
        (
            Member("c0", frozenset("ab"), OwnedPartitions(wide, [1, 4, 5])),
            Member("c1", frozenset("ab"), (TP("b", 0),)),
            Member("c2", frozenset("ab"), OwnedPartitions(shrunk, [1, 3])),
            Member("c3", frozenset("ab"), OwnedPartitions(wide, [0])),
        ),
    )
    claims = owned_claims(group, group.partition_space())
    assert claims.member.tolist() == [0, 0, 1, 2, 3]
    assert claims.index.tolist() == [1, 4, 2, 3, 0]  # a-1, b-2, b-0, b-1, a-0
    assert np.array_equal(
        claims.index, owned_claims(_with_objects(group), group.partition_space()).index
    )


def test_claim_rule_highest_generation_wins_and_a_tie_voids_the_partition():
    keep, void = resolve_claims(
        np.array([0, 1, 2, 0, 2]), np.array([3, 3, 4, 4, 9]), np.array([5, 5, 4])
    )
    # partition 3: members 0 and 1 both in generation 5, nobody keeps it; partition 4: member
    # 0 (generation 5) beats member 2 (4); partition 9 has one claim
    assert keep.tolist() == [False, False, False, True, True] and void.tolist() == [3]


@SETTINGS
@given(group=groups(owned=True))
def test_uniform_and_group_arrays_read_the_same_valid_claims(group: Group):
    arrays = GroupArrays.of(group)
    holders = current_holders(group)
    expected = np.where(arrays.contested, -2, arrays.claimant)
    assert np.array_equal(holders, expected)


@pytest.mark.parametrize("name", BUILTINS)
@SETTINGS
@given(group=groups(owned=True))
def test_every_assignor_answers_the_same_for_owned_arrays_and_objects(name: str, group: Group):
    request = group_to_request(group, name)
    from_reader = parse_request(request).group
    assert any(isinstance(m.owned_partitions, OwnedPartitions) for m in from_reader.members) or (
        not any(m.owned_partitions for m in from_reader.members)
    )
    assignor = registry.get(name)
    expected = assignor.assign(_with_objects(from_reader))
    assert assignor.assign(from_reader) == expected
    assert assignor.assign(group) == expected
    [entry] = read_requests(json.dumps(request))
    [objects_entry] = read_requests(json.dumps(request))
    assert objects_entry.request is not None
    objects_entry = replace(
        objects_entry,
        request=objects_entry.request._replace(group=_with_objects(objects_entry.request.group)),
    )
    assert run_text(entry) == run_text(objects_entry)


@pytest.mark.parametrize("name", BUILTINS)
def test_assignors_leave_the_object_view_of_owned_arrays_unmade(name: str):
    group = _read(REQUEST)
    registry.get(name).assign(group)
    owned = [m.owned_partitions for m in group.members if m.owned_partitions]
    assert owned and not any(isinstance(o, OwnedPartitions) and o.is_made for o in owned)


def test_members_with_equal_subscriptions_share_one_frozenset():
    members = tuple(Member(f"c{i}", frozenset(["a", "b"])) for i in range(3))
    assert len({id(m.topics) for m in members}) == 3
    group = Group((Topic("a", 1), Topic("b", 1)), (*members, Member("d", frozenset(["a"]))))
    assert len({id(m.topics) for m in group.members}) == 2
    assert group.members[0].topics == frozenset({"a", "b"})


def test_claims_subscribed_ignores_empty_topics_when_everyone_covers_the_rest() -> None:
    """Every claim counts as subscribed when each subscription names every topic that has
    partitions (an empty topic missing from one changes nothing); one topic missing from one
    subscription makes that member's claims on it unsubscribed."""
    space = PartitionSpace(("a", "b", "z"), (2, 2, 0))
    claims = owned_claims(
        Group(
            (Topic("a", 2), Topic("b", 2), Topic("z", 0)),
            (
                Member("c0", frozenset("abz"), (TP("a", 0), TP("b", 1))),
                Member("c1", frozenset("ab"), (TP("b", 0), TP("a", 1))),
            ),
        ),
        space,
    )
    everyone = (0, 1, 2)
    assert claims_subscribed(claims, space, [everyone, (0, 1)]).tolist() == [True] * 4
    subscribed = claims_subscribed(claims, space, [everyone, (0,)])
    pairs = zip(claims.member.tolist(), claims.index.tolist(), strict=True)
    by_claim = dict(zip(pairs, subscribed.tolist(), strict=True))
    assert by_claim == {(0, 0): True, (0, 3): True, (1, 2): False, (1, 1): True}
