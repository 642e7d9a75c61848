"""Segment files: the batches of a ``.log`` file with their byte positions, as Kafka reads them.

Three readings, each Kafka's own:

- :func:`iter_batches` is ``FileRecords.batches()``: batch after batch (magic 0/1 log entries
  and v2 batches may be mixed); it stops without error when fewer than 18 bytes remain or the
  next batch is cut short (the bytes left are what :attr:`SegmentScan.trailing_bytes`
  reports), and raises :class:`KafkaFormatError` on a size below 14, where Kafka throws
  ``CorruptRecordException``. CRCs are not checked here: each batch has ``is_valid``.
- :func:`scan_segment` collects that iteration with the trailing bytes and the error (if any)
  that stopped it.
- :func:`recover_segment` is ``LogSegment.recover``: it keeps batches while each passes
  ``ensureValid`` (CRC), stops at the first that does not, and says how many bytes recovery
  truncates from there (a cut tail or a corrupt batch and everything after it).

>>> from kafka_format.batch import build_batch
>>> from kafka_format.model import NewRecord
>>> one = build_batch([NewRecord(b"k", b"v", timestamp=5)], base_offset=0)
>>> two = build_batch([NewRecord(b"k", b"w", timestamp=6)], base_offset=1)
>>> scan = scan_segment(one + two[:-3], source="0.log")
>>> [(b.position, b.base_offset) for b in scan.batches], scan.trailing_bytes
([(0, 0)], 67)
>>> recovery = recover_segment(one + two[:-3], source="0.log")
>>> recovery.valid_bytes, recovery.truncated_bytes, recovery.error is None
(70, 67, True)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kafka_format.batch import (
    BATCH_HEADER_SIZE,
    HEADER,
    LOG_OVERHEAD,
    Record,
    RecordBatch,
)
from kafka_format.errors import KafkaFormatError
from kafka_format.legacy import RECORD_OVERHEAD_V0, LegacyBatch, LegacyRecord

__all__ = [
    "HEADER_DTYPE",
    "Batch",
    "Recovery",
    "SegmentScan",
    "batch_headers",
    "iter_batches",
    "iter_records",
    "read_segment_file",
    "recover_segment",
    "scan_segment",
]

Batch = RecordBatch | LegacyBatch
HEADER_SIZE_UP_TO_MAGIC = 17
_OFFSET_AND_SIZE = struct.Struct(">qi")
_SIZE = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


def _entry_header(data: Buffer, position: int, source: str | None) -> tuple[int, int] | None:
    """(size field, magic) of the batch at ``position``, or None where Kafka stops."""
    end = len(data)
    if position >= end - HEADER_SIZE_UP_TO_MAGIC:
        return None
    (size,) = _SIZE.unpack_from(data, position + 8)
    if size < RECORD_OVERHEAD_V0:
        raise KafkaFormatError(
            f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            source=source,
            position=position + 8,
            field="batch.length",
        )
    if position > end - LOG_OVERHEAD - size:
        return None
    return size, data[position + 16]


def iter_batches(data: Buffer, *, source: str | None = None, start: int = 0) -> Iterator[Batch]:
    """Each batch of a segment's bytes from ``start``, with its position (``FileRecords.batches``).

    A v2 batch shorter than its 61-byte header raises :class:`KafkaFormatError` (Kafka fails
    ``ensureValid`` there). O(batches): only headers are decoded."""
    view = bytes(data) if isinstance(data, bytearray) else data
    position = start
    header = HEADER
    make = RecordBatch._make
    while True:
        found = _entry_header(view, position, source)
        if found is None:
            return
        size, magic = found
        end = position + LOG_OVERHEAD + size
        if 2 <= magic <= 127:  # a signed byte in Java: 128..255 are negative, hence legacy
            if LOG_OVERHEAD + size < BATCH_HEADER_SIZE:
                raise KafkaFormatError(
                    f"Record batch is corrupt (the size {LOG_OVERHEAD + size} is smaller than "
                    f"the minimum allowed overhead {BATCH_HEADER_SIZE})",
                    source=source,
                    position=position + 8,
                    field="batch.length",
                )
            yield make((position, *header.unpack_from(view, position), view[position:end], source))
        else:
            yield LegacyBatch.parse(view[position:end], position=position, source=source)
        position = end


def iter_records(
    data: Buffer, *, source: str | None = None
) -> Iterator[tuple[Batch, Record | LegacyRecord]]:
    """Every record of a segment with the batch holding it, batch by batch (each batch decoded
    and decompressed when reached), as a consumer reads a log.

    >>> from kafka_format.batch import build_batch
    >>> from kafka_format.model import NewRecord
    >>> segment = build_batch([NewRecord(b"a", b"1", 5), NewRecord(b"b", b"2", 6)], base_offset=3)
    >>> [(batch.position, record.offset, record.key) for batch, record in iter_records(segment)]
    [(0, 3, b'a'), (0, 4, b'b')]
    """
    for batch in iter_batches(data, source=source):
        for record in batch.records():
            yield batch, record


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What reading a whole segment found: its batches (CRC-invalid ones included, as Kafka
    lists them), where the whole batches end, the trailing bytes Kafka ignores, and the
    :class:`KafkaFormatError` that stopped the reading (None when it reached the end)."""

    source: str | None
    size_in_bytes: int
    batches: tuple[Batch, ...]
    end_of_batches: int
    error: KafkaFormatError | None

    @property
    def trailing_bytes(self) -> int:
        """Bytes after the last whole batch (a cut tail, or all from a broken batch on)."""
        return self.size_in_bytes - self.end_of_batches

    @property
    def invalid_batches(self) -> tuple[Batch, ...]:
        """Batches whose stored CRC does not match their bytes."""
        return tuple(batch for batch in self.batches if not batch.is_valid)


