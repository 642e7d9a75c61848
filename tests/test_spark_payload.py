"""A trace's rows travel from the Spark job's read task to its replay task as one marshalled
list (pickled when a value needs it), and come back equal, in reading order, with their
types."""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from assignors.traces import files as trace_files
from assignors.traces import generate
from spark_jobs import replay_traces


def test_each_traces_rows_come_back_equal_and_in_reading_order(tmp_path: Path) -> None:
    rows = list(generate.generate_rows("mixed", 6, seed=3, members=(2, 6), partitions=(4, 30)))
    path = tmp_path / "t.jsonl"
    trace_files.write_traces_jsonl(rows, path)
    expected: dict[str, list[trace_files.RawRow]] = {}
    for trace_id, raw in trace_files.file_raw_rows(path):
        assert trace_id is not None
        expected.setdefault(trace_id, []).append(raw._replace(source="t.jsonl"))
    parts = list(replay_traces.read_file_parts(str(path), name="t.jsonl"))
    assert [part.trace_id for part in parts] == list(expected)
    for part in parts:
        assert part.payload[:1] == b"M"
        assert part.trace_id is not None
        assert replay_traces.payload_rows(part.payload) == expected[part.trace_id]


def test_marshalled_rows_keep_every_value_and_type() -> None:
    row = {
        "trace_id": "g",
        "flags": [True, False, 1, 0],
        "floats": [-0.0, 1e308, float("inf"), 0.1],
        "big": 2**80,
        "nested": {"b": [None, {"z": 1, "a": 2}], "a": ()},
    }
    raw = [trace_files.RawRow("s", 3, row), trace_files.RawRow("s", None, None, "bad line")]
    back = replay_traces.payload_rows(replay_traces.rows_payload(raw))
    assert back == raw
    assert [type(value) for value in back[0].row["flags"]] == [bool, bool, int, int]
    assert math.copysign(1.0, back[0].row["floats"][0]) == -1.0
    assert list(back[0].row["nested"]["b"][1]) == ["z", "a"]
    assert back[0].row["nested"]["a"] == ()
    nan = replay_traces.payload_rows(
        replay_traces.rows_payload([trace_files.RawRow("s", 1, {"x": float("nan")})])
    )
    assert math.isnan(nan[0].row["x"])


def test_rows_marshal_cannot_hold_are_pickled_and_come_back_equal() -> None:
    for value in (
        datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
        Decimal("1.25"),
        OrderedDict(a=1),
    ):
        raw = [trace_files.RawRow("p.parquet", 1, {"trace_id": "g", "value": value})]
        payload = replay_traces.rows_payload(raw)
        assert payload[:1] == b"P"
        back = replay_traces.payload_rows(payload)
        assert back == raw
        assert type(back[0].row["value"]) is type(value)
