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
    assert outcome.exit_code == 1, outcome.output
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
    assert outcome.exit_code == 1, outcome.output
    written = sorted(path for path in tmp_path.glob("*.json") if not path.name.startswith("."))
    assert written
    assert all(invoke(str(path)).exit_code == 0 for path in written)


def test_explore_rejects_bad_acks():
    outcome = invoke("explore", "--acks", "2", "--schedules", "1")
    assert outcome.exit_code == 2
    assert "--acks" in outcome.stderr


# ---------------------------------------------------------------------- verbs, help, exit codes


def test_replicate_run_is_the_same_as_replicate_file():
    direct = invoke(str(S1), "--json")
    explicit = invoke("run", str(S1), "--json")
    assert direct.exit_code == explicit.exit_code == 0
    assert direct.stdout == explicit.stdout


def test_explore_help_documents_explores_own_options_and_exit_codes():
    outcome = invoke("explore", "--help")
    assert outcome.exit_code == 0
    text = " ".join(outcome.stdout.split())
    for option in ("--schedules", "--seed", "--out", "--force", "--min-isr", "--invariants"):
        assert option in text
    assert "Exit status: 0 no schedule broke anything; 1" in text
    assert "Arguments" not in text


@pytest.mark.parametrize("verb", [(), ("run",), ("explore",)], ids=["replicate", "run", "explore"])
def test_every_replicate_verb_documents_exit_codes_0_1_2(verb):
    text = " ".join(invoke(*verb, "--help").stdout.split())
    assert "Exit status: 0" in text and "; 1 " in text and "; 2 " in text


def test_explore_exits_1_when_it_found_violations_and_0_when_none():
    found = invoke(
        "explore", "--mode", "pre-0.11", "--min-isr", "1", "--schedules", "60", "--seed", "7"
    )
    assert found.exit_code == 1, found.output
    clean = invoke("explore", "--mode", "current", "--acks", "0", "--schedules", "20")
    assert clean.exit_code == 0, clean.output
    assert "no violation found" in clean.stdout


def test_no_expectations_for_this_mode_is_said_not_all_held(tmp_path: Path):
    path = write(tmp_path, [{"produce": "m1"}, {"expect": {"acked": []}, "modes": ["kip-101"]}])
    outcome = invoke(str(path), "--mode", "current")
    assert outcome.exit_code == 0
    assert "expectations: no expectations for this mode" in outcome.stdout
    assert "all held" not in outcome.stdout.split("expectations:")[1]
    checked = invoke(str(path), "--mode", "kip-101")
    assert "expectations: all held" in checked.stdout


# ---------------------------------------------------------------------- descriptions


def test_description_and_step_comments_reach_the_output_and_the_json(tmp_path: Path):
    path = tmp_path / "described.yaml"
    path.write_text(
        "name: described\n"
        "description: Follower 2 fetches once.\n"
        "config: {brokers: [1, 2], replicas: [1, 2]}\n"
        "steps:\n"
        "  - {produce: m1, comment: first}\n"
        "  - {fetch: 2}\n"
    )
    text = invoke(str(path))
    assert text.exit_code == 0
    assert "Follower 2 fetches once." in text.stdout
    assert "# first" in text.stdout
    document = json.loads(invoke(str(path), "--json").stdout)
    assert document["description"] == "Follower 2 fetches once."
    assert document["timeline"][0]["comment"] == "first"
    assert "comment" not in document["timeline"][1]


def test_documents_without_description_or_comments_have_no_new_fields(tmp_path: Path):
    path = write(tmp_path, [{"produce": "m1"}, {"fetch": 1}])
    document = json.loads(invoke(str(path), "--json").stdout)
    assert "description" not in document and "invariants" not in document
    assert all("comment" not in entry for entry in document["timeline"])


# ---------------------------------------------------------------------- invariant selection


def test_invariants_option_checks_only_the_named_invariants():
    outcome = invoke(str(S1), "--mode", "pre-0.11", "--json", "--invariants", "LogMatching")
    assert outcome.exit_code == 1  # the file expects StrongIsr, which is no longer checked
    document = json.loads(outcome.stdout)
    assert document["invariants"] == ["LogMatching"]
    assert {v["invariant"] for v in document["violations"]} == {"LogMatching"}


