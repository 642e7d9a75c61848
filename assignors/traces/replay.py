"""Replay one trace through an assignor, generation by generation, and score every generation.

For each generation the group is rebuilt from the trace with what the assignor itself handed out
in the previous generation as each member's owned partitions (matched by identity: instance id,
else member id), the assignor runs (cooperative ones until nothing is withheld, at most
:data:`MAX_ROUNDS` rounds), and the final assignment is scored against the previous one.

>>> from assignors.model import Assignment
>>> from assignors.traces.format import build_trace, parse_generation
>>> def row(generation, members):
...     return {"trace_id": "g", "generation": generation,
...             "topics": [{"name": "t", "partitions": 4}],
...             "members": [{"member_id": m, "topics": ["t"]} for m in members]}
>>> trace = build_trace("g", [parse_generation(row(1, ["a", "b"]), None, 1),
...                           parse_generation(row(2, ["a", "b", "c"]), None, 2)])
>>> class FirstTakesAll:
...     name, rebalance_protocol = "first-takes-all", "eager"
...     def assign(self, group):
...         first = group.members[0].member_id
...         return Assignment.build([m.member_id for m in group.members],
...                                 {first: group.subscribed_partitions()})
>>> [(r.generation, r.max_load, r.optimal_max_load, r.moved, r.revoked)
...  for r in replay_with(trace, FirstTakesAll(), timings=False)]
[(1, 4, 2, 0, 0), (2, 4, 2, 0, 4)]
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from assignors import registry
from assignors.base import Assignor, RebalanceProtocol
from assignors.model import Group, Member, TopicPartition, rejoin
from assignors.traces.format import Generation, Trace
from assignors.traces.reconcile import (
    ServerSideAssignor,
    is_server_side,
    reconcile_generation,
    with_reconciliation,
)
from assignors.traces.scoring import ScoreRow, score_generation

RECORDED = "recorded"
"""The pseudo-assignor that scores what the real group assigned (the trace's `assigned`)."""

MAX_ROUNDS = 5


def _group_of(
    generation: Generation,
    owned_by_identity: Mapping[str, tuple[TopicPartition, ...]],
    previous_generation: int | None,
    previous_identities: frozenset[str],
) -> Group:
    """Step 1 of the replay: members with their subscriptions and what they owned before."""
    counts = {topic.name: topic.num_partitions for topic in generation.topics}
    members = []
    for member in generation.members:
        identity = member.identity
        present_before = previous_generation is not None and identity in previous_identities
        # what still exists (a topic may have been deleted or shrunk since)
        owned = tuple(
            tp
            for tp in owned_by_identity.get(identity, ())
            if 0 <= tp.partition < counts.get(tp.topic, 0)
        )
        members.append(
            Member(
                member_id=member.member_id,
                topics=member.topics,
                owned_partitions=owned if present_before else (),
                generation=previous_generation
                if present_before and previous_generation is not None
                else -1,
                rack=member.rack,
                instance_id=member.instance_id,
            )
        )
    return Group(generation.topics, tuple(members))


def _protocol_of(recorded_protocol: str | None) -> RebalanceProtocol:
    """The real group's protocol decides how `recorded` revokes: cooperative-sticky (and the
    KIP-848 consumer protocol's incremental assignors) revoke only what moves."""
    if recorded_protocol is not None and recorded_protocol.startswith("cooperative"):
        return "cooperative"
    return "eager"


def _generation_protocol(generation: Generation) -> str:
    """``consumer`` for a generation of a KIP-848 group (``group_protocol``), else the
    rebalance protocol its ``protocol`` names."""
    if generation.group_protocol == "consumer":
        return "consumer"
    return _protocol_of(generation.protocol)


def recorded_protocol(trace: Trace) -> str:
    """The protocol the real group ran: ``consumer`` when its rows say it was a KIP-848 group
    (``group_protocol``), else ``eager`` or ``cooperative`` from each generation's
    ``protocol``; ``mixed`` when its generations disagree.

    >>> from assignors.traces.format import build_trace, parse_generation
    >>> def row(generation, protocol):
    ...     return {"trace_id": "g", "generation": generation, "protocol": protocol,
    ...             "topics": [], "members": []}
    >>> cooperative = parse_generation(row(2, "cooperative-sticky"), None, 2)
    >>> recorded_protocol(build_trace("g", [cooperative]))
    'cooperative'
    >>> eager = parse_generation(row(1, "range"), None, 1)
    >>> recorded_protocol(build_trace("g", [eager, cooperative]))
    'mixed'
    """
    protocols = {_generation_protocol(generation) for generation in trace.generations}
    return protocols.pop() if len(protocols) == 1 else "mixed"


def _owned_by_identity(
    generation: Generation, partitions: Mapping[str, Sequence[TopicPartition]]
) -> dict[str, tuple[TopicPartition, ...]]:
    """Carry an assignment forward by identity. Two members claiming one identity is a broken
    group; the one with the greater member id speaks for it (as in scoring)."""
    owned: dict[str, tuple[TopicPartition, ...]] = {}
    for member in sorted(generation.members, key=lambda member: member.member_id):
        owned[member.identity] = tuple(partitions.get(member.member_id, ()))
    return owned


def _owner_of(
    owned_by_identity: Mapping[str, Sequence[TopicPartition]],
) -> dict[TopicPartition, str]:
    """Partition -> identity holding it, from the carried-forward assignment."""
    return {tp: identity for identity, tps in owned_by_identity.items() for tp in tps}


def _interval_ms(previous: int | None, current: int | None) -> int | None:
    """Milliseconds between two generations' ``timestamp_ms``; None unless both carry one."""
    return None if previous is None or current is None else current - previous


def replay_with(trace: Trace, assignor: Assignor, *, timings: bool = True) -> list[ScoreRow]:
    """Replay ``trace`` through an assignor object (spec/traces.md, replay semantics).

    ``timings=False`` leaves ``assign_ms`` null so the rows are the same on every run.
    """
    rows: list[ScoreRow] = []
    owned_by_identity: dict[str, tuple[TopicPartition, ...]] = {}
    previous_owner: dict[TopicPartition, str] | None = None
    previous_generation: int | None = None
    previous_identities: frozenset[str] = frozenset()
    previous_timestamp: int | None = None
    cooperative = assignor.rebalance_protocol == "cooperative"
    # KIP-848: the coordinator's target once, then member-by-member reconciliation
    server_side = is_server_side(assignor)
    assign = (
        assignor.target
        if server_side and isinstance(assignor, ServerSideAssignor)
        else assignor.assign
    )
    for generation in trace.generations:
        group = _group_of(generation, owned_by_identity, previous_generation, previous_identities)
        base_group = group
        rounds = 0
        elapsed = 0.0
        while True:
            rounds += 1
            started = time.perf_counter()
            assignment = assign(group)
            elapsed += time.perf_counter() - started
            if server_side or not (cooperative and assignment.withheld) or rounds >= MAX_ROUNDS:
                break
            # the old owners revoke what was withheld and everyone rejoins with what they hold now
            group = rejoin(group, assignment, generation.generation)
        final = assignment.partitions
        row = score_generation(
            base_group,
            final,
            trace_id=trace.trace_id,
            assignor=assignor.name,
            generation=generation.generation,
            previous_owner=previous_owner,
            protocol=assignor.rebalance_protocol,
            rounds=rounds,
            assign_ms=elapsed * 1000.0 if timings else None,
            interval_ms=_interval_ms(previous_timestamp, generation.timestamp_ms),
        )
        if server_side and previous_owner is not None:
            reconciliation = reconcile_generation(
                generation, final, owned_by_identity, previous_identities, previous_generation
            )
            row = with_reconciliation(row, reconciliation, generation.topics)
        rows.append(row)
        previous_timestamp = generation.timestamp_ms
        owned_by_identity = _owned_by_identity(generation, final)
        previous_owner = _owner_of(owned_by_identity)
        previous_generation = generation.generation
        previous_identities = frozenset(member.identity for member in generation.members)
    return rows


def replay_recorded(trace: Trace) -> list[ScoreRow]:
    """Score what the real group assigned (``assigned`` in the trace) as the `recorded`
    pseudo-assignor; members without ``assigned`` count as holding nothing."""
    rows: list[ScoreRow] = []
    previous_owner: dict[TopicPartition, str] | None = None
    previous_timestamp: int | None = None
    owned_by_identity: dict[str, tuple[TopicPartition, ...]] = {}
    previous_identities: frozenset[str] = frozenset()
    previous_generation: int | None = None
    for generation in trace.generations:
        group = Group(
            generation.topics,
            tuple(
                Member(
                    member.member_id,
                    member.topics,
                    rack=member.rack,
                    instance_id=member.instance_id,
                )
                for member in generation.members
            ),
        )
        partitions = {member.member_id: member.assigned or () for member in generation.members}
        consumer = generation.group_protocol == "consumer"
        row = score_generation(
            group,
            partitions,
            trace_id=trace.trace_id,
            assignor=RECORDED,
            generation=generation.generation,
            previous_owner=previous_owner,
            # the consumer protocol revokes only what moves
            protocol="cooperative" if consumer else _protocol_of(generation.protocol),
            rounds=1,
            assign_ms=None,
            interval_ms=_interval_ms(previous_timestamp, generation.timestamp_ms),
        )
        if consumer and previous_owner is not None:
            reconciliation = reconcile_generation(
                generation, partitions, owned_by_identity, previous_identities, previous_generation
            )
            row = with_reconciliation(row, reconciliation, generation.topics)
        rows.append(row)
        previous_timestamp = generation.timestamp_ms
        owned_by_identity = _owned_by_identity(generation, partitions)
        previous_owner = _owner_of(owned_by_identity)
        previous_identities = frozenset(member.identity for member in generation.members)
        previous_generation = generation.generation
    return rows


def replay(trace: Trace, assignor_name: str, *, timings: bool = True) -> list[ScoreRow]:
    """Replay ``trace`` through the assignor registered as ``assignor_name`` (or `recorded`).

    `recorded` on a trace without ``assigned`` gives no rows.
    """
    if assignor_name == RECORDED:
        return replay_recorded(trace) if trace.has_recorded_assignment() else []
    return replay_with(trace, registry.get(assignor_name), timings=timings)


def replay_assignors(trace: Trace, names: Iterable[str], timings: bool = True) -> list[ScoreRow]:
    """Rows of every named assignor for one trace, in the order the names are given."""
    rows: list[ScoreRow] = []
    for name in names:
        rows.extend(replay(trace, name, timings=timings))
    return rows
