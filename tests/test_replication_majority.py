"""The majority mode (commit on a majority of the replicas, elect by Raft's vote) and
`ktk replicate compare`, which runs it next to Kafka's ISR configurations."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ktk.cli import app
from replication.compare import DEFAULT_CONFIGS, compare
from replication.errors import InputError
from replication.explore import build_scenario, explore, generate_schedule, lost_acks_all
from replication.modes import ALL_MODE_NAMES, MODE_NAMES, get_mode
from replication.raft_rules import log_at_least, majority_high_watermark
from replication.scenario import ScenarioConfig, Step, load_scenario
from replication.sim import Runner, run_scenario

MAJORITY = get_mode("majority")


def _runner(replicas: tuple[int, ...] = (1, 2, 3), mode=MAJORITY) -> Runner:
    config = ScenarioConfig(brokers=replicas, replicas=replicas, mode="majority")
    return Runner(config, mode)


def _do(runner: Runner, op: str, target: object = None, **options: object):
    return runner.step(Step(op, target, tuple(options.items())))  # type: ignore[arg-type]


def _commit_m1_on_leader_and_2(runner: Runner) -> None:
    _do(runner, "produce", "m1", acks="all")
    _do(runner, "fetch", 2)
    _do(runner, "fetch", 2)


def test_majority_commit_needs_two_of_three_replicas():
    runner = _runner()
    _do(runner, "produce", "m1", acks="all")
    assert runner.cluster.view().acked == ()
    _do(runner, "fetch", 2)  # follower 2 has m1; the leader learns it on the next fetch
    assert runner.cluster.view().acked == ()
    view = _do(runner, "fetch", 2).view
    assert view.acked == ("m1",)
    assert view.replica(1).high_watermark == 1
    assert view.replica(3).values() == []  # committed without replica 3


def test_majority_mode_ignores_min_insync_replicas():
    config = ScenarioConfig(
        brokers=(1, 2, 3), replicas=(1, 2, 3), mode="majority", min_insync_replicas=3
    )
    runner = Runner(config, MAJORITY)
    _do(runner, "crash", 3, detected=True)
    _commit_m1_on_leader_and_2(runner)
    assert runner.cluster.view().acked == ("m1",)


def test_majority_lagging_replica_cannot_be_elected():
    # replica 3 comes first in assignment order after the leader, and lacks the committed m1
    runner = _runner((1, 3, 2))
    _commit_m1_on_leader_and_2(runner)
    view = _do(runner, "crash", 1, detected=True).view
    assert view.registration.leader == 2
    assert view.replica(2).values() == ["m1"]
    assert runner.cluster.acked_lost() == []


def test_majority_without_the_vote_log_check_elects_the_lagging_replica_and_loses_m1():
    runner = _runner((1, 3, 2), MAJORITY.with_switches(vote_log_check=False))
    _commit_m1_on_leader_and_2(runner)
    view = _do(runner, "crash", 1, detected=True).view
    assert view.registration.leader == 3
    assert runner.cluster.acked_lost() == ["m1"]


def test_majority_has_no_leader_while_a_majority_is_down():
    runner = _runner()
    _commit_m1_on_leader_and_2(runner)
    _do(runner, "crash", 1, detected=True)
    view = _do(runner, "crash", 2, detected=True).view
    assert view.registration.leader == -1  # replica 3 alone is no majority
    assert _do(runner, "produce", "m2", acks="all").result == "NOT_LEADER_OR_FOLLOWER"
    view = _do(runner, "restart", 1).view
    assert view.registration.leader == 1  # 1 and 3 are a majority and 1 holds m1
    assert runner.cluster.acked_lost() == []


def test_majority_forced_election_of_a_lagging_replica_changes_nothing():
    runner = _runner()
    _commit_m1_on_leader_and_2(runner)
    _do(runner, "crash", 1, detected=True)
    view = _do(runner, "elect", 3).view
    assert view.registration.leader == 2


FAILURES = (
    ("crash", {}),
    ("crash", {"unflushed": "lose"}),
    ("crash", {"unflushed": "lose", "detected": True}),
    ("shutdown", {}),
    ("isolate", {}),
)


@pytest.mark.parametrize("broker", (1, 2, 3))
@pytest.mark.parametrize(("failure", "options"), FAILURES)
def test_majority_keeps_committed_data_after_any_minority_failure(broker, failure, options):
    runner = _runner()
    _commit_m1_on_leader_and_2(runner)
    _do(runner, failure, broker, **options)
    _do(runner, "advance_ms", 10_000)  # the session timeout fences a silent broker
    _do(runner, "produce", "m2", acks="all")
    for follower in (1, 2, 3) * 2:
        _do(runner, "fetch", follower)
    view = runner.cluster.view()
    leader = view.registration.leader
    assert leader not in (-1, broker)
    assert view.acked == ("m1", "m2")
    assert view.replica(leader).values() == ["m1", "m2"]
    assert runner.cluster.acked_lost() == []
    assert runner.violations == []


def test_majority_scenario_file_runs_with_the_majority_invariants():
    scenario = load_scenario(
        """
