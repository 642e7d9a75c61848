"""The one run loop, the read-only cluster view, named invariants and typed records."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO_ROOT

from replication.errors import InputError
from replication.explore import ExploreSettings, explore
from replication.invariants import INVARIANT_NAMES, INVARIANTS, InvariantChecker, select_invariants
from replication.modes import get_mode
from replication.scenario import ScenarioConfig, Step, load_scenario
from replication.sim import Runner, diverged, effective_mode, run_scenario
from replication.view import ClusterState, TimelineEntry, Violation

S1 = EXAMPLES / "scenarios" / "s1-two-round-hw-lag.yaml"
SPEC_SECTION_8 = (
    "LeaderInIsr",
    "StrongIsr",
    "LeaderCompleteness",
    "LeaderCandidateCompleteness",
    "ReplicationQuorumSuperset",
    "LogMatching",
    "ConsistentRead",
    "NoCommittedRecordLostGlobally",
    "ValidControllerIsrAndElr",
    "MonotonicHighWatermark",
)


def test_the_runner_gives_run_scenario_its_violations_step_by_step() -> None:
    scenario = load_scenario(S1)
    runner = Runner(scenario.config, effective_mode(scenario.config))
    started = [v for step in scenario.steps for v in runner.step(step).new_violations]
    result = run_scenario(scenario)
    assert tuple(started) == result.violations
    assert runner.cluster.state() == result.final


def test_a_cluster_view_is_a_snapshot_that_never_changes() -> None:
    config = ScenarioConfig(brokers=(1, 2), replicas=(1, 2))
    runner = Runner(config, get_mode("current"))
    before = runner.step(Step("produce", "m1", (("acks", 1),))).view
    runner.step(Step("fetch", 2))
    runner.step(Step("produce", "m2", (("acks", 1),)))
    assert before.replica(1).values() == ["m1"]
    assert before.replica(2).values() == []
    with pytest.raises(AttributeError):
        before.replica(1).high_watermark = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        before.acked = ()  # type: ignore[misc]


def test_invariants_are_named_objects_with_the_spec_names() -> None:
    assert INVARIANT_NAMES == SPEC_SECTION_8
    assert all(invariant.summary for invariant in INVARIANTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        INVARIANTS[0].name = "x"  # type: ignore[misc]


def test_a_subset_of_invariants_is_kept_in_canonical_order_and_unknown_names_refused() -> None:
    chosen = select_invariants(["LogMatching", "LeaderInIsr"])
    assert [invariant.name for invariant in chosen] == ["LeaderInIsr", "LogMatching"]
    with pytest.raises(InputError, match="invariants: unknown invariant"):
        select_invariants(["LeaderInIsr", "Nope"])


def test_a_checker_with_a_subset_reports_only_those_invariants() -> None:
    scenario = load_scenario(S1)
    everything = run_scenario(scenario, "pre-0.11")
    only = run_scenario(scenario, "pre-0.11", invariants=["LogMatching"])
    assert {"StrongIsr", "LogMatching"} <= set(everything.violation_names())
    assert only.violation_names() == ["LogMatching"]
    assert only.invariants == ("LogMatching",)
    assert InvariantChecker(select_invariants(["StrongIsr"])).invariants[0].name == "StrongIsr"


def test_divergence_is_the_log_matching_invariant_failing() -> None:
    result = run_scenario(load_scenario(EXAMPLES / "scenarios" / "s2-both-lose-unflushed.yaml"))
    config = result.scenario.config
    runner = Runner(config, effective_mode(config))
    for step in result.scenario.steps:
        outcome = runner.step(step)
    assert diverged(outcome.view) is result.diverged
    assert result.diverged == ("LogMatching" in result.violation_names())


def test_records_are_frozen_and_render_the_documented_json() -> None:
    result = run_scenario(load_scenario(S1), "pre-0.11")
    assert isinstance(result.final, ClusterState)
    assert all(isinstance(entry, TimelineEntry) for entry in result.timeline)
    assert all(isinstance(violation, Violation) for violation in result.violations)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.timeline[0].result = "x"  # type: ignore[misc]
    document = result.to_json()
    assert document["timeline"][0] == result.timeline[0].to_json()
    assert document["violations"][0] == {
        "invariant": "StrongIsr",
        "step": 8,
        "detail": "replica 1 lacks offset 1 (leader has m2) below leader HW 2",
    }


def test_step_from_dict_round_trips_through_to_dict() -> None:
    config = ScenarioConfig(brokers=(1, 2), replicas=(1, 2))
    for raw in ({"fetch": 1, "response": "lost"}, {"produce": "m1", "acks": 1}, {"elect": "auto"}):
        step = Step.from_dict(raw, config)
        assert Step.from_dict(step.to_dict(), config) == step


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"max_steps": -3}, "max_steps"),
        ({"schedules": -1}, "schedules"),
        ({"schedules": True}, "schedules"),
        ({"max_lossy_crashes": -1}, "max_lossy_crashes"),
        ({"seed": 2**80}, "seed"),
        ({"invariants": ["Nope"]}, "invariants"),
        ({"shrink_per_class": -2}, "shrink_per_class"),
    ],
)
def test_explore_settings_refuse_out_of_range_values_naming_the_field(
    arguments: dict[str, object], field: str
) -> None:
    with pytest.raises(InputError, match=f"^{field}: "):
        explore("current", **arguments)  # type: ignore[arg-type]


def test_explore_settings_bound_the_clock_a_schedule_can_reach() -> None:
    config = ScenarioConfig(
        brokers=(1, 2), replicas=(1, 2), replica_lag_time_max_ms=2, broker_session_timeout_ms=10**9
    )
    with pytest.raises(InputError, match=r"^max_steps: "):
        ExploreSettings(config)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"min_insync_replicas": 0}, "config.min_insync_replicas"),
        ({"replica_lag_time_max_ms": -1}, "config.replica_lag_time_max_ms"),
        ({"request_timeout_ms": True}, "config.request_timeout_ms"),
        ({"mode": "0.8"}, "config.mode"),
        ({"replicas": (3,)}, "config.replicas"),
        ({"brokers": (1, 1)}, "config.brokers"),
    ],
)
def test_scenario_config_refuses_out_of_range_values_naming_the_field(
    arguments: dict[str, object], field: str
) -> None:
    values: dict[str, object] = {"brokers": (1, 2), "replicas": (1, 2), **arguments}
    with pytest.raises(InputError, match=f"^{field}: "):
        ScenarioConfig(**values)  # type: ignore[arg-type]


def test_invariants_do_not_import_the_simulator() -> None:
    # the old sim <-> invariants cycle: invariants read views, never the cluster
    code = "import sys, replication.invariants; print('replication.sim' in sys.modules)"
    output = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(Path(REPO_ROOT))},
    ).stdout
    assert output.strip() == "False"
