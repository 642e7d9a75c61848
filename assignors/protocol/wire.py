"""ConsumerProtocol wire codecs: Subscription and Assignment v0-v3, sticky assignor user data.

These are the bytes a classic-protocol consumer puts in JoinGroup (subscription) and the leader
puts in SyncGroup (assignment); the coordinator stores both in each ``GroupMetadataValue`` of
``__consumer_offsets``. Everything is big-endian: an int16 version, then a non-flexible body where
a string is an int16 length + UTF-8 (-1 = null), bytes an int32 length (-1 = null) and an array an
int32 count. Fields are only ever appended: v1 adds owned partitions (KIP-429), v2 the generation
(KIP-792), v3 the rack (KIP-881). Assignment v1-v3 only follow the subscription's version.

A member subscribed to ``orders`` at version 0 sends 18 bytes: version, one topic, null user data.

>>> data = encode_subscription(Subscription(topics=("orders",), version=0))
>>> data.hex(" ")
'00 00 00 00 00 01 00 06 6f 72 64 65 72 73 ff ff ff ff'
>>> decode_subscription(data)
Subscription(topics=('orders',), user_data=None, owned_partitions=(), generation_id=-1, \
rack_id=None, version=0)

At version 3 it also says it owns ``orders-0`` from generation 4 and sits in rack ``a``:

>>> v3 = Subscription(("orders",), owned_partitions=(TopicPartition("orders", 0),),
...                   generation_id=4, rack_id="a")
>>> encode_subscription(v3)[18:].hex(" ")
'00 00 00 01 00 06 6f 72 64 65 72 73 00 00 00 01 00 00 00 00 00 00 00 04 00 01 61'
>>> decode_subscription(encode_subscription(v3)) == v3
True

Like the Java client, a decoder meeting a version above 3 reads the fields it knows and ignores
the rest. Bytes that cannot be decoded raise :class:`assignors.errors.InputError` naming the
field and the byte offset.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import repeat
from operator import itemgetter

from assignors.errors import InputError
from assignors.model import NO_GENERATION, TopicPartition

HIGHEST_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT32_RANGE = (-(2**31), 2**31 - 1)
# the int16 versions kafka-python's StickyAssignorUserData writes before Java's layout
STICKY_PREFIX_VERSIONS = (0, 1)


@dataclass(frozen=True, slots=True)
class Subscription:
    """ConsumerProtocolSubscription: what a member sends when it joins.

    ``owned_partitions`` (v1+) keep their order on the wire; ``generation_id`` (v2+) is the
    generation in which they were owned; ``rack_id`` (v3+) is ``client.rack``. Fields above
    ``version`` are not written (as in Kafka, where they are ignorable).
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    version: int = HIGHEST_VERSION

    def at_version(self) -> Subscription:
        """This subscription as it reads back after a round trip at its version."""
        kept = self
        if self.version < 1:
            kept = replace(kept, owned_partitions=())
        if self.version < 2:
            kept = replace(kept, generation_id=NO_GENERATION)
        if self.version < 3:
            kept = replace(kept, rack_id=None)
        return kept


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """ConsumerProtocolAssignment: what the leader hands one member in SyncGroup."""

    assigned_partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = HIGHEST_VERSION


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """The eager sticky assignor's user data: the member's previous assignment and, in V1
    (KIP-341), the generation it was assigned in (``None`` for V0).

    Java's StickyAssignor writes it without a version prefix (``version_prefix`` ``None``);
    kafka-python's StickyPartitionAssignor writes an int16 version (0 or 1) before the same
    layout, kept in ``version_prefix``. Partition numbers and the generation are int32s.
    """

    previous_assignment: tuple[TopicPartition, ...]
    generation: int | None = None
    version_prefix: int | None = None

    def __post_init__(self) -> None:
        entries = self.previous_assignment
        # C-level passes first (hundreds of thousands of entries); the slow scan only names
        # the bad entry
        if entries and (
            set(map(len, entries)) != {2}
            or set(map(type, map(itemgetter(0), entries))) != {str}
            or not set(map(type, numbers := tuple(map(itemgetter(-1), entries)))) <= {int}
            or min(numbers) < _INT32_RANGE[0]
            or max(numbers) > _INT32_RANGE[1]
        ):
            for index, entry in enumerate(entries):
                if len(entry) != 2 or type(entry[0]) is not str or not _is_int32(entry[1]):
                    raise InputError(
                        "must be (topic name, 32-bit partition number)",
                        field=f"previous_assignment[{index}]",
                        value=entry,
                    )
        if self.generation is not None and not _is_int32(self.generation):
            raise InputError(
                "generation must be a 32-bit integer or None",
                field="generation",
                value=self.generation,
            )
        if self.version_prefix not in STICKY_PREFIX_VERSIONS and self.version_prefix is not None:
            raise InputError(
                "version_prefix must be None (Java's layout), 0 or 1 (kafka-python's)",
                field="version_prefix",
                value=self.version_prefix,
            )


