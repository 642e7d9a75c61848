"""benchmarks/bench_replay.py's throughput report on the ``traces`` size: each assignor's
share of the shared parts is charged for the job of the assignors listed and, when fewer are
listed, for the job ``ktk replay`` runs by default."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from generated import generated_traces

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import bench_replay

    monkeypatch.setattr(bench_replay, "build_traces", lambda size: generated_traces("mixed", 1))
    yield bench_replay
    sys.modules.pop("bench_replay", None)


def _rows(printed: str) -> dict[str, list[float]]:
    """Assignor -> its numeric columns (generations, CPU s, ..., shares)."""
    rows = {}
    for line in printed.splitlines():
        name, *values = line.split()
        if name in ("range", "roundrobin"):
            rows[name] = [float(value) for value in values]
    return rows


def test_bench_replay_charges_the_share_of_the_default_job_when_fewer_assignors_are_listed(
    bench, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.report_throughput(["range", "roundrobin"], 1, False, 9)
    printed = capsys.readouterr().out
    assert "in a job of 2 assignors each is charged" in printed
    assert "in a job of 9 assignors each is charged" in printed
    assert "share of 9" in printed
    for generations, _, _, _, in_a_job, share_of_two, share_of_nine in _rows(printed).values():
        # a ninth of the shared parts weighs less than a half, and any share more than none
        assert in_a_job >= share_of_nine >= share_of_two
        assert generations > 0


def test_bench_replay_prints_one_share_when_the_listed_assignors_are_the_default_job(
    bench, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.report_throughput(["range", "roundrobin"], 1, False, 2)
    printed = capsys.readouterr().out
    assert "share of 2" not in printed and "in a job of 2 assignors" in printed
    assert all(len(values) == 6 for values in _rows(printed).values())
