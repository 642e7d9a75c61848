"""Scale targets of the sticky family: 2,000 consumers x 100,000 partitions (uniform
subscriptions, 100 topics of 1,000) assigned in under 10 s, and rebalanced in under 10 s after
every tenth consumer left. The time is ``assign`` alone (the group is built beforehand)."""

from __future__ import annotations

import time

import pytest

from assignors.model import Assignment, Group, Member, Topic
from assignors.registry import get

CONSUMERS = 2_000
TOPICS = 100
PARTITIONS_PER_TOPIC = 1_000
TARGET_SECONDS = 10.0

pytestmark = pytest.mark.slow


def _topics() -> tuple[Topic, ...]:
    return tuple(Topic(f"topic-{i:03d}", PARTITIONS_PER_TOPIC) for i in range(TOPICS))


def _timed_assign(name: str, group: Group) -> tuple[float, Assignment]:
    assignor = get(name)
    started = time.perf_counter()
    assignment = assignor.assign(group)
    return time.perf_counter() - started, assignment


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_two_thousand_consumers_by_100k_partitions_within_target(name):
    topics = _topics()
    subscription = frozenset(topic.name for topic in topics)
    member_ids = [f"consumer-{i:05d}" for i in range(CONSUMERS)]
    initial_group = Group(topics, tuple(Member(m, subscription) for m in member_ids))

    initial_seconds, initial = _timed_assign(name, initial_group)
    counts = {len(tps) for tps in initial.partitions.values()}
    assert counts == {50}
    assert initial_seconds < TARGET_SECONDS, f"initial assignment took {initial_seconds:.2f} s"

    stayers = [m for position, m in enumerate(member_ids) if position % 10 != 0]
    rebalance_group = Group(
        topics, tuple(Member(m, subscription, initial.partitions[m], generation=1) for m in stayers)
    )
    rebalance_seconds, rebalanced = _timed_assign(name, rebalance_group)
    assert rebalance_seconds < TARGET_SECONDS, f"rebalance took {rebalance_seconds:.2f} s"
    assert rebalanced.withheld == ()
    total = TOPICS * PARTITIONS_PER_TOPIC
    assert sum(len(tps) for tps in rebalanced.partitions.values()) == total
    assert {len(tps) for tps in rebalanced.partitions.values()} == {55, 56}
    for member_id in stayers:
        assert set(initial.partitions[member_id]) <= set(rebalanced.partitions[member_id])
