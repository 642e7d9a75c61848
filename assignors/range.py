"""The range assignor: per topic, consecutive partitions to members in order (Java parity).

For each topic, the members subscribing to it are put in order and the partitions are cut into
contiguous ranges: each member gets ``P // C``, the first ``P % C`` members one more. Two
consumers, two topics of three partitions each:

>>> from assignors.model import Group, Member, Topic, show
>>> group = Group(
...     topics=(Topic("t0", 3), Topic("t1", 3)),
...     members=(Member("c0", frozenset({"t0", "t1"})), Member("c1", frozenset({"t0", "t1"}))),
... )
>>> show(RangeAssignor().assign(group))
{'c0': ['t0-0', 't0-1', 't1-0', 't1-1'], 'c1': ['t0-2', 't1-2']}

Members are ordered by member id, except that static members (``group.instance.id``) come
first, ordered by instance id, so a static member keeps its ranges across restarts that hand it
a new member id:

>>> static = Group(
...     topics=(Topic("t0", 3), Topic("t1", 3)),
...     members=(Member("c0", frozenset({"t0", "t1"}), instance_id="pod-1"),
...              Member("c1", frozenset({"t0", "t1"}), instance_id="pod-0")),
... )
>>> show(RangeAssignor().assign(static))
{'c0': ['t0-2', 't1-2'], 'c1': ['t0-0', 't0-1', 't1-0', 't1-1']}

Racks (KIP-881) change the result only when consumer racks and replica racks are both known and
some partition is not replicated on every rack. Then a first pass hands each member, within its
per-topic quota, the partitions that have a replica on its rack; topics with the same partition
count and the same subscribers stay co-partitioned (partition ``p`` of all of them goes to one
member); a last pass gives out the rest by plain range order:

>>> racks = (frozenset({"a"}), frozenset({"b"}), frozenset({"b"}))
>>> racked = Group(
...     topics=(Topic("t0", 3, replica_racks=racks), Topic("t1", 3, replica_racks=racks)),
...     members=(Member("c0", frozenset({"t0", "t1"}), rack="b"),
...              Member("c1", frozenset({"t0", "t1"}), rack="a")),
... )
>>> show(RangeAssignor().assign(racked))
{'c0': ['t0-1', 't0-2', 't1-1', 't1-2'], 'c1': ['t0-0', 't1-0']}

Goals in priority order: per-topic balance (no member more than one partition ahead within a
topic), then co-partitioning, then rack locality; there is no stickiness beyond static ordering.

Complexity: O(M log M) to order M members plus, per topic, O(C_t) without racks and
O(C_t + P_t * R) with racks (C_t subscribers, P_t partitions, R replicas per partition): each
partition is looked at a bounded number of times, never once per member. Without consumer racks
the cut of a topic is one numpy array of owners (:meth:`Assignment.from_owners`), kept per
(partition counts, consumers) and shared by every topic when all members subscribe to all; the
rack passes are kept per replica layout and consumer racks, which replays repeat.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import numpy as np

from assignors.base import RebalanceProtocol
from assignors.java_order import java_group_permutation, subscriber_positions
from assignors.model import Assignment, Group


class RangeAssignor:
    """Kafka's ``range`` assignor, rack-aware as in KIP-881; see the module docstring."""

    name = "range"
    rebalance_protocol: RebalanceProtocol = "eager"
    reads_owned_partitions = False
    """The answer depends on subscriptions, racks and member ids only (a replay need not
    carry what each member owned into the next generation's group)."""

    def assign(self, group: Group) -> Assignment:
        members = group.members
        space = group.partition_space()
        member_ids = tuple([member.member_id for member in members])
        if not space.size:
            return Assignment.from_owners(space, member_ids, np.zeros(0, dtype=np.int64))
        # member_at: the group index of the member at each position of Java's order (None: the
        # group's own order)
        ordered, member_at = java_group_permutation(members, member_ids)
        subscriptions = [member.topics for member in ordered]
        racks = [member.rack for member in ordered]
        names = space.topic_names
        counts = space.partition_counts
        if subscriptions.count(subscriptions[0]) == len(subscriptions):
            # every member subscribes to every topic of the space: one consumer list for all,
            # and the plain range cut of every topic is one array per shape
            owners = _range_cuts(counts, len(ordered))
            plan = None
            if any(racks):
                everyone = np.arange(len(ordered), dtype=np.int64)
                plan = _plan_topics(group, names, dict.fromkeys(names, everyone), racks)
            if plan is None:
                owners = owners.copy() if member_at is None else member_at[owners]
                return Assignment.from_owners(space, member_ids, owners)
            owners = owners.copy()
            for name, offset, count in zip(names, space.offsets, counts, strict=True):
                local = plan.get(name)
                if local is not None:
                    owners[offset : offset + count] = local
            if member_at is not None:
                owners = member_at[owners]
            return Assignment.from_owners(space, member_ids, owners)
        consumers_of = subscriber_positions(ordered)
        owners = np.full(space.size, -1, dtype=np.int64)
        plan = _plan_topics(group, names, consumers_of, racks)
        for name, offset, count in zip(names, space.offsets, counts, strict=True):
            if not count:
                continue
            positions = consumers_of[name]
            local = plan.get(name) if plan is not None else None
            if local is None:
                local = _range_cuts((count,), len(positions))
            owners[offset : offset + count] = (
                positions[local] if member_at is None else member_at[positions[local]]
            )
        return Assignment.from_owners(space, member_ids, owners)


