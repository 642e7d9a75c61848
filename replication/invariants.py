"""The safety invariants of spec/replication-protocol.md section 8, checked after every step.

Names follow the TLA+ specs they come from: ``LeaderInIsr`` and ``StrongIsr`` (hachikuji's
KafkaReplication), ``LeaderCompleteness``, ``LeaderCandidateCompleteness``,
``ReplicationQuorumSuperset``, ``LogMatching``, ``ConsistentRead``,
``NoCommittedRecordLostGlobally`` and ``ValidControllerIsrAndElr`` (Vanlightly's KIP-966 model,
without the ``Property`` suffix) and ``MonotonicHighWatermark`` (RaftEventSimulationTest, here for
a data-plane leader within one epoch). Each is an ``Invariant`` object that reads a
``ClusterView`` (never the live cluster); a run may check all of them (the default) or a subset
picked by name, as RaftEventSimulationTest picks per test. A violation is reported on the step
where the invariant starts failing, as a ``Violation``; it is reported again only after it held
in between.

A leader whose ISR member lacks a record below the HW breaks ``StrongIsr``:

>>> from replication.log import ReplicaLog
>>> leader_log = ReplicaLog.from_records([(0, "m1"), (0, "m2")], high_watermark=2)
>>> leader = ReplicaView.of_log(2, leader_log)
>>> follower = ReplicaView.of_log(1, ReplicaLog.from_records([(0, "m1")], high_watermark=1))
>>> strong_isr(leader_id=2, leader=leader, isr=[follower])
['replica 1 lacks offset 1 (leader has m2) below leader HW 2']
>>> [invariant.name for invariant in select_invariants(["LogMatching", "StrongIsr"])]
['StrongIsr', 'LogMatching']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from replication.errors import InputError
from replication.view import ClusterView, LeaderView, ReplicaView, Violation


@dataclass(slots=True)
class InvariantMemory:
    """What invariants about history remember between steps: each leader's highest HW per
    epoch (for ``MonotonicHighWatermark``). Owned by one ``InvariantChecker``."""

    leader_high_watermarks: dict[tuple[int, int], int] = field(default_factory=dict)

    def observe(self, view: ClusterView) -> None:
        leader = view.leader
        if leader is None or view.leader_replica is None:
            return
        key = (leader.broker_id, leader.leader_epoch)
        high_watermark = view.leader_replica.high_watermark
        before = self.leader_high_watermarks.get(key, high_watermark)
        self.leader_high_watermarks[key] = max(before, high_watermark)


Check = Callable[[ClusterView, InvariantMemory], list[str]]


@dataclass(frozen=True, slots=True)
class Invariant:
    """A named safety property: ``check`` lists its problems in a view (empty: it holds)."""

    name: str
    summary: str
    check: Check


def strong_isr(leader_id: int, leader: ReplicaView, isr: Iterable[ReplicaView]) -> list[str]:
    """Every ISR member holds the leader's records below the leader's HW."""
    problems = []
    for replica in sorted(isr, key=lambda r: r.broker_id):
        if replica.broker_id == leader_id:
            continue
        offset = first_difference(replica, leader, leader.high_watermark)
        if offset is not None:
            theirs, ours = replica.record_at(offset), leader.record_at(offset)
            have = "lacks" if theirs is None else f"has {theirs.value} at"
            problems.append(
                f"replica {replica.broker_id} {have} offset {offset} (leader has "
                f"{ours.value if ours else None}) below leader HW {leader.high_watermark}"
            )
    return problems


def first_difference(first: ReplicaView, second: ReplicaView, limit: int) -> int | None:
    """The first offset below ``limit`` where the two logs differ (a missing record counts);
    offsets below either log's start (deleted on purpose) are not compared."""
    start = first.log_start_offset
    if start == second.log_start_offset:
        if limit <= start or first.prefix(limit) == second.prefix(limit):
            return None
    else:
        start = max(start, second.log_start_offset)
        if limit <= start:
            return None
    for offset in range(start, limit):
        if first.record_at(offset) != second.record_at(offset):
            return offset
    return None


def log_matching(replicas: Iterable[ReplicaView]) -> list[str]:
    """Every two replicas agree on every offset below the smaller of their HWs."""
    problems = []
    ordered = sorted(replicas, key=lambda r: r.broker_id)
    for index, first in enumerate(ordered):
        for second in ordered[index + 1 :]:
            limit = min(first.high_watermark, second.high_watermark)
            offset = first_difference(first, second, limit)
            if offset is not None:
                a, b = first.record_at(offset), second.record_at(offset)
                problems.append(
                    f"replicas {first.broker_id} and {second.broker_id} differ at offset "
                    f"{offset} ({a.value if a else None} vs {b.value if b else None})"
                )
    return problems


