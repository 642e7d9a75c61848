"""Metadata records of ``__cluster_metadata`` and the in-memory metadata image they build.

Kafka's controllers write typed records (``RegisterBrokerRecord``, ``TopicRecord``,
``PartitionChangeRecord`` ...) in its own message schema; ktk keeps three simple typed records
and encodes each as the JSON bytes of a record value (``encode_record`` / ``decode_record``).
Two control entries also live in the log, as in Kafka: ``LeaderChange`` (written by every new
leader at the start of its epoch) and ``VotersChange`` (KIP-853, the voter set from its offset
on). A ``MetadataImage`` is what a node has applied: replaying the same records in the same
order gives the same image.

>>> image = MetadataImage.empty()
>>> for record in [RegisterBroker(1), TopicRecord("orders", 2),
...                PartitionChange("orders", 0, leader=1, isr=(1,), leader_epoch=0)]:
...     image = image.apply(record)
>>> image.brokers, image.topics
((1,), (('orders', 2),))
>>> decode_record(encode_record(TopicRecord("orders", 2)))
TopicRecord(name='orders', partitions=2)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from ktkbase import jsonsafe
from replication.errors import InputError

__all__ = [
    "ControlledShutdown",
    "Entry",
    "FenceBroker",
    "LeaderChange",
    "MetadataImage",
    "MetadataRecord",
    "PartitionChange",
    "PartitionState",
    "RegisterBroker",
    "TopicRecord",
    "VotersChange",
    "decode_record",
    "encode_record",
]


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """A broker registration (``RegisterBrokerRecord``). ``broker_epoch`` is the offset the
    record is written at, as ``ClusterControlManager.registerBroker`` is handed the next write
    offset (-1: none given); a new incarnation registers ``fenced`` and is unfenced once it has
    caught up with the metadata log (``BrokerHeartbeatManager``)."""

    broker_id: int
    broker_epoch: int = -1
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition's new state (``PartitionRecord`` / ``PartitionChangeRecord``).

    ``replicas`` is the assignment (empty: unchanged, or the ISR for a new partition); ``elr``
    and ``last_known_elr`` are KIP-966's eligible leader replicas; ``recovering`` is KIP-704's
    leader recovery state after an unclean election; ``partition_epoch`` is -1 for "one more
    than before" (0 for a new partition), as replaying a ``PartitionChangeRecord`` bumps it;
    ``adding_replicas`` and ``removing_replicas`` are a KIP-455 reassignment in progress."""

    topic: str
    partition: int
    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    recovering: bool = False
    partition_epoch: int = -1
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FenceBroker:
    """The active controller fences a broker that missed its session (KIP-631's
    ``BrokerRegistrationChangeRecord`` with ``fenced``); ``fenced=False`` unfences it."""

    broker_id: int
    fenced: bool = True


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    """``BrokerRegistrationChangeRecord`` with ``inControlledShutdown``: the broker is leaving;
    it may not lead or join an ISR until it registers again or is unfenced."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The control record a new leader appends at its epoch start offset."""

    leader_id: int
    voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class VotersChange:
    """KIP-853's ``VotersRecord``: the voter set in force from this offset on (committed or not)."""

    voters: tuple[int, ...]


MetadataRecord = RegisterBroker | TopicRecord | PartitionChange | FenceBroker | ControlledShutdown
Payload = MetadataRecord | LeaderChange | VotersChange


class Entry(NamedTuple):
    """One log entry: the leader epoch it was written in and what it holds."""

    epoch: int
    payload: Payload


