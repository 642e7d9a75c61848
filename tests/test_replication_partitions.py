"""Several partitions on the same brokers and partition reassignment: the controller's
registrations (KRaft's ReplicationControlManager, PartitionChangeBuilder,
PartitionReassignmentReplicas), correlated failures in the simulator, the scenario format's
``partitions``, ``partition`` and ``reassign``, and bad input naming the step and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from dashboards.replication import render_replication
from ktk.cli import app
from replication.controller import Controller
from replication.errors import ScenarioError
from replication.modes import ALL_MODE_NAMES, get_mode
from replication.partition import AlterPartitionRequest
from replication.scenario import ScenarioConfig, Step, load_scenario, scenario_to_dict
from replication.sim import Runner, run_scenario

SCENARIOS = EXAMPLES / "scenarios"
NEW_SCENARIOS = [
    "s24-broker-down-moves-every-leader",
    "s25-auto-leader-rebalance",
    "s26-reassignment-moves-leader",
    "s27-one-crash-loses-on-every-partition",
    "s28-reassignment-loses-acks-1-write",
]


def scenario(steps: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"brokers": [1, 2, 3], "partitions": [[1, 2, 3], [2, 3, 1]]}
    base.update(config)
    return {"name": "case", "config": base, "steps": steps}


# ------------------------------------------------------------------ controller


def test_fencing_a_broker_changes_every_partition_it_is_in_at_once() -> None:
    controller = Controller(partitions=[(1, 2, 3), (2, 3, 1), (3, 2)])
    assert controller.fence(1)
    leaders = [(r.leader, r.isr, r.leader_epoch) for r in controller.registrations]
    # partition 0 elects 2; partition 1 only shrinks its ISR; partition 2 never had 1
    assert leaders == [(2, (2, 3), 1), (2, (2, 3), 0), (3, (3, 2), 0)]
    assert controller.registrations[2].partition_epoch == 0


def test_a_registration_repeating_its_incarnation_is_a_retry() -> None:
    controller = Controller(partitions=[(1, 2), (2, 1)])
    controller.fence(1)
    epoch = controller.register(1, incarnation=1)
    assert controller.register(1, incarnation=1) == epoch
    assert controller.register(1, incarnation=2) == epoch + 1


def test_registering_a_broker_that_leads_any_partition_moves_that_leadership_first() -> None:
    controller = Controller(partitions=[(2, 1), (1, 2)])
    controller.register(1, incarnation=1)
    assert controller.registrations[1].leader == 2
    assert controller.registrations[0].leader == 2


def test_reassignment_records_the_union_with_adding_and_removing_replicas() -> None:
    # PartitionReassignmentReplicas: target first, then the removed replicas (sorted)
    controller = Controller((3, 1, 2), brokers=(1, 2, 3, 4, 5))
    assert controller.reassign((5, 4, 2))
    registration = controller.registration
    assert registration.replicas == (5, 4, 2, 1, 3)
    assert registration.adding_replicas == (4, 5)
    assert registration.removing_replicas == (1, 3)
    assert (registration.leader, registration.isr, registration.leader_epoch) == (3, (3, 1, 2), 0)


def test_reassignment_completes_only_when_every_target_replica_is_in_the_isr() -> None:
    controller = Controller((1, 2, 3), brokers=(1, 2, 3, 4, 5))
    controller.reassign((1, 4, 5))
    # 4 joins: 5 is still missing, the reassignment stays in progress
    request = AlterPartitionRequest(1, 0, 1, (1, 2, 3, 4), ((4, 4),))
    assert controller.handle_alter_partition(request) == "NONE"
    assert controller.registration.adding_replicas == (4, 5)
    request = AlterPartitionRequest(1, 0, 2, (1, 2, 3, 4, 5), ((4, 4), (5, 5)))
    assert controller.handle_alter_partition(request) == "NONE"
    registration = controller.registration
    assert registration.replicas == (1, 4, 5)
    assert registration.isr == (1, 4, 5)
    assert (registration.adding_replicas, registration.removing_replicas) == ((), ())
    # replicas were removed: the leader epoch is bumped though the leader stays
    # (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded)
    assert (registration.leader, registration.leader_epoch) == (1, 1)


def test_removing_a_replica_completes_at_once_and_moves_a_removed_leader() -> None:
    controller = Controller((1, 2, 3))
    assert controller.reassign((2, 3))
    registration = controller.registration
    assert registration.replicas == (2, 3)
    assert registration.isr == (2, 3)
    assert (registration.leader, registration.leader_epoch) == (2, 1)


def test_reassignment_does_not_complete_while_the_only_isr_members_are_removed() -> None:
    controller = Controller((1, 2), brokers=(1, 2, 3))
    controller.fence(2)
    controller.reassign((3,))
    registration = controller.registration
    # maybeCompleteReassignment: the ISR without removing replicas would be empty
    assert registration.replicas == (3, 1, 2)
    assert registration.leader == 1


def test_preferred_election_moves_only_to_an_isr_member() -> None:
    controller = Controller(partitions=[(1, 2, 3), (3, 1, 2)])
    controller.fence(1)
    controller.unfence(1)
    # 1 is not back in the ISR of partition 0: the preferred election keeps 2
    assert not controller.elect("preferred", partition=0).changed
    assert controller.registrations[0].leader == 2
    request = AlterPartitionRequest(2, 1, 1, (1, 2, 3), ((1, 1), (3, 3)))
    assert controller.handle_alter_partition(request, partition=0) == "NONE"
    assert controller.elect("preferred", partition=0).changed
    assert controller.registrations[0].leader == 1
    assert controller.registrations[1].leader == 3


# ------------------------------------------------------------------ simulator


@pytest.mark.parametrize("name", NEW_SCENARIOS)
@pytest.mark.parametrize("mode", ALL_MODE_NAMES)
def test_new_scenarios_hold_their_expectations_in_every_mode(name: str, mode: str) -> None:
    result = run_scenario(load_scenario(SCENARIOS / f"{name}.yaml"), mode)
    assert result.expect_failures == ()
    assert result.expectations_checked > 0


def test_one_crash_loses_the_acks_1_writes_of_every_partition_it_led() -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s27-one-crash-loses-on-every-partition.yaml"))
    assert [p.final.acked_lost for p in result.partitions] == [("a1",), ("b1",)]
    assert result.acked_lost == ["a1", "b1"]
    # the crash step moved both leaderships in the same step
    crash = [next(e for e in p.timeline if e.op.startswith("crash")) for p in result.partitions]
    assert [entry.leader for entry in crash] == [2, 3]


def test_a_session_timeout_fences_the_broker_in_every_partition_at_the_same_time() -> None:
    document = scenario(
        [{"crash": 1}, {"advance_ms": 9000}], partitions=[[1, 2, 3], [2, 1, 3], [1, 3, 2]]
    )
    result = run_scenario(load_scenario(document))
    advance = [p.timeline[1] for p in result.partitions]
    assert [(e.leader, e.isr) for e in advance] == [(2, (2, 3)), (2, (2, 3)), (3, (3, 2))]
    assert all(e.time_ms == 9000 for e in advance)
    assert "broker 1 fenced" in advance[0].result


def test_a_restart_registers_once_for_every_partition() -> None:
    document = scenario([{"crash": 1, "detected": True}, {"restart": 1}])
    runner = Runner(load_scenario(document).config, get_mode("current"))
    for step in load_scenario(document).steps:
        runner.step(step)
    epochs = {cluster.brokers[1].broker_epoch for cluster in runner.clusters}
    assert epochs == {runner.cluster.controller.brokers[1].broker_epoch} == {4}


def test_a_fetch_without_a_partition_fetches_every_partition_the_broker_follows() -> None:
    document = scenario(
        [
            {"produce": "a", "partition": 0},
            {"produce": "b", "partition": 1},
            {"fetch": 3},
            {"fetch": 2, "partition": 0},
        ]
    )
    result = run_scenario(load_scenario(document))
    logs = [{r.broker_id: r.values() for r in p.final.replicas} for p in result.partitions]
    assert logs[0] == {1: ["a"], 2: ["a"], 3: ["a"]}
    assert logs[1] == {2: ["b"], 3: ["b"], 1: []}


def test_an_adding_replica_starts_empty_and_a_removed_one_is_deleted() -> None:
    document = {
        "name": "move",
        "config": {"brokers": [1, 2, 3], "replicas": [1, 2]},
        "steps": [
            {"produce": "m1"},
            {"fetch": 2},
            {"fetch": 2},
            {"reassign": [3, 2]},
            {"expect": {"logs": {"3": []}, "isr": [1, 2], "leader": 1, "acked": ["m1"]}},
            {"fetch": 3},
            {"fetch": 3},
            {"expect": {"leader": 3, "isr": [3, 2], "logs": {"3": ["m1"], "2": ["m1"]}}},
        ],
    }
    result = run_scenario(load_scenario(document))
    assert result.expect_failures == ()
    assert [replica.broker_id for replica in result.final.replicas] == [3, 2]
    changes = [c for entry in result.timeline for c in entry.changes]
    started = "reassignment started: replicas [3, 2, 1] (adding 3, removing 1)"
    assert any(started in change for change in changes)
    assert any("reassignment complete: replicas [3, 2]" in change for change in changes)
    assert any("replica 1 deleted" in change for change in changes)


def test_a_replica_that_becomes_leader_during_its_fetch_drops_the_answer() -> None:
    # S28: the ISR change in the fetch completes the reassignment and elects the fetcher
    result = run_scenario(load_scenario(SCENARIOS / "s28-reassignment-loses-acks-1-write.yaml"))
    results = [entry.result for entry in result.timeline]
    assert "reply dropped: became leader" in results
    assert result.acked_lost == ["m1"]


def test_a_replica_that_led_an_empty_epoch_follows_again_after_truncating_its_epoch_cache() -> None:
    # UnifiedLog.truncateTo truncates the epoch cache at the log end even when no record goes;
    # without that, 2 keeps answering its own diverging epoch and never fetches m2
    document = {
        "name": "empty-epoch",
        "config": {"brokers": [1, 2, 3], "replicas": [1, 2, 3]},
        "steps": [
            {"produce": "m1"},
            {"fetch": 2},
            {"fetch": 3},
            {"fetch": 2},
            {"fetch": 3},
            {"crash": 1, "detected": True},
            {"restart": 1},
            {"fetch": 1},
            {"fetch": 1},
            {"elect": "preferred"},
            {"produce": "m2"},
            {"fetch": 2},
            {"fetch": 2},
            {"expect": {"leader": 1, "logs": {"2": ["m1", "m2"]}}},
        ],
    }
    assert run_scenario(load_scenario(document), "current").expect_failures == ()


def test_a_failed_expectation_names_its_partition() -> None:
    document = scenario([{"expect": {"leader": 3}, "partition": 1}])
    failures = run_scenario(load_scenario(document)).expect_failures
    assert failures == ("step 0 (partition 1): expect leader: wanted 3, got 2",)


def test_several_partition_runs_are_deterministic() -> None:
    path = SCENARIOS / "s24-broker-down-moves-every-leader.yaml"
    first = json.dumps(run_scenario(load_scenario(path)).to_json(), sort_keys=True)
    assert json.dumps(run_scenario(load_scenario(path)).to_json(), sort_keys=True) == first


def test_the_result_document_has_one_entry_per_partition() -> None:
    document = run_scenario(load_scenario(SCENARIOS / "s25-auto-leader-rebalance.yaml")).to_json()
    partitions = document["partitions"]
    assert isinstance(partitions, list)
    assert [p["partition"] for p in partitions] == [0, 1]
    assert partitions[0]["timeline"] == document["timeline"]
    assert render_replication(document).startswith("<!DOCTYPE html>")


# ------------------------------------------------------------------ scenario format


def test_partitions_round_trip_through_the_file_format() -> None:
    loaded = load_scenario(
        scenario([{"reassign": [3, 1], "partition": 1}, {"fetch": 2, "partition": 0}])
    )
    assert loaded.config.replicas == (1, 2, 3)
    assert loaded.config.partition_replicas == ((1, 2, 3), (2, 3, 1))
    document = scenario_to_dict(loaded)
    assert "replicas" not in document["config"]  # type: ignore[operator]
    assert load_scenario(document) == loaded
    assert loaded.steps[0].describe() == "reassign [3, 1] (partition=1)"


@pytest.mark.parametrize(
    ("config", "steps", "message"),
    [
        (
            {},
            [{"produce": "m1", "partition": 2}],
            "step 0: partition: no such partition: the scenario has partitions 0 to 1 (got 2)",
        ),
        (
            {},
            [{"produce": "m1"}],
            "step 0: partition: the scenario has 2 partitions: say which one this produce is about",
        ),
        ({}, [{"expect": {"leader": 1}}], "step 0: partition: the scenario has 2 partitions"),
        ({}, [{"elect": 2}], "step 0: partition: the scenario has 2 partitions"),
        ({}, [{"crash": 1, "partition": 0}], "step 0: partition: field not allowed on crash"),
        ({}, [{"reassign": [1, 9], "partition": 0}], "step 0: reassign: unknown broker (got 9)"),
        ({}, [{"reassign": [1, 1], "partition": 0}], "step 0: reassign: broker ids must be unique"),
        ({}, [{"reassign": [], "partition": 0}], "step 0: reassign: reassign takes the new list"),
        (
            {"partitions": [[1, 2], [4]]},
            [],
            "config.partitions[1]: replica is not a broker (got 4)",
        ),
        ({"partitions": []}, [], "config.partitions: must be a non-empty list of replica lists"),
        ({"replicas": [2, 1]}, [], "config.replicas: with partitions, replicas is partition 0's"),
        ({"partitions": [[1, 1]]}, [], "config.partitions[0]: broker ids must be unique"),
    ],
)
def test_bad_partition_input_names_the_step_and_field(
    config: dict[str, Any], steps: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario(steps, **config))
    assert message in str(caught.value)


def test_one_partition_files_refuse_a_partition_beyond_0() -> None:
    config = ScenarioConfig(brokers=(1, 2), replicas=(1, 2))
    with pytest.raises(ScenarioError, match="no such partition: the scenario has partition 0"):
        Step.from_dict({"produce": "m1", "partition": 1}, config, 3)


def test_cli_refuses_an_unknown_partition_in_one_line_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(scenario([{"consume": "c1", "partition": 7}])))
    outcome = CliRunner().invoke(app, ["replicate", str(path)])
    assert outcome.exit_code == 2
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in outcome.output
    assert "bad.json" in lines[0] and "step 0" in lines[0] and "partition" in lines[0]


def test_cli_prints_one_timeline_per_partition() -> None:
    path = SCENARIOS / "s24-broker-down-moves-every-leader.yaml"
    outcome = CliRunner().invoke(app, ["replicate", str(path)], env={"COLUMNS": "200"})
    assert outcome.exit_code == 0, outcome.output
    for partition in range(3):
        assert f"s24-broker-down-moves-every-leader (current, partition {partition})" in (
            outcome.stdout
        )
        assert f"partition {partition}: acknowledged:" in outcome.stdout


# ------------------------------------------------------------------ on disk and exploring


def test_several_partitions_on_disk_share_each_brokers_checkpoint_files(tmp_path: Path) -> None:
    from kafka_format.checkpoint import parse_offset_checkpoint

    outcome = CliRunner().invoke(
        app,
        [
            "replicate",
            str(SCENARIOS / "s24-broker-down-moves-every-leader.yaml"),
            "--log-dir",
            str(tmp_path / "logs"),
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    broker = tmp_path / "logs" / "broker-1"
    assert sorted(p.name for p in broker.glob("ktk-*")) == ["ktk-0", "ktk-1", "ktk-2"]
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        entries = parse_offset_checkpoint((broker / name).read_text())
        assert sorted(entries) == [("ktk", 0), ("ktk", 1), ("ktk", 2)], name


def test_exploring_several_partitions_finds_shrinks_and_replays() -> None:
    from replication.explore import explore

    report = explore("kip-101", brokers=(1, 2), schedules=60, seed=0, partitions=2)
    assert report.findings
    for finding in report.findings:
        assert finding.scenario.config.partition_replicas == ((1, 2), (2, 1))
        assert run_scenario(finding.scenario).expect_failures == ()


def test_exploring_one_partition_draws_the_same_schedules_as_before() -> None:
    from replication.explore import ExploreSettings, explore_settings, generate_schedule

    settings: ExploreSettings = explore_settings("current", partitions=1)
    assert settings.config.partitions is None
    steps = generate_schedule(settings.config, 0, 3)
    assert all("partition" not in step for step in steps)


def test_exploring_several_partitions_names_the_partition_of_one_partition_steps() -> None:
    from replication.explore import explore_settings, generate_schedule

    config = explore_settings("current", partitions=3).config
    assert config.partition_replicas == ((1, 2, 3), (2, 3, 1), (3, 1, 2))
    steps = [s for i in range(5) for s in generate_schedule(config, 0, i)]
    assert any("produce" in step for step in steps)
    for step in steps:
        if "produce" in step or "consume" in step or isinstance(step.get("elect"), int):
            assert step.get("partition") in (0, 1, 2), step


def test_cli_refuses_too_many_partitions_to_explore() -> None:
    outcome = CliRunner().invoke(app, ["replicate", "explore", "--partitions", "65"])
    assert outcome.exit_code == 2
    assert "partitions: must be an integer from 1 to 64 (got 65)" in outcome.stderr


def test_sync_hands_a_fencing_decided_on_the_controller_to_the_brokers() -> None:
    from replication.sim import Cluster

    cluster = Cluster(ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3)), get_mode("current"))
    cluster.controller.fence(1)
    assert cluster.brokers[2].replica.role == "follower"
    cluster.sync()
    assert cluster.brokers[2].replica.role == "leader"
    assert cluster.brokers[3].replica.leader_id == 2


def test_cli_refuses_partitions_for_a_quorum_exploration() -> None:
    outcome = CliRunner().invoke(
        app, ["replicate", "explore", "--quorum", "3", "--partitions", "2", "--schedules", "1"]
    )
    assert outcome.exit_code == 2
    assert "--partitions: a quorum exploration has one metadata log" in outcome.stderr


@pytest.mark.spark
def test_exploring_two_partitions_on_spark_gives_the_one_process_findings(
    spark: Any, tmp_path: Path
) -> None:
    from replication.explore import explore
    from spark_jobs.explore_schedules import main

    args = ["--mode", "pre-0.11", "--min-isr", "1", "--schedules", "80", "--seed", "3"]
    expected = explore(
        "pre-0.11", min_insync_replicas=1, schedules=80, seed=3, partitions=2,
        out_dir=tmp_path / "python",
    )  # fmt: skip
    assert expected.findings
    # the spark-submit entry point's own --partitions option
    assert main([*args, "--partitions", "2", "--out", str(tmp_path / "job")]) == 1
    # and ktk replicate explore --engine spark --partitions 2, against --engine python
    cli = [*args, "--partitions", "2", "--json"]
    python = CliRunner().invoke(app, ["replicate", "explore", *cli, "--engine", "python"])
    on_spark = CliRunner().invoke(
        app, ["replicate", "explore", *cli, "--engine", "spark", "--out", str(tmp_path / "cli")]
    )
    assert python.exit_code == on_spark.exit_code == 1, on_spark.output
    timing = ("elapsed_seconds", "schedules_per_second")
    first, second = json.loads(python.stdout), json.loads(on_spark.stdout)
    assert {k: v for k, v in first.items() if k not in timing} == {
        k: v for k, v in second.items() if k not in timing
    }
    assert second["config"]["partitions"] == [[1, 2, 3], [2, 3, 1]]
    files = {path.name: path.read_bytes() for path in sorted((tmp_path / "python").glob("*.json"))}
    assert sorted(files) == sorted(finding.file_name for finding in expected.findings)
    for directory in ("job", "cli"):
        found = {
            path.name: path.read_bytes()
            for path in sorted((tmp_path / directory).glob("*.json"))
            if not path.name.startswith(".")
        }
        assert found == files, directory
    for finding in expected.findings:
        assert finding.scenario.config.partition_replicas == ((1, 2, 3), (2, 3, 1))
