"""The layout :class:`~assignors.arrays.GroupArrays` takes from a group's topics and members
(their ids, subscriptions, instance ids), kept in the group's derived store and shared by the
groups of one generation: worked out once, never used for a group it does not describe."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import groups

from assignors import arrays
from assignors.arrays import GroupArrays, owned_claims
from assignors.model import (
    Assignment,
    Group,
    Member,
    OwnedPartitions,
    PartitionSpace,
    Topic,
    TopicPartition,
    rejoin,
)

TP = TopicPartition
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
FIELDS = (
    "member_ids",
    "subscriptions",
    "topic_of",
    "claimant",
    "contested",
    "unsubscribed_owner",
    "objects",
    "rank",
)


def _same(made: GroupArrays, fresh: GroupArrays) -> None:
    assert made.space == fresh.space
    for name in FIELDS:
        left, right = getattr(made, name), getattr(fresh, name)
        if isinstance(left, np.ndarray):
            assert left.dtype == right.dtype and left.tolist() == right.tolist(), name
        else:
            assert left == right, name


def _without_store(group: Group) -> Group:
    return Group(group.topics, group.members)


def _group(members: tuple[Member, ...]) -> Group:
    return Group((Topic("a", 3), Topic("b", 2)), members)


def test_group_arrays_layout_is_made_once_for_the_groups_sharing_a_store() -> None:
    first = _group(
        (Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a"}), instance_id="i1"))
    )
    # the same members owning something else in another generation, sharing the store
    owning = tuple(
        Member(m.member_id, m.topics, owned, 3, m.rack, m.instance_id)
        for m, owned in zip(first.members, ((TP("b", 1),), (TP("a", 0), TP("a", 2))), strict=True)
    )
    second = Group.checked(
        first.topics, owning, {t.name: t for t in first.topics}, None, first.derived()
    )
    GroupArrays.of(first)
    layout = first.derived()[arrays._LAYOUT]
    made = GroupArrays.of(second)
    assert second.derived()[arrays._LAYOUT] is layout
    _same(made, GroupArrays.of(_without_store(second)))
    assert made.claimant.tolist() == [1, -1, 1, -1, 0]


def test_share_layout_leaves_the_layout_the_groups_sharing_the_store_read() -> None:
    first = _group((Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a"}))))
    arrays.share_layout(first)
    layout = first.derived()[arrays._LAYOUT]
    owning = tuple(
        Member(m.member_id, m.topics, (TP("a", 1),), 2, m.rack, m.instance_id)
        for m in first.members
    )
    second = Group.checked(
        first.topics, owning, {t.name: t for t in first.topics}, None, first.derived()
    )
    made = GroupArrays.of(second)
    assert second.derived()[arrays._LAYOUT] is layout
    _same(made, GroupArrays.of(_without_store(second)))


def test_group_arrays_layout_that_does_not_describe_the_group_is_made_again() -> None:
    first = _group((Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a"}))))
    GroupArrays.of(first)
    # members renamed, resubscribed or made static: the store's layout is not theirs
    for members in (
        (Member("c0", frozenset({"a", "b"})), Member("c2", frozenset({"a"}))),
        (Member("c0", frozenset({"a"})), Member("c1", frozenset({"a"}))),
        (Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a"}), instance_id="i")),
        (Member("c0", frozenset({"a", "b"})),),
    ):
        wrong = Group.checked(
            first.topics, members, {t.name: t for t in first.topics}, None, first.derived()
        )
        _same(GroupArrays.of(wrong), GroupArrays.of(_without_store(wrong)))
    # other topics: a different partition space
    grown = (Topic("a", 4), Topic("b", 2))
    wrong = Group.checked(grown, first.members, {t.name: t for t in grown}, None, first.derived())
    _same(GroupArrays.of(wrong), GroupArrays.of(_without_store(wrong)))


def test_rejoin_shares_the_group_arrays_layout_with_the_next_round() -> None:
    group = _group((Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a", "b"}))))
    GroupArrays.of(group)
    # an array answer, as the array assignors give: c0 gets a-0 and b-1, c1 gets a-2
    given_out = Assignment.from_owners(
        group.partition_space(), ("c0", "c1"), np.array([0, -1, 1, -1, 0])
    )
    next_round = rejoin(group, given_out, 4)
    assert next_round.derived() is group.derived()
    made = GroupArrays.of(next_round)
    assert next_round.derived()[arrays._LAYOUT] is group.derived()[arrays._LAYOUT]
    _same(made, GroupArrays.of(_without_store(next_round)))


@SETTINGS
@given(groups(), groups())
def test_group_arrays_with_a_shared_store_match_a_fresh_group(first: Group, second: Group) -> None:
    # any group handed any other group's store (a mistake) still gets its own arrays
    GroupArrays.of(first)
    shared = Group.checked(
        second.topics,
        second.members,
        {t.name: t for t in second.topics},
        None,
        first.derived(),
    )
    _same(GroupArrays.of(shared), GroupArrays.of(_without_store(second)))
    # and the layout made for it serves it again
    _same(GroupArrays.of(shared), GroupArrays.of(_without_store(second)))


@SETTINGS
@given(groups())
def test_owned_claims_of_members_all_owning_arrays_of_one_space_match_their_objects(
    group: Group,
) -> None:
    space = group.partition_space()
    as_arrays = Group(
        group.topics,
        tuple(
            Member(
                m.member_id,
                m.topics,
                OwnedPartitions(
                    space,
                    np.asarray(
                        sorted(space.index(tp) for tp in m.owned_partitions if _in(space, tp)),
                        dtype=np.int64,
                    ),
                ),
                m.generation,
                m.rack,
                m.instance_id,
            )
            for m in group.members
        ),
    )
    backwards = list(range(len(group.members)))[::-1]
    for members in (None, backwards):
        from_arrays = owned_claims(as_arrays, space, members)
        from_objects = owned_claims(group, space, members)
        assert from_arrays.member.tolist() == from_objects.member.tolist()
        assert from_arrays.index.tolist() == from_objects.index.tolist()


def _in(space: PartitionSpace, tp: TopicPartition) -> bool:
    counts = dict(zip(space.topic_names, space.partition_counts, strict=True))
    return 0 <= tp.partition < counts.get(tp.topic, 0)


def _claim_rule_reference(group: Group) -> tuple[list[int], list[bool], list[bool]]:
    """(claimant, contested, unsubscribed_owner) by the claim rule on every claim, with the
    members' generations read whether or not a partition is claimed twice."""
    space = group.partition_space()
    claims = owned_claims(group, space)
    layout = arrays._Layout.of(group)
    subscribed = arrays.claims_subscribed(claims, space, layout.subscriptions)
    claimant = np.full(space.size, arrays.NOBODY, dtype=np.int64)
    contested = np.zeros(space.size, dtype=bool)
    unsubscribed_owner = np.zeros(space.size, dtype=bool)
    unsubscribed_owner[claims.index[~subscribed]] = True
    claims = claims.subset(subscribed)
    keep, tied = arrays.resolve_claims(
        claims.member, claims.index, arrays.member_generations(group)
    )
    claimant[claims.index[keep]] = claims.member[keep]
    contested[tied] = True
    return claimant.tolist(), contested.tolist(), unsubscribed_owner.tolist()


