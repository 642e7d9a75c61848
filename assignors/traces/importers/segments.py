"""``__consumer_offsets`` segment files (``<base offset>.log``) -> trace rows, from the bytes.

The group coordinator's records are read straight from the record batches (through
:mod:`kafka_format`) and decoded into the same :class:`~.offsets.CoordinatorRecord` the
kafka-dump-log and formatter importers build from text, so all three share one path
(:func:`~.offsets.import_records`) and give the same traces for the same history.

The key's int16 version is the record type (Kafka's ``group-coordinator`` message schemas):

- 0, 1 ``OffsetCommitKey``: passed over without reading the value (the fast path: a batch of
  offset commits is walked only as far as each record's key version);
- 2 ``GroupMetadataKey`` / ``GroupMetadataValue`` v0-v4 (v4 flexible): members with their
  instance ids, and the subscription and assignment bytes (ConsumerProtocol), decoded by
  :mod:`assignors.protocol.wire`;
- 3-8, the KIP-848 consumer group records (values v0, flexible): ``ConsumerGroupMetadata``,
  ``ConsumerGroupPartitionMetadata`` (topic id -> name, partition count, racks),
  ``ConsumerGroupMemberMetadata``, ``ConsumerGroupTargetAssignmentMetadata`` (with the 4.3
  ``AssignmentTimestamp``, tag 0) and ``...Member``, ``ConsumerGroupCurrentMemberAssignment``;
  other tagged fields are skipped;
- any other type (regular expressions, share and streams groups) is skipped with a note.

A record without a value is a tombstone. Control batches (transaction markers) are skipped
with one note per file. A cut tail, a batch whose CRC does not match and a record that does
not decode stop the import with an error naming the file, byte and field; when not
``strict`` they are noted and the rest is read.

>>> from kafka_format import NewRecord, build_batch
>>> key = b"\\x00\\x03" + b"\\x00\\x01g"                    # ConsumerGroupMetadataKey "g"
>>> value = b"\\x00\\x00" + b"\\x00\\x00\\x00\\x07" + b"\\x00"  # v0: epoch 7, no tagged fields
>>> segment = build_batch([NewRecord(key, value, timestamp=5)], base_offset=0)
>>> [(r.key_type, dict(r.key), dict(r.value or {}), r.position)
...  for r in parse_segment(segment, "0.log")]
[(3, {'groupId': 'g'}, {'epoch': 7}, 61)]
"""

from __future__ import annotations

import base64
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from assignors.errors import InputError
from assignors.traces.importers.common import (
    ImportOptions,
    ImportResult,
    Skipped,
    TopicCatalog,
    note,
)
from assignors.traces.importers.offsets import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    GROUP_METADATA,
    CoordinatorRecord,
    import_records,
)
from kafka_format import BATCH_HEADER_SIZE, KafkaFormatError, LegacyBatch, iter_batches
from kafka_format.batch import CONTROL_MASK, RecordBatch
from kafka_format.partition_dir import (
    SPECIAL_DIR_SUFFIXES,
    parse_file_name,
    parse_partition_dir_name,
)
from kafka_format.varint import read_unsigned_varint, read_varint
from ktkbase.errors import InputError as BaseInputError

log = logging.getLogger("assignors.traces.importers")

