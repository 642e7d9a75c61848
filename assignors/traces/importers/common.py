"""What every importer shares: the topics side file, skip notes, and the trace assembler that
turns one group's snapshots into format-v1 rows.

The assembler keeps generation numbers strictly increasing (a later snapshot of the same
generation replaces the earlier one; a generation going backwards means the group was deleted and
re-created, which starts a new trace ``<group>#2``) and partition counts never decreasing: a
count the records do not state is the smallest one consistent with every partition assigned so
far in the trace.

>>> from assignors.model import TopicPartition
>>> assembler = TraceAssembler("payments", TopicCatalog.empty())
>>> member = TraceMember("c-1", frozenset({"orders"}), assigned=(TopicPartition("orders", 2),))
>>> assembler.add(Snapshot(4, (member,)), "dump.txt", 9)
>>> assembler.rows[0]["topics"], assembler.rows[0]["reason"]
([{'name': 'orders', 'partitions': 3}], 'first generation seen: 1 member')
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assignors.errors import InputError
from assignors.model import INT64_MAX, INT64_MIN
from assignors.traces.format import TraceMember, parse_generation
from ktkbase import jsonsafe

log = logging.getLogger("assignors.traces.importers")


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record or line an importer passed over (or read with a caveat), and why; binary
    sources (segment files) say where by ``position``, the record's byte in the file."""

    source: str
    line: int | None
    reason: str
    position: int | None = None

    def __str__(self) -> str:
        return f"{place(self.source, self.line, self.position)}: {self.reason}"


def place(source: str, line: int | None, position: int | None = None) -> str:
    """``file:line``, ``file: byte P`` or ``file``, as error messages name places.

    >>> place("dump.txt", 4), place("00000000000000000000.log", None, 762)
    ('dump.txt:4', '00000000000000000000.log: byte 762')
    """
    where = source if line is None else f"{source}:{line}"
    return where if position is None else f"{where}: byte {position}"


@dataclass(frozen=True, slots=True)
class ImportResult:
    """Format-v1 rows (dicts exactly as spec/traces.md writes them, in trace then generation
    order) and what was skipped or noted on the way."""

    rows: tuple[dict[str, Any], ...]
    skipped: tuple[Skipped, ...] = ()

    def trace_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(row["trace_id"] for row in self.rows))


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """``groups``: import only these group ids (None: every group). ``strict``: a record or line
    that breaks its format stops the import with an InputError naming file and line; when
    False it is skipped with a note instead (real captures can hold a few odd records)."""

    groups: frozenset[str] | None = None
    strict: bool = True

    def wants(self, group: object) -> bool:
        return self.groups is None or group in self.groups


# ---------------------------------------------------------------------------------------------
# numbers printed as text

_DECIMAL = re.compile(r"-?\d{1,19}")


def integer_text(text: str, *, source: str, line: int | None, field: str) -> int:
    """A decimal integer a Kafka tool printed (a timestamp, a generation, a record type), checked
    before ``int()``: at most 19 digits and within int64, so a corrupt capture gives an error
    naming its line instead of Python's 4,300-digit ValueError.

    >>> integer_text("-17", source="d.txt", line=2, field="CreateTime")
    -17
    >>> integer_text("9" * 5001, source="d.txt", line=2, field="CreateTime")
    Traceback (most recent call last):
    ...
    assignors.errors.InputError: d.txt:2: CreateTime: must be a 64-bit integer (got '99999999999...
    """
    if _DECIMAL.fullmatch(text) is None or not INT64_MIN <= int(text) <= INT64_MAX:
        shown = text if len(text) <= 14 else text[:11] + "..."
        raise InputError(
            "must be a 64-bit integer", source=source, line=line, field=field, value=shown
        )
    return int(text)


# ---------------------------------------------------------------------------------------------
# the topics side file


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the side file describes it: partition count, optional KIP-848 topic id (the
    base64 Uuid ``kafka-topics.sh --describe`` prints as TopicId) and replica racks."""

    name: str
    partitions: int
    topic_id: str | None = None
    racks: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class TopicCatalog:
    """The ``--topics`` side file: partition counts (they win over anything inferred), topic
    ids, and per-group subscriptions for sources that do not record them."""

    topics: Mapping[str, TopicInfo]
    subscriptions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    source: str | None = None
    # built once: name_of_id is asked for every partition of every target assignment
    _names_by_id: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names_by_id: dict[str, str] = {}
        for info in self.topics.values():
            if info.topic_id is not None:
                names_by_id.setdefault(info.topic_id, info.name)
        object.__setattr__(self, "_names_by_id", names_by_id)

    @classmethod
    def empty(cls) -> TopicCatalog:
        return cls({})

    def name_of_id(self, topic_id: str) -> str | None:
        return self._names_by_id.get(topic_id)

    def subscription_of(self, group: str) -> tuple[str, ...]:
        """The topics a member of ``group`` subscribes to when its source does not say: the
        group's entry under "subscriptions", else every topic of the file."""
        if group in self.subscriptions:
            return self.subscriptions[group]
        return tuple(sorted(self.topics))


