"""Rebalance traces (format v1): the recorded history of consumer groups, one generation a row.

A trace is one group's ordered generations. Files are JSON Lines (optionally gzipped) or Parquet
with the same columns; rows of one trace may be spread over many files, so a trace is put
together from all its rows and sorted by generation number.

>>> row = {"trace_id": "payments", "generation": 1,
...        "topics": [{"name": "orders", "partitions": 2}],
...        "members": [{"member_id": "c-1", "topics": ["orders"]},
...                    {"member_id": "c-2", "instance_id": "pod-2", "topics": ["orders"]}]}
>>> generation = parse_generation(row, "payments.jsonl", 1)
>>> [member.identity for member in generation.members]
['c-1', 'pod-2']
>>> trace = build_trace("payments", [generation])
>>> trace_to_rows(trace)[0]["members"][1]
{'member_id': 'c-2', 'instance_id': 'pod-2', 'rack': None, 'topics': ['orders']}

Validation happens in two steps: :func:`parse_generation` checks one row field by field,
:func:`build_trace` checks the rules that span rows (generation numbers unique and increasing,
partition counts never shrinking while a topic exists). Both raise
:class:`~assignors.errors.InputError` naming the file, line (Parquet: row number, from 1),
trace and field.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard

import pyarrow as pa

from assignors.errors import InputError
from assignors.model import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    MAX_MEMBERS,
    MAX_PARTITIONS,
    Topic,
    TopicPartition,
    member_identity,
)

FORMAT_VERSION = 1

GROUP_PROTOCOLS = ("classic", "consumer")
"""Values of a row's ``group_protocol`` (Kafka's ``group.protocol``): ``consumer`` when the
group ran KIP-848's consumer protocol, ``classic`` for the join/sync protocol."""


@dataclass(frozen=True, slots=True)
class TraceMember:
    """One member as a trace records it; ``assigned`` is what the real group gave it (or None)."""

    member_id: str
    topics: frozenset[str]
    instance_id: str | None = None
    rack: str | None = None
    assigned: tuple[TopicPartition, ...] | None = None

    @property
    def identity(self) -> str:
        """Who this member is across generations: the static instance id, else the member id."""
        return member_identity(self.member_id, self.instance_id)


@dataclass(frozen=True, slots=True)
class Generation:
    """One generation of a group: its topics and members in the row's order (so errors can name
    ``topics[i]``). ``source``/``line`` say where the row came from and take no part in
    equality."""

    trace_id: str
    generation: int
    topics: tuple[Topic, ...]
    members: tuple[TraceMember, ...]
    timestamp_ms: int | None = None
    protocol: str | None = None
    reason: str | None = None
    group_protocol: str | None = None
    source: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)

    def has_recorded_assignment(self) -> bool:
        return any(member.assigned is not None for member in self.members)


@dataclass(frozen=True, slots=True)
class Trace:
    """A group's generations, sorted by generation number."""

    trace_id: str
    generations: tuple[Generation, ...]

    def has_recorded_assignment(self) -> bool:
        """True when the trace carries what the real group assigned (the `recorded` assignor)."""
        return any(generation.has_recorded_assignment() for generation in self.generations)


class TraceFailure(NamedTuple):
    """A trace (or an unattributable row) that could not be read; ``trace_id`` is None when the
    row did not even name its trace."""

    trace_id: str | None
    file: str
    line: int | None
    reason: str


def failure_key(failure: TraceFailure) -> tuple[str, str, int]:
    """Sort key for failures: trace id, then file, then line."""
    return (failure.trace_id or "", failure.file, failure.line or 0)


# ---------------------------------------------------------------------------------------------
# one row -> Generation


def _fail(message: str, row_context: _RowContext, field_name: str, value: object) -> InputError:
    return InputError(
        message,
        source=row_context.source,
        line=row_context.line,
        field=field_name,
        value=value,
        trace_id=row_context.trace_id,
    )


class _RowContext(NamedTuple):
    source: str | None
    line: int | None
    trace_id: str | None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


_UNWRITABLE = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates


def _writable(value: str, where: _RowContext, field_name: str) -> str:
    """Text is written back out (results, Parquet): no NUL, no lone surrogate."""
    if _UNWRITABLE.search(value):
        raise _fail("must not contain NUL or lone surrogate characters", where, field_name, value)
    return value


