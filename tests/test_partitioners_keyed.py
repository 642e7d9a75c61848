"""The Java keyed path and the Java <-> librdkafka trap."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners.base import TopicMetadata
from partitioners.keyed import java_partition_for_key, java_partitions_for_keys
from partitioners.librdkafka import librdkafka_partition
from partitioners.registry import create

UUID_KEY = b"fd7af248-ce5c-46a5-93d7-1c0c9005b99d"


def test_tt0124_on_15_partitions_is_10_in_java_and_9_in_librdkafkas_default():
    assert java_partition_for_key(b"TT0124", 15) == 10
    assert create("java-builtin").keyed_partitions([b"TT0124"], 15).tolist() == [10]
    assert create("librdkafka-default").keyed_partitions([b"TT0124"], 15).tolist() == [9]
    assert librdkafka_partition(b"TT0124", 15, "consistent_random") == 9


def test_uuid_key_on_32_partitions_is_26_in_java_and_23_in_librdkafkas_default():
    assert java_partition_for_key(UUID_KEY, 32) == 26
    assert create("librdkafka-consistent_random").keyed_partitions([UUID_KEY], 32).tolist() == [23]


def test_spec_table_of_murmur2_and_crc32_partitions():
    table = {
        b"": (6, 25, 0, 0),
        b"a": (4, 28, 12, 3),
        b"TT0124": (10, 22, 9, 11),
        UUID_KEY: (1, 26, 6, 23),
    }
    for key, (java15, java32, crc15, crc32_) in table.items():
        assert java_partition_for_key(key, 15) == java15
        assert java_partition_for_key(key, 32) == java32
        assert librdkafka_partition(key, 15, "consistent") == crc15
        assert librdkafka_partition(key, 32, "consistent") == crc32_


def test_librdkafka_murmur2_random_agrees_with_java_on_every_non_null_key():
    rng = np.random.default_rng(3)
    keys = [rng.bytes(int(n)) for n in rng.integers(0, 40, size=5000)]
    java = create("java-builtin").keyed_partitions(keys, 24)
    assert (create("librdkafka-murmur2_random").keyed_partitions(keys, 24) == java).all()


def test_keyed_path_uses_all_partitions_even_when_some_have_no_leader():
    partitioner = create("java-builtin")
    no_leaders = TopicMetadata(15, available_partitions=(0, 1))
    assert partitioner.partition("t", b"TT0124", no_leaders, 0) == 10


def test_empty_key_is_hashed_but_null_key_is_not():
    partitioner = create("java-builtin")
    assert partitioner.keyed_partitions([b"", None], 15).tolist() == [6, -1]


def test_ignore_keys_sends_keyed_records_down_the_sticky_path():
    partitioner = create("java-builtin-ignore-keys", rng=random.Random(1))
    assert partitioner.keyed_partitions([b"TT0124"], 15).tolist() == [-1]
    metadata = TopicMetadata.all_available(15)
    chosen = {partitioner.partition("t", key, metadata, 0) for key in (b"a", b"b", b"c", b"d")}
    assert len(chosen) == 1  # sticky: one partition until batch.size bytes were produced


def test_vectorized_keyed_partitions_take_one_partition_count_per_record():
    keys = [b"TT0124", b"TT0124", UUID_KEY]
    assert java_partitions_for_keys(keys, np.array([15, 32, 32])).tolist() == [10, 22, 26]


def test_zero_partitions_are_rejected():
    with pytest.raises(ValueError):
        java_partition_for_key(b"a", 0)
    with pytest.raises(ValueError):
        create("java-builtin").keyed_partitions([b"a"], 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=50), st.integers(1, 5000))
def test_every_hashing_partitioner_stays_in_range_and_scalar_equals_vectorized(keys, count):
    metadata = TopicMetadata.all_available(count)
    for name in (
        "java-builtin",
        "librdkafka-consistent",
        "librdkafka-fnv1a",
        "librdkafka-murmur2_random",
    ):
        partitioner = create(name)
        vectorized = partitioner.keyed_partitions(keys, count).tolist()
        assert vectorized == [partitioner.partition("t", key, metadata, 0) for key in keys]
        assert all(0 <= partition < count for partition in vectorized)