def _is_int32(value: object) -> bool:
    # type() rather than isinstance: true and false are not numbers on the wire
    return type(value) is int and _INT32_RANGE[0] <= value <= _INT32_RANGE[1]


class _Reader:
    """Sequential big-endian reads that name the field and byte offset when the data ends."""

    def __init__(self, data: bytes, message: str) -> None:
        self.data = bytes(data)
        self.offset = 0
        self.message = message

    @property
    def remaining(self) -> int:
        return len(self.data) - self.offset

    def fail(self, text: str, field: str, value: object = InputError._NO_VALUE) -> InputError:
        return InputError(
            f"{text} at byte offset {self.offset}", field=f"{self.message}.{field}", value=value
        )

    def take(self, size: int, field: str) -> bytes:
        if size > self.remaining:
            raise self.fail(f"truncated: {size} bytes needed, {self.remaining} left", field)
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def int16(self, field: str) -> int:
        return _INT16.unpack(self.take(2, field))[0]

    def int32(self, field: str) -> int:
        return _INT32.unpack(self.take(4, field))[0]

    def string(self, field: str, *, nullable: bool = False) -> str | None:
        start = self.offset
        length = self.int16(field)
        if length < 0:
            if nullable and length == -1:
                return None
            self.offset = start
            raise self.fail("string length must be >= 0", field, length)
        raw = self.take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            self.offset = start
            raise self.fail(f"string is not UTF-8 ({error.reason})", field, raw) from None

    def nullable_bytes(self, field: str) -> bytes | None:
        start = self.offset
        length = self.int32(field)
        if length == -1:
            return None
        if length < 0:
            self.offset = start
            raise self.fail("bytes length must be >= -1", field, length)
        return self.take(length, field)

    def array_length(self, field: str, element_size: int) -> int:
        """An array count, checked against the bytes left so a corrupt count fails early."""
        start = self.offset
        count = self.int32(field)
        if count < 0:
            self.offset = start
            raise self.fail("array count must be >= 0 (the field is not nullable)", field, count)
        if count * element_size > self.remaining:
            self.offset = start
            raise self.fail(
                f"array of {count} needs at least {count * element_size} bytes, "
                f"{self.remaining - 4} left",
                field,
                count,
            )
        return count

    def version(self) -> int:
        version = self.int16("version")
        if version < 0:
            self.offset -= 2
            raise self.fail("unsupported version", "version", version)
        return version

    def topic_partitions(self, field: str) -> tuple[TopicPartition, ...]:
        """``[]{Topic string, Partitions []int32}`` flattened in wire order. Well-formed bytes
        take a fast path with no field names; anything else is read again field by field, so
        the error names the field and the byte offset."""
        start = self.offset
        try:
            return self._topic_partitions_unnamed()
        except (struct.error, UnicodeDecodeError, ValueError):
            self.offset = start
            return self._topic_partitions_named(field)

    def _topic_partitions_unnamed(self) -> tuple[TopicPartition, ...]:
        data, offset, end = self.data, self.offset, len(self.data)
        (num_topics,) = _INT32.unpack_from(data, offset)
        offset += 4
        if num_topics < 0 or num_topics * 6 > end - offset:
            raise ValueError("bad topic count")
        topics: list[str] = []
        numbers: list[int] = []
        for _ in range(num_topics):
            (length,) = _INT16.unpack_from(data, offset)
            offset += 2
            if length < 0 or length > end - offset:
                raise ValueError("bad topic name length")
            topic = data[offset : offset + length].decode("utf-8")
            offset += length
            (count,) = _INT32.unpack_from(data, offset)
            offset += 4
            if count < 0 or count * 4 > end - offset:
                raise ValueError("bad partition count")
            topics.extend(repeat(topic, count))
            numbers.extend(struct.unpack_from(f">{count}i", data, offset))
            offset += 4 * count
        self.offset = offset
        # tuple.__new__ builds the NamedTuples in C, without their Python-level __new__
        return tuple(map(tuple.__new__, repeat(TopicPartition), zip(topics, numbers, strict=True)))

    def _topic_partitions_named(self, field: str) -> tuple[TopicPartition, ...]:
        partitions: list[TopicPartition] = []
        for topic_index in range(self.array_length(field, 6)):
            topic = self.string(f"{field}[{topic_index}].topic")
            assert topic is not None
            where = f"{field}[{topic_index}].partitions"
            count = self.array_length(where, 4)
            # array_length checked that the bytes are there: one unpack per topic
            numbers = struct.unpack(f">{count}i", self.take(4 * count, where))
            partitions.extend(
                map(tuple.__new__, repeat(TopicPartition), zip(repeat(topic), numbers))
            )
        return tuple(partitions)