def _topic_info(name: str, raw: object, source: str) -> TopicInfo:
    def bad(message: str, value: object, where: str = "") -> InputError:
        return InputError(message, source=source, field=f"{name}{where}", value=value)

    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"partitions": raw}
    if not isinstance(raw, Mapping):
        raise bad('must be a partition count or an object with "partitions"', raw)
    count = raw.get("partitions")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise bad("must be an integer >= 0", count, ".partitions")
    topic_id = raw.get("id")
    if topic_id is not None and not isinstance(topic_id, str):
        raise bad("must be the topic id text", topic_id, ".id")
    racks_raw = raw.get("racks")
    racks = None
    if racks_raw is not None:
        if (
            not isinstance(racks_raw, list)
            or len(racks_raw) != count
            or not all(
                isinstance(entry, list) and all(isinstance(rack, str) for rack in entry)
                for entry in racks_raw
            )
        ):
            raise bad(
                f"must list the replica racks of each of the {count} partitions",
                racks_raw,
                ".racks",
            )
        racks = tuple(tuple(entry) for entry in racks_raw)
    unknown = sorted(set(raw) - {"partitions", "id", "racks"})
    if unknown:
        raise bad("unknown key (expected partitions, id, racks)", unknown[0])
    return TopicInfo(name, count, topic_id, racks)


def parse_topics_file(text: str, source: str) -> TopicCatalog:
    """Read the side file: ``{"orders": 24, ...}``, or with ids/racks
    ``{"orders": {"partitions": 24, "id": "Yc5...", "racks": [["a","b"], ...]}}``, or both
    parts: ``{"topics": {...}, "subscriptions": {"group": ["orders"]}}``.

    >>> text = '{"orders": 3, "audit": {"partitions": 1, "id": "x"}}'
    >>> catalog = parse_topics_file(text, "t.json")
    >>> catalog.topics["orders"].partitions, catalog.name_of_id("x")
    (3, 'audit')
    >>> parse_topics_file('{"orders": -1}', "t.json")
    Traceback (most recent call last):
    ...
    assignors.errors.InputError: t.json: orders.partitions: must be an integer >= 0 (got -1)
    """
    try:
        document = jsonsafe.loads(text, source=source)
    except jsonsafe.JSONInputError as error:
        raise InputError(
            error.message,
            source=source,
            line=error.line,
            field="topics file" if error.field is None else f"topics file: {error.field}",
            value=error.value,
        ) from None
    if not isinstance(document, Mapping):
        raise InputError(
            "must be a JSON object",
            source=source,
            field="topics file",
            value=type(document).__name__,
        )
    subscriptions: dict[str, tuple[str, ...]] = {}
    topics_raw: Mapping[str, object] = document
    if "topics" in document and isinstance(document["topics"], Mapping):
        topics_raw = document["topics"]
        raw_subscriptions = document.get("subscriptions", {})
        if not isinstance(raw_subscriptions, Mapping):
            raise InputError(
                "must map group ids to topic lists",
                source=source,
                field="subscriptions",
                value=raw_subscriptions,
            )
        for group, names in raw_subscriptions.items():
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise InputError(
                    "must be a list of topic names",
                    source=source,
                    field=f"subscriptions.{group}",
                    value=names,
                )
            subscriptions[group] = tuple(sorted(set(names)))
        extra = sorted(set(document) - {"topics", "subscriptions"})
        if extra:
            raise InputError(
                "unknown key (expected topics, subscriptions)", source=source, field=extra[0]
            )
    topics = {name: _topic_info(name, raw, source) for name, raw in sorted(topics_raw.items())}
    return TopicCatalog(topics, subscriptions, source)


