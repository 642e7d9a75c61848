"""Trace format v1: every rule violation names the file, line, trace and field; bad traces are
skipped while the others are read; writers round-trip."""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.traces.files import (
    RawRow,
    assemble_trace,
    iter_trace_rows,
    read_traces,
    write_traces_jsonl,
    write_traces_parquet,
)
from assignors.traces.format import build_trace, parse_generation, trace_to_rows


def _row(trace_id: str = "orders-app", generation: int = 1, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "trace_id": trace_id,
        "generation": generation,
        "timestamp_ms": 1_762_000_000_000 + generation,
        "topics": [
            {
                "name": "orders",
                "partitions": 3,
                "racks": [["a"], ["b"], ["a", "b"]],
                "weights": [1.0, 2.0, 0.5],
            },
            {"name": "audit", "partitions": 1},
        ],
        "members": [
            {"member_id": "c-1", "instance_id": None, "rack": "a", "topics": ["orders", "audit"]},
            {
                "member_id": "c-2",
                "instance_id": "pod-2",
                "rack": "b",
                "topics": ["orders"],
                "assigned": [["orders", 0]],
            },
        ],
    }
    row.update(changes)
    return row


def _write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _mutated(mutate) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    row = copy.deepcopy(_row(generation=2))
    mutate(row)
    return row


# (description, mutation of the second row, field the error must name)
FIELD_VIOLATIONS = [
    ("generation not an integer", lambda r: r.update(generation="2"), "generation"),
    ("generation a boolean", lambda r: r.update(generation=True), "generation"),
    ("timestamp not an integer", lambda r: r.update(timestamp_ms=1.5), "timestamp_ms"),
    ("topics not a list", lambda r: r.update(topics={"orders": 3}), "topics"),
    ("topic without name", lambda r: r["topics"][1].pop("name"), "topics[1].name"),
    (
        "negative partition count",
        lambda r: r["topics"][1].update(partitions=-1),
        "topics[1].partitions",
    ),
    ("duplicate topic", lambda r: r["topics"][1].update(name="orders"), "topics[1].name"),
    ("racks of the wrong length", lambda r: r["topics"][0]["racks"].pop(), "topics[0].racks"),
    (
        "rack entry not a list",
        lambda r: r["topics"][0]["racks"].__setitem__(1, "b"),
        "topics[0].racks[1]",
    ),
    (
        "negative weight",
        lambda r: r["topics"][0]["weights"].__setitem__(1, -0.5),
        "topics[0].weights[1]",
    ),
    (
        "NaN weight",
        lambda r: r["topics"][0]["weights"].__setitem__(2, math.nan),
        "topics[0].weights[2]",
    ),
    (
        "infinite weight",
        lambda r: r["topics"][0]["weights"].__setitem__(0, math.inf),
        "topics[0].weights[0]",
    ),
    (
        "weights of the wrong length",
        lambda r: r["topics"][0]["weights"].append(1.0),
        "topics[0].weights",
    ),
    (
        "duplicate member id",
        lambda r: r["members"][1].update(member_id="c-1"),
        "members[1].member_id",
    ),
    ("member without id", lambda r: r["members"][0].pop("member_id"), "members[0].member_id"),
    (
        "subscription not a list",
        lambda r: r["members"][0].update(topics="orders"),
        "members[0].topics",
    ),
    (
        "assigned partition beyond the count",
        lambda r: r["members"][1].update(assigned=[["orders", 0], ["orders", 3]]),
        "members[1].assigned[1]",
    ),
    (
        "assigned partition of an unknown topic",
        lambda r: r["members"][1].update(assigned=[["payments", 0]]),
        "members[1].assigned[0]",
    ),
    (
        "assigned entry malformed",
        lambda r: r["members"][1].update(assigned=[["orders"]]),
        "members[1].assigned[0]",
    ),
    ("rack not a string", lambda r: r["members"][0].update(rack=3), "members[0].rack"),
]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [pytest.param(mutate, field, id=name) for name, mutate, field in FIELD_VIOLATIONS],
)
def test_every_field_violation_names_file_line_trace_and_field(tmp_path, mutate, field):
    path = _write_lines(tmp_path / "history.jsonl", [_row(generation=1), _mutated(mutate)])
    traces, failures = read_traces([path])
    assert traces == []
    [failure] = failures
    assert failure.trace_id == "orders-app"
    assert (failure.file, failure.line) == (str(path), 2)
    assert failure.reason.startswith(f"{path}:2: trace orders-app: {field}: ")


