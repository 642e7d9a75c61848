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
    "Entry",
    "FenceBroker",
    "LeaderChange",
    "MetadataImage",
    "MetadataRecord",
    "PartitionChange",
    "RegisterBroker",
    "TopicRecord",
    "VotersChange",
    "decode_record",
    "encode_record",
]


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class PartitionChange:
    topic: str
    partition: int
    leader: int
    isr: tuple[int, ...]
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FenceBroker:
    """The active controller fences a broker that missed its session (KIP-631's
    ``BrokerRegistrationChangeRecord`` with ``fenced``); ``fenced=False`` unfences it."""

    broker_id: int
    fenced: bool = True


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The control record a new leader appends at its epoch start offset."""

    leader_id: int
    voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class VotersChange:
    """KIP-853's ``VotersRecord``: the voter set in force from this offset on (committed or not)."""

    voters: tuple[int, ...]


MetadataRecord = RegisterBroker | TopicRecord | PartitionChange | FenceBroker
Payload = MetadataRecord | LeaderChange | VotersChange


class Entry(NamedTuple):
    """One log entry: the leader epoch it was written in and what it holds."""

    epoch: int
    payload: Payload


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The applied metadata: registered brokers, topics (name, partitions) and partition state
    ((topic, partition) -> (leader, isr, leader_epoch)), each sorted."""

    brokers: tuple[int, ...]
    topics: tuple[tuple[str, int], ...]
    partitions: tuple[tuple[tuple[str, int], tuple[int, tuple[int, ...], int]], ...]
    fenced: tuple[int, ...] = ()

    @classmethod
    def empty(cls) -> MetadataImage:
        return cls((), (), ())

    def apply(self, payload: Payload) -> MetadataImage:
        """The image after ``payload`` (control entries leave it unchanged)."""
        if isinstance(payload, RegisterBroker):
            if payload.broker_id in self.brokers:
                return self
            return MetadataImage(
                tuple(sorted((*self.brokers, payload.broker_id))),
                self.topics,
                self.partitions,
                self.fenced,
            )
        if isinstance(payload, TopicRecord):
            topics = dict(self.topics)
            topics[payload.name] = payload.partitions
            return MetadataImage(
                self.brokers, tuple(sorted(topics.items())), self.partitions, self.fenced
            )
        if isinstance(payload, PartitionChange):
            partitions = dict(self.partitions)
            partitions[(payload.topic, payload.partition)] = (
                payload.leader,
                payload.isr,
                payload.leader_epoch,
            )
            return MetadataImage(
                self.brokers, self.topics, tuple(sorted(partitions.items())), self.fenced
            )
        if isinstance(payload, FenceBroker):
            fenced = set(self.fenced)
            (fenced.add if payload.fenced else fenced.discard)(payload.broker_id)
            return MetadataImage(self.brokers, self.topics, self.partitions, tuple(sorted(fenced)))
        return self

    def records(self) -> list[MetadataRecord]:
        """Records that rebuild this image from empty (what a snapshot holds)."""
        out: list[MetadataRecord] = [RegisterBroker(b) for b in self.brokers]
        out += [TopicRecord(name, count) for name, count in self.topics]
        out += [
            PartitionChange(topic, partition, leader, isr, leader_epoch)
            for (topic, partition), (leader, isr, leader_epoch) in self.partitions
        ]
        out += [FenceBroker(broker_id) for broker_id in self.fenced]
        return out


def encode_record(record: MetadataRecord) -> bytes:
    """The JSON bytes ktk writes as a metadata record's value (keys sorted, no spaces)."""
    if isinstance(record, RegisterBroker):
        body: dict[str, object] = {"type": "RegisterBroker", "broker_id": record.broker_id}
    elif isinstance(record, TopicRecord):
        body = {"type": "Topic", "name": record.name, "partitions": record.partitions}
    elif isinstance(record, FenceBroker):
        body = {"type": "FenceBroker", "broker_id": record.broker_id, "fenced": record.fenced}
    else:
        body = {
            "type": "PartitionChange",
            "topic": record.topic,
            "partition": record.partition,
            "leader": record.leader,
            "isr": list(record.isr),
            "leader_epoch": record.leader_epoch,
        }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _int(body: dict[str, object], name: str) -> int:
    value = body.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError("metadata record field must be an integer", field=name, value=value)
    return value


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
        return RegisterBroker(_int(body, "broker_id"))
    if kind == "FenceBroker":
        fenced = body.get("fenced")
        if not isinstance(fenced, bool):
            raise InputError("fenced must be true or false", field="fenced", value=fenced)
        return FenceBroker(_int(body, "broker_id"), fenced)
    if kind == "Topic":
        name = body.get("name")
        if not isinstance(name, str):
            raise InputError("topic name must be a string", field="name", value=name)
        return TopicRecord(name, _int(body, "partitions"))
    if kind == "PartitionChange":
        topic, isr = body.get("topic"), body.get("isr")
        if not isinstance(topic, str):
            raise InputError("topic must be a string", field="topic", value=topic)
        if not isinstance(isr, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in isr
        ):
            raise InputError("isr must be a list of integers", field="isr", value=isr)
        return PartitionChange(
            topic,
            _int(body, "partition"),
            _int(body, "leader"),
            tuple(isr),
            _int(body, "leader_epoch"),
        )
    raise InputError("unknown metadata record type", field="type", value=kind)
