"""A cooperative rebalance's follow-up round is read from the round before it, and the answer
is exactly what reading the follow-up group in full gives.

The follow-up group is the round's group with each member owning what the round handed it
(:func:`assignors.model.rejoin`); its arrays come from the round's own arrays and must equal,
field by field, what :meth:`GroupArrays.of` reads from the group. Any other group is read in
full, so an assignor that remembers a round answers every group as a fresh one does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import groups, next_round

from assignors import sticky
from assignors.arrays import GroupArrays
from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.model import (
    Assignment,
    Group,
    Member,
    OwnedPartitions,
    Topic,
    TopicPartition,
    rejoin,
)

SETTINGS = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def assert_same_arrays(made: GroupArrays, read: GroupArrays) -> None:
    assert made.space == read.space
    assert made.member_ids == read.member_ids
    assert made.subscriptions == read.subscriptions
    for name in ("topic_of", "claimant", "contested", "unsubscribed_owner", "rank"):
        mine, theirs = getattr(made, name), getattr(read, name)
        assert mine.dtype == theirs.dtype, name
        assert mine.tolist() == theirs.tolist(), name
    assert made.objects.dtype == read.objects.dtype
    assert made.objects.tolist() == read.objects.tolist()


def assert_same_answer(first, second) -> None:
    assert first.owners.tolist() == second.owners.tolist()
    assert first.withheld_indexes.tolist() == second.withheld_indexes.tolist()
    assert first.partitions == second.partitions


def remembered_round(group: Group):
    """The assignor after answering ``group``, its answer and what it remembers."""
    assignor = CooperativeStickyAssignor()
    answer = assignor.assign(group)
    last = assignor._rounds._last
    assert last is not None and last.handed is not None
    return assignor, answer, last


@SETTINGS
@given(groups(max_members=8, max_topics=5, max_partitions=12, owned=True))
def test_follow_up_arrays_are_what_reading_the_follow_up_group_gives(group):
    _, answer, last = remembered_round(group)
    follow_up = next_round(group, answer)
    made = sticky.follow_up_arrays(last.group, last.arrays, last.handed, follow_up)
    assert made is not None
    assert_same_arrays(made, GroupArrays.of(follow_up))


@SETTINGS
@given(groups(max_members=8, max_topics=5, max_partitions=12, owned=True), st.integers(1, 3))
def test_cooperative_rounds_answer_as_a_fresh_assignor_does(group, rounds):
    assignor = CooperativeStickyAssignor()
    for _ in range(rounds):
        answer = assignor.assign(group)
        assert_same_answer(answer, CooperativeStickyAssignor().assign(group))
        group = next_round(group, answer)
    assert_same_answer(assignor.assign(group), CooperativeStickyAssignor().assign(group))


def _changed(group: Group, data: st.DataObject) -> Group:
    """``group`` with one thing a plan reads changed: a member's owned partitions, topics, rack
    or static id, or a topic's size."""
    members = list(group.members)
    position = data.draw(st.integers(0, len(members) - 1))
    member = members[position]
    change = data.draw(st.sampled_from(("owned", "topics", "rack", "instance", "topic size")))
    if change == "owned":
        space = group.partition_space()
        owned = member.owned_partitions
        indexes = owned.indexes_in(space) if isinstance(owned, OwnedPartitions) else None
        present = set() if indexes is None else set(indexes.tolist())
        choices = sorted(set(range(space.size)) ^ present)
        if not choices:
            return group
        flipped = data.draw(st.sampled_from(choices))
        kept = np.asarray(sorted(present ^ {flipped}), dtype=np.int64)
        members[position] = replace(member, owned_partitions=OwnedPartitions(space, kept))
    elif change == "topics":
        names = sorted({topic.name for topic in group.topics} | {"elsewhere"})
        topics = frozenset(data.draw(st.sets(st.sampled_from(names), min_size=1)))
        members[position] = replace(member, topics=topics)
    elif change == "rack":
        members[position] = replace(member, rack=data.draw(st.sampled_from((None, "r0", "r9"))))
    elif change == "instance":
        members[position] = replace(member, instance_id=data.draw(st.sampled_from((None, "z"))))
    else:
        first = group.topics[0]
        grown = replace(first, num_partitions=first.num_partitions + 1, replica_racks=None)
        return Group((grown, *group.topics[1:]), tuple(members))
    return Group(group.topics, tuple(members))


