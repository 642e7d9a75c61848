"""The round-robin assignor: all partitions dealt to the members in turn (Java parity).

Every subscribed partition, ordered by topic then partition, goes to the next member in a
circular walk over the ordered members; a member not subscribed to the partition's topic is
skipped. Two consumers, two topics of three partitions each:

>>> from assignors.model import Group, Member, Topic
>>> from assignors.model import show
>>> group = Group(
...     topics=(Topic("t0", 3), Topic("t1", 3)),
...     members=(Member("c0", frozenset({"t0", "t1"})), Member("c1", frozenset({"t0", "t1"}))),
... )
>>> show(RoundRobinAssignor().assign(group))
{'c0': ['t0-0', 't0-2', 't1-1'], 'c1': ['t0-1', 't1-0', 't1-2']}

Members are walked in Java's order: static members (``group.instance.id``) first, by instance
id, then the others by member id; a restarted static member with a new member id therefore gets
the same partitions back as long as membership and subscriptions stay the same:

>>> static = Group(
...     topics=(Topic("t0", 3), Topic("t1", 3)),
...     members=(Member("c0", frozenset({"t0", "t1"})),
...              Member("c1", frozenset({"t0", "t1"}), instance_id="pod-0")),
... )
>>> show(RoundRobinAssignor().assign(static))
{'c0': ['t0-1', 't1-0', 't1-2'], 'c1': ['t0-0', 't0-2', 't1-1']}

Racks do not change the result: the Java client's ``RoundRobinAssignor`` is not rack-aware
(KIP-881 made only range and the sticky assignors rack-aware), and ktk keeps parity with it.

Goals in priority order: an even count per member when subscriptions are equal, then nothing
else (no stickiness, no rack locality); with unequal subscriptions the walk can leave members
several partitions apart.

Complexity: O(M log M) to order M members, then per topic O(log C_t + P_t) (C_t subscribers,
P_t partitions): the walk jumps straight to the next subscriber instead of stepping over
non-subscribers one by one. The walk over a topic's partitions is one numpy expression and the
answer is an owner array (:meth:`Assignment.from_owners`), so there is no per-partition Python
loop.
"""

from __future__ import annotations

import numpy as np

from assignors.base import RebalanceProtocol
from assignors.java_order import java_group_order, java_string_key, subscriber_positions
from assignors.model import Assignment, Group


class RoundRobinAssignor:
    """Kafka's ``roundrobin`` assignor; see the module docstring."""

    name = "roundrobin"
    rebalance_protocol: RebalanceProtocol = "eager"
    reads_owned_partitions = False
    """The answer depends on subscriptions, racks and member ids only (a replay need not
    carry what each member owned into the next generation's group)."""

    def assign(self, group: Group) -> Assignment:
        # member_at: the group index of the member at each position of Java's order
        ordered, member_at = java_group_order(group.members)
        subscribers = subscriber_positions(ordered)
        space = group.partition_space()
        member_ids = tuple(member.member_id for member in group.members)
        num_members = len(ordered)
        if all(
            len(subscribers[name]) == num_members and name.isascii() for name in space.topic_names
        ):
            # everyone takes every topic, and Java walks the topics in the space's order: one
            # deal over all partitions, the walk going on from topic to topic
            owners = member_at[np.arange(space.size, dtype=np.int64) % max(num_members, 1)]
            return Assignment.from_owners(space, member_ids, owners)
        offset_of = dict(zip(space.topic_names, space.offsets, strict=True))
        owners = np.full(space.size, -1, dtype=np.int64)
        walk_position = 0  # the member the circular walk looks at next
        topics = [topic for topic in group.topics if topic.name in subscribers]
        for topic in sorted(topics, key=lambda topic: java_string_key(topic.name)):
            count = topic.num_partitions
            if count <= 0:
                continue
            positions = subscribers[topic.name]
            first = int(np.searchsorted(positions, walk_position)) % len(positions)
            # partition i goes to the subscriber (first + i) mod S of the cycle
            cycle = (first + np.arange(count, dtype=np.int64)) % len(positions)
            offset = offset_of[topic.name]
            owners[offset : offset + count] = member_at[positions[cycle]]
            walk_position = int(positions[(first + count - 1) % len(positions)]) + 1
        # the answer lists each member's partitions in (topic, partition) order, whatever order
        # Java walked the topics in
        return Assignment.from_owners(space, member_ids, owners)
