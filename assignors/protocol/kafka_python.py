"""Run any ktk assignor inside a real kafka-python consumer.

``kafka_python_assignor("cooperative-sticky")`` (a registry name or an assignor instance)
returns an object implementing kafka-python's ``AbstractPartitionAssignor``; hand it to
``KafkaConsumer(partition_assignment_strategy=[...])``. When this consumer is the group leader,
kafka-python calls ``assign(cluster, members)``: each member's decoded subscription (topics,
owned partitions, generation, rack) and the cluster's partition counts become a
:class:`~assignors.model.Group`, the ktk assignor decides, and the answer goes back as
``ConsumerProtocolAssignment``s. On every member ``metadata(topics)`` reports what it owns and
``on_assignment`` remembers what it was given.

``recorder=`` (a :class:`~assignors.traces.capture.CaptureRecorder`, given to every member since
leadership moves) captures the group's history live: the leader keeps the group and its answer
in ``assign()`` and writes that generation's trace row in ``on_assignment()``, after SyncGroup
succeeded, so a generation whose sync failed is never written (each JoinGroup round starts with
``metadata()``, which forgets what an unfinished round kept).

What each member sends (ConsumerProtocolSubscription v3): its topics, ``owned_partitions`` and
``generation_id`` (what Java's cooperative-sticky reads), ``rack_id`` (``client.rack``), and for
an eager ``sticky`` assignor the previous assignment and generation in ``user_data`` too, in
Java's StickyAssignorUserData V1 layout (no version prefix), the only place a Java StickyAssignor
leader reads claims from; before its first assignment the member sends no user data, as Java's
does. The leader reads owned partitions from ``owned_partitions`` when present, else from
``user_data`` in Java's layout (V1 or V0) or kafka-python's (an int16 version first); the byte
layouts are in docs/assignors.md, "Sticky user data".

kafka-python is an optional dependency and is imported only when an adapter is built.

>>> class Cluster:  # the one thing assign() asks the cluster: partition ids per topic
...     def partitions_for_topic(self, topic):
...         return {"orders": {0, 1, 2}}.get(topic)
>>> leader = kafka_python_assignor("sticky")
>>> from kafka.protocol.consumer.group import JoinGroupResponse
>>> members = [JoinGroupResponse.JoinGroupResponseMember(
...     member_id=member_id, group_instance_id=None, metadata=leader.metadata({"orders"}))
...     for member_id in ("c0", "c1")]
>>> answer = leader.assign(Cluster(), members)
>>> {member_id: assignment.partitions() for member_id, assignment in sorted(answer.items())}
{'c0': [TopicPartition(topic='orders', partition=0), TopicPartition(topic='orders', \
partition=2)], 'c1': [TopicPartition(topic='orders', partition=1)]}
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterable
from functools import cache
from itertools import groupby, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from assignors.base import Assignor
from assignors.errors import InputError
from assignors.model import (
    NO_GENERATION,
    Assignment,
    Group,
    Member,
    Topic,
    TopicPartition,
    member_runs,
)
from assignors.protocol.wire import StickyUserData, decode_sticky_user_data, encode_sticky_user_data
from assignors.registry import get

if TYPE_CHECKING:
    from assignors.traces.capture import CaptureRecorder

log = logging.getLogger(__name__)

SUBSCRIPTION_VERSION = 3  # owned partitions (v1), generation id (v2), rack id (v3)
ASSIGNMENT_VERSION = 0

ReplicaRacks = Callable[[Any, str, int], frozenset[str] | None]


def kafka_python_assignor(
    assignor: str | Assignor,
    *,
    rack: str | None = None,
    replica_racks: ReplicaRacks | None = None,
    recorder: CaptureRecorder | None = None,
) -> Any:
    """A kafka-python ``AbstractPartitionAssignor`` running ``assignor`` (name or instance).

    ``rack`` is this consumer's rack (use the same value as ``client_rack``); ``replica_racks``
    (``(cluster, topic, partition) -> racks``) enables rack-aware assignment on the leader: by
    default the racks of each partition's replicas are read from the cluster metadata when
    kafka-python has them. ``recorder`` appends a trace row for every generation this
    consumer leads (see the module docstring).
    """
    if rack is not None and not isinstance(rack, str):
        raise InputError("must be a string (client.rack) or None", field="rack", value=rack)
    resolved = get(assignor) if isinstance(assignor, str) else assignor
    return _adapter_class()(resolved, rack=rack, replica_racks=replica_racks, recorder=recorder)


@cache
def _adapter_class() -> type:
    from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
    )

    class KtkPartitionAssignor(AbstractPartitionAssignor):
        """A ktk assignor behind kafka-python's assignor interface (one instance per consumer:
        it remembers this member's last assignment and generation)."""

        def __init__(
            self,
            assignor: Assignor,
            *,
            rack: str | None,
            replica_racks: ReplicaRacks | None,
            recorder: CaptureRecorder | None = None,
        ) -> None:
            self.assignor = assignor
            self.rack = rack
            self.replica_racks = replica_racks or _cluster_replica_racks
            self.owned: tuple[TopicPartition, ...] = ()
            self.generation = NO_GENERATION
            self.recorder = recorder
            # (group, answer, time) of the round this member leads, until its sync completes
            self.pending: tuple[Group, dict[str, tuple[TopicPartition, ...]], int] | None = None

        @property
        def name(self) -> str:
            return self.assignor.name

        def supported_protocols(self) -> list[Any]:
            if self.assignor.rebalance_protocol == "cooperative":
                return [RebalanceProtocol.COOPERATIVE]
            return [RebalanceProtocol.EAGER]

        def metadata(self, topics: Iterable[str]) -> Any:
            self.pending = None  # a new JoinGroup round: an unfinished one is never recorded
            by_topic = _by_topic(self.owned)
            user_data = b""
            if self.assignor.rebalance_protocol == "eager" and self.assignor.name == "sticky":
                user_data = sticky_user_data(self.owned, self.generation)
            elif self.assignor.rebalance_protocol == "cooperative":
                user_data = struct.pack(">i", self.generation)  # Java's cooperative user data
            return ConsumerProtocolSubscription(
                version=SUBSCRIPTION_VERSION,
                topics=sorted(topics),
                user_data=user_data,
                owned_partitions=[
                    ConsumerProtocolSubscription.TopicPartition(topic=topic, partitions=parts)
                    for topic, parts in by_topic
                ],
                generation_id=self.generation,
                rack_id=self.rack,
            )

        def on_assignment(self, assignment: Any, generation: int) -> None:
            self.owned = tuple(
                TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()
            )
            self.generation = generation
            pending, self.pending = self.pending, None
            if pending is not None and self.recorder is not None:
                group, answer, timestamp_ms = pending
                try:
                    self.recorder.record(
                        generation,
                        group,
                        answer,
                        protocol=self.name,
                        timestamp_ms=timestamp_ms,
                    )
                except (OSError, InputError) as error:  # never break the consumer over a capture
                    log.error("capture of generation %d failed: %s", generation, error)

        def assign(self, cluster: Any, members: Iterable[Any]) -> dict[str, Any]:
            group = group_from_members(cluster, members, self.replica_racks)
            answer = self.assignor.assign(group)
            if self.recorder is not None:
                self.pending = (group, dict(answer.partitions), int(time.time() * 1000))
            withheld = answer.num_withheld
            if withheld:
                log.info(
                    "%s withholds %d partitions until their owners revoke them",
                    self.name,
                    withheld,
                )
            return {
                member_id: ConsumerProtocolAssignment(ASSIGNMENT_VERSION, by_topic, b"")
                for member_id, by_topic in _answer_by_topic(answer).items()
            }

    return KtkPartitionAssignor


