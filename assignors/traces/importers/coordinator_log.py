"""Broker group-coordinator log lines -> trace rows (membership and timing per generation).

Both coordinators log at INFO in the layout ``[%d] %p %m (%c)``: the old Scala
``kafka.coordinator.group.GroupCoordinator`` (prefix ``[GroupCoordinator 1]: ``, the default in
3.x) and the new ``org.apache.kafka.coordinator.group.GroupMetadataManager`` (prefix
``[GroupCoordinator id=1 topic=__consumer_offsets partition=33] ``, 4.x), which also runs
KIP-848 consumer groups (``[GroupId g] ...`` lines).

- classic groups: a row per ``Stabilized group G generation N ... with K members``, holding the
  members the join, leave and failure lines named so far; the reason is that of the
  ``Preparing to rebalance`` line and the time from it to stabilisation. ``Group G with
  generation N is now empty`` gives a row without members.
- KIP-848 groups: a row per ``Computed a new target assignment for epoch E with 'A' assignor in
  T ms``, holding the members joined and not yet left or fenced, with ``A`` as the protocol. At
  DEBUG (and on brokers that logged it at INFO) the line ends with the whole target assignment by
  topic id; it then gives the membership and, with topic ids in the side file, ``assigned``.

Otherwise logs do not say who got which partition, nor (classic) what members subscribe to:
partition counts and subscriptions come from the topics side file. Timestamps are read as UTC.
A line that starts like a known coordinator message but does not parse raises InputError naming
file:line.

>>> log_text = '''\\
... [2026-01-05 10:00:00,000] INFO [GroupCoordinator 1]: Preparing to rebalance group g in \
state PreparingRebalance with old generation 0 (__consumer_offsets-7) (reason: Adding new \
member c-1 with group instance id None; client reason: not provided) \
(kafka.coordinator.group.GroupCoordinator)
... [2026-01-05 10:00:03,000] INFO [GroupCoordinator 1]: Stabilized group g generation 1 \
(__consumer_offsets-7) with 1 members (kafka.coordinator.group.GroupCoordinator)'''
>>> from assignors.traces.importers.common import TopicInfo
>>> catalog = TopicCatalog({"t": TopicInfo("t", 4)})
>>> row = import_coordinator_log([("server.log", log_text)], catalog).rows[0]
>>> row["generation"], row["timestamp_ms"], row["members"], row["topics"]
(1, 1767607203000, [{'member_id': 'c-1', 'instance_id': None, 'rack': None, 'topics': ['t']}], \
[{'name': 't', 'partitions': 4}])
>>> row["reason"]
'Adding new member c-1 with group instance id None; client reason: not provided; rebalance \
took 3000 ms; first generation seen: 1 member'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.traces.format import TraceMember
from assignors.traces.importers.common import (
    ImportOptions,
    ImportResult,
    Skipped,
    Snapshot,
    TopicCatalog,
    TraceAssembler,
    collect,
    integer_text,
    lines_of,
    note,
)

_LAYOUT = re.compile(r"^\[(?P<time>[^\]]+)\] (?P<level>[A-Z]+) (?P<body>.*)$")
_LOGGER_SUFFIX = re.compile(
    r" \((?:kafka\.coordinator\.group\.GroupCoordinator|"
    r"org\.apache\.kafka\.coordinator\.group\.[\w$]+)\)$"
)
_PREFIX = re.compile(r"^\[GroupCoordinator (?:id=)?\d+[^\]]*\]:? ")
_OFFSETS_PARTITION = r"(?: \(__consumer_offsets-\d+\))?"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIME_FORMATS = (
    "%Y-%m-%d %H:%M:%S,%f",
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%dT%H:%M:%S,%f",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y-%m-%d %H:%M:%S",
)


def _timestamp_ms(text: str) -> int | None:
    """Milliseconds since the epoch of a log4j date read as UTC (None for a time of day only)."""
    for pattern in _TIME_FORMATS:
        try:
            moment = datetime.strptime(text.strip(), pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
        return (moment - _EPOCH) // timedelta(milliseconds=1)
    return None


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One coordinator message that changes a group, with where and when it was logged."""

    group: str
    kind: str
    fields: tuple[tuple[str, str], ...]
    timestamp_ms: int | None
    source: str
    line: int


