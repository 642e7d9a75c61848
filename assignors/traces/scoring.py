"""Scores of one generation: validity, balance, churn, and the exact optimum to compare with.

A generation is scored against the previous final assignment of the same assignor. Two consumers
share topic ``t`` (3 partitions); ``c0`` owned all three before and now gets one:

>>> from assignors.model import Group, Member, Topic, TopicPartition
>>> both = frozenset({"t"})
>>> group = Group((Topic("t", 3),), (Member("c0", both), Member("c1", both)))
>>> t0, t1, t2 = (TopicPartition("t", p) for p in range(3))
>>> row = score_generation(
...     group, {"c0": [t0], "c1": [t1, t2]},
...     trace_id="g", assignor="range", generation=2,
...     previous_owner={TopicPartition("t", p): "c0" for p in range(3)})
>>> row.max_load, row.optimal_max_load, row.moved, row.min_moved, row.revoked, row.balanced
(2, 2, 2, 1, 3, True)

``optimal_max_load`` is the smallest largest load any valid assignment reaches for these
subscriptions, and ``min_moved`` the fewest moves any valid assignment needs at that load. With
uniform subscriptions both have closed forms; otherwise they come from flows over classes of
partitions (same subscribers, same previous owner), so a group of 10^5 partitions makes a network
of a few thousand nodes: a max-flow feasibility search over the capacity for
``optimal_max_load``, then one min-cost flow (cost 1 for leaving the previous owner) for
``min_moved``.
"""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group, PartitionSpace, Topic, TopicPartition


class ScoreRow(NamedTuple):
    """One row of the score table (spec/traces.md), columns in the spec's order."""

    trace_id: str
    assignor: str
    generation: int
    members: int
    partitions: int
    unassigned: int
    invalid: int
    min_load: int
    max_load: int
    spread: int
    balanced: bool
    optimal_max_load: int
    weight_skew: float | None
    moved: int
    forced: int
    min_moved: int
    revoked: int
    rounds: int
    rack_mismatch: int | None
    assign_ms: float | None
    # version 3 (docs/traces.md, "Cost model"): the extra columns have defaults so rows of
    # older result files still build
    min_moved_own: int = 0
    excess_moved: int = 0
    revoked_weight: float | None = None
    moved_weight: float | None = None
    interval_ms: int | None = None
    paused_partition_seconds: float = 0.0
    delayed_weight: float | None = None
    warmup_weight: float | None = None
    # version 4 (docs/traces.md, "KIP-848 reconciliation"): null outside the consumer protocol
    reconcile_heartbeats: int | None = None
    reconcile_intervals: int | None = None
    paused_intervals: int | None = None
    paused_weight_intervals: float | None = None
    reconcile_seconds: float | None = None
    topic_spread: int = 0


class SummaryRow(NamedTuple):
    """One row per trace x assignor: totals over its generations, and the rebalance protocol
    the assignor ran (``eager``/``cooperative``; for ``recorded`` the real group's, ``mixed``
    when its generations disagree; null when the caller did not say)."""

    trace_id: str
    assignor: str
    protocol: str | None
    generations: int
    total_moved: int
    total_forced: int
    total_min_moved: int
    total_revoked: int
    total_rounds: int
    max_spread: int
    max_weight_skew: float | None
    mean_assign_ms: float | None
    invalid_generations: int
    unbalanced_generations: int
    total_excess_moved: int = 0
    max_load_imbalance: float | None = None
    total_paused_partition_seconds: float = 0.0
    total_delayed_weight: float | None = None
    total_warmup_weight: float | None = None
    max_reconcile_heartbeats: int | None = None
    max_reconcile_seconds: float | None = None


SCORE_SCHEMA = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("assignor", pa.string(), nullable=False),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("members", pa.int64(), nullable=False),
        pa.field("partitions", pa.int64(), nullable=False),
        pa.field("unassigned", pa.int64(), nullable=False),
        pa.field("invalid", pa.int64(), nullable=False),
        pa.field("min_load", pa.int64(), nullable=False),
        pa.field("max_load", pa.int64(), nullable=False),
        pa.field("spread", pa.int64(), nullable=False),
        pa.field("balanced", pa.bool_(), nullable=False),
        pa.field("optimal_max_load", pa.int64(), nullable=False),
        pa.field("weight_skew", pa.float64()),
        pa.field("moved", pa.int64(), nullable=False),
        pa.field("forced", pa.int64(), nullable=False),
        pa.field("min_moved", pa.int64(), nullable=False),
        pa.field("revoked", pa.int64(), nullable=False),
        pa.field("rounds", pa.int64(), nullable=False),
        pa.field("rack_mismatch", pa.int64()),
        pa.field("assign_ms", pa.float64()),
        pa.field("min_moved_own", pa.int64()),
        pa.field("excess_moved", pa.int64()),
        pa.field("revoked_weight", pa.float64()),
        pa.field("moved_weight", pa.float64()),
        pa.field("interval_ms", pa.int64()),
        pa.field("paused_partition_seconds", pa.float64()),
        pa.field("delayed_weight", pa.float64()),
        pa.field("warmup_weight", pa.float64()),
        pa.field("reconcile_heartbeats", pa.int64()),
        pa.field("reconcile_intervals", pa.int64()),
        pa.field("paused_intervals", pa.int64()),
        pa.field("paused_weight_intervals", pa.float64()),
        pa.field("reconcile_seconds", pa.float64()),
        pa.field("topic_spread", pa.int64()),
    ]
)

SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("assignor", pa.string(), nullable=False),
        pa.field("protocol", pa.string()),
        pa.field("generations", pa.int64(), nullable=False),
        pa.field("total_moved", pa.int64(), nullable=False),
        pa.field("total_forced", pa.int64(), nullable=False),
        pa.field("total_min_moved", pa.int64(), nullable=False),
        pa.field("total_revoked", pa.int64(), nullable=False),
        pa.field("total_rounds", pa.int64(), nullable=False),
        pa.field("max_spread", pa.int64(), nullable=False),
        pa.field("max_weight_skew", pa.float64()),
        pa.field("mean_assign_ms", pa.float64()),
        pa.field("invalid_generations", pa.int64(), nullable=False),
        pa.field("unbalanced_generations", pa.int64(), nullable=False),
        pa.field("total_excess_moved", pa.int64()),
        pa.field("max_load_imbalance", pa.float64()),
        pa.field("total_paused_partition_seconds", pa.float64()),
        pa.field("total_delayed_weight", pa.float64()),
        pa.field("total_warmup_weight", pa.float64()),
        pa.field("max_reconcile_heartbeats", pa.int64()),
        pa.field("max_reconcile_seconds", pa.float64()),
    ]
)

assert tuple(SCORE_SCHEMA.names) == ScoreRow._fields
assert tuple(SUMMARY_SCHEMA.names) == SummaryRow._fields


def scores_table(rows: Iterable[ScoreRow]) -> pa.Table:
    """Score rows as an Arrow table of :data:`SCORE_SCHEMA`, in the rows' order."""
    return _rows_table(rows, SCORE_SCHEMA)


def summary_table(rows: Iterable[SummaryRow]) -> pa.Table:
    """Summary rows as an Arrow table of :data:`SUMMARY_SCHEMA`, in the rows' order."""
    return _rows_table(rows, SUMMARY_SCHEMA)


def _rows_table(rows: Iterable[tuple[object, ...]], schema: pa.Schema) -> pa.Table:
    """Rows (named tuples whose fields are ``schema``'s) as a table, built a column at a time:
    about 3x cheaper than from one dict per row, and the same table.

    >>> row = ScoreRow("g", "range", 1, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 0, 0, 0, 0, 1,
    ...                None, None)
    >>> scores_table([row]).equals(
    ...     pa.Table.from_pylist([row._asdict()], schema=SCORE_SCHEMA))
    True
    """
    listed = rows if isinstance(rows, Sequence) else list(rows)
    if not listed:
        return schema.empty_table()
    columns = zip(*listed, strict=True)
    arrays = [
        pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


# ---------------------------------------------------------------------------------------------
# exact references


class SubscriptionClasses(NamedTuple):
    """Partitions grouped by the set of members that may take them: a class is the set of
    topics (with partitions) that have the same subscribers.

    ``subscribers[c]``: indexes into ``group.members`` (ascending) of class ``c``'s subscribers;
    ``sizes[c]``: its partition count; ``class_by_topic``: topic name -> class, for every topic
    with partitions that somebody subscribes to; ``considered``: indexes (ascending) of the
    members subscribed to at least one existing partition. Classes are numbered in the order of
    their first topic by name.
    """

    subscribers: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]
    class_by_topic: dict[str, int]
    considered: tuple[int, ...]