def _answer_by_topic(answer: Assignment) -> dict[str, list[tuple[str, list[int]]]]:
    """Member id -> [(topic, sorted partition ids)]; an answer kept as arrays is cut per member
    and topic on its owner array, without a TopicPartition per partition.

    >>> import numpy as np
    >>> from assignors.model import PartitionSpace
    >>> space = PartitionSpace(("a", "b"), (2, 3))
    >>> _answer_by_topic(Assignment.from_owners(space, ("c0", "c1"), np.array([1, 0, 1, 1, -1])))
    {'c0': [('a', [1])], 'c1': [('a', [0]), ('b', [0, 1])]}
    """
    owners, space, member_ids = answer.owners, answer.space, answer.member_ids
    if owners is None or space is None or member_ids is None:
        return {member_id: _by_topic(tps) for member_id, tps in answer.partitions.items()}
    order, bounds = member_runs(owners, len(member_ids))
    positions, numbers = space.locate(order)
    # a new run starts where the member or the topic changes
    result: dict[str, list[tuple[str, list[int]]]] = {member_id: [] for member_id in member_ids}
    if not order.size:
        return result
    member_of = np.concatenate(
        [np.full(int(bounds[0]), -1), np.repeat(np.arange(len(member_ids)), np.diff(bounds))]
    )
    cut = np.flatnonzero((np.diff(positions) != 0) | (np.diff(member_of) != 0)) + 1
    starts = np.concatenate([[0], cut]).astype(np.int64)
    stops = np.append(starts[1:], order.size)
    numbers_list = numbers.tolist()
    names = space.topic_names
    for start, stop, member, position in zip(
        starts.tolist(),
        stops.tolist(),
        member_of[starts].tolist(),
        positions[starts].tolist(),
        strict=True,
    ):
        if member >= 0:
            result[member_ids[member]].append((names[position], numbers_list[start:stop]))
    return result


