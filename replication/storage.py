"""A replica's log on disk, in Kafka's own files: a partition directory Kafka could load.

One directory per replica (the "log dir") holds a partition directory ``<topic>-<partition>``
with, per segment, three files named by the segment's base offset padded to 20 digits:

- ``00000000000000000000.log``: record batches in Kafka's message format v2
  (``kafka_format.batch``), one batch per append, as the leader writes one batch per produce
  request and a follower copies the leader's batches: base offset, the partition leader epoch
  the record was appended in, CRC-32C, the producer fields (-1/-1/-1: the simulator's producer
  is not idempotent, so it writes what Kafka's non-idempotent producers write), and one record
  whose value is the simulator's string in UTF-8 (no key);
- ``00000000000000000000.index``: the sparse offset index, 8-byte entries
  (relative offset i32, file position i32), one each time more than ``index_interval_bytes``
  were appended since the last entry (Kafka's ``index.interval.bytes``);
- ``00000000000000000000.timeindex``: the time index, 12-byte entries (timestamp i64, relative
  offset i32) holding the largest timestamp seen so far and the offset that first reached it.

plus, in the partition directory, ``leader-epoch-checkpoint`` and ``partition.metadata`` (the
topic id: a UUID hashed from the topic name, so that the same run writes the same bytes), and,
in the log dir, ``replication-offset-checkpoint`` (high watermark),
``recovery-point-offset-checkpoint`` (the flushed offset) and ``log-start-offset-checkpoint``
(no entries: as Kafka, only a log start above the first segment's base offset is written), all
in Kafka's text format (version line ``0``, entry count line, then one entry per line; one
partition per log dir). ``ktk log inspect`` and ``ktk log compare`` read these directories.

A segment rolls when the next batch would push it past ``segment_bytes`` (Kafka's
``segment.bytes``; time-based rolling is not modelled); a batch larger than ``segment_bytes``
gets a segment of its own (Kafka would refuse it; the simulator cannot refuse an append).

Recovery reads each segment as Kafka's ``LogSegment.recover`` does
(``kafka_format.segment.recover_segment``): batches are kept while each passes its CRC, the
segment is truncated at the first torn or corrupt batch, and every later segment is deleted.

Durability model. ``flush()`` marks every byte written so far as durable. A hard crash followed
by ``recover(lose_unflushed=True)`` cuts each segment file back to its flushed length, which drops
exactly the records appended since the last flush; ``recover(lose_unflushed=False)`` keeps them
(the page cache survived). Checkpoint files are written to a temporary file and renamed into
place, so they are durable as soon as they are written. Recovery always rebuilds both indexes
from the log files.

A worked example: 70-byte batches (the 61-byte batch header, a 9-byte record holding a 2-byte
value), segments of at most 150 bytes, an index entry whenever more than 50 bytes went by since
the last one.

>>> import tempfile
>>> log_dir = tempfile.mkdtemp()
>>> storage = DiskLogStorage(log_dir, segment_bytes=150, index_interval_bytes=50)
>>> for offset, value in enumerate(["m1", "m2", "m3", "m4", "m5"]):
...     storage.append(offset, 0, value, timestamp_ms=1000 + 10 * offset)
>>> [segment.base_offset for segment in storage.segments()]
[0, 2, 4]
>>> storage.position_of(3)
SegmentPosition(base_offset=2, position=70)
>>> storage.offset_for_timestamp(1025)
3
>>> from kafka_format.segment import read_segment_file
>>> batch = read_segment_file(storage.segments()[1].log_path).batches[1]
>>> batch.base_offset, batch.partition_leader_epoch, batch.producer_id, batch.records()[0].value
(3, 0, -1, b'm4')
>>> storage.flush()
>>> storage.append(5, 1, "m6", timestamp_ms=1050)
>>> storage.write_checkpoints(4, [(0, 0), (1, 5)])
>>> records, high_watermark, epoch_entries = storage.recover(lose_unflushed=True)
>>> [record.value for record in records], high_watermark
(['m1', 'm2', 'm3', 'm4', 'm5'], 4)
>>> epoch_entries
[EpochEntry(epoch=0, start_offset=0), EpochEntry(epoch=1, start_offset=5)]
>>> print((storage.log_dir / RECOVERY_POINT_CHECKPOINT).read_text(), end="")
0
1
ktk 0 5
"""

