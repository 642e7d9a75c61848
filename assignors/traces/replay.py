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
from functools import partial
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from assignors import registry
from assignors.base import Assignor, RebalanceProtocol
from assignors.model import (
    NO_GENERATION,
    Assignment,
    Group,
    Member,
    MemberColumns,
    OwnedPartitions,
    PartitionSpace,
    Topic,
    TopicPartition,
    no_cycle_collection,
    rejoin,
)
from assignors.traces.format import Generation, Trace, TraceMember
from assignors.traces.reconcile import (
    ServerSideAssignor,
    is_server_side,
    reconcile_generation,
    with_reconciliation,
)
from assignors.traces.scoring import (
    CarriedInto,
    GenerationShape,
    PreviousOwners,
    ScoreRow,
    ShapeCache,
    score_generation,
    score_owners,
)

RECORDED = "recorded"
"""The pseudo-assignor that scores what the real group assigned (the trace's `assigned`)."""

MAX_ROUNDS = 5


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


class _Step(NamedTuple):
    """One generation's parts that every assignor replayed over the trace shares: built once
    per trace (:func:`prepare`), so a replay of several assignors sorts, checks and measures
    each generation once.

    ``members``: the trace's members sorted by member id, ``member_identities`` their
    identities; ``carries[i]``: the code (into :attr:`Prepared.identities`) of member ``i``'s
    identity when member ``i`` speaks for it (the greatest member id among those sharing it), else
    -1, and one more entry, -1, so that an owner array's -1 (nobody) indexes it to no
    identity; ``first_of_code[c]``: the position among ``members`` of the first member with
    identity ``c`` (the order a carried-forward assignment lists identities in), -1 when
    absent, and the same trailing -1;
    ``speaker_of_code[c]``: the member speaking for identity ``c``, -1 when absent;
    ``codes[i]``: the code of member ``i``'s identity; ``dropped``: the partitions of the
    previous generation's space that still exist here but lie outside this one's space (a topic
    nobody subscribes to any more), None when there are none;
    ``kept_topics``: every topic of the previous generation is still here, so nothing it owned
    stopped existing; ``current``/``weight``: each partition of the previous generation's
    partition space as an index of this one's (-1 gone; the shape's own ``partition_indexes``
    when the spaces are alike) and its weight here; ``carried``:
    what scoring reads of ``current`` (:class:`~assignors.traces.scoring.CarriedInto`), made
    once for every assignor.
    """

    generation: Generation
    topics: tuple[Topic, ...]
    topic_by_name: dict[str, Topic]
    members: tuple[TraceMember, ...]
    member_identities: tuple[str, ...]
    identities: frozenset[str]
    counts: dict[str, int]
    shape: GenerationShape
    interval_ms: int | None
    carries: np.ndarray
    codes: np.ndarray
    first_of_code: np.ndarray
    speaker_of_code: np.ndarray
    kept_topics: bool
    current: np.ndarray | None
    weight: np.ndarray | None
    dropped: np.ndarray | None
    carried: CarriedInto | None


class Prepared(NamedTuple):
    """A trace's generations as :class:`_Step` values, and every identity it names."""

    trace: Trace
    steps: tuple[_Step, ...]
    identities: tuple[str, ...]
    rejoins: dict[int, _Rejoin]
    """Per step position, its :class:`_Rejoin`, made on first use (only assignors that read
    owned partitions need them) and then shared by every assignor replayed over the trace."""


def prepare(trace: Trace) -> Prepared:
    """What :func:`replay_with` needs of ``trace`` whatever the assignor (pass it to replay
    several assignors over one trace without doing this again). Its many small objects hold no
    reference cycles: they are made with the cycle collector paused
    (:func:`~assignors.model.no_cycle_collection`)."""
    with no_cycle_collection():
        return _prepare(trace)


