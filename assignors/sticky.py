"""The sticky assignor (KIP-54, KIP-341) and the balance+stickiness engine it shares with
cooperative-sticky.

Goals in priority order: balance first, stickiness second, rack locality third (a partition a
member validly owns stays with it unless balance requires a move; what is new or must move
prefers a member on a rack holding a replica).

Three consumers share two topics of three partitions; the assignment is as even as it can be:

>>> from assignors.model import Group, Member, Topic, TopicPartition as TP
>>> both = frozenset({"a", "b"})
>>> topics = (Topic("a", 3), Topic("b", 3))
>>> first = StickyAssignor().assign(
...     Group(topics, (Member("c0", both), Member("c1", both), Member("c2", both))))
>>> for member, partitions in first.partitions.items():
...     print(member, [f"{tp.topic}{tp.partition}" for tp in partitions])
c0 ['a0', 'b0']
c1 ['a1', 'b1']
c2 ['a2', 'b2']

c1 leaves. c0 and c2 report what they owned in generation 1; each keeps both of its partitions
and only c1's two are handed out, one to each survivor (nothing else moves):

>>> survivors = tuple(Member(m, both, first.partitions[m], generation=1) for m in ("c0", "c2"))
>>> second = StickyAssignor().assign(Group(topics, survivors))
>>> for member, partitions in second.partitions.items():
...     print(member, [f"{tp.topic}{tp.partition}" for tp in partitions])
c0 ['a0', 'a1', 'b0']
c2 ['a2', 'b1', 'b2']

Claims are judged before they are honoured. A claim counts only if its member is present,
still subscribes to the topic and the partition exists; when several members claim one
partition the highest generation wins, and two claims in that same generation void the
partition's stickiness. A claim on a topic the member no longer subscribes to is never honoured
(the Java client can hand such a partition back, an invalid assignment).

Balance means the smallest count spread (fullest minus emptiest member) any valid assignment
has, and Kafka's rule on top: two members whose partition counts differ by more than one are
allowed only when the fuller one holds nothing the emptier one subscribes to. Kafka's rule alone
is weaker (the Java client stops there): ``a`` on x, y, z, ``b`` on x and ``c`` on x, y may end
3/1/2 by it, while 2/2/2 exists, so ktk moves what that needs. Feeding an answer back with
unchanged membership changes nothing, racks included: claimed partitions never move for
locality alone, and racks that favour no partition over another (every member's rack holds a
replica of all of its partitions, or of none) change nothing at all.

Representation: partitions are dense integer indexes (:meth:`Group.partition_space`) and every
per-partition quantity is a numpy array, so the cost is dominated by a few sorts of P integers.

- Uniform subscriptions (every member with any known topic subscribes to the same topics):
  quota arithmetic. With P partitions and C members, ``P % C`` members get ``ceil(P / C)`` and
  the rest ``floor(P / C)``; the ceil quotas go to the members that claim the most, each keeps
  ``min(claimed, quota)`` and the released and new partitions are dealt round-robin to the
  members short of their quota. That moves the fewest partitions any balanced assignment can.
  Time O(P log P + C log C).
- Heterogeneous subscriptions: work on counts per (topic, subscriber) edge. Claimed partitions
  stay; the unclaimed partitions of each topic are water-filled onto its least-loaded
  subscribers (topics with the fewest subscribers first; among equal loads, members whose held
  topics allow more load first); then the freely placed partitions of each topic are
  re-water-filled while that lowers the sum of squared loads, and only a pair that breaks
  Kafka's rule with no free partition to fix it moves claimed ones. When the loads reached
  still spread wider than the smallest spread that exists (scoring's exact references, from
  Hall's conditions over every set of topics merged by subscriber set, or scoring's own flows
  beyond ``WINDOW_SUBSETS_CLASSES`` merged topics; only when the spread is two or more), a
  min-cost flow keeps every member within the optimal min and max
  load while keeping the most claims, and the steps above restore Kafka's rule inside that
  window. When claims had to move, a min-cost flow (topics -> members, a member may take a
  topic only while at most one above the topic's emptiest subscriber) keeps the most claims
  for the loads reached, and for groups of at most ``LOAD_SEARCH_EDGES`` subscription edges a
  local search over loads inside the window (at most ``LOAD_SEARCH_TRIALS`` load vectors, each
  screened by exact necessary conditions first, so only the few that might keep more claims
  cost a flow) looks for fewer moves. Time O(S · E log E + P log P) for E
  subscription edges and S sweeps (each sweep strictly lowers the sum of squared loads; it
  rarely takes more than a few), plus one flow over 2E arcs when claims move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress

import numpy as np
from ortools.graph.python import max_flow, min_cost_flow

from assignors.arrays import GroupArrays
from assignors.base import RebalanceProtocol
from assignors.model import (
    NO_GENERATION,
    Assignment,
    Group,
    OwnedPartitions,
    PartitionSpace,
    Topic,
    TopicPartition,
    member_runs,
)

_INDEX = np.int64
_NOBODY = -1
# heterogeneous groups with at most this many subscription edges get a local search over member
# loads for fewer moves, trying at most this many load vectors (at most one small flow each)
LOAD_SEARCH_EDGES = 2_000
LOAD_SEARCH_TRIALS = 500
# the optimal load window comes from Hall's conditions over every set of merged topics up to
# this many of them (2^k sets), from scoring's flows beyond
WINDOW_SUBSETS_CLASSES = 10
WINDOW_SUBSETS_CELLS = 1 << 16  # and while (2^k sets) x (members) stays this small
# rack classes of partitions are sorted as integers up to this many consumer racks
_RACK_CODE_BITS = 62
# arrays up to this size are worked on as Python lists where numpy's per-call cost dominates
_SMALL = 64
# the rack-aware flow's arcs are built for all topics at once up to this many edges
RACK_ARCS_AT_ONCE = 50_000
# and the flows' arcs on Python lists up to this many edges
_SMALL_ARCS = 512
# a lower bound above any number of lost claims: the trial's loads admit no assignment
LOAD_SEARCH_INFEASIBLE = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class StickyPlan:
    """What the engine decided for one group, on partition indexes of ``space``.

    ``member_ids[i]`` is member ``i`` (the group's order). ``owner[p]`` is the member that gets
    partition ``p``. ``claimant[p]`` is the member whose claim on ``p`` is valid (-1: none);
    ``contested[p]`` is true when two members claimed ``p`` in the same, highest generation.
    ``objects[p]`` is partition ``p`` as a :class:`TopicPartition` (the request's own object
    when some member claimed it, else made on first use). ``unsubscribed_owner[p]`` is true when
    a present member still lists ``p`` as owned though it dropped the topic (it keeps consuming
    ``p`` until it revokes it).
    """

    space: PartitionSpace
    member_ids: tuple[str, ...]
    owner: np.ndarray
    claimant: np.ndarray
    contested: np.ndarray
    objects: np.ndarray
    unsubscribed_owner: np.ndarray

    def moved(self) -> np.ndarray:
        """Indexes of validly claimed partitions that now go to another member."""
        return np.flatnonzero((self.claimant >= 0) & (self.owner != self.claimant))

    def changing_hands(self) -> np.ndarray:
        """Indexes of partitions that go to a member other than one still holding them: moved
        valid claims, and partitions a member holds on a topic it dropped (whoever gets them
        is someone else)."""
        return np.flatnonzero(self.changing_hands_mask())

    def changing_hands_mask(self) -> np.ndarray:
        """:meth:`changing_hands` as a mask over partition indexes."""
        return (self.owner != self.claimant) & ((self.claimant >= 0) | self.unsubscribed_owner)

    def partitions_by_member(
        self, left_out: np.ndarray | None = None
    ) -> dict[str, tuple[TopicPartition, ...]]:
        """Member id -> its partitions in (topic, partition) order, skipping ``left_out``."""
        owner = self.owner
        if left_out is not None and left_out.size:
            owner = owner.copy()
            owner[left_out] = _NOBODY
        objects = self._filled_objects()
        order, bounds = member_runs(owner, len(self.member_ids))
        return {
            member_id: tuple(objects[order[bounds[i] : bounds[i + 1]]].tolist())
            for i, member_id in enumerate(self.member_ids)
        }

    def partitions_at(self, indexes: np.ndarray) -> tuple[TopicPartition, ...]:
        """The partitions at ``indexes``, in (topic, partition) order."""
        return tuple(self._filled_objects()[np.sort(indexes)].tolist())

    def _filled_objects(self) -> np.ndarray:
        return self.space.fill_objects(self.objects)


class StickyAssignor:
    """Kafka's ``sticky`` assignor (eager protocol): balanced, then sticky, then rack-local."""

    name = "sticky"
    rebalance_protocol: RebalanceProtocol = "eager"

    def assign(self, group: Group) -> Assignment:
        plan = plan_sticky(group)
        return Assignment.from_owners(plan.space, plan.member_ids, plan.owner)


# --------------------------------------------------------------------------- the engine


def plan_sticky(group: Group) -> StickyPlan:
    """Balanced, sticky, rack-preferring owners for every subscribed partition of ``group``."""
    return _plan(group, GroupArrays.of(group), None)[0]


@dataclass(frozen=True, slots=True)
class _Edges:
    """The subscription edges of a group, in (topic, member) order: topic ``t`` has
    ``sizes[t]`` subscribers, its edges are ``offsets[t]:offsets[t + 1]``; each edge's
    ``topic``, ``member`` and ``key`` (``topic x members + member``, ascending);
    ``by_choice``: the topics by fewest subscribers."""

    num_members: int
    sizes: np.ndarray
    offsets: np.ndarray
    topic: np.ndarray
    member: np.ndarray
    key: np.ndarray
    by_choice: list[int]

    @classmethod
    def of(cls, subscribers: list[np.ndarray], num_members: int) -> _Edges:
        sizes = np.asarray([members.size for members in subscribers], dtype=_INDEX)
        topic = np.repeat(np.arange(sizes.size, dtype=_INDEX), sizes)
        member = np.concatenate(subscribers).astype(_INDEX)
        return cls(
            num_members=num_members,
            sizes=sizes,
            offsets=np.concatenate(([0], np.cumsum(sizes))),
            topic=topic,
            member=member,
            key=topic * num_members + member,
            by_choice=sorted(range(sizes.size), key=lambda p: (subscribers[p].size, p)),
        )


@dataclass(frozen=True, slots=True)
class _ClaimEdges:
    """The valid claims of a round on the subscription edges: the ``claimed`` partitions
    (ascending), their ``holders``, each claim's ``edge``, and the claims on each edge
    (``per_edge``)."""

    claimed: np.ndarray
    holders: np.ndarray
    edge: np.ndarray
    per_edge: np.ndarray

    @classmethod
    def of(cls, edges: _Edges, claimant: np.ndarray, topic_of: np.ndarray) -> _ClaimEdges:
        claimed = np.flatnonzero(claimant >= 0)
        holders = claimant[claimed]
        # a valid claim's holder subscribes to the topic: its edge is found by binary search
        edge = np.searchsorted(edges.key, topic_of[claimed] * edges.num_members + holders)
        per_edge = np.bincount(edge, minlength=edges.key.size)
        return cls(claimed, holders, edge, per_edge)


class _Shape:
    """What the engine derives from a group's topics and members alone, not from what they
    own: the partition count and first index of each topic, the members with a subscription,
    each topic's subscribers (None when subscriptions are uniform) and, once asked for, the
    rack map. A follow-up round reuses it."""

    __slots__ = (
        "_edges",
        "_window",
        "active",
        "counts",
        "offsets",
        "racks",
        "racks_built",
        "subscribers",
    )

    def __init__(
        self,
        space: PartitionSpace,
        active: np.ndarray,
        subscribers: list[np.ndarray] | None,
    ) -> None:
        self.counts = np.asarray(space.partition_counts, dtype=_INDEX)
        self.offsets = np.asarray(space.offsets, dtype=_INDEX)
        for shared in (self.counts, self.offsets):
            shared.flags.writeable = False  # read by every round that reuses the shape
        self.active = active
        self.subscribers = subscribers
        self.racks: _RackMap | None = None
        self.racks_built = False
        self._window: tuple[int, int] | None = None
        self._edges: _Edges | None = None

    def window(self, counts: np.ndarray, num_members: int) -> tuple[int, int]:
        """:func:`_window_of` the subscribers (``counts``: the topic sizes of the shape's
        space), made once."""
        if self._window is None:
            assert self.subscribers is not None
            self._window = _window_of(self.subscribers, counts, num_members, self.active)
        return self._window

    def edges(self, num_members: int) -> _Edges:
        """The subscription edges (:class:`_Edges`), made once."""
        if self._edges is None:
            assert self.subscribers is not None
            self._edges = _Edges.of(self.subscribers, num_members)
        return self._edges

    @classmethod
    def of(cls, arrays: GroupArrays) -> _Shape:
        subscriptions = arrays.subscriptions
        active = np.flatnonzero([bool(subscription) for subscription in subscriptions])
        uniform = len({subscriptions[i] for i in active.tolist()}) == 1
        space = arrays.space
        num_topics = len(space.partition_counts)
        return cls(space, active, None if uniform else _subscribers(subscriptions, num_topics))

    def rack_map(self, group: Group, arrays: GroupArrays) -> _RackMap | None:
        if not self.racks_built:
            self.racks = (
                _RackMap.build(group, arrays.space, arrays.subscriptions)
                if group.has_racks()
                else None
            )
            self.racks_built = True
        return self.racks


def _plan(group: Group, arrays: GroupArrays, shape: _Shape | None) -> tuple[StickyPlan, _Shape]:
    """:func:`plan_sticky` on ``group``'s arrays, and the shape it used (``shape``, when given,
    must be that of a group with the same topics and members)."""
    space = arrays.space
    num_members = len(arrays.member_ids)
    num_partitions = space.size
    # ties go to the member that sorts first by static instance id, else by member id
    rank = arrays.rank
    claimant, contested, objects = arrays.claimant, arrays.contested, arrays.objects
    member_ids = arrays.member_ids
    if shape is None:
        shape = _Shape.of(arrays)
    counts, offsets = shape.counts, shape.offsets
    active, subscribers = shape.active, shape.subscribers
    if (
        num_partitions
        and int(claimant.min()) >= 0
        and _settled(claimant, active, subscribers, counts, offsets, shape)
    ):
        # every partition is validly claimed and the claims are already the answer
        owner = claimant.copy()
        plan = StickyPlan(
            space, member_ids, owner, claimant, contested, objects, arrays.unsubscribed_owner
        )
        return plan, shape
    state = _State(
        claimant=claimant,
        topic_of=arrays.topic_of,
        rank=rank,
        racks=shape.rack_map(group, arrays),
        owner=np.full(num_partitions, _NOBODY, dtype=_INDEX),
    )
    if num_partitions and subscribers is None:
        claim_counts = np.bincount(claimant + 1, minlength=num_members + 1)[1:]
        targets = _uniform_targets(num_partitions, active, claim_counts, rank, num_members)
        _realize(state, targets, claim_counts)
    elif num_partitions and subscribers is not None:
        _assign_heterogeneous(state, shape, counts, offsets)
    plan = StickyPlan(
        space, member_ids, state.owner, claimant, contested, objects, arrays.unsubscribed_owner
    )
    return plan, shape


REMEMBERED_SHAPES = 4
"""How many distinct shapes a cooperative-sticky assignor keeps for first rounds to reuse: a
replayed trace's members leave and come back, so a shape seen a few rounds ago recurs."""


class StickyRounds:
    """The engine over the rounds of a cooperative rebalance: remembers the last round (one
    group, so memory stays bounded) and what it handed out, and when the next group is that
    follow-up (same topics and members, each member owning exactly what it was handed, as
    :func:`assignors.model.rejoin` makes it), reads it from the last round's arrays instead of
    reading every claim again: the arrays are those :meth:`GroupArrays.of` makes (checked
    field by field in the tests), so the plan is the same. Any other group is read in full,
    and still reuses the shape of one of the last ``REMEMBERED_SHAPES`` distinct shapes when
    it has their topics and each member's subscription and rack (:func:`same_shape`): a
    shape is derived from those alone. :meth:`follow_up` plans the follow-up of the round just
    planned without its group at all.

    Each call replaces what the last one remembered; one assignor shared by threads stays
    correct (every reuse is checked against the group at hand), their follow-ups are just read
    in full more often.
    """

    __slots__ = ("_last", "_shapes")

    def __init__(self) -> None:
        self._last: _Round | None = None
        self._shapes: list[_KnownShape] = []  # the most recently used first

    def plan(self, group: Group) -> StickyPlan:
        last = self._last
        if last is not None and last.handed is not None:
            arrays = follow_up_arrays(last.group, last.arrays, last.handed, group)
            if arrays is not None:
                return self._follow(group, arrays, last)
        arrays = GroupArrays.of(group)
        known = next((k for k in self._shapes if k.describes(group, arrays)), None)
        plan, shape = _plan(group, arrays, None if known is None else known.shape)
        self._remember(group, arrays, shape, plan, known)
        return plan

    def follow_up(self, group: Group, assignment: Assignment, generation: int) -> StickyPlan | None:
        """The plan of ``rejoin(group, assignment, generation)`` (:func:`assignors.model.rejoin`)
        without making that group, when ``group`` is that of the round just planned and
        ``assignment`` hands out what :meth:`handed` recorded; else None, and nothing changes.
        Its arrays are those :func:`follow_up_arrays` reads from the rejoined group, and the
        plan reads the group only for what rejoin copies from ``group`` (topics, the members'
        racks), so the plan is the same. The follow-up is recorded as planned, ``group``
        standing for the rejoined group (the same topics and members): the follow-up after it
        is asked with ``group`` again. ``generation`` must be one a member can have (else
        rejoin refuses it: None)."""
        last = self._last
        owners = assignment.owners
        if (
            last is None
            or last.group is not group
            or last.handed is None
            or owners is None
            or assignment.space is None
            or type(generation) is not int
            or generation < NO_GENERATION
        ):
            return None
        if (
            assignment.member_ids != last.arrays.member_ids
            or not assignment.space.numbers_alike(last.arrays.space)
            or not np.array_equal(owners, last.handed)
        ):
            return None
        return self._follow(group, _handed_arrays(group, last.arrays, last.handed), last)

    def _follow(self, group: Group, arrays: GroupArrays, last: _Round) -> StickyPlan:
        """The plan of the follow-up of ``last``, read as ``arrays`` (its group: ``group``)."""
        if last.uniform_owner is not None and last.kept_only():
            plan, shape = _owners_plan(arrays, last.uniform_owner), last.shape
        else:
            plan, shape = _plan(group, arrays, last.shape)
        self._remember(group, arrays, shape, plan, None)
        return plan

    def _remember(
        self,
        group: Group,
        arrays: GroupArrays,
        shape: _Shape,
        plan: StickyPlan,
        known: _KnownShape | None,
    ) -> None:
        """Keep the round just planned, and its shape first among the known ones."""
        self._last = _Round(group, arrays, shape)
        if shape.subscribers is None:
            self._last.uniform_owner = plan.owner.copy()
        if known is None:
            known = next((k for k in self._shapes if k.shape is shape), None)
        if known is None:
            known = _KnownShape.of(group, arrays, shape)
        self._shapes = [known, *(k for k in self._shapes if k is not known)][:REMEMBERED_SHAPES]

    def handed(self, group: Group, owners: np.ndarray) -> None:
        """Record that the round just planned for ``group`` handed partition ``p`` to member
        ``owners[p]`` (-1: to nobody, withheld)."""
        last = self._last
        if last is not None and last.group is group:
            last.handed = owners.copy()


class _KnownShape:
    """A shape and what it was derived from: the group's topics, partition space, each
    member's subscription (topic positions) and rack."""

    __slots__ = ("racks", "shape", "space", "subscriptions", "topics")

    def __init__(
        self,
        topics: tuple[Topic, ...],
        space: PartitionSpace,
        subscriptions: tuple[tuple[int, ...], ...],
        racks: tuple[str | None, ...],
        shape: _Shape,
    ) -> None:
        self.topics = topics
        self.space = space
        self.subscriptions = subscriptions
        self.racks = racks
        self.shape = shape

    @classmethod
    def of(cls, group: Group, arrays: GroupArrays, shape: _Shape) -> _KnownShape:
        return cls(group.topics, arrays.space, arrays.subscriptions, group.racks(), shape)

    def describes(self, group: Group, arrays: GroupArrays) -> bool:
        """Whether ``group`` (read as ``arrays``) has this shape, whatever its members own."""
        if group.topics is not self.topics and group.topics != self.topics:
            return False
        if not arrays.space.numbers_alike(self.space):
            return False
        if arrays.subscriptions != self.subscriptions:
            return False
        return group.racks() == self.racks


class _Round:
    """A round the engine planned: its group, arrays and shape, what it handed out (once the
    caller says) and, when subscriptions are uniform, the plan's owners."""

    __slots__ = ("arrays", "group", "handed", "shape", "uniform_owner")

    def __init__(self, group: Group, arrays: GroupArrays, shape: _Shape) -> None:
        self.group = group
        self.arrays = arrays
        self.shape = shape
        self.handed: np.ndarray | None = None
        self.uniform_owner: np.ndarray | None = None

    def kept_only(self) -> bool:
        """Whether every partition this round handed out went to the member whose valid claim
        it kept. Then, with uniform subscriptions, the follow-up's answer is this round's
        owners: its claims are the claims kept here, so its quotas are these (each member
        given a ceil quota here claims more than each given a floor one, or as many and ranks
        first), each member's shortfall is what it was here, and the partitions to deal are
        the withheld ones, which are those dealt here (a partition is dealt only to a member
        short of its quota, never to its claimant, which kept as many claims as its quota
        allowed), in the same order: they are dealt as here."""
        handed = self.handed
        assert handed is not None
        return bool(((handed < 0) | (handed == self.arrays.claimant)).all())


def _owners_plan(arrays: GroupArrays, owner: np.ndarray) -> StickyPlan:
    """The plan giving partition ``p`` to ``owner[p]`` (copied) on ``arrays``' claims."""
    return StickyPlan(
        arrays.space,
        arrays.member_ids,
        owner.copy(),
        arrays.claimant,
        arrays.contested,
        arrays.objects,
        arrays.unsubscribed_owner,
    )


def same_shape(before: Group, earlier: GroupArrays, group: Group, arrays: GroupArrays) -> bool:
    """Whether ``group`` (read as ``arrays``) has the :class:`_Shape` of ``before`` (read as
    ``earlier``), whatever either owns: the same topics (so the same partition space and
    replica racks), the same subscription of each member (topic positions, in member order)
    and the same rack of each member. A shape is derived from these alone."""
    return _KnownShape.of(before, earlier, _Shape.of(earlier)).describes(group, arrays)


def follow_up_arrays(
    before: Group, arrays: GroupArrays, handed: np.ndarray, group: Group
) -> GroupArrays | None:
    """:meth:`GroupArrays.of` ``group`` from ``arrays`` (those of ``before``) when ``group`` is
    ``before`` again with each member owning exactly ``handed`` (partition ``p`` owned by member
    ``handed[p]``, -1 by nobody) as owned-partition indexes of the same numbering, else None.

    ``handed`` must come from the engine's plan for ``before`` (its owners, some of them
    removed), so each owner subscribes to its partitions: every claim is then valid and none is
    contested (each partition is listed once), and no member lists a partition of a topic it
    dropped, whatever the generations. O(members + P); a group whose owned partitions were cut
    from claim arrays (:func:`assignors.model.rejoin`, a replay's generations) is compared on
    those arrays, without a step per member."""
    if group.num_members() != before.num_members() or handed.size != arrays.topic_of.size:
        return None
    if group.topics is not before.topics and group.topics != before.topics:
        return None
    space = arrays.space
    claims = group.owned_claim_arrays()
    if claims is not None:
        return _follow_up_from_claims(before, arrays, handed, group, claims)
    members, earlier = group.members, before.members
    pieces = []
    for member, was in zip(members, earlier, strict=True):
        if member is not was and (
            member.member_id != was.member_id
            or (member.topics is not was.topics and member.topics != was.topics)
            or member.rack != was.rack
            or member.instance_id != was.instance_id
        ):
            return None
        owned = member.owned_partitions
        if not isinstance(owned, OwnedPartitions) or not owned.space.numbers_alike(space):
            return None
        pieces.append(owned.indexes)
    if not group.partition_space().numbers_alike(space):
        return None
    listed = np.concatenate(pieces) if pieces else np.zeros(0, dtype=_INDEX)
    if listed.size != np.count_nonzero(handed >= 0):
        return None
    # each listed partition's lister; as many listed as handed out, so none is listed twice
    listers = np.full(handed.size, _NOBODY, dtype=_INDEX)
    listers[listed] = np.repeat(np.arange(len(members), dtype=_INDEX), list(map(len, pieces)))
    if not np.array_equal(listers, handed):
        return None
    return _handed_arrays(group, arrays, handed)


def _follow_up_from_claims(
    before: Group,
    arrays: GroupArrays,
    handed: np.ndarray,
    group: Group,
    claims: tuple[np.ndarray, np.ndarray],
) -> GroupArrays | None:
    """:func:`follow_up_arrays` of a group whose owned partitions were cut from ``claims``
    (:meth:`Group.owned_claim_arrays`: each claim's member and partition of the group's
    numbering, none claimed twice): those lists are ``handed`` when each claimed partition is
    handed to its claimer and as many are claimed as handed out. No step per member: their
    fields are compared as the groups' member columns (:meth:`Group.member_fields`; a group
    that keeps none has them read from its members)."""
    claimers, claimed = claims
    if not group.partition_space().numbers_alike(arrays.space):
        return None
    if claimed.size != np.count_nonzero(handed >= 0):
        return None
    if group.member_fields() != before.member_fields():
        return None
    if not np.array_equal(handed[claimed], claimers):
        return None
    return _handed_arrays(group, arrays, handed)


def _handed_arrays(group: Group, arrays: GroupArrays, handed: np.ndarray) -> GroupArrays:
    """``arrays`` with every partition validly claimed by ``handed[p]`` (-1: nobody)."""
    num_partitions = handed.size
    return GroupArrays(
        space=group.partition_space(),
        member_ids=arrays.member_ids,
        subscriptions=arrays.subscriptions,
        topic_of=arrays.topic_of,
        claimant=handed.astype(_INDEX, copy=True),
        contested=np.zeros(num_partitions, dtype=bool),
        unsubscribed_owner=np.zeros(num_partitions, dtype=bool),
        objects=np.full(num_partitions, None, dtype=object),
        rank=arrays.rank,
    )


def _subscribers(subscriptions: Sequence[tuple[int, ...]], num_topics: int) -> list[np.ndarray]:
    """Per topic position, its subscribers (member indexes, ascending)."""
    if len(subscriptions) <= 4 * _SMALL:
        # a few hundred members: one pass over their subscriptions, in member order
        listed: list[list[int]] = [[] for _ in range(num_topics)]
        for member, subscription in enumerate(subscriptions):
            for position in subscription:
                listed[position].append(member)
        return [np.asarray(members, dtype=_INDEX) for members in listed]
    return _subscribers_arrays(subscriptions, num_topics)


def _subscribers_arrays(
    subscriptions: Sequence[tuple[int, ...]], num_topics: int
) -> list[np.ndarray]:
    """:func:`_subscribers` for large groups: one array step per distinct subscription."""
    # members sharing a subscription join each of its topics' subscriber lists in one step
    members_by_subscription: dict[tuple[int, ...], list[int]] = {}
    for i, subscription in enumerate(subscriptions):
        members_by_subscription.setdefault(subscription, []).append(i)
    subscriber_parts: list[list[np.ndarray]] = [[] for _ in range(num_topics)]
    for subscription, sharing in members_by_subscription.items():
        sharing_members = np.asarray(sharing, dtype=_INDEX)
        for position in subscription:
            subscriber_parts[position].append(sharing_members)
    return [
        np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=_INDEX)
        for parts in subscriber_parts
    ]