@SETTINGS
@given(groups(owned=True))
def test_group_arrays_claims_equal_the_claim_rule_read_on_every_claim(
    group: Group,
) -> None:
    made = GroupArrays.of(group)
    assert (
        made.claimant.tolist(),
        made.contested.tolist(),
        made.unsubscribed_owner.tolist(),
    ) == _claim_rule_reference(group)


def test_group_arrays_claims_of_one_partition_claimed_twice_follow_the_generations() -> None:
    members = (
        Member("c0", frozenset("ab"), (TP("a", 0), TP("b", 1)), generation=3),
        Member("c1", frozenset("ab"), (TP("a", 0), TP("a", 2)), generation=5),
        Member("c2", frozenset("a"), (TP("a", 2), TP("b", 0)), generation=5),
    )
    group = _group(members)
    made = GroupArrays.of(group)
    # a-0: c1's newer claim wins; a-2: two claims of generation 5 void it; b-0: c2 does not
    # subscribe to b; b-1: c0 alone
    assert made.claimant.tolist() == [1, -1, -1, -1, 0]
    assert made.contested.tolist() == [False, False, True, False, False]
    assert made.unsubscribed_owner.tolist() == [False, False, False, True, False]
    assert (
        made.claimant.tolist(),
        made.contested.tolist(),
        made.unsubscribed_owner.tolist(),
    ) == _claim_rule_reference(group)


