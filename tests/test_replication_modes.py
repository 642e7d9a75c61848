"""Protocol modes as switch sets, and the leader, follower and controller rules they govern:
HW over the maximal ISR (R1.5), lastCaughtUpTime (R1.2-R1.3), ISR expand/shrink (R2.4-R2.5),
produce with min ISR (R3), AlterPartition (R2.6) and elections (R5)."""

from __future__ import annotations

import pytest

from replication.controller import RECOVERING, Controller
from replication.errors import InputError
from replication.log import EpochEntry, ReplicaLog
from replication.modes import MODE_NAMES, get_mode
from replication.partition import (
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    OK,
    FollowerState,
    PartitionReplica,
)

# ---------------------------------------------------------------------------- modes


def test_modes_are_listed_oldest_first() -> None:
    assert MODE_NAMES == ("pre-0.11", "kip-101", "kip-279", "current")


@pytest.mark.parametrize(
    ("name", "truncation", "epoch_at_election", "fencing", "strict_min_isr", "leso"),
    [
        ("pre-0.11", "high-watermark", False, False, False, False),
        ("kip-101", "kip-101", False, False, False, False),
        ("kip-279", "kip-279", True, False, False, True),
        ("current", "diverging-epoch", True, True, True, True),
    ],
)
def test_each_mode_is_an_explicit_switch_set(
    name: str,
    truncation: str,
    epoch_at_election: bool,
    fencing: bool,
    strict_min_isr: bool,
    leso: bool,
) -> None:
    mode = get_mode(name)
    assert mode.truncation == truncation
    assert mode.cache_epoch_at_election is epoch_at_election
    assert mode.leader_epoch_fencing is fencing
    assert mode.strict_min_isr is strict_min_isr
    assert mode.leso_isr_join is leso
    assert mode.maximal_isr is True
    assert mode.eligible_leader_replicas is False


def test_unknown_mode_is_an_input_error_naming_the_field() -> None:
    with pytest.raises(InputError, match=r"mode: unknown mode.*got '0\.10'"):
        get_mode("0.10")


def test_switches_turn_off_maximal_isr_and_leso_rule() -> None:
    mode = get_mode("current").with_switches(maximal_isr=False, leso_isr_join=False)
    assert (mode.maximal_isr, mode.leso_isr_join) == (False, False)
    assert get_mode("current").maximal_isr is True


def test_eligible_leader_replicas_only_in_current_mode() -> None:
    assert get_mode("current").with_switches(eligible_leader_replicas=True).eligible_leader_replicas
    with pytest.raises(InputError, match="eligible_leader_replicas"):
        get_mode("kip-279").with_switches(eligible_leader_replicas=True)


def test_unknown_switch_is_rejected() -> None:
    with pytest.raises(InputError, match="unknown protocol switch"):
        get_mode("current").with_switches(fast=True)


# ---------------------------------------------------------------------------- leader rules


def leader_of(
    mode_name: str = "current",
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] = (1, 2, 3),
    min_isr: int = 1,
    records: int = 0,
    **switches: bool,
) -> PartitionReplica:
    mode = get_mode(mode_name).with_switches(**switches)
    log = ReplicaLog.from_records([(0, f"m{i}") for i in range(records)])
    leader = PartitionReplica(1, replicas, mode, log=log, min_insync_replicas=min_isr)
    leader.eligible_brokers = frozenset(replicas)
    leader.become_leader(1, 1, isr, now_ms=0)
    return leader


def fetch(leader: PartitionReplica, replica_id: int, offset: int, now_ms: int = 0) -> None:
    follower = PartitionReplica(replica_id, leader.replicas, leader.mode)
    follower.log = ReplicaLog(leader.log.records[:offset])
    follower.leader_epoch = leader.leader_epoch
    response = leader.handle_fetch(follower.fetch_request(), now_ms)
    assert response.error == NONE and response.diverging_epoch is None


def test_new_leader_cannot_advance_hw_until_isr_members_fetch() -> None:
    leader = leader_of(records=3)
    assert leader.log.high_watermark == 0
    fetch(leader, 2, 3)
    assert leader.log.high_watermark == 0
    fetch(leader, 3, 2)
    assert leader.log.high_watermark == 2


