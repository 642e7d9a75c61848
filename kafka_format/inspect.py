"""Inspect a partition directory (or a whole log directory) as it lies on disk, read-only.

:func:`inspect_partition` reads every segment, index and checkpoint of one partition and
reports what it holds (segments with their offsets and timestamps, the log end offset, the
leader-epoch cache, the checkpointed high watermark, recovery point and log start offset) and
every finding: a *problem* (a batch failing its CRC, a cut tail, an index entry past the end of
its segment or not at a batch, an index not increasing, a time index not monotonic, an index
larger than its segment can justify, an unreadable checkpoint, ...) or a *note* (something
Kafka repairs by itself on load: a missing index it rebuilds, preallocated index space, files
left by a deletion or a cleaning). Bad bytes never raise: each becomes a finding naming the file,
byte position (or line) and field, and the inspection goes on. Files are only opened for
reading; nothing is created, written or renamed.

:func:`inspect_log_dir` does the same for every ``<topic>-<partition>`` directory of a log
directory, with the log directory's checkpoints; :func:`inspect_path` picks one of the two.

>>> import tempfile
>>> from kafka_format.batch import build_batch
>>> from kafka_format.model import NewRecord
>>> with tempfile.TemporaryDirectory() as root:
...     partition = Path(root, "orders-0")
...     partition.mkdir()
...     batches = [build_batch([NewRecord(None, b"x", timestamp=100 + n)], base_offset=n,
...                            partition_leader_epoch=1) for n in range(3)]
...     _ = (partition / "00000000000000000000.log").write_bytes(b"".join(batches)[:-5])
...     report = inspect_partition(partition)
>>> report.log_end_offset, report.segments[0].batch_count, report.segments[0].trailing_bytes
(2, 2, 64)
>>> [finding.kind for finding in report.problems]
['truncated-tail']
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kafka_format.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_DIR_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    EpochEntry,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from kafka_format.errors import KafkaFormatError
from kafka_format.index import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    OffsetIndex,
    TimeIndex,
    parse_offset_index,
    parse_time_index,
    parse_txn_index,
)
from kafka_format.legacy import LegacyBatch
from kafka_format.partition_dir import (
    PartitionFiles,
    SegmentFiles,
    list_log_dir,
    list_partition_dir,
    looks_like_log_dir,
    looks_like_partition_dir,
    parent_dir,
)
from kafka_format.segment import Batch, scan_segment
from ktkbase.errors import short_repr

__all__ = [
    "BATCH_COLUMNS",
    "Finding",
    "IndexSummary",
    "LogDirReport",
    "PartitionReport",
    "SegmentReport",
    "epochs_json",
    "inspect_log_dir",
    "inspect_partition",
    "inspect_path",
]

_INT32_MAX = 2**31 - 1
Progress = Callable[[int, int], None]
_LEGACY_CRC_OFFSET = 12  # magic 0/1: after offset and size


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing found: ``kind`` (a stable id such as ``crc-mismatch``), the file, the byte
    ``position`` or ``line``, the ``field``, what is wrong, and whether it is a ``problem``
    (counts against the verdict) or a note (Kafka repairs it by itself)."""

    kind: str
    source: str
    message: str
    position: int | None = None
    line: int | None = None
    field: str | None = None
    problem: bool = True

    @classmethod
    def from_error(cls, kind: str, error: KafkaFormatError, source: str) -> Finding:
        return cls(
            kind,
            error.source or source,
            error.message + (f" (got {short_repr(error.value)})" if error.has_value else ""),
            error.position,
            error.line,
            error.field,
        )

    def __str__(self) -> str:
        return str(
            KafkaFormatError(
                self.message,
                source=self.source,
                line=self.line,
                position=self.position,
                field=self.field,
            )
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": "problem" if self.problem else "note",
            "file": self.source,
            "position": self.position,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "text": str(self),
        }


#: The columns of :attr:`PartitionReport.batches`, one row per whole batch in log order:
#: enough to check indexes and caches against the log and to compare replicas.
BATCH_COLUMNS = (
    "segment",  # the segment's base offset
    "position",
    "base_offset",  # magic 0/1: the entry's (last) offset
    "last_offset",
    "leader_epoch",
    "magic",
    "crc",  # as stored
    "size",
    "max_timestamp",
    "valid",  # 1 when the CRC matches
)
SEGMENT, POSITION, BASE, LAST, EPOCH, MAGIC, CRC, SIZE, MAX_TIMESTAMP, VALID = range(10)


