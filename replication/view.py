"""Read-only pictures of a running cluster and the typed records a run produces.

``ClusterView`` is what the invariants read after a step: the controller's partition record,
every replica's log as it is now, the active leader, what was committed and acknowledged, what
consumers read. It is a snapshot: nothing in it changes when the cluster moves on. The views are
NamedTuples because one is built after every step of every explored schedule (a frozen dataclass
costs several times more to construct; both are immutable).

``Violation``, ``TimelineEntry`` and ``ClusterState`` are the records of a run; each has a
``to_json()`` giving the fields of the result document (spec/replication.md).

>>> from replication.log import ReplicaLog
>>> log = ReplicaLog.from_records([(0, "m1"), (1, "m2")], high_watermark=1)
>>> replica = ReplicaView.of_log(2, log)
>>> replica.log_end_offset, replica.values(), replica.prefix(1)[0][:3]
(2, ['m1', 'm2'], (0, 0, 'm1'))
>>> replica.timeline_json()
{'leo': 2, 'hw': 1, 'epoch': -1, 'online': True}
>>> Violation("StrongIsr", 8, "replica 1 lacks offset 1").to_json()
{'invariant': 'StrongIsr', 'step': 8, 'detail': 'replica 1 lacks offset 1'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from replication.controller import PartitionRegistration
from replication.log import EpochEntry, LogRecord, ReplicaLog

if TYPE_CHECKING:
    from replication.checks import AnomalyFound

JsonValue: TypeAlias = (
    "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
)
# a JSON object being built (the result document, a report, a step in the file format)
JsonObject: TypeAlias = dict[str, JsonValue]


class ReplicaView(NamedTuple):
    """One replica as it is after a step: its log, HW, leader epoch and whether it runs."""

    broker_id: int
    records: tuple[LogRecord, ...]
    log_start_offset: int
    high_watermark: int
    leader_epoch: int
    epoch_cache: tuple[EpochEntry, ...]
    online: bool
    isolated: bool

    @classmethod
    def of_log(
        cls,
        broker_id: int,
        log: ReplicaLog,
        *,
        leader_epoch: int = -1,
        online: bool = True,
        isolated: bool = False,
    ) -> ReplicaView:
        return cls(
            broker_id,
            log.records,
            log.log_start_offset,
            log.high_watermark,
            leader_epoch,
            log.epoch_cache.entries,
            online,
            isolated,
        )

    @property
    def log_end_offset(self) -> int:
        return self.log_start_offset + len(self.records)

    def record_at(self, offset: int) -> LogRecord | None:
        index = offset - self.log_start_offset
        if 0 <= index < len(self.records):
            return self.records[index]
        return None

    def prefix(self, end_offset: int) -> tuple[LogRecord, ...]:
        """The records below ``end_offset``."""
        return self.records[: max(end_offset - self.log_start_offset, 0)]

    def values(self) -> list[str]:
        return [record.value for record in self.records]

    def to_json(self) -> JsonObject:
        """The replica in the result document's final ``replicas`` map."""
        return {
            "log": [[r.offset, r.leader_epoch, r.value] for r in self.records],
            "leo": self.log_end_offset,
            "hw": self.high_watermark,
            "epoch": self.leader_epoch,
            "epoch_cache": [[e.epoch, e.start_offset] for e in self.epoch_cache],
            "online": self.online,
            "isolated": self.isolated,
        }

    def timeline_json(self) -> JsonObject:
        """The replica in one timeline entry."""
        return {
            "leo": self.log_end_offset,
            "hw": self.high_watermark,
            "epoch": self.leader_epoch,
            "online": self.online,
        }


class LeaderView(NamedTuple):
    """The broker that leads right now (runs and leads in the controller's epoch)."""

    broker_id: int
    leader_epoch: int
    partition_epoch: int
    # an AlterPartition in flight
    pending: bool
    maximal_isr: tuple[int, ...]


class ConsumerView(NamedTuple):
    consumer_id: str
    # (offset, value) of every record read, in order
    records: tuple[tuple[int, str], ...]
    truncation_detected: bool


class ClusterView(NamedTuple):
    """The whole cluster after step ``step``, for the invariants."""

    step: int
    time_ms: int
    registration: PartitionRegistration
    # in assignment order
    replicas: tuple[ReplicaView, ...]
    leader: LeaderView | None
    # the leader's replica (None when no broker leads)
    leader_replica: ReplicaView | None
    # (offset, value) of every record a current leader ever had below its HW, by offset
    committed: tuple[tuple[int, str], ...]
    acked: tuple[str, ...]
    # the acks=all subset of ``acked``: what the protocol promises to keep
    acked_all: tuple[str, ...]
    consumers: tuple[ConsumerView, ...]
    lossy_shutdowns: int
    min_insync_replicas: int
    eligible_leader_replicas: bool
    # values a leader deleted by moving its log start (DeleteRecords, retention): gone on
    # purpose, so not lost
    deleted: frozenset[str] = frozenset()

    def replica(self, broker_id: int) -> ReplicaView:
        for replica in self.replicas:
            if replica.broker_id == broker_id:
                return replica
        raise KeyError(broker_id)


@dataclass(frozen=True, slots=True)
class Violation:
    """An invariant that started failing at ``step``, with the first problem found."""

    invariant: str
    step: int
    detail: str

    def to_json(self) -> JsonObject:
        return {"invariant": self.invariant, "step": self.step, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One executed step: what it did and the cluster right after it."""

    step: int
    op: str
    time_ms: int
    result: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[ReplicaView, ...]
    acked: tuple[str, ...]
    comment: str | None = None
    # one sentence per rule that changed a value in this step, as the simulator applied it
    changes: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        document: JsonObject = {
            "step": self.step,
            "op": self.op,
            "time_ms": self.time_ms,
            "result": self.result,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "replicas": {str(r.broker_id): r.timeline_json() for r in self.replicas},
            "acked": list(self.acked),
        }
        if self.comment is not None:
            document["comment"] = self.comment
        if self.changes:
            document["changes"] = list(self.changes)
        return document


@dataclass(frozen=True, slots=True)
class ClusterState:
    """The result fields that describe the cluster at one point (spec/replication.md)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    hw: int | None
    replicas: tuple[ReplicaView, ...]
    acked: tuple[str, ...]
    acked_lost: tuple[str, ...]
    diverged: bool
    # consumer id -> values read, by consumer id
    consumed: tuple[tuple[str, tuple[str, ...]], ...]
    truncation_detected: tuple[tuple[str, bool], ...]
    # record value -> produce result, in the order first produced
    results: tuple[tuple[str, str], ...]
    unclean_elections: int
    # queue anomalies of the run so far (``replication.checks``)
    anomalies: tuple[AnomalyFound, ...] = ()

    def replica(self, broker_id: int) -> ReplicaView:
        for replica in self.replicas:
            if replica.broker_id == broker_id:
                return replica
        raise KeyError(broker_id)

    def to_json(self) -> JsonObject:
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "elr": list(self.elr),
            "hw": self.hw,
            "replicas": {str(r.broker_id): r.to_json() for r in self.replicas},
            "acked": list(self.acked),
            "acked_lost": list(self.acked_lost),
            "diverged": self.diverged,
            "consumed": {c: list(values) for c, values in self.consumed},
            "truncation_detected": dict(self.truncation_detected),
            "results": dict(self.results),
            "unclean_elections": self.unclean_elections,
            "anomalies": [found.to_json() for found in self.anomalies],
        }