__all__ = ["import_segments", "parse_segment", "segment_files"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NO_VALUE = InputError._NO_VALUE

# value versions ktk reads, by record type (Kafka's validVersions)
_VALUE_VERSIONS = {GROUP_METADATA: range(5), **{kind: range(1) for kind in range(3, 9)}}


class _Reader:
    """Kafka's message encodings over one key or value: fixed-width integers, strings,
    bytes and arrays (classic and compact), uuids and tagged fields. Errors name the file,
    the byte (``origin`` is where ``data`` starts in the file; None inside a compressed
    batch, whose records are decompressed) and the field."""

    __slots__ = ("at", "data", "fail_at", "origin")

    def __init__(self, data: bytes, origin: int | None, fail_at: Callable[..., InputError]) -> None:
        self.data = data
        self.at = 0
        self.origin = origin
        self.fail_at = fail_at

    def fail(self, message: str, field: str, value: object = _NO_VALUE) -> InputError:
        position = None if self.origin is None else self.origin + self.at
        return self.fail_at(message, field, value, position)

    def take(self, size: int, field: str, start: int | None = None) -> bytes:
        """``size`` bytes; when they are not there the error names the field at ``start``
        (its length prefix), else where the bytes were due."""
        end = self.at + size
        if size < 0 or end > len(self.data):
            left = len(self.data) - self.at
            if start is not None:
                self.at = start
            raise self.fail(f"truncated: {size} bytes needed, {left} left", field)
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def int8(self, field: str) -> int:
        return int.from_bytes(self.take(1, field), "big", signed=True)

    def int16(self, field: str) -> int:
        return int(_I16.unpack(self.take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_I32.unpack(self.take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_I64.unpack(self.take(8, field))[0])

    def uvarint(self, field: str) -> int:
        try:
            value, self.at = read_unsigned_varint(self.data, self.at)
        except KafkaFormatError as error:
            raise self.fail(error.message, field) from None
        return value & 0xFFFFFFFF

    def text(self, raw: bytes, field: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("not valid UTF-8", field, raw) from None

    def string(self, field: str, *, compact: bool, nullable: bool = False) -> str | None:
        start = self.at
        size = self.uvarint(field) - 1 if compact else self.int16(field)
        if size < 0:
            if nullable and size == -1:
                return None
            self.at = start
            raise self.fail("must not be null", field, size)
        return self.text(self.take(size, field, start), field)

    def bytes(self, field: str, *, compact: bool) -> bytes:
        start = self.at
        size = self.uvarint(field) - 1 if compact else self.int32(field)
        if size < 0:
            self.at = start
            raise self.fail("must not be null", field, size)
        return self.take(size, field, start)

    def count(self, field: str, *, compact: bool, item_size: int = 1) -> int:
        start = self.at
        size = self.uvarint(field) - 1 if compact else self.int32(field)
        if size < 0 or size * item_size > len(self.data) - self.at:
            self.at = start
            raise self.fail(f"array size {size} does not fit the bytes left", field, size)
        return size

    def uuid(self, field: str) -> str:
        """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
        return base64.urlsafe_b64encode(self.take(16, field)).decode().rstrip("=")

    def tags(
        self, field: str, known: dict[int, Callable[[_Reader, str], None]] | None = None
    ) -> None:
        """A tagged-field section: known tags read by their reader, the others skipped."""
        for _ in range(self.uvarint(f"{field}_tagged_fields")):
            tag = self.uvarint(f"{field}_tagged_fields")
            size = self.uvarint(f"{field}_tagged_fields[{tag}]")
            end = self.at + size
            if known is not None and tag in known:
                known[tag](self, f"{field}[tag {tag}]")
                if self.at != end:
                    raise self.fail(f"tagged field is {size} bytes", f"{field}[tag {tag}]")
            else:
                self.take(size, f"{field}_tagged_fields[{tag}]")


# ---------------------------------------------------------------------------------------------
# keys and values, as Kafka's JsonConverters name the fields (what kafka-dump-log prints)


def _key(reader: _Reader, key_type: int) -> dict[str, Any]:
    if key_type in (0, 1):
        return {
            "group": reader.string("key.group", compact=False),
            "topic": reader.string("key.topic", compact=False),
            "partition": reader.int32("key.partition"),
        }
    if key_type == GROUP_METADATA:
        return {"group": reader.string("key.group", compact=False)}
    key: dict[str, Any] = {"groupId": reader.string("key.groupId", compact=False)}
    if key_type in (
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    ):
        key["memberId"] = reader.string("key.memberId", compact=False)
    return key


def _group_metadata(reader: _Reader, version: int) -> dict[str, Any]:
    """``GroupMetadataValue`` v0-v4 (flexible from v4)."""
    flexible = version >= 4
    value: dict[str, Any] = {
        "protocolType": reader.string("value.protocolType", compact=flexible),
        "generation": reader.int32("value.generation"),
        "protocol": reader.string("value.protocol", compact=flexible, nullable=True),
        "leader": reader.string("value.leader", compact=flexible, nullable=True),
    }
    if version >= 2:
        value["currentStateTimestamp"] = reader.int64("value.currentStateTimestamp")
    members = []
    for index in range(reader.count("value.members", compact=flexible, item_size=8)):
        where = f"value.members[{index}]."
        member: dict[str, Any] = {"memberId": reader.string(f"{where}memberId", compact=flexible)}
        if version >= 3:
            member["groupInstanceId"] = reader.string(
                f"{where}groupInstanceId", compact=flexible, nullable=True
            )
        else:
            member["groupInstanceId"] = None
        member["clientId"] = reader.string(f"{where}clientId", compact=flexible)
        member["clientHost"] = reader.string(f"{where}clientHost", compact=flexible)
        if version >= 1:
            member["rebalanceTimeout"] = reader.int32(f"{where}rebalanceTimeout")
        member["sessionTimeout"] = reader.int32(f"{where}sessionTimeout")
        member["subscription"] = reader.bytes(f"{where}subscription", compact=flexible)
        member["assignment"] = reader.bytes(f"{where}assignment", compact=flexible)
        if flexible:
            reader.tags(where.rstrip("."))
        members.append(member)
    value["members"] = members
    if flexible:
        reader.tags("value")
    return value


def _strings(reader: _Reader, field: str) -> list[str]:
    return [
        str(reader.string(f"{field}[{index}]", compact=True))
        for index in range(reader.count(field, compact=True))
    ]


def _topic_partitions(reader: _Reader, field: str) -> list[dict[str, Any]]:
    entries = []
    for index in range(reader.count(field, compact=True, item_size=18)):
        where = f"{field}[{index}]"
        topic_id = reader.uuid(f"{where}.topicId")
        partitions = [
            reader.int32(f"{where}.partitions")
            for _ in range(reader.count(f"{where}.partitions", compact=True, item_size=4))
        ]
        reader.tags(where)
        entries.append({"topicId": topic_id, "partitions": partitions})
    return entries


def _consumer_group_value(reader: _Reader, key_type: int) -> dict[str, Any]:
    """The KIP-848 values (types 3-8), version 0, flexible."""
    value: dict[str, Any]
    if key_type == CONSUMER_GROUP_METADATA:
        value = {"epoch": reader.int32("value.epoch")}
    elif key_type == CONSUMER_GROUP_PARTITION_METADATA:
        topics = []
        for index in range(reader.count("value.topics", compact=True, item_size=22)):
            where = f"value.topics[{index}]"
            topic: dict[str, Any] = {
                "topicId": reader.uuid(f"{where}.topicId"),
                "topicName": reader.string(f"{where}.topicName", compact=True),
                "numPartitions": reader.int32(f"{where}.numPartitions"),
            }
            metadata = []
            field = f"{where}.partitionMetadata"
            for number in range(reader.count(field, compact=True, item_size=6)):
                partition = reader.int32(f"{field}[{number}].partition")
                racks = _strings(reader, f"{field}[{number}].racks")
                reader.tags(f"{field}[{number}]")
                metadata.append({"partition": partition, "racks": racks})
            topic["partitionMetadata"] = metadata
            reader.tags(where)
            topics.append(topic)
        value = {"topics": topics}
    elif key_type == CONSUMER_GROUP_MEMBER_METADATA:
        value = {
            "instanceId": reader.string("value.instanceId", compact=True, nullable=True),
            "rackId": reader.string("value.rackId", compact=True, nullable=True),
            "clientId": reader.string("value.clientId", compact=True),
            "clientHost": reader.string("value.clientHost", compact=True),
            "subscribedTopicNames": _strings(reader, "value.subscribedTopicNames"),
            "subscribedTopicRegex": reader.string(
                "value.subscribedTopicRegex", compact=True, nullable=True
            ),
            "rebalanceTimeoutMs": reader.int32("value.rebalanceTimeoutMs"),
            "serverAssignor": reader.string("value.serverAssignor", compact=True, nullable=True),
        }
    elif key_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = {"assignmentEpoch": reader.int32("value.assignmentEpoch")}

        def timestamp(tagged: _Reader, field: str) -> None:
            value["assignmentTimestamp"] = tagged.int64(f"{field}.assignmentTimestamp")

        reader.tags("value", {0: timestamp})
        return value
    elif key_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = {"topicPartitions": _topic_partitions(reader, "value.topicPartitions")}
    else:
        value = {
            "memberEpoch": reader.int32("value.memberEpoch"),
            "previousMemberEpoch": reader.int32("value.previousMemberEpoch"),
            "state": reader.int8("value.state"),
            "assignedPartitions": _topic_partitions(reader, "value.assignedPartitions"),
            "partitionsPendingRevocation": _topic_partitions(
                reader, "value.partitionsPendingRevocation"
            ),
        }
    reader.tags("value")
    return value


# ---------------------------------------------------------------------------------------------
# batches -> records


def _value_start(data: bytes, start: int) -> int:
    """Where the value of the record starting at ``start`` begins (the record's structure was
    checked by ``RecordBatch.records``)."""
    _, at = read_varint(data, start)  # length
    at += 1  # attributes
    for _ in range(2):  # timestamp delta, offset delta
        while data[at] & 0x80:
            at += 1
        at += 1
    key_size, at = read_varint(data, at)
    at += max(key_size, 0)
    _, at = read_varint(data, at)
    return at


def _interesting(data: bytes, count: int) -> list[tuple[int, int]] | None:
    """(index, start in ``data``) of the records of an uncompressed batch whose key is not an
    offset commit (version 0 or 1), reading nothing past each key's version; None when the
    records do not walk (the full decoding then says why)."""
    found = []
    at = BATCH_HEADER_SIZE
    try:
        for index in range(count):
            byte = data[at]
            if byte < 0x80:
                size, body = (byte >> 1) ^ -(byte & 1), at + 1
            else:
                size, body = read_varint(data, at)
            cursor = body + 1  # attributes
            while data[cursor] & 0x80:  # timestamp delta
                cursor += 1
            cursor += 1
            while data[cursor] & 0x80:  # offset delta
                cursor += 1
            cursor += 1
            byte = data[cursor]
            if byte < 0x80:
                key_size, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                key_size, cursor = read_varint(data, cursor)
            if key_size < 2 or data[cursor] or data[cursor + 1] > 1:
                found.append((index, at))
            if size < 0:
                return None
            at = body + size
    except (IndexError, KafkaFormatError):
        return None
    if at != len(data):
        return None
    return found


class _SegmentReader:
    def __init__(
        self,
        data: bytes,
        source: str,
        skipped: list[Skipped] | None,
        strict: bool,
        wants: Callable[[object], bool],
    ) -> None:
        self.data = data
        self.source = source
        self.skipped = skipped
        self.strict = strict
        self.wants = wants
        self.offset_commits = 0
        self.control_batches = 0
        self.first_control: int | None = None

    def problem(self, error: BaseInputError, what: str, position: int | None) -> None:
        """Stop on ``error`` (strict), or note that ``what`` was skipped for it."""
        if self.strict:
            raise error
        text = str(error)
        if text.startswith(f"{self.source}: "):  # the note names the file already
            text = text[len(self.source) + 2 :]
        note(self.skipped, self.source, None, f"{what} skipped: {text}", position)

    def records(self) -> Iterator[CoordinatorRecord]:
        end = 0
        try:
            for batch in iter_batches(self.data, source=self.source):
                end = batch.position + batch.size_in_bytes
                if isinstance(batch, RecordBatch):
                    yield from self.batch(batch)
                else:
                    yield from self.legacy(batch)
        except KafkaFormatError as error:  # a batch that cannot be framed: the rest is lost
            self.problem(error, f"the {len(self.data) - end} bytes from here", end)
            return
        if end < len(self.data):
            self.problem(
                InputError(
                    f"the segment ends inside a batch: {len(self.data) - end} bytes after "
                    "the last whole batch (a cut or truncated copy?)",
                    source=self.source,
                    position=end,
                    field="batch",
                ),
                "the cut batch",
                end,
            )
        if self.control_batches:
            note(
                self.skipped,
                self.source,
                None,
                f"{self.control_batches} control batch(es) (transaction markers) skipped: "
                "they hold no group records",
                self.first_control,
            )
        if self.offset_commits:
            log.info("%s: %d offset commit records passed over", self.source, self.offset_commits)

    def batch(self, batch: RecordBatch) -> Iterator[CoordinatorRecord]:
        try:
            batch.ensure_valid()
        except KafkaFormatError as error:
            self.problem(error, f"batch at offset {batch.base_offset}", batch.position)
            return
        if batch.attributes & CONTROL_MASK:
            self.control_batches += 1
            if self.first_control is None:
                self.first_control = batch.position
            return
        data = batch.data if isinstance(batch.data, bytes) else bytes(batch.data)
        wanted: list[tuple[int, int]] | None = None
        if not batch.is_compressed and batch.record_count >= 0:
            wanted = _interesting(data, batch.record_count)
            if wanted is not None:
                self.offset_commits += batch.record_count - len(wanted)
                if not wanted:
                    return
        try:
            records = batch.records()
        except KafkaFormatError as error:
            self.problem(error, f"batch at offset {batch.base_offset}", batch.position)
            return
        if wanted is None:  # compressed: positions are inside the decompressed records
            for index, record in enumerate(records):
                yield from self.record(
                    record.key,
                    record.value,
                    record.timestamp,
                    record.offset,
                    batch.position,
                    None,
                    index,
                )
            return
        for index, start in wanted:
            record = records[index]
            value_at = None if record.value is None else batch.position + _value_start(data, start)
            yield from self.record(
                record.key,
                record.value,
                record.timestamp,
                record.offset,
                batch.position + start,
                value_at,
                None,
            )

    def legacy(self, batch: LegacyBatch) -> Iterator[CoordinatorRecord]:
        try:
            records = batch.records()
        except KafkaFormatError as error:
            self.problem(error, f"message at offset {batch.offset}", batch.position)
            return
        for index, record in enumerate(records):
            if not record.is_valid:
                corrupt = KafkaFormatError(
                    f"Record is corrupt (stored crc = {record.crc_stored}, computed crc = "
                    f"{record.crc_computed})",
                    source=self.source,
                    position=batch.position,
                    field="message.crc",
                )
                self.problem(corrupt, f"message at offset {record.offset}", batch.position)
                continue
            yield from self.record(
                record.key,
                record.value,
                record.timestamp,
                record.offset,
                batch.position,
                None,
                index if len(records) > 1 else None,
            )

    def record(
        self,
        key_bytes: bytes | None,
        value_bytes: bytes | None,
        timestamp: int,
        offset: int,
        position: int,
        value_at: int | None,
        number: int | None,
    ) -> Iterator[CoordinatorRecord]:
        """The record at byte ``position`` (its batch's, inside a compressed batch, where
        ``number`` is its index) decoded, or nothing when it is skipped."""
        within = "" if number is None else f"record[{number}] (decompressed) "

        def fail_at(message: str, field: str, value: object, at: int | None) -> InputError:
            return InputError(
                message,
                source=self.source,
                position=position if at is None else at,
                field=f"{within}{field}",
                value=value,
            )

        try:
            if key_bytes is None or len(key_bytes) < 2:
                raise fail_at(
                    "a coordinator record key holds at least its type", "key", key_bytes, position
                )
            key_type = int(_I16.unpack_from(key_bytes)[0])
            if key_type in (0, 1):
                self.offset_commits += 1
                return
            if key_type < 0 or key_type > CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                note(
                    self.skipped,
                    self.source,
                    None,
                    f"record type {key_type} at offset {offset} skipped: it carries nothing a "
                    "trace uses (share or streams groups, regular expressions, or a type ktk "
                    "does not know)",
                    position,
                )
                return
            key_reader = _Reader(key_bytes, None, fail_at)
            key_reader.at = 2
            key = _key(key_reader, key_type)
            if not self.wants(key.get("groupId", key.get("group"))):
                return
            value = None
            version = None
            if value_bytes is not None:
                reader = _Reader(value_bytes, value_at, fail_at)
                version = reader.int16("value.version")
                if version not in _VALUE_VERSIONS[key_type]:
                    reader.at = 0
                    versions = _VALUE_VERSIONS[key_type]
                    raise reader.fail(
                        f"value version not known for record type {key_type} "
                        f"(ktk reads {versions.start}-{versions.stop - 1})",
                        "value.version",
                        version,
                    )
                if key_type == GROUP_METADATA:
                    value = _group_metadata(reader, version)
                else:
                    value = _consumer_group_value(reader, key_type)
        except InputError as error:
            self.problem(error, f"record at offset {offset}", position)
            return
        yield CoordinatorRecord(
            key_type,
            key,
            value,
            version,
            timestamp,
            self.source,
            None,
            None if number is None else number + 1,
            position,
        )


def parse_segment(
    data: bytes,
    source: str,
    skipped: list[Skipped] | None = None,
    strict: bool = True,
    wants: Callable[[object], bool] = lambda group: True,
) -> Iterator[CoordinatorRecord]:
    """The group records of one segment file's bytes, in log order (offset commits, control
    batches and other record types are passed over). Bad bytes raise InputError naming the
    file, byte and field, or, when not ``strict``, are noted in ``skipped`` and passed over.
    ``wants(group)`` False: the record's value is not even decoded."""
    return _SegmentReader(data, source, skipped, strict, wants).records()


def decode_record(
    key: bytes | None,
    value: bytes | None,
    *,
    timestamp: int,
    offset: int,
    source: str,
    skipped: list[Skipped] | None = None,
    strict: bool = False,
    wants: Callable[[object], bool] = lambda group: True,
) -> Iterator[CoordinatorRecord]:
    """One ``__consumer_offsets`` record given as its key and value bytes (as a consumer reads
    it) decoded like a segment's records: nothing for offset commits, other record types and
    other groups; a record that does not decode stops (``strict``) or is noted in ``skipped``.
    Errors name ``source`` and the record's offset."""
    reader = _SegmentReader(b"", source, skipped, strict, wants)
    return reader.record(key, value, timestamp, offset, None, None, None)  # type: ignore[arg-type]


def import_segments(
    sources: Iterable[tuple[str, bytes]],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Trace rows from segment files given as ``(name, bytes)`` pairs, oldest first (several
    partitions: each partition's segments together, in base-offset order)."""
    options = options or ImportOptions()
    wants = options.wants

    def parse(
        data: bytes, source: str, skipped: list[Skipped], strict: bool
    ) -> Iterator[CoordinatorRecord]:
        return parse_segment(data, source, skipped, strict, wants)

    return import_records(sources, parse, catalog, options)


def _partition_order(directory: Path) -> tuple[str, int, str]:
    parsed = parse_partition_dir_name(directory.name)
    return (parsed[0], parsed[1], str(directory)) if parsed else (str(directory), -1, "")


def segment_files(paths: Iterable[str | Path]) -> list[Path]:
    """The segment files named by ``paths``: files as given; for a directory, every
    ``<base offset>.log`` below it, partition directory by partition directory (topic, then
    partition number), each one's segments in base-offset order.

    Kafka's own partition directories (``__consumer_offsets-7``) start with an underscore, so
    unlike ktk's data listings (:mod:`ktkbase.files`) only hidden ``.x`` entries are skipped,
    with the directories Kafka is deleting, moving or has left behind (``-delete``,
    ``-future``, ``-stray``) and the segment files it is replacing (``.deleted``, ``.cleaned``,
    ``.swap``)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            found.append(path)
            continue
        by_directory: dict[Path, list[tuple[int, Path]]] = {}
        for directory, subdirectories, files in os.walk(path):
            subdirectories[:] = sorted(
                name
                for name in subdirectories
                if not name.startswith(".") and not name.endswith(SPECIAL_DIR_SUFFIXES)
            )
            for file_name in files:
                parsed = parse_file_name(file_name)
                if parsed is not None and parsed.kind == "log" and parsed.state is None:
                    by_directory.setdefault(Path(directory), []).append(
                        (parsed.base_offset, Path(directory) / file_name)
                    )
        for partition_dir in sorted(by_directory, key=_partition_order):
            found.extend(file for _, file in sorted(by_directory[partition_dir]))
    return found
