"""Unit behaviour of the sticky assignor: claims, balance, stickiness, racks, static members."""

from __future__ import annotations

import pytest
from sticky_checks import balance_problems, make_member, moved, validity_problems

from assignors.model import Group, Topic, TopicPartition, rejoin
from assignors.protocol.request import parse_request
from assignors.registry import get
from assignors.sticky import StickyAssignor, plan_sticky

TP = TopicPartition


def _counts(assignment_partitions: dict[str, tuple[TP, ...]]) -> dict[str, int]:
    return {member: len(tps) for member, tps in assignment_partitions.items()}


def _assign(group: Group) -> dict[str, tuple[TP, ...]]:
    partitions = dict(StickyAssignor().assign(group).partitions)
    assert validity_problems(group, partitions) == []
    assert balance_problems(group, partitions) == []
    return partitions


def test_registry_serves_the_sticky_assignor_as_eager():
    assignor = get("sticky")
    assert assignor.name == "sticky" and assignor.rebalance_protocol == "eager"


def test_empty_group_gets_an_empty_assignment():
    assert StickyAssignor().assign(Group((Topic("a", 3),), ())).partitions == {}


def test_member_without_known_topics_gets_nothing_and_others_share_everything():
    group = Group(
        (Topic("a", 4),),
        (make_member("c0", "a"), make_member("c1", "gone"), make_member("c2", "a")),
    )
    assert _counts(_assign(group)) == {"c0": 2, "c1": 0, "c2": 2}


def test_uniform_quota_gives_ceil_to_the_members_that_claim_most():
    owned_c1 = tuple(("a", p) for p in range(5))
    group = Group(
        (Topic("a", 7),),
        (
            make_member("c0", "a", (("a", 5),), 1),
            make_member("c1", "a", owned_c1, 1),
            make_member("c2", "a", (("a", 6),), 1),
        ),
    )
    partitions = _assign(group)
    assert _counts(partitions) == {"c0": 2, "c1": 3, "c2": 2}
    assert len(moved(group, partitions)) == 2


def test_member_leaving_moves_only_its_partitions():
    topics = (Topic("a", 6), Topic("b", 6))
    everyone = [make_member(f"c{i}", "a,b") for i in range(4)]
    first = _assign(Group(topics, tuple(everyone)))
    survivors = tuple(make_member(f"c{i}", "a,b", tuple(first[f"c{i}"]), 1) for i in (0, 1, 3))
    second = _assign(Group(topics, survivors))
    for member_id in ("c0", "c1", "c3"):
        assert set(first[member_id]) <= set(second[member_id])


def test_stale_claim_on_unsubscribed_topic_is_never_honoured():
    # c0 owned b0 in an older generation but no longer subscribes to b (Java defect b)
    group = Group(
        (Topic("a", 2), Topic("b", 1)),
        (
            make_member("c0", "a", (("b", 0), ("a", 0)), 1),
            make_member("c1", "a,b", (("a", 1),), 2),
        ),
    )
    partitions = _assign(group)
    assert TP("b", 0) in partitions["c1"]
    assert TP("b", 0) not in partitions["c0"]


def test_highest_generation_claim_wins():
    group = Group(
        (Topic("a", 2),),
        (
            make_member("c0", "a", (("a", 0), ("a", 1)), 4),
            make_member("c1", "a", (("a", 0),), 5),
        ),
    )
    plan = plan_sticky(group)
    assert plan.claimant.tolist() == [1, 0]
    assert _assign(group) == {"c0": (TP("a", 1),), "c1": (TP("a", 0),)}


def test_same_generation_double_claim_voids_stickiness():
    group = Group(
        (Topic("a", 3),),
        (
            make_member("c0", "a", (("a", 0), ("a", 1)), 5),
            make_member("c1", "a", (("a", 1), ("a", 2)), 5),
        ),
    )
    plan = plan_sticky(group)
    assert plan.contested.tolist() == [False, True, False]
    assert plan.claimant.tolist() == [0, -1, 1]
    partitions = _assign(group)
    assert TP("a", 0) in partitions["c0"] and TP("a", 2) in partitions["c1"]


def test_claim_on_a_partition_beyond_the_topic_end_is_ignored():
    group = Group(
        (Topic("a", 2),), (make_member("c0", "a", (("a", 7),), 1), make_member("c1", "a"))
    )
    assert plan_sticky(group).claimant.tolist() == [-1, -1]


def test_result_is_independent_of_member_and_topic_order_in_the_request():
    topics = (Topic("a", 5), Topic("b", 3), Topic("c", 4))
    members = (
        make_member("x1", "a,b", (("a", 0), ("b", 1)), 2),
        make_member("x0", "b,c", (("c", 0), ("c", 1), ("c", 2)), 2),
        make_member("x2", "a,c"),
    )
    forward = StickyAssignor().assign(Group(topics, members))
    backward = StickyAssignor().assign(Group(topics[::-1], members[::-1]))
    assert forward == backward