@dataclass(frozen=True, slots=True)
class IndexSummary:
    """An index file: its size, entries (preallocated zero entries not counted), the
    preallocated entries, and the first and last entry (named by ``entry_fields``:
    ``(offset, position)`` or ``(timestamp, offset)``)."""

    file: str
    size_in_bytes: int
    entries: int
    preallocated_entries: int
    first_entry: tuple[int, int] | None
    last_entry: tuple[int, int] | None
    entry_fields: tuple[str, str]

    def to_json(self) -> dict[str, Any]:
        def entry(values: tuple[int, int] | None) -> dict[str, int] | None:
            return None if values is None else dict(zip(self.entry_fields, values, strict=True))

        return {
            "file": self.file,
            "size_in_bytes": self.size_in_bytes,
            "entries": self.entries,
            "preallocated_entries": self.preallocated_entries,
            "first_entry": entry(self.first_entry),
            "last_entry": entry(self.last_entry),
        }


@dataclass(frozen=True, slots=True)
class SegmentReport:
    """One segment: ``.log`` size, whole batches, first and last offset, the first batch's
    first timestamp, the last batch's and the largest max timestamp, CRC failures, bytes after
    the last whole batch, and the index files."""

    base_offset: int
    file: str | None
    size_in_bytes: int
    batch_count: int
    first_offset: int | None
    last_offset: int | None
    first_timestamp: int | None
    last_timestamp: int | None
    max_timestamp: int | None
    crc_failures: tuple[int, ...]
    trailing_bytes: int
    offset_index: IndexSummary | None
    time_index: IndexSummary | None
    aborted_transactions: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "base_offset": self.base_offset,
            "file": self.file,
            "size_in_bytes": self.size_in_bytes,
            "batches": self.batch_count,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
            "max_timestamp": self.max_timestamp,
            "crc_failures": list(self.crc_failures),
            "trailing_bytes": self.trailing_bytes,
            "offset_index": self.offset_index.to_json() if self.offset_index else None,
            "time_index": self.time_index.to_json() if self.time_index else None,
            "aborted_transactions": self.aborted_transactions,
        }


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """What :func:`inspect_partition` found in one partition directory."""

    path: str
    topic: str | None
    partition: int | None
    topic_id: str | None
    segments: tuple[SegmentReport, ...]
    log_end_offset: int | None
    valid_log_end_offset: int | None
    leader_epoch_cache: tuple[EpochEntry, ...] | None
    epochs_in_log: tuple[EpochEntry, ...]
    high_watermark: int | None
    recovery_point: int | None
    log_start_offset: int | None
    cleaner_offset: int | None
    snapshots: tuple[int, ...]
    findings: tuple[Finding, ...]
    batches: np.ndarray = field(repr=False, compare=False)

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.problem)

    @property
    def notes(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if not finding.problem)

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch the cache gives ``offset`` (the last entry starting at or before)."""
        cache = self.leader_epoch_cache or ()
        found = [entry.epoch for entry in cache if entry.start_offset <= offset]
        return found[-1] if found else None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "topic": self.topic,
            "partition": self.partition,
            "topic_id": self.topic_id,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "valid_log_end_offset": self.valid_log_end_offset,
            "high_watermark": self.high_watermark,
            "recovery_point": self.recovery_point,
            "cleaner_offset": self.cleaner_offset,
            "leader_epoch_cache": epochs_json(self.leader_epoch_cache),
            "epochs_in_log": epochs_json(self.epochs_in_log),
            "segments": [segment.to_json() for segment in self.segments],
            "producer_snapshots": list(self.snapshots),
            "problems": len(self.problems),
            "notes": len(self.notes),
            "findings": [finding.to_json() for finding in self.findings],
        }


def epochs_json(entries: Sequence[EpochEntry] | None) -> list[dict[str, int]] | None:
    """Leader-epoch entries as JSON objects (None stays None: no checkpoint)."""
    if entries is None:
        return None
    return [{"epoch": entry.epoch, "start_offset": entry.start_offset} for entry in entries]


@dataclass(frozen=True, slots=True)
class LogDirReport:
    """What :func:`inspect_path` found: the log directory's checkpoints (None when a single
    partition directory was given without one around it), and one report per partition."""

    path: str
    kind: str  # "log_dir" or "partition_dir"
    checkpoints: dict[str, dict[tuple[str, int], int] | None]
    meta_properties: dict[str, str] | None
    partitions: tuple[PartitionReport, ...]
    findings: tuple[Finding, ...]

    @property
    def all_findings(self) -> tuple[Finding, ...]:
        return self.findings + tuple(f for report in self.partitions for f in report.findings)

    @property
    def problem_count(self) -> int:
        return sum(1 for finding in self.all_findings if finding.problem)

    @property
    def note_count(self) -> int:
        return sum(1 for finding in self.all_findings if not finding.problem)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def verdict(self) -> str:
        """One line: ``OK`` or the problems found, with counts by kind."""
        problems = [finding.kind for finding in self.all_findings if finding.problem]
        notes = self.note_count
        tail = f" ({notes} note{'s' * (notes != 1)})" if notes else ""
        partitions = f"{len(self.partitions)} partition{'s' * (len(self.partitions) != 1)}"
        if not problems:
            return f"OK: {partitions}, no problems{tail}"
        counts = ", ".join(f"{kind} {problems.count(kind)}" for kind in sorted(set(problems)))
        return (
            f"PROBLEMS FOUND: {len(problems)} problem{'s' * (len(problems) != 1)} in "
            f"{partitions} ({counts}){tail}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "checkpoints": {
                name: None
                if entries is None
                else [
                    {"topic": topic, "partition": partition, "offset": offset}
                    for (topic, partition), offset in entries.items()
                ]
                for name, entries in sorted(self.checkpoints.items())
            },
            "meta_properties": self.meta_properties,
            "findings": [finding.to_json() for finding in self.findings],
            "partitions": [report.to_json() for report in self.partitions],
            "verdict": {
                "ok": self.ok,
                "problems": self.problem_count,
                "notes": self.note_count,
                "partitions": len(self.partitions),
                "text": self.verdict(),
            },
        }


# --- reading --------------------------------------------------------------------------------
def _read(path: Path, findings: list[Finding]) -> bytes | None:
    """The file's bytes (opened read-only), or None with an ``unreadable-file`` finding."""
    try:
        with path.open("rb") as file:
            return file.read()
    except OSError as error:
        findings.append(Finding("unreadable-file", str(path), f"cannot read: {error.strerror}"))
        return None


