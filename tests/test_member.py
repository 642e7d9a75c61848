"""assignors.model.Member: its identity, its validation, and rejoining with what was given."""

from __future__ import annotations

import pytest

from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.errors import InputError
from assignors.model import Assignment, Group, Member, Topic, TopicPartition, rejoin

ORDERS = frozenset({"orders"})


def test_identity_is_the_instance_id_when_static_else_the_member_id():
    assert Member("c-1", ORDERS, instance_id="pod-1").identity == "pod-1"
    assert Member("c-1", ORDERS).identity == "c-1"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"member_id": ""}, "member_id"),
        ({"member_id": 7}, "member_id"),
        ({"topics": "orders"}, "topics"),
        ({"topics": None}, "topics"),
        ({"topics": [["orders"]]}, "topics"),
        ({"topics": frozenset({"orders", 3})}, "topics"),
        ({"owned_partitions": (TopicPartition("orders", -1),)}, "owned_partitions"),
        ({"owned_partitions": (TopicPartition("orders", True),)}, "owned_partitions"),
        ({"owned_partitions": (("orders", "0"),)}, "owned_partitions"),
        ({"owned_partitions": ((3, 0),)}, "owned_partitions"),
        ({"owned_partitions": (("orders",),)}, "owned_partitions"),
        ({"generation": -2}, "generation"),
        ({"generation": 1.0}, "generation"),
        ({"rack": 3}, "rack"),
        ({"instance_id": ""}, "instance_id"),
        ({"instance_id": 3}, "instance_id"),
    ],
)
def test_member_with_a_bad_value_raises_input_error_naming_the_field(arguments, field):
    values = {"member_id": "c0", "topics": ORDERS} | arguments
    with pytest.raises(InputError) as caught:
        Member(**values)
    assert caught.value.field == field


def test_member_keeps_an_empty_rack_which_kafka_treats_as_none():
    assert Member("c0", ORDERS, rack="").rack == ""


def test_member_sorts_and_deduplicates_owned_partitions():
    owned = (TopicPartition("orders", 2), ("orders", 0), TopicPartition("orders", 2))
    member = Member("c0", ORDERS, owned, generation=3)
    assert member.owned_partitions == (TopicPartition("orders", 0), TopicPartition("orders", 2))


def test_rejoin_hands_each_member_what_it_was_given_in_the_new_generation():
    group = Group(
        (Topic("orders", 3),),
        (
            Member("c0", ORDERS, (TopicPartition("orders", 0),), 1, rack="a", instance_id="p0"),
            Member("c1", ORDERS, (TopicPartition("orders", 1),), 1),
        ),
    )
    given = Assignment.build(
        ["c0", "c1"], {"c0": [TopicPartition("orders", 2)]}, [TopicPartition("orders", 1)]
    )
    rejoined = rejoin(group, given, 2)
    assert rejoined.topics == group.topics
    c0, c1 = rejoined.members
    assert (c0.owned_partitions, c0.generation) == ((TopicPartition("orders", 2),), 2)
    assert (c0.rack, c0.instance_id, c0.topics) == ("a", "p0", ORDERS)
    assert (c1.owned_partitions, c1.generation) == ((), 2)


def test_rejoining_after_a_cooperative_round_settles_what_was_withheld():
    topics = (Topic("orders", 4),)
    owned = [TopicPartition("orders", p) for p in range(4)]
    group = Group(topics, (Member("c0", ORDERS, owned, 1), Member("c1", ORDERS)))
    first = CooperativeStickyAssignor().assign(group)
    assert len(first.withheld) == 2
    second = CooperativeStickyAssignor().assign(rejoin(group, first, 2))
    assert second.withheld == ()
    assert [len(partitions) for partitions in second.partitions.values()] == [2, 2]
