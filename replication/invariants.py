"""The safety invariants of spec/replication-protocol.md section 8, checked after every step.

Names follow the TLA+ specs they come from: ``LeaderInIsr`` and ``StrongIsr`` (hachikuji's
KafkaReplication), ``LeaderCompleteness``, ``LeaderCandidateCompleteness``,
``ReplicationQuorumSuperset``, ``LogMatching``, ``ConsistentRead``,
``NoCommittedRecordLostGlobally`` and ``ValidControllerIsrAndElr`` (Vanlightly's KIP-966 model,
without the ``Property`` suffix) and ``MonotonicHighWatermark`` (RaftEventSimulationTest, here for
a data-plane leader within one epoch). A violation is reported on the step where the invariant
starts failing, as ``{"invariant", "step", "detail"}``; it is reported again only after it held
in between.

A leader whose ISR member lacks a record below the HW breaks ``StrongIsr``:

>>> from types import SimpleNamespace
>>> from replication.log import ReplicaLog
>>> leader_log = ReplicaLog.from_records([(0, "m1"), (0, "m2")], high_watermark=2)
>>> follower_log = ReplicaLog.from_records([(0, "m1")], high_watermark=1)
>>> strong_isr(leader_id=2, leader_log=leader_log, isr_logs={1: follower_log})
['replica 1 lacks offset 1 (leader has m2) below leader HW 2']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from replication.log import ReplicaLog

if TYPE_CHECKING:
    from replication.sim import Cluster

INVARIANT_NAMES: tuple[str, ...] = (
    "LeaderInIsr",
    "StrongIsr",
    "LeaderCompleteness",
    "LeaderCandidateCompleteness",
    "ReplicationQuorumSuperset",
    "LogMatching",
    "ConsistentRead",
    "NoCommittedRecordLostGlobally",
    "ValidControllerIsrAndElr",
    "MonotonicHighWatermark",
)


def strong_isr(
    leader_id: int, leader_log: ReplicaLog, isr_logs: Mapping[int, ReplicaLog]
) -> list[str]:
    """Every ISR member holds the leader's records below the leader's HW."""
    problems = []
    for replica_id, log in sorted(isr_logs.items()):
        if replica_id == leader_id:
            continue
        offset = first_difference(log, leader_log, leader_log.high_watermark)
        if offset is not None:
            theirs, ours = log.record_at(offset), leader_log.record_at(offset)
            have = "lacks" if theirs is None else f"has {theirs.value} at"
            problems.append(
                f"replica {replica_id} {have} offset {offset} (leader has "
                f"{ours.value if ours else None}) below leader HW {leader_log.high_watermark}"
            )
    return problems


def first_difference(first: ReplicaLog, second: ReplicaLog, limit: int) -> int | None:
    """The first offset below ``limit`` where the two logs differ (a missing record counts)."""
    if first.prefix(limit) == second.prefix(limit):
        return None
    for offset in range(limit):
        if first.record_at(offset) != second.record_at(offset):
            return offset
    return None


def log_matching(logs: Mapping[int, ReplicaLog]) -> list[str]:
    """Every two replicas agree on every offset below the smaller of their HWs."""
    problems = []
    items = sorted(logs.items())
    for index, (first_id, first) in enumerate(items):
        for second_id, second in items[index + 1 :]:
            limit = min(first.high_watermark, second.high_watermark)
            offset = first_difference(first, second, limit)
            if offset is not None:
                a, b = first.record_at(offset), second.record_at(offset)
                problems.append(
                    f"replicas {first_id} and {second_id} differ at offset {offset} "
                    f"({a.value if a else None} vs {b.value if b else None})"
                )
    return problems


class InvariantChecker:
    """Checks a cluster after each step and keeps the violations in order."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.violations: list[dict[str, Any]] = []
        self._failing: set[str] = set()
        self._leader_high_watermarks: dict[tuple[int, int], int] = {}

    def check(self, step: int) -> list[dict[str, Any]]:
        """Check every invariant; returns the violations that start at this step."""
        found = self.evaluate()
        new = []
        for name in INVARIANT_NAMES:
            if name in found and name not in self._failing:
                new.append({"invariant": name, "step": step, "detail": found[name]})
        self._failing = set(found)
        self.violations.extend(new)
        return new

    def evaluate(self) -> dict[str, str]:
        """Invariant name -> detail of its first problem, for every failing invariant."""
        cluster = self.cluster
        registration = cluster.controller.registration
        leader = cluster.leader_broker()
        logs = {b: broker.replica.log for b, broker in cluster.brokers.items()}
        failing: dict[str, str] = {}

        def fail(name: str, problems: list[str]) -> None:
            if problems and name not in failing:
                failing[name] = problems[0]

        if registration.leader != -1 and registration.leader not in registration.isr:
            fail("LeaderInIsr", [f"leader {registration.leader} not in ISR {registration.isr}"])
        if not registration.isr and not cluster.mode.eligible_leader_replicas:
            fail("LeaderInIsr", ["the ISR is empty"])

        acked_all = cluster.acked_all
        if leader is not None:
            leader_log = leader.replica.log
            online_isr = {r: logs[r] for r in registration.isr if cluster.brokers[r].online}
            fail("StrongIsr", strong_isr(leader.broker_id, leader_log, online_isr))
            values = leader_log.values()
            missing = [
                f"leader {leader.broker_id} lacks committed {value} at offset {offset}"
                for offset, value in sorted(cluster.committed.items())
                if offset >= len(values) or values[offset] != value
            ]
            if acked_all:
                present = set(values)
                missing += [
                    f"leader {leader.broker_id} lacks acknowledged {value}"
                    for value in acked_all
                    if value not in present
                ]
            fail("LeaderCompleteness", missing)
            self._check_quorum_superset(fail, leader)
            self._check_monotonic_high_watermark(fail, leader)
            reads = [
                f"consumer {consumer_id} read {value} at {offset}, leader now has "
                f"{record.value if record else None}"
                for consumer_id, consumer in sorted(cluster.consumers.items())
                for offset, value in consumer.records
                if offset < leader_log.high_watermark
                and ((record := leader_log.record_at(offset)) is None or record.value != value)
            ]
            fail("ConsistentRead", reads)

        true_high_watermark = max(cluster.committed, default=-1) + 1
        candidates = sorted(set(registration.isr) | set(registration.elr))
        fail(
            "LeaderCandidateCompleteness",
            [
                f"candidate {r} has LEO {logs[r].log_end_offset} below true HW "
                f"{true_high_watermark}"
                for r in candidates
                if cluster.brokers[r].online and logs[r].log_end_offset < true_high_watermark
            ],
        )
        fail("LogMatching", log_matching(logs))
        if acked_all and cluster.lossy_shutdowns < cluster.config.min_insync_replicas:
            everywhere = {v for log in logs.values() for v in log.values()}
            fail(
                "NoCommittedRecordLostGlobally",
                [f"acknowledged {v} is on no replica" for v in acked_all if v not in everywhere],
            )
        if cluster.mode.eligible_leader_replicas:
            self._check_isr_and_elr(fail)
        return failing

    def _check_quorum_superset(self, fail: Any, leader: Any) -> None:
        cluster = self.cluster
        registration = cluster.controller.registration
        replica = leader.replica
        if replica.pending is not None or replica.partition_epoch != registration.partition_epoch:
            return
        maximal = set(replica.maximal_isr())
        problems = []
        if maximal != set(registration.isr):
            problems.append(f"maximal ISR {sorted(maximal)} != ISR {list(registration.isr)}")
        if len(registration.isr) >= cluster.config.min_insync_replicas and not maximal >= (
            set(registration.isr) | set(registration.elr)
        ):
            problems.append(f"maximal ISR {sorted(maximal)} misses part of ISR and ELR")
        fail("ReplicationQuorumSuperset", problems)

    def _check_monotonic_high_watermark(self, fail: Any, leader: Any) -> None:
        key = (leader.broker_id, leader.replica.leader_epoch)
        high_watermark = leader.replica.log.high_watermark
        before = self._leader_high_watermarks.get(key, high_watermark)
        if high_watermark < before:
            fail(
                "MonotonicHighWatermark",
                [f"leader {key[0]} HW fell from {before} to {high_watermark} in epoch {key[1]}"],
            )
        self._leader_high_watermarks[key] = max(before, high_watermark)

    def _check_isr_and_elr(self, fail: Any) -> None:
        cluster = self.cluster
        registration = cluster.controller.registration
        replicas = set(registration.replicas)
        isr, elr = set(registration.isr), set(registration.elr)
        problems = []
        if not isr <= replicas or not elr <= replicas:
            problems.append("ISR or ELR holds a non-replica")
        if isr & elr:
            problems.append(f"ISR and ELR overlap in {sorted(isr & elr)}")
        if len(isr) >= cluster.config.min_insync_replicas and elr:
            problems.append(f"ELR {sorted(elr)} not empty with ISR at min ISR")
        fail("ValidControllerIsrAndElr", problems)
