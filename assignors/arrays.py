"""A group as numpy arrays over its partition indexes, shared by the array assignors.

Members' subscriptions as topic positions, each partition's topic, and each partition's valid
claimant: the member holding it in the highest generation among present, subscribed members
(two claims in that generation void it, as Kafka's sticky assignors do), and whether a present
member still lists it although it dropped the topic (it consumes it until it revokes it).

>>> from assignors.model import Group, Member, Topic, TopicPartition as TP
>>> sub = frozenset({"a"})
>>> arrays = GroupArrays.of(Group((Topic("a", 3),), (
...     Member("c0", sub, (TP("a", 0), TP("a", 1)), generation=2),
...     Member("c1", sub, (TP("a", 1),), generation=2))))
>>> arrays.claimant.tolist(), arrays.contested.tolist()
([0, -1, -1], [False, True, False])
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from assignors.model import (
    Assignment,
    Group,
    OwnedPartitions,
    PartitionSpace,
    Topic,
    TopicPartition,
    member_runs,
)

_INDEX = np.int64
NOBODY = -1
_SUBSCRIPTION_TABLE_CELLS = 1 << 22
"""Largest (distinct subscription x topic) table :func:`_subscribed` builds."""


@dataclass(frozen=True, slots=True)
class GroupArrays:
    """A group as numpy arrays over the partition indexes of :meth:`Group.partition_space`.

    ``subscriptions[i]``: topic positions member ``i`` subscribes to (known, non-empty topics);
    ``topic_of[p]``: topic position of partition ``p``; ``claimant[p]``: the member whose claim
    on ``p`` is valid (present, subscribed, highest generation; -1 none); ``contested[p]``: two
    claims in that highest generation (neither counts); ``unsubscribed_owner[p]``: some present
    member lists ``p`` as owned although it no longer subscribes to its topic (its claim is
    never honoured, but it holds ``p`` until it revokes it); ``objects[p]``: the member's own
    TopicPartition when claimed and every member listed objects, not
    :class:`~assignors.model.OwnedPartitions` (others are made on output); ``rank[i]``:
    tie-break order (static instance id, else member id). Claims are read and resolved by
    :func:`owned_claims` and :func:`resolve_claims`, which the uniform assignor shares.
    """

    space: PartitionSpace
    member_ids: tuple[str, ...]
    subscriptions: tuple[tuple[int, ...], ...]
    topic_of: np.ndarray
    claimant: np.ndarray
    contested: np.ndarray
    unsubscribed_owner: np.ndarray
    objects: np.ndarray
    rank: np.ndarray

    @classmethod
    def of(cls, group: Group) -> GroupArrays:
        layout = _layout_of(group)
        claimant, contested, unsubscribed_owner, objects = _valid_claims(group, layout)
        return cls(
            space=layout.space,
            member_ids=layout.member_ids,
            subscriptions=layout.subscriptions,
            topic_of=layout.topic_of,
            claimant=claimant,
            contested=contested,
            unsubscribed_owner=unsubscribed_owner,
            objects=objects,
            rank=layout.rank,
        )

    @property
    def num_partitions(self) -> int:
        return int(self.topic_of.size)

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


@dataclass(frozen=True, slots=True)
class _Layout:
    """What :class:`GroupArrays` takes from a group's topics and its members' ids,
    subscriptions and instance ids alone (not from what they own or their generations): kept
    in the group's :meth:`~assignors.model.Group.derived` store, so the groups of one
    generation of a replay, and a cooperative group's rounds, work it out once.
    ``member_ids``, ``member_topics``, ``instance_ids``: the members' ids, subscriptions and
    instance ids, in member order: what it was made of."""

    topics: tuple[Topic, ...]
    space: PartitionSpace
    member_ids: tuple[str, ...]
    member_topics: tuple[frozenset[str], ...]
    instance_ids: tuple[str | None, ...]
    subscriptions: tuple[tuple[int, ...], ...]
    topic_of: np.ndarray
    rank: np.ndarray
    subscribed: _SubscriptionCheck

    @classmethod
    def of(cls, group: Group) -> _Layout:
        space = group.partition_space()
        counts = np.asarray(space.partition_counts, dtype=_INDEX)
        sizes = space.partition_counts
        position = {name: p for p, name in enumerate(space.topic_names)}
        member_ids, member_topics, _, instance_ids = group.member_fields()
        known: dict[frozenset[str], tuple[int, ...]] = {}
        subscriptions = []
        for topics in member_topics:
            subscription = known.get(topics)
            if subscription is None:
                subscription = tuple(
                    sorted(
                        p
                        for name in topics
                        if (p := position.get(name)) is not None and sizes[p] > 0
                    )
                )
                known[topics] = subscription
            subscriptions.append(subscription)
        # ties are broken by identity (static instance id, else member id), then member id
        keys = [
            (member_id if instance_id is None else instance_id, member_id)
            for member_id, instance_id in zip(member_ids, instance_ids, strict=True)
        ]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        rank = np.empty(len(keys), dtype=_INDEX)
        rank[order] = np.arange(len(keys), dtype=_INDEX)
        topic_of = np.repeat(np.arange(counts.size, dtype=_INDEX), counts)
        for array in (rank, topic_of):
            array.flags.writeable = False  # shared by every GroupArrays of the layout
        return cls(
            topics=group.topics,
            space=space,
            member_ids=member_ids,
            member_topics=member_topics,
            instance_ids=instance_ids,
            subscriptions=tuple(subscriptions),
            topic_of=topic_of,
            rank=rank,
            subscribed=_SubscriptionCheck.of(space, subscriptions),
        )

    def describes(self, group: Group) -> bool:
        """Whether this layout is the one :meth:`of` would make of ``group`` (same topics, same
        members' ids, subscriptions and instance ids, in order; the space follows from them).
        Compared column by column (:meth:`~assignors.model.Group.member_fields`: a group made
        from member columns is read without a step per member)."""
        if group.topics != self.topics:
            return False
        member_ids, member_topics, _, instance_ids = group.member_fields()
        return (
            member_ids == self.member_ids
            and member_topics == self.member_topics
            and instance_ids == self.instance_ids
            and group.partition_space().numbers_alike(self.space)
        )


_LAYOUT = "assignors.arrays.layout"


def _layout_of(group: Group) -> _Layout:
    """The group's :class:`_Layout`, from its derived store when one there still describes it
    (checked on every use, so a store shared by mistake can never give a wrong layout)."""
    derived = group.derived()
    found = derived.get(_LAYOUT)
    if isinstance(found, _Layout) and found.describes(group):
        return found
    made = derived[_LAYOUT] = _Layout.of(group)
    return made


def share_layout(group: Group) -> None:
    """Make ``group``'s layout now (what :meth:`GroupArrays.of` takes from its topics and its
    members' ids, subscriptions and instance ids) and keep it in its derived store, for the
    groups sharing that store to read; the claims are left out: each of those groups has its
    own owned partitions."""
    _layout_of(group)


def _valid_claims(
    group: Group, layout: _Layout
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(claimant, contested, unsubscribed_owner, objects) of :class:`GroupArrays`, by the claim
    rule of :func:`resolve_claims`."""
    space = layout.space
    size = space.size
    objects = np.full(size, None, dtype=object)
    claimant = np.full(size, NOBODY, dtype=_INDEX)
    contested = np.zeros(size, dtype=bool)
    unsubscribed_owner = np.zeros(size, dtype=bool)
    claims = owned_claims(group, space, with_objects=True)
    if not claims.index.size:
        return claimant, contested, unsubscribed_owner, objects
    if not layout.subscribed.everything:
        subscribed = layout.subscribed.of_claims(claims, space, layout.topic_of)
        if not subscribed.all():
            unsubscribed_owner[claims.index[~subscribed]] = True
            claims = claims.subset(subscribed)
    if claims.objects is not None:
        objects[claims.index] = claims.objects
    if claims.index.size and (
        group.owned_claim_arrays() is not None or np.bincount(claims.index).max() <= 1
    ):
        # no partition claimed twice (never, in claims cut from an owner array): every claim
        # wins, whatever the generations
        claimant[claims.index] = claims.member
        return claimant, contested, unsubscribed_owner, objects
    generations = member_generations(group)
    keep, tied = resolve_claims(claims.member, claims.index, generations)
    claimant[claims.index[keep]] = claims.member[keep]
    contested[tied] = True
    return claimant, contested, unsubscribed_owner, objects


@dataclass(frozen=True, slots=True)
class Claims:
    """The partitions members list as owned, as claims on a group's partition space: member
    ``member[k]`` (an index into the group's members) claims partition ``index[k]``. Claims come
    member after member in the order asked for, each member's in the order it lists them; claims
    on partitions the space lacks (a topic the group does not list or nobody subscribes to, a
    partition the topic does not have) are left out. ``objects[k]``, when asked for and every
    claim came as a :class:`TopicPartition`, is the member's own object."""

    member: np.ndarray
    index: np.ndarray
    objects: np.ndarray | None = None

    def subset(self, kept: np.ndarray) -> Claims:
        objects = None if self.objects is None else self.objects[kept]
        return Claims(self.member[kept], self.index[kept], objects)


def owned_claims(
    group: Group,
    space: PartitionSpace,
    members: Sequence[int] | None = None,
    owned: Mapping[str, Sequence[TopicPartition]] | None = None,
    *,
    with_objects: bool = False,
) -> Claims:
    """Every owned partition of ``group``'s members (those at ``members``, in that order; all by
    default) as claims on ``space``; ``owned`` replaces each member's ``owned_partitions`` (by
    member id). Owned partitions kept as :class:`~assignors.model.OwnedPartitions` are taken as
    arrays (one concatenation); those given as objects are read in one C-level pass.

    >>> from assignors.model import Member, OwnedPartitions, Topic, TopicPartition as TP
    >>> indexes = OwnedPartitions(PartitionSpace(("a", "b"), (2, 2)), [0, 3])
    >>> group = Group((Topic("a", 2), Topic("b", 2)), (
    ...     Member("c0", frozenset("ab"), (TP("b", 1), TP("x", 0))),
    ...     Member("c1", frozenset("ab"), indexes)))
    >>> claims = owned_claims(group, group.partition_space(), [1, 0])
    >>> claims.member.tolist(), claims.index.tolist()
    ([1, 1, 0], [0, 3, 3])
    """
    made = group.owned_claim_arrays()
    if (
        made is not None
        and members is None
        and owned is None
        and group.partition_space().numbers_alike(space)
    ):
        # cut by the group's maker from the arrays its members' owned partitions are views of
        return Claims(*made)
    listed = group.members
    order = list(range(len(listed))) if members is None else list(members)
    held: list[Sequence[TopicPartition]] = [
        listed[i].owned_partitions if owned is None else owned.get(listed[i].member_id, ())
        for i in order
    ]
    as_arrays = list(map(isinstance, held, repeat(OwnedPartitions)))
    if held and all(as_arrays):
        # every member's as arrays (a replay's groups): of one space numbered as ``space``,
        # they are read without a step per member
        sources = list(map(_space_of, held))
        if sources.count(sources[0]) == len(sources) and sources[0].numbers_alike(space):
            pieces = list(map(_indexes_of, held))
            lengths = np.fromiter(map(len, pieces), _INDEX, len(pieces))
            return Claims(
                np.repeat(np.asarray(order, dtype=_INDEX), lengths),
                np.concatenate(pieces).astype(_INDEX, copy=False),
            )
    objects_given = [
        partitions for partitions, arrays in zip(held, as_arrays, strict=True) if not arrays
    ]
    object_indexes, object_claims = _object_indexes(space, objects_given)
    if not any(as_arrays):  # every claim an object: one pass, no per-member pieces
        lengths = np.fromiter(map(len, held), _INDEX, len(held))
        member = np.repeat(np.asarray(order, dtype=_INDEX), lengths)
        kept = object_indexes >= 0
        objects = None
        if with_objects and object_claims:
            objects = np.fromiter(object_claims, dtype=object, count=len(object_claims))[kept]
        return Claims(member[kept], object_indexes[kept], objects)
    # array members' indexes are numbered by their own space: each distinct space other than
    # ``space`` is translated once, over all its members' indexes together
    object_pieces = iter(
        np.split(object_indexes, np.cumsum([len(given) for given in objects_given])[:-1])
        if objects_given
        else ()
    )
    foreign: list[PartitionSpace] = []
    code_of: dict[int, int] = {}  # space id -> 0 numbered as ``space``, else 1 + foreign index
    codes: list[int] = []
    pieces = []
    for partitions, arrays in zip(held, as_arrays, strict=True):
        if not arrays:
            pieces.append(next(object_pieces))
            codes.append(0)
            continue
        assert isinstance(partitions, OwnedPartitions)
        source = partitions.space
        code = code_of.get(id(source))
        if code is None:
            code = code_of[id(source)] = 0 if source.numbers_alike(space) else 1 + len(foreign)
            if code:
                foreign.append(source)
        codes.append(code)
        pieces.append(partitions.indexes)
    lengths = np.fromiter(map(len, pieces), _INDEX, len(pieces))
    index = np.concatenate(pieces).astype(_INDEX) if pieces else np.zeros(0, _INDEX)
    member = np.repeat(np.asarray(order, dtype=_INDEX), lengths)
    if foreign or objects_given:
        element_codes = np.repeat(np.asarray(codes, dtype=_INDEX), lengths)
        for position, source in enumerate(foreign, start=1):
            at = np.flatnonzero(element_codes == position)
            index[at] = source.translate(index[at], space)
        kept = index >= 0
        member, index = member[kept], index[kept]
    return Claims(member, index)


_space_of = operator.attrgetter("space")
_indexes_of = operator.attrgetter("indexes")


def _object_indexes(
    space: PartitionSpace, given: Sequence[Sequence[TopicPartition]]
) -> tuple[np.ndarray, list[TopicPartition]]:
    """Index in ``space`` of every partition of ``given`` (all lists, in order; -1 where the
    space lacks it), read in C-level passes over the names and the numbers, and the flat list."""
    flat = list(itertools.chain.from_iterable(given))
    if not flat:
        return np.zeros(0, _INDEX), flat
    position = {name: p for p, name in enumerate(space.topic_names)}
    topics = np.fromiter(
        map(position.get, map(operator.itemgetter(0), flat), repeat(-1)), _INDEX, len(flat)
    )
    numbers = np.fromiter(map(operator.itemgetter(1), flat), _INDEX, len(flat))
    # one extra entry answers position -1 (a topic the space lacks): no partitions
    counts = np.append(np.asarray(space.partition_counts, dtype=_INDEX), 0)
    offsets = np.append(np.asarray(space.offsets, dtype=_INDEX), 0)
    exists = (numbers >= 0) & (numbers < counts[topics])
    return np.where(exists, offsets[topics] + numbers, NOBODY), flat


def member_generations(group: Group) -> np.ndarray:
    """Each member's generation, in the group's member order."""
    members = group.members
    return np.fromiter(map(_generation_of, members), _INDEX, len(members))


_generation_of = operator.attrgetter("generation")


def resolve_claims(
    member: np.ndarray, index: np.ndarray, generations: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The claim rule: of the claims on one partition (``member[k]`` claims ``index[k]``, all
    of them by subscribed members on partitions that exist), the one in the highest generation
    (``generations[member]``) wins; two in that generation void the partition, nobody keeps it.
    Kafka's sticky assignors and the coordinator's assignors read owned partitions this way.
    Returns whether each claim wins (in the claims' order) and the void partitions, ascending.

    >>> keep, void = resolve_claims(np.array([0, 1, 2, 1]), np.array([5, 5, 6, 7]),
    ...                             np.array([3, 3, 1]))
    >>> keep.tolist(), void.tolist()
    ([False, False, True, True], [5])
    """
    if not index.size or np.bincount(index).max() <= 1:  # no partition claimed twice
        return np.ones(index.size, dtype=bool), np.zeros(0, _INDEX)
    claim_generations = generations[member]
    by_partition = np.lexsort((-claim_generations, index))
    sorted_indexes, sorted_generations = index[by_partition], claim_generations[by_partition]
    first = np.ones(index.size, dtype=bool)
    first[1:] = sorted_indexes[1:] != sorted_indexes[:-1]
    tied = np.zeros(index.size, dtype=bool)
    tied[:-1] = ~first[1:] & (sorted_generations[1:] == sorted_generations[:-1])
    keep = np.empty(index.size, dtype=bool)
    keep[by_partition] = first & ~tied
    return keep, sorted_indexes[first & tied]


def claims_subscribed(
    claims: Claims, space: PartitionSpace, subscriptions: Sequence[Sequence[int] | np.ndarray]
) -> np.ndarray:
    """Whether each claim's member subscribes to its partition's topic; ``subscriptions[i]``:
    topic positions in ``space`` member ``i`` (group order) subscribes to. Members sharing a
    subscription should share the object: rows are made once per distinct object. When every
    subscription covers every topic that has partitions, no claim is looked up."""
    return _SubscriptionCheck.of(space, subscriptions).of_claims(claims, space)


@dataclass(frozen=True, slots=True)
class _SubscriptionCheck:
    """:func:`claims_subscribed` made ready for one space and list of subscriptions:
    ``everything``, every subscription covers every topic with partitions; else ``rows[i]``,
    member ``i``'s row of ``table`` (distinct subscription x topic position), or, for tables
    too large, ``pairs`` (member x topics + topic position of every subscription)."""

    everything: bool
    rows: np.ndarray | None = None
    table: np.ndarray | None = None
    pairs: np.ndarray | None = None

    @classmethod
    def of(
        cls, space: PartitionSpace, subscriptions: Sequence[Sequence[int] | np.ndarray]
    ) -> _SubscriptionCheck:
        num_topics = len(space.topic_names)
        row_of: dict[int, int] = {}
        distinct: list[Sequence[int] | np.ndarray] = []
        for subscription in subscriptions:
            if row_of.setdefault(id(subscription), len(row_of)) == len(distinct):
                distinct.append(subscription)
        with_partitions = {p for p, count in enumerate(space.partition_counts) if count > 0}
        if all(with_partitions.issubset(subscription) for subscription in distinct):
            return cls(everything=True)
        if len(distinct) * num_topics > _SUBSCRIPTION_TABLE_CELLS:
            pairs = np.fromiter(
                (
                    member * num_topics + position
                    for member, subscription in enumerate(subscriptions)
                    for position in subscription
                ),
                dtype=_INDEX,
            )
            return cls(everything=False, pairs=pairs)
        rows = np.fromiter(
            (row_of[id(subscription)] for subscription in subscriptions),
            _INDEX,
            len(subscriptions),
        )
        table = np.zeros((len(distinct), num_topics), dtype=bool)
        for row, subscription in enumerate(distinct):
            table[row, np.asarray(subscription, dtype=_INDEX)] = True
        return cls(everything=False, rows=rows, table=table)

    def of_claims(
        self, claims: Claims, space: PartitionSpace, topic_of: np.ndarray | None = None
    ) -> np.ndarray:
        """Whether each of ``claims`` (on ``space``, the space this was made for) is by a
        member subscribing to the partition's topic. ``topic_of``: each partition's topic
        position in ``space``, when the caller keeps it (else looked up by offset)."""
        if self.everything:
            return np.ones(claims.index.size, dtype=bool)
        topics = _topics_of(space, claims.index) if topic_of is None else topic_of[claims.index]
        if self.pairs is not None:
            num_topics = len(space.topic_names)
            return np.isin(claims.member * num_topics + topics, self.pairs)
        assert self.rows is not None and self.table is not None
        return self.table[self.rows[claims.member], topics]


def _topics_of(space: PartitionSpace, indexes: np.ndarray) -> np.ndarray:
    offsets = np.asarray(space.offsets, dtype=_INDEX)
    return np.searchsorted(offsets, indexes, side="right") - 1