@functools.lru_cache(maxsize=1024)
def _range_cuts(counts: tuple[int, ...], num_consumers: int) -> np.ndarray:
    """The plain range cut of topics of ``counts`` partitions over the same ``num_consumers``
    consumers, one after the other: per partition, the position of its owner in the consumer
    list (each gets ``count // C`` consecutive partitions of a topic, the first ``count % C``
    one more). Kept: a replay meets the same shapes generation after generation.

    >>> _range_cuts((5, 2), 2).tolist()
    [0, 0, 0, 1, 1, 0, 1]
    """
    lengths: list[int] = []
    for count in counts:
        per_consumer, with_extra = divmod(count, num_consumers)
        lengths += [per_consumer + 1] * with_extra
        lengths += [per_consumer] * (num_consumers - with_extra)
    cut = np.repeat(
        np.arange(num_consumers * len(counts), dtype=np.int64), np.array(lengths, dtype=np.int64)
    )
    if len(counts) > 1:
        cut %= num_consumers
    cut.setflags(write=False)
    return cut


def _plan_topics(
    group: Group,
    names: Sequence[str],
    consumers_of: dict[str, np.ndarray],
    member_racks: Sequence[str | None],
) -> dict[str, np.ndarray] | None:
    """Java's rack pass (KIP-881) over the subscribed topics: for each topic it changes, its
    owners as positions into the topic's consumer list; None when no topic needs it (every
    topic is then the plain range cut).

    Topics are grouped by subscribers, then by partition count; a group of several topics is
    assigned co-partitioned, a lone topic by rack-matching ranges, provided some consumer of
    the topic has a rack."""
    if not any(member_racks):
        return None
    racks = [rack or None for rack in member_racks]  # Java ignores empty rack ids
    # per consumer list (shared arrays for topics with the same subscribers): its racks in
    # order and the set of those known
    racks_of: dict[int, tuple[tuple[str | None, ...], frozenset[str]]] = {}
    by_subscribers: dict[tuple[int, int], list[tuple[str, _Placement]]] = {}
    needed = False
    for name in names:
        topic = group.topic(name)
        assert topic is not None
        count = topic.num_partitions
        if not count:
            continue
        positions = consumers_of[name]
        found = racks_of.get(id(positions))
        if found is None:
            in_order = tuple([racks[position] for position in positions.tolist()])
            known = frozenset(in_order).difference((None,))
            found = racks_of[id(positions)] = (in_order, known)
        if not found[1]:
            continue  # Java keeps no partition racks for such topics: nothing can match
        placement = _placement_of(
            topic.replica_racks if topic.replica_racks is not None else _no_racks(count)
        )
        if not placement.spans_all and not found[1].isdisjoint(placement.all_racks):
            needed = True
        by_subscribers.setdefault((id(positions), count), []).append((name, placement))
    if not needed:
        return None
    plan: dict[str, np.ndarray] = {}
    for (key, _), topics in by_subscribers.items():
        consumer_racks = racks_of[key][0]
        if len(topics) > 1:
            local = _co_partitioned_ranges(
                tuple(placement for _, placement in topics), consumer_racks
            )
            for name, _ in topics:
                plan[name] = local
            continue
        name, placement = topics[0]
        if not placement.spans_all and not racks_of[key][1].isdisjoint(placement.all_racks):
            plan[name] = _rack_matched_ranges(placement, consumer_racks)
    return plan


