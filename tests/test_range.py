"""The range assignor: per-topic ranges, Java member order, KIP-881 rack matching, scale."""

from __future__ import annotations

from hypothesis import given, settings
from strategies import groups

from assignors.java_order import java_member_order
from assignors.model import Group, Member, Topic, show
from assignors.range import RangeAssignor


def _members(*specs: tuple[str, tuple[str, ...]]) -> tuple[Member, ...]:
    return tuple(Member(member_id, frozenset(topics)) for member_id, topics in specs)


def assign(group: Group) -> dict[str, list[str]]:
    return show(RangeAssignor().assign(group))


def test_range_gives_first_members_the_extras():
    group = Group((Topic("t0", 7),), _members(("c0", ("t0",)), ("c1", ("t0",)), ("c2", ("t0",))))
    assert assign(group) == {
        "c0": ["t0-0", "t0-1", "t0-2"],
        "c1": ["t0-3", "t0-4"],
        "c2": ["t0-5", "t0-6"],
    }


def test_range_with_many_topics_piles_every_extra_on_the_first_member():
    topics = tuple(Topic(f"t{index}", 4) for index in range(5))
    names = tuple(topic.name for topic in topics)
    group = Group(topics, _members(("c0", names), ("c1", names), ("c2", names)))
    counts = {member: len(tps) for member, tps in assign(group).items()}
    assert counts == {"c0": 10, "c1": 5, "c2": 5}


def test_range_orders_members_by_id_as_strings_not_numbers():
    group = Group((Topic("t0", 3),), _members(("consumer-9", ("t0",)), ("consumer-10", ("t0",))))
    assert assign(group) == {"consumer-10": ["t0-0", "t0-1"], "consumer-9": ["t0-2"]}


def test_range_puts_static_members_first_ordered_by_instance_id():
    group = Group(
        (Topic("t0", 3),),
        (
            Member("a", frozenset({"t0"})),
            Member("b", frozenset({"t0"}), instance_id="pod-2"),
            Member("c", frozenset({"t0"}), instance_id="pod-1"),
        ),
    )
    assert assign(group) == {"a": ["t0-2"], "b": ["t0-1"], "c": ["t0-0"]}


def test_member_order_compares_utf16_code_units_like_java():
    # U+1F600 is a surrogate pair (0xD83D...) in UTF-16, so Java sorts it before U+FFFF
    members = [Member("\uffff", frozenset()), Member("\U0001f600", frozenset())]
    assert [m.member_id for m in java_member_order(members)] == ["\U0001f600", "\uffff"]


def test_range_splits_each_topic_among_its_own_subscribers():
    group = Group(
        (Topic("t0", 2), Topic("t1", 2)),
        _members(("c0", ("t0",)), ("c1", ("t0", "t1")), ("c2", ("t1",))),
    )
    assert assign(group) == {"c0": ["t0-0"], "c1": ["t0-1", "t1-0"], "c2": ["t1-1"]}


def test_range_skips_topics_the_group_does_not_know():
    group = Group((Topic("t0", 2),), _members(("c0", ("t0", "gone")), ("c1", ("gone",))))
    assert assign(group) == {"c0": ["t0-0", "t0-1"], "c1": []}


def test_range_gives_nothing_to_an_empty_group():
    assert assign(Group((Topic("t0", 3),), ())) == {}


RACKS_AB = (frozenset({"a"}), frozenset({"b"}), frozenset({"a"}), frozenset({"b"}))


def test_range_hands_out_rack_local_partitions_within_the_quota():
    group = Group(
        (Topic("t0", 4, replica_racks=RACKS_AB),),
        (Member("c0", frozenset({"t0"}), rack="b"), Member("c1", frozenset({"t0"}), rack="a")),
    )
    assert assign(group) == {"c0": ["t0-1", "t0-3"], "c1": ["t0-0", "t0-2"]}


