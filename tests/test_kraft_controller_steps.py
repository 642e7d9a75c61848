"""Choosing the KRaft-backed controller for a data-plane scenario (`config.controller`,
`ktk replicate --controller`) and the scenario steps that fail its controller quorum
(`controller: failover | isolate | heal`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from dashboards.errors import InputError as PageInputError
from dashboards.replication import render_replication
from ktk.cli import app
from replication.errors import ScenarioError
from replication.kraft.log_controller import MetadataLogController
from replication.modes import ALL_MODE_NAMES, get_mode
from replication.scenario import ScenarioConfig, Step, load_scenario
from replication.sim import Runner, run_scenario

S4 = EXAMPLES / "scenarios" / "s4-unclean-election.yaml"
S24 = EXAMPLES / "scenarios" / "s24-broker-down-moves-every-leader.yaml"
S29 = EXAMPLES / "scenarios" / "s29-controller-failover-mid-election.yaml"
QUORUM = EXAMPLES / "quorum" / "k1-election-of-the-seeds.yaml"
ALL_MODES = ALL_MODE_NAMES
EPOCH = re.compile(r"broker epoch \d+")


def invoke(*args: str):
    return CliRunner().invoke(app, ["replicate", *args])


def scenario(steps: list[dict], **config: object) -> dict:
    return {
        "name": "case",
        "config": {"brokers": [1, 2, 3], "replicas": [1, 2, 3], **config},
        "steps": steps,
    }


def write(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("mode", ALL_MODES)
def test_s29_holds_its_expectations_in_every_mode(mode):
    result = run_scenario(load_scenario(S29), mode)
    assert result.controller == "kraft"
    assert result.expect_failures == ()
    assert result.expectations_checked == 4
    assert (result.acked_lost, result.diverged, result.violations) == ([], False, ())


def test_a_decision_of_the_cut_off_controller_is_shown_as_never_committed():
    result = run_scenario(load_scenario(S29))
    crash = next(e for e in result.timeline if e.op.startswith("crash 1"))
    assert crash.result == "crashed, fence not committed"
    assert (crash.leader, crash.isr) == (1, (1, 2, 3))  # the brokers still see 1 leading
    assert any("never committed" in change for change in crash.changes)
    late = next(e for e in result.timeline if e.op == "advance_ms 10000")
    assert (late.leader, late.leader_epoch, late.isr) == (2, 1, (2, 3))
    assert late.result == "t=9000: broker 1 fenced"


def test_the_isr_change_in_flight_across_a_failover_is_decided_by_the_next_controller():
    result = run_scenario(load_scenario(S29))
    failover = next(e for e in result.timeline if e.op == "controller failover")
    assert re.fullmatch(r"controller \d+ crashed; \d+ active in epoch \d+", failover.result)
    assert failover.isr == (2, 3)
    after = result.timeline[-1]
    assert after.isr == (1, 2, 3)
    assert any("1 joined the ISR" in change for change in after.changes)


def test_a_controller_step_with_the_builtin_controller_is_refused_naming_the_step():
    with pytest.raises(ScenarioError) as caught:
        run_scenario(load_scenario(S29), controller="builtin")
    error = caught.value
    assert (error.step, error.field, error.value) == (7, "controller", "isolate")
    assert str(error).startswith(f"{S29}: step 7: controller: a controller step needs")


def test_the_runner_refuses_a_controller_step_on_the_builtin_controller():
    runner = Runner(ScenarioConfig(brokers=(1, 2), replicas=(1, 2)), get_mode("current"))
    with pytest.raises(ScenarioError, match="needs the KRaft controller"):
        runner.step(Step("controller", "failover"))


def test_the_controller_option_overrides_the_file_and_the_result_names_it():
    builtin = run_scenario(load_scenario(S4))
    kraft = run_scenario(load_scenario(S4), controller="kraft")
    assert (builtin.controller, kraft.controller) == ("builtin", "kraft")
    assert builtin.to_json()["controller"] == "builtin"
    assert kraft.expect_failures == builtin.expect_failures == ()


@pytest.mark.parametrize("mode", [m for m in ALL_MODES if m != "current"])
def test_every_scenario_reaches_the_same_verdict_with_either_controller_in_mode(mode):
    for path in sorted((EXAMPLES / "scenarios").glob("*.yaml")):
        loaded = load_scenario(path)
        if any(step.op == "controller" for step in loaded.steps):
            continue
        documents = [
            run_scenario(loaded, mode, controller=name).to_json() for name in ("builtin", "kraft")
        ]
        assert "quorum" not in documents[0] and "quorum" in documents[1]
        for document in documents:
            document.pop("controller")
            document.pop("quorum", None)
        assert EPOCH.sub("N", repr(documents[0])) == EPOCH.sub("N", repr(documents[1])), path.stem


def test_a_controller_fault_on_several_partitions_happens_once(monkeypatch):
    loaded = load_scenario(S24)
    runner = Runner(loaded.config, get_mode("current"), controller_factory=MetadataLogController)
    controller = runner.cluster.controller
    assert isinstance(controller, MetadataLogController)
    faults: list[str] = []
    fault = controller.fault
    monkeypatch.setattr(controller, "fault", lambda name: faults.append(name) or fault(name))
    old = controller.active().node_id
    outcome = runner.step(Step("controller", "failover"))
    assert faults == ["failover"]
    assert len(outcome.partitions) == len(loaded.config.partition_replicas) > 1
    assert {o.result for o in outcome.partitions} == {outcome.result}
    assert outcome.result.startswith(f"controller {old} crashed; ")
    assert controller.active().node_id != old


@pytest.mark.parametrize(
    ("steps", "field", "message"),
    [
        ([{"controller": "reboot"}], "controller", "controller takes failover, isolate, heal"),
        ([{"controller": "heal"}], "controller", "no controller is cut off"),
        ([{"controller": "isolate"}, {"controller": "isolate"}], "controller", "already cut"),
    ],
    ids=["unknown-fault", "heal-without-isolate", "isolate-twice"],
)
def test_bad_controller_steps_are_refused_naming_the_step(steps, field, message):
    with pytest.raises(ScenarioError, match=message) as caught:
        load_scenario(scenario(steps, controller="kraft"))
    assert caught.value.field == field
    assert caught.value.step == len(steps) - 1


def test_an_unknown_controller_in_the_config_is_refused():
    with pytest.raises(ScenarioError, match="unknown controller") as caught:
        load_scenario(scenario([], controller="zookeeper"))
    assert caught.value.field == "config.controller"


def test_cli_controller_kraft_runs_a_builtin_file_and_says_so_in_the_header():
    outcome = invoke(str(S4), "--controller", "kraft")
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.splitlines()[0].startswith("controller: kraft")
    assert "expectations: all held" in outcome.stdout
    plain = invoke(str(S4))
    assert "controller: builtin" in plain.stdout


def test_cli_refuses_a_controller_step_with_the_builtin_controller_in_one_line():
    outcome = invoke(str(S29), "--controller", "builtin")
    assert outcome.exit_code == 2
    assert outcome.stdout == ""
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "step 7: controller: a controller step needs the KRaft controller" in lines[0]


def test_cli_refuses_an_unknown_controller_and_a_quorum_file():
    unknown = invoke(str(S4), "--controller", "zookeeper")
    assert unknown.exit_code == 2
    assert "--controller must be one of builtin, kraft" in unknown.stderr
    quorum = invoke(str(QUORUM), "--controller", "kraft")
    assert quorum.exit_code == 2
    assert len(quorum.stderr.strip().splitlines()) == 1
    assert "quorum file runs its own controller quorum" in quorum.stderr


def test_cli_runs_s29_from_its_config_and_the_page_names_the_controller(tmp_path: Path):
    outcome = invoke(str(S29), "--json")
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.stdout)
    assert document["controller"] == "kraft"
    page = render_replication(document)
    assert '<td>controller</td><td class="text mono">kraft</td>' in page


def test_cli_controller_steps_in_a_file_of_mine_run_with_the_option(tmp_path: Path):
    steps = [
        {"produce": "m1", "acks": "all"},
        {"controller": "failover"},
        {"fetch": 2},
        {"fetch": 3},
        {"fetch": 2},
        {"fetch": 3},
        {"expect": {"acked": ["m1"], "leader": 1}},
    ]
    path = write(tmp_path, scenario(steps))
    refused = invoke(str(path))
    assert refused.exit_code == 2
    assert "step 1: controller" in refused.stderr
    ran = invoke(str(path), "--controller", "kraft", "--json")
    assert ran.exit_code == 0, ran.output
    document = json.loads(ran.stdout)
    assert document["controller"] == "kraft"
    assert document["timeline"][1]["op"] == "controller failover"


def test_the_page_of_several_partitions_names_the_controller_once():
    document = run_scenario(load_scenario(S24), controller="kraft").to_json()
    page = render_replication(document)
    assert page.count('<td>controller</td><td class="text mono">kraft</td>') == 1
    assert "<td>controller</td>" not in render_replication(
        {k: v for k, v in run_scenario(load_scenario(S4)).to_json().items() if k != "controller"}
    )


def _failover(quorum: dict) -> tuple[dict, dict]:
    """The quorum rows just before and at s29's controller failover step."""
    timeline = quorum["timeline"]
    at = next(i for i, e in enumerate(timeline) if e["op"].startswith("controller failover"))
    return timeline[at - 1], timeline[at]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_s29_quorum_timeline_shows_the_failover_as_a_new_epoch_and_active_controller(mode):
    document = run_scenario(load_scenario(S29), mode).to_json()
    quorum = document["quorum"]
    assert quorum["voters"] == [3001, 3002, 3003]
    assert [e["step"] for e in quorum["timeline"]] == [e["step"] for e in document["timeline"]]
    before, at = _failover(quorum)
    assert at["active"] != before["active"] and at["epoch"] > before["epoch"]
    assert at["nodes"][str(at["active"])]["role"] == "leader"
    assert at["nodes"][str(before["active"])]["role"] == "follower"  # crashed, then restarted
    assert f"leader change: {at['active']} leads epoch {at['epoch']}" in at["changes"]
    # the AlterPartition in flight is committed by the next active controller a step later
    after = quorum["timeline"][quorum["timeline"].index(at) + 1]
    assert after["committed"] == ["partition replicated-0 leader 2 isr [1, 2, 3] epoch 1"]


