"""Two leader rules checked against Kafka's source, each with a worked scenario:

- KIP-903 (``current``): a caught-up follower outside the ISR holds the high watermark back only
  while it is ISR-eligible, and that includes the broker epoch of its last fetch being its
  current registration (``Partition.isReplicaIsrEligible`` / ``isBrokerEpochIsrEligible``,
  used by ``maybeIncrementLeaderHW`` and ``maybeExpandIsr``).
- A pending acks=all produce across a leader-epoch bump that keeps the leader: DelayedProduce
  (``tryComplete`` -> ``Partition.checkEnoughReplicasReachOffset``) has no leader-epoch check,
  and ``makeLeader`` keeps the followers' LEOs when the broker already led (0.11.0.0, 2.1.0 and
  trunk), so the request completes successfully once the HW passes it.
"""

from __future__ import annotations

from conftest import EXAMPLES

from replication.modes import MODE_NAMES, get_mode
from replication.partition import FollowerState, PartitionReplica
from replication.scenario import ScenarioConfig, Step, load_scenario
from replication.sim import Runner, run_scenario

SCENARIOS = EXAMPLES / "scenarios"


def leader_with_stale_follower(mode: str) -> PartitionReplica:
    """Leader 1 of (1, 2, 3), ISR {1, 2}; follower 3 outside the ISR fetched to the leader's end
    a moment ago with broker epoch 4, and has since registered again as broker epoch 7."""
    leader = PartitionReplica(1, (1, 2, 3), get_mode(mode))
    leader.eligible_brokers = frozenset({1, 2, 3})
    leader.broker_epochs = {1: 1, 2: 2, 3: 7}
    leader.become_leader(leader_epoch=1, partition_epoch=1, isr=(1, 2), now_ms=0)
    leader.log.append(1, "m1")
    leader.followers[2] = FollowerState(log_end_offset=1, last_caught_up_time_ms=0, broker_epoch=2)
    leader.followers[3] = FollowerState(log_end_offset=1, last_caught_up_time_ms=0, broker_epoch=4)
    leader.maybe_increment_high_watermark(0)
    leader.log.append(1, "m2")
    leader.followers[2].log_end_offset = 2
    return leader


def test_kip903_caught_up_follower_with_stale_broker_epoch_does_not_hold_hw() -> None:
    leader = leader_with_stale_follower("current")
    assert leader.log.high_watermark == 1
    assert leader.maybe_increment_high_watermark(now_ms=1000)
    assert leader.log.high_watermark == 2


def test_kip903_caught_up_follower_with_current_broker_epoch_still_holds_hw() -> None:
    leader = leader_with_stale_follower("current")
    leader.followers[3].broker_epoch = 7  # it fetched since it registered
    assert not leader.maybe_increment_high_watermark(now_ms=1000)
    assert leader.log.high_watermark == 1


def test_kip903_fetch_without_broker_epoch_skips_the_check() -> None:
    # isBrokerEpochIsrEligible: a stored epoch of -1 (older fetch versions) is eligible
    leader = leader_with_stale_follower("current")
    leader.followers[3].broker_epoch = -1
    assert not leader.maybe_increment_high_watermark(now_ms=1000)


def test_zookeeper_era_modes_have_no_broker_epoch_check() -> None:
    for mode in ("pre-0.11", "kip-101", "kip-279"):
        leader = leader_with_stale_follower(mode)
        assert not leader.maybe_increment_high_watermark(now_ms=1000), mode
        assert leader.is_isr_eligible(3), mode


def test_kip903_stale_broker_epoch_keeps_a_follower_out_of_a_pending_expand() -> None:
    leader = leader_with_stale_follower("current")
    leader.followers[3].log_end_offset = 2
    assert leader.maybe_expand_isr(3) is None
    leader.followers[3].broker_epoch = 7
    request = leader.maybe_expand_isr(3)
    assert request is not None and request.broker_epochs == ((2, 2), (3, 7))


def test_s9_restarted_follower_stops_holding_the_hw_in_current_only() -> None:
    scenario = load_scenario(SCENARIOS / "s9-restarted-follower-holds-hw.yaml")
    for mode in MODE_NAMES:
        result = run_scenario(scenario, mode)
        assert result.expect_failures == (), (mode, result.expect_failures)
        assert result.violations == (), mode
    # the step right after broker 2 has m2: acknowledged at once only under KIP-903
    timeline = run_scenario(scenario, "current").timeline
    fetched = [entry for entry in timeline if entry.op == "fetch 2"]
    assert "m2" in fetched[-2].acked
    older = run_scenario(scenario, "kip-279").timeline
    assert "m2" not in [entry for entry in older if entry.op == "fetch 2"][-2].acked


def test_same_leader_epoch_bump_keeps_the_followers_log_end_offsets() -> None:
    leader = PartitionReplica(1, (1, 2, 3), get_mode("kip-101"))
    leader.become_leader(leader_epoch=0, partition_epoch=0, isr=(1, 2, 3), now_ms=0)
    leader.followers[2].log_end_offset = 5
    leader.become_leader(leader_epoch=1, partition_epoch=1, isr=(1, 2), now_ms=10)
    assert leader.leader_epoch == 1
    assert leader.followers[2].log_end_offset == 5


def test_s10_pending_acks_all_produce_completes_across_a_same_leader_epoch_bump() -> None:
    scenario = load_scenario(SCENARIOS / "s10-epoch-bump-keeps-pending-produce.yaml")
    for mode in MODE_NAMES:
        result = run_scenario(scenario, mode)
        assert result.expect_failures == (), (mode, result.expect_failures)
        assert dict(result.final.results)["m1"] == "ok", mode
        assert result.final.leader == 1
    # the older modes' controller bumped the epoch; current does not for an ISR change
    assert run_scenario(scenario, "kip-279").final.leader_epoch == 1
    assert run_scenario(scenario, "current").final.leader_epoch == 0


def test_pending_acks_all_produce_still_fails_when_the_leader_moves() -> None:
    config = ScenarioConfig(brokers=(1, 2, 3), replicas=(1, 2, 3))
    for mode in MODE_NAMES:
        runner = Runner(config, get_mode(mode))
        runner.step(Step("produce", "m1", (("acks", "all"),)))
        runner.step(Step("elect", 2))
        results = dict(runner.cluster.state().results)
        assert results["m1"] == "NOT_LEADER_OR_FOLLOWER", mode
