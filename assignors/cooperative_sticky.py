"""The cooperative-sticky assignor (KIP-429): the sticky engine on the cooperative protocol.

Goals in priority order: balance first, stickiness second, rack locality third, exactly as
``sticky`` (the same engine decides). What differs is the protocol: members keep consuming what
they own during a rebalance, so a partition that changes owner cannot be handed to its new owner
until the old one has let it go. Such partitions are withheld this round; the old owner revokes
them and rejoins, and the follow-up rebalance hands them out.

Two consumers share topic ``a`` of four partitions; ``c2`` joins. Balance needs one partition to
move, so round one withholds it (``c1``'s ``a3``) and changes nothing else:

>>> from assignors.model import Group, Member, Topic, TopicPartition as TP
>>> topics = (Topic("a", 4),)
>>> joined = Group(topics, (
...     Member("c0", frozenset({"a"}), (TP("a", 0), TP("a", 1)), generation=3),
...     Member("c1", frozenset({"a"}), (TP("a", 2), TP("a", 3)), generation=3),
...     Member("c2", frozenset({"a"}))))
>>> first = CooperativeStickyAssignor().assign(joined)
>>> {m: [tp.partition for tp in tps] for m, tps in first.partitions.items()}
{'c0': [0, 1], 'c1': [2], 'c2': []}
>>> first.withheld
(TopicPartition(topic='a', partition=3),)

Round two: every member reports what round one gave it (``c1`` revoked ``a3``). Nothing is
claimed twice and nothing needs to move, so the withheld partition goes to ``c2``:

>>> from assignors.model import rejoin
>>> second = CooperativeStickyAssignor().assign(rejoin(joined, first, 4))
>>> {m: [tp.partition for tp in tps] for m, tps in second.partitions.items()}, second.withheld
({'c0': [0, 1], 'c1': [2], 'c2': [3]}, ())

The assignor that answered round one reads round two from it without the rejoined group (a
replay asks it so, by :meth:`~CooperativeStickyAssignor.follow_up`); here all round one handed
out were claims their owners kept, so with uniform subscriptions round two deals the withheld
partition as round one did, without the engine:

>>> again = CooperativeStickyAssignor()
>>> again.follow_up(joined, again.assign(joined), 4) == second
True

Withheld this round: partitions whose valid owner (present, subscribed, highest generation)
changes, partitions two members claimed in the same highest generation (each claimant may
still be consuming them, so neither is trusted until both have revoked), and partitions a member
still owns on a topic it no longer subscribes to. The last are never its to keep, but it
consumes them until it revokes them, so they are handed out in the follow-up round like any
other move (the Java leader's ``validateCooperativeAssignment`` rejects an assignment that gives
a partition to one member while another still owns it):

>>> dropped = Group((Topic("a", 1), Topic("b", 1)), (
...     Member("c0", frozenset({"b"}), (TP("a", 0),), generation=1),
...     Member("c1", frozenset({"a"}), generation=1)))
>>> held = CooperativeStickyAssignor().assign(dropped)
>>> {m: [tp.partition for tp in tps] for m, tps in held.partitions.items()}, held.withheld
({'c0': [0], 'c1': []}, (TopicPartition(topic='a', partition=0),))

With uniform
subscriptions the follow-up round never withholds anything: everyone then owns at most its
quota and the members owning a ceil quota are exactly the ones that get it again.
"""

from __future__ import annotations

import numpy as np

from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group
from assignors.sticky import StickyPlan, StickyRounds


def withheld_indexes(plan: StickyPlan) -> np.ndarray:
    """Partition indexes to withhold this round: those changing hands (moved claims, and
    partitions held on a dropped topic) and same-generation double claims."""
    claimant = plan.claimant
    # changing_hands_mask | contested, with one array made and combined in place
    withheld = plan.owner != claimant
    withheld &= (claimant >= 0) | plan.unsubscribed_owner
    withheld |= plan.contested
    return np.flatnonzero(withheld)


class CooperativeStickyAssignor:
    """Kafka's ``cooperative-sticky`` assignor: sticky's answer minus what changes owner."""

    name = "cooperative-sticky"
    rebalance_protocol: RebalanceProtocol = "cooperative"

    def __init__(self) -> None:
        # a replay runs the follow-up round right after: it is read from this round's arrays
        self._rounds = StickyRounds()

    def assign(self, group: Group) -> Assignment:
        return self._answer(group, self._rounds.plan(group))

    def follow_up(self, group: Group, assignment: Assignment, generation: int) -> Assignment | None:
        """``assign(rejoin(group, assignment, generation))`` without making the rejoined group,
        when ``assignment`` is this assignor's last answer, to ``group`` (or to the follow-up
        of ``group`` it answered so: ``group`` stands for it); else None
        (:meth:`assignors.sticky.StickyRounds.follow_up`). A replay asks this first for each
        follow-up round."""
        plan = self._rounds.follow_up(group, assignment, generation)
        return None if plan is None else self._answer(group, plan)

    def _answer(self, group: Group, plan: StickyPlan) -> Assignment:
        withheld = withheld_indexes(plan)
        owners = plan.owner
        if withheld.size:
            owners = owners.copy()
            owners[withheld] = -1
        self._rounds.handed(group, owners)
        return Assignment.from_owners(plan.space, plan.member_ids, owners, withheld)
