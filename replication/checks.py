"""Queue anomalies, checked on the history of a whole run as Jepsen's queue checker does: what
producers sent and had acknowledged, what consumers read, against the partition's final log.

Each detector is a named ``Anomaly``; ``find_anomalies`` lists what a run shows, one
``Violation``-like ``AnomalyFound`` per problem kind (the first problem as detail):

- ``LostWrite``: an acknowledged record is not in the final log (any acks level);
- ``DuplicateWrite``: a record sent once is at two offsets of the final log;
- ``ReorderedWrite``: one producer sent A before B, the final log holds B before A;
- ``TruncatedRead``: a consumer read a record at an offset where the final log holds another
  record, or none (the record it read was truncated later).

>>> from replication.log import LogRecord
>>> log = (LogRecord(0, 0, "m2"), LogRecord(1, 0, "m1"), LogRecord(2, 0, "m1"))
>>> history = History(log, acked=("m1", "m3"), sent=(("p1", ("m1", "m2")),),
...                   reads=(("c1", ((0, "m2"), (3, "m4"))),))
>>> for found in find_anomalies(history):
...     print(found.anomaly, "-", found.detail)
LostWrite - acknowledged m3 is not in the log
DuplicateWrite - m1 is at offsets 1 and 2
ReorderedWrite - p1 sent m1 before m2; the log has m2 at 0, m1 at 1
TruncatedRead - c1 read m4 at 3; the log has nothing there
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

from replication.log import LogRecord
from replication.view import ClusterView, JsonObject, ReplicaView


class History(NamedTuple):
    """A run as the anomaly checks read it."""

    # the partition's final log (the leader's, else the longest replica's)
    log: tuple[LogRecord, ...]
    # acknowledged values (any acks level)
    acked: tuple[str, ...]
    # producer name -> values in the order the application sent them
    sent: tuple[tuple[str, tuple[str, ...]], ...]
    # consumer id -> (offset, value) in the order read
    reads: tuple[tuple[str, tuple[tuple[int, str], ...]], ...]
    # where the final log starts, and what was deleted below a log start on purpose
    log_start_offset: int = 0
    deleted: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class AnomalyFound:
    anomaly: str
    detail: str

    def to_json(self) -> JsonObject:
        return {"anomaly": self.anomaly, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Anomaly:
    name: str
    summary: str
    check: Callable[[History], list[str]]


def final_replica(view: ClusterView) -> ReplicaView:
    """The replica whose log the checks compare with: the leader's; with no leader, the
    longest log of any replica, running or not (a log on a broker that is down is not gone,
    as ``acked_lost`` counts it too)."""
    if view.leader_replica is not None:
        return view.leader_replica
    return max(view.replicas, key=lambda r: r.log_end_offset)


def _lost(history: History) -> list[str]:
    present = {record.value for record in history.log} | history.deleted
    return [
        f"acknowledged {value} is not in the log" for value in history.acked if value not in present
    ]


def _duplicates(history: History) -> list[str]:
    offsets: dict[str, list[int]] = {}
    for record in history.log:
        offsets.setdefault(record.value, []).append(record.offset)
    return [
        f"{value} is at offsets {', '.join(map(str, where[:-1]))} and {where[-1]}"
        for value, where in offsets.items()
        if len(where) > 1
    ]


def _reordered(history: History) -> list[str]:
    first_offset: dict[str, int] = {}
    for record in history.log:
        first_offset.setdefault(record.value, record.offset)
    problems = []
    for producer, values in history.sent:
        landed = [(first_offset[value], value) for value in values if value in first_offset]
        # the first value sent earlier that landed later
        for (earlier_offset, earlier), (later_offset, later) in pairwise(landed):
            if later_offset < earlier_offset:
                problems.append(
                    f"{producer} sent {earlier} before {later}; the log has {later} at "
                    f"{later_offset}, {earlier} at {earlier_offset}"
                )
                break
    return problems


def _truncated_reads(history: History) -> list[str]:
    by_offset = {record.offset: record.value for record in history.log}
    problems = []
    for consumer, reads in history.reads:
        for offset, value in reads:
            if offset < history.log_start_offset:
                continue  # deleted on purpose since
            now = by_offset.get(offset)
            if now != value:
                there = "nothing there" if now is None else f"{now} there"
                problems.append(f"{consumer} read {value} at {offset}; the log has {there}")
                break
    return problems


ANOMALIES: tuple[Anomaly, ...] = (
    Anomaly("LostWrite", "an acknowledged record is not in the final log", _lost),
    Anomaly("DuplicateWrite", "a record is at two offsets of the final log", _duplicates),
    Anomaly(
        "ReorderedWrite", "a producer's records are in the log out of the order sent", _reordered
    ),
    Anomaly(
        "TruncatedRead",
        "a consumer read a record the final log no longer holds at that offset",
        _truncated_reads,
    ),
)
ANOMALY_NAMES: tuple[str, ...] = tuple(anomaly.name for anomaly in ANOMALIES)


def find_anomalies(history: History) -> tuple[AnomalyFound, ...]:
    """Every anomaly the history shows, in the canonical order, with its first problem."""
    found = []
    for anomaly in ANOMALIES:
        problems = anomaly.check(history)
        if problems:
            found.append(AnomalyFound(anomaly.name, problems[0]))
    return tuple(found)