def _prepare(trace: Trace) -> Prepared:
    code_of: dict[str, int] = {}
    for generation in trace.generations:
        for member in generation.members:
            code_of.setdefault(
                member.member_id if member.instance_id is None else member.instance_id,
                len(code_of),
            )
    identities = tuple(code_of)
    num_identities = len(identities)
    cache = ShapeCache()
    # a member that stays in the group from one generation to the next is the same Member
    made_members: dict[tuple[str, frozenset[str], str | None, str | None], Member] = {}
    steps: list[_Step] = []
    previous: _Step | None = None
    previous_timestamp: int | None = None
    by_name, by_member_id = attrgetter("name"), attrgetter("member_id")
    # a topic with replica racks equal to one an earlier generation listed is that same
    # object: range keeps what it derives from a topic's replica racks and finds it by identity
    seen_topics: dict[Topic, Topic] = {}

    def _same_as_before(topic: Topic) -> Topic:
        if topic.replica_racks is None:
            return topic
        try:
            return seen_topics.setdefault(topic, topic)
        except TypeError:  # a field that is not hashable (never from a trace reader)
            return topic

    for generation in trace.generations:
        topics = tuple(sorted(map(_same_as_before, generation.topics), key=by_name))
        topic_by_name = {topic.name: topic for topic in topics}
        members = tuple(sorted(generation.members, key=by_member_id))
        first_members = []
        identities_here = []
        for member in members:
            member_id, instance_id = member.member_id, member.instance_id
            identities_here.append(member_id if instance_id is None else instance_id)
            key = (member_id, member.topics, member.rack, instance_id)
            made = made_members.get(key)
            if made is None:
                made = made_members[key] = Member.checked(
                    member_id, member.topics, (), NO_GENERATION, member.rack, instance_id
                )
            first_members.append(made)
        member_identities = tuple(identities_here)
        group = Group.checked(topics, tuple(first_members), topic_by_name)
        # the space an earlier generation numbered the same way is shared, with its objects
        shape = GenerationShape.of(group, cache, member_identities)
        member_codes = [code_of[name] for name in member_identities]
        speaker_list = [-1] * num_identities
        first_list = [-1] * num_identities
        for index, code in enumerate(member_codes):
            if first_list[code] < 0:
                first_list[code] = index
            speaker_list[code] = index
        carries_list = [-1] * (len(members) + 1)
        for code, index in enumerate(speaker_list):
            if index >= 0:
                carries_list[index] = code
        current = weight = dropped = None
        kept_topics = False
        if previous is not None:
            kept_topics = all(name in topic_by_name for name in previous.topic_by_name)
            current, weight = _carried_into(previous.shape.space, shape, topic_by_name)
            dropped = _dropped(previous.shape.space, shape.space, topic_by_name)
        steps.append(
            _Step(
                generation=generation,
                topics=topics,
                topic_by_name=topic_by_name,
                members=members,
                member_identities=member_identities,
                identities=frozenset(member_identities),
                counts={topic.name: topic.num_partitions for topic in topics},
                shape=shape,
                interval_ms=_interval_ms(previous_timestamp, generation.timestamp_ms),
                carries=np.asarray(carries_list, dtype=np.int64),
                codes=np.asarray(member_codes, dtype=np.int64),
                first_of_code=np.asarray([*first_list, -1], dtype=np.int64),
                speaker_of_code=np.asarray(speaker_list, dtype=np.int64),
                kept_topics=kept_topics,
                current=current,
                weight=weight,
                dropped=dropped,
                carried=None if current is None else CarriedInto.of(shape, current),
            )
        )
        previous, previous_timestamp = steps[-1], generation.timestamp_ms
    return Prepared(trace, tuple(steps), identities, {})


def share_owned_parts(prepared: Prepared) -> None:
    """Make now what the assignors that read owned partitions (the array assignors) share
    over a trace and would otherwise make on first use: each generation's layout of its group
    (:func:`~assignors.arrays.share_layout`) and what carrying owner arrays into it takes. A
    benchmark calls this to time those apart from each assignor's own work."""
    from assignors.arrays import share_layout

    for position, step in enumerate(prepared.steps):
        share_layout(step.shape.group)
        if position:
            _rejoin_of(prepared, position)


