"""`ktk replicate explore --quorum`: random crashes, restarts, link cuts, isolations and clock
jumps find each known class with its rule switched off, nothing with every rule on, and each
finding shrinks to a scenario file that `ktk replicate` replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktk.cli import app
from replication.errors import InputError
from replication.kraft.explore import (
    QuorumExploreSettings,
    _quorum_settings,
    _replay,
    _steps,
    explore_quorum,
    quorum_schedule,
)
from replication.kraft.scenario import load_quorum_scenario, quorum_scenario_to_text


def invoke(*args: str):
    return CliRunner().invoke(app, ["replicate", *args])


def replays_with(finding, tmp_path: Path, invariant: str) -> None:
    path = tmp_path / finding.file_name
    path.write_text(quorum_scenario_to_text(finding.scenario), encoding="utf-8")
    outcome = invoke(str(path), "--json")
    assert outcome.exit_code == 0, outcome.output  # its expect step names the violation
    document = json.loads(outcome.stdout)
    assert invariant in {v["invariant"] for v in document["violations"]}


def test_three_hundred_quorum_schedules_with_every_rule_on_find_nothing():
    report = explore_quorum(QuorumExploreSettings(schedules=300, seed=0))
    assert report.violating == 0 and report.findings == ()


def test_voting_without_the_log_check_loses_committed_metadata(tmp_path: Path):
    settings = QuorumExploreSettings(schedules=105, seed=0, rules_off=("vote_log_check",))
    report = explore_quorum(settings)
    assert dict(report.first_found)["LeaderCompleteness"] == 104
    [finding] = [f for f in report.findings if f.violation_class == "LeaderCompleteness"]
    assert "committed metadata lost" in finding.detail
    assert finding.shrunk_steps < finding.original_steps
    replays_with(finding, tmp_path, "LeaderCompleteness")


def test_a_leader_counting_an_observer_breaks_the_majority_high_watermark(tmp_path: Path):
    report = explore_quorum(QuorumExploreSettings(schedules=1, rules_on=("count_observers",)))
    assert report.first_found == (("MajorityHighWatermark", 0),)
    replays_with(report.findings[0], tmp_path, "MajorityHighWatermark")


def test_without_pre_vote_a_returning_voter_disrupts_the_quorum(tmp_path: Path):
    report = explore_quorum(QuorumExploreSettings(schedules=167, rules_off=("pre_vote",)))
    assert report.first_found == (("QuorumDisruption", 166),)
    [finding] = report.findings
    assert "was deposed by a Vote for epoch" in finding.detail
    assert finding.shrunk_steps < finding.original_steps
    replays_with(finding, tmp_path, "QuorumDisruption")


def test_a_quorum_schedule_replays_to_the_same_violation():
    settings = QuorumExploreSettings(rules_off=("pre_vote",))
    steps, violations = quorum_schedule(settings, 166)
    assert violations
    replayed, notes = _replay(_quorum_settings(settings, 166), _steps(steps))
    assert [v.detail for v in replayed] == [v.detail for v in violations]
    # every generated step applies (a snapshot may find nothing past the log start)
    assert set(notes) <= {None, "nothing past the log start"}


def test_explore_is_deterministic_for_a_seed():
    settings = QuorumExploreSettings(schedules=30, seed=3, rules_on=("count_observers",))
    assert explore_quorum(settings).to_json() == explore_quorum(settings).to_json()


def test_explore_cli_writes_each_finding_and_exits_1(tmp_path: Path):
    out = tmp_path / "found"
    outcome = invoke(
        "explore",
        "--quorum",
        "3",
        "--rule-off",
        "pre_vote",
        "--schedules",
        "167",
        "--out",
        str(out),
    )
    assert outcome.exit_code == 1, outcome.output
    assert "QuorumDisruption: first at schedule 166" in outcome.stdout
    assert "schedules/s" in outcome.stdout
    written = out / "kraft-quorum-disruption-seed-166.json"
    scenario = load_quorum_scenario(written)
    assert scenario.settings.rules.pre_vote is False
    assert invoke(str(written)).exit_code == 0


def test_explore_cli_with_every_rule_on_exits_0():
    outcome = invoke("explore", "--quorum", "3", "--schedules", "50", "--json")
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.stdout)
    assert document["violating_schedules"] == 0 and document["schedules_per_second"] > 0


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [("--rule-off", "vote_check", "rules_off"), ("--rule-on", "pre_vote", "rules_on")],
)
def test_explore_cli_refuses_unknown_rules_with_one_line(option: str, value: str, field: str):
    outcome = invoke("explore", "--quorum", "3", option, value, "--schedules", "1")
    assert outcome.exit_code == 2
    assert f"{field}:" in outcome.output and len(outcome.output.strip().splitlines()) == 1


def test_settings_refuse_a_quorum_of_zero_voters():
    with pytest.raises(InputError, match="voters"):
        QuorumExploreSettings(voters=0)


def test_explore_cli_refuses_invariants_with_quorum():
    outcome = invoke("explore", "--quorum", "3", "--invariants", "LogMatching")
    assert outcome.exit_code == 2 and "--invariants" in outcome.output
