"""Safety invariants of the metadata quorum, checked after every event of a simulation.

Names follow Raft's safety properties (the Raft paper's figure 3) and Kafka's
``RaftEventSimulationTest`` (``MonotonicHighWatermark``, ``MajorityReachedHighWatermark``,
``SingleLeader``, ``ConsistentCommittedData``):

- ``ElectionSafety``: at most one leader per epoch, ever;
- ``LeaderAppendOnly``: a leader never removes or rewrites entries of its log during its epoch;
- ``LogMatching``: two logs holding an entry with the same offset and epoch hold the same
  entries up to it;
- ``LeaderCompleteness``: every committed entry is in the log of every leader (of this or a
  later epoch); its violation is *committed metadata lost*;
- ``StateMachineSafety``: every node applies the same entry at each offset (same metadata, same
  order), and never un-applies one;
- ``MonotonicHighWatermark``: a node's HW never goes down while it runs;
- ``MajorityHighWatermark``: the leader's HW entry is on the flushed log of a majority of voters;
- ``SnapshotConsistency``: a snapshot file's metadata equals the committed records replayed up to
  its end offset.

The checker reads the quorum (never changes it) and remembers what history needs: the leader of
each epoch, the committed entries (learned from every running node's HW), each leader's log end.
A violation is reported once per invariant and place, on the event where it appears.

>>> [invariant.name for invariant in select_invariants(["LogMatching", "ElectionSafety"])]
['ElectionSafety', 'LogMatching']
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from replication.errors import InputError
from replication.kraft.raft import LEADER, RaftNode
from replication.kraft.records import Entry, MetadataImage
from replication.kraft.snapshot import SnapshotError, SnapshotId, read_snapshot, snapshot_name
from replication.view import Violation

__all__ = ["INVARIANTS", "Invariant", "InvariantChecker", "select_invariants"]


@dataclass(frozen=True, slots=True)
class Invariant:
    name: str
    summary: str


INVARIANTS = (
    Invariant("ElectionSafety", "at most one leader per epoch"),
    Invariant("LeaderAppendOnly", "a leader never truncates or rewrites its log in its epoch"),
    Invariant("LogMatching", "same offset and epoch: same entries up to there"),
    Invariant("LeaderCompleteness", "every committed entry is in every leader's log"),
    Invariant("StateMachineSafety", "every node applies the same entries in the same order"),
    Invariant("MonotonicHighWatermark", "a running node's high watermark never decreases"),
    Invariant("MajorityHighWatermark", "the leader's HW is on a majority of voters' flushed logs"),
    Invariant("SnapshotConsistency", "a snapshot equals the committed records replayed to its end"),
)
_NAMES = [invariant.name for invariant in INVARIANTS]


def select_invariants(names: Iterable[str] | None) -> list[Invariant]:
    """The invariants named (all when None), in the order above; unknown names are refused."""
    if names is None:
        return list(INVARIANTS)
    wanted = set(names)
    unknown = sorted(wanted - set(_NAMES))
    if unknown:
        raise InputError(
            f"unknown invariant (known: {', '.join(_NAMES)})", field="invariants", value=unknown[0]
        )
    return [invariant for invariant in INVARIANTS if invariant.name in wanted]


def _log_signature(node: RaftNode) -> tuple[int, int, int]:
    return (node.log_start, node.end_offset, id(node.entries[-1]) if node.entries else 0)


def _fingerprint(node: RaftNode) -> tuple[object, ...]:
    return (
        node.incarnation,
        node.high_watermark,
        node.applied_offset,
        node.role,
        node.epoch,
        node.log_start,
        len(node.entries),
        id(node.entries[-1]) if node.entries else 0,
        node.flushed_end,
        node.latest_snapshot,
    )


class InvariantChecker:
    """Checks the invariants after each event; ``check`` returns the new violations."""

    def __init__(self, names: Iterable[str] | None = None) -> None:
        self.enabled = {invariant.name for invariant in select_invariants(names)}
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: list[Entry] = []
        # the epoch in which each committed entry was learned (a running maximum)
        self.commit_epochs: list[int] = []
        self.applied_checked: dict[tuple[int, int], int] = {}
        self.high_watermarks: dict[tuple[int, int], int] = {}
        self.leader_logs: dict[tuple[int, int], tuple[int, Entry | None]] = {}
        self.leader_checked: dict[tuple[int, int], int] = {}
        self.log_signatures: dict[int, tuple[int, int, int]] = {}
        self.snapshots_checked: set[tuple[int, SnapshotId]] = set()
        self.majority_checked: dict[tuple[int, int], int] = {}
        # what each node looked like at its last check: an unchanged node is not checked again
        self.fingerprints: dict[int, tuple[object, ...]] = {}
        self.reported: set[tuple[str, str]] = set()
        self._replayed = (0, MetadataImage.empty())

    def _report(self, out: list[Violation], name: str, where: str, detail: str, step: int) -> None:
        if name in self.enabled and (name, where) not in self.reported:
            self.reported.add((name, where))
            out.append(Violation(name, step, detail))

    def check(
        self,
        nodes: Mapping[int, RaftNode],
        up: Iterable[int],
        step: int,
        touched: Iterable[int] | None = None,
    ) -> list[Violation]:
        """The new violations after an event that changed the nodes ``touched`` (all: None)."""
        out: list[Violation] = []
        up = up if isinstance(up, set | frozenset) else set(up)
        if touched is None:
            candidates = [nodes[i] for i in sorted(up)]
        else:
            candidates = [nodes[i] for i in sorted(touched) if i in up]
        changed = []
        for node in candidates:
            fingerprint = _fingerprint(node)
            if self.fingerprints.get(node.node_id) != fingerprint:
                self.fingerprints[node.node_id] = fingerprint
                changed.append(node)
        if touched is not None and not changed:
            return out  # the event changed no node that invariants read
        running = candidates if touched is None else [nodes[i] for i in sorted(up)]
        self._leaders(changed, out, step)
        self._committed(running, changed, out, step)
        if "LogMatching" in self.enabled:
            self._log_matching(nodes, out, step, touched)
        if "MajorityHighWatermark" in self.enabled:
            for node in running:
                if node.role == LEADER:
                    self._majority(node, nodes, out, step)
        if "SnapshotConsistency" in self.enabled:
            for node in nodes.values():
                snapshot_id = node.latest_snapshot
                if (
                    snapshot_id is not None
                    and (node.node_id, snapshot_id) not in self.snapshots_checked
                ):
                    self.snapshots_checked.add((node.node_id, snapshot_id))
                    self._snapshot(node, snapshot_id, out, step)
        return out

    def _leaders(self, running: list[RaftNode], out: list[Violation], step: int) -> None:
        for node in running:
            if node.role != LEADER:
                continue
            epoch = node.epoch
            other = self.leader_of_epoch.setdefault(epoch, node.node_id)
            if other != node.node_id:
                self._report(
                    out,
                    "ElectionSafety",
                    f"epoch {epoch}",
                    f"nodes {other} and {node.node_id} both led epoch {epoch}",
                    step,
                )
            key = (node.node_id, epoch)
            end = node.end_offset
            last = node.entries[-1] if node.entries else None
            before = self.leader_logs.get(key)
            if before is not None:
                before_end, before_last = before
                if end < before_end or (
                    before_last is not None
                    and before_end - 1 >= node.log_start
                    and node.entry_at(before_end - 1) is not before_last
                ):
                    self._report(
                        out,
                        "LeaderAppendOnly",
                        f"{key}",
                        f"leader {node.node_id} of epoch {epoch} went from log end "
                        f"{before_end} to {end} or rewrote offset {before_end - 1}",
                        step,
                    )
            self.leader_logs[key] = (end, last)

    def _committed(
        self, running: list[RaftNode], changed: list[RaftNode], out: list[Violation], step: int
    ) -> None:
        committed = self.committed
        known = len(committed)
        # Learn committed entries from every changed node's HW, leaders first.
        for node in sorted(changed, key=lambda n: n.role != LEADER):
            start = max(len(committed), node.log_start)
            if len(committed) >= node.log_start and node.high_watermark > start:
                committed.extend(
                    node.entries[start - node.log_start : node.high_watermark - node.log_start]
                )
                epoch = max(node.epoch, self.commit_epochs[-1] if self.commit_epochs else 0)
                self.commit_epochs.extend([epoch] * (len(committed) - len(self.commit_epochs)))
        for node in changed:
            key = (node.node_id, node.incarnation)
            before = self.high_watermarks.get(key, node.high_watermark)
            if node.high_watermark < before:
                self._report(
                    out,
                    "MonotonicHighWatermark",
                    f"{key}",
                    f"node {node.node_id}'s HW went from {before} to {node.high_watermark}",
                    step,
                )
            self.high_watermarks[key] = node.high_watermark
            # StateMachineSafety: what the node applied matches the committed entries.
            checked = self.applied_checked.get(key, node.log_start)
            applied = node.applied_offset
            if applied < checked:
                self._report(
                    out,
                    "StateMachineSafety",
                    f"rollback {key}",
                    f"node {node.node_id} un-applied offsets {applied}..{checked - 1}",
                    step,
                )
            low = max(min(checked, applied), node.log_start)
            high = min(applied, len(committed), node.end_offset)
            if (
                low < high
                and node.entries[low - node.log_start : high - node.log_start]
                != (committed[low:high])
            ):
                offset = next(o for o in range(low, high) if node.entry_at(o) != committed[o])
                self._report(
                    out,
                    "StateMachineSafety",
                    f"{node.node_id}@{offset}",
                    f"node {node.node_id} applied {node.entry_at(offset)} at offset "
                    f"{offset}, committed is {committed[offset]}",
                    step,
                )
            self.applied_checked[key] = applied
        if "LeaderCompleteness" in self.enabled:
            for node in running if len(committed) > known else changed:
                if node.role == LEADER:
                    self._completeness(node, out, step)

    def _completeness(self, node: RaftNode, out: list[Violation], step: int) -> None:
        committed = self.committed
        key = (node.node_id, node.epoch)
        low = max(self.leader_checked.get(key, 0), node.log_start)
        # A leader must hold what was committed up to its own epoch; a deposed leader of an
        # older epoch still running is not expected to hold what newer epochs committed.
        high = bisect.bisect_right(self.commit_epochs, node.epoch)
        if high > node.end_offset:
            self._report(
                out,
                "LeaderCompleteness",
                f"{key}",
                f"leader {node.node_id} of epoch {node.epoch} lacks committed offsets "
                f"{node.end_offset}..{high - 1} (committed metadata lost)",
                step,
            )
        elif (
            low < high
            and node.entries[low - node.log_start : high - node.log_start] != (committed[low:high])
        ):
            offset = next(o for o in range(low, high) if node.entry_at(o) != committed[o])
            self._report(
                out,
                "LeaderCompleteness",
                f"{key}",
                f"leader {node.node_id} of epoch {node.epoch} has {node.entry_at(offset)}"
                f" at committed offset {offset}, not {committed[offset]} (committed "
                f"metadata lost)",
                step,
            )
        self.leader_checked[key] = high

    def _log_matching(
        self,
        nodes: Mapping[int, RaftNode],
        out: list[Violation],
        step: int,
        touched: Iterable[int] | None,
    ) -> None:
        changed = []
        for node_id in nodes if touched is None else touched:
            node = nodes[node_id]
            signature = _log_signature(node)
            if self.log_signatures.get(node_id) != signature:
                self.log_signatures[node_id] = signature
                changed.append(node)
        for node in changed:
            for other in nodes.values():
                if other is node:
                    continue
                low = max(node.log_start, other.log_start)
                offset = min(node.end_offset, other.end_offset) - 1
                while offset >= low and node.entry_at(offset).epoch != other.entry_at(offset).epoch:
                    offset -= 1
                if offset < low:
                    continue
                a = node.entries[low - node.log_start : offset + 1 - node.log_start]
                b = other.entries[low - other.log_start : offset + 1 - other.log_start]
                if a != b:
                    first = next(
                        o for o in range(low, offset + 1) if node.entry_at(o) != other.entry_at(o)
                    )
                    pair = sorted((node.node_id, other.node_id))
                    self._report(
                        out,
                        "LogMatching",
                        f"{pair}@{first}",
                        f"nodes {pair[0]} and {pair[1]} agree on offset {offset} (epoch "
                        f"{node.entry_at(offset).epoch}) but differ at offset {first}",
                        step,
                    )

    def _majority(
        self, leader: RaftNode, nodes: Mapping[int, RaftNode], out: list[Violation], step: int
    ) -> None:
        high_watermark = leader.high_watermark
        # Checked when the HW moves: an entry is committed by a majority of the voters of that
        # moment; a later voter change (KIP-853, one voter at a time) keeps majorities overlapping
        # without every new majority holding it yet.
        # A new leader's HW is the one it learned as a follower, checked when it moved then.
        key = (leader.node_id, leader.epoch)
        before = self.majority_checked.setdefault(key, high_watermark)
        if before == high_watermark:
            return
        self.majority_checked[key] = high_watermark
        if not leader.log_start < high_watermark <= leader.end_offset:
            return  # nothing above the snapshot, or a log cut below its HW (LeaderAppendOnly)
        wanted = leader.entry_at(high_watermark - 1)
        voters = leader.voters
        holding = []
        for voter in voters:
            node = nodes.get(voter)
            if node is None or node.flushed_end < high_watermark:
                continue
            if high_watermark - 1 < node.log_start or node.entry_at(high_watermark - 1) == wanted:
                holding.append(voter)
        if len(holding) * 2 <= len(voters):
            self._report(
                out,
                "MajorityHighWatermark",
                f"{leader.node_id}@{high_watermark}",
                f"leader {leader.node_id}'s HW {high_watermark} is on the flushed logs "
                f"of voters {holding} only, of {list(voters)}",
                step,
            )

    def _snapshot(
        self, node: RaftNode, snapshot_id: SnapshotId, out: list[Violation], step: int
    ) -> None:
        name = snapshot_name(snapshot_id)
        where = f"{node.node_id}:{name}"
        end = snapshot_id.end_offset
        if end > len(self.committed):
            self._report(
                out,
                "SnapshotConsistency",
                where,
                f"node {node.node_id}'s snapshot {name} ends past the committed "
                f"offset {len(self.committed)}",
                step,
            )
            return
        try:
            snapshot = read_snapshot(name, node.store.read(name))
        except (SnapshotError, KeyError) as error:
            self._report(
                out,
                "SnapshotConsistency",
                where,
                f"node {node.node_id}'s snapshot {name} does not read: {error}",
                step,
            )
            return
        upto, image = self._replayed
        if end < upto:
            upto, image = 0, MetadataImage.empty()
        for entry in self.committed[upto:end]:
            image = image.apply(entry.payload)
        self._replayed = (end, image)
        if snapshot.image != image:
            self._report(
                out,
                "SnapshotConsistency",
                where,
                f"node {node.node_id}'s snapshot {name} differs from the committed "
                f"records replayed to offset {end}",
                step,
            )
