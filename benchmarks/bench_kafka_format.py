"""Record-batch decoding throughput: MB of segment per second on one core, ktk against
kafka-python in the same run.

Segments of uncompressed message format v2 batches (seeded, realistic: 16-byte keys, JSON-ish
values of 60-200 bytes, one header on every fourth record), in two shapes: producer-sized
batches (~16 KiB, ``batch.size``) and small batches (~1 KiB, ``linger.ms=0`` traffic).

Measured, each the best of ``--repeat`` runs by CPU time:

- header-only: every batch's header fields, without touching records -- ktk's
  ``iter_batches`` (one frozen object per batch), ktk's ``batch_headers`` (a numpy structured
  array), and kafka-python's ``MemoryRecords.next_batch()`` reading the same fields;
- the same with every batch's CRC-32C checked;
- full decoding: every record's offset, timestamp, key, value and headers -- ktk's
  ``RecordBatch.records()`` against kafka-python's record iterator.

Every figure is checked before timing: both readers must see the same batches and records.

    python benchmarks/bench_kafka_format.py            # 64 MiB segments
    python benchmarks/bench_kafka_format.py --quick    # 8 MiB
"""

from __future__ import annotations

import argparse
import random
import struct
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from kafka.record import MemoryRecords

from kafka_format import (
    Header,
    NewRecord,
    RecordBatch,
    batch_headers,
    build_batch,
    crc32c,
    iter_batches,
)


def make_segment(target_bytes: int, batch_bytes: int, seed: int) -> bytes:
    """Uncompressed v2 batches of about ``batch_bytes`` each, ``target_bytes`` in all: 64
    distinct batches repeated with contiguous offsets (the base offset lies outside the CRC)."""
    rng = random.Random(seed)
    distinct = []
    for _ in range(64):
        records = []
        size = 61
        timestamp = 1_729_800_000_000 + rng.randrange(10**6)
        while size < batch_bytes:
            key = b"user-%011d" % rng.randrange(10**11)
            value = b'{"id":%d,"event":"%s","tags":[%s]}' % (
                rng.randrange(10**6),
                rng.choice([b"click", b"view", b"purchase", b"scroll"]),
                b",".join(b'"t%d"' % rng.randrange(100) for _ in range(rng.randrange(20))),
            )
            headers = (
                (Header.of("trace-id", b"%016x" % rng.getrandbits(64)),)
                if rng.random() < 0.25
                else ()
            )
            timestamp += rng.randrange(50)
            records.append(NewRecord(key, value, timestamp, headers))
            size += len(key) + len(value) + 12 + (34 if headers else 0)
        distinct.append(build_batch(records, partition_leader_epoch=3))
    out = bytearray()
    offset = 0
    while len(out) < target_bytes:
        batch = bytearray(distinct[len(out) % len(distinct)])
        struct.pack_into(">q", batch, 0, offset)
        offset += struct.unpack_from(">i", batch, 57)[0]
        out += batch
    return bytes(out)


def best_seconds(action: Callable[[], Any], repeat: int) -> tuple[float, float]:
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu


# --- the readers ---------------------------------------------------------------------------------
def ktk_headers(segment: bytes) -> int:
    total = 0
    for batch in iter_batches(segment):
        total += batch.record_count + batch.last_offset + batch.max_timestamp + batch.producer_id
    return total


def ktk_headers_crc(segment: bytes) -> int:
    total = 0
    for batch in iter_batches(segment):
        if not batch.is_valid:
            raise AssertionError(batch.position)
        total += batch.record_count
    return total


def ktk_table(segment: bytes) -> int:
    _, headers = batch_headers(segment)
    return int(headers["record_count"].sum())


def ktk_table_crc(segment: bytes) -> int:
    positions, headers = batch_headers(segment)
    lengths = headers["batch_length"].astype("int64") + 12
    for position, length, crc in zip(
        positions.tolist(), lengths.tolist(), headers["crc"].tolist(), strict=True
    ):
        if crc32c(segment[position + 21 : position + length]) != crc:
            raise AssertionError(position)
    return int(headers["record_count"].sum())


def peer_headers(segment: bytes, validate: bool = False) -> int:
    records = MemoryRecords(segment)
    total = 0
    while (batch := records.next_batch()) is not None:
        if validate and not batch.validate_crc():
            raise AssertionError("crc")
        total += batch.records_count + batch.last_offset + batch.max_timestamp + batch.producer_id
    return total


def peer_headers_crc(segment: bytes) -> int:
    return peer_headers(segment, validate=True)


def ktk_records(segment: bytes) -> int:
    count = 0
    for batch in iter_batches(segment):
        assert isinstance(batch, RecordBatch)
        for record in batch.records():
            count += len(record.value or b"") + len(record.headers)
    return count


def peer_records(segment: bytes) -> int:
    records = MemoryRecords(segment)
    count = 0
    while (batch := records.next_batch()) is not None:
        for record in batch:
            count += len(record.value or b"") + len(record.headers)
    return count


def check_same(segment: bytes) -> None:
    ours = [
        (b.base_offset, b.last_offset, b.crc_stored, b.record_count) for b in iter_batches(segment)
    ]
    theirs = []
    records = MemoryRecords(segment)
    while (batch := records.next_batch()) is not None:
        theirs.append((batch.base_offset, batch.last_offset, batch.crc, batch.records_count))
    assert ours == theirs
    first = next(iter_batches(segment))
    assert isinstance(first, RecordBatch)
    peer_first = MemoryRecords(segment).next_batch()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in first.records()] == [
        (r.offset, r.timestamp, r.key, r.value) for r in peer_first
    ]
    assert ktk_headers(segment) == peer_headers(segment)
    assert ktk_records(segment) == peer_records(segment)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 MiB segments instead of 64 MiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    size = (8 if args.quick else 64) * 2**20
    for shape, batch_bytes in (("16 KiB batches", 16_384), ("1 KiB batches", 1_024)):
        segment = make_segment(size, batch_bytes, args.seed)
        check_same(segment)
        batches = sum(1 for _ in iter_batches(segment))
        print(f"\n{shape}: {len(segment) / 2**20:.0f} MiB, {batches:,} batches")
        print(f"{'measure':42} {'MB/s wall':>10} {'MB/s CPU':>10} {'vs peer':>8}")
        rows: list[tuple[str, list[tuple[str, Callable[[bytes], int]]]]] = [
            (
                "header-only",
                [
                    ("ktk iter_batches", ktk_headers),
                    ("ktk batch_headers (numpy)", ktk_table),
                    ("kafka-python next_batch", peer_headers),
                ],
            ),
            (
                "header-only + CRC-32C",
                [
                    ("ktk iter_batches + is_valid", ktk_headers_crc),
                    ("ktk batch_headers + crc32c", ktk_table_crc),
                    ("kafka-python validate_crc", peer_headers_crc),
                ],
            ),
            (
                "full record decoding",
                [
                    ("ktk records()", ktk_records),
                    ("kafka-python record iterator", peer_records),
                ],
            ),
        ]
        megabytes = len(segment) / 1e6
        for title, measures in rows:
            print(f"-- {title}")
            results = [
                (name, *best_seconds(partial(reader, segment), args.repeat))
                for name, reader in measures
            ]
            peer_cpu = results[-1][2]
            for name, wall, cpu in results:
                ratio = peer_cpu / cpu
                print(f"{name:42} {megabytes / wall:10.0f} {megabytes / cpu:10.0f} {ratio:7.1f}x")


if __name__ == "__main__":
    main()
