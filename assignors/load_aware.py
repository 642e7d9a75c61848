"""The load-aware assignors: balance the sum of partition weights per member, sticky within a
tolerance (KAFKA-5337 asked for this; it was never merged).

Goals in priority order: max weighted load within ``tolerance`` of the best possible, then
stickiness (a validly owned partition moves only while its member is above that bound), then
partition counts (ties go to the member with fewer partitions, so weightless partitions still
spread).

Three consumers share topic ``a`` of nine partitions; ``a0`` carries eight times the traffic of
each other partition (``Topic.weights``: lag, bytes/s...). Counting partitions gives one member
``a0`` and two more (load 10 of 16); balancing load gives ``a0`` a member of its own:

>>> from assignors.model import Group, Member, Topic, TopicPartition as TP, show
>>> sub = frozenset({"a"})
>>> topic = Topic("a", 9, weights=(8.0, 1, 1, 1, 1, 1, 1, 1, 1))
>>> first = LoadAwareAssignor().assign(
...     Group((topic,), (Member("c0", sub), Member("c1", sub), Member("c2", sub))))
>>> show(first)
{'c0': ['a-0'], 'c1': ['a-1', 'a-3', 'a-5', 'a-7'], 'c2': ['a-2', 'a-4', 'a-6', 'a-8']}

The best max load here is 8 (no member can hold less than ``a0``). ``c1`` leaves; ``c2`` now
holds 4 and takes all four of ``c1``'s partitions (load 8, within the default 5% of the best):
nothing ``c0`` or ``c2`` owned moves.

>>> survivors = tuple(Member(m, sub, first.partitions[m], generation=1) for m in ("c0", "c2"))
>>> show(LoadAwareAssignor().assign(Group((topic,), survivors)))
{'c0': ['a-0'], 'c2': ['a-1', 'a-2', 'a-3', 'a-4', 'a-5', 'a-6', 'a-7', 'a-8']}

The best max load is not computable exactly at scale (min-max weighted load is NP-hard), so the
bound is a proven lower bound on it: the larger of the heaviest partition and the fractional
optimum (partitions split at will among their subscribers, found to 0.01% by a max-flow search
over classes of topics with the same subscribers; above :data:`BOUND_SEARCH_ARCS` (class,
subscriber) pairs, the mean load and each class's even share instead). A max load within
``tolerance`` of this bound is within ``tolerance`` of the true best.

How: valid claims stay; new and unclaimed partitions go heaviest first to the lightest
subscriber (a round of deals per level of load, vectorized); then, while the fullest member is
above ``(1 + tolerance) x bound``, one of its partitions moves to the lightest member that may
take it: partitions it did not own before first (free), else the lightest single partition that
brings it within the bound, else the one closest to half the gap. Every move strictly lowers
the sum of squared loads, so this ends; it stops early when no single move helps (the bound may
be unreachable): no partition of the fullest member, nor of any member level with it up to
rounding (loads summed in another order may rank them the other way), can go to a lighter
subscriber and lower the pair's maximum. Without weights every partition weighs 1 and this is
count balance.

``load-aware-cooperative`` (:class:`CooperativeLoadAwareAssignor`) runs the same plan on the
cooperative protocol: partitions that change owner are withheld for one round, as
``cooperative-sticky`` does.

Complexity: O(P log P) numpy work to place new partitions, plus per move O(h + c) for the
fullest member's h partitions and its classes' c subscribers; no per-partition Python loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ortools.graph.python import max_flow

from assignors.arrays import NOBODY, GroupArrays
from assignors.base import RebalanceProtocol
from assignors.errors import InputError
from assignors.model import Assignment, Group
from assignors.optimal import partition_classes

DEFAULT_TOLERANCE = 0.05
"""Default ``tolerance``: the max weighted load may exceed the lower bound by 5%."""

_INDEX = np.int64
_SCALE_UNITS = 2**40  # weights are scaled to integers summing to about this for the flow search
_EPSILON = 1e-9
BOUND_SEARCH_ARCS = 1_000_000
"""Above this many (class, subscriber) pairs the bound skips the flow search (one flow of that
size per step) and is the larger of the mean load and each class's even share."""
_BOUND_PRECISION = 1e-4  # the bound is at most this far (relative) below the fractional optimum