from __future__ import annotations

import bisect
import os
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kafka_format.batch import build_batch
from kafka_format.checkpoint import (
    CHECKPOINT_VERSION,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
    topic_id_to_string,
)
from kafka_format.errors import KafkaFormatError
from kafka_format.model import NewRecord
from kafka_format.partition_dir import segment_file_name
from kafka_format.segment import Batch, iter_batches, recover_segment
from replication.errors import InputError, ReplicationError
from replication.log import NO_PRODUCER, EpochEntry, LogRecord, ProducerFields

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
HIGH_WATERMARK_CHECKPOINT = REPLICATION_OFFSET_CHECKPOINT

# Kafka's defaults for segment.bytes and index.interval.bytes; its smallest segment.bytes
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
MIN_SEGMENT_BYTES = 14
NO_TIMESTAMP = -1

_OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, file position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
# a batch of one record with an empty value and no key: 61-byte header + 7-byte record
BATCH_OVERHEAD = 68
# the fixed namespace of the topic ids ktk derives from topic names
TOPIC_ID_NAMESPACE = uuid.UUID("6b746b2d-746f-7069-632d-69642d763100")


class StorageError(ReplicationError):
    """Base class of the errors this module raises on purpose."""


class CorruptCheckpointError(StorageError, InputError):
    """A checkpoint file that breaks Kafka's text format; names the file, line and field.

    >>> str(CorruptCheckpointError("not an integer", source="leader-epoch-checkpoint",
    ...                            line=3, field="start_offset", value="x"))
    "leader-epoch-checkpoint:3: start_offset: not an integer (got 'x')"
    """


class AppendOutOfOrderError(StorageError, ValueError):
    """An append whose offset is not above the log end offset."""


class StoredRecord(NamedTuple):
    """One record as stored: its offset, the leader epoch it was appended in, its timestamp,
    and its batch's producer fields (-1 for a producer that is not idempotent)."""

    offset: int
    leader_epoch: int
    timestamp_ms: int
    value: str
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1


class SegmentPosition(NamedTuple):
    """Where a lookup starts scanning: the segment (by base offset) and a byte position in it."""

    base_offset: int
    position: int


def encode_record(record: StoredRecord, producer: ProducerFields = NO_PRODUCER) -> bytes:
    """One record as one Kafka v2 record batch (what ``MemoryRecordsBuilder`` writes for it).

    The value is UTF-8; a lone surrogate (never a valid scenario value) is kept as its
    surrogate-escaped bytes rather than failing the append.

    >>> batch = encode_record(StoredRecord(7, 2, 1000, "hi"))
    >>> len(batch), batch[:8].hex(), batch[12:16].hex()  # base offset, partition leader epoch
    (70, '0000000000000007', '00000002')
    """
    return build_batch(
        [NewRecord(None, record.value.encode("utf-8", "surrogatepass"), record.timestamp_ms)],
        base_offset=record.offset,
        partition_leader_epoch=record.leader_epoch,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=producer.base_sequence,
    )


def _stored_records(batch: Batch) -> list[StoredRecord]:
    """The records of one batch ``encode_record`` wrote, read back: the value from UTF-8 (a
    lone surrogate as written, a null value as ""), the leader epoch from the batch header.

    >>> _stored_records(next(iter_batches(encode_record(StoredRecord(7, 2, 1000, "hi")))))[0][:4]
    (7, 2, 1000, 'hi')
    >>> idempotent = encode_record(StoredRecord(7, 2, 1000, "hi"), ProducerFields(4000, 1, 9))
    >>> _stored_records(next(iter_batches(idempotent)))[0][4:]
    (4000, 1, 9)
    """
    epoch = batch.partition_leader_epoch
    producer_id, producer_epoch = batch.producer_id, batch.producer_epoch
    base_sequence = batch.base_sequence
    return [
        StoredRecord(
            record.offset,
            epoch,
            record.timestamp,
            (record.value or b"").decode("utf-8", "surrogatepass"),
            producer_id,
            producer_epoch,
            base_sequence + (record.offset - batch.base_offset) if base_sequence >= 0 else -1,
        )
        for record in batch.records()
    ]


