"""``__consumer_offsets`` records (as kafka-dump-log and the console formatter print them, or as
:mod:`.segments` decodes them from the segment files' bytes) -> format-v1 rows.

The record type is the key's int16 version:

- 0, 1: committed offsets (counted, not needed for a trace);
- 2: a classic group's ``GroupMetadataValue``, one snapshot per completed generation: members
  with their instance ids, the subscription and assignment each sent (ConsumerProtocol bytes,
  decoded here with :mod:`assignors.protocol.wire` unless the tool already printed them as JSON);
- 3-8: a KIP-848 consumer group: group epoch (3), topic id -> name and partition count (4),
  member subscription (5), target assignment epoch (6) and per-member target (7), current
  member assignment (8). A generation is emitted for each target assignment epoch (type 6):
  the members known then, each assigned its target partitions;
- anything else (share and streams groups, regular expressions) is skipped with a reason.

A tombstone (no value) of type 2 or 3 means the group was deleted; of types 5, 7 and 8 that a
member left.

>>> key = {"group": "g"}
>>> value = {"protocolType": "consumer", "generation": 1, "protocol": "range", "leader": "m",
...          "members": [{"memberId": "m", "groupInstanceId": None,
...                       "subscription": {"topics": ["t"]},
...                       "assignment": {"assignedPartitions": [{"topic": "t",
...                                                              "partitions": [0, 1]}]}}]}
>>> result = rows_from_records([CoordinatorRecord(2, key, value, 3, None, "dump.txt", 4)])
>>> row = result.rows[0]
>>> row["generation"], row["protocol"], row["topics"], row["members"][0]["assigned"]
(1, 'range', [{'name': 't', 'partitions': 2}], [['t', 0], ['t', 1]])
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeVar

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.protocol import wire
from assignors.traces.format import TraceMember
from assignors.traces.importers.common import (
    ImportOptions,
    ImportResult,
    Skipped,
    Snapshot,
    TopicCatalog,
    TraceAssembler,
    collect,
    in_file_order,
    log,
    note,
)

OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One ``__consumer_offsets`` record: the key's type and data, the value's data (None for a
    tombstone) and version, the record timestamp when the tool printed one, and where it was
    (a text's line, or a segment file's byte ``position``)."""

    key_type: int
    key: Mapping[str, Any]
    value: Mapping[str, Any] | None
    value_version: int | None
    timestamp_ms: int | None
    source: str
    line: int | None
    record_number: int | None = None  # for outputs that put many records on one line
    position: int | None = None  # for binary sources: the record's byte in the file

    def fail(
        self, message: str, field_name: str, value: object = InputError._NO_VALUE
    ) -> InputError:
        where = (
            field_name
            if self.record_number is None
            else (f"record {self.record_number}: {field_name}")
        )
        return InputError(
            message,
            source=self.source,
            line=self.line,
            position=self.position,
            field=where,
            value=value,
        )

    def text(
        self, node: Mapping[str, Any], name: str, where: str, *, nullable: bool = False
    ) -> str | None:
        value = node.get(name)
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise self.fail("must be text", f"{where}{name}", value)
        return value

    def integer(
        self, node: Mapping[str, Any], name: str, where: str, default: int | None = None
    ) -> int:
        value = node.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail("must be an integer", f"{where}{name}", value)
        return value

    def array(self, node: Mapping[str, Any], name: str, where: str) -> list[Any]:
        value = node.get(name, [])
        if not isinstance(value, list):
            raise self.fail("must be a list", f"{where}{name}", value)
        return value

    def group(self) -> str:
        """The group id: ``group`` in type 2 keys, ``groupId`` in KIP-848 keys."""
        name = "group" if self.key_type == GROUP_METADATA else "groupId"
        return str(self.text(self.key, name, "key."))


# ---------------------------------------------------------------------------------------------
# classic groups (type 2)