class _Placement:
    """Where a topic's replicas are: ``by_rack``, rack -> the partitions (ascending) with a
    replica on it; ``all_racks``, every rack holding one; ``spans_all``, every partition has a
    replica on every one of them. Compared by identity: :func:`_rack_placement` makes one per
    distinct replica layout it keeps, and the caches of assignments built on it key on it."""

    __slots__ = ("all_racks", "by_rack", "num_partitions", "replica_racks", "spans_all")

    def __init__(self, replica_racks: tuple[frozenset[str], ...]) -> None:
        all_racks: frozenset[str] = frozenset().union(*replica_racks)
        numbers = range(len(replica_racks))
        self.replica_racks = replica_racks
        self.num_partitions = len(replica_racks)
        # per rack, one pass in C over the partitions' rack sets
        self.by_rack: dict[str, tuple[int, ...]] = {
            rack: tuple(
                itertools.compress(
                    numbers, map(frozenset.__contains__, replica_racks, itertools.repeat(rack))
                )
            )
            for rack in sorted(all_racks)
        }
        self.all_racks = all_racks
        self.spans_all = replica_racks.count(all_racks) == len(replica_racks)


@functools.lru_cache(maxsize=1024)
def _rack_placement(replica_racks: tuple[frozenset[str], ...]) -> _Placement:
    """The :class:`_Placement` of a topic's replica racks. Kept for the topics a replay meets
    again: the generations of one trace usually share their replica placement."""
    return _Placement(replica_racks)


@functools.lru_cache(maxsize=256)
def _no_racks(count: int) -> tuple[frozenset[str], ...]:
    """The replica racks of a topic of ``count`` partitions that lists none (one tuple per
    count, so :func:`_placement_of` finds its placement by identity)."""
    return (frozenset(),) * count


class _PlacementsByIdentity:
    """:func:`_rack_placement` found by the identity of the replica racks tuple first: a
    replay hands range the same :class:`~assignors.model.Topic` objects generation after
    generation (:func:`assignors.traces.replay.prepare`), whose tuples of hundreds of rack
    sets then need no hashing. Each entry holds its tuple, so an id is never reused while
    its entry is kept; at most :attr:`KEPT` entries, all dropped when full."""

    KEPT = 1024

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[tuple[frozenset[str], ...], _Placement]] = {}

    def __call__(self, replica_racks: tuple[frozenset[str], ...]) -> _Placement:
        found = self._by_id.get(id(replica_racks))
        if found is not None and found[0] is replica_racks:
            return found[1]
        placement = _rack_placement(replica_racks)
        if len(self._by_id) >= self.KEPT:
            self._by_id.clear()
        self._by_id[id(replica_racks)] = (replica_racks, placement)
        return placement

    def cache_clear(self) -> None:
        self._by_id.clear()


_placement_of = _PlacementsByIdentity()


@functools.lru_cache(maxsize=1024)
def _rack_matched_ranges(
    placement: _Placement, consumer_racks: tuple[str | None, ...]
) -> np.ndarray:
    """A lone topic's owners (indexes into its consumers, in Java order) after the rack pass
    and the range pass that follows: they depend on its replica racks and its consumers' racks
    only, so the generations of a trace that repeat both are assigned once.

    The rack pass: each consumer in order takes, within its quota, the first free partitions
    with a replica on its rack (a consumer without a rack takes any). The quota is Java's
    ``maxAssignable``: ``P // C``, plus one while fewer than ``P % C`` consumers took more.

    >>> racks = (frozenset({"a"}), frozenset({"b"}), frozenset({"b"}))
    >>> _rack_matched_ranges(_rack_placement(racks), ("b", "a")).tolist()
    [1, 0, 0]
    """
    num_partitions = placement.num_partitions
    num_consumers = len(consumer_racks)
    per_consumer, remaining = divmod(num_partitions, num_consumers)
    owner = [-1] * num_partitions
    counts = [0] * num_consumers
    # per rack, where its walk stopped: the partitions before were taken or looked at
    walks = {rack: iter(candidates) for rack, candidates in placement.by_rack.items()}
    free = 0  # every partition below is taken (where consumers without a rack look first)
    left = num_partitions
    for index, rack in enumerate(consumer_racks):
        limit = per_consumer + 1 if remaining > 0 else per_consumer
        if not limit:
            break  # no quota left for anyone
        taken = 0
        if rack is None:
            while free < num_partitions:
                if owner[free] < 0:
                    owner[free] = index
                    taken += 1
                    if taken == limit:
                        free += 1
                        break
                free += 1
        else:
            walk = walks.get(rack)
            if walk is None:
                continue
            for partition in walk:
                if owner[partition] < 0:
                    owner[partition] = index
                    taken += 1
                    if taken == limit:
                        break
        if taken:
            counts[index] = taken
            if taken > per_consumer:
                remaining -= 1
            left -= taken
            if not left:
                break
    if left:
        _range_pass(owner, counts, per_consumer, remaining)
    return _frozen(owner)