def test_heterogeneous_subscriptions_respect_kafkas_balance_rule():
    # the KIP-54 example: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2]
    topics = (Topic("t0", 1), Topic("t1", 2), Topic("t2", 3))
    group = Group(
        topics, (make_member("C0", "t0"), make_member("C1", "t0,t1"), make_member("C2", "t0,t1,t2"))
    )
    partitions = _assign(group)
    assert _counts(partitions) == {"C0": 1, "C1": 2, "C2": 3}


def test_kip54_example_keeps_five_of_six_when_c0_leaves():
    topics = (Topic("t0", 1), Topic("t1", 2), Topic("t2", 3))
    before = {
        "C0": (("t0", 0),),
        "C1": (("t1", 0), ("t1", 1)),
        "C2": (("t2", 0), ("t2", 1), ("t2", 2)),
    }
    group = Group(
        topics,
        (
            make_member("C1", "t0,t1", before["C1"], 1),
            make_member("C2", "t0,t1,t2", before["C2"], 1),
        ),
    )
    partitions = _assign(group)
    assert len(moved(group, partitions)) == 0
    assert TP("t0", 0) in partitions["C1"]


def test_new_partitions_prefer_a_member_on_a_replica_rack():
    racks = tuple(frozenset({rack}) for rack in ("r0", "r1", "r0", "r1"))
    group = Group(
        (Topic("a", 4, replica_racks=racks),),
        (make_member("c0", "a", rack="r1"), make_member("c1", "a", rack="r0")),
    )
    partitions = _assign(group)
    assert partitions == {"c0": (TP("a", 1), TP("a", 3)), "c1": (TP("a", 0), TP("a", 2))}


def test_rack_locality_never_moves_a_balanced_claimed_partition():
    # every claim sits on the wrong rack, but the group is balanced: nothing moves (Java defect a)
    racks = tuple(frozenset({rack}) for rack in ("r0", "r1"))
    group = Group(
        (Topic("a", 2, replica_racks=racks),),
        (
            make_member("c0", "a", (("a", 1),), 3, rack="r0"),
            make_member("c1", "a", (("a", 0),), 3, rack="r1"),
        ),
    )
    assert _assign(group) == {"c0": (TP("a", 1),), "c1": (TP("a", 0),)}


def test_member_over_quota_keeps_its_same_rack_partitions():
    racks = tuple(frozenset({rack}) for rack in ("r1", "r0", "r1", "r0"))
    group = Group(
        (Topic("a", 4, replica_racks=racks),),
        (
            make_member("c0", "a", tuple(("a", p) for p in range(4)), 2, rack="r0"),
            make_member("c1", "a", rack="r1"),
        ),
    )
    partitions = _assign(group)
    assert partitions["c0"] == (TP("a", 1), TP("a", 3))


def test_static_members_break_ties_by_instance_id():
    # both have no claims; the one whose instance id sorts first gets the extra partition
    group = Group(
        (Topic("a", 3),),
        (
            make_member("m-a", "a", instance_id="pod-9"),
            make_member("m-b", "a", instance_id="pod-1"),
        ),
    )
    assert _counts(_assign(group)) == {"m-a": 1, "m-b": 2}


def test_restarted_static_member_keeps_its_partitions_under_a_new_member_id():
    topics = (Topic("a", 4),)
    first = _assign(
        Group(
            topics,
            (
                make_member("m1", "a", instance_id="pod-1"),
                make_member("m2", "a", instance_id="pod-2"),
            ),
        )
    )
    # pod-1 restarts with a new member id; its owned partitions come with it
    group = Group(
        topics,
        (
            make_member("m9", "a", tuple(first["m1"]), 1, instance_id="pod-1"),
            make_member("m2", "a", tuple(first["m2"]), 1, instance_id="pod-2"),
        ),
    )
    second = _assign(group)
    assert second["m9"] == first["m1"] and second["m2"] == first["m2"]


def test_uniform_new_partitions_are_spread_over_topics():
    topics = tuple(Topic(f"t{i}", 4) for i in range(3))
    group = Group(topics, tuple(make_member(f"c{i}", "t0,t1,t2") for i in range(4)))
    for tps in _assign(group).values():
        assert sorted(tp.topic for tp in tps) == ["t0", "t1", "t2"]


@pytest.mark.parametrize("num_members", [1, 3, 7])
def test_feeding_the_answer_back_changes_nothing(num_members):
    topics = (Topic("a", 10), Topic("b", 5))
    members = tuple(make_member(f"c{i}", "a,b" if i % 2 else "a") for i in range(num_members))
    first = _assign(Group(topics, members))
    again = Group(
        topics,
        tuple(
            make_member(m.member_id, ",".join(sorted(m.topics)), tuple(first[m.member_id]), 1)
            for m in members
        ),
    )
    assert _assign(again) == first


