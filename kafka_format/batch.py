"""Message format v2 (KIP-98): one record batch, read lazily and written as Kafka writes it.

Byte layout (big-endian; ``DefaultRecordBatch``), 61 bytes of header then the records::

    0  base offset        int64      ─┐ outside the CRC: the broker rewrites these in place
    8  batch length       int32       │ (bytes after this field)
   12  partition leader   int32      ─┘ epoch
   16  magic              int8       = 2
   17  crc                uint32     CRC-32C of bytes 21..end
   21  attributes         int16      bits 0-2 codec, 3 LOG_APPEND_TIME, 4 transactional,
                                     5 control, 6 delete horizon (base timestamp is it)
   23  last offset delta  int32
   27  base timestamp     int64
   35  max timestamp      int64
   43  producer id        int64
   51  producer epoch     int16
   53  base sequence      int32
   57  record count       int32
   61  records            (compressed as one stream when the codec is not none)

A record: length varint, attributes int8, timestamp delta varlong, offset delta varint, key
length varint (-1 = null) and key, value length varint and value, header count varint, then per
header key length varint, UTF-8 key, value length varint (-1 = null), value.

>>> data = build_batch([NewRecord(b"k", b"v", timestamp=1000)], base_offset=42)
>>> batch = RecordBatch.parse(data)
>>> batch.base_offset, batch.last_offset, batch.record_count, batch.is_valid
(42, 42, 1, True)
>>> [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()]
[(42, 1000, b'k', b'v')]
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple, cast

from kafka_format.checksums import crc32c
from kafka_format.compression import Compression, compress, decompress
from kafka_format.errors import KafkaFormatError
from kafka_format.model import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Header,
    NewRecord,
    TimestampType,
)
from kafka_format.varint import read_varint, read_varlong, write_varint, write_varlong

__all__ = [
    "BATCH_HEADER_SIZE",
    "Record",
    "RecordBatch",
    "build_batch",
    "build_empty_batch",
    "increment_sequence",
    "set_last_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HeaderFields = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]
BATCH_HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset + batch length
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
_INT32_MAX = 2**31 - 1


def _int64(value: int) -> int:
    """Java's long arithmetic wraps; so do offsets and timestamps computed from deltas."""
    return ((value + 2**63) % 2**64) - 2**63