def _decoded(
    record: CoordinatorRecord, node: object, where: str, kind: str
) -> wire.Subscription | wire.MemberAssignment | None:
    """A subscription or assignment printed as Kafka's JSON, as base64 of the wire bytes
    (the formatter always; dump-log when its own decoding failed), or the bytes themselves (a
    segment file). Empty bytes: none stored."""
    if node is None:
        return None
    if isinstance(node, bytes):
        return _decoded_bytes(record, node, where, kind, node)
    if isinstance(node, Mapping):
        try:
            if kind == "subscription":
                return wire.subscription_from_json(node, field=where)
            return wire.assignment_from_json(node, field=where)
        except InputError as error:
            raise record.fail(error.message, error.field or where, error.value) from None
    if not isinstance(node, str):
        raise record.fail(f"must be the {kind} JSON or its base64 bytes", where, node)
    try:
        data = base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError):
        raise record.fail("not valid base64", where, node) from None
    return _decoded_bytes(record, data, where, kind, node)


def _decoded_bytes(
    record: CoordinatorRecord, data: bytes, where: str, kind: str, shown: object
) -> wire.Subscription | wire.MemberAssignment | None:
    if not data:
        return None
    try:
        if kind == "subscription":
            return wire.decode_subscription(data)
        return wire.decode_assignment(data)
    except InputError as error:
        raise record.fail(f"{error.message} in {error.field}", where, shown) from None


def _subscribed(
    record: CoordinatorRecord, node: object, where: str
) -> tuple[tuple[str, ...], str | None]:
    """Subscribed topics and rack; decoded JSON is read directly (owned partitions, which a
    trace does not need, are skipped: the cost of a big group is in them)."""
    if isinstance(node, Mapping):
        topics = node.get("topics", [])
        if not isinstance(topics, list) or not all(isinstance(topic, str) for topic in topics):
            raise record.fail("topics must be a list of names", f"{where}.topics", topics)
        rack = node.get("rackId")
        if rack is not None and not isinstance(rack, str):
            raise record.fail("rackId must be text or null", f"{where}.rackId", rack)
        return tuple(topics), rack
    subscription = _decoded(record, node, where, "subscription")
    if subscription is None:
        return (), None
    assert isinstance(subscription, wire.Subscription)
    return subscription.topics, subscription.rack_id


def classic_snapshot(record: CoordinatorRecord) -> Snapshot | None:
    """The generation a GroupMetadataValue records, or None when it is not a consumer group."""
    value = record.value
    assert value is not None
    protocol_type = record.text(value, "protocolType", "value.")
    if protocol_type != "consumer":
        return None
    generation = record.integer(value, "generation", "value.")
    protocol = record.text(value, "protocol", "value.", nullable=True)
    state_time = record.integer(value, "currentStateTimestamp", "value.", default=-1)
    members: list[TraceMember] = []
    for index, member in enumerate(record.array(value, "members", "value.")):
        where = f"value.members[{index}]."
        if not isinstance(member, Mapping):
            raise record.fail("must be an object", where.rstrip("."), member)
        member_id = str(record.text(member, "memberId", where))
        instance_id = record.text(member, "groupInstanceId", where, nullable=True)
        topics, rack = _subscribed(record, member.get("subscription"), f"{where}subscription")
        assignment = _decoded(record, member.get("assignment"), f"{where}assignment", "assignment")
        assert assignment is None or isinstance(assignment, wire.MemberAssignment)
        members.append(
            TraceMember(
                member_id=member_id,
                topics=frozenset(topics),
                instance_id=instance_id,
                rack=rack,
                assigned=None if assignment is None else assignment.assigned_partitions,
            )
        )
    reason = "group is empty" if not members else None
    return Snapshot(
        generation=generation,
        members=tuple(members),
        timestamp_ms=state_time if state_time >= 0 else record.timestamp_ms,
        protocol=protocol,
        reason=reason,
    )


# ---------------------------------------------------------------------------------------------
# KIP-848 consumer groups (types 3-8)


class _TopicMetadata(NamedTuple):
    name: str
    partitions: int
    replica_racks: tuple[tuple[str, ...], ...] | None


class _MemberMetadata(NamedTuple):
    instance_id: str | None
    rack: str | None
    topic_names: tuple[str, ...]
    topic_regex: str | None
    server_assignor: str | None


