"""A small writer of Kafka partition and log directories for tests, in Kafka's exact layouts.

Segments are kafka_format's v2 batches (``build_batch``); the ``.index`` and ``.timeindex``
files hold the entries ``LogSegment.recover`` builds (``build_indexes``, one offset entry per
``index_interval_bytes`` of log, as the broker writes them) in ``OffsetIndex``/``TimeIndex``
layouts; ``leader-epoch-checkpoint`` holds the epochs the batches carry
(``LeaderEpochFileCache.assign`` on each new epoch); ``partition.metadata`` a topic id; the log
directory gets ``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint`` in ``OffsetCheckpointFile`` text. Every piece can be
overridden to write broken directories. :func:`record_batches_dir` finds the segments Kafka
itself wrote (the ``record-batches`` reference vectors).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import _vectors_dir

from kafka_format import NewRecord, build_batch
from kafka_format.checkpoint import (
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
)
from kafka_format.index import build_indexes, encode_offset_index, encode_time_index
from kafka_format.partition_dir import segment_file_name

TOPIC_ID = bytes(range(1, 17))
BASE_TIME = 1_700_000_000_000


def record_batches_dir() -> Path:
    """The directory of Kafka-written segments and their descriptions; fails the test when the
    reference vectors are missing (a run without them never passes by skipping)."""
    path = _vectors_dir() / "record-batches"
    if not path.is_dir():
        pytest.fail(f"record-batch vectors not found at {path} (set KTK_VECTORS)")
    return path


def batch(offset: int, epoch: int, records: int = 1, *, value: bytes = b"v" * 40) -> bytes:
    """A batch of ``records`` records from ``offset``, written in leader epoch ``epoch``,
    timestamps growing with the offset."""
    return build_batch(
        [
            NewRecord(f"key-{offset + n}".encode(), value, timestamp=BASE_TIME + offset + n)
            for n in range(records)
        ],
        base_offset=offset,
        partition_leader_epoch=epoch,
    )


def epoch_batches(epochs: Sequence[int], start: int = 0, records: int = 2) -> list[bytes]:
    """One batch of ``records`` records per entry of ``epochs``, at contiguous offsets."""
    batches = []
    offset = start
    for epoch in epochs:
        batches.append(batch(offset, epoch, records))
        offset += records
    return batches


def write_segment(
    directory: Path,
    base_offset: int,
    batches: Sequence[bytes],
    *,
    index_interval_bytes: int = 100,
    indexes: bool = True,
) -> Path:
    """``<base offset>.log`` with its ``.index`` and ``.timeindex`` as Kafka builds them."""
    data = b"".join(batches)
    log = directory / segment_file_name(base_offset, "log")
    log.write_bytes(data)
    if indexes:
        built = build_indexes(data, base_offset, index_interval_bytes=index_interval_bytes)
        (directory / segment_file_name(base_offset, "index")).write_bytes(
            encode_offset_index(built.offset_entries, base_offset)
        )
        (directory / segment_file_name(base_offset, "timeindex")).write_bytes(
            encode_time_index(built.time_entries, base_offset)
        )
    return log


def write_partition(
    log_dir: Path,
    topic: str,
    partition: int,
    segments: Sequence[Sequence[bytes]],
    *,
    epochs: Sequence[tuple[int, int]] | None = None,
    index_interval_bytes: int = 100,
) -> Path:
    """A partition directory: one segment per entry of ``segments`` (each based at its first
    batch's offset), the leader-epoch checkpoint (``epochs``, or what the batches carry) and
    ``partition.metadata``."""
    from kafka_format import iter_batches

    directory = log_dir / f"{topic}-{partition}"
    directory.mkdir(parents=True)
    derived: list[tuple[int, int]] = []
    next_offset = 0
    for batches in segments:
        parsed = list(iter_batches(b"".join(batches)))
        base = parsed[0].base_offset if parsed else next_offset
        write_segment(directory, base, batches, index_interval_bytes=index_interval_bytes)
        for one in parsed:
            if not derived or one.partition_leader_epoch > derived[-1][0]:
                derived.append((one.partition_leader_epoch, one.base_offset))
            next_offset = one.last_offset + 1
    (directory / "leader-epoch-checkpoint").write_text(
        format_leader_epoch_checkpoint(derived if epochs is None else epochs)
    )
    (directory / "partition.metadata").write_text(format_partition_metadata(TOPIC_ID))
    return directory


def write_log_dir_checkpoints(
    log_dir: Path,
    *,
    high_watermarks: dict[tuple[str, int], int],
    recovery_points: dict[tuple[str, int], int] | None = None,
    log_start_offsets: dict[tuple[str, int], int] | None = None,
) -> None:
    """The broker's offset checkpoints in the log directory's root."""
    for name, offsets in (
        ("replication-offset-checkpoint", high_watermarks),
        ("recovery-point-offset-checkpoint", recovery_points or high_watermarks),
        ("log-start-offset-checkpoint", log_start_offsets or dict.fromkeys(high_watermarks, 0)),
    ):
        entries = [(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        (log_dir / name).write_text(format_offset_checkpoint(entries))


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (and directory) with its bytes and mtime in nanoseconds."""
    state = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        state[str(path.relative_to(root))] = (
            path.read_bytes() if path.is_file() else b"<dir>",
            stat.st_mtime_ns,
        )
    state["."] = (b"<dir>", root.stat().st_mtime_ns)
    return state