def _leader_in_isr(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    registration = view.registration
    problems = []
    if registration.leader != -1 and registration.leader not in registration.isr:
        problems.append(f"leader {registration.leader} not in ISR {registration.isr}")
    if not registration.isr and not view.eligible_leader_replicas:
        problems.append("the ISR is empty")
    return problems


def _strong_isr(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    leader = view.leader_replica
    if leader is None or leader.high_watermark <= 0:
        return []
    isr = view.registration.isr
    members = [r for r in view.replicas if r.online and r.broker_id in isr]
    return strong_isr(leader.broker_id, leader, members)


def _leader_completeness(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    leader = view.leader_replica
    if leader is None or not (view.committed or view.acked_all):
        return []
    start = leader.log_start_offset
    missing = [
        f"leader {leader.broker_id} lacks committed {value} at offset {offset}"
        for offset, value in view.committed
        if offset >= start
        and ((record := leader.record_at(offset)) is None or record.value != value)
    ]
    if view.acked_all:
        present = set(leader.values())
        missing += [
            f"leader {leader.broker_id} lacks acknowledged {value}"
            for value in view.acked_all
            if value not in present and value not in view.deleted
        ]
    return missing


def _leader_candidate_completeness(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    if not view.committed:
        return []
    registration = view.registration
    true_high_watermark = view.committed[-1][0] + 1
    candidates = set(registration.isr) | set(registration.elr)
    lagging = sorted(
        (replica.broker_id, replica.log_end_offset)
        for replica in view.replicas
        if replica.broker_id in candidates
        and replica.online
        and replica.log_end_offset < true_high_watermark
    )
    return [
        f"candidate {broker_id} has LEO {end_offset} below true HW {true_high_watermark}"
        for broker_id, end_offset in lagging
    ]


def _replication_quorum_superset(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    leader: LeaderView | None = view.leader
    registration = view.registration
    if leader is None or leader.pending or leader.partition_epoch != registration.partition_epoch:
        return []
    maximal = set(leader.maximal_isr)
    problems = []
    if maximal != set(registration.isr):
        problems.append(f"maximal ISR {sorted(maximal)} != ISR {list(registration.isr)}")
    if len(registration.isr) >= view.min_insync_replicas and not maximal >= (
        set(registration.isr) | set(registration.elr)
    ):
        problems.append(f"maximal ISR {sorted(maximal)} misses part of ISR and ELR")
    return problems


def _log_matching(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    return log_matching(view.replicas)


def _consistent_read(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    leader_log = view.leader_replica
    if leader_log is None or not view.consumers:
        return []
    return [
        f"consumer {consumer.consumer_id} read {value} at {offset}, leader now has "
        f"{record.value if record else None}"
        for consumer in view.consumers
        for offset, value in consumer.records
        if leader_log.log_start_offset <= offset < leader_log.high_watermark
        and ((record := leader_log.record_at(offset)) is None or record.value != value)
    ]


def _no_committed_record_lost_globally(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    # losing more copies than min ISR covers is outside the guarantee (spec section 8)
    if not view.acked_all or view.lossy_shutdowns >= view.min_insync_replicas:
        return []
    everywhere = {value for replica in view.replicas for value in replica.values()}
    return [
        f"acknowledged {v} is on no replica"
        for v in view.acked_all
        if v not in everywhere and v not in view.deleted
    ]


def _valid_controller_isr_and_elr(view: ClusterView, _memory: InvariantMemory) -> list[str]:
    if not view.eligible_leader_replicas:
        return []
    registration = view.registration
    replicas = set(registration.replicas)
    isr, elr = set(registration.isr), set(registration.elr)
    problems = []
    if not isr <= replicas or not elr <= replicas:
        problems.append("ISR or ELR holds a non-replica")
    if isr & elr:
        problems.append(f"ISR and ELR overlap in {sorted(isr & elr)}")
    if len(isr) >= view.min_insync_replicas and elr:
        problems.append(f"ELR {sorted(elr)} not empty with ISR at min ISR")
    return problems


def _monotonic_high_watermark(view: ClusterView, memory: InvariantMemory) -> list[str]:
    leader = view.leader
    if leader is None or view.leader_replica is None:
        return []
    key = (leader.broker_id, leader.leader_epoch)
    high_watermark = view.leader_replica.high_watermark
    before = memory.leader_high_watermarks.get(key, high_watermark)
    if high_watermark < before:
        return [f"leader {key[0]} HW fell from {before} to {high_watermark} in epoch {key[1]}"]
    return []


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "LeaderInIsr",
        "the controller's leader is in its ISR; without ELR the ISR never empties",
        _leader_in_isr,
    ),
    Invariant(
        "StrongIsr",
        "every running ISR member holds the leader's records below the leader's HW",
        _strong_isr,
    ),
    Invariant(
        "LeaderCompleteness",
        "the leader holds everything ever committed and every acks=all acknowledgement",
        _leader_completeness,
    ),
    Invariant(
        "LeaderCandidateCompleteness",
        "every running ISR/ELR member reaches the highest HW ever committed",
        _leader_candidate_completeness,
    ),
    Invariant(
        "ReplicationQuorumSuperset",
        "a settled leader's maximal ISR is the ISR and covers ISR and ELR at min ISR",
        _replication_quorum_superset,
    ),
    Invariant(
        "LogMatching",
        "every two replicas agree below the smaller of their HWs",
        _log_matching,
    ),
    Invariant(
        "ConsistentRead",
        "what consumers read below the HW is still in the leader's log",
        _consistent_read,
    ),
    Invariant(
        "NoCommittedRecordLostGlobally",
        "every acks=all acknowledgement is on some replica (while fewer lossy crashes than "
        "min ISR happened)",
        _no_committed_record_lost_globally,
    ),
    Invariant(
        "ValidControllerIsrAndElr",
        "with ELR: ISR and ELR are disjoint replicas, ELR empty while ISR is at min ISR",
        _valid_controller_isr_and_elr,
    ),
    Invariant(
        "MonotonicHighWatermark",
        "a leader's HW never falls within one epoch",
        _monotonic_high_watermark,
    ),
)
INVARIANT_NAMES: tuple[str, ...] = tuple(invariant.name for invariant in INVARIANTS)
BY_NAME: dict[str, Invariant] = {invariant.name: invariant for invariant in INVARIANTS}
LOG_MATCHING = BY_NAME["LogMatching"]


# what a majority quorum promises; the others speak of the ISR, which does not commit or elect
# in the majority mode (its leader still tracks which followers are caught up)
MAJORITY_INVARIANT_NAMES: tuple[str, ...] = (
    "LeaderCompleteness",
    "LogMatching",
    "ConsistentRead",
    "MonotonicHighWatermark",
)


def majority_invariants(invariants: Iterable[Invariant]) -> tuple[Invariant, ...]:
    """Those of ``invariants`` that apply to the majority mode.

    >>> [i.name for i in majority_invariants(INVARIANTS)][:2]
    ['LeaderCompleteness', 'LogMatching']
    """
    return tuple(i for i in invariants if i.name in MAJORITY_INVARIANT_NAMES)


def select_invariants(
    names: Iterable[str] | None, *, field_name: str = "invariants"
) -> tuple[Invariant, ...]:
    """The invariants named (all of them for None), in the canonical order; an unknown name
    is an ``InputError`` listing the known ones."""
    if names is None:
        return INVARIANTS
    wanted = list(names)
    for name in wanted:
        if name not in BY_NAME:
            raise InputError(
                f"unknown invariant; expected some of {', '.join(INVARIANT_NAMES)}",
                field=field_name,
                value=name,
            )
    return tuple(invariant for invariant in INVARIANTS if invariant.name in wanted)


class InvariantChecker:
    """Checks views after each step and keeps the violations in order."""

    def __init__(self, invariants: Sequence[Invariant] = INVARIANTS) -> None:
        self.invariants = tuple(invariants)
        self.violations: list[Violation] = []
        self.memory = InvariantMemory()
        self._failing: set[str] = set()

    def check(self, view: ClusterView) -> list[Violation]:
        """Check every invariant; returns the violations that start at this step."""
        found = self.evaluate(view)
        new = [
            Violation(name, view.step, detail)
            for name, detail in found.items()
            if name not in self._failing
        ]
        self._failing = set(found)
        self.violations.extend(new)
        return new

    def evaluate(self, view: ClusterView) -> dict[str, str]:
        """Invariant name -> detail of its first problem, for every failing invariant (in the
        canonical order); then remembers what history invariants need."""
        failing: dict[str, str] = {}
        for invariant in self.invariants:
            problems = invariant.check(view, self.memory)
            if problems:
                failing[invariant.name] = problems[0]
        self.memory.observe(view)
        return failing