# ---------------------------------------------------------------------------------------------
# snapshots -> rows


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A group at one generation as a source recorded it (members as a trace records them;
    ``assigned`` None = the source does not say). ``partition_counts`` and
    ``replica_racks`` are what the records state (KIP-848 topic metadata)."""

    generation: int
    members: tuple[TraceMember, ...]
    timestamp_ms: int | None = None
    protocol: str | None = None
    reason: str | None = None
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    replica_racks: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    group_protocol: str | None = None


def note(
    notes: list[Skipped] | None,
    source: str,
    line: int | None,
    reason: str,
    position: int | None = None,
) -> None:
    """Log that ``source:line`` (or the record at byte ``position``) was passed over (or read
    with a caveat), and keep the note in ``notes`` when given."""
    skipped = Skipped(source, line, reason, position)
    log.info("%s", skipped)
    if notes is not None:
        notes.append(skipped)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def membership_change(
    previous: Sequence[TraceMember] | None, current: Sequence[TraceMember]
) -> str:
    """A one-line account of who joined and left since the previous generation.

    >>> a, b = (TraceMember(name, frozenset()) for name in "ab")
    >>> membership_change([a], [b])
    'joined: b; left: a'
    """
    if previous is None:
        return f"first generation seen: {_plural(len(current), 'member')}"
    before = {member.identity for member in previous}
    after = {member.identity for member in current}
    parts = []
    if after - before:
        parts.append("joined: " + ", ".join(sorted(after - before)))
    if before - after:
        parts.append("left: " + ", ".join(sorted(before - after)))
    return "; ".join(parts) if parts else "same members"


class TraceAssembler:
    """Rows of one group, possibly over several incarnations (delete and re-create)."""

    def __init__(self, group: str, catalog: TopicCatalog) -> None:
        self.group = group
        self.catalog = catalog
        self.rows: list[dict[str, Any]] = []
        self.skipped: list[Skipped] = []
        self._incarnation = 1
        self._counts: dict[str, int] = {}
        self._last: Snapshot | None = None
        self._before_last: Snapshot | None = None

    @property
    def trace_id(self) -> str:
        return self.group if self._incarnation == 1 else f"{self.group}#{self._incarnation}"

    def skip(self, source: str, line: int | None, reason: str, position: int | None = None) -> None:
        note(self.skipped, source, line, reason, position)

    def end_incarnation(
        self, source: str, line: int | None, why: str, position: int | None = None
    ) -> None:
        """The group was deleted: later snapshots of the same group id start a new trace."""
        if self._last is None:
            return
        self.skip(
            source, line, f"group {self.group}: {why}; later records start a new trace", position
        )
        self._incarnation += 1
        self._counts = {}
        self._last = None
        self._before_last = None

    def add(
        self, snapshot: Snapshot, source: str, line: int | None, position: int | None = None
    ) -> None:
        """Add the row of one snapshot. A snapshot whose row would break the trace format
        raises InputError naming ``source:line`` (or byte ``position``) and leaves the
        assembler as it was."""
        kept = len(self.rows) - 1  # _add replaces at most the last row, then appends
        saved = (
            self.rows[kept:] if kept >= 0 else [],
            len(self.skipped),
            self._incarnation,
            dict(self._counts),
            self._last,
            self._before_last,
        )
        try:
            self._add(snapshot, source, line, position)
        except InputError as error:
            last_row, skipped, self._incarnation, self._counts, self._last, self._before_last = (
                saved
            )
            del self.rows[max(kept, 0) :]
            self.rows.extend(last_row)
            del self.skipped[skipped:]
            if position is not None and error.source == source:
                raise error.located(position=position) from None
            raise

    def _add(self, snapshot: Snapshot, source: str, line: int | None, position: int | None) -> None:
        if self._last is not None and snapshot.generation < self._last.generation:
            self.end_incarnation(
                source,
                line,
                f"generation went back from {self._last.generation} to {snapshot.generation}",
                position,
            )
        previous = self._last
        if previous is not None and snapshot.generation == previous.generation:
            self.skip(
                source,
                line,
                f"group {self.group}: generation {snapshot.generation} "
                "recorded again; the later record replaces the earlier",
                position,
            )
            self.rows.pop()
            previous = self._before_last
        else:
            self._before_last = previous
        row = self._row(snapshot, previous, source, line, position)
        # the row must pass the trace reader's checks; a failure names the capture's line
        parse_generation(row, source, line)
        self.rows.append(row)
        self._last = snapshot

    def _partition_count(
        self, topic: str, snapshot: Snapshot, assigned_max: int, where: str
    ) -> int:
        info = self.catalog.topics.get(topic)
        if info is not None:
            if assigned_max >= info.partitions:
                raise InputError(
                    f"the topics file gives {topic!r} {info.partitions} partitions but "
                    f"{where} assigns partition {assigned_max}",
                    source=self.catalog.source,
                    field=f"{topic}.partitions",
                    value=info.partitions,
                )
            return info.partitions
        stated = snapshot.partition_counts.get(topic, 0)
        count = max(self._counts.get(topic, 0), stated, assigned_max + 1)
        self._counts[topic] = count
        return count

    def _row(
        self,
        snapshot: Snapshot,
        previous: Snapshot | None,
        source: str,
        line: int | None,
        position: int | None = None,
    ) -> dict[str, Any]:
        member_ids = [member.member_id for member in snapshot.members]
        if len(set(member_ids)) != len(member_ids):
            twice = sorted({name for name in member_ids if member_ids.count(name) > 1})
            raise InputError(
                "member id appears twice in one generation",
                source=source,
                line=line,
                field="members",
                value=twice[0],
            )
        highest: dict[str, int] = {}
        for member in snapshot.members:
            for topic in member.topics:
                highest.setdefault(topic, -1)
            for topic, partition in member.assigned or ():
                if partition < 0:
                    raise InputError(
                        "negative partition number",
                        source=source,
                        line=line,
                        field=f"member {member.member_id}.assigned",
                        value=[topic, partition],
                    )
                highest[topic] = max(highest.get(topic, -1), partition)
        topics = []
        for topic in sorted(highest):
            count = self._partition_count(
                topic, snapshot, highest[topic], place(source, line, position)
            )
            if count == 0 and topic not in self.catalog.topics:
                continue  # nothing says the topic has partitions: leave it out of the group
            topic_row: dict[str, Any] = {"name": topic, "partitions": count}
            info = self.catalog.topics.get(topic)
            racks = (
                info.racks
                if info is not None and info.racks is not None
                else (snapshot.replica_racks.get(topic))
            )
            if racks is not None and len(racks) == count:
                topic_row["racks"] = [sorted(entry) for entry in racks]
            topics.append(topic_row)
        members = []
        for member in sorted(snapshot.members, key=lambda item: item.member_id):
            member_row: dict[str, Any] = {
                "member_id": member.member_id,
                "instance_id": member.instance_id,
                "rack": member.rack,
                "topics": sorted(set(member.topics)),
            }
            if member.assigned is not None:
                member_row["assigned"] = [
                    [topic, partition] for topic, partition in sorted(set(member.assigned))
                ]
            members.append(member_row)
        row: dict[str, Any] = {"trace_id": self.trace_id, "generation": snapshot.generation}
        if snapshot.timestamp_ms is not None:
            row["timestamp_ms"] = snapshot.timestamp_ms
        if snapshot.protocol is not None:
            row["protocol"] = snapshot.protocol
        change = membership_change(None if previous is None else previous.members, snapshot.members)
        row["reason"] = change if snapshot.reason is None else f"{snapshot.reason}; {change}"
        if snapshot.group_protocol is not None:
            row["group_protocol"] = snapshot.group_protocol
        row["topics"] = topics
        row["members"] = members
        return row


def lines_of(text: str | Iterable[str]) -> Iterator[str]:
    """The lines of a whole text, or of an iterable of lines (an open file: read as it goes),
    without their line ends."""
    if isinstance(text, str):
        yield from text.splitlines()
    else:
        for line in text:
            yield line.rstrip("\r\n")


def in_file_order(notes: Iterable[Skipped]) -> tuple[Skipped, ...]:
    """Notes sorted by file (in the order files first appear) then line (or byte)."""
    listed = list(notes)
    rank = {
        source: index for index, source in reversed(list(enumerate(note.source for note in listed)))
    }
    return tuple(
        sorted(listed, key=lambda note: (rank[note.source], note.line or 0, note.position or 0))
    )


def collect(assemblers: Iterable[TraceAssembler], skipped: Iterable[Skipped] = ()) -> ImportResult:
    """All assemblers' rows (groups sorted by id) and skip notes (in file order) in one result."""
    ordered = sorted(assemblers, key=lambda assembler: assembler.group)
    rows = tuple(row for assembler in ordered for row in assembler.rows)
    notes = (*skipped, *(note for assembler in ordered for note in assembler.skipped))
    return ImportResult(rows, in_file_order(notes))
