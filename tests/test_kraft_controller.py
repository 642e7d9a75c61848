"""The active controller's decisions as metadata records: broker epochs (KIP-631), KIP-903
AlterPartition, elections from the ISR, the ELR (KIP-966) or unclean, and controller failover
in the middle of one (examples/quorum k12-k15), plus bad scenario input."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app
from replication.kraft.control import (
    INELIGIBLE_REPLICA,
    NONE,
    STALE_BROKER_EPOCH,
    ElectionConfig,
    alter_partition,
    controlled_shutdown,
    elect,
    fence_broker,
    heartbeat,
    partition_change,
    register_broker,
    unfence_broker,
)
from replication.kraft.records import (
    ControlledShutdown,
    FenceBroker,
    MetadataImage,
    PartitionChange,
    RegisterBroker,
    decode_record,
    encode_record,
)
from replication.kraft.scenario import _Runner, load_quorum_scenario, run_quorum_scenario
from replication.kraft.snapshot import MemoryStore, SnapshotId, read_snapshot, write_snapshot

QUORUM = EXAMPLES / "quorum"
ELR = ElectionConfig(min_insync_replicas=2, eligible_leader_replicas=True)


def run_bundled(stem: str):
    result = run_quorum_scenario(load_quorum_scenario(QUORUM / f"{stem}.yaml"))
    assert result.expect_failures == ()
    assert result.violations == ()
    return result


def decisions(result) -> list[str]:
    return [c for e in result.timeline for c in e["changes"] if c.startswith("controller ")]


def image_of(*records) -> MetadataImage:
    image = MetadataImage.empty()
    for record in records:
        image = image.apply(record)
    return image


def cluster(isr=(4, 5, 6), leader=4) -> MetadataImage:
    return image_of(
        RegisterBroker(4, 0),
        RegisterBroker(5, 1),
        RegisterBroker(6, 2),
        PartitionChange("t", 0, leader, isr, 0, replicas=(4, 5, 6)),
    )


# ----------------------------------------------------------------------- broker epochs


def test_a_broker_epoch_is_the_offset_of_its_registration_record():
    scenario = load_quorum_scenario(QUORUM / "k12-broker-epochs.yaml")
    runner = _Runner(scenario)
    for index, step in enumerate(scenario.steps):
        if step.op != "expect":
            runner.apply(index, step)
    leader = runner.quorum.leader()
    assert leader is not None
    registrations = [
        (offset, entry.payload)
        for offset, entry in enumerate(leader.entries, start=leader.log_start)
        if isinstance(entry.payload, RegisterBroker)
    ]
    assert registrations == [
        (1, RegisterBroker(4, 1, fenced=True)),
        (2, RegisterBroker(5, 2, fenced=True)),
        (8, RegisterBroker(5, 8, fenced=True)),
    ]
    assert runner.quorum.broker_epochs == {4: 1, 5: 8}


def test_a_restarted_broker_registers_again_with_a_new_epoch_and_starts_fenced():
    result = run_bundled("k12-broker-epochs")
    restart = result.timeline[7]["changes"]
    # the old incarnation leaves the ISR (offsets 6 and 7), then the new one registers fenced
    assert restart[:2] == [
        "controller 1 registers broker 5 (broker epoch 8, fenced)",
        "controller 1: orders-0 leader 4 epoch 0 isr [4]",
    ]
    assert result.timeline[8]["op"] == "expect"  # fenced: {1: [5], 4: [5]} held there
    assert "controller 1 unfences broker 5" in result.timeline[9]["changes"]


def test_a_heartbeat_with_a_stale_broker_epoch_is_rejected():
    result = run_bundled("k12-broker-epochs")
    assert (
        "controller 1 rejects the heartbeat of broker 5: STALE_BROKER_EPOCH (broker epoch 2, "
        "registered 8)" in decisions(result)
    )


def test_alter_partition_naming_a_stale_broker_epoch_is_refused_as_ineligible():
    result = run_bundled("k12-broker-epochs")
    assert (
        "controller 1 refuses AlterPartition orders-0 from 4: INELIGIBLE_REPLICA (broker 5 has "
        "broker epoch 8, the request names 2)" in decisions(result)
    )
    assert "controller 1 accepts AlterPartition orders-0 isr [4, 5]" in decisions(result)


def test_register_broker_gives_the_offset_after_the_fencing_records_it_writes_first():
    image = cluster()
    epoch, records = register_broker(image, ElectionConfig(), 4, next_offset=10)
    assert [type(r).__name__ for r in records] == [
        "PartitionChange",
        "FenceBroker",
        "RegisterBroker",
    ]
    assert epoch == 12 and records[-1] == RegisterBroker(4, 12, fenced=True)
    assert records[0].leader == 5  # the old incarnation led: leadership moved first


def test_heartbeat_unfences_only_once_the_broker_applied_its_registration():
    image = image_of(RegisterBroker(4, 7, fenced=True))
    assert heartbeat(image, ElectionConfig(), 4, 7, metadata_offset=6) == (NONE, [])
    assert heartbeat(image, ElectionConfig(), 4, 7, metadata_offset=7) == (
        NONE,
        [FenceBroker(4, fenced=False)],
    )
    assert heartbeat(image, ElectionConfig(), 4, 3, metadata_offset=9)[0] == STALE_BROKER_EPOCH
    assert heartbeat(image, ElectionConfig(), 9, 7, metadata_offset=9)[0] == STALE_BROKER_EPOCH


def test_alter_partition_checks_in_kafkas_order():
    image = cluster(isr=(4, 5))
    config = ElectionConfig()
    args = (image, config, 4, "t", 0)
    assert alter_partition(*args, (4, 5, 6), leader_epoch=1)[0] == "NOT_CONTROLLER"
    fenced = image.apply(PartitionChange("t", 0, 4, (4, 5), 2))
    assert alter_partition(fenced, config, 4, "t", 0, (4,), leader_epoch=1)[0] == (
        "FENCED_LEADER_EPOCH"
    )
    assert alter_partition(image, config, 5, "t", 0, (5,), leader_epoch=0)[0] == "INVALID_REQUEST"
    assert alter_partition(*args, (4, 9), leader_epoch=0)[0] == "INVALID_REQUEST"
    gone = image.apply(FenceBroker(6))
    assert alter_partition(gone, config, 4, "t", 0, (4, 6), leader_epoch=0)[0] == (
        INELIGIBLE_REPLICA
    )
    error, change, _ = alter_partition(*args, (4, 5, 6), leader_epoch=0, broker_epochs=((6, 2),))
    assert error == NONE and change is not None and change.isr == (4, 5, 6)
    assert alter_partition(*args, (4, 5, 6), leader_epoch=0, broker_epochs=((6, 1),))[0] == (
        INELIGIBLE_REPLICA
    )


# ----------------------------------------------------------------------- elections


def test_fencing_the_leader_elects_the_first_live_isr_member_in_assignment_order():
    records = fence_broker(cluster(), ElectionConfig(), 4)
    assert records[0] == PartitionChange("t", 0, 5, (5, 6), 1)
    assert records[-1] == FenceBroker(4)


def test_without_elr_the_last_isr_member_stays_and_the_partition_has_no_leader():
    image = cluster(isr=(4,))
    [change, _] = fence_broker(image, ElectionConfig(), 4)
    assert (change.leader, change.isr, change.leader_epoch) == (-1, (4,), 1)


def test_with_elr_members_leaving_a_short_isr_become_eligible_and_lead_when_it_empties():
    image = cluster(isr=(4, 5))
    for record in fence_broker(image, ELR, 5):
        image = image.apply(record)
    state = image.partition("t", 0)
    assert (state.isr, state.elr) == ((4,), (5,))
    for record in fence_broker(image, ELR, 4):
        image = image.apply(record)
    state = image.partition("t", 0)
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (-1, (), (4, 5), (4,))
    records = unfence_broker(image, ELR, 5)
    assert records[1] == PartitionChange("t", 0, 5, (5,), 2, elr=(4,), last_known_elr=(4,))


def test_the_single_last_known_elr_member_recovers_the_partition_uncleanly():
    image = image_of(
        RegisterBroker(4, 0, fenced=True),
        RegisterBroker(5, 1, fenced=True),
        PartitionChange("t", 0, -1, (), 3, replicas=(4, 5), last_known_elr=(4,)),
    )
    [_, change] = unfence_broker(image, ELR, 4)
    assert (change.leader, change.isr, change.recovering) == (4, (4,), True)


def test_unclean_election_takes_any_live_replica_only_when_enabled():
    image = cluster(isr=(4,)).apply(FenceBroker(4))
    offline = elect(image, ElectionConfig(), "t", 0, "auto")
    assert offline is not None and (offline.leader, offline.isr) == (-1, (4,))
    change = elect(image, ElectionConfig(), "t", 0, "unclean")
    assert change is not None and (change.leader, change.isr, change.recovering) == (5, (5,), True)
    on = ElectionConfig(unclean_leader_election=True)
    [change, _] = fence_broker(cluster(isr=(4,)), on, 4)
    assert (change.leader, change.recovering) == (5, True)


def test_preferred_election_moves_leadership_back_to_the_first_replica():
    image = cluster(leader=5)
    change = elect(image, ElectionConfig(), "t", 0, "preferred")
    assert change is not None and (change.leader, change.leader_epoch) == (4, 1)
    assert partition_change(image, ElectionConfig(), "t", 0, (4, 5, 6)) is None


def test_controlled_shutdown_moves_leadership_before_the_broker_leaves():
    records = controlled_shutdown(cluster(), ElectionConfig(), 4)
    assert records[0].leader == 5 and records[-1] == ControlledShutdown(4)
    image = cluster()
    for record in records:
        image = image.apply(record)
    assert not image.is_acceptable(4)
    assert image.apply(FenceBroker(4, fenced=False)).is_acceptable(4)


def test_the_controller_elects_from_the_elr_when_the_isr_is_empty():
    result = run_bundled("k13-elr-election")
    assert decisions(result)[-7:-3] == [
        "controller 1 fences broker 4",
        "controller 1: orders-0 leader -1 epoch 1 isr [] elr [4, 5]",
        "controller 1 unfences broker 5",
        "controller 1: orders-0 leader 5 epoch 2 isr [5] elr [4]",
    ]


def test_a_restart_after_an_unclean_shutdown_leaves_the_elr():
    result = run_bundled("k13-elr-election")
    assert decisions(result)[-3:-1] == [
        "controller 1 registers broker 4 (broker epoch 17, fenced)",
        "controller 1: orders-0 leader 5 epoch 2 isr [5]",
    ]


def test_an_unclean_election_lost_in_a_controller_failover_is_decided_again():
    result = run_bundled("k14-unclean-election-across-controller-failover")
    assert decisions(result)[-4:] == [
        "controller 1 fences broker 4",
        "controller 1: orders-0 leader 5 epoch 1 isr [5] (unclean election: RECOVERING)",
        "controller 3 fences broker 4",
        "controller 3: orders-0 leader 5 epoch 1 isr [5] (unclean election: RECOVERING)",
    ]


def test_a_committed_election_is_finished_by_the_new_controller_not_redone():
    result = run_bundled("k15-election-committed-then-controller-fails")
    assert decisions(result)[-2:] == [
        "controller 1 fences broker 4",
        "controller 1: orders-0 leader 5 epoch 1 isr [5]",
    ]
    before = result.timeline[8]["nodes"]
    assert before["5"]["hw"] < before["2"]["hw"]  # metadata lag: 5 still thinks 4 leads


def _decide_both(seed: int, config: ElectionConfig, steps: int = 40) -> list[str]:
    """Random broker events, elections and AlterPartitions decided by the data plane's
    Controller and by control.py on a metadata image; the differences found."""
    import random

    from replication.controller import RECOVERING, Controller
    from replication.partition import AlterPartitionRequest

    chooser = random.Random(seed)
    replicas = (1, 2, 3)
    reference = Controller(
        replicas,
        min_insync_replicas=config.min_insync_replicas,
        eligible_leader_replicas=config.eligible_leader_replicas,
        unclean_leader_election=config.unclean_leader_election,
    )
    image = image_of(
        *(RegisterBroker(b, b) for b in replicas),
        PartitionChange("t", 0, 1, replicas, 0, replicas),
    )
    for step in range(steps):
        op = chooser.choice(
            ["fence", "unfence", "shutdown", "auto", "preferred", "unclean", "alter"]
        )
        broker = chooser.choice(replicas)
        records: list = []
        if op == "fence":
            reference.fence(broker)
            records = fence_broker(image, config, broker)
        elif op == "unfence":
            reference.unfence(broker)
            records = unfence_broker(image, config, broker)
        elif op == "shutdown":
            reference.controlled_shutdown(broker)
            records = controlled_shutdown(image, config, broker)
        elif op != "alter":
            reference.elect(op)
            change = elect(image, config, "t", 0, op)
            records = [change] if change else []
        elif reference.registration.leader != -1:
            r = reference.registration
            isr = tuple(sorted({r.leader, *chooser.sample(replicas, chooser.randrange(3))}))
            request = AlterPartitionRequest(r.leader, r.leader_epoch, r.partition_epoch, isr, ())
            expected = reference.handle_alter_partition(request)
            error, change, _ = alter_partition(
                image, config, r.leader, "t", 0, isr,
                leader_epoch=r.leader_epoch, partition_epoch=r.partition_epoch,
            )  # fmt: skip
            if (expected in ("NONE", "NEW_LEADER_ELECTED")) != (error == NONE):
                return [f"seed {seed} step {step}: AlterPartition {expected} vs {error}"]
            records = [change] if change else []
        for record in records:
            image = image.apply(record)
        r, state = reference.registration, image.partition("t", 0)
        fenced = tuple(sorted(b for b, reg in reference.brokers.items() if reg.fenced))
        ours = (state.leader, state.isr, state.leader_epoch, state.elr, state.last_known_elr,
                state.recovering, state.partition_epoch, image.fenced)  # fmt: skip
        theirs = (r.leader, r.isr, r.leader_epoch, r.elr, r.last_known_elr,
                  r.leader_recovery_state == RECOVERING, r.partition_epoch, fenced)  # fmt: skip
        if ours != theirs:
            return [f"seed {seed} step {step} ({op} {broker}): {ours} vs {theirs}"]
    return []


@pytest.mark.parametrize(
    "config",
    [
        ElectionConfig(min_insync_replicas=2),
        ElectionConfig(min_insync_replicas=2, unclean_leader_election=True),
        ELR,
        ElectionConfig(
            min_insync_replicas=2, eligible_leader_replicas=True, unclean_leader_election=True
        ),
    ],
    ids=["clean", "unclean", "elr", "elr-unclean"],
)
def test_the_quorum_controller_decides_like_the_data_plane_controller(config):
    differences = [d for seed in range(150) for d in _decide_both(seed, config)]
    assert differences == []


# ----------------------------------------------------------------------- records


def test_new_record_fields_round_trip_and_old_values_read_the_same():
    for record in [
        RegisterBroker(4, 12, fenced=True),
        ControlledShutdown(4),
        PartitionChange("t", 0, 5, (5,), 3, (4, 5), (4,), (4,), True, 7),
        PartitionChange(
            "t", 1, 5, (5, 4), 0, (5, 6, 4), adding_replicas=(6,), removing_replicas=(4,)
        ),
    ]:
        assert decode_record(encode_record(record)) == record
    assert encode_record(RegisterBroker(4)) == b'{"broker_id":4,"type":"RegisterBroker"}'


def test_a_snapshot_keeps_broker_epochs_partition_epochs_and_the_elr():
    image = cluster(isr=(4, 5))
    for record in [*fence_broker(image, ELR, 5), ControlledShutdown(6)]:
        image = image.apply(record)
    image = image.apply(PartitionChange("t", 0, 4, (4,), 0, elr=(5,)))
    assert image.partition("t", 0).partition_epoch == 2
    store = MemoryStore()
    name = write_snapshot(store, SnapshotId(20, 2), image, voters=(1,), timestamp=0)
    assert read_snapshot(name, store.read(name)).image == image


# ----------------------------------------------------------------------- bad input

NODES = "{1: controller, 2: controller, 3: controller, 4: broker, 5: broker}"
LIVE = "broker_heartbeats: true"


@pytest.mark.parametrize(
    ("quorum_extra", "steps", "located"),
    [
        (LIVE, "[{heartbeat: {by: 1}}]", "step 0: heartbeat.by: only a node with the broker"),
        ("", "[{heartbeat: {by: 4}}]", "step 0: heartbeat: set quorum.broker_heartbeats"),
        (LIVE, "[{heartbeat: {by: 4, broker_epoch: -1}}]", "step 0: heartbeat.broker_epoch"),
        (LIVE, "[{heartbeat: {by: 4, epoch: 1}}]", "step 0: heartbeat: {by: BROKER}"),
        (
            "",
            "[{alter_partition: {by: 4, partition: t-0, isr: [4], broker_epochs: {5: 1}}}]",
            "step 0: alter_partition.broker_epochs: not in the requested ISR (got 5)",
        ),
        (
            "",
            "[{alter_partition: {by: 4, partition: t-0, isr: [4], broker_epochs: {4: x}}}]",
            "step 0: alter_partition.broker_epochs.4",
        ),
        (
            "",
            "[{propose: {topic: t, partition: 0, leader: 4, isr: [4, 5], leader_epoch: 0, "
            "replicas: [4]}}]",
            "step 0: propose.isr: the ISR must be among the replicas",
        ),
        ("elections: {min_insync_replicas: 0}", "[]", "quorum.elections.min_insync_replicas"),
        ("elections: {unclean: true}", "[]", "quorum.elections.unclean: unknown field"),
        ("elections: {eligible_leader_replicas: 1}", "[]", "quorum.elections.eligible_leader"),
    ],
)
def test_bad_broker_epoch_and_election_input_is_one_line_naming_step_and_field(
    tmp_path: Path, quorum_extra: str, steps: str, located: str
):
    extra = f", {quorum_extra}" if quorum_extra else ""
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"name: bad\nquorum: {{nodes: {NODES}, voters: [1, 2, 3]{extra}}}\nsteps: {steps}\n",
        encoding="utf-8",
    )
    outcome = CliRunner().invoke(app, ["replicate", str(path)])
    assert outcome.exit_code == 2, outcome.output
    assert located in outcome.output
    assert "Traceback" not in outcome.output


def test_combined_nodes_register_with_the_controller_they_run_and_again_after_a_restart():
    scenario = load_quorum_scenario(
        """
