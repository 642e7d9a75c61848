"""Live capture of a consumer group's history as trace rows (format v1).

The group leader knows everything a trace row holds when it assigns: every member's id, static
instance id, rack and subscription, the partition counts and replica racks from its metadata,
and the answer it is about to send. :class:`CaptureRecorder` is handed to
:func:`assignors.protocol.kafka_python.kafka_python_assignor` (``recorder=``) on **every**
member (leadership moves); the adapter keeps the group and the answer in ``assign()`` and writes
the row in ``on_assignment()`` once the SyncGroup round succeeded, so a generation whose sync
failed is never written.

A capture file is JSON Lines holding rows of one group only. Each row is checked with the trace
reader's own :func:`~assignors.traces.format.parse_generation`, then appended with one
``write`` of one whole line under an exclusive lock and fsynced: a crash leaves the rows written
before it intact (at worst a torn last line, which readers report and the next recorder opening
the file cuts off). Files of one group (one per member, or one per process) merge by
generation: :func:`merge_capture_files`.

>>> from assignors.model import Group, Member, Topic, TopicPartition
>>> subscribed = frozenset({"orders"})
>>> group = Group(topics=(Topic("orders", 3),),
...               members=(Member("c0", subscribed), Member("c1", subscribed)))
>>> answer = {"c0": [TopicPartition("orders", 0), TopicPartition("orders", 2)],
...           "c1": [TopicPartition("orders", 1)]}
>>> row = capture_row("payments", 4, group, answer, protocol="range", timestamp_ms=1)
>>> row["members"][0]
{'member_id': 'c0', 'instance_id': None, 'rack': None, 'topics': ['orders'], \
'assigned': [['orders', 0], ['orders', 2]]}
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assignors.errors import InputError
from assignors.model import Group, Member, Topic, TopicPartition
from assignors.traces.format import Generation, build_trace, generation_to_row, parse_generation
from ktkbase import jsonsafe

log = logging.getLogger(__name__)

LEADER_REASON = "captured by the group leader"


def capture_row(
    group_id: str,
    generation: int,
    group: Group,
    answer: Mapping[str, Iterable[TopicPartition]],
    *,
    protocol: str | None,
    timestamp_ms: int | None,
    reason: str | None = LEADER_REASON,
    group_protocol: str | None = None,
) -> dict[str, Any]:
    """The trace row of one generation from the group the leader saw and its answer, checked
    by :func:`parse_generation` (an :class:`InputError` names the field otherwise);
    ``group_protocol`` is ``consumer`` for a KIP-848 group (None: classic)."""
    members = []
    for member in group.members:
        members.append(
            {
                "member_id": member.member_id,
                "instance_id": member.instance_id,
                "rack": member.rack,
                "topics": sorted(member.topics),
                "assigned": [list(tp) for tp in sorted(answer.get(member.member_id, ()))],
            }
        )
    row: dict[str, Any] = {"trace_id": group_id, "generation": generation}
    if timestamp_ms is not None:
        row["timestamp_ms"] = timestamp_ms
    if protocol is not None:
        row["protocol"] = protocol
    if group_protocol is not None:
        row["group_protocol"] = group_protocol
    if reason is not None:
        row["reason"] = reason
    row["topics"] = [topic.to_json() for topic in group.topics]
    row["members"] = members
    parse_generation(row, None, None)
    return row


def _encode(row: Mapping[str, Any]) -> bytes:
    return (json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def read_capture(path: str | os.PathLike[str]) -> tuple[list[Generation], bool]:
    """The rows of a capture file, checked, and whether its last line was torn (no newline:
    a write cut short by a crash; that line is not a row)."""
    source = str(path)
    generations = []
    with open(path, "rb") as handle:
        data = handle.read()
    lines = data.split(b"\n")
    torn = lines[-1] != b""
    for number, raw in enumerate(lines[:-1], 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError("not UTF-8", source=source, line=number, value=str(error)) from None
        row = jsonsafe.loads(text, source=source, line=number)
        generations.append(parse_generation(row, source, number))
    return generations, torn


def _check_one_group(generations: Sequence[Generation], group_id: str, source: str) -> None:
    for generation in generations:
        if generation.trace_id != group_id:
            raise InputError(
                f"capture file already holds rows of another group than {group_id!r}; "
                "capture each group into its own file",
                source=source,
                line=generation.line,
                field="trace_id",
                value=generation.trace_id,
            )


class CaptureRecorder:
    """Appends the rows of one group to one capture file; safe to share between the consumers
    (threads) of one process, and between processes (an exclusive lock per write).

    Opening checks the file: rows of another group are refused (nothing is written), a torn
    last line is cut off so the next row starts on its own line.
    """

    def __init__(self, path: str | os.PathLike[str], group_id: str) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise InputError("must be a non-empty string", field="group_id", value=group_id)
        self.path = Path(path)
        self.group_id = group_id
        self._lock = threading.Lock()
        self.written: list[int] = []
        if self.path.exists():
            generations, torn = read_capture(self.path)
            _check_one_group(generations, group_id, str(self.path))
            if torn:
                self._cut_torn_line()

    def _cut_torn_line(self) -> None:
        with open(self.path, "r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            data = handle.read()
            keep = data.rfind(b"\n") + 1
            if keep < len(data):
                log.warning("%s: dropping a torn last line (%d bytes)", self.path, len(data) - keep)
                handle.truncate(keep)
                os.fsync(handle.fileno())

    def record(
        self,
        generation: int,
        group: Group,
        answer: Mapping[str, Iterable[TopicPartition]],
        *,
        protocol: str | None,
        timestamp_ms: int | None,
    ) -> dict[str, Any]:
        """Check and append the row of one generation; returns it."""
        row = capture_row(
            self.group_id, generation, group, answer, protocol=protocol, timestamp_ms=timestamp_ms
        )
        self.append(row)
        return row

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one checked row: one write of one whole line, fsynced."""
        self.append_rows([row])

    def append_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append a batch of rows, each checked first: one write of whole lines under the lock,
        fsynced, so the batch is on disk whole or (a short write is cut back off) not at all."""
        parsed = [parse_generation(row, str(self.path), None) for row in rows]
        for generation in parsed:
            if generation.trace_id != self.group_id:
                raise InputError(
                    f"row of another group than {self.group_id!r}",
                    source=str(self.path),
                    field="trace_id",
                    value=generation.trace_id,
                )
        if not parsed:
            return
        data = b"".join(_encode(generation_to_row(generation)) for generation in parsed)
        with self._lock:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                written = os.write(descriptor, data)
                if written != len(data):  # a full disk: cut the partial batch back off
                    os.ftruncate(descriptor, os.lseek(descriptor, 0, os.SEEK_END) - written)
                    raise OSError(f"{self.path}: short write ({written} of {len(data)} bytes)")
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            self.written.extend(generation.generation for generation in parsed)


def merge_capture_files(
    paths: Iterable[str | os.PathLike[str]], *, group_id: str | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of one group from several capture files, one per generation, in generation
    order, and notes on what was dropped (torn last lines).

    A generation carried by several files must be the same row in each (the leader of a
    generation writes it once; copies of one file agree); different rows fail naming both.
    All rows must belong to one group (``group_id`` when given).
    """
    by_generation: dict[int, Generation] = {}
    notes: list[str] = []
    expected = group_id
    for path in paths:
        generations, torn = read_capture(path)
        if torn:
            notes.append(f"{path}: the last line is torn (a write cut short) and was skipped")
        if generations and expected is None:
            expected = generations[0].trace_id
        if expected is not None:
            _check_one_group(generations, expected, str(path))
        for generation in generations:
            seen = by_generation.get(generation.generation)
            if seen is None:
                by_generation[generation.generation] = generation
            elif generation_to_row(seen) != generation_to_row(generation):
                raise InputError(
                    f"generation {generation.generation} differs between "
                    f"{seen.source}:{seen.line} and {generation.source}:{generation.line}",
                    source=generation.source,
                    line=generation.line,
                    trace_id=generation.trace_id,
                    field="generation",
                    value=generation.generation,
                )
    ordered = [by_generation[number] for number in sorted(by_generation)]
    if ordered:
        build_trace(ordered[0].trace_id, ordered)
    return [generation_to_row(generation) for generation in ordered], notes