# (kind, pattern); the keyword before each list marks lines that must match one of them
_Patterns = tuple[tuple[str, re.Pattern[str]], ...]


def _compile(*entries: tuple[str, str]) -> _Patterns:
    return tuple((kind, re.compile(pattern + r"$")) for kind, pattern in entries)


_CLASSIC: tuple[tuple[str, _Patterns], ...] = (
    (
        "Preparing to rebalance group ",
        _compile(
            (
                "prepare",
                r"Preparing to rebalance group (?P<group>\S+) in state (?P<state>\S+) with old "
                r"generation (?P<generation>-?\d+)"
                + _OFFSETS_PARTITION
                + r" \(reason: (?P<reason>.*)\)\.?",
            )
        ),
    ),
    (
        "Stabilized group ",
        _compile(
            (
                "stabilized",
                r"Stabilized group (?P<group>\S+) generation (?P<generation>\d+)"
                + _OFFSETS_PARTITION
                + r" with (?P<count>\d+) members\.?",
            )
        ),
    ),
    (
        " is now empty",
        _compile(
            (
                "empty",
                r"Group (?P<group>\S+) with generation (?P<generation>\d+) is now empty"
                + _OFFSETS_PARTITION
                + r"\.?",
            )
        ),
    ),
    (
        "Pending dynamic member with id ",
        _compile(
            (
                "join",
                r"Pending dynamic member with id (?P<member>\S+) joins group (?P<group>\S+) in "
                r"\S+ state\. Adding to the group now\.",
            )
        ),
    ),
    (
        "ynamic member with unknown member id joins group ",
        _compile(
            (
                "pending",
                r"Dynamic member with unknown member id joins group (?P<group>\S+) in "
                r"\S+ state\. Created a new member id (?P<member>\S+) and request(?:ing)? the "
                r"member to rejoin with this id\.",
            ),
            (
                "join",
                r"Dynamic [Mm]ember with unknown member id joins group (?P<group>\S+) in \S+ "
                r"state\. Created a new member id (?P<member>\S+) for this member and add to "
                r"the group\.",
            ),
            (
                "join",
                r"Dynamic member with unknown member id joins group (?P<group>\S+) in state "
                r"\S+\. Created a new member id (?P<member>\S+) and added the member to the "
                r"group\.",
            ),
        ),
    ),
    (
        "Static member with groupInstanceId=",
        _compile(
            (
                "join_static",
                r"Static member with groupInstanceId=(?P<instance>\S+) and unknown member "
                r"id joins group (?P<group>\S+) in \S+ state\. Created a new member id "
                r"(?P<member>\S+) for this member and add(?:ed)? to the group\.",
            ),
            (
                "replace_static",
                r"Static member with groupInstanceId=(?P<instance>\S+) and unknown "
                r"member id joins group (?P<group>\S+) in \S+ state\. Replacing "
                r"previously mapped member (?P<old>\S+) with this groupInstanceId\.",
            ),
        ),
    ),
    (
        "has left group ",
        _compile(
            (
                "leave",
                r"Member MemberMetadata\(memberId=(?P<member>[^,]+), groupInstanceId=[^,]*,.*\) "
                r"has left group (?P<group>\S+) through explicit `LeaveGroup`; client reason: "
                r".*",
            ),
            (
                "leave",
                r"\[Group (?P<group>\S+)\] (?:Dynamic |Static |Pending )?[Mm]ember "
                r"(?P<member>\S+)(?: with instance id \S+)? has left group through explicit "
                r"`LeaveGroup`(?: request)?; client reason: .*",
            ),
        ),
    ),
    (
        " has failed, removing it from the group",
        _compile(
            (
                "leave",
                r"Member (?P<member>\S+) in group (?P<group>\S+) has failed, removing it from "
                r"the group\.?",
            )
        ),
    ),
    (
        " removed dynamic members who haven't joined: ",
        _compile(
            (
                "leave_many",
                r"Group (?P<group>\S+) removed dynamic members who haven't joined: "
                r"(?P<members>.*)",
            )
        ),
    ),
)

