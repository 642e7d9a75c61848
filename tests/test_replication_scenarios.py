"""The verdict table of spec/replication.md over the bundled scenario files, in all four modes;
the scenario format (round trip, invalid files naming step and field); determinism; and a
property: random fault schedules without lossy crashes never break an invariant in `current`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.errors import ScenarioError
from replication.log import LogRecord
from replication.modes import MODE_NAMES
from replication.scenario import load_scenario, scenario_to_dict, scenario_to_text
from replication.sim import ScenarioResult, run_scenario
from replication.view import Violation

SCENARIOS = EXAMPLES / "scenarios"

# (file, mode) -> (acknowledged records lost?, logs diverged?) as ktk reproduces the table
VERDICTS: dict[str, dict[str, tuple[bool, bool]]] = {
    "s1-two-round-hw-lag": {
        "pre-0.11": (True, True),
        "kip-101": (False, False),
        "kip-279": (False, False),
        "current": (False, False),
    },
    "s2-both-lose-unflushed": {
        "pre-0.11": (True, True),
        "kip-101": (True, False),
        "kip-279": (True, False),
        "current": (True, False),
    },
    # pre-0.11 truncates both replicas to their HW before any fetch: no divergence (see docs)
    "s3-fast-leader-changes": {
        "pre-0.11": (True, False),
        "kip-101": (True, True),
        "kip-279": (True, False),
        "current": (True, False),
    },
    "s4-unclean-election": {
        "pre-0.11": (True, True),
        "kip-101": (True, True),
        "kip-279": (True, False),
        "current": (True, False),
    },
    "s5-isr-shrinks-to-one": dict.fromkeys(MODE_NAMES, (True, False)),
    "s5-min-isr-2": dict.fromkeys(MODE_NAMES, (False, False)),
    "s5-unclean-shutdown": dict.fromkeys(MODE_NAMES, (True, False)),
    "s5-unclean-shutdown-elr": {
        "pre-0.11": (True, False),
        "kip-101": (True, False),
        "kip-279": (True, False),
        "current": (False, False),
    },
    "s6-expand-without-maximal-isr": {"current": (True, False)},
    "s6-expand-with-maximal-isr": {"current": (False, False)},
    "s7-join-isr-below-leso": {"current": (True, False)},
    "s7-join-isr-at-leso": {"current": (False, False)},
    "s8-stale-broker-epoch": {"current": (False, False)},
    "s9-restarted-follower-holds-hw": dict.fromkeys(MODE_NAMES, (False, False)),
    "s10-epoch-bump-keeps-pending-produce": dict.fromkeys(MODE_NAMES, (False, False)),
    "s11-follower-cannot-hear-leader": dict.fromkeys(MODE_NAMES, (False, False)),
    "s12-leader-misses-metadata": dict.fromkeys(MODE_NAMES, (False, False)),
    # the zombie's acks=1 record is lost in every mode (produce requests carry no epoch)
    "s13-zombie-leader": dict.fromkeys(MODE_NAMES, (True, False)),
    # a lost produce answer and a retry: m1 twice in the log, nothing lost
    "s15-lost-produce-response": dict.fromkeys(MODE_NAMES, (False, False)),
    # producers: duplicates and reordering lose nothing acknowledged
    "s16-retry-duplicates": dict.fromkeys(MODE_NAMES, (False, False)),
    "s17-retries-reorder-in-flight": dict.fromkeys(MODE_NAMES, (False, False)),
    # the unclean election loses m2; the crashed old leader still holds it (diverged)
    "s18-out-of-order-sequence-after-loss": dict.fromkeys(MODE_NAMES, (True, True)),
    "s19-consumer-read-truncated": dict.fromkeys(MODE_NAMES, (True, False)),
    # disk faults: a stale HW checkpoint loses m1 only where a restart truncates to the HW
    "s20-stale-hw-checkpoint": {
        "pre-0.11": (True, False),
        "kip-101": (False, False),
        "kip-279": (False, False),
        "current": (False, False),
    },
    "s21-torn-tail": dict.fromkeys(MODE_NAMES, (True, False)),
    "s22-failed-log-dir": dict.fromkeys(MODE_NAMES, (False, False)),
    "s23-log-start-above-follower": dict.fromkeys(MODE_NAMES, (False, False)),
    # several partitions and reassignment: leaderships move together, nothing acked=all lost;
    # one crash loses the acks=1 writes of every partition the broker led
    "s24-broker-down-moves-every-leader": dict.fromkeys(MODE_NAMES, (False, False)),
    "s25-auto-leader-rebalance": dict.fromkeys(MODE_NAMES, (False, False)),
    "s26-reassignment-moves-leader": dict.fromkeys(MODE_NAMES, (False, False)),
    "s27-one-crash-loses-on-every-partition": dict.fromkeys(MODE_NAMES, (True, False)),
    # the adding replica joins at the HW and leads before it has the acks=1 record
    "s28-reassignment-loses-acks-1-write": dict.fromkeys(MODE_NAMES, (True, False)),
    # the KRaft controller: a cut-off controller's election is lost and redone late, an ISR
    # change survives a failover; nothing acknowledged is lost
    "s29-controller-failover-mid-election": dict.fromkeys(MODE_NAMES, (False, False)),
    # KIP-320: the stale follower's fetch is fenced in current; older modes serve it
    "s14-stale-follower-fenced": {
        "pre-0.11": (True, True),
        "kip-101": (True, True),
        "kip-279": (True, False),
        "current": (True, False),
    },
}

CELLS = [(name, mode) for name, modes in VERDICTS.items() for mode in modes]


def run(name: str, mode: str) -> ScenarioResult:
    return run_scenario(load_scenario(SCENARIOS / f"{name}.yaml"), mode)


def test_every_example_file_has_a_verdict() -> None:
    assert sorted(p.stem for p in SCENARIOS.glob("*.yaml")) == sorted(VERDICTS)


@pytest.mark.parametrize(("name", "mode"), CELLS, ids=[f"{n}@{m}" for n, m in CELLS])
def test_verdict_table_cell(name: str, mode: str) -> None:
    result = run(name, mode)
    lost, diverged = VERDICTS[name][mode]
    assert bool(result.acked_lost) is lost, result.acked_lost
    assert result.diverged is diverged
    assert result.expect_failures == ()


def test_s4_loss_is_detected_by_consumers_only_in_current_mode() -> None:
    detected = {
        mode: dict(run("s4-unclean-election", mode).final.truncation_detected)
        for mode in MODE_NAMES
    }
    assert detected == {
        "pre-0.11": {"c1": False},
        "kip-101": {"c1": False},
        "kip-279": {"c1": False},
        "current": {"c1": True},
    }


def test_s5_min_isr_2_rejects_writes_when_isr_is_the_leader_alone() -> None:
    result = run("s5-min-isr-2", "current")
    assert dict(result.final.results)["m3"] == "NOT_ENOUGH_REPLICAS"
    assert result.final.acked == ("m1",)


def test_safe_cells_break_no_invariant() -> None:
    for name, mode in [
        ("s1-two-round-hw-lag", "current"),
        ("s3-fast-leader-changes", "kip-279"),
        ("s3-fast-leader-changes", "current"),
        ("s5-min-isr-2", "current"),
        ("s5-unclean-shutdown-elr", "current"),
        ("s6-expand-with-maximal-isr", "current"),
        ("s7-join-isr-at-leso", "current"),
        ("s8-stale-broker-epoch", "current"),
    ]:
        assert run(name, mode).violations == (), (name, mode)


def test_switched_off_rules_are_caught_by_named_invariants() -> None:
    assert "StrongIsr" in run("s6-expand-without-maximal-isr", "current").violation_names()
    assert "LeaderCompleteness" in run("s7-join-isr-below-leso", "current").violation_names()
    assert "StrongIsr" in run("s1-two-round-hw-lag", "pre-0.11").violation_names()
    assert "LogMatching" in run("s3-fast-leader-changes", "kip-101").violation_names()


def test_violations_name_invariant_step_and_detail() -> None:
    violation = run("s1-two-round-hw-lag", "pre-0.11").violations[0]
    assert violation == Violation(
        invariant="StrongIsr",
        step=8,
        detail="replica 1 lacks offset 1 (leader has m2) below leader HW 2",
    )


def test_result_json_has_the_documented_fields() -> None:
    document = run("s1-two-round-hw-lag", "pre-0.11").to_json()
    for key in ("name", "mode", "leader", "leader_epoch", "isr", "hw", "replicas", "acked"):
        assert key in document
    for key in ("acked_lost", "diverged", "consumed", "violations", "timeline"):
        assert key in document
    replica = document["replicas"]["1"]
    assert set(replica) >= {"log", "leo", "hw", "epoch_cache", "online"}
    assert replica["log"][0] == [0, 0, "m1"]
    first = document["timeline"][0]
    assert first["step"] == 0 and first["op"] == "produce m1 (acks=all)"
    assert set(first["replicas"]["2"]) == {"leo", "hw", "epoch", "online"}
    json.dumps(document)


def test_runs_are_deterministic_byte_for_byte() -> None:
    scenario = load_scenario(SCENARIOS / "s4-unclean-election.yaml")
    first = json.dumps(run_scenario(scenario, "current").to_json(), sort_keys=True)
    second = json.dumps(run_scenario(scenario, "current").to_json(), sort_keys=True)
    assert first == second


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_scenario_round_trips_through_dict_json_and_yaml(path: Path) -> None:
    scenario = load_scenario(path)
    again = load_scenario(scenario_to_dict(scenario))
    assert again.steps == scenario.steps and again.config == scenario.config
    assert load_scenario(scenario_to_text(scenario, "json")).steps == scenario.steps
    assert load_scenario(scenario_to_text(scenario, "yaml")).steps == scenario.steps


def test_mid_scenario_expectation_and_acks_arriving_later() -> None:
    scenario = load_scenario(
        {
            "name": "late-ack",
            "config": {"brokers": [1, 2], "replicas": [1, 2]},
            "steps": [
                {"produce": "m1"},
                {"expect": {"acked": [], "results": {"m1": "pending"}}},
                {"fetch": 2},
                {"fetch": 2},
                {"expect": {"acked": ["m1"], "hw": 1}},
            ],
        }
    )
    result = run_scenario(scenario)
    assert result.expect_failures == ()
    assert [entry.acked for entry in result.timeline] == [(), (), ("m1",)]


def test_failed_expectation_says_which() -> None:
    scenario = load_scenario(
        {
            "name": "wrong",
            "config": {"brokers": [1, 2], "replicas": [1, 2]},
            "steps": [{"produce": "m1", "acks": 1}, {"expect": {"acked_lost": ["m1"]}}],
        }
    )
    assert run_scenario(scenario).expect_failures == (
        "step 1: expect acked_lost: wanted ['m1'], got []",
    )


def test_request_timeout_fails_a_waiting_acks_all_produce() -> None:
    scenario = load_scenario(
        {
            "name": "timeout",
            "config": {"brokers": [1, 2], "replicas": [1, 2], "request_timeout_ms": 1000},
            "steps": [{"produce": "m1"}, {"advance_ms": 1000}],
        }
    )
    assert run_scenario(scenario).final.results == (("m1", "REQUEST_TIMED_OUT"),)


def test_isolated_leader_is_fenced_after_session_timeout_and_replaced() -> None:
    scenario = load_scenario(
        {
            "name": "isolate",
            "config": {"brokers": [1, 2, 3], "replicas": [1, 2, 3]},
            "steps": [{"isolate": 1}, {"advance_ms": 8999}, {"advance_ms": 1}, {"heal": 1}],
        }
    )
    timeline = run_scenario(scenario).timeline
    assert [entry.leader for entry in timeline] == [1, 1, 2, 2]
    assert [entry.isr for entry in timeline] == [(1, 2, 3), (1, 2, 3), (2, 3), (2, 3)]


def test_storage_factory_gets_one_storage_per_replica() -> None:
    made: list[int] = []

    def factory(broker_id: int) -> object:
        from test_replication_log import RecordingStorage

        made.append(broker_id)
        return RecordingStorage()

    result = run_scenario(
        load_scenario(SCENARIOS / "s2-both-lose-unflushed.yaml"), "current", storage_factory=factory
    )
    assert sorted(made) == [1, 2]
    assert result.expect_failures == ()


# ---------------------------------------------------------------------------- invalid files

BASE = '"name": "bad", "config": {"brokers": [1, 2], "replicas": [1, 2]}'


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ('[{"fetch": 1}, {"jump": 2}]', "step 1: jump: unknown op"),
        ('[{"fetch": 9}]', "step 0: fetch: unknown broker (got 9)"),
        ('[{"produce": "m", "acks": 2}]', 'step 0: acks: acks must be 0, 1, -1 or "all" (got 2)'),
        (
            '[{"advance_ms": 50}, {"fetch": 1, "at_ms": 10}]',
            "step 1: at_ms: time must not go backwards (clock is at 50 ms) (got 10)",
        ),
        (
            '[{"advance_ms": -5}]',
            "step 0: advance_ms: must be an integer from 0 to 1,000,000,000,000 (got -5)",
        ),
        (
            '[{"crash": 1, "unflushed": "maybe"}]',
            "step 0: unflushed: unflushed must be keep, lose or torn",
        ),
        ('[{"fetch": 1, "acks": 1}]', "step 0: acks: field not allowed on fetch"),
        ('[{"elect": 7}]', "step 0: elect: elect takes auto, preferred, unclean or a replica id"),
        ('[{"expect": {"lost": []}}]', "step 0: expect.lost: unknown expect field"),
        ('[{"expect": {"acked": []}, "modes": ["1.0"]}]', "step 0: modes: modes lists some of"),
        ('[{"fetch": 1, "produce": "m"}]', "step 0: op: a step holds exactly one op"),
    ],
)
def test_invalid_scenario_names_step_and_field(steps: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario("{" + BASE + ', "steps": ' + steps + "}")
    assert message in str(caught.value)


def test_invalid_config_names_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"config.replicas: replica is not a broker \(got 3\)"):
        load_scenario('{"name": "x", "config": {"brokers": [1], "replicas": [1, 3]}, "steps": []}')
    with pytest.raises(ScenarioError, match=r"config\.mode: unknown mode"):
        load_scenario(
            '{"name": "x", "config": {"brokers": [1], "replicas": [1], "mode": "0.8"}, "steps": []}'
        )


def test_invalid_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nconfig: {brokers: [1], replicas: [1]}\nsteps:\n  - {fetch: 4}\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: step 0: fetch: unknown broker"):
        load_scenario(path)


# ---------------------------------------------------------------------------- property

BROKERS = [1, 2, 3]
ANY_STEP = st.one_of(
    st.builds(lambda acks: {"produce": "x", "acks": acks}, st.sampled_from(["all", 1])),
    st.builds(
        lambda b, r: {"fetch": b, "response": r},
        st.sampled_from(BROKERS),
        st.sampled_from(["ok", "ok", "lost"]),
    ),
    st.builds(lambda b, d: {"crash": b, "detected": d}, st.sampled_from(BROKERS), st.booleans()),
    st.builds(lambda b: {"restart": b}, st.sampled_from(BROKERS)),
    st.builds(lambda b: {"shutdown": b}, st.sampled_from(BROKERS)),
    st.builds(lambda b: {"isolate": b}, st.sampled_from(BROKERS)),
    st.builds(lambda b: {"heal": b}, st.sampled_from(BROKERS)),
    st.builds(lambda ms: {"advance_ms": ms}, st.sampled_from([100, 5000, 10000, 20000])),
    st.builds(lambda e: {"elect": e}, st.sampled_from(["auto", "preferred", *BROKERS])),
    st.just({"consume": "c1"}),
)


def numbered(steps: list[dict]) -> list[dict]:
    """Give every produced record its own value m1, m2, ..."""
    count = 0
    result = []
    for step in steps:
        if "produce" in step:
            count += 1
            step = {**step, "produce": f"m{count}"}
        result.append(step)
    return result


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(ANY_STEP, max_size=40), st.sampled_from([1, 2]))
def test_current_protocol_keeps_every_invariant_without_lossy_crashes(
    steps: list[dict], min_isr: int
) -> None:
    steps = numbered(steps)
    scenario = load_scenario(
        {
            "name": "property",
            "config": {"brokers": BROKERS, "replicas": BROKERS, "min_insync_replicas": min_isr},
            "steps": steps,
        }
    )
    result = run_scenario(scenario, "current")
    acks_1 = {step["produce"] for step in steps if step.get("acks") == 1}
    lost = [value for value in result.acked_lost if value not in acks_1]
    outcome = (result.violations, lost, result.diverged)
    assert outcome == ((), [], False), scenario_to_text(scenario)


# ---------------------------------------------------------------------------- simulator edges


def run_steps(steps: list[dict], **config: object) -> ScenarioResult:
    base = {"brokers": [1, 2, 3], "replicas": [1, 2, 3], **config}
    return run_scenario(load_scenario({"name": "edge", "config": base, "steps": steps}))


def test_acks_0_is_never_acknowledged_and_no_leader_refuses_writes() -> None:
    result = run_steps(
        [
            {"produce": "m1", "acks": 0},
            {"shutdown": 1},
            {"shutdown": 2},
            {"shutdown": 3},
            {"produce": "m2", "acks": 1},
        ]
    )
    assert result.final.results == (("m1", "sent"), ("m2", "NOT_LEADER_OR_FOLLOWER"))
    assert result.final.acked == ()


def test_lost_fetch_reply_moves_the_leader_but_not_the_follower() -> None:
    result = run_steps(
        [{"produce": "m1", "acks": 1}, {"fetch": 2, "response": "lost"}],
        brokers=[1, 2],
        replicas=[1, 2],
    )
    final = result.final
    assert (final.replica(1).log_end_offset, final.replica(2).log_end_offset) == (1, 0)
    assert result.timeline[-1].result == "reply lost"


def test_controlled_shutdown_moves_leadership_and_flushes() -> None:
    result = run_steps([{"produce": "m1", "acks": 1}, {"shutdown": 1}, {"restart": 1}])
    assert result.timeline[1].leader == 2
    assert result.final.replica(1).records == (LogRecord(0, 0, "m1"),)
    assert 1 not in result.final.isr


def test_restart_while_isolated_registers_once_healed() -> None:
    result = run_steps(
        [{"crash": 3}, {"isolate": 3}, {"restart": 3}, {"advance_ms": 9000}, {"heal": 3}]
    )
    outcomes = [entry.result for entry in result.timeline]
    assert outcomes[2] == "restarted, cut off"
    assert outcomes[4] == "healed, registered"
    assert result.final.replica(3).online is True


def test_crash_is_noticed_only_after_the_session_timeout() -> None:
    result = run_steps([{"crash": 1}, {"advance_ms": 8999}, {"advance_ms": 1}])
    assert [entry.leader for entry in result.timeline] == [1, 1, 2]
    assert result.timeline[2].result == "t=9000: broker 1 fenced"


def test_at_ms_moves_the_clock_to_an_absolute_time() -> None:
    result = run_steps([{"fetch": 2, "at_ms": 2500}, {"advance_ms": 500}])
    assert [entry.time_ms for entry in result.timeline] == [2500, 3000]
