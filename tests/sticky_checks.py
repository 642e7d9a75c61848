"""Checks shared by the sticky and cooperative-sticky tests: validity, Kafka's balance rule,
valid claims and moved partitions, written independently of the engine they check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assignors.model import Group, Member, Topic, TopicPartition


def group_from_request(request: Mapping[str, Any]) -> Group:
    """A :class:`Group` from an assignment-request JSON object (spec/assignors.md)."""
    topics = tuple(
        Topic(
            topic["name"],
            topic["partitions"],
            tuple(frozenset(racks) for racks in topic["racks"]) if topic.get("racks") else None,
            tuple(topic["weights"]) if topic.get("weights") else None,
        )
        for topic in request["topics"]
    )
    members = tuple(
        Member(
            member_id=member["id"],
            topics=frozenset(member["topics"]),
            owned_partitions=tuple(TopicPartition(t, p) for t, p in member.get("owned", ())),
            generation=member.get("generation", -1),
            rack=member.get("rack"),
            instance_id=member.get("instance_id"),
        )
        for member in request["members"]
    )
    return Group(topics=topics, members=members)


def make_member(
    member_id: str,
    topics: str,
    owned: tuple[tuple[str, int], ...] = (),
    generation: int = -1,
    **extra: object,
) -> Member:
    """A member of comma-separated ``topics`` owning ``owned`` as (topic, partition) pairs."""
    return Member(
        member_id,
        frozenset(topics.split(",")),
        tuple(TopicPartition(*tp) for tp in owned),
        generation,
        **extra,  # type: ignore[arg-type]
    )


def eligible(group: Group) -> dict[str, set[TopicPartition]]:
    """Member -> the existing partitions it subscribes to."""
    return {
        member.member_id: {
            TopicPartition(topic, partition)
            for topic in member.topics
            for partition in range(group.num_partitions(topic))
        }
        for member in group.members
    }


def validity_problems(
    group: Group,
    partitions: Mapping[str, Sequence[TopicPartition]],
    withheld: Sequence[TopicPartition] = (),
) -> list[str]:
    """Empty when every subscribed partition is assigned (or withheld) exactly once, only to a
    member that subscribes to it."""
    problems = []
    allowed = eligible(group)
    seen: dict[TopicPartition, str] = {}
    for member_id, tps in partitions.items():
        for tp in tps:
            if tp in seen:
                problems.append(f"{tp} given to {seen[tp]} and {member_id}")
            seen[tp] = member_id
            if tp not in allowed.get(member_id, set()):
                problems.append(f"{tp} given to non-subscriber {member_id}")
    for tp in withheld:
        if tp in seen:
            problems.append(f"{tp} both withheld and given to {seen[tp]}")
        seen[tp] = "(withheld)"
    missing = set(group.subscribed_partitions()) - set(seen)
    if missing:
        problems.append(f"unassigned: {sorted(missing)[:5]}")
    if set(partitions) != {member.member_id for member in group.members}:
        problems.append("members missing from the assignment")
    return problems


def balance_problems(group: Group, partitions: Mapping[str, Sequence[TopicPartition]]) -> list[str]:
    """Kafka's rule: when two members' counts differ by more than one, the fuller one holds no
    partition of a topic the emptier one subscribes to."""
    problems = []
    topics_held = {member_id: {tp.topic for tp in tps} for member_id, tps in partitions.items()}
    subscribed = {member.member_id: member.topics for member in group.members}
    for fuller, fuller_tps in partitions.items():
        for emptier, emptier_tps in partitions.items():
            if len(fuller_tps) > len(emptier_tps) + 1:
                shared = topics_held[fuller] & subscribed[emptier]
                if shared:
                    problems.append(
                        f"{fuller} holds {len(fuller_tps)}, {emptier} holds {len(emptier_tps)}, "
                        f"both take {sorted(shared)}"
                    )
    return problems


def valid_claims(group: Group) -> dict[TopicPartition, str]:
    """Partition -> its valid previous owner: present, subscribed, partition exists, highest
    generation; a tie in the highest generation leaves the partition without one."""
    allowed = eligible(group)
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in group.members:
        for tp in member.owned_partitions:
            if tp not in allowed[member.member_id]:
                continue
            generation, claimants = best.get(tp, (member.generation, []))
            if member.generation > generation:
                best[tp] = (member.generation, [member.member_id])
            elif member.generation == generation:
                best[tp] = (generation, [*claimants, member.member_id])
    return {tp: claimants[0] for tp, (_, claimants) in best.items() if len(claimants) == 1}


def moved(group: Group, partitions: Mapping[str, Sequence[TopicPartition]]) -> set[TopicPartition]:
    """Validly claimed partitions not given to their claimant (spec/traces.md ``moved``; for a
    cooperative round, withheld partitions count as moved)."""
    owner = {tp: member_id for member_id, tps in partitions.items() for tp in tps}
    return {tp for tp, claimant in valid_claims(group).items() if owner.get(tp) != claimant}


def over_share_ok(group: Group, partitions: Mapping[str, Sequence[TopicPartition]]) -> list[str]:
    """Stickiness: a member that lost a valid claim must not be below the count of a member that
    could have taken one partition less (i.e. losing the claim must have been needed for
    balance). Checked on uniform subscriptions, where the fair share is exact."""
    problems = []
    claims = valid_claims(group)
    counts = {member_id: len(tps) for member_id, tps in partitions.items()}
    active = [m.member_id for m in group.members if eligible(group)[m.member_id]]
    total = len(group.subscribed_partitions())
    if not active:
        return problems
    ceiling = -(-total // len(active))
    for tp in moved(group, partitions):
        loser = claims[tp]
        if counts[loser] < ceiling - 1 or counts[loser] > ceiling:
            problems.append(f"{tp} moved away from {loser}, which holds {counts[loser]}")
        claimed_by_loser = sum(1 for owner in claims.values() if owner == loser)
        if counts[loser] >= claimed_by_loser:
            problems.append(f"{tp} moved away from {loser} although it kept room for it")
    return problems


def considered_loads(group: Group, partitions: Mapping[str, Sequence[TopicPartition]]) -> list[int]:
    """Partition counts of the members subscribed to some existing partition (scoring's
    ``min_load``/``max_load`` population)."""
    return [
        len(partitions.get(member.member_id, ()))
        for member in group.members
        if any(group.num_partitions(topic) > 0 for topic in member.topics)
    ]


def completes_within(
    group: Group, partitions: Mapping[str, Sequence[TopicPartition]], low: int, high: int
) -> bool:
    """Can the subscribed partitions ``partitions`` leaves out (a cooperative round's withheld
    ones) be handed to subscribers so that every considered member holds between ``low`` and
    ``high``? A feasibility flow: missing partitions by topic -> subscribers -> sink, each
    member taking at least ``low`` minus what it holds and at most ``high`` minus that."""
    from ortools.graph.python import min_cost_flow

    given = {tp for tps in partitions.values() for tp in tps}
    missing: dict[str, int] = {}
    for tp in group.subscribed_partitions():
        if tp not in given:
            missing[tp.topic] = missing.get(tp.topic, 0) + 1
    considered = [
        (index, member)
        for index, member in enumerate(group.members)
        if any(group.num_partitions(topic) > 0 for topic in member.topics)
    ]
    topic_names = sorted(missing)
    topic_node = {name: 2 + position for position, name in enumerate(topic_names)}
    member_base = 2 + len(topic_names)
    flow = min_cost_flow.SimpleMinCostFlow()
    supplies = {0: sum(missing.values()), 1: 0}
    for name in topic_names:
        flow.add_arc_with_capacity_and_unit_cost(0, topic_node[name], missing[name], 0)
    demanded = 0
    for index, member in considered:
        held = len(partitions.get(member.member_id, ()))
        if held > high:
            return False
        lower = max(0, low - held)
        node = member_base + index
        supplies[node] = -lower
        demanded += lower
        flow.add_arc_with_capacity_and_unit_cost(node, 1, high - held - lower, 0)
        for name in topic_names:
            if name in member.topics:
                flow.add_arc_with_capacity_and_unit_cost(topic_node[name], node, missing[name], 0)
    if demanded > supplies[0]:
        return False
    supplies[1] = -(supplies[0] - demanded)
    for node, supply in supplies.items():
        flow.set_node_supply(node, supply)
    return flow.solve() == flow.OPTIMAL