def test_parse_generation_raises_a_located_input_error():
    with pytest.raises(InputError) as caught:
        parse_generation(
            _mutated(lambda r: r["topics"][0]["weights"].__setitem__(1, -1)), "g.jsonl", 9
        )
    error = caught.value
    assert (error.source, error.line, error.trace_id, error.field, error.value) == (
        "g.jsonl",
        9,
        "orders-app",
        "topics[0].weights[1]",
        -1,
    )


def test_repeated_generation_number_names_both_rows(tmp_path):
    path = _write_lines(tmp_path / "t.jsonl", [_row(generation=4), _row(generation=4)])
    _, [failure] = read_traces([path])
    assert failure.reason.startswith(f"{path}:2: trace orders-app: generation: ")
    assert f"also appears at {path}:1" in failure.reason


def test_shrinking_partition_count_is_an_error_naming_the_later_row(tmp_path):
    shrunk = _row(generation=2)
    shrunk["topics"][0] = {"name": "orders", "partitions": 2}
    path = _write_lines(tmp_path / "t.jsonl", [_row(generation=1), shrunk])
    _, [failure] = read_traces([path])
    assert failure.reason.startswith(f"{path}:2: trace orders-app: topics[0].partitions: ")
    assert "decreased from 3" in failure.reason


def test_a_recreated_topic_may_come_back_smaller_after_a_gap(tmp_path):
    gone = _row(generation=2)
    gone["topics"] = [gone["topics"][1]]
    gone["members"] = [{"member_id": "c-1", "topics": ["audit"]}]
    back = _row(generation=3)
    back["topics"][0] = {"name": "orders", "partitions": 1}
    back["members"][1]["assigned"] = []
    traces, failures = read_traces([_write_lines(tmp_path / "t.jsonl", [_row(), gone, back])])
    assert failures == []
    assert [g.generation for g in traces[0].generations] == [1, 2, 3]


def test_one_bad_trace_is_skipped_and_the_others_are_read(tmp_path):
    rows = [_row("a"), _row("bad"), _row("c"), _row("bad", 2, members="nobody")]
    traces, failures = read_traces([_write_lines(tmp_path / "t.jsonl", rows)])
    assert [trace.trace_id for trace in traces] == ["a", "c"]
    assert [(failure.trace_id, failure.line) for failure in failures] == [("bad", 4)]
    assert "members: must be a list of members" in failures[0].reason


def test_a_line_that_is_not_json_fails_the_trace_it_names(tmp_path):
    broken = json.dumps(_row("b"))[:-7]
    traces, failures = read_traces([_write_lines(tmp_path / "t.jsonl", [_row("a"), broken])])
    assert [trace.trace_id for trace in traces] == ["a"]
    [failure] = failures
    assert (failure.trace_id, failure.line) == ("b", 2)
    assert "row: not valid JSON" in failure.reason


def test_rows_without_a_trace_id_are_reported_without_one(tmp_path):
    rows = [_row("a"), {"generation": 1, "topics": [], "members": []}, "[1, 2]"]
    traces, failures = read_traces([_write_lines(tmp_path / "t.jsonl", rows)])
    assert [trace.trace_id for trace in traces] == ["a"]
    assert [(failure.trace_id, failure.line) for failure in failures] == [(None, 2), (None, 3)]


def test_rows_of_one_trace_spread_over_files_and_out_of_order_make_one_trace(tmp_path):
    (tmp_path / "day2").mkdir()
    _write_lines(tmp_path / "day2" / "later.jsonl", [_row(generation=7), _row("other")])
    _write_lines(tmp_path / "day1.jsonl", [_row(generation=3)])
    with gzip.open(tmp_path / "day2" / "more.jsonl.gz", "wt") as handle:
        handle.write(json.dumps(_row(generation=5)) + "\n")
    (tmp_path / "notes.txt").write_text("not a trace")
    traces, failures = read_traces([tmp_path])
    assert failures == []
    assert [trace.trace_id for trace in traces] == ["orders-app", "other"]
    assert [g.generation for g in traces[0].generations] == [3, 5, 7]


def test_a_missing_path_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_traces([tmp_path / "nope.jsonl"])


