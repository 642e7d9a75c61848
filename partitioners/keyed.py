"""The Java client's keyed path: ``toPositive(murmur2(key)) % numPartitions`` over ALL
partitions of the topic (available or not); an empty key is hashed, a null key is not.

>>> java_partition_for_key(b"TT0124", 15)
10
>>> java_partitions_for_keys([b"TT0124", b"fd7af248-ce5c-46a5-93d7-1c0c9005b99d", b""], 32).tolist()
[22, 26, 25]

With ``partitioner.ignore.keys=true`` (3.3+) every record is treated as unkeyed, so the keyed
path is skipped and the built-in sticky logic places it:

>>> import random
>>> from partitioners.base import TopicMetadata
>>> from partitioners.registry import create
>>> ignoring = create("java-builtin-ignore-keys", rng=random.Random(7))
>>> ignoring.hashes(b"TT0124"), create("java-builtin", rng=random.Random(7)).hashes(b"TT0124")
(False, True)
"""

from __future__ import annotations

import numpy as np

from partitioners.base import KeyHash
from partitioners.hashing import KeyInput, murmur2, murmur2_array


def java_partition_for_key(key: bytes, num_partitions: int) -> int:
    """``BuiltInPartitioner.partitionForKey``: the partition of one serialized key."""
    if num_partitions <= 0:
        raise ValueError("num_partitions must be > 0")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def java_partitions_for_keys(keys: KeyInput, num_partitions: int | np.ndarray) -> np.ndarray:
    """The Java partition of every key (null entries hash as empty), ``int32``; vectorized."""
    hashes = murmur2_array(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    counts = np.asarray(num_partitions, dtype=np.int64)
    if np.any(counts <= 0):
        raise ValueError("num_partitions must be > 0")
    if counts.ndim == 0:
        return (hashes % np.uint32(int(counts))).astype(np.int32)
    return (hashes.astype(np.int64) % counts).astype(np.int32)


JAVA_MURMUR2 = KeyHash("murmur2", java_partition_for_key, java_partitions_for_keys)
