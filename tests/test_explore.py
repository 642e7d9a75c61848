"""The fault-schedule explorer: classification, determinism, shrinking, replayable output, and
the verdict table of spec/replication.md (each class found where it exists, none where safe)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app
from replication.errors import InputError
from replication.explore import (
    CLASS_NAMES,
    ExploreReport,
    ScheduleScan,
    build_scenario,
    classify,
    explore,
    explore_settings,
    finish_exploration,
    generate_schedule,
    scan_schedules,
    shrink,
)
from replication.producer import ProducerSettings
from replication.scenario import load_scenario, scenario_to_dict, scenario_to_text
from replication.sim import run_scenario

SCENARIOS = EXAMPLES / "scenarios"


def explain(report: ExploreReport) -> str:
    """A failure message: the seed, the summary and every shrunk scenario, ready to replay."""
    scenarios = "\n".join(
        f"# {finding.file_name}\n{scenario_to_text(finding.scenario)}"
        for finding in report.findings
    )
    return f"seed {report.seed}\n{report.summary()}\n{scenarios}"


TWO_BROKERS: dict[str, Any] = {"brokers": (1, 2)}
THREE_BROKERS: dict[str, Any] = {"brokers": (1, 2, 3)}


@pytest.mark.parametrize(
    ("file_name", "mode", "expected"),
    [
        ("s1-two-round-hw-lag.yaml", "pre-0.11", "S1"),
        ("s1-two-round-hw-lag.yaml", "current", None),
        ("s2-both-lose-unflushed.yaml", "pre-0.11", "S2"),
        ("s3-fast-leader-changes.yaml", "kip-101", "S3"),
        ("s3-fast-leader-changes.yaml", "kip-279", None),
        ("s4-unclean-election.yaml", "current", "S4"),
        ("s5-isr-shrinks-to-one.yaml", "current", "S5"),
        ("s5-unclean-shutdown.yaml", "current", "S5"),
        ("s5-unclean-shutdown-elr.yaml", "current", None),
    ],
)
def test_the_spec_scenarios_fall_into_their_own_class(
    file_name: str, mode: str, expected: str | None
) -> None:
    scenario = load_scenario(SCENARIOS / file_name)
    without_expect = scenario.__class__(
        scenario.name, scenario.config, tuple(s for s in scenario.steps if s.op != "expect")
    )
    assert classify(run_scenario(without_expect, mode)) == expected


def test_same_seed_gives_the_same_report_byte_for_byte() -> None:
    first = explore("pre-0.11", **TWO_BROKERS, schedules=40, seed=3)
    second = explore("pre-0.11", **TWO_BROKERS, schedules=40, seed=3)
    other = explore("pre-0.11", **TWO_BROKERS, schedules=40, seed=4)
    assert json.dumps(first.to_json()) == json.dumps(second.to_json())
    assert first.findings, "40 schedules of pre-0.11 should find something"
    assert json.dumps(first.to_json()) != json.dumps(other.to_json())


def test_schedules_respect_the_crash_budgets_and_never_force_an_unclean_leader() -> None:
    config = load_scenario(
        {"name": "c", "config": {"brokers": [1, 2, 3], "replicas": [1, 2, 3]}, "steps": []}
    ).config
    for index in range(60):
        steps = generate_schedule(config, 5, index, max_lossy_crashes=1, max_crashes=2)
        crashes = [step for step in steps if "crash" in step]
        assert len(crashes) <= 2
        assert sum(step.get("unflushed") == "lose" for step in crashes) <= 1
        assert all(step.get("elect") != "unclean" for step in steps)
        assert classify(run_scenario(build_scenario("s", config, steps))) != "S4"


def test_every_shrunk_scenario_replays_with_its_expectations_and_class(tmp_path: Path) -> None:
    report = explore("pre-0.11", **TWO_BROKERS, schedules=120, seed=0, out_dir=tmp_path)
    assert {finding.violation_class for finding in report.findings} >= {"S1", "S5"}
    for finding in report.findings:
        written = load_scenario(tmp_path / finding.file_name)
        assert scenario_to_dict(written) == scenario_to_dict(finding.scenario)
        result = run_scenario(written)
        assert result.ok, result.expect_failures
        assert classify(result) == finding.violation_class
        assert sum(step.op != "expect" for step in written.steps) < finding.original_steps


def test_ktk_replicate_replays_a_written_counterexample_and_exits_0(tmp_path: Path) -> None:
    report = explore(
        "kip-101", **TWO_BROKERS, max_lossy_crashes=0, schedules=5, seed=9, out_dir=tmp_path
    )
    path = tmp_path / report.findings[0].file_name
    outcome = CliRunner().invoke(app, ["replicate", str(path), "--json"])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.output)
    assert document["diverged"] is True
    assert {v["invariant"] for v in document["violations"]} >= {"LogMatching"}


def test_a_shrunk_scenario_loses_its_class_when_any_single_step_is_removed() -> None:
    report = explore("kip-101", **TWO_BROKERS, max_lossy_crashes=0, schedules=5, seed=9)
    finding = report.findings[0]
    document = scenario_to_dict(finding.scenario)
    steps = [step for step in document["steps"] if "expect" not in step]
    config = finding.scenario.config
    assert classify(run_scenario(build_scenario("full", config, steps))) == "S3"
    for index in range(len(steps)):
        fewer = steps[:index] + steps[index + 1 :]
        result = run_scenario(build_scenario("fewer", config, fewer))
        assert (classify(result), result.diverged) != ("S3", True), f"step {index} not needed"


def test_shrinking_simplifies_options_it_does_not_need() -> None:
    steps = [
        {"fetch": 1, "response": "lost"},
        {"crash": 2, "unflushed": "lose", "detected": True},
        {"advance_ms": 40000},
        {"elect": 2},
    ]

    def holds(candidate: list[dict[str, Any]]) -> bool:
        return any("crash" in step for step in candidate) and any(
            step.get("advance_ms", 0) >= 5000 for step in candidate
        )

    assert shrink(steps, holds) == [{"crash": 2}, {"advance_ms": 5000}]


def test_report_names_classes_counts_and_rate_when_timed() -> None:
    ticks = iter([10.0, 12.0])
    report = explore("pre-0.11", **TWO_BROKERS, schedules=50, seed=0, timer=lambda: next(ticks))
    assert isinstance(report, ExploreReport)
    assert report.schedules_per_second == 25.0
    document = report.to_json(include_timing=True)
    assert document["schedules_per_second"] == 25.0
    assert "schedules_per_second" not in report.to_json()
    assert set(document["classes"]) <= set(CLASS_NAMES)
    assert sum(c["count"] for c in document["classes"].values()) == report.violating_schedules
    summary = report.summary()
    assert "50 schedules of mode pre-0.11" in summary and "25 schedules/s" in summary
    for finding in report.findings:
        assert finding.file_name in summary


def test_stop_when_found_ends_the_search_at_the_first_schedule_of_the_class() -> None:
    report = explore(
        "pre-0.11",
        **TWO_BROKERS,
        schedules=10_000,
        seed=6,
        max_lossy_crashes=0,
        stop_when_found={"S1"},
        shrink_per_class=0,
    )
    assert report.schedules == report.first_schedule["S1"] + 1
    assert report.findings == ()


# explorations with several classes, several shrinks per signature, link cuts and an early
# stop: the range scans of any split must add up to the one-pass report
SPLIT_CASES: list[dict[str, Any]] = [
    {"mode": "kip-101", **TWO_BROKERS, "schedules": 300, "seed": 4, "shrink_per_class": 3},
    {
        "mode": "current",
        "unclean_leader_election": True,
        "schedules": 60,
        "seed": 1,
        "link_cuts": True,
    },
    {
        "mode": "kip-101",
        **TWO_BROKERS,
        "schedules": 200,
        "seed": 2,
        "stop_when_found": ("S5", "S2"),
    },
    # queue anomalies: shrunk before a schedule's violation, numbered per anomaly
    {
        "mode": "current",
        **TWO_BROKERS,
        "producer": ProducerSettings(acks=1, max_in_flight=3),
        "schedules": 150,
        "seed": 1,
        "shrink_per_class": 2,
        "disk_faults": True,
    },
    # an early stop on an anomaly
    {
        "mode": "kip-101",
        **TWO_BROKERS,
        "producer": ProducerSettings(max_in_flight=5),
        "schedules": 200,
        "seed": 2,
        "stop_when_found": ("S5", "DuplicateWrite"),
    },
]


@pytest.mark.parametrize("arguments", SPLIT_CASES)
@pytest.mark.parametrize("cuts", [(), (1,), (7, 8, 150), (37, 38, 39, 40)])
def test_range_scans_of_any_split_give_the_one_pass_report(
    arguments: dict[str, Any], cuts: tuple[int, ...]
) -> None:
    mode = arguments["mode"]
    options = {key: value for key, value in arguments.items() if key != "mode"}
    whole = explore(mode, **options)
    settings = explore_settings(mode, **options)
    bounds = [0, *(cut for cut in cuts if cut < settings.schedules), settings.schedules]
    scans = [scan_schedules(settings, a, b) for a, b in itertools.pairwise(bounds)]
    split = finish_exploration(settings, scans)
    assert json.dumps(split.to_json()) == json.dumps(whole.to_json()), explain(whole)


def test_a_range_scan_stops_once_its_own_schedules_showed_every_wanted_class() -> None:
    settings = explore_settings(
        "kip-101", **TWO_BROKERS, schedules=200, seed=2, stop_when_found=("S5",)
    )
    scan = scan_schedules(settings, 50, 200)
    first = min(
        index for (name, _, _), found in scan.violating.items() if name == "S5" for index in found
    )
    assert scan.stop == first + 1
    assert scan.class_counts["S5"] == 1


def test_finishing_refuses_scans_that_do_not_cover_every_schedule_in_order() -> None:
    settings = explore_settings("kip-101", **TWO_BROKERS, schedules=10)
    first, second = ScheduleScan(0, 5, 5, {}), ScheduleScan(5, 10, 10, {})
    assert finish_exploration(settings, [first, second]).schedules == 10
    with pytest.raises(ValueError, match="in order"):
        finish_exploration(settings, [second, first])
    with pytest.raises(ValueError, match="not to 10"):
        finish_exploration(settings, [first])


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"mode": "kip-999"}, "mode"),
        ({"schedules": -1}, "schedules"),
        ({"acks": 2}, "acks"),
        ({"stop_when_found": {"S9"}}, "stop_when_found"),
        ({"min_insync_replicas": 0}, "config.min_insync_replicas"),
    ],
)
def test_bad_arguments_raise_input_errors_naming_the_field(
    arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError) as raised:
        explore(**{"schedules": 1, **arguments})
    assert raised.value.field == field


# The verdict table of spec/replication.md: every class where it exists, within 10,000
# schedules; the search stops at the first hit, so these take seconds.
FOUND_WHERE_THE_TABLE_SAYS = [
    ("S1", "pre-0.11", {**TWO_BROKERS, "max_lossy_crashes": 0}),
    ("S2", "pre-0.11", TWO_BROKERS),
    ("S3", "pre-0.11", {**TWO_BROKERS, "max_lossy_crashes": 0}),
    ("S3", "kip-101", {**TWO_BROKERS, "max_lossy_crashes": 0}),
    *[
        ("S4", mode, {**THREE_BROKERS, "unclean_leader_election": True, "max_lossy_crashes": 0})
        for mode in ("pre-0.11", "kip-101", "kip-279", "current")
    ],
    *[("S5", mode, THREE_BROKERS) for mode in ("pre-0.11", "kip-101", "kip-279", "current")],
    # min ISR 2 without ELR: the last replica standing loses its page cache (KIP-966's example)
    ("S5", "current", {**THREE_BROKERS, "min_insync_replicas": 2, "max_crashes": 1}),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("violation_class", "mode", "arguments"),
    FOUND_WHERE_THE_TABLE_SAYS,
    ids=[f"{c}-{m}-{i}" for i, (c, m, _) in enumerate(FOUND_WHERE_THE_TABLE_SAYS)],
)
def test_explorer_finds_each_class_where_the_verdict_table_says_it_exists(
    violation_class: str, mode: str, arguments: dict[str, Any]
) -> None:
    report = explore(
        mode,
        **arguments,
        schedules=10_000,
        seed=0,
        stop_when_found={violation_class},
        shrink_per_class=0,
    )
    assert violation_class in report.class_counts, explain(report)
    assert report.first_schedule[violation_class] < 10_000


@pytest.mark.slow
def test_pre_011_logs_diverge_for_good_after_a_lossy_restart() -> None:
    # every kind of finding is shrunk once, so a diverging S2 keeps its divergence
    report = explore("pre-0.11", **TWO_BROKERS, schedules=2_200, seed=0)
    diverged = [f for f in report.findings if f.violation_class == "S2" and f.diverged]
    assert diverged, explain(report)
    assert "LogMatching" in diverged[0].violations


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["kip-101", "kip-279", "current"])
def test_no_two_round_hw_lag_loss_once_followers_stop_truncating_to_hw(mode: str) -> None:
    report = explore(mode, **TWO_BROKERS, max_lossy_crashes=0, schedules=2_000, seed=0)
    assert "S1" not in report.class_counts, explain(report)
    if mode != "kip-101":
        # KIP-279 closed the fast-leader-change hole too
        assert report.class_counts == {}, explain(report)


@pytest.mark.slow
def test_current_with_min_isr_2_acks_all_and_no_unclean_election_is_safe() -> None:
    report = explore(
        "current",
        **THREE_BROKERS,
        min_insync_replicas=2,
        acks="all",
        unclean_leader_election=False,
        max_lossy_crashes=0,
        schedules=10_000,
        seed=0,
    )
    assert report.schedules == 10_000
    assert report.violating_schedules == 0, explain(report)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["kip-279", "current"])
def test_after_a_lossy_restart_logs_reconverge_from_kip_279_on(mode: str) -> None:
    # S2's loss remains (the replica that kept m2 is not the one elected) but never divergence
    report = explore(mode, **TWO_BROKERS, schedules=3_000, seed=0)
    assert "S2" in report.class_counts, explain(report)
    assert not any(finding.diverged for finding in report.findings), explain(report)
