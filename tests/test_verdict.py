"""The verdict (assignors/traces/verdict.py): totals, spreads, ranking with reasons, ties,
the comparison with what the real groups did, and verdict.json's bytes."""

from __future__ import annotations

import json

from assignors.traces.results import read_verdict, result_files, write_results
from assignors.traces.scoring import ScoreRow, SummaryRow
from assignors.traces.verdict import TIE_TOLERANCE, build_verdict, verdict_json


def _summary(
    trace: str,
    assignor: str,
    paused: float,
    *,
    protocol: str = "eager",
    revoked: int = 10,
    rounds: int = 3,
    imbalance: float = 1.25,
    weight_imbalance: float | None = None,
    generations: int = 3,
    excess: int = 0,
) -> SummaryRow:
    return SummaryRow(
        trace,
        assignor,
        protocol,
        generations,
        4,
        0,
        4,
        revoked,
        rounds,
        1,
        weight_imbalance,
        None,
        0,
        0,
        excess,
        imbalance,
        paused,
        None,
        None,
    )


def _rows() -> list[SummaryRow]:
    rows = []
    for index, trace in enumerate(("a", "b", "c", "d")):
        rows.append(_summary(trace, "range", 100.0 + index, revoked=40))
        rows.append(_summary(trace, "sticky", 30.0, revoked=10))
        rows.append(_summary(trace, "cooperative-sticky", 10.0, protocol="cooperative", rounds=5))
    return rows


def test_ranking_puts_fewest_paused_partition_seconds_first_with_a_reason():
    verdict = build_verdict(_rows())
    assert [(e["rank"], e["assignor"]) for e in verdict["ranking"]] == [
        (1, "cooperative-sticky"),
        (2, "sticky"),
        (3, "range"),
    ]
    assert verdict["headline"] == (
        "cooperative-sticky: 90% fewer partition-seconds paused than range, the same balance, "
        "1 extra round per rebalance"
    )
    assert verdict["ranking"][2]["reason"].startswith(
        "range: 10.2x the partition-seconds paused by cooperative-sticky"
    )


def test_totals_and_per_trace_spread_per_assignor():
    verdict = build_verdict(_rows())
    ranged = next(e for e in verdict["assignors"] if e["assignor"] == "range")
    assert ranged["traces"] == 4 and ranged["rebalances"] == 8
    assert ranged["totals"]["paused_partition_seconds"] == 406.0
    assert ranged["per_trace"]["paused_partition_seconds"] == {
        "median": 101.5,
        "p95": 103.0,
        "worst": 103.0,
    }
    assert ranged["per_trace"]["load_imbalance"]["median"] == 1.25


def test_assignors_within_the_tolerance_tie_and_no_win_is_claimed():
    rows = [
        _summary("a", "sticky", 1000.0),
        _summary("a", "roundrobin", 1000.0 * (1 + TIE_TOLERANCE / 2)),
        _summary("a", "range", 5000.0),
    ]
    verdict = build_verdict(rows)
    ranks = {e["assignor"]: e["rank"] for e in verdict["ranking"]}
    assert ranks == {"sticky": 1, "roundrobin": 1, "range": 3}
    assert verdict["ties"] == ["roundrobin"]
    assert "tied (within 1%) with roundrobin" in verdict["headline"]
    roundrobin = next(e for e in verdict["ranking"] if e["assignor"] == "roundrobin")
    assert "as many partition-seconds paused as sticky" in roundrobin["reason"]


def test_a_less_balanced_winner_says_so():
    rows = [
        _summary("a", "sticky", 10.0, imbalance=2.0),
        _summary("a", "range", 50.0, imbalance=1.0),
    ]
    headline = build_verdict(rows)["headline"]
    assert "largest member 2.00x the mean partition count against 1.00x" in headline


def test_balance_by_weight_is_named_beside_the_count_when_both_sides_carry_weights():
    rows = [
        _summary("a", "load-aware", 10.0, imbalance=2.0, weight_imbalance=1.1),
        _summary("a", "range", 50.0, imbalance=1.0, weight_imbalance=1.6),
    ]
    assert (
        "largest member 2.00x the mean partition count against 1.00x and 1.10x the mean weight "
        "against 1.60x (median over traces)"
    ) in build_verdict(rows)["headline"]
    rows = [
        _summary("a", "load-aware", 10.0, weight_imbalance=1.1),
        _summary("a", "range", 50.0, weight_imbalance=1.6),
    ]
    assert "largest member 1.10x the mean weight against 1.60x" in build_verdict(rows)["headline"]


def test_recorded_groups_are_compared_with_the_first_ranked_assignor_on_their_traces():
    rows = [*_rows(), _summary("a", "recorded", 40.0), _summary("b", "recorded", 60.0)]
    verdict = build_verdict(rows)
    assert "recorded" not in [e["assignor"] for e in verdict["ranking"]]
    recorded = verdict["recorded"]
    assert recorded["traces"] == 2
    assert recorded["best_paused_partition_seconds"] == 20.0
    assert recorded["sentence"] == (
        "on the 2 traces that record what the real group assigned, cooperative-sticky would "
        "have paused 80% fewer partition-seconds than your groups did"
    )


def test_no_recorded_rows_means_no_comparison_and_no_rows_no_headline():
    assert build_verdict(_rows())["recorded"] is None
    empty = build_verdict([])
    assert empty["headline"] is None and empty["ranking"] == []


def test_verdict_json_is_deterministic_whatever_the_row_order():
    rows = _rows()
    first = verdict_json(build_verdict(rows, {"round_seconds": 3.0}))
    second = verdict_json(build_verdict(list(reversed(rows)), {"round_seconds": 3.0}))
    assert first == second
    assert json.loads(first)["cost_model"] == {"round_seconds": 3.0}


def test_the_result_writer_writes_verdict_json_next_to_the_tables(tmp_path):
    row = ScoreRow("g", "range", 1, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 0, 0, 0, 0, 1, None, None)
    out = write_results(tmp_path / "out", [row], [])
    verdict = read_verdict(out)
    assert verdict is not None and verdict["ranking"][0]["assignor"] == "range"
    assert verdict["cost_model"] == {"round_seconds": 3.0, "heartbeat_seconds": 5.0}
    assert (out / "verdict.json").read_bytes() == result_files([row], [])["verdict.json"]


def test_results_older_than_version_three_have_no_verdict(tmp_path):
    assert read_verdict(tmp_path) is None


def test_ties_are_measured_against_the_ranks_first_assignor_and_never_chain():
    rows = [
        _summary("a", "first", 1000.0),
        _summary("a", "second", 1009.0),  # within 1% of first
        _summary("a", "third", 1018.0),  # within 1% of second, not of first
    ]
    ranks = {e["assignor"]: e["rank"] for e in build_verdict(rows)["ranking"]}
    assert ranks == {"first": 1, "second": 1, "third": 3}
