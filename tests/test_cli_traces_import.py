"""`ktk traces import`: files in, validated trace files out, one-line errors with exit 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
from conftest import EXAMPLES
from typer.testing import CliRunner

from assignors.traces.files import read_traces
from ktk.cli import app

FIXTURES = EXAMPLES / "importers"
DUMP_LOG = FIXTURES / "dump-log.txt"


def invoke(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(app, ["traces", "import", *args], input=input)


def error_lines(outcome) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in outcome.stderr.splitlines() if line.strip()]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_dump_log_import_writes_jsonl_named_after_source_and_input(tmp_path: Path) -> None:
    outcome = invoke("--from", "dump-log", str(FIXTURES / "dump-log.txt"), "--out", str(tmp_path))
    assert outcome.exit_code == 0, outcome.output
    target = tmp_path / "dump-log-dump-log.jsonl"
    assert "4 traces, 10 generations" in outcome.stdout
    assert sorted({row["trace_id"] for row in rows(target)}) == [
        "orders-848",
        "payments",
        "reports",
        "reports#2",
    ]
    assert "Unknown record type 17" in outcome.stderr
    traces, failures = read_traces([target])
    assert failures == [] and len(traces) == 4


def test_formatter_import_writes_parquet(tmp_path: Path) -> None:
    outcome = invoke(
        "--from",
        "formatter",
        str(FIXTURES / "formatter.json"),
        "--out",
        str(tmp_path),
        "--format",
        "parquet",
    )
    assert outcome.exit_code == 0, outcome.output
    table = pq.read_table(tmp_path / "formatter-formatter.parquet")
    assert table.num_rows == 7
    assert read_traces([tmp_path])[1] == []


def test_coordinator_logs_of_both_coordinators_import_with_a_topics_file(tmp_path: Path) -> None:
    outcome = invoke(
        "--from",
        "coordinator-log",
        str(FIXTURES / "coordinator-classic.log"),
        str(FIXTURES / "coordinator-kip848.log"),
        "--topics",
        str(FIXTURES / "topics.json"),
        "--out",
        str(tmp_path),
    )
    assert outcome.exit_code == 0, outcome.output
    written = rows(tmp_path / "coordinator-log-coordinator-classic.jsonl")
    assert sorted({row["trace_id"] for row in written}) == [
        "billing",
        "orders-848",
        "payments",
        "reports",
    ]
    assert all("assigned" not in member for row in written for member in row["members"])


def test_gzipped_input_is_read(tmp_path: Path) -> None:
    packed = tmp_path / "dump.txt.gz"
    packed.write_bytes(gzip.compress((FIXTURES / "dump-log.txt").read_bytes()))
    outcome = invoke("--from", "dump-log", str(packed), "--out", str(tmp_path / "out"))
    assert outcome.exit_code == 0, outcome.output
    assert (tmp_path / "out" / "dump-log-dump.jsonl").exists()


def test_coordinator_log_without_topics_file_exits_2(tmp_path: Path) -> None:
    outcome = invoke(
        "--from",
        "coordinator-log",
        str(FIXTURES / "coordinator-classic.log"),
        "--out",
        str(tmp_path),
    )
    assert outcome.exit_code == 2
    assert "give --topics FILE" in outcome.stderr


def test_malformed_input_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "dump.txt"
    broken.write_text(
        '| offset: 0 CreateTime: 1 key: {"type":"2","data":{"group":"g"}} payload: {"version":',
        encoding="utf-8",
    )
    outcome = invoke("--from", "dump-log", str(broken), "--out", str(tmp_path / "out"))
    assert outcome.exit_code == 2
    assert outcome.stderr.strip().splitlines() == [
        f"error: {broken}:1: payload: payload is not valid JSON: Expecting value at column 86"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dump.txt"]


def test_input_without_group_records_fails_with_a_hint(tmp_path: Path) -> None:
    empty = tmp_path / "server.log"
    empty.write_text(
        "[2026-01-05 10:00:00,000] INFO nothing here (kafka.Kafka)\n", encoding="utf-8"
    )
    outcome = invoke("--from", "dump-log", str(empty), "--out", str(tmp_path / "out"))
    assert outcome.exit_code == 2
    assert "no consumer-group generations found" in outcome.stderr


def test_unknown_source_kind_and_missing_file_exit_2(tmp_path: Path) -> None:
    outcome = invoke("--from", "jmx", str(FIXTURES / "dump-log.txt"), "--out", str(tmp_path))
    assert outcome.exit_code == 2
    assert "--from must be one of dump-log, formatter, coordinator-log" in outcome.stderr
    outcome = invoke(
        "--from", "dump-log", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "out")
    )
    assert outcome.exit_code == 2
    assert "missing.txt: No such file or directory" in outcome.stderr


def test_bad_topics_file_is_reported_with_its_name(tmp_path: Path) -> None:
    side = tmp_path / "topics.json"
    side.write_text('{"orders": "many"}', encoding="utf-8")
    outcome = invoke(
        "--from",
        "dump-log",
        str(FIXTURES / "dump-log.txt"),
        "--topics",
        str(side),
        "--out",
        str(tmp_path / "out"),
    )
    assert outcome.exit_code == 2
    assert f"{side}: orders: must be a partition count" in outcome.stderr


def test_group_option_keeps_only_the_named_groups(tmp_path: Path) -> None:
    outcome = invoke(
        "--from",
        "dump-log",
        str(FIXTURES / "dump-log.txt"),
        "--group",
        "reports",
        "-g",
        "orders-848",
        "--out",
        str(tmp_path),
    )
    assert outcome.exit_code == 0, outcome.output
    written = rows(tmp_path / "dump-log-dump-log.jsonl")
    assert sorted({row["trace_id"] for row in written}) == ["orders-848", "reports", "reports#2"]


def test_skip_bad_records_imports_the_rest_and_lists_what_was_skipped(tmp_path: Path) -> None:
    broken = tmp_path / "dump.txt"
    good = (FIXTURES / "dump-log.txt").read_text(encoding="utf-8")
    broken.write_text(
        '| offset: 99 CreateTime: 1 key: {"type":"2","data":{"group":"g"}} '
        'payload: {"vers\n' + good,
        encoding="utf-8",
    )
    outcome = invoke(
        "--from", "dump-log", str(broken), "--out", str(tmp_path / "out"), "--skip-bad-records"
    )
    assert outcome.exit_code == 0, outcome.output
    assert "4 traces, 10 generations" in outcome.stdout
    assert f"{broken}:1: line skipped" in outcome.stderr


def test_prefix_keeps_imports_of_the_same_groups_apart(tmp_path: Path) -> None:
    for extra in ([], ["--prefix", "again/"]):
        outcome = invoke(
            "--from",
            "dump-log",
            str(FIXTURES / "dump-log.txt"),
            "--out",
            str(tmp_path / ("b" if extra else "a")),
            *extra,
        )
        assert outcome.exit_code == 0, outcome.output
    traces, failures = read_traces([tmp_path])
    assert failures == []
    assert sorted(trace.trace_id for trace in traces) == [
        "again/orders-848",
        "again/payments",
        "again/reports",
        "again/reports#2",
        "orders-848",
        "payments",
        "reports",
        "reports#2",
    ]


def test_traces_import_reads_standard_input(tmp_path):
    outcome = invoke(
        "--from",
        "dump-log",
        "-",
        "--out",
        str(tmp_path / "o"),
        input=DUMP_LOG.read_bytes(),
    )
    assert outcome.exit_code == 0, outcome.output
    written = tmp_path / "o" / "dump-log-stdin.jsonl"
    assert "4 traces, 10 generations" in outcome.stdout
    assert "<stdin>:19: kafka-dump-log: Unknown record type 17" in outcome.stderr
    assert len(written.read_text().splitlines()) == 10


def test_traces_import_reads_gzipped_standard_input(tmp_path):
    outcome = invoke(
        "--from",
        "dump-log",
        "-",
        "--out",
        str(tmp_path / "o"),
        input=gzip.compress(DUMP_LOG.read_bytes()),
    )
    assert outcome.exit_code == 0, outcome.output
    assert (tmp_path / "o" / "dump-log-stdin.jsonl").exists()


def test_broken_standard_input_is_cited_as_stdin(tmp_path):
    broken = '| offset: 0 CreateTime: 1 key: {"type":"2","data":{"group":"g"}} payload: {"v":'
    outcome = invoke("--from", "dump-log", "-", "--out", str(tmp_path / "o"), input=broken)
    assert outcome.exit_code == 2
    assert len(error_lines(outcome)) == 1 and error_lines(outcome)[0].startswith(
        "error: <stdin>:1: payload"
    )
    assert list(tmp_path.iterdir()) == []


def test_standard_input_may_be_named_only_once(tmp_path):
    outcome = invoke("--from", "dump-log", "-", "-", "--out", str(tmp_path / "o"), input="")
    assert outcome.exit_code == 2 and "only once" in outcome.stderr
