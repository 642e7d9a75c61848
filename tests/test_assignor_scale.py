"""The sticky family at the scale of its targets: 2,000 consumers x 100,000 partitions (uniform
subscriptions, 100 topics of 1,000), assigned, then rebalanced after every tenth consumer left.
These tests check the answers at that size; the time targets (each round under 10 s) are
checked by ``python benchmarks/bench_assignors.py --check``, where a loaded machine cannot make
a correct assignor fail a unit test."""

from __future__ import annotations

import pytest

from assignors.model import Group, Member, Topic
from assignors.registry import get

CONSUMERS = 2_000
TOPICS = 100
PARTITIONS_PER_TOPIC = 1_000

pytestmark = pytest.mark.slow


def _topics() -> tuple[Topic, ...]:
    return tuple(Topic(f"topic-{i:03d}", PARTITIONS_PER_TOPIC) for i in range(TOPICS))


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_two_thousand_consumers_by_100k_partitions_balance_and_keep_their_partitions(name):
    topics = _topics()
    subscription = frozenset(topic.name for topic in topics)
    member_ids = [f"consumer-{i:05d}" for i in range(CONSUMERS)]
    initial_group = Group(topics, tuple(Member(m, subscription) for m in member_ids))

    initial = get(name).assign(initial_group)
    counts = {len(tps) for tps in initial.partitions.values()}
    assert counts == {50}

    stayers = [m for position, m in enumerate(member_ids) if position % 10 != 0]
    rebalance_group = Group(
        topics, tuple(Member(m, subscription, initial.partitions[m], generation=1) for m in stayers)
    )
    rebalanced = get(name).assign(rebalance_group)
    assert rebalanced.withheld == ()
    total = TOPICS * PARTITIONS_PER_TOPIC
    assert sum(len(tps) for tps in rebalanced.partitions.values()) == total
    assert {len(tps) for tps in rebalanced.partitions.values()} == {55, 56}
    for member_id in stayers:
        assert set(initial.partitions[member_id]) <= set(rebalanced.partitions[member_id])