def _int32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap to 0 after 2^31-1.

    >>> increment_sequence(2**31 - 2, 3)
    1
    """
    if sequence > _int32(_INT32_MAX - increment):
        return _int32(increment - _int32(_INT32_MAX - sequence) - 1)
    return _int32(sequence + increment)


class Record(NamedTuple):
    """One decoded v2 record, with the values Kafka reports: absolute ``offset``, ``timestamp``
    (the batch's max timestamp under LOG_APPEND_TIME), ``sequence`` (-1 without a producer).
    A named tuple: records are decoded by the million."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE
    attributes: int = 0
    size_in_bytes: int = 0
    offset_delta: int = 0
    timestamp_delta: int = 0


class RecordBatch(NamedTuple):
    """A v2 batch at ``position`` in its file: header fields decoded, records read on demand.

    ``data`` holds the batch's own bytes (log overhead included); ``source`` names the file in
    errors. Build one with :meth:`parse` (a buffer holding one batch) or get them from
    :func:`kafka_format.segment.iter_batches`. A named tuple, so that scanning a segment's
    headers costs one tuple per batch."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc_stored: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    data: bytes | memoryview
    source: str | None = None

    def __repr__(self) -> str:
        return (
            f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, record_count={self.record_count}, "
            f"size_in_bytes={self.size_in_bytes}, crc_stored={self.crc_stored})"
        )

    @classmethod
    def parse(
        cls, data: bytes | bytearray | memoryview, *, position: int = 0, source: str | None = None
    ) -> RecordBatch:
        """The batch at the start of ``data`` (``position`` is only reported in errors)."""
        view = bytes(data) if isinstance(data, bytearray) else data
        if len(view) < BATCH_HEADER_SIZE:
            raise KafkaFormatError(
                f"a v2 batch needs {BATCH_HEADER_SIZE} header bytes, {len(view)} given",
                source=source,
                position=position,
                field="batch",
            )
        fields = cast(HeaderFields, HEADER.unpack_from(view, 0))
        size = LOG_OVERHEAD + fields[1]
        if fields[1] < 0 or size > len(view):
            raise KafkaFormatError(
                f"batch length does not fit the {len(view)} bytes given",
                source=source,
                position=position + 8,
                field="batch.length",
                value=fields[1],
            )
        if size < BATCH_HEADER_SIZE:
            raise KafkaFormatError(
                f"Record batch is corrupt (the size {size} is smaller than the minimum allowed "
                f"overhead {BATCH_HEADER_SIZE})",
                source=source,
                position=position + 8,
                field="batch.length",
                value=fields[1],
            )
        return cls._make((position, *fields, view[:size], source))

    # --- what Kafka derives from the header ---------------------------------------------
    @property
    def size_in_bytes(self) -> int:
        """The whole batch, log overhead (offset and length) included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return _int64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return _int64(self.last_offset + 1)

    @property
    def compression_id(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def compression(self) -> Compression:
        """The codec; ids 5-7 raise :class:`KafkaFormatError` as ``CompressionType.forId``."""
        try:
            return Compression.from_id(self.compression_id)
        except KafkaFormatError as error:
            raise error.located(
                source=self.source, position=self.position + ATTRIBUTES_OFFSET
            ) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.from_attributes(self.attributes)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The base timestamp when the delete-horizon bit is set (KIP-534), else None."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def is_compressed(self) -> bool:
        return self.compression_id != 0

    @property
    def crc_computed(self) -> int:
        """CRC-32C over the attributes to the end, as ``DefaultRecordBatch.isValid`` computes."""
        return crc32c(self.data[ATTRIBUTES_OFFSET:])

    @property
    def is_valid(self) -> bool:
        return self.crc_stored == self.crc_computed

    def ensure_valid(self) -> None:
        """``ensureValid``: raise :class:`KafkaFormatError` (field ``batch.crc``) on a CRC
        mismatch."""
        computed = self.crc_computed
        if computed != self.crc_stored:
            raise KafkaFormatError(
                f"Record is corrupt (stored crc = {self.crc_stored}, computed crc = {computed})",
                source=self.source,
                position=self.position + CRC_OFFSET,
                field="batch.crc",
            )

    # --- records ------------------------------------------------------------------------
    def records_bytes(self) -> bytes:
        """The records section, decompressed."""
        payload = self.data[BATCH_HEADER_SIZE:]
        codec = self.compression
        if codec is Compression.NONE:
            return bytes(payload)
        try:
            return decompress(codec, payload, magic=2)
        except KafkaFormatError as error:
            raise error.located(
                source=self.source, position=self.position + BATCH_HEADER_SIZE
            ) from None

    def records(self) -> list[Record]:
        """Every record, as Kafka's batch iterator returns them (decompressing if needed).

        Raises :class:`KafkaFormatError` where Kafka throws ``InvalidRecordException``: a
        negative record count, a record that does not fit, a negative header count or header
        key size, a record whose fields do not add up to its length, bytes left over after the
        last record."""
        if self.record_count == 0:
            return []
        if self.record_count < 0:
            raise self._error(
                f"Found invalid record count {self.record_count} in magic v2 batch",
                "batch.record_count",
                57,
            )
        data = self.records_bytes()
        log_append_time = (
            self.max_timestamp if self.timestamp_type is TimestampType.LOG_APPEND_TIME else None
        )
        try:
            records, end = _decode_records(
                data,
                self.record_count,
                self.base_offset,
                self.base_timestamp,
                self.base_sequence,
                log_append_time,
            )
        except KafkaFormatError as error:
            inside = error.position or 0
            if self.is_compressed:  # a byte of the decompressed records: say so
                message = f"{error.message} (at byte {inside} of the decompressed records)"
                position = self.position + BATCH_HEADER_SIZE
            else:
                message, position = error.message, self.position + BATCH_HEADER_SIZE + inside
            raise KafkaFormatError(
                message, source=self.source, position=position, field=error.field
            ) from None
        if end != len(data):
            raise self._error(
                "Incorrect declared batch size, records still remaining in file",
                "batch.records",
                BATCH_HEADER_SIZE,
            )
        return records

    def _error(self, message: str, field_name: str, offset: int) -> KafkaFormatError:
        return KafkaFormatError(
            message, source=self.source, position=self.position + offset, field=field_name
        )


def _varint_at(data: bytes, cursor: int) -> tuple[int, int]:
    """A zig-zag varint, with the one-byte case (most lengths and deltas) inline."""
    byte = data[cursor]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), cursor + 1
    return read_varint(data, cursor)


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    base_sequence: int,
    log_append_time: int | None,
) -> tuple[list[Record], int]:
    """Kafka's ``DefaultRecord.readFrom`` for ``count`` records. O(bytes); keys, values and
    header values are copied out of ``data``."""
    records: list[Record] = []
    append = records.append
    make = Record._make
    position = 0
    end = len(data)
    in_range = range(-(2**63), 2**63)
    index = 0
    try:
        for index in range(count):
            if position >= end:
                raise KafkaFormatError(
                    "Incorrect declared batch size, premature EOF reached", field=f"record[{index}]"
                )
            try:
                body_size, start = _varint_at(data, position)
                record_end = start + body_size
                if body_size < 0 or record_end > end:
                    raise KafkaFormatError(
                        f"Invalid record size: expected {body_size} bytes in record payload, but "
                        f"the batch has only {end - start} remaining bytes",
                        field=f"record[{index}].length",
                    )
                if start >= record_end:
                    raise KafkaFormatError(
                        "record ends before its attributes", field=f"record[{index}]"
                    )
                attributes = data[start]
                byte = data[start + 1] if start + 1 < record_end else 0x80
                if byte < 0x80:
                    timestamp_delta, cursor = (byte >> 1) ^ -(byte & 1), start + 2
                else:
                    timestamp_delta, cursor = read_varlong(data, start + 1)
                offset_delta, cursor = _varint_at(data, cursor)
                key_size, cursor = _varint_at(data, cursor)
                if key_size < 0:
                    key = None
                else:
                    key = data[cursor : cursor + key_size]
                    cursor += key_size
                value_size, cursor = _varint_at(data, cursor)
                if value_size < 0:
                    value = None
                else:
                    value = data[cursor : cursor + value_size]
                    cursor += value_size
                header_count, cursor = _varint_at(data, cursor)
                headers: tuple[Header, ...] = ()
                if header_count:
                    headers, cursor = _decode_headers(data, cursor, record_end, header_count, index)
            except IndexError:
                raise KafkaFormatError(
                    "Found invalid record structure: a field runs past the batch",
                    field=f"record[{index}]",
                ) from None
            except KafkaFormatError as error:
                if error.field in ("varint", "varlong"):
                    raise KafkaFormatError(
                        f"Found invalid record structure: {error.message}", field=f"record[{index}]"
                    ) from None
                raise
            if cursor != record_end:
                raise KafkaFormatError(
                    f"Invalid record size: expected to read {body_size} bytes in record payload, "
                    f"but instead read {cursor - start}",
                    field=f"record[{index}].length",
                )
            timestamp = base_timestamp + timestamp_delta
            if log_append_time is not None:
                timestamp = log_append_time
            elif timestamp not in in_range:
                timestamp = _int64(timestamp)
            offset = base_offset + offset_delta
            if offset not in in_range:
                offset = _int64(offset)
            sequence = (
                increment_sequence(base_sequence, offset_delta)
                if base_sequence >= 0
                else NO_SEQUENCE
            )
            append(
                make(
                    (
                        offset,
                        timestamp,
                        key,
                        value,
                        headers,
                        sequence,
                        attributes,
                        record_end - position,
                        offset_delta,
                        timestamp_delta,
                    )
                )
            )
            position = record_end
    except KafkaFormatError as error:
        # place the error at the record: the decoder reports positions inside ``data``
        raise KafkaFormatError(
            error.message, position=position, field=error.field or f"record[{index}]"
        ) from None
    return records, position


