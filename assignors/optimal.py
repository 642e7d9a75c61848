"""The optimal assignor: provably the best balance, then provably the fewest moves (OR-Tools).

Goals in priority order: the least possible max load (partition count of the fullest member),
then the fewest moves any assignment with that max load needs, then the fewest partitions on a
member whose rack holds none of their replicas; with weights, a last tie-break deals what moves
heaviest first to the member with the least weight.

Three consumers share topic ``a`` of five partitions; ``c0`` owned four of them, ``c1`` one, and
``c2`` is new. No member can hold fewer than two, so ``c0`` gives up exactly two partitions and
everything else stays:

>>> from assignors.model import Group, Member, Topic, TopicPartition as TP, show
>>> sub = frozenset({"a"})
>>> group = Group((Topic("a", 5),), (
...     Member("c0", sub, (TP("a", 0), TP("a", 1), TP("a", 2), TP("a", 3)), generation=1),
...     Member("c1", sub, (TP("a", 4),), generation=1),
...     Member("c2", sub)))
>>> show(OptimalAssignor().assign(group))
{'c0': ['a-0', 'a-1'], 'c1': ['a-4'], 'c2': ['a-2', 'a-3']}

The first two goals are the exact references scoring reports: the max load reached is
:func:`assignors.traces.scoring.optimal_max_load` (found by scoring's own max-flow search, run on
the same classes, so the two definitions cannot drift) and the partitions moved are
:func:`assignors.traces.scoring.min_moved` (the same min-cost flow, plus rack costs).

How: partitions are grouped by (class, valid claimant, replica-rack set), where a class is the
set of topics with the same subscribers. One min-cost flow runs from those groups to members,
each member capped at the optimal max load: a group may stay with its claimant at no move cost
or go through its (class, rack set) hub to any subscriber at a cost of one move; a move costs
``P + 1`` and a rack mismatch 1, so the flow minimises moves first and mismatches second.
Nodes: groups + hubs + members; arcs: two per group plus (hubs x subscribers of the hub's class).
The flow fixes how many partitions each group keeps and each hub deals to each member; the
dealing itself is vectorized (a round per partition a member receives, heaviest first).

Weights (``Topic.weights``) do not change the first three goals: a weighted min-max is NP-hard
(bin packing) and would break the exact, count-based optimum scoring compares with; balance by
weight is the ``load-aware`` assignor's job. Here weights only decide which of a hub's
partitions each member receives (a greedy tie-break, not proven optimal for weight).

Cost: the flow has O(G + H x M) arcs for G groups, H hubs and M members, independent of the
number of partitions P for uniform subscriptions; the rest is O(P log P) numpy work. See
docs/assignors-optimal.md for measured times at 10^4, 10^5 and 10^6 partitions.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import repeat

import numpy as np
from ortools.graph.python import min_cost_flow

from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group, PartitionSpace, member_runs
from assignors.traces.scoring import (
    SubscriptionClasses,
    optimal_max_load_of,
    subscription_classes,
)

_INDEX = np.int64
NOBODY = -1


@dataclass(frozen=True, slots=True)
class GroupArrays:
    """A group as numpy arrays over the partition indexes of :meth:`Group.partition_space`.

    ``subscriptions[i]``: topic positions member ``i`` subscribes to (known, non-empty topics);
    ``topic_of[p]``: topic position of partition ``p``; ``claimant[p]``: the member whose claim
    on ``p`` is valid (present, subscribed, highest generation; -1 none); ``contested[p]``: two
    claims in that highest generation (neither counts); ``objects[p]``: the request's own
    TopicPartition when claimed (others are made on output); ``rank[i]``: tie-break order
    (static instance id, else member id).
    """

    space: PartitionSpace
    member_ids: tuple[str, ...]
    subscriptions: tuple[tuple[int, ...], ...]
    topic_of: np.ndarray
    claimant: np.ndarray
    contested: np.ndarray
    objects: np.ndarray
    rank: np.ndarray

    @classmethod
    def of(cls, group: Group) -> GroupArrays:
        space = group.partition_space()
        counts = np.asarray(space.partition_counts, dtype=_INDEX)
        offsets = np.asarray(space.offsets, dtype=_INDEX)
        position = {name: p for p, name in enumerate(space.topic_names)}
        known: dict[frozenset[str], tuple[int, ...]] = {}
        subscriptions = []
        for member in group.members:
            subscription = known.get(member.topics)
            if subscription is None:
                subscription = tuple(
                    sorted(
                        p
                        for name in member.topics
                        if (p := position.get(name)) is not None and counts[p] > 0
                    )
                )
                known[member.topics] = subscription
            subscriptions.append(subscription)
        members = group.members
        order = sorted(
            range(len(members)), key=lambda i: (members[i].identity, members[i].member_id)
        )
        rank = np.empty(len(members), dtype=_INDEX)
        rank[order] = np.arange(len(members), dtype=_INDEX)
        claimant, contested, objects = _valid_claims(
            group, subscriptions, counts, offsets, position
        )
        return cls(
            space=space,
            member_ids=tuple(member.member_id for member in members),
            subscriptions=tuple(subscriptions),
            topic_of=np.repeat(np.arange(counts.size, dtype=_INDEX), counts),
            claimant=claimant,
            contested=contested,
            objects=objects,
            rank=rank,
        )

    @property
    def num_partitions(self) -> int:
        return int(self.topic_of.size)

    def classes(self, group: Group) -> tuple[np.ndarray, SubscriptionClasses]:
        """(class per partition, the classes): :func:`subscription_classes` of ``group`` (the
        group these arrays were made of), numbered as scoring numbers them."""
        classes = subscription_classes(group)
        by_topic = classes.class_by_topic
        topic_class = np.fromiter(
            (by_topic.get(name, NOBODY) for name in self.space.topic_names),
            dtype=_INDEX,
            count=len(self.space.topic_names),
        )
        return topic_class[self.topic_of], classes

    def weights(self, group: Group) -> np.ndarray | None:
        """Weight per partition; None unless some subscribed topic has weights. Partitions of
        topics without weights weigh the mean of the known weights (1.0 when all are zero)."""
        parts, known = [], []
        for name in self.space.topic_names:
            topic = group.topic(name)
            values = None if topic is None else topic.weights
            parts.append(None if values is None else np.asarray(values, dtype=np.float64))
            known.append(values is not None)
        if not any(known):
            return None
        given = np.concatenate([part for part in parts if part is not None])
        fill = float(given.mean()) if given.size and given.sum() > 0 else 1.0
        counts = self.space.partition_counts
        return (
            np.concatenate(
                [
                    part if part is not None else np.full(count, fill)
                    for part, count in zip(parts, counts, strict=True)
                ]
            )
            if counts
            else np.zeros(0)
        )

    def rack_sets(self, group: Group) -> tuple[np.ndarray, np.ndarray] | None:
        """(rack-set id per partition, mismatch table [member, rack-set id]); None when rack
        locality does not apply. A partition of a topic without replica racks never mismatches,
        nor does a member without a rack (as scoring counts ``rack_mismatch``)."""
        if not group.has_racks():
            return None
        ids: dict[frozenset[str] | None, int] = {None: 0}
        parts = []
        for name, count in zip(self.space.topic_names, self.space.partition_counts, strict=True):
            topic = group.topic(name)
            if topic is None or topic.replica_racks is None:
                parts.append(np.zeros(count, dtype=_INDEX))
                continue
            lookup = ids.setdefault
            parts.append(
                np.fromiter(
                    (lookup(racks, len(ids)) for racks in topic.replica_racks),
                    dtype=_INDEX,
                    count=count,
                )
            )
        rack_set = np.concatenate(parts) if parts else np.zeros(0, dtype=_INDEX)
        sets = sorted(ids.items(), key=operator.itemgetter(1))
        mismatch = np.zeros((len(group.members), len(sets)), dtype=_INDEX)
        for member_index, member in enumerate(group.members):
            if member.rack is None:
                continue
            for racks, set_id in sets:
                mismatch[member_index, set_id] = racks is not None and member.rack not in racks
        return rack_set, mismatch

    def assignment(self, owner: np.ndarray, left_out: np.ndarray | None = None) -> Assignment:
        """The Assignment of ``owner`` (member per partition), without ``left_out`` (withheld)."""
        if left_out is not None and left_out.size:
            owner = owner.copy()
            owner[left_out] = NOBODY
        objects = self.filled_objects()
        order, bounds = member_runs(owner, len(self.member_ids))
        partitions = {
            member_id: tuple(objects[order[bounds[i] : bounds[i + 1]]].tolist())
            for i, member_id in enumerate(self.member_ids)
        }
        withheld = () if left_out is None else tuple(objects[np.sort(left_out)].tolist())
        return Assignment(dict(sorted(partitions.items())), withheld)

    def filled_objects(self) -> np.ndarray:
        return self.space.fill_objects(self.objects)


def _valid_claims(
    group: Group,
    subscriptions: list[tuple[int, ...]],
    counts: np.ndarray,
    offsets: np.ndarray,
    position: dict[str, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(claimant, contested, objects): per partition, the member whose claim wins (present,
    subscribed, partition exists, highest generation; two claims in it void the partition)."""
    num_partitions = int(counts.sum())
    objects = np.full(num_partitions, None, dtype=object)
    claimant = np.full(num_partitions, NOBODY, dtype=_INDEX)
    contested = np.zeros(num_partitions, dtype=bool)
    partition_parts, member_parts, generation_parts = [], [], []
    for i, member in enumerate(group.members):
        owned = member.owned_partitions
        if not owned or not subscriptions[i]:
            continue
        topics = np.fromiter(
            map(position.get, map(operator.itemgetter(0), owned), repeat(-1)),
            dtype=_INDEX,
            count=len(owned),
        )
        numbers = np.fromiter(map(operator.itemgetter(1), owned), dtype=_INDEX, count=len(owned))
        subscribed = np.zeros(counts.size + 1, dtype=bool)  # the extra slot answers position -1
        subscribed[list(subscriptions[i])] = True
        safe = np.where(topics >= 0, topics, 0)
        valid = subscribed[topics] & (numbers >= 0) & (numbers < counts[safe])
        indexes = offsets[safe[valid]] + numbers[valid]
        objects[indexes] = np.fromiter(owned, dtype=object, count=len(owned))[valid]
        partition_parts.append(indexes)
        member_parts.append(np.full(indexes.size, i, dtype=_INDEX))
        generation_parts.append(np.full(indexes.size, member.generation, dtype=_INDEX))
    if not partition_parts:
        return claimant, contested, objects
    partitions = np.concatenate(partition_parts)
    claimers = np.concatenate(member_parts)
    generations = np.concatenate(generation_parts)
    order = np.lexsort((-generations, partitions))
    partitions, claimers, generations = partitions[order], claimers[order], generations[order]
    first = np.ones(partitions.size, dtype=bool)
    first[1:] = partitions[1:] != partitions[:-1]
    tied = np.zeros(partitions.size, dtype=bool)
    tied[:-1] = ~first[1:] & (generations[1:] == generations[:-1])
    leaders = np.flatnonzero(first)
    void = tied[leaders]
    claimant[partitions[leaders[~void]]] = claimers[leaders[~void]]
    contested[partitions[leaders[void]]] = True
    return claimant, contested, objects