class _Writer:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def int16(self, value: int) -> None:
        self.chunks.append(_INT16.pack(value))

    def int32(self, value: int, field: str) -> None:
        if not _INT32_RANGE[0] <= value <= _INT32_RANGE[1]:
            raise ValueError(f"{field} does not fit in an int32: {value}")
        self.chunks.append(_INT32.pack(value))

    def string(self, value: str | None, field: str) -> None:
        if value is None:
            self.int16(-1)
            return
        raw = value.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError(f"{field} is longer than 32767 bytes")
        self.int16(len(raw))
        self.chunks.append(raw)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1, "bytes length")
            return
        self.int32(len(value), "bytes length")
        self.chunks.append(bytes(value))

    def topic_partitions(self, partitions: Iterable[TopicPartition], field: str) -> None:
        """Consecutive partitions of one topic share an entry, so wire order round-trips."""
        runs: list[tuple[str, list[int]]] = []
        for topic, partition in partitions:
            if runs and runs[-1][0] == topic:
                runs[-1][1].append(partition)
            else:
                runs.append((topic, [partition]))
        self.int32(len(runs), field)
        for topic, numbers in runs:
            self.string(topic, f"{field}.topic")
            self.int32(len(numbers), field)
            for number in numbers:
                self.int32(number, f"{field}.partitions")

    def getvalue(self) -> bytes:
        return b"".join(self.chunks)


def _check_version(version: int, what: str) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"{what} version must be 0..{HIGHEST_VERSION}, got {version}")


def encode_subscription(subscription: Subscription) -> bytes:
    """Version-prefixed ConsumerProtocolSubscription bytes."""
    _check_version(subscription.version, "subscription")
    writer = _Writer()
    writer.int16(subscription.version)
    writer.int32(len(subscription.topics), "topics")
    for topic in subscription.topics:
        writer.string(topic, "topics")
    writer.nullable_bytes(subscription.user_data)
    if subscription.version >= 1:
        writer.topic_partitions(subscription.owned_partitions, "ownedPartitions")
    if subscription.version >= 2:
        writer.int32(subscription.generation_id, "generationId")
    if subscription.version >= 3:
        writer.string(subscription.rack_id, "rackId")
    return writer.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    """Parse version-prefixed ConsumerProtocolSubscription bytes (versions above 3 as 3)."""
    reader = _Reader(data, "subscription")
    version = reader.version()
    known = min(version, HIGHEST_VERSION)
    topics = tuple(
        str(reader.string(f"topics[{index}]")) for index in range(reader.array_length("topics", 2))
    )
    user_data = reader.nullable_bytes("userData")
    owned = reader.topic_partitions("ownedPartitions") if known >= 1 else ()
    generation = reader.int32("generationId") if known >= 2 else NO_GENERATION
    rack = reader.string("rackId", nullable=True) if known >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)


