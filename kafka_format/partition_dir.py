"""The files of a partition directory and of a log directory, by Kafka's names (``LogFileUtils``).

A log directory (``log.dirs``) holds one directory per partition, ``<topic>-<partition>``, and
the broker's checkpoints (``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``, ``meta.properties``). A
partition directory holds segments named by their base offset, 20 digits zero-padded:

    00000000000000000000.log        the records           .index      offset index
    00000000000000000000.timeindex  time index            .txnindex   aborted transactions
    00000000000000000042.snapshot   producer state at offset 42
    leader-epoch-checkpoint, partition.metadata

and, while Kafka works on them, files with a second suffix: ``.deleted`` (waiting for
asynchronous deletion), ``.cleaned`` (the cleaner's output before the swap), ``.swap``
(replacing a segment). Directories being deleted, moved between log dirs or left by a
reassignment are ``<topic>-<partition>.<uuid>-delete``, ``-future`` and ``-stray``.

>>> parse_file_name("00000000000000000042.timeindex.deleted")
FileName(base_offset=42, kind='timeindex', state='deleted')
>>> parse_partition_dir_name("my-topic-3")
('my-topic', 3)
>>> parse_partition_dir_name("my-topic-3.f3c4b1d0e9a84b5c9d0a1b2c3d4e5f60-delete") is None
True
>>> segment_file_name(42, "log")
'00000000000000000042.log'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kafka_format.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_DIR_CHECKPOINTS,
    META_PROPERTIES,
    PARTITION_METADATA,
)

__all__ = [
    "FILE_KINDS",
    "FileName",
    "LogDirFiles",
    "PartitionFiles",
    "SegmentFiles",
    "list_log_dir",
    "list_partition_dir",
    "looks_like_log_dir",
    "looks_like_partition_dir",
    "parent_dir",
    "parse_file_name",
    "parse_partition_dir_name",
    "segment_file_name",
]

FILE_KINDS = ("log", "index", "timeindex", "txnindex", "snapshot")
STATES = ("deleted", "cleaned", "swap")
SPECIAL_DIR_SUFFIXES = ("-delete", "-future", "-stray")
_FILE_NAME = re.compile(
    r"(?P<offset>[0-9]{20})\.(?P<kind>" + "|".join(FILE_KINDS) + r")"
    r"(?:\.(?P<state>" + "|".join(STATES) + r"))?"
)
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>0|[1-9][0-9]{0,9})")


class FileName(NamedTuple):
    """A segment file's name: base offset, kind (``log``, ``index``, ...), and the state
    suffix (``deleted``, ``cleaned``, ``swap``) or None."""

    base_offset: int
    kind: str
    state: str | None


def parse_file_name(name: str) -> FileName | None:
    """The parts of a segment file name, or None when Kafka would not read it as one."""
    match = _FILE_NAME.fullmatch(name)
    if match is None or int(match["offset"]) > 2**63 - 1:  # Long.parseLong fails above
        return None
    return FileName(int(match["offset"]), match["kind"], match["state"])


def segment_file_name(base_offset: int, kind: str) -> str:
    """``LogFileUtils.filenamePrefixFromOffset`` + the kind's suffix."""
    return f"{base_offset:020d}.{kind}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a live partition directory (the partition after the last
    ``-``), None for anything else (including ``-delete``/``-future``/``-stray`` directories)."""
    if name.endswith(SPECIAL_DIR_SUFFIXES):
        return None
    match = _PARTITION_DIR.fullmatch(name)
    if match is None or int(match["partition"]) > 2**31 - 1:
        return None
    return match["topic"], int(match["partition"])


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """The live files of one segment, by kind (``log``, ``index``, ``timeindex``,
    ``txnindex``); a kind absent from ``files`` has no file."""

    base_offset: int
    files: dict[str, Path]

    @property
    def log(self) -> Path | None:
        return self.files.get("log")


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    """What a partition directory holds, sorted: segments by base offset, producer snapshots,
    the two metadata files, files in a transient state (``.deleted``...), and others."""

    path: Path
    topic: str | None
    partition: int | None
    segments: tuple[SegmentFiles, ...]
    snapshots: tuple[tuple[int, Path], ...]
    leader_epoch_checkpoint: Path | None
    partition_metadata: Path | None
    transient: tuple[tuple[str, Path], ...] = ()
    others: tuple[Path, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class LogDirFiles:
    """What a log directory holds: partition directories (sorted by topic, partition), the
    offset checkpoints present (file name -> path), ``meta.properties``, directories being
    deleted/moved (``-delete``, ``-future``, ``-stray``), and others."""

    path: Path
    partitions: tuple[Path, ...]
    checkpoints: dict[str, Path]
    meta_properties: Path | None
    special_dirs: tuple[Path, ...]
    others: tuple[Path, ...]


def _entries(path: Path) -> list[Path]:
    return sorted(path.iterdir(), key=lambda entry: entry.name)


def parent_dir(path: Path) -> Path:
    """The directory holding ``path``, also for ``.`` and ``..`` (whose ``parent`` is not)."""
    return path / ".." if path.name in ("", "..") else path.parent


def list_partition_dir(path: Path) -> PartitionFiles:
    """The files of a partition directory (reads the directory listing only).
    Raises ``OSError`` when it cannot be listed."""
    segments: dict[int, dict[str, Path]] = {}
    snapshots = []
    transient = []
    others = []
    epoch_checkpoint = metadata = None
    for entry in _entries(path):
        name = parse_file_name(entry.name)
        if entry.name == LEADER_EPOCH_CHECKPOINT:
            epoch_checkpoint = entry
        elif entry.name == PARTITION_METADATA:
            metadata = entry
        elif name is None or entry.is_dir():
            others.append(entry)
        elif name.state is not None:
            transient.append((name.state, entry))
        elif name.kind == "snapshot":
            snapshots.append((name.base_offset, entry))
        else:
            segments.setdefault(name.base_offset, {})[name.kind] = entry
    parsed = parse_partition_dir_name(path.resolve().name)
    return PartitionFiles(
        path,
        parsed[0] if parsed else None,
        parsed[1] if parsed else None,
        tuple(SegmentFiles(base, files) for base, files in sorted(segments.items())),
        tuple(sorted(snapshots)),
        epoch_checkpoint,
        metadata,
        tuple(transient),
        tuple(others),
    )


def list_log_dir(path: Path) -> LogDirFiles:
    """The partition directories and checkpoint files of a log directory."""
    partitions = []
    checkpoints = {}
    special = []
    others = []
    meta = None
    for entry in _entries(path):
        if entry.is_dir():
            if parse_partition_dir_name(entry.name) is not None:
                partitions.append(entry)
            elif entry.name.endswith(SPECIAL_DIR_SUFFIXES):
                special.append(entry)
            else:
                others.append(entry)
        elif entry.name in LOG_DIR_CHECKPOINTS:
            checkpoints[entry.name] = entry
        elif entry.name == META_PROPERTIES:
            meta = entry
        else:
            others.append(entry)

    def order(partition_dir: Path) -> tuple[str, int]:
        topic_partition = parse_partition_dir_name(partition_dir.name)
        assert topic_partition is not None
        return topic_partition

    return LogDirFiles(
        path,
        tuple(sorted(partitions, key=order)),
        checkpoints,
        meta,
        tuple(special),
        tuple(others),
    )


def looks_like_partition_dir(path: Path) -> bool:
    """A directory holding segment files or a partition's metadata files."""
    return any(
        parse_file_name(entry.name) is not None
        or entry.name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA)
        for entry in path.iterdir()
    )


def looks_like_log_dir(path: Path) -> bool:
    """A directory holding a broker's checkpoints or ``<topic>-<partition>`` directories
    (and no segment files of its own)."""
    listing = list_log_dir(path)
    return bool(listing.partitions or listing.checkpoints or listing.meta_properties)
