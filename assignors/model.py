"""The consumer-group model every assignor works on.

A :class:`Group` is what the group leader (or, with KIP-848, the coordinator) knows when it
assigns: the topics with their partition counts (and, optionally, the racks of each partition's
replicas and a load weight per partition) and the members with their subscriptions, the
partitions they owned before this rebalance, their generation, rack and static instance id.

Values are frozen and check themselves: a negative partition count, per-partition lists of the
wrong length or a duplicated topic or member raise :class:`~assignors.errors.InputError` (a
ValueError) naming the field.

>>> Topic("orders", -1)
Traceback (most recent call last):
...
assignors.errors.InputError: num_partitions: topic 'orders': num_partitions must be >= 0 (got -1)

A group is normalised on construction: members sorted by member id, topics by
name, subscriptions deduplicated, so an assignor's answer cannot depend on the order the request
listed them in.

>>> group = Group(
...     topics=(Topic("orders", 3), Topic("audit", 1)),
...     members=(Member("c1", frozenset({"orders"})), Member("c0", frozenset({"orders", "audit"}))),
... )
>>> [m.member_id for m in group.members], [t.name for t in group.topics]
(['c0', 'c1'], ['audit', 'orders'])
>>> group.subscribed_partitions()
(TopicPartition(topic='audit', partition=0), TopicPartition(topic='orders', partition=0), \
TopicPartition(topic='orders', partition=1), TopicPartition(topic='orders', partition=2))

For large groups assignors work on integer partition indexes rather than objects:
:class:`PartitionSpace` numbers the partitions of the subscribed topics in (topic, partition)
order, so sorting indexes sorts partitions.

>>> space = group.partition_space()
>>> space.index(TopicPartition("orders", 2)), space.partition(1)
(3, TopicPartition(topic='orders', partition=0))
"""

from __future__ import annotations

import bisect
import gc
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, NamedTuple, NoReturn, overload

import numpy as np

from assignors.errors import InputError

NO_GENERATION = -1
INT32_MAX = 2**31 - 1
"""Kafka's partition counts and generation ids are int32."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_PARTITIONS = 10_000_000
"""Most partitions one group (a request, a trace generation) may hold, summed over its topics:
checked before any work, so input that cannot fit in memory is refused at once."""
MAX_MEMBERS = 1_000_000
"""Most members one group (a request, a trace generation) may list."""
_CACHED_OBJECTS = 100_000
"""Spaces up to this many partitions keep their TopicPartition objects once made
(:meth:`PartitionSpace.objects`); larger ones make only those asked for."""
_OWNED_RULE = "each must be a (topic name, partition number >= 0) pair"


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic as the assignor sees it.

    ``replica_racks[p]`` is the set of racks holding a replica of partition ``p`` (KIP-881);
    ``weights[p]`` is a load estimate (bytes/s, lag, ...) used by load-aware assignors and by
    scoring. Both are optional; when present they have one entry per partition.
    """

    name: str
    num_partitions: int
    replica_racks: tuple[frozenset[str], ...] | None = None
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InputError("topic name must be a string", field="name", value=self.name)
        if isinstance(self.num_partitions, bool) or not isinstance(self.num_partitions, int):
            raise InputError(
                f"topic {self.name!r}: num_partitions must be an integer",
                field="num_partitions",
                value=self.num_partitions,
            )
        if self.num_partitions < 0:
            raise InputError(
                f"topic {self.name!r}: num_partitions must be >= 0",
                field="num_partitions",
                value=self.num_partitions,
            )
        for label, values in (("replica_racks", self.replica_racks), ("weights", self.weights)):
            if values is not None and len(values) != self.num_partitions:
                raise InputError(
                    f"topic {self.name!r}: {label} has {len(values)} entries "
                    f"for {self.num_partitions} partitions",
                    field=label,
                )

    def to_json(self) -> dict[str, object]:
        """The topic object shared by requests and trace rows (optional fields only when set)."""
        described: dict[str, object] = {"name": self.name, "partitions": self.num_partitions}
        if self.replica_racks is not None:
            described["racks"] = [sorted(racks) for racks in self.replica_racks]
        if self.weights is not None:
            described["weights"] = list(self.weights)
        return described