def _settled(
    claimant: np.ndarray,
    active: np.ndarray,
    subscribers: list[np.ndarray] | None,
    counts: np.ndarray,
    offsets: np.ndarray,
    shape: _Shape | None = None,
) -> bool:
    """Whether claims on every partition (``claimant``, no -1) are already the engine's answer:
    with uniform subscriptions (``subscribers`` None), when the claimed counts spread by at most
    one (then the ceil quotas go to exactly the members claiming a ceil count); otherwise when
    they keep Kafka's rule (no topic has a holder two or more above its emptiest subscriber)
    and lie within the optimal load window. Then every step keeps every claim: nothing is
    unplaced, no pair breaks the rule, no flow runs for the window, and the rack-aware flow's
    only zero-cost answer is the claims themselves (any other unit costs more than nothing), so
    realization keeps them all and deals nothing."""
    loads = np.bincount(claimant, minlength=int(active[-1]) + 1)
    current = loads[active]
    low, high = int(current.min()), int(current.max())
    if subscribers is None:
        return high - low <= 1
    sizes = np.asarray([members.size for members in subscribers], dtype=_INDEX)
    served = sizes > 0
    # every partition is claimed, so by a subscriber: the topics with partitions are the served
    # ones, and each one's partitions are one segment
    fullest = np.maximum.reduceat(loads[claimant], offsets[served])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))[served]
    least = np.minimum.reduceat(loads[np.concatenate(subscribers)], starts)
    if (fullest > least + 1).any():
        return False
    if high - low <= 1:
        return True
    window_low, window_high = _optimal_window(
        subscribers, counts, loads.size, active, (low, high), shape
    )
    return window_low <= low and high <= window_high


