"""The iteration orders of Kafka's group coordinator, for reproducing its answers exactly.

The coordinator's uniform assignor iterates ``HashMap``s and ``HashSet``s (members by member id,
topics by topic id, a member's current assignment) and breaks heterogeneous ties by topic id.
A ``java.util.HashMap`` iterates bucket by bucket (bucket = ``(h ^ (h >>> 16)) & (capacity -
1)``), entries of one bucket in insertion order; resizing keeps that order. Treeified buckets
(eight or more colliding keys) are not modelled: :func:`hash_order` refuses them.

:func:`harness_order` gives the orders of the oracle harness (``shared/tools/java-oracle``,
``Harness.runServer``), which feeds the coordinator's classes the request's members and topics
through ``HashMap``s, with topic ids ``Uuid(0x6b746b, index + 1)`` in request order.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from assignors.model import TopicPartition
from assignors.uniform import IterationOrder

K = TypeVar("K")
MASK32 = 0xFFFFFFFF
HARNESS_TOPIC_MOST = 0x6B746B


def _int32(value: int) -> int:
    value &= MASK32
    return value - (1 << 32) if value >= 1 << 31 else value


def string_hash(text: str) -> int:
    """``String.hashCode`` (UTF-16 code units)."""
    units = text.encode("utf-16-be", "surrogatepass")
    hash_code = 0
    for position in range(0, len(units), 2):
        hash_code = (31 * hash_code + int.from_bytes(units[position : position + 2])) & MASK32
    return _int32(hash_code)


def uuid_hash(most: int, least: int) -> int:
    """``Uuid.hashCode``: the two halves of most ^ least, xored."""
    xor = (most ^ least) & ((1 << 64) - 1)
    return _int32((xor >> 32) ^ (xor & MASK32))


def uuid_from_string(text: str) -> tuple[int, int]:
    """``Uuid.fromString`` (URL-safe base64 of 16 bytes) as signed (most, least) halves."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    most, least = int.from_bytes(raw[:8], signed=True), int.from_bytes(raw[8:], signed=True)
    return most, least


def capacity_after_puts(size: int) -> int:
    """Table size of a default ``HashMap`` after ``size`` puts."""
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def capacity_of_copy(size: int) -> int:
    """Table size of ``new HashSet<>(collection)`` / ``new HashMap<>(map)`` of ``size``."""
    wanted = max(int(size / 0.75) + 1, 16)
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    return capacity


def hash_order(
    keys: Iterable[K], hashes: Iterable[int], capacity: int, *, at_head: bool = False
) -> list[K]:
    """Iteration order of a table of ``capacity`` holding ``keys`` inserted in the given order
    (``put`` appends to a bucket; ``computeIfAbsent`` (``at_head``) pushes onto its front)."""
    slotted = []
    per_bucket: dict[int, int] = {}
    for insertion, (key, hash_code) in enumerate(zip(keys, hashes, strict=True)):
        unsigned = hash_code & MASK32
        bucket = (unsigned ^ (unsigned >> 16)) & (capacity - 1)
        per_bucket[bucket] = per_bucket.get(bucket, 0) + 1
        if per_bucket[bucket] >= 8 and capacity >= 64:
            raise ValueError("treeified HashMap bucket: order not modelled")
        slotted.append((bucket, -insertion if at_head else insertion, key))
    return [key for _, _, key in sorted(slotted, key=lambda item: (item[0], item[1]))]


def harness_topic_hash(index: int) -> int:
    return uuid_hash(HARNESS_TOPIC_MOST, index + 1)


def owned_order(
    owned: Sequence[tuple[str, int]], topic_hash: Mapping[str, int]
) -> tuple[TopicPartition, ...]:
    """A current assignment built as the harness builds it (``HashMap<Uuid, HashSet<Integer>>``
    filled pair by pair with ``computeIfAbsent``), flattened in iteration order.

    ``computeIfAbsent`` grows the table lazily: at the start of a call, when the map already
    holds more than three quarters of its capacity (``put`` grows it right after an insert), and
    it puts a new key at the front of its bucket."""
    per_topic: dict[str, list[int]] = {}
    capacity = 16
    for topic, partition in owned:
        if len(per_topic) > capacity * 3 // 4:
            capacity *= 2
        partitions = per_topic.setdefault(topic, [])
        if partition not in partitions:
            partitions.append(partition)
    topics = hash_order(list(per_topic), [topic_hash[t] for t in per_topic], capacity, at_head=True)
    flat: list[TopicPartition] = []
    for topic in topics:
        partitions = per_topic[topic]
        ordered = hash_order(partitions, partitions, capacity_after_puts(len(partitions)))
        flat.extend(TopicPartition(topic, partition) for partition in ordered)
    return tuple(flat)


def harness_order(request: Mapping[str, Any]) -> IterationOrder:
    """The orders ``Harness.runServer`` makes the coordinator's assignors iterate in."""
    topics = [topic["name"] for topic in request["topics"]]
    counts = {topic["name"]: topic["partitions"] for topic in request["topics"]}
    topic_hash = {name: harness_topic_hash(index) for index, name in enumerate(topics)}
    members = request["members"]
    ids = [member["id"] for member in members]
    member_order = hash_order(ids, map(string_hash, ids), capacity_after_puts(len(ids)))
    by_id = {member["id"]: member for member in members}

    def subscribed(member: Mapping[str, Any]) -> list[str]:
        seen: list[str] = []
        for name in member["topics"]:
            if name in topic_hash and name not in seen:
                seen.append(name)
        return seen

    # the homogeneous builder copies the first member's subscribed-topic HashSet
    first = subscribed(by_id[member_order[0]]) if member_order else []
    source = hash_order(first, [topic_hash[t] for t in first], capacity_after_puts(len(first)))
    topic_order = hash_order(source, [topic_hash[t] for t in source], capacity_of_copy(len(source)))
    rest = [name for name in topics if name not in topic_order]
    owned = {}
    for member in members:
        pairs = [
            (topic, partition)
            for topic, partition in member.get("owned", ())
            if topic in counts and 0 <= partition < counts[topic]
        ]
        owned[member["id"]] = owned_order(pairs, topic_hash)
    return IterationOrder(tuple(member_order), tuple(topic_order + rest), tuple(topics), owned)