# ---------------------------------------------------------------------------------------------
# DescribeGroups (classic groups) -> rows


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """One member of a DescribeGroups answer, its metadata and assignment still as wire bytes."""

    member_id: str
    instance_id: str | None
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """A DescribeGroups answer for one group (classic protocol)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...]


def described_row(
    described: DescribedGroup,
    partition_counts: Mapping[str, int],
    replica_racks: Mapping[str, Sequence[frozenset[str]]] | None,
    *,
    previous_generation: int | None,
    timestamp_ms: int | None,
) -> dict[str, Any] | None:
    """The trace row of a stable consumer group as DescribeGroups shows it, or None when the
    group is not a stable consumer group (rebalancing, empty, dead, or not ``consumer``).

    DescribeGroups carries no generation: it is estimated as one more than the largest
    ``generation_id`` the members' subscriptions (v2+) claim, else one more than
    ``previous_generation`` (or 1), and ``reason`` says which.

    >>> from assignors.protocol.wire import (MemberAssignment, Subscription,
    ...     encode_assignment, encode_subscription)
    >>> subscription = encode_subscription(Subscription(("orders",), generation_id=6))
    >>> assigned = encode_assignment(MemberAssignment((TopicPartition("orders", 0),)))
    >>> group = DescribedGroup("g", "Stable", "consumer", "range",
    ...                        (DescribedMember("m1", None, subscription, assigned),))
    >>> row = described_row(group, {"orders": 1}, None, previous_generation=None, timestamp_ms=1)
    >>> row["generation"], row["members"][0]["assigned"], row["reason"][:38]
    (7, [['orders', 0]], 'described; generation estimated as the')
    """
    from assignors.protocol.wire import decode_assignment, decode_subscription

    if described.state != "Stable" or described.protocol_type != "consumer":
        return None
    members = []
    answer: dict[str, tuple[TopicPartition, ...]] = {}
    claimed = []
    for index, member in enumerate(described.members):
        where = f"members[{index}]"
        try:
            subscription = decode_subscription(member.metadata)
            assignment = decode_assignment(member.assignment)
        except InputError as error:
            raise InputError(
                f"group {described.group_id!r}: {where}: {error.message}",
                field=f"{where}.metadata",
                value=member.member_id,
            ) from None
        if subscription.version >= 2 and subscription.generation_id >= 0:
            claimed.append(subscription.generation_id)
        members.append(
            Member(
                member.member_id,
                frozenset(subscription.topics),
                rack=subscription.rack_id or None,
                instance_id=member.instance_id or None,
            )
        )
        answer[member.member_id] = assignment.assigned_partitions
    if claimed:
        generation = max(claimed) + 1
        reason = (
            "described; generation estimated as the members' largest subscription "
            "generation_id + 1 (DescribeGroups carries none)"
        )
    else:
        generation = (previous_generation or 0) + 1
        reason = (
            "described; generation estimated by counting changes seen since the capture "
            "started (DescribeGroups carries none)"
        )
    return capture_row(
        described.group_id,
        generation,
        subscribed_group(members, partition_counts, replica_racks),
        answer,
        protocol=described.protocol or None,
        timestamp_ms=timestamp_ms,
        reason=reason,
    )


def subscribed_group(
    members: Sequence[Member],
    partition_counts: Mapping[str, int],
    replica_racks: Mapping[str, Sequence[frozenset[str]]] | None,
) -> Group:
    """The group of ``members`` over the topics they subscribe to that the metadata knows, in
    name order, each with its partition count and, when known, its replicas' racks."""
    subscribed = sorted(set().union(*(member.topics for member in members)) if members else ())
    topics = []
    for name in subscribed:
        if name not in partition_counts:
            continue
        racks = (replica_racks or {}).get(name)
        topics.append(Topic(name, partition_counts[name], tuple(racks) if racks else None))
    return Group(tuple(topics), tuple(members))


def same_assignment(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> bool:
    """Whether two described rows show the same members, subscriptions and assignment (the
    time, generation estimate and reason aside): a poller writes a row only on a change."""
    if first is None or second is None:
        return first is second
    ignored = ("generation", "timestamp_ms", "reason")
    return {k: v for k, v in first.items() if k not in ignored} == {
        k: v for k, v in second.items() if k not in ignored
    }


__all__ = [
    "LEADER_REASON",
    "CaptureRecorder",
    "DescribedGroup",
    "DescribedMember",
    "capture_row",
    "described_row",
    "merge_capture_files",
    "read_capture",
    "same_assignment",
    "subscribed_group",
]