name: majority-commit
config: {brokers: [1, 2, 3], replicas: [1, 2, 3], mode: majority}
steps:
  - {produce: m1}
  - {fetch: 2}
  - {fetch: 2}
  - {crash: 1, detected: true}
  - expect: {acked: [m1], acked_lost: [], leader: 2, violations: []}
"""
    )
    result = run_scenario(scenario)
    assert result.ok, result.expect_failures
    assert result.mode == "majority"
    assert "StrongIsr" not in result.invariants  # the ISR neither commits nor elects here
    assert "LeaderCompleteness" in result.invariants


def test_majority_rules_are_refused_on_isr_modes():
    with pytest.raises(InputError, match="vote_log_check"):
        get_mode("current").with_switches(vote_log_check=False)


def test_mode_names_keep_the_isr_generations_apart_from_the_majority_mode():
    assert "majority" not in MODE_NAMES
    assert ALL_MODE_NAMES[-1] == "majority"
    assert ALL_MODE_NAMES[:-1] == MODE_NAMES


def test_raft_rules_are_the_ones_kraft_votes_and_commits_with():
    from replication.kraft import raft

    assert raft.log_at_least is log_at_least
    assert raft.majority_high_watermark is majority_high_watermark


# ------------------------------------------------------------------------- exploring


def test_explore_majority_with_every_rule_on_loses_no_acknowledged_write():
    report = explore("majority", schedules=400, seed=11)
    assert report.schedules == 400
    assert report.violating_schedules == 0, report.summary()


def test_explore_majority_with_link_cuts_loses_no_acknowledged_write():
    report = explore("majority", schedules=300, seed=12, link_cuts=True)
    assert report.violating_schedules == 0, report.summary()


@pytest.mark.parametrize("switch", ("vote_log_check", "flush_before_ack"))
def test_majority_schedules_lose_acknowledged_writes_once_a_rule_is_off(switch):
    config = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3), mode="majority")
    mode = MAJORITY.with_switches(**{switch: False})
    losing = 0
    for index in range(60):
        steps = generate_schedule(config, 1, index)
        scenario = build_scenario(f"s{index}", config, steps)
        if lost_acks_all(run_scenario(scenario, mode=mode)):
            losing += 1
        assert not lost_acks_all(run_scenario(scenario, mode=MAJORITY))
    assert losing > 0


# ------------------------------------------------------------------------- compare


def test_compare_runs_the_same_schedules_in_every_configuration():
    report = compare(schedules=40, seed=2)
    labels = [row.config.label for row in report.results]
    assert labels == [config.label for config in DEFAULT_CONFIGS]
    assert len({row.writes for row in report.results}) == 1
    assert len({row.steps for row in report.results}) == 1
    assert report.row("majority acks=all").acked_lost == 0
    assert report.row("current minISR=2 acks=all").acked_lost == 0


def test_compare_is_deterministic_for_a_seed():
    first = compare(schedules=25, seed=9).to_json()
    assert compare(schedules=25, seed=9).to_json() == first
    assert compare(schedules=25, seed=10).to_json() != first


def test_compare_rejects_a_negative_schedule_count():
    with pytest.raises(InputError, match="schedules"):
        compare(schedules=-1)


def _invoke(*args: str):
    return CliRunner().invoke(app, ["replicate", "compare", *args])


def test_cli_compare_prints_the_same_json_twice_and_exits_0():
    first = _invoke("--schedules", "15", "--seed", "4", "--format", "json")
    second = _invoke("--schedules", "15", "--seed", "4", "--format", "json")
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    document = json.loads(first.stdout)
    assert [c["configuration"] for c in document["configurations"]][-3:] == [
        "majority acks=all",
        "majority acks=all no flush_before_ack",
        "majority acks=1",
    ]


def test_cli_compare_csv_has_a_header_and_one_row_per_configuration():
    outcome = _invoke("--schedules", "5", "--format", "csv")
    assert outcome.exit_code == 0
    lines = outcome.stdout.splitlines()
    assert lines[0].startswith("configuration,schedules,writes,acknowledged,acked lost")
    assert len(lines) == 1 + len(DEFAULT_CONFIGS)


def test_cli_compare_table_names_every_configuration():
    outcome = _invoke("--schedules", "5")
    assert outcome.exit_code == 0
    for config in DEFAULT_CONFIGS:
        assert config.label in outcome.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    (
        (("--schedules", "-1"), "schedules"),
        (("--max-steps", "0"), "max_steps"),
        (("--lossy-crashes", "-2"), "max_lossy_crashes"),
        (("--format", "xml"), "--format"),
    ),
)
def test_cli_compare_bad_option_is_one_line_and_exit_2(args, field):
    outcome = _invoke(*args)
    assert outcome.exit_code == 2
    lines = [line for line in outcome.output.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0], outcome.output
    assert "Traceback" not in outcome.output


def test_cli_replicate_runs_a_file_under_the_majority_mode(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: m\nconfig: {brokers: [1, 2, 3], replicas: [1, 2, 3]}\nsteps:\n"
        "  - {produce: m1}\n  - {fetch: 2}\n  - {fetch: 2}\n"
        "  - expect: {acked: [m1], hw: 1}\n    modes: [majority]\n"
    )
    outcome = CliRunner().invoke(app, ["replicate", str(path), "--mode", "majority"])
    assert outcome.exit_code == 0, outcome.output


FIGURE_8 = """
name: raft-figure-8
description: >-
  Raft's figure 8 on three replicas: leader 1 of epoch 2 copies x (epoch 0) to 2, which makes x
  a majority's; counting it committed then lets 3, whose last record y has the later epoch 1, win
  the next election and truncate x.
