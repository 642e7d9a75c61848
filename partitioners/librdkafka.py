"""librdkafka's partitioners (confluent-kafka-python/go/dotnet, node-rdkafka, kcat).

Hashes: ``consistent`` = CRC32 % n, ``murmur2`` = (murmur2 & 0x7fffffff) % n (Java's hash),
``fnv1a`` = |int32 FNV-1a| % n (Sarama's). Null and empty keys differ by variant:

==================  ===================  ==========================
partitioner         null key             empty key
==================  ===================  ==========================
random              sticky               random
consistent          crc32("")=0 -> p0    p0
consistent_random   sticky               sticky   (the default)
murmur2             hashed as empty      hashed
murmur2_random      sticky               hashed   (Java's behaviour)
fnv1a               hashed as empty      hashed
fnv1a_random        sticky               hashed
==================  ===================  ==========================

"Sticky" is time-based: a new random available partition every ``sticky.partitioning.linger.ms``
(default 10 ms; 0 = a random partition per record), or sooner if the current one loses its
leader. The same key lands elsewhere than in Java under the default:

>>> [librdkafka_partition(b"TT0124", 15, name) for name in ("consistent_random", "murmur2_random")]
[9, 10]
>>> librdkafka_partition(b"", 15, "consistent"), librdkafka_partition(None, 15, "murmur2")
(0, 6)
"""

from __future__ import annotations

import random

import numpy as np

from partitioners.base import KeyHash, KeyRule, TopicMetadata, UnkeyedStrategy
from partitioners.hashing import (
    KeyInput,
    crc32,
    crc32_array,
    fnv1a_positive,
    fnv1a_positive_array,
)
from partitioners.keyed import java_partition_for_key, java_partitions_for_keys
from partitioners.limits import MAX_INT32, check_int

LIBRDKAFKA_PARTITIONERS = (
    "random",
    "consistent",
    "consistent_random",
    "murmur2",
    "murmur2_random",
    "fnv1a",
    "fnv1a_random",
)
DEFAULT_PARTITIONER = "consistent_random"
DEFAULT_STICKY_LINGER_MS = 10


def _check(num_partitions: int) -> None:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be > 0")


def crc32_partition(key: bytes, num_partitions: int) -> int:
    _check(num_partitions)
    return crc32(key) % num_partitions


def crc32_partitions(keys: KeyInput, num_partitions: int | np.ndarray) -> np.ndarray:
    counts = np.asarray(num_partitions, dtype=np.int64)
    return (crc32_array(keys).astype(np.int64) % counts).astype(np.int32)


def fnv1a_partition(key: bytes, num_partitions: int) -> int:
    _check(num_partitions)
    return fnv1a_positive(key) % num_partitions


def fnv1a_partitions(keys: KeyInput, num_partitions: int | np.ndarray) -> np.ndarray:
    counts = np.asarray(num_partitions, dtype=np.int64)
    return (fnv1a_positive_array(keys).astype(np.int64) % counts).astype(np.int32)


CRC32 = KeyHash("crc32", crc32_partition, crc32_partitions)
FNV1A = KeyHash("fnv1a", fnv1a_partition, fnv1a_partitions)
MURMUR2 = KeyHash("murmur2", java_partition_for_key, java_partitions_for_keys)

# partitioner -> (which keys are hashed, hash)
RULES: dict[str, tuple[KeyRule, KeyHash]] = {
    "random": (KeyRule.NONE, MURMUR2),
    "consistent": (KeyRule.ALL, CRC32),
    "consistent_random": (KeyRule.NON_EMPTY, CRC32),
    "murmur2": (KeyRule.ALL, MURMUR2),
    "murmur2_random": (KeyRule.NON_NULL, MURMUR2),
    "fnv1a": (KeyRule.ALL, FNV1A),
    "fnv1a_random": (KeyRule.NON_NULL, FNV1A),
}


def librdkafka_partition(key: bytes | None, num_partitions: int, partitioner: str) -> int | None:
    """The partition of a key under a hashing variant, or None where librdkafka draws one."""
    rule, key_hash = RULES[partitioner]
    if not rule.hashes(key):
        return None
    return key_hash.scalar(key or b"", num_partitions)


class LibrdkafkaSticky(UnkeyedStrategy):
    """Unhashed records: time-sticky random (null keys, and empty keys under
    ``consistent_random``) or a fresh random partition (keyed records under ``random``)."""

    def __init__(
        self,
        rng: random.Random,
        sticky_linger_ms: int = DEFAULT_STICKY_LINGER_MS,
        sticky_for_empty_key: bool = False,
    ) -> None:
        self._rng = rng
        self.sticky_linger_ms = check_int(
            "LibrdkafkaSticky", "sticky_linger_ms", sticky_linger_ms, low=0, high=MAX_INT32
        )
        self.sticky_for_empty_key = sticky_for_empty_key
        self._sticky: dict[str, int] = {}
        self._last_switch_ms: dict[str, int] = {}

    def _random(self, metadata: TopicMetadata) -> int:
        # rd_kafka_msg_partitioner_random: one retry if the first draw has no leader
        draw = self._rng.randrange(metadata.num_partitions)
        if draw not in metadata.available_partitions:
            return self._rng.randrange(metadata.num_partitions)
        return draw

    def choose(self, topic: str, key: bytes | None, metadata: TopicMetadata, now_ms: int) -> int:
        sticky_record = key is None or (self.sticky_for_empty_key and key == b"")
        if not sticky_record or self.sticky_linger_ms <= 0:
            return self._random(metadata)
        current = self._sticky.get(topic)
        last = self._last_switch_ms.get(topic)
        if current is None or current not in metadata.available_partitions:
            last = None
        if last is None or now_ms - last >= self.sticky_linger_ms:
            current = self._random(metadata)
            self._sticky[topic] = current
            self._last_switch_ms[topic] = now_ms
        return current if current is not None else self._random(metadata)