def test_identity_is_the_instance_id_when_static():
    generation = parse_generation(_row(), "t.jsonl", 1)
    assert [member.identity for member in generation.members] == ["c-1", "pod-2"]
    assert generation.members[1].assigned == (TopicPartition("orders", 0),)


def test_jsonl_round_trip_is_exact_and_gzip_is_byte_stable(tmp_path):
    trace = build_trace(
        "orders-app", [parse_generation(_row(generation=g), None, g) for g in (1, 2)]
    )
    write_traces_jsonl([trace], tmp_path / "a.jsonl.gz")
    first = (tmp_path / "a.jsonl.gz").read_bytes()
    write_traces_jsonl(trace_to_rows(trace), tmp_path / "a.jsonl.gz")
    assert (tmp_path / "a.jsonl.gz").read_bytes() == first
    [again], failures = read_traces([tmp_path / "a.jsonl.gz"])
    assert failures == [] and again == trace
    assert [p.name for p in tmp_path.iterdir()] == ["a.jsonl.gz"]  # no temporary left behind


def test_parquet_round_trip_and_rows_numbered_from_one(tmp_path):
    rows = [_row(generation=1), _row(generation=2), _row("other")]
    write_traces_parquet(rows, tmp_path / "t.parquet")
    numbered = [(line, row["trace_id"]) for _, line, row in iter_trace_rows(tmp_path / "t.parquet")]
    assert numbered == [(1, "orders-app"), (2, "orders-app"), (3, "other")]
    from_parquet, failures = read_traces([tmp_path / "t.parquet"])
    from_json, _ = read_traces([_write_lines(tmp_path / "t.jsonl", rows)])
    assert failures == [] and from_parquet == from_json


def test_parquet_violations_name_the_row_number(tmp_path):
    bad = _row(generation=2)
    bad["members"][1]["assigned"] = [["orders", 5]]
    write_traces_parquet([_row(generation=1), bad], tmp_path / "t.parquet")
    _, [failure] = read_traces([tmp_path / "t.parquet"])
    assert failure.reason.startswith(
        f"{tmp_path / 't.parquet'}:2: trace orders-app: members[1].assigned[0]: "
    )


def test_assemble_trace_equals_reading_the_file(tmp_path):
    rows = [_row(generation=1), _row(generation=2)]
    write_traces_jsonl(rows, tmp_path / "t.jsonl.gz")
    raw = [
        RawRow(source, line, row) for source, line, row in iter_trace_rows(tmp_path / "t.jsonl.gz")
    ]
    assert [item.line for item in raw] == [1, 2]
    assert assemble_trace("orders-app", raw) == read_traces([tmp_path / "t.jsonl.gz"])[0][0]


def test_assemble_trace_fails_on_a_row_that_could_not_be_read():
    rows = [RawRow("s", 1, _row(generation=1)), RawRow("s", 2, None, "s:2: row: not valid JSON")]
    with pytest.raises(InputError) as caught:
        assemble_trace("orders-app", rows)
    assert str(caught.value) == "s:2: row: not valid JSON"
    assert (caught.value.source, caught.value.line) == ("s", 2)


# ---------------------------------------------------------------------------------------------
# regressions found by fuzzing (tests/test_fuzz_traces.py): each was a traceback, a memory
# blow-up or a hang before


def _only_failure(tmp_path: Path, lines: list[Any], name: str = "t.jsonl") -> str:
    """Read ``lines`` after one good trace; the good trace is read, the one failure's reason
    comes back."""
    path = _write_lines(tmp_path / name, [_row("good"), *lines])
    traces, failures = read_traces([path])
    assert [trace.trace_id for trace in traces] == ["good"]
    [failure] = failures
    assert failure.file == str(path)
    return failure.reason


def _with_raw(raw_json: str, field: str = "generation") -> str:
    row = _row("bad")
    row[field] = "@@here@@"
    return json.dumps(row).replace('"@@here@@"', raw_json)


def test_deeply_nested_line_fails_its_trace_naming_the_line_not_a_recursion_error(tmp_path):
    reason = _only_failure(tmp_path, [_with_raw("[" * 100_000 + "]" * 100_000, "reason")])
    assert reason.endswith("t.jsonl:2: trace bad: row: not valid JSON: nested deeper than 64")


