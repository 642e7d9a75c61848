"""`--from segments`: __consumer_offsets .log files decoded from their bytes give the traces the
dump-log and formatter importers give for the same history; bad bytes are named by file, byte
and field."""

from __future__ import annotations

import importlib.util
import json
import struct
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from assignors.errors import InputError
from assignors.traces.importers import (
    ImportOptions,
    import_dump_log,
    import_formatter,
    import_history,
    import_segments,
    segment_files,
)
from kafka_format import (
    Compression,
    ControlRecordType,
    NewRecord,
    build_batch,
    build_end_txn_marker_batch,
    build_legacy_entry,
    iter_batches,
)
from ktk.cli import app
from ktkbase.errors import InputError as BaseInputError

FIXTURES = EXAMPLES / "importers"
SEGMENT = FIXTURES / "00000000000000000000.log"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("segment_examples", FIXTURES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def dump_log_rows() -> tuple[dict[str, Any], ...]:
    return import_dump_log([("dump-log.txt", (FIXTURES / "dump-log.txt").read_text())]).rows


def segment_rows(data: bytes, **options: Any) -> Any:
    return import_segments([("0.log", data)], options=ImportOptions(**options))


def batches(data: bytes) -> list[tuple[int, int]]:
    """(position, size) of each batch of a segment."""
    return [(batch.position, batch.size_in_bytes) for batch in iter_batches(data)]


def record_batch(
    records: list[tuple[bytes, bytes | None]], base_offset: int = 100, **kw: Any
) -> bytes:
    return build_batch(
        [NewRecord(key, value, timestamp=GEN.T0 + 900_000) for key, value in records],
        base_offset=base_offset,
        **kw,
    )


def encoded(record: Any) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes) of a record of the example generator."""
    (_, _, key), _, _, value = record
    return key, value


def payments_value(generation: int) -> bytes:
    members = [
        (GEN.M1, "pod-1", "/10.1.0.11", [], -1, GEN.G1[GEN.M1]),
        (GEN.M2, "pod-2", "/10.1.0.12", [], -1, GEN.G1[GEN.M2]),
    ]
    return encoded(GEN.payments_generation(generation, GEN.T0, members))[1]


def by_trace(rows: Any) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        traces.setdefault(row["trace_id"], []).append(row)
    return traces


# ---------------------------------------------------------------------------------------------
# the same history as the text importers


def test_example_segment_gives_the_same_rows_as_its_dump_log() -> None:
    result = import_segments([(str(SEGMENT), SEGMENT.read_bytes())])
    assert result.rows == dump_log_rows()
    assert [str(note) for note in result.skipped] == [
        f"{SEGMENT}: byte 689: group connect-sink skipped: protocol type 'connect' is not "
        "'consumer'",
        f"{SEGMENT}: byte 3398: record type 17 at offset 8 skipped: it carries nothing a trace "
        "uses (share or streams groups, regular expressions, or a type ktk does not know)",
        f"{SEGMENT}: byte 6207: group reports: deleted (tombstone); later records start a new "
        "trace",
    ]


def test_example_segment_classic_groups_match_the_formatter_import() -> None:
    from_segment = by_trace(import_segments([("0.log", SEGMENT.read_bytes())]).rows)
    from_formatter = by_trace(
        import_formatter([("f.json", (FIXTURES / "formatter.json").read_text())]).rows
    )
    assert sorted(from_formatter) == ["payments", "reports", "reports#2"]
    for trace_id, rows in from_formatter.items():
        assert [{**row, "timestamp_ms": None} for row in from_segment[trace_id]] == [
            {**row, "timestamp_ms": None} for row in rows
        ]


def test_cli_segments_import_writes_the_dump_log_traces(tmp_path: Path) -> None:
    runner = CliRunner()
    outcome = runner.invoke(
        app,
        ["traces", "import", "--from", "segments", str(SEGMENT), "--out", str(tmp_path / "s")],
    )
    assert outcome.exit_code == 0, outcome.output
    assert "4 traces, 10 generations" in outcome.stdout
    dump = runner.invoke(
        app,
        [
            "traces",
            "import",
            "--from",
            "dump-log",
            str(FIXTURES / "dump-log.txt"),
            "--out",
            str(tmp_path / "d"),
        ],
    )
    assert dump.exit_code == 0, dump.output

    def rows(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()]

    assert rows(tmp_path / "s" / "segments-00000000000000000000.jsonl") == rows(
        tmp_path / "d" / "dump-log-dump-log.jsonl"
    )


def test_gzip_compressed_batches_decode_to_the_same_rows() -> None:
    data = SEGMENT.read_bytes()
    rebuilt = b""
    for batch in iter_batches(data):
        records = batch.records()
        rebuilt += build_batch(
            [NewRecord(r.key, r.value, timestamp=r.timestamp) for r in records],
            base_offset=batch.base_offset,
            compression=Compression.GZIP,
        )
    assert segment_rows(rebuilt).rows == dump_log_rows()


def test_directory_is_read_partition_by_partition_in_base_offset_order(tmp_path: Path) -> None:
    data = SEGMENT.read_bytes()
    cut = batches(data)[8][0]  # a batch boundary
    partition = tmp_path / "__consumer_offsets-10"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(data[:cut])
    (partition / "00000000000000000008.log").write_bytes(data[cut:])
    (partition / "00000000000000000004.log.deleted").write_bytes(b"junk")
    (partition / "00000000000000000000.index").write_bytes(b"junk")
    (tmp_path / "__consumer_offsets-9").mkdir()
    (tmp_path / "__consumer_offsets-9" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "__consumer_offsets-3.0f3c-delete").mkdir()
    (tmp_path / "__consumer_offsets-3.0f3c-delete" / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "server.log").write_text("not a segment")
    files = segment_files([tmp_path])
    assert [file.relative_to(tmp_path).as_posix() for file in files] == [
        "__consumer_offsets-9/00000000000000000000.log",
        "__consumer_offsets-10/00000000000000000000.log",
        "__consumer_offsets-10/00000000000000000008.log",
    ]
    result = import_history("segments", [(str(file), file.read_bytes()) for file in files])
    assert result.rows == dump_log_rows()


def test_offset_commits_are_passed_over_without_decoding_their_values() -> None:
    commits = [
        (struct.pack(">h", version) + GEN.string("payments") + GEN.string("t") + b"\0\0\0\1", b"?")
        for version in (0, 1)
        for _ in range(40)
    ]
    data = SEGMENT.read_bytes() + record_batch(commits)
    result = segment_rows(data)
    assert result.rows == dump_log_rows()
    assert len(result.skipped) == 3  # the example's own notes


def test_control_batches_are_skipped_with_one_note() -> None:
    marker = build_end_txn_marker_batch(
        initial_offset=50,
        timestamp=GEN.T0,
        partition_leader_epoch=0,
        producer_id=7,
        producer_epoch=0,
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=1,
    )
    data = SEGMENT.read_bytes()
    result = segment_rows(marker + data + marker)
    assert result.rows == dump_log_rows()
    assert str(result.skipped[0]) == (
        "0.log: byte 0: 2 control batch(es) (transaction markers) skipped: they hold no group "
        "records"
    )


def test_group_metadata_value_versions_0_and_4_decode() -> None:
    sub = GEN.encode_subscription(GEN.REPORT_SUB)
    asg = GEN.encode_assignment(
        GEN.MemberAssignment((GEN.TP("reports-input", 0), GEN.TP("reports-input", 1)), None, 1)
    )
    key = struct.pack(">h", 2) + GEN.string("old")
    v0 = (
        GEN.i16(0) + GEN.string("consumer") + GEN.i32(3) + GEN.string("range") + GEN.string("a")
        + GEN.i32(1) + GEN.string("a") + GEN.string("client") + GEN.string("/h") + GEN.i32(10)
        + GEN.nbytes(sub) + GEN.nbytes(asg)
    )  # fmt: skip

    def cbytes(raw: bytes) -> bytes:
        return GEN.uvarint(len(raw) + 1) + raw

    v4 = (
        GEN.i16(4) + GEN.cstring("consumer") + GEN.i32(4) + GEN.cstring("range")
        + GEN.cstring("a") + GEN.i64(GEN.T0) + GEN.uvarint(2) + GEN.cstring("a")
        + GEN.cstring("pod-a") + GEN.cstring("client") + GEN.cstring("/h") + GEN.i32(5)
        + GEN.i32(10) + cbytes(sub) + cbytes(asg) + GEN.TAGS
        + GEN.uvarint(1) + GEN.uvarint(9) + GEN.uvarint(2) + b"zz"  # an unknown tagged field
    )  # fmt: skip
    rows = segment_rows(record_batch([(key, v0), (key, v4)])).rows
    assert [(row["generation"], row["members"][0]["instance_id"]) for row in rows] == [
        (3, None),
        (4, "pod-a"),
    ]
    assert rows[1]["timestamp_ms"] == GEN.T0
    assert rows[0]["members"][0]["assigned"] == [["reports-input", 0], ["reports-input", 1]]


def test_target_assignment_timestamp_tag_dates_the_generation() -> None:
    group = "orders-848"
    records = [
        encoded(GEN.member_record(group, GEN.K1, "c", "/h", ["orders"], "uniform")),
        encoded(GEN.topics_record(group, [(GEN.ORDERS, "orders", 2)])),
        encoded(GEN.target_member(group, GEN.K1, [(GEN.ORDERS, [0, 1])])),
    ]
    epoch = GEN.kip848_key(6, group)[2]
    tagged = GEN.i16(0) + GEN.i32(1) + GEN.uvarint(1) + GEN.uvarint(0) + GEN.uvarint(8)
    rows = segment_rows(record_batch([*records, (epoch, tagged + GEN.i64(GEN.T0 + 42))])).rows
    assert [(row["generation"], row["timestamp_ms"]) for row in rows] == [(1, GEN.T0 + 42)]
    assert rows[0]["members"][0]["assigned"] == [["orders", 0], ["orders", 1]]


# ---------------------------------------------------------------------------------------------
# bad bytes: one error naming file, byte and field; --skip-bad-records reads the rest


def test_cut_segment_names_the_byte_where_the_last_whole_batch_ends() -> None:
    data = SEGMENT.read_bytes()
    last_start = batches(data)[-1][0]
    with pytest.raises(BaseInputError) as caught:
        list(segment_rows(data[:-5]).rows)
    assert str(caught.value).startswith(f"0.log: byte {last_start}: batch: the segment ends inside")
    result = segment_rows(data[:-5], strict=False)
    assert result.rows == tuple(row for row in dump_log_rows() if row["trace_id"] != "reports#2")
    assert f"0.log: byte {last_start}: the cut batch skipped" in str(result.skipped[-1])


def test_batch_with_a_bad_crc_names_its_crc_field() -> None:
    data = bytearray(SEGMENT.read_bytes())
    position, _ = batches(bytes(data))[4]  # payments generation 2
    data[position + 100] ^= 0xFF
    with pytest.raises(BaseInputError) as caught:
        segment_rows(bytes(data))
    assert str(caught.value).startswith(
        f"0.log: byte {position + 17}: batch.crc: Record is corrupt"
    )
    result = segment_rows(bytes(data), strict=False)
    assert [row["generation"] for row in by_trace(result.rows)["payments"]] == [1, 3, 4]
    assert any(
        f"byte {position}: batch at offset 5 skipped: byte {position + 17}: batch.crc" in str(note)
        for note in result.skipped
    )


def test_record_whose_value_does_not_decode_names_file_byte_and_field() -> None:
    value = payments_value(9)
    cut = value[:-10]
    data = SEGMENT.read_bytes() + record_batch([(GEN.group_key("payments")[2], cut)])
    value_start = data.rindex(cut)
    assignment = len(GEN.encode_assignment(GEN.pay_asg(GEN.G1[GEN.M2])))
    field_start = value_start + len(value) - 4 - assignment
    with pytest.raises(InputError) as caught:
        segment_rows(data)
    assert str(caught.value) == (
        f"0.log: byte {field_start}: value.members[1].assignment: truncated: {assignment} bytes "
        f"needed, {assignment - 10} left"
    )
    result = segment_rows(data, strict=False)
    assert result.rows == dump_log_rows()
    assert "record at offset 100 skipped: byte" in str(result.skipped[-1])


def test_value_version_ktk_does_not_know_is_an_error() -> None:
    key = GEN.kip848_key(3, "g")[2]
    with pytest.raises(
        InputError,
        match=r"value\.version: value version not known for record "
        r"type 3 \(ktk reads 0-0\) \(got 1\)",
    ):
        segment_rows(record_batch([(key, GEN.i16(1) + GEN.i32(1) + GEN.TAGS)]))


def test_group_filter_leaves_other_groups_values_undecoded() -> None:
    bad = (GEN.group_key("elsewhere")[2], b"\x00\x03\xff")
    data = SEGMENT.read_bytes() + record_batch([bad])
    with pytest.raises(InputError):
        segment_rows(data)
    result = segment_rows(data, groups=frozenset({"payments"}))
    assert result.rows == tuple(row for row in dump_log_rows() if row["trace_id"] == "payments")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["traces", "import", "--from", "segments", *args])


def test_cli_bad_segment_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "00000000000000000000.log"
    data = SEGMENT.read_bytes()
    bad.write_bytes(data + record_batch([(GEN.group_key("payments")[2], payments_value(9)[:-10])]))
    outcome = invoke(str(bad), "--out", str(tmp_path / "out"))
    assert outcome.exit_code == 2
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "byte" in lines[0] and "value.members[1].assignment" in lines[0]
    assert str(bad) in lines[0]
    assert not (tmp_path / "out").exists()
    skipping = invoke(str(bad), "--out", str(tmp_path / "out"), "--skip-bad-records")
    assert skipping.exit_code == 0, skipping.output
    assert "4 traces, 10 generations" in skipping.stdout
    assert "record at offset 100 skipped" in skipping.stderr


def test_cli_directory_without_segments_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    outcome = invoke(str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert outcome.exit_code == 2
    assert "no segment files (<base offset>.log) under" in outcome.stderr


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, SEGMENT.stat().st_size - 1), st.integers(0, 255)),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, SEGMENT.stat().st_size),
    st.booleans(),
)
def test_damaged_segments_give_rows_or_one_input_error_never_a_crash(
    changes: list[tuple[int, int]], length: int, strict: bool
) -> None:
    data = bytearray(SEGMENT.read_bytes())
    for position, byte in changes:
        data[position] = byte
    try:
        segment_rows(bytes(data[:length]), strict=strict)
    except BaseInputError as error:
        assert "0.log" in str(error)


def test_damaged_records_with_valid_crcs_give_rows_or_one_input_error() -> None:
    """Bytes changed inside the records, the CRC recomputed: only the decoders stand guard."""
    import random

    rng = random.Random(3)
    original = SEGMENT.read_bytes()
    for _ in range(200):
        data = original
        rebuilt = b""
        for batch in iter_batches(data):
            records = []
            for record in batch.records():
                value = record.value
                if value is not None and rng.random() < 0.3:
                    mutable = bytearray(value)
                    for _ in range(rng.randint(1, 3)):
                        mutable[rng.randrange(len(mutable))] = rng.randrange(256)
                    value = bytes(
                        mutable[: rng.randint(0, len(mutable))] if rng.random() < 0.2 else mutable
                    )
                records.append(NewRecord(record.key, value, timestamp=record.timestamp))
            rebuilt += build_batch(records, base_offset=batch.base_offset)
        for strict in (True, False):
            try:
                segment_rows(rebuilt, strict=strict)
            except BaseInputError as error:
                assert str(error).startswith("0.log: byte ")


def test_huge_partition_count_in_topic_metadata_is_refused_without_allocating_per_partition() -> (
    None
):
    group = "orders-848"
    records = [
        encoded(GEN.member_record(group, GEN.K1, "c", "/h", ["orders"], "uniform")),
        encoded(GEN.topics_record(group, [(GEN.ORDERS, "orders", 2**31 - 1)])),
        encoded(GEN.target_member(group, GEN.K1, [(GEN.ORDERS, [0])])),
        encoded(GEN.target_epoch(group, 1)),
    ]
    started = time.process_time()
    with pytest.raises(InputError, match=r"0\.log: byte \d+: trace orders-848: topics\[0\]"):
        segment_rows(record_batch(records))
    assert time.process_time() - started < 5


def test_synthetic_offsets_partition_imports_the_same_as_its_dump_log_text(tmp_path: Path) -> None:
    """The benchmark's history at a few MB: mostly offset commits, classic and KIP-848 groups."""
    spec = importlib.util.spec_from_file_location(
        "bench_importers", Path(__file__).parent.parent / "benchmarks" / "bench_importers.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    files = bench.build_segments(tmp_path, 3 * 1024 * 1024, pool_size=300)
    data = files[0].read_bytes()
    from_segments = import_segments([(files[0].name, data)])
    text = bench.dump_log_text(data, files[0].name)
    from_text = import_dump_log([("dump.txt", text.splitlines())])
    assert {row["protocol"] for row in from_segments.rows} == {"range", "uniform"}
    assert len(from_segments.rows) >= 5
    assert from_segments.rows == from_text.rows


def test_cli_reads_one_segment_from_standard_input(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(
        app,
        ["traces", "import", "--from", "segments", "-", "--out", str(tmp_path / "out")],
        input=SEGMENT.read_bytes(),
    )
    assert outcome.exit_code == 0, outcome.output
    assert (tmp_path / "out" / "segments-stdin.jsonl").exists()
    assert "<stdin>: byte 6207: group reports: deleted" in outcome.stderr


def test_magic_1_message_sets_of_old_segments_are_read() -> None:
    key, value = encoded(GEN.payments_generation(1, GEN.T0, [
        (GEN.M1, "pod-1", "/10.1.0.11", [], -1, GEN.G1[GEN.M1]),
    ]))  # fmt: skip
    commit_key = struct.pack(">h", 1) + GEN.string("payments") + GEN.string("t") + GEN.i32(0)
    data = build_legacy_entry(
        offset=0, magic=1, key=commit_key, value=b"?", timestamp=GEN.T0
    ) + build_legacy_entry(offset=1, magic=1, key=key, value=value, timestamp=GEN.T0 + 5)
    rows = segment_rows(data).rows
    assert [(row["generation"], len(row["members"])) for row in rows] == [(1, 1)]
    corrupt = bytearray(data)
    corrupt[-3] ^= 0xFF
    with pytest.raises(BaseInputError, match=r"message\.crc: Record is corrupt"):
        segment_rows(bytes(corrupt))
