"""kafka_format's readers for the rest of a partition directory (indexes, checkpoints,
partition.metadata, file names), the read-only inspection and the replica comparison.

Directories are written by tests/kafka_dirs.py in Kafka's layouts, and Kafka's own segment
files (shared/vectors/record-batches) are inspected in a partition directory named as Kafka
names it; what inspection reports must agree with what Kafka read back from each file.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_dirs import (
    TOPIC_ID,
    batch,
    epoch_batches,
    record_batches_dir,
    snapshot,
    write_log_dir_checkpoints,
    write_partition,
    write_segment,
)

from kafka_format import KafkaFormatError
from kafka_format.checkpoint import (
    EpochEntry,
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
    parse_partition_metadata,
    topic_id_from_string,
)
from kafka_format.compare import compare_replicas, end_offset_for_epoch
from kafka_format.index import (
    build_indexes,
    encode_offset_index,
    encode_time_index,
    parse_offset_index,
    parse_time_index,
    parse_txn_index,
)
from kafka_format.inspect import inspect_log_dir, inspect_partition, inspect_path
from kafka_format.partition_dir import (
    list_log_dir,
    parse_file_name,
    parse_partition_dir_name,
    segment_file_name,
)


def _kinds(findings: object) -> list[str]:
    return [finding.kind for finding in findings]  # type: ignore[attr-defined]


def _clean_partition(tmp_path: Path, epochs: tuple[int, ...] = (0, 0, 1, 1, 1, 3)) -> Path:
    batches = epoch_batches(epochs)
    directory = write_partition(tmp_path, "orders", 0, [batches[:3], batches[3:]])
    end = 2 * len(epochs)
    write_log_dir_checkpoints(
        tmp_path,
        high_watermarks={("orders", 0): end - 2},
        recovery_points={("orders", 0): 6},
        log_start_offsets={("orders", 0): 0},
    )
    return directory


# --- index files --------------------------------------------------------------------------------
def test_offset_index_reads_kafka_layout_relative_to_the_base_offset() -> None:
    data = struct.pack(">ii", 3, 0) + struct.pack(">ii", 9, 4200)
    index = parse_offset_index(data, 1000, source="00000000000000001000.index")
    assert index.entries() == [(1003, 0), (1009, 4200)]
    assert encode_offset_index(index.entries(), 1000) == data


def test_offset_index_drops_preallocated_zero_entries_and_counts_them() -> None:
    data = encode_offset_index([(5, 300), (9, 700)], 0) + bytes(8 * 1000)
    index = parse_offset_index(data, 0)
    assert index.entries() == [(5, 300), (9, 700)]
    assert index.preallocated_entries == 1000
    assert index.partial_bytes == 0


def test_offset_index_counts_a_cut_entry() -> None:
    index = parse_offset_index(encode_offset_index([(5, 300)], 0) + b"\x00\x00\x01", 0)
    assert (len(index), index.partial_bytes) == (1, 3)


def test_time_index_reads_timestamp_then_relative_offset() -> None:
    data = struct.pack(">qi", 1_700_000_000_123, 7)
    index = parse_time_index(data + bytes(24), 50)
    assert index.entries() == [(1_700_000_000_123, 57)]
    assert index.preallocated_entries == 2
    assert encode_time_index(index.entries(), 50) == data


def test_txn_index_reads_aborted_transactions_and_rejects_unknown_versions() -> None:
    entry = struct.pack(">hqqqq", 0, 42, 10, 20, 21)
    [aborted] = parse_txn_index(entry, source="0.txnindex")
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (42, 10, 20)
    with pytest.raises(KafkaFormatError, match=r"0.txnindex: byte 34: aborted_txn.version"):
        parse_txn_index(entry + struct.pack(">hqqqq", 1, 42, 10, 20, 21), source="0.txnindex")


def test_built_indexes_follow_log_segment_recover() -> None:
    batches = [batch(offset, 0) for offset in range(6)]
    size = len(batches[0])
    built = build_indexes(b"".join(batches), 0, index_interval_bytes=size)
    # an entry once more than the interval was passed: every second batch from the third
    assert built.offset_entries == ((2, 2 * size), (4, 4 * size))
    # the time entries come with them, plus the largest timestamp at the end (segment roll)
    assert [offset for _, offset in built.time_entries] == [2, 4, 5]


# --- checkpoints --------------------------------------------------------------------------------
def test_offset_checkpoint_reads_the_text_kafka_writes() -> None:
    text = format_offset_checkpoint([("orders", 0, 12), ("payments-eu", 3, 7)])
    assert text == "0\n2\norders 0 12\npayments-eu 3 7\n"
    assert parse_offset_checkpoint(text) == {("orders", 0): 12, ("payments-eu", 3): 7}


def test_empty_checkpoint_file_has_no_entries() -> None:
    assert parse_offset_checkpoint("") == {}


def test_checkpoint_with_a_wrong_version_line_names_file_line_and_field() -> None:
    with pytest.raises(KafkaFormatError) as raised:
        parse_offset_checkpoint("1\n0\n", source="replication-offset-checkpoint")
    assert str(raised.value) == (
        "replication-offset-checkpoint:1: version: unrecognised version, expected 0 (got 1)"
    )


def test_checkpoint_with_a_non_numeric_offset_names_the_line() -> None:
    with pytest.raises(KafkaFormatError) as raised:
        parse_offset_checkpoint("0\n2\norders 0 12\norders 1 twelve\n", source="cp")
    assert str(raised.value) == "cp:4: offset: malformed line: not an int64 (got 'twelve')"


def test_checkpoint_whose_count_disagrees_with_its_lines_is_an_error() -> None:
    with pytest.raises(KafkaFormatError, match=r"cp:2: count: expected 3 entries, found 1"):
        parse_offset_checkpoint("0\n3\norders 0 12\n", source="cp")


def test_leader_epoch_checkpoint_reads_epoch_and_start_offset() -> None:
    text = format_leader_epoch_checkpoint([(0, 0), (4, 120)])
    assert text == "0\n2\n0 0\n4 120\n"
    assert parse_leader_epoch_checkpoint(text) == (EpochEntry(0, 0), EpochEntry(4, 120))
    with pytest.raises(KafkaFormatError, match=r"lec:3: malformed line"):
        parse_leader_epoch_checkpoint("0\n1\n0 0 9\n", source="lec")


def test_partition_metadata_reads_the_topic_id_as_kafka_prints_it() -> None:
    text = format_partition_metadata(TOPIC_ID)
    assert text == "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"
    assert parse_partition_metadata(text).topic_id == TOPIC_ID
    assert topic_id_from_string("AQIDBAUGBwgJCgsMDQ4PEA==") == TOPIC_ID


def test_partition_metadata_rejects_the_zero_uuid_and_bad_lines() -> None:
    with pytest.raises(KafkaFormatError, match="zero uuid"):
        parse_partition_metadata("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(KafkaFormatError, match=r"pm:2: topic_id: malformed line"):
        parse_partition_metadata("version: 0\ntopicid: x", source="pm")


def test_meta_properties_are_read_as_key_value_lines() -> None:
    text = "#\n#Mon Nov 24 00:00:00 UTC 2026\nnode.id=1\nversion=1\ncluster.id=abc\n"
    assert parse_meta_properties(text) == {"cluster.id": "abc", "node.id": "1", "version": "1"}


# --- names --------------------------------------------------------------------------------------
def test_file_names_follow_log_file_utils() -> None:
    assert segment_file_name(170, "index") == "00000000000000000170.index"
    assert parse_file_name("00000000000000000170.log").kind == "log"  # type: ignore[union-attr]
    assert parse_file_name("00000000000000000170.log.swap").state == "swap"  # type: ignore[union-attr]
    assert parse_file_name("0170.log") is None
    assert parse_file_name("99999999999999999999.log") is None  # above Long.MAX_VALUE
    assert parse_partition_dir_name("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir_name("orders-01") is None


def test_log_dir_listing_separates_partitions_checkpoints_and_moved_dirs(tmp_path: Path) -> None:
    for name in ("orders-10", "orders-2", "orders-0.abc-delete", "lost+found"):
        (tmp_path / name).mkdir()
    (tmp_path / "replication-offset-checkpoint").write_text("0\n0\n")
    listing = list_log_dir(tmp_path)
    assert [path.name for path in listing.partitions] == ["orders-2", "orders-10"]
    assert list(listing.checkpoints) == ["replication-offset-checkpoint"]
    assert [path.name for path in listing.special_dirs] == ["orders-0.abc-delete"]
    assert [path.name for path in listing.others] == ["lost+found"]


# --- inspection ---------------------------------------------------------------------------------
def test_clean_partition_dir_reports_segments_offsets_and_checkpoints(tmp_path: Path) -> None:
    report = inspect_partition(_clean_partition(tmp_path))
    assert report.problems == () and report.notes == ()
    assert (report.topic, report.partition, report.topic_id) == (
        "orders",
        0,
        "AQIDBAUGBwgJCgsMDQ4PEA",
    )
    assert [
        (s.base_offset, s.batch_count, s.first_offset, s.last_offset) for s in report.segments
    ] == [
        (0, 3, 0, 5),
        (6, 3, 6, 11),
    ]
    assert report.log_end_offset == report.valid_log_end_offset == 12
    assert (report.high_watermark, report.recovery_point, report.log_start_offset) == (10, 6, 0)
    assert (
        report.leader_epoch_cache
        == report.epochs_in_log
        == (
            EpochEntry(0, 0),
            EpochEntry(1, 4),
            EpochEntry(3, 10),
        )
    )
    first = report.segments[0]
    assert first.offset_index is not None and first.offset_index.entries == 2
    assert first.offset_index.first_entry == (3, len(batch(0, 0, 2)))
    assert first.first_timestamp == 1_700_000_000_000
    assert first.max_timestamp == first.last_timestamp == 1_700_000_000_005


def test_kafka_written_segments_inspect_as_kafka_read_them(tmp_path: Path) -> None:
    checked = 0
    for log in sorted(record_batches_dir().glob("*.log")):
        expected = json.loads(log.with_suffix(".json").read_text())["kafka_read"]
        batches = expected["batches"]
        base = batches[0]["base_offset"]
        directory = tmp_path / f"{log.stem}-0"
        directory.mkdir()
        shutil.copyfile(log, directory / segment_file_name(base, "log"))
        report = inspect_partition(directory)
        [segment] = report.segments
        assert segment.batch_count == expected["batch_count"], log.name
        assert segment.trailing_bytes == expected["trailing_bytes"], log.name
        assert report.log_end_offset == batches[-1]["next_offset"], log.name
        assert list(segment.crc_failures) == [b["position"] for b in batches if not b["is_valid"]]
        overflow = [b for b in batches if b["last_offset"] - base > 2**31 - 1]
        starts = [b["base_offset"] if b["magic"] >= 2 else b["last_offset"] for b in batches]
        backwards = [
            n for n in range(1, len(batches)) if starts[n] <= batches[n - 1]["last_offset"]
        ]
        wanted = (
            ["crc-mismatch"] * len(segment.crc_failures)
            + ["truncated-tail"] * (expected["trailing_bytes"] > 0)
            + ["offset-out-of-segment"] * len(overflow)
            + ["offsets-not-increasing"] * len(backwards)
        )
        assert sorted(_kinds(report.problems)) == sorted(wanted), log.name
        checked += 1
    assert checked > 0


def test_corrupt_batch_in_the_middle_is_reported_and_the_rest_still_read(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    log = directory / segment_file_name(0, "log")
    data = bytearray(log.read_bytes())
    second = len(batch(0, 0, 2))
    data[second + 70] ^= 0x01  # a byte of the second batch's records
    log.write_bytes(bytes(data))
    report = inspect_partition(directory)
    [problem] = report.problems
    assert problem.kind == "crc-mismatch"
    assert (problem.position, problem.field) == (second + 17, "batch.crc")
    assert str(problem).startswith(f"{log}: byte {second + 17}: batch.crc: Record is corrupt")
    assert report.segments[0].crc_failures == (second,)
    assert [s.batch_count for s in report.segments] == [3, 3]  # read on past it
    assert report.log_end_offset == 12 and report.valid_log_end_offset == 2


def test_truncated_tail_reports_how_many_bytes(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    log = directory / segment_file_name(6, "log")
    data = log.read_bytes()
    log.write_bytes(data[:-30])
    report = inspect_partition(directory)
    # the indexes still name the cut batch: its position is no batch now, its offset past the end
    assert _kinds(report.problems) == ["truncated-tail", "index-not-at-batch", "index-past-end"]
    cut = report.segments[1]
    assert cut.trailing_bytes == len(batch(10, 3, 2)) - 30
    assert report.problems[0].position == len(data) - len(batch(10, 3, 2))
    assert report.log_end_offset == 10


def test_index_entry_pointing_past_the_end_of_the_segment(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    index = directory / segment_file_name(0, "index")
    entries = parse_offset_index(index.read_bytes(), 0).entries()
    index.write_bytes(encode_offset_index([*entries[:-1], (5, 100_000)], 0))
    report = inspect_partition(directory)
    [past] = report.problems
    assert (past.kind, past.source, past.field) == ("index-past-end", str(index), "index.position")
    assert past.position == 8 * (len(entries) - 1)


def test_index_entry_not_at_a_batch_start_and_offsets_not_increasing(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    index = directory / segment_file_name(0, "index")
    (offset, position), *_ = parse_offset_index(index.read_bytes(), 0).entries()
    index.write_bytes(encode_offset_index([(offset, position + 1), (offset, position)], 0))
    kinds = _kinds(inspect_partition(directory).problems)
    assert "index-not-at-batch" in kinds and "index-not-increasing" in kinds


def test_time_index_not_monotonic(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    time_index = directory / segment_file_name(0, "timeindex")
    entries = parse_time_index(time_index.read_bytes(), 0).entries()
    assert len(entries) == 2
    (first_ts, first_offset), (second_ts, second_offset) = entries
    time_index.write_bytes(
        encode_time_index([(second_ts, first_offset), (first_ts, second_offset)], 0)
    )
    report = inspect_partition(directory)
    assert "time-index-not-monotonic" in _kinds(report.problems)
    [found] = [f for f in report.problems if f.kind == "time-index-not-monotonic"]
    assert (found.position, found.field) == (12, "timeindex.timestamp")


def test_index_larger_than_its_segment_can_justify(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    directory.mkdir()
    write_segment(directory, 0, [batch(0, 0)], indexes=False)
    (directory / segment_file_name(0, "index")).write_bytes(
        encode_offset_index([(0, 0), (1, 90), (2, 180)], 0)
    )
    report = inspect_partition(directory)
    assert "index-too-large" in _kinds(report.problems)


def test_index_with_a_cut_entry_is_a_problem_at_the_cut(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    index = directory / segment_file_name(0, "index")
    data = index.read_bytes()
    index.write_bytes(data + b"\x00\x00\x00")
    [cut] = inspect_partition(directory).problems
    assert (cut.kind, cut.position) == ("index-partial-entry", len(data))


def test_zero_entries_in_a_rolled_segment_index_are_a_problem(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    index = directory / segment_file_name(0, "index")
    index.write_bytes(index.read_bytes() + bytes(8 * 10))
    [found] = inspect_partition(directory).problems
    assert found.kind == "index-too-large"
    assert "not the active one" in found.message


def test_preallocated_index_of_the_active_segment_is_a_note(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    for kind, size in (("index", 8), ("timeindex", 12)):
        path = directory / segment_file_name(6, kind)
        path.write_bytes(path.read_bytes() + bytes(size * 100))
    report = inspect_partition(directory)
    assert report.problems == ()
    assert _kinds(report.notes) == ["preallocated-index", "preallocated-index"]
    assert report.segments[1].offset_index.preallocated_entries == 100  # type: ignore[union-attr]


def test_files_kafka_cleans_up_on_load_are_notes(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    for name in (
        "00000000000000000000.log.deleted",
        "00000000000000000006.index.cleaned",
        "00000000000000000006.log.swap",
        "00000000000000000012.index",  # no 00000000000000000012.log: an orphan
        "00000000000000000012.snapshot",
    ):
        (directory / name).write_bytes(b"")
    report = inspect_partition(directory)
    assert report.problems == ()
    assert sorted(_kinds(report.notes)) == [
        "leftover-file",
        "leftover-file",
        "leftover-file",
        "orphan-index",
    ]
    assert report.snapshots == (12,)
    assert report.log_end_offset == 12


def test_unknown_magic_is_reported_at_the_magic_byte(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    directory.mkdir()
    data = bytearray(batch(0, 0) + batch(1, 0))
    data[len(batch(0, 0)) + 16] = 7
    write_segment(directory, 0, [bytes(data)], indexes=False)
    report = inspect_partition(directory)
    [magic] = [f for f in report.problems if f.kind == "unknown-magic"]
    assert (magic.position, magic.field) == (len(batch(0, 0)) + 16, "batch.magic")


def test_bad_checkpoints_are_reported_with_their_line_not_raised(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    (tmp_path / "replication-offset-checkpoint").write_text("1\n1\norders 0 10\n")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\norders 0 ten\n")
    (directory / "leader-epoch-checkpoint").write_text("0\n1\nzero 0\n")
    report = inspect_path(tmp_path)
    texts = sorted(str(f) for f in report.all_findings if f.kind == "bad-checkpoint")
    assert texts == sorted(
        [
            f"{tmp_path / 'replication-offset-checkpoint'}:1: version: unrecognised version, "
            "expected 0 (got 1)",
            f"{tmp_path / 'recovery-point-offset-checkpoint'}:3: offset: malformed line: not "
            "an int64 (got 'ten')",
            f"{directory / 'leader-epoch-checkpoint'}:3: epoch: malformed line: not an int32 "
            "(got 'zero')",
        ]
    )
    [partition] = report.partitions
    assert partition.high_watermark is None and partition.log_start_offset == 0
    assert partition.segments[1].batch_count == 3  # the rest is still inspected


def test_checkpointed_high_watermark_past_the_log_end_is_a_problem(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    write_log_dir_checkpoints(tmp_path, high_watermarks={("orders", 0): 20})
    assert _kinds(inspect_partition(directory).problems) == [
        "hw-past-end",
        "recovery-point-past-end",
    ]


def test_leader_epoch_cache_disagreeing_with_the_batches(tmp_path: Path) -> None:
    batches = epoch_batches((0, 0, 2, 2))
    directory = write_partition(tmp_path, "orders", 0, [batches], epochs=[(0, 0), (1, 4)])
    [problem] = inspect_partition(directory).problems
    assert problem.kind == "epoch-cache-mismatch"
    assert "offset 4 has epoch 2, the cache says 1" in problem.message


def test_leader_epoch_cache_entries_must_increase(tmp_path: Path) -> None:
    batches = epoch_batches((0, 2))
    directory = write_partition(tmp_path, "orders", 0, [batches], epochs=[(0, 0), (2, 2)])
    (directory / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n2 2\n1 3\n")
    report = inspect_partition(directory)
    [order] = [f for f in report.problems if f.kind == "epoch-cache-not-increasing"]
    assert order.line == 5
    assert "epoch-cache-mismatch" not in _kinds(report.problems)  # offsets 2..3 still epoch 2


def test_unframeable_batch_stops_the_segment_and_is_reported(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    directory.mkdir()
    first = batch(0, 0)
    broken = bytearray(batch(1, 0))
    broken[8:12] = struct.pack(">i", 3)  # a batch length below any batch's
    write_segment(directory, 0, [first, bytes(broken), batch(2, 0)], indexes=False)
    report = inspect_partition(directory)
    [unreadable] = report.problems
    assert (unreadable.kind, unreadable.position, unreadable.field) == (
        "unreadable-batch",
        len(first) + 8,
        "batch.length",
    )
    assert report.segments[0].batch_count == 1
    assert report.segments[0].trailing_bytes == len(broken) + len(batch(2, 0))


def test_epoch_cache_clipped_at_the_log_start_offset_is_not_a_mismatch(tmp_path: Path) -> None:
    batches = epoch_batches((0, 0, 1, 1))  # offsets 0..7; records deleted below offset 3
    directory = write_partition(tmp_path, "orders", 0, [batches], epochs=[(0, 3), (1, 4)])
    assert inspect_partition(directory).problems == ()  # no log start checkpoint: cache bound
    write_log_dir_checkpoints(
        tmp_path, high_watermarks={("orders", 0): 8}, log_start_offsets={("orders", 0): 3}
    )
    assert inspect_partition(directory).problems == ()
    write_log_dir_checkpoints(
        tmp_path, high_watermarks={("orders", 0): 8}, log_start_offsets={("orders", 0): 0}
    )
    assert _kinds(inspect_partition(directory).problems) == ["epoch-cache-mismatch"]


def test_log_dir_inspects_every_partition_with_the_root_checkpoints(tmp_path: Path) -> None:
    write_partition(tmp_path, "orders", 0, [epoch_batches((0, 1))])
    write_partition(tmp_path, "orders", 1, [epoch_batches((0,))])
    write_log_dir_checkpoints(tmp_path, high_watermarks={("orders", 0): 4, ("orders", 1): 1})
    (tmp_path / "meta.properties").write_text("node.id=3\nversion=1\n")
    (tmp_path / "orders-2.0123456789abcdef0123456789abcdef-delete").mkdir()
    report = inspect_log_dir(tmp_path)
    assert [(p.partition, p.log_end_offset, p.high_watermark) for p in report.partitions] == [
        (0, 4, 4),
        (1, 2, 1),
    ]
    assert report.meta_properties == {"node.id": "3", "version": "1"}
    assert report.ok and _kinds(report.findings) == ["special-dir"]
    assert report.verdict() == "OK: 2 partitions, no problems (1 note)"


def test_log_dir_inspection_reports_progress_per_partition(tmp_path: Path) -> None:
    for partition in range(3):
        write_partition(tmp_path, "orders", partition, [epoch_batches((0,))])
    calls: list[tuple[int, int]] = []
    inspect_path(tmp_path, lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_partition_dir_given_as_dot_still_finds_its_topic_and_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _clean_partition(tmp_path)
    monkeypatch.chdir(directory)
    report = inspect_path(Path("."))
    [partition] = report.partitions
    assert (partition.topic, partition.partition, partition.high_watermark) == ("orders", 0, 10)


def test_inspection_writes_nothing_into_the_directory(tmp_path: Path) -> None:
    directory = _clean_partition(tmp_path)
    log = directory / segment_file_name(6, "log")
    log.write_bytes(log.read_bytes()[:-7])  # something recovery would truncate
    other = write_partition(tmp_path / "b", "orders", 0, [epoch_batches((0, 2))])
    before = snapshot(tmp_path)
    inspect_path(tmp_path)
    inspect_path(directory)
    compare_replicas([directory, other])
    assert snapshot(tmp_path) == before


_FILES = (
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000000.txnindex",
    "00000000000000000006.log",
    "00000000000000000006.index",
    "00000000000000000006.timeindex",
    "leader-epoch-checkpoint",
    "partition.metadata",
    "../replication-offset-checkpoint",
    "../log-start-offset-checkpoint",
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(_FILES),
    cut=st.integers(0, 400),
    noise=st.binary(min_size=0, max_size=64),
    at=st.integers(0, 500),
)
def test_damaged_files_are_findings_never_exceptions(
    tmp_path_factory: pytest.TempPathFactory, name: str, cut: int, noise: bytes, at: int
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    directory = _clean_partition(root)
    target = directory / name
    data = bytearray(
        target.read_bytes() if target.exists() else struct.pack(">hqqqq", 0, 7, 0, 1, 2)
    )
    data[min(at, len(data)) : min(at, len(data)) + len(noise)] = noise
    target.write_bytes(bytes(data[: max(len(data) - cut, 0)]))
    report = inspect_path(root)
    for finding in report.all_findings:
        assert str(finding).startswith(str(root))
    compare_replicas([directory, directory])


def test_missing_directory_and_non_kafka_directory_are_errors(tmp_path: Path) -> None:
    with pytest.raises(KafkaFormatError, match=r"nowhere: no such directory"):
        inspect_path(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(KafkaFormatError, match="neither a partition directory"):
        inspect_path(tmp_path)


# --- comparison ---------------------------------------------------------------------------------
def _replicas(tmp_path: Path, *logs: list[bytes]) -> list[Path]:
    return [
        write_partition(tmp_path / f"broker-{number}", "orders", 0, [batches])
        for number, batches in enumerate(logs)
    ]


def test_replicas_diverging_after_an_unclean_election(tmp_path: Path) -> None:
    common = epoch_batches((0, 0, 1))  # offsets 0..5
    old_leader = common + epoch_batches((1, 1), start=6)  # kept writing in epoch 1: 6..9
    new_leader = common + epoch_batches((2,), start=6)  # elected uncleanly in epoch 2: 6..7
    comparison = compare_replicas(_replicas(tmp_path, old_leader, new_leader))
    [pair] = comparison.pairs
    assert pair.relation == "diverged"
    assert pair.divergence is not None
    assert (pair.divergence.offset, pair.divergence.reason) == (6, "leader_epoch")
    assert pair.divergence.epochs == (1, 2)
    assert pair.divergence.cache_epochs == (1, 2)
    assert pair.agreed_until == 6
    # following the new leader, the old one truncates to where epoch 1 ended there (6); the
    # old leader never had epoch 2, so Kafka falls back to the high watermark the other way
    assert pair.truncation == (6, None)
    assert [r.log_end_offset for r in comparison.replicas] == [10, 8]
    assert comparison.diverged and comparison.first_divergence == 6


def test_replica_behind_is_a_prefix(tmp_path: Path) -> None:
    full = epoch_batches((0, 1, 1, 2))
    comparison = compare_replicas(_replicas(tmp_path, full, full[:2], full))
    relations = [(p.first, p.second, p.relation, p.shorter) for p in comparison.pairs]
    assert relations == [(0, 1, "prefix", 1), (0, 2, "identical", None), (1, 2, "prefix", 1)]
    assert not comparison.diverged
    assert comparison.pairs[0].agreed_until == 4


def test_replicas_differing_in_content_only(tmp_path: Path) -> None:
    one = [batch(0, 0), batch(1, 0, value=b"a")]
    two = [batch(0, 0), batch(1, 0, value=b"b")]
    [pair] = compare_replicas(_replicas(tmp_path, one, two)).pairs
    assert (pair.relation, pair.divergence.offset, pair.divergence.reason) == (  # type: ignore[union-attr]
        "diverged",
        1,
        "content",
    )


def test_replica_with_a_corrupt_copy_of_a_batch(tmp_path: Path) -> None:
    batches = epoch_batches((0, 0, 1))
    good, bad = _replicas(tmp_path, batches, batches)
    log = bad / segment_file_name(0, "log")
    data = bytearray(log.read_bytes())
    data[len(batches[0]) + 100] ^= 0x01  # inside the second batch's records
    log.write_bytes(bytes(data))
    [pair] = compare_replicas([good, bad]).pairs
    assert pair.divergence is not None
    assert (pair.divergence.offset, pair.divergence.reason) == (2, "crc_failure")


def test_retention_on_one_replica_only_compares_the_common_range(tmp_path: Path) -> None:
    full = epoch_batches((0, 0, 1, 1))
    short = tmp_path / "broker-1"
    directory = write_partition(short, "orders", 0, [full[2:]], epochs=[(1, 4)])
    [pair] = compare_replicas([_replicas(tmp_path, full)[0], directory]).pairs
    assert (pair.relation, pair.compared_from, pair.agreed_until) == ("identical", 4, 8)


def test_end_offset_for_epoch_is_the_start_of_the_next_epoch() -> None:
    cache = [EpochEntry(0, 0), EpochEntry(3, 40)]
    assert end_offset_for_epoch(cache, 55, 3) == (3, 55)
    assert end_offset_for_epoch(cache, 55, 2) == (0, 40)
    assert end_offset_for_epoch(cache, 55, 4) == (-1, -1)


def test_compare_needs_two_existing_directories(tmp_path: Path) -> None:
    [one] = _replicas(tmp_path, epoch_batches((0,)))
    with pytest.raises(KafkaFormatError, match="at least two"):
        compare_replicas([one])
    with pytest.raises(KafkaFormatError, match="missing: no such directory"):
        compare_replicas([one, tmp_path / "missing"])
    with pytest.raises(KafkaFormatError, match="not a partition directory"):
        compare_replicas([one, tmp_path])
