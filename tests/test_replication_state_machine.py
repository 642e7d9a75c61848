"""A hypothesis state machine over the cluster operations, checking every invariant after each
step in ``current`` mode with the safe configuration of the explorer's clean run: three
replicas, min.insync.replicas=2, acks=all, unclean election off. Crashes keep the page cache
(a crash that loses unflushed data is covered by the ISR guarantee only with eligible leader
replicas; the explorer shows the loss without them).

A failure prints the shrunk operation sequence as a scenario file that ``ktk replicate`` replays.
The search is derandomized, so every run checks the same sequences.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from replication.invariants import InvariantChecker
from replication.scenario import load_scenario, scenario_to_text
from replication.sim import Cluster, effective_mode

CONFIG = {
    "brokers": [1, 2, 3],
    "replicas": [1, 2, 3],
    "mode": "current",
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
    "eligible_leader_replicas": False,
    "replica_lag_time_max_ms": 10000,
    "broker_session_timeout_ms": 6000,
}
brokers = st.sampled_from(CONFIG["replicas"])


class SafeCurrentCluster(RuleBasedStateMachine):
    """Random operations on a safely configured cluster never break an invariant."""

    @initialize()
    def start(self) -> None:
        self.config = load_scenario({"name": "state-machine", "config": CONFIG, "steps": []}).config
        self.cluster = Cluster(self.config, effective_mode(self.config))
        self.checker = InvariantChecker(self.cluster)
        self.steps: list[dict[str, Any]] = []
        self.produced = 0

    def apply(self, step: dict[str, Any]) -> None:
        self.steps.append(step)
        scenario = load_scenario({"name": "s", "config": CONFIG, "steps": [step]})
        self.cluster.step_index = len(self.steps) - 1
        self.cluster.apply(scenario.steps[0])
        self.cluster.note_committed()
        self.checker.check(len(self.steps) - 1)

    def counterexample(self) -> str:
        scenario = load_scenario(
            {"name": "state-machine-counterexample", "config": CONFIG, "steps": self.steps}
        )
        return "replay with ktk replicate FILE:\n" + scenario_to_text(scenario)

    @rule()
    def produce(self) -> None:
        self.produced += 1
        self.apply({"produce": f"m{self.produced}", "acks": "all"})

    @rule(broker=brokers, lost=st.booleans())
    def fetch(self, broker: int, lost: bool) -> None:
        self.apply({"fetch": broker, "response": "lost" if lost else "ok"})

    @rule(broker=brokers, detected=st.booleans())
    def crash(self, broker: int, detected: bool) -> None:
        self.apply({"crash": broker, "unflushed": "keep", "detected": detected})

    @rule(broker=brokers)
    def restart(self, broker: int) -> None:
        self.apply({"restart": broker})

    @rule(broker=brokers)
    def shutdown(self, broker: int) -> None:
        self.apply({"shutdown": broker})

    @rule(broker=brokers)
    def flush(self, broker: int) -> None:
        self.apply({"flush": broker})

    @rule(duration=st.sampled_from([1000, 5001, 6001, 10001]))
    def advance(self, duration: int) -> None:
        self.apply({"advance_ms": duration})

    @rule(broker=brokers)
    def isolate(self, broker: int) -> None:
        self.apply({"isolate": broker})

    @rule(broker=brokers)
    def heal(self, broker: int) -> None:
        self.apply({"heal": broker})

    @rule(kind=st.sampled_from(["auto", "preferred", "isr-member"]), pick=st.integers(0, 2))
    def elect(self, kind: str, pick: int) -> None:
        isr = self.cluster.controller.registration.isr
        # forcing a replica outside the ISR is an unclean election, which this config forbids
        target: str | int = isr[pick % len(isr)] if kind == "isr-member" and isr else kind
        if target == "isr-member":
            target = "auto"
        self.apply({"elect": target})

    @rule()
    def consume(self) -> None:
        self.apply({"consume": "c1"})

    @invariant()
    def no_invariant_broke(self) -> None:
        if not hasattr(self, "checker"):
            return
        assert not self.checker.violations, (
            f"{self.checker.violations}\n{self.counterexample()}"
        )
        assert not self.cluster.acked_lost(), (
            f"acknowledged {self.cluster.acked_lost()} lost\n{self.counterexample()}"
        )
        assert not self.cluster.diverged(), f"logs diverged\n{self.counterexample()}"


SafeCurrentCluster.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_safe_current_cluster_keeps_every_invariant = SafeCurrentCluster.TestCase