def encode_assignment(assignment: MemberAssignment) -> bytes:
    """Version-prefixed ConsumerProtocolAssignment bytes."""
    _check_version(assignment.version, "assignment")
    writer = _Writer()
    writer.int16(assignment.version)
    writer.topic_partitions(assignment.assigned_partitions, "assignedPartitions")
    writer.nullable_bytes(assignment.user_data)
    return writer.getvalue()


def decode_assignment(data: bytes) -> MemberAssignment:
    """Parse version-prefixed ConsumerProtocolAssignment bytes (versions above 3 as 3)."""
    reader = _Reader(data, "assignment")
    version = reader.version()
    partitions = reader.topic_partitions("assignedPartitions")
    user_data = reader.nullable_bytes("userData")
    return MemberAssignment(partitions, user_data, version)


def encode_sticky_user_data(user_data: StickyUserData) -> bytes:
    """StickyAssignor user data: V1 when ``generation`` is set, else V0; the int16 version
    prefix only when ``version_prefix`` is set (kafka-python's layout)."""
    writer = _Writer()
    if user_data.version_prefix is not None:
        writer.int16(user_data.version_prefix)
    writer.topic_partitions(user_data.previous_assignment, "previous_assignment")
    if user_data.generation is not None:
        writer.int32(user_data.generation, "generation")
    return writer.getvalue()


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    """Parse sticky assignor user data in either layout: kafka-python's (an int16 version 0 or
    1, then Java's layout) or Java's own, V1 when a generation follows the assignment, else V0
    (the Java assignor tries V1 and falls back to V0 the same way). The first layout that reads
    the bytes exactly wins, kafka-python's first; when neither does, the error is the one of
    Java's layout.

    >>> java_v1 = bytes.fromhex("00000001 0001 61 00000001 00000002 00000007")
    >>> decode_sticky_user_data(java_v1)
    StickyUserData(previous_assignment=(TopicPartition(topic='a', partition=2),), \
generation=7, version_prefix=None)
    >>> decode_sticky_user_data(bytes.fromhex("0001") + java_v1).version_prefix
    1
    """
    data = bytes(data)
    if data[:2] in (b"\x00\x00", b"\x00\x01"):
        try:
            return _read_sticky_user_data(_Reader(data, "sticky_user_data"), prefixed=True)
        except InputError:
            pass  # not kafka-python's layout: Java's own is far more common on the wire
    return _read_sticky_user_data(_Reader(data, "sticky_user_data"), prefixed=False)


def _read_sticky_user_data(reader: _Reader, *, prefixed: bool) -> StickyUserData:
    version_prefix = reader.int16("version") if prefixed else None
    previous = reader.topic_partitions("previous_assignment")
    generation = reader.int32("generation") if reader.remaining >= 4 else None
    if reader.remaining:
        raise reader.fail(f"{reader.remaining} unexpected trailing bytes", "generation")
    return StickyUserData(previous, generation, version_prefix)


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor user data: just the int32 generation."""
    writer = _Writer()
    writer.int32(generation, "generation")
    return writer.getvalue()


def decode_cooperative_user_data(data: bytes) -> int:
    reader = _Reader(data, "cooperative_user_data")
    return reader.int32("generation")


# Kafka's generated JsonConverters (kafka-dump-log --offsets-decoder prints these).


def _partitions_to_json(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = []
    for topic, partition in partitions:
        if runs and runs[-1]["topic"] == topic:
            numbers = runs[-1]["partitions"]
            assert isinstance(numbers, list)
            numbers.append(partition)
        else:
            runs.append({"topic": topic, "partitions": [partition]})
    return runs


def _bytes_to_json(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def subscription_to_json(subscription: Subscription) -> dict[str, object]:
    """The JSON Kafka's ConsumerProtocolSubscriptionJsonConverter writes (fields by version)."""
    node: dict[str, object] = {
        "topics": list(subscription.topics),
        "userData": _bytes_to_json(subscription.user_data),
    }
    if subscription.version >= 1:
        node["ownedPartitions"] = _partitions_to_json(subscription.owned_partitions)
    if subscription.version >= 2:
        node["generationId"] = subscription.generation_id
    if subscription.version >= 3:
        node["rackId"] = subscription.rack_id
    return node