def test_integer_of_5001_digits_fails_its_trace_naming_line_and_field(tmp_path):
    reason = _only_failure(tmp_path, [_with_raw("9" * 5001)])
    assert reason.endswith(
        "t.jsonl:2: trace bad: generation: not valid JSON: integer of 5001 digits (at most 20)"
    )


def test_generation_and_timestamp_beyond_64_bits_are_refused(tmp_path):
    assert "generation: must fit in 64 bits" in _only_failure(
        tmp_path, [_row("bad", generation=2**63)]
    )
    assert "timestamp_ms: must fit in 64 bits" in _only_failure(
        tmp_path, [_row("bad", timestamp_ms=-(2**63) - 1)], "u.jsonl"
    )


def test_lone_surrogate_in_an_id_fails_its_trace_and_replay_can_write_the_reason(tmp_path):
    from assignors.traces.results import errors_jsonl

    line = json.dumps(_row("bad")).replace('"c-1"', '"c-\\ud800"')
    path = _write_lines(tmp_path / "t.jsonl", [_row("good"), line])
    _, failures = read_traces([path])
    [failure] = failures
    assert failure.reason.endswith(
        "t.jsonl:2: trace bad: members[0].member_id: lone surrogate \\ud800: not writable as "
        "UTF-8 (got 'c-\\ud800')"
    )
    errors_jsonl(failures).encode("utf-8")  # the errors file can be written
    with pytest.raises(InputError, match="NUL or lone surrogate"):
        parse_generation(_row(members=[{"member_id": "c\x00", "topics": []}]), "p.parquet", 1)


def test_partition_counts_beyond_int32_or_the_generation_limit_are_refused_before_replay(
    tmp_path,
):
    huge = _row("bad", topics=[{"name": "orders", "partitions": 2**31}])
    assert "topics[0].partitions: must fit in 32 bits" in _only_failure(tmp_path, [huge])
    many = _row(
        "bad",
        topics=[
            {"name": "orders", "partitions": 9_000_000},
            {"name": "b", "partitions": 2_000_000},
        ],
        members=[],
    )
    reason = _only_failure(tmp_path, [many], "u.jsonl")
    assert (
        "topics[1].partitions: the topics hold 11000000 partitions; a generation may hold at "
        "most 10000000" in reason
    )


def test_members_beyond_the_generation_limit_are_refused_before_reading_them():
    row = _row(members=[{"member_id": "m", "topics": []}] * 1_000_001)
    with pytest.raises(InputError, match="1000001 members; a generation may list at most 1000000"):
        parse_generation(row, "t.jsonl", 1)


def test_line_that_is_not_utf8_fails_its_line_and_the_rest_is_read(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json.dumps(_row("good")).encode()
        + b"\n"
        + json.dumps(_row("bad")).encode()[:-2]
        + b"\xff\xfe}\n"
        + json.dumps(_row("also-good")).encode()
        + b"\n"
    )
    traces, failures = read_traces([path])
    assert [trace.trace_id for trace in traces] == ["also-good", "good"]
    [failure] = failures
    assert (failure.trace_id, failure.line) == ("bad", 2)
    assert "t.jsonl:2: trace bad: row: not UTF-8 text" in failure.reason


def test_line_longer_than_the_limit_is_skipped_without_being_held_whole():
    import io

    from assignors.traces.files import _TOO_LONG, _bounded_lines

    handle = io.BytesIO(b"short\n" + b"x" * 100 + b"\nlast")
    assert list(_bounded_lines(handle, limit=10)) == [b"short\n", _TOO_LONG, b"last"]


def test_corrupt_gzip_is_an_unreadable_file_not_a_zlib_crash(tmp_path):
    data = gzip.compress(json.dumps(_row("a")).encode() * 50, mtime=0)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(data[:20] + bytes(byte ^ 0x55 for byte in data[20:60]) + data[60:])
    traces, failures = read_traces([path])
    assert traces == []
    assert [failure.reason.split(": ")[1] for failure in failures] == ["unreadable file"]


def test_parquet_timestamp_beyond_python_dates_is_a_failure_not_a_crash(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    table = pa.table({"trace_id": ["a"], "generation": pa.array([2**62], pa.timestamp("ms"))})
    pq.write_table(table, path)
    traces, failures = read_traces([path])
    assert traces == []
    [failure] = failures
    assert failure.reason.startswith(f"{path}:1: rows 1-1 cannot be read:")
