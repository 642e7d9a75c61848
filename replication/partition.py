"""One broker's replica of a partition: the leader rules (HW over the maximal ISR, follower fetch
state, ISR expand/shrink, produce) and the follower rules (fetch, HW, truncation per mode).

The leader reads its HW *before* it learns the follower's new LEO from the fetch (R2.2), so a
follower hears that HW passed a record one round trip after the leader knew it:

>>> from replication.modes import get_mode
>>> leader = PartitionReplica(2, (2, 1), get_mode("current"))
>>> follower = PartitionReplica(1, (2, 1), get_mode("current"))
>>> leader.become_leader(leader_epoch=1, partition_epoch=1, isr=(2, 1), now_ms=0)
>>> follower.become_follower(leader_id=2, leader_epoch=1, partition_epoch=1)
>>> _ = leader.append_as_leader("m1", acks="all")
>>> for _ in range(2):
...     _ = follower.apply_fetch_response(leader.handle_fetch(follower.fetch_request(), 0))
...     print(leader.log.high_watermark, follower.log.high_watermark)
0 0
1 0
>>> follower.apply_fetch_response(leader.handle_fetch(follower.fetch_request(), 0))
'fetched 0 records'
>>> follower.log.high_watermark
1
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal

from replication.log import (
    NO_PRODUCER,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    LogRecord,
    ProducerFields,
    ReplicaLog,
)
from replication.modes import ProtocolMode
from replication.raft_rules import majority_high_watermark

Role = Literal["leader", "follower", "offline"]

NONE = "NONE"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
# not an error code: the batch was already in the log (Kafka answers success with its offset)
DUPLICATE = "DUPLICATE"
OK = "ok"
# "never": older than any simulated time, so a follower never heard from is not caught up
NEVER_MS = -(2**62)


@dataclass(slots=True)
class FollowerState:
    """What the leader knows about one follower (Kafka's Replica.ReplicaState)."""

    log_end_offset: int = UNDEFINED_OFFSET
    last_caught_up_time_ms: int = NEVER_MS
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = NEVER_MS
    broker_epoch: int = -1

    def update_on_fetch(
        self, fetch_offset: int, leader_log_end_offset: int, now_ms: int, broker_epoch: int
    ) -> None:
        """R1.2: lastCaughtUpTime is the latest time some fetch reached the leader LEO of then.

        >>> state = FollowerState(last_fetch_leader_log_end_offset=5, last_fetch_time_ms=100)
        >>> state.update_on_fetch(6, leader_log_end_offset=8, now_ms=200, broker_epoch=1)
        >>> state.last_caught_up_time_ms, state.last_fetch_leader_log_end_offset
        (100, 8)
        """
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_log_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = now_ms
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        """R1.3: at the leader's LEO, or reached some earlier leader LEO recently enough."""
        return (
            self.log_end_offset == leader_log_end_offset
            or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms
        )


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: str = NONE
    records: tuple[LogRecord, ...] = ()
    high_watermark: int = 0
    # DivergingEpoch{epoch, endOffset} when the follower's log has left the leader's (R4.3)
    diverging_epoch: tuple[int, int] | None = None
    leader_log_end_offset: int = 0
    leader_log_start_offset: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """A leader's proposed ISR (with the broker epochs it saw in fetches), one in flight."""

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PendingChange:
    """PendingExpand (``added``) or PendingShrink (``removed``) while AlterPartition is out."""

    request: AlterPartitionRequest
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    # why the leader proposed it, in words (the rule that fired), for the timeline
    reason: str = ""


@dataclass(slots=True)
class PartitionReplica:
    """The partition as one broker sees it: its log, its role and what it learned from metadata."""

    broker_id: int
    replicas: tuple[int, ...]
    mode: ProtocolMode
    log: ReplicaLog = field(default_factory=ReplicaLog)
    min_insync_replicas: int = 1
    lag_time_max_ms: int = 30000
    role: Role = "follower"
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    # leader only: committed ISR, pending AlterPartition, epoch start offset, follower states
    isr: tuple[int, ...] = ()
    pending: PendingChange | None = None
    # a pending change the controller refused for a reason that waits for new metadata
    pending_stuck: bool = False
    leader_epoch_start_offset: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # brokers the last metadata showed as ISR-eligible (unfenced, not shutting down) (R2.3)
    eligible_brokers: frozenset[int] = frozenset()
    # each broker's current registration (broker epoch) as the last metadata showed it (KIP-903)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    # follower only: must reconcile with the leader before fetching (R4.5)
    truncating: bool = False
    # when a list: every rule that changes this replica's LEO or HW appends one sentence saying
    # which rule fired (the timeline's explanations); None records nothing (the explorer)
    notes: list[str] | None = None

    def _note(self, text: str) -> None:
        if self.notes is not None:
            self.notes.append(text)

    def _rule(self) -> str:
        return f"({self.mode.name} rule)"

    # ---------------------------------------------------------------- transitions

    def become_leader(
        self, leader_epoch: int, partition_epoch: int, isr: Iterable[int], now_ms: int
    ) -> None:
        """R1.4: reset follower states, remember the epoch start, cache the epoch, try HW."""
        was_leader = self.role == "leader"
        isr = tuple(isr)
        new_epoch = not was_leader or leader_epoch != self.leader_epoch
        self.role = "leader"
        self.leader_id = self.broker_id
        self.truncating = False
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.pending = None
        self.pending_stuck = False
        if new_epoch:
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = self.log.log_end_offset
            if self.mode.cache_epoch_at_election:
                self.log.assign_epoch(leader_epoch, self.leader_epoch_start_offset)
            for replica_id in self.replicas:
                if replica_id == self.broker_id:
                    continue
                state = self.followers.get(replica_id) if was_leader else None
                if state is None:
                    state = FollowerState()
                    self.followers[replica_id] = state
                else:
                    state.last_fetch_leader_log_end_offset = self.leader_epoch_start_offset
                    state.last_fetch_time_ms = now_ms if replica_id in isr else NEVER_MS
                state.last_caught_up_time_ms = now_ms if replica_id in isr else NEVER_MS
        self.maybe_increment_high_watermark(now_ms)

    def become_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int) -> None:
        """Follow ``leader_id``; a new leader (or, from KAFKA-7164 on, any new epoch) means
        reconciling the log first (R4.5, R4.7)."""
        new_leader = self.role != "follower" or leader_id != self.leader_id
        new_epoch = self.role != "follower" or leader_epoch != self.leader_epoch
        self.role = "follower"
        self.leader_id = leader_id
        self.partition_epoch = partition_epoch
        self.isr = ()
        self.pending = None
        self.pending_stuck = False
        self.followers = {}
        if not new_epoch:
            return
        # after go_offline the epoch is -1: the first leader this incarnation hears of
        restarted = self.leader_epoch == -1
        self.leader_epoch = leader_epoch
        if not new_leader and not self.mode.reconcile_on_every_epoch:
            return
        truncation = self.mode.truncation
        before = self.log.log_end_offset
        if truncation == "high-watermark":
            self.log.truncate_to(self.log.high_watermark)
            self.truncating = False
        elif truncation == "diverging-epoch":
            # with an epoch cache the fetch itself detects divergence; without one, truncate to HW
            if self.log.latest_epoch == UNDEFINED_EPOCH:
                self.log.truncate_to(self.log.high_watermark)
            self.truncating = False
        else:
            self.truncating = True
        if self.notes is None:
            return
        occasion = (
            "on restart"
            if restarted
            else f"on following leader {leader_id} in epoch {leader_epoch}"
        )
        if self.truncating:
            self._note(
                f"replica {self.broker_id} will ask leader {leader_id} where its log ends "
                f"before fetching (OffsetsForLeaderEpoch) {occasion} {self._rule()}"
            )
        after = self.log.log_end_offset
        if after < before:
            dropped = f"offset {after}" if after == before - 1 else f"offsets {after}-{before - 1}"
            self._note(
                f"replica {self.broker_id} truncated to its high watermark "
                f"{self.log.high_watermark} {occasion}, dropping {dropped} {self._rule()}"
            )

    def update_committed_isr(self, isr: Iterable[int], partition_epoch: int, now_ms: int) -> None:
        """Same leader epoch, newer partition state from the controller: commit it."""
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending = None
        self.pending_stuck = False
        self.maybe_increment_high_watermark(now_ms)

    def update_assignment(self, replicas: tuple[int, ...]) -> None:
        """The controller changed the partition's replicas (a reassignment, KIP-455): a leader
        tracks an adding replica as a follower that has not fetched yet and forgets a removed
        one (``Partition.updateAssignmentAndIsr``)."""
        self.replicas = replicas
        if self.role != "leader":
            return
        for replica_id in replicas:
            if replica_id != self.broker_id and replica_id not in self.followers:
                self.followers[replica_id] = FollowerState()
        for replica_id in list(self.followers):
            if replica_id not in replicas:
                del self.followers[replica_id]

    def go_offline(self) -> None:
        """The process died: every volatile piece of state goes with it."""
        self.role = "offline"
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr = ()
        self.pending = None
        self.pending_stuck = False
        self.followers = {}
        self.truncating = False

    # ---------------------------------------------------------------- leader: HW and ISR

    def maximal_isr(self) -> tuple[int, ...]:
        """Committed ISR plus a pending addition (KIP-497); a pending removal still counts."""
        if self.pending is not None and self.pending.added and self.mode.maximal_isr:
            added = set(self.isr) | set(self.pending.added)
            return tuple(r for r in self.replicas if r in added)
        return self.isr

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """R1.5: HW moves to the lowest LEO over the maximal ISR and caught-up eligible
        followers, never down, and (in 3.7+ modes) not at all while the ISR is below min ISR."""
        if self.role != "leader":
            return False
        if self.mode.commit_rule == "majority":
            return self._majority_high_watermark()
        effective_min_isr = min(self.min_insync_replicas, len(self.replicas))
        if self.mode.strict_min_isr and len(self.isr) < effective_min_isr:
            return False
        leader_log_end_offset = self.log.log_end_offset
        new_high_watermark = leader_log_end_offset
        maximal = set(self.maximal_isr())
        for replica_id, state in self.followers.items():
            if state.log_end_offset >= new_high_watermark:
                continue
            counts = replica_id in maximal or (
                replica_id in self.eligible_brokers
                and state.is_caught_up(leader_log_end_offset, now_ms, self.lag_time_max_ms)
                and self.is_isr_eligible(replica_id)
            )
            if counts:
                new_high_watermark = state.log_end_offset
        if new_high_watermark > self.log.high_watermark:
            before = self.log.high_watermark
            self.log.update_high_watermark(new_high_watermark)
            if self.notes is not None:
                self._note(
                    f"leader {self.broker_id} HW {before} -> {new_high_watermark}: the lowest "
                    f"LEO over the ISR {{{', '.join(map(str, self.maximal_isr()))}}} and the "
                    "caught-up followers (R1.5)"
                )
            return True
        return False

    def _majority_high_watermark(self) -> bool:
        """The majority mode's HW: the offset a majority of the replicas holds (the leader's
        LEO and each follower's last fetch offset), never down; with ``epoch_start_commit``
        only once that passes the start of the leader's epoch.

        >>> from replication.modes import get_mode
        >>> leader = PartitionReplica(1, (1, 2, 3), get_mode("majority"))
        >>> leader.become_leader(leader_epoch=0, partition_epoch=0, isr=(1, 2, 3), now_ms=0)
        >>> _ = leader.append_as_leader("m1", acks="all"), leader.append_as_leader("m2", acks="all")
        >>> leader.followers[2].log_end_offset = 1  # follower 2 fetched m1; 3 nothing
        >>> leader.maybe_increment_high_watermark(0), leader.log.high_watermark
        (True, 1)
        """
        if self.mode.flush_before_ack:
            # the leader counts only what it flushed (KRaft): flush what it appended first
            self.log.flush()
        offsets = [
            self.log.log_end_offset
            if replica_id == self.broker_id
            else max(self.followers[replica_id].log_end_offset, 0)
            for replica_id in self.replicas
        ]
        candidate = majority_high_watermark(offsets)
        if self.mode.epoch_start_commit and candidate <= self.leader_epoch_start_offset:
            return False
        if candidate > self.log.high_watermark:
            self.log.update_high_watermark(candidate)
            return True
        return False

    def is_isr_eligible(self, replica_id: int) -> bool:
        """R2.3: unfenced and not shutting down as the last metadata showed; under KIP-903 also
        the broker epoch of the follower's last fetch is its current registration.

        >>> from replication.modes import get_mode
        >>> leader = PartitionReplica(1, (1, 2), get_mode("current"))
        >>> leader.eligible_brokers, leader.broker_epochs = frozenset({1, 2}), {1: 1, 2: 5}
        >>> leader.followers[2] = FollowerState(broker_epoch=4)  # fetched before a restart
        >>> leader.is_isr_eligible(2)
        False
        >>> leader.followers[2].broker_epoch = 5  # fetched since
        >>> leader.is_isr_eligible(2)
        True
        """
        if replica_id not in self.eligible_brokers:
            return False
        if not self.mode.broker_epoch_isr_check:
            return True
        state = self.followers.get(replica_id)
        if state is None:
            return False
        # a fetch without a broker epoch (-1, older request versions) skips the check
        return state.broker_epoch in (-1, self.broker_epochs.get(replica_id))

    def maybe_expand_isr(self, replica_id: int) -> AlterPartitionRequest | None:
        """R2.4: a follower at or past HW (and past the epoch start) joins, via PendingExpand."""
        if self.role != "leader" or self.pending is not None or replica_id in self.isr:
            return None
        if not self.is_isr_eligible(replica_id):
            return None
        state = self.followers[replica_id]
        if state.log_end_offset < self.log.high_watermark:
            return None
        if self.mode.leso_isr_join and state.log_end_offset < self.leader_epoch_start_offset:
            return None
        new_isr = tuple(r for r in self.replicas if r in self.isr or r == replica_id)
        request = self._alter_partition_request(new_isr)
        reason = (
            f"{replica_id} caught up: its LEO {state.log_end_offset} reached leader "
            f"{self.broker_id}'s high watermark {self.log.high_watermark}"
        )
        if self.mode.leso_isr_join:
            reason += f" and the epoch start offset {self.leader_epoch_start_offset}"
        self.pending = PendingChange(request, added=(replica_id,), reason=reason + " (R2.4)")
        return request

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionRequest | None:
        """R2.5: followers that are not caught up leave, via PendingShrink."""
        if self.role != "leader" or self.pending is not None:
            return None
        leader_log_end_offset = self.log.log_end_offset
        out_of_sync = tuple(
            r
            for r in self.isr
            if r != self.broker_id
            and not self.followers[r].is_caught_up(
                leader_log_end_offset, now_ms, self.lag_time_max_ms
            )
        )
        if not out_of_sync:
            return None
        new_isr = tuple(r for r in self.isr if r not in out_of_sync)
        request = self._alter_partition_request(new_isr)
        reason = (
            f"{', '.join(map(str, out_of_sync))} not caught up to leader {self.broker_id}'s LEO "
            f"{leader_log_end_offset} within "
            f"replica.lag.time.max.ms ({self.lag_time_max_ms} ms) (R2.5)"
        )
        self.pending = PendingChange(request, removed=out_of_sync, reason=reason)
        return request

    def handle_alter_partition_response(
        self,
        request: AlterPartitionRequest,
        error: str,
        isr: tuple[int, ...],
        partition_epoch: int,
        now_ms: int,
    ) -> None:
        """R2.6: commit on success, revert on an ineligible replica, otherwise wait for metadata."""
        if self.role != "leader" or self.pending is None or self.pending.request != request:
            return
        if error == NONE:
            self.isr = isr
            self.partition_epoch = partition_epoch
            self.pending = None
            self.maybe_increment_high_watermark(now_ms)
        elif error in ("INELIGIBLE_REPLICA", "OPERATION_NOT_ATTEMPTED"):
            self.pending = None
        else:
            self.pending_stuck = True

    def _alter_partition_request(self, new_isr: tuple[int, ...]) -> AlterPartitionRequest:
        broker_epochs = tuple(
            (r, self.followers[r].broker_epoch) for r in new_isr if r != self.broker_id
        )
        return AlterPartitionRequest(
            self.broker_id, self.leader_epoch, self.partition_epoch, new_isr, broker_epochs
        )

    # ---------------------------------------------------------------- leader: requests

    def append_as_leader(
        self,
        value: str,
        *,
        acks: str,
        now_ms: int = 0,
        producer: ProducerFields = NO_PRODUCER,
    ) -> tuple[str, int]:
        """R3.2-R3.3: (error, offset). acks=all checks the committed ISR against min ISR first.

        A batch of an idempotent producer is checked against what this replica's log holds of
        the producer id first: a retry of one of its last five batches is answered as
        ``DUPLICATE`` with the offset it has (nothing appended), an older producer epoch is
        ``INVALID_PRODUCER_EPOCH`` and a sequence that does not follow the last one is
        ``OUT_OF_ORDER_SEQUENCE_NUMBER`` (``producer_check``).
        """
        if self.role != "leader":
            return NOT_LEADER_OR_FOLLOWER, -1
        effective_min_isr = min(self.min_insync_replicas, len(self.replicas))
        if acks == "all" and self.mode.commit_rule == "isr" and len(self.isr) < effective_min_isr:
            return NOT_ENOUGH_REPLICAS, -1
        if producer.producer_id >= 0:
            error, offset = producer_check(self.log, producer)
            if error != NONE:
                return error, offset
        offset = self.log.append(self.leader_epoch, value, producer)
        self.maybe_increment_high_watermark(now_ms)
        return NONE, offset

    def produce_completion(self, required_offset: int) -> str | None:
        """R3.4: None while waiting; ok once HW covers the record (AFTER_APPEND if too few)."""
        if self.log.high_watermark < required_offset:
            return None
        if self.mode.commit_rule == "majority":
            return OK
        effective_min_isr = min(self.min_insync_replicas, len(self.replicas))
        if len(self.maximal_isr()) >= effective_min_isr:
            return OK
        return NOT_ENOUGH_REPLICAS_AFTER_APPEND

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """The leader's answer to OffsetsForLeaderEpoch / the fetch divergence check.

        KIP-101 answers only an offset (epoch -1); KIP-279 and later answer (epoch, offset).
        """
        if self.mode.truncation == "kip-101":
            return UNDEFINED_EPOCH, self.log.epoch_cache.start_offset_after(
                requested_epoch, self.log.log_end_offset
            )
        return self.log.epoch_cache.end_offset_for(requested_epoch, self.log.log_end_offset)

    def handle_fetch(self, request: FetchRequest, now_ms: int) -> FetchResponse:
        """One follower fetch on the leader: fencing, divergence, read, then state updates."""
        log = self.log
        if self.role != "leader":
            return FetchResponse(error=NOT_LEADER_OR_FOLLOWER)
        if self.mode.leader_epoch_fencing:
            if request.current_leader_epoch < self.leader_epoch:
                return FetchResponse(error=FENCED_LEADER_EPOCH)
            if request.current_leader_epoch > self.leader_epoch:
                return FetchResponse(error=UNKNOWN_LEADER_EPOCH)
        if request.replica_id not in self.followers:
            return FetchResponse(error=UNKNOWN_LEADER_EPOCH)
        checks_divergence = self.mode.truncation == "diverging-epoch"
        if checks_divergence and request.last_fetched_epoch != UNDEFINED_EPOCH:
            epoch, end_offset = log.epoch_cache.end_offset_for(
                request.last_fetched_epoch, log.log_end_offset
            )
            if epoch == UNDEFINED_EPOCH and end_offset == UNDEFINED_OFFSET:
                return self._out_of_range()
            if epoch < request.last_fetched_epoch or end_offset < request.fetch_offset:
                return FetchResponse(
                    diverging_epoch=(epoch, end_offset),
                    high_watermark=log.high_watermark,
                    leader_log_end_offset=log.log_end_offset,
                    leader_log_start_offset=log.log_start_offset,
                )
        if request.fetch_offset > log.log_end_offset or request.fetch_offset < log.log_start_offset:
            return self._out_of_range()
        # the HW in the response is read before this fetch moves the follower's LEO (R2.2)
        high_watermark_before = log.high_watermark
        records = tuple(log.read_from(request.fetch_offset))
        state = self.followers[request.replica_id]
        state.update_on_fetch(
            request.fetch_offset, log.log_end_offset, now_ms, request.broker_epoch
        )
        self.maybe_increment_high_watermark(now_ms)
        return FetchResponse(
            records=records,
            high_watermark=high_watermark_before,
            leader_log_end_offset=log.log_end_offset,
            leader_log_start_offset=log.log_start_offset,
        )

    def _out_of_range(self) -> FetchResponse:
        return FetchResponse(
            error=OFFSET_OUT_OF_RANGE,
            high_watermark=self.log.high_watermark,
            leader_log_end_offset=self.log.log_end_offset,
            leader_log_start_offset=self.log.log_start_offset,
        )

    # ---------------------------------------------------------------- follower

    def fetch_request(self, broker_epoch: int = -1) -> FetchRequest:
        return FetchRequest(
            replica_id=self.broker_id,
            fetch_offset=self.log.log_end_offset,
            last_fetched_epoch=self.log.latest_epoch,
            current_leader_epoch=self.leader_epoch,
            broker_epoch=broker_epoch,
        )

    def apply_fetch_response(self, response: FetchResponse) -> str:
        """Follower side of one fetch; returns what happened, for the timeline."""
        log = self.log
        if response.diverging_epoch is not None:
            epoch, end_offset = response.diverging_epoch
            target, _done = truncation_offset(log, epoch, end_offset)
            before = log.log_end_offset
            log.truncate_to(target)
            if log.log_end_offset < before:
                self._note(
                    f"replica {self.broker_id} truncated to {log.log_end_offset}: the leader "
                    f"said its log diverges where epoch {epoch} ends, at {end_offset} "
                    f"(DivergingEpoch in the fetch response) {self._rule()}"
                )
            return f"diverging({epoch}, {end_offset}): truncated to {log.log_end_offset}"
        if response.error == OFFSET_OUT_OF_RANGE:
            return self._handle_out_of_range(response)
        if response.error != NONE:
            return response.error
        for record in response.records:
            log.append_record(record)
        if self.mode.flush_before_ack and response.records:
            log.flush()
        before = log.high_watermark
        log.update_high_watermark(min(response.high_watermark, log.log_end_offset))
        if log.high_watermark != before and self.notes is not None:
            self._note(
                f"replica {self.broker_id} HW {before} -> {log.high_watermark}: the leader's "
                f"high watermark in the fetch response, capped at its own LEO (R2.2)"
            )
        # the leader's log start, unless it is past this replica's HW (Kafka refuses that)
        leader_start = response.leader_log_start_offset
        if log.log_start_offset < leader_start <= log.high_watermark:
            log.delete_below(leader_start)
        return f"fetched {len(response.records)} records"

    def _handle_out_of_range(self, response: FetchResponse) -> str:
        """R4.6: a leader shorter than us wins (the legacy unclean path)."""
        log = self.log
        if response.leader_log_end_offset < log.log_end_offset:
            log.truncate_to(response.leader_log_end_offset)
            self._note(
                f"replica {self.broker_id} truncated to the leader's shorter LEO "
                f"{log.log_end_offset} on OFFSET_OUT_OF_RANGE (R4.6, the legacy unclean path)"
            )
            return f"out of range: truncated to {log.log_end_offset}"
        if response.leader_log_start_offset > log.log_end_offset:
            log.truncate_fully_and_start_at(response.leader_log_start_offset)
            self._note(
                f"replica {self.broker_id} started its log over at the leader's log start "
                f"{log.log_start_offset}: it begins past this replica's LEO (R4.6)"
            )
            return f"out of range: log restarted at the leader's log start {log.log_start_offset}"
        return "out of range"

    def apply_epoch_answer(self, epoch: int, end_offset: int) -> tuple[str, bool]:
        """Truncate on an OffsetsForLeaderEpoch reply; (what happened, reconciled)."""
        log = self.log
        if self.mode.truncation == "kip-101":
            target = log.high_watermark if end_offset == UNDEFINED_OFFSET else end_offset
            target = min(target, log.log_end_offset)
            done = True
        else:
            target, done = truncation_offset(log, epoch, end_offset)
        before = log.log_end_offset
        log.truncate_to(target)
        if log.log_end_offset < before:
            answer = (
                f"epoch {epoch} ends at {end_offset}" if epoch != -1 else f"offset {end_offset}"
            )
            self._note(
                f"replica {self.broker_id} truncated to {log.log_end_offset}: the leader's "
                f"OffsetsForLeaderEpoch answer ({answer}) {self._rule()}"
            )
        if done:
            self.truncating = False
        return f"epoch answer ({epoch}, {end_offset}): truncated to {log.log_end_offset}", done

    def epoch_request(self) -> int:
        """The epoch a truncating follower asks about (its latest cached epoch)."""
        return self.log.latest_epoch