def sticky_user_data(owned: Iterable[TopicPartition], generation: int) -> bytes:
    """What an eager ``sticky`` member sends as ``user_data``: Java's StickyAssignorUserData V1
    (owned partitions by topic, then the generation they were assigned in), topics and
    partitions sorted; empty before the member's first assignment (Java sends none then).

    >>> sticky_user_data([TopicPartition("orders", 2), TopicPartition("orders", 0)], 5).hex()
    '0000000100066f726465727300000002000000000000000200000005'
    >>> sticky_user_data((), NO_GENERATION)
    b''
    """
    previous = tuple(sorted(owned))
    if not previous and generation == NO_GENERATION:
        return b""
    return encode_sticky_user_data(StickyUserData(previous, generation))


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """[(topic, sorted partition ids)] in topic order, the wire's layout."""
    ordered = sorted(partitions)
    return [(topic, [tp[1] for tp in run]) for topic, run in groupby(ordered, itemgetter(0))]


def group_from_members(
    cluster: Any, members: Iterable[Any], replica_racks: ReplicaRacks | None = None
) -> Group:
    """The :class:`Group` a kafka-python leader sees: subscriptions and claims from each
    ``JoinGroupResponseMember`` (metadata decoded or raw bytes), partition counts and replica
    racks from ``cluster``. Topics the cluster does not know are left out (not assigned)."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    group_members = []
    for member in members:
        subscription = member.metadata
        if isinstance(subscription, bytes | bytearray | memoryview):
            subscription = ConsumerProtocolSubscription.decode(bytes(subscription))
        owned, generation = _claims(subscription)
        group_members.append(
            Member(
                member_id=member.member_id,
                topics=frozenset(subscription.topics),
                owned_partitions=owned,
                generation=generation,
                rack=getattr(subscription, "rack_id", None) or None,
                instance_id=getattr(member, "group_instance_id", None) or None,
            )
        )
    topics = []
    for name in sorted(set().union(*(m.topics for m in group_members)) if group_members else ()):
        partition_ids = cluster.partitions_for_topic(name)
        if not partition_ids:
            continue
        count = max(partition_ids) + 1
        racks = None
        if replica_racks is not None:
            found = [replica_racks(cluster, name, partition) for partition in range(count)]
            if any(found):
                racks = tuple(r or frozenset() for r in found)
        topics.append(Topic(name, count, racks))
    return Group(topics=tuple(topics), members=tuple(group_members))


def _claims(subscription: Any) -> tuple[tuple[TopicPartition, ...], int]:
    """(owned partitions, generation) from a subscription: the v1+ fields, else user data.
    Negative partition numbers name no partition and are dropped (no assignor honours them)."""
    generation = getattr(subscription, "generation_id", None)
    generation = NO_GENERATION if generation is None else generation
    claims: list[TopicPartition] = []
    for entry in getattr(subscription, "owned_partitions", None) or ():
        numbers = entry.partitions
        if numbers and min(numbers) < 0:
            numbers = [number for number in numbers if number >= 0]
        # tuple.__new__ builds the NamedTuple in C, without its Python-level __new__
        claims.extend(map(tuple.__new__, repeat(TopicPartition), zip(repeat(entry.topic), numbers)))
    owned = tuple(claims)
    user_data = getattr(subscription, "user_data", None) or b""
    if owned or len(user_data) <= 4:
        return owned, generation
    try:
        decoded = decode_sticky_user_data(bytes(user_data))
    except InputError as error:
        log.warning("ignoring unreadable sticky user data (%d bytes): %s", len(user_data), error)
        return owned, generation
    claimed = decoded.previous_assignment
    if claimed and min(map(itemgetter(1), claimed)) < 0:
        claimed = tuple(tp for tp in claimed if tp.partition >= 0)
    return claimed, NO_GENERATION if decoded.generation is None else decoded.generation


def _cluster_replica_racks(cluster: Any, topic: str, partition: int) -> frozenset[str] | None:
    """Racks of a partition's replicas from kafka-python's ClusterMetadata, when it has them
    (its partition metadata carries replica node ids; brokers carry their rack)."""
    partitions = getattr(cluster, "_partitions", None)
    if not isinstance(partitions, dict):
        return None
    metadata = partitions.get(topic, {}).get(partition)
    nodes = getattr(metadata, "replica_nodes", None)
    if not nodes:
        return None
    racks = set()
    for node in nodes:
        broker = cluster.broker_metadata(node)
        rack = getattr(broker, "rack", None)
        if rack:
            racks.add(rack)
    return frozenset(racks) or None
