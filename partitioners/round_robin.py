"""Round robin in the Java client, two flavours.

``LegacyRoundRobin``: the unkeyed path of ``DefaultPartitioner`` before 2.4: a per-topic counter
that starts at a random int, over the *available* partitions (all partitions if none is).

``RoundRobin``: ``RoundRobinPartitioner`` (KIP-369, 2.4+): a per-topic counter from 0 over the
available partitions; keys are ignored. As a configured ``partitioner.class`` it runs with
``abortOnNewBatch``: when a record needs a new batch the producer calls ``partition`` a second
time, so the counter moves twice for that record (KAFKA-9965). With ``linger.ms=0`` every
record opens a batch, and on 6 partitions only every other one gets data:

>>> from partitioners.base import TopicMetadata
>>> metadata = TopicMetadata.all_available(6)
>>> def send_one_record_per_batch(strategy):
...     placed = []
...     for _ in range(6):
...         first = strategy.choose("t", None, metadata, 0)  # append aborted: new batch needed
...         strategy.on_new_batch("t", metadata, first)
...         placed.append(strategy.choose("t", None, metadata, 0))
...     return placed
>>> send_one_record_per_batch(RoundRobin(fixed=False))
[1, 3, 5, 1, 3, 5]

The fix (KAFKA-17632, 3.9/4.0) remembers the partition chosen before the abort and returns it
on the second call, so the counter moves once per record:

>>> send_one_record_per_batch(RoundRobin(fixed=True))
[0, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

import random

from partitioners.base import TopicMetadata, UnkeyedStrategy


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _pick(counter_value: int, metadata: TopicMetadata) -> int:
    return metadata.pick(counter_value & 0x7FFFFFFF)


class LegacyRoundRobin(UnkeyedStrategy):
    """Pre-2.4 ``DefaultPartitioner`` for null keys (no abort on new batch existed then)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._counters: dict[str, int] = {}

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        if topic not in self._counters:
            self._counters[topic] = _to_int32(self._rng.getrandbits(32))
        value = self._counters[topic]
        self._counters[topic] = _to_int32(value + 1)
        return _pick(value, metadata)


class RoundRobin(UnkeyedStrategy):
    """``RoundRobinPartitioner``; ``fixed`` models KAFKA-17632, otherwise KAFKA-9965."""

    def __init__(self, fixed: bool = False) -> None:
        self.fixed = fixed
        self._counters: dict[str, int] = {}
        self._before_abort: dict[str, int] = {}

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        remembered = self._before_abort.pop(topic, None)
        if remembered is not None:
            return remembered
        value = self._counters.get(topic, 0)
        self._counters[topic] = _to_int32(value + 1)
        return _pick(value, metadata)

    def on_new_batch(self, topic: str, metadata: TopicMetadata, previous_partition: int) -> None:
        if self.fixed:
            self._before_abort[topic] = previous_partition
