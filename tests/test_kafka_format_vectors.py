"""kafka_format against the segment files Kafka's own classes wrote (shared/vectors/record-batches).

Every ``.log`` must decode to exactly what Kafka's ``FileRecords`` read back (its ``.json``), the
cut tail and the corrupt batch must be found where Kafka finds them, and the writer must rebuild
Kafka's bytes from the builder calls in ``written_with``. A missing vector file fails the test.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka_dirs import record_batches_dir

from kafka_format import (
    Compression,
    ControlRecordType,
    KafkaFormatError,
    LegacyBatch,
    NewRecord,
    RecordBatch,
    TimestampType,
    build_batch,
    build_empty_batch,
    build_end_txn_marker_batch,
    crc32,
    crc32c,
    iter_batches,
    iter_records,
    parse_control_record,
    read_segment_file,
    recover_segment,
    scan_segment,
    set_last_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from kafka_format.model import Header
from kafka_format.varint import (
    read_unsigned_varint,
    read_varint,
    read_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)

# The 18 files the vector set documents; each must be present (a missing one fails).
EXPECTED_FILES = [
    "v2-basic",
    "v2-log-append-time",
    "v2-record-shapes",
    "v2-idempotent",
    "v2-transactions",
    "v2-gzip",
    "v2-lz4",
    "v2-snappy",
    "v2-zstd",
    "v2-large-record",
    "v2-compacted",
    "v2-edge",
    "v2-broker-assigned",
    "v0-message-set",
    "v1-message-set",
    "mixed-magic",
    "v2-truncated-tail",
    "v2-corrupt-crc",
]


def _vector(name: str) -> tuple[bytes, dict[str, Any]]:
    directory = record_batches_dir()
    log = directory / f"{name}.log"
    description = directory / f"{name}.json"
    if not log.is_file() or not description.is_file():
        pytest.fail(f"vector {name} missing in {directory}")
    return log.read_bytes(), json.loads(description.read_text())


def _bytes_fields(prefix: str, data: bytes | None) -> dict[str, Any]:
    fields: dict[str, Any] = {f"{prefix}_size": -1 if data is None else len(data)}
    if data is not None and len(data) > 2048:
        fields[f"{prefix}_len"] = len(data)
        fields[f"{prefix}_sha256"] = hashlib.sha256(data).hexdigest()
        fields[f"{prefix}_head_hex"] = data[:32].hex()
        fields[f"{prefix}_tail_hex"] = data[-32:].hex()
    else:
        fields[f"{prefix}_hex"] = None if data is None else data.hex()
    return fields


def describe_record(record: Any, batch: Any) -> dict[str, Any]:
    """A decoded record in the vector's words."""
    out: dict[str, Any] = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "size_in_bytes": record.size_in_bytes,
        "attributes": record.attributes,
    }
    if batch.magic >= 2:
        out["sequence"] = record.sequence
    else:
        out.update(
            magic=record.magic,
            timestamp_type=record.timestamp_type.label,
            crc_stored=record.crc_stored,
            crc_computed=record.crc_computed,
            is_valid=record.is_valid,
        )
    out.update(_bytes_fields("key", record.key))
    out.update(_bytes_fields("value", record.value))
    if batch.magic >= 2:
        out["headers"] = [
            [h.key_text, None if h.value is None else h.value.hex()] for h in record.headers
        ]
        if batch.is_control:
            control = parse_control_record(record.key, record.value)
            described: dict[str, Any] = {
                "key_version": control.key_version,
                "type": control.type.name,
                "type_id": control.type_id,
            }
            if control.type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                assert control.value is not None
                described["value_version"] = control.value.version
                described["coordinator_epoch"] = control.value.coordinator_epoch  # type: ignore[union-attr]
            out["control"] = described
    return out


def describe_batch(batch: Any) -> dict[str, Any]:
    """A batch in the vector's words (``kafka_read.batches[i]``)."""
    return {
        "position": batch.position,
        "size_in_bytes": batch.size_in_bytes,
        "magic": batch.magic,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "next_offset": batch.next_offset,
        "partition_leader_epoch": batch.partition_leader_epoch,
        "crc_stored": batch.crc_stored,
        "crc_computed": batch.crc_computed,
        "is_valid": batch.is_valid,
        "attributes": {
            "raw": batch.attributes,
            "compression": batch.compression.label,
            "compression_id": batch.compression_id,
            "timestamp_type": batch.timestamp_type.label,
            "is_transactional": batch.is_transactional,
            "is_control_batch": batch.is_control,
            "has_delete_horizon": batch.has_delete_horizon,
        },
        "base_timestamp": batch.base_timestamp,
        "max_timestamp": batch.max_timestamp,
        "delete_horizon_ms": batch.delete_horizon_ms,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "record_count": batch.record_count,
        "is_compressed": batch.is_compressed,
        "records": [describe_record(record, batch) for record in batch.records()],
    }


