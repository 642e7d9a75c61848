"""Hypothesis strategies for random consumer groups, shared by every assignor's tests.

``groups()`` draws a :class:`~assignors.model.Group` whose shape is chosen by keyword knobs
(each ``None`` lets hypothesis choose):

- ``subscription``: ``"uniform"`` (every member subscribes to the same topics) or
  ``"heterogeneous"`` (each member its own non-empty subset);
- ``racks``: consumer racks and replica racks (KIP-881), with some members and topics lacking them;
- ``static``: some members carry a ``group.instance.id`` whose order differs from the member ids;
- ``owned``: members carry partitions from an earlier round with a generation, including stale
  claims (an older generation claiming what a newer one owns), same-generation double claims,
  claims on topics the group does not know and on partitions beyond a shrunken topic;
- ``unknown_topics``: members may subscribe to topics the group does not list.

``topic_claim_moves(max_members, load_range)`` draws one topic's claim-moving problem for the
sticky engine's balancing step (members, claims held, free partitions placed, loads, rank).

``next_round(group, assignment)`` builds the following rebalance with unchanged membership: every
member owns what it was given, one generation later (the input of idempotence checks).

>>> from hypothesis import given, settings
>>> @settings(max_examples=5, database=None)
... @given(groups(max_members=3, owned=True))
... def check(group):
...     assert len({member.member_id for member in group.members}) == len(group.members)
>>> check()
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from assignors.model import (
    NO_GENERATION,
    Assignment,
    Group,
    Member,
    Topic,
    TopicPartition,
    rejoin,
)

RACKS = ("r0", "r1", "r2")
UNKNOWN_TOPICS = ("gone-0", "gone-1")

Subscription = str  # "uniform" | "heterogeneous"


def _maybe(draw: st.DrawFn, choice: bool | None) -> bool:
    return draw(st.booleans()) if choice is None else choice


@st.composite
def topics(
    draw: st.DrawFn,
    *,
    min_topics: int = 1,
    max_topics: int = 5,
    max_partitions: int = 10,
    racks: bool = False,
    weights: bool = False,
) -> tuple[Topic, ...]:
    """Topics ``t0..tN`` (names drawn out of order) with 1..max_partitions partitions each; with
    ``racks`` most topics list replica racks per partition (sometimes an empty set)."""
    indexes = draw(
        st.lists(
            st.integers(0, 3 * max_topics), min_size=min_topics, max_size=max_topics, unique=True
        )
    )
    drawn: list[Topic] = []
    for index in indexes:
        num_partitions = draw(st.integers(1, max_partitions))
        replica_racks = None
        if racks and draw(st.integers(0, 4)) > 0:
            replica_racks = tuple(
                draw(st.frozensets(st.sampled_from(RACKS), min_size=0, max_size=2))
                for _ in range(num_partitions)
            )
        partition_weights = None
        if weights and draw(st.booleans()):
            partition_weights = tuple(
                draw(st.floats(0.0, 100.0, allow_nan=False)) for _ in range(num_partitions)
            )
        drawn.append(Topic(f"t{index}", num_partitions, replica_racks, partition_weights))
    return tuple(drawn)


@st.composite
def groups(
    draw: st.DrawFn,
    *,
    min_members: int = 1,
    max_members: int = 8,
    min_topics: int = 1,
    max_topics: int = 5,
    max_partitions: int = 10,
    subscription: Subscription | None = None,
    racks: bool | None = None,
    static: bool | None = None,
    owned: bool | None = None,
    unknown_topics: bool | None = None,
    weights: bool = False,
) -> Group:
    """A random group; see the module docstring for the knobs."""
    with_racks = _maybe(draw, racks)
    with_static = _maybe(draw, static)
    with_owned = _maybe(draw, owned)
    with_unknown = _maybe(draw, unknown_topics)
    if subscription is None:
        subscription = draw(st.sampled_from(("uniform", "heterogeneous")))

    group_topics = draw(
        topics(
            min_topics=min_topics,
            max_topics=max_topics,
            max_partitions=max_partitions,
            racks=with_racks,
            weights=weights,
        )
    )
    topic_names = sorted(topic.name for topic in group_topics)
    extra_names = list(UNKNOWN_TOPICS) if with_unknown else []

    # numeric suffixes make string order differ from numeric order ("consumer-10" < "consumer-9")
    member_numbers = draw(
        st.lists(st.integers(0, 999), min_size=min_members, max_size=max_members, unique=True)
    )
    num_members = len(member_numbers)
    instance_numbers = draw(st.permutations(range(num_members))) if num_members else []

    if subscription == "uniform":
        shared = frozenset(topic_names) | frozenset(
            draw(st.lists(st.sampled_from(extra_names), max_size=1)) if extra_names else ()
        )
        subscriptions = [shared] * num_members
    else:
        candidates = topic_names + extra_names
        subset = st.lists(st.sampled_from(candidates), min_size=1, max_size=len(candidates))
        subscriptions = [frozenset(draw(subset)) for _ in range(num_members)]

    claims = _claims(draw, group_topics, num_members, extra_names) if with_owned else {}
    generations = _generations(draw, num_members) if with_owned else [NO_GENERATION] * num_members

    members = []
    for position, number in enumerate(member_numbers):
        rack = draw(st.one_of(st.none(), st.sampled_from(RACKS))) if with_racks else None
        instance_id = None
        if with_static and draw(st.integers(0, 2)) > 0:
            instance_id = f"pod-{instance_numbers[position]}"
        owned_partitions = tuple(claims.get(position, ()))
        members.append(
            Member(
                member_id=f"consumer-{number}",
                topics=subscriptions[position],
                owned_partitions=owned_partitions,
                generation=generations[position] if owned_partitions else NO_GENERATION,
                rack=rack,
                instance_id=instance_id,
            )
        )
    return Group(topics=group_topics, members=tuple(members))


def _generations(draw: st.DrawFn, num_members: int) -> list[int]:
    """Most members at the current generation, some one or more behind (stale claims)."""
    current = draw(st.integers(2, 6))
    return [current - draw(st.sampled_from((0, 0, 0, 1, 2))) for _ in range(num_members)]


def _claims(
    draw: st.DrawFn, group_topics: Sequence[Topic], num_members: int, extra_names: Sequence[str]
) -> dict[int, list[TopicPartition]]:
    """Member position -> claimed partitions: a previous owner for most partitions, a second
    claimant for some, plus claims on unknown topics and on partitions past a topic's end."""
    if num_members == 0:
        return {}
    claims: dict[int, list[TopicPartition]] = {}
    member_position = st.integers(0, num_members - 1)
    for topic in group_topics:
        for partition in range(topic.num_partitions):
            roll = draw(st.integers(0, 9))
            if roll == 0:
                continue  # nobody owned it (a new partition)
            tp = TopicPartition(topic.name, partition)
            first = draw(member_position)
            claims.setdefault(first, []).append(tp)
            if roll == 9:
                second = draw(member_position)
                if second != first:
                    claims.setdefault(second, []).append(tp)
        if draw(st.integers(0, 4)) == 0:
            # the topic had more partitions in an earlier round
            claims.setdefault(draw(member_position), []).append(
                TopicPartition(topic.name, topic.num_partitions + draw(st.integers(0, 2)))
            )
    for name in extra_names:
        if draw(st.booleans()):
            claims.setdefault(draw(member_position), []).append(TopicPartition(name, 0))
    return claims