def _is_list(value: object) -> TypeGuard[Sequence[Any]]:
    """A JSON array or an Arrow list (not a string, bytes or mapping)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _optional_str(
    row: Mapping[str, Any], key: str, where: _RowContext, field_name: str
) -> str | None:
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail("must be a string or null", where, field_name, value)
    return None if value is None else _writable(value, where, field_name)


def _names(value: object) -> TypeGuard[Sequence[str]]:
    """A list of strings (topic or rack names)."""
    return _is_list(value) and all(isinstance(name, str) for name in value)


def _parse_topic(raw: object, index: int, where: _RowContext) -> Topic:
    prefix = f"topics[{index}]"
    if not isinstance(raw, Mapping):
        raise _fail("must be an object", where, prefix, raw)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise _fail("must be a non-empty string", where, f"{prefix}.name", name)
    _writable(name, where, f"{prefix}.name")
    count = raw.get("partitions")
    if not _is_int(count) or count < 0:
        raise _fail("must be an integer >= 0", where, f"{prefix}.partitions", count)
    if count > INT32_MAX:
        raise _fail("must fit in 32 bits (Kafka's int32)", where, f"{prefix}.partitions", count)
    replica_racks = None
    racks = raw.get("racks")
    if racks is not None:
        if not _is_list(racks) or len(racks) != count:
            shown = len(racks) if _is_list(racks) else racks
            raise _fail(
                f"must list the replica racks of each of the {count} partitions",
                where,
                f"{prefix}.racks",
                shown,
            )
        parsed_racks = []
        for partition, partition_racks in enumerate(racks):
            if not _names(partition_racks):
                raise _fail(
                    "must be a list of rack names",
                    where,
                    f"{prefix}.racks[{partition}]",
                    partition_racks,
                )
            for rack in partition_racks:
                _writable(rack, where, f"{prefix}.racks[{partition}]")
            parsed_racks.append(frozenset(partition_racks))
        replica_racks = tuple(parsed_racks)
    weights = raw.get("weights")
    parsed_weights = None
    if weights is not None:
        if not _is_list(weights) or len(weights) != count:
            shown = len(weights) if _is_list(weights) else weights
            raise _fail(
                f"must hold one weight for each of the {count} partitions",
                where,
                f"{prefix}.weights",
                shown,
            )
        for partition, weight in enumerate(weights):
            if (
                isinstance(weight, bool)
                or not isinstance(weight, int | float)
                or not math.isfinite(weight)
                or weight < 0
            ):
                raise _fail(
                    "must be a finite number >= 0", where, f"{prefix}.weights[{partition}]", weight
                )
        parsed_weights = tuple(float(weight) for weight in weights)
    return Topic(name, count, replica_racks, parsed_weights)


def _parse_pair(raw: object) -> TopicPartition | None:
    """["orders", 3] (JSON) or {"topic": "orders", "partition": 3} (Parquet struct)."""
    if isinstance(raw, Mapping):
        topic, partition = raw.get("topic"), raw.get("partition")
    elif _is_list(raw) and len(raw) == 2:
        topic, partition = raw[0], raw[1]
    else:
        return None
    if not isinstance(topic, str) or not _is_int(partition) or _UNWRITABLE.search(topic):
        return None
    return TopicPartition(topic, partition)


def _parse_member(
    raw: object, index: int, where: _RowContext, partition_counts: Mapping[str, int]
) -> TraceMember:
    prefix = f"members[{index}]"
    if not isinstance(raw, Mapping):
        raise _fail("must be an object", where, prefix, raw)
    member_id = raw.get("member_id")
    if not isinstance(member_id, str) or not member_id:
        raise _fail("must be a non-empty string", where, f"{prefix}.member_id", member_id)
    _writable(member_id, where, f"{prefix}.member_id")
    instance_id = _optional_str(raw, "instance_id", where, f"{prefix}.instance_id")
    if instance_id == "":
        raise _fail(
            "must be a non-empty string or null", where, f"{prefix}.instance_id", instance_id
        )
    rack = _optional_str(raw, "rack", where, f"{prefix}.rack")
    topics = raw.get("topics")
    if not _names(topics) or not all(topics):
        raise _fail("must be a list of topic names", where, f"{prefix}.topics", topics)
    for topic in topics:
        _writable(topic, where, f"{prefix}.topics")
    assigned_raw = raw.get("assigned")
    assigned = None
    if assigned_raw is not None:
        if not _is_list(assigned_raw):
            raise _fail(
                "must be a list of [topic, partition]", where, f"{prefix}.assigned", assigned_raw
            )
        pairs = []
        for position, pair_raw in enumerate(assigned_raw):
            pair = _parse_pair(pair_raw)
            field_name = f"{prefix}.assigned[{position}]"
            if pair is None:
                raise _fail("must be [topic, partition]", where, field_name, pair_raw)
            if not 0 <= pair.partition < partition_counts.get(pair.topic, 0):
                raise _fail("names a partition that does not exist", where, field_name, list(pair))
            pairs.append(pair)
        assigned = tuple(pairs)
    return TraceMember(member_id, frozenset(topics), instance_id, rack, assigned)


def parse_generation(row: Mapping[str, Any], source: str | None, line: int | None) -> Generation:
    """Check one trace row field by field and turn it into a :class:`Generation`.

    >>> parse_generation({"trace_id": "g", "generation": 1, "topics": [],
    ...                   "members": [{"member_id": "a", "topics": []},
    ...                               {"member_id": "a", "topics": []}]}, "f.jsonl", 7)
    Traceback (most recent call last):
    ...
    assignors.errors.InputError: f.jsonl:7: trace g: members[1].member_id: member id appears \