@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_every_vector_file_decodes_to_what_kafka_read(name: str) -> None:
    data, description = _vector(name)
    assert hashlib.sha256(data).hexdigest() == description["sha256"]
    scan = scan_segment(data, source=f"{name}.log")
    kafka_read = description["kafka_read"]
    assert scan.error is None
    assert len(scan.batches) == kafka_read["batch_count"]
    assert scan.trailing_bytes == kafka_read["trailing_bytes"]
    for batch, expected in zip(scan.batches, kafka_read["batches"], strict=True):
        assert describe_batch(batch) == expected, f"{name} batch at byte {expected['position']}"


def test_the_vector_index_lists_exactly_the_files_tested() -> None:
    index = json.loads((record_batches_dir() / "index.json").read_text())
    assert sorted(entry["file"] for entry in index["files"]) == sorted(
        f"{name}.log" for name in EXPECTED_FILES
    )


def test_cut_tail_is_ignored_by_reading_and_truncated_by_recovery_as_kafka_does() -> None:
    data, description = _vector("v2-truncated-tail")
    recovery = recover_segment(data, source="v2-truncated-tail.log")
    trailing = description["kafka_read"]["trailing_bytes"]
    assert recovery.error is None
    assert [b.position for b in recovery.batches] == [
        b["position"] for b in description["kafka_read"]["batches"]
    ]
    assert recovery.truncated_bytes == trailing > 0
    assert recovery.valid_bytes == len(data) - trailing
    assert f"Truncated {trailing} invalid bytes at the end of segment v2-truncated-tail.log" in (
        recovery.describe()
    )


def test_corrupt_batch_is_listed_invalid_and_stops_recovery_at_its_position() -> None:
    data, description = _vector("v2-corrupt-crc")
    altered = description["altered_after_writing"]["position"]
    scan = scan_segment(data, source="v2-corrupt-crc.log")
    expected_validity = [b["is_valid"] for b in description["kafka_read"]["batches"]]
    assert [b.is_valid for b in scan.batches] == expected_validity
    assert expected_validity.count(False) == 1
    bad = scan.invalid_batches[0]
    assert bad.position <= altered < bad.position + bad.size_in_bytes
    recovery = recover_segment(data, source="v2-corrupt-crc.log")
    assert recovery.valid_bytes == bad.position
    assert recovery.truncated_bytes == len(data) - bad.position
    assert isinstance(recovery.error, KafkaFormatError)
    assert recovery.error.position == bad.position + 17
    assert recovery.error.field == "batch.crc"
    assert str(recovery.error).startswith(
        f"v2-corrupt-crc.log: byte {bad.position + 17}: batch.crc"
    )
    assert f"stored crc = {bad.crc_stored}, computed crc = {bad.crc_computed}" in str(
        recovery.error
    )


def test_records_of_a_mixed_magic_segment_come_in_file_order_with_their_batches() -> None:
    data, description = _vector("mixed-magic")
    expected = [
        (batch["position"], batch["magic"], record["offset"])
        for batch in description["kafka_read"]["batches"]
        for record in batch["records"]
    ]
    assert [(b.position, b.magic, r.offset) for b, r in iter_records(data)] == expected
    assert {magic for _, magic, _ in expected} == {0, 1, 2}


def test_read_segment_file_names_the_file_in_positions(tmp_path: Path) -> None:
    data, _ = _vector("v2-basic")
    path = tmp_path / "00000000000000003108.log"
    path.write_bytes(data)
    scan = read_segment_file(path)
    assert scan.source == str(path)
    assert [b.position for b in scan.batches] == [b.position for b in iter_batches(data)]


# --- the writer reproduces Kafka's bytes --------------------------------------------------------
def _value(entry: dict[str, Any], part: str, original: Callable[[], Any]) -> bytes | None:
    """A key/value of an append: hex in the JSON, or (over 2 KiB) taken from the decoded .log
    record and checked against the recorded length and SHA-256."""
    if f"{part}_len" in entry:
        data = getattr(original(), part)
        assert len(data) == entry[f"{part}_len"]
        assert hashlib.sha256(data).hexdigest() == entry[f"{part}_sha256"]
        return bytes(data)
    text = entry[f"{part}_hex"]
    return None if text is None else bytes.fromhex(text)