def _read_text(path: Path, findings: list[Finding]) -> str | None:
    data = _read(path, findings)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        findings.append(
            Finding("bad-checkpoint", str(path), "not UTF-8 text", position=error.start)
        )
        return None


def read_offset_checkpoints(
    paths: dict[str, Path], findings: list[Finding]
) -> dict[str, dict[tuple[str, int], int] | None]:
    """Each log-directory checkpoint present, parsed (None with a finding when it is not)."""
    parsed: dict[str, dict[tuple[str, int], int] | None] = {}
    for name in sorted(paths):
        text = _read_text(paths[name], findings)
        entries = None
        if text is not None:
            try:
                entries = parse_offset_checkpoint(text, source=str(paths[name]))
            except KafkaFormatError as error:
                findings.append(Finding.from_error("bad-checkpoint", error, str(paths[name])))
        parsed[name] = entries
    return parsed


def _crc_position(batch: Batch) -> int:
    return batch.position + (17 if batch.magic >= 2 else _LEGACY_CRC_OFFSET)


def _first_offset(batch: Batch, source: str, findings: list[Finding]) -> int:
    if isinstance(batch, LegacyBatch):
        try:
            return batch.base_offset
        except KafkaFormatError as error:  # a wrapper that does not decompress
            findings.append(Finding.from_error("unreadable-batch", error, source))
            return batch.last_offset
    return batch.base_offset


def _first_timestamp(batch: Batch) -> int:
    if isinstance(batch, LegacyBatch) or batch.has_delete_horizon:
        return batch.max_timestamp
    return batch.base_timestamp


@dataclass
class _SegmentRead:
    report: SegmentReport
    batches: list[tuple[int, ...]]