def deal(
    pool: np.ndarray,
    quotas: np.ndarray,
    loads: np.ndarray,
    rank: np.ndarray,
    weights: np.ndarray | None,
    owner: np.ndarray,
) -> None:
    """Give member ``m`` exactly ``quotas[m]`` partitions of ``pool``: in rounds, the members
    still owed one, lightest first (by ``loads``, then ``rank``), take the heaviest partitions
    left (pool order without weights). Updates ``owner`` and ``loads``. O(rounds x members)."""
    if pool.size == 0:
        return
    if weights is not None:
        pool = pool[np.argsort(-weights[pool], kind="stable")]
    remaining = quotas.astype(_INDEX).copy()
    start = 0
    while start < pool.size:
        owed = np.flatnonzero(remaining > 0)
        if owed.size == 0:
            raise RuntimeError("quotas do not cover the pool")
        owed = owed[np.lexsort((rank[owed], loads[owed]))]
        taken = pool[start : start + owed.size]
        takers = owed[: taken.size]
        owner[taken] = takers
        loads[takers] += weights[taken] if weights is not None else 1
        remaining[takers] -= 1
        start += taken.size


@dataclass(frozen=True, slots=True)
class OptimalPlan:
    """The optimum for one group: ``owner[p]`` per partition of ``arrays``, the max load, the
    moves and the rack mismatches it reaches (all three minimal, in that priority)."""

    arrays: GroupArrays
    owner: np.ndarray
    max_load: int
    moved: int
    rack_mismatch: int | None


