"""Control records (``ControlRecordType``): the records of control batches.

Key (every type): int16 version (0), int16 type. Values:

- ABORT (0) / COMMIT (1), the transaction markers (``EndTransactionMarker``): int16 version (0),
  int32 coordinator epoch.
- LEADER_CHANGE (2), SNAPSHOT_HEADER (3), SNAPSHOT_FOOTER (4), KRAFT_VERSION (5), KRAFT_VOTERS
  (6): KRaft messages serialized as flexible-version messages at version 0 (``MessageUtil
  .toByteBuffer``, no version prefix): their fields, compact arrays and strings (length + 1 as
  an unsigned varint), then a tagged-field section (unknown tags skipped on read).

>>> from kafka_format.batch import RecordBatch
>>> data = build_end_txn_marker_batch(initial_offset=9, timestamp=1000, partition_leader_epoch=3,
...                                   producer_id=77, producer_epoch=1,
...                                   control_type=ControlRecordType.COMMIT, coordinator_epoch=5)
>>> record = RecordBatch.parse(data).records()[0]
>>> parse_control_record(record.key, record.value)
ControlRecord(key_version=0, type_id=1, value=EndTransactionMarker(version=0, coordinator_epoch=5))
>>> parse_control_record(record.key, record.value).type.name
'COMMIT'
"""

from __future__ import annotations

import enum
import struct
import uuid
from dataclasses import dataclass

from kafka_format.batch import Record, RecordBatch, build_batch
from kafka_format.errors import KafkaFormatError
from kafka_format.model import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NewRecord
from kafka_format.varint import read_unsigned_varint, write_unsigned_varint

__all__ = [
    "ControlRecord",
    "ControlRecordType",
    "EndTransactionMarker",
    "KRaftVersionRecord",
    "LeaderChangeMessage",
    "SnapshotFooterRecord",
    "SnapshotHeaderRecord",
    "Voter",
    "VotersRecord",
    "build_control_batch",
    "build_end_txn_marker_batch",
    "control_key",
    "control_records",
    "encode_control_value",
    "parse_control_record",
]


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    version: int
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotHeaderRecord:
    version: int
    last_contained_log_timestamp: int


@dataclass(frozen=True, slots=True)
class SnapshotFooterRecord:
    version: int


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    version: int
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class KRaftVersionRecord:
    version: int
    kraft_version: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    directory_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class VotersRecord:
    version: int
    voters: tuple[Voter, ...]