def test_range_ignores_racks_when_every_partition_is_on_every_rack():
    everywhere = (frozenset({"a", "b"}),) * 4
    group = Group(
        (Topic("t0", 4, replica_racks=everywhere),),
        (Member("c0", frozenset({"t0"}), rack="b"), Member("c1", frozenset({"t0"}), rack="a")),
    )
    assert assign(group) == {"c0": ["t0-0", "t0-1"], "c1": ["t0-2", "t0-3"]}


def test_range_ignores_racks_when_no_consumer_rack_holds_a_replica():
    group = Group(
        (Topic("t0", 4, replica_racks=RACKS_AB),),
        (Member("c0", frozenset({"t0"}), rack="x"), Member("c1", frozenset({"t0"}), rack="y")),
    )
    assert assign(group) == {"c0": ["t0-0", "t0-1"], "c1": ["t0-2", "t0-3"]}


def test_range_ignores_replica_racks_when_no_consumer_has_a_rack():
    group = Group(
        (Topic("t0", 4, replica_racks=RACKS_AB),),
        (Member("c0", frozenset({"t0"})), Member("c1", frozenset({"t0"}), rack="")),
    )
    assert assign(group) == {"c0": ["t0-0", "t0-1"], "c1": ["t0-2", "t0-3"]}


def test_range_keeps_balance_before_rack_locality():
    # three of four partitions live on rack a; the consumer on rack b still gets half
    on_a = (frozenset({"a"}), frozenset({"a"}), frozenset({"a"}), frozenset({"b"}))
    group = Group(
        (Topic("t0", 4, replica_racks=on_a),),
        (Member("c0", frozenset({"t0"}), rack="a"), Member("c1", frozenset({"t0"}), rack="b")),
    )
    assert assign(group) == {"c0": ["t0-0", "t0-1"], "c1": ["t0-2", "t0-3"]}


def test_range_keeps_co_partitioned_topics_together_before_racks():
    # t0 alone would give c0 partition 1 (rack b); co-partitioning with t1 wins
    t0_racks = (frozenset({"a"}), frozenset({"b"}))
    t1_racks = (frozenset({"b"}), frozenset({"a"}))
    group = Group(
        (Topic("t0", 2, replica_racks=t0_racks), Topic("t1", 2, replica_racks=t1_racks)),
        (
            Member("c0", frozenset({"t0", "t1"}), rack="b"),
            Member("c1", frozenset({"t0", "t1"}), rack="a"),
        ),
    )
    assert assign(group) == {"c0": ["t0-0", "t1-0"], "c1": ["t0-1", "t1-1"]}


def test_range_matches_racks_per_topic_when_topics_are_not_co_partitioned():
    t0_racks = (frozenset({"a"}), frozenset({"b"}))
    group = Group(
        (Topic("t0", 2, replica_racks=t0_racks), Topic("t1", 3)),
        (
            Member("c0", frozenset({"t0", "t1"}), rack="b"),
            Member("c1", frozenset({"t0", "t1"}), rack="a"),
        ),
    )
    assert assign(group) == {"c0": ["t0-1", "t1-0", "t1-1"], "c1": ["t0-0", "t1-2"]}


@settings(max_examples=60, deadline=None, database=None)
@given(group=groups(racks=True))
def test_range_keeps_per_topic_balance_with_racks(group: Group):
    assignment = RangeAssignor().assign(group)
    for topic in group.topics:
        subscribers = [m.member_id for m in group.members if topic.name in m.topics]
        if not subscribers:
            continue
        counts = sorted(
            sum(1 for tp in assignment.partitions[member_id] if tp.topic == topic.name)
            for member_id in subscribers
        )
        per_member, extra = divmod(topic.num_partitions, len(subscribers))
        assert counts == [per_member] * (len(subscribers) - extra) + [per_member + 1] * extra


