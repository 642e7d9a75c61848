"""KIP-630 snapshots of ``__cluster_metadata``: ``<end offset>-<epoch>.checkpoint`` files.

A snapshot holds the metadata image with every record below ``end_offset`` applied; its id is
(end offset, epoch of the last contained record), each written as 20 digits. The file is a run
of v2 record batches, offsets counting from 0, every batch's partition leader epoch the
snapshot epoch (``RecordsSnapshotWriter``):

1. a control batch holding one ``SnapshotHeaderRecord`` (version 0,
   ``LastContainedLogTimestamp``);
2. a control batch holding ``KRaftVersionRecord`` (kraft.version 1) and ``VotersRecord``
   (the voter set at the end offset, KIP-853);
3. a data batch of metadata records (ktk's JSON values, :mod:`replication.kraft.records`),
   left out when the image is empty;
4. a control batch holding one ``SnapshotFooterRecord`` (version 0).

A file that is not whole (a batch CRC that does not match, a header or footer missing, bytes
after the footer, a ``.checkpoint.part`` never renamed) is refused with
:class:`SnapshotError`; ``latest_valid_snapshot`` then falls back to an older file.

>>> from replication.kraft.records import MetadataImage, RegisterBroker
>>> store = MemoryStore()
>>> image = MetadataImage.empty().apply(RegisterBroker(4))
>>> name = write_snapshot(store, SnapshotId(12, 3), image, voters=(1, 2, 3), timestamp=500)
>>> name
'00000000000000000012-00000000000000000003.checkpoint'
>>> read_snapshot(name, store.read(name)).image.brokers
(4,)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from kafka_format.batch import RecordBatch, build_batch
from kafka_format.control import (
    ControlRecordType,
    Endpoint,
    KRaftVersionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
    build_control_batch,
    control_records,
)
from kafka_format.errors import KafkaFormatError
from kafka_format.model import NewRecord
from kafka_format.segment import iter_batches
from ktkbase.errors import InputError as _BaseInputError
from replication.errors import InputError
from replication.kraft.records import MetadataImage, decode_record, encode_record

__all__ = [
    "PARTITION_DIR",
    "DirectoryStore",
    "MemoryStore",
    "Snapshot",
    "SnapshotError",
    "SnapshotId",
    "SnapshotStore",
    "delete_snapshots_before",
    "latest_valid_snapshot",
    "read_snapshot",
    "snapshot_bytes",
    "snapshot_name",
    "write_snapshot",
]

PARTITION_DIR = "__cluster_metadata-0"
SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
_NAME = re.compile(r"^(\d{20})-(\d{20})\.checkpoint$")


class SnapshotError(InputError):
    """A snapshot file that must not be loaded: corrupt, partial, or misnamed."""


class SnapshotId(NamedTuple):
    """``OffsetAndEpoch`` of a snapshot: records below ``end_offset`` are in it."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    snapshot_id: SnapshotId
    image: MetadataImage
    voters: tuple[int, ...]
    last_contained_log_timestamp: int


class SnapshotStore(Protocol):
    """Where a node keeps its snapshot files (one partition directory)."""

    def names(self) -> list[str]: ...
    def read(self, name: str) -> bytes: ...
    def write(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...


@dataclass(slots=True)
class MemoryStore:
    """Snapshot files held in memory (the simulator's disk: survives a node's crash)."""

    files: dict[str, bytes] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.files)

    def read(self, name: str) -> bytes:
        return self.files[name]

    def write(self, name: str, data: bytes) -> None:
        self.files[name] = data

    def delete(self, name: str) -> None:
        self.files.pop(name, None)


@dataclass(frozen=True, slots=True)
class DirectoryStore:
    """Snapshot files in a real ``__cluster_metadata-0`` directory (created on first write)."""

    path: Path

    def names(self) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir() if p.is_file())

    def read(self, name: str) -> bytes:
        return (self.path / name).read_bytes()

    def write(self, name: str, data: bytes) -> None:
        # Written as .part then renamed, as Kafka freezes a snapshot: a crash leaves no
        # half-written .checkpoint.
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / name
        partial = final.with_name(name + ".part")
        partial.write_bytes(data)
        partial.replace(final)

    def delete(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)