_CONSUMER: tuple[tuple[str, _Patterns], ...] = (
    (
        " joins the consumer group",
        _compile(
            (
                "join",
                r"Member (?P<member>\S+) joins the consumer group(?: using the \S+ protocol)?\.",
            ),
            (
                "join_static",
                r"Static member (?P<member>\S+) with instance id (?P<instance>\S+) joins "
                r"the consumer group(?: using the \S+ protocol)?\.",
            ),
        ),
    ),
    (
        " re-joins the consumer group using the ",
        _compile(
            (
                "rejoin_static",
                r"Static member with instance id (?P<instance>\S+) re-joins the "
                r"consumer group using the \S+ protocol\. Created a new member "
                r"(?P<member>\S+) to replace the existing member (?P<old>\S+)\.",
            ),
        ),
    ),
    (
        "Bumped group epoch to ",
        _compile(
            ("bump", r"Bumped group epoch to (?P<epoch>\d+)(?: with metadata hash -?\d+)?\."),
        ),
    ),
    (
        "Computed a new target assignment for epoch ",
        _compile(
            # 4.x INFO; DEBUG (and 3.8 INFO) append the assignment; 3.7 had no assignor or time
            (
                "target",
                r"Computed a new target assignment for epoch (?P<epoch>\d+)(?: with "
                r"'(?P<assignor>[^']*)' assignor)?(?: in (?P<took>\d+)ms)?"
                r"(?:\.|: (?P<assignment>.*)\.)",
            ),
        ),
    ),
    (
        "temporarily left the consumer group",
        _compile(
            (
                "static_away",
                r"Static Member (?P<member>\S+) with instance id (?P<instance>\S+) "
                r"temporarily left the consumer group\.",
            ),
        ),
    ),
    (
        "left the consumer group.",
        _compile(
            ("leave", r"Member (?P<member>\S+) left the consumer group\."),
            (
                "leave",
                r"Static Member (?P<member>\S+) with instance id \S+ left the consumer "
                r"group\.",
            ),
        ),
    ),
    (
        " fenced from the group because ",
        _compile(
            ("leave", r"Member (?P<member>\S+) fenced from the group because .*"),
        ),
    ),
    (
        " updated its subscribed topics to: ",
        _compile(
            (
                "subscribe",
                r"Member (?P<member>\S+) updated its subscribed topics to: "
                r"\[(?P<topics>.*)\]\.",
            ),
        ),
    ),
)

_GROUP_ID_PREFIX = re.compile(r"^\[GroupId (?P<group>[^\]]+)\] ")
_FIELD_ORDER = (
    "member",
    "instance",
    "old",
    "generation",
    "count",
    "reason",
    "members",
    "epoch",
    "assignor",
    "took",
    "assignment",
    "topics",
)


def _match(
    message: str, table: tuple[tuple[str, _Patterns], ...], source: str, line: int
) -> tuple[str, dict[str, str]] | None:
    for keyword, patterns in table:
        if keyword not in message:
            continue
        for kind, pattern in patterns:
            found = pattern.match(message)
            if found:
                return kind, {
                    name: text for name, text in found.groupdict().items() if text is not None
                }
        raise InputError(
            "coordinator message does not follow Kafka's template",
            source=source,
            line=line,
            field="message",
            value=message[:160],
        )
    return None