def _read_segment(files: SegmentFiles, is_last: bool, findings: list[Finding]) -> _SegmentRead:
    log_path = files.log
    rows: list[tuple[int, ...]] = []
    source = str(log_path) if log_path else ""
    data = _read(log_path, findings) if log_path else None
    batches: tuple[Batch, ...] = ()
    trailing = 0
    if log_path is None:
        for kind, path in sorted(files.files.items()):
            findings.append(
                Finding(
                    "orphan-index",
                    str(path),
                    f"{kind} file without its segment (Kafka deletes it on load)",
                    problem=False,
                )
            )
    elif data is not None:
        scan = scan_segment(data, source=source)
        batches = scan.batches
        trailing = scan.trailing_bytes
        if scan.error is not None:
            findings.append(
                Finding(
                    "unreadable-batch",
                    source,
                    f"{scan.error.message}; the {trailing} bytes from byte "
                    f"{scan.end_of_batches} on cannot be read as batches",
                    position=scan.error.position,
                    field=scan.error.field,
                )
            )
        elif trailing:
            findings.append(
                Finding(
                    "truncated-tail",
                    source,
                    f"the last {trailing} bytes are a cut batch (Kafka's recovery truncates "
                    f"the segment to {scan.end_of_batches} bytes)",
                    position=scan.end_of_batches,
                    field="batch",
                )
            )
    crc_failures = []
    previous_last: int | None = None
    first_offset = last_offset = first_timestamp = last_timestamp = max_timestamp = None
    for batch in batches:
        base = batch.base_offset if batch.magic >= 2 else batch.last_offset
        if batch.magic not in (0, 1, 2):
            findings.append(
                Finding(
                    "unknown-magic",
                    source,
                    "unknown magic (Kafka knows 0, 1 and 2)",
                    position=batch.position + 16,
                    field="batch.magic",
                )
            )
        computed_crc = batch.crc_computed
        valid = computed_crc == batch.crc_stored
        if not valid:
            crc_failures.append(batch.position)
            findings.append(
                Finding(
                    "crc-mismatch",
                    source,
                    f"Record is corrupt (stored crc = {batch.crc_stored}, computed crc = "
                    f"{computed_crc}) in the batch of offsets {base}..{batch.last_offset}",
                    position=_crc_position(batch),
                    field="batch.crc" if batch.magic >= 2 else "message.crc",
                )
            )
        if previous_last is not None and base <= previous_last:
            findings.append(
                Finding(
                    "offsets-not-increasing",
                    source,
                    f"batch offset {base} is not above the previous batch's last offset "
                    f"{previous_last}",
                    position=batch.position,
                    field="batch.base_offset",
                )
            )
        if batch.last_offset - files.base_offset > _INT32_MAX or base < files.base_offset:
            findings.append(
                Finding(
                    "offset-out-of-segment",
                    source,
                    f"batch offset {base}..{batch.last_offset} does not fit a segment of base "
                    f"offset {files.base_offset} (relative offsets are int32 from the base)",
                    position=batch.position,
                    field="batch.base_offset",
                )
            )
        previous_last = batch.last_offset
        if first_offset is None:
            first_offset = _first_offset(batch, source, findings)
            first_timestamp = _first_timestamp(batch)
        last_offset = batch.last_offset
        last_timestamp = batch.max_timestamp
        if max_timestamp is None or batch.max_timestamp > max_timestamp:
            max_timestamp = batch.max_timestamp
        rows.append(
            (
                files.base_offset,
                batch.position,
                base,
                batch.last_offset,
                batch.partition_leader_epoch,
                batch.magic,
                batch.crc_stored,
                batch.size_in_bytes,
                batch.max_timestamp,
                valid,
            )
        )
    size = len(data) if data is not None else 0
    column = np.asarray(rows, dtype=np.int64).reshape(-1, 10)
    offset_index = time_index = None
    if log_path is not None and data is not None:
        offset_index = _check_offset_index(files, size, column, is_last, findings)
        time_index = _check_time_index(files, column, is_last, findings)
    aborted = None
    if "txnindex" in files.files:
        txn_path = files.files["txnindex"]
        txn_data = _read(txn_path, findings)
        if txn_data is not None:
            try:
                aborted = len(parse_txn_index(txn_data, source=str(txn_path)))
            except KafkaFormatError as error:
                findings.append(Finding.from_error("bad-txn-index", error, str(txn_path)))
    report = SegmentReport(
        files.base_offset,
        str(log_path) if log_path else None,
        size,
        len(batches),
        first_offset,
        last_offset,
        first_timestamp,
        last_timestamp,
        max_timestamp,
        tuple(crc_failures),
        trailing,
        offset_index,
        time_index,
        aborted,
    )
    return _SegmentRead(report, rows)


def _columns(index: OffsetIndex | TimeIndex) -> tuple[tuple[str, str], tuple[np.ndarray, ...]]:
    """The names and columns of an index's entries: (offset, position) for an offset index,
    (timestamp, offset) for a time index."""
    if isinstance(index, OffsetIndex):
        return ("offset", "position"), (index.offsets, index.positions)
    return ("timestamp", "offset"), (index.timestamps, index.offsets)


def _summary(index: OffsetIndex | TimeIndex) -> IndexSummary:
    """The index's size and entry counts, its first and last entry."""
    fields, (first, second) = _columns(index)
    ends = [(int(first[n]), int(second[n])) for n in (0, -1)] if len(first) else [None, None]
    return IndexSummary(
        str(index.source),
        index.size_in_bytes,
        len(index),
        index.preallocated_entries,
        ends[0],
        ends[1],
        fields,
    )


def _preallocation_finding(
    index: OffsetIndex | TimeIndex, is_last: bool, entry_size: int, findings: list[Finding]
) -> None:
    if not index.preallocated_entries:
        return
    source = str(index.source)
    start = len(index) * entry_size
    if is_last:
        findings.append(
            Finding(
                "preallocated-index",
                source,
                f"{index.preallocated_entries} preallocated zero entries after the last entry "
                "(the active segment of a running broker, or of one that did not shut down "
                "cleanly: Kafka rebuilds this index when it recovers the segment)",
                position=start,
                problem=False,
            )
        )
    else:
        findings.append(
            Finding(
                "index-too-large",
                source,
                f"{index.preallocated_entries} zero entries after the last entry in a segment "
                "that is not the active one (Kafka trims an index when it rolls the segment)",
                position=start,
            )
        )