def test_hw_is_frozen_below_min_isr_only_in_current_mode() -> None:
    for mode_name, expected in (("current", 0), ("kip-279", 2)):
        leader = leader_of(mode_name, isr=(1,), min_isr=2, records=2)
        assert leader.log.high_watermark == expected


def test_pending_expansion_holds_hw_only_with_maximal_isr() -> None:
    for maximal, expected_hw in ((True, 0), (False, 2)):
        leader = leader_of(isr=(1, 2), records=0, maximal_isr=maximal)
        fetch(leader, 3, 0, now_ms=0)
        assert leader.maybe_expand_isr(3) is not None
        assert leader.maximal_isr() == ((1, 2, 3) if maximal else (1, 2))
        leader.log.append(1, "a")
        leader.log.append(1, "b")
        # 3 last caught up at t=0; at t=40 s it is no longer "caught up" on its own
        fetch(leader, 2, 2, now_ms=40_000)
        assert leader.log.high_watermark == expected_hw


def test_caught_up_follower_outside_isr_holds_hw() -> None:
    leader = leader_of(isr=(1, 2), records=0)
    fetch(leader, 3, 0, now_ms=0)
    leader.log.append(1, "a")
    fetch(leader, 2, 1, now_ms=1000)
    assert leader.log.high_watermark == 0
    fetch(leader, 2, 1, now_ms=31_000)
    assert leader.log.high_watermark == 1


def test_follower_joins_isr_only_past_leader_epoch_start_offset() -> None:
    for leso_rule, joins in ((True, False), (False, True)):
        leader = leader_of(isr=(1, 2), records=3, leso_isr_join=leso_rule)
        leader.log.update_high_watermark(1)
        fetch(leader, 3, 1)
        assert (leader.maybe_expand_isr(3) is not None) is joins


def test_follower_below_hw_does_not_join_isr() -> None:
    leader = leader_of(isr=(1, 2), records=0)
    leader.log.append(1, "a")
    leader.log.append(1, "b")
    fetch(leader, 2, 2)
    fetch(leader, 2, 2)
    assert leader.log.high_watermark == 2
    fetch(leader, 3, 1)
    assert leader.maybe_expand_isr(3) is None


def test_only_one_alter_partition_in_flight() -> None:
    leader = leader_of(isr=(1,), records=0)
    fetch(leader, 2, 0)
    fetch(leader, 3, 0)
    assert leader.maybe_expand_isr(2) is not None
    assert leader.maybe_expand_isr(3) is None
    assert leader.maybe_shrink_isr(now_ms=100_000) is None


def test_shrink_removes_lagging_followers_but_not_those_at_log_end() -> None:
    leader = leader_of(records=0, isr=(1, 2, 3))
    fetch(leader, 2, 0, now_ms=0)
    fetch(leader, 3, 0, now_ms=0)
    assert leader.maybe_shrink_isr(now_ms=45_000) is None
    leader.log.append(1, "a")
    fetch(leader, 2, 1, now_ms=40_000)
    request = leader.maybe_shrink_isr(now_ms=45_000)
    assert request is not None and request.new_isr == (1, 2)
    # a pending shrink still counts the old ISR for HW
    assert leader.maximal_isr() == (1, 2, 3)


def test_last_caught_up_time_follows_r1_2() -> None:
    state = FollowerState()
    state.update_on_fetch(5, leader_log_end_offset=5, now_ms=100, broker_epoch=1)
    assert state.last_caught_up_time_ms == 100
    state.update_on_fetch(5, leader_log_end_offset=8, now_ms=200, broker_epoch=1)
    assert state.last_caught_up_time_ms == 100
    # reached the LEO the leader had at the previous fetch (5 -> 8): caught up as of then
    state.update_on_fetch(8, leader_log_end_offset=10, now_ms=300, broker_epoch=1)
    assert state.last_caught_up_time_ms == 200
    assert state.is_caught_up(10, now_ms=30_200, lag_time_max_ms=30_000)
    assert not state.is_caught_up(10, now_ms=30_201, lag_time_max_ms=30_000)


