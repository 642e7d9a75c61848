"""kafka_format behaviours one by one: framing of each codec, control records, legacy message
sets, in-place edits, header-only scans, and errors that name file, byte and field."""

from __future__ import annotations

import gzip
import random
import struct
import uuid

import cramjam
import numpy as np
import pytest

from kafka_format import (
    Compression,
    ControlRecordType,
    Header,
    KafkaFormatError,
    KRaftVersionRecord,
    LeaderChangeMessage,
    LegacyBatch,
    NewRecord,
    RecordBatch,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TimestampType,
    VotersRecord,
    batch_headers,
    build_batch,
    build_control_batch,
    build_empty_batch,
    build_legacy_entry,
    build_legacy_wrapper,
    compress,
    control_records,
    decompress,
    increment_sequence,
    iter_batches,
    parse_control_record,
    recover_segment,
    scan_segment,
    set_last_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from kafka_format.control import Endpoint, Voter, control_key
from kafka_format.varint import size_of_varint, size_of_varlong, write_varint, write_varlong


def _batch(*values: bytes, **fields: object) -> bytes:
    records = [NewRecord(b"k%d" % i, v, timestamp=1_000 + i) for i, v in enumerate(values)]
    return build_batch(records, **fields)  # type: ignore[arg-type]


# --- codecs -------------------------------------------------------------------------------------
def test_gzip_writes_javas_header_and_any_gzip_reader_accepts_it() -> None:
    payload = b"kafka gzip " * 500
    framed = compress(Compression.GZIP, payload)
    assert framed[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert gzip.decompress(framed) == payload
    assert decompress(Compression.GZIP, framed + compress(Compression.GZIP, b"!")) == payload + b"!"


def test_gzip_cut_short_is_a_format_error_naming_the_codec() -> None:
    framed = compress(Compression.GZIP, b"x" * 1000)
    with pytest.raises(KafkaFormatError, match="gzip payload"):
        decompress(Compression.GZIP, framed[:-6])


def test_snappy_uses_xerial_framing_in_32_kib_chunks_and_reads_raw_snappy() -> None:
    payload = bytes(range(256)) * 300  # 76,800 bytes: three chunks
    framed = compress(Compression.SNAPPY, payload)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    chunks, index = [], 16
    while index < len(framed):
        (length,) = struct.unpack_from(">i", framed, index)
        chunks.append(
            len(bytes(cramjam.snappy.decompress_raw(framed[index + 4 : index + 4 + length])))
        )
        index += 4 + length
    assert chunks == [32768, 32768, 11264]
    assert decompress(Compression.SNAPPY, framed) == payload
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert decompress(Compression.SNAPPY, raw) == payload


def test_lz4_frame_is_kafkas_with_the_magic_zero_header_checksum_quirk() -> None:
    payload = b"lz4 block " * 10_000  # 100,000 bytes: two 64 KiB blocks
    framed = compress(Compression.LZ4, payload)
    assert framed[:7] == bytes.fromhex("04224d18604082")
    assert framed[-4:] == b"\x00\x00\x00\x00"
    old = compress(Compression.LZ4, payload, magic=0)
    assert old[:6] == framed[:6] and old[6] != framed[6]
    assert decompress(Compression.LZ4, old, magic=0) == payload
    with pytest.raises(KafkaFormatError, match="Stream frame descriptor corrupted"):
        decompress(Compression.LZ4, old, magic=2)
    assert decompress(Compression.LZ4, framed) == payload
    high = compress(Compression.LZ4, payload, level=17)
    assert decompress(Compression.LZ4, high) == payload


def test_lz4_stores_incompressible_blocks_with_the_top_bit_set() -> None:
    noise = random.Random(1).randbytes(1000)
    framed = compress(Compression.LZ4, noise)
    (word,) = struct.unpack_from("<I", framed, 7)
    assert word == 0x80000000 | 1000
    assert framed[11:1011] == noise
    assert decompress(Compression.LZ4, framed) == noise


def test_zstd_levels_round_trip_and_out_of_range_levels_are_refused() -> None:
    payload = b"zstd " * 2000
    for level in (None, 1, 10, -5):
        assert (
            decompress(Compression.ZSTD, compress(Compression.ZSTD, payload, level=level))
            == payload
        )
    with pytest.raises(KafkaFormatError, match="zstd level"):
        compress(Compression.ZSTD, payload, level=23)


# --- batches ------------------------------------------------------------------------------------
def test_empty_batch_keeps_producer_state_with_no_records() -> None:
    data = build_empty_batch(
        base_offset=10,
        last_offset=13,
        producer_id=5,
        producer_epoch=1,
        base_sequence=40,
        partition_leader_epoch=2,
        timestamp=999,
    )
    batch = RecordBatch.parse(data)
    assert (batch.record_count, batch.base_timestamp, batch.max_timestamp) == (0, -1, 999)
    assert (batch.last_offset, batch.last_sequence) == (13, 43)
    assert batch.records() == [] and batch.is_valid


def test_sequences_wrap_to_zero_after_int32_max() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    data = build_batch(
        [NewRecord(b"a", b"1", 1), NewRecord(b"b", b"2", 2), NewRecord(b"c", b"3", 3)],
        producer_id=9,
        producer_epoch=0,
        base_sequence=2**31 - 2,
    )
    batch = RecordBatch.parse(data)
    assert [r.sequence for r in batch.records()] == [2**31 - 2, 2**31 - 1, 0]
    assert batch.last_sequence == 0


def test_delete_horizon_becomes_the_base_timestamp_with_negative_deltas() -> None:
    data = build_batch([NewRecord(b"a", None, 1_000)], delete_horizon_ms=5_000)
    batch = RecordBatch.parse(data)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 5_000
    [record] = batch.records()
    assert (record.timestamp, record.timestamp_delta) == (1_000, -4_000)


def test_override_last_offset_keeps_a_gap_after_the_last_record() -> None:
    data = build_batch([NewRecord(b"a", b"1", 1, offset=100)], base_offset=100, last_offset=110)
    batch = RecordBatch.parse(data)
    assert (batch.last_offset, batch.next_offset, batch.records()[-1].offset) == (110, 111, 100)


def test_in_place_edits_change_only_what_the_broker_changes() -> None:
    data = _batch(b"v1", b"v2")
    moved = set_partition_leader_epoch(set_last_offset(data, 501), 7)
    batch = RecordBatch.parse(moved)
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch) == (500, 501, 7)
    assert batch.crc_stored == RecordBatch.parse(data).crc_stored and batch.is_valid
    stamped = RecordBatch.parse(set_max_timestamp(moved, TimestampType.LOG_APPEND_TIME, 9_999))
    assert stamped.is_valid and stamped.crc_stored != batch.crc_stored
    assert [r.timestamp for r in stamped.records()] == [9_999, 9_999]
    assert (
        set_max_timestamp(data, TimestampType.CREATE_TIME, RecordBatch.parse(data).max_timestamp)
        == data
    )


@pytest.mark.parametrize(
    ("fields", "records", "message"),
    [
        ({"is_transactional": True}, [NewRecord(b"a", b"1", 1)], "without a valid producer ID"),
        ({"producer_id": 4, "producer_epoch": -1}, [NewRecord(b"a", b"1", 1)], "producer epoch"),
        ({"producer_id": 4, "producer_epoch": 0}, [NewRecord(b"a", b"1", 1)], "negative sequence"),
        (
            {},
            [NewRecord(b"a", b"1", 1, offset=5), NewRecord(b"b", b"2", 2, offset=5)],
            "monotonically",
        ),
        ({}, [NewRecord(b"a", b"1", -7)], "negative timestamp"),
        ({}, [], "at least one record"),
        (
            {"compression": Compression.GZIP, "compression_level": 12},
            [NewRecord(b"a", b"1", 1)],
            "level",
        ),
    ],
)
def test_writer_refuses_what_memory_records_builder_refuses(
    fields: dict[str, object], records: list[NewRecord], message: str
) -> None:
    with pytest.raises(KafkaFormatError, match=message):
        build_batch(records, **fields)  # type: ignore[arg-type]


def test_record_errors_name_the_file_the_batch_position_and_the_record() -> None:
    good = _batch(b"v1", b"v2")
    # claim three records where two are written: Kafka's "premature EOF"
    broken = bytearray(good)
    struct.pack_into(">i", broken, 57, 3)
    segment = good + bytes(broken)
    batch = list(iter_batches(segment, source="7.log"))[1]
    with pytest.raises(KafkaFormatError) as raised:
        batch.records()
    # the third record would start where the batch ends
    assert str(raised.value).startswith(f"7.log: byte {len(segment)}: record[2]")
    struct.pack_into(">i", broken, 57, 1)
    with pytest.raises(KafkaFormatError, match="records still remaining"):
        RecordBatch.parse(bytes(broken)).records()


def test_record_errors_in_compressed_batches_say_where_in_the_decompressed_records() -> None:
    data = bytearray(_batch(b"v1", b"v2", compression=Compression.GZIP))
    struct.pack_into(">i", data, 57, 3)
    with pytest.raises(KafkaFormatError) as raised:
        RecordBatch.parse(bytes(data), source="9.log", position=1000).records()
    assert raised.value.position == 1061
    assert "of the decompressed records" in str(raised.value)


def test_negative_header_count_is_refused_as_kafka_refuses_it() -> None:
    body = b"\x00" + write_varlong(0) + write_varint(0) + b"\x01\x01" + write_varint(-1)
    record = write_varint(len(body)) + body
    data = bytearray(_batch(b"v"))
    records_start = 61
    data[records_start:] = record
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(KafkaFormatError, match="invalid number of record headers -1"):
        RecordBatch.parse(bytes(data)).records()


def test_unknown_codec_id_is_a_format_error_at_the_attributes() -> None:
    data = bytearray(_batch(b"v"))
    struct.pack_into(">h", data, 21, 5)
    batch = RecordBatch.parse(bytes(data), source="x.log", position=100)
    with pytest.raises(KafkaFormatError) as raised:
        batch.records()
    assert (raised.value.position, raised.value.field) == (121, "attributes.compression")


def test_headers_keep_raw_key_bytes_and_read_them_as_java_does() -> None:
    data = build_batch([NewRecord(b"k", b"v", 1, (Header(b"\xff", None), Header.of("ключ", b"")))])
    first, second = RecordBatch.parse(data).records()[0].headers
    assert (first.key, first.key_text, first.value) == (b"\xff", "\ufffd", None)
    assert (second.key_text, second.value) == ("ключ", b"")


# --- segments -----------------------------------------------------------------------------------
def test_a_size_below_fourteen_stops_reading_and_recovery_at_that_batch() -> None:
    good = _batch(b"v")
    broken = bytearray(_batch(b"w"))
    struct.pack_into(">i", broken, 8, 13)
    scan = scan_segment(good + bytes(broken), source="3.log")
    assert len(scan.batches) == 1 and scan.error is not None
    assert (scan.error.position, scan.error.field) == (len(good) + 8, "batch.length")
    recovery = recover_segment(good + bytes(broken), source="3.log")
    assert (recovery.valid_bytes, recovery.truncated_bytes) == (len(good), len(broken))
    assert "Found invalid messages in log segment 3.log at byte offset" in recovery.describe()


def test_seventeen_bytes_or_fewer_at_the_end_are_trailing_bytes() -> None:
    good = _batch(b"v")
    assert scan_segment(good + b"\x00" * 17).trailing_bytes == 17
    assert len(scan_segment(good + b"\x00" * 17).batches) == 1


def test_header_table_matches_the_batches_without_reading_records() -> None:
    segment = b"".join(
        _batch(b"a" * i, b"b", base_offset=10 * i, partition_leader_epoch=i) for i in range(5)
    )
    positions, headers = batch_headers(segment)
    batches = list(iter_batches(segment))
    assert positions.tolist() == [b.position for b in batches]
    assert headers["base_offset"].tolist() == [b.base_offset for b in batches]
    assert headers["partition_leader_epoch"].tolist() == list(range(5))
    assert headers["crc"].tolist() == [b.crc_stored for b in batches]
    assert np.all(headers["record_count"] == 2)


def test_header_table_refuses_legacy_entries() -> None:
    entry = build_legacy_entry(offset=0, magic=1, key=None, value=b"v" * 10, timestamp=5)
    with pytest.raises(KafkaFormatError, match="magic 0/1"):
        batch_headers(entry)


# --- legacy message sets ------------------------------------------------------------------------
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrappers_round_trip_with_their_offset_rules(codec: Compression, magic: int) -> None:
    messages = [(40, 1_000, b"a", b"1"), (41, 1_005, None, b"2"), (42, 1_003, b"c", None)]
    wrapper = build_legacy_wrapper(messages, magic=magic, compression=codec)
    batch = LegacyBatch.parse(wrapper)
    assert batch.is_valid and (batch.base_offset, batch.last_offset) == (40, 42)
    records = batch.records()
    assert [(r.offset, r.key, r.value) for r in records] == [(o, k, v) for o, _, k, v in messages]
    if magic == 1:
        assert batch.max_timestamp == 1_005
        assert [r.timestamp for r in records] == [1_000, 1_005, 1_003]
    else:
        assert {r.timestamp for r in records} == {-1}
        assert {r.timestamp_type for r in records} == {TimestampType.NO_TIMESTAMP_TYPE}


def test_log_append_time_wrapper_gives_inner_messages_its_timestamp() -> None:
    wrapper = build_legacy_wrapper(
        [(7, 1, b"a", b"1"), (8, 2, b"b", b"2")],
        magic=1,
        compression=Compression.GZIP,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=5_000,
    )
    records = LegacyBatch.parse(wrapper).records()
    assert [(r.timestamp, r.timestamp_type.label) for r in records] == [
        (5_000, "LOG_APPEND_TIME")
    ] * 2


def test_v1_wrapper_offset_below_its_last_inner_offset_is_invalid() -> None:
    wrapper = bytearray(
        build_legacy_wrapper(
            [(0, 1, b"a", b"1"), (5, 2, b"b", b"2")], magic=1, compression=Compression.GZIP
        )
    )
    struct.pack_into(">q", wrapper, 0, 3)  # inner offsets are 0 and 5
    with pytest.raises(KafkaFormatError, match="less than the last inner message offset"):
        LegacyBatch.parse(bytes(wrapper)).records()


# --- control records ----------------------------------------------------------------------------
def test_kraft_control_records_round_trip_through_a_control_batch() -> None:
    voter = Voter(1, uuid.UUID(int=7), (Endpoint("CONTROLLER", "host-1", 9093),), 0, 1)
    values = [
        SnapshotHeaderRecord(0, 1_700_000_000_000),
        LeaderChangeMessage(0, 2, (1, 2, 3), (2, 3)),
        KRaftVersionRecord(0, 1),
        VotersRecord(0, (voter,)),
        SnapshotFooterRecord(0),
    ]
    data = build_control_batch(values, initial_offset=0, timestamp=55, leader_epoch=4)
    batch = RecordBatch.parse(data)
    assert batch.is_control and not batch.is_transactional and batch.producer_id == -1
    decoded = [parse_control_record(r.key, r.value) for r in batch.records()]
    assert [c.value for c in decoded] == values
    assert [c.type for c in decoded] == [
        ControlRecordType.SNAPSHOT_HEADER,
        ControlRecordType.LEADER_CHANGE,
        ControlRecordType.KRAFT_VERSION,
        ControlRecordType.KRAFT_VOTERS,
        ControlRecordType.SNAPSHOT_FOOTER,
    ]
    # SnapshotHeaderRecord v0: int16, int64, empty tagged fields
    assert batch.records()[0].value == struct.pack(">hq", 0, 1_700_000_000_000) + b"\x00"


def test_control_records_of_a_batch_name_the_batch_when_a_value_is_bad() -> None:
    marker = build_batch(
        [NewRecord(control_key(ControlRecordType.ABORT), b"\x00\x00\x00", 1)],
        producer_id=3,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    batch = RecordBatch.parse(marker, source="5.log", position=300)
    with pytest.raises(KafkaFormatError) as raised:
        control_records(batch)
    assert str(raised.value).startswith("5.log: byte 300: record[0].control.value")
    assert control_records(RecordBatch.parse(_batch(b"v"))) == []


def test_unknown_control_types_are_kept_and_short_keys_refused() -> None:
    unknown = parse_control_record(struct.pack(">hh", 0, 42), b"whatever")
    assert (unknown.type, unknown.value) == (ControlRecordType.UNKNOWN, None)
    with pytest.raises(KafkaFormatError, match="at least 4 bytes"):
        parse_control_record(b"\x00\x00", b"")
    with pytest.raises(KafkaFormatError, match="at least 6"):
        parse_control_record(control_key(ControlRecordType.COMMIT), b"\x00\x00")


def test_varint_sizes_match_their_encodings() -> None:
    for value in (0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31)):
        assert size_of_varint(value) == len(write_varint(value))
    for value in (0, -1, 2**40, 2**63 - 1, -(2**63)):
        assert size_of_varlong(value) == len(write_varlong(value))
