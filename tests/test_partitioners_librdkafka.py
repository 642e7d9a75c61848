"""ktk's librdkafka partitioners against the real librdkafka bundled with confluent-kafka.

The hashing partitioners are called through ctypes on the shared library's exported
``rd_kafka_msg_partitioner_*`` functions (no cluster needed for keys that are hashed).
"""

from __future__ import annotations

import ctypes
import glob
import os
import random
import time

import numpy as np
import pytest

from partitioners.base import TopicMetadata
from partitioners.librdkafka import LibrdkafkaSticky
from partitioners.registry import Settings, create


def _load_librdkafka() -> ctypes.CDLL:
    try:
        import confluent_kafka
    except ImportError:
        pytest.skip("confluent-kafka is not installed, so its librdkafka cannot be loaded")
    package_root = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    candidates = sorted(
        glob.glob(os.path.join(package_root, "confluent_kafka.libs", "librdkafka*"))
    )
    candidates += ["librdkafka.so.1"]
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    pytest.skip("no loadable librdkafka shared library next to confluent-kafka")


@pytest.fixture(scope="module")
def librdkafka() -> ctypes.CDLL:
    return _load_librdkafka()


def _real(library: ctypes.CDLL, variant: str):
    function = getattr(library, f"rd_kafka_msg_partitioner_{variant}")
    function.restype = ctypes.c_int32
    function.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]

    def call(key: bytes | None, partition_count: int) -> int:
        return function(None, key, 0 if key is None else len(key), partition_count, None, None)

    return call


@pytest.fixture(scope="module")
def keys() -> list[bytes]:
    rng = np.random.default_rng(11)
    generated = [rng.bytes(int(n)) for n in rng.integers(1, 80, size=4000)]
    return [*generated, b"TT0124", b"fd7af248-ce5c-46a5-93d7-1c0c9005b99d", b"a", b"\xff" * 9]


@pytest.mark.parametrize("variant", ["murmur2", "consistent", "fnv1a"])
@pytest.mark.parametrize("partition_count", [1, 7, 15, 32, 1000])
def test_hashing_partitioners_match_real_librdkafka(librdkafka, keys, variant, partition_count):
    real = _real(librdkafka, variant)
    ours = create(f"librdkafka-{variant}").keyed_partitions(keys, partition_count).tolist()
    assert ours == [real(key, partition_count) for key in keys]


@pytest.mark.parametrize("variant", ["murmur2_random", "consistent_random", "fnv1a_random"])
def test_random_variants_hash_non_empty_keys_exactly_like_real_librdkafka(
    librdkafka, keys, variant
):
    real = _real(librdkafka, variant)
    ours = create(f"librdkafka-{variant}").keyed_partitions(keys, 24).tolist()
    assert ours == [real(key, 24) for key in keys]


@pytest.mark.parametrize("variant", ["murmur2", "consistent", "fnv1a"])
def test_null_and_empty_keys_hash_as_empty_in_the_non_random_variants(librdkafka, variant):
    real = _real(librdkafka, variant)
    ours = create(f"librdkafka-{variant}").keyed_partitions([None, b""], 15).tolist()
    assert ours == [real(None, 15), real(b"", 15)]
    if variant == "consistent":
        assert ours == [0, 0]


@pytest.mark.parametrize("variant", ["murmur2_random", "fnv1a_random"])
def test_empty_key_is_hashed_by_murmur2_random_and_fnv1a_random(librdkafka, variant):
    real = _real(librdkafka, variant)
    assert create(f"librdkafka-{variant}").keyed_partitions([b""], 15).tolist() == [real(b"", 15)]


def test_null_keys_are_not_hashed_by_random_variants_and_empty_keys_not_by_consistent_random():
    assert create("librdkafka-murmur2_random").keyed_partitions([None], 15).tolist() == [-1]
    assert create("librdkafka-consistent_random").keyed_partitions([None, b""], 15).tolist() == [
        -1,
        -1,
    ]
    assert create("librdkafka-random").keyed_partitions([b"k"], 15).tolist() == [-1]


def test_sticky_partition_lasts_for_sticky_linger_ms_of_simulated_time():
    sticky = LibrdkafkaSticky(random.Random(4), sticky_linger_ms=10)
    metadata = TopicMetadata.all_available(64)
    first_window = {sticky.choose("t", None, metadata, now_ms) for now_ms in range(0, 10)}
    assert len(first_window) == 1
    later = [sticky.choose("t", None, metadata, now_ms) for now_ms in range(10, 200, 10)]
    assert len(set(later)) > 5  # a fresh draw every window