def plan_optimal(group: Group) -> OptimalPlan:
    """The assignment of least max load, fewest moves at it, fewest rack mismatches at both."""
    arrays = GroupArrays.of(group)
    num_partitions, num_members = arrays.num_partitions, len(arrays.member_ids)
    owner = np.full(num_partitions, NOBODY, dtype=_INDEX)
    if num_partitions == 0:
        return OptimalPlan(arrays, owner, 0, 0, None if not group.has_racks() else 0)
    class_of, classes = arrays.classes(group)
    class_members = classes.subscribers
    # scoring's own search over the same classes: the optimum cannot drift from the reference
    capacity = optimal_max_load_of(classes)
    racks = arrays.rack_sets(group)
    rack_set = racks[0] if racks is not None else np.zeros(num_partitions, dtype=_INDEX)
    num_sets = int(rack_set.max()) + 1
    mismatch = racks[1] if racks is not None else np.zeros((num_members, 1), dtype=_INDEX)
    move_cost = num_partitions + 1 if racks is not None else 1

    # groups of interchangeable partitions: (class, claimant, rack set)
    claimant = arrays.claimant
    keys = (class_of * (num_members + 1) + (claimant + 1)) * num_sets + rack_set
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    group_keys = sorted_keys[starts]
    group_sizes = np.diff(np.r_[starts, num_partitions])
    group_set = group_keys % num_sets
    group_claimant = (group_keys // num_sets) % (num_members + 1) - 1
    group_class = group_keys // num_sets // (num_members + 1)
    hub_keys, group_hub = np.unique(group_class * num_sets + group_set, return_inverse=True)
    group_hub = group_hub.reshape(-1)
    num_groups, num_hubs = starts.size, hub_keys.size

    source, sink = 0, 1
    group_base, hub_base = 2, 2 + num_groups
    member_base = hub_base + num_hubs
    num_nodes = member_base + num_members
    tails: list[np.ndarray] = []
    heads: list[np.ndarray] = []
    capacities: list[np.ndarray] = []
    costs: list[np.ndarray] = []

    def arcs(tail: object, head: object, capacity: object, cost: object, size: int) -> None:
        for target, value in ((tails, tail), (heads, head), (capacities, capacity), (costs, cost)):
            target.append(np.broadcast_to(np.asarray(value, dtype=_INDEX), (size,)))

    group_nodes = group_base + np.arange(num_groups, dtype=_INDEX)
    arcs(source, group_nodes, group_sizes, 0, num_groups)
    claimed = group_claimant >= 0
    keep_arcs_start = sum(part.size for part in tails)
    kept_groups = np.flatnonzero(claimed)
    arcs(
        group_nodes[kept_groups],
        member_base + group_claimant[kept_groups],
        group_sizes[kept_groups],
        mismatch[group_claimant[kept_groups], group_set[kept_groups]],
        kept_groups.size,
    )
    arcs(
        group_nodes,
        hub_base + group_hub,
        group_sizes,
        np.where(claimed, move_cost, 0),
        num_groups,
    )
    deal_arcs_start = sum(part.size for part in tails)
    hub_arc_hub, hub_arc_member = [], []
    for hub, key in enumerate(hub_keys.tolist()):
        members = np.asarray(class_members[key // num_sets], dtype=_INDEX)
        hub_arc_hub.append(np.full(members.size, hub, dtype=_INDEX))
        hub_arc_member.append(members)
    deal_hub = np.concatenate(hub_arc_hub)
    deal_member = np.concatenate(hub_arc_member)
    arcs(
        hub_base + deal_hub,
        member_base + deal_member,
        num_partitions,
        mismatch[deal_member, hub_keys[deal_hub] % num_sets],
        deal_hub.size,
    )
    arcs(member_base + np.arange(num_members), sink, capacity, 0, num_members)

    flow = min_cost_flow.SimpleMinCostFlow()
    flow.add_arcs_with_capacity_and_unit_cost(
        np.concatenate(tails),
        np.concatenate(heads),
        np.concatenate(capacities),
        np.concatenate(costs),
    )
    supplies = np.zeros(num_nodes, dtype=_INDEX)
    supplies[source], supplies[sink] = num_partitions, -num_partitions
    flow.set_nodes_supplies(np.arange(num_nodes, dtype=_INDEX), supplies)
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise RuntimeError(f"min-cost flow failed with status {status}")
    flows = _arc_flows(flow, deal_arcs_start + deal_hub.size)
    kept_counts = np.zeros(num_groups, dtype=_INDEX)
    kept_counts[kept_groups] = flows[keep_arcs_start : keep_arcs_start + kept_groups.size]
    deals = flows[deal_arcs_start : deal_arcs_start + deal_hub.size]
    total_cost = int(flow.optimal_cost())

    # keep: each group keeps its first partitions (index order) with its claimant
    position_in_group = np.empty(num_partitions, dtype=_INDEX)
    position_in_group[order] = np.arange(num_partitions) - np.repeat(starts, group_sizes)
    group_of = np.empty(num_partitions, dtype=_INDEX)
    group_of[order] = np.repeat(np.arange(num_groups, dtype=_INDEX), group_sizes)
    keep = position_in_group < kept_counts[group_of]
    owner[keep] = claimant[keep]

    weights = arrays.weights(group)
    loads = np.bincount(
        owner[keep], weights=None if weights is None else weights[keep], minlength=num_members
    ).astype(np.float64)
    released = np.flatnonzero(~keep)
    hub_of = group_hub[group_of[released]]
    by_hub = np.argsort(hub_of, kind="stable")
    hub_bounds = np.searchsorted(hub_of[by_hub], np.arange(num_hubs + 1))
    deal_bounds = np.searchsorted(deal_hub, np.arange(num_hubs + 1))
    for hub in range(num_hubs):
        pool = released[by_hub[hub_bounds[hub] : hub_bounds[hub + 1]]]
        quotas = np.zeros(num_members, dtype=_INDEX)
        span = slice(deal_bounds[hub], deal_bounds[hub + 1])
        quotas[deal_member[span]] = deals[span]
        deal(pool, quotas, loads, arrays.rank, weights, owner)

    moved = int((total_cost // move_cost) if racks is not None else total_cost)
    return OptimalPlan(
        arrays,
        owner,
        capacity,
        moved,
        None if racks is None else total_cost % move_cost,
    )


def _arc_flows(flow: min_cost_flow.SimpleMinCostFlow, count: int) -> np.ndarray:
    return np.asarray(flow.flows(np.arange(count, dtype=_INDEX)), dtype=_INDEX)


class OptimalAssignor:
    """Least max load, then fewest moves, then rack locality: each provably optimal."""

    name = "optimal"
    rebalance_protocol: RebalanceProtocol = "eager"

    def assign(self, group: Group) -> Assignment:
        plan = plan_optimal(group)
        return plan.arrays.assignment(plan.owner)
