"""ConsumerProtocol codecs: round trips at every version, Kafka's byte layout, decode errors."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.protocol.wire import (
    MemberAssignment,
    StickyUserData,
    Subscription,
    _Reader,
    assignment_from_json,
    assignment_to_json,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
    subscription_from_json,
    subscription_to_json,
)

# example timing varies on a loaded machine; the properties do not depend on it
relaxed = settings(deadline=None)

int32s = st.integers(-(2**31), 2**31 - 1)
names = st.text(max_size=12)
partition_lists = st.lists(st.builds(TopicPartition, names, int32s), max_size=8).map(tuple)
user_data = st.none() | st.binary(max_size=16)
versions = st.integers(0, 3)

subscriptions = st.builds(
    Subscription,
    topics=st.lists(names, max_size=5).map(tuple),
    user_data=user_data,
    owned_partitions=partition_lists,
    generation_id=int32s,
    rack_id=st.none() | names,
    version=versions,
)
assignments = st.builds(MemberAssignment, partition_lists, user_data, versions)


@relaxed
@given(subscriptions)
def test_subscription_round_trips_at_its_version(subscription: Subscription) -> None:
    assert decode_subscription(encode_subscription(subscription)) == subscription.at_version()


@relaxed
@given(subscriptions)
def test_subscription_bytes_are_stable_after_one_round_trip(subscription: Subscription) -> None:
    data = encode_subscription(subscription)
    assert encode_subscription(decode_subscription(data)) == data


@relaxed
@given(assignments)
def test_assignment_round_trips(assignment: MemberAssignment) -> None:
    assert decode_assignment(encode_assignment(assignment)) == assignment


@relaxed
@given(partition_lists, st.none() | int32s)
def test_sticky_user_data_round_trips_v0_and_v1(previous: tuple, generation: int | None) -> None:
    user = StickyUserData(previous, generation)
    assert decode_sticky_user_data(encode_sticky_user_data(user)) == user


@relaxed
@given(partition_lists, st.none() | int32s, st.sampled_from([0, 1]))
def test_sticky_user_data_round_trips_with_kafka_pythons_version_prefix(
    previous: tuple, generation: int | None, prefix: int
) -> None:
    user = StickyUserData(previous, generation, version_prefix=prefix)
    encoded = encode_sticky_user_data(user)
    assert encoded[:2] == bytes([0, prefix])
    assert decode_sticky_user_data(encoded) == user


def test_sticky_user_data_decoder_reads_java_and_kafka_python_layouts() -> None:
    # one topic "orders" with partitions 0 and 2, then generation 4
    java_v1 = bytes.fromhex("00000001 0006 6f7264657273 00000002 00000000 00000002 00000004")
    owned = (TopicPartition("orders", 0), TopicPartition("orders", 2))
    assert decode_sticky_user_data(java_v1) == StickyUserData(owned, 4, None)
    # kafka-python: an int16 version before the same layout (StickyAssignorUserData v1 and v0)
    assert decode_sticky_user_data(b"\x00\x01" + java_v1) == StickyUserData(owned, 4, 1)
    assert decode_sticky_user_data(b"\x00\x00" + java_v1[:-4]) == StickyUserData(owned, None, 0)
    # an empty kafka-python v1 payload is not Java data of 65,536 topics
    empty = bytes.fromhex("0001 00000000 ffffffff")
    assert decode_sticky_user_data(empty) == StickyUserData((), -1, 1)


def test_sticky_user_data_in_neither_layout_reports_javas_error() -> None:
    with pytest.raises(InputError) as caught:
        decode_sticky_user_data(bytes.fromhex("0001 0000"))
    assert caught.value.field.startswith("sticky_user_data.previous_assignment")
    assert "byte offset 0" in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"previous_assignment": (TopicPartition("t", 2**31),)}, "previous_assignment[0]"),
        ({"previous_assignment": (TopicPartition(7, 0),)}, "previous_assignment[0]"),
        ({"previous_assignment": (), "generation": True}, "generation"),
        ({"previous_assignment": (), "version_prefix": 2}, "version_prefix"),
    ],
)
def test_sticky_user_data_with_a_bad_value_names_the_field(arguments: dict, field: str) -> None:
    with pytest.raises(InputError) as caught:
        StickyUserData(**arguments)
    assert caught.value.field == field


@relaxed
@given(int32s)
def test_cooperative_user_data_is_the_bare_generation(generation: int) -> None:
    data = encode_cooperative_user_data(generation)
    assert len(data) == 4
    assert decode_cooperative_user_data(data) == generation


@relaxed
@given(subscriptions)
def test_subscription_json_matches_the_bytes(subscription: Subscription) -> None:
    node = subscription_to_json(subscription)
    assert subscription_from_json(node, subscription.version) == subscription.at_version()


@relaxed
@given(assignments)
def test_assignment_json_round_trips(assignment: MemberAssignment) -> None:
    assert assignment_from_json(assignment_to_json(assignment), assignment.version) == assignment


def test_assignment_layout_is_version_topic_partitions_user_data() -> None:
    partitions = (TopicPartition("t", 0), TopicPartition("t", 2))
    data = encode_assignment(MemberAssignment(partitions, None, 1))
    assert data.hex(" ") == (
        "00 01 "  # version
        "00 00 00 01 00 01 74 "  # one topic entry, "t"
        "00 00 00 02 00 00 00 00 00 00 00 02 "  # partitions [0, 2]
        "ff ff ff ff"  # null user data
    )


def test_partitions_of_one_topic_share_one_wire_entry() -> None:
    owned = (TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 3))
    node = subscription_to_json(Subscription(("a", "b"), owned_partitions=owned))
    assert node["ownedPartitions"] == [
        {"topic": "a", "partitions": [1, 0]},
        {"topic": "b", "partitions": [3]},
    ]


def test_subscription_fields_above_the_version_are_not_written() -> None:
    full = Subscription(("t",), b"\x01", (TopicPartition("t", 0),), 7, "r", version=0)
    expected = Subscription(("t",), b"\x01", version=0)
    assert decode_subscription(encode_subscription(full)) == expected


def test_newer_subscription_version_reads_known_fields_and_ignores_the_rest() -> None:
    v3 = Subscription(("t",), None, (TopicPartition("t", 1),), 5, "rack-a", version=3)
    newer = b"\x00\x04" + encode_subscription(v3)[2:] + b"\x00\x00\x00\x09future"
    decoded = decode_subscription(newer)
    assert decoded == Subscription(("t",), None, (TopicPartition("t", 1),), 5, "rack-a", version=4)


def test_sticky_user_data_without_generation_is_v0() -> None:
    data = encode_sticky_user_data(StickyUserData((TopicPartition("t", 0),), None))
    assert decode_sticky_user_data(data).generation is None
    assert decode_sticky_user_data(data + b"\x00\x00\x00\x03").generation == 3


def test_truncated_subscription_names_field_and_byte_offset() -> None:
    # the subscription bytes of Kafka's GroupMetadataMessageFormatterTest: a version, nothing else
    with pytest.raises(InputError) as caught:
        decode_subscription(base64.b64decode("AAE="))
    assert caught.value.field == "subscription.topics"
    assert "byte offset 2" in str(caught.value)


def test_truncated_owned_partition_names_its_index() -> None:
    data = encode_subscription(Subscription(("t",), owned_partitions=(TopicPartition("t", 9),)))
    count_offset = len(data) - 2 - 4 - 4 - 4  # before the count, partition 9, generation, rack
    cut = data[: count_offset + 4 + 2]
    with pytest.raises(InputError) as caught:
        decode_subscription(cut)
    assert caught.value.field == "subscription.ownedPartitions[0].partitions"
    assert f"byte offset {count_offset}" in str(caught.value)


def test_null_topic_name_is_rejected() -> None:
    data = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\xff\xff" + b"\xff\xff\xff\xff"
    with pytest.raises(InputError) as caught:
        decode_subscription(data)
    assert caught.value.field == "subscription.topics[0]"
    assert "byte offset 6" in str(caught.value)
    assert caught.value.value == -1


def test_impossible_array_count_fails_before_allocating() -> None:
    data = b"\x00\x00" + b"\x7f\xff\xff\xff"
    with pytest.raises(InputError, match="array of 2147483647"):
        decode_subscription(data)


def test_non_utf8_topic_is_rejected() -> None:
    data = b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\xff\xff\xff\xff"
    with pytest.raises(InputError, match="not UTF-8"):
        decode_subscription(data)


def test_negative_version_is_rejected() -> None:
    with pytest.raises(InputError, match="unsupported version"):
        decode_assignment(b"\xff\xfe")


def test_sticky_user_data_with_trailing_garbage_is_rejected() -> None:
    data = encode_sticky_user_data(StickyUserData((), 1)) + b"\x00"
    with pytest.raises(InputError, match="trailing"):
        decode_sticky_user_data(data)


def test_encoding_an_unknown_version_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"version must be 0\.\.3"):
        encode_subscription(Subscription(("t",), version=4))


def test_json_with_bad_base64_names_the_field() -> None:
    with pytest.raises(InputError) as caught:
        subscription_from_json({"topics": ["t"], "userData": "***"})
    assert caught.value.field == "subscription.userData"


@relaxed
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_input_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment, decode_sticky_user_data):
        try:
            decode(data)
        except InputError as error:
            assert "byte offset" in str(error)


@relaxed
@given(partition_lists, st.data())
def test_fast_partition_reader_agrees_with_the_field_by_field_one(
    partitions: tuple, data: st.DataObject
) -> None:
    encoded = bytearray(encode_assignment(MemberAssignment(partitions, None, 0))[2:])
    for _ in range(data.draw(st.integers(0, 2))):  # corrupt a byte or two, sometimes
        position = data.draw(st.integers(0, len(encoded) - 1))
        encoded[position] = data.draw(st.integers(0, 255))

    def outcome(read: Callable[[_Reader], tuple]) -> tuple | None:
        reader = _Reader(bytes(encoded), "assignment")
        try:
            return read(reader), reader.offset
        except (InputError, ValueError, UnicodeDecodeError, struct.error):
            return None

    fast = outcome(lambda reader: reader._topic_partitions_unnamed())
    assert fast == outcome(lambda reader: reader._topic_partitions_named("partitions"))


@relaxed
@given(subscriptions, st.data())
def test_any_truncation_of_valid_bytes_raises_input_error(
    subscription: Subscription, data: st.DataObject
) -> None:
    encoded = encode_subscription(subscription)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(InputError):
        decode_subscription(encoded[:cut])
