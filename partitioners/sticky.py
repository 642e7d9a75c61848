"""Sticky partitioning of unkeyed records in the Java client.

``Kip480Sticky`` (2.4-3.2 ``DefaultPartitioner`` / ``UniformStickyPartitioner``): one sticky
partition per topic, changed only when the producer reports a new batch for it
(``onNewBatch``); the next one is random among available partitions, never the old one when
there are at least two.

``BuiltInSticky`` (KIP-794, 3.3+ default): switch once ``batch.size`` bytes were produced to
the sticky partition and its last batch is full, or unconditionally at 2 x ``batch.size``.
The next partition is uniform among available ones, or, with adaptive partitioning and queue
statistics for every partition, weighted by ``(max queue + 1) - queue``; a draw ``r`` in
``[0, total)`` picks the first index whose running sum exceeds ``r``:

>>> load_weights([0, 3, 1]), cumulative_frequency_table([0, 3, 1])
([4, 1, 3], [4, 5, 8])
>>> [pick_weighted([4, 5, 8], draw) for draw in range(8)]
[0, 0, 0, 0, 1, 2, 2, 2]

Balance of bytes comes before batch size: the built-in switches after a fixed byte budget, so a
slow broker, whose batches fill while they wait, no longer attracts more data (KAFKA-10888).

>>> import random
>>> from partitioners.base import LoadStats, TopicMetadata
>>> builtin = BuiltInSticky(random.Random(1), batch_size=100)
>>> metadata = TopicMetadata.all_available(3)
>>> first = builtin.choose("t", None, metadata, 0)
>>> builtin.on_append("t", first, 100, last_batch_full=False, metadata=metadata)
>>> builtin.produced_bytes("t")  # batch.size reached but the batch is not full: stay
100
>>> builtin.on_append("t", first, 100, last_batch_full=False, metadata=metadata)
>>> builtin.produced_bytes("t")  # 2 x batch.size: a new sticky partition was drawn
0
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

from partitioners.base import LoadStats, TopicMetadata, UnkeyedStrategy, java_random_int
from partitioners.limits import MAX_INT32, check_int


def load_weights(queue_sizes: Sequence[int]) -> list[int]:
    """KIP-794 weights: ``(max_j q_j + 1) - q_i`` (linear in queue depth, not 1/q)."""
    top = max(queue_sizes) + 1
    return [top - size for size in queue_sizes]


def cumulative_frequency_table(queue_sizes: Sequence[int]) -> list[int]:
    """Running sums of ``load_weights`` (``BuiltInPartitioner.updatePartitionLoadStats``)."""
    table: list[int] = []
    running = 0
    for weight in load_weights(queue_sizes):
        running += weight
        table.append(running)
    return table


def pick_weighted(table: Sequence[int], draw: int) -> int:
    """Index of the first running sum greater than ``draw % table[-1]``."""
    return bisect.bisect_right(table, draw % table[-1])


class Kip480Sticky(UnkeyedStrategy):
    """``StickyPartitionCache``: switch on new batch only."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._sticky: dict[str, int] = {}

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        current = self._sticky.get(topic)
        if current is None:
            return self._next(topic, metadata, -1)
        return current

    def on_new_batch(self, topic: str, metadata: TopicMetadata, previous_partition: int) -> None:
        self._next(topic, metadata, previous_partition)

    def _next(self, topic: str, metadata: TopicMetadata, previous_partition: int) -> int:
        old = self._sticky.get(topic)
        # only the partition that opened the batch may move the sticky one (keyed records too)
        if old is not None and old != previous_partition:
            return old
        available = metadata.available_partitions
        if not available:
            new = java_random_int(self._rng) % metadata.num_partitions
        elif len(available) == 1:
            new = available[0]
        else:
            # draw until the partition differs from the old one (any draw when there was none)
            new = available[java_random_int(self._rng) % len(available)]
            while new == old:
                new = available[java_random_int(self._rng) % len(available)]
        self._sticky[topic] = new
        return new


class BuiltInSticky(UnkeyedStrategy):
    """KIP-794 ``BuiltInPartitioner`` (with KAFKA-14156's full-batch rule)."""

    def __init__(self, rng: random.Random, batch_size: int = 16384, adaptive: bool = True) -> None:
        self._rng = rng
        # batch.size 0 is legal in Java; the producer hands the partitioner max(1, batch.size)
        size = check_int("BuiltInSticky", "batch_size", batch_size, low=0, high=MAX_INT32)
        self.sticky_batch_size = max(1, size)
        self.adaptive = adaptive
        self._sticky: dict[str, int] = {}
        self._produced_bytes: dict[str, int] = {}
        self._stats: dict[str, tuple[list[int], tuple[int, ...]]] = {}

    @property
    def wants_load_stats(self) -> bool:
        return self.adaptive

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        current = self._sticky.get(topic)
        if current is None:
            current = self._next(topic, metadata)
        return current

    def on_append(
        self,
        topic: str,
        partition: int,
        appended_bytes: int,
        last_batch_full: bool,
        metadata: TopicMetadata,
    ) -> None:
        if self._sticky.get(topic) != partition:
            return
        produced = self._produced_bytes.get(topic, 0) + appended_bytes
        self._produced_bytes[topic] = produced
        if (produced >= self.sticky_batch_size and last_batch_full) or (
            produced >= 2 * self.sticky_batch_size
        ):
            self._next(topic, metadata)

    def produced_bytes(self, topic: str) -> int:
        """Bytes appended to the current sticky partition of ``topic`` since it was chosen."""
        return self._produced_bytes.get(topic, 0)

    def on_load_stats(self, topic: str, stats: LoadStats | None) -> None:
        if not self.adaptive or stats is None or not stats.queue_sizes:
            self._stats.pop(topic, None)
            return
        sizes = stats.queue_sizes
        if not stats.excluded_any and all(size == sizes[0] for size in sizes):
            self._stats.pop(topic, None)
            return
        self._stats[topic] = (cumulative_frequency_table(sizes), stats.partition_ids)

    def _next(self, topic: str, metadata: TopicMetadata) -> int:
        stats = self._stats.get(topic)
        if stats is None:
            new = metadata.pick(java_random_int(self._rng))
        else:
            table, partition_ids = stats
            new = partition_ids[pick_weighted(table, java_random_int(self._rng))]
        self._sticky[topic] = new
        self._produced_bytes[topic] = 0
        return new