def test_the_quorum_rows_name_the_records_committed_and_the_cut_off_controllers_log():
    quorum = run_scenario(load_scenario(S29)).to_json()["quorum"]
    rows = {e["op"].split(" (")[0]: e for e in quorum["timeline"]}
    crash = rows["crash 1"]  # decided by the cut-off controller: appended, never committed
    assert crash["committed"] == []
    cut_off = crash["nodes"]["3002"]
    assert cut_off["end_offset"] > cut_off["hw"]
    fenced = rows["advance_ms 10000"]  # the new active controller fences 1 itself
    assert fenced["committed"] == [
        "partition replicated-0 leader 2 isr [2, 3] epoch 1",
        "fence broker 1",
    ]
    assert "committed: fence broker 1" in fenced["changes"]


def test_a_builtin_result_has_no_quorum_and_a_kraft_one_has_one_row_per_step():
    assert "quorum" not in run_scenario(load_scenario(S4)).to_json()
    several = run_scenario(load_scenario(S24), controller="kraft").to_json()
    steps = [e["step"] for e in several["partitions"][0]["timeline"]]
    assert [e["step"] for e in several["quorum"]["timeline"]] == steps


def test_cli_prints_the_quorum_timeline_after_the_partition_timeline():
    outcome = invoke(str(S29))
    assert outcome.exit_code == 0, outcome.output
    text = outcome.stdout
    partition = text.index("replica columns:")
    quorum = text.index("KRaft controller (quorum, voters [3001, 3002, 3003])")
    assert partition < quorum < text.index("invariants: all held")
    assert "c3001" in text and "L e5 12/12" in text  # 3002 leads epoch 5 after the failover
    assert "KRaft controller (quorum" not in invoke(str(S4)).stdout


def test_the_page_shows_the_controller_quorum_section_escaped():
    document = json.loads(invoke(str(S29), "--json").stdout)
    _, at = _failover(document["quorum"])
    page = render_replication(document)
    assert 'id="controller-quorum"' in page
    assert f"leader change: {at['active']} leads epoch {at['epoch']}" in page
    document["quorum"]["timeline"][0]["op"] = "<script>x</script>"
    document["quorum"]["nodes"]["<i>"] = "<b>"
    hostile = render_replication(document)
    assert "<script>x" not in hostile and "&lt;script&gt;x" in hostile
    assert "controller <i>" not in hostile and "controller &lt;i&gt;" in hostile
    assert 'id="controller-quorum"' not in render_replication(
        run_scenario(load_scenario(S4)).to_json()
    )


def test_a_page_with_a_malformed_quorum_is_refused_naming_the_field():
    document = run_scenario(load_scenario(S29)).to_json()
    document["quorum"]["timeline"] = "steps"
    with pytest.raises(PageInputError) as caught:
        render_replication(document)
    assert caught.value.field == "quorum.timeline"