def _partial_finding(
    index: OffsetIndex | TimeIndex, entry_size: int, findings: list[Finding]
) -> None:
    if index.partial_bytes:
        findings.append(
            Finding(
                "index-partial-entry",
                str(index.source),
                f"index is corrupt: {index.size_in_bytes} bytes, not a multiple of the entry "
                f"size {entry_size} ({index.partial_bytes} bytes of a cut entry at the end)",
                position=index.size_in_bytes - index.partial_bytes,
            )
        )


def _first_bad(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def _index_data(
    files: SegmentFiles, kind: str, missing: str, findings: list[Finding]
) -> tuple[str, bytes] | None:
    """The name and bytes of the segment's ``kind`` index file, or None with a
    ``missing-index`` (saying ``missing``) or ``unreadable-file`` finding."""
    path = files.files.get(kind)
    if path is None:
        findings.append(Finding("missing-index", str(files.log), missing, problem=False))
        return None
    data = _read(path, findings)
    return None if data is None else (str(path), data)


@dataclass(frozen=True, slots=True)
class _EntryFindings:
    """The findings about one index file's entries (either kind): each rule's finding counts
    the entries that break it and names the first, by its position in the file."""

    index: OffsetIndex | TimeIndex
    entry_size: int
    is_last: bool
    findings: list[Finding]

    def file_findings(self) -> None:
        """A cut entry at the end, and zero entries after the last one."""
        _partial_finding(self.index, self.entry_size, self.findings)
        _preallocation_finding(self.index, self.is_last, self.entry_size, self.findings)

    def report(self, kind: str, mask: np.ndarray, what: str, field_name: str) -> None:
        first = _first_bad(mask)
        if first is None:
            return
        count = int(mask.sum())
        (name_a, name_b), (column_a, column_b) = _columns(self.index)
        self.findings.append(
            Finding(
                kind,
                str(self.index.source),
                f"{count} entr{'ies' if count != 1 else 'y'} {what}; first: entry {first} "
                f"({name_a} {int(column_a[first])}, {name_b} {int(column_b[first])})",
                position=first * self.entry_size,
                field=field_name,
            )
        )

    def below_base(self, base_offset: int, field_name: str) -> None:
        self.report(
            "index-below-base",
            self.index.offsets < base_offset,
            f"below the segment's base offset {base_offset}",
            field_name,
        )

    def too_large(self, batch_count: int) -> None:
        """More entries than batches: Kafka writes at most one entry per batch."""
        if len(self.index) > batch_count:
            self.findings.append(
                Finding(
                    "index-too-large",
                    str(self.index.source),
                    f"{len(self.index)} entries for a segment of {batch_count} batches (at "
                    "most one entry per batch)",
                    position=batch_count * self.entry_size,
                )
            )


def _check_offset_index(
    files: SegmentFiles,
    segment_size: int,
    batches: np.ndarray,
    is_last: bool,
    findings: list[Finding],
) -> IndexSummary | None:
    loaded = _index_data(
        files,
        "index",
        "no offset index (Kafka recovers the segment and rebuilds it on load)",
        findings,
    )
    if loaded is None:
        return None
    source, data = loaded
    index = parse_offset_index(data, files.base_offset, source=source)
    check = _EntryFindings(index, OFFSET_INDEX_ENTRY_SIZE, is_last, findings)
    check.file_findings()
    offsets, positions = index.offsets, index.positions
    batch_positions, last_offsets = batches[:, POSITION], batches[:, LAST]
    check.below_base(files.base_offset, "index.relative_offset")
    not_increasing = np.zeros(len(offsets), dtype=bool)
    not_increasing[1:] = (np.diff(offsets) <= 0) | (np.diff(positions) <= 0)
    check.report(
        "index-not-increasing",
        not_increasing,
        "whose offset or position is not above the previous entry's",
        "index.relative_offset",
    )
    past_end = positions >= segment_size
    check.report(
        "index-past-end",
        past_end,
        f"pointing past the end of the segment ({segment_size} bytes)",
        "index.position",
    )
    slot = np.searchsorted(batch_positions, positions)
    inside = ~past_end & (slot < len(batch_positions))
    at_batch = np.zeros(len(offsets), dtype=bool)
    clipped = np.minimum(slot, max(len(batch_positions) - 1, 0))
    if len(batch_positions):
        at_batch = (
            inside
            & (batch_positions[clipped] == positions)
            & (offsets >= last_offsets[clipped])
            & np.isin(offsets, last_offsets)
        )
    check.report(
        "index-not-at-batch",
        ~past_end & ~at_batch,
        "not matching a batch (an entry is a batch's start position and the last offset of "
        "that batch or of one after it)",
        "index.position",
    )
    check.too_large(len(batch_positions))
    return _summary(index)


def _check_time_index(
    files: SegmentFiles, batches: np.ndarray, is_last: bool, findings: list[Finding]
) -> IndexSummary | None:
    loaded = _index_data(
        files, "timeindex", "no time index (Kafka creates an empty one on load)", findings
    )
    if loaded is None:
        return None
    source, data = loaded
    index = parse_time_index(data, files.base_offset, source=source)
    check = _EntryFindings(index, TIME_INDEX_ENTRY_SIZE, is_last, findings)
    check.file_findings()
    timestamps, offsets = index.timestamps, index.offsets
    last_offsets, max_timestamps = batches[:, LAST], batches[:, MAX_TIMESTAMP]
    check.below_base(files.base_offset, "timeindex.relative_offset")
    not_monotonic = np.zeros(len(offsets), dtype=bool)
    not_monotonic[1:] = (np.diff(timestamps) <= 0) | (np.diff(offsets) < 0)
    check.report(
        "time-index-not-monotonic",
        not_monotonic,
        "whose timestamp is not above the previous entry's (or whose offset is below it)",
        "timeindex.timestamp",
    )
    segment_last = int(last_offsets[-1]) if len(last_offsets) else files.base_offset - 1
    past_end = offsets > segment_last
    check.report(
        "index-past-end",
        past_end,
        f"past the segment's last offset {segment_last}",
        "timeindex.relative_offset",
    )
    slot = np.searchsorted(last_offsets, offsets, side="left")
    matches = np.zeros(len(offsets), dtype=bool)
    if len(last_offsets):
        clipped = np.minimum(slot, len(last_offsets) - 1)
        matches = (slot < len(last_offsets)) & (max_timestamps[clipped] == timestamps)
    check.report(
        "index-not-at-batch",
        ~past_end & ~matches,
        "not matching a batch (an entry's timestamp is the max timestamp of the batch "
        "holding its offset)",
        "timeindex.timestamp",
    )
    check.too_large(len(last_offsets))
    return _summary(index)


def _epochs_in_log(batches: np.ndarray) -> tuple[EpochEntry, ...]:
    """The cache ``LogSegment.recover`` would build: each v2 batch whose epoch is above the
    latest assigns (epoch, base offset)."""
    entries: list[EpochEntry] = []
    for epoch, base, magic in batches[:, [EPOCH, BASE, MAGIC]].tolist():
        if magic >= 2 and epoch >= 0 and (not entries or epoch > entries[-1].epoch):
            entries.append(EpochEntry(epoch, base))
    return tuple(entries)


def _check_epoch_cache(
    cache: tuple[EpochEntry, ...],
    batches: np.ndarray,
    log_end_offset: int | None,
    log_start_offset: int | None,
    source: str,
    findings: list[Finding],
) -> None:
    for number, (before, entry) in enumerate(itertools.pairwise(cache), start=4):
        if entry.epoch <= before.epoch or entry.start_offset <= before.start_offset:
            findings.append(
                Finding(
                    "epoch-cache-not-increasing",
                    source,
                    f"entry {entry.epoch} {entry.start_offset} does not follow "
                    f"{before.epoch} {before.start_offset} (epochs and start offsets increase)",
                    line=number,
                )
            )
    if log_end_offset is not None:
        for number, entry in enumerate(cache, start=3):
            if entry.start_offset > log_end_offset:
                findings.append(
                    Finding(
                        "epoch-cache-past-end",
                        source,
                        f"epoch {entry.epoch} starts at {entry.start_offset}, past the log end "
                        f"offset {log_end_offset}",
                        line=number,
                    )
                )
    v2 = batches[(batches[:, MAGIC] >= 2) & (batches[:, EPOCH] >= 0)]
    # Kafka clips the cache at the log start offset; without that checkpoint, the cache's
    # first entry is the best lower bound (batches below it may be below the log start)
    lower = (
        log_start_offset
        if log_start_offset is not None
        else (cache[0].start_offset if cache else None)
    )
    if lower is not None:
        v2 = v2[v2[:, LAST] >= lower]
    if not len(v2):
        return
    starts = np.asarray([entry.start_offset for entry in cache], dtype=np.int64)
    epochs = np.asarray([entry.epoch for entry in cache], dtype=np.int64)
    # a batch straddling the bound counts from the bound (the clipped first entry's start)
    asked = v2[:, BASE] if lower is None else np.maximum(v2[:, BASE], lower)
    slot = np.searchsorted(starts, asked, side="right") - 1
    cached = np.where(slot >= 0, epochs[np.maximum(slot, 0)] if len(epochs) else -1, -1)
    wrong = np.flatnonzero(cached != v2[:, EPOCH])
    if len(wrong):
        first = v2[wrong[0]]
        given = int(cached[wrong[0]])
        findings.append(
            Finding(
                "epoch-cache-mismatch",
                source,
                f"{len(wrong)} batch{'es' * (len(wrong) != 1)} whose leader epoch the cache "
                f"does not give; first: offset {int(first[BASE])} has epoch "
                f"{int(first[EPOCH])}, the cache says {'none' if given < 0 else given}",
            )
        )


def parent_checkpoints(
    path: Path, findings: list[Finding]
) -> dict[str, dict[tuple[str, int], int] | None]:
    """The offset checkpoints of the log directory holding partition directory ``path``."""
    present = {
        name: parent_dir(path) / name
        for name in LOG_DIR_CHECKPOINTS
        if (parent_dir(path) / name).is_file()
    }
    return read_offset_checkpoints(present, findings)


def inspect_partition(
    path: Path,
    checkpoints: dict[str, dict[tuple[str, int], int] | None] | None = None,
) -> PartitionReport:
    """Inspect one partition directory (see the module docstring). ``checkpoints`` are the
    log directory's offset checkpoints by file name (read from the parent directory when
    None). Raises :class:`KafkaFormatError` only when the directory cannot be listed."""
    try:
        files = list_partition_dir(path)
    except OSError as error:
        raise KafkaFormatError(f"cannot list: {error.strerror}", source=str(path)) from None
    findings: list[Finding] = []
    if checkpoints is None:
        checkpoints = parent_checkpoints(path, findings)
    return _inspect_files(files, checkpoints, findings)


def _checkpointed(
    checkpoints: dict[str, dict[tuple[str, int], int] | None], name: str, files: PartitionFiles
) -> int | None:
    entries = checkpoints.get(name)
    if entries is None or files.topic is None or files.partition is None:
        return None
    return entries.get((files.topic, files.partition))


def _inspect_files(
    files: PartitionFiles,
    checkpoints: dict[str, dict[tuple[str, int], int] | None],
    findings: list[Finding],
) -> PartitionReport:
    segments = []
    rows: list[tuple[int, ...]] = []
    previous: SegmentReport | None = None
    with_log = [segment for segment in files.segments if segment.log is not None]
    active = with_log[-1] if with_log else None
    for segment_files in files.segments:
        read = _read_segment(segment_files, segment_files is active, findings)
        report = read.report
        if (
            previous is not None
            and previous.last_offset is not None
            and previous.last_offset >= report.base_offset
            and report.file is not None
        ):
            findings.append(
                Finding(
                    "segment-overlap",
                    report.file,
                    f"the segment of base offset {report.base_offset} starts at or before the "
                    f"previous segment's last offset {previous.last_offset}",
                )
            )
        if report.file is not None:
            segments.append(report)
            previous = report
        rows.extend(read.batches)
    batches = np.asarray(rows, dtype=np.int64).reshape(-1, 10)
    log_end_offset = valid_log_end_offset = None
    if segments:
        # Kafka's log end offset: the active (last) segment's next offset, its base when empty
        last = segments[-1]
        log_end_offset = last.base_offset if last.last_offset is None else last.last_offset + 1
        valid_log_end_offset = log_end_offset
        stops = [int(row) for row in np.flatnonzero(batches[:, VALID] == 0)[:1]]
        cut = [segment for segment in segments if segment.trailing_bytes]
        if cut:
            later = np.flatnonzero(batches[:, SEGMENT] > cut[0].base_offset)
            stops.append(int(later[0]) if len(later) else len(batches))
        if stops:
            stop = min(stops)
            valid_log_end_offset = (
                int(batches[stop - 1, LAST]) + 1 if stop > 0 else segments[0].base_offset
            )
    else:
        findings.append(Finding("no-segments", str(files.path), "no segment files", problem=False))

    cache = None
    source = str(files.leader_epoch_checkpoint) if files.leader_epoch_checkpoint else ""
    if files.leader_epoch_checkpoint is not None:
        text = _read_text(files.leader_epoch_checkpoint, findings)
        if text is not None:
            try:
                cache = parse_leader_epoch_checkpoint(text, source=source)
            except KafkaFormatError as error:
                findings.append(Finding.from_error("bad-checkpoint", error, source))
    elif segments:
        findings.append(
            Finding(
                "missing-epoch-checkpoint",
                str(files.path),
                "no leader-epoch-checkpoint",
                problem=False,
            )
        )
    high_watermark = _checkpointed(checkpoints, REPLICATION_OFFSET_CHECKPOINT, files)
    recovery_point = _checkpointed(checkpoints, RECOVERY_POINT_CHECKPOINT, files)
    log_start_offset = _checkpointed(checkpoints, LOG_START_OFFSET_CHECKPOINT, files)
    cleaner_offset = _checkpointed(checkpoints, CLEANER_OFFSET_CHECKPOINT, files)
    if cache is not None:
        _check_epoch_cache(cache, batches, log_end_offset, log_start_offset, source, findings)
    if log_end_offset is not None:
        for kind, name, value in (
            ("hw-past-end", REPLICATION_OFFSET_CHECKPOINT, high_watermark),
            ("recovery-point-past-end", RECOVERY_POINT_CHECKPOINT, recovery_point),
            ("log-start-past-end", LOG_START_OFFSET_CHECKPOINT, log_start_offset),
        ):
            if value is not None and value > log_end_offset:
                findings.append(
                    Finding(
                        kind,
                        str(parent_dir(files.path) / name),
                        f"{files.topic}-{files.partition} is checkpointed at {value}, past the "
                        f"log end offset {log_end_offset}",
                    )
                )
    topic_id = None
    if files.partition_metadata is not None:
        text = _read_text(files.partition_metadata, findings)
        if text is not None:
            try:
                metadata = parse_partition_metadata(text, source=str(files.partition_metadata))
                topic_id = metadata.topic_id_text
            except KafkaFormatError as error:
                findings.append(
                    Finding.from_error(
                        "bad-partition-metadata", error, str(files.partition_metadata)
                    )
                )
    for state, path in files.transient:
        findings.append(
            Finding(
                "leftover-file",
                str(path),
                f".{state} file (Kafka "
                + ("completes the swap" if state == "swap" else "deletes it")
                + " on load)",
                problem=False,
            )
        )
    for path in files.others:
        findings.append(Finding("unknown-file", str(path), "not a Kafka file", problem=False))
    return PartitionReport(
        str(files.path),
        files.topic,
        files.partition,
        topic_id,
        tuple(segments),
        log_end_offset,
        valid_log_end_offset,
        cache,
        _epochs_in_log(batches),
        high_watermark,
        recovery_point,
        log_start_offset,
        cleaner_offset,
        tuple(offset for offset, _ in files.snapshots),
        tuple(findings),
        batches,
    )


def inspect_log_dir(path: Path, progress: Progress | None = None) -> LogDirReport:
    """Every partition directory of a log directory, with the log directory's checkpoints;
    ``progress(done, total)`` is called after each partition."""
    try:
        listing = list_log_dir(path)
    except OSError as error:
        raise KafkaFormatError(f"cannot list: {error.strerror}", source=str(path)) from None
    findings: list[Finding] = []
    checkpoints = read_offset_checkpoints(listing.checkpoints, findings)
    meta = None
    if listing.meta_properties is not None:
        text = _read_text(listing.meta_properties, findings)
        meta = parse_meta_properties(text) if text is not None else None
    for special in listing.special_dirs:
        findings.append(
            Finding(
                "special-dir",
                str(special),
                "a partition directory being deleted or moved (not inspected)",
                problem=False,
            )
        )
    for other in listing.others:
        findings.append(Finding("unknown-file", str(other), "not a Kafka file", problem=False))
    reports = []
    for partition in listing.partitions:
        try:
            files = list_partition_dir(partition)
        except OSError as error:
            findings.append(
                Finding("unreadable-file", str(partition), f"cannot list: {error.strerror}")
            )
            continue
        reports.append(_inspect_files(files, checkpoints, []))
        if progress is not None:
            progress(len(reports), len(listing.partitions))
    return LogDirReport(str(path), "log_dir", checkpoints, meta, tuple(reports), tuple(findings))


def inspect_path(path: Path, progress: Progress | None = None) -> LogDirReport:
    """A log directory or one partition directory. Raises :class:`KafkaFormatError` when the
    path is missing, not a directory, or holds neither."""
    if not path.exists():
        raise KafkaFormatError("no such directory", source=str(path))
    if not path.is_dir():
        raise KafkaFormatError("not a directory", source=str(path))
    try:
        is_partition = looks_like_partition_dir(path)
        is_log_dir = not is_partition and looks_like_log_dir(path)
    except OSError as error:
        raise KafkaFormatError(f"cannot list: {error.strerror}", source=str(path)) from None
    if is_log_dir:
        return inspect_log_dir(path, progress)
    if not is_partition:
        raise KafkaFormatError(
            "neither a partition directory (segment files, leader-epoch-checkpoint) nor a log "
            "directory (<topic>-<partition> directories, offset checkpoints)",
            source=str(path),
        )
    findings: list[Finding] = []
    checkpoints = parent_checkpoints(path, findings)
    report = inspect_partition(path, checkpoints)
    return LogDirReport(str(path), "partition_dir", checkpoints, None, (report,), tuple(findings))