def test_acks_all_is_refused_below_min_isr_before_append() -> None:
    leader = leader_of(isr=(1,), min_isr=2)
    assert leader.append_as_leader("m", acks="all") == (NOT_ENOUGH_REPLICAS, -1)
    assert leader.log.log_end_offset == 0
    assert leader.append_as_leader("m", acks="1") == (NONE, 0)


def test_acks_all_completes_after_append_with_too_small_isr_before_strict_min_isr() -> None:
    leader = leader_of("kip-279", isr=(1, 2), min_isr=2)
    error, offset = leader.append_as_leader("m", acks="all")
    assert error == NONE
    assert leader.produce_completion(offset + 1) is None
    leader.update_committed_isr((1,), 2, now_ms=40_000)
    assert leader.produce_completion(offset + 1) == NOT_ENOUGH_REPLICAS_AFTER_APPEND
    other = leader_of("kip-279", isr=(1,), min_isr=1)
    _, offset = other.append_as_leader("m", acks="all")
    assert other.produce_completion(offset + 1) == OK


def test_new_leader_caches_its_epoch_at_election_from_kip_279_on() -> None:
    for mode_name, expected in (
        ("kip-101", (EpochEntry(0, 0),)),
        ("kip-279", (EpochEntry(0, 0), EpochEntry(1, 2))),
    ):
        assert leader_of(mode_name, records=2).log.epoch_cache.entries == expected


def test_pre_0_11_follower_truncates_to_high_watermark_on_new_epoch() -> None:
    mode = get_mode("pre-0.11")
    follower = PartitionReplica(2, (1, 2), mode, log=ReplicaLog.from_records([(0, "a"), (0, "b")]))
    follower.log.update_high_watermark(1)
    follower.become_follower(1, 3, 1)
    assert follower.log.values() == ["a"]


def test_current_follower_keeps_its_log_on_new_epoch() -> None:
    follower = PartitionReplica(
        2, (1, 2), get_mode("current"), log=ReplicaLog.from_records([(0, "a"), (0, "b")])
    )
    follower.become_follower(1, 3, 1)
    assert follower.log.values() == ["a", "b"] and not follower.truncating


def test_fencing_refuses_stale_and_future_epochs_in_current_mode() -> None:
    leader = leader_of(records=1)
    follower = PartitionReplica(2, leader.replicas, leader.mode)
    follower.leader_epoch = 0
    assert leader.handle_fetch(follower.fetch_request(), 0).error == "FENCED_LEADER_EPOCH"
    follower.leader_epoch = 2
    assert leader.handle_fetch(follower.fetch_request(), 0).error == "UNKNOWN_LEADER_EPOCH"


# ---------------------------------------------------------------------------- controller


def test_clean_election_takes_first_isr_member_in_assignment_order() -> None:
    controller = Controller((3, 1, 2), min_insync_replicas=1)
    controller.fence(3)
    assert (controller.registration.leader, controller.registration.leader_epoch) == (1, 1)


def test_isr_expansion_never_bumps_leader_epoch_but_bumps_partition_epoch() -> None:
    controller = Controller((1, 2, 3))
    controller.fence(3)
    controller.unfence(3)
    before = controller.registration
    leader_state = leader_of(isr=before.isr)
    leader_state.become_leader(before.leader_epoch, before.partition_epoch, before.isr, 0)
    request = leader_state._alter_partition_request((1, 2, 3))
    assert controller.handle_alter_partition(request) == NONE
    after = controller.registration
    assert after.isr == (1, 2, 3)
    assert after.leader_epoch == before.leader_epoch
    assert after.partition_epoch == before.partition_epoch + 1


def test_zookeeper_era_controller_bumps_leader_epoch_on_isr_removal() -> None:
    controller = Controller((1, 2, 3), bump_epoch_on_isr_change=True)
    controller.fence(3)
    assert controller.registration.leader == 1
    assert controller.registration.leader_epoch == 1