class PartitionState(NamedTuple):
    """One partition as the metadata image holds it (``PartitionRegistration``)."""

    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    recovering: bool = False
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The applied metadata: registered brokers, topics (name, partitions), partition state
    ((topic, partition) -> :class:`PartitionState`), fenced brokers, broker epochs (broker ->
    epoch of its registration) and brokers in controlled shutdown, each sorted."""

    brokers: tuple[int, ...]
    topics: tuple[tuple[str, int], ...]
    partitions: tuple[tuple[tuple[str, int], PartitionState], ...]
    fenced: tuple[int, ...] = ()
    broker_epochs: tuple[tuple[int, int], ...] = ()
    shutting_down: tuple[int, ...] = ()

    @classmethod
    def empty(cls) -> MetadataImage:
        return cls((), (), ())

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        for key, state in self.partitions:
            if key == (topic, partition):
                return state
        return None

    def broker_epoch(self, broker_id: int) -> int:
        """The epoch of ``broker_id``'s registration (-1: none)."""
        for broker, epoch in self.broker_epochs:
            if broker == broker_id:
                return epoch
        return -1

    def is_acceptable(self, broker_id: int) -> bool:
        """May lead or join an ISR: registered, unfenced, not in controlled shutdown
        (``PartitionChangeBuilder.isAcceptableLeader``)."""
        return (
            broker_id in self.brokers
            and broker_id not in self.fenced
            and broker_id not in self.shutting_down
        )

    def apply(self, payload: Payload) -> MetadataImage:
        """The image after ``payload`` (control entries leave it unchanged)."""
        if isinstance(payload, RegisterBroker):
            broker_id = payload.broker_id
            if broker_id in self.brokers and payload.broker_epoch == -1 and not payload.fenced:
                return self
            epochs = dict(self.broker_epochs)
            epochs[broker_id] = payload.broker_epoch
            fenced = set(self.fenced)
            (fenced.add if payload.fenced else fenced.discard)(broker_id)
            return MetadataImage(
                tuple(sorted({*self.brokers, broker_id})),
                self.topics,
                self.partitions,
                tuple(sorted(fenced)),
                tuple(sorted((b, e) for b, e in epochs.items() if e != -1)),
                tuple(b for b in self.shutting_down if b != broker_id),
            )
        if isinstance(payload, TopicRecord):
            topics = dict(self.topics)
            topics[payload.name] = payload.partitions
            return MetadataImage(
                self.brokers,
                tuple(sorted(topics.items())),
                self.partitions,
                self.fenced,
                self.broker_epochs,
                self.shutting_down,
            )
        if isinstance(payload, PartitionChange):
            partitions = dict(self.partitions)
            key = (payload.topic, payload.partition)
            before = partitions.get(key)
            replicas = payload.replicas or (before.replicas if before else payload.isr)
            if payload.partition_epoch != -1:
                partition_epoch = payload.partition_epoch
            else:
                partition_epoch = before.partition_epoch + 1 if before else 0
            partitions[key] = PartitionState(
                payload.leader,
                payload.isr,
                payload.leader_epoch,
                replicas,
                payload.elr,
                payload.last_known_elr,
                payload.recovering,
                partition_epoch,
                payload.adding_replicas,
                payload.removing_replicas,
            )
            return MetadataImage(
                self.brokers,
                self.topics,
                tuple(sorted(partitions.items())),
                self.fenced,
                self.broker_epochs,
                self.shutting_down,
            )
        if isinstance(payload, FenceBroker):
            fenced = set(self.fenced)
            (fenced.add if payload.fenced else fenced.discard)(payload.broker_id)
            shutting_down = self.shutting_down
            if not payload.fenced:
                shutting_down = tuple(b for b in shutting_down if b != payload.broker_id)
            return MetadataImage(
                self.brokers,
                self.topics,
                self.partitions,
                tuple(sorted(fenced)),
                self.broker_epochs,
                shutting_down,
            )
        if isinstance(payload, ControlledShutdown):
            return MetadataImage(
                self.brokers,
                self.topics,
                self.partitions,
                self.fenced,
                self.broker_epochs,
                tuple(sorted({*self.shutting_down, payload.broker_id})),
            )
        return self

    def records(self) -> list[MetadataRecord]:
        """Records that rebuild this image from empty (what a snapshot holds)."""
        out: list[MetadataRecord] = [RegisterBroker(b, self.broker_epoch(b)) for b in self.brokers]
        out += [TopicRecord(name, count) for name, count in self.topics]
        out += [
            PartitionChange(
                topic,
                number,
                state.leader,
                state.isr,
                state.leader_epoch,
                state.replicas if state.replicas != state.isr else (),
                state.elr,
                state.last_known_elr,
                state.recovering,
                state.partition_epoch if state.partition_epoch else -1,
                state.adding_replicas,
                state.removing_replicas,
            )
            for (topic, number), state in self.partitions
        ]
        out += [FenceBroker(broker_id) for broker_id in self.fenced]
        out += [ControlledShutdown(broker_id) for broker_id in self.shutting_down]
        return out