@dataclass(frozen=True, slots=True)
class Member:
    """One consumer of the group.

    ``owned_partitions`` are the partitions the member held before this rebalance together with
    the ``generation`` in which it held them (``-1``: unknown or none), in (topic, partition)
    order without repeats: given as :class:`TopicPartition` pairs (sorted and deduplicated
    here) or as :class:`OwnedPartitions` (integer indexes; the request reader gives those).
    ``instance_id`` is the static membership id (``group.instance.id``); ``rack`` is
    ``client.rack`` (an empty rack is kept: Kafka's assignors treat it as no rack).

    Bad values raise :class:`assignors.errors.InputError` naming the field:

    >>> Member("c0", frozenset({"orders"}), generation=-2)
    Traceback (most recent call last):
    ...
    assignors.errors.InputError: generation: member 'c0': must be an integer >= -1 (got -2)
    """

    member_id: str
    topics: frozenset[str]
    owned_partitions: tuple[TopicPartition, ...] | OwnedPartitions = ()
    generation: int = NO_GENERATION
    rack: str | None = None
    instance_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.member_id, str) or not self.member_id:
            raise InputError("must be a non-empty string", field="member_id", value=self.member_id)
        if isinstance(self.topics, str):
            self._fail("topics", "must be a collection of topic names, not one string", self.topics)
        if not isinstance(self.topics, frozenset):
            try:
                object.__setattr__(self, "topics", frozenset(self.topics))
            except TypeError:
                self._fail("topics", "must be a collection of topic names", self.topics)
        try:
            "".join(self.topics)  # a C-level type check of every name
        except TypeError:
            self._fail(
                "topics", "every topic name must be a string", sorted(map(repr, self.topics))
            )
        if not isinstance(self.owned_partitions, OwnedPartitions):
            self._normalise_owned()
        self._check_scalars()

    def _normalise_owned(self) -> None:
        # C-level passes only: members may own hundreds of thousands of partitions. Sorting
        # compares the pairs, so once it succeeds and the first topic is a string, all are.
        try:
            owned = tuple(
                sorted(set(map(tuple.__new__, repeat(TopicPartition), self.owned_partitions)))
            )
        except TypeError:
            self._fail("owned_partitions", _OWNED_RULE, self.owned_partitions)
        if owned:
            numbers = tuple(map(itemgetter(-1), owned))
            if (
                set(map(len, owned)) != {2}
                or type(owned[0][0]) is not str
                or not set(map(type, numbers)) <= {int}
                or min(numbers) < 0
            ):
                bad = next(
                    pair
                    for pair in owned
                    if len(pair) != 2
                    or type(pair[0]) is not str
                    or type(pair[1]) is not int
                    or pair[1] < 0
                )
                self._fail("owned_partitions", _OWNED_RULE, tuple(bad))
        object.__setattr__(self, "owned_partitions", owned)

    def _check_scalars(self) -> None:
        if type(self.generation) is not int or self.generation < NO_GENERATION:
            self._fail("generation", "must be an integer >= -1", self.generation)
        if self.rack is not None and not isinstance(self.rack, str):
            self._fail("rack", "must be a string or None", self.rack)
        if self.instance_id is not None and (
            not isinstance(self.instance_id, str) or not self.instance_id
        ):
            self._fail("instance_id", "must be a non-empty string or None", self.instance_id)

    def _fail(self, field: str, message: str, value: object) -> NoReturn:
        raise InputError(f"member {self.member_id!r}: {message}", field=field, value=value)

    @classmethod
    def checked(
        cls,
        member_id: str,
        topics: frozenset[str],
        owned_partitions: tuple[TopicPartition, ...] | OwnedPartitions,
        generation: int,
        rack: str | None,
        instance_id: str | None,
    ) -> Member:
        """A member from values already checked, without checking them again: for callers
        that made them valid themselves (a trace reader checked the names, an assignment's
        array view gives sorted, distinct partitions). Nothing is normalised, so the values
        must be what ``Member(...)`` would have made of them.

        >>> made = Member.checked("c0", frozenset({"t"}), (TopicPartition("t", 0),), 3, None, None)
        >>> made == Member("c0", frozenset({"t"}), (TopicPartition("t", 0),), 3)
        True
        """
        # the slots' own setters: a replay makes one member per member and generation
        made = object.__new__(cls)
        _set_member_id(made, member_id)
        _set_topics(made, topics)
        _set_owned_partitions(made, owned_partitions)
        _set_generation(made, generation)
        _set_rack(made, rack)
        _set_instance_id(made, instance_id)
        return made

    @classmethod
    def all_checked(
        cls,
        member_ids: Sequence[str],
        topics: Sequence[frozenset[str]],
        owned_partitions: Sequence[tuple[TopicPartition, ...] | OwnedPartitions],
        generations: Sequence[int],
        racks: Sequence[str | None],
        instance_ids: Sequence[str | None],
    ) -> tuple[Member, ...]:
        """:meth:`checked` of every row of these columns (all of one length), each slot set
        over all the members in one C-level pass: a replay makes a group's members this way
        every generation.

        >>> made = Member.all_checked(("c0", "c1"), (frozenset("t"),) * 2, ((), ()), (3, 4),
        ...                           ("r", None), (None, "i"))
        >>> made == (Member("c0", frozenset("t"), (), 3, "r"),
        ...          Member("c1", frozenset("t"), (), 4, instance_id="i"))
        True
        """
        count = len(member_ids)
        columns = (topics, owned_partitions, generations, racks, instance_ids)
        if any(len(column) != count for column in columns):
            raise ValueError(f"columns of {[count, *map(len, columns)]} values: one length needed")
        made = tuple(map(object.__new__, repeat(cls, count)))
        for setter, column in (
            (_set_member_id, member_ids),
            (_set_topics, topics),
            (_set_owned_partitions, owned_partitions),
            (_set_generation, generations),
            (_set_rack, racks),
            (_set_instance_id, instance_ids),
        ):
            _consume(map(setter, made, column))
        return made

    @property
    def identity(self) -> str:
        """Who this member is across rebalances: the static instance id, else the member id.
        Kafka's range and sticky assignors also order members by it.

        >>> static = Member("c-7", frozenset(), instance_id="pod-0")
        >>> static.identity, Member("c-7", frozenset()).identity
        ('pod-0', 'c-7')
        """
        return member_identity(self.member_id, self.instance_id)


def _slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The setter of slot ``name`` of ``cls``: sets it on a frozen instance being built
    without ``object.__setattr__``'s lookup by name."""
    setter: Callable[[object, object], None] = getattr(cls, name).__set__
    return setter


_consume: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend
"""Runs an iterator to its end, keeping nothing."""
_set_member_id = _slot_setter(Member, "member_id")
_set_topics = _slot_setter(Member, "topics")
_set_owned_partitions = _slot_setter(Member, "owned_partitions")
_set_generation = _slot_setter(Member, "generation")
_set_rack = _slot_setter(Member, "rack")
_set_instance_id = _slot_setter(Member, "instance_id")


