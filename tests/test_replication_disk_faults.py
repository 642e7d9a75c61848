"""Disk faults in the replication simulator: a torn tail found by recovery, a failed log
directory, and a high-watermark checkpoint written periodically rather than on every change."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.errors import ScenarioError
from replication.log import ReplicaLog
from replication.modes import MODE_NAMES
from replication.scenario import load_scenario
from replication.sim import run_scenario
from replication.storage import DiskLogStorage

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "examples" / "scenarios"


def scenario(steps: str, config: str = "{brokers: [1, 2], replicas: [1, 2]}") -> str:
    return f"name: t\nconfig: {config}\nsteps:\n{steps}"


def test_torn_tail_cuts_only_the_last_unflushed_record_in_memory() -> None:
    log = ReplicaLog()
    for value in ("a", "b", "c"):
        log.append(0, value)
    log.recover_after_crash(lose_unflushed=False, torn_tail=True)
    assert log.values() == ["a", "b"]
    log.flush()
    log.recover_after_crash(lose_unflushed=False, torn_tail=True)  # nothing unflushed: kept
    assert log.values() == ["a", "b"]


def test_torn_tail_on_disk_is_found_by_the_crc_check(tmp_path: Path) -> None:
    log = ReplicaLog(storage=DiskLogStorage(tmp_path / "broker-1"))
    for value in ("a", "b", "c"):
        log.append(0, value)
    log.recover_after_crash(lose_unflushed=False, torn_tail=True)
    assert log.values() == ["a", "b"]
    again = DiskLogStorage(tmp_path / "broker-1")
    assert [record.value for record in again.read()] == ["a", "b"]


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_torn_write_loses_the_torn_record_but_keeps_the_unflushed_one_before(mode: str) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s21-torn-tail.yaml"), mode)
    assert result.expect_failures == ()
    assert result.final.replica(1).values() == ["m1", "m2"]


def test_torn_tail_in_a_log_dir_run_gives_the_same_verdict(tmp_path: Path) -> None:
    def storage(broker_id: int) -> DiskLogStorage:
        return DiskLogStorage(tmp_path / f"broker-{broker_id}")

    result = run_scenario(load_scenario(SCENARIOS / "s21-torn-tail.yaml"), storage_factory=storage)
    assert result.expect_failures == ()


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_failed_log_dir_moves_leadership_and_loses_nothing(mode: str) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s22-failed-log-dir.yaml"), mode)
    assert result.expect_failures == ()
    assert result.violations == ()


def test_failed_log_dir_on_a_broker_cut_off_from_the_controller_is_reported_on_heal() -> None:
    text = scenario(
        """  - {cut: {from: 1, to: controller}}
  - {fail_log_dir: 1}
  - expect: {leader: 1}
  - {heal: {from: 1, to: controller}}
  - expect: {leader: 2, isr: [2]}
"""
    )
    result = run_scenario(load_scenario(text), "current")
    assert result.expect_failures == ()


def test_failed_log_dir_replica_neither_fetches_nor_serves() -> None:
    text = scenario("  - {fail_log_dir: 2}\n  - {fetch: 2}\n  - {flush: 2}\n")
    result = run_scenario(load_scenario(text), "current")
    assert [entry.result for entry in result.timeline[1:]] == [
        "log directory offline",
        "log directory offline",
    ]
    assert not result.final.replica(2).online


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_stale_hw_checkpoint_loses_committed_data_only_where_restart_truncates_to_hw(
    mode: str,
) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s20-stale-hw-checkpoint.yaml"), mode)
    assert result.expect_failures == ()
    assert bool(result.acked_lost) is (mode == "pre-0.11")


def test_hw_checkpoint_written_every_change_by_default_keeps_m1() -> None:
    text = (SCENARIOS / "s20-stale-hw-checkpoint.yaml").read_text(encoding="utf-8")
    every_change = text.replace("  high_watermark_checkpoint_interval_ms: 5000\n", "")
    assert every_change != text
    loaded = load_scenario(every_change.replace("    modes: [pre-0.11]", "    modes: [current]"))
    assert run_scenario(loaded, "pre-0.11").acked_lost == []


def test_periodic_checkpoint_tick_and_clean_shutdown_write_the_hw() -> None:
    text = scenario(
        """  - {produce: m1}
  - {fetch: 2}
  - {fetch: 2}
  - {fetch: 2}
  - {advance_ms: 5000}
