"""`ktk replicate FILE` and `ktk replicate explore`: timeline table, JSON, HTML, exit 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app

S1 = EXAMPLES / "scenarios" / "s1-two-round-hw-lag.yaml"


def invoke(*args: str):
    return CliRunner().invoke(app, ["replicate", *args])


def write(tmp_path: Path, steps: list[dict], name: str = "case.json") -> Path:
    path = tmp_path / name
    scenario = {"name": "case", "config": {"brokers": [1, 2], "replicas": [1, 2]}, "steps": steps}
    path.write_text(json.dumps(scenario))
    return path


def test_replicate_prints_timeline_and_verdict_and_exits_0():
    outcome = invoke(str(S1), "--mode", "pre-0.11")
    assert outcome.exit_code == 0, outcome.output
    assert "s1-two-round-hw-lag (pre-0.11)" in outcome.stdout
    assert "produce m2" in outcome.stdout
    assert "lost: m2" in outcome.stdout
    assert "violation StrongIsr at step 8" in outcome.stdout
    assert "expectations: all held" in outcome.stdout


def test_replicate_json_is_the_result_document():
    outcome = invoke(str(S1), "--json")
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.stdout)
    assert document["mode"] == "pre-0.11"
    assert document["acked_lost"] == ["m2"]
    assert document["timeline"][0]["op"] == "produce m1 (acks=all)"


def test_replicate_mode_option_overrides_the_file():
    outcome = invoke(str(S1), "--mode", "current", "--json")
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["acked_lost"] == []


@pytest.mark.parametrize(
    "path", sorted((EXAMPLES / "scenarios").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_bundled_scenario_holds_its_expectations(path: Path):
    assert invoke(str(path), "--json").exit_code == 0


def test_failed_expectation_exits_1_and_says_which(tmp_path: Path):
    path = write(tmp_path, [{"produce": "m1", "acks": 1}, {"expect": {"acked_lost": ["m1"]}}])
    outcome = invoke(str(path))
    assert outcome.exit_code == 1
    assert "expect acked_lost: wanted ['m1'], got []" in outcome.stderr


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"teleport": 1}], "step 0: teleport: unknown op"),
        ([{"fetch": 1}, {"crash": 5}], "step 1: crash: unknown broker (got 5)"),
        ([{"produce": "m", "acks": 2}], 'step 0: acks: acks must be 0, 1, -1 or "all" (got 2)'),
        (
            [{"advance_ms": 100}, {"fetch": 2, "at_ms": 50}],
            "step 1: at_ms: time must not go backwards",
        ),
    ],
)
def test_invalid_scenario_exits_2_naming_step_and_field(tmp_path: Path, steps, message):
    path = write(tmp_path, steps, "bad.json")
    outcome = invoke(str(path))
    assert outcome.exit_code == 2
    assert message in outcome.stderr
    assert "bad.json" in outcome.stderr
    assert "Traceback" not in outcome.output


def test_unreadable_yaml_and_missing_file_exit_2(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    assert invoke(str(path)).exit_code == 2
    missing = invoke(str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2
    assert "nope.yaml" in missing.stderr


def test_unknown_mode_exits_2():
    outcome = invoke(str(S1), "--mode", "0.8")
    assert outcome.exit_code == 2
    assert "mode: unknown mode" in outcome.stderr


def test_html_page_is_written(tmp_path: Path):
    page = tmp_path / "s1.html"
    outcome = invoke(str(S1), "--html", str(page))
    assert outcome.exit_code == 0, outcome.output
    text = page.read_text()
    assert "<html" in text.lower() and "s1-two-round-hw-lag" in text


def test_explore_reports_classes_and_replayable_scenarios(tmp_path: Path):
    outcome = invoke(
        "explore", "--mode", "kip-101", "--min-isr", "1", "--schedules", "120", "--seed", "3",
        "--json",
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.stdout)
    assert report["mode"] == "kip-101" and report["schedules"] == 120
    assert report["findings"], report
    replay = tmp_path / "finding.json"
    replay.write_text(json.dumps(report["findings"][0]["scenario"]))
    assert invoke(str(replay)).exit_code == 0


def test_explore_writes_files_into_out_dir(tmp_path: Path):
    outcome = invoke(
        "explore", "--mode", "pre-0.11", "--min-isr", "1", "--schedules", "60", "--seed", "7",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.output
    written = sorted(tmp_path.glob("*.json"))
    assert written
    assert all(invoke(str(path)).exit_code == 0 for path in written)


def test_explore_rejects_bad_acks():
    outcome = invoke("explore", "--acks", "2", "--schedules", "1")
    assert outcome.exit_code == 2
    assert "--acks" in outcome.stderr
