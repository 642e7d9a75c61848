"""The orders Kafka's Java client iterates in, so ktk's assignors hand out what Java does.

Java sorts strings by UTF-16 code units, iterates a ``HashMap`` in bucket order, and sorts group
members static-first by instance id; range and roundrobin follow these orders exactly.

>>> from assignors.model import Member
>>> members = [Member("b", frozenset({"t"})), Member("z", frozenset({"t"}), instance_id="i")]
>>> [member.member_id for member in java_member_order(members)]
['z', 'b']
"""

from __future__ import annotations

from collections.abc import Iterable

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
    units = key.encode("utf-16-be", "surrogatepass")
    hash_code = 0
    for position in range(0, len(units), 2):
        hash_code = (31 * hash_code + int.from_bytes(units[position : position + 2])) & 0xFFFFFFFF
    return (hash_code ^ (hash_code >> 16)) & (capacity - 1)


def java_member_order(members: Iterable[Member]) -> list[Member]:
    """Members in the order Java's ``MemberInfo`` sorts them: static members first, by instance
    id, then dynamic members by member id. Java's sort is stable and compares only instance ids,
    so members sharing one (a broken group the coordinator would fence) keep the subscription
    map's HashMap order."""
    members = list(members)
    return sorted(
        members,
        key=lambda member: (
            (
                0,
                java_string_key(member.instance_id),
                java_hashmap_slot(member.member_id, len(members)),
            )
            if member.instance_id is not None
            else (1, java_string_key(member.member_id), 0)
        ),
    )
