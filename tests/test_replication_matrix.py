"""A replication_test-style matrix (Kafka's system test test_replication_with_broker_failure):
{clean, hard} x {shutdown, bounce} applied to the leader, RF=3, min.insync.replicas=2,
acks=all, under the current protocol: every acknowledged record is still there and is consumed
exactly once. Followers fetch in a seeded random order; a failure prints a replayable file."""

from __future__ import annotations

import random
from typing import Any

import pytest

from replication.modes import get_mode
from replication.scenario import ScenarioConfig, Step, load_scenario, scenario_to_text
from replication.sim import Runner, run_scenario

CONFIG = {
    "brokers": [1, 2, 3],
    "replicas": [1, 2, 3],
    "mode": "current",
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
}
SESSION_TIMEOUT_MS = 9000
BOUNCES = 5
SEEDS = (11, 29, 47)


class ScheduleBuilder:
    """Builds a schedule step by step against a live cluster, so faults can chase the leader."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.config = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3), min_insync_replicas=2)
        self.runner = Runner(self.config, get_mode("current"))
        self.cluster = self.runner.cluster
        self.steps: list[dict[str, Any]] = []
        self.produced = 0

    def step(self, entry: dict[str, Any]) -> None:
        self.steps.append(entry)
        self.runner.step(Step.from_dict(entry, self.config, len(self.steps) - 1))

    def leader(self) -> int:
        return self.cluster.controller.registration.leader

    def traffic(self, rounds: int) -> None:
        """Produce, let followers fetch in random order, let a little time pass."""
        for _ in range(rounds):
            self.produced += 1
            self.step({"produce": f"m{self.produced}", "acks": "all"})
            for broker_id in self.random.sample([1, 2, 3], k=self.random.randint(1, 3)):
                self.step({"fetch": broker_id})
            if self.random.random() < 0.3:
                self.step({"advance_ms": self.random.choice((100, 500, 2000))})

    def settle(self) -> None:
        """Everyone alive fetches until the followers have caught up."""
        for _ in range(4):
            for broker_id in (1, 2, 3):
                self.step({"fetch": broker_id})

    def fail_leader(self, kind: str) -> int:
        leader = self.leader()
        if kind == "clean":
            self.step({"shutdown": leader})
        else:
            # SIGKILL: the process dies, the page cache survives; the controller notices late
            self.step({"crash": leader, "unflushed": "keep"})
            self.step({"advance_ms": SESSION_TIMEOUT_MS})
        return leader

    def scenario_dict(self, name: str) -> dict[str, Any]:
        return {"name": name, "config": CONFIG, "steps": [*self.steps, {"consume": "c1"}]}


def build(kind: str, pattern: str, seed: int) -> dict[str, Any]:
    builder = ScheduleBuilder(seed)
    builder.traffic(6)
    builder.settle()
    failures = BOUNCES if pattern == "bounce" else 1
    for _ in range(failures):
        failed = builder.fail_leader(kind)
        builder.traffic(5)
        builder.step({"restart": failed})
        builder.traffic(3)
        builder.settle()
    builder.traffic(4)
    builder.settle()
    return builder.scenario_dict(f"matrix-{kind}-{pattern}-leader-seed{seed}")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pattern", ["shutdown", "bounce"])
@pytest.mark.parametrize("kind", ["clean", "hard"])
def test_no_acknowledged_record_is_lost_when_the_leader_fails(
    kind: str, pattern: str, seed: int
) -> None:
    scenario = load_scenario(build(kind, pattern, seed))
    result = run_scenario(scenario)
    final = result.final
    replay = scenario_to_text(scenario, "json")
    assert len(final.acked) >= 15, replay
    assert final.acked_lost == (), replay
    consumed = dict(final.consumed)["c1"]
    assert sorted(set(final.acked) - set(consumed)) == [], replay
    assert len(consumed) == len(set(consumed)), replay
    assert not final.diverged
    assert result.violations == (), replay


def test_matrix_schedules_really_move_leadership() -> None:
    result = run_scenario(load_scenario(build("hard", "bounce", SEEDS[0])))
    leaders = {entry.leader for entry in result.timeline}
    assert len(leaders - {-1}) >= 2
    assert result.final.leader_epoch >= BOUNCES