def test_heterogeneous_counts_per_topic_follow_replica_racks():
    # c0 sits with topic a's replicas, c1 with topic b's; c2 (no rack) takes only b
    a_racks = (frozenset({"r0"}),) * 2
    b_racks = (frozenset({"r1"}),) * 4
    group = Group(
        (Topic("a", 2, replica_racks=a_racks), Topic("b", 4, replica_racks=b_racks)),
        (
            make_member("c0", "a,b", rack="r0"),
            make_member("c1", "a,b", rack="r1"),
            make_member("c2", "b"),
        ),
    )
    partitions = _assign(group)
    assert {tp.topic for tp in partitions["c0"]} == {"a"}
    assert {tp.topic for tp in partitions["c1"]} == {"b"}
    assert _counts(partitions) == {"c0": 2, "c1": 2, "c2": 2}


FULL_BALANCE_REQUEST = {
    "assignor": "sticky",
    "topics": [
        {"name": "x", "partitions": 2},
        {"name": "y", "partitions": 2},
        {"name": "z", "partitions": 2},
    ],
    "members": [
        {
            "id": "a",
            "topics": ["x", "y", "z"],
            "owned": [["x", 0], ["x", 1], ["y", 0], ["y", 1], ["z", 0], ["z", 1]],
            "generation": 1,
        },
        {"id": "b", "topics": ["x"]},
        {"id": "c", "topics": ["x", "y"]},
    ],
}


@pytest.mark.parametrize("assignor_name", ["sticky", "cooperative-sticky"])
def test_full_balance_is_reached_when_kafkas_rule_would_stop_short(assignor_name):
    # 3/1/2 satisfies Kafka's rule (a holds nothing of x, b's only topic), but 2/2/2 exists:
    # b takes x, c takes y, a keeps z
    _, _, group = parse_request(FULL_BALANCE_REQUEST)
    assignor = get(assignor_name)
    assignment = assignor.assign(group)
    if assignment.withheld:
        assignment = assignor.assign(rejoin(group, assignment, 2))
    assert assignment.withheld == ()
    assert assignment.partitions == {
        "a": (TopicPartition("z", 0), TopicPartition("z", 1)),
        "b": (TopicPartition("x", 0), TopicPartition("x", 1)),
        "c": (TopicPartition("y", 0), TopicPartition("y", 1)),
    }


RACKS_EVERYWHERE_REQUEST = {
    "assignor": "sticky",
    "topics": [
        {"name": "t1", "partitions": 2, "racks": [["a", "b"], ["a", "b"]]},
        {"name": "t2", "partitions": 2, "racks": [["a", "b"], ["a", "b"]]},
    ],
    "members": [
        {"id": "c0", "topics": ["t1", "t2"], "rack": "a"},
        {"id": "c1", "topics": ["t1", "t2"], "rack": "b"},
    ],
}


@pytest.mark.parametrize("assignor_name", ["sticky", "cooperative-sticky"])
def test_racks_holding_every_partition_do_not_skew_topics(assignor_name):
    # every partition has a replica on both racks: racks favour nothing, so each member gets one
    # partition of each topic, as without racks (not all of t1 to c0 and all of t2 to c1)
    _, _, group = parse_request(RACKS_EVERYWHERE_REQUEST)
    assignment = get(assignor_name).assign(group)
    assert assignment.partitions == {
        "c0": (TopicPartition("t1", 0), TopicPartition("t2", 0)),
        "c1": (TopicPartition("t1", 1), TopicPartition("t2", 1)),
    }


def test_partitions_equally_close_to_two_racks_are_shared_by_both():
    # t1 and t2 are on both racks, t3 only on a: rack a's members take t3, and the rest of what
    # they need from t1 and t2 comes from both topics, not from whichever is listed first
    everywhere = [["a", "b"]] * 4
    _, _, group = parse_request(
        {
            "assignor": "sticky",
            "topics": [
                {"name": "t1", "partitions": 4, "racks": everywhere},
                {"name": "t2", "partitions": 4, "racks": everywhere},
                {"name": "t3", "partitions": 2, "racks": [["a"], ["a"]]},
            ],
            "members": [
                {"id": f"c{i}", "topics": ["t1", "t2", "t3"], "rack": rack}
                for i, rack in enumerate(("a", "a", "b", "b", "b"))
            ],
        }
    )
    partitions = StickyAssignor().assign(group).partitions
    for member in ("c0", "c1"):
        assert {tp.topic for tp in partitions[member]} >= {"t3"}
    for topic in ("t1", "t2"):
        per_member = [sum(tp.topic == topic for tp in tps) for tps in partitions.values()]
        assert max(per_member) - min(per_member) <= 1, (topic, partitions)