ControlValue = (
    EndTransactionMarker
    | SnapshotHeaderRecord
    | SnapshotFooterRecord
    | LeaderChangeMessage
    | KRaftVersionRecord
    | VotersRecord
)


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A decoded control record: key version, type id, and the value (None for UNKNOWN types,
    which consumers ignore)."""

    key_version: int
    type_id: int
    value: ControlValue | None

    @property
    def type(self) -> ControlRecordType:
        try:
            return ControlRecordType(self.type_id)
        except ValueError:
            return ControlRecordType.UNKNOWN


class _Reader:
    """Cursor over a flexible-version message body."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.cursor = 0
        self.what = what

    def _take(self, size: int) -> bytes:
        if self.cursor + size > len(self.data):
            raise KafkaFormatError(f"{self.what} ends early", field=f"control.{self.what}")
        chunk = self.data[self.cursor : self.cursor + size]
        self.cursor += size
        return chunk

    def fixed(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        return int(struct.unpack(fmt, self._take(size))[0])

    def uvarint(self) -> int:
        try:
            value, self.cursor = read_unsigned_varint(self.data, self.cursor)
        except KafkaFormatError as error:
            raise KafkaFormatError(error.message, field=f"control.{self.what}") from None
        return value & 0xFFFFFFFF

    def compact_length(self) -> int:
        length = self.uvarint() - 1
        if length < 0:
            raise KafkaFormatError(
                f"null array or string in {self.what}", field=f"control.{self.what}"
            )
        return length

    def string(self) -> str:
        return self._take(self.compact_length()).decode("utf-8", "replace")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def _voter_ids(reader: _Reader) -> tuple[int, ...]:
    ids = []
    for _ in range(reader.compact_length()):
        ids.append(reader.fixed(">i"))
        reader.tagged_fields()
    return tuple(ids)


def _parse_value(type_id: int, value: bytes) -> ControlValue | None:
    if type_id in (0, 1):
        if len(value) < 6:
            raise KafkaFormatError(
                "Invalid value size found for end transaction marker. Must have at least 6 "
                f"bytes, but found only {len(value)}",
                field="control.value",
            )
        version, epoch = struct.unpack_from(">hi", value, 0)
        if version < 0:
            raise KafkaFormatError(
                f"Invalid version found for end transaction marker: {version}. May indicate "
                "data corruption",
                field="control.value.version",
            )
        return EndTransactionMarker(version, epoch)
    reader = _Reader(
        value, ControlRecordType(type_id).name.lower() if 2 <= type_id <= 6 else "value"
    )
    parsed: ControlValue
    if type_id == 2:
        version = reader.fixed(">h")
        leader = reader.fixed(">i")
        voters = _voter_ids(reader)
        granting = _voter_ids(reader)
        parsed = LeaderChangeMessage(version, leader, voters, granting)
    elif type_id == 3:
        parsed = SnapshotHeaderRecord(reader.fixed(">h"), reader.fixed(">q"))
    elif type_id == 4:
        parsed = SnapshotFooterRecord(reader.fixed(">h"))
    elif type_id == 5:
        parsed = KRaftVersionRecord(reader.fixed(">h"), reader.fixed(">h"))
    elif type_id == 6:
        version = reader.fixed(">h")
        members = []
        for _ in range(reader.compact_length()):
            voter_id = reader.fixed(">i")
            directory = reader.uuid()
            endpoints = []
            for _ in range(reader.compact_length()):
                name = reader.string()
                host = reader.string()
                port = reader.fixed(">H")
                reader.tagged_fields()
                endpoints.append(Endpoint(name, host, port))
            low = reader.fixed(">h")
            high = reader.fixed(">h")
            reader.tagged_fields()
            reader.tagged_fields()
            members.append(Voter(voter_id, directory, tuple(endpoints), low, high))
        parsed = VotersRecord(version, tuple(members))
    else:
        return None
    reader.tagged_fields()
    return parsed


def parse_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Decode a control record's key and value (``ControlRecordType.parseTypeId`` and the
    value's message); raises :class:`KafkaFormatError` where Kafka throws."""
    if key is None or len(key) < 4:
        raise KafkaFormatError(
            "Invalid value size found for end control record key. Must have at least 4 bytes, "
            f"but found only {0 if key is None else len(key)}",
            field="control.key",
        )
    key_version, type_id = struct.unpack_from(">hh", key, 0)
    if key_version < 0:
        raise KafkaFormatError(
            f"Invalid version found for control record: {key_version}. May indicate data "
            "corruption",
            field="control.key.version",
        )
    if not 0 <= type_id <= 6:
        return ControlRecord(key_version, type_id, None)
    if value is None:
        raise KafkaFormatError("control record without a value", field="control.value")
    return ControlRecord(key_version, type_id, _parse_value(type_id, value))


def control_records(batch: RecordBatch) -> list[tuple[Record, ControlRecord]]:
    """The records of a control batch, each with its decoded control record; errors name the
    batch's file and position and the record. A batch without the control bit has none."""
    if not batch.is_control:
        return []
    out = []
    for index, record in enumerate(batch.records()):
        try:
            out.append((record, parse_control_record(record.key, record.value)))
        except KafkaFormatError as error:
            raise KafkaFormatError(
                error.message,
                source=batch.source,
                position=batch.position,
                field=f"record[{index}].{error.field}",
            ) from None
    return out


def control_key(control_type: ControlRecordType) -> bytes:
    """The key ``ControlRecordType.recordKey`` writes: version 0 and the type."""
    if control_type is ControlRecordType.UNKNOWN:
        raise KafkaFormatError("Cannot serialize UNKNOWN control record type", field="control.type")
    return struct.pack(">hh", 0, int(control_type))


def _compact_length(length: int) -> bytes:
    return write_unsigned_varint(length + 1)


def _compact_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _compact_length(len(raw)) + raw


def encode_control_value(value: ControlValue) -> bytes:
    """The value bytes Kafka writes for a control record (version-0 messages)."""
    if isinstance(value, EndTransactionMarker):
        return struct.pack(">hi", value.version, value.coordinator_epoch)
    if isinstance(value, SnapshotHeaderRecord):
        return struct.pack(">hq", value.version, value.last_contained_log_timestamp) + b"\x00"
    if isinstance(value, SnapshotFooterRecord):
        return struct.pack(">h", value.version) + b"\x00"
    if isinstance(value, KRaftVersionRecord):
        return struct.pack(">hh", value.version, value.kraft_version) + b"\x00"
    if isinstance(value, LeaderChangeMessage):
        out = struct.pack(">hi", value.version, value.leader_id)
        for ids in (value.voters, value.granting_voters):
            out += _compact_length(len(ids)) + b"".join(struct.pack(">i", i) + b"\x00" for i in ids)
        return out + b"\x00"
    out = struct.pack(">h", value.version) + _compact_length(len(value.voters))
    for voter in value.voters:
        out += struct.pack(">i", voter.voter_id) + voter.directory_id.bytes
        out += _compact_length(len(voter.endpoints))
        for endpoint in voter.endpoints:
            out += _compact_string(endpoint.name) + _compact_string(endpoint.host)
            out += struct.pack(">H", endpoint.port) + b"\x00"
        out += struct.pack(">hh", voter.min_supported_version, voter.max_supported_version)
        out += b"\x00\x00"
    return out + b"\x00"


_TYPE_OF = {
    EndTransactionMarker: None,
    SnapshotHeaderRecord: ControlRecordType.SNAPSHOT_HEADER,
    SnapshotFooterRecord: ControlRecordType.SNAPSHOT_FOOTER,
    LeaderChangeMessage: ControlRecordType.LEADER_CHANGE,
    KRaftVersionRecord: ControlRecordType.KRAFT_VERSION,
    VotersRecord: ControlRecordType.KRAFT_VOTERS,
}


def build_end_txn_marker_batch(
    *,
    initial_offset: int,
    timestamp: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    control_type: ControlRecordType,
    coordinator_epoch: int,
) -> bytes:
    """``MemoryRecords.withEndTransactionMarker``: a transactional control batch holding one
    COMMIT or ABORT marker."""
    if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise KafkaFormatError(
            "Invalid control record type for end transaction marker",
            field="control_type",
            value=control_type.name,
        )
    if producer_id == NO_PRODUCER_ID:
        raise KafkaFormatError(
            "End transaction marker requires a valid producerId", field="producer_id"
        )
    record = NewRecord(
        control_key(control_type),
        encode_control_value(EndTransactionMarker(0, coordinator_epoch)),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        base_offset=initial_offset,
        log_append_time=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_control_batch(
    values: list[ControlValue],
    *,
    initial_offset: int,
    timestamp: int,
    leader_epoch: int,
) -> bytes:
    """A KRaft control batch (``MemoryRecords.withLeaderChangeMessage``,
    ``withSnapshotHeaderRecord`` ...): one record per value, no producer, not transactional."""
    records = []
    for value in values:
        control_type = _TYPE_OF[type(value)]
        if control_type is None:
            raise KafkaFormatError(
                "transaction markers go in build_end_txn_marker_batch", field="values"
            )
        records.append(
            NewRecord(control_key(control_type), encode_control_value(value), timestamp=timestamp)
        )
    return build_batch(
        records,
        base_offset=initial_offset,
        log_append_time=timestamp,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        is_control=True,
        partition_leader_epoch=leader_epoch,
    )