def _event(line: str, line_number: int, source: str) -> LogEvent | None:
    """The group event a log line records, None for any other line."""
    layout = _LAYOUT.match(line)
    if layout is None:
        return None
    body = _LOGGER_SUFFIX.sub("", layout.group("body"))
    prefix = _PREFIX.match(body)
    if prefix is None:
        return None
    message = body[prefix.end() :]
    consumer_group = _GROUP_ID_PREFIX.match(message)
    found = None
    if consumer_group is not None:
        message = message[consumer_group.end() :]
        found = _match(message, _CONSUMER, source, line_number)
        if found is not None:
            kind, fields = found
            group, kind = consumer_group.group("group"), f"consumer_{kind}"
    if found is None:
        # classic-group messages, with or without a [GroupId g] prefix
        found = _match(message, _CLASSIC, source, line_number)
        if found is None:
            return None
        kind, fields = found
        group = fields.pop("group")
    values = tuple((name, fields[name]) for name in _FIELD_ORDER if name in fields)
    return LogEvent(group, kind, values, _timestamp_ms(layout.group("time")), source, line_number)


def parse_coordinator_log(
    text: str | Iterable[str], source: str, notes: list[Skipped] | None = None, strict: bool = True
) -> list[LogEvent]:
    """The group events of one broker log, in file order (other lines are passed over). A
    coordinator line that breaks its template raises InputError, or, when not ``strict``, is
    noted in ``notes`` and passed over."""
    events: list[LogEvent] = []
    for line_number, line in enumerate(lines_of(text), start=1):
        try:
            event = _event(line, line_number, source)
        except InputError as error:
            if strict:
                raise
            note(notes, source, line_number, f"line skipped: {error}")
            continue
        if event is not None:
            events.append(event)
    return events


def _names(text: str) -> list[str]:
    """Member ids of ``Set(a, b)``, ``[a, b]`` or ``a, b``."""
    inner = re.sub(r"^(?:Set\(|HashSet\(|\[)|[\])]$", "", text.strip().rstrip("."))
    return [name.strip() for name in inner.split(",") if name.strip()]


_MEMBER_ASSIGNMENT = re.compile(
    r"(?P<member>[^\s=,{}]+)=MemberAssignment\(\w+=\{(?P<partitions>[^}]*)\}\)"
)
_TOPIC_PARTITIONS = re.compile(r"(?P<topic_id>[^\s=,]+)=\[(?P<numbers>[\d, ]*)\]")


def _number(fields: dict[str, str], name: str, event: LogEvent) -> int:
    return integer_text(fields[name], source=event.source, line=event.line, field=name)


def _target_assignment(text: str, event: LogEvent) -> dict[str, list[tuple[str, int]]]:
    """``{m1=MemberAssignment(partitions={topicId=[0, 1]}), ...}`` (the DEBUG suffix) by member.

    >>> event = LogEvent("g", "consumer_target", (), None, "s.log", 1)
    >>> _target_assignment("{m1=MemberAssignment(partitions={Ab=[0, 2], Cd=[1]}), "
    ...                    "m2=MemberAssignment(partitions={})}", event)
    {'m1': [('Ab', 0), ('Ab', 2), ('Cd', 1)], 'm2': []}
    """
    members: dict[str, list[tuple[str, int]]] = {}
    for found in _MEMBER_ASSIGNMENT.finditer(text):
        members[found.group("member")] = [
            (
                topic.group("topic_id"),
                integer_text(number, source=event.source, line=event.line, field="assignment"),
            )
            for topic in _TOPIC_PARTITIONS.finditer(found.group("partitions"))
            for number in topic.group("numbers").replace(" ", "").split(",")
            if number
        ]
    if not members and text.strip() not in ("{}", ""):
        raise InputError(
            "target assignment not in the form {member=MemberAssignment(...)}",
            source=event.source,
            line=event.line,
            field="assignment",
            value=text[:160],
        )
    return members


_REASON_MEMBER = re.compile(
    r"^Adding new member (?P<member>\S+) with group instance id (?P<instance>\S+?);"
)
_REASON_STATIC = re.compile(
    r"^Updating metadata for static member (?P<member>\S+) with instance id (?P<instance>\S+?);"
)
_REASON_LEAVE = re.compile(
    r"^(?:Removing|removing) member (?P<member>\S+) on (?:LeaveGroup|"
    r"heartbeat expiration)"
)