def check_tolerance(tolerance: object) -> float:
    """The tolerance as a float; InputError (field ``options.tolerance``) unless a number >= 0."""
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not math.isfinite(tolerance)
        or tolerance < 0
    ):
        raise InputError(
            "tolerance must be a finite number >= 0 (0.1: within 10% of the best max load)",
            field="options.tolerance",
            value=tolerance,
        )
    return float(tolerance)


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """One group's load-aware answer: ``owner[p]`` per partition, the weight per partition
    used, the lower bound on the best max load and the bound moves aimed for."""

    arrays: GroupArrays
    owner: np.ndarray
    weights: np.ndarray
    lower_bound: float
    target: float

    def loads(self) -> np.ndarray:
        """Weighted load per member (group order)."""
        assigned = self.owner >= 0
        return np.bincount(
            self.owner[assigned],
            weights=self.weights[assigned],
            minlength=len(self.arrays.member_ids),
        )

    def moved(self) -> np.ndarray:
        """Indexes of validly claimed partitions that now go to another member."""
        claimant = self.arrays.claimant
        return np.flatnonzero((claimant >= 0) & (self.owner != claimant))


def plan_load_aware(group: Group, tolerance: float = DEFAULT_TOLERANCE) -> LoadPlan:
    """Owners for every subscribed partition: weighted max load within ``tolerance`` of the
    lower bound where single moves can reach it, claimed partitions moving only while needed."""
    tolerance = check_tolerance(tolerance)
    arrays = GroupArrays.of(group)
    num_partitions, num_members = arrays.num_partitions, len(arrays.member_ids)
    given = arrays.weights(group)
    weights = given if given is not None else np.ones(num_partitions)
    owner = arrays.claimant.copy()
    if num_partitions == 0:
        return LoadPlan(arrays, owner, weights, 0.0, 0.0)
    class_of, classes = partition_classes(arrays, group)
    class_members = list(classes.subscribers)
    lower = lower_bound(weights, class_of, class_members, num_members)
    target = lower * (1.0 + tolerance)

    kept = owner >= 0
    loads = np.bincount(owner[kept], weights=weights[kept], minlength=num_members).astype(float)
    counts = np.bincount(owner[kept], minlength=num_members).astype(_INDEX)
    free = np.flatnonzero(~kept)
    by_choice = sorted(range(len(class_members)), key=lambda c: (len(class_members[c]), c))
    free = free[np.argsort(class_of[free], kind="stable")]
    bounds = np.searchsorted(class_of[free], np.arange(len(class_members) + 1))
    for class_index in by_choice:
        pool = free[bounds[class_index] : bounds[class_index + 1]]
        members = np.asarray(class_members[class_index], dtype=_INDEX)
        _place(pool, members, weights, loads, counts, arrays.rank, owner)
    _rebalance(arrays, owner, weights, loads, counts, class_of, class_members, target)
    return LoadPlan(arrays, owner, weights, lower, target)