def subscription_classes(group: Group) -> SubscriptionClasses:
    """The classes of ``group``'s partitions (the one definition scoring and the optimal and
    load-aware assignors share).

    Members with the same subscription are handled together, so this is O(members +
    distinct subscriptions x topics), not O(members x topics).

    >>> from assignors.model import Member, Topic
    >>> classes = subscription_classes(Group((Topic("a", 4), Topic("b", 1), Topic("z", 0)), (
    ...     Member("x", frozenset({"a", "z"})), Member("y", frozenset({"a", "b"})))))
    >>> classes.subscribers, classes.sizes, classes.class_by_topic, classes.considered
    (((0, 1), (1,)), (4, 1), {'a': 0, 'b': 1}, (0, 1))
    """
    counts = {topic.name: topic.num_partitions for topic in group.topics if topic.num_partitions}
    sharing: dict[frozenset[str], list[int]] = {}
    for index, member in enumerate(group.members):
        sharing.setdefault(member.topics, []).append(index)
    if len(sharing) == 1:
        # everyone subscribes alike: one class of every existing topic they name
        ((topics, everyone),) = sharing.items()
        existing = sorted(topic for topic in topics if topic in counts)
        if not existing:
            return SubscriptionClasses((), (), {}, ())
        return SubscriptionClasses(
            (tuple(everyone),),
            (sum(counts[topic] for topic in existing),),
            dict.fromkeys(existing, 0),
            tuple(everyone),
        )
    # a topic's subscribers are determined by which distinct subscriptions contain it
    sharers: list[list[int]] = []
    containing: dict[str, list[int]] = defaultdict(list)
    for topics, indexes in sharing.items():
        existing = [topic for topic in topics if topic in counts]
        if existing:
            for topic in existing:
                containing[topic].append(len(sharers))
            sharers.append(indexes)
    class_of_key: dict[tuple[int, ...], int] = {}
    subscribers: list[tuple[int, ...]] = []
    sizes: list[int] = []
    class_by_topic: dict[str, int] = {}
    for topic in sorted(containing):
        key = tuple(containing[topic])
        position = class_of_key.get(key)
        if position is None:
            position = class_of_key[key] = len(sizes)
            subscribers.append(tuple(sorted(m for sharer in key for m in sharers[sharer])))
            sizes.append(0)
        sizes[position] += counts[topic]
        class_by_topic[topic] = position
    considered = tuple(sorted(m for indexes in sharers for m in indexes))
    return SubscriptionClasses(tuple(subscribers), tuple(sizes), class_by_topic, considered)