def _rebuild(call: dict[str, Any], original: RecordBatch | None) -> bytes:
    """Kafka's builder call, replayed through kafka_format's writer."""
    if call["call"] == "MemoryRecords.withEndTransactionMarker":
        return build_end_txn_marker_batch(
            initial_offset=call["initial_offset"],
            timestamp=call["timestamp"],
            partition_leader_epoch=call["partition_leader_epoch"],
            producer_id=call["producer_id"],
            producer_epoch=call["producer_epoch"],
            control_type=ControlRecordType[call["marker"]["control_type"]],
            coordinator_epoch=call["marker"]["coordinator_epoch"],
        )
    if call["call"] == "DefaultRecordBatch.writeEmptyHeader":
        return build_empty_batch(
            base_offset=call["base_offset"],
            last_offset=call["last_offset"],
            producer_id=call["producer_id"],
            producer_epoch=call["producer_epoch"],
            base_sequence=call["base_sequence"],
            partition_leader_epoch=call["partition_leader_epoch"],
            timestamp=call["timestamp"],
            timestamp_type=TimestampType.from_name(call["timestamp_type"]),
            is_transactional=call["is_transactional"],
            is_control=call["is_control_record"],
        )

    def decoded(index: int) -> Callable[[], Any]:
        def record() -> Any:
            assert original is not None, "a large value needs the batch Kafka wrote"
            return original.records()[index]

        return record

    records = [
        NewRecord(
            key=_value(entry, "key", decoded(index)),
            value=_value(entry, "value", decoded(index)),
            timestamp=entry["timestamp"],
            headers=tuple(
                Header.of(key, None if value is None else bytes.fromhex(value))
                for key, value in entry["headers"]
            ),
            offset=entry.get("offset"),
        )
        for index, entry in enumerate(call["appends"])
    ]
    built = build_batch(
        records,
        base_offset=call["base_offset"],
        compression=Compression.from_name(call["compression"]["type"]),
        compression_level=call["compression"]["level"],
        timestamp_type=TimestampType.from_name(call["timestamp_type"]),
        log_append_time=call["log_append_time"],
        producer_id=call["producer_id"],
        producer_epoch=call["producer_epoch"],
        base_sequence=call["base_sequence"],
        is_transactional=call["is_transactional"],
        is_control=call["is_control_batch"],
        partition_leader_epoch=call["partition_leader_epoch"],
        delete_horizon_ms=call["delete_horizon_ms"],
        last_offset=call.get("override_last_offset"),
    )
    for edit in call.get("then_in_place", []):
        if edit["call"] == "setLastOffset":
            built = set_last_offset(built, edit["offset"])
        elif edit["call"] == "setPartitionLeaderEpoch":
            built = set_partition_leader_epoch(built, edit["epoch"])
        elif edit["call"] == "setMaxTimestamp":
            built = set_max_timestamp(
                built, TimestampType.from_name(edit["timestamp_type"]), edit["max_timestamp"]
            )
        else:  # pragma: no cover - a new kind of edit in the vectors
            pytest.fail(f"unknown in-place edit {edit['call']}")
    return built


V2_FILES = [name for name in EXPECTED_FILES if name.startswith("v2-")]


@pytest.mark.parametrize("name", V2_FILES)
def test_writer_rebuilds_kafkas_v2_batches_from_the_builder_calls(name: str) -> None:
    data, description = _vector(name)
    by_position = {b.position: b for b in iter_batches(data)}
    exact = 0
    for call in description["written_with"]:
        if call.get("magic", 2) != 2:
            continue
        position = call["file_position"]
        expected = data[position : position + call["bytes_appended"]]
        altered = description.get("altered_after_writing", {})
        if "position" in altered and position <= altered["position"] < position + len(expected):
            restored = bytearray(expected)
            restored[altered["position"] - position] = altered["old_byte"]
            expected = bytes(restored)
        if len(expected) < call["bytes_appended"]:
            # the batch truncateTo cut: what is left is a prefix of what the writer builds
            cut = _rebuild(call, None)
            assert cut[: len(expected)] == expected
            continue
        original = by_position[position]
        assert isinstance(original, RecordBatch)
        built = _rebuild(call, original)
        codec = call.get("compression", {"type": "none"})["type"]
        if codec in ("none", "gzip"):
            assert built == expected, f"{name}: batch at byte {position} differs"
            exact += 1
        else:
            # lz4/snappy/zstd: Kafka's framing and header; payload bytes depend on the library
            rebuilt = RecordBatch.parse(built)
            assert rebuilt.records_bytes() == original.records_bytes()
            # every header field but the length and CRC (they cover the payload)
            assert built[:8] == expected[:8] and built[12:17] == expected[12:17]
            assert built[21:61] == expected[21:61]
            assert rebuilt.records() == original.records()
    if name not in ("v2-lz4", "v2-snappy", "v2-zstd"):
        assert exact > 0


