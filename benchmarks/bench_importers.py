"""Importer throughput on a large ``__consumer_offsets`` copy: ``--from segments`` (the bytes)
against ``--from dump-log`` (kafka-dump-log's text of the same records).

A synthetic partition directory is written to a temporary directory: 100 MiB segments (Kafka's
default for the offsets topic) holding, as on a real cluster, mostly offset commits (batches of
1-24 partitions, one per commit request) with, every few hundred batches, a classic group's
new generation (GroupMetadataValue v3, 12 members with ConsumerProtocol subscription and
assignment bytes) or a KIP-848 group's epoch (member, target and current assignment records).
Commit batches are encoded once into a pool and written with their base offsets patched (the
base offset is outside the CRC), so building a gigabyte takes seconds.

The segments importer reads the whole set. The dump-log text of a gigabyte would be several
gigabytes; the text importer runs on the text of the first ``--text-mb`` megabytes of segments
(rendered here exactly as ``kafka-dump-log.sh --offsets-decoder`` prints records) and its rate is
extrapolated to the whole set; both rates are given in segment megabytes per second.

    python benchmarks/bench_importers.py                 # 1 GiB of segments, text of 64 MB
    python benchmarks/bench_importers.py --size-mb 200 --text-mb 20
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from assignors.model import TopicPartition
from assignors.protocol.wire import (
    MemberAssignment,
    Subscription,
    assignment_to_json,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription_to_json,
)
from assignors.traces.importers import import_dump_log, import_segments, segment_files
from assignors.traces.importers.segments import (
    _consumer_group_value,
    _group_metadata,
    _key,
    _Reader,
)
from kafka_format import NewRecord, build_batch, iter_batches
from kafka_format.varint import write_unsigned_varint as uvarint

SEGMENT_BYTES = 100 * 1024 * 1024
T0 = 1767607200000
MB = 1_000_000


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def cstring(v: str | None) -> bytes:
    return uvarint(0) if v is None else uvarint(len(v.encode()) + 1) + v.encode()


def carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


# ---------------------------------------------------------------------------------------------
# synthetic history


def commit_batch(rng: random.Random, group: str, topics: list[str], when: int) -> bytes:
    topic = rng.choice(topics)
    count = rng.randint(1, 24)
    records = []
    for partition in range(count):
        key = i16(1) + string(group) + string(topic) + i32(partition)
        value = i16(3) + i64(rng.randrange(10**9)) + i32(7) + string("") + i64(when)
        records.append(NewRecord(key, value, timestamp=when))
    return build_batch(records, base_offset=0)


def classic_generation(group: str, topic: str, generation: int, when: int) -> bytes:
    members = 12
    body = b""
    for index in range(members):
        member = f"consumer-{group}-{index}-{generation:08d}"
        partitions = tuple(TopicPartition(topic, p) for p in range(index, 48, members))
        subscription = encode_subscription(Subscription((topic,), None, (), generation, None, 3))
        assignment = encode_assignment(MemberAssignment(partitions, None, 3))
        body += (
            string(member) + string(None) + string("client") + string("/10.0.0.1")
            + i32(300000) + i32(45000) + i32(len(subscription)) + subscription
            + i32(len(assignment)) + assignment
        )  # fmt: skip
    value = (
        i16(3) + string("consumer") + i32(generation) + string("range")
        + string(f"consumer-{group}-0-{generation:08d}") + i64(when) + i32(members) + body
    )  # fmt: skip
    key = i16(2) + string(group)
    return build_batch([NewRecord(key, value, timestamp=when)], base_offset=0)


TOPIC_ID = bytes(range(16))


def kip848_epoch(group: str, epoch: int, when: int) -> bytes:
    def key(kind: int, member: str | None = None) -> bytes:
        return i16(kind) + string(group) + (b"" if member is None else string(member))

    tags = uvarint(0)
    records = [
        (key(4), i16(0) + carray([TOPIC_ID + cstring("orders") + i32(8) + carray([]) + tags])
         + tags),
        (key(3), i16(0) + i32(epoch) + tags),
    ]  # fmt: skip
    members = [f"m-{index}" for index in range(4)]
    for index, member in enumerate(members):
        records.append(
            (
                key(5, member),
                i16(0) + cstring(None) + cstring(None) + cstring("c") + cstring("/h")
                + carray([cstring("orders")]) + cstring(None) + i32(300000)
                + cstring("uniform") + tags,
            )
        )  # fmt: skip
        partitions = carray([i32(p) for p in range(index, 8, 4)])
        records.append((key(7, member), i16(0) + carray([TOPIC_ID + partitions + tags]) + tags))
    records.append((key(6), i16(0) + i32(epoch) + tags))
    for member in members:
        records.append(
            (
                key(8, member),
                i16(0) + i32(epoch) + i32(epoch - 1) + b"\0" + carray([]) + carray([]) + tags,
            )
        )
    return build_batch([NewRecord(k, v, timestamp=when) for k, v in records], base_offset=0)


def build_segments(directory: Path, size: int, seed: int = 7, pool_size: int = 4000) -> list[Path]:
    """``size`` bytes of segments (100 MiB each) in ``directory/__consumer_offsets-0``, the
    commits drawn from a pool of ``pool_size`` distinct batches."""
    rng = random.Random(seed)
    groups = [f"group-{index:04d}" for index in range(400)]
    topics = [f"topic-{index:03d}" for index in range(60)]
    pool = [commit_batch(rng, rng.choice(groups), topics, T0 + i) for i in range(pool_size)]
    partition = directory / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    classic = groups[:300]
    consumer = groups[300:]
    generations = dict.fromkeys(groups, 0)
    written = 0
    offset = 0
    files = []
    while written < size:
        path = partition / f"{offset:020d}.log"
        chunks = []
        segment_size = 0
        while segment_size < min(SEGMENT_BYTES, size - written):
            if rng.random() < 0.004:
                group = rng.choice(classic + consumer)
                generations[group] += 1
                when = T0 + offset
                batch = (
                    classic_generation(group, rng.choice(topics), generations[group], when)
                    if group in classic
                    else kip848_epoch(group, generations[group], when)
                )
            else:
                batch = pool[rng.randrange(len(pool))]
            patched = bytearray(batch)
            struct.pack_into(">q", patched, 0, offset)
            count = struct.unpack_from(">i", patched, 57)[0]
            offset += count
            chunks.append(bytes(patched))
            segment_size += len(patched)
        path.write_bytes(b"".join(chunks))
        files.append(path)
        written += segment_size
    return files


# ---------------------------------------------------------------------------------------------
# kafka-dump-log --offsets-decoder text of the same records


def _fail(message: str, field: str, value: object, at: int | None) -> Exception:
    return ValueError(f"{field}: {message}")


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {name: _jsonable(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value


def dump_log_text(data: bytes, name: str) -> str:
    lines = [f"Dumping {name}", "Log starting offset: 0"]
    for batch in iter_batches(data):
        lines.append(
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: "
            f"{batch.record_count} baseSequence: -1 lastSequence: -1 producerId: -1 "
            "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: {batch.position} CreateTime: "
            f"{batch.max_timestamp} size: {batch.size_in_bytes} magic: 2 compresscodec: none "
            f"crc: {batch.crc_stored} isvalid: true"
        )
        for record in batch.records():
            assert record.key is not None and record.value is not None
            kind = struct.unpack_from(">h", record.key)[0]
            reader = _Reader(record.key, None, _fail)  # type: ignore[arg-type]
            reader.at = 2
            key = _key(reader, kind)
            value_reader = _Reader(record.value, None, _fail)  # type: ignore[arg-type]
            version = value_reader.int16("version")
            if kind == 1:
                value: dict[str, Any] = {
                    "offset": value_reader.int64("offset"),
                    "leaderEpoch": value_reader.int32("leaderEpoch"),
                    "metadata": value_reader.string("metadata", compact=False),
                    "commitTimestamp": value_reader.int64("commitTimestamp"),
                }
            elif kind == 2:
                value = _group_metadata(value_reader, version)
                for member in value["members"]:
                    member["subscription"] = subscription_to_json(
                        decode_subscription(member["subscription"])
                    )
                    member["assignment"] = assignment_to_json(
                        decode_assignment(member["assignment"])
                    )
            else:
                value = _consumer_group_value(value_reader, kind)
            lines.append(
                f"| offset: {record.offset} CreateTime: {record.timestamp} keySize: "
                f"{len(record.key)} valueSize: {len(record.value)} sequence: -1 headerKeys: [] "
                f"key: {_json({'type': str(kind), 'data': key})} payload: "
                f"{_json({'version': str(version), 'data': _jsonable(value)})}"
            )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def timed(action: Any) -> tuple[Any, float, float]:
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        return result, time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="segment set size (MiB)")
    parser.add_argument("--text-mb", type=int, default=64, help="segment MB rendered as text")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-importers-") as temporary:
        directory = Path(temporary)
        started = time.perf_counter()
        files = build_segments(directory, arguments.size_mb * 1024 * 1024)
        total = sum(path.stat().st_size for path in files)
        print(
            f"built {len(files)} segments, {total / MB:,.0f} MB, in "
            f"{time.perf_counter() - started:.1f} s"
        )

        def segments() -> Any:
            return import_segments(
                (str(path), path.read_bytes()) for path in segment_files([directory])
            )

        result, wall, cpu = timed(segments)
        print(
            f"segments: {total / MB:,.0f} MB in {wall:.1f} s wall, {cpu:.1f} s CPU: "
            f"{total / MB / wall:,.1f} MB/s; {len(result.trace_ids())} traces, "
            f"{len(result.rows)} generations"
        )

        # the text importer on the text of the first --text-mb MB of segments
        sample = files[0].read_bytes()
        batches = list(iter_batches(sample))
        limit = arguments.text_mb * MB
        end = next(
            (
                b.position + b.size_in_bytes
                for b in batches
                if b.position + b.size_in_bytes >= limit
            ),
            len(sample),
        )
        text = dump_log_text(sample[:end], files[0].name)
        text_result, text_wall, text_cpu = timed(
            lambda: import_dump_log([("dump.txt", text.splitlines())])
        )
        segment_result, sample_wall, _ = timed(
            lambda: import_segments([("sample.log", sample[:end])])
        )
        assert text_result.rows == segment_result.rows, "the two importers disagree"
        rate = end / MB / text_wall
        print(
            f"dump-log: text of {end / MB:,.0f} MB of segments ({len(text) / MB:,.0f} MB of "
            f"text, {len(text_result.rows)} generations, same rows as the segments importer) "
            f"in {text_wall:.1f} s wall, {text_cpu:.1f} s CPU: {rate:,.1f} segment MB/s "
            f"({len(text) / MB / text_wall:,.1f} text MB/s); extrapolated to the whole set: "
            f"{total / MB / rate:,.0f} s"
        )
        print(
            f"segments importer on the same sample: {sample_wall:.2f} s "
            f"({end / MB / sample_wall:,.1f} MB/s)"
        )


if __name__ == "__main__":
    main()
