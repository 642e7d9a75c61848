"""Link-level network faults: ``cut`` / ``heal`` of one link (one way or both) between brokers,
the controller and the clients; how each direction changes fetches, metadata, heartbeats and
produce requests; a producer with stale metadata (``produce ... to:``); bad link steps (one
line, exit 2); and the explorer's ``link_cuts`` setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app
from replication.errors import InputError, ScenarioError
from replication.explore import ExploreSettings, explore, generate_schedule
from replication.modes import MODE_NAMES, get_mode
from replication.scenario import ScenarioConfig, Step, load_scenario, scenario_to_dict
from replication.sim import Runner, run_scenario

CONFIG = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3))
SCENARIOS = EXAMPLES / "scenarios"


def parse(raw: dict[str, object], index: int = 0) -> Step:
    return Step.from_dict(raw, CONFIG, index)


def runner(mode: str = "current", **config: object) -> Runner:
    values: dict[str, object] = {"brokers": (1, 2, 3), "replicas": (1, 2, 3), **config}
    return Runner(ScenarioConfig(**values), get_mode(mode))  # type: ignore[arg-type]


def do(run: Runner, raw: dict[str, object]) -> str:
    return run.step(Step.from_dict(raw, run.cluster.config)).result


# ------------------------------------------------------------------ parsing


def test_cut_step_parses_link_with_both_defaulting_to_true() -> None:
    step = parse({"cut": {"from": 1, "to": "controller"}})
    assert step.target == (("both", True), ("from", 1), ("to", "controller"))
    assert step.describe() == "cut 1<->controller"
    one_way = parse({"cut": {"from": "clients", "to": 2, "both": False}})
    assert one_way.describe() == "cut clients->2"


def test_heal_takes_a_broker_or_a_link() -> None:
    assert parse({"heal": 2}).target == 2
    assert parse({"heal": {"from": 1, "to": 2, "both": False}}).describe() == "heal 1->2"


def test_link_steps_round_trip_through_the_file_format() -> None:
    document = {
        "name": "links",
        "config": {"brokers": [1, 2, 3], "replicas": [1, 2, 3]},
        "steps": [
            {"cut": {"from": 1, "to": 2, "both": False}},
            {"produce": "m1", "acks": 1, "to": 1},
            {"heal": {"from": 1, "to": 2, "both": False}},
            {"heal": 3},
        ],
    }
    scenario = load_scenario(document)
    again = load_scenario(scenario_to_dict(scenario))
    assert again == scenario
    assert scenario_to_dict(scenario)["steps"][0] == {"cut": {"both": False, "from": 1, "to": 2}}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"cut": {"from": 1, "to": 7}}, "step 3: cut.to: unknown broker (got 7)"),
        ({"heal": {"from": 9, "to": 1}}, "step 3: heal.from: unknown broker (got 9)"),
        ({"cut": 2}, "step 3: cut: cut takes a link like {from: 1, to: 2, both: false} (got 2)"),
        ({"cut": {"from": 1}}, "step 3: cut.to: a link needs from and to"),
        ({"cut": {"from": 1, "to": 1}}, "step 3: cut.to: a link joins two different endpoints"),
        (
            {"cut": {"from": "controller", "to": "clients"}},
            "step 3: cut.to: a link has a broker at one end at least",
        ),
        ({"cut": {"from": 1, "to": 2, "both": "no"}}, "step 3: cut.both: must be true or false"),
        ({"cut": {"from": 1, "to": 2, "one_way": True}}, "step 3: cut.one_way: a link has"),
        ({"produce": "m1", "to": 8}, "step 3: to: unknown broker (got 8)"),
        ({"cut": {"from": 1, "to": 2}, "acks": 1}, "step 3: acks: field not allowed on cut"),
    ],
)
def test_bad_link_step_names_step_and_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError) as error:
        parse(raw, 3)
    assert str(error.value).startswith(message), str(error.value)


def test_bad_link_step_on_the_command_line_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad-link.json"
    document = {
        "name": "bad",
        "config": {"brokers": [1, 2], "replicas": [1, 2]},
        "steps": [{"fetch": 2}, {"cut": {"from": 1, "to": 5, "both": False}}],
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    outcome = CliRunner().invoke(app, ["replicate", str(path)])
    assert outcome.exit_code == 2
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert "bad-link.json" in lines[0] and "step 1: cut.to: unknown broker (got 5)" in lines[0]
    assert "Traceback" not in outcome.stdout + outcome.stderr


# ------------------------------------------------------------------ semantics


def test_follower_to_leader_cut_loses_the_fetch_request() -> None:
    run = runner()
    do(run, {"produce": "m1", "acks": 1})
    assert do(run, {"cut": {"from": 2, "to": 1, "both": False}}) == "cut 2->1"
    assert do(run, {"fetch": 2}) == "request lost (link 2->1 cut)"
    assert run.cluster.brokers[1].replica.followers[2].log_end_offset == -1
    assert run.cluster.brokers[2].replica.log.log_end_offset == 0


def test_leader_to_follower_cut_loses_only_the_reply() -> None:
    run = runner()
    do(run, {"produce": "m1", "acks": 1})
    do(run, {"fetch": 2})
    do(run, {"cut": {"from": 1, "to": 2, "both": False}})
    do(run, {"produce": "m2", "acks": 1})
    assert do(run, {"fetch": 2}) == "reply lost"
    # the leader learnt offset 1 from the request; the follower never got m2
    assert run.cluster.brokers[1].replica.followers[2].log_end_offset == 1
    assert run.cluster.brokers[2].replica.log.values() == ["m1"]
    do(run, {"heal": {"from": 1, "to": 2, "both": False}})
    do(run, {"fetch": 2})
    assert run.cluster.brokers[2].replica.log.values() == ["m1", "m2"]


def test_broker_to_controller_cut_fences_after_the_session_timeout_and_heal_unfences() -> None:
    run = runner()
    do(run, {"cut": {"from": 3, "to": "controller", "both": False}})
    do(run, {"advance_ms": 8000})
    assert run.cluster.controller.registration.isr == (1, 2, 3)
    do(run, {"advance_ms": 2000})
    assert run.cluster.controller.registration.isr == (1, 2)
    assert run.cluster.controller.brokers[3].fenced
    do(run, {"heal": {"from": 3, "to": "controller", "both": False}})
    assert not run.cluster.controller.brokers[3].fenced


def test_controller_to_broker_cut_leaves_the_broker_with_stale_metadata() -> None:
    run = runner()
    do(run, {"cut": {"from": "controller", "to": 3, "both": False}})
    do(run, {"elect": 2})
    assert run.cluster.brokers[2].replica.role == "leader"
    assert run.cluster.brokers[3].replica.leader_id == 1  # never heard of the election
    assert not run.cluster.controller.brokers[3].fenced  # its heartbeats still arrive
    do(run, {"heal": {"from": "controller", "to": 3, "both": False}})
    assert run.cluster.brokers[3].replica.leader_id == 2


def test_restart_behind_a_cut_controller_link_registers_once_healed() -> None:
    run = runner()
    do(run, {"crash": 3})
    do(run, {"cut": {"from": 3, "to": "controller"}})
    epoch = run.cluster.brokers[3].broker_epoch
    assert do(run, {"restart": 3}) == "restarted, cut off"
    assert run.cluster.brokers[3].broker_epoch == epoch
    assert do(run, {"heal": {"from": 3, "to": "controller"}}).endswith("healed, registered")
    assert run.cluster.brokers[3].broker_epoch > epoch


def test_clients_to_leader_cut_times_out_without_appending() -> None:
    run = runner()
    do(run, {"cut": {"from": "clients", "to": 1, "both": False}})
    assert do(run, {"produce": "m1", "acks": 1}) == "REQUEST_TIMED_OUT"
    assert run.cluster.brokers[1].replica.log.values() == []


def test_leader_to_clients_cut_appends_but_never_acknowledges() -> None:
    run = runner(min_insync_replicas=1)
    do(run, {"cut": {"from": 1, "to": "clients", "both": False}})
    assert do(run, {"produce": "m1", "acks": 1}) == "appended at 0: REQUEST_TIMED_OUT"
    do(run, {"produce": "m2", "acks": "all", "timeout_ms": 1000})
    for broker in (2, 3, 2, 3):
        do(run, {"fetch": broker})
    state = run.cluster.state()
    assert state.hw == 2 and state.acked == ()
    assert dict(state.results)["m2"] == "pending"  # its answer cannot get through
    assert do(run, {"consume": "c1"}) == "no reachable leader"
    do(run, {"advance_ms": 1000})
    assert dict(run.cluster.state().results)["m2"] == "REQUEST_TIMED_OUT"


def test_producer_with_stale_metadata_reaches_a_broker_that_no_longer_leads() -> None:
    run = runner()
    do(run, {"elect": 2})
    assert do(run, {"produce": "m1", "acks": 1, "to": 1}) == "NOT_LEADER_OR_FOLLOWER"
    assert do(run, {"produce": "m2", "acks": 1, "to": 2}) == "appended at 0: ok"


def test_link_scenarios_hold_their_expectations_in_every_mode() -> None:
    for name in (
        "s11-follower-cannot-hear-leader",
        "s12-leader-misses-metadata",
        "s13-zombie-leader",
        "s14-stale-follower-fenced",
        "s15-lost-produce-response",
    ):
        scenario = load_scenario(SCENARIOS / f"{name}.yaml")
        for mode in MODE_NAMES:
            result = run_scenario(scenario, mode)
            assert result.expect_failures == (), (name, mode, result.expect_failures)
            assert result.expectations_checked >= 2, (name, mode)


def test_zombie_leader_acks_1_write_is_lost_in_every_mode() -> None:
    scenario = load_scenario(SCENARIOS / "s13-zombie-leader.yaml")
    for mode in MODE_NAMES:
        result = run_scenario(scenario, mode)
        assert result.acked_lost == ["m2"], mode
        assert "m3" not in result.final.acked


def test_kip320_fences_the_stale_follower_only_in_current() -> None:
    path = SCENARIOS / "s14-stale-follower-fenced.yaml"
    scenario = load_scenario(path)
    current = run_scenario(scenario, "current")
    fenced = [entry.result for entry in current.timeline if entry.op == "fetch 3"]
    assert "FENCED_LEADER_EPOCH" in fenced
    assert current.violations == ()
    for mode in ("pre-0.11", "kip-101", "kip-279"):
        assert "LogMatching" in run_scenario(scenario, mode).violation_names(), mode


# ------------------------------------------------------------------ explorer


def test_explorer_draws_no_link_cut_unless_asked() -> None:
    config = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3))
    for index in range(40):
        plain = generate_schedule(config, 5, index)
        assert plain == generate_schedule(config, 5, index, link_cuts=False)
        assert not any("cut" in step for step in plain)


def test_explorer_with_link_cuts_is_seeded_and_its_findings_replay() -> None:
    config = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3))
    schedules = [generate_schedule(config, 5, index, link_cuts=True) for index in range(40)]
    assert schedules == [generate_schedule(config, 5, i, link_cuts=True) for i in range(40)]
    steps = [step for schedule in schedules for step in schedule]
    assert any("cut" in step for step in steps)
    assert any(isinstance(step.get("heal"), dict) for step in steps)
    report = explore("kip-101", brokers=(1, 2), schedules=60, seed=2, link_cuts=True)
    again = explore("kip-101", brokers=(1, 2), schedules=60, seed=2, link_cuts=True)
    assert report.to_json() == again.to_json()
    assert report.to_json()["link_cuts"] is True
    assert "link_cuts" not in explore("kip-101", brokers=(1, 2), schedules=5, seed=2).to_json()
    assert report.findings
    for finding in report.findings:
        replay = load_scenario(scenario_to_dict(finding.scenario))
        assert run_scenario(replay).expect_failures == ()


def test_explore_settings_refuse_a_non_boolean_link_cuts() -> None:
    with pytest.raises(InputError, match="link_cuts: must be true or false"):
        ExploreSettings(CONFIG, link_cuts="yes")  # type: ignore[arg-type]


def test_explore_command_line_link_cuts_option() -> None:
    outcome = CliRunner().invoke(
        app,
        [
            *("replicate", "explore", "--mode", "current", "--min-isr", "2"),
            *("--schedules", "20", "--seed", "1", "--link-cuts", "--json"),
        ],
    )
    assert outcome.exit_code in (0, 1), outcome.stderr
    assert json.loads(outcome.stdout)["link_cuts"] is True