def _uniform_targets(
    num_partitions: int,
    active: np.ndarray,
    claim_counts: np.ndarray,
    rank: np.ndarray,
    num_members: int,
) -> np.ndarray:
    """Quota per member: ``P % C`` ceil quotas to the members that claim the most
    (``claim_counts``: valid claims per member; ties: lowest rank)."""
    targets = np.zeros(num_members, dtype=_INDEX)
    if active.size == 0:
        return targets
    floor_quota, extra = divmod(num_partitions, active.size)
    targets[active] = floor_quota
    if extra:
        # one key per member, most claims first, then rank (ranks are distinct, below M)
        by_claims = active[np.argsort(rank[active] - claim_counts[active] * num_members)]
        targets[by_claims[:extra]] += 1
    return targets


# --------------------------------------------------------------------------- heterogeneous


def _water_fill(loads: np.ndarray, units: int, rank: np.ndarray) -> np.ndarray:
    """How many of ``units`` each member gets when every unit goes to the least-loaded member
    (ties: lowest rank): everyone below a level is raised to it, the rest go one each in rank
    order to the members at that level. The level is the highest one whose raise costs at most
    ``units``: with the loads sorted, raising the k lowest to L costs ``k L - (their sum)``, so
    it is ``(units + sum of the k lowest) // k`` for the largest k that reaches the k-th lowest
    load. O(m log m) for m members (plain Python for a few dozen, where numpy's per-call cost
    is most of the work)."""
    size = loads.size
    if units <= 0 or size == 0:
        return np.zeros(size, dtype=_INDEX)
    if size <= _SMALL:
        return np.asarray(_water_fill_list(loads.tolist(), units, rank.tolist()), dtype=_INDEX)
    ordered = np.sort(loads)
    levels = (units + np.cumsum(ordered)) // np.arange(1, size + 1)
    level = int(levels[np.count_nonzero(levels >= ordered) - 1])
    filled = np.maximum(level - loads, 0)
    remaining = units - int(filled.sum())
    if remaining:
        tied = np.flatnonzero(loads + filled == level)
        filled[tied[np.argsort(rank[tied], kind="stable")[:remaining]]] += 1
    return filled


def _water_fill_list(values: list[int], units: int, ranks: list[int]) -> list[int]:
    """:func:`_water_fill` on Python lists (``units`` > 0, ``values`` not empty)."""
    level, total = 0, 0
    for k, value in enumerate(sorted(values), 1):
        total += value
        candidate = (units + total) // k
        if candidate < value:
            break
        level = candidate
    added = [level - value if value < level else 0 for value in values]
    remaining = units - sum(added)
    if remaining:
        at_level = sorted(
            (ranks[i], i) for i, value in enumerate(values) if value + added[i] == level
        )
        for _, i in at_level[:remaining]:
            added[i] += 1
    return added


def _assign_heterogeneous(
    state: _State,
    shape: _Shape,
    counts: np.ndarray,
    offsets: np.ndarray,
) -> None:
    claimant, rank = state.claimant, state.rank
    num_members = rank.size
    num_topics = counts.size
    subscribers = shape.subscribers
    assert subscribers is not None

    # claims per (topic, subscriber) edge
    edges = shape.edges(num_members)
    by_choice = edges.by_choice
    valid = _ClaimEdges.of(edges, claimant, state.topic_of)
    loads = np.bincount(valid.holders, minlength=num_members)
    cuts = edges.offsets.tolist()
    # claimed partitions a subscriber still holds, and partitions placed this round, per topic
    kept = [valid.per_edge[cuts[p] : cuts[p + 1]].copy() for p in range(num_topics)]
    free = [np.zeros(size, dtype=_INDEX) for size in edges.sizes.tolist()]

    claims = [held.copy() for held in kept]
    place = _place_on_lists if _small_topics(subscribers, loads) else _place_on_arrays
    moved_claims = place(by_choice, subscribers, counts, kept, free, loads, rank)
    # Kafka's rule allows a spread an exchange along a chain of members could still shrink;
    # the smallest spread any valid assignment has is the goal, kept claims come after it
    active = shape.active  # the members subscribing to some topic with partitions
    reached = loads[active]
    least, most = int(reached.min()), int(reached.max())
    low, high = _optimal_window(subscribers, counts, num_members, active, (least, most), shape)
    if least < low or most > high:
        windowed = _window_flow(subscribers, claims, counts, num_members, active, low, high)
        for position, held in enumerate(windowed):
            kept[position] = np.minimum(claims[position], held)
            free[position] = held - kept[position]
        loads[:] = 0
        for members, held in zip(subscribers, windowed, strict=True):
            np.add.at(loads, members, held)
        _balance_by_kafkas_rule(by_choice, subscribers, kept, free, loads, rank)
        moved_claims = True
    holdings = [held + placed for held, placed in zip(kept, free, strict=True)]
    if moved_claims:
        fewest = _fewest_moves(subscribers, claims, counts, loads)
        if fewest is None:
            raise RuntimeError("the balanced loads admit no assignment")
        holdings = fewest
        if edges.key.size <= LOAD_SEARCH_EDGES:
            holdings = _search_loads(subscribers, claims, counts, loads, holdings, (low, high))
    if state.racks is not None:
        # same loads and claims kept; the counts per topic now also follow replica racks
        local_by_rack = state.racks.topic_local
        assert local_by_rack is not None  # the map was built for this group's space
        located = _fewest_moves(
            subscribers, claims, counts, loads, (local_by_rack, state.racks.member_rack)
        )
        if located is not None:
            holdings = located

    _realize_topics(state, edges, valid, holdings, offsets)