class _Rejoin(NamedTuple):
    """What :func:`_group_from_owners` needs of a step beyond :class:`_Step`, relative to the
    step before it (:func:`_rejoin_of`).

    ``rejoining[i]``: the code of member ``i``'s identity when that identity was in the
    previous generation (it owns what its identity's speaker held), else -1;
    ``taker[m]``: the member here that owns what member ``m`` of the previous generation held
    (-1 nobody; one more entry, -1, for an owner array's -1), None when two members here
    rejoin with one identity (both own what it held); ``gone``: the previous generation's
    partitions that no longer exist (``current`` -1), None when none; ``member_bounds``:
    0 to the number of members, where each member's run of claims is looked up;
    ``member_columns``: the members' ids, topics, racks and instance ids, column by column;
    ``generations[i]``: the generation member ``i`` owned its partitions in (the previous one
    when it was there, else -1).
    """

    rejoining: tuple[int, ...]
    taker: np.ndarray | None
    gone: np.ndarray | None
    member_bounds: np.ndarray
    member_columns: MemberColumns
    generations: tuple[int, ...]


def _rejoin_of(prepared: Prepared, position: int) -> _Rejoin:
    """The :class:`_Rejoin` of step ``position`` (not the first), made once per trace."""
    found = prepared.rejoins.get(position)
    if found is not None:
        return found
    step, previous = prepared.steps[position], prepared.steps[position - 1]
    before = previous.identities
    rejoining = [
        code if identity in before else -1
        for identity, code in zip(step.member_identities, step.codes.tolist(), strict=True)
    ]
    # who here owns what each previous member held: only when no two members here rejoin with
    # one identity (then each previous partition has at most one taker)
    taker_of_code = [-1] * len(prepared.identities)
    for index, code in enumerate(rejoining):
        if code >= 0:
            taker_of_code[code] = index if taker_of_code[code] < 0 else -2
    taker = None
    if -2 not in taker_of_code:
        taker = np.asarray(
            [-1 if code < 0 else taker_of_code[code] for code in previous.carries.tolist()],
            dtype=np.int64,
        )
    owned_in = previous.generation.generation
    gone = None
    if step.current is not None and step.current is not step.shape.partition_indexes:
        missing = (step.current < 0).nonzero()[0]
        gone = missing if missing.size else None
    made = prepared.rejoins[position] = _Rejoin(
        rejoining=tuple(rejoining),
        taker=taker,
        gone=gone,
        member_bounds=np.arange(len(rejoining) + 1, dtype=np.int64),
        member_columns=_columns(step.members),
        generations=tuple([NO_GENERATION if code < 0 else owned_in for code in rejoining]),
    )
    return made


def _columns(members: Sequence[TraceMember]) -> MemberColumns:
    """The members' ids, topics, racks and instance ids, column by column."""
    if not members:
        return (), (), (), ()
    rows = [
        (member.member_id, member.topics, member.rack, member.instance_id) for member in members
    ]
    ids, topics, racks, instance_ids = zip(*rows, strict=True)
    return ids, topics, racks, instance_ids