def decode_batches(
    data: bytes, *, source: str | None = None, base_offset: int = 0
) -> tuple[list[tuple[int, StoredRecord]], int]:
    """Decode batches from ``data``; return ``[(batch position, record)]`` and the valid length.

    Kafka's recovery reading (``recover_segment``): decoding stops at the first batch that is
    cut short or fails its CRC; batches whose offsets go below ``base_offset`` or do not
    increase are cut there too (nothing from them on can be trusted).

    >>> one = encode_record(StoredRecord(0, 0, 5, "a"))
    >>> located, valid = decode_batches(one + encode_record(StoredRecord(1, 0, 6, "b"))[:-3])
    >>> [record.value for _, record in located], valid
    (['a'], 69)
    """
    recovery = recover_segment(data, source=source)
    located: list[tuple[int, StoredRecord]] = []
    valid_length = 0
    last_offset = base_offset - 1
    for batch in recovery.batches:
        if batch.base_offset <= last_offset:
            break
        try:
            batch_records = _stored_records(batch)
        except KafkaFormatError:
            break
        if not batch_records:
            break
        located += [(batch.position, stored) for stored in batch_records]
        last_offset = batch.last_offset
        valid_length = batch.position + batch.size_in_bytes
    return located, valid_length


def topic_id_for(topic: str) -> bytes:
    """A topic id derived from the topic name (a name-based UUID): the same topic always gets
    the same id, so the simulator's files are deterministic. Like ``Uuid.randomUuid`` it is
    never the zero id and its text never starts with ``-``.

    >>> topic_id_to_string(topic_id_for("ktk"))
    '7K70cZ82VI6rbOdGHsrF6Q'
    """
    salt = 0
    while True:
        candidate = uuid.uuid5(TOPIC_ID_NAMESPACE, topic if salt == 0 else f"{topic}#{salt}").bytes
        if candidate != bytes(16) and not topic_id_to_string(candidate).startswith("-"):
            return candidate
        salt += 1


