"""The orders Kafka's Java client iterates in, so ktk's assignors hand out what Java does.

Java sorts strings by UTF-16 code units, iterates a ``HashMap`` in bucket order, and sorts group
members static-first by instance id; range and roundrobin follow these orders exactly.

>>> from assignors.model import Member
>>> members = [Member("b", frozenset({"t"})), Member("z", frozenset({"t"}), instance_id="i")]
>>> [member.member_id for member in java_member_order(members)]
['z', 'b']
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import numpy as np

from assignors.model import Member


def java_string_key(text: str) -> bytes:
    """Sort key that orders strings as Java's ``String.compareTo`` does (UTF-16 code units).

    >>> sorted(["\\uffff", "\\U0001F600"], key=java_string_key) == ["\\U0001F600", "\\uffff"]
    True
    """
    return text.encode("utf-16-be", "surrogatepass")


def java_hashmap_slot(key: str, size: int) -> int:
    """The bucket a ``java.util.HashMap`` of ``size`` entries (default capacity, grown as
    entries are added) keeps ``key`` in: its iteration order.

    >>> java_hashmap_slot("consumer-22-0013", 10), java_hashmap_slot("consumer-22-0014", 10)
    (15, 14)
    """
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    hash_code = _java_string_hash(key)
    return (hash_code ^ (hash_code >> 16)) & (capacity - 1)


@functools.lru_cache(maxsize=1 << 16)
def _java_string_hash(key: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit value (kept: replays order the same static
    members generation after generation)."""
    units = key.encode("utf-16-be", "surrogatepass")
    hash_code = 0
    for position in range(0, len(units), 2):
        hash_code = (31 * hash_code + int.from_bytes(units[position : position + 2])) & 0xFFFFFFFF
    return hash_code


def java_member_order(members: Iterable[Member]) -> list[Member]:
    """Members in the order Java's ``MemberInfo`` sorts them: static members first, by instance
    id, then dynamic members by member id. Java's sort is stable and compares only instance ids,
    so members sharing one (a broken group the coordinator would fence) keep the subscription
    map's HashMap order."""
    members = list(members)
    size = len(members)
    # ASCII strings sort the same by code point as by UTF-16 code unit: no encoding needed
    text_key = (
        _same
        if all(
            member.member_id.isascii()
            and (member.instance_id is None or member.instance_id.isascii())
            for member in members
        )
        else java_string_key
    )
    instance_ids = [member.instance_id for member in members if member.instance_id is not None]
    # the HashMap slot only breaks ties between members sharing an instance id
    shared = len(set(instance_ids)) < len(instance_ids)
    return sorted(
        members,
        key=lambda member: (
            (
                0,
                text_key(member.instance_id),
                java_hashmap_slot(member.member_id, size) if shared else 0,
            )
            if member.instance_id is not None
            else (1, text_key(member.member_id), 0)
        ),
    )


def _same(text: str) -> str:
    return text


def java_group_order(members: Sequence[Member]) -> tuple[list[Member], np.ndarray]:
    """:func:`java_member_order` of a group's members (sorted by member id, as
    :class:`~assignors.model.Group` keeps them) and, for each position of that order, the index
    of its member in ``members``. Without static members and with ASCII member ids, Java's
    order is the group's own: nothing to sort.

    >>> members = [Member("a", frozenset()), Member("b", frozenset(), instance_id="i")]
    >>> ordered, member_at = java_group_order(members)
    >>> [member.member_id for member in ordered], member_at.tolist()
    (['b', 'a'], [1, 0])
    """
    ordered, member_at = java_group_permutation(members)
    if member_at is None:
        return list(members), np.arange(len(members), dtype=np.int64)
    return list(ordered), member_at


def java_group_permutation(
    members: Sequence[Member], member_ids: Sequence[str] | None = None
) -> tuple[Sequence[Member], np.ndarray | None]:
    """:func:`java_group_order`, with None for the index array (and ``members`` itself as the
    order) when Java's order is the group's own: no member is static and every member id is
    ASCII (told apart with two list scans, not a test per member). ``member_ids``, when given,
    are the members' ids in the same order.

    >>> members = (Member("a", frozenset()), Member("b", frozenset()))
    >>> ordered, member_at = java_group_permutation(members)
    >>> ordered is members, member_at
    (True, None)
    """
    instance_ids = [member.instance_id for member in members]
    dynamic = instance_ids.count(None)
    if member_ids is None:
        member_ids = [member.member_id for member in members]
    ascii_ids = "".join(member_ids).isascii()
    if dynamic == len(members) and ascii_ids:
        return members, None
    static_ids = [instance_id for instance_id in instance_ids if instance_id is not None]
    if ascii_ids and "".join(static_ids).isascii() and len(set(static_ids)) == len(static_ids):
        # distinct ASCII instance ids: static members by instance id, then the others in the
        # group's own (member id) order
        static = sorted(
            [
                (instance_id, index)
                for index, instance_id in enumerate(instance_ids)
                if instance_id is not None
            ]
        )
        order = [index for _, index in static]
        if dynamic:
            order += [
                index for index, instance_id in enumerate(instance_ids) if instance_id is None
            ]
        return [members[index] for index in order], np.array(order, dtype=np.int64)
    ordered = java_member_order(members)
    index_of = {member.member_id: index for index, member in enumerate(members)}
    return ordered, np.asarray([index_of[member.member_id] for member in ordered], dtype=np.int64)


def subscriber_positions(ordered: Sequence[Member]) -> dict[str, np.ndarray]:
    """Topic name -> the positions in ``ordered`` of the members subscribing to it, ascending.

    Members sharing a subscription are gathered first, so a group where everyone subscribes to
    the same topics costs one array for all of them, not one entry per member and topic.

    >>> members = [Member("a", frozenset({"t", "u"})), Member("b", frozenset({"u"}))]
    >>> found = subscriber_positions(members)
    >>> found["t"].tolist(), found["u"].tolist()
    ([0], [0, 1])
    """
    by_subscription: dict[frozenset[str], list[int]] = {}
    for position, member in enumerate(ordered):
        by_subscription.setdefault(member.topics, []).append(position)
    # per topic, the positions of every subscription naming it, merged as Python lists (numpy
    # calls cost more than these few dozen integers)
    per_topic: dict[str, list[int]] = {}
    for topics, positions in by_subscription.items():
        for name in topics:
            found = per_topic.get(name)
            per_topic[name] = positions if found is None else found + positions
    made: dict[tuple[int, ...], np.ndarray] = {}
    result: dict[str, np.ndarray] = {}
    for name, positions in per_topic.items():
        key = tuple(sorted(positions))
        array = made.get(key)
        if array is None:
            array = made[key] = np.array(key, dtype=np.int64)
        result[name] = array
    return result