def _columns_of(members: tuple[Member, ...]) -> tuple[tuple[object, ...], ...]:
    return tuple(
        tuple(getattr(member, name) for member in members)
        for name in ("member_id", "topics", "rack", "instance_id")
    )


def _from_columns(group: Group, store: Group) -> Group:
    """``group``'s members made again from their columns, the group carrying those columns
    and sharing ``store``'s derived store."""
    columns = _columns_of(group.members)
    members = Member.all_checked(
        columns[0],  # type: ignore[arg-type]
        columns[1],  # type: ignore[arg-type]
        tuple(member.owned_partitions for member in group.members),
        tuple(member.generation for member in group.members),
        columns[2],  # type: ignore[arg-type]
        columns[3],  # type: ignore[arg-type]
    )
    return Group.checked(
        group.topics,
        members,
        {t.name: t for t in group.topics},
        None,
        store.derived(),
        None,
        columns,  # type: ignore[arg-type]
    )


@SETTINGS
@given(groups(), groups())
def test_layout_check_of_a_group_made_from_member_columns_equals_the_member_by_member_one(
    first: Group, second: Group
) -> None:
    for store in (first, second):
        layout = arrays._Layout.of(store)
        made = _from_columns(second, store)
        assert made.member_columns() is not None
        member_by_member = Group.checked(
            made.topics, made.members, {t.name: t for t in made.topics}
        )
        assert member_by_member.member_columns() is None
        assert layout.describes(made) == layout.describes(member_by_member)
        _same(GroupArrays.of(made), GroupArrays.of(_without_store(second)))


def test_layout_check_of_member_columns_tells_ids_subscriptions_and_instance_ids_apart() -> None:
    first = _group((Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a"}))))
    layout = arrays._Layout.of(first)
    assert layout.describes(_from_columns(first, first))
    for members in (
        (Member("c0", frozenset({"a", "b"})), Member("c2", frozenset({"a"}))),
        (Member("c0", frozenset({"a"})), Member("c1", frozenset({"a"}))),
        # the same topics subscribed (the same space), by other members
        (Member("c0", frozenset({"a"})), Member("c1", frozenset({"a", "b"}))),
        (Member("c0", frozenset({"a", "b"})), Member("c1", frozenset({"a"}), instance_id="i")),
        (Member("c0", frozenset({"a", "b"})),),
    ):
        assert not layout.describes(_from_columns(_group(members), first))
    # a rack plays no part in the layout
    racked = (Member("c0", frozenset({"a", "b"}), rack="r"), Member("c1", frozenset({"a"})))
    assert layout.describes(_from_columns(_group(racked), first))


@st.composite
def _claims_on_a_space(
    draw: st.DrawFn,
) -> tuple[PartitionSpace, list[tuple[int, ...]], arrays.Claims]:
    """A space whose topics may have no partitions, members' subscriptions (topic positions)
    and claims of those members on its partitions."""
    counts = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
    space = PartitionSpace(tuple(f"t{position}" for position in range(len(counts))), tuple(counts))
    positions = range(len(counts))
    subscriptions = draw(
        st.lists(
            st.lists(st.sampled_from(positions), unique=True).map(lambda p: tuple(sorted(p))),
            min_size=1,
            max_size=4,
        )
    )
    pairs = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(subscriptions) - 1), st.integers(0, max(space.size - 1, 0))
            ),
            max_size=12 if space.size else 0,
        )
    )
    claims = arrays.Claims(
        np.asarray([member for member, _ in pairs], dtype=np.int64),
        np.asarray([index for _, index in pairs], dtype=np.int64),
    )
    return space, subscriptions, claims


@SETTINGS
@given(_claims_on_a_space(), st.booleans())
def test_claims_subscribed_read_by_each_partitions_topic_equals_the_offset_search(
    drawn: tuple[PartitionSpace, list[tuple[int, ...]], arrays.Claims], table: bool
) -> None:
    space, subscriptions, claims = drawn
    original = arrays._SUBSCRIPTION_TABLE_CELLS
    if not table:
        arrays._SUBSCRIPTION_TABLE_CELLS = 0  # the pair search, as for groups too big for a table
    try:
        check = arrays._SubscriptionCheck.of(space, subscriptions)
    finally:
        arrays._SUBSCRIPTION_TABLE_CELLS = original
    counts = np.asarray(space.partition_counts, dtype=np.int64)
    topic_of = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    assert (
        check.of_claims(claims, space, topic_of).tolist() == check.of_claims(claims, space).tolist()
    )