@SETTINGS
@given(groups(max_members=6, max_topics=4, max_partitions=10, owned=True), st.data())
def test_a_group_that_is_not_the_follow_up_is_read_in_full(group, data):
    assignor, answer, last = remembered_round(group)
    other = _changed(next_round(group, answer), data)
    made = sticky.follow_up_arrays(last.group, last.arrays, last.handed, other)
    if made is not None:  # only when the change left the group as the follow-up reads
        assert_same_arrays(made, GroupArrays.of(other))
    assert_same_answer(assignor.assign(other), CooperativeStickyAssignor().assign(other))


def test_follow_up_is_read_from_the_round_before():
    topics = (Topic("a", 4),)
    joined = Group(
        topics,
        (
            Member("c0", frozenset({"a"}), (TopicPartition("a", 0), TopicPartition("a", 1)), 3),
            Member("c1", frozenset({"a"}), (TopicPartition("a", 2), TopicPartition("a", 3)), 3),
            Member("c2", frozenset({"a"})),
        ),
    )
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(joined)
    assert first.num_withheld == 1
    follow_up = next_round(joined, first)
    last = assignor._rounds._last
    assert sticky.follow_up_arrays(last.group, last.arrays, last.handed, follow_up) is not None
    second = assignor.assign(follow_up)
    assert {m: [tp.partition for tp in tps] for m, tps in second.partitions.items()} == {
        "c0": [0, 1],
        "c1": [2],
        "c2": [3],
    }


@SETTINGS
@given(
    groups(
        max_members=8,
        max_topics=5,
        max_partitions=12,
        owned=True,
        subscription="heterogeneous",
        racks=True,
    ),
    st.integers(1, 3),
)
def test_follow_ups_reuse_the_shape_of_a_heterogeneous_rack_aware_group(group, rounds):
    """The follow-up reuses the round's subscribers, edges, load window, rack map and
    replicas per rack: each round's answer is a fresh assignor's."""
    assignor = CooperativeStickyAssignor()
    for _ in range(rounds):
        answer = assignor.assign(group)
        assert_same_answer(answer, CooperativeStickyAssignor().assign(group))
        group = next_round(group, answer)
    last = assignor._rounds._last
    assert_same_answer(assignor.assign(group), CooperativeStickyAssignor().assign(group))
    # the last group was the follow-up of the round before: its shape was reused
    assert assignor._rounds._last.shape is last.shape


@SETTINGS
@given(
    groups(max_members=8, max_topics=5, max_partitions=12, owned=True, racks=True),
    st.data(),
)
def test_a_group_with_the_same_topics_subscriptions_and_racks_reuses_the_shape(group, data):
    """A first round whose members subscribe and sit as the last round's did, whatever they
    own, reuses that round's shape (subscribers, edges, load window, rack map) and answers as a
    fresh assignor does."""
    assignor, _, last = remembered_round(group)
    space = group.partition_space()
    members = []
    for member in group.members:
        indexes = st.integers(0, max(space.size - 1, 0))
        owned = data.draw(st.lists(indexes, unique=True, max_size=8 if space.size else 0))
        objects = space.objects()
        members.append(
            replace(
                member,
                owned_partitions=tuple(objects[index] for index in sorted(owned)),
                generation=data.draw(st.integers(-1, 5)),
            )
        )
    other = Group(group.topics, tuple(members))
    assert sticky.same_shape(last.group, last.arrays, other, GroupArrays.of(other))
    assert_same_answer(assignor.assign(other), CooperativeStickyAssignor().assign(other))
    if sticky.follow_up_arrays(last.group, last.arrays, last.handed, other) is None:
        assert assignor._rounds._last.shape is last.shape


