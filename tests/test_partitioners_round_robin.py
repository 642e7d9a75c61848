"""Round robin in the Java client: the KAFKA-9965 double call and its fix, and pre-2.4."""

from __future__ import annotations

import random
from collections import Counter

from partitioners.base import TopicMetadata
from partitioners.producer import ProducerConfig, Records, simulate
from partitioners.registry import create
from partitioners.round_robin import LegacyRoundRobin


def _spread(name: str, num_partitions: int, linger_ms: int) -> Counter:
    records = Records.unkeyed(
        count=600, num_partitions=num_partitions, value_bytes=200, interval_ms=1
    )
    run = simulate(records, create(name, seed=1), ProducerConfig(linger_ms=linger_ms))
    return Counter(run.partitions.tolist())


def test_kafka_9965_linger_0_on_6_partitions_reaches_only_3_partitions():
    assert sorted(_spread("java-roundrobin", 6, linger_ms=0)) == [1, 3, 5]


def test_kafka_17632_fix_reaches_all_6_partitions_evenly():
    spread = _spread("java-roundrobin-fixed", 6, linger_ms=0)
    assert sorted(spread) == [0, 1, 2, 3, 4, 5]
    assert set(spread.values()) == {100}


def test_double_call_on_an_odd_partition_count_still_reaches_every_partition():
    assert sorted(_spread("java-roundrobin", 5, linger_ms=0)) == [0, 1, 2, 3, 4]


def test_one_producer_thread_never_recovers_the_skipped_half_whatever_the_linger():
    # the first call always lands on a partition without a batch (none was ever opened
    # there), so the counter parity never flips; only concurrent senders could flip it
    for linger_ms in (5, 50):
        records = Records.unkeyed(count=600, num_partitions=6, value_bytes=200, interval_ms=0.1)
        run = simulate(
            records, create("java-roundrobin", seed=1), ProducerConfig(linger_ms=linger_ms)
        )
        assert sorted(set(run.partitions.tolist())) == [1, 3, 5]


def test_legacy_round_robin_cycles_over_available_partitions_from_a_random_start():
    strategy = LegacyRoundRobin(random.Random(3))
    metadata = TopicMetadata(6, available_partitions=(0, 2, 4))
    chosen = [strategy.choose("t", None, metadata, 0) for _ in range(6)]
    assert sorted(chosen[:3]) == [0, 2, 4]
    assert chosen[:3] == chosen[3:]


def test_legacy_round_robin_falls_back_to_all_partitions_when_none_is_available():
    strategy = LegacyRoundRobin(random.Random(3))
    metadata = TopicMetadata(4, available_partitions=())
    assert sorted(strategy.choose("t", None, metadata, 0) for _ in range(4)) == [0, 1, 2, 3]
