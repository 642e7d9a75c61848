"""Kafka's on-disk record formats: read and write the bytes of ``.log`` segment files.

Message format v2 record batches (:mod:`kafka_format.batch`), magic 0/1 message sets
(:mod:`kafka_format.legacy`), control records (:mod:`kafka_format.control`), the five codecs
with Kafka's framing (:mod:`kafka_format.compression`), varints and checksums, and segment
reading with Kafka's recovery rules (:mod:`kafka_format.segment`). Every failure on bad bytes is
a :class:`KafkaFormatError` naming the file, byte position and field.

A segment of two batches, read back with positions, then recovered after losing its tail:

>>> first = build_batch([NewRecord(b"user-1", b"clicked", timestamp=1_000)],
...                     base_offset=0, partition_leader_epoch=4)
>>> second = build_batch([NewRecord(b"user-2", b"left", timestamp=1_500),
...                       NewRecord(None, b"tick", timestamp=1_700)],
...                      base_offset=1, partition_leader_epoch=4, compression=Compression.GZIP)
>>> segment = first + second
>>> [(b.position, b.base_offset, b.last_offset, b.compression.label)
...  for b in iter_batches(segment, source="00000000000000000000.log")]
[(0, 0, 0, 'none'), (81, 1, 2, 'gzip')]
>>> [(r.offset, r.key, r.value) for r in RecordBatch.parse(second).records()]
[(1, b'user-2', b'left'), (2, None, b'tick')]
>>> recovery = recover_segment(segment[:-5], source="00000000000000000000.log")
>>> [b.base_offset for b in recovery.batches], recovery.valid_bytes, recovery.truncated_bytes
([0], 81, 105)
>>> print(recovery.describe())
Truncated 105 invalid bytes at the end of segment 00000000000000000000.log during recovery
"""

from __future__ import annotations

from kafka_format.batch import (
    BATCH_HEADER_SIZE,
    Record,
    RecordBatch,
    build_batch,
    build_empty_batch,
    increment_sequence,
    set_last_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from kafka_format.checksums import crc32, crc32c
from kafka_format.compression import Compression, compress, decompress
from kafka_format.control import (
    ControlRecord,
    ControlRecordType,
    EndTransactionMarker,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
    build_control_batch,
    build_end_txn_marker_batch,
    control_records,
    parse_control_record,
)
from kafka_format.errors import KafkaFormatError
from kafka_format.legacy import LegacyBatch, LegacyRecord, build_legacy_entry, build_legacy_wrapper
from kafka_format.model import Header, NewRecord, TimestampType
from kafka_format.segment import (
    Batch,
    Recovery,
    SegmentScan,
    batch_headers,
    iter_batches,
    iter_records,
    read_segment_file,
    recover_segment,
    scan_segment,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "Batch",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "EndTransactionMarker",
    "Header",
    "KRaftVersionRecord",
    "KafkaFormatError",
    "LeaderChangeMessage",
    "LegacyBatch",
    "LegacyRecord",
    "NewRecord",
    "Record",
    "RecordBatch",
    "Recovery",
    "SegmentScan",
    "SnapshotFooterRecord",
    "SnapshotHeaderRecord",
    "TimestampType",
    "VotersRecord",
    "batch_headers",
    "build_batch",
    "build_control_batch",
    "build_empty_batch",
    "build_end_txn_marker_batch",
    "build_legacy_entry",
    "build_legacy_wrapper",
    "compress",
    "control_records",
    "crc32",
    "crc32c",
    "decompress",
    "increment_sequence",
    "iter_batches",
    "iter_records",
    "parse_control_record",
    "read_segment_file",
    "recover_segment",
    "scan_segment",
    "set_last_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
]