def _range_as_java_loops(group: Group) -> dict[str, set[tuple[str, int]]]:
    """Java's RangeAssignor as plain loops over lists (quadratic, for small groups only)."""
    ordered = java_member_order(group.members)
    rack_of = {member.member_id: member.rack or None for member in ordered}
    result: dict[str, set[tuple[str, int]]] = {member.member_id: set() for member in group.members}
    states = []
    for topic in group.topics:
        consumers = [m.member_id for m in ordered if topic.name in m.topics]
        if not consumers:
            continue
        count = topic.num_partitions
        consumer_racks = {rack_of[c] for c in consumers} - {None}
        partition_racks = None
        if consumer_racks:
            partition_racks = list(topic.replica_racks or [frozenset()] * count)
        all_racks = frozenset().union(*partition_racks) if partition_racks else frozenset()
        states.append(
            {
                "topic": topic.name,
                "consumers": consumers,
                "racks": partition_racks,
                "unassigned": list(range(count)),
                "count": dict.fromkeys(consumers, 0),
                "per": count // len(consumers),
                "extra": count % len(consumers),
                "needs": bool(consumer_racks)
                and not consumer_racks.isdisjoint(all_racks)
                and any(racks != all_racks for racks in partition_racks or []),
            }
        )

    def quota(state, consumer):
        return max(0, state["per"] + (state["extra"] > 0) - state["count"][consumer])

    def give(state, consumer, partitions):
        result[consumer].update((state["topic"], p) for p in partitions)
        state["count"][consumer] += len(partitions)
        if state["count"][consumer] > state["per"]:
            state["extra"] -= 1
        for partition in partitions:
            state["unassigned"].remove(partition)

    def matches(state, consumer, partition):
        rack = rack_of[consumer]
        return rack is None or (state["racks"] is not None and rack in state["racks"][partition])

    def ranges(state, may_assign):
        for consumer in state["consumers"]:
            if not state["unassigned"]:
                break
            fits = [p for p in state["unassigned"] if may_assign(state, consumer, p)]
            if fits[: quota(state, consumer)]:
                give(state, consumer, fits[: quota(state, consumer)])

    if any(state["needs"] for state in states):
        grouped: dict[tuple, dict[int, list]] = {}
        for state in states:
            size = len(state["racks"]) if state["racks"] is not None else 0
            key = tuple((c, rack_of[c]) for c in state["consumers"])
            grouped.setdefault(key, {}).setdefault(size, []).append(state)
        for by_size in grouped.values():
            for size, together in by_size.items():
                if len(together) == 1:
                    if together[0]["needs"]:
                        ranges(together[0], matches)
                    continue
                remaining = list(together[0]["consumers"])
                for partition in range(size):
                    chosen = next(
                        (
                            c
                            for c in remaining
                            if all(matches(s, c, partition) and quota(s, c) > 0 for s in together)
                        ),
                        None,
                    )
                    if chosen is None:
                        continue
                    for state in together:
                        give(state, chosen, [partition])
                    if all(quota(state, chosen) == 0 for state in together):
                        remaining.remove(chosen)
                        if not remaining:
                            break
    for state in states:
        ranges(state, lambda state, consumer, partition: True)
    return result


@settings(max_examples=200, deadline=None, database=None)
@given(group=groups(racks=True, max_topics=6, max_partitions=4, subscription="uniform"))
def test_range_agrees_with_javas_loops_on_co_partitioned_topics(group: Group):
    ours = RangeAssignor().assign(group).partitions
    assert {member: set(tps) for member, tps in ours.items()} == _range_as_java_loops(group)


@settings(max_examples=200, deadline=None, database=None)
@given(group=groups(racks=True))
def test_range_agrees_with_javas_loops_on_random_groups(group: Group):
    ours = RangeAssignor().assign(group).partitions
    assert {member: set(tps) for member, tps in ours.items()} == _range_as_java_loops(group)


def test_members_sharing_an_instance_id_keep_javas_hashmap_order():
    # Java's stable sort compares instance ids only: a shared one keeps the HashMap's bucket
    # order of member ids (slot 14 before slot 15 in a map of 16 buckets), not the id order
    shared = [
        Member("consumer-22-0013", frozenset({"t"}), instance_id="pod"),
        Member("consumer-22-0014", frozenset({"t"}), instance_id="pod"),
        Member("consumer-22-0001", frozenset({"t"}), instance_id="other"),
    ]
    assert [member.member_id for member in java_member_order(shared)] == [
        "consumer-22-0001",
        "consumer-22-0014",
        "consumer-22-0013",
    ]


