"""Fuzzing `ktk partition` with mutated key traces (JSON Lines and Parquet) and mutated
command-line arguments: every run ends with exit 0, 1 or 2, never a traceback, a file error
names the file and the line, row or field, and each run is quick.

The example count per test comes from ``KTK_FUZZ_EXAMPLES`` (default 50, about 15-30 s for the
whole file on a busy 2-core machine); for a long run::

    KTK_FUZZ_EXAMPLES=2000 python -m pytest -m fuzz_long tests/test_fuzz_keytraces.py
"""

from __future__ import annotations

import base64
import json
import os
import string
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ktk.cli import app

pytestmark = pytest.mark.fuzz_long

EXAMPLES_PER_TEST = int(os.environ.get("KTK_FUZZ_EXAMPLES", "50"))
# one CLI run on a few records; generous for a loaded machine, far below a hang
SECONDS_PER_RUN = 20.0
FUZZ = settings(
    max_examples=EXAMPLES_PER_TEST,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FIELDS = ("trace_id", "timestamp_ms", "topic", "num_partitions", "key", "value_bytes", "partition")
PARTITIONERS = ("java-builtin", "java-builtin,librdkafka-default", "java-roundrobin,java-sticky")
EXAMPLE_LINES = (EXAMPLES / "key-traces" / "orders-and-clicks.jsonl").read_text().splitlines()

# raw JSON tokens json.dumps cannot produce: they go in through a placeholder
RAW_TOKENS = (
    "9" * 5001,
    "-" + "9" * 5001,
    "1e400",
    "-1e400",
    "Infinity",
    "-Infinity",
    "NaN",
    "[" * 50_000 + "]" * 50_000,
    '{"a":' * 5_000 + "1" + "}" * 5_000,
    '"\\ud800"',
    '"\\udfff-\\u0000"',
    "12345678901234567890123456789012345678901234567890",
    "2147483648",
    "9223372036854775808",
    "1000000000",
    "-0",
    "0.5",
    "1e3",
)
PLACEHOLDER = "__RAW_TOKEN__"

hostile_text = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
        st.sampled_from("\x00\n\r\t\x7f\x85 ._-"),
    ),
    max_size=20,
)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**6, 10**6 + 1]),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile_text,
        st.binary(max_size=12).map(lambda raw: base64.b64encode(raw).decode()),
    ),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children),
    max_leaves=5,
)


def _record(line: str) -> dict[str, Any]:
    return json.loads(line)


@st.composite
def mutated_jsonl(draw: st.DrawFn) -> bytes:
    """A few example records with some fields replaced, removed or given raw tokens, then
    byte-level damage."""
    start = draw(st.integers(min_value=0, max_value=len(EXAMPLE_LINES) - 6))
    records = [_record(line) for line in EXAMPLE_LINES[start : start + draw(st.integers(1, 6))]]
    lines: list[str] = []
    for record in records:
        raw_token = None
        for _ in range(draw(st.integers(min_value=0, max_value=2))):
            field = draw(st.sampled_from((*FIELDS, "extra")))
            action = draw(st.sampled_from(("value", "text", "raw", "drop")))
            if action == "drop":
                record.pop(field, None)
            elif action == "text":
                record[field] = draw(hostile_text)
            elif action == "raw":
                raw_token = draw(st.sampled_from(RAW_TOKENS))
                record[field] = PLACEHOLDER
            else:
                record[field] = draw(json_values)
        text = json.dumps(record, ensure_ascii=draw(st.booleans()))
        if raw_token is not None:
            text = text.replace(json.dumps(PLACEHOLDER), raw_token, 1)
        lines.append(text)
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(("", "{", "[]", "null", '"x"', "{}", "\x00"))))
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        position = draw(st.integers(min_value=0, max_value=len(data)))
        damage = draw(
            st.one_of(
                st.binary(min_size=1, max_size=4),
                st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\n", b"\r"]),
            )
        )
        if draw(st.booleans()):
            data = data[:position] + damage + data[position:]
        else:
            data = data[:position]
    return data


def _column(draw: st.DrawFn, field: str, rows: int) -> pa.Array:
    kind = draw(
        st.sampled_from(("natural", "int64", "uint64", "float64", "int32", "string", "null"))
    )
    if kind == "natural":
        kind = {
            "trace_id": "string",
            "topic": "string",
            "key": "binary",
            "partition": "int32",
            "num_partitions": "int32",
        }.get(field, "int64")
    if kind == "binary":
        return pa.array(
            draw(st.lists(st.none() | st.binary(max_size=8), min_size=rows, max_size=rows)),
            pa.binary(),
        )
    if kind == "string":
        text = st.text(alphabet=string.printable, max_size=8) | st.sampled_from(["t", "orders"])
        return pa.array(draw(st.lists(st.none() | text, min_size=rows, max_size=rows)))
    if kind == "null":
        return pa.nulls(rows)
    if kind == "float64":
        values = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
            [0.0, 3.0, 2.0**63]
        )
        return pa.array(draw(st.lists(values, min_size=rows, max_size=rows)), pa.float64())
    bounds = {
        "int64": (-(2**63), 2**63 - 1),
        "uint64": (0, 2**64 - 1),
        "int32": (-(2**31), 2**31 - 1),
    }[kind]
    small = st.integers(min_value=-2, max_value=20).filter(lambda v: bounds[0] <= v)
    values = small | st.integers(*bounds)
    nullable = st.none() | values
    return pa.array(draw(st.lists(nullable, min_size=rows, max_size=rows)), getattr(pa, kind)())