def truncation_offset(log: ReplicaLog, epoch: int, end_offset: int) -> tuple[int, bool]:
    """R4.4: where a follower truncates on DivergingEpoch(epoch, end_offset); True when done.

    >>> follower = ReplicaLog.from_records([(0, "a"), (2, "b"), (4, "c")])
    >>> truncation_offset(follower, 3, 2)  # no epoch 3 here: cut to where epoch 2 ends, go again
    (2, False)
    >>> truncation_offset(follower, 2, 2)  # epoch 2 known: min(own end, leader's end, LEO)
    (2, True)
    >>> truncation_offset(follower, -1, 1), truncation_offset(follower, 3, -1)
    ((1, True), (0, True))
    """
    log_end_offset = log.log_end_offset
    if end_offset == UNDEFINED_OFFSET:
        return log.high_watermark, True
    if epoch == UNDEFINED_EPOCH:
        return min(end_offset, log_end_offset), True
    own_epoch, own_end_offset = log.epoch_cache.end_offset_for(epoch, log_end_offset)
    if own_epoch == UNDEFINED_EPOCH and own_end_offset == UNDEFINED_OFFSET:
        return min(end_offset, log_end_offset), True
    if own_epoch != epoch:
        return min(own_end_offset, log_end_offset), False
    return min(own_end_offset, end_offset, log_end_offset), True