def assignment_to_json(assignment: MemberAssignment) -> dict[str, object]:
    """The JSON Kafka's ConsumerProtocolAssignmentJsonConverter writes."""
    return {
        "assignedPartitions": _partitions_to_json(assignment.assigned_partitions),
        "userData": _bytes_to_json(assignment.user_data),
    }


def _json_partitions(node: object, field: str) -> tuple[TopicPartition, ...]:
    if not isinstance(node, list):
        raise InputError("expected a list of {topic, partitions}", field=field, value=node)
    partitions: list[TopicPartition] = []
    for index, entry in enumerate(node):
        where = f"{field}[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("topic"), str):
            raise InputError("expected {topic, partitions}", field=where, value=entry)
        numbers = entry.get("partitions")
        topic = entry["topic"]
        # type() rather than isinstance: true and false are not partition numbers
        made = (
            [TopicPartition(topic, number) for number in numbers if type(number) is int]
            if (isinstance(numbers, list))
            else []
        )
        if not isinstance(numbers, list) or len(made) != len(numbers):
            raise InputError(
                "partitions must be a list of integers", field=f"{where}.partitions", value=numbers
            )
        partitions.extend(made)
    return tuple(partitions)


def _json_bytes(node: object, field: str) -> bytes | None:
    if node is None:
        return None
    if not isinstance(node, str):
        raise InputError("expected base64 text or null", field=field, value=node)
    try:
        return base64.b64decode(node, validate=True)
    except ValueError:
        raise InputError("not valid base64", field=field, value=node) from None


def subscription_from_json(
    node: Mapping[str, object], version: int = HIGHEST_VERSION, field: str = "subscription"
) -> Subscription:
    """Read the JSON of ConsumerProtocolSubscriptionJsonConverter (missing fields default)."""
    topics = node.get("topics", [])
    if not isinstance(topics, list) or not all(isinstance(topic, str) for topic in topics):
        raise InputError("topics must be a list of names", field=f"{field}.topics", value=topics)
    generation = node.get("generationId", NO_GENERATION)
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise InputError(
            "generationId must be an integer", field=f"{field}.generationId", value=generation
        )
    rack = node.get("rackId")
    if rack is not None and not isinstance(rack, str):
        raise InputError("rackId must be text or null", field=f"{field}.rackId", value=rack)
    return Subscription(
        topics=tuple(topics),
        user_data=_json_bytes(node.get("userData"), f"{field}.userData"),
        owned_partitions=_json_partitions(
            node.get("ownedPartitions", []), f"{field}.ownedPartitions"
        ),
        generation_id=generation,
        rack_id=rack,
        version=version,
    )


def assignment_from_json(
    node: Mapping[str, object], version: int = HIGHEST_VERSION, field: str = "assignment"
) -> MemberAssignment:
    """Read the JSON of ConsumerProtocolAssignmentJsonConverter."""
    return MemberAssignment(
        assigned_partitions=_json_partitions(
            node.get("assignedPartitions", []), f"{field}.assignedPartitions"
        ),
        user_data=_json_bytes(node.get("userData"), f"{field}.userData"),
        version=version,
    )