def _flow_network(classes: SubscriptionClasses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bipartite part shared by the flows: (members, hub tails, member heads), where
    ``members`` are the subscribers of some class (ascending) and arc ``k`` runs from class
    hub ``hub tails[k]`` (2 + class) to member node ``member heads[k]`` (2 + classes + the
    member's position in ``members``)."""
    parts = [np.asarray(group, dtype=np.int64) for group in classes.subscribers]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    subscribers = np.concatenate(parts)
    members = np.unique(subscribers)
    node_of = np.zeros(int(members[-1]) + 1, dtype=np.int64)
    node_of[members] = 2 + len(parts) + np.arange(members.size, dtype=np.int64)
    hubs = np.repeat(
        2 + np.arange(len(parts), dtype=np.int64), [len(group) for group in classes.subscribers]
    )
    return members, hubs, node_of[subscribers]


def _class_flow(classes: SubscriptionClasses, capacity: int) -> tuple[int, int]:
    """(max flow, members): classes -> their subscribers -> sink, each member capped at
    ``capacity``."""
    from ortools.graph.python import max_flow

    members, hub_tails, member_heads = _flow_network(classes)
    num_classes = len(classes.sizes)
    source, sink = 0, 1
    sizes = np.asarray(classes.sizes, dtype=np.int64)
    member_nodes = 2 + num_classes + np.arange(members.size, dtype=np.int64)
    tails = np.concatenate((np.full(num_classes, source), hub_tails, member_nodes))
    heads = np.concatenate((2 + np.arange(num_classes), member_heads, np.full(members.size, sink)))
    capacities = np.concatenate(
        (sizes, sizes[hub_tails - 2], np.full(members.size, capacity, dtype=np.int64))
    )
    solver = max_flow.SimpleMaxFlow()
    solver.add_arcs_with_capacity(
        tails.astype(np.int32), heads.astype(np.int32), capacities.astype(np.int64)
    )
    if solver.solve(source, sink) != solver.OPTIMAL:
        raise RuntimeError("max-flow solver failed")
    return solver.optimal_flow(), len(members)


def _max_flow_fits(classes: SubscriptionClasses, capacity: int) -> bool:
    """Can every partition go to a subscriber with no member above ``capacity``?"""
    return _class_flow(classes, capacity)[0] == sum(classes.sizes)


def _max_flow_fills(classes: SubscriptionClasses, level: int) -> bool:
    """Can every considered member get at least ``level`` partitions it subscribes to?"""
    flow, num_members = _class_flow(classes, level)
    return flow == level * num_members


def optimal_max_load(group: Group) -> int:
    """The smallest max load (partition count of the fullest member) of any valid assignment.

    >>> from assignors.model import Member, Topic
    >>> optimal_max_load(Group((Topic("a", 4), Topic("b", 1)),
    ...     (Member("x", frozenset({"a"})), Member("y", frozenset({"a", "b"})))))
    3
    """
    return optimal_max_load_of(subscription_classes(group))


def optimal_max_load_of(classes: SubscriptionClasses) -> int:
    """:func:`optimal_max_load` of a group whose classes are known."""
    num_considered = len(classes.considered)
    total = sum(classes.sizes)
    if total == 0:
        return 0
    if len(classes.sizes) == 1 and len(classes.subscribers[0]) == num_considered:
        return math.ceil(total / num_considered)
    if len(classes.sizes) <= _HALL_MAX_CLASSES:
        # every set S of classes needs ceil(partitions of S / members subscribing to S), and
        # the largest of these fits (Hall's condition for a common capacity)
        classes_in, reaches, _ = _hall_sets(classes.subscribers)
        needed = classes_in @ np.asarray(classes.sizes, dtype=np.int64)
        return int((-(-needed // reaches.sum(axis=1))).max())
    return _optimal_max_load_by_flow(classes)


def _optimal_max_load_by_flow(classes: SubscriptionClasses) -> int:
    """:func:`optimal_max_load_of` by max-flow feasibility and binary search over the capacity
    (for groups with too many classes to check every set of them)."""
    total = sum(classes.sizes)
    num_considered = len(classes.considered)
    # each class alone bounds the load from below; the union bound over all members too
    lower = max(
        math.ceil(total / num_considered),
        *(
            math.ceil(size / len(group))
            for group, size in zip(classes.subscribers, classes.sizes, strict=True)
        ),
    )
    if _max_flow_fits(classes, lower):
        return lower
    upper = lower * 2
    while not _max_flow_fits(classes, upper):
        lower, upper = upper, upper * 2
    # invariant: lower does not fit, upper fits
    while upper - lower > 1:
        middle = (lower + upper) // 2
        if _max_flow_fits(classes, middle):
            upper = middle
        else:
            lower = middle
    return upper


def optimal_min_load(group: Group) -> int:
    """The largest min load (partition count of the emptiest member subscribed to an existing
    partition) of any valid assignment.

    >>> from assignors.model import Member, Topic
    >>> optimal_min_load(Group((Topic("x", 2), Topic("y", 2), Topic("z", 2)), (
    ...     Member("a", frozenset({"x", "y", "z"})), Member("b", frozenset({"x"})),
    ...     Member("c", frozenset({"x", "y"})))))
    2
    """
    return optimal_min_load_of(subscription_classes(group))


def optimal_min_load_of(classes: SubscriptionClasses) -> int:
    """:func:`optimal_min_load` of a group whose classes are known: the largest ``L`` for which
    a max flow (classes -> subscribers, each member capped at ``L``) gives every member ``L``
    (the partitions left over go to any subscriber). Binary search, O(log(P / M)) flows."""
    num_considered = len(classes.considered)
    total = sum(classes.sizes)
    if total == 0 or num_considered == 0:
        return 0
    if len(classes.sizes) == 1 and len(classes.subscribers[0]) == num_considered:
        return total // num_considered
    low, high = 0, total // num_considered  # low fits; the answer is at most high
    while low < high:
        middle = (low + high + 1) // 2
        if _max_flow_fills(classes, middle):
            low = middle
        else:
            high = middle - 1
    return low


def optimal_spread(group: Group) -> int:
    """The smallest ``max_load - min_load`` of any valid assignment: :func:`optimal_max_load`
    minus :func:`optimal_min_load`. One assignment reaches both at once: the load vectors of
    valid assignments are the integer bases of a polymatroid, whose least-squares (decreasingly
    minimal) base minimises the largest load and maximises the smallest together.

    >>> from assignors.model import Member, Topic
    >>> optimal_spread(Group((Topic("a", 5), Topic("b", 1)),
    ...     (Member("x", frozenset({"a"})), Member("y", frozenset({"b"})))))
    4
    """
    classes = subscription_classes(group)
    return optimal_max_load_of(classes) - optimal_min_load_of(classes)


def _min_moved_flow(
    classes: SubscriptionClasses,
    key_class: np.ndarray,
    key_keeper: np.ndarray,
    key_count: np.ndarray,
    capacity: int,
) -> int:
    """Min-cost flow: partitions (grouped by class and previous owner: key ``k`` holds
    ``key_count[k]`` partitions of class ``key_class[k]`` whose previous owner, member
    ``key_keeper[k]``, may keep them; -1 none) -> members, cost 1 to leave a previous owner that
    could keep them, each member holding at most ``capacity``."""
    from ortools.graph.python import min_cost_flow

    members, hub_tails, member_heads = _flow_network(classes)
    num_classes = len(classes.sizes)
    source, sink = 0, 1
    member_base = 2 + num_classes
    node_of = np.zeros(int(members[-1]) + 1 if members.size else 1, dtype=np.int64)
    node_of[members] = member_base + np.arange(members.size, dtype=np.int64)
    num_keys = key_class.size
    key_nodes = member_base + members.size + np.arange(num_keys, dtype=np.int64)
    kept = key_keeper >= 0
    member_nodes = member_base + np.arange(members.size, dtype=np.int64)
    total = sum(classes.sizes)
    tails = np.concatenate(
        (hub_tails, np.full(num_keys, source), key_nodes[kept], key_nodes, member_nodes)
    )
    heads = np.concatenate(
        (
            member_heads,
            key_nodes,
            node_of[key_keeper[kept]],
            2 + key_class,
            np.full(members.size, sink),
        )
    )
    capacities = np.concatenate(
        (
            np.full(hub_tails.size, total, dtype=np.int64),
            key_count,
            key_count[kept],
            key_count,
            np.full(members.size, capacity, dtype=np.int64),
        )
    )
    costs = np.zeros(tails.size, dtype=np.int64)
    # leaving a previous owner that could keep them costs 1
    costs[tails.size - members.size - num_keys : tails.size - members.size] = kept
    solver = min_cost_flow.SimpleMinCostFlow()
    solver.add_arcs_with_capacity_and_unit_cost(
        tails.astype(np.int32), heads.astype(np.int32), capacities.astype(np.int64), costs
    )
    num_nodes = member_base + members.size + num_keys
    supplies = np.zeros(num_nodes, dtype=np.int64)
    supplies[source] = total
    supplies[sink] = -total
    solver.set_nodes_supplies(np.arange(num_nodes, dtype=np.int32), supplies)
    status = solver.solve()
    if status != solver.OPTIMAL:
        raise RuntimeError(f"min-cost-flow solver failed with status {status}")
    return int(solver.optimal_cost())


def min_moved(group: Group, previous_owner: Mapping[TopicPartition, str] | None) -> int:
    """The fewest partitions any valid assignment with max load = :func:`optimal_max_load` must
    take from a previous owner (identity) that is still present and subscribed.

    Member identities are ``instance_id`` when set, else ``member_id``.

    >>> from assignors.model import Member, Topic
    >>> subscription = frozenset({"a"})
    >>> group = Group((Topic("a", 4),), (Member("x", subscription), Member("y", subscription)))
    >>> min_moved(group, {TopicPartition("a", p): "x" for p in range(4)})
    2
    """
    classes = subscription_classes(group)
    return _min_moved(group, classes, optimal_max_load_of(classes), previous_owner)


def _member_by_identity(group: Group) -> dict[str, int]:
    """Identity -> index of the member speaking for it. Two members claiming one identity is a
    broken group; the one with the greater member id speaks for it (the other keeps what it is
    given, but nothing is carried forward or counted as kept through it)."""
    return {member.identity: index for index, member in enumerate(group.members)}


def _min_moved(
    group: Group,
    classes: SubscriptionClasses,
    capacity: int,
    previous_owner: Mapping[TopicPartition, str] | None,
) -> int:
    if not previous_owner:
        return 0
    speaker = _member_by_identity(group)
    counts = _partition_counts(group)
    # partitions a present, still subscribed previous owner could keep, by (class, owner)
    keepable: Counter[tuple[int, str]] = Counter()
    for tp, owner in previous_owner.items():
        class_index = classes.class_by_topic.get(tp.topic)
        index = speaker.get(owner)
        if (
            class_index is not None
            and index is not None
            and 0 <= tp.partition < counts[tp.topic]
            and tp.topic in group.members[index].topics
        ):
            keepable[class_index, owner] += 1
    return _min_moved_of(classes, keepable, speaker, capacity)


def _min_moved_of(
    classes: SubscriptionClasses,
    keepable: Mapping[tuple[int, str], int],
    speaker: Mapping[str, int],
    capacity: int,
) -> int:
    """:func:`_min_moved_keys` of partitions counted by (class, previous owner's identity)."""
    if not keepable:
        return 0
    subscribed = [frozenset(group) for group in classes.subscribers]
    key_class, key_keeper, key_count = [], [], []
    for (class_index, owner), count in keepable.items():
        keeper = speaker.get(owner, -1)
        key_class.append(class_index)
        key_keeper.append(keeper if keeper in subscribed[class_index] else -1)
        key_count.append(count)
    return _min_moved_keys(
        classes,
        np.asarray(key_class, dtype=np.int64),
        np.asarray(key_keeper, dtype=np.int64),
        np.asarray(key_count, dtype=np.int64),
        capacity,
    )


def _min_moved_keys(
    classes: SubscriptionClasses,
    key_class: np.ndarray,
    key_keeper: np.ndarray,
    key_count: np.ndarray,
    capacity: int,
    hall: HallSets | None = None,
) -> int:
    """The fewest moves at most ``capacity`` per member allows, given ``key_count[k]``
    partitions of class ``key_class[k]`` that member ``key_keeper[k]`` held and may keep (-1:
    nobody may). ``hall``: :func:`_hall_sets` of the classes, when the caller keeps them."""
    if key_count.size == 0:
        return 0
    if len(classes.sizes) == 1 and len(classes.subscribers[0]) == len(classes.considered):
        # everyone may take everything: each owner keeps up to `capacity`, the rest must move
        return int(np.maximum(key_count - capacity, 0).sum())
    least = _least_moved_if_reachable(classes, key_class, key_keeper, key_count, capacity, hall)
    if least is not None:
        return least
    # the partitions nobody held before (or that no keeper may keep) come from the class itself
    sizes = np.asarray(classes.sizes, dtype=np.int64)
    kept_by_class = np.bincount(key_class, weights=key_count, minlength=sizes.size).astype(np.int64)
    rest = np.flatnonzero(sizes > kept_by_class)
    return _min_moved_flow(
        classes,
        np.concatenate((key_class, rest)),
        np.concatenate((key_keeper, np.full(rest.size, -1, dtype=np.int64))),
        np.concatenate((key_count, (sizes - kept_by_class)[rest])),
        capacity,
    )


_HALL_MAX_CLASSES = 8
"""Most subscription classes :func:`_least_moved_if_reachable` checks every set of (2^8)."""


def _least_moved_if_reachable(
    classes: SubscriptionClasses,
    key_class: np.ndarray,
    key_keeper: np.ndarray,
    key_count: np.ndarray,
    capacity: int,
    hall: HallSets | None = None,
) -> int | None:
    """:func:`_min_moved_keys` when it is the plain lower bound, else None (then only a flow
    can tell). ``hall``: :func:`_hall_sets` of the classes, when the caller keeps them.

    No member keeps more than ``capacity``, so at least ``sum(max(0, kept_m - capacity))``
    partitions move, and reaching that bound means every keeper keeps ``min(kept_m,
    capacity)``: a keeper at or under the capacity keeps all it may, one over it keeps exactly
    ``capacity`` and drops the rest into the classes it chooses. Everything not kept must fit
    on the room left. By max-flow min-cut this is possible exactly when, for every set ``A``
    of classes, the room of the members subscribing to some class of ``A`` covers the
    partitions of ``A`` nobody may keep plus what each keeper over the capacity must drop into
    ``A`` (its excess beyond what it holds outside ``A``). Checked on every set at once, for a
    few classes.

    >>> from assignors.model import Member, Topic
    >>> classes = subscription_classes(Group((Topic("a", 4), Topic("b", 2)), (
    ...     Member("x", frozenset({"a"})), Member("y", frozenset({"a", "b"})))))
    >>> keys = np.array([0]), np.array([0]), np.array([4])  # x held all of a
    >>> _least_moved_if_reachable(classes, *keys, 3)  # x keeps 3; y takes a-3 and b
    1
    >>> _least_moved_if_reachable(classes, *keys, 2) is None  # y would need 4 > 2: no proof
    True
    """
    num_classes = len(classes.sizes)
    if num_classes > _HALL_MAX_CLASSES:
        return None
    classes_in, reaches, members = _hall_sets(classes.subscribers) if hall is None else hall
    if key_keeper.size and _least(key_keeper) >= 0:  # every key has a keeper: none to drop
        keepers, held_class, held_count = key_keeper, key_class, key_count
    else:
        kept = key_keeper >= 0
        keepers, held_class, held_count = key_keeper[kept], key_class[kept], key_count[kept]
    held = np.bincount(keepers, weights=held_count, minlength=int(members[-1]) + 1)
    held = held.astype(np.int64)
    excess = held - capacity
    over = excess > 0
    least = int(excess[over].sum())
    room = np.where(over, 0, -excess)[members]
    nobodys = np.subtract(
        classes.sizes,
        np.bincount(held_class, weights=held_count, minlength=num_classes).astype(np.int64),
    )
    needed = classes_in @ nobodys
    if least:
        over_keys = over[keepers]
        # the members over the capacity (each holds something, so each is some key's keeper)
        # and each such key's column among them
        dropping = over.nonzero()[0]
        column = (np.cumsum(over) - 1)[keepers[over_keys]]
        cells = held_class[over_keys] * dropping.size + column
        by_class = np.bincount(
            cells, weights=held_count[over_keys], minlength=num_classes * dropping.size
        ).astype(np.int64)
        outside = (1 - classes_in) @ by_class.reshape(num_classes, dropping.size)
        needed = needed + np.maximum(excess[dropping] - outside, 0).sum(axis=1)
    return least if bool((needed <= reaches @ room).all()) else None


HallSets = tuple[np.ndarray, np.ndarray, np.ndarray]
"""What :func:`_hall_sets` gives: (classes_in, reaches, members)."""


@functools.lru_cache(maxsize=256)
def _hall_sets(subscribers: tuple[tuple[int, ...], ...]) -> HallSets:
    """For every nonempty set ``S`` of classes (row ``s``, bit ``c`` of ``s + 1`` for class
    ``c``): ``classes_in[s, c]``, class ``c`` is in ``S``; ``reaches[s, j]``, member
    ``members[j]`` subscribes to some class of ``S``; ``members``: every subscriber,
    ascending."""
    members = np.asarray(sorted({member for group in subscribers for member in group}))
    position = {member: index for index, member in enumerate(members.tolist())}
    masks = np.zeros(len(members), dtype=np.int64)
    for class_index, group in enumerate(subscribers):
        masks[[position[member] for member in group]] |= 1 << class_index
    sets = np.arange(1, 1 << len(subscribers), dtype=np.int64)
    classes_in = (sets[:, None] >> np.arange(len(subscribers), dtype=np.int64)) & 1
    reaches = ((sets[:, None] & masks[None, :]) != 0).astype(np.int64)
    members.setflags(write=False)
    return classes_in, reaches, members


def _partition_counts(group: Group) -> dict[str, int]:
    """Topic -> partition count, 0 for unknown topics (a plain dict: the hot loops use it)."""
    return defaultdict(int, {topic.name: topic.num_partitions for topic in group.topics})


# ---------------------------------------------------------------------------------------------
# one generation


def score_generation(
    group: Group,
    partitions_by_member: Mapping[str, Sequence[TopicPartition]],
    *,
    trace_id: str,
    assignor: str,
    generation: int,
    previous_owner: Mapping[TopicPartition, str] | None = None,
    protocol: RebalanceProtocol = "eager",
    rounds: int = 1,
    assign_ms: float | None = None,
    interval_ms: int | None = None,
) -> ScoreRow:
    """Score the final assignment of one generation (spec/traces.md, "Scores").

    ``previous_owner`` maps each partition of the previous final assignment to the identity
    (instance id, else member id) that held it; None for a trace's first generation.
    ``protocol`` decides ``revoked``: eager members give up everything they owned, cooperative
    members only what they no longer hold. ``interval_ms`` is the time since the previous
    generation's ``timestamp_ms`` (null when either lacks one); it only bounds the cost model's
    round duration (:mod:`assignors.traces.cost`).

    ``min_moved_own`` is the fewest moves any valid assignment needs whose largest load is no
    greater than this assignment's own (``max(max_load, optimal_max_load)``), and
    ``excess_moved = max(0, moved - min_moved_own)``: the moves beyond the least needed for the
    balance this assignor reached. It is never negative, unlike ``moved - min_moved``, which is
    below zero when an assignor keeps partitions in place by staying unbalanced.
    ``revoked_weight``/``moved_weight`` sum the partition weights (``Topic.weights``) of the
    revoked/moved partitions; null when no topic of the group carries weights.
    """
    members = group.members
    classes = subscription_classes(group)
    considered, class_by_topic = classes.considered, classes.class_by_topic
    num_partitions = sum(classes.sizes)

    counts = _partition_counts(group)

    # validity
    holders: Counter[TopicPartition] = Counter()
    bad: set[TopicPartition] = set()
    for member in members:
        held = partitions_by_member.get(member.member_id, ())
        holders.update(held)
        subscribed = member.topics
        bad.update(
            tp
            for tp in held
            if tp.topic not in subscribed or not 0 <= tp.partition < counts[tp.topic]
        )
    invalid = len(bad | {tp for tp, count in holders.items() if count > 1})
    validly_held = sum(1 for tp in holders if tp not in bad and tp.topic in class_by_topic)
    unassigned = num_partitions - validly_held

    # balance
    loads = {
        index: len(partitions_by_member.get(members[index].member_id, ())) for index in considered
    }
    min_load = min(loads.values(), default=0)
    max_load = max(loads.values(), default=0)
    balanced = _is_balanced(group, partitions_by_member, loads)
    capacity = optimal_max_load_of(classes)
    topic_spread = _topic_spread(group, partitions_by_member, classes, counts)

    # churn against the previous final assignment
    moved = forced = revoked = minimum_moved = minimum_moved_own = 0
    weighted = any(topic.weights is not None for topic in group.topics)
    weights = {topic.name: topic.weights for topic in group.topics if topic.weights is not None}
    revoked_weight = moved_weight = 0.0
    if previous_owner:
        speaker = _member_by_identity(group)
        held_by_speaker: dict[int, frozenset[TopicPartition]] = {}
        keepable: Counter[tuple[int, str]] = Counter()
        eager = protocol == "eager"
        for tp, owner in previous_owner.items():
            class_index = class_by_topic.get(tp.topic)
            exists = class_index is not None and 0 <= tp.partition < counts[tp.topic]
            index = speaker.get(owner)
            if index is None:
                forced += exists
                continue
            member = members[index]
            speaker_held = held_by_speaker.get(index)
            if speaker_held is None:
                speaker_held = frozenset(partitions_by_member.get(member.member_id, ()))
                held_by_speaker[index] = speaker_held
            still_held = tp in speaker_held
            is_revoked = eager or not still_held
            revoked += is_revoked
            topic_weights = weights.get(tp.topic)
            weight = (
                topic_weights[tp.partition]
                if topic_weights is not None and 0 <= tp.partition < len(topic_weights)
                else 0.0
            )
            if is_revoked:
                revoked_weight += weight
            if not exists:
                continue
            if tp.topic not in member.topics:
                forced += 1
                continue
            keepable[class_index, owner] += 1  # type: ignore[index]
            moved += not still_held
            if not still_held:
                moved_weight += weight
        minimum_moved = _min_moved_of(classes, keepable, speaker, capacity)
        own_capacity = max(max_load, capacity)
        minimum_moved_own = (
            minimum_moved
            if own_capacity == capacity
            else _min_moved_of(classes, keepable, speaker, own_capacity)
        )

    return ScoreRow(
        trace_id=trace_id,
        assignor=assignor,
        generation=generation,
        members=len(members),
        partitions=num_partitions,
        unassigned=unassigned,
        invalid=invalid,
        min_load=min_load,
        max_load=max_load,
        spread=max_load - min_load,
        balanced=balanced,
        optimal_max_load=capacity,
        weight_skew=_weight_skew(group, partitions_by_member, considered, class_by_topic),
        moved=moved,
        forced=forced,
        min_moved=minimum_moved,
        revoked=revoked,
        rounds=rounds,
        rack_mismatch=_rack_mismatch(group, partitions_by_member),
        assign_ms=assign_ms,
        min_moved_own=minimum_moved_own,
        excess_moved=max(0, moved - minimum_moved_own),
        revoked_weight=revoked_weight if weighted else None,
        moved_weight=moved_weight if weighted else None,
        interval_ms=interval_ms,
        topic_spread=topic_spread,
    )


def _topic_spread(
    group: Group,
    partitions_by_member: Mapping[str, Sequence[TopicPartition]],
    classes: SubscriptionClasses,
    counts: Mapping[str, int],
) -> int:
    """The largest, over topics, of (most - fewest) partitions of the topic held by one of its
    subscribers. O(P + T)."""
    held: Counter[tuple[str, int]] = Counter()
    for index, member in enumerate(group.members):
        subscribed = member.topics
        for tp in partitions_by_member.get(member.member_id, ()):
            if tp.topic in subscribed and 0 <= tp.partition < counts[tp.topic]:
                held[tp.topic, index] += 1
    by_topic: dict[str, list[int]] = defaultdict(list)
    for (topic, _index), count in held.items():
        by_topic[topic].append(count)
    spread = 0
    for topic, class_index in classes.class_by_topic.items():
        holding = by_topic.get(topic, [])
        most = max(holding, default=0)
        fewest = min(holding) if len(holding) == len(classes.subscribers[class_index]) else 0
        spread = max(spread, most - fewest)
    return spread


def _is_balanced(
    group: Group,
    partitions_by_member: Mapping[str, Sequence[TopicPartition]],
    loads: Mapping[int, int],
) -> bool:
    """Kafka's rule: a member holding more than one partition above another never holds a
    partition the other subscribes to."""
    if not loads or max(loads.values()) - min(loads.values()) <= 1:
        return True
    least_by_topic: dict[str, int] = {}
    for index, load in loads.items():
        for topic in group.members[index].topics:
            if load < least_by_topic.get(topic, load + 1):
                least_by_topic[topic] = load
    for index, load in loads.items():
        held_topics = {
            tp.topic for tp in partitions_by_member.get(group.members[index].member_id, ())
        }
        for topic in held_topics:
            least = least_by_topic.get(topic)
            if least is not None and least < load - 1:
                return False
    return True


def _weight_skew(
    group: Group,
    partitions_by_member: Mapping[str, Sequence[TopicPartition]],
    considered: Sequence[int],
    class_by_topic: Mapping[str, int],
) -> float | None:
    """Max member load / mean member load by partition weights; None unless every subscribed
    topic carries weights."""
    weighted = {name: group.topic(name) for name in class_by_topic}
    if not weighted or any(topic is None or topic.weights is None for topic in weighted.values()):
        return None
    member_loads = []
    for index in considered:
        load = 0.0
        for tp in partitions_by_member.get(group.members[index].member_id, ()):
            topic = weighted.get(tp.topic)
            if (
                topic is not None
                and topic.weights is not None
                and 0 <= tp.partition < topic.num_partitions
            ):
                load += topic.weights[tp.partition]
        member_loads.append(load)
    mean = sum(member_loads) / len(member_loads)
    if mean == 0:
        return 1.0
    return max(member_loads) / mean


def _rack_mismatch(
    group: Group, partitions_by_member: Mapping[str, Sequence[TopicPartition]]
) -> int | None:
    """Partitions held by a member whose rack has none of their replicas; None without racks."""
    if not group.has_racks():
        return None
    racks_by_topic = {
        topic.name: topic.replica_racks for topic in group.topics if topic.replica_racks is not None
    }
    mismatched = 0
    for member in group.members:
        if member.rack is None:
            continue
        for tp in partitions_by_member.get(member.member_id, ()):
            racks = racks_by_topic.get(tp.topic)
            if racks is not None and 0 <= tp.partition < len(racks):
                mismatched += member.rack not in racks[tp.partition]
    return mismatched


# ---------------------------------------------------------------------------------------------
# summary


def summarize(
    rows: Iterable[ScoreRow], protocols: Mapping[tuple[str, str], str] | None = None
) -> list[SummaryRow]:
    """One row per trace x assignor, sorted by both; ``protocols`` maps (trace id, assignor)
    to the rebalance protocol the summary reports (null where it has none).

    >>> rows = [ScoreRow("g", "range", gen, 2, 4, 0, 0, 2, 2, 0, True, 2, None, moved, 0, 0,
    ...                  moved, 1, None, None) for gen, moved in ((1, 0), (2, 3))]
    >>> summary = summarize(rows, {("g", "range"): "eager"})[0]
    >>> summary.protocol, summary.generations, summary.total_moved, summary.mean_assign_ms
    ('eager', 2, 3, None)
    """
    known = protocols or {}
    grouped: dict[tuple[str, str], list[ScoreRow]] = defaultdict(list)
    for row in rows:
        grouped[row.trace_id, row.assignor].append(row)
    summary = []
    for (trace_id, assignor), group_rows in sorted(grouped.items()):
        skews = [row.weight_skew for row in group_rows if row.weight_skew is not None]
        timings = [row.assign_ms for row in group_rows if row.assign_ms is not None]
        summary.append(
            SummaryRow(
                trace_id=trace_id,
                assignor=assignor,
                protocol=known.get((trace_id, assignor)),
                generations=len(group_rows),
                total_moved=sum(row.moved for row in group_rows),
                total_forced=sum(row.forced for row in group_rows),
                total_min_moved=sum(row.min_moved for row in group_rows),
                total_revoked=sum(row.revoked for row in group_rows),
                total_rounds=sum(row.rounds for row in group_rows),
                max_spread=max(row.spread for row in group_rows),
                max_weight_skew=max(skews) if skews else None,
                mean_assign_ms=sum(timings) / len(timings) if timings else None,
                invalid_generations=sum(1 for row in group_rows if row.invalid or row.unassigned),
                unbalanced_generations=sum(1 for row in group_rows if not row.balanced),
                total_excess_moved=sum(row.excess_moved for row in group_rows),
                max_load_imbalance=_max_or_none(load_imbalance(row) for row in group_rows),
                total_paused_partition_seconds=sum(
                    row.paused_partition_seconds for row in group_rows
                ),
                total_delayed_weight=_sum_or_none(row.delayed_weight for row in group_rows),
                total_warmup_weight=_sum_or_none(row.warmup_weight for row in group_rows),
                max_reconcile_heartbeats=_max_int_or_none(
                    row.reconcile_heartbeats for row in group_rows
                ),
                max_reconcile_seconds=_max_or_none(row.reconcile_seconds for row in group_rows),
            )
        )
    return summary


def load_imbalance(row: ScoreRow) -> float | None:
    """Largest member load over the mean load (partitions / members) of one generation: 1.0 is
    perfect balance; None for a generation without partitions or members.

    >>> row = ScoreRow("g", "range", 1, 2, 3, 0, 0, 1, 2, 1, True, 2, None, 0, 0, 0, 0, 1,
    ...                None, None)
    >>> load_imbalance(row)
    1.3333333333333333
    """
    if row.partitions == 0 or row.members == 0:
        return None
    return row.max_load / (row.partitions / row.members)


def _max_or_none(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def _max_int_or_none(values: Iterable[int | None]) -> int | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


# ---------------------------------------------------------------------------------------------
# one generation, on owner arrays


@dataclass(frozen=True, slots=True)
class GenerationShape:
    """What scoring needs from one generation that is the same for every assignor: built once
    per generation by a replay and shared by the assignors it runs.

    ``group`` has the generation's members without owned partitions; partitions are numbered
    by ``space`` (:meth:`~assignors.model.Group.partition_space`). ``topic_of[p]``: topic
    position of partition ``p``; ``class_of_topic[t]``: subscription class of topic position
    ``t`` (-1 for a topic without partitions); ``subscribed[i, t]``: member ``i`` subscribes
    to topic position ``t``; ``considered``: members subscribed to some existing partition;
    ``speaker``: identity -> index of the member speaking for it; ``revoke_weight[p]``: the
    weight ``revoked_weight`` and ``moved_weight`` add up (0.0 without weights), None when no
    topic carries weights; ``skew_weight[p]``: the weights ``weight_skew`` adds up, None unless
    every subscribed topic carries weights; ``mismatched[i, p]``: member ``i``'s rack has no
    replica of ``p``, None when the group has no racks. ``uniform``: one subscription class,
    every considered member in it; ``subscribes_all``: every member subscribes to every topic
    of ``space``; ``topics_with_partitions``: positions of the topics with partitions;
    ``hall``: :func:`_hall_sets` of the classes when there are several and at most
    :data:`_HALL_MAX_CLASSES`, else None; ``considered_subscribed``: ``subscribed``'s rows of
    the considered members; ``all_considered``: every member is considered;
    ``class_of_partition[p]``: ``class_of_topic[topic_of[p]]``; ``partition_indexes``: every
    partition's index, ascending; ``topic_cells[p]``: ``topic_of[p]`` times the number of
    members (partition ``p``'s cell, before its owner's column, in a topic x member table).
    """

    group: Group
    classes: SubscriptionClasses
    capacity: int
    space: PartitionSpace
    member_ids: tuple[str, ...]
    topic_of: np.ndarray
    class_of_topic: np.ndarray
    subscribed: np.ndarray
    considered: np.ndarray
    speaker: dict[str, int]
    revoke_weight: np.ndarray | None
    skew_weight: np.ndarray | None
    mismatched: np.ndarray | None
    uniform: bool
    subscribes_all: bool
    topics_with_partitions: np.ndarray
    hall: HallSets | None
    considered_subscribed: np.ndarray
    all_considered: bool
    class_of_partition: np.ndarray
    partition_indexes: np.ndarray
    topic_cells: np.ndarray

    @classmethod
    def of(
        cls,
        group: Group,
        cache: ShapeCache | None = None,
        identities: Sequence[str] | None = None,
    ) -> GenerationShape:
        """The shape of ``group`` (its members' owned partitions play no part). ``cache``
        keeps the parts that depend only on the topics, the subscriptions, the racks or the
        classes between calls, so the generations of one trace that repeat them make them once
        (a generation whose members subscribe and sit in racks as an earlier one's, member by
        member, shares all of that shape but the members' ids and identities);
        ``identities``, when the caller knows them, are the members' identities in order."""
        if cache is None:
            cache = ShapeCache()
        members = group.members
        subscriptions = tuple(map(_topics_of, members))
        # one row per distinct subscription, copied to the members sharing it
        distinct = {topics: row for row, topics in enumerate(dict.fromkeys(subscriptions))}
        parts = cache.space_parts(group, distinct)
        member_ids = tuple(map(_member_id_of, members))
        speaker = (
            _member_by_identity(group)
            if identities is None
            else dict(zip(identities, range(len(identities)), strict=True))
        )
        # every part but the members' ids follows from the topics and, member by member, the
        # subscriptions and racks: a generation repeating those of an earlier one shares them
        like = (parts, subscriptions, tuple(map(_rack_of, members)))
        seen = cache._shapes.get(like)
        if seen is not None:
            return replace(seen, group=group, member_ids=member_ids, speaker=speaker)
        row_of = list(map(distinct.__getitem__, subscriptions))
        classes = subscription_classes(group)
        space = parts.space
        position = parts.position
        class_by_topic = classes.class_by_topic
        class_of_topic = np.asarray(
            [class_by_topic.get(name, -1) for name in space.topic_names], dtype=np.int64
        )
        if len(distinct) == 1:
            subscribed, subscribes_all = parts.everyone_subscribing(
                next(iter(distinct)), len(row_of)
            )
        else:
            rows = np.zeros((len(distinct), len(position)), dtype=bool)
            for topics, row_index in distinct.items():
                rows[row_index] = parts.subscription_row(topics)
            subscribed = rows[np.asarray(row_of, dtype=np.int64)] if row_of else rows
            subscribes_all = bool(subscribed.all())
        revoke_weight = parts.revoke_weight
        # the same per-partition weights, when every subscribed topic carries them
        skew_weight = None
        if classes.class_by_topic and all(
            group.topic(name).weights is not None  # type: ignore[union-attr]
            for name in classes.class_by_topic
        ):
            skew_weight = revoke_weight
        mismatched = None
        if parts.replica_racks and any(member.rack is not None for member in group.members):
            # one row per distinct consumer rack (row 0: no rack, never mismatched)
            racks = sorted({member.rack for member in group.members if member.rack is not None})
            rack_row = {rack: row for row, rack in enumerate(racks, 1)}
            by_rack = np.zeros((len(racks) + 1, space.size), dtype=bool)
            for rack, row_index in rack_row.items():
                by_rack[row_index] = parts.mismatch_row(rack)
            mismatched = by_rack[
                np.asarray([rack_row.get(member.rack, 0) for member in group.members], np.int64)  # type: ignore[arg-type]
            ]
        considered = np.asarray(classes.considered, dtype=np.int64)
        capacity, hall = cache.capacity_and_hall_sets(classes)
        made = cache._shapes[like] = cls(
            group=group,
            classes=classes,
            capacity=capacity,
            space=space,
            member_ids=member_ids,
            topic_of=parts.topic_of,
            class_of_topic=class_of_topic,
            subscribed=subscribed,
            considered=considered,
            speaker=speaker,
            revoke_weight=revoke_weight,
            skew_weight=skew_weight,
            mismatched=mismatched,
            uniform=len(classes.sizes) == 1
            and len(classes.subscribers[0]) == len(classes.considered),
            subscribes_all=subscribes_all,
            topics_with_partitions=np.flatnonzero(class_of_topic >= 0),
            hall=hall,
            considered_subscribed=subscribed[considered],
            all_considered=int(considered.size) == len(group.members),
            class_of_partition=class_of_topic[parts.topic_of],
            partition_indexes=np.arange(int(parts.topic_of.size)),
            topic_cells=parts.topic_of * len(members),
        )
        return made

    def owners_of(self, assignment: Assignment) -> np.ndarray | None:
        """``assignment`` as one owner (member index, -1 nobody) per partition of ``space``;
        None when it cannot be one: it hands out a partition outside ``space`` or twice."""
        if (
            assignment.owners is not None
            and assignment.member_ids == self.member_ids
            and assignment.space is not None
            and assignment.space.topic_names == self.space.topic_names
            and assignment.space.partition_counts == self.space.partition_counts
        ):
            return assignment.owners
        owners = np.full(self.topic_of.size, -1, dtype=np.int64)
        partitions = assignment.partitions
        index = self.space.index
        counts = dict(zip(self.space.topic_names, self.space.partition_counts, strict=True))
        for member_index, member_id in enumerate(self.member_ids):
            held = partitions.get(member_id, ())
            if not held:
                continue
            try:
                if not all(0 <= tp.partition < counts[tp.topic] for tp in held):
                    return None
                indexes = np.fromiter(map(index, held), dtype=np.int64, count=len(held))
            except (KeyError, TypeError, AttributeError):
                return None
            if (owners[indexes] >= 0).any() or np.unique(indexes).size != indexes.size:
                return None
            owners[indexes] = member_index
        return owners


_rack_of = attrgetter("rack")
_topics_of = attrgetter("topics")
_member_id_of = attrgetter("member_id")


class _SpaceParts:
    """What a generation's shape takes from its topics and partition space alone."""

    __slots__ = (
        "_mismatch_rows",
        "_subscription_rows",
        "_uniform_matrices",
        "position",
        "replica_racks",
        "revoke_weight",
        "space",
        "topic_of",
        "topics",
    )

    def __init__(
        self, space: PartitionSpace, topics: Sequence[Topic | None], replica_racks: bool
    ) -> None:
        counts = np.asarray(space.partition_counts, dtype=np.int64)
        self.space = space
        self.replica_racks = replica_racks  # some topic of the group has replica racks
        self.topics = topics  # in the order of space.topic_names
        self.position = {name: index for index, name in enumerate(space.topic_names)}
        self.topic_of = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        self.revoke_weight = None
        if any(topic is not None and topic.weights is not None for topic in topics):
            self.revoke_weight = _per_partition(
                [topic.weights if topic else None for topic in topics], counts
            )
        self._subscription_rows: dict[frozenset[str], np.ndarray] = {}
        self._mismatch_rows: dict[str, np.ndarray] = {}
        self._uniform_matrices: dict[tuple[frozenset[str], int], tuple[np.ndarray, bool]] = {}

    def subscription_row(self, topics: frozenset[str]) -> np.ndarray:
        """``row[t]``: a member subscribing to ``topics`` subscribes to topic position ``t``."""
        row = self._subscription_rows.get(topics)
        if row is None:
            row = np.zeros(len(self.position), dtype=bool)
            row[[self.position[name] for name in topics if name in self.position]] = True
            self._subscription_rows[topics] = row
        return row

    def everyone_subscribing(
        self, topics: frozenset[str], num_members: int
    ) -> tuple[np.ndarray, bool]:
        """The ``subscribed`` matrix of ``num_members`` members all subscribing to ``topics``
        (read-only: shared by the generations that repeat it), and whether it is all True."""
        key = (topics, num_members)
        found = self._uniform_matrices.get(key)
        if found is None:
            matrix = np.repeat(self.subscription_row(topics)[None, :], num_members, axis=0)
            matrix.setflags(write=False)
            found = self._uniform_matrices[key] = (matrix, bool(matrix.all()))
        return found

    def mismatch_row(self, rack: str) -> np.ndarray:
        """``row[p]``: rack ``rack`` holds no replica of partition ``p`` (False for a topic
        without replica racks)."""
        row = self._mismatch_rows.get(rack)
        if row is None:
            row = np.zeros(self.space.size, dtype=bool)
            for offset, topic in zip(self.space.offsets, self.topics, strict=True):
                if topic is None or topic.replica_racks is None:
                    continue
                row[offset : offset + topic.num_partitions] = [
                    rack not in replica_racks for replica_racks in topic.replica_racks
                ]
            self._mismatch_rows[rack] = row
        return row


class ShapeCache:
    """The parts of :class:`GenerationShape` that generations of one trace often repeat: per
    set of topics and partition space, the partition numbering, weights, subscription and rack
    rows; per set of subscription classes, the optimal max load; per topics and members'
    subscriptions and racks in order, every part of the shape but the members' ids. Keep one
    per trace (it holds on to what it made)."""

    __slots__ = ("_capacities", "_shapes", "_spaces")

    def __init__(self) -> None:
        # by space parts, then each member's subscription and rack in order
        self._shapes: dict[
            tuple[_SpaceParts, tuple[frozenset[str], ...], tuple[str | None, ...]],
            GenerationShape,
        ] = {}
        self._spaces: dict[tuple[tuple[Topic, ...], tuple[str, ...]], _SpaceParts] = {}
        self._capacities: dict[
            tuple[tuple[tuple[int, ...], ...], tuple[int, ...], int], tuple[int, HallSets | None]
        ] = {}

    def space_parts(
        self, group: Group, subscriptions: Iterable[frozenset[str]] | None = None
    ) -> _SpaceParts:
        """The parts of ``group``'s partition space (which becomes the one kept here, when an
        equal one was made before, so groups of a trace share its partition objects).
        ``subscriptions``: the members' distinct subscriptions, when the caller has them."""
        if subscriptions is None:
            names = group.subscribed_topics()
        else:
            wanted = frozenset().union(*subscriptions)
            names = tuple(topic.name for topic in group.topics if topic.name in wanted)
        key = (group.topics, names)
        parts = self._spaces.get(key)
        if parts is None:
            space = group.partition_space()
            for known in self._spaces.values():
                if known.space == space:
                    space = known.space
                    break
            parts = _SpaceParts(
                space,
                [group.topic(name) for name in names],
                any(topic.replica_racks is not None for topic in group.topics),
            )
            self._spaces[key] = parts
        if group._space is not parts.space:
            object.__setattr__(group, "_space", parts.space)
        return parts

    def capacity(self, classes: SubscriptionClasses) -> int:
        """:func:`optimal_max_load_of` ``classes``, solved once per distinct classes."""
        return self.capacity_and_hall_sets(classes)[0]

    def capacity_and_hall_sets(self, classes: SubscriptionClasses) -> tuple[int, HallSets | None]:
        """:meth:`capacity` and :func:`_hall_sets` of ``classes`` when they are several and
        at most :data:`_HALL_MAX_CLASSES` (None otherwise), made once per distinct classes."""
        key = (classes.subscribers, classes.sizes, len(classes.considered))
        found = self._capacities.get(key)
        if found is None:
            hall = None
            if 1 < len(classes.sizes) <= _HALL_MAX_CLASSES:
                hall = _hall_sets(classes.subscribers)
            found = self._capacities[key] = (optimal_max_load_of(classes), hall)
        return found


def _per_partition(weights: Sequence[tuple[float, ...] | None], counts: np.ndarray) -> np.ndarray:
    """One float per partition: a topic's weights, 0.0 for a topic without them."""
    parts = [
        np.zeros(int(count)) if values is None else np.asarray(values, dtype=np.float64)
        for values, count in zip(weights, counts, strict=True)
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


class CarriedInto(NamedTuple):
    """Over the previous generation's partitions, what :func:`score_owners` reads of where each
    one is in this generation (the same for every assignor, so a replay makes it once per
    generation): ``exists[q]``, ``current[q] >= 0``; ``topic[q]`` and ``class_of[q]``, the
    topic position and subscription class of ``current[q]`` (read at -1 too, where ``exists``
    masks them); ``churn_bits[q]``, the bits of ``q``'s churn code (:data:`_CHURN_COUNTS`) that
    do not depend on who held it: 2 when it exists, 8 as well when every member subscribes to
    every topic."""

    exists: np.ndarray
    topic: np.ndarray
    class_of: np.ndarray
    churn_bits: np.ndarray

    @classmethod
    def of(cls, shape: GenerationShape, current: np.ndarray) -> CarriedInto:
        exists = current >= 0
        if not shape.topic_of.size:  # no partition here: nothing is read at them
            nothing = np.zeros(current.size, dtype=np.int64)
            return cls(exists, nothing, nothing, exists << 1)
        if current is shape.partition_indexes:  # every partition where it was
            return cls(exists, shape.topic_of, shape.class_of_partition, _churn_bits(shape, exists))
        return cls(
            exists,
            shape.topic_of[current],
            shape.class_of_partition[current],
            _churn_bits(shape, exists),
        )


def _churn_bits(shape: GenerationShape, exists: np.ndarray) -> np.ndarray:
    """:attr:`CarriedInto.churn_bits` of partitions that exist as ``exists`` says."""
    bits = exists << 1
    if shape.subscribes_all and shape.topic_of.size and shape.member_ids:
        bits |= 8  # every present owner subscribes to every partition that exists
    return bits


class PreviousOwners(NamedTuple):
    """The previous final assignment of one assignor as arrays, for :func:`score_owners`.

    Over the previous generation's partitions (in its partition order): ``identity[q]``, the
    code (into ``identities``) of the identity holding ``q``, -1 none; ``current[q]``, its
    index in this generation's ``space``, -1 when it does not exist here; ``weight[q]`` its
    weight in this generation's topics (0.0 without; None when no topic has weights);
    ``order[q]``: where the identity holding ``q`` comes in the mapping ``previous_owner`` of
    :func:`score_generation` (whose order the weight sums follow: identities in that order,
    each one's partitions in partition order), None when ``weight`` is. ``speaker[c]``: the
    index of the member speaking for identity ``identities[c]`` in this generation, -1 when
    none is present. ``carried``: :class:`CarriedInto` of ``current``, when the caller keeps
    it (None: worked out here).
    """

    identity: np.ndarray
    current: np.ndarray
    weight: np.ndarray | None
    order: np.ndarray | None
    speaker: np.ndarray
    identities: tuple[str, ...]
    carried: CarriedInto | None = None


_least, _most = np.minimum.reduce, np.maximum.reduce
_NO_LOAD = np.iinfo(np.int64).max
"""Above every load: the identity of a minimum over loads."""

_CHURN_COUNTS = np.array(
    [
        [
            (code & 2 and not code & 1),  # forced: gone from the group, the partition still here
            bool(code & 1),  # revoked, eager: everything a present owner held
            (code & 1 and not (code & 2 and code & 4)),  # revoked, cooperative: what it lost
            (code & 3 == 3 and not code & 8),  # forced: its owner stopped subscribing
            (code & 11 == 11 and not code & 4),  # moved: keepable but given to someone else
        ]
        for code in range(16)
    ],
    dtype=np.int64,
)
"""Row ``code`` (bits: 1 the owner is present, 2 the partition exists, 4 the owner still holds
it, 8 the owner subscribes to it) -> which churn counts a partition of that code adds to."""


_EMPTY_INDEXES = np.zeros(0, dtype=np.int64)
_EMPTY_INDEXES.flags.writeable = False


def score_owners(
    shape: GenerationShape,
    owners: np.ndarray,
    previous: PreviousOwners | None,
    *,
    trace_id: str,
    assignor: str,
    generation: int,
    protocol: RebalanceProtocol = "eager",
    rounds: int = 1,
    assign_ms: float | None = None,
    interval_ms: int | None = None,
) -> ScoreRow:
    """:func:`score_generation` of an assignment given as ``owners`` (member index per
    partition of ``shape.space``, -1 nobody), against ``previous`` (None for a trace's first
    generation): the same row, with numpy passes instead of one Python step per partition.

    Groups of a few members and hundreds of partitions are the common case, where each numpy
    call costs more than the data it touches: the churn counts come from one histogram of
    per-partition codes, and the flow behind ``min_moved`` runs only when no closed form or
    bound settles it."""
    num_members = len(shape.member_ids)
    num_partitions = int(shape.topic_of.size)
    assigned: np.ndarray | None = None  # None: every partition is handed out
    # ufunc reductions and .nonzero() directly: the ndarray methods add a Python frame each
    if num_partitions and _least(owners) >= 0:
        holders, held_topics = owners, shape.topic_of
    else:
        assigned = (owners >= 0).nonzero()[0]
        holders, held_topics = owners[assigned], shape.topic_of[assigned]
    if shape.subscribes_all:
        valid = None  # every holder subscribes to every topic
        validly_held = int(holders.size)
    else:
        valid = shape.subscribed[holders, held_topics]
        validly_held = int(np.count_nonzero(valid))
    invalid = int(holders.size) - validly_held

    loads = np.bincount(holders, minlength=num_members)
    all_loads = loads.tolist()
    considered_loads = (
        all_loads
        if shape.all_considered
        else [all_loads[index] for index in shape.classes.considered]
    )
    min_load = min(considered_loads, default=0)
    max_load = max(considered_loads, default=0)
    balanced = True
    if max_load - min_load > 1 and shape.subscribes_all and shape.all_considered:
        # every member may take every partition: the most loaded could give one to the least
        balanced = False
    elif max_load - min_load > 1:
        least = np.where(
            shape.considered_subscribed, loads[shape.considered][:, None], _NO_LOAD
        ).min(axis=0)
        if shape.all_considered:
            balanced = not bool((least[held_topics] < loads[holders] - 1).any())
        else:
            in_considered = np.zeros(num_members, dtype=bool)
            in_considered[shape.considered] = True
            checked = in_considered[holders]
            balanced = not bool((least[held_topics[checked]] < loads[holders[checked]] - 1).any())
    capacity = shape.capacity

    moved = forced = revoked = minimum_moved = minimum_moved_own = 0
    weighted = shape.revoke_weight is not None
    revoked_weight = moved_weight = 0.0
    # the previous partitions someone held: None when that is every one of them
    held_before: np.ndarray | None = None
    codes = current = _EMPTY_INDEXES
    into = None  # CarriedInto of `current`, when the caller's covers it
    if previous is not None:
        if previous.identity.size and _least(previous.identity) >= 0:
            codes, current = previous.identity, previous.current
            into = previous.carried
        else:
            held_before = (previous.identity >= 0).nonzero()[0]
            codes, current = previous.identity[held_before], previous.current[held_before]
    if previous is not None and codes.size:
        speakers = previous.speaker[codes]
        present = speakers >= 0
        exists = current >= 0 if into is None else into.exists
        # every previous partition is where it was: it exists, and its owner is in `owners`
        in_place = current is shape.partition_indexes
        # every present owner may keep all it held (set below when so)
        all_keepable = False
        if num_partitions and num_members:
            # a -1 (no owner, no partition) picks the last row: `present`/`exists` mask it
            still = (owners if in_place else owners[current]) == speakers
        else:
            still = np.zeros(codes.size, dtype=bool)
        code = present | (_churn_bits(shape, exists) if into is None else into.churn_bits)
        code |= still << 2
        if num_partitions and num_members and shape.subscribes_all:
            all_keepable = in_place
            keepable = present if in_place else present & exists
        else:
            subscribes = (
                shape.subscribed[speakers, shape.topic_of[current] if into is None else into.topic]
                if num_partitions and num_members
                else np.zeros(codes.size, dtype=bool)
            )
            code |= subscribes << 3
            keepable = present & exists & subscribes
        counts = (np.bincount(code, minlength=16) @ _CHURN_COUNTS).tolist()
        forced = counts[0] + counts[3]
        revoked = counts[1] if protocol == "eager" else counts[2]
        moved = counts[4]
        if weighted and previous.weight is not None and previous.order is not None:
            still_held = present & exists & still
            is_revoked = present & ~still_held if protocol != "eager" else present
            moved_mask = keepable & ~still
            order = previous.order if held_before is None else previous.order[held_before]
            in_order = np.argsort(order, kind="stable")
            weights = previous.weight if held_before is None else previous.weight[held_before]
            revoked_weight = _sequential_sum(weights[in_order][is_revoked[in_order]])
            moved_weight = _sequential_sum(weights[in_order][moved_mask[in_order]])
        if all_keepable:
            # the present owners' partitions: an absent one's (-1) counts in column 0, left out
            kept_by_keeper = np.bincount(speakers + 1, minlength=num_members + 1).tolist()[1:]
        else:
            kept_by_keeper = np.bincount(speakers[keepable], minlength=num_members).tolist()
        # A complete, valid assignment is itself a way to keep all but `moved` within its own
        # largest load, and no member keeps more than the capacity: when those bounds meet,
        # they are the answer and the flow is not needed.
        witness = invalid == 0 and validly_held == num_partitions
        keys: list[np.ndarray] = []

        def fewest(limit: int) -> int:
            least = sum(kept - limit for kept in kept_by_keeper if kept > limit)
            if shape.uniform:
                return least  # each owner keeps up to `limit`, the rest must move
            if witness and max_load <= limit and least == moved:
                return moved
            if not keys:
                # keepable partitions counted by (class, keeper)
                num_members_plus = num_members + 1
                of_keepable = (
                    shape.class_of_partition[current[keepable]]
                    if into is None
                    else into.class_of[keepable]
                )
                key_codes = of_keepable * num_members_plus + speakers[keepable]
                by_key = np.bincount(
                    key_codes, minlength=len(shape.classes.sizes) * num_members_plus
                )
                distinct = by_key.nonzero()[0]
                keys.extend((*np.divmod(distinct, num_members_plus), by_key[distinct]))
            return _min_moved_keys(shape.classes, keys[0], keys[1], keys[2], limit, shape.hall)

        minimum_moved = fewest(capacity)
        own_capacity = max(max_load, capacity)
        minimum_moved_own = minimum_moved if own_capacity == capacity else fewest(own_capacity)

    weight_skew = None
    if shape.skew_weight is not None and shape.considered.size:
        skew_weight = shape.skew_weight if assigned is None else shape.skew_weight[assigned]
        member_loads = np.bincount(holders, weights=skew_weight, minlength=num_members)[
            shape.considered
        ].tolist()
        mean = sum(member_loads) / len(member_loads)
        weight_skew = 1.0 if mean == 0 else max(member_loads) / mean
    # the largest, over topics, of most - fewest partitions of the topic held by a subscriber
    topic_spread = 0
    num_topics = shape.class_of_topic.size
    if num_topics == 1 and shape.subscribes_all and shape.topics_with_partitions.size:
        # one topic everyone takes: its spread is the members' loads' (every one is valid)
        topic_spread = max(0, max(all_loads) - min(all_loads)) if num_members else 0
    elif shape.topics_with_partitions.size and num_members:
        # one row per topic, one column per member: cell topic * members + member
        if assigned is None and (valid is None or validly_held == holders.size):
            cells = shape.topic_cells + holders
        elif valid is None or validly_held == holders.size:
            cells = held_topics * num_members + holders
        else:
            cells = held_topics[valid] * num_members + holders[valid]
        per_topic = np.bincount(cells, minlength=num_topics * num_members).reshape(
            num_topics, num_members
        )
        if shape.subscribes_all:
            spreads = _most(per_topic, axis=1) - _least(per_topic, axis=1)
        else:
            spreads = _most(per_topic, axis=1) - _least(
                np.where(shape.subscribed.T, per_topic, _NO_LOAD), axis=1
            )
        if shape.topics_with_partitions.size != num_topics:
            spreads = spreads[shape.topics_with_partitions]
        topic_spread = max(0, int(_most(spreads)))
    rack_mismatch = None
    if shape.mismatched is not None:
        partitions = shape.partition_indexes if assigned is None else assigned
        rack_mismatch = int(np.count_nonzero(shape.mismatched[holders, partitions]))

    # the row's columns in their order (ScoreRow._fields), made without binding 34 keywords
    return _make_row(
        (
            trace_id,
            assignor,
            generation,
            num_members,  # members
            num_partitions,  # partitions
            num_partitions - validly_held,  # unassigned
            invalid,
            min_load,
            max_load,
            max_load - min_load,  # spread
            balanced,
            capacity,  # optimal_max_load
            weight_skew,
            moved,
            forced,
            minimum_moved,  # min_moved
            revoked,
            rounds,
            rack_mismatch,
            assign_ms,
            minimum_moved_own,  # min_moved_own
            max(0, moved - minimum_moved_own),  # excess_moved
            revoked_weight if weighted else None,
            moved_weight if weighted else None,
            interval_ms,
            *_UNCOSTED,
            topic_spread,
        )
    )


_make_row = ScoreRow._make
_UNCOSTED = tuple(
    ScoreRow._field_defaults[name]
    for name in ScoreRow._fields[ScoreRow._fields.index("interval_ms") + 1 : -1]
)
"""The defaults of the columns between ``interval_ms`` and ``topic_spread`` (cost and
reconciliation columns, filled in later), in order."""


def _sequential_sum(values: np.ndarray) -> float:
    """``0.0 + values[0] + values[1] + ...`` in that order (as a Python loop adds them; numpy's
    ``sum`` adds pairwise, which can differ in the last bit)."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0
