"""Properties of sticky and cooperative-sticky on random groups (hypothesis): valid, balanced by
Kafka's rule, sticky, idempotent, order-independent, and as few moves as brute force finds."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sticky_checks import (
    balance_problems,
    eligible,
    moved,
    over_share_ok,
    valid_claims,
    validity_problems,
)
from strategies import groups, next_round

from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.model import Group, Member, Topic, TopicPartition
from assignors.sticky import StickyAssignor
from assignors.traces.scoring import optimal_spread

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(groups())
def test_sticky_is_valid_and_balanced_for_any_group(group):
    partitions = StickyAssignor().assign(group).partitions
    assert validity_problems(group, partitions) == []
    assert balance_problems(group, partitions) == []


@PROPERTY_SETTINGS
@given(groups(subscription="uniform"))
def test_uniform_claims_move_only_away_from_members_over_their_share(group):
    partitions = StickyAssignor().assign(group).partitions
    assert over_share_ok(group, partitions) == []


@PROPERTY_SETTINGS
@given(groups())
def test_feeding_the_answer_back_moves_nothing_racks_included(group):
    first = StickyAssignor().assign(group)
    again = StickyAssignor().assign(next_round(group, first))
    assert again.partitions == first.partitions


@PROPERTY_SETTINGS
@given(groups(), st.randoms(use_true_random=False))
def test_answer_does_not_depend_on_request_order(group, shuffler):
    members, topics = list(group.members), list(group.topics)
    shuffler.shuffle(members)
    shuffler.shuffle(topics)
    shuffled = Group(tuple(topics), tuple(members))
    assert StickyAssignor().assign(shuffled) == StickyAssignor().assign(group)


def _balanced_assignments(group: Group):
    """Every valid assignment of a tiny group that satisfies Kafka's balance rule and has the
    smallest count spread any valid assignment has."""
    allowed = eligible(group)
    partitions = group.subscribed_partitions()
    choices = [
        [m.member_id for m in group.members if tp in allowed[m.member_id]] for tp in partitions
    ]
    for owners in itertools.product(*choices):
        result: dict[str, list[TopicPartition]] = {m.member_id: [] for m in group.members}
        for tp, owner in zip(partitions, owners, strict=True):
            result[owner].append(tp)
        if not balance_problems(group, result) and _spread(group, result) == optimal_spread(group):
            yield result


@settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(groups(max_members=3, max_topics=2, max_partitions=3, subscription="uniform", owned=True))
def test_uniform_moves_are_the_fewest_any_balanced_assignment_needs(group):
    partitions = StickyAssignor().assign(group).partitions
    fewest = min(len(moved(group, candidate)) for candidate in _balanced_assignments(group))
    assert len(moved(group, partitions)) == fewest


@settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    groups(max_members=4, max_topics=3, max_partitions=2, subscription="heterogeneous", owned=True)
)
def test_heterogeneous_moves_are_the_fewest_on_tiny_groups(group):
    partitions = StickyAssignor().assign(group).partitions
    fewest = min(len(moved(group, candidate)) for candidate in _balanced_assignments(group))
    assert len(moved(group, partitions)) == fewest


def _spread(group: Group, partitions) -> int:  # type: ignore[no-untyped-def]
    """Max - min partition count over the members subscribed to some existing partition."""
    loads = [
        len(partitions[m.member_id])
        for m in group.members
        if any(group.num_partitions(topic) > 0 for topic in m.topics)
    ]
    return max(loads) - min(loads) if loads else 0


@PROPERTY_SETTINGS
@given(groups(racks=True))
def test_sticky_reaches_the_smallest_spread_any_assignment_has(group):
    partitions = StickyAssignor().assign(group).partitions
    assert _spread(group, partitions) == optimal_spread(group)


@PROPERTY_SETTINGS
@given(groups(max_members=12, max_topics=6, max_partitions=12, subscription="heterogeneous"))
def test_cooperative_settles_on_the_smallest_spread_any_assignment_has(group):
    _, final_group, final = _cooperative_rounds(group)
    assert _spread(final_group, final.partitions) == optimal_spread(final_group)


def _cooperative_rounds(group: Group, limit: int = 5):
    """Run cooperative-sticky until nothing is withheld; returns (rounds, final group, last)."""
    current = group
    for round_number in range(1, limit + 1):
        assignment = CooperativeStickyAssignor().assign(current)
        if not assignment.withheld:
            return round_number, current, assignment
        current = next_round(current, assignment)
    raise AssertionError(f"still withholding after {limit} rounds")


@PROPERTY_SETTINGS
@given(groups())
def test_cooperative_never_hands_a_partition_someone_else_still_owns(group):
    assignment = CooperativeStickyAssignor().assign(group)
    assert validity_problems(group, assignment.partitions, assignment.withheld) == []
    # the Java leader's validateCooperativeAssignment: nothing one member gains may be something
    # another member owned and loses, whatever its generation or subscription
    owned = {member.member_id: set(member.owned_partitions) for member in group.members}
    given = {member_id: set(tps) for member_id, tps in assignment.partitions.items()}
    added = set().union(*(given[m] - owned[m] for m in given))
    revoked = set().union(*(owned[m] - given[m] for m in given))
    assert added & revoked == set()
    claims = valid_claims(group)
    for member_id, tps in assignment.partitions.items():
        for tp in tps:
            if tp in claims:
                assert claims[tp] == member_id


@PROPERTY_SETTINGS
@given(groups())
def test_cooperative_withholds_exactly_what_sticky_moves(group):
    eager = StickyAssignor().assign(group).partitions
    cooperative = CooperativeStickyAssignor().assign(group)
    assert moved(group, cooperative.partitions) == moved(group, eager)
    for member_id, tps in cooperative.partitions.items():
        assert set(tps) <= set(eager[member_id])


@PROPERTY_SETTINGS
@given(groups(subscription="uniform"))
def test_cooperative_uniform_converges_in_two_rounds(group):
    rounds, final_group, final = _cooperative_rounds(group)
    assert rounds <= 2
    assert validity_problems(final_group, final.partitions) == []
    assert balance_problems(final_group, final.partitions) == []


@PROPERTY_SETTINGS
@given(groups(subscription="heterogeneous"))
def test_cooperative_heterogeneous_converges_balanced(group):
    _, final_group, final = _cooperative_rounds(group)
    assert validity_problems(final_group, final.partitions) == []
    assert balance_problems(final_group, final.partitions) == []


def test_brute_force_finds_the_kip54_example_balanced():
    topics = (Topic("t0", 1), Topic("t1", 1))
    group = Group(topics, (Member("a", frozenset({"t0"})), Member("b", frozenset({"t0", "t1"}))))
    assert len(list(_balanced_assignments(group))) == 1
