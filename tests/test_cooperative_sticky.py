"""Unit behaviour of cooperative-sticky: what is withheld, the follow-up round, claims, racks."""

from __future__ import annotations

from sticky_checks import balance_problems, validity_problems

from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.model import Assignment, Group, Member, Topic, TopicPartition
from assignors.registry import get
from assignors.sticky import StickyAssignor

TP = TopicPartition


def _member(
    member_id: str,
    topics: str,
    owned: tuple[tuple[str, int], ...] = (),
    generation: int = -1,
    **extra: object,
) -> Member:
    return Member(
        member_id, frozenset(topics.split(",")), tuple(TP(*tp) for tp in owned), generation, **extra
    )  # type: ignore[arg-type]


def _follow_up(group: Group, assignment: Assignment, generation: int) -> Group:
    return Group(
        group.topics,
        tuple(
            Member(
                m.member_id,
                m.topics,
                assignment.partitions[m.member_id],
                generation,
                m.rack,
                m.instance_id,
            )
            for m in group.members
        ),
    )


def test_registry_serves_cooperative_sticky_on_the_cooperative_protocol():
    assignor = get("cooperative-sticky")
    assert assignor.name == "cooperative-sticky"
    assert assignor.rebalance_protocol == "cooperative"


def test_first_assignment_withholds_nothing():
    group = Group((Topic("a", 5),), (_member("c0", "a"), _member("c1", "a")))
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == StickyAssignor().assign(group).partitions


def test_joining_member_gets_moved_partitions_only_in_the_follow_up_round():
    owned = tuple(("a", p) for p in range(6))
    group = Group((Topic("a", 6),), (_member("c0", "a", owned, 2), _member("c1", "a")))
    first = CooperativeStickyAssignor().assign(group)
    assert first.partitions["c1"] == ()
    assert len(first.withheld) == 3
    assert set(first.partitions["c0"]).isdisjoint(first.withheld)

    second = CooperativeStickyAssignor().assign(_follow_up(group, first, 3))
    assert second.withheld == ()
    assert set(second.partitions["c1"]) == set(first.withheld)
    assert second.partitions["c0"] == first.partitions["c0"]


def test_leaving_member_partitions_are_handed_out_at_once():
    group = Group(
        (Topic("a", 4),),
        (
            _member("c0", "a", (("a", 0), ("a", 1)), 2),
            _member("c2", "a", (("a", 3),), 2),  # c1 owned a2 and left
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == {"c0": (TP("a", 0), TP("a", 1)), "c2": (TP("a", 2), TP("a", 3))}


def test_same_generation_double_claim_is_withheld_until_both_revoke():
    group = Group(
        (Topic("a", 2),),
        (
            _member("c0", "a", (("a", 0), ("a", 1)), 4),
            _member("c1", "a", (("a", 1),), 4),
        ),
    )
    first = CooperativeStickyAssignor().assign(group)
    assert first.withheld == (TP("a", 1),)
    assert first.partitions == {"c0": (TP("a", 0),), "c1": ()}
    second = CooperativeStickyAssignor().assign(_follow_up(group, first, 5))
    assert second.withheld == ()
    assert second.partitions == {"c0": (TP("a", 0),), "c1": (TP("a", 1),)}


def test_stale_claim_does_not_block_the_partition():
    # c0's claim is from an older generation: c1's newer claim is the valid one, nothing withheld
    group = Group(
        (Topic("a", 2),),
        (
            _member("c0", "a", (("a", 0), ("a", 1)), 2),
            _member("c1", "a", (("a", 1),), 3),
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == {"c0": (TP("a", 0),), "c1": (TP("a", 1),)}


def test_unsubscribed_topic_partition_goes_out_without_waiting():
    group = Group(
        (Topic("a", 1), Topic("b", 1)),
        (
            _member("c0", "a", (("a", 0), ("b", 0)), 3),  # no longer subscribes to b
            _member("c1", "a,b"),
        ),
    )
    assignment = CooperativeStickyAssignor().assign(group)
    assert assignment.withheld == ()
    assert assignment.partitions == {"c0": (TP("a", 0),), "c1": (TP("b", 0),)}


def test_rack_aware_moves_prefer_the_joining_member_on_the_replica_rack():
    racks = tuple(frozenset({rack}) for rack in ("r0", "r0", "r1", "r1"))
    group = Group(
        (Topic("a", 4, replica_racks=racks),),
        (
            _member("c0", "a", tuple(("a", p) for p in range(4)), 1, rack="r0"),
            _member("c1", "a", rack="r1"),
        ),
    )
    first = CooperativeStickyAssignor().assign(group)
    assert first.withheld == (TP("a", 2), TP("a", 3))
    second = CooperativeStickyAssignor().assign(_follow_up(group, first, 2))
    assert second.partitions == {"c0": (TP("a", 0), TP("a", 1)), "c1": (TP("a", 2), TP("a", 3))}


def test_static_member_rejoining_with_a_new_id_keeps_everything():
    topics = (Topic("a", 4), Topic("b", 2))
    group = Group(
        topics,
        (
            _member("m7", "a,b", (("a", 0), ("a", 1), ("b", 0)), 5, instance_id="pod-0"),
            _member("m2", "a,b", (("a", 2), ("a", 3), ("b", 1)), 5, instance_id="pod-1"),
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
            _member("c0", "a,b", (*(("a", p) for p in range(6)), ("b", 0)), 1),
            _member("c1", "b", (("b", 1), ("b", 2)), 1),
            _member("c2", "a"),
        ),
    )
    first = CooperativeStickyAssignor().assign(group)
    assert first.withheld
    second = CooperativeStickyAssignor().assign(_follow_up(group, first, 2))
    assert second.withheld == ()
    assert validity_problems(group, second.partitions) == []
    assert balance_problems(group, second.partitions) == []
