"""The reference traces replayed through ktk's assignors give the Java client's scores:
range and roundrobin row for row, sticky and cooperative-sticky valid, balanced and moving no
more partitions in total than Java's did."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from assignors.traces.files import read_traces
from assignors.traces.format import Trace
from assignors.traces.replay import replay_assignors
from assignors.traces.scoring import ScoreRow

JAVA_COLUMNS = (
    "members",
    "partitions",
    "unassigned",
    "invalid",
    "min_load",
    "max_load",
    "spread",
    "moved",
    "forced",
    "rounds",
)


@cache
def _traces(vectors: Path) -> tuple[Trace, ...]:
    traces, failures = read_traces([vectors / "traces.jsonl"])
    assert failures == []
    return tuple(traces)


@cache
def _java_rows(vectors: Path) -> dict[tuple[str, str, int], dict[str, object]]:
    rows = {}
    for line in (vectors / "traces-java-scores.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["trace_id"], row["assignor"], row["generation"]] = row
    return rows


def _replayed(vectors: Path, assignor: str) -> list[ScoreRow]:
    return [row for trace in _traces(vectors) for row in replay_assignors(trace, [assignor], False)]


def test_reference_traces_read_cleanly(vectors_dir):
    traces = _traces(vectors_dir)
    assert (len(traces), sum(len(t.generations) for t in traces)) == (25, 321)


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_range_and_roundrobin_reproduce_every_java_row(vectors_dir, assignor):
    java = _java_rows(vectors_dir)
    ours = _replayed(vectors_dir, assignor)
    expected_keys = sorted(key for key in java if key[1] == assignor)
    assert sorted((r.trace_id, r.assignor, r.generation) for r in ours) == expected_keys
    differences = [
        (row.trace_id, row.generation, column, getattr(row, column), java[key][column])
        for row in ours
        for key in [(row.trace_id, assignor, row.generation)]
        for column in JAVA_COLUMNS
        if getattr(row, column) != java[key][column]
    ]
    assert differences == [], f"{len(differences)} differences (trace, gen, column, ktk, java)"


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
def test_sticky_assignors_are_valid_balanced_and_move_no_more_than_java(vectors_dir, assignor):
    java = _java_rows(vectors_dir)
    ours = _replayed(vectors_dir, assignor)
    broken = [
        (row.trace_id, row.generation, row.unassigned, row.invalid, row.balanced, row.max_load)
        for row in ours
        if row.unassigned or row.invalid or not row.balanced or row.max_load != row.optimal_max_load
    ]
    assert broken == [], (
        "generations not valid and fully balanced"
        " (trace, gen, unassigned, invalid, balanced, max load above the optimum)"
    )
    ktk_moved = sum(row.moved for row in ours)
    java_moved = sum(int(java[row.trace_id, assignor, row.generation]["moved"]) for row in ours)
    print(
        f"{assignor}: total moved ktk {ktk_moved}, java {java_moved} over {len(ours)} generations"
    )
    assert ktk_moved <= java_moved, f"{assignor}: ktk moved {ktk_moved}, java moved {java_moved}"