def test_scenario_invariants_field_picks_a_subset(tmp_path: Path):
    import yaml

    document = yaml.safe_load(S1.read_text())
    document["steps"] = [step for step in document["steps"] if "expect" not in step]
    everything = tmp_path / "all.json"
    everything.write_text(json.dumps(document))
    subset = tmp_path / "subset.json"
    subset.write_text(json.dumps({**document, "invariants": ["LogMatching"]}))
    all_names = {
        v["invariant"] for v in json.loads(invoke(str(everything), "--json").stdout)["violations"]
    }
    some = json.loads(invoke(str(subset), "--json").stdout)
    assert some["invariants"] == ["LogMatching"]
    assert {v["invariant"] for v in some["violations"]} == {"LogMatching"}
    assert {"StrongIsr", "LogMatching"} <= all_names


def test_explore_invariants_option_names_them_in_the_report_and_the_scenarios():
    outcome = invoke(
        "explore", "--mode", "kip-101", "--min-isr", "1", "--schedules", "80", "--seed", "3",
        "--invariants", "LogMatching", "--json",
    )  # fmt: skip
    report = json.loads(outcome.stdout)
    assert report["invariants"] == ["LogMatching"]
    for finding in report["findings"]:
        assert set(finding["violations"]) <= {"LogMatching"}
        assert finding["scenario"]["invariants"] == ["LogMatching"]


# ---------------------------------------------------------------------- outputs


def test_explore_out_refuses_a_directory_ktk_did_not_create(tmp_path: Path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    args = ("explore", "--mode", "pre-0.11", "--min-isr", "1", "--schedules", "60", "--seed", "7")
    refused = invoke(*args, "--out", str(target))
    assert refused.exit_code == 2
    assert "Traceback" not in refused.output
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    forced = invoke(*args, "--out", str(target), "--force")
    assert forced.exit_code == 1, forced.output
    names = sorted(p.name for p in target.iterdir())
    assert "notes.txt" in names and any(name.endswith(".json") for name in names)
    assert (target / "notes.txt").read_text() == "keep me"


def test_explore_out_replaces_its_own_directory(tmp_path: Path):
    target = tmp_path / "found"
    args = ("explore", "--mode", "pre-0.11", "--min-isr", "1", "--schedules", "60", "--out")
    assert invoke(*args, str(target), "--seed", "7").exit_code == 1
    assert (target / ".ktk-output.json").is_file()
    assert invoke(*args, str(target), "--seed", "7").exit_code == 1
    assert (target / ".ktk-output.json").is_file()


def test_html_refuses_a_file_ktk_did_not_write_and_replaces_its_own_page(tmp_path: Path):
    page = tmp_path / "page.html"
    page.write_text("<html>someone's notes</html>")
    refused = invoke(str(S1), "--html", str(page))
    assert refused.exit_code == 2
    assert "refusing to overwrite" in refused.stderr
    assert page.read_text() == "<html>someone's notes</html>"
    assert invoke(str(S1), "--html", str(page), "--force").exit_code == 0
    assert '<meta name="generator" content="ktk' in page.read_text()
    again = invoke(str(S1), "--html", str(page))
    assert again.exit_code == 0, again.output


def test_html_refuses_a_foreign_page_quoting_the_generator_meta_in_its_body(tmp_path: Path):
    page = tmp_path / "page.html"
    foreign = (
        "<!DOCTYPE html><html><head><title>notes</title></head>"
        '<body><meta name="generator" content="ktk"></body></html>'
    )
    page.write_text(foreign)
    refused = invoke(str(S1), "--html", str(page))
    assert refused.exit_code == 2
    assert "refusing to overwrite" in refused.stderr
    assert page.read_text() == foreign


def test_html_never_overwrites_the_scenario_file(tmp_path: Path):
    path = write(tmp_path, [{"produce": "m1"}])
    before = path.read_text()
    outcome = invoke(str(path), "--html", str(path), "--force")
    assert outcome.exit_code == 2
    assert path.read_text() == before
