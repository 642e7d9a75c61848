"""A segment's index files, read (and written) in Kafka's layouts, and the indexes Kafka builds.

Layouts (big-endian; ``OffsetIndex``, ``TimeIndex``, ``AbortedTxn``)::

    .index      entry = relative offset int32, position int32            (8 bytes)
    .timeindex  entry = timestamp int64, relative offset int32           (12 bytes)
    .txnindex   entry = version int16 (0), producer id int64, first offset int64,
                        last offset int64, last stable offset int64      (34 bytes)

A relative offset is the offset minus the segment's base offset (the file name). An offset
index entry ``(offset, position)`` says the batch starting at ``position`` (the first of one
append) ends the append at ``offset``; a time index entry ``(timestamp, offset)`` says the
largest timestamp seen up to ``offset`` is ``timestamp``. Kafka preallocates the active
segment's index files (``segment.index.bytes``, 10 MiB) and trims them to their entries when the
segment is rolled or closed: the zero entries after the last written one are the unused space
of a segment that was active when the broker stopped (:attr:`OffsetIndex.preallocated_entries`).

>>> from kafka_format.batch import build_batch
>>> from kafka_format.model import NewRecord
>>> segment = b"".join(build_batch([NewRecord(b"k", b"v" * 40, timestamp=10 + n)], base_offset=n)
...                    for n in range(4))
>>> built = build_indexes(segment, base_offset=0, index_interval_bytes=150)
>>> built.offset_entries, built.time_entries
(((2, 218),), ((12, 2), (13, 3)))
>>> index = parse_offset_index(encode_offset_index(built.offset_entries, 0) + bytes(16), 0)
>>> index.entries(), index.preallocated_entries
([(2, 218)], 2)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from kafka_format.errors import KafkaFormatError
from kafka_format.segment import Batch, Buffer, iter_batches

__all__ = [
    "ABORTED_TXN_SIZE",
    "OFFSET_INDEX_ENTRY_SIZE",
    "TIME_INDEX_ENTRY_SIZE",
    "AbortedTxn",
    "BuiltIndexes",
    "OffsetIndex",
    "TimeIndex",
    "build_indexes",
    "encode_offset_index",
    "encode_time_index",
    "encode_txn_index",
    "parse_offset_index",
    "parse_time_index",
    "parse_txn_index",
]

OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12
ABORTED_TXN_SIZE = 34
ABORTED_TXN_VERSION = 0
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
NO_TIMESTAMP = -1

_OFFSET_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
_TIME_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
_ABORTED_TXN = struct.Struct(">hqqqq")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _preallocated(raw: np.ndarray) -> int:
    """How many entries at the end are all zeros (unused preallocated space)."""
    if len(raw) == 0:
        return 0
    nonzero = np.flatnonzero(raw.view(np.uint8).reshape(len(raw), -1).any(axis=1))
    return len(raw) if len(nonzero) == 0 else len(raw) - 1 - int(nonzero[-1])


@dataclass(frozen=True, slots=True, eq=False)
class OffsetIndex:
    """The entries of an ``.index`` file: ``offsets`` (absolute: base offset + relative) and
    ``positions`` as int64 arrays, without the preallocated zero entries at the end;
    ``partial_bytes`` is a cut entry at the end (Kafka: "neither positive nor a multiple of 8")."""

    source: str | None
    base_offset: int
    size_in_bytes: int
    offsets: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    preallocated_entries: int
    partial_bytes: int

    def __len__(self) -> int:
        return len(self.offsets)

    def entries(self) -> list[tuple[int, int]]:
        """``(offset, position)`` per entry. O(entries)."""
        return list(zip(self.offsets.tolist(), self.positions.tolist(), strict=True))


@dataclass(frozen=True, slots=True, eq=False)
class TimeIndex:
    """The entries of a ``.timeindex`` file: ``timestamps`` and absolute ``offsets`` (int64
    arrays), without the preallocated zero entries; ``partial_bytes`` as for the offset index."""

    source: str | None
    base_offset: int
    size_in_bytes: int
    timestamps: np.ndarray = field(repr=False)
    offsets: np.ndarray = field(repr=False)
    preallocated_entries: int
    partial_bytes: int

    def __len__(self) -> int:
        return len(self.offsets)

    def entries(self) -> list[tuple[int, int]]:
        """``(timestamp, offset)`` per entry."""
        return list(zip(self.timestamps.tolist(), self.offsets.tolist(), strict=True))


def parse_offset_index(data: Buffer, base_offset: int, *, source: str | None = None) -> OffsetIndex:
    """An offset index's bytes. Never raises: a cut entry is counted in ``partial_bytes``."""
    whole = len(data) // OFFSET_INDEX_ENTRY_SIZE
    raw = np.frombuffer(data, dtype=_OFFSET_DTYPE, count=whole)
    used = whole - _preallocated(raw)
    raw = raw[:used]
    return OffsetIndex(
        source,
        base_offset,
        len(data),
        raw["relative_offset"].astype(np.int64) + base_offset,
        raw["position"].astype(np.int64),
        whole - used,
        len(data) - whole * OFFSET_INDEX_ENTRY_SIZE,
    )