def lower_bound(
    weights: np.ndarray,
    class_of: np.ndarray,
    class_members: list[tuple[int, ...]],
    num_members: int,
) -> float:
    """A lower bound on the least max weighted load: the heaviest partition, and the fractional
    optimum (each class's weight split at will among its subscribers)."""
    total = float(weights.sum())
    heaviest = float(weights.max()) if weights.size else 0.0
    if total <= 0:
        return 0.0
    class_weight = np.bincount(class_of, weights=weights, minlength=len(class_members))
    active = sorted({member for members in class_members for member in members})
    if len(class_members) == 1:
        return max(heaviest, total / len(active))
    scale = _SCALE_UNITS / total
    sizes = np.floor(class_weight * scale).astype(_INDEX)
    low = int(sizes.sum()) // len(active)  # infeasible or tight: everyone at the mean
    # splitting each class evenly among its subscribers fits: an upper end for the search
    even = np.zeros(max(active) + 1)
    for class_index, members in enumerate(class_members):
        low = max(low, int(sizes[class_index]) // len(members))
        even[list(members)] += sizes[class_index] / len(members)
    high = int(np.ceil(even.max()))
    if sum(len(members) for members in class_members) > BOUND_SEARCH_ARCS:
        return max(heaviest, low / scale)  # the mean and each class's even share only
    fits = _FlowSearch(sizes, class_members, active)
    if fits(low):
        return max(heaviest, low / scale)
    # low does not fit, high does; stop once they are within _BOUND_PRECISION of each other
    while high - low > max(1, int(low * _BOUND_PRECISION)):
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle
    # low does not fit the scaled weights (which round down), so the true optimum exceeds it
    return max(heaviest, low / scale)


class _FlowSearch:
    """Can the classes' (scaled) weights be split among their subscribers with no member above
    a capacity? One max flow per question; the network's arrays are built once."""

    def __init__(
        self, sizes: np.ndarray, class_members: list[tuple[int, ...]], active: list[int]
    ) -> None:
        node_of = np.zeros(max(active) + 1, dtype=np.int32)
        node_of[active] = 2 + len(class_members) + np.arange(len(active), dtype=np.int32)
        lengths = np.asarray([len(members) for members in class_members])
        class_nodes = 2 + np.arange(len(class_members), dtype=np.int32)
        members = np.concatenate([np.asarray(m, dtype=np.int32) for m in class_members])
        self.tails = np.concatenate(
            [
                np.zeros(len(class_members), np.int32),
                np.repeat(class_nodes, lengths),
                node_of[active],
            ]
        )
        self.heads = np.concatenate([class_nodes, node_of[members], np.ones(len(active), np.int32)])
        self.fixed = np.concatenate([sizes, np.repeat(sizes, lengths)]).astype(_INDEX)
        self.num_active = len(active)
        self.total = int(sizes.sum())

    def __call__(self, capacity: int) -> bool:
        capacities = np.concatenate([self.fixed, np.full(self.num_active, capacity, _INDEX)])
        solver = max_flow.SimpleMaxFlow()
        solver.add_arcs_with_capacity(self.tails, self.heads, capacities)
        if solver.solve(0, 1) != solver.OPTIMAL:
            raise RuntimeError("max-flow solver failed")
        return bool(solver.optimal_flow() == self.total)


def _place(
    pool: np.ndarray,
    members: np.ndarray,
    weights: np.ndarray,
    loads: np.ndarray,
    counts: np.ndarray,
    rank: np.ndarray,
    owner: np.ndarray,
) -> None:
    """Deal ``pool`` heaviest first to ``members``, lightest first. Each round deals the next
    partitions one each, in (load, count, rank) order, to the members below the water level the
    whole pool would fill them to, or, when more, to those no heavier than the lightest plus
    the next weight (the ones greedy would pick next); so rounds are few even when few members
    are light."""
    if pool.size == 0 or members.size == 0:
        return
    pool = pool[np.argsort(-weights[pool], kind="stable")]
    level = _water_level(loads[members], float(weights[pool].sum()))
    start = 0
    while start < pool.size:
        member_loads = loads[members]
        order = np.lexsort((rank[members], counts[members], member_loads))
        ordered = members[order]
        sorted_loads = member_loads[order]
        next_level = float(sorted_loads[0]) + float(weights[pool[start]])
        eligible = max(
            int(np.searchsorted(sorted_loads, next_level, side="right")),
            int(np.searchsorted(sorted_loads, level, side="left")),
        )
        takers = ordered[: max(1, eligible)]
        taken = pool[start : start + takers.size]
        takers = takers[: taken.size]
        owner[taken] = takers
        loads[takers] += weights[taken]
        counts[takers] += 1
        start += taken.size


def _water_level(loads: np.ndarray, amount: float) -> float:
    """The level ``L`` with ``sum(max(0, L - load)) == amount``: how high ``amount`` of load
    poured onto the lightest members raises them."""
    ordered = np.sort(loads)
    filled = (amount + np.cumsum(ordered)) / np.arange(1, ordered.size + 1)
    below = np.flatnonzero(ordered < filled)  # members a level of filled[k] would raise
    return float(filled[below[-1]]) if below.size else float(ordered[0])


def _rebalance(
    arrays: GroupArrays,
    owner: np.ndarray,
    weights: np.ndarray,
    loads: np.ndarray,
    counts: np.ndarray,
    class_of: np.ndarray,
    class_members: list[tuple[int, ...]],
    target: float,
) -> None:
    """Move one partition at a time off the fullest member while it is above ``target`` and a
    move to a lighter subscriber strictly lowers the sum of squared loads; when the fullest has
    no such move, off the next member level with it (within rounding) that has one."""
    num_members = loads.size
    active = np.zeros(num_members, dtype=bool)
    for members in class_members:
        active[list(members)] = True
    if not active.any():
        return
    assigned = np.flatnonzero(owner >= 0)
    by_owner = assigned[np.argsort(owner[assigned], kind="stable")]
    bounds = np.searchsorted(owner[by_owner], np.arange(num_members + 1))
    holdings = [by_owner[bounds[i] : bounds[i + 1]] for i in range(num_members)]
    member_arrays = [np.asarray(members, dtype=_INDEX) for members in class_members]
    claimant, rank = arrays.claimant, arrays.rank
    tolerance = _EPSILON * max(1.0, float(loads.max()))
    candidates = np.flatnonzero(active)
    while True:
        fullest = candidates[np.lexsort((rank[candidates], -loads[candidates]))]
        top = float(loads[fullest[0]])
        if top <= target + tolerance:
            return
        # the members level with the fullest up to rounding (loads summed in another order may
        # rank them the other way round): the first of them that has a move that helps gives one
        level = fullest[: int(np.searchsorted(-loads[fullest], tolerance - top, side="right"))]
        for heaviest in level.tolist():
            move = _best_move(
                heaviest,
                holdings[heaviest],
                weights,
                loads,
                counts,
                claimant,
                rank,
                class_of,
                member_arrays,
                target,
                tolerance,
            )
            if move is not None:
                break
        else:
            return
        pick, taker = move
        held = holdings[heaviest]
        partition = int(held[pick])
        owner[partition] = taker
        loads[heaviest] -= weights[partition]
        loads[taker] += weights[partition]
        counts[heaviest] -= 1
        counts[taker] += 1
        holdings[heaviest] = np.delete(held, pick)
        holdings[taker] = np.append(holdings[taker], partition)


def _best_move(
    heaviest: int,
    held: np.ndarray,
    weights: np.ndarray,
    loads: np.ndarray,
    counts: np.ndarray,
    claimant: np.ndarray,
    rank: np.ndarray,
    class_of: np.ndarray,
    member_arrays: list[np.ndarray],
    target: float,
    tolerance: float,
) -> tuple[int, int] | None:
    """The move of one of ``heaviest``'s ``held`` partitions to the lightest other subscriber
    of its class, as (index in ``held``, taker), or None when no such move strictly lowers the
    sum of squared loads: unclaimed first, then one that brings both within ``target``
    (lightest first), then the one closest to half the gap."""
    if held.size == 0:
        return None
    held_classes = class_of[held]
    receivers = np.full(len(member_arrays), NOBODY, dtype=_INDEX)
    for class_index in np.unique(held_classes).tolist():
        members = member_arrays[class_index]
        members = members[members != heaviest]
        if members.size:
            best = np.lexsort((rank[members], counts[members], loads[members]))[0]
            receivers[class_index] = members[best]
    receiver = receivers[held_classes]
    has_receiver = receiver >= 0
    safe = np.where(has_receiver, receiver, 0)
    gap = loads[heaviest] - loads[safe]
    weight = weights[held]
    valid = has_receiver & (weight > tolerance) & (weight < gap - tolerance)
    if not valid.any():
        return None
    cost = (claimant[held] == heaviest).astype(_INDEX) - (claimant[held] == receiver)
    fixes = (weight >= loads[heaviest] - target) & (loads[safe] + weight <= target + tolerance)
    closeness = np.where(fixes, weight, np.abs(gap / 2 - weight))
    choices = np.flatnonzero(valid)
    pick = int(
        choices[np.lexsort((held[choices], closeness[choices], ~fixes[choices], cost[choices]))[0]]
    )
    return pick, int(receiver[pick])


class LoadAwareAssignor:
    """Balances weighted load within ``tolerance`` of the best, then sticky (eager protocol)."""

    name = "load-aware"
    rebalance_protocol: RebalanceProtocol = "eager"

    def __init__(self, tolerance: float = DEFAULT_TOLERANCE) -> None:
        self.tolerance = check_tolerance(tolerance)

    def assign(self, group: Group) -> Assignment:
        plan = plan_load_aware(group, self.tolerance)
        return plan.arrays.assignment(plan.owner)


class CooperativeLoadAwareAssignor:
    """``load-aware`` on the cooperative protocol: partitions changing owner (and those two
    members claimed in the same generation, and those a member still holds on a topic it
    dropped) are withheld until their old owner revokes them."""

    name = "load-aware-cooperative"
    rebalance_protocol: RebalanceProtocol = "cooperative"

    def __init__(self, tolerance: float = DEFAULT_TOLERANCE) -> None:
        self.tolerance = check_tolerance(tolerance)

    def assign(self, group: Group) -> Assignment:
        plan = plan_load_aware(group, self.tolerance)
        arrays = plan.arrays
        held_elsewhere = arrays.unsubscribed_owner & (plan.owner != arrays.claimant)
        withheld = np.union1d(plan.moved(), np.flatnonzero(arrays.contested | held_elsewhere))
        return plan.arrays.assignment(plan.owner, withheld)