def next_round(group: Group, assignment: Assignment) -> Group:
    """The same membership one generation later, every member owning what ``assignment`` gave it
    (withheld partitions are owned by nobody: their old owner revoked them)."""
    generation = max((member.generation for member in group.members), default=NO_GENERATION)
    return rejoin(group, assignment, max(generation, 0) + 1)


@st.composite
def topic_claim_moves(
    draw: st.DrawFn, max_members: int, load_range: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One topic's claim-moving problem for the sticky engine's balancing step: (members
    subscribing, the claims each holds, the free partitions placed on each, every member's load
    drawn from ``load_range``, the tie-break rank). A topic's kept claims and free partitions
    are part of its subscribers' loads."""
    num_members = draw(st.integers(1, max_members))
    loads = np.asarray(
        draw(st.lists(st.integers(*load_range), min_size=num_members, max_size=num_members)),
        dtype=np.int64,
    )
    members = np.asarray(
        sorted(draw(st.sets(st.integers(0, num_members - 1), min_size=1))), dtype=np.int64
    )
    holding = np.asarray(
        [draw(st.integers(0, int(loads[m]))) for m in members.tolist()], dtype=np.int64
    )
    placed = np.asarray(
        [draw(st.integers(0, int(loads[m] - h))) for m, h in zip(members, holding, strict=True)],
        dtype=np.int64,
    )
    rank = np.asarray(draw(st.permutations(range(num_members))), dtype=np.int64)
    return members, holding, placed, loads, rank