MemberColumns = tuple[
    tuple[str, ...], tuple[frozenset[str], ...], tuple[str | None, ...], tuple[str | None, ...]
]
"""Members' ids, topics, racks and instance ids, column by column (:meth:`Group.member_columns`)."""


def member_identity(member_id: str, instance_id: str | None) -> str:
    """Who a member is across rebalances (:attr:`Member.identity`, and a trace member's): the
    static instance id, else the member id."""
    return instance_id if instance_id is not None else member_id


@dataclass(frozen=True, slots=True)
class Group:
    """Topics and members of one rebalance. Topics a member subscribes to but that the group
    does not list (not yet created, deleted) are simply not assigned."""

    topics: tuple[Topic, ...]
    members: tuple[Member, ...]
    _topic_by_name: Mapping[str, Topic] = field(init=False, repr=False, compare=False)
    _space: PartitionSpace | None = field(init=False, repr=False, compare=False, default=None)
    _derived: dict[str, object] | None = field(init=False, repr=False, compare=False, default=None)
    _owned_claims: tuple[np.ndarray, np.ndarray] | None = field(
        init=False, repr=False, compare=False, default=None
    )
    _member_columns: MemberColumns | None = field(
        init=False, repr=False, compare=False, default=None
    )
    # what makes ``members`` on first read, until then unset (None once made or given)
    _make_members: Callable[[], tuple[Member, ...]] | None = field(
        init=False, repr=False, compare=False, default=None
    )

    def __post_init__(self) -> None:
        topics = tuple(sorted(self.topics, key=lambda topic: topic.name))
        members = tuple(sorted(self.members, key=lambda member: member.member_id))
        by_name = {topic.name: topic for topic in topics}
        if len(by_name) != len(topics):
            for previous_topic, current_topic in itertools.pairwise(topics):
                if previous_topic.name == current_topic.name:
                    raise InputError(
                        "duplicate topic name in group", field="topics", value=current_topic.name
                    )
        for previous, current in itertools.pairwise(members):
            if previous.member_id == current.member_id:
                raise InputError(
                    f"duplicate member id {current.member_id!r}",
                    field="members",
                    value=current.member_id,
                )
        _share_subscriptions(members)
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "_topic_by_name", by_name)
        object.__setattr__(self, "_space", None)
        object.__setattr__(self, "_derived", None)
        object.__setattr__(self, "_owned_claims", None)
        object.__setattr__(self, "_member_columns", None)
        object.__setattr__(self, "_make_members", None)

    @classmethod
    def checked(
        cls,
        topics: tuple[Topic, ...],
        members: tuple[Member, ...] | Callable[[], tuple[Member, ...]],
        topic_by_name: Mapping[str, Topic],
        space: PartitionSpace | None = None,
        derived: dict[str, object] | None = None,
        owned_claims: tuple[np.ndarray, np.ndarray] | None = None,
        member_columns: MemberColumns | None = None,
    ) -> Group:
        """A group whose topics are already sorted by name and distinct, members sorted by
        member id and distinct, and ``topic_by_name`` maps each topic's name to it: what
        ``Group(...)`` would make, without sorting and checking again (a replay builds one
        group per generation and assignor from the same checked parts). ``space``, when given,
        must be what :meth:`partition_space` would make: groups of one generation share it.
        ``derived``: another group's :meth:`derived` store, shared with it (a replay's groups
        of one generation, whose members differ in owned partitions and generations only).
        ``owned_claims``: the members' owned partitions as (member index per claim, partition
        index of ``space`` per claim), member after member, each one's ascending, read-only,
        no partition claimed twice: when the caller cut the members' :class:`OwnedPartitions`
        from these very arrays, as from an owner array (:func:`assignors.arrays.owned_claims`
        then reads them as they are, and every claim is uncontested).
        ``member_columns``: the members' (ids, topics, racks, instance ids), column by column,
        when the caller made the members from these very columns (:meth:`Member.all_checked`):
        a reader of those values takes them without a step per member.
        ``members`` may instead be what makes them, called on their first read (then kept): a
        replay's groups from owner arrays, whose members most assignors never read when the
        group keeps its claims and member columns. The group equals, prints, hashes and
        pickles as the one made with them.

        >>> topics = (Topic("a", 1),)
        >>> members = (Member("c0", frozenset({"a"})),)
        >>> Group.checked(topics, members, {"a": topics[0]}) == Group(topics, members)
        True
        >>> Group.checked(topics, lambda: members, {"a": topics[0]}).members == members
        True
        """
        made = object.__new__(cls)
        object.__setattr__(made, "topics", topics)
        if callable(members):
            object.__setattr__(made, "_make_members", members)
        else:
            object.__setattr__(made, "members", members)
            object.__setattr__(made, "_make_members", None)
        object.__setattr__(made, "_topic_by_name", topic_by_name)
        object.__setattr__(made, "_space", space)
        object.__setattr__(made, "_derived", derived)
        object.__setattr__(made, "_owned_claims", owned_claims)
        object.__setattr__(made, "_member_columns", member_columns)
        return made

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> object:
            # called only when a slot is unset: ``members`` of a group made lazily
            make = _made_by(self) if name == "members" else None
            if make is None:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
                )
            members = make()
            object.__setattr__(self, "members", members)
            object.__setattr__(self, "_make_members", None)
            return members

    def topic(self, name: str) -> Topic | None:
        return self._topic_by_name.get(name)

    def num_partitions(self, name: str) -> int:
        """Partition count of a topic, 0 when the group does not know it."""
        topic = self._topic_by_name.get(name)
        return 0 if topic is None else topic.num_partitions

    def subscribed_topics(self) -> tuple[str, ...]:
        """Names of known topics at least one member subscribes to, sorted."""
        columns = self._member_columns
        subscriptions = tuple(map(_topics_of, self.members)) if columns is None else columns[1]
        wanted = set().union(*subscriptions)
        return tuple(topic.name for topic in self.topics if topic.name in wanted)

    def subscribed_partitions(self) -> tuple[TopicPartition, ...]:
        """Every partition some member subscribes to, in (topic, partition) order."""
        return tuple(
            TopicPartition(name, partition)
            for name in self.subscribed_topics()
            for partition in range(self.num_partitions(name))
        )

    def partition_space(self) -> PartitionSpace:
        """The numbering of the subscribed partitions (made once per group)."""
        if self._space is None:
            names = self.subscribed_topics()
            space = PartitionSpace(names, tuple(self.num_partitions(name) for name in names))
            object.__setattr__(self, "_space", space)
        assert self._space is not None
        return self._space

    def derived(self) -> dict[str, object]:
        """A store, by the name of whoever keeps it, for values derived from the group's
        topics and its members' ids, subscriptions, racks and instance ids (never from owned
        partitions or generations), made once and shared with the groups made from this one
        with the same topics and members (:func:`rejoin`, a replay's generation): an
        assignor's layout of the group is then worked out once per generation, not once per
        round and assignor. Whoever reads a value checks it still describes the group before
        using it (the store is shared on trust).

        >>> group = Group((Topic("a", 1),), (Member("c0", frozenset({"a"})),))
        >>> group.derived() is group.derived(), group.derived()
        (True, {})
        """
        if self._derived is None:
            object.__setattr__(self, "_derived", {})
        assert self._derived is not None
        return self._derived

    def owned_claim_arrays(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The members' owned partitions as the two read-only arrays they were cut from, when
        the group's maker cut them so (:func:`rejoin`, a replay's groups from owner arrays):
        (member index per claim, partition index of :meth:`partition_space` per claim), member
        after member, each one's ascending, no partition claimed twice; None otherwise. A
        reader of every member's owned partitions takes them here without a step per member.

        >>> space = PartitionSpace(("a",), (3,))
        >>> members = (Member("c0", frozenset("a")), Member("c1", frozenset("a")))
        >>> group = Group((Topic("a", 3),), members)
        >>> given = Assignment.from_owners(space, ("c0", "c1"), np.array([1, -1, 0]))
        >>> group.owned_claim_arrays() is None
        True
        >>> [part.tolist() for part in rejoin(group, given, 4).owned_claim_arrays()]
        [[0, 1], [2, 0]]
        """
        return self._owned_claims

    def member_columns(self) -> MemberColumns | None:
        """The members' (ids, topics, racks, instance ids), column by column, when the group's
        maker made its members from these columns (a replay's groups from owner arrays), else
        None: each column's values are the members' own, in member order.

        >>> topics = (Topic("a", 1),)
        >>> columns = (("c0",), (frozenset("a"),), (None,), ("i0",))
        >>> members = Member.all_checked(*columns[:2], ((),), (-1,), *columns[2:])
        >>> Group.checked(topics, members, {"a": topics[0]}).member_columns() is None
        True
        >>> made = Group.checked(topics, members, {"a": topics[0]}, member_columns=columns)
        >>> made.member_columns() == columns
        True
        """
        return self._member_columns

    def member_fields(self) -> MemberColumns:
        """The members' (ids, topics, racks, instance ids), column by column: the group's
        :meth:`member_columns` when it keeps them (its members are then not made for this),
        else read from its members.

        >>> Group((), (Member("c1", frozenset("a"), rack="r"),)).member_fields()
        (('c1',), (frozenset({'a'}),), ('r',), (None,))
        """
        columns = self._member_columns
        if columns is not None:
            return columns
        members = self.members
        return (
            tuple(map(_member_id_of, members)),
            tuple(map(_topics_of, members)),
            tuple(map(_rack_of, members)),
            tuple(map(_instance_id_of, members)),
        )

    def num_members(self) -> int:
        """How many members the group has (its member columns' length when it keeps them,
        without making members a lazily made group has not made yet).

        >>> Group((), (Member("c0", frozenset()), Member("c1", frozenset()))).num_members()
        2
        """
        columns = self._member_columns
        return len(self.members) if columns is None else len(columns[0])

    def has_racks(self) -> bool:
        """True when rack-aware assignment applies (KIP-881): some consumer rack and some
        replica racks are known."""
        return any(rack is not None for rack in self.racks()) and any(
            topic.replica_racks is not None for topic in self.topics
        )

    def racks(self) -> tuple[str | None, ...]:
        """Each member's rack, in member order (the group's member column when it keeps one,
        without making members a lazily made group has not made yet).

        >>> Group((), (Member("c1", frozenset(), rack="r1"), Member("c0", frozenset()))).racks()
        (None, 'r1')
        """
        columns = self._member_columns
        return tuple(map(_rack_of, self.members)) if columns is None else columns[2]


def _made_by(group: Group) -> Callable[[], tuple[Member, ...]] | None:
    """What makes ``group``'s members when they are not made yet; None when nothing does (a
    group not fully built)."""
    try:
        return group._make_members
    except AttributeError:
        return None


def _share_subscriptions(members: Iterable[Member]) -> None:
    """Members with equal subscriptions are given one shared frozenset (an equal value, so
    nothing a caller can see changes): assignors then tell subscriptions apart by identity,
    without comparing topic names member by member on every rebalance, as the coordinator
    keeps a group's subscription type between rebalances."""
    shared: dict[frozenset[str], frozenset[str]] = {}
    for member in members:
        topics = shared.setdefault(member.topics, member.topics)
        if topics is not member.topics:
            object.__setattr__(member, "topics", topics)