@SETTINGS
@given(groups(max_members=6, max_topics=4, max_partitions=10, owned=True), st.data())
def test_a_changed_subscription_rack_or_topic_gives_a_new_shape(group, data):
    _, answer, last = remembered_round(group)
    follow_up = next_round(group, answer)
    other = _changed(follow_up, data)
    same = sticky.same_shape(last.group, last.arrays, other, GroupArrays.of(other))
    read = GroupArrays.of(other)
    unchanged = (
        other.topics == group.topics
        and read.space == last.arrays.space
        and read.subscriptions == last.arrays.subscriptions
        and [m.rack for m in other.members] == [m.rack for m in group.members]
    )
    assert same == unchanged


@SETTINGS
@given(
    groups(max_members=6, max_topics=4, max_partitions=10, owned=True, racks=True),
    groups(max_members=6, max_topics=4, max_partitions=10, owned=True, racks=True),
)
def test_a_shape_seen_rounds_ago_is_reused_and_answers_as_a_fresh_assignor(group, other):
    """A group that comes back after other groups (a member that left and rejoined) reuses
    the shape of its earlier round, kept among the last ``REMEMBERED_SHAPES``."""
    assignor, _, last = remembered_round(group)
    assert_same_answer(assignor.assign(other), CooperativeStickyAssignor().assign(other))
    back = Group(group.topics, tuple(replace(m, owned_partitions=()) for m in group.members))
    assert_same_answer(assignor.assign(back), CooperativeStickyAssignor().assign(back))
    assert assignor._rounds._last.shape is last.shape or not sticky.same_shape(
        group, last.arrays, back, GroupArrays.of(back)
    )


@SETTINGS
@given(groups(max_members=6, max_topics=4, max_partitions=10, owned=True), st.data())
def test_a_group_rejoined_with_other_owners_is_not_the_follow_up(group, data):
    """A group rejoined from an owner array is the follow-up only when that array hands out
    what the round handed; any other array leaves it to be read in full."""
    assignor, _, last = remembered_round(group)
    owners = last.handed.copy()
    for position in data.draw(st.lists(st.integers(0, max(owners.size - 1, 0)), max_size=3)):
        if owners.size:
            owners[position] = data.draw(st.integers(-1, len(group.members) - 1))
    space, member_ids = group.partition_space(), tuple(m.member_id for m in group.members)
    other = next_round(group, Assignment.from_owners(space, member_ids, owners))
    made = sticky.follow_up_arrays(last.group, last.arrays, last.handed, other)
    assert (made is not None) == np.array_equal(owners, last.handed)
    if made is not None:
        assert_same_arrays(made, GroupArrays.of(other))
    assert_same_answer(assignor.assign(other), CooperativeStickyAssignor().assign(other))


def _engine_answer(group: Group) -> np.ndarray:
    """The engine's owners for ``group`` read in full, no round remembered."""
    return sticky._plan(group, GroupArrays.of(group), None)[0].owner


@SETTINGS
@given(
    groups(max_members=8, max_topics=4, max_partitions=12, owned=True, subscription="uniform"),
    st.integers(1, 3),
)
def test_a_uniform_follow_up_that_kept_only_claims_is_answered_by_the_rounds_owners(group, rounds):
    """A uniform round that handed out only kept claims (all it dealt was withheld) is
    followed by the same owners, without running the engine again; every other follow-up is
    planned in full. Either way the answer is the engine's on the follow-up read in full."""
    assignor = CooperativeStickyAssignor()
    for _ in range(rounds):
        answer = assignor.assign(group)
        last = assignor._rounds._last
        follow_up = next_round(group, answer)
        follow_answer = assignor.assign(follow_up)
        assert follow_answer.owners.tolist() == _engine_answer(follow_up).tolist()
        if last.kept_only():
            assert follow_answer.owners.tolist() == last.uniform_owner.tolist()
            assert follow_answer.num_withheld == 0
        assert_same_answer(follow_answer, CooperativeStickyAssignor().assign(follow_up))
        group = follow_up


