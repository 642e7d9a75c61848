"""What a rebalance costs the application: partitions that stop being consumed, and for how long.

Every generation after a trace's first is one rebalance. The model (docs/traces.md, "Cost
model") charges each assignor for the partitions its rebalance protocol pauses:

- ``eager`` (range, roundrobin, sticky): every member revokes everything it owns before the
  join; every revoked partition is paused for the whole rebalance, ``rounds x round``.
- ``cooperative`` (cooperative-sticky): members keep what stays theirs; only the revoked
  partitions pause, for the extra rounds that hand them over, ``(rounds - 1) x round``
  (at least one round).
- ``consumer`` (KIP-848 server-side assignors: uniform, server-range, and recorded groups whose
  rows say ``group_protocol: consumer``): no barrier; the coordinator reconciles member by
  member (:mod:`assignors.traces.reconcile`). A partition handed from one member to another
  pauses from its revocation until its new owner receives it, a whole number of heartbeat
  intervals: ``paused_intervals x heartbeat``; every member reaches the target after
  ``reconcile_intervals x heartbeat`` (``reconcile_seconds``). A row without a reconciliation
  (a recorded target that gives a partition twice) is charged one heartbeat per revoked
  partition.

Partitions whose owner left the group (``forced``) are not charged: they wait for the failure
to be detected whatever the assignor. ``round`` defaults to 3 s; when the trace carries
``timestamp_ms`` on a generation and the one before, the round is at most the time between
them (a rebalance cannot outlast the gap to the next generation).

With partition weights (``Topic.weights``: records/s or bytes/s) the paused partition-seconds
become the records (bytes) delayed, ``revoked_weight x pause``, and the moved partitions' weight
is the state a new owner warms up again (``warmup_weight``).

>>> from assignors.traces.scoring import ScoreRow
>>> row = ScoreRow("g", "range", 2, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 2, 0, 0, 4, 1,
...                None, None, revoked_weight=40.0, moved_weight=20.0)
>>> costed = with_cost(row, "eager", CostModel())
>>> costed.paused_partition_seconds, costed.delayed_weight, costed.warmup_weight
(12.0, 120.0, 20.0)
>>> cooperative = with_cost(row._replace(revoked=2, rounds=2), "cooperative", CostModel())
>>> cooperative.paused_partition_seconds
6.0
>>> reconciled = row._replace(revoked=2, paused_intervals=1, reconcile_intervals=2,
...                           paused_weight_intervals=25.0)
>>> consumer = with_cost(reconciled, "consumer", CostModel())
>>> consumer.paused_partition_seconds, consumer.reconcile_seconds, consumer.delayed_weight
(5.0, 10.0, 125.0)
>>> with_cost(row._replace(revoked=2), "consumer", CostModel()).paused_partition_seconds
10.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from assignors.base import Assignor
from assignors.traces.reconcile import is_server_side
from assignors.traces.scoring import ScoreRow

DEFAULT_ROUND_SECONDS = 3.0
"""One rebalance round with Kafka's client defaults: the join barrier waits for every member's
next poll, a few seconds in a busy group (heartbeat.interval.ms=3000)."""

DEFAULT_HEARTBEAT_SECONDS = 5.0
"""KIP-848's group.consumer.heartbeat.interval.ms default (5000)."""

SERVER_SIDE_ASSIGNORS = frozenset({"uniform", "server-range"})
"""Assignors that run in the group coordinator under KIP-848's ``consumer`` protocol."""

PROTOCOLS = ("eager", "cooperative", "consumer")

_PAUSED = ScoreRow._fields.index("paused_partition_seconds")
assert ScoreRow._fields[_PAUSED : _PAUSED + 3] == (
    "paused_partition_seconds",
    "delayed_weight",
    "warmup_weight",
)


@dataclass(frozen=True, slots=True)
class CostModel:
    """The model's settings (``ktk replay --round-seconds/--heartbeat-seconds``)."""

    round_seconds: float = DEFAULT_ROUND_SECONDS
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS

    def __post_init__(self) -> None:
        for name in ("round_seconds", "heartbeat_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")

    def describe(self) -> dict[str, float]:
        return {"round_seconds": self.round_seconds, "heartbeat_seconds": self.heartbeat_seconds}


def group_protocol(name: str, rebalance_protocol: str) -> str:
    """The protocol the cost model charges: ``consumer`` for server-side assignors, else the
    assignor's own rebalance protocol.

    >>> group_protocol("uniform", "cooperative"), group_protocol("sticky", "eager")
    ('consumer', 'eager')
    """
    return "consumer" if name in SERVER_SIDE_ASSIGNORS else rebalance_protocol


def assignor_protocol(assignor: Assignor) -> str:
    """The protocol the cost model charges ``assignor``'s rows: ``consumer`` for an assignor
    declaring the consumer protocol (:func:`~assignors.traces.reconcile.is_server_side`, which
    covers the built-in :data:`SERVER_SIDE_ASSIGNORS` and plugins alike), else its own
    rebalance protocol.

    >>> from assignors import registry
    >>> assignor_protocol(registry.get("uniform")), assignor_protocol(registry.get("sticky"))
    ('consumer', 'eager')
    """
    return "consumer" if is_server_side(assignor) else assignor.rebalance_protocol


def pause_seconds(row: ScoreRow, protocol: str | None, model: CostModel) -> float:
    """How long each revoked partition of ``row``'s generation stops being consumed."""
    round_seconds = model.round_seconds
    if row.interval_ms is not None and row.interval_ms > 0:
        round_seconds = min(round_seconds, row.interval_ms / 1000.0)
    if protocol == "consumer":
        return model.heartbeat_seconds
    if protocol == "cooperative":
        return max(1, row.rounds - 1) * round_seconds
    # eager, and `mixed`/unknown recorded groups: the conservative reading
    return row.rounds * round_seconds


def with_cost(row: ScoreRow, protocol: str | None, model: CostModel) -> ScoreRow:
    """``row`` with its cost columns filled in (see the module docstring). A row replay
    reconciled (``paused_intervals`` set) is costed by its reconciliation, whatever
    ``protocol`` says: a recorded group may have moved to the consumer protocol mid-trace."""
    if row.paused_intervals is not None and row.reconcile_intervals is not None:
        heartbeat = model.heartbeat_seconds
        return row._replace(
            paused_partition_seconds=row.paused_intervals * heartbeat,
            delayed_weight=None
            if row.paused_weight_intervals is None
            else row.paused_weight_intervals * heartbeat,
            warmup_weight=row.moved_weight,
            reconcile_seconds=row.reconcile_intervals * heartbeat,
        )
    pause = 0.0 if row.revoked == 0 else pause_seconds(row, protocol, model)
    # row._replace of the three cost columns, by slicing: this runs once per generation
    costs = (
        row.revoked * pause,
        None if row.revoked_weight is None else row.revoked_weight * pause,
        row.moved_weight,
    )
    return tuple.__new__(ScoreRow, row[:_PAUSED] + costs + row[_PAUSED + 3 :])


def with_costs(rows: Iterable[ScoreRow], protocol: str | None, model: CostModel) -> list[ScoreRow]:
    """Every row of one assignor's replay, costed."""
    return [with_cost(row, protocol, model) for row in rows]