def _carried_into(
    before: PartitionSpace, shape: GenerationShape, topic_by_name: Mapping[str, Topic]
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each partition of ``before`` as an index of ``shape``'s space (-1: not there), and its
    weight in this generation's topics (0.0 without one; None when no topic has weights).
    When the spaces are alike, the indexes are the shape's own ``partition_indexes``."""
    now = shape.space
    weighted = any(topic.weights is not None for topic in topic_by_name.values())
    alike = before is now or before == now
    if not weighted and alike:
        return shape.partition_indexes, None
    current_parts, weight_parts = [], []
    offset_now = dict(zip(now.topic_names, now.offsets, strict=True))
    count_now = dict(zip(now.topic_names, now.partition_counts, strict=True))
    for name, count in zip(before.topic_names, before.partition_counts, strict=True):
        if not alike:
            numbers = np.arange(count, dtype=np.int64)
            offset = offset_now.get(name)
            if offset is None:
                current_parts.append(np.full(count, -1, dtype=np.int64))
            else:
                current_parts.append(np.where(numbers < count_now[name], offset + numbers, -1))
        if weighted:
            topic = topic_by_name.get(name)
            values = np.zeros(count)
            if topic is not None and topic.weights is not None:
                known = min(count, len(topic.weights))
                values[:known] = topic.weights[:known]
            weight_parts.append(values)
    if alike:
        current = shape.partition_indexes
    elif current_parts:
        current = np.concatenate(current_parts)
    else:
        current = np.zeros(0, dtype=np.int64)
    if not weighted:
        return current, None
    return current, np.concatenate(weight_parts) if weight_parts else np.zeros(0)


def _dropped(
    before: PartitionSpace, now: PartitionSpace, topic_by_name: Mapping[str, Topic]
) -> np.ndarray | None:
    """The partitions of ``before`` that exist among ``topic_by_name`` but not in ``now`` (their
    topic left the partition space: nobody subscribes to it), as indexes of ``before``; None
    when there are none."""
    parts = [
        np.arange(offset, offset + min(count, topic.num_partitions), dtype=np.int64)
        for name, offset, count in zip(
            before.topic_names, before.offsets, before.partition_counts, strict=True
        )
        if name not in now.topic_names and (topic := topic_by_name.get(name)) is not None
    ]
    dropped = np.concatenate(parts) if parts else None
    return dropped if dropped is not None and dropped.size else None


def _group_at(
    step: _Step,
    owned_by_identity: Mapping[str, tuple[TopicPartition, ...]],
    previous: _Step | None,
    checked: bool,
) -> Group:
    """Step 1 of the replay: members with their subscriptions and what they owned before (by
    identity, when present in the previous generation). ``checked``: the owned partitions came
    from an array assignment of the previous step, so they are sorted and distinct."""
    if previous is None:
        return step.shape.group
    previous_generation = previous.generation.generation
    previous_identities = previous.identities
    counts = step.counts
    members = []
    for member, identity in zip(step.members, step.member_identities, strict=True):
        owned: tuple[TopicPartition, ...] = ()
        present_before = identity in previous_identities
        if present_before:
            owned = owned_by_identity.get(identity, ())
            if not (checked and step.kept_topics):
                # what still exists (a topic may have been deleted or shrunk since)
                owned = tuple(tp for tp in owned if 0 <= tp.partition < counts.get(tp.topic, 0))
        generation = previous_generation if present_before else -1
        if checked:
            members.append(
                Member.checked(
                    member.member_id,
                    member.topics,
                    owned,
                    generation,
                    member.rack,
                    member.instance_id,
                )
            )
        else:
            members.append(
                Member(
                    member_id=member.member_id,
                    topics=member.topics,
                    owned_partitions=owned,
                    generation=generation,
                    rack=member.rack,
                    instance_id=member.instance_id,
                )
            )
    return Group.checked(
        step.topics,
        tuple(members),
        step.topic_by_name,
        step.shape.space,
        step.shape.group.derived(),
    )


def _members_of(
    space: PartitionSpace, runs: np.ndarray, starts: list[int], stops: list[int], parts: _Rejoin
) -> tuple[Member, ...]:
    """The members of a group :func:`_group_from_owners` made, each owning
    ``runs[starts[i]:stops[i]]``: made when some reader of the group first asks for them."""
    member_ids, topics, racks, instance_ids = parts.member_columns
    owned = OwnedPartitions.all_checked(space, runs, starts, stops)
    return Member.all_checked(member_ids, topics, owned, parts.generations, racks, instance_ids)


def _group_from_owners(step: _Step, previous: _Step, owners: np.ndarray, parts: _Rejoin) -> Group:
    """:func:`_group_at` from the previous generation's owner array (member index per partition
    of its space): each member owns, as :class:`~assignors.model.OwnedPartitions` of this
    generation's space, what its identity's speaker held and still exists, without one
    :class:`TopicPartition` per partition. Partition spaces list topics by name, so carrying an
    ascending run of indexes into this space keeps it ascending."""
    assert step.current is not None
    current = step.current
    space = step.shape.space
    if parts.taker is not None:
        # one owner per previous partition: the members' runs, member after member, are
        # also the group's claims; a partition gone from this generation has no taker
        takers = parts.taker[owners]
        if parts.gone is not None:
            takers[parts.gone] = -1
        order = np.argsort(takers, kind="stable")
        ranked = takers[order]
        limits = np.searchsorted(ranked, parts.member_bounds).tolist()
        untaken = limits[0]
        claimers = ranked[untaken:]
        runs = (
            order[untaken:] if current is step.shape.partition_indexes else current[order[untaken:]]
        )
        runs.flags.writeable = claimers.flags.writeable = False
        starts = [limit - untaken for limit in limits]
        return Group.checked(
            step.topics,
            partial(_members_of, space, runs, starts[:-1], starts[1:], parts),
            step.topic_by_name,
            space,
            step.shape.group.derived(),
            (claimers, runs),
            parts.member_columns,
        )
    carried = previous.carries[owners]  # identity code per previous partition, -1 nobody
    kept = (carried >= 0) & (current >= 0)
    codes, indexes = carried[kept], current[kept]
    order = np.argsort(codes, kind="stable")
    runs = indexes[order]
    runs.flags.writeable = False
    bounds = np.searchsorted(codes[order], np.arange(previous.speaker_of_code.size + 1)).tolist()
    # a member rejoining with no identity of the previous generation owns the empty run
    return Group.checked(
        step.topics,
        partial(
            _members_of,
            space,
            runs,
            [bounds[code] if code >= 0 else 0 for code in parts.rejoining],
            [bounds[code + 1] if code >= 0 else 0 for code in parts.rejoining],
            parts,
        ),
        step.topic_by_name,
        space,
        step.shape.group.derived(),
        None,
        parts.member_columns,
    )


def replay_with(
    trace: Trace,
    assignor: Assignor,
    *,
    timings: bool = True,
    prepared: Prepared | None = None,
) -> list[ScoreRow]:
    """Replay ``trace`` through an assignor object (spec/traces.md, replay semantics).

    ``timings=False`` leaves ``assign_ms`` null so the rows are the same on every run.
    ``prepared`` is :func:`prepare` of ``trace``, when the caller replays it more than once.

    Each generation is scored on owner arrays (:func:`~assignors.traces.scoring.score_owners`)
    when the assignment is one owner per partition (every built-in assignor's is); otherwise,
    and in the generation after, by :func:`~assignors.traces.scoring.score_generation`.
    An assignor whose ``reads_owned_partitions`` is False (range, roundrobin) is given each
    generation's members without the partitions they owned, which it would not look at.
    A cooperative assignor with a ``follow_up(group, assignment, generation)`` method (its answer
    to :func:`~assignors.model.rejoin` of them, or None) is asked it before each follow-up
    round, whose group is then made only when that answer is None; a later follow-up is asked
    with the same ``group``, which has the rejoined group's topics and members.
    """
    if prepared is None or prepared.trace is not trace:
        prepared = prepare(trace)
    rows: list[ScoreRow] = []
    owned_by_identity: dict[str, tuple[TopicPartition, ...]] = {}
    previous_step: _Step | None = None
    previous_owners: np.ndarray | None = None
    previous_sorted = False  # the previous final assignment came from an owner array
    cooperative = assignor.rebalance_protocol == "cooperative"
    # KIP-848: the coordinator's target once, then member-by-member reconciliation
    server_side = is_server_side(assignor)
    assign = (
        assignor.target
        if server_side and isinstance(assignor, ServerSideAssignor)
        else assignor.assign
    )
    # an assignor that declares it never reads what members owned gets each generation's group
    # as is, and its answers are carried forward as owner arrays only
    carries_owned = server_side or getattr(assignor, "reads_owned_partitions", True)
    # a cooperative assignor may answer a follow-up round from the round before it:
    # ``follow_up(group, assignment, generation)`` is its answer to ``rejoin(group, assignment,
    # generation)``, or None when it must read that group
    follow_up = None if server_side else getattr(assignor, "follow_up", None)
    previous_assignment: Assignment | None = None
    by_arrays = False  # the previous generation's owners are carried as an owner array
    for position, step in enumerate(prepared.steps):
        generation = step.generation
        if carries_owned and by_arrays and previous_step is not None:
            assert previous_owners is not None and previous_assignment is not None
            dropped = step.dropped
            if dropped is None or not (previous_step.carries[previous_owners[dropped]] >= 0).any():
                group = _group_from_owners(
                    step, previous_step, previous_owners, _rejoin_of(prepared, position)
                )
            else:
                # a member still owns partitions of a topic nobody subscribes to any more,
                # outside this generation's space: carried as objects
                owned_by_identity = _owned_by_identity(
                    previous_step.generation, previous_assignment.partitions
                )
                group = _group_at(step, owned_by_identity, previous_step, previous_sorted)
        elif carries_owned:
            group = _group_at(step, owned_by_identity, previous_step, previous_sorted)
        else:
            group = step.shape.group
        base_group = group
        rounds = 0
        elapsed = 0.0
        answered: Assignment | None = None  # the next round's, when the assignor gave it
        while True:
            rounds += 1
            started = time.perf_counter()
            assignment = assign(group) if answered is None else answered
            elapsed += time.perf_counter() - started
            if server_side or not (cooperative and assignment.num_withheld) or rounds >= MAX_ROUNDS:
                break
            # the old owners revoke what was withheld and everyone rejoins with what they hold
            # now; an assignor that answers that group without it is asked first (``group``
            # then stands for it: rejoin takes only the topics and members' fields from it)
            if follow_up is not None:
                started = time.perf_counter()
                answered = follow_up(group, assignment, generation.generation)
                elapsed += time.perf_counter() - started
            if answered is None:
                group = rejoin(group, assignment, generation.generation)
        owners = step.shape.owners_of(assignment)
        scored = {
            "trace_id": trace.trace_id,
            "assignor": assignor.name,
            "generation": generation.generation,
            "protocol": assignor.rebalance_protocol,
            "rounds": rounds,
            "assign_ms": elapsed * 1000.0 if timings else None,
            "interval_ms": step.interval_ms,
        }
        if owners is not None and (previous_step is None or previous_owners is not None):
            previous = None
            if previous_step is not None:
                assert previous_owners is not None and step.current is not None
                carried = previous_step.carries[previous_owners]
                previous = PreviousOwners(
                    identity=carried,
                    current=step.current,
                    weight=step.weight,
                    carried=step.carried,
                    order=None if step.weight is None else previous_step.first_of_code[carried],
                    speaker=step.speaker_of_code,
                    identities=prepared.identities,
                )
            row = score_owners(step.shape, owners, previous, **scored)  # type: ignore[arg-type]
        else:
            previous_owner = (
                None
                if previous_step is None or previous_assignment is None
                else _owner_of(
                    _owned_by_identity(previous_step.generation, previous_assignment.partitions)
                )
            )
            row = score_generation(
                base_group,
                assignment.partitions,
                previous_owner=previous_owner,
                **scored,  # type: ignore[arg-type]
            )
        if server_side and previous_step is not None:
            reconciliation = reconcile_generation(
                generation,
                assignment.partitions,
                owned_by_identity,
                previous_step.identities,
                previous_step.generation.generation,
            )
            row = with_reconciliation(row, reconciliation, generation.topics)
        rows.append(row)
        # what members own next is carried as the owner array when there is one (the
        # coordinator's reconciliation reads it by identity as objects)
        by_arrays = owners is not None and not server_side
        if carries_owned and not by_arrays:
            # carried forward by identity, the greater member id speaking for a shared one
            final = assignment.partitions
            owned_by_identity = {
                identity: tuple(final.get(member.member_id, ()))
                for member, identity in zip(step.members, step.member_identities, strict=True)
            }
        previous_step, previous_assignment, previous_owners = step, assignment, owners
        # in this generation's own numbering: sorted, distinct partitions of its topics
        previous_sorted = owners is not None and owners is assignment.owners
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