class _TargetPartitions(NamedTuple):
    """Partitions of one topic id in a member's target, and the record that said so."""

    topic_id: str
    partitions: tuple[int, ...]
    source: str
    line: int | None
    position: int | None


class _PendingGeneration(NamedTuple):
    snapshot: Snapshot
    source: str
    line: int | None
    position: int | None


@dataclass(slots=True)
class _ConsumerGroup:
    """What the records of one KIP-848 group have said so far."""

    topics_by_id: dict[str, _TopicMetadata] = field(default_factory=dict)
    members: dict[str, _MemberMetadata] = field(default_factory=dict)
    targets: dict[str, list[_TargetPartitions]] = field(default_factory=dict)
    pending: _PendingGeneration | None = None
    reconciled: set[str] = field(default_factory=set)


def _uuid_text(record: CoordinatorRecord, node: Mapping[str, Any], where: str) -> str:
    return str(record.text(node, "topicId", where))


class _OffsetsImporter:
    def __init__(self, catalog: TopicCatalog, options: ImportOptions) -> None:
        self.catalog = catalog
        self.options = options
        self.assemblers: dict[str, TraceAssembler] = {}
        self.consumer_groups: dict[str, _ConsumerGroup] = {}
        self.skipped: list[Skipped] = []
        self.offset_commits = 0

    def assembler(self, group: str) -> TraceAssembler:
        if group not in self.assemblers:
            self.assemblers[group] = TraceAssembler(group, self.catalog)
        return self.assemblers[group]

    def skip(self, record: CoordinatorRecord, reason: str) -> None:
        note(self.skipped, record.source, record.line, reason, record.position)

    def feed(self, record: CoordinatorRecord) -> None:
        if record.key_type in OFFSET_COMMIT_TYPES:
            self.offset_commits += 1
            return
        if not self.options.wants(record.key.get("groupId", record.key.get("group"))):
            return
        try:
            self.dispatch(record)
        except InputError as error:
            if self.options.strict:
                raise
            self.skip(record, f"record skipped: {error}")

    def dispatch(self, record: CoordinatorRecord) -> None:
        if record.key_type == GROUP_METADATA:
            self.classic(record)
        elif CONSUMER_GROUP_METADATA <= record.key_type <= CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            self.consumer(record)
        else:
            self.skip(
                record,
                f"record type {record.key_type} skipped: it carries nothing a "
                "trace uses (share or streams groups, regular expressions)",
            )

    def classic(self, record: CoordinatorRecord) -> None:
        group = record.group()
        if record.value is None:
            self.assembler(group).end_incarnation(
                record.source, record.line, "deleted (tombstone)", record.position
            )
            return
        snapshot = classic_snapshot(record)
        if snapshot is None:
            self.skip(
                record,
                f"group {group} skipped: protocol type "
                f"{record.value.get('protocolType')!r} is not 'consumer'",
            )
            return
        self.assembler(group).add(snapshot, record.source, record.line, record.position)

    def consumer(self, record: CoordinatorRecord) -> None:
        group = record.group()
        state = self.consumer_groups.setdefault(group, _ConsumerGroup())
        value = record.value
        kind = record.key_type
        if kind == CONSUMER_GROUP_METADATA:
            if value is None:
                self.flush(group)
                self.assembler(group).end_incarnation(
                    record.source, record.line, "deleted (tombstone)", record.position
                )
                self.consumer_groups[group] = _ConsumerGroup()
            else:
                record.integer(value, "epoch", "value.")  # the target epoch (type 6) is used
        elif kind == CONSUMER_GROUP_PARTITION_METADATA:
            if value is not None:
                self.topic_metadata(record, state, value)
        elif kind == CONSUMER_GROUP_MEMBER_METADATA:
            member_id = str(record.text(record.key, "memberId", "key."))
            if value is None:
                state.members.pop(member_id, None)
                state.targets.pop(member_id, None)
            else:
                state.members[member_id] = self.member_metadata(record, value)
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            member_id = str(record.text(record.key, "memberId", "key."))
            if value is None:
                state.targets.pop(member_id, None)
            else:
                state.targets[member_id] = self.topic_partitions(record, value, "topicPartitions")
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            if value is not None:
                epoch = record.integer(value, "assignmentEpoch", "value.")
                # 4.3+ (KIP-1263) records when the assignment was computed
                computed_at = record.integer(value, "assignmentTimestamp", "value.", default=0)
                self.flush(group)
                snapshot = self.target_snapshot(group, state, epoch, record)
                if computed_at > 0:
                    snapshot = replace(snapshot, timestamp_ms=computed_at)
                state.pending = _PendingGeneration(
                    snapshot, record.source, record.line, record.position
                )
        elif kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT and value is not None:
            member_id = str(record.text(record.key, "memberId", "key."))
            epoch = record.integer(value, "memberEpoch", "value.")
            if state.pending is not None and epoch == state.pending.snapshot.generation:
                state.reconciled.add(member_id)

    def topic_metadata(
        self, record: CoordinatorRecord, state: _ConsumerGroup, value: Mapping[str, Any]
    ) -> None:
        for index, topic in enumerate(record.array(value, "topics", "value.")):
            where = f"value.topics[{index}]."
            if not isinstance(topic, Mapping):
                raise record.fail("must be an object", where.rstrip("."), topic)
            topic_id = _uuid_text(record, topic, where)
            name = str(record.text(topic, "topicName", where))
            count = record.integer(topic, "numPartitions", where)
            metadata = topic.get("partitionMetadata", topic.get("partitionRacks", []))
            if not isinstance(metadata, list):
                raise record.fail("must be a list", f"{where}partitionMetadata", metadata)
            # racks of the partitions listed; never one slot per stated partition (a corrupt
            # count of 2**31 must not allocate)
            racks: dict[int, tuple[str, ...]] = {}
            for entry in metadata:
                if isinstance(entry, Mapping) and isinstance(entry.get("partition"), int):
                    partition = entry["partition"]
                    if 0 <= partition < count and isinstance(entry.get("racks"), list):
                        racks[partition] = tuple(str(rack) for rack in entry["racks"])
            known_racks = None
            if metadata and len(racks) == count and all(racks.values()):
                known_racks = tuple(racks[partition] for partition in range(count))
            state.topics_by_id[topic_id] = _TopicMetadata(name, count, known_racks)

    def member_metadata(
        self, record: CoordinatorRecord, value: Mapping[str, Any]
    ) -> _MemberMetadata:
        instance_id = record.text(value, "instanceId", "value.", nullable=True)
        rack = record.text(value, "rackId", "value.", nullable=True)
        names = record.array(value, "subscribedTopicNames", "value.")
        if not all(isinstance(name, str) for name in names):
            raise record.fail("must be a list of topic names", "value.subscribedTopicNames", names)
        regex = record.text(value, "subscribedTopicRegex", "value.", nullable=True) or None
        assignor = record.text(value, "serverAssignor", "value.", nullable=True)
        return _MemberMetadata(instance_id, rack, tuple(names), regex, assignor)

    def topic_partitions(
        self, record: CoordinatorRecord, value: Mapping[str, Any], name: str
    ) -> list[_TargetPartitions]:
        entries = []
        for index, entry in enumerate(record.array(value, name, "value.")):
            where = f"value.{name}[{index}]."
            if not isinstance(entry, Mapping):
                raise record.fail("must be an object", where.rstrip("."), entry)
            partitions = record.array(entry, "partitions", where)
            if not all(isinstance(p, int) and not isinstance(p, bool) for p in partitions):
                raise record.fail("must be a list of integers", f"{where}partitions", partitions)
            entries.append(
                _TargetPartitions(
                    _uuid_text(record, entry, where),
                    tuple(partitions),
                    record.source,
                    record.line,
                    record.position,
                )
            )
        return entries

    def topic_name(self, state: _ConsumerGroup, topic_id: str, target: _TargetPartitions) -> str:
        known = state.topics_by_id.get(topic_id)
        if known is not None:
            return known.name
        name = self.catalog.name_of_id(topic_id)
        if name is None:
            raise InputError(
                "topic id not named by any ConsumerGroupPartitionMetadata record (type 4); "
                'give --topics with an "id" for it',
                source=target.source,
                line=target.line,
                position=target.position,
                field="topicId",
                value=topic_id,
            )
        return name

    def target_snapshot(
        self, group: str, state: _ConsumerGroup, epoch: int, record: CoordinatorRecord
    ) -> Snapshot:
        known_names = sorted(
            {topic.name for topic in state.topics_by_id.values()} | set(self.catalog.topics)
        )
        members = []
        assignors = set()
        for member_id, metadata in sorted(state.members.items()):
            topics = set(metadata.topic_names)
            if metadata.topic_regex is not None:
                try:
                    pattern = re.compile(metadata.topic_regex)
                    topics.update(name for name in known_names if pattern.fullmatch(name))
                except re.error as error:
                    self.skip(
                        record,
                        f"group {group}: member {member_id}: regex "
                        f"{metadata.topic_regex!r} not understood ({error}); "
                        "its topics are unknown",
                    )
            assigned = [
                TopicPartition(self.topic_name(state, target.topic_id, target), partition)
                for target in state.targets.get(member_id, ())
                for partition in target.partitions
            ]
            members.append(
                TraceMember(
                    member_id,
                    frozenset(topics),
                    metadata.instance_id,
                    metadata.rack,
                    tuple(assigned),
                )
            )
            if metadata.server_assignor is not None:
                assignors.add(metadata.server_assignor)
        counts = {topic.name: topic.partitions for topic in state.topics_by_id.values()}
        racks = {
            topic.name: topic.replica_racks
            for topic in state.topics_by_id.values()
            if topic.replica_racks is not None
        }
        return Snapshot(
            generation=epoch,
            members=tuple(members),
            timestamp_ms=record.timestamp_ms,
            protocol=assignors.pop() if len(assignors) == 1 else None,
            reason=f"target assignment for epoch {epoch}",
            partition_counts=counts,
            replica_racks=racks,
            group_protocol="consumer",
        )

    def flush(self, group: str) -> None:
        state = self.consumer_groups.get(group)
        if state is None or state.pending is None:
            return
        snapshot, source, line, position = state.pending
        if snapshot.members:
            settled = len(state.reconciled & {member.member_id for member in snapshot.members})
            snapshot = replace(
                snapshot,
                reason=f"{snapshot.reason}, {settled} of "
                f"{len(snapshot.members)} members reached it",
            )
        self.assembler(group).add(snapshot, source, line, position)
        state.pending = None
        state.reconciled = set()

    def result(self) -> ImportResult:
        for group in sorted(self.consumer_groups):
            self.flush(group)
        if self.offset_commits:
            log.info("%d offset commit records passed over", self.offset_commits)
        return collect(self.assemblers.values(), self.skipped)


def rows_from_records(
    records: Iterable[CoordinatorRecord],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Trace rows from ``__consumer_offsets`` records in log order (several segments: oldest
    first)."""
    importer = _OffsetsImporter(catalog or TopicCatalog.empty(), options or ImportOptions())
    for record in records:
        importer.feed(record)
    return importer.result()


SourceData = TypeVar("SourceData")
RecordParser = Callable[[SourceData, str, list[Skipped], bool], Iterator[CoordinatorRecord]]


def import_records(
    sources: Iterable[tuple[str, SourceData]],
    parse: RecordParser[SourceData],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Trace rows from the records ``parse(data, source, skipped, strict)`` reads out of each
    ``(name, data)`` source (text or lines; a segment's bytes) in turn (oldest first); the
    parser's notes and the importer's come back together in file order."""
    options = options or ImportOptions()
    skipped: list[Skipped] = []
    records = (
        record
        for source, text in sources
        for record in parse(text, source, skipped, options.strict)
    )
    result = rows_from_records(records, catalog, options)
    return ImportResult(result.rows, in_file_order((*skipped, *result.skipped)))