def _java_range_assign(group: Group) -> dict[str, list[str]]:
    """Kafka's ``RangeAssigner.assignPartitions`` (KIP-881) transcribed statement by statement,
    partition lists and all, as the reference the assignor's shortcuts must agree with."""
    ordered = java_member_order(group.members)
    rack_of = {member.member_id: member.rack or None for member in ordered}
    states = []
    for topic in group.topics:
        consumers = [member.member_id for member in ordered if topic.name in member.topics]
        if not consumers or topic.num_partitions == 0:
            continue
        count = topic.num_partitions
        known = {rack_of[consumer] for consumer in consumers} - {None}
        partition_racks: list[frozenset[str]] = []
        if known:
            partition_racks = [
                topic.replica_racks[p] if topic.replica_racks is not None else frozenset()
                for p in range(count)
            ]
        all_racks = frozenset().union(*partition_racks)
        states.append(
            {
                "topic": topic.name,
                "consumers": consumers,
                "unassigned": list(range(count)),
                "assigned": dict.fromkeys(consumers, 0),
                "per": count // len(consumers),
                "extra": count % len(consumers),
                "racks": partition_racks,
                "needs": bool(known)
                and not known.isdisjoint(all_racks)
                and not all(racks == all_racks for racks in partition_racks),
            }
        )
    result: dict[str, list[str]] = {member.member_id: [] for member in group.members}

    def max_assignable(state, consumer):
        return max(0, state["per"] + (state["extra"] > 0) - state["assigned"][consumer])

    def racks_match(state, consumer, partition):
        rack = rack_of[consumer]
        return rack is None or rack in state["racks"][partition]

    def give(state, consumer, partitions):
        result[consumer] += [f"{state['topic']}-{p}" for p in partitions]
        state["assigned"][consumer] += len(partitions)
        if state["assigned"][consumer] > state["per"]:
            state["extra"] -= 1
        state["unassigned"] = [p for p in state["unassigned"] if p not in partitions]

    def assign_ranges(state, may_assign):
        for consumer in state["consumers"]:
            if not state["unassigned"]:
                break
            limit = max_assignable(state, consumer)
            chosen = [p for p in state["unassigned"] if may_assign(state, consumer, p)][:limit]
            if chosen:
                give(state, consumer, chosen)

    if any(state["needs"] for state in states):
        by_consumers: dict[tuple[str, ...], dict[int, list[dict]]] = {}
        for state in states:
            by_count = by_consumers.setdefault(tuple(state["consumers"]), {})
            by_count.setdefault(len(state["racks"]), []).append(state)
        for consumers, by_count in by_consumers.items():
            for count, together in by_count.items():
                if len(together) == 1:
                    if together[0]["needs"]:
                        assign_ranges(together[0], racks_match)
                    continue
                remaining = list(consumers)
                for p in range(count):
                    match = next(
                        (
                            c
                            for c in remaining
                            if all(
                                racks_match(t, c, p) and max_assignable(t, c) > 0 for t in together
                            )
                        ),
                        None,
                    )
                    if match is None:
                        continue
                    for state in together:
                        give(state, match, [p])
                    if all(max_assignable(state, match) == 0 for state in together):
                        remaining.remove(match)
                        if not remaining:
                            break
    for state in states:
        assign_ranges(state, lambda state, consumer, partition: True)
    return {
        member: sorted(partitions, key=lambda tp: (tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])))
        for member, partitions in result.items()
    }


@settings(max_examples=400, deadline=None)
@given(groups(racks=True, max_members=12, max_partitions=12))
def test_rack_aware_range_agrees_with_javas_assigner_transcribed(group: Group) -> None:
    assert assign(group) == _java_range_assign(group)


@settings(max_examples=300, deadline=None)
@given(groups(racks=True, subscription="uniform", max_members=9, max_partitions=3))
def test_co_partitioned_topics_agree_with_javas_assigner_transcribed(group: Group) -> None:
    # up to 3 partitions per topic: topics of equal size, assigned together, are common
    assert assign(group) == _java_range_assign(group)