def producer_check(log: ReplicaLog, producer: ProducerFields) -> tuple[str, int]:
    """The broker's checks of a client batch against the producer state of ``log``:
    ``(NONE, -1)`` to append, ``(DUPLICATE, offset)`` or ``(error, -1)``.

    As trunk has them: ``UnifiedLog.analyzeAndValidateProducerState`` looks for a duplicate
    among the last five batches first (``ProducerStateEntry.findDuplicateBatch``), then
    ``ProducerAppendInfo.checkProducerEpoch`` and ``checkSequence``: a new epoch must start at
    sequence 0 unless the producer is unknown; in the same epoch the sequence must be the last
    one plus 1; a producer id the log holds nothing of (never seen, or its records truncated
    or removed) is accepted with any sequence.

    >>> from replication.log import ReplicaLog
    >>> log = ReplicaLog()
    >>> producer_check(log, ProducerFields(7, 0, 3))  # unknown producer: any sequence
    ('NONE', -1)
    >>> _ = log.append(0, "a", ProducerFields(7, 0, 0))
    >>> producer_check(log, ProducerFields(7, 0, 0)), producer_check(log, ProducerFields(7, 0, 2))
    (('DUPLICATE', 0), ('OUT_OF_ORDER_SEQUENCE_NUMBER', -1))
    >>> producer_check(log, ProducerFields(7, 1, 5)), producer_check(log, ProducerFields(7, 1, 0))
    (('OUT_OF_ORDER_SEQUENCE_NUMBER', -1), ('NONE', -1))
    """
    entry = log.producers.get(producer.producer_id)
    if entry is None:
        return NONE, -1
    duplicate = entry.duplicate_of(producer.producer_epoch, producer.base_sequence)
    if duplicate is not None:
        return DUPLICATE, duplicate
    if producer.producer_epoch < entry.epoch:
        return INVALID_PRODUCER_EPOCH, -1
    if producer.producer_epoch != entry.epoch:
        if producer.base_sequence != 0:
            return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
    elif producer.base_sequence != entry.last_sequence + 1:
        return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
    return NONE, -1


def ordered(broker_ids: Collection[int], assignment: tuple[int, ...]) -> tuple[int, ...]:
    """``broker_ids`` in assignment order (how ktk prints every ISR and ELR)."""
    return tuple(r for r in assignment if r in broker_ids)
