"""The ``uniform`` assignor: the KIP-848 group coordinator's UniformAssignor, on arrays.

Goals in priority order: balance first (member counts differ by at most one when subscriptions
allow), stickiness second (a member keeps what it owns unless balance takes it away); racks are
not consulted, as in the coordinator (its topic describer reports no partition racks).

Two members share two topics of three partitions. Partitions are dealt in topic order, each
member taking its quota (6 / 2 = 3) in member order:

>>> from assignors.model import Group, Member, Topic, show
>>> both = frozenset({"a", "b"})
>>> topics = (Topic("a", 3), Topic("b", 3))
>>> first = UniformAssignor().assign(Group(topics, (Member("c0", both), Member("c1", both))))
>>> show(first)
{'c0': ['a-0', 'a-1', 'a-2'], 'c1': ['b-0', 'b-1', 'b-2']}

A third member joins. Quotas become 2 each: c0 and c1 keep their first two partitions and the
two they give up go to c2 in the coordinator's target; nothing else moves:

>>> owned = [Member(m, both, first.partitions[m]) for m in ("c0", "c1")]
>>> joined = Group(topics, (*owned, Member("c2", both)))
>>> show(target_assignment(joined))
{'c0': ['a-0', 'a-1'], 'c1': ['b-0', 'b-1'], 'c2': ['a-2', 'b-2']}

The coordinator hands a partition to its new owner only once the old one revoked it, so
``assign`` (one round, ``cooperative`` replay) withholds the two moving partitions; the next
round, with c0 and c1 no longer holding them, gives them to c2:

>>> second = UniformAssignor().assign(joined)
>>> show(second), [f"{tp.topic}-{tp.partition}" for tp in second.withheld]
({'c0': ['a-0', 'a-1'], 'c1': ['b-0', 'b-1'], 'c2': []}, ['a-2', 'b-2'])
>>> rejoined = Group(topics, tuple(Member(m, both, tps) for m, tps in second.partitions.items()))
>>> show(UniformAssignor().assign(rejoined))
{'c0': ['a-0', 'a-1'], 'c1': ['b-0', 'b-1'], 'c2': ['a-2', 'b-2']}

The coordinator picks one of two algorithms (``UniformAssignor.assign``):

- Homogeneous (every member subscribes to the same topic names;
  ``UniformHomogeneousAssignmentBuilder``): ``P // M`` partitions per member and one more for the
  first ``P % M`` members in iteration order. Each member keeps the first ``quota`` of the
  partitions it owns (in iteration order) and gives up the rest; the partitions nobody kept
  (topics in iteration order, partitions ascending, then the given-up ones) are dealt out in
  member order, each member filling its quota. O(P + C) array operations.
- Heterogeneous (``UniformHeterogeneousAssignmentBuilder``): members keep everything they own in
  topics they still subscribe to; unassigned partitions are dealt per topic (topics by partitions
  per subscriber descending, then subscriber count ascending, then topic id) to the least-loaded
  subscribers, level by level (a water fill, done here as one vectorised pass per topic); then
  up to 16 sweeps over the topics move each topic's last partitions from its most-loaded
  subscribers to its least-loaded ones until every topic's subscribers differ by at most one
  (the coordinator's balance rule; members with overlapping, non-identical subscriptions can
  stay further apart). O(T * C + P) array work for the deal; the balancing sweeps cost
  O(C log C + P_t) per topic that is out of balance plus a small constant per partition moved.

Iteration order. The coordinator iterates members and topics in ``HashMap``/``HashSet`` order of
member ids and topic ids (random UUIDs in a real cluster) and breaks the heterogeneous topic ties
by topic id. ktk has no topic ids; by default it iterates members by member id, topics by name
and each member's owned partitions in (topic, partition) order. :class:`IterationOrder` lets a
caller supply the coordinator's orders instead, which reproduces its answer exactly (the
parity tests do that). See docs/assignors-kip848.md for every difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Literal

import numpy as np

from assignors.arrays import claims_subscribed, member_generations, owned_claims, resolve_claims
from assignors.base import RebalanceProtocol
from assignors.model import (
    Assignment,
    Group,
    Member,
    PartitionSpace,
    TopicPartition,
)

_INDEX = np.int64
_NOBODY = -1
_CONTESTED = -2  # claimed by several members in the same, highest generation
# the coordinator's cap on balancing sweeps over the topics (MAX_ITERATION_COUNT)
MAX_BALANCE_SWEEPS = 16


@dataclass(frozen=True, slots=True)
class IterationOrder:
    """The orders the coordinator would iterate in (see the module docstring).

    ``members``: member ids in ``groupSpec.memberIds()`` order. ``topics``: topic names in the
    order the homogeneous builder iterates its subscribed-topic set. ``topic_ids``: topic names
    in ascending topic-id order (the heterogeneous tie-break). ``owned``: per member, its current
    assignment in the order the builder iterates it (``None``: each member's
    ``owned_partitions``). Names the group does not subscribe to are ignored.
    """

    members: tuple[str, ...]
    topics: tuple[str, ...]
    topic_ids: tuple[str, ...]
    owned: Mapping[str, tuple[TopicPartition, ...]] | None = None

    @classmethod
    def default(cls, group: Group) -> IterationOrder:
        """Members by member id, topics by name, owned partitions sorted."""
        names = tuple(topic.name for topic in group.topics)
        return cls(tuple(member.member_id for member in group.members), names, names)


@dataclass(frozen=True, slots=True)
class UniformPlan:
    """Owners decided for one group: ``owner[p]`` is the index in ``member_ids`` (the group's
    order) of the member that gets partition ``p`` of ``space``, -1 when no member subscribes.
    ``holder[p]`` is the member validly holding ``p`` now (-1 nobody, -2 several members in
    the same generation)."""

    space: PartitionSpace
    member_ids: tuple[str, ...]
    owner: np.ndarray
    holder: np.ndarray
    homogeneous: bool

    def withheld(self) -> np.ndarray:
        """Partitions that change hands: their holder must revoke them before the new owner
        gets them (the coordinator's reconciliation), so this round hands them to nobody."""
        return np.flatnonzero((self.holder != _NOBODY) & (self.holder != self.owner))


class UniformAssignor:
    """The KIP-848 coordinator's ``uniform`` assignor; see the module docstring.

    Server-side assignors run in the coordinator, whose reconciliation makes a member revoke a
    partition before its new owner gets it: ``assign`` withholds moving partitions (one
    ``cooperative`` round); ``target`` is the coordinator's target, which replay reconciles
    member by member as the consumer protocol does.
    """

    name = "uniform"
    rebalance_protocol: RebalanceProtocol = "cooperative"
    group_protocol = "consumer"

    def assign(self, group: Group) -> Assignment:
        return assignment_of(plan_uniform(group), withhold=True)

    def target(self, group: Group) -> Assignment:
        """The coordinator's target assignment for ``group``: nothing withheld (replay
        reconciles members towards it, :mod:`assignors.traces.reconcile`)."""
        return assignment_of(plan_uniform(group))


def target_assignment(group: Group, order: IterationOrder | None = None) -> Assignment:
    """The coordinator's target assignment (what its assignor returns), nothing withheld."""
    return assignment_of(plan_uniform(group, order))


def assignment_of(plan: UniformPlan, *, withhold: bool = False) -> Assignment:
    """The plan as an array assignment (every member present; the TopicPartition view is made
    on first use); with ``withhold``, partitions changing hands go to nobody this round
    (``Assignment.withheld``)."""
    if not withhold:
        return Assignment.from_owners(plan.space, plan.member_ids, plan.owner)
    withheld = plan.withheld()
    owner = plan.owner
    if withheld.size:
        owner = owner.copy()
        owner[withheld] = _NOBODY
    return Assignment.from_owners(plan.space, plan.member_ids, owner, withheld)


def plan_uniform(
    group: Group,
    order: IterationOrder | None = None,
    *,
    subscription_type: Literal["homogeneous", "heterogeneous"] | None = None,
) -> UniformPlan:
    """The coordinator's uniform assignment of ``group``, iterating in ``order``.

    ``subscription_type`` forces one builder; by default, as in the coordinator, the homogeneous
    one runs when every member subscribes to the same topic names (topics that do not exist
    included: members differing only in those get the heterogeneous builder)."""
    order = order or IterationOrder.default(group)
    space = group.partition_space()
    members = group.members
    member_ids = tuple(member.member_id for member in members)
    counts = np.asarray(space.partition_counts, dtype=_INDEX)
    offsets = np.asarray(space.offsets, dtype=_INDEX)
    topic_position = {name: t for t, name in enumerate(space.topic_names)}

    index_of = {member_id: i for i, member_id in enumerate(member_ids)}
    if sorted(order.members) != sorted(member_ids):
        raise ValueError("iteration order must list every member of the group exactly once")
    by_rank = np.fromiter(map(index_of.__getitem__, order.members), _INDEX, len(members))
    subscriptions = subscribed_positions(members, by_rank, topic_position)
    # members sharing a subscription share its array (_subscribed_positions): compare each once
    distinct = len({topics.tobytes() for topics in {id(t): t for t in subscriptions}.values()})
    # the coordinator decides on subscribed topic names, topics that do not exist included
    same_names = len({member.topics for member in members}) <= 1
    homogeneous = same_names if subscription_type is None else subscription_type == "homogeneous"
    if homogeneous and distinct > 1:
        raise ValueError("the homogeneous builder needs identical subscriptions")
    owner = np.full(space.size, _NOBODY, dtype=_INDEX)
    if not members or not counts.size:
        return UniformPlan(space, member_ids, owner, owner.copy(), homogeneous)

    claim_rank, claim_index, contested = _valid_claims(group, order, by_rank, subscriptions)
    holder = np.full(space.size, _NOBODY, dtype=_INDEX)
    holder[claim_index] = by_rank[claim_rank]
    holder[contested] = _CONTESTED
    if homogeneous:
        topic_order = [topic_position[name] for name in order.topics if name in topic_position]
        if sorted(topic_order) != list(range(counts.size)):
            raise ValueError("iteration order must list every subscribed topic exactly once")
        _assign_homogeneous(
            owner, len(members), counts, offsets, topic_order, claim_rank, claim_index
        )
    else:
        tie_rank = np.full(counts.size, counts.size, dtype=_INDEX)
        listed = [topic_position[name] for name in order.topic_ids if name in topic_position]
        tie_rank[listed] = np.arange(len(listed), dtype=_INDEX)
        if len(set(listed)) != counts.size:
            raise ValueError("topic id order must list every subscribed topic exactly once")
        _Heterogeneous(owner, counts, offsets, subscriptions, tie_rank).run(claim_rank, claim_index)
    # owners were computed as iteration ranks: translate them to the group's member indexes
    if not np.array_equal(by_rank, np.arange(by_rank.size)):
        assigned = owner >= 0
        owner[assigned] = by_rank[owner[assigned]]
    return UniformPlan(space, member_ids, owner, holder, homogeneous)


def current_holders(group: Group, subscriptions: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The member (group index) validly holding each partition of ``group.partition_space()``
    now (-1 nobody, -2 several members in the same, highest generation). ``subscriptions``:
    :func:`subscribed_positions` of the members in group order, when the caller has them."""
    space = group.partition_space()
    by_rank = np.arange(len(group.members), dtype=_INDEX)
    if subscriptions is None:
        topic_position = {name: t for t, name in enumerate(space.topic_names)}
        subscriptions = subscribed_positions(group.members, by_rank, topic_position)
    ranks, indexes, contested = _valid_claims(
        group, IterationOrder.default(group), by_rank, subscriptions
    )
    holder = np.full(space.size, _NOBODY, dtype=_INDEX)
    holder[indexes] = ranks
    holder[contested] = _CONTESTED
    return holder


def subscribed_positions(
    members: Sequence[Member], by_rank: np.ndarray, topic_position: dict[str, int]
) -> list[np.ndarray]:
    """Each member's known topics as sorted positions, members in rank order (computed once per
    distinct subscription: large groups share a few)."""
    seen: dict[frozenset[str], np.ndarray] = {}
    result = []
    lookup = topic_position.get
    for i in by_rank.tolist():
        topics = members[i].topics
        positions = seen.get(topics)
        if positions is None:
            found = np.fromiter(map(lookup, topics, repeat(-1)), _INDEX, len(topics))
            positions = seen[topics] = np.sort(found[found >= 0])
        result.append(positions)
    return result


def _valid_claims(
    group: Group,
    order: IterationOrder,
    by_rank: np.ndarray,
    subscriptions: Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(member rank, partition index) of every claim honoured, members in rank order and each
    member's claims in its iteration order, and the partitions whose claims tie. A claim counts
    when its topic is known, subscribed by the member and has the partition; a partition
    claimed by several members goes to the highest generation and to nobody on a tie
    (:func:`assignors.arrays.resolve_claims`; the coordinator's own assignment never overlaps)."""
    space = group.partition_space()
    ranked = by_rank.tolist()
    claims = owned_claims(group, space, ranked, order.owned)
    if not claims.index.size:
        return np.zeros(0, _INDEX), np.zeros(0, _INDEX), np.zeros(0, _INDEX)
    by_member: list[np.ndarray] = [subscriptions[0]] * len(ranked)
    for rank, i in enumerate(ranked):
        by_member[i] = subscriptions[rank]
    subscribed = claims_subscribed(claims, space, by_member)
    if not subscribed.all():
        claims = claims.subset(subscribed)
    keep, tied = resolve_claims(claims.member, claims.index, member_generations(group))
    rank_of = np.empty(len(ranked), dtype=_INDEX)
    rank_of[by_rank] = np.arange(len(ranked), dtype=_INDEX)
    return rank_of[claims.member[keep]], claims.index[keep], tied


def _topic_ranges(counts: np.ndarray, offsets: np.ndarray, topics: Sequence[int]) -> np.ndarray:
    """Partition indexes of ``topics``, topic by topic in the given order, ascending inside."""
    if not topics:
        return np.zeros(0, _INDEX)
    chosen = np.asarray(topics, dtype=_INDEX)
    lengths = counts[chosen]
    starts = np.repeat(offsets[chosen] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return starts + np.arange(int(lengths.sum()), dtype=_INDEX)


def _assign_homogeneous(
    owner: np.ndarray,
    num_members: int,
    counts: np.ndarray,
    offsets: np.ndarray,
    topic_order: Sequence[int],
    claim_rank: np.ndarray,
    claim_index: np.ndarray,
) -> None:
    """UniformHomogeneousAssignmentBuilder.build on arrays (owners as member ranks)."""
    total = int(counts.sum())
    if not counts.size:
        return
    quota = np.full(num_members, total // num_members, dtype=_INDEX)
    quota[: total % num_members] += 1
    # a member keeps the first `quota` partitions of its owned sequence, gives up the rest
    starts = np.searchsorted(claim_rank, np.arange(num_members + 1))
    position = np.arange(claim_rank.size, dtype=_INDEX) - starts[claim_rank]
    keep = position < quota[claim_rank]
    claimed = np.zeros(owner.size, dtype=bool)
    claimed[claim_index] = True
    if list(topic_order) == list(range(counts.size)):  # topics in index order: no reordering
        unclaimed = np.flatnonzero(~claimed)
    else:
        every = _topic_ranges(counts, offsets, topic_order)
        unclaimed = every[~claimed[every]]
    unassigned = np.concatenate((unclaimed, claim_index[~keep]))
    owner[claim_index[keep]] = claim_rank[keep]
    remaining = quota - np.bincount(claim_rank[keep], minlength=num_members)
    owner[unassigned] = np.repeat(np.arange(num_members, dtype=_INDEX), remaining)


class _Heterogeneous:
    """UniformHeterogeneousAssignmentBuilder on arrays; members are iteration ranks."""

    def __init__(
        self,
        owner: np.ndarray,
        counts: np.ndarray,
        offsets: np.ndarray,
        subscriptions: Sequence[np.ndarray],
        tie_rank: np.ndarray,
    ) -> None:
        self.owner, self.counts, self.offsets, self.tie_rank = owner, counts, offsets, tie_rank
        lengths = np.fromiter(map(len, subscriptions), _INDEX, len(subscriptions))
        ranks = np.repeat(np.arange(len(subscriptions), dtype=_INDEX), lengths)
        topics = np.concatenate(subscriptions) if subscriptions else np.zeros(0, dtype=_INDEX)
        by_topic = np.lexsort((ranks, topics))
        bounds = np.searchsorted(topics[by_topic], np.arange(counts.size + 1))
        # subscribers of each topic in ascending rank (the coordinator's topicSubscribers)
        self.subscribers = [ranks[by_topic[bounds[t] : bounds[t + 1]]] for t in range(counts.size)]
        self.num_subscribers = np.diff(bounds).astype(_INDEX)
        self.sizes = np.zeros(len(subscriptions), dtype=_INDEX)

    def sorted_topics(self, topics: np.ndarray) -> np.ndarray:
        """Partitions per subscriber descending, then subscribers ascending, then topic id."""
        subscribers = self.num_subscribers[topics]
        per_subscriber = self.counts[topics] / subscribers
        return topics[np.lexsort((self.tie_rank[topics], subscribers, -per_subscriber))]

    def run(self, claim_rank: np.ndarray, claim_index: np.ndarray) -> None:
        owner = self.owner
        owner[claim_index] = claim_rank
        self.sizes += np.bincount(claim_rank, minlength=self.sizes.size)
        free = np.concatenate(([0], np.cumsum(owner == _NOBODY)))
        free_per_topic = free[self.offsets + self.counts] - free[self.offsets]
        for topic in self.sorted_topics(np.flatnonzero(free_per_topic > 0)).tolist():
            self._deal(topic)
        self._balance()

    def _deal(self, topic: int) -> None:
        """assignRemainingPartitions for one topic: its unassigned partitions, ascending, go to
        its subscribers level by level (least loaded first, ties by rank), as one array pass."""
        start = int(self.offsets[topic])
        segment = self.owner[start : start + int(self.counts[topic])]
        partitions = np.flatnonzero(segment == _NOBODY)
        wanted = partitions.size
        subscribers = self.subscribers[topic]
        loads = self.sizes[subscribers]
        by_load = np.lexsort((subscribers, loads))
        members, loads = subscribers[by_load], loads[by_load]
        count = loads.size
        lowest = int(loads[0])
        highest_level = min(lowest + wanted - 1, int(loads[-1]) + -(-wanted // count) - 1)
        levels = np.arange(lowest, highest_level + 1, dtype=_INDEX)
        # dealt(l): partitions dealt up to and including level l; members at or below l take one
        in_range = np.searchsorted(loads, levels, side="right")
        load_sums = np.concatenate(([0], np.cumsum(loads)))
        dealt = in_range * (levels + 1) - load_sums[in_range]
        last = int(np.searchsorted(dealt, wanted))
        before = np.concatenate(([0], dealt[:-1]))  # dealt before each level
        final_level = lowest + last
        partial = wanted - int(before[last])  # deals of the last level, to the first members
        takes = np.maximum(0, final_level - loads)
        takes[:partial] += 1
        position = np.repeat(np.arange(count, dtype=_INDEX), takes)
        firsts = np.repeat(np.cumsum(takes) - takes, takes)
        level = loads[position] + np.arange(position.size, dtype=_INDEX) - firsts
        deal = before[level - lowest] + position
        segment[partitions[deal]] = members[position]
        self.sizes[members] += takes

    def _balance(self) -> None:
        """The coordinator's balance(): sweeps over the topics with two or more subscribers until
        a whole sweep moves nothing (or MAX_BALANCE_SWEEPS sweeps)."""
        topics = self.sorted_topics(np.flatnonzero(self.num_subscribers >= 2)).tolist()
        if not topics:
            return
        sizes = self.sizes.tolist()  # the moves update this list and the array together
        last_moved = -1
        for _ in range(MAX_BALANCE_SWEEPS):
            for position, topic in enumerate(topics):
                if position == last_moved:
                    return
                moved = self._balance_topic(topic, sizes)
                if moved > 0 or last_moved == -1:
                    last_moved = position

    def _balance_topic(self, topic: int, size: list[int]) -> int:
        """balanceTopic with the coordinator's MemberAssignmentBalancer: each step takes the
        last partition of the next most-loaded subscriber and gives it to the next least-loaded
        one, until the two ranges' partition counts differ by at most one."""
        subscribers = self.subscribers[topic]
        loads = self.sizes[subscribers]
        if int(loads.max()) - int(loads.min()) <= 1:
            return 0
        ordered: list[int] = subscribers[np.lexsort((subscribers, loads))].tolist()
        count = len(ordered)
        start = int(self.offsets[topic])
        segment = self.owner[start : start + int(self.counts[topic])]
        by_owner = np.argsort(segment, kind="stable")
        owners, firsts, lengths = np.unique(
            segment[by_owner], return_index=True, return_counts=True
        )
        first_of = dict(zip(owners.tolist(), firsts.tolist(), strict=True))
        end_of = dict(zip(owners.tolist(), (firsts + lengths).tolist(), strict=True))
        partitions = by_owner.tolist()
        sizes_array = self.sizes

        low_end, low_level, next_low = 0, size[ordered[0]] - 1, 0
        high_start, high_end = count, count
        high_level, next_high = size[ordered[-1]] + 1, count - 1
        moved = 0
        while high_level - low_level > 1:
            most = -1
            while True:  # nextMostLoadedMember, skipping members with nothing left to give
                if next_high < high_start:
                    if high_end <= high_start and high_start > 0:
                        high_level = size[ordered[high_start - 1]]
                    else:
                        high_level -= 1
                    while high_start > 0 and size[ordered[high_start - 1]] == high_level:
                        high_start -= 1
                    next_high = high_end - 1
                if next_high < 0:
                    most = -1
                    break
                most = ordered[next_high]
                next_high -= 1
                if end_of.get(most, 0) - first_of.get(most, 0) <= 0:
                    # excludeMostLoadedMember: swap it past the end of the range
                    ordered[next_high + 1] = ordered[high_end - 1]
                    ordered[high_end - 1] = most
                    high_end -= 1
                    continue
                break
            if most == -1:
                break
            end_of[most] -= 1
            partition = partitions[end_of[most]]
            if next_low >= low_end:  # nextLeastLoadedMember
                low_level += 1
                while low_end < count and size[ordered[low_end]] == low_level:
                    low_end += 1
                next_low = 0
            least = ordered[next_low]
            next_low += 1
            if high_level - low_level <= 1:
                break
            segment[partition] = least
            size[most] -= 1
            size[least] += 1
            sizes_array[most] -= 1
            sizes_array[least] += 1
            moved += 1
        return moved