config: {brokers: [1, 2, 3], replicas: [1, 3, 2], mode: majority}
steps:
  - {produce: x}
  - {crash: 1, detected: true}
  - {produce: y}
  - {crash: 3, detected: true}
  - {restart: 1}
  - {fetch: 2}
  - {fetch: 2}
  - {consume: c1}
  - {crash: 1, detected: true}
  - {restart: 3}
  - {fetch: 2}
  - {consume: c1}
"""


def test_majority_commits_earlier_epochs_only_with_a_record_of_its_own_epoch():
    scenario = load_scenario(FIGURE_8)
    result = run_scenario(scenario)
    assert result.violations == ()
    assert result.final.consumed == (("c1", ()),)  # nothing was committed to read
    broken = run_scenario(scenario, mode=MAJORITY.with_switches(epoch_start_commit=False))
    assert result.final.leader == broken.final.leader == 3
    assert broken.violation_names() == ["LeaderCompleteness"]
    # c1 read x while it counted as committed; the next read finds it truncated (KIP-320)
    assert broken.final.consumed == (("c1", ("x",)),)
    assert broken.final.truncation_detected == (("c1", True),)


def test_majority_explore_summary_names_no_isr_settings():
    first_line = explore("majority", schedules=5, seed=1).summary().splitlines()[0]
    assert "5 schedules of mode majority" in first_line and "acks all" in first_line
    assert "min.insync.replicas" not in first_line and "unclean" not in first_line
    isr_line = explore("current", schedules=5, seed=1).summary().splitlines()[0]
    assert "min.insync.replicas 1" in isr_line