def test_a_uniform_round_that_dealt_an_unclaimed_partition_is_followed_by_other_owners():
    """``x`` and ``y`` own nothing, ``z`` six of eight partitions: ``z`` and ``x`` (first by
    rank) get a ceil quota of three. ``x`` is dealt ``z``'s ``a3``, ``a5``, ``a7`` (withheld)
    and ``y`` the unclaimed ``a4`` and ``a6`` (handed out at once), so in the follow-up ``y``
    claims more than ``x`` and the ceil quota is ``y``'s: the round's owners are not the
    answer, the engine runs again."""
    objects = [TopicPartition("a", p) for p in range(8)]
    group = Group(
        (Topic("a", 8),),
        (
            Member("x", frozenset({"a"}), generation=1),
            Member("y", frozenset({"a"}), generation=1),
            Member("z", frozenset({"a"}), tuple(objects[p] for p in (0, 1, 2, 3, 5, 7)), 1),
        ),
    )
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(group)
    assert first.owners.tolist() == [2, 2, 2, -1, 1, -1, 1, -1]
    last = assignor._rounds._last
    assert not last.kept_only()
    follow_up = next_round(group, first)
    second = assignor.assign(follow_up)
    assert second.owners.tolist() == _engine_answer(follow_up).tolist()
    assert second.owners.tolist() != last.uniform_owner.tolist()
    assert {m: [tp.partition for tp in tps] for m, tps in second.partitions.items()} == {
        "x": [3, 7],
        "y": [4, 5, 6],
        "z": [0, 1, 2],
    }


@SETTINGS
@given(groups(max_members=6, max_topics=4, max_partitions=10, owned=True), st.booleans(), st.data())
def test_a_group_rejoined_with_a_changed_member_is_not_the_follow_up(group, columns, data):
    """A group cut from the very owner array the round handed out, but whose members are not
    the round's (a member's topics, rack or static id changed), is read in full, whether the
    round's group keeps its member columns (made by rejoin) or not."""
    if columns:
        group = next_round(group, CooperativeStickyAssignor().assign(group))
        assert group.member_columns() is not None
    assignor, answer, last = remembered_round(group)
    changed = _changed(group, data)
    # the same topics and subscribed partitions: the answer's owner array is cut as it is
    assume(changed.topics == group.topics)
    assume(changed.partition_space() == group.partition_space())
    other = next_round(changed, answer)
    assert other.owned_claim_arrays() is not None
    made = sticky.follow_up_arrays(last.group, last.arrays, last.handed, other)
    same_members = [(m.member_id, m.topics, m.rack, m.instance_id) for m in changed.members] == [
        (m.member_id, m.topics, m.rack, m.instance_id) for m in group.members
    ]
    assert (made is not None) == same_members
    if made is not None:
        assert_same_arrays(made, GroupArrays.of(other))
    assert_same_answer(assignor.assign(other), CooperativeStickyAssignor().assign(other))


@SETTINGS
@given(groups(max_members=8, max_topics=4, max_partitions=12, owned=True), st.integers(1, 3))
def test_a_follow_up_answered_without_its_group_is_the_answer_to_the_rejoined_group(group, rounds):
    """``follow_up`` answers each follow-up round, asked with the first round's group (as a
    replay asks it), as an assignor reading the rejoined group does; a uniform round that
    handed out only kept claims is followed by its own owners. The rounds after answer as a
    fresh assignor does."""
    assignor = CooperativeStickyAssignor()
    answer = assignor.assign(group)
    answered = group  # the group the last answer is for
    for _ in range(rounds):
        last = assignor._rounds._last
        follow_up = next_round(answered, answer)
        generation = follow_up.members[0].generation
        known = assignor.follow_up(group, answer, generation)
        assert known is not None
        assert_same_answer(known, CooperativeStickyAssignor().assign(follow_up))
        if last.uniform_owner is not None and last.kept_only():
            assert known.owners.tolist() == last.uniform_owner.tolist()
        answered, answer = follow_up, known
    again = next_round(answered, answer)
    assert_same_answer(assignor.assign(again), CooperativeStickyAssignor().assign(again))