@st.composite
def mutated_parquet_tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(min_value=0, max_value=5))
    columns = {}
    for field in FIELDS:
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            continue
        columns[field] = _column(draw, field, rows)
    return pa.table(columns) if columns else pa.table({"other": pa.nulls(rows)})


def _check(outcome: Any, elapsed: float, path: Path | None = None) -> None:
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), repr(
        outcome.exception
    )
    assert outcome.exit_code in (0, 1, 2), outcome.output
    assert "Traceback" not in outcome.output
    assert elapsed < SECONDS_PER_RUN
    if path is not None and outcome.exit_code != 0:
        errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
        assert errors, outcome.stderr
        for line in errors:
            # the file, then the line (JSON Lines) or row (Parquet) or the field
            assert line.startswith(f"error: {path}"), line
            assert len(line) < 400, line


def _score(path: Path, partitioners: str) -> tuple[Any, float]:
    started = time.perf_counter()
    outcome = CliRunner().invoke(app, ["partition", "score", str(path), "-p", partitioners])
    return outcome, time.perf_counter() - started


@FUZZ
@given(data=mutated_jsonl(), partitioners=st.sampled_from(PARTITIONERS))
def test_mutated_jsonl_traces_never_crash_and_name_file_and_line(
    tmp_path_factory, data, partitioners
):
    path = tmp_path_factory.mktemp("jsonl") / "trace.jsonl"
    path.write_bytes(data)
    outcome, elapsed = _score(path, partitioners)
    _check(outcome, elapsed, path)
    if outcome.exit_code == 2:
        assert outcome.stderr.startswith(f"error: {path}:") or "holds no records" in outcome.stderr


@FUZZ
@given(table=mutated_parquet_tables(), partitioners=st.sampled_from(PARTITIONERS))
def test_mutated_parquet_traces_never_crash_and_name_file_and_row(
    tmp_path_factory, table, partitioners
):
    path = tmp_path_factory.mktemp("parquet") / "trace.parquet"
    pq.write_table(table, path)
    outcome, elapsed = _score(path, partitioners)
    _check(outcome, elapsed, path)


@FUZZ
@given(data=st.binary(max_size=64), suffix=st.sampled_from((".jsonl", ".parquet", ".jsonl.gz")))
def test_arbitrary_bytes_as_a_trace_file_never_crash(tmp_path_factory, data, suffix):
    path = tmp_path_factory.mktemp("bytes") / f"trace{suffix}"
    path.write_bytes(data)
    outcome, elapsed = _score(path, "java-builtin")
    _check(outcome, elapsed, path)


number_texts = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "-1", "1000000", "1000001", "9" * 5001, "1e3", "", "x", "2147483648"]),
)
option_values = st.one_of(number_texts, hostile_text.filter(lambda t: "\x00" not in t))
KEY_OPTIONS = ("--partitions", "-n", "--partitioner", "-p", "--compare", "--hex")
REMAP_OPTIONS = ("--from", "--to", "--partitioner", "--hex")
SCORE_OPTIONS = ("--partitioners", "--batch-size", "--linger-ms", "--seed", "--engine")


@st.composite
def cli_arguments(draw: st.DrawFn) -> tuple[list[str], bytes]:
    form = draw(st.sampled_from(("keys", "", "remap", "score", "names")))
    options = {"keys": KEY_OPTIONS, "": KEY_OPTIONS, "remap": REMAP_OPTIONS}.get(
        form, SCORE_OPTIONS
    )
    args = [form] if form else []
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        option = draw(st.sampled_from(options))
        args.append(option)
        if option == "--hex":
            continue
        if option == "--engine":
            # the Spark engine starts a JVM: far too slow for a fuzz loop
            args.append(draw(st.sampled_from(["python", "flink", ""])))
        elif option in ("--partitioner", "-p", "--compare", "--partitioners"):
            args.append(draw(st.sampled_from(["java-builtin", "librdkafka-fnv1a", "x", ","])))
        else:
            args.append(draw(option_values))
    if form == "score":
        args.append(draw(st.sampled_from([str(EXAMPLES / "key-traces"), "-", "missing.jsonl"])))
    else:
        args.extend(draw(st.lists(option_values | st.just("-"), max_size=3)))
    stdin = draw(st.binary(max_size=40) | st.just("\n".join(EXAMPLE_LINES[:3]).encode()))
    return [arg for arg in args if "\x00" not in arg], stdin


@FUZZ
@given(arguments=cli_arguments())
def test_mutated_command_lines_exit_0_1_or_2_without_a_traceback(arguments):
    args, stdin = arguments
    started = time.perf_counter()
    outcome = CliRunner().invoke(app, ["partition", *args], input=stdin)
    _check(outcome, time.perf_counter() - started)
