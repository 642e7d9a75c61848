"""Each KRaft invariant catches the state it forbids (replication/kraft/invariants.py): a quorum
is run to a healthy state, one node is damaged by hand, and the checker names the damage."""

from __future__ import annotations

from replication.kraft.quorum import Quorum
from replication.kraft.records import Entry, MetadataImage, RegisterBroker
from replication.kraft.snapshot import SnapshotId, write_snapshot


def healthy() -> Quorum:
    quorum = Quorum.static(voters=(1, 2, 3), seed=11)
    quorum.elect(candidate=1)
    for broker in (1, 2, 3):
        quorum.propose(RegisterBroker(broker))
    quorum.settle()
    assert quorum.violations == []
    return quorum


def check(quorum: Quorum) -> list[str]:
    return [v.invariant for v in quorum.checker.check(quorum.nodes, quorum.up, quorum.step + 1)]


def test_two_leaders_in_one_epoch_break_election_safety():
    quorum = healthy()
    quorum.nodes[2].role = "leader"
    assert "ElectionSafety" in check(quorum)


def test_a_leader_dropping_an_entry_breaks_leader_append_only():
    quorum = healthy()
    quorum.nodes[1].entries.pop()
    assert "LeaderAppendOnly" in check(quorum)


def test_a_rewritten_entry_below_a_matching_one_breaks_log_matching():
    quorum = healthy()
    node = quorum.nodes[3]
    # Rewritten below, and the tail written again: the same epoch at the end, other entries below.
    node.entries[1] = Entry(node.entries[1].epoch, RegisterBroker(99))
    node.entries[-1] = Entry(*node.entries[-1])
    assert "LogMatching" in check(quorum)


def test_a_leader_missing_a_committed_entry_breaks_leader_completeness():
    quorum = healthy()
    leader = quorum.nodes[1]
    leader.entries[2] = Entry(leader.entries[2].epoch, RegisterBroker(42))
    leader.entries[-1] = Entry(*leader.entries[-1])  # the log written again from offset 2
    quorum.checker.leader_checked.clear()
    assert "LeaderCompleteness" in check(quorum)


def test_a_node_applying_another_entry_breaks_state_machine_safety():
    quorum = healthy()
    quorum.crash(2)
    node = quorum.nodes[2]
    node.entries[3] = Entry(node.entries[3].epoch, RegisterBroker(77))
    quorum.restart(2)
    quorum.settle()
    assert any(v.invariant == "StateMachineSafety" for v in quorum.violations)


def test_a_high_watermark_going_down_breaks_monotonic_high_watermark():
    quorum = healthy()
    quorum.nodes[2].high_watermark -= 1
    assert "MonotonicHighWatermark" in check(quorum)


def test_a_leader_moving_its_high_watermark_alone_breaks_majority_high_watermark():
    quorum = healthy()
    leader = quorum.nodes[1]
    leader.propose(RegisterBroker(9))
    leader.tick(quorum.now)  # flushed on the leader only
    leader.high_watermark += 1
    assert "MajorityHighWatermark" in check(quorum)


def test_a_snapshot_that_differs_from_the_replayed_log_breaks_snapshot_consistency():
    quorum = healthy()
    node = quorum.nodes[3]
    wrong = MetadataImage.empty().apply(RegisterBroker(5))
    snapshot_id = SnapshotId(node.high_watermark, node.epoch)
    write_snapshot(node.store, snapshot_id, wrong, voters=(1, 2, 3), timestamp=0)
    node.latest_snapshot = snapshot_id
    assert "SnapshotConsistency" in check(quorum)
