"""The round-robin assignor: the circular walk, Java member order, racks ignored, scale."""

from __future__ import annotations

from hypothesis import given, settings
from strategies import groups

from assignors.java_order import java_member_order, java_string_key
from assignors.model import Group, Member, Topic, TopicPartition, show
from assignors.round_robin import RoundRobinAssignor


def assign(group: Group) -> dict[str, list[str]]:
    return show(RoundRobinAssignor().assign(group))


def _walk_one_member_at_a_time(group: Group) -> dict[str, set[TopicPartition]]:
    """Java's loop as written: peek at each member in turn until one subscribes."""
    ordered = java_member_order(group.members)
    result: dict[str, set[TopicPartition]] = {m.member_id: set() for m in group.members}
    if not ordered:
        return result
    position = 0
    wanted = set().union(*(member.topics for member in ordered))
    topics = sorted(
        (t for t in group.topics if t.name in wanted), key=lambda topic: java_string_key(topic.name)
    )
    for topic in topics:
        for partition in range(topic.num_partitions):
            while topic.name not in ordered[position % len(ordered)].topics:
                position += 1
            owner = ordered[position % len(ordered)].member_id
            result[owner].add(TopicPartition(topic.name, partition))
            position += 1
    return result


def test_roundrobin_deals_in_topic_then_partition_order():
    names = frozenset({"t0", "t1"})
    group = Group(
        (Topic("t1", 2), Topic("t0", 3)),
        (Member("c0", names), Member("c1", names), Member("c2", names)),
    )
    assert assign(group) == {"c0": ["t0-0", "t1-0"], "c1": ["t0-1", "t1-1"], "c2": ["t0-2"]}


def test_roundrobin_skips_members_not_subscribed_to_the_topic():
    group = Group(
        (Topic("t0", 1), Topic("t1", 2), Topic("t2", 3)),
        (
            Member("c0", frozenset({"t0"})),
            Member("c1", frozenset({"t0", "t1"})),
            Member("c2", frozenset({"t0", "t1", "t2"})),
        ),
    )
    assert assign(group) == {"c0": ["t0-0"], "c1": ["t1-0"], "c2": ["t1-1", "t2-0", "t2-1", "t2-2"]}


def test_roundrobin_walks_static_members_first_by_instance_id():
    group = Group(
        (Topic("t0", 3),),
        (
            Member("a", frozenset({"t0"})),
            Member("b", frozenset({"t0"}), instance_id="pod-2"),
            Member("c", frozenset({"t0"}), instance_id="pod-1"),
        ),
    )
    assert assign(group) == {"a": ["t0-2"], "b": ["t0-1"], "c": ["t0-0"]}


def test_roundrobin_ignores_topics_the_group_does_not_know():
    members = (Member("c0", frozenset({"gone"})), Member("c1", frozenset({"t0"})))
    group = Group((Topic("t0", 2),), members)
    assert assign(group) == {"c0": [], "c1": ["t0-0", "t0-1"]}


@settings(max_examples=80, deadline=None, database=None)
@given(group=groups(min_members=0))
def test_roundrobin_jumps_to_the_same_member_as_the_step_by_step_walk(group: Group):
    ours = RoundRobinAssignor().assign(group)
    assert {member: set(tps) for member, tps in ours.partitions.items()} == (
        _walk_one_member_at_a_time(group)
    )


@settings(max_examples=80, deadline=None, database=None)
@given(group=groups(subscription="uniform"))
def test_roundrobin_deals_one_walk_over_all_topics_when_everyone_takes_everything(group: Group):
    ours = RoundRobinAssignor().assign(group)
    assert {member: set(tps) for member, tps in ours.partitions.items()} == (
        _walk_one_member_at_a_time(group)
    )


@settings(max_examples=40, deadline=None, database=None)
@given(group=groups(racks=True))
def test_roundrobin_result_does_not_depend_on_racks(group: Group):
    stripped = Group(
        tuple(Topic(t.name, t.num_partitions) for t in group.topics),
        tuple(Member(m.member_id, m.topics, instance_id=m.instance_id) for m in group.members),
    )
    assert RoundRobinAssignor().assign(group) == RoundRobinAssignor().assign(stripped)


@settings(max_examples=60, deadline=None, database=None)
@given(group=groups(subscription="uniform", unknown_topics=False))
def test_roundrobin_with_equal_subscriptions_keeps_counts_within_one(group: Group):
    counts = [len(tps) for tps in RoundRobinAssignor().assign(group).partitions.values()]
    assert max(counts) - min(counts) <= 1
