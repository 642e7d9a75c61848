"""Unit behaviour of cooperative-sticky: what is withheld, the follow-up round, claims, racks."""

from __future__ import annotations

from sticky_checks import balance_problems, make_member, validity_problems

from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.model import Group, Topic, TopicPartition, rejoin
from assignors.protocol.request import parse_request
from assignors.registry import get
from assignors.sticky import StickyAssignor

TP = TopicPartition


def test_registry_serves_cooperative_sticky_on_the_cooperative_protocol():
    assignor = get("cooperative-sticky")
    assert assignor.name == "cooperative-sticky"
    assert assignor.rebalance_protocol == "cooperative"


def test_first_assignment_withholds_nothing():
    group = Group((Topic("a", 5),), (make_member("c0", "a"), make_member("c1", "a")))
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == StickyAssignor().assign(group).partitions


def test_joining_member_gets_moved_partitions_only_in_the_follow_up_round():
    owned = tuple(("a", p) for p in range(6))
    group = Group((Topic("a", 6),), (make_member("c0", "a", owned, 2), make_member("c1", "a")))
    first = CooperativeStickyAssignor().assign(group)
    assert first.partitions["c1"] == ()
    assert len(first.withheld) == 3
    assert set(first.partitions["c0"]).isdisjoint(first.withheld)

    second = CooperativeStickyAssignor().assign(rejoin(group, first, 3))
    assert second.withheld == ()
    assert set(second.partitions["c1"]) == set(first.withheld)
    assert second.partitions["c0"] == first.partitions["c0"]


def test_leaving_member_partitions_are_handed_out_at_once():
    group = Group(
        (Topic("a", 4),),
        (
            make_member("c0", "a", (("a", 0), ("a", 1)), 2),
            make_member("c2", "a", (("a", 3),), 2),  # c1 owned a2 and left
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == {"c0": (TP("a", 0), TP("a", 1)), "c2": (TP("a", 2), TP("a", 3))}


def test_same_generation_double_claim_is_withheld_until_both_revoke():
    group = Group(
        (Topic("a", 2),),
        (
            make_member("c0", "a", (("a", 0), ("a", 1)), 4),
            make_member("c1", "a", (("a", 1),), 4),
        ),
    )
    first = CooperativeStickyAssignor().assign(group)
    assert first.withheld == (TP("a", 1),)
    assert first.partitions == {"c0": (TP("a", 0),), "c1": ()}
    second = CooperativeStickyAssignor().assign(rejoin(group, first, 5))
    assert second.withheld == ()
    assert second.partitions == {"c0": (TP("a", 0),), "c1": (TP("a", 1),)}


def test_stale_claim_does_not_block_the_partition():
    # c0's claim is from an older generation: c1's newer claim is the valid one, nothing withheld
    group = Group(
        (Topic("a", 2),),
        (
            make_member("c0", "a", (("a", 0), ("a", 1)), 2),
            make_member("c1", "a", (("a", 1),), 3),
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == {"c0": (TP("a", 0),), "c1": (TP("a", 1),)}


DROPPED_TOPIC_REQUEST = {
    "assignor": "cooperative-sticky",
    "topics": [{"name": "a", "partitions": 1}, {"name": "b", "partitions": 1}],
    "members": [
        {"id": "c0", "topics": ["b"], "owned": [["a", 0]], "generation": 1},
        {"id": "c1", "topics": ["a"], "generation": 1},
    ],
}


def test_partition_of_a_dropped_topic_is_withheld_until_its_owner_revokes_it():
    _, assignor_name, group = parse_request(DROPPED_TOPIC_REQUEST)
    assignor = get(assignor_name)
    first = assignor.assign(group)
    # c0 still consumes a-0 until it revokes it: handing it to c1 now would give it two owners
    assert first.partitions == {"c0": (TP("b", 0),), "c1": ()}
    assert first.withheld == (TP("a", 0),)
    second = assignor.assign(rejoin(group, first, 2))
    assert second.partitions == {"c0": (TP("b", 0),), "c1": (TP("a", 0),)}
    assert second.withheld == ()


def test_dropped_topic_partition_kept_by_its_valid_owner_is_not_withheld():
    group = Group(
        (Topic("a", 1), Topic("b", 1)),
        (
            make_member("c0", "b", (("a", 0), ("b", 0)), 3),  # dropped a, still lists a-0
            make_member("c1", "a", (("a", 0),), 2),  # the valid claim: it keeps a-0
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == {"c0": (TP("b", 0),), "c1": (TP("a", 0),)}


def test_rack_aware_moves_prefer_the_joining_member_on_the_replica_rack():
    racks = tuple(frozenset({rack}) for rack in ("r0", "r0", "r1", "r1"))
    group = Group(
        (Topic("a", 4, replica_racks=racks),),
        (
            make_member("c0", "a", tuple(("a", p) for p in range(4)), 1, rack="r0"),
            make_member("c1", "a", rack="r1"),
        ),
    )
    first = CooperativeStickyAssignor().assign(group)
    assert first.withheld == (TP("a", 2), TP("a", 3))
    second = CooperativeStickyAssignor().assign(rejoin(group, first, 2))
    assert second.partitions == {"c0": (TP("a", 0), TP("a", 1)), "c1": (TP("a", 2), TP("a", 3))}


def test_static_member_rejoining_with_a_new_id_keeps_everything():
    topics = (Topic("a", 4), Topic("b", 2))
    group = Group(
        topics,
        (
            make_member("m7", "a,b", (("a", 0), ("a", 1), ("b", 0)), 5, instance_id="pod-0"),
            make_member("m2", "a,b", (("a", 2), ("a", 3), ("b", 1)), 5, instance_id="pod-1"),
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions["m7"] == (TP("a", 0), TP("a", 1), TP("b", 0))


def test_heterogeneous_final_round_is_valid_and_balanced():
    topics = (Topic("a", 6), Topic("b", 3))
    group = Group(
        topics,
        (
            make_member("c0", "a,b", (*(("a", p) for p in range(6)), ("b", 0)), 1),
            make_member("c1", "b", (("b", 1), ("b", 2)), 1),
            make_member("c2", "a"),
        ),
    )
    first = CooperativeStickyAssignor().assign(group)
    assert first.withheld
    second = CooperativeStickyAssignor().assign(rejoin(group, first, 2))
    assert second.withheld == ()
    assert validity_problems(group, second.partitions) == []
    assert balance_problems(group, second.partitions) == []