def snapshot_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:020d}{SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    found = _NAME.match(name)
    if found is None:
        return None
    return SnapshotId(int(found.group(1)), int(found.group(2)))


def voter_of(voter_id: int) -> Voter:
    """The ``VotersRecord`` entry ktk writes for a controller (directory id from the node id)."""
    return Voter(
        voter_id,
        uuid.UUID(int=voter_id + 1),
        (Endpoint("CONTROLLER", f"controller-{voter_id}", 9093),),
        0,
        1,
    )


def snapshot_bytes(
    snapshot_id: SnapshotId, image: MetadataImage, *, voters: tuple[int, ...], timestamp: int
) -> bytes:
    """The bytes of a snapshot file (layout in the module docstring)."""
    epoch = snapshot_id.epoch
    parts = [
        build_control_batch(
            [SnapshotHeaderRecord(0, timestamp)],
            initial_offset=0,
            timestamp=timestamp,
            leader_epoch=epoch,
        ),
        build_control_batch(
            [KRaftVersionRecord(0, 1), VotersRecord(0, tuple(voter_of(v) for v in voters))],
            initial_offset=1,
            timestamp=timestamp,
            leader_epoch=epoch,
        ),
    ]
    records = image.records()
    next_offset = 3
    if records:
        parts.append(
            build_batch(
                [NewRecord(None, encode_record(r), timestamp=timestamp) for r in records],
                base_offset=next_offset,
                partition_leader_epoch=epoch,
            )
        )
        next_offset += len(records)
    parts.append(
        build_control_batch(
            [SnapshotFooterRecord(0)],
            initial_offset=next_offset,
            timestamp=timestamp,
            leader_epoch=epoch,
        )
    )
    return b"".join(parts)


def write_snapshot(
    store: SnapshotStore,
    snapshot_id: SnapshotId,
    image: MetadataImage,
    *,
    voters: tuple[int, ...],
    timestamp: int,
) -> str:
    """Write the snapshot file; returns its name."""
    name = snapshot_name(snapshot_id)
    store.write(name, snapshot_bytes(snapshot_id, image, voters=voters, timestamp=timestamp))
    return name


def _batches(name: str, data: bytes) -> Iterator[RecordBatch]:
    end = 0
    for batch in iter_batches(data, source=name):
        if not isinstance(batch, RecordBatch):
            raise SnapshotError("snapshot batches must be magic 2", source=name, field="magic")
        batch.ensure_valid()
        end = batch.position + batch.size_in_bytes
        yield batch
    if end != len(data):
        raise SnapshotError(
            "snapshot ends with a partial batch", source=name, position=end, field="batch"
        )


def read_snapshot(name: str, data: bytes) -> Snapshot:
    """The snapshot in ``data`` (file ``name``); :class:`SnapshotError` if it must not load."""
    snapshot_id = parse_snapshot_name(name)
    if snapshot_id is None:
        raise SnapshotError("not a snapshot file name", source=name, field="name", value=name)
    image = MetadataImage.empty()
    voters: tuple[int, ...] = ()
    header: SnapshotHeaderRecord | None = None
    footer = False
    try:
        for index, batch in enumerate(_batches(name, data)):
            if footer:
                raise SnapshotError(
                    "batch after the snapshot footer", source=name, position=batch.position
                )
            if batch.is_control:
                for _, control in control_records(batch):
                    kind = control.type
                    if index == 0 and kind is not ControlRecordType.SNAPSHOT_HEADER:
                        break
                    if kind is ControlRecordType.SNAPSHOT_HEADER and index == 0:
                        assert isinstance(control.value, SnapshotHeaderRecord)
                        header = control.value
                    elif kind is ControlRecordType.KRAFT_VOTERS:
                        assert isinstance(control.value, VotersRecord)
                        voters = tuple(v.voter_id for v in control.value.voters)
                    elif kind is ControlRecordType.SNAPSHOT_FOOTER:
                        footer = True
            if header is None:
                raise SnapshotError(
                    "snapshot does not start with a SnapshotHeaderRecord batch",
                    source=name,
                    position=batch.position,
                    field="header",
                )
            if not batch.is_control:
                for record in batch.records():
                    if record.value is None:
                        raise SnapshotError(
                            "metadata record without a value", source=name, position=batch.position
                        )
                    image = image.apply(decode_record(record.value))
    except KafkaFormatError as error:
        raise SnapshotError(
            error.message, source=name, position=error.position, field=error.field
        ) from None
    except _BaseInputError as error:
        if isinstance(error, SnapshotError):
            raise
        raise SnapshotError(error.message, source=name, field=error.field) from None
    if header is None:
        raise SnapshotError("snapshot has no SnapshotHeaderRecord", source=name, field="header")
    if not footer:
        raise SnapshotError("snapshot has no SnapshotFooterRecord", source=name, field="footer")
    return Snapshot(snapshot_id, image, voters, header.last_contained_log_timestamp)


def latest_valid_snapshot(store: SnapshotStore) -> tuple[Snapshot | None, list[SnapshotError]]:
    """The newest snapshot that reads whole, and the errors of newer ones skipped on the way."""
    ids = sorted(
        (found, name) for name in store.names() if (found := parse_snapshot_name(name)) is not None
    )
    skipped: list[SnapshotError] = []
    for _, name in reversed(ids):
        try:
            return read_snapshot(name, store.read(name)), skipped
        except SnapshotError as error:
            skipped.append(error)
    return None, skipped


def delete_snapshots_before(store: SnapshotStore, snapshot_id: SnapshotId) -> list[str]:
    """Delete snapshots older than ``snapshot_id`` and leftover ``.part`` files; returns names."""
    deleted = []
    for name in store.names():
        found = parse_snapshot_name(name)
        if (found is not None and found < snapshot_id) or name.endswith(PARTIAL_SUFFIX):
            store.delete(name)
            deleted.append(name)
    return deleted