def scan_segment(data: Buffer, *, source: str | None = None) -> SegmentScan:
    """All batches of a segment, stopping at a cut tail or a batch that cannot be framed."""
    view = bytes(data) if isinstance(data, bytearray) else data
    batches: list[Batch] = []
    end = 0
    error = None
    try:
        for batch in iter_batches(view, source=source):
            batches.append(batch)
            end = batch.position + batch.size_in_bytes
    except KafkaFormatError as stopped:
        error = stopped
    return SegmentScan(source, len(view), tuple(batches), end, error)


@dataclass(frozen=True, slots=True)
class Recovery:
    """The outcome of ``LogSegment.recover`` on a segment: the batches kept, ``valid_bytes``
    (the size the segment is truncated to), ``truncated_bytes``, and the error Kafka logs as
    "Found invalid messages in log segment ... at byte offset N" (None for a clean segment or
    one that only lost a cut tail)."""

    source: str | None
    batches: tuple[Batch, ...]
    valid_bytes: int
    truncated_bytes: int
    error: KafkaFormatError | None

    def describe(self) -> str:
        """Kafka's words for what recovery did."""
        name = self.source or "(unnamed)"
        lines = []
        if self.error is not None:
            lines.append(
                f"Found invalid messages in log segment {name} at byte offset "
                f"{self.valid_bytes}: {self.error}"
            )
        if self.truncated_bytes > 0:
            lines.append(
                f"Truncated {self.truncated_bytes} invalid bytes at the end of segment {name} "
                "during recovery"
            )
        return "\n".join(lines) if lines else f"{name}: all {len(self.batches)} batches valid"


