"""What every partitioner is made of: a key rule (which records are hashed), a hash (key ->
partition) and an unkeyed strategy (everything else, possibly stateful and random).

The producer model (``partitioners.producer``) calls a partitioner the way ``KafkaProducer``
does: ``partition``; if the append needs a new batch and ``aborts_on_new_batch`` is set (Java,
any configured ``partitioner.class``), ``on_new_batch`` and ``partition`` again. The built-in
Java partitioner also hears ``on_append`` (bytes produced to the sticky partition) and
``on_load_stats`` (queue sizes from the sender).

>>> from partitioners.keyed import JAVA_MURMUR2
>>> metadata = TopicMetadata.all_available(6)
>>> never = Partitioner("example", KeyRule.NON_NULL, JAVA_MURMUR2, FixedPartition(0))
>>> never.partition("orders", b"TT0124", metadata, 0), never.partition("orders", None, metadata, 0)
(4, 0)
"""

from __future__ import annotations

import enum
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from partitioners.errors import InputError
from partitioners.hashing import KeyInput, as_binary_array, key_lengths, null_mask
from partitioners.limits import MAX_INT32, check_int, check_partitions


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """What the producer knows about one topic: its partition count and which partitions have
    a leader right now (``cluster.availablePartitionsForTopic``), in ascending order."""

    num_partitions: int
    available_partitions: tuple[int, ...]

    def __post_init__(self) -> None:
        check_partitions("TopicMetadata", "num_partitions", self.num_partitions)
        available = self.available_partitions
        if available and not (
            available[0] >= 0
            and available[-1] < self.num_partitions
            and all(a < b for a, b in itertools.pairwise(available))
        ):
            raise InputError(
                f"must be ascending partitions in [0, {self.num_partitions})",
                field="TopicMetadata.available_partitions",
                value=available,
            )

    @classmethod
    def all_available(cls, num_partitions: int) -> TopicMetadata:
        return cls(num_partitions, tuple(range(num_partitions)))

    def pick(self, draw: int) -> int:
        """``draw`` (>= 0) modulo the available partitions, or all of them if none has a leader
        (how the Java client spreads a counter or a random int)."""
        if self.available_partitions:
            return self.available_partitions[draw % len(self.available_partitions)]
        return draw % self.num_partitions


@dataclass(frozen=True, slots=True)
class LoadStats:
    """Queue sizes the sender saw for one topic (``RecordAccumulator.partitionReady``).

    ``queue_sizes[i]`` is the number of batches queued for ``partition_ids[i]``;
    ``excluded_any`` says whether some partition was left out (no leader or over the
    availability timeout).
    """

    queue_sizes: tuple[int, ...]
    partition_ids: tuple[int, ...]
    excluded_any: bool

    def __post_init__(self) -> None:
        if len(self.queue_sizes) != len(self.partition_ids):
            raise InputError(
                f"must hold one size per partition id ({len(self.partition_ids)})",
                field="LoadStats.queue_sizes",
                value=self.queue_sizes,
            )
        if self.queue_sizes and min(self.queue_sizes) < 0:
            raise InputError(
                "must be >= 0", field="LoadStats.queue_sizes", value=min(self.queue_sizes)
            )


class KeyRule(enum.Enum):
    """Which records a partitioner hashes."""

    NON_NULL = "non-null"  # Java, librdkafka *_random: a null key is not hashed, empty is
    ALL = "all"  # librdkafka consistent/murmur2/fnv1a: a null key hashes like an empty one
    NON_EMPTY = "non-empty"  # librdkafka consistent_random: null and empty keys are not hashed
    NONE = "none"  # keys ignored (round robin, partitioner.ignore.keys, librdkafka random)

    def hashes(self, key: bytes | None) -> bool:
        if self is KeyRule.NON_NULL:
            return key is not None
        if self is KeyRule.ALL:
            return True
        if self is KeyRule.NON_EMPTY:
            return bool(key)
        return False

    def hashed_mask(self, keys: KeyInput) -> np.ndarray:
        array = as_binary_array(keys)
        if self is KeyRule.ALL:
            return np.ones(len(array), dtype=bool)
        if self is KeyRule.NONE:
            return np.zeros(len(array), dtype=bool)
        mask = ~null_mask(array)
        if self is KeyRule.NON_EMPTY:
            mask &= key_lengths(array) > 0
        return mask