def _place_on_arrays(
    order: list[int],
    subscribers: list[np.ndarray],
    counts: np.ndarray,
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """Water-fill each topic's partitions that no kept claim holds onto its subscribers
    (:func:`_water_fill`, topic after topic in ``order``; among equally loaded subscribers,
    new partitions go first to the least constrained, :func:`_tie_order`), then
    :func:`_balance_by_kafkas_rule`. ``free`` (zero before), ``kept`` and ``loads`` change;
    True when claims moved."""
    ties = _tie_order_arrays(subscribers, kept, free, loads, rank)
    for position in order:
        members = subscribers[position]
        if members.size == 0:
            continue
        unplaced = int(counts[position] - kept[position].sum())
        added = _water_fill(loads[members], unplaced, ties[members])
        free[position] += added
        loads[members] += added
    return _balance_on_arrays(order, subscribers, kept, free, loads, rank)


def _place_on_lists(
    order: list[int],
    subscribers: list[np.ndarray],
    counts: np.ndarray,
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """:func:`_place_on_arrays` on Python lists, for small groups (:func:`_small_topics`): the
    arrays are read once and written back once (the same tie order, water-filling and
    balancing: :func:`_tie_order_list`, :func:`_water_fill_list`, :func:`_balance_lists`)."""
    load, ranks, sizes = loads.tolist(), rank.tolist(), counts.tolist()
    members_of, held_of, placed_of = _as_lists(subscribers, kept, free)
    ties = _tie_order_list(members_of, held_of, placed_of, load, ranks)
    for position in order:
        members = members_of[position]
        unplaced = sizes[position] - sum(held_of[position])
        if not members or unplaced <= 0:
            continue
        added = _water_fill_list([load[m] for m in members], unplaced, [ties[m] for m in members])
        placed_of[position] = added
        for member, units in zip(members, added, strict=True):
            load[member] += units
    moved_claims = _balance_lists(order, members_of, held_of, placed_of, load, ranks)
    _write_back(held_of, placed_of, load, kept, free, loads)
    return moved_claims


def _as_lists(
    subscribers: list[np.ndarray], kept: list[np.ndarray], free: list[np.ndarray]
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """Each topic's subscribers, kept claims and freely placed partitions as Python lists."""
    return (
        [members.tolist() for members in subscribers],
        [held.tolist() for held in kept],
        [placed.tolist() for placed in free],
    )


def _write_back(
    held_of: list[list[int]],
    placed_of: list[list[int]],
    load: list[int],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
) -> None:
    """Store the lists of :func:`_as_lists` (and the loads) back into the arrays."""
    for position, (held, placed) in enumerate(zip(held_of, placed_of, strict=True)):
        kept[position] = np.asarray(held, dtype=_INDEX)
        free[position] = np.asarray(placed, dtype=_INDEX)
    loads[:] = load


def _realize_topics(
    state: _State,
    edges: _Edges,
    valid: _ClaimEdges,
    holdings: list[np.ndarray],
    offsets: np.ndarray,
) -> None:
    """:func:`_realize` of every topic with subscribers (``edges``; ``valid``: the claims of
    ``state.claimant`` on them), each subscriber getting ``holdings[topic]`` of the topic's
    partitions, for all topics at once: a subscriber keeps its first claims on the topic
    (rack-local first, then in partition order), and each topic's other partitions are dealt
    round-robin to its subscribers short of their holding (rank order; with racks, same-rack
    first, topic by topic)."""
    topic_of, rank, racks, owner = state.topic_of, state.rank, state.racks, state.owner
    num_members = rank.size
    sizes, edge_topic, edge_member = edges.sizes, edges.topic, edges.member
    target = np.concatenate(holdings).astype(_INDEX)
    claimed, holders, claim_edge = valid.claimed, valid.holders, valid.edge
    claim_counts = valid.per_edge
    if (claim_counts <= target).all():
        # every member keeps all its claims, so which of them come first does not matter
        owner[claimed] = holders
        deficit = target - claim_counts
    else:
        remote = (
            ~racks.is_local(claimed, holders)
            if racks is not None
            else np.zeros(claimed.size, dtype=bool)
        )
        # claimed is ascending, so a stable sort by (edge, remote) keeps partition order
        order = (claim_edge * 2 + remote).argsort(kind="stable")
        claimed, holders, claim_edge = claimed[order], holders[order], claim_edge[order]
        # edges are sorted: each one's claims start after those of the edges before it
        starts = claim_counts.cumsum() - claim_counts
        keep = np.arange(claim_edge.size) - starts[claim_edge] < target[claim_edge]
        owner[claimed[keep]] = holders[keep]
        deficit = target - np.minimum(claim_counts, target)
    served = sizes > 0
    pool = ((owner == _NOBODY) & served[topic_of]).nonzero()[0]
    if pool.size == 0:
        return
    if racks is None:
        short = (deficit > 0).nonzero()[0]
        wanted = deficit[short]
        units = np.repeat(short, wanted)
        unit_topic = edge_topic[units]
        if np.array_equal(
            np.bincount(unit_topic, minlength=sizes.size),
            np.bincount(topic_of[pool], minlength=sizes.size),
        ):
            # per topic: round r deals one partition to each subscriber still short, by rank;
            # units is sorted by edge, so a unit's round is its place in its edge's run
            unit_member = edge_member[units]
            rounds = np.arange(units.size) - np.repeat(wanted.cumsum() - wanted, wanted)
            key = (unit_topic * (int(wanted.max()) + 1) + rounds) * num_members
            owner[pool] = unit_member[(key + rank[unit_member]).argsort()]
            return
    # the pool is sorted, so each topic's part of it is one slice
    pool_cuts = np.searchsorted(pool, np.append(offsets, topic_of.size)).tolist()
    edge_cuts = edges.offsets.tolist()
    for position in np.unique(topic_of[pool]).tolist():
        first, end = edge_cuts[position], edge_cuts[position + 1]
        deficits = np.zeros(num_members, dtype=_INDEX)
        deficits[edge_member[first:end]] = deficit[first:end]
        here = pool[pool_cuts[position] : pool_cuts[position + 1]]
        _deal_with_racks(here, deficits, rank, racks, owner)


def _balance_by_kafkas_rule(
    order: list[int],
    subscribers: list[np.ndarray],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """Spread free partitions, then move claimed ones, until no member holds a partition of a
    topic whose emptiest subscriber is two or more below it; True when claims moved. Every step
    lowers the fullest load or raises the emptiest one of the members it touches, so loads
    never leave the range they started in. Small groups (:func:`_small_topics`) are balanced
    on Python lists (:func:`_balance_lists`)."""
    if not _small_topics(subscribers, loads):
        return _balance_on_arrays(order, subscribers, kept, free, loads, rank)
    load, ranks = loads.tolist(), rank.tolist()
    members_of, held_of, placed_of = _as_lists(subscribers, kept, free)
    moved_claims = _balance_lists(order, members_of, held_of, placed_of, load, ranks)
    _write_back(held_of, placed_of, load, kept, free, loads)
    return moved_claims


def _balance_on_arrays(
    order: list[int],
    subscribers: list[np.ndarray],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """:func:`_balance_by_kafkas_rule` on arrays, for large groups."""
    moved_claims = False
    while True:
        _spread_free_arrays(order, subscribers, kept, free, loads, rank)
        if not _move_claimed(order, subscribers, kept, free, loads, rank):
            return moved_claims
        moved_claims = True


def _balance_lists(
    order: list[int],
    members_of: list[list[int]],
    held_of: list[list[int]],
    placed_of: list[list[int]],
    load: list[int],
    ranks: list[int],
) -> bool:
    """:func:`_balance_on_arrays` on Python lists, changed in place (the same sweeps and
    moves: :func:`_spread_free_lists`, :func:`_move_topic_claims_lists`)."""
    moved_claims = False
    while True:
        _spread_free_lists(order, members_of, held_of, placed_of, load, ranks)
        if not any(
            _move_topic_claims_lists(
                members_of[position], held_of[position], placed_of[position], load, ranks
            )
            for position in order
        ):
            return moved_claims
        moved_claims = True


def _optimal_window(
    subscribers: list[np.ndarray],
    counts: np.ndarray,
    num_members: int,
    active: np.ndarray,
    reached: tuple[int, int],
    shape: _Shape | None = None,
) -> tuple[int, int]:
    """(largest min load, smallest max load) any valid assignment reaches: scoring's exact
    references, on topics merged by subscriber set. ``reached``: the least and the most an
    ``active`` member holds now; a spread of at most one is already both (no exchange can
    improve it), so nothing is computed then; up to ``WINDOW_SUBSETS_CLASSES`` merged topics
    (and ``WINDOW_SUBSETS_CELLS`` sets x members), Hall's conditions over every set of them give
    both at once (:func:`_window_by_subsets`), beyond that scoring's flows do."""
    low, high = reached
    if high - low <= 1:
        return low, high
    if shape is not None:
        return shape.window(counts, num_members)
    return _window_of(subscribers, counts, num_members, active)


def _window_of(
    subscribers: list[np.ndarray], counts: np.ndarray, num_members: int, active: np.ndarray
) -> tuple[int, int]:
    """:func:`_optimal_window` when the loads spread by two or more: it depends on the
    subscribers and topic sizes alone."""
    merged: dict[bytes, int] = {}
    class_subscribers: list[np.ndarray] = []
    sizes: list[int] = []
    for position, members in enumerate(subscribers):
        if members.size == 0:
            continue
        key = members.tobytes()
        index = merged.get(key)
        if index is None:
            index = merged[key] = len(sizes)
            class_subscribers.append(members)
            sizes.append(0)
        sizes[index] += int(counts[position])
    if len(sizes) <= WINDOW_SUBSETS_CLASSES and active.size << len(sizes) <= WINDOW_SUBSETS_CELLS:
        return _window_by_subsets(class_subscribers, sizes, num_members, active)
    # imported here: scoring brings pyarrow, which only groups with many classes need
    from assignors.traces.scoring import (
        SubscriptionClasses,
        optimal_max_load_of,
        optimal_min_load_of,
    )

    classes = SubscriptionClasses(
        tuple(tuple(members.tolist()) for members in class_subscribers),
        tuple(sizes),
        {},
        tuple(active.tolist()),
    )
    return optimal_min_load_of(classes), optimal_max_load_of(classes)


def _window_by_subsets(
    class_subscribers: list[np.ndarray], sizes: list[int], num_members: int, active: np.ndarray
) -> tuple[int, int]:
    """(largest min load, smallest max load) of any valid assignment of classes of partitions
    (``sizes[c]`` partitions, subscribed by ``class_subscribers[c]``) to the ``active`` members
    (every subscriber of some class), by Hall's conditions on every set S of classes:

    - no member above L fits iff every S has ``size(S) <= L x |members subscribing to some
      class of S|``, so the smallest max load is the largest ``ceil(size(S) / that count)``;
    - every member at least L fits iff every S has ``size(S) >= L x |members subscribing only
      to classes of S|``, so the largest min load is the smallest ``floor(size(S) / that count)``
      over the S that count is positive for (S = all classes gives ``total // members``).

    These are the cut conditions of scoring's flows (classes -> members, each capped at L), so
    the numbers are the same. O(2^k x members) for k classes."""
    num_classes = len(sizes)
    masks = np.zeros(num_members, dtype=_INDEX)
    for position, members in enumerate(class_subscribers):
        masks[members] |= 1 << position
    masks = masks[active]
    subsets = np.arange(1, 1 << num_classes, dtype=_INDEX)
    bits = (subsets[:, None] >> np.arange(num_classes, dtype=_INDEX)) & 1
    size_of = bits @ np.asarray(sizes, dtype=_INDEX)
    reaching = np.count_nonzero(masks[None, :] & subsets[:, None], axis=1)
    inside = np.count_nonzero((masks[None, :] & ~subsets[:, None]) == 0, axis=1)
    smallest_max = int((-(-size_of // reaching)).max())
    counted = inside > 0
    largest_min = int((size_of[counted] // inside[counted]).min())
    return largest_min, smallest_max


def _window_flow(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    num_members: int,
    active: np.ndarray,
    low: int,
    high: int,
) -> list[np.ndarray]:
    """Per topic, how many partitions each subscriber holds so that every active member holds
    between ``low`` and ``high`` and the most claims are kept: a min-cost flow from topics to
    members (a claimed unit costs 0, any other 1) where each active member must take ``low``
    (its supply) and may take ``high - low`` more through its arc to the sink."""
    num_topics = len(subscribers)
    source, sink = 0, 1 + num_topics + num_members
    edge_offsets = np.concatenate(([0], np.cumsum([m.size for m in subscribers]))).astype(_INDEX)
    topic_of_edge = np.repeat(np.arange(num_topics, dtype=_INDEX), np.diff(edge_offsets))
    member_of_edge = (
        np.concatenate(subscribers).astype(_INDEX) if num_topics else np.zeros(0, dtype=_INDEX)
    )
    claimed = np.concatenate(claims).astype(_INDEX) if num_topics else np.zeros(0, dtype=_INDEX)
    sizes = np.repeat(counts.astype(_INDEX), np.diff(edge_offsets))
    member_nodes = 1 + num_topics + active
    tails = np.concatenate(
        (np.zeros(num_topics, dtype=_INDEX), 1 + topic_of_edge, 1 + topic_of_edge, member_nodes)
    )
    heads = np.concatenate(
        (
            1 + np.arange(num_topics, dtype=_INDEX),
            1 + num_topics + member_of_edge,
            1 + num_topics + member_of_edge,
            np.full(active.size, sink, dtype=_INDEX),
        )
    )
    capacities = np.concatenate(
        (counts.astype(_INDEX), claimed, sizes, np.full(active.size, high - low, dtype=_INDEX))
    )
    costs = np.concatenate(
        (
            np.zeros(num_topics, dtype=_INDEX),
            np.zeros(claimed.size, dtype=_INDEX),
            np.ones(sizes.size, dtype=_INDEX),
            np.zeros(active.size, dtype=_INDEX),
        )
    )
    flow = min_cost_flow.SimpleMinCostFlow()
    arcs = flow.add_arcs_with_capacity_and_unit_cost(tails, heads, capacities, costs)
    total = int(counts.sum())
    supplies = np.zeros(sink + 1, dtype=_INDEX)
    supplies[source] = total
    supplies[member_nodes] = -low
    supplies[sink] = -(total - low * active.size)
    flow.set_nodes_supplies(np.arange(sink + 1, dtype=_INDEX), supplies)
    if flow.solve() != flow.OPTIMAL:
        raise RuntimeError("no assignment reaches the optimal load window")
    flows = flow.flows(arcs)
    edges = claimed.size
    held = (
        flows[num_topics : num_topics + edges] + flows[num_topics + edges : num_topics + 2 * edges]
    )
    return [held[edge_offsets[p] : edge_offsets[p + 1]] for p in range(num_topics)]


def _tie_order(
    subscribers: list[np.ndarray],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> np.ndarray:
    """Tie-break rank per member: members whose held topics allow the most extra load first
    (a member may hold a topic only while at most one above the topic's emptiest subscriber),
    then by ``rank``. O(E). Small groups (:func:`_small_topics`) take :func:`_tie_order_list`."""
    if _small_topics(subscribers, loads):
        ties = _tie_order_list(
            [members.tolist() for members in subscribers],
            [held.tolist() for held in kept],
            [placed.tolist() for placed in free],
            loads.tolist(),
            rank.tolist(),
        )
        return np.asarray(ties, dtype=_INDEX)
    return _tie_order_arrays(subscribers, kept, free, loads, rank)


def _tie_order_arrays(
    subscribers: list[np.ndarray],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> np.ndarray:
    """:func:`_tie_order` on arrays, for large groups."""
    unlimited = int(loads.sum()) + 2
    cap = np.full(loads.size, unlimited, dtype=_INDEX)
    for members, held, placed in zip(subscribers, kept, free, strict=True):
        if members.size:
            holding = members[(held + placed) > 0]
            np.minimum.at(cap, holding, int(loads[members].min()) + 1)
    ties = np.empty(loads.size, dtype=_INDEX)
    ties[np.lexsort((rank, -cap))] = np.arange(loads.size, dtype=_INDEX)
    return ties


def _small_topics(subscribers: list[np.ndarray], loads: np.ndarray) -> bool:
    """Whether a group is small enough for the steps on Python lists (balancing, tie order): a
    few hundred members at most and topics of a few dozen subscribers."""
    return loads.size <= 4 * _SMALL and max(members.size for members in subscribers) <= _SMALL


def _spread_free_arrays(
    order: list[int],
    subscribers: list[np.ndarray],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> None:
    """:func:`_spread_free` on arrays, for large groups."""
    improved = True
    while improved:
        improved = False
        ties = _tie_order(subscribers, kept, free, loads, rank)
        for position in order:
            placed = free[position]
            units = int(placed.sum())
            if units == 0:
                continue
            members = subscribers[position]
            current = loads[members]
            base = current - placed
            refilled = _water_fill(base, units, ties[members])
            after = base + refilled
            if int(after @ after) < int(current @ current):
                free[position] = refilled
                loads[members] = after
                improved = True


def _spread_free_lists(
    order: list[int],
    members_of: list[list[int]],
    held_of: list[list[int]],
    placed_of: list[list[int]],
    load: list[int],
    ranks: list[int],
) -> None:
    """:func:`_spread_free_arrays` on Python lists (``placed_of`` and ``load`` changed in
    place), for groups of a few hundred members at most and topics of a few dozen subscribers
    (same sweeps, same tie order, same water-filling)."""
    improved = True
    while improved:
        improved = False
        ties = None  # the sweep's tie order, made when a topic first needs it
        for position in order:
            placed = placed_of[position]
            units = sum(placed)
            if units == 0:
                continue
            members = members_of[position]
            current = list(map(load.__getitem__, members))
            # water-filling gives the least sum of squares, which the placement already has
            # when no free unit sits two or more above the topic's emptiest subscriber (moving
            # one unit between loads x and y changes the sum by 2 (y - x) + 2)
            if (
                max(now for now, mine in zip(current, placed, strict=True) if mine) - min(current)
                < 2
            ):
                continue
            if ties is None:
                ties = _tie_order_list(members_of, held_of, placed_of, load, ranks)
            base = [now - mine for now, mine in zip(current, placed, strict=True)]
            refilled = _water_fill_list(base, units, [ties[m] for m in members])
            after = [below + added for below, added in zip(base, refilled, strict=True)]
            if sum(a * a for a in after) < sum(c * c for c in current):
                placed_of[position] = refilled
                for member, value in zip(members, after, strict=True):
                    load[member] = value
                improved = True


def _tie_order_list(
    members_of: list[list[int]],
    held_of: list[list[int]],
    placed_of: list[list[int]],
    load: list[int],
    ranks: list[int],
) -> list[int]:
    """:func:`_tie_order` on Python lists."""
    cap = [sum(load) + 2] * len(load)
    for members, held, placed in zip(members_of, held_of, placed_of, strict=True):
        if members:
            least = min(map(load.__getitem__, members)) + 1
            for member, mine, added in zip(members, held, placed, strict=True):
                if (mine or added) and least < cap[member]:
                    cap[member] = least
    ties = [0] * len(load)
    # ranks are distinct, so the member index never decides
    ordered = sorted(zip([-limit for limit in cap], ranks, range(len(load)), strict=True))
    for position, (_, _, member) in enumerate(ordered):
        ties[member] = position
    return ties


def _move_claimed(
    order: list[int],
    subscribers: list[np.ndarray],
    kept: list[np.ndarray],
    free: list[np.ndarray],
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """In the first topic whose fullest claimed holder has two or more partitions than its
    emptiest subscriber, move claimed partitions one fullest-to-emptiest step at a time until
    that stops; False when no topic needs it."""
    for position in order:
        members = subscribers[position]
        move = _move_topic_claims if members.size > _SMALL else _move_topic_claims_small
        if move(members, kept[position], free[position], loads, rank):
            return True
    return False


def _move_topic_claims(
    members: np.ndarray,
    holding: np.ndarray,
    placed: np.ndarray,
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """One topic of :func:`_move_claimed` (``holding``/``placed``: its subscribers' kept claims
    and freely placed partitions, changed in place with ``loads``); True when claims moved.
    Each step moves from the fullest holder (ties: lowest rank) to the emptiest subscriber
    (ties: lowest rank) as many units as would pick the same pair in a row."""
    moved_any = False
    while True:
        holders = np.flatnonzero(holding > 0)
        if holders.size == 0:
            break
        member_loads = loads[members]
        if int(member_loads[holders].max()) - int(member_loads.min()) < 2:
            break  # the fullest holder is within one of the emptiest subscriber
        by_load = holders[np.lexsort((rank[members[holders]], -member_loads[holders]))]
        donor = by_load[0]
        receivers = np.lexsort((rank[members], member_loads))
        receiver = receivers[0]
        gap = int(member_loads[donor] - member_loads[receiver])
        next_donor = int(member_loads[by_load[1]]) if by_load.size > 1 else -1
        next_receiver = (
            int(member_loads[receivers[1]])
            if receivers.size > 1
            else int(member_loads[receiver]) + gap
        )
        units = min(
            int(holding[donor]),
            gap // 2,
            max(1, int(member_loads[donor]) - next_donor),
            max(1, next_receiver - int(member_loads[receiver])),
        )
        holding[donor] -= units
        placed[receiver] += units
        loads[members[donor]] -= units
        loads[members[receiver]] += units
        moved_any = True
    return moved_any


def _move_topic_claims_small(
    members: np.ndarray,
    holding: np.ndarray,
    placed: np.ndarray,
    loads: np.ndarray,
    rank: np.ndarray,
) -> bool:
    """:func:`_move_topic_claims` for topics of a few dozen subscribers: one topic's arrays
    read as lists for :func:`_move_topic_claims_lists` and written back when claims moved."""
    held, put, load = holding.tolist(), placed.tolist(), loads[members].tolist()
    subscribed = list(range(members.size))  # the lists are the topic's own
    if not _move_topic_claims_lists(subscribed, held, put, load, rank[members].tolist()):
        return False
    holding[:] = held
    placed[:] = put
    loads[members] = load
    return True


def _move_topic_claims_lists(
    members: list[int], held: list[int], put: list[int], load: list[int], ranks: list[int]
) -> bool:
    """:func:`_move_topic_claims` on Python lists: ``held``/``put`` are the topic's
    subscribers' kept claims and freely placed partitions, ``load``/``ranks`` are indexed by
    the member indexes in ``members``; all changed in place. True when claims moved.

    Each subscriber's place in both orders of a step (fullest holder first, emptiest
    subscriber first; ties: lowest rank) is one integer, load x ``scale`` + rank (negated load
    for the holders), kept up to date as loads change: a step finds the first two of each
    order by ``min`` instead of sorting (ranks are distinct and below ``scale``)."""
    if not any(held):
        return False
    here = list(map(load.__getitem__, members))
    if max(compress(here, held)) - min(here) < 2:
        return False  # the first step's fullest holder is within one of the emptiest
    ranks_here = list(map(ranks.__getitem__, members))
    scale = max(ranks_here) + 1
    # above every key: a holder's is below scale, and loads stay within their first range
    absent = (max(here) + 1) * scale
    receiving = [value * scale + rank for value, rank in zip(here, ranks_here, strict=True)]
    giving = [
        rank - value * scale if mine > 0 else absent
        for value, rank, mine in zip(here, ranks_here, held, strict=True)
    ]
    moved_any = False
    while True:
        donor_key = min(giving)
        if donor_key == absent:
            break
        donor = giving.index(donor_key)
        receiver_key = min(receiving)
        receiver = receiving.index(receiver_key)
        gap = here[donor] - here[receiver]
        if gap < 2:
            break
        giving[donor] = absent
        next_key = min(giving)
        giving[donor] = donor_key
        next_donor = -(next_key // scale) if next_key != absent else -1
        # a lone subscriber is its own donor and receiver (gap 0): here there are two or more
        receiving[receiver] = absent
        next_receiver = min(receiving) // scale
        receiving[receiver] = receiver_key
        units = min(
            held[donor],
            gap // 2,
            max(1, here[donor] - next_donor),
            max(1, next_receiver - here[receiver]),
        )
        shift = units * scale
        held[donor] -= units
        put[receiver] += units
        here[donor] -= units
        here[receiver] += units
        receiving[donor] -= shift
        receiving[receiver] += shift
        giving[donor] = donor_key + shift if held[donor] else absent
        if held[receiver]:
            giving[receiver] -= shift
        moved_any = True
    if moved_any:
        for member, value in zip(members, here, strict=True):
            load[member] = value
    return moved_any


def _fewest_moves(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    locality: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[np.ndarray] | None:
    """Per topic, how many partitions each subscriber holds so that every member keeps its load
    from ``loads``, Kafka's rule holds and the most claims are kept: a min-cost flow from topics
    to members where a member may take a topic only if no subscriber of the topic is two or more
    below it, and a unit costs 1 unless it is one of the member's own claims on that topic.

    With ``locality`` (partitions of each topic with a replica on each consumer rack, T x R; the
    rack column of each member, -1 unknown), a new unit costs more when it is not rack-local, and
    a (topic, rack) node caps the local units at what the rack can hold; a lost claim always
    costs more than any locality gained. Nodes: source, T topics, M members, sink, T x R
    (topic, rack); arcs: two or three per subscription edge. None when no assignment has these
    loads."""
    num_topics, num_members = len(subscribers), loads.size
    source, sink = 0, 1 + num_topics + num_members
    num_racks = locality[0].shape[1] if locality is not None else 0
    rack_base = sink + 1
    total = int(counts.sum())
    new_cost = 1 if locality is None else total + 1
    edge_offsets = np.concatenate(([0], np.cumsum([m.size for m in subscribers]))).astype(_INDEX)
    arguments = (subscribers, claims, counts, loads, edge_offsets, new_cost)
    small = 0 < edge_offsets[-1] <= _SMALL_ARCS
    if small:
        # the same arcs in the same order, the ends included, on Python lists
        tails, heads, capacities, costs, edges = _arcs_on_lists(*arguments, locality, ends=True)
    else:
        topic_nodes = 1 + np.arange(num_topics, dtype=_INDEX)
        member_nodes = 1 + num_topics + np.arange(num_members, dtype=_INDEX)
        tails, heads, capacities, costs, edges = _network_on_arrays(
            arguments, locality, topic_nodes, member_nodes, sink
        )
    flow = min_cost_flow.SimpleMinCostFlow()
    arcs = flow.add_arcs_with_capacity_and_unit_cost(tails, heads, capacities, costs)
    num_nodes = rack_base + num_topics * num_racks
    supplies = np.zeros(num_nodes, dtype=_INDEX)
    supplies[source], supplies[sink] = total, -total
    flow.set_nodes_supplies(np.arange(num_nodes, dtype=_INDEX), supplies)
    if flow.solve() != flow.OPTIMAL:
        return None
    flows = flow.flows(arcs)
    feeding = edges >= 0
    if small:
        # exact: a sum of at most three flows of at most the partitions, as float64
        held = np.bincount(
            edges[feeding], weights=flows[feeding], minlength=int(edge_offsets[-1])
        ).astype(_INDEX)
    else:
        held = np.zeros(int(edge_offsets[-1]), dtype=_INDEX)
        np.add.at(held, edges[feeding], flows[feeding])
    return [held[edge_offsets[p] : edge_offsets[p + 1]] for p in range(num_topics)]


def _network_on_arrays(
    arguments: tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, int],
    locality: tuple[np.ndarray, np.ndarray] | None,
    topic_nodes: np.ndarray,
    member_nodes: np.ndarray,
    sink: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tails, heads, capacities, costs, edges) of every arc of :func:`_fewest_moves`, built
    on arrays: the subscription arcs, then source -> each topic, then each member -> sink;
    ``edges``: the subscription edge each arc feeds, -1 for the others."""
    subscribers, _, counts, loads, edge_offsets, _ = arguments
    num_topics, num_members = len(subscribers), loads.size
    made = [
        (np.zeros(num_topics, dtype=_INDEX), member_nodes),
        (topic_nodes, np.full(num_members, sink, dtype=_INDEX)),
        (counts.astype(_INDEX), loads.astype(_INDEX)),
        (np.zeros(num_topics + num_members, dtype=_INDEX),),
        (np.full(num_topics + num_members, -1, dtype=_INDEX),),
    ]
    if edge_offsets[-1] > 0:
        if locality is not None and edge_offsets[-1] > RACK_ARCS_AT_ONCE:
            # one topic at a time, the pieces concatenated once with the arcs above
            pieces = _rack_arc_pieces(*arguments, locality)
        else:
            whole = (
                _arcs_on_lists(*arguments, locality)
                if edge_offsets[-1] <= _SMALL_ARCS
                else _plain_arcs(*arguments)
                if locality is None
                else _rack_arcs(*arguments, locality)
            )
            pieces = [[column] for column in whole]
        made = [(*parts, *rest) for parts, rest in zip(pieces, made, strict=True)]
    tails, heads, capacities, costs, edges = (np.concatenate(parts) for parts in made)
    return tails, heads, capacities, costs, edges


def _plain_arcs(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    edge_offsets: np.ndarray,
    new_cost: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tails, heads, capacities, costs, edges) of the subscription arcs of :func:`_fewest_moves`
    without racks, for all topics at once and in the order a loop over topics adds them: per
    topic with subscribers, one arc per allowed
    subscriber (within one of the topic's least loaded) at cost 0 capped by its claims, then
    one per allowed subscriber at ``new_cost`` capped by the topic's size."""
    num_topics = len(subscribers)
    sizes = np.diff(edge_offsets)
    members = np.concatenate(subscribers).astype(_INDEX)
    claimed = np.concatenate(claims).astype(_INDEX)
    topic_of = np.repeat(np.arange(num_topics, dtype=_INDEX), sizes)
    member_loads = loads[members]
    starts = edge_offsets[:-1][sizes > 0]
    least = np.zeros(num_topics, dtype=_INDEX)
    least[topic_of[starts]] = np.minimum.reduceat(member_loads, starts)
    allowed = np.flatnonzero(member_loads <= least[topic_of] + 1)
    allowed_topic = topic_of[allowed]
    per_topic = np.bincount(allowed_topic, minlength=num_topics)
    first = np.cumsum(per_topic) - per_topic
    claim_at = 2 * first[allowed_topic] + np.arange(allowed.size) - first[allowed_topic]
    new_at = claim_at + per_topic[allowed_topic]
    tails = np.empty(2 * allowed.size, dtype=_INDEX)
    heads = np.empty(2 * allowed.size, dtype=_INDEX)
    capacities = np.empty(2 * allowed.size, dtype=_INDEX)
    costs = np.empty(2 * allowed.size, dtype=_INDEX)
    edges = np.empty(2 * allowed.size, dtype=_INDEX)
    for at, capacity, cost in (
        (claim_at, claimed[allowed], 0),
        (new_at, counts[allowed_topic], new_cost),
    ):
        tails[at] = 1 + allowed_topic
        heads[at] = 1 + num_topics + members[allowed]
        capacities[at] = capacity
        costs[at] = cost
        edges[at] = allowed
    return tails, heads, capacities, costs, edges


def _arcs_on_lists(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    edge_offsets: np.ndarray,
    new_cost: int,
    locality: tuple[np.ndarray, np.ndarray] | None,
    *,
    ends: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_plain_arcs` (``locality`` None) or :func:`_rack_arcs`, built topic by topic on
    Python lists: for a few hundred edges, numpy's per-call cost is most of the work. With
    ``ends``, followed by the other arcs of :func:`_fewest_moves` as
    :func:`_network_on_arrays` adds them (source -> each topic, each member -> sink)."""
    num_topics = len(subscribers)
    load = loads.tolist()
    sizes = counts.tolist()
    starts = edge_offsets.tolist()
    member_base = 1 + num_topics
    new_arc_cost = new_cost if locality is None else new_cost + 1
    if locality is not None:
        local_rows = locality[0].tolist()
        member_racks = locality[1].tolist()
        num_racks = locality[0].shape[1]
        rack_base = 2 + num_topics + loads.size
    tails: list[int] = []
    heads: list[int] = []
    capacities: list[int] = []
    costs: list[int] = []
    edges: list[int] = []
    for position, subscribed in enumerate(subscribers):
        members = subscribed.tolist()
        if not members:
            continue
        here = [load[member] for member in members]
        limit = min(here) + 1
        slots = [k for k, value in enumerate(here) if value <= limit]
        allowed = [members[k] for k in slots]
        first = starts[position]
        fed = [first + k for k in slots]
        nodes = [member_base + member for member in allowed]
        claimed = claims[position].tolist()
        topic_node = 1 + position
        size = sizes[position]
        count = len(slots)
        tails += [topic_node] * (2 * count)
        heads += nodes
        heads += nodes
        capacities += [claimed[k] for k in slots]
        capacities += [size] * count
        costs += [0] * count
        costs += [new_arc_cost] * count
        edges += fed
        edges += fed
        if locality is None:
            continue
        by_rack: dict[int, list[int]] = {}
        for at, member in enumerate(allowed):
            rack = member_racks[member]
            if rack >= 0:
                by_rack.setdefault(rack, []).append(at)
        row = local_rows[position]
        for rack in sorted(by_rack):
            local_count = row[rack]
            if local_count == 0:
                continue
            rack_node = rack_base + position * num_racks + rack
            chosen = by_rack[rack]
            tails.append(topic_node)
            heads.append(rack_node)
            capacities.append(local_count)
            costs.append(new_cost)
            edges.append(-1)
            tails += [rack_node] * len(chosen)
            heads += [nodes[at] for at in chosen]
            capacities += [size] * len(chosen)
            costs += [0] * len(chosen)
            edges += [fed[at] for at in chosen]
    if ends:
        num_members = len(load)
        sink = member_base + num_members
        tails += [0] * num_topics
        tails += range(member_base, sink)
        heads += range(1, member_base)
        heads += [sink] * num_members
        capacities += sizes
        capacities += load
        costs += [0] * (num_topics + num_members)
        edges += [-1] * (num_topics + num_members)
    return (
        np.asarray(tails, dtype=_INDEX),
        np.asarray(heads, dtype=_INDEX),
        np.asarray(capacities, dtype=_INDEX),
        np.asarray(costs, dtype=_INDEX),
        np.asarray(edges, dtype=_INDEX),
    )


def _allowed_edges(
    subscribers: list[np.ndarray], loads: np.ndarray, edge_offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edge, topic, member) of each subscription edge whose member is at most one above the
    topic's emptiest subscriber, topic after topic, subscribers in order."""
    num_topics = len(subscribers)
    sizes = np.diff(edge_offsets)
    members = np.concatenate(subscribers).astype(_INDEX)
    topic_of = np.repeat(np.arange(num_topics, dtype=_INDEX), sizes)
    member_loads = loads[members]
    starts = edge_offsets[:-1][sizes > 0]
    least = np.zeros(num_topics, dtype=_INDEX)
    least[topic_of[starts]] = np.minimum.reduceat(member_loads, starts)
    allowed = np.flatnonzero(member_loads <= least[topic_of] + 1)
    return allowed, topic_of[allowed], members[allowed]


def _rack_arcs(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    edge_offsets: np.ndarray,
    new_cost: int,
    locality: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tails, heads, capacities, costs, edges) of the subscription arcs of :func:`_fewest_moves`
    with racks, for all topics at once and in the order a loop over topics adds them: per topic
    with subscribers, one arc per allowed subscriber at cost 0 capped by its claims, one per
    allowed subscriber at ``new_cost + 1`` capped by the topic's size, then for each rack
    (ascending) of an allowed subscriber where the topic has local partitions, the arc into the
    (topic, rack) node at ``new_cost`` capped by those partitions, followed by that node's arcs
    to the rack's allowed subscribers at cost 0."""
    local_by_rack, member_rack = locality
    num_topics, num_racks = len(subscribers), local_by_rack.shape[1]
    rack_base = 2 + num_topics + loads.size
    claimed = np.concatenate(claims).astype(_INDEX)
    sizes = counts.astype(_INDEX)
    allowed, topic, member = _allowed_edges(subscribers, loads, edge_offsets)
    rack = member_rack[member]
    local = np.zeros(allowed.size, dtype=bool)
    known = rack >= 0
    local[known] = local_by_rack[topic[known], rack[known]] > 0
    local_topic, local_rack = topic[local], rack[local]
    # each topic's block: its claim arcs, its new arcs, then per rack (ascending) with local
    # allowed subscribers the arc into the (topic, rack) node followed by that node's arcs
    per_topic = np.bincount(topic, minlength=num_topics)
    per_pair = np.bincount(
        local_topic * num_racks + local_rack, minlength=num_topics * num_racks
    ).reshape(num_topics, num_racks)
    pair_arcs = per_pair + (per_pair > 0)
    block = 2 * per_topic + pair_arcs.sum(axis=1)
    block_start = np.cumsum(block) - block
    pair_start = (block_start + 2 * per_topic)[:, None] + np.cumsum(pair_arcs, axis=1) - pair_arcs
    # the k-th allowed edge of its topic; the k-th local one of its (topic, rack)
    kth = np.arange(allowed.size) - (np.cumsum(per_topic) - per_topic)[topic]
    kth_local = np.empty(local_topic.size, dtype=_INDEX)
    for column in np.unique(local_rack).tolist():
        here = np.flatnonzero(local_rack == column)
        kth_local[here] = _position_in_run(local_topic[here])
    pairs = np.flatnonzero(per_pair.ravel())
    pair_topic, pair_rack = pairs // num_racks, pairs % num_racks

    total = int(block.sum())
    tails = np.empty(total, dtype=_INDEX)
    heads = np.empty(total, dtype=_INDEX)
    capacities = np.empty(total, dtype=_INDEX)
    costs = np.empty(total, dtype=_INDEX)
    edges = np.empty(total, dtype=_INDEX)
    claim_at = block_start[topic] + kth
    for at, tail, head, capacity, cost, edge in (
        (claim_at, 1 + topic, 1 + num_topics + member, claimed[allowed], 0, allowed),
        (
            claim_at + per_topic[topic],
            1 + topic,
            1 + num_topics + member,
            sizes[topic],
            new_cost + 1,
            allowed,
        ),
        (
            pair_start[pair_topic, pair_rack],
            1 + pair_topic,
            rack_base + pairs,
            local_by_rack[pair_topic, pair_rack],
            new_cost,
            -1,
        ),
        (
            pair_start[local_topic, local_rack] + 1 + kth_local,
            rack_base + local_topic * num_racks + local_rack,
            1 + num_topics + member[local],
            sizes[local_topic],
            0,
            allowed[local],
        ),
    ):
        tails[at], heads[at], capacities[at], costs[at], edges[at] = (
            tail,
            head,
            capacity,
            cost,
            edge,
        )
    return tails, heads, capacities, costs, edges


def _rack_arcs_by_topic(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    edge_offsets: np.ndarray,
    new_cost: int,
    locality: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_rack_arcs` built one topic at a time: for millions of edges, a few small arrays
    per topic cost less than the all-topics arrays (the same arcs in the same order)."""
    pieces = _rack_arc_pieces(subscribers, claims, counts, loads, edge_offsets, new_cost, locality)
    tails, heads, capacities, costs, edges = (np.concatenate(parts) for parts in pieces)
    return tails, heads, capacities, costs, edges


def _rack_arc_pieces(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    edge_offsets: np.ndarray,
    new_cost: int,
    locality: tuple[np.ndarray, np.ndarray],
) -> list[list[np.ndarray]]:
    """The arcs of :func:`_rack_arcs_by_topic` as (tails, heads, capacities, costs, edges),
    each a list of per-topic pieces."""
    local_by_rack, member_rack = locality
    num_topics, num_racks = len(subscribers), local_by_rack.shape[1]
    rack_base = 2 + num_topics + loads.size
    parts: list[tuple[np.ndarray, ...]] = []

    def add(tail: int, head: np.ndarray, capacity: object, cost: int, edge: object) -> None:
        size = head.size
        parts.append(
            (
                np.full(size, tail, dtype=_INDEX),
                head.astype(_INDEX),
                np.asarray(capacity, dtype=_INDEX)
                if isinstance(capacity, np.ndarray)
                else np.full(size, capacity, dtype=_INDEX),
                np.full(size, cost, dtype=_INDEX),
                np.asarray(edge, dtype=_INDEX)
                if isinstance(edge, np.ndarray)
                else np.full(size, edge, dtype=_INDEX),
            )
        )

    for position, members in enumerate(subscribers):
        if members.size == 0:
            continue
        slots = np.flatnonzero(loads[members] <= int(loads[members].min()) + 1)
        allowed = members[slots]
        size = int(counts[position])
        edge = edge_offsets[position] + slots
        add(1 + position, 1 + num_topics + allowed, claims[position][slots], 0, edge)
        add(1 + position, 1 + num_topics + allowed, size, new_cost + 1, edge)
        racks_here = member_rack[allowed]
        for rack in np.unique(racks_here[racks_here >= 0]).tolist():
            local_count = int(local_by_rack[position, rack])
            if local_count == 0:
                continue
            rack_node = rack_base + position * num_racks + rack
            add(1 + position, np.asarray([rack_node]), local_count, new_cost, -1)
            chosen = racks_here == rack
            add(rack_node, 1 + num_topics + allowed[chosen], size, 0, edge[chosen])
    return [list(column) for column in zip(*parts, strict=True)]


def _search_loads(
    subscribers: list[np.ndarray],
    claims: list[np.ndarray],
    counts: np.ndarray,
    loads: np.ndarray,
    holdings: list[np.ndarray],
    window: tuple[int, int],
) -> list[np.ndarray]:
    """Steepest descent over member loads: shift one partition of load from a member that took
    partitions it did not claim to any other member, while that lets the flow keep more claims
    and every load stays within ``window`` (the optimal min and max load). Stops after
    ``LOAD_SEARCH_TRIALS`` trials (a count, so the answer never depends on speed).

    A trial's answer is the number of claims :func:`_fewest_moves` loses at its loads. Most
    trials need no flow: one sweep's trials are screened together (:meth:`_LoadTrials.bounds`)
    and only those that might lose fewer claims than the best so far get one (its cost alone);
    the winner of a sweep is then solved again by :func:`_fewest_moves` itself. Before any of
    that, a sweep whose trials cannot keep more claims even by the members' own counts (each
    keeps at most ``min(load, claims)``) ends the search without building the trials."""
    low, high = window
    member = np.concatenate(subscribers).astype(_INDEX, copy=False)
    claimed = np.concatenate(claims)
    claimed_by_member = np.bincount(member, claimed, minlength=loads.size).astype(_INDEX)
    total_claims = int(claimed.sum())
    # the claims kept now: what each edge holds of its claims (the rest are lost)
    kept_claims = np.minimum(claimed, np.concatenate(holdings))
    best_moves = total_claims - int(kept_claims.sum())
    active: np.ndarray | None = None
    trials: _LoadTrials | None = None
    spent = 0
    while best_moves > 0 and spent < LOAD_SEARCH_TRIALS:
        # a member keeps at most min(load, all its claims), and one trial moves one unit of
        # load, so it keeps at most one more than their sum: when even that is no more claims
        # than the best so far, no trial can win (the screens below only tighten this)
        keepable = np.minimum(loads, claimed_by_member)
        most_kept = int(keepable.sum())
        if total_claims - (most_kept + 1) >= best_moves:
            break
        kept = np.bincount(member, kept_claims, minlength=loads.size)
        givers = np.flatnonzero((loads > kept) & (loads > low))
        if active is None:
            active = np.flatnonzero(np.bincount(member, minlength=loads.size))
        takers = active[loads[active] < high]
        # every (giver, taker) pair, giver after giver, as many as the trial budget has left
        pair_givers = np.repeat(givers, takers.size)
        pair_takers = np.tile(takers, givers.size)
        distinct = pair_givers != pair_takers
        budget = LOAD_SEARCH_TRIALS - spent
        pair_givers, pair_takers = pair_givers[distinct][:budget], pair_takers[distinct][:budget]
        spent += pair_givers.size
        # the same count per trial: a trial keeping no more claims than the best so far by
        # that count alone cannot win
        relaxed = (
            most_kept
            - (loads[pair_givers] <= claimed_by_member[pair_givers])
            + (loads[pair_takers] < claimed_by_member[pair_takers])
        )
        promising = total_claims - relaxed < best_moves
        pair_givers, pair_takers = pair_givers[promising], pair_takers[promising]
        if pair_givers.size == 0:
            break
        if trials is None:
            trials = _LoadTrials.of(subscribers, claims, counts)
        tried = np.repeat(loads[None, :], pair_givers.size, axis=0)
        rows = np.arange(pair_givers.size)
        tried[rows, pair_givers] -= 1
        tried[rows, pair_takers] += 1
        bounds, allowed = trials.bounds(tried)
        improved = None
        for row in np.flatnonzero(bounds < best_moves).tolist():
            if bounds[row] >= best_moves:
                continue
            moves = trials.fewest_moves(tried[row], allowed[row])
            if moves is not None and moves < best_moves:
                best_moves, improved = moves, tried[row]
        if improved is None:
            break
        found = _fewest_moves(subscribers, claims, counts, improved)
        assert found is not None
        loads[:], holdings = improved, found
        kept_claims = np.minimum(claimed, np.concatenate(holdings))
    return holdings


@dataclass(frozen=True, slots=True)
class _MemberEdges:
    """The edges of :class:`_LoadTrials` grouped by member: ``by_member`` (edges in member
    order), ``member_starts`` (each member's first place there), ``edge_members`` (the members
    with edges, in order), ``member_position`` (each edge's member as a place in
    ``edge_members``) and ``member_columns``: the claims and the topic's partitions of each edge
    in ``by_member`` order (edges x 2 x 1, to sum both at once)."""

    by_member: np.ndarray
    member_starts: np.ndarray
    edge_members: np.ndarray
    member_position: np.ndarray
    member_columns: np.ndarray

    @classmethod
    def of(cls, member: np.ndarray, claimed: np.ndarray, size: np.ndarray) -> _MemberEdges:
        by_member = np.argsort(member, kind="stable")
        sorted_members = member[by_member]
        first = np.ones(member.size, dtype=bool)
        first[1:] = sorted_members[1:] != sorted_members[:-1]
        edge_members = sorted_members[first]
        return cls(
            by_member=by_member,
            member_starts=np.flatnonzero(first),
            edge_members=edge_members,
            member_position=np.searchsorted(edge_members, member),
            member_columns=np.stack((claimed[by_member], size[by_member]), axis=1)[:, :, None],
        )


@dataclass(frozen=True, slots=True)
class _LoadTrials:
    """The network of :func:`_fewest_moves` (without racks) as flat arrays over subscription
    edges (topic after topic, each topic's subscribers in order), for trying many load vectors:
    ``member``/``topic``/``claimed``/``size`` per edge; ``starts``: first edge of each topic
    that has subscribers (``edge_group`` maps an edge to that topic's place among them,
    ``needed``: those topics' partitions); ``total``: all the partitions, ``total_claims``: all
    the claims; the edges grouped by member (:class:`_MemberEdges`) are made on first use, as
    most searches end on the topics' room alone."""

    member: np.ndarray
    topic: np.ndarray
    claimed: np.ndarray
    size: np.ndarray
    counts: np.ndarray
    starts: np.ndarray
    edge_group: np.ndarray
    needed: np.ndarray
    total: int
    total_claims: int
    unreachable: bool
    networks: dict[int, min_cost_flow.SimpleMinCostFlow] = field(
        default_factory=dict, compare=False
    )
    _member_edges: _MemberEdges | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls, subscribers: list[np.ndarray], claims: list[np.ndarray], counts: np.ndarray
    ) -> _LoadTrials:
        """The trials of ``subscribers``' edges with ``claims`` on them."""
        counts = counts.astype(_INDEX)
        sizes = np.asarray([members.size for members in subscribers], dtype=_INDEX)
        topic = np.repeat(np.arange(sizes.size, dtype=_INDEX), sizes)
        member = np.concatenate(subscribers).astype(_INDEX)
        claimed = np.concatenate(claims).astype(_INDEX)
        size = counts[topic]
        served = sizes > 0
        return cls(
            member=member,
            topic=topic,
            claimed=claimed,
            size=size,
            counts=counts,
            starts=(np.cumsum(sizes) - sizes)[served],
            edge_group=np.repeat(np.arange(int(served.sum()), dtype=_INDEX), sizes[served]),
            needed=counts[served],
            total=int(counts.sum()),
            total_claims=int(claimed.sum()),
            unreachable=bool((counts[~served] > 0).any()),
        )

    def bounds(self, tried: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row of ``tried`` (a load vector): a lower bound on the claims
        :func:`_fewest_moves` loses at those loads (``LOAD_SEARCH_INFEASIBLE`` where it finds no
        assignment for sure), and which edges it allows (True where the member is at most one
        above the topic's emptiest subscriber).

        Exact screens, each a necessary condition: a topic needs room for all its partitions
        on its allowed subscribers; when the loads add up to the partitions (so every member
        takes exactly its load), a member needs that many partitions on its allowed topics and
        a member without edges no load; a member keeps at most ``min(load, its claims on
        allowed topics)``; a topic's allowed subscribers, who take all of its partitions, keep
        at most their claims on it plus their load beyond its size; and with exact loads, a
        member takes from a topic at least its load beyond the partitions of its other allowed
        topics, so a topic's members keep at most the claims those shares cover plus one per
        partition left over, while claims remain uncovered.

        The room comes first: rows without it for some topic (most of them, in a replay) are
        infeasible and the other screens run on the remaining rows only."""
        # edges (or members, topics) along the first axis, trials along the last
        loads = tried.T
        edge_loads = loads[self.member]
        least = np.minimum.reduceat(edge_loads, self.starts)
        allowed = edge_loads <= (least + 1)[self.edge_group]
        room = np.add.reduceat(edge_loads * allowed, self.starts)
        lost = np.full(tried.shape[0], LOAD_SEARCH_INFEASIBLE, dtype=_INDEX)
        rows = np.flatnonzero((room >= self.needed[:, None]).all(axis=0))
        if rows.size == 0 or self.unreachable:
            return lost, allowed.T
        if rows.size < tried.shape[0]:
            lost[rows] = self._lost(
                loads[:, rows], edge_loads[:, rows], allowed[:, rows], room[:, rows]
            )
        else:
            lost[:] = self._lost(loads, edge_loads, allowed, room)
        return lost, allowed.T

    def _lost(
        self, loads: np.ndarray, edge_loads: np.ndarray, allowed: np.ndarray, room: np.ndarray
    ) -> np.ndarray:
        """The bounds of :meth:`bounds` for trials (columns of ``loads``) with room for every
        topic: their ``edge_loads``, ``allowed`` edges and ``room`` per topic."""
        grouped = self.member_edges()
        # per member with edges: its claims, and the partitions, on its allowed topics
        by_member = np.add.reduceat(
            np.where(allowed[grouped.by_member, None, :], grouped.member_columns, 0),
            grouped.member_starts,
        )
        keepable, takeable = by_member[:, 0], by_member[:, 1]
        loads_here = loads[grouped.edge_members]
        member_keep = np.minimum(loads_here, keepable)
        kept = member_keep.sum(axis=0)
        forced = np.maximum(edge_loads - takeable[grouped.member_position] + self.size[:, None], 0)
        # per topic, on its allowed edges: the claims, what the members keep at most, what they
        # must take with exact loads, the claims that covers, and the claims beyond it; written
        # into one array (edges x 5 x trials) zero where not allowed, and summed in one pass
        on_topic = np.empty((edge_loads.shape[0], 5, edge_loads.shape[1]), dtype=kept.dtype)
        np.multiply(self.claimed[:, None], allowed, out=on_topic[:, 0])
        np.multiply(member_keep[grouped.member_position], allowed, out=on_topic[:, 1])
        np.multiply(forced, allowed, out=on_topic[:, 2])
        np.minimum(on_topic[:, 2], on_topic[:, 0], out=on_topic[:, 3])
        np.subtract(on_topic[:, 0], on_topic[:, 3], out=on_topic[:, 4])
        per_topic = np.add.reduceat(on_topic, self.starts)
        claims_here, keep_here, must, covered, open_claims = per_topic.transpose(1, 0, 2)
        needed = self.needed[:, None]
        exact = loads.sum(axis=0) == self.total
        feasible = ~exact | (
            (loads_here <= takeable).all(axis=0)
            & (loads_here.sum(axis=0) == self.total)
            & (must <= needed).all(axis=0)
        )
        # a topic's allowed subscribers take all of its partitions, of which only their claims
        # on it are kept, so they keep at most those plus their load beyond the topic's size
        beyond = claims_here + room - needed
        kept = np.minimum(kept, (kept - keep_here + np.minimum(keep_here, beyond)).min(axis=0))
        # exact loads: at most the claims the forced shares cover, plus the partitions left
        by_topics = (covered + np.minimum(needed - must, open_claims)).sum(axis=0)
        kept = np.where(exact, np.minimum(kept, by_topics), kept)
        return np.where(feasible, self.total_claims - kept, LOAD_SEARCH_INFEASIBLE)

    def member_edges(self) -> _MemberEdges:
        """The edges grouped by member, made on first use."""
        if self._member_edges is None:
            made = _MemberEdges.of(self.member, self.claimed, self.size)
            object.__setattr__(self, "_member_edges", made)
            return made
        return self._member_edges

    def fewest_moves(self, loads: np.ndarray, allowed: np.ndarray) -> int | None:
        """The claims :func:`_fewest_moves` loses at ``loads`` (``allowed``: its edges), from
        the cost of the same flow (a disallowed arc has capacity 0 instead of being absent);
        None when no assignment has these loads. Every unit crossing a cost-1 arc is a unit
        the claims did not cover, so claims kept = partitions - cost.

        Only the capacities change from one trial to the next, so the network is built once
        (per member count) and each trial sets its capacities and solves it again: the
        optimal cost is the same whichever optimal flow a solve finds."""
        num_members = loads.size
        flow = self.networks.get(num_members)
        if flow is None:
            flow = self.networks[num_members] = self.network(num_members)
        capacities = np.concatenate(
            (
                self.counts,
                np.where(allowed, self.claimed, 0),
                np.where(allowed, self.size, 0),
                loads.astype(_INDEX),
            )
        )
        flow.set_arc_capacities(np.arange(capacities.size, dtype=_INDEX), capacities)
        if flow.solve() != flow.OPTIMAL:
            return None
        return self.total_claims - (self.total - int(flow.optimal_cost()))

    def network(self, num_members: int) -> min_cost_flow.SimpleMinCostFlow:
        """The network of :meth:`fewest_moves` for ``num_members`` members, with its costs and
        supplies (source 0, then topics, members and the sink); capacities are set per trial."""
        num_topics = self.counts.size
        sink = 1 + num_topics + num_members
        topic_nodes = 1 + np.arange(num_topics, dtype=_INDEX)
        member_nodes = 1 + num_topics + self.member
        tails = np.concatenate(
            (
                np.zeros(num_topics, dtype=_INDEX),
                1 + self.topic,
                1 + self.topic,
                1 + num_topics + np.arange(num_members, dtype=_INDEX),
            )
        )
        heads = np.concatenate(
            (topic_nodes, member_nodes, member_nodes, np.full(num_members, sink, dtype=_INDEX))
        )
        num_edges = self.member.size
        costs = np.zeros(tails.size, dtype=_INDEX)
        costs[num_topics + num_edges : num_topics + 2 * num_edges] = 1
        flow = min_cost_flow.SimpleMinCostFlow()
        flow.add_arcs_with_capacity_and_unit_cost(
            tails, heads, np.zeros(tails.size, dtype=_INDEX), costs
        )
        supplies = np.zeros(sink + 1, dtype=_INDEX)
        supplies[0], supplies[sink] = self.total, -self.total
        flow.set_nodes_supplies(np.arange(sink + 1, dtype=_INDEX), supplies)
        return flow


def _deal_local_lists(
    pool: np.ndarray, deficits: np.ndarray, rank: np.ndarray, racks: _RackMap, owner: np.ndarray
) -> np.ndarray:
    """:func:`_deal_local` on Python lists, for pools of a few hundred partitions and at most
    ``_RACK_CODE_BITS`` racks (``racks.codes`` known): the same flow on the same arcs, the
    same interleaving of each class's shares (the same float spots) and the same dealing."""
    num_racks = racks.local.shape[1]
    if pool.size == 0 or num_racks == 0:
        return pool
    member_rack = racks.member_rack.tolist()
    wanted_by = deficits.tolist()
    takers = [i for i, short in enumerate(wanted_by) if short > 0 and member_rack[i] >= 0]
    if not takers:
        return pool
    demand = [0] * num_racks
    for member in takers:
        demand[member_rack[member]] += wanted_by[member]
    assert racks.codes is not None
    codes = racks.codes[pool].tolist()
    # each class's positions in the pool, classes ascending by code
    positions_of: dict[int, list[int]] = {}
    for position, code in enumerate(codes):
        positions_of.setdefault(code, []).append(position)
    class_codes = sorted(positions_of)
    members_of_class = [positions_of[code] for code in class_codes]
    class_sizes = [len(members) for members in members_of_class]
    useful = [c for c, code in enumerate(class_codes) if code]
    if not useful:
        return pool

    # the arcs of :func:`_deal_local`: source -> each useful class, each useful class -> each
    # of its racks (racks ascending), each rack -> sink
    rack_node = 2 + len(class_codes)
    arc_class: list[int] = []
    arc_rack: list[int] = []
    for c in useful:
        code = class_codes[c]
        for rack in range(num_racks):
            if code >> (num_racks - 1 - rack) & 1:
                arc_class.append(c)
                arc_rack.append(rack)
    flow = max_flow.SimpleMaxFlow()
    rack_nodes = [rack_node + rack for rack in range(num_racks)]
    tails = [0] * len(useful) + [2 + c for c in arc_class] + rack_nodes
    heads = [2 + c for c in useful] + [rack_node + rack for rack in arc_rack] + [1] * num_racks
    capacities = [class_sizes[c] for c in useful] + [class_sizes[c] for c in arc_class] + demand
    arcs = flow.add_arcs_with_capacity(
        np.asarray(tails, dtype=_INDEX),
        np.asarray(heads, dtype=_INDEX),
        np.asarray(capacities, dtype=_INDEX),
    )
    if flow.solve(0, 1) != flow.OPTIMAL:
        return pool
    shares = flow.flows(arcs)[len(useful) : len(useful) + len(arc_class)].tolist()
    given = [k for k, units in enumerate(shares) if units > 0]
    if not given:
        return pool.copy()
    # unit j of a share of u units sits at (j + 0.5) / u; a class's units are taken in that
    # order (ties: share order), the i-th of them getting the class's i-th partition
    units_by_class = sorted(
        (arc_class[k], (j + 0.5) / shares[k], share, arc_rack[k])
        for share, k in enumerate(given)
        for j in range(shares[k])
    )
    taken_so_far = [0] * len(class_codes)
    chosen_by_rack: list[list[int]] = [[] for _ in range(num_racks)]
    for c, _, _, rack in units_by_class:
        chosen_by_rack[rack].append(members_of_class[c][taken_so_far[c]])
        taken_so_far[c] += 1
    # per rack, its partitions in pool order dealt round-robin to its short members by rank:
    # round r gives one to each member still short after r, until the rack's share runs out
    ranks = rank.tolist()
    takers_by_rack: list[list[int]] = [[] for _ in range(num_racks)]
    for member in sorted(takers, key=ranks.__getitem__):
        takers_by_rack[member_rack[member]].append(member)
    given_to: list[int] = []
    positions: list[int] = []
    for rack in range(num_racks):
        chosen = sorted(chosen_by_rack[rack])
        positions += chosen
        receivers: list[int] = []
        still_short = takers_by_rack[rack]
        round_number = 0
        while still_short and len(receivers) < len(chosen):
            receivers += still_short[: len(chosen) - len(receivers)]
            round_number += 1
            still_short = [member for member in still_short if wanted_by[member] > round_number]
        given_to += receivers
    chosen_positions = np.asarray(positions, dtype=_INDEX)
    receivers_array = np.asarray(given_to, dtype=_INDEX)
    owner[pool[chosen_positions]] = receivers_array
    deficits -= np.bincount(receivers_array, minlength=deficits.size)
    taken = np.zeros(pool.size, dtype=bool)
    taken[chosen_positions] = True
    return pool[~taken]


# --------------------------------------------------------------------------- racks and realization


@dataclass(frozen=True, slots=True)
class _RackMap:
    """``local[p, r]``: partition ``p`` has a replica on consumer rack ``r``;
    ``member_rack[i]``: member ``i``'s rack column (-1: unknown). ``codes[p]``: row ``p`` of
    ``local`` as one integer, rack 0 the most significant bit, so codes sort as rows do (None
    beyond ``_RACK_CODE_BITS`` racks). ``topic_local[t, r]``: topic ``t``'s partitions with a
    replica on rack ``r`` (made by :meth:`build`, for the space it was built on)."""

    local: np.ndarray
    member_rack: np.ndarray
    topic_local: np.ndarray | None = None
    codes: np.ndarray | None = field(init=False)

    def __post_init__(self) -> None:
        num_racks = self.local.shape[1]
        codes = None
        if num_racks <= _RACK_CODE_BITS:
            shifts = np.arange(num_racks - 1, -1, -1, dtype=_INDEX)
            codes = (self.local.astype(_INDEX) << shifts).sum(axis=1)
        object.__setattr__(self, "codes", codes)

    def classes(self, partitions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(distinct rows of ``local`` among ``partitions``, sorted as rows, False first; the
        class of each partition): what ``np.unique(local[partitions], axis=0)`` gives, from
        the integer codes when there are at most ``_RACK_CODE_BITS`` racks."""
        if self.codes is None:
            classes, class_of = np.unique(self.local[partitions], axis=0, return_inverse=True)
            return classes, class_of.reshape(-1)
        class_codes, class_of = np.unique(self.codes[partitions], return_inverse=True)
        num_racks = self.local.shape[1]
        shifts = np.arange(num_racks - 1, -1, -1, dtype=_INDEX)
        return (class_codes[:, None] >> shifts) & 1 > 0, class_of.reshape(-1)

    @classmethod
    def build(
        cls, group: Group, space: PartitionSpace, subscriptions: Sequence[tuple[int, ...]]
    ) -> _RackMap | None:
        """The map, or None when racks favour no partition over another for any member (each
        member's rack holds a replica of all of its subscribed partitions, or of none): then
        racks must change nothing, so each topic is spread as it is without them. One row per
        distinct set of replica racks, looked up per partition."""
        racks = group.racks()
        rack_names = sorted({rack for rack in racks if rack is not None})
        column = {name: c for c, name in enumerate(rack_names)}
        table = _rack_table(tuple(map(group.topic, space.topic_names)), rack_names, space)
        member_racks = [column[rack] if rack is not None else -1 for rack in racks]
        if _indifferent(table, member_racks, subscriptions):
            return None
        made = cls.__new__(cls)
        for name, value in (
            ("local", table.local),
            ("member_rack", np.asarray(member_racks, dtype=_INDEX)),
            ("topic_local", table.topic_local),
            ("codes", table.codes),
        ):
            object.__setattr__(made, name, value)
        return made

    def is_local(self, partitions: np.ndarray, members: np.ndarray) -> np.ndarray:
        rack_of = self.member_rack[members]
        known = rack_of >= 0
        result = np.zeros(partitions.size, dtype=bool)
        result[known] = self.local[partitions[known], rack_of[known]]
        return result


@dataclass(frozen=True, slots=True)
class _RackTable:
    """What a :class:`_RackMap` takes from the topics and the consumer rack names alone:
    ``local``, ``codes`` and ``topic_local`` of the map, and per rack column the topics
    (positions) whose partitions all have a replica there (``everywhere``) or none do
    (``nowhere``; a topic without partitions is in both)."""

    local: np.ndarray
    codes: np.ndarray | None
    topic_local: np.ndarray
    everywhere: tuple[frozenset[int], ...]
    nowhere: tuple[frozenset[int], ...]


RACK_TABLES = 4
"""How many rack tables are remembered: a replayed trace's racks come and go with its members
(a rack's last member leaves, then one comes back), so the consumer rack names alternate."""
# the rack tables made last (most recently used first), each with the topic objects and rack
# names it was made of: an eager replay's generations share their topics
_rack_tables: list[tuple[tuple[Topic | None, ...], list[str], _RackTable]] = []


def _rack_table(
    topics: tuple[Topic | None, ...], rack_names: list[str], space: PartitionSpace
) -> _RackTable:
    """The :class:`_RackTable` of ``topics`` (the group's topic of each of ``space``'s names)
    and consumer racks ``rack_names``. Remembers the last ``RACK_TABLES``: topics are immutable
    and their objects are held, so the same objects (``is``) and rack names give the same
    table."""
    for entry in _rack_tables:
        held, names, remembered = entry
        if (
            names == rack_names
            and len(held) == len(topics)
            and all(mine is topic for mine, topic in zip(held, topics, strict=True))
        ):
            # replaced whole, never changed in place: threads sharing it read whole lists
            _rack_tables[:] = [entry, *(other for other in _rack_tables if other is not entry)]
            return remembered
    row_of: dict[frozenset[str], int] = {frozenset(): 0}
    rows: list[list[bool]] = [[False] * len(rack_names)]
    parts = []
    for topic, count in zip(topics, space.partition_counts, strict=True):
        if topic is None or topic.replica_racks is None:
            parts.append(np.zeros(count, dtype=_INDEX))
            continue
        for replica_racks in set(topic.replica_racks) - row_of.keys():
            row_of[replica_racks] = len(rows)
            rows.append([rack in replica_racks for rack in rack_names])
        parts.append(np.fromiter(map(row_of.__getitem__, topic.replica_racks), _INDEX, count))
    table = np.asarray(rows, dtype=bool).reshape(len(rows), len(rack_names))
    row = np.concatenate(parts) if parts else np.zeros(0, dtype=_INDEX)
    local = table[row]
    num_racks = len(rack_names)
    codes = None
    if num_racks <= _RACK_CODE_BITS:
        shifts = np.arange(num_racks - 1, -1, -1, dtype=_INDEX)
        codes = (local.astype(_INDEX) << shifts).sum(axis=1)
    starts = np.asarray(space.offsets, dtype=_INDEX)
    counts = np.asarray(space.partition_counts, dtype=_INDEX)
    running = np.zeros((local.shape[0] + 1, num_racks), dtype=_INDEX)
    np.cumsum(local, axis=0, out=running[1:])
    topic_local = running[starts + counts] - running[starts]  # topic x rack
    for array in (local, codes, topic_local):
        if array is not None:
            array.flags.writeable = False  # shared by every map made from this table
    made = _RackTable(
        local,
        codes,
        topic_local,
        everywhere=_topics_by_rack(topic_local == counts[:, None]),
        nowhere=_topics_by_rack(topic_local == 0),
    )
    _rack_tables[:] = [(topics, list(rack_names), made), *_rack_tables][:RACK_TABLES]
    return made


def _topics_by_rack(marked: np.ndarray) -> tuple[frozenset[int], ...]:
    """Per column of ``marked`` (topics x racks), the topics marked in it."""
    return tuple(frozenset(np.flatnonzero(column).tolist()) for column in marked.T)


def _indifferent(
    table: _RackTable, member_racks: list[int], subscriptions: Sequence[tuple[int, ...]]
) -> bool:
    """True when every member with a rack (``member_racks``: each member's rack column, -1
    none) finds all of its subscribed partitions equally close: its rack holds a replica of
    each of them, or of none. O(E) set lookups."""
    everywhere, nowhere = table.everywhere, table.nowhere
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for rack, subscription in zip(member_racks, subscriptions, strict=True):
        if rack < 0 or not subscription or (rack, subscription) in seen:
            continue
        seen.add((rack, subscription))
        if not (
            everywhere[rack].issuperset(subscription) or nowhere[rack].issuperset(subscription)
        ):
            return False
    return True


@dataclass(frozen=True, slots=True)
class _State:
    """What realization reads (valid claimant, topic and tie-break rank per member or partition,
    racks) and the owner array it fills in."""

    claimant: np.ndarray
    topic_of: np.ndarray
    rank: np.ndarray
    racks: _RackMap | None
    owner: np.ndarray


def _position_in_run(keys: np.ndarray) -> np.ndarray:
    """Each element's position within its run of equal keys (``keys`` need only keep equal
    values together, as ``np.repeat`` of distinct values in any order does, not be sorted)."""
    if keys.size == 0:
        return keys.copy()
    starts = np.ones(keys.size, dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    run_start = np.maximum.accumulate(np.where(starts, np.arange(keys.size), 0))
    return np.arange(keys.size) - run_start


def _realize(state: _State, targets: np.ndarray, claim_counts: np.ndarray) -> None:
    """Give each member ``targets[i]`` of all partitions (none of them given yet;
    ``claim_counts``: each member's valid claims): first its own claims (rack-local ones first,
    spread over topics), then the rest dealt round-robin, same-rack first."""
    claimant, owner = state.claimant, state.owner
    if (claim_counts <= targets).all():
        # every member keeps all its claims, so which of them come first does not matter
        owner[:] = claimant
        pool = (claimant == _NOBODY).nonzero()[0]
        deficits = targets - claim_counts
    else:
        _keep_first_claims(state, targets, claim_counts)
        pool = (owner == _NOBODY).nonzero()[0]
        deficits = targets - np.minimum(claim_counts, targets)
    _deal_with_racks(pool, deficits, state.rank, state.racks, owner)


def _keep_first_claims(state: _State, targets: np.ndarray, claim_counts: np.ndarray) -> None:
    """Give each member the first ``targets[i]`` of its claims (``claim_counts[i]`` of them):
    rack-local ones first, then its k-th claim of a topic before its (k+1)-th of any topic,
    then in partition order."""
    claimant, topic_of, racks = state.claimant, state.topic_of, state.racks
    claimed = (claimant >= 0).nonzero()[0]
    holders = claimant[claimed]
    # claimed is in partition order, so in topic order: a stable sort by holder sorts by
    # (holder, topic, partition), and a claim's rank within its (holder, topic) run is its k
    # (its distance from the run's first element, found by binary search in the sorted runs)
    order = holders.argsort(kind="stable")
    claimed, holders = claimed[order], holders[order]
    runs = holders * (int(topic_of[-1]) + 1) + topic_of[claimed]
    within_topic = np.arange(runs.size) - runs.searchsorted(runs)
    # one key (holder, remote, k), stably sorted: equal keys stay in partition order
    key = holders * 2
    if racks is not None:
        key += ~racks.is_local(claimed, holders)
    key = key * (int(within_topic.max()) + 1) + within_topic
    order = key.argsort(kind="stable")
    claimed, holders = claimed[order], holders[order]
    # holders are sorted: each one's claims start after those of the members before it
    starts = claim_counts.cumsum() - claim_counts
    keep = np.arange(holders.size) - starts[holders] < targets[holders]
    state.owner[claimed[keep]] = holders[keep]


def _deal_with_racks(
    pool: np.ndarray,
    deficits: np.ndarray,
    rank: np.ndarray,
    racks: _RackMap | None,
    owner: np.ndarray,
) -> None:
    """Deal ``pool`` to members short of their target: rack-local first (:func:`_deal_local`),
    then round-robin (:func:`_deal`). When one member alone is short, by at least the pool,
    both give it the whole pool, which is done at once."""
    needy = (deficits > 0).nonzero()[0]
    if needy.size == 1 and pool.size <= deficits[needy[0]]:
        owner[pool] = needy[0]
        deficits[needy[0]] -= pool.size
        return
    if racks is not None:
        small = pool.size <= 4 * _SMALL and racks.codes is not None
        pool = (_deal_local_lists if small else _deal_local)(pool, deficits, rank, racks, owner)
    _deal(pool, deficits, rank, owner)


def _deal(pool: np.ndarray, deficits: np.ndarray, rank: np.ndarray, owner: np.ndarray) -> None:
    """Deal ``pool`` (in order) round-robin to members with a deficit, members in rank order."""
    needy = (deficits > 0).nonzero()[0]
    if needy.size == 0 or pool.size == 0:
        return
    needy = needy[rank[needy].argsort(kind="stable")]
    wanted = deficits[needy]
    rounds = int(wanted.max())
    if rounds * needy.size <= 4 * (pool.size + needy.size):
        # round r is every needy member still short after r partitions, in rank order
        sequence = needy[(wanted > np.arange(rounds)[:, None]).nonzero()[1]]
    else:  # few members short of many: the same sequence without a rounds x members table
        takers = np.repeat(needy, wanted)
        sequence = takers[
            np.lexsort((np.repeat(np.arange(needy.size), wanted), _position_in_run(takers)))
        ]
    dealt = min(sequence.size, pool.size)
    owner[pool[:dealt]] = sequence[:dealt]
    deficits -= np.bincount(sequence[:dealt], minlength=deficits.size)


def _deal_local(
    pool: np.ndarray, deficits: np.ndarray, rank: np.ndarray, racks: _RackMap, owner: np.ndarray
) -> np.ndarray:
    """Deal as many rack-local partitions as possible to members short of their target: a max
    flow from classes of partitions (same set of replica racks) to consumer racks (capped by
    the shortfall of the rack's members) says how many of each class each rack takes; each
    class's partitions (in pool order) go to its racks interleaved in proportion to their
    shares (so no rack gets a whole topic another rack could as well have shared), and each
    rack's partitions are dealt round-robin to its members short of their target (rank order).
    Returns what is left of the pool. O(pool · racks) plus a flow on at most 2^racks x racks
    arcs."""
    if pool.size == 0 or racks.local.shape[1] == 0:
        return pool
    num_racks = racks.local.shape[1]
    member_rack = racks.member_rack
    needy = (deficits > 0) & (member_rack >= 0)
    if not needy.any():
        return pool
    demand = np.bincount(member_rack[needy], deficits[needy], minlength=num_racks).astype(_INDEX)
    classes, class_of = racks.classes(pool)
    class_sizes = np.bincount(class_of, minlength=len(classes))
    useful = np.flatnonzero(classes.any(axis=1))
    if useful.size == 0:
        return pool

    # nodes: 0 source, 1 sink, 2.. classes, then racks; arcs: source -> each useful class,
    # each useful class -> each of its racks (class after class, racks ascending), racks -> sink
    rack_node = 2 + len(classes)
    arc_class, arc_rack = np.nonzero(classes[useful])
    arc_class = useful[arc_class]
    flow = max_flow.SimpleMaxFlow()
    arcs = flow.add_arcs_with_capacity(
        np.concatenate(
            (np.zeros(useful.size, dtype=_INDEX), 2 + arc_class, rack_node + np.arange(num_racks))
        ),
        np.concatenate((2 + useful, rack_node + arc_rack, np.ones(num_racks, dtype=_INDEX))),
        np.concatenate((class_sizes[useful], class_sizes[arc_class], demand)),
    )
    if flow.solve(0, 1) != flow.OPTIMAL:
        return pool
    shares = flow.flows(arcs)[useful.size : useful.size + arc_class.size]
    given = shares > 0
    if not given.any():
        return pool[np.ones(pool.size, dtype=bool)]
    share_class, share_rack, share_units = arc_class[given], arc_rack[given], shares[given]
    # unit k of a share of u units sits at (k + 0.5) / u; a class's units are taken in that
    # order (ties: share order), the j-th of them getting the class's j-th partition
    unit_share = np.repeat(np.arange(share_units.size), share_units)
    spots = (_position_in_run(unit_share).astype(np.float64) + 0.5) / share_units[unit_share]
    unit_class = share_class[unit_share]
    order = np.lexsort((unit_share, spots, unit_class))
    unit_class, unit_rack = unit_class[order], share_rack[unit_share[order]]
    by_class = np.argsort(class_of, kind="stable")
    class_first = np.cumsum(class_sizes) - class_sizes
    chosen = by_class[class_first[unit_class] + _position_in_run(unit_class)]
    # per rack, its partitions in pool order dealt round-robin to its short members by rank
    order = np.lexsort((chosen, unit_rack))
    chosen, unit_rack = chosen[order], unit_rack[order]
    takers = np.flatnonzero(needy)
    wanted = deficits[takers]
    units = np.repeat(takers, wanted)
    unit_member_rack = member_rack[units]
    order = np.lexsort((rank[units], _position_in_run(units), unit_member_rack))
    units, unit_member_rack = units[order], unit_member_rack[order]
    per_rack = np.bincount(unit_rack, minlength=num_racks)
    dealt = _position_in_run(unit_member_rack) < per_rack[unit_member_rack]
    owner[pool[chosen]] = units[dealt]
    deficits -= np.bincount(units[dealt], minlength=deficits.size)
    taken = np.zeros(pool.size, dtype=bool)
    taken[chosen] = True
    return pool[~taken]
