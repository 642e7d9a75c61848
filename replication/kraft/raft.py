"""One node of the KRaft quorum: the state machine of ``KafkaRaftClient`` and ``QuorumState``.

A node is a voter (a controller in the current voter set) or an observer (a broker, or a
controller not yet added). Its states follow Kafka's ``EpochState`` classes: ``unattached``
(knows no leader in its epoch; may have voted), ``prospective`` (KIP-996 pre-vote),
``candidate``, ``leader``, ``follower``. What survives a crash is what Kafka keeps on disk: the
quorum-state file (epoch, voted-for), the flushed log and the snapshot files.

The rules, each a switch of :class:`RaftRules` so that an explorer can turn one off:

- ``vote_log_check``: a voter grants a vote (or pre-vote) only to a candidate whose log
  (last epoch, end offset) is at least as up to date as its own (``canGrantVote``);
- ``pre_vote``: a voter that times out first asks for pre-votes without bumping its epoch
  (``ProspectiveState``), and a voter that still hears from a leader refuses them;
- ``check_quorum``: a leader that has not been fetched from by a majority of voters within
  1.5 x ``controller.quorum.fetch.timeout.ms`` resigns
  (``LeaderState.timeUntilCheckQuorumExpires``);
- ``count_observers``: OFF in Kafka; on, observers' fetch offsets count toward the majority that
  moves the high watermark (a bug to explore);
- ``flush_before_ack``: the leader counts only its flushed offset, and a follower flushes what it
  fetched before its next fetch acknowledges it;
- ``epoch_start_commit``: the high watermark moves only past the leader's epoch start offset
  (the leader commits an entry of its own epoch first, ``maybeUpdateHighWatermark``);
- ``one_voter_change``: KIP-853 refuses an AddVoter/RemoveVoter while another change is not
  committed.

A three-voter election, by hand: node 1 times out, asks for pre-votes, becomes candidate in
epoch 1 and wins with node 2's vote.

>>> from replication.kraft.snapshot import MemoryStore
>>> nodes = {i: RaftNode(i, (1, 2, 3), seed=0) for i in (1, 2, 3)}
>>> out = nodes[1].start_election(now=0)
>>> [(dst, type(m).__name__, m.pre_vote) for dst, m in out]
[(2, 'VoteRequest', True), (3, 'VoteRequest', True)]
>>> reply = nodes[2].handle(1, out[0][1], now=0)
>>> out = nodes[1].handle(2, reply[0][1], now=0)
>>> nodes[1].role, nodes[1].epoch, [type(m).__name__ for _, m in out]
('candidate', 1, ['VoteRequest', 'VoteRequest'])
>>> out = nodes[1].handle(2, nodes[2].handle(1, out[0][1], now=0)[0][1], now=0)
>>> nodes[1].role, nodes[1].epoch, [(dst, type(m).__name__) for dst, m in out]
('leader', 1, [(2, 'BeginQuorumEpoch'), (3, 'BeginQuorumEpoch')])
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

from replication.errors import ReplicationError
from replication.kraft.records import (
    Entry,
    LeaderChange,
    MetadataImage,
    MetadataRecord,
    VotersChange,
)
from replication.kraft.snapshot import (
    MemoryStore,
    SnapshotError,
    SnapshotId,
    SnapshotStore,
    delete_snapshots_before,
    latest_valid_snapshot,
    read_snapshot,
    snapshot_name,
    write_snapshot,
)
from replication.raft_rules import is_majority, log_at_least, majority_high_watermark

__all__ = [
    "BeginQuorumEpoch",
    "BeginQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Message",
    "RaftConfig",
    "RaftNode",
    "RaftRules",
    "VoteRequest",
    "VoteResponse",
    "VoterChangeError",
]


class VoterChangeError(ReplicationError):
    """An AddVoter/RemoveVoter (KIP-853) the leader refuses."""


@dataclass(frozen=True, slots=True)
class RaftRules:
    """The protocol's safety rules, all on as Kafka runs them (see the module docstring)."""

    vote_log_check: bool = True
    pre_vote: bool = True
    check_quorum: bool = True
    count_observers: bool = False
    flush_before_ack: bool = True
    epoch_start_commit: bool = True
    one_voter_change: bool = True


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timeouts in simulated milliseconds (Kafka's defaults) and the fetch size in entries."""

    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 500  # resend an unanswered fetch, vote or BeginQuorumEpoch
    max_fetch_entries: int = 16


# --- messages (Kafka's RPCs, reduced to the fields the protocol decides on) ----------------


class VoteRequest(NamedTuple):
    epoch: int  # the candidate's epoch (for a pre-vote: its epoch + 1, not yet taken)
    candidate: int
    last_epoch: int
    end_offset: int
    pre_vote: bool


class VoteResponse(NamedTuple):
    epoch: int
    voter: int
    granted: bool
    leader: int | None
    pre_vote: bool


class BeginQuorumEpoch(NamedTuple):
    epoch: int
    leader: int


class BeginQuorumEpochResponse(NamedTuple):
    epoch: int
    voter: int


class FetchRequest(NamedTuple):
    epoch: int
    replica: int
    fetch_offset: int
    last_fetched_epoch: int
    request_id: int


class FetchResponse(NamedTuple):
    """``kind``: ``records`` (``entries`` from ``fetch_offset``), ``diverging`` (truncate to
    ``diverging``), ``snapshot`` (fetch ``snapshot_id``), ``not_leader`` (``leader`` /
    ``epoch`` say who is)."""

    epoch: int
    leader: int | None
    request_id: int
    kind: str
    fetch_offset: int
    entries: tuple[Entry, ...]
    high_watermark: int
    diverging: SnapshotId | None
    snapshot_id: SnapshotId | None


class FetchSnapshotRequest(NamedTuple):
    epoch: int
    replica: int
    snapshot_id: SnapshotId


class FetchSnapshotResponse(NamedTuple):
    epoch: int
    leader: int
    snapshot_id: SnapshotId
    data: bytes | None  # None: SNAPSHOT_NOT_FOUND


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpoch
    | BeginQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)
