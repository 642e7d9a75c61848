"""The kafka-python adapter, offline: kafka-python's own protocol classes and consumer, a stand-in
cluster that only answers partition counts (and replica racks where a test needs them)."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("kafka")

from kafka import KafkaConsumer
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor,
)
from kafka.protocol.consumer.group import JoinGroupResponse
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.protocol.kafka_python import group_from_members, kafka_python_assignor
from assignors.protocol.wire import StickyUserData, decode_sticky_user_data, encode_sticky_user_data
from assignors.sticky import StickyAssignor

JoinMember = JoinGroupResponse.JoinGroupResponseMember


class StandInCluster:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


def _join(
    consumers: dict[str, object],
    topics: dict[str, set[str]],
    instance_ids: dict[str, str] | None = None,
) -> list[JoinMember]:
    """JoinGroup members as the coordinator hands them to the leader (metadata as wire bytes)."""
    return [
        JoinMember(
            member_id=member_id,
            group_instance_id=(instance_ids or {}).get(member_id),
            metadata=consumer.metadata(topics[member_id]).encode(),
        )  # type: ignore[attr-defined]
        for member_id, consumer in consumers.items()
    ]


def _decoded(members: list[JoinMember]) -> list[JoinMember]:
    for member in members:
        member.metadata = ConsumerProtocolSubscription.decode(member.metadata)
    return members


def _deliver(
    consumers: dict[str, object], answer: dict[str, ConsumerProtocolAssignment], generation: int
) -> dict[str, set[tuple[str, int]]]:
    owned = {}
    for member_id, consumer in consumers.items():
        wire = ConsumerProtocolAssignment.decode(answer[member_id].encode())
        consumer.on_assignment(wire, generation)  # type: ignore[attr-defined]
        owned[member_id] = {(tp.topic, tp.partition) for tp in wire.partitions()}
    return owned


def test_adapter_names_the_protocol_and_its_rebalance_mode():
    assert kafka_python_assignor("sticky").name == "sticky"
    assert kafka_python_assignor("sticky").supported_protocols() == [RebalanceProtocol.EAGER]
    cooperative = kafka_python_assignor("cooperative-sticky")
    assert cooperative.supported_protocols() == [RebalanceProtocol.COOPERATIVE]
    assert kafka_python_assignor(StickyAssignor()).name == "sticky"


def test_kafka_consumer_accepts_the_adapter_and_sends_its_subscription():
    consumer = KafkaConsumer(
        group_id="orders-app",
        bootstrap_servers="127.0.0.1:9",
        api_version=(2, 6, 0),
        enable_auto_commit=False,
        partition_assignment_strategy=[kafka_python_assignor("cooperative-sticky", rack="r1")],
    )
    try:
        coordinator = consumer._coordinator
        assert coordinator._rebalance_protocol == RebalanceProtocol.COOPERATIVE
        consumer.subscribe(["orders"])
        [(name, subscription)] = coordinator.group_protocols()
        assert name == "cooperative-sticky"
        assert subscription.topics == ["orders"] and subscription.rack_id == "r1"
    finally:
        consumer.close()


def test_leader_inside_kafka_consumer_assigns_through_the_coordinator(monkeypatch):
    adapter = kafka_python_assignor("sticky")
    consumer = KafkaConsumer(
        group_id="orders-app",
        bootstrap_servers="127.0.0.1:9",
        api_version=(2, 6, 0),
        enable_auto_commit=False,
        partition_assignment_strategy=[adapter],
    )
    try:
        consumer.subscribe(["orders"])
        coordinator = consumer._coordinator
        monkeypatch.setattr(
            coordinator._cluster,
            "partitions_for_topic",
            StandInCluster({"orders": 4}).partitions_for_topic,
        )
        peers = {"c0": adapter, "c1": kafka_python_assignor("sticky")}
        members = _join(peers, {"c0": {"orders"}, "c1": {"orders"}})
        answer = coordinator._perform_assignment("c0", "sticky", members)
        owned = _deliver(peers, answer, 1)
        assert owned == {"c0": {("orders", 0), ("orders", 2)}, "c1": {("orders", 1), ("orders", 3)}}
    finally:
        consumer.close()


def test_members_report_owned_partitions_and_keep_them_after_a_peer_leaves():
    cluster = StandInCluster({"orders": 6, "audit": 3})
    consumers = {f"c{i}": kafka_python_assignor("sticky") for i in range(3)}
    topics = {member_id: {"orders", "audit"} for member_id in consumers}
    first = _deliver(
        consumers, consumers["c0"].assign(cluster, _decoded(_join(consumers, topics))), 1
    )
    del consumers["c1"]
    second = _deliver(
        consumers, consumers["c0"].assign(cluster, _decoded(_join(consumers, topics))), 2
    )
    assert first["c0"] <= second["c0"] and first["c2"] <= second["c2"]
    assert second["c0"] | second["c2"] == first["c0"] | first["c1"] | first["c2"]


def test_cooperative_leaves_moving_partitions_out_until_the_follow_up_round():
    cluster = StandInCluster({"orders": 4})
    consumers = {"c0": kafka_python_assignor("cooperative-sticky")}
    topics = {"c0": {"orders"}, "c1": {"orders"}}
    _deliver(consumers, consumers["c0"].assign(cluster, _decoded(_join(consumers, topics))), 1)
    consumers["c1"] = kafka_python_assignor("cooperative-sticky")
    round_one = _deliver(
        consumers, consumers["c0"].assign(cluster, _decoded(_join(consumers, topics))), 2
    )
    assert len(round_one["c0"]) == 2 and round_one["c1"] == set()
    round_two = _deliver(
        consumers, consumers["c0"].assign(cluster, _decoded(_join(consumers, topics))), 3
    )
    assert round_two["c0"] == round_one["c0"] and len(round_two["c1"]) == 2


def test_leader_reads_claims_from_kafka_pythons_own_sticky_assignor():
    native = StickyPartitionAssignor()
    native.on_assignment(ConsumerProtocolAssignment(0, [("orders", [1, 2])], b""), 7)
    members = [
        JoinMember(
            member_id="native",
            group_instance_id=None,
            metadata=native.metadata({"orders"}).encode(),
        )
    ]
    group = group_from_members(StandInCluster({"orders": 3}), members)
    [member] = group.members
    assert member.owned_partitions == (TopicPartition("orders", 1), TopicPartition("orders", 2))
    assert member.generation == 7


def test_leader_reads_claims_from_java_sticky_user_data():
    topic = b"orders"
    java_v1 = (
        struct.pack(">i", 1)
        + struct.pack(">h", len(topic))
        + topic
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">i", 4)
    )
    subscription = ConsumerProtocolSubscription(version=0, topics=["orders"], user_data=java_v1)
    members = [
        JoinMember(member_id="java", group_instance_id="pod-1", metadata=subscription.encode())
    ]
    group = group_from_members(StandInCluster({"orders": 3}), members)
    [member] = group.members
    assert member.owned_partitions == (TopicPartition("orders", 0), TopicPartition("orders", 2))
    assert (member.generation, member.instance_id) == (4, "pod-1")


def test_sticky_user_data_the_adapter_writes_is_javas_layout_and_the_wire_decoder_reads_it():
    adapter = kafka_python_assignor("sticky")
    adapter.on_assignment(ConsumerProtocolAssignment(0, [("orders", [2, 0])], b""), 5)
    written = adapter.metadata({"orders"}).user_data
    owned = (TopicPartition("orders", 0), TopicPartition("orders", 2))
    # Java's StickyAssignorUserData V1: no int16 version before the topic array
    assert written == encode_sticky_user_data(StickyUserData(owned, 5))
    assert written.hex() == "0000000100066f726465727300000002000000000000000200000005"
    assert decode_sticky_user_data(written) == StickyUserData(owned, 5, None)


def test_sticky_member_sends_no_user_data_before_its_first_assignment():
    assert kafka_python_assignor("sticky").metadata({"orders"}).user_data == b""


def test_sticky_user_data_round_trips_between_two_adapters_without_owned_partitions():
    member = kafka_python_assignor("sticky")
    member.on_assignment(ConsumerProtocolAssignment(0, [("b", [1]), ("a", [3, 0])], b""), 9)
    sent = member.metadata({"a", "b"})
    # a v0 subscription keeps only the user data: the leader must read the claims from it
    subscription = ConsumerProtocolSubscription(
        version=0, topics=sent.topics, user_data=sent.user_data
    )
    joined = [JoinMember(member_id="m", group_instance_id=None, metadata=subscription.encode())]
    [read] = group_from_members(StandInCluster({"a": 4, "b": 2}), joined).members
    assert read.owned_partitions == (
        TopicPartition("a", 0),
        TopicPartition("a", 3),
        TopicPartition("b", 1),
    )
    assert read.generation == 9


def test_kafka_python_sticky_leader_treats_javas_layout_as_no_claims(caplog):
    """kafka-python's StickyPartitionAssignor reads only its own layout (an int16 version
    first): it logs the parse failure and assigns the member as a new one, as for Java
    members; the group still gets a valid assignment."""
    ktk_member = kafka_python_assignor("sticky")
    ktk_member.on_assignment(ConsumerProtocolAssignment(0, [("orders", [0, 1])], b""), 3)
    members = _decoded(
        _join(
            {"ktk": ktk_member, "native": StickyPartitionAssignor()},
            {"ktk": {"orders"}, "native": {"orders"}},
        )
    )
    cluster = StandInCluster({"orders": 4})
    cluster.topics = lambda: {"orders"}  # type: ignore[attr-defined]  # kafka-python asks for it
    answer = StickyPartitionAssignor().assign(cluster, members)
    held = sorted(tp for assignment in answer.values() for tp in assignment.partitions())
    assert [tp.partition for tp in held] == [0, 1, 2, 3]
    assert "Could not parse member data" in caplog.text


def test_leader_ignores_unreadable_sticky_user_data(caplog):
    subscription = ConsumerProtocolSubscription(
        version=0, topics=["orders"], user_data=b"\x00\x00\x00\x09garbage"
    )
    members = [JoinMember(member_id="c0", group_instance_id=None, metadata=subscription.encode())]
    [member] = group_from_members(StandInCluster({"orders": 3}), members).members
    assert (member.owned_partitions, member.generation) == ((), -1)
    assert "ignoring unreadable sticky user data" in caplog.text


def test_leader_drops_claims_on_negative_partition_numbers():
    subscription = ConsumerProtocolSubscription(
        version=2,
        topics=["orders"],
        user_data=b"",
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition("orders", [-1, 1])],
        generation_id=3,
    )
    members = [JoinMember(member_id="c0", group_instance_id=None, metadata=subscription.encode())]
    [member] = group_from_members(StandInCluster({"orders": 3}), members).members
    assert member.owned_partitions == (TopicPartition("orders", 1),)


def test_adapter_with_a_rack_that_is_not_text_names_the_field():
    with pytest.raises(InputError) as caught:
        kafka_python_assignor("sticky", rack=3)  # type: ignore[arg-type]
    assert caught.value.field == "rack"


def test_unknown_topics_are_left_out_and_racks_reach_the_group():
    def racks(cluster, topic, partition):
        return frozenset({"r0"}) if partition % 2 == 0 else frozenset({"r1"})

    adapter = kafka_python_assignor("sticky", rack="r1", replica_racks=racks)
    members = [
        JoinMember(
            member_id="c0",
            group_instance_id=None,
            metadata=adapter.metadata({"orders", "not-yet-created"}).encode(),
        )
    ]
    group = group_from_members(StandInCluster({"orders": 2}), members, racks)
    assert [topic.name for topic in group.topics] == ["orders"]
    assert group.topics[0].replica_racks == (frozenset({"r0"}), frozenset({"r1"}))
    assert group.members[0].rack == "r1"