name: combined
quorum:
  nodes: {1: "broker,controller", 2: "broker,controller", 3: "broker,controller"}
  voters: [1, 2, 3]
  broker_heartbeats: {session_timeout_ms: 2000, heartbeat_interval_ms: 500}
steps:
  - {elect: 1}
  - {settle: 10}
  - {expect: {fenced: {2: []}, brokers: {2: [1, 2, 3]}, broker_epoch: {1: 1, 2: 2, 3: 3}}}
  - {crash: 1}
  - {settle: 60}
  - {restart: 1}
  - {settle: 20}
  - {expect: {fenced: {2: []}, broker_epochs: {3: {1: 9, 2: 2, 3: 3}}, violations: []}}
"""
    )
    result = run_quorum_scenario(scenario)
    assert result.expect_failures == ()
    assert decisions(result)[-3:] == [
        "controller 3 fences broker 1",
        "controller 3 registers broker 1 (broker epoch 9, fenced)",
        "controller 3 unfences broker 1",
    ]


def test_a_proposed_controlled_shutdown_makes_the_broker_unacceptable_until_unfenced():
    from replication.kraft.scenario import quorum_scenario_to_dict

    text = f"""
name: shutdown
quorum: {{nodes: {NODES}, voters: [1, 2, 3]}}
steps:
  - {{elect: 1}}
  - {{propose: {{broker: 4}}}}
  - {{propose: {{controlled_shutdown: 4}}}}
  - {{settle: 3}}
"""
    scenario = load_quorum_scenario(text)
    assert load_quorum_scenario(quorum_scenario_to_dict(scenario)) == scenario
    runner = _Runner(scenario)
    for index, step in enumerate(scenario.steps):
        runner.apply(index, step)
    image = runner.quorum.nodes[5].image
    assert image.shutting_down == (4,) and not image.is_acceptable(4)
    assert image.apply(FenceBroker(4, fenced=False)).is_acceptable(4)