def _decode_headers(
    data: bytes, cursor: int, record_end: int, count: int, index: int
) -> tuple[tuple[Header, ...], int]:
    where = f"record[{index}].headers"
    if count < 0:
        raise KafkaFormatError(f"Found invalid number of record headers {count}", field=where)
    if count > record_end - cursor:
        raise KafkaFormatError(
            f"Found invalid number of record headers. {count} is larger than the remaining "
            "size of the buffer",
            field=where,
        )
    items = []
    for header_index in range(count):
        key_length, cursor = _varint_at(data, cursor)
        if key_length < 0:
            raise KafkaFormatError(
                f"Invalid negative header key size {key_length}",
                field=f"{where}[{header_index}].key",
            )
        key = data[cursor : cursor + key_length]
        cursor += key_length
        value_length, cursor = _varint_at(data, cursor)
        value = None
        if value_length >= 0:
            value = data[cursor : cursor + value_length]
            cursor += value_length
        items.append(Header(key, value))
    return tuple(items), cursor


# --- writing ----------------------------------------------------------------------------------
def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[Header],
) -> bytes:
    """One record as ``DefaultRecord.writeTo`` writes it (attributes 0)."""
    body = bytearray(b"\x00")
    body += write_varlong(timestamp_delta)
    body += write_varint(offset_delta)
    if key is None:
        body += b"\x01"
    else:
        body += write_varint(len(key))
        body += key
    if value is None:
        body += b"\x01"
    else:
        body += write_varint(len(value))
        body += value
    header_list = list(headers)
    body += write_varint(len(header_list))
    for header in header_list:
        body += write_varint(len(header.key))
        body += header.key
        if header.value is None:
            body += b"\x01"
        else:
            body += write_varint(len(header.value))
            body += header.value
    return write_varint(len(body)) + bytes(body)


