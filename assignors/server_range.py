"""The ``server-range`` assignor: the KIP-848 group coordinator's RangeAssignor.

Goals in priority order: per-topic balance (within a topic no subscriber gets more than one
partition more than another), then co-partitioning (partition ``p`` of equally partitioned
topics goes to the same member when the subscriptions allow it); there is no stickiness beyond
member order, and racks are not consulted, as in the coordinator.

Two members, two topics of three partitions: each topic is cut into contiguous ranges in member
order, the first ``P % C`` members getting one more, so partition 2 of both topics lands on c1:

>>> from assignors.model import Group, Member, Topic, show
>>> both = frozenset({"t0", "t1"})
>>> group = Group((Topic("t0", 3), Topic("t1", 3)), (Member("c0", both), Member("c1", both)))
>>> show(ServerRangeAssignor().assign(group))
{'c0': ['t0-0', 't0-1', 't1-0', 't1-1'], 'c1': ['t0-2', 't1-2']}

Members are ordered as the coordinator's ``sortMemberIds`` does: static members (with an
instance id) first, by instance id, then the others by member id, comparing strings as Java does
(UTF-16 code units). A static member keeps its ranges when it comes back with a new member id:

>>> static = Group((Topic("t0", 3),), (Member("c0", frozenset({"t0"}), instance_id="pod-1"),
...                                    Member("c1", frozenset({"t0"}), instance_id="pod-0")))
>>> show(ServerRangeAssignor().assign(static))
{'c0': ['t0-2'], 'c1': ['t0-0', 't0-1']}

Homogeneous and heterogeneous groups follow the same rule per topic (the coordinator has two
code paths that agree): a topic's subscribers, in member order, take ``P // C`` partitions each
and the first ``P % C`` of them one more. Owned partitions do not change the target; a partition
that changes hands is withheld for one round (its holder revokes it first, as the coordinator's
reconciliation makes it), so ``assign`` returns the target minus those, and
:func:`plan_server_range` the target itself:

>>> from assignors.model import TopicPartition as TP
>>> joined = Group((Topic("t0", 2),), (Member("c0", frozenset({"t0"}), (TP("t0", 0), TP("t0", 1))),
...                                    Member("c1", frozenset({"t0"}))))
>>> moved = ServerRangeAssignor().assign(joined)
>>> show(moved), moved.withheld
({'c0': ['t0-0'], 'c1': []}, (TopicPartition(topic='t0', partition=1),))

Complexity: O(C log C) to order C members, then O(T + P) array work for T topics and P
partitions: owners are computed per topic with one ``repeat`` and the per-member lists come from
one stable sort of the owners.
"""

from __future__ import annotations

import itertools

import numpy as np

from assignors.base import RebalanceProtocol
from assignors.java_order import java_member_order
from assignors.model import Assignment, Group
from assignors.uniform import (
    UniformPlan,
    assignment_of,
    current_holders,
    subscribed_positions,
)

_INDEX = np.int64


class ServerRangeAssignor:
    """The KIP-848 coordinator's ``range`` assignor (``server-range`` in ktk, since the client's
    ``range`` already owns that name); see the module docstring.

    Server-side assignors run in the coordinator, whose reconciliation makes a member revoke a
    partition before its new owner gets it: ``assign`` withholds moving partitions (one
    ``cooperative`` round); ``target`` is the coordinator's target, which replay reconciles
    member by member as the consumer protocol does.
    """

    name = "server-range"
    rebalance_protocol: RebalanceProtocol = "cooperative"
    group_protocol = "consumer"

    def assign(self, group: Group) -> Assignment:
        return assignment_of(plan_server_range(group), withhold=True)

    def target(self, group: Group) -> Assignment:
        """The coordinator's target assignment for ``group``: nothing withheld (replay
        reconciles members towards it, :mod:`assignors.traces.reconcile`)."""
        return assignment_of(plan_server_range(group))


def plan_server_range(group: Group) -> UniformPlan:
    """Owners per partition index of ``group.partition_space()`` (member indexes of the group)."""
    space = group.partition_space()
    members = group.members
    member_ids = tuple(member.member_id for member in members)
    owner = np.full(space.size, -1, dtype=_INDEX)
    index_of = {member_id: i for i, member_id in enumerate(member_ids)}
    ordered = np.asarray(
        [index_of[member.member_id] for member in java_member_order(members)], dtype=_INDEX
    )
    position = {name: t for t, name in enumerate(space.topic_names)}
    # known topics per member (group order; members sharing a subscription share the array)
    subscriptions = subscribed_positions(members, np.arange(len(members), dtype=_INDEX), position)
    distinct = {id(topics): topics for topics in subscriptions}.values()
    homogeneous = len({topics.tobytes() for topics in distinct}) <= 1
    if homogeneous:
        by_topic = [ordered] * len(space.topic_names)
    else:
        # every (member, topic) pair, members in order, then grouped by topic (stable)
        in_order = [subscriptions[i] for i in ordered.tolist()]
        lengths = np.fromiter(map(len, in_order), _INDEX, len(in_order))
        topics = np.concatenate(in_order) if in_order else np.zeros(0, dtype=_INDEX)
        narrow = topics.astype(np.int16) if len(space.topic_names) < 2**15 else topics
        by_topic_order = np.argsort(narrow, kind="stable")  # a radix sort on 16 bits
        subscribers = np.repeat(ordered, lengths)[by_topic_order]
        bounds = np.searchsorted(topics[by_topic_order], np.arange(len(space.topic_names) + 1))
        by_topic = [subscribers[start:stop] for start, stop in itertools.pairwise(bounds.tolist())]
    for subscribers, start, count in zip(
        by_topic, space.offsets, space.partition_counts, strict=True
    ):
        if not count or not subscribers.size:
            continue
        quota = np.full(subscribers.size, count // subscribers.size, dtype=_INDEX)
        quota[: count % subscribers.size] += 1
        owner[start : start + count] = np.repeat(subscribers, quota)
    holders = current_holders(group, subscriptions)
    return UniformPlan(space, member_ids, owner, holders, homogeneous)
