"""The simulator's on-disk replica log is Kafka's own bytes: kafka_format reads every file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_ops import apply_log_op, fill, log_ops

from kafka_format.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from kafka_format.index import build_indexes, parse_offset_index, parse_time_index
from kafka_format.inspect import inspect_path
from kafka_format.segment import read_segment_file, recover_segment
from replication.errors import InputError
from replication.log import EpochEntry, ReplicaLog
from replication.scenario import load_scenario
from replication.storage import (
    LEADER_EPOCH_CHECKPOINT,
    DiskLogStorage,
    ProducerFields,
    topic_id_for,
)

DISK_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_each_append_is_one_v2_batch_carrying_its_leader_epoch(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, topic="orders", partition=1)
    fill(storage, ["a", "b"], epoch=3)
    fill(storage, ["ü"], epoch=5, start=2)
    scan = read_segment_file(storage.segments()[0].log_path)
    assert scan.error is None and scan.trailing_bytes == 0
    assert [
        (b.base_offset, b.last_offset, b.magic, b.partition_leader_epoch, b.is_valid)
        for b in scan.batches
    ] == [(0, 0, 2, 3, True), (1, 1, 2, 3, True), (2, 2, 2, 5, True)]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in scan.batches] == [
        (-1, -1, -1)
    ] * 3
    records = [record for batch in scan.batches for record in batch.records()]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (0, 1_000, None, b"a"),
        (1, 1_001, None, b"b"),
        (2, 1_002, None, "ü".encode()),
    ]


def test_an_idempotent_producers_fields_go_into_the_batch_header(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path)
    storage.append(0, 1, "x", timestamp_ms=5, producer=ProducerFields(4_000, 2, 17))
    (batch,) = read_segment_file(storage.segments()[0].log_path).batches
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4_000, 2, 17)
    assert batch.records()[0].sequence == 17


def test_a_lone_surrogate_value_is_stored_without_crashing(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path)
    storage.append(0, 0, "bad\udcff", timestamp_ms=1)
    assert storage.read()[0].value == "bad\udcff"
    assert storage.recover(lose_unflushed=False)[0][0].value == "bad\udcff"


def test_the_scenario_parser_refuses_a_lone_surrogate_value(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '{"name": "s", "config": {"brokers": [1], "replicas": [1]}, '
        '"steps": [{"produce": "\\udcff"}]}',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="lone surrogate"):
        load_scenario(path)


def test_checkpoint_files_and_partition_metadata_read_with_kafka_format(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, topic="orders", partition=2)
    fill(storage, ["a", "b", "c"])
    storage.flush()
    storage.write_checkpoints(2, [EpochEntry(0, 0), EpochEntry(4, 1)])

    def offsets(name: str) -> dict[tuple[str, int], int]:
        return parse_offset_checkpoint((tmp_path / name).read_text(), source=name)

    assert offsets(REPLICATION_OFFSET_CHECKPOINT) == {("orders", 2): 2}
    assert offsets(RECOVERY_POINT_CHECKPOINT) == {("orders", 2): 3}
    assert offsets(LOG_START_OFFSET_CHECKPOINT) == {}
    epochs = (tmp_path / "orders-2" / LEADER_EPOCH_CHECKPOINT).read_text()
    assert parse_leader_epoch_checkpoint(epochs) == ((0, 0), (4, 1))
    metadata = parse_partition_metadata((tmp_path / "orders-2" / PARTITION_METADATA).read_text())
    assert metadata.version == 0 and metadata.topic_id == topic_id_for("orders")


def test_topic_ids_are_derived_from_the_topic_name() -> None:
    assert topic_id_for("orders") == topic_id_for("orders")
    assert topic_id_for("orders") != topic_id_for("payments")
    assert len(topic_id_for("orders")) == 16


def test_the_recovery_point_follows_flushes_truncations_and_recovery(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path)

    def recovery_point() -> int:
        text = (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text()
        return parse_offset_checkpoint(text)[("ktk", 0)]

    assert recovery_point() == 0
    fill(storage, ["a", "b", "c", "d"])
    assert recovery_point() == 0
    storage.flush()
    assert recovery_point() == 4
    storage.truncate_to(2)
    assert recovery_point() == 2
    fill(storage, ["x"], start=2)
    storage.recover(lose_unflushed=False)
    assert recovery_point() == 3


def test_recovery_cuts_exactly_where_kafkas_segment_recovery_does(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path)
    fill(storage, [f"v{i}" for i in range(6)])
    log = storage.segments()[0].log_path
    data = bytearray(log.read_bytes())
    data[3 * 70 + 30] ^= 0x01  # inside the fourth batch
    log.write_bytes(bytes(data))
    expected = recover_segment(bytes(data), source=str(log))
    assert expected.error is not None and [b.base_offset for b in expected.batches] == [0, 1, 2]
    records, _, _ = storage.recover(lose_unflushed=False)
    assert [record.offset for record in records] == [0, 1, 2]
    assert log.stat().st_size == expected.valid_bytes


def test_a_torn_batch_at_the_tail_is_truncated_on_recovery(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path)
    fill(storage, ["a", "b", "c"])
    log = storage.segments()[0].log_path
    log.write_bytes(log.read_bytes()[:-10])
    records, _, _ = storage.recover(lose_unflushed=False)
    assert [record.value for record in records] == ["a", "b"]
    assert recover_segment(log.read_bytes()).truncated_bytes == 0


@DISK_SETTINGS
@given(
    values=st.lists(st.text(max_size=30), min_size=1, max_size=40),
    # timestamp 0 at relative offset 0 is all zero bytes: readers take it for preallocation
    timestamps=st.lists(
        st.one_of(st.just(-1), st.integers(min_value=1, max_value=500)), min_size=40, max_size=40
    ),
    segment_bytes=st.integers(min_value=60, max_value=600),
    index_interval=st.integers(min_value=0, max_value=300),
)
def test_indexes_on_disk_are_the_indexes_kafkas_recovery_builds(
    values: list[str], timestamps: list[int], segment_bytes: int, index_interval: int
) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        storage = DiskLogStorage(
            log_dir, segment_bytes=segment_bytes, index_interval_bytes=index_interval
        )
        for offset, (value, timestamp) in enumerate(zip(values, timestamps, strict=False)):
            storage.append(offset, 0, value, timestamp_ms=timestamp)
        segments = storage.segments()
        for slot, segment in enumerate(segments):
            data = segment.log_path.read_bytes()
            built = build_indexes(data, segment.base_offset, index_interval_bytes=index_interval)
            offsets = parse_offset_index(segment.index_path.read_bytes(), segment.base_offset)
            times = parse_time_index(segment.time_index_path.read_bytes(), segment.base_offset)
            assert [tuple(e) for e in offsets.entries()] == list(built.offset_entries)
            if slot < len(segments) - 1:
                # a rolled segment keeps its final time entry, as Kafka's roll writes it
                assert [tuple(e) for e in times.entries()] == list(built.time_entries)
            else:
                # the active segment gets its final entry when Kafka closes or recovers it
                assert list(built.time_entries[: len(times.entries())]) == [
                    tuple(e) for e in times.entries()
                ]


@DISK_SETTINGS
@given(ops=log_ops, segment_bytes=st.integers(min_value=60, max_value=300))
def test_ktk_log_inspect_finds_no_problem_in_a_replica_log_written_by_storage(
    ops: list[tuple[str, object]], segment_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        log = ReplicaLog(
            storage=DiskLogStorage(log_dir, segment_bytes=segment_bytes, index_interval_bytes=40)
        )
        epoch = 0
        for name, argument in ops:
            epoch = apply_log_op(log, name, argument, epoch)
        report = inspect_path(Path(log_dir))
        assert report.ok, [str(finding) for finding in report.all_findings]
        (partition,) = report.partitions
        assert partition.log_end_offset == log.log_end_offset
        assert partition.high_watermark == log.high_watermark
        assert [tuple(entry) for entry in partition.leader_epoch_cache or ()] == [
            tuple(entry) for entry in log.epoch_cache.entries
        ]