""",
        "{brokers: [1, 2], replicas: [1, 2], high_watermark_checkpoint_interval_ms: 5000}",
    )
    from replication.sim import Runner, effective_mode

    loaded = load_scenario(text)
    runner = Runner(loaded.config, effective_mode(loaded.config))
    for step in loaded.steps[:4]:
        runner.step(step)
    follower = runner.cluster.brokers[2].replica.log
    assert (follower.high_watermark, follower.checkpointed_high_watermark) == (1, 0)
    runner.step(loaded.steps[4])
    assert follower.checkpointed_high_watermark == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            scenario(
                "  - {fetch: 2}\n",
                "{brokers: [1], replicas: [1], high_watermark_checkpoint_interval_ms: 0}",
            ),
            "config.high_watermark_checkpoint_interval_ms: must be an integer from 1",
        ),
        (scenario("  - {crash: 1, unflushed: shredded}\n"), "step 0: unflushed: unflushed must"),
        (scenario("  - {fail_log_dir: 9}\n"), "step 0: fail_log_dir: unknown broker (got 9)"),
    ],
)
def test_bad_disk_fault_input_names_step_and_field(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(text)
    assert message in str(caught.value)


# ------------------------------------------------------------------ log start offset


def test_deleting_records_moves_the_log_start_and_keeps_the_epoch_cache_from_it() -> None:
    log = ReplicaLog.from_records([(0, "a"), (0, "b"), (2, "c")], high_watermark=3)
    assert log.delete_below(2)
    assert (log.log_start_offset, log.values()) == (2, ["c"])
    assert log.epoch_cache.entries[0].start_offset == 2
    assert not log.delete_below(1)


def test_log_start_never_passes_the_high_watermark() -> None:
    log = ReplicaLog.from_records([(0, "a"), (0, "b")], high_watermark=1)
    log.delete_below(2)
    assert log.log_start_offset == 1


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_follower_below_the_leader_log_start_starts_over_there(mode: str) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s23-log-start-above-follower.yaml"), mode)
    assert result.expect_failures == ()
    assert result.final.replica(2).log_start_offset == 2
    refused = [entry.result for entry in result.timeline if entry.op == "delete_records 9"]
    assert refused == ["OFFSET_OUT_OF_RANGE (HW 3)"]


def test_log_start_reaches_the_disk_as_kafka_checkpoints_it(tmp_path: Path) -> None:
    def storage(broker_id: int) -> DiskLogStorage:
        return DiskLogStorage(tmp_path / f"broker-{broker_id}")

    path = SCENARIOS / "s23-log-start-above-follower.yaml"
    result = run_scenario(load_scenario(path), storage_factory=storage)
    assert result.expect_failures == ()
    checkpoint = (tmp_path / "broker-1" / "log-start-offset-checkpoint").read_text("utf-8")
    assert checkpoint.splitlines()[2:] == ["ktk 0 2"]
    restarted = DiskLogStorage(tmp_path / "broker-2")
    assert [(r.offset, r.value) for r in restarted.read()] == [(2, "m3")]


def test_deleted_records_are_neither_lost_nor_truncated_reads() -> None:
    text = scenario(
        """  - {produce: m1, acks: 1}
  - {consume: c1}
  - {delete_records: 1}
  - {consume: c1}
  - expect: {acked_lost: [], anomalies: [], violations: [], consumed: {c1: [m1]}}
""",
        "{brokers: [1], replicas: [1]}",
    )
    result = run_scenario(load_scenario(text), "current")
    assert result.expect_failures == ()


# ------------------------------------------------------------------ explorer


def test_explorer_draws_disk_faults_only_when_asked() -> None:
    from replication.explore import generate_schedule
    from replication.scenario import ScenarioConfig

    config = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3), min_insync_replicas=2)
    plain = [generate_schedule(config, 4, index) for index in range(30)]
    assert plain == [generate_schedule(config, 4, index, disk_faults=False) for index in range(30)]
    drawn = [generate_schedule(config, 4, index, disk_faults=True) for index in range(30)]
    ops = {op for steps in drawn for step in steps for op in step}
    assert {"delete_records", "fail_log_dir"} <= ops
    assert not {"delete_records", "fail_log_dir"} & {op for s in plain for t in s for op in t}


def test_current_with_min_isr_2_stays_safe_under_disk_faults_and_link_cuts() -> None:
    from replication.explore import explore

    report = explore(
        "current",
        min_insync_replicas=2,
        max_lossy_crashes=0,
        disk_faults=True,
        link_cuts=True,
        schedules=300,
        seed=4,
    )
    assert report.class_counts == {}
    assert report.to_json()["disk_faults"] is True


def test_explorer_finds_and_replays_a_torn_tail_loss_with_min_isr_1() -> None:
    from replication.explore import explore

    report = explore(
        "current", brokers=(1, 2), min_insync_replicas=1, disk_faults=True, schedules=400, seed=2
    )
    torn = [
        finding
        for finding in report.findings
        if any(step.option("unflushed") == "torn" for step in finding.scenario.steps)
    ]
    assert torn
    for finding in torn:
        replay = run_scenario(finding.scenario)
        assert replay.expect_failures == () and (replay.acked_lost or replay.violations)
