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
non-subscribers one by one.
"""

from __future__ import annotations

import bisect
from itertools import repeat

from assignors.base import RebalanceProtocol
from assignors.java_order import java_member_order, java_string_key
from assignors.model import Assignment, Group, TopicPartition


class RoundRobinAssignor:
    """Kafka's ``roundrobin`` assignor; see the module docstring."""

    name = "roundrobin"
    rebalance_protocol: RebalanceProtocol = "eager"

    def assign(self, group: Group) -> Assignment:
        ordered = java_member_order(group.members)
        subscribers: dict[str, list[int]] = {}
        for position, member in enumerate(ordered):
            for topic_name in member.topics:
                subscribers.setdefault(topic_name, []).append(position)

        lists: list[list[TopicPartition]] = [[] for _ in ordered]
        walk_position = 0  # the member the circular walk looks at next
        topics = [topic for topic in group.topics if topic.name in subscribers]
        java_topics = sorted(topics, key=lambda topic: java_string_key(topic.name))
        for topic in java_topics:
            count = topic.num_partitions
            if count <= 0:
                continue
            positions = subscribers[topic.name]
            first = bisect.bisect_left(positions, walk_position) % len(positions)
            # subscriber k of the cycle gets partitions k, k + S, k + 2S, ...
            for offset in range(min(len(positions), count)):
                owner = positions[(first + offset) % len(positions)]
                lists[owner].extend(
                    map(
                        tuple.__new__,
                        repeat(TopicPartition),
                        zip(repeat(topic.name), range(offset, count, len(positions))),
                    )
                )
            walk_position = positions[(first + count - 1) % len(positions)] + 1

        # Java walks topics in UTF-16 order; results list them in code point order
        if java_topics != topics:
            lists = [sorted(partitions) for partitions in lists]
        by_member = {member.member_id: lists[position] for position, member in enumerate(ordered)}
        return Assignment(
            {member.member_id: tuple(by_member[member.member_id]) for member in group.members}
        )