def _attributes(
    codec: Compression,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
        raise KafkaFormatError(
            "Timestamp type must be provided for message format v2", field="timestamp_type"
        )
    attributes = int(codec) & COMPRESSION_MASK
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_MASK
    return attributes


def _check_range(name: str, value: int, bits: int) -> None:
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise KafkaFormatError(f"{name} does not fit an int{bits}", field=name, value=value)


def _header_bytes(
    *,
    base_offset: int,
    size: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    records: bytes,
) -> bytes:
    for name, value, bits in (
        ("base_offset", base_offset, 64),
        ("partition_leader_epoch", partition_leader_epoch, 32),
        ("last_offset_delta", last_offset_delta, 32),
        ("base_timestamp", base_timestamp, 64),
        ("max_timestamp", max_timestamp, 64),
        ("producer_id", producer_id, 64),
        ("producer_epoch", producer_epoch, 16),
        ("base_sequence", base_sequence, 32),
        ("record_count", record_count, 32),
        ("batch_length", size - LOG_OVERHEAD, 32),
    ):
        _check_range(name, value, bits)
    tail = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
        + records
    )
    crc = crc32c(tail)
    return (
        struct.pack(">qiibI", base_offset, size - LOG_OVERHEAD, partition_leader_epoch, 2, crc)
        + tail
    )


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int = NO_TIMESTAMP,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    delete_horizon_ms: int = NO_TIMESTAMP,
    last_offset: int | None = None,
) -> bytes:
    """One v2 batch, byte for byte as ``MemoryRecordsBuilder`` (magic 2) builds it from the same
    arguments and ``append`` / ``appendWithOffset`` calls (``last_offset`` is
    ``overrideLastOffset``). Compressed batches carry this library's compressed bytes (gzip:
    identical to Java's). Raises :class:`KafkaFormatError` where the builder throws."""
    if not records:
        raise KafkaFormatError(
            "a batch needs at least one record (build_empty_batch writes the empty header)",
            field="records",
        )
    if is_transactional and producer_id == NO_PRODUCER_ID:
        raise KafkaFormatError(
            "Cannot write transactional messages without a valid producer ID", field="producer_id"
        )
    if producer_id != NO_PRODUCER_ID:
        if producer_epoch == NO_PRODUCER_EPOCH:
            raise KafkaFormatError("Invalid negative producer epoch", field="producer_epoch")
        if base_sequence < 0 and not is_control:
            raise KafkaFormatError("Invalid negative sequence number used", field="base_sequence")
    has_delete_horizon = delete_horizon_ms >= 0
    base_timestamp: int | None = delete_horizon_ms if has_delete_horizon else None
    max_timestamp = NO_TIMESTAMP
    previous: int | None = None
    encoded = []
    for index, record in enumerate(records):
        offset = (
            record.offset
            if record.offset is not None
            else (base_offset if previous is None else previous + 1)
        )
        if previous is not None and offset <= previous:
            raise KafkaFormatError(
                f"Illegal offset {offset} following previous offset {previous} (Offsets must "
                "increase monotonically)",
                field=f"records[{index}].offset",
            )
        if record.timestamp < 0 and record.timestamp != NO_TIMESTAMP:
            raise KafkaFormatError(
                "Invalid negative timestamp",
                field=f"records[{index}].timestamp",
                value=record.timestamp,
            )
        if offset - base_offset > _INT32_MAX or offset < base_offset:
            raise KafkaFormatError(
                "offset delta out of range", field=f"records[{index}].offset", value=offset
            )
        if base_timestamp is None:
            base_timestamp = record.timestamp
        _check_range(f"records[{index}].timestamp_delta", record.timestamp - base_timestamp, 64)
        encoded.append(
            encode_record(
                offset - base_offset,
                record.timestamp - base_timestamp,
                record.key,
                record.value,
                record.headers,
            )
        )
        previous = offset
        max_timestamp = max(max_timestamp, record.timestamp)
    assert base_timestamp is not None and previous is not None
    if base_timestamp < 0 and base_timestamp != NO_TIMESTAMP:
        raise KafkaFormatError(
            "Invalid message timestamp", field="base_timestamp", value=base_timestamp
        )
    if last_offset is not None:
        previous = last_offset
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        max_timestamp = log_append_time
    body = b"".join(encoded)
    if compression is not Compression.NONE:
        body = compress(compression, body, level=compression_level, magic=2)
    attributes = _attributes(
        compression, timestamp_type, is_transactional, is_control, has_delete_horizon
    )
    return _header_bytes(
        base_offset=base_offset,
        size=BATCH_HEADER_SIZE + len(body),
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=previous - base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
        records=body,
    )