def test_alter_partition_checks_in_order() -> None:
    controller = Controller((1, 2, 3))
    replica = leader_of()
    replica.leader_epoch, replica.partition_epoch = 0, 0
    stale = replica._alter_partition_request((1, 2))
    controller.fence(3)
    assert controller.handle_alter_partition(stale) == "INVALID_UPDATE_VERSION"
    replica.partition_epoch = controller.registration.partition_epoch
    assert controller.handle_alter_partition(replica._alter_partition_request((1, 3))) == (
        "INELIGIBLE_REPLICA"
    )
    assert controller.handle_alter_partition(replica._alter_partition_request((2, 3))) == (
        "INVALID_REQUEST"
    )
    replica.leader_epoch = 5
    assert controller.handle_alter_partition(replica._alter_partition_request((1,))) == (
        "NOT_CONTROLLER"
    )


def test_unclean_election_forces_isr_to_new_leader_and_marks_recovering() -> None:
    controller = Controller((1, 2, 3), unclean_leader_election=True)
    controller.fence(3)
    controller.unfence(3)  # 3 is back but not in the ISR
    controller.fence(1)
    controller.fence(2)
    registration = controller.registration
    assert (registration.leader, registration.isr) == (3, (3,))
    assert registration.leader_recovery_state == RECOVERING
    assert controller.unclean_elections == 1


def test_preferred_election_moves_leadership_to_first_replica() -> None:
    controller = Controller((1, 2, 3))
    controller.fence(1)
    controller.unfence(1)
    assert controller.registration.leader == 2
    assert controller.elect("preferred").changed is False  # 1 is not back in the ISR yet
    controller.registration = controller.registration.__class__(
        **{**_as_dict(controller.registration), "isr": (1, 2, 3)}
    )
    assert controller.elect("preferred").changed is True
    assert controller.registration.leader == 1


def _as_dict(registration: object) -> dict[str, object]:
    return {name: getattr(registration, name) for name in registration.__slots__}  # type: ignore[attr-defined]


def test_elr_keeps_removed_members_eligible_below_min_isr() -> None:
    controller = Controller((1, 2, 3), min_insync_replicas=2, eligible_leader_replicas=True)
    controller.fence(3)
    assert controller.registration.elr == ()
    controller.fence(2)
    assert (controller.registration.isr, controller.registration.elr) == ((1,), (2,))
    controller.fence(1)
    registration = controller.registration
    assert registration.isr == ()
    assert registration.last_known_elr == (1,)
    controller.unfence(2)
    registration = controller.registration
    assert (registration.leader, registration.isr, registration.elr) == (2, (2,), (1,))


def test_restart_removes_broker_from_isr_and_elr_with_elr_enabled() -> None:
    controller = Controller((1, 2, 3), min_insync_replicas=2, eligible_leader_replicas=True)
    controller.fence(3)
    controller.fence(2)
    controller.register(2)
    assert 2 not in controller.registration.elr
    assert 2 not in controller.registration.isr


def test_restart_keeps_broker_in_isr_without_elr() -> None:
    controller = Controller((1, 2, 3))
    controller.register(2)
    assert controller.registration.isr == (1, 2, 3)


def test_pre_0_11_follower_keeps_log_when_only_the_epoch_changes() -> None:
    follower = PartitionReplica(
        2,
        (1, 2),
        get_mode("pre-0.11"),
        log=ReplicaLog.from_records([(0, "a"), (0, "b")], high_watermark=2),
    )
    follower.become_follower(1, 1, 1)
    follower.log.update_high_watermark(1)
    # a ZooKeeper-era ISR change bumps the epoch but keeps the leader: no truncation (KAFKA-7164)
    follower.become_follower(1, 2, 2)
    assert follower.log.values() == ["a", "b"]
    assert follower.leader_epoch == 2
    follower.become_follower(3, 3, 3)
    assert follower.log.values() == ["a"]


def test_controlled_move_only_goes_to_an_isr_member() -> None:
    controller = Controller((1, 2, 3))
    controller.fence(1)
    controller.fence(2)
    controller.unfence(1)  # back, but not in the ISR {3}
    assert controller.elect(1).changed is False
    assert (controller.registration.leader, controller.registration.isr) == (3, (3,))
    assert controller.elect(3).changed is False
    controller.elect("unclean")  # an explicit unclean election is another matter
    assert controller.registration.leader == 3
