"""KIP-630 snapshot files of replication/kraft against bytes built by hand from the record-batch
specification (KIP-98 v2 batch header, control record keys and KRaft message values, CRC-32C)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafka_format.batch import RecordBatch
from kafka_format.control import ControlRecordType, control_records
from kafka_format.segment import iter_batches
from replication.errors import InputError
from replication.kraft.records import (
    MetadataImage,
    PartitionChange,
    RegisterBroker,
    TopicRecord,
    decode_record,
    encode_record,
)
from replication.kraft.snapshot import (
    DirectoryStore,
    MemoryStore,
    SnapshotError,
    SnapshotId,
    delete_snapshots_before,
    latest_valid_snapshot,
    read_snapshot,
    snapshot_bytes,
    snapshot_name,
    write_snapshot,
)


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = b""
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def record(offset_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


def batch(
    base_offset: int, epoch: int, attributes: int, timestamp: int, records: list[bytes]
) -> bytes:
    # attributes .. records: the bytes the CRC covers
    covered = struct.pack(
        ">hiqqqhii", attributes, len(records) - 1, timestamp, timestamp, -1, -1, -1, len(records)
    ) + b"".join(records)
    length = 4 + 1 + 4 + len(covered)  # partition leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", base_offset, length, epoch, 2, crc32c(covered)) + covered


CONTROL = 0x20


def test_snapshot_file_matches_the_hand_built_layout():
    image = MetadataImage.empty().apply(RegisterBroker(4))
    data = snapshot_bytes(SnapshotId(12, 3), image, voters=(1, 2, 3), timestamp=1700)
    header = batch(
        0,
        3,
        CONTROL,
        1700,
        [record(0, struct.pack(">hh", 0, 3), struct.pack(">hq", 0, 1700) + b"\x00")],
    )
    value = b'{"broker_id":4,"type":"RegisterBroker"}'
    records = batch(3, 3, 0, 1700, [record(0, None, value)])
    footer = batch(4, 3, CONTROL, 1700, [record(0, struct.pack(">hh", 0, 4), b"\x00\x00\x00")])
    assert data.startswith(header)
    assert data.endswith(records + footer)
    middle = RecordBatch.parse(data[len(header) : len(data) - len(records) - len(footer)])
    assert middle.is_control and middle.base_offset == 1 and middle.last_offset == 2
    assert middle.partition_leader_epoch == 3 and middle.crc_stored == middle.crc_computed
    kinds = [control.type for _, control in control_records(middle)]
    assert kinds == [ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS]
    # The batch header fields, read back at their offsets in the specification.
    base_offset, length, epoch, magic, crc, attributes = struct.unpack_from(">qiibIh", data)
    assert (base_offset, length + 12, epoch, magic) == (0, len(header), 3, 2)
    assert crc == crc32c(header[21:]) and attributes == CONTROL


def test_snapshot_reads_back_image_voters_and_timestamp():
    image = MetadataImage.empty()
    for item in [
        RegisterBroker(1),
        TopicRecord("orders", 2),
        PartitionChange("orders", 1, leader=1, isr=(1, 2), leader_epoch=7),
    ]:
        image = image.apply(item)
    store = MemoryStore()
    name = write_snapshot(store, SnapshotId(40, 6), image, voters=(1, 2, 3), timestamp=99)
    snapshot = read_snapshot(name, store.read(name))
    assert snapshot.image == image
    assert snapshot.voters == (1, 2, 3)
    assert snapshot.last_contained_log_timestamp == 99
    assert snapshot.snapshot_id == SnapshotId(40, 6)


def test_snapshot_offsets_count_from_zero_and_every_batch_carries_the_epoch():
    image = MetadataImage.empty().apply(RegisterBroker(1)).apply(RegisterBroker(2))
    data = snapshot_bytes(SnapshotId(9, 2), image, voters=(1,), timestamp=0)
    batches = list(iter_batches(data))
    assert [b.base_offset for b in batches] == [0, 1, 3, 5]
    assert {b.partition_leader_epoch for b in batches} == {2}


def test_a_flipped_byte_fails_the_crc():
    data = bytearray(
        snapshot_bytes(SnapshotId(1, 1), MetadataImage.empty(), voters=(1,), timestamp=0)
    )
    data[30] ^= 0x01
    with pytest.raises(SnapshotError, match="corrupt"):
        read_snapshot(snapshot_name(SnapshotId(1, 1)), bytes(data))


def test_a_snapshot_without_its_footer_is_refused():
    whole = snapshot_bytes(SnapshotId(1, 1), MetadataImage.empty(), voters=(1,), timestamp=0)
    footer_start = list(iter_batches(whole))[-1].position
    with pytest.raises(SnapshotError, match="no SnapshotFooterRecord"):
        read_snapshot(snapshot_name(SnapshotId(1, 1)), whole[:footer_start])


def test_a_snapshot_cut_mid_batch_is_refused():
    whole = snapshot_bytes(SnapshotId(1, 1), MetadataImage.empty(), voters=(1,), timestamp=0)
    with pytest.raises(SnapshotError, match="partial batch"):
        read_snapshot(snapshot_name(SnapshotId(1, 1)), whole[:-3])


def test_a_snapshot_not_starting_with_its_header_is_refused():
    whole = snapshot_bytes(SnapshotId(1, 1), MetadataImage.empty(), voters=(1,), timestamp=0)
    second = list(iter_batches(whole))[1].position
    with pytest.raises(SnapshotError, match="SnapshotHeaderRecord"):
        read_snapshot(snapshot_name(SnapshotId(1, 1)), whole[second:])


def test_latest_valid_snapshot_skips_corrupt_ones_and_part_files(tmp_path: Path):
    store = DirectoryStore(tmp_path / "__cluster_metadata-0")
    image = MetadataImage.empty().apply(RegisterBroker(1))
    write_snapshot(store, SnapshotId(5, 1), image, voters=(1,), timestamp=0)
    write_snapshot(
        store, SnapshotId(8, 2), image.apply(RegisterBroker(2)), voters=(1,), timestamp=0
    )
    newest = snapshot_name(SnapshotId(8, 2))
    damaged = bytearray(store.read(newest))
    damaged[-1] ^= 0xFF
    store.write(newest, bytes(damaged))
    (store.path / (snapshot_name(SnapshotId(9, 2)) + ".part")).write_bytes(b"half")
    snapshot, skipped = latest_valid_snapshot(store)
    assert snapshot is not None and snapshot.snapshot_id == SnapshotId(5, 1)
    assert [error.source for error in skipped] == [newest]
    deleted = delete_snapshots_before(store, SnapshotId(8, 2))
    assert deleted == [snapshot_name(SnapshotId(5, 1)), snapshot_name(SnapshotId(9, 2)) + ".part"]


def test_metadata_records_round_trip_as_json_values():
    for item in [
        RegisterBroker(3),
        TopicRecord("a", 1),
        PartitionChange("a", 0, leader=3, isr=(3,), leader_epoch=1),
    ]:
        assert decode_record(encode_record(item)) == item


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (b"\xff", "value"),
        (b"[]", "value"),
        (b"[" * 100_000, "value"),
        (b'{"type":"Topic","name":"a","partitions":NaN}', "value"),
        (b'{"type":"Nope"}', "type"),
        (b'{"type":"RegisterBroker","broker_id":"x"}', "broker_id"),
        (
            b'{"type":"PartitionChange","topic":"a","partition":0,"leader":1,"isr":[true],'
            b'"leader_epoch":0}',
            "isr",
        ),
    ],
)
def test_bad_metadata_record_values_name_the_field(value, field):
    with pytest.raises(InputError) as error:
        decode_record(value)
    assert error.value.field == field