def build_empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    timestamp: int,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """A batch header without records (``DefaultRecordBatch.writeEmptyHeader``): what log
    compaction keeps so that a producer's last sequence survives. Base timestamp -1, max
    timestamp = ``timestamp``."""
    attributes = _attributes(Compression.NONE, timestamp_type, is_transactional, is_control, False)
    return _header_bytes(
        base_offset=base_offset,
        size=BATCH_HEADER_SIZE,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=_int32(last_offset - base_offset),
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=0,
        records=b"",
    )


# --- the broker's in-place edits (LogValidator) -------------------------------------------------
def _batch_buffer(batch: bytes | bytearray) -> bytearray:
    buffer = bytearray(batch)
    RecordBatch.parse(bytes(buffer))  # refuses what is not one whole v2 batch
    return buffer


def set_last_offset(batch: bytes | bytearray, last_offset: int) -> bytes:
    """``setLastOffset``: the base offset becomes ``last_offset`` - last offset delta. The
    base offset lies outside the CRC, which stays as it is."""
    buffer = _batch_buffer(batch)
    (delta,) = struct.unpack_from(">i", buffer, 23)
    _check_range("last_offset", last_offset - delta, 64)
    struct.pack_into(">q", buffer, 0, last_offset - delta)
    return bytes(buffer)


def set_partition_leader_epoch(batch: bytes | bytearray, epoch: int) -> bytes:
    """``setPartitionLeaderEpoch``: outside the CRC, which stays as it is."""
    buffer = _batch_buffer(batch)
    _check_range("partition_leader_epoch", epoch, 32)
    struct.pack_into(">i", buffer, 12, epoch)
    return bytes(buffer)


def set_max_timestamp(
    batch: bytes | bytearray, timestamp_type: TimestampType, max_timestamp: int
) -> bytes:
    """``setMaxTimestamp``: rewrite the timestamp type bit and the max timestamp and recompute
    the CRC -- unless both are unchanged, when Kafka leaves the bytes (and CRC) alone."""
    buffer = _batch_buffer(batch)
    parsed = RecordBatch.parse(bytes(buffer))
    if parsed.timestamp_type is timestamp_type and parsed.max_timestamp == max_timestamp:
        return bytes(buffer)
    _check_range("max_timestamp", max_timestamp, 64)
    attributes = _attributes(
        Compression(parsed.compression_id) if parsed.compression_id <= 4 else Compression.NONE,
        timestamp_type,
        parsed.is_transactional,
        parsed.is_control,
        parsed.has_delete_horizon,
    )
    if parsed.compression_id > 4:
        attributes |= parsed.compression_id
    struct.pack_into(">h", buffer, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">q", buffer, MAX_TIMESTAMP_OFFSET, max_timestamp)
    struct.pack_into(">I", buffer, CRC_OFFSET, crc32c(bytes(buffer[ATTRIBUTES_OFFSET:])))
    return bytes(buffer)
