"""Message formats v0 and v1 (``LegacyRecord``): the message sets of segments written before
Kafka 0.11, read as Kafka still reads them.

A log entry: offset int64, message size int32, then the message (big-endian)::

    crc        uint32   CRC-32 (IEEE) of the rest of the message, magic to the end
    magic      int8     0 or 1
    attributes int8     bits 0-2 codec, bit 3 LOG_APPEND_TIME (magic 1)
    timestamp  int64    magic 1 only
    key        int32 length (-1 = null) + bytes
    value      int32 length (-1 = null) + bytes

A compressed message (a "wrapper") holds a whole message set in its value. Inner offsets are
absolute for magic 0 and relative for magic 1 (absolute = wrapper offset - last inner offset +
inner offset); the wrapper's offset is the last inner offset. Under a LOG_APPEND_TIME magic-1
wrapper, inner messages report the wrapper's timestamp and type.

>>> entry = build_legacy_entry(offset=7, magic=1, timestamp=1000, key=b"k", value=b"v")
>>> batch = LegacyBatch.parse(entry)
>>> batch.last_offset, batch.timestamp_type.label, batch.is_valid
(7, 'CREATE_TIME', True)
>>> [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()]
[(7, 1000, b'k', b'v')]
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafka_format.checksums import crc32
from kafka_format.compression import Compression, compress, decompress
from kafka_format.errors import KafkaFormatError
from kafka_format.model import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Header,
    TimestampType,
)

__all__ = ["LegacyBatch", "LegacyRecord", "build_legacy_entry", "build_legacy_wrapper"]

LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = 14  # crc, magic, attributes, key length, value length
_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """One magic 0/1 message as Kafka reports it (after the wrapper's offset and timestamp
    rules for inner messages)."""

    offset: int
    timestamp: int
    timestamp_type: TimestampType
    magic: int
    attributes: int
    crc_stored: int
    crc_computed: int
    key: bytes | None
    value: bytes | None
    size_in_bytes: int
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE

    @property
    def is_valid(self) -> bool:
        return self.size_in_bytes - LOG_OVERHEAD >= RECORD_OVERHEAD_V0 and (
            self.crc_stored == self.crc_computed
        )


@dataclass(frozen=True, slots=True)
class _Message:
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc_stored: int
    crc_computed: int


def _message(message: bytes, *, field_name: str) -> _Message:
    """Decode one message body (after offset and size)."""
    if len(message) < RECORD_OVERHEAD_V0:
        raise KafkaFormatError(
            f"Record is corrupt (crc could not be retrieved as the record is too small, size = "
            f"{len(message)})",
            field=field_name,
        )
    crc_stored, magic, attributes = struct.unpack_from(">IbB", message, 0)
    cursor = 6
    timestamp = NO_TIMESTAMP
    if magic != 0:
        if len(message) < cursor + 8 + 8:
            raise KafkaFormatError(
                f"message of magic {magic} too short for its timestamp", field=field_name
            )
        (timestamp,) = struct.unpack_from(">q", message, cursor)
        cursor += 8
    parts: list[bytes | None] = []
    for part in ("key", "value"):
        if cursor + 4 > len(message):
            raise KafkaFormatError(
                f"message ends before its {part} length", field=f"{field_name}.{part}"
            )
        (length,) = struct.unpack_from(">i", message, cursor)
        cursor += 4
        if length < 0:
            parts.append(None)
            continue
        if cursor + length > len(message):
            raise KafkaFormatError(
                f"{part} of {length} bytes runs past the message", field=f"{field_name}.{part}"
            )
        parts.append(message[cursor : cursor + length])
        cursor += length
    return _Message(
        magic, attributes, timestamp, parts[0], parts[1], crc_stored, crc32(message[4:])
    )


def _timestamp_type(magic: int, attributes: int) -> TimestampType:
    if magic == 0:
        return TimestampType.NO_TIMESTAMP_TYPE
    return TimestampType.from_attributes(attributes)


@dataclass(frozen=True, slots=True)
class LegacyBatch:
    """A magic 0/1 log entry at ``position`` (a message, or a compressed wrapper message),
    with the batch-level view Kafka gives it (``AbstractLegacyRecordBatch``)."""

    position: int
    offset: int
    message_size: int
    crc_stored: int
    magic: int
    attributes: int
    data: bytes | memoryview = field(repr=False, compare=False)
    source: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(
        cls, data: bytes | bytearray | memoryview, *, position: int = 0, source: str | None = None
    ) -> LegacyBatch:
        view = bytes(data) if isinstance(data, bytearray) else data
        if len(view) < LOG_OVERHEAD + 6:
            raise KafkaFormatError(
                "a log entry needs at least 18 bytes",
                source=source,
                position=position,
                field="entry",
            )
        offset, size = _ENTRY.unpack_from(view, 0)
        if size < RECORD_OVERHEAD_V0 or LOG_OVERHEAD + size > len(view):
            raise KafkaFormatError(
                "message size does not fit",
                source=source,
                position=position + 8,
                field="entry.size",
                value=size,
            )
        crc_stored, magic, attributes = struct.unpack_from(">IbB", view, LOG_OVERHEAD)
        return cls(
            position,
            offset,
            size,
            crc_stored,
            magic,
            attributes,
            data=view[: LOG_OVERHEAD + size],
            source=source,
        )

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.message_size

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """The first inner offset of a compressed wrapper (decompresses it), else the offset."""
        if not self.is_compressed:
            return self.offset
        return self.records()[0].offset

    @property
    def compression_id(self) -> int:
        return self.attributes & 0x07

    @property
    def compression(self) -> Compression:
        try:
            return Compression.from_id(self.compression_id)
        except KafkaFormatError as error:
            raise error.located(source=self.source, position=self.position + 17) from None

    @property
    def is_compressed(self) -> bool:
        return self.compression_id != 0

    @property
    def timestamp_type(self) -> TimestampType:
        return _timestamp_type(self.magic, self.attributes)

    @property
    def max_timestamp(self) -> int:
        """The message's own timestamp (for a wrapper: the max, or the log append time); -1
        for magic 0 or a message too short to hold one."""
        if self.magic == 0 or self.message_size < 14:
            return NO_TIMESTAMP
        if len(self.data) < LOG_OVERHEAD + 6 + 8:
            return NO_TIMESTAMP
        return int(struct.unpack_from(">q", self.data, LOG_OVERHEAD + 6)[0])

    # Fields that magic 0/1 do not have, with the values Kafka reports for them.
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    base_timestamp = None
    delete_horizon_ms = None
    record_count = None
    is_transactional = False
    is_control = False
    has_delete_horizon = False

    @property
    def crc_computed(self) -> int:
        return crc32(self.data[LOG_OVERHEAD + 4 :])

    @property
    def is_valid(self) -> bool:
        return self.crc_stored == self.crc_computed

    def ensure_valid(self) -> None:
        computed = self.crc_computed
        if computed != self.crc_stored:
            raise KafkaFormatError(
                f"Record is corrupt (stored crc = {self.crc_stored}, computed crc = {computed})",
                source=self.source,
                position=self.position + LOG_OVERHEAD,
                field="message.crc",
            )

    def records(self) -> list[LegacyRecord]:
        """The message itself, or a wrapper's inner messages with Kafka's offsets and
        timestamps (``DeepRecordsIterator``)."""
        try:
            return self._records()
        except KafkaFormatError as error:
            raise error.located(source=self.source, position=self.position) from None

    def _records(self) -> list[LegacyRecord]:
        body = bytes(self.data[LOG_OVERHEAD:])
        outer = _message(body, field_name="message")
        if not self.is_compressed:
            return [
                LegacyRecord(
                    self.offset,
                    outer.timestamp,
                    _timestamp_type(outer.magic, outer.attributes),
                    outer.magic,
                    outer.attributes,
                    outer.crc_stored,
                    outer.crc_computed,
                    outer.key,
                    outer.value,
                    self.size_in_bytes,
                )
            ]
        codec = self.compression
        if codec is Compression.ZSTD:
            raise KafkaFormatError(
                "Invalid wrapper compressionType found in legacy deep record iterator",
                field="message.attributes",
            )
        if outer.value is None:
            raise KafkaFormatError(
                f"Found invalid compressed record set with null value (magic = {self.magic})",
                field="message.value",
            )
        inner_bytes = decompress(codec, outer.value, magic=self.magic)
        wrapper_type = _timestamp_type(self.magic, self.attributes)
        entries: list[tuple[int, bytes]] = []
        cursor = 0
        while cursor + LOG_OVERHEAD <= len(inner_bytes):
            offset, size = _ENTRY.unpack_from(inner_bytes, cursor)
            if size < RECORD_OVERHEAD_V0:
                raise KafkaFormatError(
                    "Record size is less than the minimum record overhead (14)",
                    field=f"inner[{len(entries)}].size",
                )
            if cursor + LOG_OVERHEAD + size > len(inner_bytes):
                break  # a cut inner message ends the set, as DataLogInputStream returns null
            entries.append(
                (offset, inner_bytes[cursor + LOG_OVERHEAD : cursor + LOG_OVERHEAD + size])
            )
            cursor += LOG_OVERHEAD + size
        if not entries:
            raise KafkaFormatError(
                "Found invalid compressed record set with no inner records", field="message.value"
            )
        base = 0
        if self.magic == 1 and self.offset != 0:
            last_inner = entries[-1][0]
            if self.offset < last_inner:
                raise KafkaFormatError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{self.offset}' is less than the last inner message offset '{last_inner}' "
                    "and it is not zero.",
                    field="entry.offset",
                )
            base = self.offset - last_inner
        records = []
        for index, (offset, message) in enumerate(entries):
            inner = _message(message, field_name=f"inner[{index}]")
            if inner.attributes & 0x07:
                raise KafkaFormatError(
                    "Inner messages must not be compressed", field=f"inner[{index}].attributes"
                )
            timestamp = inner.timestamp
            timestamp_type = _timestamp_type(inner.magic, inner.attributes)
            if inner.magic == 1:
                timestamp_type = wrapper_type
                if wrapper_type is TimestampType.LOG_APPEND_TIME:
                    timestamp = self.max_timestamp
            records.append(
                LegacyRecord(
                    base + offset if self.magic == 1 else offset,
                    timestamp,
                    timestamp_type,
                    inner.magic,
                    inner.attributes,
                    inner.crc_stored,
                    inner.crc_computed,
                    inner.key,
                    inner.value,
                    LOG_OVERHEAD + len(message),
                )
            )
        return records


# --- writing (old segments for tests and tools; Kafka writes only v2 now) ---------------------
def _message_bytes(
    magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    if magic not in (0, 1):
        raise KafkaFormatError("legacy messages have magic 0 or 1", field="magic", value=magic)
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    return struct.pack(">I", crc32(body)) + body


def build_legacy_entry(
    *,
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = NO_TIMESTAMP,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """One uncompressed log entry as ``MemoryRecordsBuilder`` (magic 0/1) writes it."""
    attributes = 0x08 if magic == 1 and timestamp_type is TimestampType.LOG_APPEND_TIME else 0
    message = _message_bytes(
        magic, attributes, timestamp if magic == 1 else NO_TIMESTAMP, key, value
    )
    return _ENTRY.pack(offset, len(message)) + message


def build_legacy_wrapper(
    messages: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    magic: int,
    compression: Compression,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int = NO_TIMESTAMP,
    compression_level: int | None = None,
) -> bytes:
    """A compressed wrapper entry holding ``messages`` (offset, timestamp, key, value), with
    relative inner offsets for magic 1, as ``MemoryRecordsBuilder`` writes it."""
    if compression in (Compression.NONE, Compression.ZSTD) or not messages:
        raise KafkaFormatError(
            "a wrapper needs messages and gzip, snappy or lz4",
            field="compression",
            value=compression.label,
        )
    base = messages[0][0]
    inner = bytearray()
    max_timestamp = NO_TIMESTAMP
    for offset, timestamp, key, value in messages:
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            timestamp = log_append_time
        inner_attributes = (
            0x08 if magic == 1 and timestamp_type is TimestampType.LOG_APPEND_TIME else 0
        )
        message = _message_bytes(
            magic, inner_attributes, timestamp if magic == 1 else NO_TIMESTAMP, key, value
        )
        inner += _ENTRY.pack(offset - base if magic == 1 else offset, len(message)) + message
        max_timestamp = max(max_timestamp, timestamp)
    payload = compress(compression, bytes(inner), level=compression_level, magic=magic)
    attributes = int(compression)
    if magic == 1 and timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= 0x08
        max_timestamp = log_append_time
    wrapper = _message_bytes(
        magic, attributes, max_timestamp if magic == 1 else NO_TIMESTAMP, None, payload
    )
    return _ENTRY.pack(messages[-1][0], len(wrapper)) + wrapper