def recover_segment(data: Buffer, *, source: str | None = None) -> Recovery:
    """``LogSegment.recover``: keep batches while each passes ``ensureValid``; truncate the
    rest. A cut tail ends iteration silently; a CRC mismatch or unframeable batch is the
    error, positioned at the CRC (or size) field of the first bad batch."""
    view = bytes(data) if isinstance(data, bytearray) else data
    kept: list[Batch] = []
    valid_bytes = 0
    error = None
    try:
        for batch in iter_batches(view, source=source):
            batch.ensure_valid()
            kept.append(batch)
            valid_bytes += batch.size_in_bytes
    except KafkaFormatError as invalid:
        error = invalid
    return Recovery(source, tuple(kept), valid_bytes, len(view) - valid_bytes, error)


def read_segment_file(path: str | Path) -> SegmentScan:
    """:func:`scan_segment` over a file; errors name the file."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise KafkaFormatError(f"cannot read: {exc.strerror}", source=str(file)) from None
    return scan_segment(data, source=str(file))


# --- header-only columns ------------------------------------------------------------------------
HEADER_DTYPE = np.dtype(
    [
        ("base_offset", ">i8"),
        ("batch_length", ">i4"),
        ("partition_leader_epoch", ">i4"),
        ("magic", "i1"),
        ("crc", ">u4"),
        ("attributes", ">i2"),
        ("last_offset_delta", ">i4"),
        ("base_timestamp", ">i8"),
        ("max_timestamp", ">i8"),
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("base_sequence", ">i4"),
        ("record_count", ">i4"),
    ]
)
assert HEADER_DTYPE.itemsize == BATCH_HEADER_SIZE


def batch_positions(data: Buffer, *, source: str | None = None) -> tuple[np.ndarray, int]:
    """Byte positions of the whole batches of a segment (as :func:`iter_batches` frames them)
    and where they end. One 4-byte read per batch."""
    view = bytes(data) if isinstance(data, bytearray) else data
    positions = []
    position = 0
    end = len(view)
    limit = end - HEADER_SIZE_UP_TO_MAGIC
    unpack = _SIZE.unpack_from
    while position < limit:
        (size,) = unpack(view, position + 8)
        if size < RECORD_OVERHEAD_V0:
            raise KafkaFormatError(
                f"Found record size {size} smaller than minimum record overhead "
                f"({RECORD_OVERHEAD_V0})",
                source=source,
                position=position + 8,
                field="batch.length",
            )
        if position > end - LOG_OVERHEAD - size:
            break
        positions.append(position)
        position += LOG_OVERHEAD + size
    return np.asarray(positions, dtype=np.int64), position


def batch_headers(data: Buffer, *, source: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(positions, headers) of every whole v2 batch: ``headers`` is a structured array of
    :data:`HEADER_DTYPE` (big-endian views of the 61 header bytes), without touching records.
    Magic 0/1 entries raise :class:`KafkaFormatError` (use :func:`iter_batches`)."""
    view = bytes(data) if isinstance(data, bytearray) else data
    positions, _ = batch_positions(view, source=source)
    raw = np.frombuffer(view, dtype=np.uint8)
    magics = raw[positions + 16].view(np.int8)
    legacy = np.flatnonzero(magics < 2)
    if len(legacy):
        raise KafkaFormatError(
            "magic 0/1 entry in a header-only scan (use iter_batches)",
            source=source,
            position=int(positions[legacy[0]]) + 16,
            field="batch.magic",
            value=int(magics[legacy[0]]),
        )
    lengths = raw[positions[:, None] + np.arange(8, 12)[None, :]].copy().view(">i4").reshape(-1)
    short = np.flatnonzero(lengths.astype(np.int64) + LOG_OVERHEAD < BATCH_HEADER_SIZE)
    if len(short):
        raise KafkaFormatError(
            f"Record batch is corrupt (smaller than the minimum allowed overhead "
            f"{BATCH_HEADER_SIZE})",
            source=source,
            position=int(positions[short[0]]) + 8,
            field="batch.length",
        )
    index = positions[:, None] + np.arange(BATCH_HEADER_SIZE, dtype=np.int64)[None, :]
    headers = raw[index].view(HEADER_DTYPE).reshape(len(positions))
    return positions, headers