def read_offset_index(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """The entries of an ``.index`` file as ``(relative offset, position)``."""
    data = Path(path).read_bytes()
    usable = len(data) - len(data) % _OFFSET_INDEX_ENTRY.size
    return [(first, second) for first, second in _OFFSET_INDEX_ENTRY.iter_unpack(data[:usable])]


def read_time_index(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """The entries of a ``.timeindex`` file as ``(timestamp, relative offset)``."""
    data = Path(path).read_bytes()
    usable = len(data) - len(data) % _TIME_INDEX_ENTRY.size
    return [(first, second) for first, second in _TIME_INDEX_ENTRY.iter_unpack(data[:usable])]


def _parse_checkpoint(text: str, source: str, fields: Sequence[str]) -> list[list[str]]:
    """Split a checkpoint file into entry rows, checking version, count and arity."""
    lines = text.splitlines()
    if not lines:
        raise CorruptCheckpointError("empty file", source=source, line=1, field="version", value="")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(
            f"unsupported version, expected {CHECKPOINT_VERSION}",
            source=source,
            line=1,
            field="version",
            value=lines[0],
        )
    count_text = lines[1].strip() if len(lines) > 1 else ""
    if not count_text.isdigit():
        raise CorruptCheckpointError(
            "entry count must be a non-negative integer",
            source=source,
            line=2,
            field="count",
            value=count_text,
        )
    count = int(count_text)
    entry_lines = lines[2:]
    if len(entry_lines) != count:
        raise CorruptCheckpointError(
            f"count line says {count} entries, file has {len(entry_lines)}",
            source=source,
            line=2,
            field="count",
            value=count,
        )
    rows: list[list[str]] = []
    for line_number, line in enumerate(entry_lines, start=3):
        parts = line.split()
        if len(parts) != len(fields):
            raise CorruptCheckpointError(
                f"expected {len(fields)} fields: {' '.join(fields)}",
                source=source,
                line=line_number,
                field="entry",
                value=line,
            )
        rows.append(parts)
    return rows


def _parse_int(text: str, source: str, line: int, field_name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorruptCheckpointError(
            "not an integer", source=source, line=line, field=field_name, value=text
        ) from None


def parse_epoch_checkpoint(
    text: str, source: str = LEADER_EPOCH_CHECKPOINT
) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` entries of a ``leader-epoch-checkpoint`` file.

    >>> parse_epoch_checkpoint("0\\n2\\n0 0\\n2 5\\n")
    [(0, 0), (2, 5)]
    """
    rows = _parse_checkpoint(text, source, ("epoch", "start_offset"))
    return [
        (
            _parse_int(epoch, source, line, "epoch"),
            _parse_int(start_offset, source, line, "start_offset"),
        )
        for line, (epoch, start_offset) in enumerate(rows, start=3)
    ]


def parse_offset_checkpoint(
    text: str, source: str = HIGH_WATERMARK_CHECKPOINT
) -> list[tuple[str, int, int]]:
    """``(topic, partition, offset)`` entries of a ``replication-offset-checkpoint`` file.

    >>> parse_offset_checkpoint("0\\n1\\norders 0 7\\n")
    [('orders', 0, 7)]
    """
    rows = _parse_checkpoint(text, source, ("topic", "partition", "offset"))
    return [
        (
            topic,
            _parse_int(partition, source, line, "partition"),
            _parse_int(offset, source, line, "offset"),
        )
        for line, (topic, partition, offset) in enumerate(rows, start=3)
    ]


def _write_atomically(path: Path, text: str, fsync: bool) -> None:
    """Write to a temporary file and rename it into place, as Kafka's CheckpointFile does."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        if fsync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(temporary, path)


IndexEntry = tuple[int, int]


def _first(entry: IndexEntry) -> int:
    return entry[0]


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


@dataclass(slots=True)
class Segment:
    """One segment's files and the in-memory mirror of its two indexes."""

    directory: Path
    base_offset: int
    index_interval_bytes: int
    size: int = 0
    flushed_size: int = 0
    next_offset: int = -1
    offset_index: list[IndexEntry] = field(default_factory=list)
    time_index: list[IndexEntry] = field(default_factory=list)
    bytes_since_last_index_entry: int = 0
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int = -1

    def __post_init__(self) -> None:
        if self.next_offset < 0:
            self.next_offset = self.base_offset

    @property
    def log_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, "log")

    @property
    def index_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, "index")

    @property
    def time_index_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, "timeindex")

    def create_files(self) -> None:
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.write_bytes(b"")

    def delete_files(self) -> None:
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)

    def is_empty(self) -> bool:
        return self.size == 0

    def note_record(
        self, offset: int, timestamp_ms: int, position: int, batch_size: int
    ) -> tuple[IndexEntry | None, IndexEntry | None]:
        """Update index state for a record at ``position``; return new (offset, time) entries."""
        # same order as Kafka's LogSegment.append: max timestamp first, then the index check
        if timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
            self.offset_of_max_timestamp = offset
        new_offset_entry: IndexEntry | None = None
        new_time_entry: IndexEntry | None = None
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            new_offset_entry = (offset - self.base_offset, position)
            self.offset_index.append(new_offset_entry)
            new_time_entry = self._maybe_time_entry()
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += batch_size
        self.next_offset = offset + 1
        return new_offset_entry, new_time_entry

    def _maybe_time_entry(self) -> IndexEntry | None:
        """Kafka's TimeIndex.maybeAppend: only a strictly larger timestamp makes an entry."""
        if self.offset_of_max_timestamp < 0:
            return None
        if self.time_index and self.max_timestamp <= self.time_index[-1][0]:
            return None
        entry = (self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        self.time_index.append(entry)
        return entry

    def seal(self) -> None:
        """On roll, record the final max timestamp in the time index (Kafka does the same)."""
        entry = self._maybe_time_entry()
        if entry is not None:
            with open(self.time_index_path, "ab") as handle:
                handle.write(_TIME_INDEX_ENTRY.pack(*entry))

    def write_indexes(self) -> None:
        offset_bytes = b"".join(_OFFSET_INDEX_ENTRY.pack(*entry) for entry in self.offset_index)
        time_bytes = b"".join(_TIME_INDEX_ENTRY.pack(*entry) for entry in self.time_index)
        self.index_path.write_bytes(offset_bytes)
        self.time_index_path.write_bytes(time_bytes)

    def rebuild(self) -> list[StoredRecord]:
        """Validate the log file, cut it at the first bad batch and rebuild both indexes."""
        data = self.log_path.read_bytes() if self.log_path.exists() else b""
        # a segment cannot hold offsets below its base: decoding stops at such a batch
        located, valid_length = decode_batches(
            data, source=str(self.log_path), base_offset=self.base_offset
        )
        if valid_length < len(data):
            with open(self.log_path, "r+b") as handle:
                handle.truncate(valid_length)
        self.size = valid_length
        self.flushed_size = min(self.flushed_size, valid_length)
        self.next_offset = self.base_offset
        self.offset_index = []
        self.time_index = []
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        records: list[StoredRecord] = []
        for index, (position, record) in enumerate(located):
            end = located[index + 1][0] if index + 1 < len(located) else valid_length
            if end != position:  # one index step per batch, at its last record
                self.note_record(record.offset, record.timestamp_ms, position, end - position)
            records.append(record)
        self.write_indexes()
        return records

    def read_from(self, position: int) -> list[tuple[int, StoredRecord]]:
        """Records from ``position`` to the end of the segment, with their batches' positions."""
        with open(self.log_path, "rb") as handle:
            handle.seek(position)
            data = handle.read(self.size - position)
        located: list[tuple[int, StoredRecord]] = []
        for batch in iter_batches(data, source=str(self.log_path)):
            located += [(position + batch.position, stored) for stored in _stored_records(batch)]
        return located

    def lookup_position(self, offset: int) -> int:
        """Start position for ``offset``: the largest index entry at or below it, else 0.

        Binary search over the sparse offset index: O(log entries).
        """
        relative = offset - self.base_offset
        slot = bisect.bisect_right(self.offset_index, relative, key=_first) - 1
        return self.offset_index[slot][1] if slot >= 0 else 0

    def lookup_time(self, timestamp_ms: int) -> int:
        """Start offset for a time search: the largest time entry at or below the target
        (binary search, O(log entries))."""
        slot = bisect.bisect_right(self.time_index, timestamp_ms, key=_first) - 1
        return self.base_offset + self.time_index[slot][1] if slot >= 0 else self.base_offset


class DiskLogStorage:
    """A replica log persisted in Kafka's partition-directory layout (see the module docstring).

    ``clock`` supplies timestamps for appends that do not pass one; without it such records
    carry Kafka's ``NO_TIMESTAMP`` (-1). ``recovery_point`` is the offset below which
    everything was flushed (``recovery-point-offset-checkpoint``).
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        topic: str = "ktk",
        partition: int = 0,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        clock: Callable[[], int] | None = None,
        fsync: bool = False,
    ) -> None:
        if segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(
                f"segment_bytes must be at least {MIN_SEGMENT_BYTES} (Kafka's minimum)"
            )
        self.log_dir = Path(log_dir)
        self.topic = topic
        self.partition = partition
        self.partition_dir = self.log_dir / f"{topic}-{partition}"
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.clock = clock
        self.fsync = fsync
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        self._segments: list[Segment] = []
        # a log start above the first segment's base (DeleteRecords, a follower's copy of the
        # leader's), as log-start-offset-checkpoint holds it; 0: none
        self._log_start = 0
        self._load()
        self.recovery_point = self.log_end_offset
        _write_atomically(
            self.partition_dir / PARTITION_METADATA,
            format_partition_metadata(topic_id_for(topic)),
            fsync,
        )
        # Kafka lists only logs whose start is above their first segment's base offset
        self._write_offset_checkpoint(LOG_START_OFFSET_CHECKPOINT, None)
        self._write_recovery_point()

    # -- reading ---------------------------------------------------------------------------

    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def log_start_offset(self) -> int:
        return max(self._segments[0].base_offset, self._log_start)

    def read(self, start_offset: int | None = None) -> list[StoredRecord]:
        """Every record at or above ``start_offset`` (default: the whole log), in order."""
        start = self.log_start_offset if start_offset is None else start_offset
        found: list[StoredRecord] = []
        first = self._segment_slot_for(start)
        for slot in range(max(first, 0), len(self._segments)):
            segment = self._segments[slot]
            position = segment.lookup_position(start) if slot == first else 0
            found += [r for _, r in segment.read_from(position) if r.offset >= start]
        return found

    def position_of(self, offset: int) -> SegmentPosition | None:
        """Where the record with ``offset`` starts, found via the sparse index then a scan."""
        slot = self._segment_slot_for(offset)
        if slot < 0:
            return None
        segment = self._segments[slot]
        for position, record in segment.read_from(segment.lookup_position(offset)):
            if record.offset == offset:
                return SegmentPosition(segment.base_offset, position)
            if record.offset > offset:
                return None
        return None

    def record_at(self, offset: int) -> StoredRecord | None:
        """The record with ``offset``, or None."""
        location = self.position_of(offset)
        if location is None:
            return None
        segment = self._segments[self._segment_slot_for(offset)]
        return segment.read_from(location.position)[0][1]

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is >= ``timestamp_ms`` (ListOffsets by time), or None.

        As Kafka: the first segment whose largest timestamp reaches the target, then the time
        index (binary search), the offset index (binary search) and a scan from there.
        """
        for segment in self._segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            start_offset = segment.lookup_time(timestamp_ms)
            for _, record in segment.read_from(segment.lookup_position(start_offset)):
                if record.offset >= start_offset and record.timestamp_ms >= timestamp_ms:
                    return record.offset
        return None

    def _segment_slot_for(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (the last with base offset <= it), or -1."""
        return bisect.bisect_right(self._segments, offset, key=_base_offset) - 1

    # -- writing ---------------------------------------------------------------------------

    def append(
        self,
        offset: int,
        leader_epoch: int,
        value: str,
        timestamp_ms: int | None = None,
        producer: ProducerFields = NO_PRODUCER,
    ) -> None:
        """Append one record at ``offset`` (at or above the log end offset) as one batch whose
        partition leader epoch is ``leader_epoch``."""
        if offset < self.log_end_offset:
            raise AppendOutOfOrderError(
                f"append at offset {offset} below log end offset {self.log_end_offset}"
            )
        if timestamp_ms is None:
            timestamp_ms = self.clock() if self.clock is not None else NO_TIMESTAMP
        batch = encode_record(StoredRecord(offset, leader_epoch, timestamp_ms, value), producer)
        active = self._segments[-1]
        if not active.is_empty() and active.size + len(batch) > self.segment_bytes:
            active = self._roll(offset)
        elif active.is_empty() and offset != active.base_offset:
            active = self._restart_empty_active_at(offset)
        with open(active.log_path, "ab") as handle:
            handle.write(batch)
        position = active.size
        active.size += len(batch)
        offset_entry, time_entry = active.note_record(offset, timestamp_ms, position, len(batch))
        if offset_entry is not None:
            with open(active.index_path, "ab") as handle:
                handle.write(_OFFSET_INDEX_ENTRY.pack(*offset_entry))
        if time_entry is not None:
            with open(active.time_index_path, "ab") as handle:
                handle.write(_TIME_INDEX_ENTRY.pack(*time_entry))

    def truncate_to(self, end_offset: int) -> None:
        """Drop every record at or above ``end_offset`` (Kafka's ``truncateTo``)."""
        if end_offset >= self.log_end_offset:
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset >= end_offset:
            self._segments.pop().delete_files()
        active = self._segments[-1]
        if active.base_offset >= end_offset:
            # everything goes: start afresh at end_offset, as truncateFullyAndStartAt does
            active.delete_files()
            self._segments = [self._new_segment(end_offset)]
            self._move_recovery_point(min(self.recovery_point, end_offset))
            return
        cut = active.size
        for position, record in active.read_from(active.lookup_position(end_offset)):
            if record.offset >= end_offset:
                cut = position
                break
        with open(active.log_path, "r+b") as handle:
            handle.truncate(cut)
        active.flushed_size = min(active.flushed_size, cut)
        active.rebuild()
        self._move_recovery_point(min(self.recovery_point, end_offset))

    def delete_below(self, start_offset: int) -> None:
        """Move the log start offset to ``start_offset``: whole segments below it are deleted
        (as retention deletes segments), and the offset is written to
        ``log-start-offset-checkpoint`` (a start inside a segment, as DeleteRecords leaves it)."""
        while len(self._segments) > 1 and self._segments[1].base_offset <= start_offset:
            self._segments.pop(0).delete_files()
        self._log_start = start_offset
        self._write_log_start()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``."""
        for segment in self._segments:
            segment.delete_files()
        self._segments = [self._new_segment(offset)]
        self._log_start = offset
        self._move_recovery_point(offset)
        self._write_log_start()

    def _write_log_start(self) -> None:
        first_base = self._segments[0].base_offset
        self._write_offset_checkpoint(
            LOG_START_OFFSET_CHECKPOINT, self._log_start if self._log_start > first_base else None
        )

    def _write_offset_checkpoint(self, name: str, offset: int | None) -> None:
        """Set (or, with None, drop) this partition's entry of the log directory's checkpoint
        file ``name``; the entries of the directory's other partitions are kept, as Kafka
        writes one file for all the partitions of a log directory."""
        path = self.log_dir / name
        entries: dict[tuple[str, int], int] = {}
        if path.exists():
            entries = {
                (topic, partition): value
                for topic, partition, value in parse_offset_checkpoint(
                    path.read_text("utf-8"), str(path)
                )
            }
        entries.pop((self.topic, self.partition), None)
        if offset is not None:
            entries[(self.topic, self.partition)] = offset
        rows = [(topic, partition, value) for (topic, partition), value in sorted(entries.items())]
        _write_atomically(path, format_offset_checkpoint(rows), self.fsync)

    def flush(self) -> None:
        """Make everything written so far durable (survives ``recover(lose_unflushed=True)``)."""
        for segment in self._segments:
            if self.fsync and segment.flushed_size < segment.size:
                with open(segment.log_path, "rb+") as handle:
                    os.fsync(handle.fileno())
            segment.flushed_size = segment.size
        self._move_recovery_point(self.log_end_offset)

    def write_checkpoints(
        self, high_watermark: int, epoch_entries: Iterable[tuple[int, int]]
    ) -> None:
        """Write ``replication-offset-checkpoint`` (one file per log directory: the entries
        of the directory's other partitions are kept) and ``leader-epoch-checkpoint``."""
        self._write_offset_checkpoint(HIGH_WATERMARK_CHECKPOINT, high_watermark)
        _write_atomically(
            self.partition_dir / LEADER_EPOCH_CHECKPOINT,
            format_leader_epoch_checkpoint(epoch_entries),
            self.fsync,
        )

    def recover(
        self, lose_unflushed: bool = False, *, torn_tail: bool = False
    ) -> tuple[list[LogRecord], int, list[EpochEntry]]:
        """Restart after a hard crash: ``(records, high watermark, epoch entries)`` from disk.

        With ``lose_unflushed`` every segment is first cut back to its last flushed length.
        With ``torn_tail`` the last byte of the active segment, when it is past the flushed
        length, is damaged first (a write torn by the crash): recovery finds the last batch's
        CRC wrong and cuts the log there.
        Indexes are rebuilt from the log files and everything recovered counts as flushed (Kafka
        moves the recovery point to the log end). The high watermark and epoch entries are
        returned as checkpointed (0 and none when a file is missing); clamping them to the
        recovered log is the caller's rule (``ReplicaLog.recover_after_crash``).
        """
        if lose_unflushed:
            for segment in self._segments:
                if segment.size > segment.flushed_size:
                    with open(segment.log_path, "r+b") as handle:
                        handle.truncate(segment.flushed_size)
        elif torn_tail:
            active = self._segments[-1]
            if active.size > active.flushed_size:
                with open(active.log_path, "r+b") as handle:
                    handle.seek(active.size - 1)
                    last = handle.read(1)
                    handle.seek(active.size - 1)
                    handle.write(bytes([last[0] ^ 0xFF]))
        self._load()
        self._move_recovery_point(self.log_end_offset)
        records = [
            LogRecord(
                record.offset,
                record.leader_epoch,
                record.value,
                record.producer_id,
                record.producer_epoch,
                record.sequence,
            )
            for record in self.read()
        ]
        high_watermark, epoch_entries = self._read_high_watermark(), self._read_epoch_entries()
        # what Kafka writes back once the log is loaded: the HW clamped to the log end, the
        # epoch cache without the entries recovery cut off (ReplicaLog applies the same rule)
        end = self.log_end_offset
        self.write_checkpoints(
            min(max(high_watermark, self.log_start_offset), end),
            [entry for entry in epoch_entries if entry.start_offset < end],
        )
        return records, high_watermark, epoch_entries

    # -- internals -------------------------------------------------------------------------

    def _move_recovery_point(self, recovery_point: int) -> None:
        if recovery_point != self.recovery_point:
            self.recovery_point = recovery_point
            self._write_recovery_point()

    def _write_recovery_point(self) -> None:
        self._write_offset_checkpoint(RECOVERY_POINT_CHECKPOINT, self.recovery_point)

    def _new_segment(self, base_offset: int) -> Segment:
        segment = Segment(self.partition_dir, base_offset, self.index_interval_bytes)
        segment.create_files()
        return segment

    def _roll(self, base_offset: int) -> Segment:
        self._segments[-1].seal()
        segment = self._new_segment(base_offset)
        self._segments.append(segment)
        return segment

    def _restart_empty_active_at(self, base_offset: int) -> Segment:
        """An empty active segment is renamed to start at the offset actually appended."""
        self._segments.pop().delete_files()
        segment = self._new_segment(base_offset)
        self._segments.append(segment)
        return segment

    def _load(self) -> None:
        """Find segment files, validate them, rebuild indexes; the log is cut at the first bad
        batch and every later segment deleted, as Kafka's log recovery does."""
        bases = sorted(
            int(path.name[: -len(LOG_SUFFIX)])
            for path in self.partition_dir.glob("*" + LOG_SUFFIX)
            if path.name[: -len(LOG_SUFFIX)].isdigit()
        )
        segments: list[Segment] = []
        for slot, base_offset in enumerate(bases):
            segment = Segment(self.partition_dir, base_offset, self.index_interval_bytes)
            if segments and base_offset < segments[-1].next_offset:
                self._delete_from(bases[slot:])
                break
            size_on_disk = segment.log_path.stat().st_size
            segment.rebuild()
            segment.flushed_size = segment.size
            if segment.is_empty() and segments:
                self._delete_from(bases[slot:])
                break
            segments.append(segment)
            if segment.size < size_on_disk:
                self._delete_from(bases[slot + 1 :])
                break
        kept = {segment.base_offset for segment in segments}
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            for stray in self.partition_dir.glob("*" + suffix):
                stem = stray.name[: -len(suffix)]
                if stem.isdigit() and int(stem) not in kept:
                    stray.unlink()
        if not segments:
            segments = [self._new_segment(0)]
        for segment in segments[:-1]:
            segment.seal()
        self._segments = segments

    def _delete_from(self, bases: Iterable[int]) -> None:
        for base_offset in bases:
            Segment(self.partition_dir, base_offset, self.index_interval_bytes).delete_files()

    def _read_high_watermark(self) -> int:
        path = self.log_dir / HIGH_WATERMARK_CHECKPOINT
        if not path.exists():
            return 0
        for topic, partition, offset in parse_offset_checkpoint(path.read_text("utf-8"), str(path)):
            if topic == self.topic and partition == self.partition:
                return offset
        return 0

    def _read_epoch_entries(self) -> list[EpochEntry]:
        path = self.partition_dir / LEADER_EPOCH_CHECKPOINT
        if not path.exists():
            return []
        entries = parse_epoch_checkpoint(path.read_text("utf-8"), str(path))
        return [EpochEntry(epoch, start_offset) for epoch, start_offset in entries]