def encode_record(record: MetadataRecord) -> bytes:
    """The JSON bytes ktk writes as a metadata record's value (keys sorted, no spaces; fields
    at their defaults left out, so older records read the same)."""
    body: dict[str, object]
    if isinstance(record, RegisterBroker):
        body = {"type": "RegisterBroker", "broker_id": record.broker_id}
        if record.broker_epoch != -1:
            body["broker_epoch"] = record.broker_epoch
        if record.fenced:
            body["fenced"] = True
    elif isinstance(record, TopicRecord):
        body = {"type": "Topic", "name": record.name, "partitions": record.partitions}
    elif isinstance(record, FenceBroker):
        body = {"type": "FenceBroker", "broker_id": record.broker_id, "fenced": record.fenced}
    elif isinstance(record, ControlledShutdown):
        body = {"type": "ControlledShutdown", "broker_id": record.broker_id}
    else:
        body = {
            "type": "PartitionChange",
            "topic": record.topic,
            "partition": record.partition,
            "leader": record.leader,
            "isr": list(record.isr),
            "leader_epoch": record.leader_epoch,
        }
        for name in ("replicas", "elr", "last_known_elr", "adding_replicas", "removing_replicas"):
            value = getattr(record, name)
            if value:
                body[name] = list(value)
        if record.recovering:
            body["recovering"] = True
        if record.partition_epoch != -1:
            body["partition_epoch"] = record.partition_epoch
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _int(body: dict[str, object], name: str, default: int | None = None) -> int:
    value = body.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError("metadata record field must be an integer", field=name, value=value)
    return value


def _bool(body: dict[str, object], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InputError(f"{name} must be true or false", field=name, value=value)
    return value


def _ids(body: dict[str, object], name: str) -> tuple[int, ...]:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise InputError(f"{name} must be a list of integers", field=name, value=value)
    return tuple(value)


def decode_record(value: bytes) -> MetadataRecord:
    """The record ``encode_record`` wrote; anything else raises :class:`InputError`."""
    try:
        body = jsonsafe.loads(value.decode("utf-8"), source=None)
    except (UnicodeDecodeError, jsonsafe.JSONInputError):
        raise InputError("metadata record value is not JSON", field="value") from None
    if not isinstance(body, dict):
        raise InputError("metadata record value is not a JSON object", field="value")
    kind = body.get("type")
    if kind == "RegisterBroker":
        return RegisterBroker(
            _int(body, "broker_id"), _int(body, "broker_epoch", -1), _bool(body, "fenced")
        )
    if kind == "FenceBroker":
        if not isinstance(body.get("fenced"), bool):
            raise InputError(
                "fenced must be true or false", field="fenced", value=body.get("fenced")
            )
        return FenceBroker(_int(body, "broker_id"), _bool(body, "fenced"))
    if kind == "ControlledShutdown":
        return ControlledShutdown(_int(body, "broker_id"))
    if kind == "Topic":
        name = body.get("name")
        if not isinstance(name, str):
            raise InputError("topic name must be a string", field="name", value=name)
        return TopicRecord(name, _int(body, "partitions"))
    if kind == "PartitionChange":
        topic = body.get("topic")
        if not isinstance(topic, str):
            raise InputError("topic must be a string", field="topic", value=topic)
        if "isr" not in body:
            raise InputError("isr must be a list of integers", field="isr", value=None)
        return PartitionChange(
            topic,
            _int(body, "partition"),
            _int(body, "leader"),
            _ids(body, "isr"),
            _int(body, "leader_epoch"),
            _ids(body, "replicas"),
            _ids(body, "elr"),
            _ids(body, "last_known_elr"),
            _bool(body, "recovering"),
            _int(body, "partition_epoch", -1),
            _ids(body, "adding_replicas"),
            _ids(body, "removing_replicas"),
        )
    raise InputError("unknown metadata record type", field="type", value=kind)