def test_sticky_partition_moves_at_once_when_it_loses_its_leader():
    sticky = LibrdkafkaSticky(random.Random(4), sticky_linger_ms=1000)
    metadata = TopicMetadata.all_available(8)
    current = sticky.choose("t", None, metadata, 0)
    without_it = TopicMetadata(8, tuple(p for p in range(8) if p != current))
    moved = {sticky.choose("t", None, without_it, 1) for _ in range(3)}
    assert current not in moved and len(moved) == 1


def test_zero_sticky_linger_draws_a_random_partition_per_record():
    partitioner = create(
        "librdkafka-consistent_random", rng=random.Random(2), settings=Settings(sticky_linger_ms=0)
    )
    metadata = TopicMetadata.all_available(16)
    drawn = {partitioner.partition("t", None, metadata, 0) for _ in range(200)}
    assert len(drawn) == 16


def test_keyed_records_under_random_get_a_fresh_partition_each_not_the_sticky_one():
    partitioner = create("librdkafka-random", rng=random.Random(2))
    metadata = TopicMetadata.all_available(16)
    drawn = {partitioner.partition("t", b"same-key", metadata, 0) for _ in range(200)}
    assert len(drawn) == 16
    sticky = {partitioner.partition("t", None, metadata, 0) for _ in range(200)}
    assert len(sticky) == 1


def _produce_to_mock_cluster(partitioner: str, keys: list[bytes | None], **extra) -> list[int]:
    """Partitions the real librdkafka producer chose, against its in-process mock cluster."""
    producer_module = pytest.importorskip("confluent_kafka")
    config = {
        "test.mock.num.brokers": 1,
        "partitioner": partitioner,
        "linger.ms": 0,
        "log_level": 3,
        **extra,
    }
    producer = producer_module.Producer(config)
    # auto-create the topic and wait until every partition has a leader: a message produced
    # while librdkafka knows no available partition is placed later, one by one, unstickily
    deadline = time.monotonic() + 20
    while True:
        topic = producer.list_topics("keys", timeout=10).topics["keys"]
        if topic.partitions and all(p.leader >= 0 for p in topic.partitions.values()):
            break
        assert time.monotonic() < deadline, "the mock cluster gave the topic no leaders"
        time.sleep(0.05)
    # one keyed message delivered first brings the broker connection up, so the partitions
    # are available when the measured messages are placed (a keyed send leaves the sticky
    # partition of null keys untouched)
    producer.produce("keys", value=b"v", key=b"warm-up")
    assert producer.flush(20) == 0
    chosen: dict[int, int] = {}
    for index, key in enumerate(keys):

        def report(error, message, index=index):
            assert error is None, error
            chosen[index] = message.partition()

        producer.produce("keys", value=b"v", key=key, on_delivery=report)
    assert producer.flush(20) == 0
    return [chosen[index] for index in range(len(keys))]


def _mock_partition_count() -> int:
    producer_module = pytest.importorskip("confluent_kafka")
    producer = producer_module.Producer({"test.mock.num.brokers": 1, "log_level": 3})
    return len(producer.list_topics("keys", timeout=10).topics["keys"].partitions)


@pytest.mark.parametrize("variant", ["consistent", "murmur2", "fnv1a"])
def test_real_producer_places_null_empty_and_other_keys_as_ktk_predicts(variant):
    count = _mock_partition_count()
    keys = [None, b"", b"TT0124", b"fd7af248-ce5c-46a5-93d7-1c0c9005b99d", b"a"]
    real = _produce_to_mock_cluster(variant, keys)
    assert create(f"librdkafka-{variant}").keyed_partitions(keys, count).tolist() == real


def test_real_producer_keeps_null_keys_on_one_partition_within_the_sticky_linger():
    real = _produce_to_mock_cluster(
        "murmur2_random", [None] * 30, **{"sticky.partitioning.linger.ms": 60_000}
    )
    assert len(set(real)) == 1
    ours = create(
        "librdkafka-murmur2_random",
        rng=random.Random(1),
        settings=Settings(sticky_linger_ms=60_000),
    )
    metadata = TopicMetadata.all_available(_mock_partition_count())
    assert len({ours.partition("keys", None, metadata, now_ms) for now_ms in range(30)}) == 1


def test_real_producer_spreads_empty_keys_under_consistent_random_without_sticky_linger():
    real = _produce_to_mock_cluster(
        "consistent_random", [b""] * 60, **{"sticky.partitioning.linger.ms": 0}
    )
    assert len(set(real)) > 1
    assert create("librdkafka-consistent_random").keyed_partitions([b""], 4).tolist() == [-1]
