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
the cut of a topic is one numpy fill of an owner array (:meth:`Assignment.from_owners`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from assignors.base import RebalanceProtocol
from assignors.java_order import java_group_order, subscriber_positions
from assignors.model import Assignment, Group, PartitionSpace, Topic


@dataclass(slots=True)
class _TopicState:
    """Quota bookkeeping of one topic, mirroring Java's per-topic assignment state."""

    topic: Topic
    consumers: list[int]  # member positions in Java order
    per_consumer: int
    remaining_with_extra: int
    assigned_count: dict[int, int]
    taken: bytearray
    owned: dict[int, Sequence[int]] = field(default_factory=dict)
    next_free: int = 0  # every partition below this index is taken
    # set when the topic was assigned whole (rack pass and range pass): per partition, the
    # index into `consumers` of its owner; `positions` is `consumers` as an array
    local_owners: np.ndarray | None = None
    positions: np.ndarray | None = None

    @classmethod
    def of(cls, topic: Topic, consumers: list[int]) -> _TopicState:
        count = topic.num_partitions
        return cls(
            topic=topic,
            consumers=consumers,
            per_consumer=count // len(consumers),
            remaining_with_extra=count % len(consumers),
            assigned_count=dict.fromkeys(consumers, 0),
            taken=bytearray(count),
        )

    def max_assignable(self, consumer: int) -> int:
        ceiling = self.per_consumer + (1 if self.remaining_with_extra > 0 else 0)
        return max(0, ceiling - self.assigned_count[consumer])

    def give(self, consumer: int, partitions: Sequence[int]) -> None:
        self.owned.setdefault(consumer, []).extend(partitions)  # type: ignore[attr-defined]
        for partition in partitions:
            self.taken[partition] = 1
        count = self.assigned_count[consumer] + len(partitions)
        self.assigned_count[consumer] = count
        if count > self.per_consumer:
            self.remaining_with_extra -= 1


class RangeAssignor:
    """Kafka's ``range`` assignor, rack-aware as in KIP-881; see the module docstring."""

    name = "range"
    rebalance_protocol: RebalanceProtocol = "eager"
    reads_owned_partitions = False
    """The answer depends on subscriptions, racks and member ids only (a replay need not
    carry what each member owned into the next generation's group)."""

    def assign(self, group: Group) -> Assignment:
        # member_at: the group index of the member at each position of Java's order
        ordered, member_at = java_group_order(group.members)
        racks = [member.rack or None for member in ordered]  # Java ignores empty rack ids
        subscribers = subscriber_positions(ordered)
        space = group.partition_space()
        owners = np.full(space.size, -1, dtype=np.int64)
        member_ids = tuple(member.member_id for member in group.members)
        if all(rack is None for rack in racks):
            # no consumer rack: every topic is the plain range cut, one numpy fill per topic
            for name, offset, count in zip(
                space.topic_names, space.offsets, space.partition_counts, strict=True
            ):
                consumers = subscribers.get(name)
                if consumers is not None and count > 0:
                    owners[offset : offset + count] = _range_cut(member_at[consumers], count)
            return Assignment.from_owners(space, member_ids, owners)

        states: list[_TopicState] = []
        # topics with the same subscribers share one consumer list, and its racks
        consumer_lists: dict[int, list[int]] = {}
        for topic in group.topics:
            positions = subscribers.get(topic.name)
            if positions is not None and topic.num_partitions > 0:
                consumer_list = consumer_lists.get(id(positions))
                if consumer_list is None:
                    consumer_list = consumer_lists[id(positions)] = positions.tolist()
                state = _TopicState.of(topic, consumer_list)
                state.positions = positions
                states.append(state)
        views = _ConsumerRacks(racks)
        if any(_needs_rack_matching(state, views) for state in states):
            _assign_with_rack_matching(states, racks, views)
        for state in states:
            if state.local_owners is None:
                _assign_ranges(state)
        _fill_owners(owners, space, member_at, states)
        return Assignment.from_owners(space, member_ids, owners)


def _range_cut(consumers: np.ndarray, count: int) -> np.ndarray:
    """Owners of a topic's ``count`` partitions under the plain range cut: each of the
    ``consumers`` (in order) gets ``count // C`` consecutive partitions, the first
    ``count % C`` one more.

    >>> _range_cut(np.array([7, 3]), 5).tolist()
    [7, 7, 7, 3, 3]
    """
    per_consumer, with_extra = divmod(count, len(consumers))
    lengths = np.full(len(consumers), per_consumer, dtype=np.int64)
    lengths[:with_extra] += 1
    return np.repeat(consumers, lengths)


def _topic_replica_racks(topic: Topic) -> tuple[frozenset[str], ...]:
    if topic.replica_racks is None:
        return (frozenset(),) * topic.num_partitions
    return topic.replica_racks


class _ConsumerRacks:
    """The racks of a topic's consumers (in order, and the set of those known), worked out
    once per consumer list of one assignment."""

    __slots__ = ("_made", "racks")

    def __init__(self, racks: Sequence[str | None]) -> None:
        self.racks = racks
        self._made: dict[int, tuple[tuple[str | None, ...], frozenset[str]]] = {}

    def of(self, consumers: list[int]) -> tuple[tuple[str | None, ...], frozenset[str]]:
        found = self._made.get(id(consumers))
        if found is not None:
            return found
        racks = self.racks
        in_order = tuple([racks[consumer] for consumer in consumers])
        known: frozenset[str] = frozenset(in_order).difference((None,))  # type: ignore[assignment]
        made = self._made[id(consumers)] = (in_order, known)
        return made


def _needs_rack_matching(state: _TopicState, views: _ConsumerRacks) -> bool:
    """KIP-881: some subscriber rack holds a replica, and not every partition spans all racks."""
    consumer_racks = views.of(state.consumers)[1]
    if not consumer_racks:
        return False
    placement = _rack_placement(_topic_replica_racks(state.topic))
    if consumer_racks.isdisjoint(placement.all_racks):
        return False
    return not placement.spans_all


def _assign_with_rack_matching(
    states: Sequence[_TopicState], racks: Sequence[str | None], views: _ConsumerRacks
) -> None:
    """Java's rack pass: group topics by subscribers, then by partition count; a group of several
    topics is assigned co-partitioned, a lone topic by rack-matching ranges."""
    by_subscribers: dict[tuple[int, ...], dict[int, list[_TopicState]]] = {}
    for state in states:
        if not views.of(state.consumers)[1]:
            continue  # Java keeps no partition racks for such topics: nothing can match
        by_count = by_subscribers.setdefault(tuple(state.consumers), {})
        by_count.setdefault(state.topic.num_partitions, []).append(state)
    for by_count in by_subscribers.values():
        for co_partitioned in by_count.values():
            if len(co_partitioned) > 1:
                _assign_co_partitioned(co_partitioned, racks)
            elif _needs_rack_matching(co_partitioned[0], views):
                lone = co_partitioned[0]
                lone.local_owners = _rack_matched_ranges(
                    _topic_replica_racks(lone.topic), views.of(lone.consumers)[0]
                )


@functools.lru_cache(maxsize=1024)
def _rack_matched_ranges(
    replica_racks: tuple[frozenset[str], ...], consumer_racks: tuple[str | None, ...]
) -> np.ndarray:
    """A lone topic's owners (indexes into its consumers, in Java order) after the rack pass
    and the range pass that follows: they depend on its replica racks and its consumers' racks
    only, so the generations of a trace that repeat both are assigned once.

    >>> racks = (frozenset({"a"}), frozenset({"b"}), frozenset({"b"}))
    >>> _rack_matched_ranges(racks, ("b", "a")).tolist()
    [1, 0, 0]
    """
    topic = Topic("", len(replica_racks), replica_racks)
    state = _TopicState.of(topic, list(range(len(consumer_racks))))
    _assign_ranges(state, consumer_racks)
    _assign_ranges(state)
    owner_of = [-1] * topic.num_partitions
    for consumer, partitions in state.owned.items():
        for partition in partitions:
            owner_of[partition] = consumer
    local_owners = np.asarray(owner_of, dtype=np.int64)
    local_owners.setflags(write=False)
    return local_owners


def _assign_ranges(state: _TopicState, racks: Sequence[str | None] | None = None) -> None:
    """Each consumer in order takes its quota from the first free partitions (with ``racks``:
    only those with a replica on its rack; a consumer without a rack matches everything).

    The quota rules of :meth:`_TopicState.max_assignable` and :meth:`~_TopicState.give` are
    written out with local names here: this runs once per consumer and topic of every
    rack-aware generation. Taken partitions are skipped in C (``bytearray.find``) when any
    partition will do."""
    if racks is None and not state.owned:
        _assign_contiguous(state)
        return
    num_partitions = state.topic.num_partitions
    by_rack: Mapping[str | None, Sequence[int]] = {}
    start_by_rack: dict[str | None, int] = {}
    if racks is not None:
        by_rack = _rack_placement(_topic_replica_racks(state.topic)).by_rack
    taken, owned, assigned_count = state.taken, state.owned, state.assigned_count
    per_consumer, remaining_with_extra = state.per_consumer, state.remaining_with_extra
    next_free = state.next_free
    for consumer in state.consumers:
        if next_free >= num_partitions:
            break
        count = assigned_count[consumer]
        limit = per_consumer + (1 if remaining_with_extra > 0 else 0) - count
        if limit <= 0:
            continue
        rack = racks[consumer] if racks is not None else None
        chosen: list[int] = []
        if rack is None:
            position = taken.find(0, next_free)
            while position >= 0 and limit:
                chosen.append(position)
                limit -= 1
                position = taken.find(0, position + 1)
            next_free = position if position >= 0 else num_partitions
        else:
            candidates = by_rack.get(rack, ())
            end = len(candidates)
            position = start_by_rack.get(rack, 0)
            while position < end:
                partition = candidates[position]
                if not taken[partition]:
                    if not limit:
                        break
                    chosen.append(partition)
                    limit -= 1
                position += 1
            start_by_rack[rack] = position
            position = taken.find(0, next_free)
            next_free = position if position >= 0 else num_partitions
        if chosen:
            owned.setdefault(consumer, []).extend(chosen)  # type: ignore[attr-defined]
            for partition in chosen:
                taken[partition] = 1
            count += len(chosen)
            assigned_count[consumer] = count
            if count > per_consumer:
                remaining_with_extra -= 1
    state.remaining_with_extra = remaining_with_extra
    state.next_free = next_free


def _assign_contiguous(state: _TopicState) -> None:
    """The plain range cut, in O(consumers): same result as the quota walk on a fresh topic."""
    per_consumer, with_extra = state.per_consumer, state.remaining_with_extra
    for index, consumer in enumerate(state.consumers):
        start = per_consumer * index + min(index, with_extra)
        length = per_consumer + (1 if index < with_extra else 0)
        if length:
            state.owned[consumer] = range(start, start + length)
            state.assigned_count[consumer] = length
    state.remaining_with_extra = 0
    state.next_free = state.topic.num_partitions
    state.taken = bytearray(b"\x01") * state.topic.num_partitions


def _assign_co_partitioned(states: Sequence[_TopicState], racks: Sequence[str | None]) -> None:
    """Partition ``p`` of every topic goes to the first consumer with quota left whose rack holds
    a replica of ``p`` in all of them (or that has no rack)."""
    # the topics share subscribers and partition count and are fresh, so their quotas move together
    lead = states[0]
    by_rack: dict[str | None, list[int]] = {}
    for consumer in lead.consumers:
        by_rack.setdefault(racks[consumer], []).append(consumer)
    head = dict.fromkeys(by_rack, 0)
    rank = {consumer: index for index, consumer in enumerate(lead.consumers)}
    per_topic_racks = [_topic_replica_racks(state.topic) for state in states]

    def first_with_quota(rack: str | None) -> int | None:
        queue, index = by_rack[rack], head[rack]
        while index < len(queue) and lead.max_assignable(queue[index]) == 0:
            index += 1  # quotas only shrink, so a consumer skipped once stays skipped
        head[rack] = index
        return queue[index] if index < len(queue) else None

    for partition in range(lead.topic.num_partitions):
        common = frozenset.intersection(*(racks_of[partition] for racks_of in per_topic_racks))
        candidates = [None, *(rack for rack in common if rack in by_rack)]
        best: int | None = None
        for rack in candidates:
            if rack not in by_rack:
                continue
            found = first_with_quota(rack)
            if found is not None and (best is None or rank[found] < rank[best]):
                best = found
        if best is not None:
            for state in states:
                state.give(best, [partition])


def _fill_owners(
    owners: np.ndarray,
    space: PartitionSpace,
    member_at: np.ndarray,
    states: Sequence[_TopicState],
) -> None:
    """Writes each topic's per-consumer partitions into ``owners`` (group member indexes), in
    one numpy assignment."""
    offset_of = dict(zip(space.topic_names, space.offsets, strict=True))
    owner_of = member_at.tolist()
    indexes: list[int] = []
    given: list[int] = []
    for state in states:
        offset = offset_of[state.topic.name]
        if state.local_owners is not None:
            positions = state.positions
            if positions is None:
                positions = np.asarray(state.consumers, dtype=np.int64)
            owners[offset : offset + state.topic.num_partitions] = member_at[
                positions[state.local_owners]
            ]
            continue
        for consumer, partitions in state.owned.items():
            indexes.extend(map(offset.__add__, partitions))
            given.extend(itertools.repeat(owner_of[consumer], len(partitions)))
    if indexes:
        owners[np.asarray(indexes, dtype=np.int64)] = np.asarray(given, dtype=np.int64)


class _Placement(NamedTuple):
    """Where a topic's replicas are: ``by_rack``, rack -> the partitions (ascending) with a
    replica on it; ``all_racks``, every rack holding one; ``spans_all``, every partition has a
    replica on every one of them."""

    by_rack: dict[str | None, tuple[int, ...]]
    all_racks: frozenset[str]
    spans_all: bool


@functools.lru_cache(maxsize=1024)
def _rack_placement(replica_racks: tuple[frozenset[str], ...]) -> _Placement:
    """The :class:`_Placement` of a topic's replica racks. Kept for the topics a replay meets
    again: the generations of one trace usually share their replica placement."""
    by_rack: dict[str | None, list[int]] = {}
    for partition, partition_racks in enumerate(replica_racks):
        for replica_rack in partition_racks:
            by_rack.setdefault(replica_rack, []).append(partition)
    all_racks = frozenset().union(*replica_racks)
    return _Placement(
        {rack: tuple(partitions) for rack, partitions in by_rack.items()},
        all_racks,
        all(partition_racks == all_racks for partition_racks in replica_racks),
    )