twice in this generation (got 'a')
    """
    where = _RowContext(source, line, None)
    if not isinstance(row, Mapping):
        raise _fail("a trace row must be a JSON object", where, "row", type(row).__name__)
    trace_id = row.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise _fail("must be a non-empty string", where, "trace_id", trace_id)
    _writable(trace_id, where, "trace_id")
    where = _RowContext(source, line, trace_id)
    generation = row.get("generation")
    if not _is_int(generation):
        raise _fail("must be an integer", where, "generation", generation)
    if not INT64_MIN <= generation <= INT64_MAX:
        raise _fail("must fit in 64 bits", where, "generation", generation)
    timestamp_ms = row.get("timestamp_ms")
    if timestamp_ms is not None and not _is_int(timestamp_ms):
        raise _fail("must be an integer or null", where, "timestamp_ms", timestamp_ms)
    if timestamp_ms is not None and not INT64_MIN <= timestamp_ms <= INT64_MAX:
        raise _fail("must fit in 64 bits", where, "timestamp_ms", timestamp_ms)
    protocol = _optional_str(row, "protocol", where, "protocol")
    reason = _optional_str(row, "reason", where, "reason")
    group_protocol = row.get("group_protocol")
    if group_protocol is not None and group_protocol not in GROUP_PROTOCOLS:
        raise _fail(
            f"must be one of {', '.join(GROUP_PROTOCOLS)} or null",
            where,
            "group_protocol",
            group_protocol,
        )

    topics_raw = row.get("topics")
    if not _is_list(topics_raw):
        raise _fail("must be a list of topics", where, "topics", topics_raw)
    topics: list[Topic] = []
    partition_counts: dict[str, int] = {}
    total_partitions = 0
    for index, raw in enumerate(topics_raw):
        topic = _parse_topic(raw, index, where)
        if topic.name in partition_counts:
            raise _fail(
                "topic appears twice in this generation", where, f"topics[{index}].name", topic.name
            )
        total_partitions += topic.num_partitions
        if total_partitions > MAX_PARTITIONS:
            raise _fail(
                f"the topics hold {total_partitions} partitions; a generation may hold at most "
                f"{MAX_PARTITIONS}",
                where,
                f"topics[{index}].partitions",
                topic.num_partitions,
            )
        partition_counts[topic.name] = topic.num_partitions
        topics.append(topic)

    members_raw = row.get("members")
    if not _is_list(members_raw):
        raise _fail("must be a list of members", where, "members", members_raw)
    if len(members_raw) > MAX_MEMBERS:
        raise _fail(
            f"{len(members_raw)} members; a generation may list at most {MAX_MEMBERS}",
            where,
            "members",
            len(members_raw),
        )
    members: list[TraceMember] = []
    seen_ids: set[str] = set()
    for index, raw in enumerate(members_raw):
        member = _parse_member(raw, index, where, partition_counts)
        if member.member_id in seen_ids:
            raise _fail(
                "member id appears twice in this generation",
                where,
                f"members[{index}].member_id",
                member.member_id,
            )
        seen_ids.add(member.member_id)
        members.append(member)
    return Generation(
        trace_id=trace_id,
        generation=generation,
        topics=tuple(topics),
        members=tuple(members),
        timestamp_ms=timestamp_ms,
        protocol=protocol,
        reason=reason,
        group_protocol=group_protocol,
        source=source,
        line=line,
    )


# ---------------------------------------------------------------------------------------------
# rows of one trace -> Trace


def _located(generation: Generation, field_name: str, message: str, value: object) -> InputError:
    return InputError(
        message,
        source=generation.source,
        line=generation.line,
        field=field_name,
        value=value,
        trace_id=generation.trace_id,
    )


def _where(generation: Generation) -> str:
    if generation.source is None:
        return "another row"
    return (
        generation.source if generation.line is None else f"{generation.source}:{generation.line}"
    )


def build_trace(trace_id: str, generations: Iterable[Generation]) -> Trace:
    """Put a trace together from its rows (in any order) and check the rules spanning rows.

    Rows are sorted by generation number; a number appearing twice breaks "strictly
    increasing". A topic present in two consecutive generations must not lose partitions (a
    deleted and re-created topic is absent for at least one generation in between).
    """
    ordered = sorted(generations, key=lambda generation: generation.generation)
    for generation in ordered:
        if generation.trace_id != trace_id:
            raise _located(
                generation,
                "trace_id",
                f"row belongs to another trace than {trace_id!r}",
                generation.trace_id,
            )
    for previous, current in itertools.pairwise(ordered):
        if current.generation == previous.generation:
            raise _located(
                current,
                "generation",
                f"generation numbers must be strictly increasing; this one also appears at "
                f"{_where(previous)}",
                current.generation,
            )
        previous_counts = {topic.name: topic.num_partitions for topic in previous.topics}
        for index, topic in enumerate(current.topics):
            before = previous_counts.get(topic.name)
            if before is not None and topic.num_partitions < before:
                raise _located(
                    current,
                    f"topics[{index}].partitions",
                    f"partition count of {topic.name!r} decreased from {before} in generation "
                    f"{previous.generation} (a topic never loses partitions while it exists)",
                    topic.num_partitions,
                )
    return Trace(trace_id, tuple(ordered))


# ---------------------------------------------------------------------------------------------
# Trace -> rows (JSON Lines objects, Arrow)


def generation_to_row(generation: Generation) -> dict[str, Any]:
    """The format-v1 row of a generation (optional fields only when set)."""
    row: dict[str, Any] = {"trace_id": generation.trace_id, "generation": generation.generation}
    if generation.timestamp_ms is not None:
        row["timestamp_ms"] = generation.timestamp_ms
    if generation.protocol is not None:
        row["protocol"] = generation.protocol
    if generation.reason is not None:
        row["reason"] = generation.reason
    if generation.group_protocol is not None:
        row["group_protocol"] = generation.group_protocol
    row["topics"] = [topic.to_json() for topic in generation.topics]
    members = []
    for member in generation.members:
        member_row: dict[str, Any] = {
            "member_id": member.member_id,
            "instance_id": member.instance_id,
            "rack": member.rack,
            "topics": sorted(member.topics),
        }
        if member.assigned is not None:
            member_row["assigned"] = [[tp.topic, tp.partition] for tp in member.assigned]
        members.append(member_row)
    row["members"] = members
    return row


def trace_to_rows(trace: Trace) -> list[dict[str, Any]]:
    return [generation_to_row(generation) for generation in trace.generations]


def _rows(rows_or_traces: Iterable[Mapping[str, Any] | Trace]) -> Iterator[Mapping[str, Any]]:
    for item in rows_or_traces:
        if isinstance(item, Trace):
            yield from trace_to_rows(item)
        else:
            yield item


_ASSIGNED_TYPE = pa.list_(pa.struct([("topic", pa.string()), ("partition", pa.int32())]))

TRACE_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("generation", pa.int64()),
        ("timestamp_ms", pa.int64()),
        ("protocol", pa.string()),
        ("reason", pa.string()),
        ("group_protocol", pa.string()),
        (
            "topics",
            pa.list_(
                pa.struct(
                    [
                        ("name", pa.string()),
                        ("partitions", pa.int32()),
                        ("racks", pa.list_(pa.list_(pa.string()))),
                        ("weights", pa.list_(pa.float64())),
                    ]
                )
            ),
        ),
        (
            "members",
            pa.list_(
                pa.struct(
                    [
                        ("member_id", pa.string()),
                        ("instance_id", pa.string()),
                        ("rack", pa.string()),
                        ("topics", pa.list_(pa.string())),
                        ("assigned", _ASSIGNED_TYPE),
                    ]
                )
            ),
        ),
    ]
)
"""Parquet columns of format v1; ``assigned`` pairs become {topic, partition} structs."""


def _parquet_row(row: Mapping[str, Any]) -> dict[str, Any]:
    members = []
    for member in row.get("members") or ():
        member_row = dict(member)
        assigned = member_row.get("assigned")
        if assigned is not None:
            member_row["assigned"] = [
                pair if isinstance(pair, Mapping) else {"topic": pair[0], "partition": pair[1]}
                for pair in assigned
            ]
        members.append(member_row)
    return {**row, "members": members}


def traces_table(rows_or_traces: Iterable[Mapping[str, Any] | Trace]) -> pa.Table:
    """Format-v1 rows as an Arrow table with :data:`TRACE_SCHEMA`."""
    return pa.Table.from_pylist(
        [_parquet_row(row) for row in _rows(rows_or_traces)], schema=TRACE_SCHEMA
    )
