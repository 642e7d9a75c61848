"""Per-topic spread (scoring's ``topic_spread``) and count balance of the four classic assignors
over random groups with racks, each as docs/assignors.md ("What balance ktk guarantees") states
it: racks that favour no partition over another change nothing, so each topic is spread over
its subscribers exactly as without racks; range and roundrobin spread every topic within one
partition whatever the racks; with identical subscriptions roundrobin's counts differ by at most
one and range's by at most one per topic. (The sticky family's smallest spread is checked in
test_sticky_properties.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import RACKS, groups

from assignors.model import Group
from assignors.registry import get
from assignors.traces.scoring import score_generation

CLASSIC = ("range", "roundrobin", "sticky", "cooperative-sticky")
SETTINGS = settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def _topic_spread(group: Group, assignor_name: str) -> int:
    assignment = get(assignor_name).assign(group)
    return score_generation(
        group, assignment.partitions, trace_id="t", assignor=assignor_name, generation=1
    ).topic_spread


def _without_racks(group: Group) -> Group:
    return Group(
        tuple(replace(topic, replica_racks=None) for topic in group.topics),
        tuple(replace(member, rack=None) for member in group.members),
    )


@st.composite
def equally_close_racks(draw: st.DrawFn) -> Group:
    """A random group with member racks where every member finds all of its partitions equally
    close: either every partition has a replica on every rack, or none on any member's rack."""
    group = draw(groups(racks=True))
    everywhere = draw(st.booleans())
    topics = []
    for topic in group.topics:
        if everywhere:
            racks = tuple(frozenset(RACKS) for _ in range(topic.num_partitions))
        elif draw(st.booleans()):
            racks = tuple(frozenset({"far"}) for _ in range(topic.num_partitions))
        else:
            racks = None
        topics.append(replace(topic, replica_racks=racks))
    members = tuple(replace(member, rack=draw(st.sampled_from(RACKS))) for member in group.members)
    return Group(tuple(topics), members)


@pytest.mark.parametrize("assignor_name", CLASSIC)
@SETTINGS
@given(group=equally_close_racks())
def test_racks_that_favour_no_partition_change_nothing(assignor_name, group):
    with_racks = get(assignor_name).assign(group)
    assert with_racks == get(assignor_name).assign(_without_racks(group))
    assert _topic_spread(group, assignor_name) == _topic_spread(
        _without_racks(group), assignor_name
    )


@pytest.mark.parametrize("assignor_name", ["sticky", "cooperative-sticky"])
@SETTINGS
@given(group=equally_close_racks())
def test_sticky_first_assignment_spreads_each_topic_within_one_when_racks_favour_none(
    assignor_name, group
):
    everything = frozenset(topic.name for topic in group.topics)
    fresh = Group(
        group.topics,
        tuple(
            replace(m, topics=everything, owned_partitions=(), generation=-1) for m in group.members
        ),
    )
    assert _topic_spread(fresh, assignor_name) <= 1


@pytest.mark.parametrize("assignor_name", ["range", "roundrobin"])
@SETTINGS
@given(group=groups(racks=True))
def test_range_and_roundrobin_spread_every_topic_within_one_racks_or_not(assignor_name, group):
    assert _topic_spread(group, assignor_name) <= 1


def _count_spread(group: Group, assignor_name: str) -> int:
    assignment = get(assignor_name).assign(group)
    return score_generation(
        group, assignment.partitions, trace_id="t", assignor=assignor_name, generation=1
    ).spread


@SETTINGS
@given(group=groups(racks=True, subscription="uniform"))
def test_roundrobin_with_identical_subscriptions_is_fully_balanced_racks_or_not(group):
    assert _count_spread(group, "roundrobin") <= 1


@SETTINGS
@given(group=groups(racks=True, subscription="uniform"))
def test_range_with_identical_subscriptions_is_off_by_at_most_one_per_topic(group):
    topics_with_partitions = sum(1 for topic in group.topics if topic.num_partitions)
    assert _count_spread(group, "range") <= topics_with_partitions
