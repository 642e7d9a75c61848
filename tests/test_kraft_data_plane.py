"""The data-plane simulator driven from a KRaft metadata log: the controller's decisions are
records replicated by a controller quorum, and the partition and broker state the brokers act
on is replayed from the applied log (replication/kraft/log_controller.py)."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES

from replication.controller import Controller
from replication.kraft.log_controller import TOPIC, MetadataLogController
from replication.kraft.records import MetadataImage, RegisterBroker
from replication.modes import get_mode
from replication.scenario import ScenarioConfig, Step, load_scenario
from replication.sim import Runner, run_scenario

SCENARIOS = sorted((EXAMPLES / "scenarios").glob("*.yaml"))
EPOCH = re.compile(r"broker epoch \d+")


def without_broker_epochs(document: dict) -> str:
    """The result with broker epoch numbers blanked (the log controller's are offsets) and
    without the name of the controller and the KRaft controller's quorum timeline."""
    document = {
        key: value for key, value in document.items() if key not in ("controller", "quorum")
    }
    return EPOCH.sub("broker epoch N", repr(document))


def without_controller_steps(path) -> bool:
    return all(step.op != "controller" for step in load_scenario(path).steps)


# the scenarios the built-in controller can run too (no controller faults)
BOTH = [path for path in SCENARIOS if without_controller_steps(path)]


@pytest.mark.parametrize("path", BOTH, ids=lambda p: p.stem)
def test_every_scenario_reaches_the_same_verdict_with_the_state_in_a_metadata_log(path):
    scenario = load_scenario(path)
    oracle = run_scenario(scenario, "current", controller="builtin")
    logged = run_scenario(scenario, "current", controller_factory=MetadataLogController)
    assert (oracle.controller, logged.controller) == ("builtin", "kraft")
    assert logged.expect_failures == oracle.expect_failures
    assert without_broker_epochs(logged.to_json()) == without_broker_epochs(oracle.to_json())


def voters_images(controller: MetadataLogController) -> list[MetadataImage]:
    quorum = controller.quorum
    return [quorum.nodes[v].image for v in sorted(quorum.up)]


def test_the_state_the_brokers_act_on_is_what_every_voter_applied():
    scenario = load_scenario(EXAMPLES / "scenarios" / "s5-unclean-shutdown-elr.yaml")
    runner = Runner(scenario.config, get_mode("current"), controller_factory=MetadataLogController)
    controller = runner.cluster.controller
    assert isinstance(controller, MetadataLogController)
    for step in scenario.steps:
        runner.step(step)
        controller.quorum.settle(ticks=2)
        registration = controller.registration
        for image in voters_images(controller):
            state = image.partition(TOPIC, 0)
            assert state is not None
            assert (state.leader, state.isr, state.leader_epoch, state.elr) == (
                registration.leader,
                registration.isr,
                registration.leader_epoch,
                registration.elr,
            )
            assert image.fenced == tuple(
                sorted(b for b, r in controller.brokers.items() if r.fenced)
            )


def test_a_restarted_broker_gets_the_offset_of_its_registration_record_as_epoch():
    scenario = load_scenario(EXAMPLES / "scenarios" / "s8-stale-broker-epoch.yaml")
    result = run_scenario(scenario, "current", controller_factory=MetadataLogController)
    restarts = [e.result for e in result.timeline if e.op.startswith("restart")]
    assert restarts, "s8 restarts a broker"
    epoch = int(restarts[-1].rsplit(" ", 1)[1].rstrip(")"))
    runner = Runner(scenario.config, get_mode("current"), controller_factory=MetadataLogController)
    for step in scenario.steps:
        runner.step(step)
    controller = runner.cluster.controller
    assert isinstance(controller, MetadataLogController)
    leader = controller.quorum.leader()
    assert leader is not None
    offsets = [
        offset
        for offset, entry in enumerate(leader.entries, start=leader.log_start)
        if isinstance(entry.payload, RegisterBroker) and entry.payload.broker_epoch == offset
    ]
    assert epoch in offsets


def two_brokers() -> Runner:
    config = ScenarioConfig(brokers=(1, 2), replicas=(1, 2))
    return Runner(config, get_mode("current"), controller_factory=MetadataLogController)


def test_a_decision_the_cut_off_controller_cannot_commit_never_reaches_the_brokers():
    runner = two_brokers()
    controller = runner.cluster.controller
    assert isinstance(controller, MetadataLogController)
    cut_off = controller.isolate_active()
    assert controller.fence(1) is True  # decided and appended, but never committed
    assert controller.registration.leader == 1 and not controller.brokers[1].fenced
    assert controller.active().node_id != cut_off  # check-quorum: another controller took over
    controller.heal(cut_off)
    assert controller.fence(1) is True  # decided again by the new controller: committed
    assert (controller.registration.leader, controller.registration.leader_epoch) == (2, 1)


def test_an_alter_partition_lost_in_a_failover_is_sent_again_to_the_next_controller():
    from replication.partition import NONE, AlterPartitionRequest

    runner = two_brokers()
    controller = runner.cluster.controller
    assert isinstance(controller, MetadataLogController)
    registration = controller.registration
    cut_off = controller.isolate_active()
    request = AlterPartitionRequest(
        1, registration.leader_epoch, registration.partition_epoch, (1,)
    )
    assert controller.handle_alter_partition(request) == NONE
    assert controller.committed and controller.active().node_id != cut_off
    assert (controller.registration.isr, controller.registration.partition_epoch) == ((1,), 1)
    assert controller.written[-2:] == [controller.written[-1]] * 2  # decided twice, same record


@pytest.mark.parametrize(
    "stem",
    ["s4-unclean-election", "s24-broker-down-moves-every-leader", "s26-reassignment-moves-leader"],
)
def test_committed_decisions_survive_a_controller_failover_between_steps(stem):
    scenario = load_scenario(EXAMPLES / "scenarios" / f"{stem}.yaml")
    plain = Runner(scenario.config, get_mode("current"))
    failing = Runner(scenario.config, get_mode("current"), controller_factory=MetadataLogController)
    controller = failing.cluster.controller
    assert isinstance(controller, MetadataLogController)
    for index, step in enumerate(scenario.steps):
        plain.step(step)
        if index % 3 == 1:
            controller.failover()
        failing.step(step)
        assert controller.registrations == plain.cluster.controller.registrations
    assert [c.acked_lost() for c in failing.clusters] == [c.acked_lost() for c in plain.clusters]


def test_the_log_controller_is_a_controller_for_the_simulator():
    runner = two_brokers()
    assert isinstance(runner.cluster.controller, Controller)
    outcome = runner.step(Step("produce", "m1", (("acks", 1),)))
    assert outcome.result == "appended at 0: ok"


@pytest.mark.parametrize(
    "options",
    [
        {"min_insync_replicas": 2},
        {"unclean_leader_election": True, "link_cuts": True},
        {"min_insync_replicas": 2, "eligible_leader_replicas": True, "disk_faults": True},
    ],
    ids=["min-isr-2", "unclean-link-cuts", "elr-disk-faults"],
)
def test_random_schedules_reach_the_same_verdict_on_the_metadata_log(options):
    from replication.explore import build_scenario, generate_schedule

    config = ScenarioConfig(
        brokers=(1, 2, 3),
        replicas=(1, 2, 3),
        min_insync_replicas=options.get("min_insync_replicas", 1),
        unclean_leader_election=options.get("unclean_leader_election", False),
        eligible_leader_replicas=options.get("eligible_leader_replicas", False),
    )
    switches = {k: v for k, v in options.items() if k in ("link_cuts", "disk_faults")}
    for index in range(150):
        steps = generate_schedule(config, 7, index, **switches)
        scenario = build_scenario(f"schedule-{index}", config, steps)
        oracle = run_scenario(scenario, "current")
        logged = run_scenario(scenario, "current", controller_factory=MetadataLogController)
        assert without_broker_epochs(logged.to_json()) == without_broker_epochs(oracle.to_json()), (
            f"schedule {index}"
        )