@dataclass(frozen=True, slots=True)
class KeyHash:
    """key -> partition for the hashed records: a scalar and a vectorized form that agree."""

    name: str
    scalar: Callable[[bytes, int], int]
    vectorized: Callable[[KeyInput, np.ndarray], np.ndarray]


class UnkeyedStrategy:
    """How a partitioner places records it does not hash. Subclasses keep per-topic state."""

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        raise NotImplementedError

    def on_new_batch(self, topic: str, metadata: TopicMetadata, previous_partition: int) -> None:
        """Called between the aborted append and the second ``choose`` (Java, KIP-480)."""

    def on_append(
        self,
        topic: str,
        partition: int,
        appended_bytes: int,
        last_batch_full: bool,
        metadata: TopicMetadata,
    ) -> None:
        """Bytes just appended to the partition this strategy chose (Java built-in only)."""

    def on_load_stats(self, topic: str, stats: LoadStats | None) -> None:
        """Queue sizes from the sender's last ready check (Java built-in only)."""

    @property
    def wants_load_stats(self) -> bool:
        return False


class FixedPartition(UnkeyedStrategy):
    """Every unhashed record to one partition (the shape of librdkafka ``consistent`` for
    a null key, and handy in examples)."""

    def __init__(self, partition: int) -> None:
        self.partition = check_int("FixedPartition", "partition", partition, low=0, high=MAX_INT32)

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        return self.partition % metadata.num_partitions


def java_random_int(rng: random.Random) -> int:
    """``Utils.toPositive(ThreadLocalRandom.current().nextInt())``: uniform in [0, 2**31)."""
    return rng.getrandbits(32) & 0x7FFFFFFF


@dataclass(slots=True)
class Partitioner:
    """A named partitioner: key rule + hash + unkeyed strategy.

    ``aborts_on_new_batch`` is Java's ``abortOnNewBatch`` (true for any configured
    ``partitioner.class``, false for the built-in logic and for librdkafka).
    """

    name: str
    key_rule: KeyRule
    key_hash: KeyHash
    unkeyed: UnkeyedStrategy
    aborts_on_new_batch: bool = False
    description: str = field(default="", compare=False)

    def hashes(self, key: bytes | None) -> bool:
        return self.key_rule.hashes(key)

    def partition(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        if self.key_rule.hashes(key):
            return self.key_hash.scalar(key or b"", metadata.num_partitions)
        return self.unkeyed.choose(topic, key, metadata, now_ms)

    def on_new_batch(self, topic: str, metadata: TopicMetadata, previous_partition: int) -> None:
        self.unkeyed.on_new_batch(topic, metadata, previous_partition)

    def keyed_partitions(
        self, keys: KeyInput, num_partitions: int | Sequence[int] | np.ndarray
    ) -> np.ndarray:
        """Partition of every hashed key (vectorized), -1 where the unkeyed strategy decides.

        ``num_partitions`` is one count for all keys or one per key.
        """
        array = as_binary_array(keys)
        counts = np.broadcast_to(np.asarray(num_partitions, dtype=np.int64), (len(array),))
        if np.any(counts <= 0):
            raise ValueError("num_partitions must be > 0")
        result = np.full(len(array), -1, dtype=np.int32)
        mask = self.key_rule.hashed_mask(array)
        if mask.any():
            hashed_rows = np.flatnonzero(mask)
            subset = array if mask.all() else array.take(hashed_rows)
            partitions = self.key_hash.vectorized(subset, counts[hashed_rows])
            result[hashed_rows] = partitions
        return result