def parse_time_index(data: Buffer, base_offset: int, *, source: str | None = None) -> TimeIndex:
    """A time index's bytes. Never raises: a cut entry is counted in ``partial_bytes``."""
    whole = len(data) // TIME_INDEX_ENTRY_SIZE
    raw = np.frombuffer(data, dtype=_TIME_DTYPE, count=whole)
    used = whole - _preallocated(raw)
    raw = raw[:used]
    return TimeIndex(
        source,
        base_offset,
        len(data),
        raw["timestamp"].astype(np.int64),
        raw["relative_offset"].astype(np.int64) + base_offset,
        whole - used,
        len(data) - whole * TIME_INDEX_ENTRY_SIZE,
    )


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One ``.txnindex`` entry: an aborted transaction of ``producer_id`` spanning
    ``first_offset``..``last_offset``, and the last stable offset when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION


def parse_txn_index(data: Buffer, *, source: str | None = None) -> list[AbortedTxn]:
    """A transaction index's entries; raises :class:`KafkaFormatError` on a cut entry or an
    unknown version (``TransactionIndex`` throws there)."""
    entries = []
    for position in range(0, len(data), ABORTED_TXN_SIZE):
        if position + ABORTED_TXN_SIZE > len(data):
            raise KafkaFormatError(
                f"cut entry: {len(data) - position} of {ABORTED_TXN_SIZE} bytes",
                source=source,
                position=position,
                field="aborted_txn",
            )
        version, producer_id, first, last, stable = _ABORTED_TXN.unpack_from(data, position)
        if version != ABORTED_TXN_VERSION:
            raise KafkaFormatError(
                "Unexpected aborted transaction version (expected 0)",
                source=source,
                position=position,
                field="aborted_txn.version",
                value=version,
            )
        entries.append(AbortedTxn(producer_id, first, last, stable, version))
    return entries


def _relative(offset: int, base_offset: int) -> int:
    relative = offset - base_offset
    if not _INT32_MIN <= relative <= _INT32_MAX:
        raise KafkaFormatError(
            f"offset {offset} does not fit a relative offset of base offset {base_offset}",
            field="index.relative_offset",
            value=offset,
        )
    return relative


def encode_offset_index(entries: Iterable[tuple[int, int]], base_offset: int) -> bytes:
    """``(offset, position)`` entries as ``OffsetIndex.append`` writes them."""
    return b"".join(
        struct.pack(">ii", _relative(offset, base_offset), position) for offset, position in entries
    )


def encode_time_index(entries: Iterable[tuple[int, int]], base_offset: int) -> bytes:
    """``(timestamp, offset)`` entries as ``TimeIndex.maybeAppend`` writes them."""
    return b"".join(
        struct.pack(">qi", timestamp, _relative(offset, base_offset))
        for timestamp, offset in entries
    )


def encode_txn_index(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(
        _ABORTED_TXN.pack(
            e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset
        )
        for e in entries
    )


@dataclass(frozen=True, slots=True)
class BuiltIndexes:
    """What ``LogSegment.recover`` rebuilds for a segment: offset index entries
    ``(offset, position)`` and time index entries ``(timestamp, offset)``."""

    offset_entries: tuple[tuple[int, int], ...]
    time_entries: tuple[tuple[int, int], ...]


def build_indexes(
    data: Buffer,
    base_offset: int,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    source: str | None = None,
    batches: Iterable[Batch] | None = None,
) -> BuiltIndexes:
    """The indexes ``LogSegment.recover`` builds over a segment's valid batches: an offset
    entry ``(batch last offset, batch position)`` once more than ``index_interval_bytes`` were
    passed since the last entry, a time entry ``(max timestamp so far, its batch's last
    offset)`` with it when the timestamp grew, and a last time entry for the largest timestamp
    (what a rolled or closed segment keeps). Stops at the first batch failing its CRC, as
    recovery does. O(batches)."""
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []
    valid_bytes = 0
    last_index_entry = 0
    max_timestamp, offset_of_max = NO_TIMESTAMP, base_offset
    last_time = (NO_TIMESTAMP, base_offset)

    def append_time(timestamp: int, offset: int) -> None:
        nonlocal last_time
        if timestamp > last_time[0]:
            times.append((timestamp, offset))
            last_time = (timestamp, offset)

    try:
        for batch in batches if batches is not None else iter_batches(data, source=source):
            if not batch.is_valid:
                break
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
            if valid_bytes - last_index_entry > index_interval_bytes:
                offsets.append((batch.last_offset, valid_bytes))
                append_time(max_timestamp, offset_of_max)
                last_index_entry = valid_bytes
            valid_bytes += batch.size_in_bytes
    except KafkaFormatError:
        pass  # recovery keeps what came before an unframeable batch
    append_time(max_timestamp, offset_of_max)
    return BuiltIndexes(tuple(offsets), tuple(times))