def test_every_uncompressed_and_gzip_v2_vector_batch_is_rebuilt_byte_for_byte() -> None:
    total = exact = 0
    for name in V2_FILES:
        data, description = _vector(name)
        batches = {b.position: b for b in iter_batches(data)}
        altered = description.get("altered_after_writing", {})
        for call in description["written_with"]:
            codec = call.get("compression", {"type": "none"})["type"]
            start, size = call["file_position"], call["bytes_appended"]
            if codec not in ("none", "gzip") or start + size > len(data):
                continue
            total += 1
            original = batches[start]
            assert isinstance(original, RecordBatch)
            expected = bytearray(data[start : start + size])
            if start <= altered.get("position", -1) < start + size:
                expected[altered["position"] - start] = altered["old_byte"]  # undo the flip
            exact += _rebuild(call, original) == bytes(expected)
    # The README counts 36 builder batches without large values or in-place edits; with those,
    # the transaction markers and the empty batch (51 in the public set), every one of them is
    # rebuilt exactly.
    assert total > 36
    assert exact == total


@pytest.mark.parametrize("name", ["v2-lz4", "v2-snappy", "v2-zstd"])
def test_library_compressed_payloads_carry_kafkas_framing(name: str) -> None:
    data, _ = _vector(name)
    for batch in iter_batches(data):
        assert isinstance(batch, RecordBatch)
        payload = bytes(batch.data[61:])
        if batch.compression is Compression.LZ4:
            assert payload[:7] == bytes.fromhex("04224d18604082")
            assert payload[-4:] == b"\x00\x00\x00\x00"
        elif batch.compression is Compression.SNAPPY:
            assert payload[:16] == b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001")
        else:
            assert payload[:4] == bytes.fromhex("28b52ffd")
        ours = build_batch(
            [NewRecord(r.key, r.value, r.timestamp, r.headers, r.offset) for r in batch.records()],
            base_offset=batch.base_offset,
            compression=batch.compression,
            partition_leader_epoch=batch.partition_leader_epoch,
        )
        if batch.compression is Compression.LZ4:
            assert ours[61:68] == payload[:7]
        else:
            assert ours[61:65] == payload[:4]
        assert RecordBatch.parse(ours).records_bytes() == batch.records_bytes()


def test_legacy_wrappers_decode_with_the_magic_zero_lz4_checksum_quirk() -> None:
    data, _ = _vector("v0-message-set")
    lz4 = [b for b in iter_batches(data) if b.compression is Compression.LZ4]
    assert lz4 and all(isinstance(b, LegacyBatch) for b in lz4)
    payload_start = 12 + 4 + 2 + 4 + 4  # entry overhead, crc, magic+attributes, key, value size
    frame = bytes(lz4[0].data[payload_start:])
    assert frame[:6] == bytes.fromhex("04224d186040")
    assert frame[6] != 0x82  # the checksum over magic + descriptor, not the standard one


# --- checksums and varints ----------------------------------------------------------------------
def test_crc32c_and_crc32_match_kafkas_vectors() -> None:
    lines = (record_batches_dir() / "crc32c.jsonl").read_text().splitlines()
    assert len(lines) == 300
    for line in lines:
        case = json.loads(line)
        data = bytes.fromhex(case["data_hex"])
        assert len(data) == case["length"]
        assert crc32c(data) == case["crc32c"]
        assert crc32(data) == case["crc32"]


def test_varints_encode_and_decode_as_kafkas_byte_utils() -> None:
    lines = (record_batches_dir() / "varint.jsonl").read_text().splitlines()
    kinds = set()
    for line in lines:
        case = json.loads(line)
        kind = case["kind"]
        kinds.add(kind)
        data = bytes.fromhex(case["hex"])
        if kind == "varint":
            assert write_varint(case["value"]) == data
            assert read_varint(data, 0) == (case["value"], len(data))
        elif kind == "varlong":
            assert write_varlong(case["value"]) == data
            assert read_varlong(data, 0) == (case["value"], len(data))
        elif kind == "unsigned_varint":
            assert write_unsigned_varint(case["value"]) == data
            value, end = read_unsigned_varint(data, 0)
            assert (value, end) == (case["value"], len(data))
            assert value & 0xFFFFFFFF == case["value_unsigned"]
        else:
            reader = read_varint if kind == "varint_decode" else read_varlong
            if "error" in case:
                assert "stream_error" in case
                with pytest.raises(KafkaFormatError):
                    reader(data, 0)
            else:
                assert reader(data, 0) == (case["value"], case["bytes_read"])
                assert (case["stream_value"], case["stream_bytes_read"]) == (
                    case["value"],
                    case["bytes_read"],
                )
    assert kinds == {"varint", "varlong", "unsigned_varint", "varint_decode", "varlong_decode"}
