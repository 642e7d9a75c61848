"""Property tests of kafka_format: random batches round-trip, the CRC catches every single-byte
change it covers, and no byte string makes the reader raise anything but KafkaFormatError."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_dirs import record_batches_dir

from kafka_format import (
    Compression,
    Header,
    KafkaFormatError,
    LegacyBatch,
    NewRecord,
    RecordBatch,
    TimestampType,
    batch_headers,
    build_batch,
    decompress,
    iter_batches,
    parse_control_record,
    recover_segment,
    scan_segment,
)
from kafka_format.varint import read_unsigned_varint, read_varint, read_varlong

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

maybe_bytes = st.none() | st.binary(max_size=48)
headers = st.lists(st.builds(Header.of, st.text(max_size=8), maybe_bytes), max_size=3).map(tuple)


@st.composite
def batches(draw: Any) -> tuple[dict[str, Any], list[NewRecord]]:
    count = draw(st.integers(1, 8))
    with_timestamps = draw(st.booleans())
    explicit_offsets = draw(st.booleans())
    base_offset = draw(st.integers(0, 2**40))
    records = []
    offset = base_offset
    for _ in range(count):
        timestamp = draw(st.integers(0, 2**45)) if with_timestamps else -1
        record_offset = offset if explicit_offsets else None
        records.append(
            NewRecord(draw(maybe_bytes), draw(maybe_bytes), timestamp, draw(headers), record_offset)
        )
        offset += draw(st.integers(1, 1000)) if explicit_offsets else 1
    producer_id = draw(st.sampled_from([-1, draw(st.integers(0, 2**63 - 1))]))
    idempotent = producer_id >= 0
    fields: dict[str, Any] = {
        "base_offset": base_offset,
        "compression": draw(st.sampled_from(list(Compression))),
        "timestamp_type": draw(
            st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])
        ),
        "log_append_time": draw(st.integers(0, 2**45)),
        "producer_id": producer_id,
        "producer_epoch": draw(st.integers(0, 2**15 - 1)) if idempotent else -1,
        "base_sequence": draw(st.integers(0, 2**31 - 1)) if idempotent else -1,
        "is_transactional": idempotent and draw(st.booleans()),
        "partition_leader_epoch": draw(st.integers(-1, 2**31 - 1)),
        "delete_horizon_ms": draw(st.sampled_from([-1, draw(st.integers(0, 2**45))])),
    }
    if draw(st.booleans()):  # compaction kept the last offset past the last record
        fields["last_offset"] = offset - 1 + draw(st.integers(0, 50))
    return fields, records


@FUZZ
@given(batches())
def test_random_batches_round_trip_through_writer_and_reader(case: Any) -> None:
    fields, records = case
    data = build_batch(records, **fields)
    batch = RecordBatch.parse(data)
    assert batch.is_valid
    assert batch.size_in_bytes == len(data)
    assert (batch.base_offset, batch.record_count) == (fields["base_offset"], len(records))
    assert batch.compression is fields["compression"]
    assert batch.timestamp_type is fields["timestamp_type"]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        fields["producer_id"],
        fields["producer_epoch"],
        fields["base_sequence"],
    )
    assert batch.is_transactional == fields["is_transactional"]
    assert batch.partition_leader_epoch == fields["partition_leader_epoch"]
    decoded = batch.records()
    expected_offset = fields["base_offset"]
    for written, read in zip(records, decoded, strict=True):
        if written.offset is not None:
            expected_offset = written.offset
        assert read.offset == expected_offset
        assert (read.key, read.value, read.headers) == (written.key, written.value, written.headers)
        if fields["timestamp_type"] is TimestampType.LOG_APPEND_TIME:
            assert read.timestamp == fields["log_append_time"] == batch.max_timestamp
        else:
            assert read.timestamp == written.timestamp
        expected_offset += 1
    assert batch.last_offset == fields.get("last_offset", decoded[-1].offset)
    if fields["delete_horizon_ms"] >= 0:
        assert batch.delete_horizon_ms == batch.base_timestamp == fields["delete_horizon_ms"]
    else:
        assert batch.delete_horizon_ms is None
    if fields["timestamp_type"] is TimestampType.CREATE_TIME:
        assert batch.max_timestamp == max(r.timestamp for r in records)
    # a segment of the batch twice frames both at the right positions
    segment = data + data
    assert [b.position for b in iter_batches(segment)] == [0, len(data)]


@settings(max_examples=25, deadline=None)
@given(batches(), st.integers(1, 255))
def test_every_single_byte_change_in_the_crc_range_is_caught(case: Any, flip: int) -> None:
    fields, records = case
    data = build_batch(records, **fields)
    for position in range(21, len(data)):
        corrupted = bytearray(data)
        corrupted[position] ^= flip
        batch = RecordBatch.parse(bytes(corrupted))
        assert not batch.is_valid, f"change at byte {position} not caught"
        with pytest.raises(KafkaFormatError, match="Record is corrupt"):
            batch.ensure_valid()
    # bytes outside the CRC (base offset, leader epoch) are not covered, as in Kafka
    moved = bytearray(data)
    moved[3] ^= flip
    assert RecordBatch.parse(bytes(moved)).is_valid


def _read_everything(data: bytes) -> None:
    """Everything a tool does with a segment; only KafkaFormatError may escape."""
    scan = scan_segment(data, source="fuzz.log")
    for batch in scan.batches:
        _ = (batch.crc_computed, batch.is_valid, batch.last_offset, batch.max_timestamp)
        _ = (batch.timestamp_type, batch.last_sequence, batch.base_timestamp)
        try:
            _ = batch.base_offset
            records = batch.records()
        except KafkaFormatError:
            continue
        if isinstance(batch, RecordBatch) and batch.is_control:
            for record in records:
                with contextlib.suppress(KafkaFormatError):
                    parse_control_record(record.key, record.value)
    recover_segment(data, source="fuzz.log")
    with contextlib.suppress(KafkaFormatError):
        list(iter_batches(data))
    with contextlib.suppress(KafkaFormatError):
        batch_headers(data)


def _only_format_errors(action: Any, *args: Any) -> None:
    with contextlib.suppress(KafkaFormatError):
        action(*args)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_the_format_error(data: bytes) -> None:
    _read_everything(data)
    _only_format_errors(lambda: RecordBatch.parse(data).records())
    _only_format_errors(lambda: LegacyBatch.parse(data).records())
    for codec in Compression:
        _only_format_errors(decompress, codec, data)
        _only_format_errors(lambda codec=codec: decompress(codec, data, magic=0))
    for reader in (read_varint, read_varlong, read_unsigned_varint):
        _only_format_errors(reader, data, 0)
    _only_format_errors(parse_control_record, data[:4], data[4:])


def _vector_segments() -> bytes:
    directory = record_batches_dir()
    small = [p for p in sorted(directory.glob("*.log")) if p.stat().st_size < 50_000]
    return b"".join(p.read_bytes() for p in small if "truncated" not in p.name)


SEGMENTS = _vector_segments()


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, len(SEGMENTS) - 1), st.integers(0, 255)), min_size=1, max_size=4
    ),
    st.integers(0, len(SEGMENTS)),
    st.integers(0, 4_000),
)
def test_damaged_kafka_segments_raise_only_the_format_error(
    changes: list[tuple[int, int]], cut: int, window: int
) -> None:
    data = bytearray(SEGMENTS)
    for position, value in changes:
        data[position] = value
    start = max(0, cut - window)
    _read_everything(bytes(data[start:cut]) if cut > start else bytes(data))