@functools.lru_cache(maxsize=256)
def _co_partitioned_ranges(
    placements: tuple[_Placement, ...], consumer_racks: tuple[str | None, ...]
) -> np.ndarray:
    """The owners (indexes into the consumers, in Java order) of each of several topics with
    the same consumers and partition count, assigned together: partition ``p`` of all of
    them goes to the first consumer with quota left whose rack holds a replica of ``p`` in
    every one of them (or that has no rack), then the range pass gives out the rest. The
    topics' quotas move together, so they end with the same owners.

    >>> a, b = frozenset({"a"}), frozenset({"b"})
    >>> _co_partitioned_ranges(
    ...     (_rack_placement((a, b, b)), _rack_placement((a, b, a))), ("b", "a")
    ... ).tolist()
    [1, 0, 0]
    """
    num_partitions = placements[0].num_partitions
    num_consumers = len(consumer_racks)
    per_consumer, remaining = divmod(num_partitions, num_consumers)
    owner = [-1] * num_partitions
    counts = [0] * num_consumers
    queues: dict[str | None, list[int]] = {}
    for index, rack in enumerate(consumer_racks):
        queues.setdefault(rack, []).append(index)
    heads = dict.fromkeys(queues, 0)
    common = [
        frozenset.intersection(*racks)
        for racks in zip(*(placement.replica_racks for placement in placements), strict=True)
    ]
    left = num_consumers
    for partition, partition_racks in enumerate(common):
        ceiling = per_consumer + 1 if remaining > 0 else per_consumer
        best = -1
        for rack in (None, *partition_racks):
            queue = queues.get(rack)
            if queue is None:
                continue
            head = heads[rack]
            # quotas only shrink, so a consumer skipped once stays skipped
            while head < len(queue) and counts[queue[head]] >= ceiling:
                head += 1
            heads[rack] = head
            if head < len(queue) and (best < 0 or queue[head] < best):
                best = queue[head]
        if best >= 0:
            owner[partition] = best
            count = counts[best] = counts[best] + 1
            if count > per_consumer:
                remaining -= 1
            if count >= ceiling:
                left -= 1
                if not left:
                    break
    if -1 in owner:
        _range_pass(owner, counts, per_consumer, remaining)
    return _frozen(owner)


def _range_pass(owner: list[int], counts: list[int], per_consumer: int, remaining: int) -> None:
    """Java's last pass after the rack pass: each consumer in order takes, within its quota,
    the first partitions nobody owns yet (``owner[p] == -1``)."""
    free = [partition for partition, found in enumerate(owner) if found < 0]
    given = 0
    # only a consumer below ``per_consumer + 1`` can have quota left
    short = [(index, count) for index, count in enumerate(counts) if count <= per_consumer]
    for index, count in short:
        limit = per_consumer + (1 if remaining > 0 else 0) - count
        if limit <= 0:
            continue
        chunk = free[given : given + limit]
        for partition in chunk:
            owner[partition] = index
        given += len(chunk)
        if count + len(chunk) > per_consumer:
            remaining -= 1
        if given >= len(free):
            break


def _frozen(owner: list[int]) -> np.ndarray:
    made = np.array(owner, dtype=np.int64)
    made.setflags(write=False)
    return made