def test_a_follow_up_is_answered_only_for_the_round_just_planned_and_what_it_handed():
    topics = (Topic("a", 4),)
    owned = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2))
    group = Group(
        topics,
        (
            Member("c0", frozenset({"a"}), owned, 3),
            Member("c1", frozenset({"a"}), (TopicPartition("a", 3),), 3),
            Member("c2", frozenset({"a"})),
        ),
    )
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(group)
    assert first.owners.tolist() == [0, 0, -1, 1]
    alike = Group(topics, group.members)  # equal, but not the group the round planned
    other_owners = first.owners.copy()
    other_owners[[0, 3]] = other_owners[[3, 0]]
    swapped = Assignment.from_owners(first.space, first.member_ids, other_owners)
    renamed = Assignment.from_owners(first.space, ("c0", "c1", "c9"), first.owners)
    assert assignor.follow_up(alike, first, 4) is None
    assert assignor.follow_up(group, swapped, 4) is None
    assert assignor.follow_up(group, renamed, 4) is None
    assert assignor.follow_up(group, first, -2) is None
    assert assignor.follow_up(group, first, True) is None
    known = assignor.follow_up(group, first, 4)
    assert known is not None
    follow_up = rejoin(group, first, 4)
    assert_same_answer(known, CooperativeStickyAssignor().assign(follow_up))
    # the round just planned is the follow-up, which handed out what ``known`` hands out
    assert assignor.follow_up(group, first, 4) is None
    third = assignor.follow_up(group, known, 5)
    assert third is not None
    assert_same_answer(third, CooperativeStickyAssignor().assign(rejoin(follow_up, known, 5)))


def _generated_traces():
    from collections import defaultdict

    from assignors.traces.format import build_trace, parse_generation
    from assignors.traces.generate import generate_rows

    by_trace = defaultdict(list)
    rows = generate_rows("mixed", 16, seed=11, members=(2, 12), partitions=(4, 80))
    for line, row in enumerate(rows, 1):
        by_trace[row["trace_id"]].append(parse_generation(row, "generated", line))
    return [build_trace(trace_id, rows) for trace_id, rows in by_trace.items()]


class _WithoutFollowUp:
    """cooperative-sticky without ``follow_up``: a replay makes every follow-up group."""

    name, rebalance_protocol = "cooperative-sticky", "cooperative"

    def __init__(self) -> None:
        self._assignor = CooperativeStickyAssignor()

    def assign(self, group: Group) -> Assignment:
        return self._assignor.assign(group)


@pytest.mark.parametrize("refused", [0, 2, 3])
def test_a_replay_asking_follow_ups_first_scores_as_one_making_every_follow_up_group(refused):
    """Every follow-up answered without its group, or every ``refused``-th one left to the
    group the replay makes: the same rows as making every follow-up group."""
    from assignors.traces.replay import replay_with

    asked = []
    assignor = CooperativeStickyAssignor()
    follow_up = assignor.follow_up

    def refusing(group, assignment, generation):
        asked.append(group)
        if refused and len(asked) % refused == 0:
            return None
        known = follow_up(group, assignment, generation)
        assert known is not None
        return known

    assignor.follow_up = refusing
    for trace in _generated_traces():
        rows = replay_with(trace, assignor, timings=False)
        assert rows == replay_with(trace, _WithoutFollowUp(), timings=False)
    assert len(asked) > 10


@SETTINGS
@given(groups(max_members=6, max_topics=4, max_partitions=10, owned=True), st.integers(1, 2))
def test_a_rejoined_group_keeps_its_members_columns(group, rounds):
    """rejoin's group keeps the columns it made its members from: each member's id, topics,
    rack and static id, in member order (made again from the first group's members, then
    passed on)."""
    for _ in range(rounds):
        group = next_round(group, CooperativeStickyAssignor().assign(group))
        members = group.members
        assert group.member_columns() == (
            tuple(m.member_id for m in members),
            tuple(m.topics for m in members),
            tuple(m.rack for m in members),
            tuple(m.instance_id for m in members),
        )
