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

from dataclasses import dataclass

import numpy as np
from ortools.graph.python import min_cost_flow

from assignors.arrays import NOBODY, GroupArrays
from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group
from assignors.traces.scoring import (
    SubscriptionClasses,
    optimal_max_load_of,
    subscription_classes,
)

_INDEX = np.int64


def partition_classes(arrays: GroupArrays, group: Group) -> tuple[np.ndarray, SubscriptionClasses]:
    """(class per partition, the classes): :func:`subscription_classes` of ``group`` (the
    group ``arrays`` were made of), numbered as scoring numbers them."""
    classes = subscription_classes(group)
    by_topic = classes.class_by_topic
    topic_class = np.fromiter(
        (by_topic.get(name, NOBODY) for name in arrays.space.topic_names),
        dtype=_INDEX,
        count=len(arrays.space.topic_names),
    )
    return topic_class[arrays.topic_of], classes


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
    class_of, classes = partition_classes(arrays, group)
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
