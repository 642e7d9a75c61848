"""Worked examples of the KRaft metadata quorum (replication/kraft): elections, truncation of a
returning leader, snapshots, FetchSnapshot, restart, corrupt snapshots, voter changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.errors import InputError
from replication.kraft.quorum import NodeSpec, Quorum, parse_process_roles, parse_quorum_voters
from replication.kraft.raft import (
    BeginQuorumEpoch,
    FetchResponse,
    FetchSnapshotRequest,
    VoterChangeError,
    VoteResponse,
)
from replication.kraft.records import RegisterBroker, TopicRecord, VotersChange
from replication.kraft.snapshot import (
    PARTITION_DIR,
    DirectoryStore,
    SnapshotError,
    SnapshotId,
    snapshot_bytes,
    snapshot_name,
)


def payloads(node):
    return [entry.payload for entry in node.entries]


def committed_everywhere(quorum, ids):
    images = {quorum.nodes[i].image for i in ids}
    return len(images) == 1


def test_election_of_the_seeds_refuses_a_stale_candidate_and_truncates_the_old_leader():
    quorum = Quorum.static(voters=(1, 2, 3), seed=0)
    quorum.keep_messages = True
    leader = quorum.elect(candidate=1)
    assert (leader.node_id, leader.epoch) == (1, 1)
    quorum.propose(RegisterBroker(1))
    quorum.settle()
    # Node 3 falls behind: only 1 and 2 hold the topic record, and two of three commit it.
    quorum.crash(3)
    offset = quorum.propose(TopicRecord("orders", 3))
    quorum.settle()
    assert leader.high_watermark == offset + 1 == quorum.nodes[2].high_watermark
    # The leader appends one more record that nobody fetches, flushes it, and crashes.
    quorum.cut_link(1, 2)
    quorum.propose(RegisterBroker(2))
    quorum.tick()
    assert leader.flushed_end == leader.end_offset
    quorum.crash(1)
    quorum.heal_link(1, 2)
    quorum.restart(3)
    # Node 3 (stale log) times out: node 2 refuses it, its log is ahead.
    quorum.timeout(3)
    quorum.deliver_all()
    refusals = [
        m for s, d, m in quorum.delivered if (s, d) == (2, 3) and isinstance(m, VoteResponse)
    ]
    assert refusals and not refusals[-1].granted
    assert quorum.leader() is None
    # Node 2 times out: node 3 grants it; two votes of three elect it in epoch 2.
    new_leader = quorum.elect(candidate=2)
    assert (new_leader.node_id, new_leader.epoch) == (2, 2)
    assert quorum.nodes[3].voted_for == 2 and quorum.nodes[3].leader_id == 2
    assert any(isinstance(m, BeginQuorumEpoch) and (s, d) == (2, 3) for s, d, m in quorum.delivered)
    # The old leader returns: it follows epoch 2, is told it diverges, and truncates.
    old = quorum.nodes[1]
    assert RegisterBroker(2) in payloads(old)
    quorum.restart(1)
    quorum.settle(ticks=8)
    assert old.role == "follower" and old.epoch == 2 and old.leader_id == 2
    diverging = [
        m
        for s, d, m in quorum.delivered
        if (s, d) == (2, 1) and isinstance(m, FetchResponse) and m.kind == "diverging"
    ]
    assert diverging
    assert RegisterBroker(2) not in payloads(old)
    assert payloads(old) == payloads(new_leader)
    assert old.image == new_leader.image == quorum.nodes[3].image
    assert old.image.topics == (("orders", 3),)
    assert quorum.violations == []


def test_a_majority_of_two_out_of_three_elects_and_commits():
    quorum = Quorum.static(voters=(1, 2, 3), seed=3)
    quorum.crash(3)
    leader = quorum.elect(candidate=1)
    assert leader.node_id == 1 and leader.granted == {1, 2}
    quorum.propose(RegisterBroker(5))
    quorum.settle()
    assert leader.high_watermark == leader.end_offset == 2
    assert quorum.nodes[2].image.brokers == (5,)
    assert quorum.violations == []


def test_a_voter_that_voted_in_an_epoch_refuses_a_second_candidate():
    quorum = Quorum.static(voters=(1, 2, 3), seed=0, rules=None)
    quorum.keep_messages = True
    node2 = quorum.nodes[2]
    node2.epoch, node2.voted_for = 4, 1
    from replication.kraft.raft import VoteRequest

    [(_, reply)] = node2.handle(3, VoteRequest(4, 3, 0, 0, False), now=0)
    assert reply == VoteResponse(4, 2, False, None, False)
    [(_, reply)] = node2.handle(1, VoteRequest(4, 1, 0, 0, False), now=0)
    assert reply.granted


def test_check_quorum_makes_a_cut_off_leader_resign():
    quorum = Quorum.static(voters=(1, 2, 3), seed=1)
    leader = quorum.elect(candidate=1)
    quorum.cut_link(1, 2)
    quorum.cut_link(1, 3)
    for _ in range(31):
        quorum.tick()
    assert leader.role != "leader"
    new_leader = quorum.elect()
    assert new_leader.node_id != 1 and new_leader.epoch > 1
    assert quorum.violations == []


def test_snapshot_is_written_and_the_log_truncated(tmp_path: Path):
    stores = {i: DirectoryStore(tmp_path / str(i) / PARTITION_DIR) for i in (1, 2, 3)}
    quorum = Quorum.static(voters=(1, 2, 3), seed=2, stores=stores)
    leader = quorum.elect(candidate=1)
    for broker in (1, 2, 3):
        quorum.propose(RegisterBroker(broker))
    quorum.settle()
    first = quorum.snapshot(1)
    assert first == SnapshotId(leader.high_watermark, 1)
    assert leader.log_start == first.end_offset and leader.entries == []
    assert [p.name for p in stores[1].path.iterdir()] == [snapshot_name(first)]
    quorum.propose(TopicRecord("orders", 6))
    quorum.settle()
    second = quorum.snapshot(1)
    assert second is not None and second.end_offset == first.end_offset + 1
    # The older snapshot is deleted once the newer one is in place.
    assert [p.name for p in stores[1].path.iterdir()] == [snapshot_name(second)]
    assert snapshot_name(second) == "00000000000000000005-00000000000000000001.checkpoint"
    assert quorum.violations == []


def test_a_lagging_broker_catches_up_through_fetch_snapshot():
    quorum = Quorum.static(voters=(1, 2, 3), brokers=(4,), seed=5)
    quorum.keep_messages = True
    quorum.crash(4)
    leader = quorum.elect(candidate=1)
    for broker in (1, 2, 3, 4):
        quorum.propose(RegisterBroker(broker))
    quorum.settle()
    snapshot_id = quorum.snapshot(1)
    assert snapshot_id is not None and leader.log_start == snapshot_id.end_offset
    quorum.propose(TopicRecord("payments", 2))
    quorum.settle()
    quorum.restart(4)
    quorum.settle(ticks=10)
    broker = quorum.nodes[4]
    assert any(
        isinstance(m, FetchSnapshotRequest) and s == 4 and m.snapshot_id == snapshot_id
        for s, _, m in quorum.delivered
    )
    assert snapshot_name(snapshot_id) in broker.store.names()
    assert broker.log_start == snapshot_id.end_offset
    assert broker.image == leader.image
    assert broker.image.topics == (("payments", 2),)
    assert not broker.is_voter
    assert quorum.violations == []


def test_restart_loads_the_snapshot_then_the_local_log():
    quorum = Quorum.static(voters=(1, 2, 3), seed=4)
    leader = quorum.elect(candidate=1)
    for broker in (1, 2):
        quorum.propose(RegisterBroker(broker))
    quorum.settle()
    snapshot_id = quorum.snapshot(2)
    assert snapshot_id is not None
    quorum.propose(TopicRecord("orders", 1))
    quorum.settle()
    node = quorum.nodes[2]
    end = node.end_offset
    quorum.crash(2)
    quorum.restart(2)
    assert node.log_start == snapshot_id.end_offset and node.end_offset == end
    assert node.image.brokers == (1, 2) and node.image.topics == ()
    quorum.settle()
    assert node.image == leader.image and node.image.topics == (("orders", 1),)
    assert quorum.violations == []


def test_a_corrupt_newest_snapshot_is_skipped_for_an_older_one():
    quorum = Quorum.static(voters=(1, 2, 3), seed=6)
    leader = quorum.elect(candidate=1)
    quorum.propose(RegisterBroker(1))
    quorum.settle()
    older = quorum.snapshot(3)
    assert older is not None
    quorum.propose(RegisterBroker(2))
    quorum.propose(RegisterBroker(3))
    quorum.settle()
    node = quorum.nodes[3]
    # A newer snapshot whose bytes were damaged on disk (one byte flipped) and a partial one.
    newer = SnapshotId(node.high_watermark, node.epoch)
    data = bytearray(snapshot_bytes(newer, node.image, voters=(1, 2, 3), timestamp=0))
    data[-5] ^= 0xFF
    node.store.write(snapshot_name(newer), bytes(data))
    partial = SnapshotId(node.high_watermark - 1, node.epoch)
    whole = snapshot_bytes(partial, node.image, voters=(1, 2, 3), timestamp=0)
    node.store.write(snapshot_name(partial), whole[: len(whole) - 20])
    quorum.crash(3)
    quorum.restart(3)
    assert node.log_start == older.end_offset
    assert [error.source for error in node.skipped_snapshots] == [
        snapshot_name(newer),
        snapshot_name(partial),
    ]
    assert "crc" in str(node.skipped_snapshots[0]).lower()
    quorum.settle()
    assert node.image == leader.image and node.image.brokers == (1, 2, 3)
    assert quorum.violations == []


def test_dynamic_voters_add_one_at_a_time_and_refuse_a_second_pending_change():
    specs = [NodeSpec(i, frozenset({"controller"})) for i in (1, 2, 3, 4)]
    quorum = Quorum(specs, (1, 2, 3), seed=8)
    leader = quorum.elect(candidate=1)
    quorum.settle()
    assert not quorum.nodes[4].is_voter
    offset = quorum.add_voter(4)
    with pytest.raises(VoterChangeError, match="pending at offset"):
        quorum.remove_voter(2)
    quorum.settle()
    assert leader.high_watermark > offset
    assert leader.voters == (1, 2, 3, 4) and quorum.nodes[4].is_voter
    assert isinstance(quorum.nodes[4].entry_at(offset).payload, VotersChange)
    quorum.remove_voter(2)
    quorum.settle()
    assert leader.voters == (1, 3, 4) and not quorum.nodes[2].is_voter
    assert quorum.violations == []


def test_a_broker_cannot_become_a_voter():
    specs = [NodeSpec(i, frozenset({"controller"})) for i in (1, 2, 3)]
    specs.append(NodeSpec(4, parse_process_roles("broker", node_id=4)))
    quorum = Quorum(specs, (1, 2, 3), seed=0)
    quorum.elect(candidate=1)
    quorum.settle()
    with pytest.raises(InputError, match="only a controller"):
        quorum.add_voter(4)


def test_combined_mode_node_is_a_voter():
    roles = parse_process_roles("broker,controller", node_id=1)
    assert roles == frozenset({"broker", "controller"})
    specs = [NodeSpec(1, roles)]
    quorum = Quorum(specs, (1,), seed=0)
    leader = quorum.elect()
    assert leader.node_id == 1
    quorum.propose(RegisterBroker(1))
    quorum.settle()
    assert leader.image.brokers == (1,)


@pytest.mark.parametrize("text", ["", "zookeeper", "broker,broker", "controller,,x"])
def test_bad_process_roles_are_refused_naming_the_node(text):
    with pytest.raises(InputError, match=r"node 7: process\.roles"):
        parse_process_roles(text, node_id=7)


@pytest.mark.parametrize("text", ["1@a:9093,x@b:1", "1@a", "1@a:1,1@b:2"])
def test_bad_quorum_voters_are_refused(text):
    with pytest.raises(InputError, match=r"controller\.quorum\.voters"):
        parse_quorum_voters(text)


def test_a_voter_must_be_a_controller():
    specs = [NodeSpec(1, frozenset({"broker"}))]
    with pytest.raises(InputError, match="controller role"):
        Quorum(specs, (1,), seed=0)


def test_snapshot_errors_name_the_file():
    with pytest.raises(SnapshotError, match="not a snapshot file name"):
        from replication.kraft.snapshot import read_snapshot

        read_snapshot("x.checkpoint", b"")