Outbox = list[tuple[int, Message]]

UNATTACHED, PROSPECTIVE, CANDIDATE, LEADER, FOLLOWER = (
    "unattached",
    "prospective",
    "candidate",
    "leader",
    "follower",
)


class RaftNode:
    """One controller or broker. ``handle`` and ``tick`` return the messages to send."""

    def __init__(
        self,
        node_id: int,
        static_voters: tuple[int, ...],
        *,
        seed: int,
        rules: RaftRules | None = None,
        config: RaftConfig | None = None,
        store: SnapshotStore | None = None,
        controller: bool = True,
    ) -> None:
        self.node_id = node_id
        self.static_voters = tuple(sorted(static_voters))
        self.controller = controller
        self.rules = rules or RaftRules()
        self.config = config or RaftConfig()
        self.random = random.Random(f"{seed}:{node_id}")
        self.store: SnapshotStore = store if store is not None else MemoryStore()
        # durable: quorum-state file, flushed log, snapshots
        self.epoch = 0
        self.voted_for: int | None = None
        self.known_leader: int | None = None  # the quorum-state file's leaderId
        self.entries: list[Entry] = []
        self.log_start = 0
        self.start_epoch = 0  # epoch of the snapshot at log_start (0: none)
        self.base_voters = self.static_voters
        self.voter_changes: list[tuple[int, tuple[int, ...]]] = []
        self.now = 0
        self.flushed_end = 0
        self.latest_snapshot: SnapshotId | None = None
        self.incarnation = 0
        self.skipped_snapshots: list[SnapshotError] = []
        self._volatile(now=0)
        self.snapshot_image = MetadataImage.empty()
        self.image = MetadataImage.empty()
        self.applied_offset = 0

    # --- state that a crash loses --------------------------------------------------------
    def _volatile(self, now: int) -> None:
        self.role = UNATTACHED
        self.leader_id: int | None = None
        self.high_watermark = self.log_start
        self.granted: set[int] = set()
        self.rejected: set[int] = set()
        self.election_deadline = now + self._election_timeout()
        self.fetch_deadline = now + self.config.fetch_timeout_ms
        self.fetch_in_flight: int | None = None
        self.fetch_sent_at = 0
        self.leader_contact_ms: int | None = None  # last successful fetch from the leader
        self.next_request_id = 0
        self.fetch_snapshot_in_flight = False
        # leader state
        self.replica_end: dict[int, int] = {}
        self.last_fetch_ms: dict[int, int] = {}
        self.epoch_start_offset = 0
        self.begin_unacked: dict[int, int] = {}
        self.vote_sent_at = now

    def _election_timeout(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self.random.randrange(timeout)

    # --- log -----------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return self.log_start + len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self.start_epoch

    @property
    def voters(self) -> tuple[int, ...]:
        """The voter set: the last ``VotersChange`` in the log, committed or not (KIP-853)."""
        return self.voter_changes[-1][1] if self.voter_changes else self.base_voters

    @property
    def is_voter(self) -> bool:
        return self.controller and self.node_id in self.voters

    def entry_at(self, offset: int) -> Entry:
        return self.entries[offset - self.log_start]

    def end_offset_for_epoch(self, epoch: int) -> SnapshotId:
        """(largest epoch <= ``epoch`` in the log, offset where it ends): the leader epoch cache's
        ``endOffsetFor``. Below the log start it answers the snapshot id."""
        if epoch >= self.last_epoch:
            return SnapshotId(self.end_offset, self.last_epoch)
        end = self.end_offset
        for index in range(len(self.entries) - 1, -1, -1):
            entry_epoch = self.entries[index].epoch
            if entry_epoch <= epoch:
                return SnapshotId(end, entry_epoch)
            end = self.log_start + index
        return SnapshotId(self.log_start, self.start_epoch)

    def _append(self, entry: Entry) -> None:
        if isinstance(entry.payload, VotersChange):
            self.voter_changes.append((self.end_offset, entry.payload.voters))
        self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop entries at and above ``offset`` (a diverging follower; never below log start)."""
        offset = max(offset, self.log_start)
        if offset >= self.end_offset:
            return
        del self.entries[offset - self.log_start :]
        while self.voter_changes and self.voter_changes[-1][0] >= offset:
            self.voter_changes.pop()
        self.flushed_end = min(self.flushed_end, offset)
        if self.high_watermark > offset:
            # Kafka refuses to truncate below the HW; reachable only with a rule switched off.
            self.high_watermark = offset
        if self.applied_offset > offset:
            self.image = self.snapshot_image
            self.applied_offset = self.log_start
            self._apply_to(self.high_watermark)

    def _flush(self) -> None:
        self.flushed_end = self.end_offset

    def _apply_to(self, offset: int) -> None:
        image = self.image
        for index in range(self.applied_offset - self.log_start, offset - self.log_start):
            image = image.apply(self.entries[index].payload)
        self.image = image
        self.applied_offset = max(self.applied_offset, offset)

    def _set_high_watermark(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            self._apply_to(offset)

    # --- transitions -----------------------------------------------------------------------
    def _persist_epoch(self, epoch: int, voted_for: int | None) -> None:
        if epoch != self.epoch:
            self.known_leader = None
        self.epoch = epoch
        self.voted_for = voted_for

    def _become_unattached(self, epoch: int, now: int, leader: int | None = None) -> None:
        if epoch > self.epoch:
            self._persist_epoch(epoch, None)
        self.role = UNATTACHED
        self.leader_id = None
        self.granted, self.rejected = set(), set()
        self.election_deadline = now + self._election_timeout()
        if leader is not None and leader != self.node_id:
            self._become_follower(epoch, leader, now)

    def _become_follower(self, epoch: int, leader: int, now: int) -> None:
        if epoch > self.epoch:
            self._persist_epoch(epoch, None)
        self.role = FOLLOWER
        self.leader_id = leader
        self.known_leader = leader
        self.granted, self.rejected = set(), set()
        self.fetch_deadline = now + self.config.fetch_timeout_ms
        self.fetch_in_flight = None
        self.leader_contact_ms = None

    def _observe_epoch(self, epoch: int, leader: int | None, now: int) -> None:
        """React to a message from a newer epoch, or one naming this epoch's leader."""
        if epoch > self.epoch:
            self._become_unattached(epoch, now, leader)
        elif (
            epoch == self.epoch
            and leader is not None
            and leader != self.node_id
            and self.role != FOLLOWER
            and self.role != LEADER
        ):
            self._become_follower(epoch, leader, now)

    def start_election(self, now: int) -> Outbox:
        """An election timeout: a pre-vote (KIP-996) or straight to candidate."""
        if not self.is_voter:
            return []
        if self.rules.pre_vote:
            self.role = PROSPECTIVE
            self.granted, self.rejected = {self.node_id}, set()
            self.election_deadline = now + self._election_timeout()
            self.vote_sent_at = now
            if self._majority(self.granted):
                return self._become_candidate(now)
            return self._vote_requests(self.epoch + 1, pre_vote=True)
        return self._become_candidate(now)

    def _become_candidate(self, now: int) -> Outbox:
        self._persist_epoch(self.epoch + 1, self.node_id)
        self.role = CANDIDATE
        self.leader_id = None
        self.granted, self.rejected = {self.node_id}, set()
        self.election_deadline = now + self._election_timeout()
        self.vote_sent_at = now
        if self._majority(self.granted):
            return self._become_leader(now)
        return self._vote_requests(self.epoch, pre_vote=False)

    def _vote_requests(self, epoch: int, *, pre_vote: bool) -> Outbox:
        request = VoteRequest(epoch, self.node_id, self.last_epoch, self.end_offset, pre_vote)
        return [(v, request) for v in self.voters if v != self.node_id]

    def _majority(self, ids: set[int]) -> bool:
        voters = self.voters
        return is_majority(sum(1 for v in voters if v in ids), len(voters))

    def _become_leader(self, now: int) -> Outbox:
        self.role = LEADER
        self.leader_id = self.node_id
        self.known_leader = self.node_id
        self.epoch_start_offset = self.end_offset
        self.replica_end = {}
        self.last_fetch_ms = {v: now for v in self.voters}
        self._append(Entry(self.epoch, LeaderChange(self.node_id, self.voters)))
        self.begin_unacked = {v: now for v in self.voters if v != self.node_id}
        self._maybe_advance_high_watermark()
        begin = BeginQuorumEpoch(self.epoch, self.node_id)
        return [(v, begin) for v in self.begin_unacked]

    # --- client operations (leader only) -----------------------------------------------------
    def propose(self, record: MetadataRecord) -> int:
        """Append a metadata record at the leader; returns its offset (not yet committed)."""
        if self.role != LEADER:
            raise ReplicationError(f"node {self.node_id} is not the leader (role {self.role})")
        offset = self.end_offset
        self._append(Entry(self.epoch, record))
        return offset

    def change_voters(self, voters: tuple[int, ...]) -> int:
        """KIP-853 AddVoter/RemoveVoter at the leader: append a ``VotersChange``."""
        if self.role != LEADER:
            raise VoterChangeError(f"node {self.node_id} is not the leader (role {self.role})")
        if self.rules.one_voter_change:
            pending = [o for o, _ in self.voter_changes if o >= self.high_watermark]
            if pending:
                raise VoterChangeError(
                    f"a voter change is pending at offset {pending[-1]} (high watermark "
                    f"{self.high_watermark}); one change at a time"
                )
            if self.high_watermark <= self.epoch_start_offset:
                raise VoterChangeError(
                    f"leader {self.node_id} has not committed an entry of epoch {self.epoch} yet"
                )
            if len(set(voters) ^ set(self.voters)) != 1:
                raise VoterChangeError(
                    f"voters {sorted(voters)} differ from {list(self.voters)} by more than one"
                )
        if not voters:
            raise VoterChangeError("the voter set cannot be empty")
        offset = self.end_offset
        self._append(Entry(self.epoch, VotersChange(tuple(sorted(voters)))))
        self.last_fetch_ms.update({v: self.last_fetch_ms.get(v, 0) for v in voters})
        self._maybe_advance_high_watermark()
        return offset

    def _maybe_advance_high_watermark(self) -> None:
        voters = self.voters
        own = self.flushed_end if self.rules.flush_before_ack else self.end_offset
        offsets = [own if v == self.node_id else self.replica_end.get(v, 0) for v in voters]
        if self.rules.count_observers:
            # the bug explored: observers join the list, the index stays half the voters
            offsets += [o for r, o in self.replica_end.items() if r not in voters]
            candidate = sorted(offsets, reverse=True)[len(voters) // 2]
        else:
            candidate = majority_high_watermark(offsets)
        if self.rules.epoch_start_commit and candidate <= self.epoch_start_offset:
            return
        self._set_high_watermark(min(candidate, self.end_offset))
        removed_at = self.voter_changes[-1][0] if self.voter_changes else -1
        if self.node_id not in voters and self.high_watermark > removed_at:
            # Removed by a committed VotersChange: step down, as KIP-853's leader resigns.
            self._become_unattached(self.epoch, self.now)

    # --- snapshots -------------------------------------------------------------------------
    def take_snapshot(self, now: int, end_offset: int | None = None) -> SnapshotId | None:
        """Snapshot the applied image at the HW (or at ``end_offset``, at most the HW), move the
        log start there, delete older ones. None when there is nothing past the log start."""
        end = self.applied_offset if end_offset is None else end_offset
        if end > self.applied_offset:
            raise ReplicationError(
                f"node {self.node_id}'s snapshot would end at {end}, beyond its high "
                f"watermark {self.high_watermark}"
            )
        if end <= self.log_start:
            return None
        image = self.image
        if end < self.applied_offset:
            image = self.snapshot_image
            for index in range(end - self.log_start):
                image = image.apply(self.entries[index].payload)
        snapshot_id = SnapshotId(end, self.entry_at(end - 1).epoch)
        write_snapshot(self.store, snapshot_id, image, voters=self._voters_at(end), timestamp=now)
        self._truncate_prefix(snapshot_id, image)
        return snapshot_id

    def _voters_at(self, offset: int) -> tuple[int, ...]:
        found = self.base_voters
        for change_offset, voters in self.voter_changes:
            if change_offset < offset:
                found = voters
        return found

    def _truncate_prefix(self, snapshot_id: SnapshotId, image: MetadataImage) -> None:
        end = snapshot_id.end_offset
        self.base_voters = self._voters_at(end)
        self.voter_changes = [(o, v) for o, v in self.voter_changes if o >= end]
        if end >= self.end_offset:
            self.entries = []
        else:
            del self.entries[: end - self.log_start]
        self.log_start = end
        self.start_epoch = snapshot_id.epoch
        self.flushed_end = max(self.flushed_end, end)
        self.snapshot_image = image
        self.latest_snapshot = snapshot_id
        delete_snapshots_before(self.store, snapshot_id)

    # --- crash and restart -------------------------------------------------------------------
    def crash(self) -> None:
        """Lose what was never flushed, and every volatile state."""
        if self.flushed_end < self.end_offset:
            del self.entries[self.flushed_end - self.log_start :]
            while self.voter_changes and self.voter_changes[-1][0] >= self.flushed_end:
                self.voter_changes.pop()

    def restart(self, now: int) -> None:
        """Load the newest valid snapshot, keep the local log after it, then fetch."""
        self.incarnation += 1
        snapshot, self.skipped_snapshots = latest_valid_snapshot(self.store)
        image = MetadataImage.empty()
        if snapshot is not None:
            image = snapshot.image
            end = snapshot.snapshot_id.end_offset
            if end < self.log_start:
                # The newer snapshots that covered [end, log_start) are unreadable: the local
                # log cannot be replayed past the gap, so it is dropped and fetched again.
                self.entries = []
                self.voter_changes = []
                self.log_start = end
                self.flushed_end = end
            self.base_voters = snapshot.voters or self.base_voters
            self._truncate_prefix(snapshot.snapshot_id, image)
        elif self.log_start > 0:
            self.entries, self.voter_changes = [], []
            self.log_start, self.start_epoch, self.flushed_end = 0, 0, 0
            self.base_voters = self.static_voters
            self.latest_snapshot = None
        self.snapshot_image = image
        self.image = image
        self.applied_offset = self.log_start
        # The quorum-state file keeps the vote (a restarted node cannot vote twice in an epoch)
        # and the leader it followed, whom it fetches from again.
        self._volatile(now)
        if self.known_leader is not None and self.known_leader != self.node_id:
            self._become_follower(self.epoch, self.known_leader, now)

    # --- timers ------------------------------------------------------------------------------
    def tick(self, now: int) -> Outbox:
        self.now = now
        out: Outbox = []
        if not self.rules.flush_before_ack or self.role == LEADER:
            self._flush()
        role = self.role
        if role == LEADER:
            self._maybe_advance_high_watermark()
            if self.role != LEADER:
                return out
            if self.rules.check_quorum:
                limit = now - self.config.fetch_timeout_ms * 3 // 2
                heard = {v for v, at in self.last_fetch_ms.items() if at >= limit}
                heard.add(self.node_id)
                if not self._majority(heard):
                    self._become_unattached(self.epoch, now)  # its vote for itself stays
                    return out
            begin = BeginQuorumEpoch(self.epoch, self.node_id)
            for voter, sent in list(self.begin_unacked.items()):
                if now - sent >= self.config.request_timeout_ms:
                    self.begin_unacked[voter] = now
                    out.append((voter, begin))
            return out
        if role == FOLLOWER:
            if now >= self.fetch_deadline:
                if self.is_voter:
                    return self.start_election(now)
                self._become_unattached(self.epoch, now)
                return self._fetch(now)
            return self._fetch(now)
        if not self.is_voter:
            return self._fetch(now)
        if now >= self.election_deadline:
            if role == CANDIDATE and self.rules.pre_vote:
                return self.start_election(now)
            if role == CANDIDATE:
                return self._become_candidate(now)
            return self.start_election(now)
        if role in (CANDIDATE, PROSPECTIVE) and now - self.vote_sent_at >= (
            self.config.request_timeout_ms
        ):
            self.vote_sent_at = now
            epoch = self.epoch if role == CANDIDATE else self.epoch + 1
            return [
                (dst, m)
                for dst, m in self._vote_requests(epoch, pre_vote=role == PROSPECTIVE)
                if dst not in self.granted and dst not in self.rejected
            ]
        return out

    def _fetch(self, now: int) -> Outbox:
        if self.fetch_snapshot_in_flight and now - self.fetch_sent_at < (
            self.config.request_timeout_ms
        ):
            return []
        if self.fetch_in_flight is not None and now - self.fetch_sent_at < (
            self.config.request_timeout_ms
        ):
            return []
        target = self.leader_id
        if target is None:
            # An observer without a leader asks a random voter (Kafka's bootstrap servers).
            others = [v for v in self.voters if v != self.node_id]
            if not others:
                return []
            target = others[self.random.randrange(len(others))]
        self.fetch_snapshot_in_flight = False
        self.next_request_id += 1
        self.fetch_in_flight = self.next_request_id
        self.fetch_sent_at = now
        return [
            (
                target,
                FetchRequest(
                    self.epoch, self.node_id, self.end_offset, self.last_epoch, self.fetch_in_flight
                ),
            )
        ]

    # --- message handling --------------------------------------------------------------------
    def handle(self, src: int, message: Message, now: int) -> Outbox:
        self.now = now
        if isinstance(message, FetchRequest):
            return self._on_fetch(message, now)
        if isinstance(message, FetchResponse):
            return self._on_fetch_response(message, now)
        if isinstance(message, VoteRequest):
            return self._on_vote(message, now)
        if isinstance(message, VoteResponse):
            return self._on_vote_response(message, now)
        if isinstance(message, BeginQuorumEpoch):
            self._observe_epoch(message.epoch, message.leader, now)
            if message.epoch == self.epoch and self.role == FOLLOWER:
                reply = (src, BeginQuorumEpochResponse(self.epoch, self.node_id))
                return [reply, *self._fetch(now)]
            return []
        if isinstance(message, BeginQuorumEpochResponse):
            if self.role == LEADER and message.epoch == self.epoch:
                self.begin_unacked.pop(message.voter, None)
            return []
        if isinstance(message, FetchSnapshotRequest):
            return self._on_fetch_snapshot(message)
        return self._on_fetch_snapshot_response(message, now)

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        if not self.rules.vote_log_check:
            return True
        return log_at_least((last_epoch, end_offset), (self.last_epoch, self.end_offset))

    def _on_vote(self, request: VoteRequest, now: int) -> Outbox:
        if request.pre_vote:
            # A pre-vote changes nothing here; a voter still fetching from a live leader refuses.
            hears_leader = self.role == LEADER or (
                self.role == FOLLOWER
                and self.leader_contact_ms is not None
                and now - self.leader_contact_ms < self.config.fetch_timeout_ms
            )
            granted = (
                request.epoch >= self.epoch
                and not hears_leader
                and self._log_up_to_date(request.last_epoch, request.end_offset)
            )
            return [
                (
                    request.candidate,
                    VoteResponse(self.epoch, self.node_id, granted, self.leader_id, True),
                )
            ]
        if request.epoch > self.epoch:
            self._become_unattached(request.epoch, now)
        granted = False
        if (
            request.epoch == self.epoch
            and self.role in (UNATTACHED, PROSPECTIVE)
            and self.voted_for in (None, request.candidate)
            and self._log_up_to_date(request.last_epoch, request.end_offset)
        ):
            granted = True
            self.role = UNATTACHED
            self._persist_epoch(self.epoch, request.candidate)
            self.election_deadline = now + self._election_timeout()
        return [
            (
                request.candidate,
                VoteResponse(self.epoch, self.node_id, granted, self.leader_id, False),
            )
        ]

    def _on_vote_response(self, response: VoteResponse, now: int) -> Outbox:
        if response.epoch > self.epoch:
            self._become_unattached(response.epoch, now, response.leader)
            return []
        if response.pre_vote:
            if self.role != PROSPECTIVE:
                return []
            if (
                not response.granted  # a voter that refuses may still hear from a leader
                and response.epoch == self.epoch
                and response.leader is not None
                and response.leader != self.node_id
            ):
                self._become_follower(self.epoch, response.leader, now)
                return []
            (self.granted if response.granted else self.rejected).add(response.voter)
            if self._majority(self.granted):
                return self._become_candidate(now)
            if self._majority(self.rejected):
                self._become_unattached(self.epoch, now)
            return []
        if self.role != CANDIDATE or response.epoch != self.epoch:
            return []
        (self.granted if response.granted else self.rejected).add(response.voter)
        if self._majority(self.granted):
            return self._become_leader(now)
        return []

    def _on_fetch(self, request: FetchRequest, now: int) -> Outbox:
        replica = request.replica

        def reply(kind: str, **fields: object) -> Outbox:
            values: dict[str, object] = {
                "epoch": self.epoch,
                "leader": self.leader_id,
                "request_id": request.request_id,
                "kind": kind,
                "fetch_offset": request.fetch_offset,
                "entries": (),
                "high_watermark": self.high_watermark,
                "diverging": None,
                "snapshot_id": None,
            }
            values.update(fields)
            return [(replica, FetchResponse(**values))]  # type: ignore[arg-type]

        if self.role != LEADER or request.epoch > self.epoch:
            return reply("not_leader")
        if request.epoch < self.epoch:
            return reply("not_leader")  # FENCED_LEADER_EPOCH: the response names the leader
        self.last_fetch_ms[replica] = now
        self.begin_unacked.pop(replica, None)
        offset = request.fetch_offset
        if offset < self.log_start:
            return reply("snapshot", snapshot_id=self.latest_snapshot)
        if offset > 0:
            last_fetched_epoch = request.last_fetched_epoch
            found = self.end_offset_for_epoch(last_fetched_epoch)
            if found.epoch != last_fetched_epoch or found.end_offset < offset:
                if (
                    self.log_start > 0
                    and found.end_offset <= self.log_start
                    and found.epoch != last_fetched_epoch
                ):
                    # The divergence lies below the log start: only the snapshot can repair it.
                    return reply("snapshot", snapshot_id=self.latest_snapshot)
                return reply("diverging", diverging=found)
        self.replica_end[replica] = offset
        self._maybe_advance_high_watermark()
        if self.role != LEADER:
            return []
        start = offset - self.log_start
        entries = tuple(self.entries[start : start + self.config.max_fetch_entries])
        return reply("records", entries=entries)

    def _on_fetch_response(self, response: FetchResponse, now: int) -> Outbox:
        if response.request_id != self.fetch_in_flight:
            return []
        self.fetch_in_flight = None
        if response.kind == "not_leader":
            if response.epoch > self.epoch or (
                response.epoch == self.epoch and response.leader is not None
            ):
                self._observe_epoch(response.epoch, response.leader, now)
            elif self.role == FOLLOWER and not self.is_voter:
                self._become_unattached(self.epoch, now)
            return []
        if response.epoch > self.epoch:
            self._observe_epoch(response.epoch, response.leader, now)
        if response.epoch != self.epoch or response.leader is None:
            return []
        if self.role != FOLLOWER:
            self._become_follower(self.epoch, response.leader, now)
        self.fetch_deadline = now + self.config.fetch_timeout_ms
        self.leader_contact_ms = now
        if response.kind == "diverging":
            assert response.diverging is not None
            own = self.end_offset_for_epoch(response.diverging.epoch)
            self.truncate_to(min(own.end_offset, response.diverging.end_offset))
            return self._fetch(now)
        if response.kind == "snapshot":
            if response.snapshot_id is None:
                return []
            self.fetch_snapshot_in_flight = True
            self.fetch_sent_at = now
            return [
                (
                    response.leader,
                    FetchSnapshotRequest(self.epoch, self.node_id, response.snapshot_id),
                )
            ]
        if response.fetch_offset != self.end_offset:
            return []
        for entry in response.entries:
            self._append(entry)
        if self.rules.flush_before_ack:
            self._flush()
        self._set_high_watermark(min(response.high_watermark, self.end_offset))
        if response.entries:
            return self._fetch(now)
        return []

    def _on_fetch_snapshot(self, request: FetchSnapshotRequest) -> Outbox:
        if self.role != LEADER or request.epoch != self.epoch:
            return []
        name = snapshot_name(request.snapshot_id)
        data = self.store.read(name) if name in self.store.names() else None
        return [
            (
                request.replica,
                FetchSnapshotResponse(self.epoch, self.node_id, request.snapshot_id, data),
            )
        ]

    def _on_fetch_snapshot_response(self, response: FetchSnapshotResponse, now: int) -> Outbox:
        if not self.fetch_snapshot_in_flight or response.epoch != self.epoch:
            return []
        self.fetch_snapshot_in_flight = False
        if response.data is None:
            return self._fetch(now)
        name = snapshot_name(response.snapshot_id)
        try:
            snapshot = read_snapshot(name, response.data)
        except SnapshotError as error:
            self.skipped_snapshots.append(error)
            return self._fetch(now)
        self.store.write(name, response.data)
        self.entries, self.voter_changes = [], []
        self.log_start = self.flushed_end = response.snapshot_id.end_offset
        self.base_voters = snapshot.voters or self.base_voters
        self._truncate_prefix(response.snapshot_id, snapshot.image)
        self.image = snapshot.image
        self.applied_offset = self.log_start
        self.high_watermark = max(self.high_watermark, self.log_start)
        self.fetch_deadline = now + self.config.fetch_timeout_ms
        return self._fetch(now)