@dataclass(frozen=True, slots=True)
class PartitionSpace:
    """Dense integer numbering of the partitions of some topics, in (topic, partition) order.

    ``offsets[i]`` is the index of partition 0 of ``topic_names[i]``; index lookups are
    O(1) by topic and O(log topics) back to a :class:`TopicPartition`.
    """

    topic_names: tuple[str, ...]
    partition_counts: tuple[int, ...]
    offsets: tuple[int, ...] = field(init=False)
    _offset_by_topic: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _objects: np.ndarray | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        offsets, total = [], 0
        for count in self.partition_counts:
            offsets.append(total)
            total += count
        object.__setattr__(self, "offsets", tuple(offsets))
        object.__setattr__(
            self, "_offset_by_topic", dict(zip(self.topic_names, offsets, strict=True))
        )
        object.__setattr__(self, "_objects", None)

    @property
    def size(self) -> int:
        return sum(self.partition_counts)

    def index(self, tp: TopicPartition) -> int:
        return self._offset_by_topic[tp.topic] + tp.partition

    def partition(self, index: int) -> TopicPartition:
        topic_position = bisect.bisect_right(self.offsets, index) - 1
        return TopicPartition(
            self.topic_names[topic_position], index - self.offsets[topic_position]
        )

    def partitions(self, indexes: Iterable[int]) -> tuple[TopicPartition, ...]:
        """TopicPartitions for sorted or unsorted indexes, in the order given."""
        return tuple(self.partition(index) for index in indexes)

    def locate(self, indexes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Topic positions (into ``topic_names``) and partition numbers of ``indexes``.

        >>> topics, numbers = PartitionSpace(("a", "b"), (2, 3)).locate(np.array([4, 0, 2]))
        >>> topics.tolist(), numbers.tolist()
        ([1, 0, 1], [2, 0, 0])
        """
        offsets = np.asarray(self.offsets, dtype=np.int64)
        positions = np.searchsorted(offsets, indexes, side="right") - 1
        return positions, np.asarray(indexes, dtype=np.int64) - offsets[positions]

    def translate(self, indexes: np.ndarray, target: PartitionSpace) -> np.ndarray:
        """The index in ``target`` of each partition at ``indexes`` of this space, matched by
        topic name and partition number (-1 where ``target`` lacks it), in one vectorised pass.

        >>> PartitionSpace(("a", "b", "c"), (2, 2, 2)).translate(
        ...     np.array([0, 3, 4, 5]), PartitionSpace(("a", "c"), (2, 1))).tolist()
        [0, -1, 2, -1]
        """
        counts = dict(zip(target.topic_names, target.partition_counts, strict=True))
        lookup = target._offset_by_topic
        starts = np.asarray([lookup.get(name, -1) for name in self.topic_names], np.int64)
        limits = np.asarray([counts.get(name, 0) for name in self.topic_names], np.int64)
        positions, numbers = self.locate(np.asarray(indexes, dtype=np.int64))
        if not positions.size:
            return np.zeros(0, np.int64)
        kept = (starts[positions] >= 0) & (numbers < limits[positions])
        return np.where(kept, starts[positions] + numbers, -1)

    def numbers_alike(self, other: PartitionSpace) -> bool:
        """Whether ``other`` gives every partition the same index (same topics, same counts)."""
        return other is self or (
            other.topic_names == self.topic_names
            and other.partition_counts == self.partition_counts
        )

    def objects(self) -> np.ndarray:
        """Every partition's :class:`TopicPartition`, by index (an object array made on the
        first call and kept: a small space asked for its objects many times, as a replay asks,
        makes them once).

        >>> PartitionSpace(("a", "b"), (1, 1)).objects().tolist()
        [TopicPartition(topic='a', partition=0), TopicPartition(topic='b', partition=0)]
        """
        if self._objects is None:
            pairs = itertools.chain.from_iterable(
                zip(repeat(name, count), range(count), strict=True)
                for name, count in zip(self.topic_names, self.partition_counts, strict=True)
            )
            made = np.fromiter(
                map(tuple.__new__, repeat(TopicPartition), pairs), dtype=object, count=self.size
            )
            object.__setattr__(self, "_objects", made)
        assert self._objects is not None
        return self._objects

    def partition_objects(self, indexes: np.ndarray) -> list[TopicPartition]:
        """:class:`TopicPartition` objects for ``indexes`` (in that order), made in C loops."""
        positions, numbers = self.locate(np.asarray(indexes, dtype=np.int64))
        names = np.asarray(self.topic_names, dtype=object)[positions].tolist()
        pairs = zip(names, numbers.tolist(), strict=True)
        return list(map(tuple.__new__, repeat(TopicPartition), pairs))

    def fill_objects(self, objects: np.ndarray) -> np.ndarray:
        """``objects`` (one :class:`TopicPartition` or None per partition index: the request's
        own objects where a member held the partition) with every None replaced, in place, by
        a new object; returned for chaining.

        >>> space = PartitionSpace(("a",), (2,))
        >>> space.fill_objects(np.array([None, TopicPartition("a", 1)], dtype=object)).tolist()
        [TopicPartition(topic='a', partition=0), TopicPartition(topic='a', partition=1)]
        """
        missing = np.flatnonzero(np.equal(objects, None))  # type: ignore[call-overload]
        if missing.size:
            made = self.partition_objects(missing)
            objects[missing] = np.fromiter(made, dtype=object, count=missing.size)
        return objects


class OwnedPartitions(Sequence[TopicPartition]):
    """A member's owned partitions kept as integers: sorted, distinct indexes into a
    :class:`PartitionSpace` whose topics are sorted by name, so index order is (topic, partition)
    order. It reads as the tuple of :class:`TopicPartition` it stands for (equal to it, same
    hash, same repr); that tuple is made on first use only, so the claim readers
    (:func:`assignors.arrays.owned_claims`) take the indexes without one object per partition.
    The request reader gives every member that lists owned partitions one of these.

    >>> space = PartitionSpace(("a", "b"), (2, 3))
    >>> owned = OwnedPartitions(space, np.array([1, 4]))
    >>> len(owned), owned.indexes_in(space).tolist(), owned.is_made
    (2, [1, 4], False)
    >>> owned == (TopicPartition("a", 1), TopicPartition("b", 2)), owned.is_made
    (True, True)

    Indexes out of order, repeated or outside the space are refused:

    >>> OwnedPartitions(space, np.array([4, 1]))
    Traceback (most recent call last):
    ...
    assignors.errors.InputError: owned_partitions: owned partition indexes must be sorted, \
