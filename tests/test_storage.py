"""The on-disk replica log: segments, sparse indexes, checkpoints, crash recovery."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_ops import apply_log_op, fill, log_ops

from kafka_format.checkpoint import format_leader_epoch_checkpoint as format_epoch_checkpoint
from replication.log import EpochEntry, LogRecord, ReplicaLog
from replication.modes import MODE_NAMES
from replication.sim import load_scenario, run_scenario
from replication.storage import (
    BATCH_OVERHEAD,
    HIGH_WATERMARK_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    DiskLogStorage,
    StoredRecord,
    decode_batches,
    encode_record,
    parse_epoch_checkpoint,
    parse_offset_checkpoint,
    read_offset_index,
    read_time_index,
)

# derandomized: every run checks the same examples
DISK_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def on_disk_indexes(storage: DiskLogStorage) -> list[tuple[list, list]]:
    return [
        (read_offset_index(segment.index_path), read_time_index(segment.time_index_path))
        for segment in storage.segments()
    ]


def test_record_batch_round_trips_and_counts_its_header() -> None:
    record = StoredRecord(12, 3, 1_700_000_000_000, "héllo")
    frame = encode_record(record)
    assert len(frame) == BATCH_OVERHEAD + len("héllo".encode())
    assert decode_batches(frame) == ([(0, record)], len(frame))


def test_decoding_stops_at_a_batch_whose_crc_does_not_match() -> None:
    first = encode_record(StoredRecord(0, 0, 1, "a"))
    second = bytearray(encode_record(StoredRecord(1, 0, 2, "b")))
    second[-1] ^= 0xFF
    frames, valid = decode_batches(first + bytes(second))
    assert [record.offset for _, record in frames] == [0]
    assert valid == len(first)


def test_segments_roll_by_size_and_are_named_by_padded_base_offset(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, topic="orders", partition=3, segment_bytes=230)
    fill(storage, [f"v{i}" for i in range(10)])  # 70-byte batches: 3 per segment
    partition_dir = tmp_path / "orders-3"
    assert sorted(path.name for path in partition_dir.glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000003.log",
        "00000000000000000006.log",
        "00000000000000000009.log",
    ]
    for segment in storage.segments():
        assert segment.log_path.stat().st_size <= 230
        assert segment.index_path.exists() and segment.time_index_path.exists()
    assert [record.value for record in storage.read()] == [f"v{i}" for i in range(10)]
    assert storage.log_end_offset == 10


def test_offset_index_gets_an_entry_once_more_than_the_interval_went_by(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, index_interval_bytes=140)
    fill(storage, [f"v{i}" for i in range(7)])  # 70-byte batches
    # 140 bytes since the last entry is not more than 140: records 3 and 6 get entries
    assert read_offset_index(storage.segments()[0].index_path) == [(3, 210), (6, 420)]
    assert read_time_index(storage.segments()[0].time_index_path) == [(1_003, 3), (1_006, 6)]


def test_time_index_keeps_the_first_offset_that_reached_the_max_timestamp(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, index_interval_bytes=0)
    for offset, timestamp in enumerate([50, 40, 70, 70, 60, 90]):
        storage.append(offset, 0, "x", timestamp_ms=timestamp)
    # index_interval 0: an entry on every record after the first; timestamps strictly grow
    assert read_time_index(storage.segments()[0].time_index_path) == [(50, 0), (70, 2), (90, 5)]
    assert storage.offset_for_timestamp(45) == 0
    assert storage.offset_for_timestamp(55) == 2
    assert storage.offset_for_timestamp(65) == 2
    assert storage.offset_for_timestamp(91) is None


records_strategy = st.lists(
    st.tuples(st.text(min_size=0, max_size=12), st.integers(min_value=-1, max_value=300)),
    min_size=1,
    max_size=60,
)


@DISK_SETTINGS
@given(
    records=records_strategy,
    segment_bytes=st.integers(min_value=40, max_value=400),
    index_interval=st.integers(min_value=0, max_value=200),
    gaps=st.lists(st.integers(min_value=1, max_value=3), min_size=60, max_size=60),
    probes=st.lists(st.integers(min_value=-5, max_value=400), min_size=1, max_size=20),
)
def test_index_lookups_agree_with_a_linear_scan(
    records: list[tuple[str, int]],
    segment_bytes: int,
    index_interval: int,
    gaps: list[int],
    probes: list[int],
) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        storage = DiskLogStorage(
            log_dir, segment_bytes=segment_bytes, index_interval_bytes=index_interval
        )
        written: list[StoredRecord] = []
        offset = 0
        for (value, timestamp), gap in zip(records, gaps, strict=False):
            storage.append(offset, 0, value, timestamp_ms=timestamp)
            written.append(StoredRecord(offset, 0, timestamp, value))
            offset += gap  # offsets need not be contiguous (compacted logs have holes)
        assert storage.read() == written
        for probe in probes:
            by_offset = next((r for r in written if r.offset == probe), None)
            assert storage.record_at(probe) == by_offset
            assert storage.read(probe) == [r for r in written if r.offset >= probe]
            by_time = next((r.offset for r in written if r.timestamp_ms >= probe), None)
            assert storage.offset_for_timestamp(probe) == by_time


@DISK_SETTINGS
@given(
    records=records_strategy,
    segment_bytes=st.integers(min_value=40, max_value=300),
    index_interval=st.integers(min_value=0, max_value=120),
    truncate_at=st.integers(min_value=0, max_value=70),
    more=st.lists(st.text(max_size=8), max_size=10),
)
def test_indexes_built_while_appending_equal_indexes_rebuilt_on_recovery(
    records: list[tuple[str, int]],
    segment_bytes: int,
    index_interval: int,
    truncate_at: int,
    more: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        storage = DiskLogStorage(
            log_dir, segment_bytes=segment_bytes, index_interval_bytes=index_interval
        )
        for offset, (value, timestamp) in enumerate(records):
            storage.append(offset, 0, value, timestamp_ms=timestamp)
        storage.truncate_to(truncate_at)
        for offset, value in enumerate(more, start=storage.log_end_offset):
            storage.append(offset, 1, value, timestamp_ms=offset)
        incremental = on_disk_indexes(storage)
        in_memory = [(s.offset_index, s.time_index) for s in storage.segments()]
        before = storage.read()
        storage.recover(lose_unflushed=False)
        assert on_disk_indexes(storage) == incremental == in_memory
        assert storage.read() == before


def test_truncation_inside_a_segment_cuts_the_file_and_later_segments(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230, index_interval_bytes=45)
    fill(storage, [f"v{i}" for i in range(10)])
    storage.truncate_to(4)
    assert [segment.base_offset for segment in storage.segments()] == [0, 3]
    assert storage.segments()[-1].log_path.stat().st_size == 70
    assert storage.log_end_offset == 4
    assert not (tmp_path / "ktk-0" / "00000000000000000006.log").exists()
    storage.append(4, 2, "new", timestamp_ms=5)
    assert [r.value for r in storage.read()] == ["v0", "v1", "v2", "v3", "new"]
    assert read_offset_index(storage.segments()[-1].index_path) == [(1, 70)]


def test_truncation_at_a_segment_base_deletes_that_segment(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230)
    fill(storage, [f"v{i}" for i in range(7)])
    storage.truncate_to(3)
    assert [segment.base_offset for segment in storage.segments()] == [0]
    assert storage.log_end_offset == 3


def test_truncation_to_the_log_start_leaves_one_empty_segment(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230)
    fill(storage, [f"v{i}" for i in range(7)])
    storage.truncate_to(0)
    assert [segment.base_offset for segment in storage.segments()] == [0]
    assert storage.read() == []
    assert sorted(p.name for p in (tmp_path / "ktk-0").glob("*.log")) == [
        "00000000000000000000.log"
    ]


def test_checkpoint_files_use_kafkas_text_format(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, topic="orders", partition=2)
    storage.write_checkpoints(17, [EpochEntry(0, 0), EpochEntry(3, 12)])
    assert (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n1\norders 2 17\n"
    assert (tmp_path / "orders-2" / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 12\n"
    _, high_watermark, entries = storage.recover(lose_unflushed=False)
    assert high_watermark == 17
    assert entries == [EpochEntry(0, 0), EpochEntry(3, 12)]


@settings(derandomize=True)
@given(entries=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**12)), max_size=20))
def test_epoch_checkpoint_text_round_trips(entries: list[tuple[int, int]]) -> None:
    assert parse_epoch_checkpoint(format_epoch_checkpoint(entries)) == entries


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("1\n0\n", 1, "version"),
        ("0\nx\n", 2, "count"),
        ("0\n2\n0 0\n", 2, "count"),
        ("0\n1\n0\n", 3, "entry"),
        ("0\n2\n0 0\n4 y\n", 4, "start_offset"),
    ],
)
def test_a_corrupt_epoch_checkpoint_names_file_line_and_field(
    text: str, line: int, field: str
) -> None:
    with pytest.raises(CorruptCheckpointError) as raised:
        parse_epoch_checkpoint(text, "p-0/leader-epoch-checkpoint")
    assert raised.value.line == line
    assert raised.value.field == field
    assert str(raised.value).startswith(f"p-0/leader-epoch-checkpoint:{line}: {field}: ")


def test_offset_checkpoint_keeps_the_entry_of_its_own_partition(tmp_path: Path) -> None:
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text("0\n2\nother 0 99\nktk 0 5\n")
    storage = DiskLogStorage(tmp_path)
    assert storage.recover(lose_unflushed=False)[1] == 5
    assert parse_offset_checkpoint("0\n0\n") == []


def test_crash_keeping_the_page_cache_keeps_unflushed_records(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230)
    fill(storage, ["a", "b", "c"])
    storage.flush()
    fill(storage, ["d", "e"], start=3)
    records, _, _ = storage.recover(lose_unflushed=False)
    assert records == [LogRecord(i, 0, v) for i, v in enumerate("abcde")]


def test_crash_losing_the_page_cache_drops_exactly_what_followed_the_flush(
    tmp_path: Path,
) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230)
    fill(storage, ["a", "b", "c", "d"])
    storage.flush()
    fill(storage, ["e", "f", "g", "h"], start=4)  # rolls twice after the flush
    assert len(storage.segments()) == 3
    records, _, _ = storage.recover(lose_unflushed=True)
    assert [r.value for r in records] == ["a", "b", "c", "d"]
    assert [segment.base_offset for segment in storage.segments()] == [0, 3]
    assert not (tmp_path / "ktk-0" / "00000000000000000006.log").exists()
    storage.append(4, 1, "E", timestamp_ms=0)
    assert [r.value for r in storage.read()] == ["a", "b", "c", "d", "E"]


def test_truncation_after_a_flush_is_not_undone_by_a_lossy_crash(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path)
    fill(storage, ["a", "b", "c"])
    storage.flush()
    storage.truncate_to(1)
    fill(storage, ["x"], epoch=1, start=1)
    records, _, _ = storage.recover(lose_unflushed=True)
    assert [r.value for r in records] == ["a"]


def test_recovery_cuts_a_torn_tail_and_drops_later_segments(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230)
    fill(storage, [f"v{i}" for i in range(9)])
    middle = storage.segments()[1].log_path
    data = bytearray(middle.read_bytes())
    data[100] ^= 0xFF  # corrupt the second batch of the middle segment
    middle.write_bytes(bytes(data))
    records, _, _ = storage.recover(lose_unflushed=False)
    assert [r.value for r in records] == ["v0", "v1", "v2", "v3"]
    assert [segment.base_offset for segment in storage.segments()] == [0, 3]
    assert not (tmp_path / "ktk-0" / "00000000000000000006.index").exists()


def test_reopening_a_directory_finds_the_same_log(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path, segment_bytes=230, index_interval_bytes=45)
    fill(storage, [f"v{i}" for i in range(8)])
    storage.write_checkpoints(5, [EpochEntry(0, 0)])
    reopened = DiskLogStorage(tmp_path, segment_bytes=230, index_interval_bytes=45)
    assert reopened.read() == storage.read()
    assert on_disk_indexes(reopened) == on_disk_indexes(storage)
    assert reopened.recover(lose_unflushed=True)[1] == 5


@DISK_SETTINGS
@given(ops=log_ops, segment_bytes=st.integers(min_value=40, max_value=200))
def test_a_replica_log_on_disk_recovers_exactly_like_one_in_memory(
    ops: list[tuple[str, object]], segment_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        on_disk = ReplicaLog(
            storage=DiskLogStorage(log_dir, segment_bytes=segment_bytes, index_interval_bytes=30)
        )
        in_memory = ReplicaLog()
        epoch = 0
        for name, argument in ops:
            for log in (on_disk, in_memory):
                epoch = apply_log_op(log, name, argument, epoch)
            assert on_disk.records == in_memory.records
            assert on_disk.high_watermark == in_memory.high_watermark
            assert on_disk.epoch_cache.entries == in_memory.epoch_cache.entries
        assert on_disk.storage is not None
        assert [LogRecord(r.offset, r.leader_epoch, r.value) for r in on_disk.storage.read()] == (
            list(on_disk.records)
        )


SCENARIO_FILES = sorted(
    path for path in (EXAMPLES / "scenarios").glob("*") if path.suffix in (".json", ".yaml", ".yml")
)


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[path.stem for path in SCENARIO_FILES])
def test_every_example_scenario_gives_the_same_result_on_disk_as_in_memory(
    path: Path, tmp_path: Path
) -> None:
    scenario = load_scenario(path)
    for mode in MODE_NAMES:
        in_memory = run_scenario(scenario, mode).to_json()
        run_dir = tmp_path / mode

        def disk_storage(
            broker_id: int, run_dir: Path = run_dir, partition: int = 0
        ) -> DiskLogStorage:
            # tiny segments so that the scenarios roll, index and truncate across files
            return DiskLogStorage(
                run_dir / f"broker-{broker_id}",
                partition=partition,
                segment_bytes=64,
                index_interval_bytes=30,
            )

        on_disk = run_scenario(scenario, mode, storage_factory=disk_storage).to_json()
        assert json.dumps(on_disk, sort_keys=True) == json.dumps(in_memory, sort_keys=True)
