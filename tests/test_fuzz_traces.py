"""Fuzzing trace files (JSON Lines and Parquet) through `ktk replay --engine python` and through
:func:`assignors.traces.files.read_traces`: every broken row becomes a failure naming its file
and line (or the file, when the file itself cannot be read), never a traceback, within bounded
time and memory."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fuzzing import (
    LONG_EXAMPLES,
    RAW_VALUES,
    bounded_rss,
    check_outcome,
    invoke,
    long_run,
    mutated_bytes,
    mutated_json_lines,
    mutated_value,
    run_examples,
)
from hypothesis import strategies as st

from assignors.traces.files import read_traces

ROWS: list[dict[str, Any]] = [
    {
        "trace_id": "g1",
        "generation": 1,
        "timestamp_ms": 1762000000000,
        "protocol": "range",
        "reason": "initial join",
        "topics": [
            {
                "name": "t0",
                "partitions": 3,
                "racks": [["a"], ["b"], ["a", "b"]],
                "weights": [1, 2.5, 0],
            },
            {"name": "t1", "partitions": 1},
        ],
        "members": [
            {
                "member_id": "c0",
                "instance_id": "pod-0",
                "rack": "a",
                "topics": ["t0", "t1"],
                "assigned": [["t0", 0], ["t0", 1], ["t1", 0]],
            },
            {
                "member_id": "c1",
                "instance_id": None,
                "rack": None,
                "topics": ["t0"],
                "assigned": [["t0", 2]],
            },
        ],
    },
    {
        "trace_id": "g1",
        "generation": 2,
        "timestamp_ms": 1762000005000,
        "topics": [{"name": "t0", "partitions": 4}, {"name": "t1", "partitions": 1}],
        "members": [
            {"member_id": "c0", "instance_id": "pod-0", "rack": "a", "topics": ["t0", "t1"]}
        ],
    },
    {
        "trace_id": "g2",
        "generation": 7,
        "topics": [{"name": "x", "partitions": 2}],
        "members": [{"member_id": "m", "topics": ["x"]}, {"member_id": "n", "topics": ["x"]}],
    },
]


def check_failures_name_their_place(path: Path) -> None:
    """read_traces: every failure names the file, and its reason starts with it."""
    with bounded_rss():
        traces, failures = read_traces([path])
    for failure in failures:
        assert failure.file == str(path), failure
        assert failure.reason.startswith(f"{path}:") or failure.reason.startswith(f"{path}: "), (
            failure.reason[:300]
        )
    for trace in traces:
        assert all(generation.source == str(path) for generation in trace.generations)


def check_replay(path: Path) -> None:
    """`ktk replay --engine python --strict`: exit 0 (all read), 1 (some traces skipped, each
    listed in errors.jsonl with its file) or 2 (naming the file)."""
    out = path.parent / "out"
    result = invoke(
        ["replay", str(path), "--out", str(out), "--engine", "python", "--strict", "--no-timings"]
    )
    check_outcome(result, [str(path)])
    if result.exit_code == 1:
        errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
        assert errors
        for error in errors:
            assert error["file"] == str(path), error
            assert error["reason"].startswith(str(path)), error["reason"][:300]


def check_jsonl(data: bytes, replay: bool, name: str = "history.jsonl") -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / name
        path.write_bytes(data)
        check_failures_name_their_place(path)
        if replay:
            check_replay(path)


# ---------------------------------------------------------------------------------------------
# Parquet: mutated rows written with whatever types Arrow infers, or mutated file bytes


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _plain(value: object) -> object:
    """A mutated value Arrow can hold: raw JSON specials become their text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if any(value is raw for raw in RAW_VALUES):
        return value.text[:1000]  # type: ignore[attr-defined]
    return value


@st.composite
def parquet_files(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(("rows", "rows", "columns", "bytes")))
    if kind == "bytes":
        from assignors.traces.format import traces_table

        return draw(mutated_bytes(_parquet_bytes(traces_table(ROWS)), max_mutations=3))
    if kind == "columns":  # valid rows, one column of another type
        from assignors.traces.format import traces_table

        table = traces_table(ROWS)
        column = draw(st.sampled_from(table.column_names))
        replacement = draw(
            st.sampled_from(
                (
                    pa.array(["1", "x", None], pa.string()),
                    pa.array([2**62, -(2**63), 0], pa.int64()),
                    pa.array([1.5, float("nan"), float("inf")], pa.float64()),
                    pa.array([True, False, None], pa.bool_()),
                    pa.array([-(2**62), 2**62, 0], pa.timestamp("ms")),
                    pa.array([[1, 2], None, []], pa.list_(pa.int64())),
                    pa.array([b"\xff\xfe", b"", None], pa.binary()),
                    pa.array([{"a": 1}, None, {"a": 2}]),
                )
            )
        )
        return _parquet_bytes(
            table.set_column(table.column_names.index(column), column, replacement)
        )
    rows = [_plain(draw(mutated_value(row))) if draw(st.booleans()) else row for row in ROWS]
    try:
        table = pa.Table.from_pylist(rows)
    except Exception:  # any rows Arrow cannot take
        # types Arrow cannot infer together: each row as one JSON text column instead
        table = pa.table({"trace_id": [json.dumps(row, default=str) for row in rows]})
    return _parquet_bytes(table)


def check_parquet(data: bytes, replay: bool) -> None:
    check_jsonl(data, replay, name="history.parquet")


# ---------------------------------------------------------------------------------------------


def test_fuzzed_trace_lines_read_into_failures_naming_file_and_line():
    run_examples(lambda data: check_jsonl(data, replay=False), mutated_json_lines(ROWS), 300)


def test_fuzzed_trace_lines_replay_exit_cleanly():
    run_examples(lambda data: check_jsonl(data, replay=True), mutated_json_lines(ROWS), 100)


def test_fuzzed_gzipped_trace_lines_read_cleanly():
    import gzip

    run_examples(
        lambda data: check_jsonl(gzip.compress(data, mtime=0), False, "history.jsonl.gz"),
        mutated_json_lines(ROWS),
        40,
    )


def test_corrupt_gzip_trace_files_are_unreadable_files_not_crashes():
    import gzip

    run_examples(
        lambda data: check_jsonl(data, False, "history.jsonl.gz"),
        mutated_bytes(gzip.compress(b"\n".join(json.dumps(r).encode() for r in ROWS), mtime=0)),
        60,
    )


def test_fuzzed_parquet_traces_read_into_failures_naming_file():
    run_examples(lambda data: check_parquet(data, replay=False), parquet_files(), 200)


def test_fuzzed_parquet_traces_replay_exit_cleanly():
    run_examples(lambda data: check_parquet(data, replay=True), parquet_files(), 60)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_trace_lines():
    run_examples(
        lambda data: check_jsonl(data, replay=True), mutated_json_lines(ROWS), LONG_EXAMPLES
    )


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_parquet_traces():
    run_examples(lambda data: check_parquet(data, replay=True), parquet_files(), LONG_EXAMPLES)