distinct and in 0..4 (got [4, 1])
    """

    __slots__ = ("_objects", "indexes", "space")

    space: PartitionSpace
    indexes: np.ndarray
    _objects: tuple[TopicPartition, ...] | None

    def __init__(self, space: PartitionSpace, indexes: np.ndarray | Sequence[int]) -> None:
        values = np.asarray(indexes)
        if values.size == 0:
            values = values.astype(np.int64)
        if (
            values.ndim != 1
            or values.dtype.kind not in "iu"
            or (values.size and (int(values[0]) < 0 or int(values[-1]) >= space.size))
            or bool(np.any(values[1:] <= values[:-1]))
        ):
            raise InputError(
                f"owned partition indexes must be sorted, distinct and in 0..{space.size - 1}",
                field="owned_partitions",
                value=values.tolist() if values.size <= 8 else f"{values.size} indexes",
            )
        if list(space.topic_names) != sorted(space.topic_names):
            raise InputError(
                "the space of owned partition indexes must list its topics by name",
                field="owned_partitions",
                value=space.topic_names,
            )
        kept = values.astype(np.int64)  # a copy: the caller's array stays the caller's
        kept.flags.writeable = False
        self._set(space, kept)

    def _set(self, space: PartitionSpace, indexes: np.ndarray) -> None:
        object.__setattr__(self, "space", space)
        object.__setattr__(self, "indexes", indexes)
        object.__setattr__(self, "_objects", None)

    @classmethod
    def checked(cls, space: PartitionSpace, indexes: np.ndarray) -> OwnedPartitions:
        """Owned partitions from int64 indexes already sorted, distinct and inside ``space``
        (whose topics are sorted by name), without checking them again (nor copying them: the
        caller hands them over)."""
        made = cls.__new__(cls)
        _set_space(made, space)
        _set_indexes(made, indexes)
        _set_objects(made, None)
        return made

    @classmethod
    def all_checked(
        cls, space: PartitionSpace, runs: np.ndarray, starts: Sequence[int], ends: Sequence[int]
    ) -> list[OwnedPartitions]:
        """:meth:`checked` of every run ``runs[starts[i]:ends[i]]`` (``runs``: read-only int64,
        each run sorted, distinct and inside ``space``), made in C-level passes, one slot over
        all of them at a time: a replay cuts a group's owned partitions from one array this way
        every generation. The runs are views of ``runs``.

        >>> space = PartitionSpace(("a",), (4,))
        >>> runs = np.array([0, 3, 1])
        >>> [owned.indexes.tolist() for owned in OwnedPartitions.all_checked(
        ...     space, runs, [0, 2, 2], [2, 2, 3])]
        [[0, 3], [], [1]]
        """
        count = len(starts)
        made = list(map(cls.__new__, repeat(cls, count)))
        _consume(map(_set_space, made, repeat(space, count)))
        _consume(map(_set_indexes, made, map(runs.__getitem__, map(slice, starts, ends))))
        _consume(map(_set_objects, made, repeat(None, count)))
        return made

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"OwnedPartitions is immutable: cannot set {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return (OwnedPartitions.checked, (self.space, self.indexes))

    @property
    def is_made(self) -> bool:
        """Whether the :class:`TopicPartition` view was made (some caller read the objects)."""
        return self._objects is not None

    def objects(self) -> tuple[TopicPartition, ...]:
        """The :class:`TopicPartition` view, made once."""
        if self._objects is None:
            made = tuple(self.space.partition_objects(self.indexes))
            object.__setattr__(self, "_objects", made)
        assert self._objects is not None
        return self._objects

    def indexes_in(self, space: PartitionSpace) -> np.ndarray:
        """The indexes of these partitions in ``space`` (ascending), leaving out partitions
        ``space`` lacks: the arrays themselves when ``space`` numbers the same topics, else
        one vectorised translation by topic name."""
        if self.space.numbers_alike(space):
            return self.indexes
        translated = self.space.translate(self.indexes, space)
        return translated[translated >= 0]

    def __len__(self) -> int:
        return int(self.indexes.size)

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self.objects())

    @overload
    def __getitem__(self, position: int) -> TopicPartition: ...
    @overload
    def __getitem__(self, position: slice) -> tuple[TopicPartition, ...]: ...
    def __getitem__(self, position: int | slice) -> TopicPartition | tuple[TopicPartition, ...]:
        return self.objects()[position]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OwnedPartitions):
            if other.space == self.space:
                return bool(np.array_equal(self.indexes, other.indexes))
            return self.objects() == other.objects()
        if isinstance(other, tuple):
            return self.objects() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.objects())

    def __repr__(self) -> str:
        return repr(self.objects())


_set_space = _slot_setter(OwnedPartitions, "space")
_set_indexes = _slot_setter(OwnedPartitions, "indexes")
_set_objects = _slot_setter(OwnedPartitions, "_objects")


class Assignment:
    """The result of one assignment round: member id -> partitions (sorted), every member of the
    group present, plus, for cooperative assignors, the partitions withheld this round because
    they change owner (their old owner must revoke them first; a follow-up rebalance hands them
    out).

    Built either from per-member partition tuples (``Assignment(partitions, withheld)``) or, by
    the array assignors, from arrays (:meth:`from_owners`): ``owners[p]`` is the index into
    ``member_ids`` of the member that gets partition ``p`` of ``space`` (-1: nobody), and
    ``withheld_indexes`` the withheld partitions' indexes. The :class:`TopicPartition` view
    (``partitions``, ``withheld``) of an array assignment is made on first use only, so callers
    that read the arrays (the request writer) never build one object per partition.

    >>> space = PartitionSpace(("a", "b"), (2, 1))
    >>> arrays = Assignment.from_owners(space, ("c0", "c1"), np.array([1, -1, 0]),
    ...                                 withheld_indexes=np.array([1]))
    >>> arrays.partitions["c1"], arrays.withheld
    ((TopicPartition(topic='a', partition=0),), (TopicPartition(topic='a', partition=1),))
    >>> arrays == Assignment({"c0": (TopicPartition("b", 0),), "c1": (TopicPartition("a", 0),)},
    ...                      (TopicPartition("a", 1),))
    True
    """

    __slots__ = ("_partitions", "_withheld", "member_ids", "owners", "space", "withheld_indexes")

    _partitions: Mapping[str, tuple[TopicPartition, ...]] | None
    _withheld: tuple[TopicPartition, ...] | None
    owners: np.ndarray | None
    space: PartitionSpace | None
    member_ids: tuple[str, ...] | None
    withheld_indexes: np.ndarray | None

    def __init__(
        self,
        partitions: Mapping[str, tuple[TopicPartition, ...]],
        withheld: tuple[TopicPartition, ...] = (),
    ) -> None:
        for name, value in (
            ("_partitions", partitions),
            ("_withheld", withheld),
            ("owners", None),
            ("space", None),
            ("member_ids", None),
            ("withheld_indexes", None),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def from_owners(
        cls,
        space: PartitionSpace,
        member_ids: tuple[str, ...],
        owners: np.ndarray,
        withheld_indexes: np.ndarray | None = None,
    ) -> Assignment:
        """The assignment giving partition ``p`` of ``space`` to ``member_ids[owners[p]]``
        (nobody when ``owners[p]`` is -1); ``withheld_indexes`` are withheld partitions."""
        made = cls.__new__(cls)
        if withheld_indexes is None:
            withheld = np.zeros(0, dtype=np.int64)
        else:
            withheld = np.asarray(withheld_indexes, dtype=np.int64)
            if withheld.size > 1:
                withheld = np.sort(withheld)
        _set_partitions(made, None)
        _set_withheld(made, None)
        _set_owners(made, np.asarray(owners, dtype=np.int64))
        _set_space_of(made, space)
        _set_member_ids(made, tuple(member_ids))
        _set_withheld_indexes(made, withheld)
        return made

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Assignment is immutable: cannot set {name!r}")

    @property
    def partitions(self) -> Mapping[str, tuple[TopicPartition, ...]]:
        """Member id -> its partitions in (topic, partition) order."""
        if self._partitions is None:
            assert self.space is not None and self.member_ids is not None
            assert self.owners is not None
            order, bounds = member_runs(self.owners, len(self.member_ids))
            if self.space._objects is not None or self.space.size <= _CACHED_OBJECTS:
                objects = self.space.objects()[order[bounds[0] :]].tolist()
            else:
                objects = self.space.partition_objects(order[bounds[0] :])
            base = int(bounds[0])
            made = {
                member_id: tuple(objects[bounds[i] - base : bounds[i + 1] - base])
                for i, member_id in enumerate(self.member_ids)
            }
            object.__setattr__(self, "_partitions", made)
        assert self._partitions is not None
        return self._partitions

    @property
    def withheld(self) -> tuple[TopicPartition, ...]:
        """Partitions withheld this round, in (topic, partition) order."""
        if self._withheld is None:
            assert self.space is not None and self.withheld_indexes is not None
            made = tuple(self.space.partition_objects(self.withheld_indexes))
            object.__setattr__(self, "_withheld", made)
        assert self._withheld is not None
        return self._withheld

    @property
    def num_withheld(self) -> int:
        """How many partitions are withheld this round (counted on ``withheld_indexes`` when
        the answer is kept as arrays, without making a :class:`TopicPartition` of each)."""
        if self.withheld_indexes is not None:
            return int(self.withheld_indexes.size)
        return len(self.withheld)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Assignment):
            return NotImplemented
        return self.partitions == other.partitions and self.withheld == other.withheld

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Assignment(partitions={self.partitions!r}, withheld={self.withheld!r})"

    @classmethod
    def build(
        cls,
        member_ids: Iterable[str],
        partitions: Mapping[str, Iterable[TopicPartition]],
        withheld: Iterable[TopicPartition] = (),
    ) -> Assignment:
        """Assignment with every member in ``member_ids`` (sorted) and sorted partition lists."""
        result = {
            member_id: tuple(sorted(map(TopicPartition._make, partitions.get(member_id, ()))))
            for member_id in sorted(member_ids)
        }
        return cls(result, tuple(sorted(withheld)))

    def to_json(self) -> dict[str, list[list[object]]]:
        return {
            member_id: [[tp.topic, tp.partition] for tp in tps]
            for member_id, tps in self.partitions.items()
        }


_set_partitions = _slot_setter(Assignment, "_partitions")
_set_withheld = _slot_setter(Assignment, "_withheld")
_set_owners = _slot_setter(Assignment, "owners")
_set_space_of = _slot_setter(Assignment, "space")
_set_member_ids = _slot_setter(Assignment, "member_ids")
_set_withheld_indexes = _slot_setter(Assignment, "withheld_indexes")


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Build a million small objects (partition tuples, a decoded request) without the cycle
    collector scanning them.

    They hold no reference cycles (and NamedTuples are never untracked), so each collector pass
    triggered while they are made, and the first pass after, would only walk them: the whole
    build would take several times longer. The collector is paused while they are made, then
    they are moved straight to the oldest generation (``freeze`` + ``unfreeze`` splice lists in
    O(1)), unless the program froze objects of its own.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def member_runs(owners: np.ndarray, num_members: int) -> tuple[np.ndarray, np.ndarray]:
    """Partition indexes grouped by owner, and where each owner's run starts: member ``i`` owns
    ``order[bounds[i]:bounds[i + 1]]`` (ascending); ``order[:bounds[0]]`` are owned by nobody.

    >>> order, bounds = member_runs(np.array([1, -1, 0, 1]), 2)
    >>> order.tolist(), bounds.tolist()
    ([1, 2, 0, 3], [1, 2, 4])
    """
    order = np.argsort(owners, kind="stable")
    bounds = np.searchsorted(owners[order], np.arange(num_members + 1))
    return order, bounds


_member_id_of = attrgetter("member_id")
_topics_of = attrgetter("topics")
_rack_of = attrgetter("rack")
_instance_id_of = attrgetter("instance_id")


def rejoin(group: Group, assignment: Assignment, generation: int) -> Group:
    """The next rebalance of ``group`` with unchanged membership: every member owns what
    ``assignment`` handed it (nothing when it got nothing; withheld partitions are owned by
    nobody, their old owner revoked them) in ``generation``. This is how a cooperative group
    settles: rebalance, revoke, rejoin with what you were given.

    >>> topics = (Topic("a", 2),)
    >>> group = Group(topics, (Member("c0", frozenset({"a"})), Member("c1", frozenset({"a"}))))
    >>> given = Assignment.build(["c0", "c1"], {"c0": [TopicPartition("a", 1)]})
    >>> [(m.member_id, m.owned_partitions, m.generation) for m in rejoin(group, given, 4).members]
    [('c0', (TopicPartition(topic='a', partition=1),), 4), ('c1', (), 4)]
    """
    owners = assignment.owners
    if (
        type(generation) is int
        and generation >= NO_GENERATION
        and owners is not None
        and assignment.member_ids == (columns := group.member_fields())[0]
    ):
        # an array assignment hands out sorted, distinct partitions: nothing to check again
        space = group.partition_space()
        if assignment.space is not None and assignment.space.numbers_alike(space):
            # over the group's own numbering: each member's run of indexes, no TopicPartition
            order, bounds = member_runs(owners, len(columns[0]))
            runs = order.astype(np.int64, copy=False)  # argsort's own array: no one else's
            runs.flags.writeable = False
            limits = bounds.tolist()
            claimed = runs[limits[0] :]
            claimers = owners[claimed]  # ascending: the runs are by owner
            claimers.flags.writeable = False
            return Group.checked(
                group.topics,
                Member.all_checked(
                    columns[0],
                    columns[1],
                    OwnedPartitions.all_checked(space, runs, limits[:-1], limits[1:]),
                    (generation,) * len(columns[0]),
                    columns[2],
                    columns[3],
                ),
                group._topic_by_name,
                space,
                group.derived(),
                (claimers, claimed),
                columns,
            )
        handed = assignment.partitions
        return Group.checked(
            group.topics,
            tuple(
                Member.checked(
                    member.member_id,
                    member.topics,
                    handed[member.member_id],
                    generation,
                    member.rack,
                    member.instance_id,
                )
                for member in group.members
            ),
            group._topic_by_name,
            group._space,
            group.derived(),
        )
    handed = assignment.partitions
    return Group(
        topics=group.topics,
        members=tuple(
            replace(
                member,
                owned_partitions=handed.get(member.member_id, ()),
                generation=generation,
            )
            for member in group.members
        ),
    )


def show(assignment: Assignment) -> dict[str, list[str]]:
    """Compact ``topic-partition`` rendering used by the worked examples."""
    return {
        member_id: [f"{tp.topic}-{tp.partition}" for tp in partitions]
        for member_id, partitions in assignment.partitions.items()
    }
