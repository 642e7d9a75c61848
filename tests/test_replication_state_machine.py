"""A hypothesis state machine over the cluster operations, checking every invariant after each
step in ``current`` mode with the safe configuration of the explorer's clean run: three
replicas, min.insync.replicas=2, acks=all, unclean election off. Crashes keep the page cache
(a crash that loses unflushed data is covered by the ISR guarantee only with eligible leader
replicas; the explorer shows the loss without them).

A failure prints the shrunk operation sequence as a scenario file that ``ktk replicate`` replays.
Every run searches new random sequences: the seed is drawn per run and printed (in the failure
message too); ``KTK_STATE_MACHINE_SEED=N`` replays the run with seed N.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    invariant,
    precondition,
    rule,
)

from replication.scenario import Step, load_scenario, scenario_to_text
from replication.sim import Runner, effective_mode, run_scenario

SAFE_CURRENT = {
    "brokers": [1, 2, 3],
    "replicas": [1, 2, 3],
    "mode": "current",
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
    "eligible_leader_replicas": False,
    "replica_lag_time_max_ms": 10000,
    "broker_session_timeout_ms": 6000,
}
MARKER = "replay with ktk replicate FILE:\n"
SETTINGS = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    derandomize=False,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TIME_BOUND_SECONDS = 30
CATCHING_SEED = 5


def run_seed() -> int:
    """This run's seed: new each run unless KTK_STATE_MACHINE_SEED names one."""
    given = os.environ.get("KTK_STATE_MACHINE_SEED")
    return int(given) if given else random.SystemRandom().randrange(2**32)


def run_machine(
    machine: type[RuleBasedStateMachine], run_settings: settings, fixed_seed: int | None = None
) -> int:
    """Run ``machine`` with a fresh, printed seed (or ``fixed_seed``); returns the seed."""
    chosen = run_seed() if fixed_seed is None else fixed_seed
    print(f"state machine seed {chosen} (replay: KTK_STATE_MACHINE_SEED={chosen})")
    test = seed(chosen)(get_state_machine_test(machine, settings=run_settings))
    try:
        test()
    except AssertionError as failure:
        raise AssertionError(f"seed {chosen}: {failure}") from failure
    return chosen


