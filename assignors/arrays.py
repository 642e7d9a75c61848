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
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from assignors.model import Assignment, Group, PartitionSpace, member_runs

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
    never honoured, but it holds ``p`` until it revokes it); ``objects[p]``: the request's own
    TopicPartition when claimed (others are made on output); ``rank[i]``: tie-break order
    (static instance id, else member id).
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
        claimant, contested, unsubscribed_owner, objects = _valid_claims(
            group, subscriptions, counts, offsets, position
        )
        return cls(
            space=space,
            member_ids=tuple(member.member_id for member in members),
            subscriptions=tuple(subscriptions),
            topic_of=np.repeat(np.arange(counts.size, dtype=_INDEX), counts),
            claimant=claimant,
            contested=contested,
            unsubscribed_owner=unsubscribed_owner,
            objects=objects,
            rank=rank,
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


def _valid_claims(
    group: Group,
    subscriptions: list[tuple[int, ...]],
    counts: np.ndarray,
    offsets: np.ndarray,
    position: dict[str, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(claimant, contested, unsubscribed_owner, objects): per partition, the member whose claim
    wins (present, subscribed, partition exists, highest generation; two claims in it void the
    partition), and whether a present member lists it without subscribing to its topic."""
    num_partitions = int(counts.sum())
    objects = np.full(num_partitions, None, dtype=object)
    claimant = np.full(num_partitions, NOBODY, dtype=_INDEX)
    contested = np.zeros(num_partitions, dtype=bool)
    unsubscribed_owner = np.zeros(num_partitions, dtype=bool)
    members = group.members
    lengths = [len(member.owned_partitions) for member in members]
    total = sum(lengths)
    if total == 0:
        return claimant, contested, unsubscribed_owner, objects
    # every member's owned partitions in one pass (member after member, as listed)
    owned = list(itertools.chain.from_iterable(member.owned_partitions for member in members))
    owner = np.repeat(np.arange(len(members), dtype=_INDEX), lengths)
    topics = np.fromiter(
        map(position.get, map(operator.itemgetter(0), owned), repeat(-1)),
        dtype=_INDEX,
        count=total,
    )
    numbers = np.fromiter(map(operator.itemgetter(1), owned), dtype=_INDEX, count=total)
    # one extra column answers topic position -1 (a topic nobody subscribes to): no partitions
    known_counts = np.append(counts, 0)
    exists = (numbers >= 0) & (numbers < known_counts[topics])
    valid = _subscribed(subscriptions, counts.size, owner, topics) & exists
    dropped = exists & ~valid
    if dropped.any():
        unsubscribed_owner[offsets[topics[dropped]] + numbers[dropped]] = True
    partitions = offsets[topics[valid]] + numbers[valid]
    objects[partitions] = np.fromiter(owned, dtype=object, count=total)[valid]
    claimers = owner[valid]
    generations = np.fromiter((member.generation for member in members), _INDEX, len(members))[
        claimers
    ]
    if not partitions.size:
        return claimant, contested, unsubscribed_owner, objects
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
    return claimant, contested, unsubscribed_owner, objects


def _subscribed(
    subscriptions: list[tuple[int, ...]], num_topics: int, members: np.ndarray, topics: np.ndarray
) -> np.ndarray:
    """Whether ``members[k]`` subscribes to topic position ``topics[k]`` (-1: never): one row
    per distinct subscription, or, when those rows would be large, a search of the
    (member, topic) pairs."""
    row_of: dict[tuple[int, ...], int] = {}
    rows = np.asarray(
        [row_of.setdefault(subscription, len(row_of)) for subscription in subscriptions],
        dtype=_INDEX,
    )
    width = num_topics + 1  # the last column answers position -1
    if len(row_of) * width <= _SUBSCRIPTION_TABLE_CELLS:
        table = np.zeros((len(row_of), width), dtype=bool)
        for subscription, row in row_of.items():
            table[row, list(subscription)] = True
        return table[rows[members], topics]
    pairs = np.fromiter(
        (
            member * width + position
            for member, subscription in enumerate(subscriptions)
            for position in subscription
        ),
        dtype=_INDEX,
    )
    return np.isin(members * width + np.where(topics >= 0, topics, num_topics), pairs)