def _instance(text: str) -> str | None:
    """Scala prints ``Some(x)``/``None``, the Java coordinator ``x``/``null``."""
    if text in ("None", "null", "Optional.empty"):
        return None
    for wrapper in ("Some(", "Optional["):
        if text.startswith(wrapper):
            return text[len(wrapper) : -1]
    return text


@dataclass(slots=True)
class _GroupState:
    members: dict[str, str | None] = field(default_factory=dict)  # member id -> instance id
    subscriptions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reason: str | None = None
    rebalance_started_ms: int | None = None


class _LogImporter:
    def __init__(self, catalog: TopicCatalog) -> None:
        self.catalog = catalog
        self.groups: dict[str, _GroupState] = {}
        self.assemblers: dict[str, TraceAssembler] = {}

    def assembler(self, group: str) -> TraceAssembler:
        if group not in self.assemblers:
            self.assemblers[group] = TraceAssembler(group, self.catalog)
        return self.assemblers[group]

    def snapshot(
        self,
        group: str,
        state: _GroupState,
        generation: int,
        event: LogEvent,
        reason: str | None,
        protocol: str | None = None,
        assigned: dict[str, tuple[TopicPartition, ...]] | None = None,
        group_protocol: str | None = None,
    ) -> None:
        default_topics = self.catalog.subscription_of(group)
        members = tuple(
            TraceMember(
                member_id,
                frozenset(state.subscriptions.get(member_id, default_topics)),
                instance_id,
                None,
                None if assigned is None else assigned.get(member_id, ()),
            )
            for member_id, instance_id in state.members.items()
        )
        self.assembler(group).add(
            Snapshot(
                generation,
                members,
                event.timestamp_ms,
                protocol,
                reason,
                group_protocol=group_protocol,
            ),
            event.source,
            event.line,
        )

    def feed(self, event: LogEvent) -> None:
        state = self.groups.setdefault(event.group, _GroupState())
        fields = dict(event.fields)
        handler: Callable[[LogEvent, _GroupState, dict[str, str]], None] = getattr(
            self, f"on_{event.kind}"
        )
        handler(event, state, fields)

    # classic groups

    def on_prepare(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        reason = fields["reason"]
        state.reason = reason
        state.rebalance_started_ms = event.timestamp_ms
        joined = _REASON_MEMBER.match(reason) or _REASON_STATIC.match(reason)
        if joined:
            state.members[joined.group("member")] = _instance(joined.group("instance"))
        left = _REASON_LEAVE.match(reason)
        if left:
            state.members.pop(left.group("member"), None)

    def on_stabilized(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        parts = [state.reason] if state.reason else []
        if state.rebalance_started_ms is not None and event.timestamp_ms is not None:
            parts.append(f"rebalance took {event.timestamp_ms - state.rebalance_started_ms} ms")
        logged = _number(fields, "count", event)
        if logged != len(state.members):
            parts.append(
                f"the coordinator counted {logged} members, the log names {len(state.members)}"
            )
        self.snapshot(
            event.group,
            state,
            _number(fields, "generation", event),
            event,
            "; ".join(parts) or None,
        )
        state.reason = None
        state.rebalance_started_ms = None

    def on_empty(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        state.members.clear()
        self.snapshot(
            event.group, state, _number(fields, "generation", event), event, "group is empty"
        )
        state.reason = None
        state.rebalance_started_ms = None

    def on_pending(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        """The member must rejoin with its new id; it joins when it does."""

    def on_join(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        state.members.setdefault(fields["member"], None)

    def on_join_static(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        state.members[fields["member"]] = fields["instance"]

    def on_replace_static(
        self, event: LogEvent, state: _GroupState, fields: dict[str, str]
    ) -> None:
        # the log does not name the new member id; the identity (instance id) is what counts
        state.members[fields["old"]] = fields["instance"]

    def on_leave(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        state.members.pop(fields["member"], None)
        state.subscriptions.pop(fields["member"], None)

    def on_leave_many(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        for member in _names(fields["members"]):
            state.members.pop(member, None)

    # KIP-848 consumer groups

    # joins and leaves read the same as a classic group's
    on_consumer_join = on_join
    on_consumer_join_static = on_join_static
    on_consumer_leave = on_leave

    def on_consumer_rejoin_static(
        self, event: LogEvent, state: _GroupState, fields: dict[str, str]
    ) -> None:
        state.members.pop(fields["old"], None)
        topics = state.subscriptions.pop(fields["old"], None)
        state.members[fields["member"]] = fields["instance"]
        if topics is not None:
            state.subscriptions[fields["member"]] = topics

    def on_consumer_bump(self, event: LogEvent, state: _GroupState, fields: dict[str, str]) -> None:
        if state.rebalance_started_ms is None:
            state.rebalance_started_ms = event.timestamp_ms

    def on_consumer_target(
        self, event: LogEvent, state: _GroupState, fields: dict[str, str]
    ) -> None:
        reason = f"assignor took {fields['took']} ms" if "took" in fields else None
        assigned = None
        if "assignment" in fields:
            target = _target_assignment(fields["assignment"], event)
            # the target covers every member of the group: it is the membership
            state.members = {member_id: state.members.get(member_id) for member_id in target}
            assigned = self.named(target, event)
        self.snapshot(
            event.group,
            state,
            _number(fields, "epoch", event),
            event,
            reason,
            fields.get("assignor"),
            assigned,
            "consumer",
        )
        state.rebalance_started_ms = None

    def named(
        self, target: dict[str, list[tuple[str, int]]], event: LogEvent
    ) -> dict[str, tuple[TopicPartition, ...]] | None:
        """Target partitions by topic name, or None when the topics file lacks an id."""
        unknown = sorted(
            {
                topic_id
                for partitions in target.values()
                for topic_id, _ in partitions
                if self.catalog.name_of_id(topic_id) is None
            }
        )
        if unknown:
            self.assembler(event.group).skip(
                event.source,
                event.line,
                f"group {event.group}: target assignment names topic ids the topics file does "
                f"not map ({', '.join(unknown)}); assignments left out",
            )
            return None
        return {
            member_id: tuple(
                TopicPartition(str(self.catalog.name_of_id(topic_id)), partition)
                for topic_id, partition in partitions
            )
            for member_id, partitions in target.items()
        }

    def on_consumer_static_away(
        self, event: LogEvent, state: _GroupState, fields: dict[str, str]
    ) -> None:
        """A static member that left temporarily keeps its place until its session expires."""

    def on_consumer_subscribe(
        self, event: LogEvent, state: _GroupState, fields: dict[str, str]
    ) -> None:
        state.subscriptions[fields["member"]] = tuple(sorted(set(_names(fields["topics"]))))
        state.members.setdefault(fields["member"], None)

    def result(self, notes: Iterable[Skipped] = ()) -> ImportResult:
        return collect(self.assemblers.values(), notes)


def import_coordinator_log(
    sources: Iterable[tuple[str, str | Iterable[str]]],
    catalog: TopicCatalog,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Trace rows from broker logs given as ``(name, text or lines)`` pairs. Several brokers'
    logs are merged by timestamp (stable, so lines of one file keep their order) when every
    event has a full date; otherwise they are read in the order given."""
    options = options or ImportOptions()
    notes: list[Skipped] = []
    events = [
        event
        for source, text in sources
        for event in parse_coordinator_log(text, source, notes, options.strict)
        if options.wants(event.group)
    ]
    if events and all(event.timestamp_ms is not None for event in events):
        events.sort(key=lambda event: event.timestamp_ms or 0)
    importer = _LogImporter(catalog)
    for event in events:
        try:
            importer.feed(event)
        except InputError as error:
            if options.strict:
                raise
            importer.assembler(event.group).skip(event.source, event.line, f"line skipped: {error}")
    return importer.result(notes)