def cluster_machine(
    config: dict[str, Any],
    *,
    lossy_crashes: bool = False,
    producer: dict[str, Any] | None = None,
) -> type[RuleBasedStateMachine]:
    """A state machine driving a cluster with ``config``; it fails on any broken invariant,
    lost acknowledged record or divergence, printing the steps as a scenario file. Crashes
    keep the page cache unless ``lossy_crashes``. With ``producer`` (the settings of a
    ``producer`` step) records go through that producer, and a duplicate or a reordering in the
    log fails the machine too."""
    lose_options = st.booleans() if lossy_crashes else st.just(False)
    brokers = st.sampled_from(config["replicas"])
    picks = st.integers(0, len(config["replicas"]) - 1)
    lag = config["replica_lag_time_max_ms"]
    session = config["broker_session_timeout_ms"]

    class ClusterMachine(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            document = {"name": "state-machine", "config": config, "steps": []}
            self.config = load_scenario(document).config
            # the runner of run_scenario, so a failure here fails in a replay too
            self.runner = Runner(self.config, effective_mode(self.config))
            self.cluster = self.runner.cluster
            self.steps: list[dict[str, Any]] = []
            self.produced = 0
            if producer is not None:
                self.apply({"producer": "p1", **producer})

        def apply(self, step: dict[str, Any]) -> None:
            self.steps.append(step)
            self.runner.step(Step.from_dict(step, self.config, len(self.steps) - 1))

        def counterexample(self) -> str:
            document = {
                "name": "state-machine-counterexample",
                "config": config,
                "steps": self.steps,
            }
            return MARKER + scenario_to_text(load_scenario(document))

        @rule()
        def produce(self) -> None:
            self.produced += 1
            if producer is not None:
                self.apply({"send": f"m{self.produced}", "producer": "p1"})
            else:
                self.apply({"produce": f"m{self.produced}", "acks": "all"})

        @rule(broker=brokers, lost=st.booleans())
        def fetch(self, broker: int, lost: bool) -> None:
            self.apply({"fetch": broker, "response": "lost" if lost else "ok"})

        @rule()
        def fetch_round(self) -> None:
            for broker in config["replicas"]:
                self.apply({"fetch": broker})

        def brokers_where(self, wanted: str) -> list[int]:
            found = []
            for broker_id, broker in sorted(self.cluster.brokers.items()):
                if (
                    (wanted == "online" and broker.online)
                    or (wanted == "offline" and not broker.online)
                    or (wanted == "isolated" and broker.isolated)
                ):
                    found.append(broker_id)
            return found

        @precondition(lambda self: self.brokers_where("online"))
        @rule(pick=picks, detected=st.booleans(), lose=lose_options)
        def crash(self, pick: int, detected: bool, lose: bool) -> None:
            online = self.brokers_where("online")
            broker = online[pick % len(online)]
            unflushed = "lose" if lose else "keep"
            self.apply({"crash": broker, "unflushed": unflushed, "detected": detected})

        @precondition(lambda self: self.brokers_where("offline"))
        @rule(pick=picks)
        def restart(self, pick: int) -> None:
            offline = self.brokers_where("offline")
            self.apply({"restart": offline[pick % len(offline)]})

        @precondition(lambda self: self.brokers_where("online"))
        @rule(pick=picks)
        def shutdown(self, pick: int) -> None:
            online = self.brokers_where("online")
            self.apply({"shutdown": online[pick % len(online)]})

        @rule(broker=brokers)
        def flush(self, broker: int) -> None:
            self.apply({"flush": broker})

        @rule(duration=st.sampled_from([1000, lag // 2 + 1, lag + 1, session + 1]))
        def advance(self, duration: int) -> None:
            self.apply({"advance_ms": duration})

        @precondition(lambda self: not self.brokers_where("isolated"))
        @rule(broker=brokers)
        def isolate(self, broker: int) -> None:
            self.apply({"isolate": broker})

        @precondition(lambda self: self.brokers_where("isolated"))
        @rule(pick=picks)
        def heal(self, pick: int) -> None:
            isolated = self.brokers_where("isolated")
            self.apply({"heal": isolated[pick % len(isolated)]})

        @rule(kind=st.sampled_from(["auto", "preferred", "isr-member"]), pick=picks)
        def elect(self, kind: str, pick: int) -> None:
            isr = self.cluster.controller.registration.isr
            # forcing a replica outside the ISR is an unclean election, which is off here
            target: str | int = isr[pick % len(isr)] if kind == "isr-member" and isr else kind
            self.apply({"elect": "auto" if target == "isr-member" else target})

        @rule()
        def consume(self) -> None:
            self.apply({"consume": "c1"})

        @invariant()
        def no_invariant_broke(self) -> None:
            if not hasattr(self, "runner"):
                return
            violations = [v.invariant for v in self.runner.violations]
            assert not violations, f"{violations}\n{self.counterexample()}"
            state = self.cluster.state()
            assert not state.acked_lost, (
                f"acknowledged {list(state.acked_lost)} lost\n{self.counterexample()}"
            )
            assert not state.diverged, f"logs diverged\n{self.counterexample()}"
            if producer is not None:
                queue = [f.anomaly for f in state.anomalies if f.anomaly != "LostWrite"]
                assert not queue, f"{queue}\n{self.counterexample()}"

    return ClusterMachine


def test_safe_current_cluster_keeps_every_invariant() -> None:
    started = time.monotonic()
    run_machine(cluster_machine(SAFE_CURRENT), SETTINGS)
    assert time.monotonic() - started < TIME_BOUND_SECONDS


def test_safe_current_cluster_with_an_idempotent_producer_shows_no_duplicate_or_reordering() -> (
    None
):
    started = time.monotonic()
    run_machine(cluster_machine(SAFE_CURRENT, producer={"idempotence": True}), SETTINGS)
    assert time.monotonic() - started < TIME_BOUND_SECONDS


def test_each_run_draws_a_new_seed_unless_one_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KTK_STATE_MACHINE_SEED", raising=False)
    assert len({run_seed() for _ in range(5)}) > 1
    monkeypatch.setenv("KTK_STATE_MACHINE_SEED", "1234")
    assert run_seed() == 1234


@pytest.mark.slow
def test_the_machine_catches_a_lost_last_replica_and_prints_a_replayable_scenario() -> None:
    # min ISR 1 and crashes that lose the page cache: the S5 loss the explorer finds at once
    unsafe = {**SAFE_CURRENT, "brokers": [1, 2], "replicas": [1, 2], "min_insync_replicas": 1}
    with pytest.raises(AssertionError) as raised:
        # a fixed seed: this pins that the harness catches and prints a loss, which a random
        # seed finds only after up to a minute
        run_machine(
            cluster_machine(unsafe, lossy_crashes=True),
            settings(SETTINGS, report_multiple_bugs=False),
            fixed_seed=CATCHING_SEED,
        )
    assert str(raised.value).startswith("seed ")
    scenario_text = str(raised.value).split(MARKER, 1)[1]
    document, _ = json.JSONDecoder().raw_decode(scenario_text.lstrip())
    result = run_scenario(load_scenario(document))
    assert result.violations or result.acked_lost or result.diverged
    assert len(result.scenario.steps) <= 8  # hypothesis shrank the sequence
