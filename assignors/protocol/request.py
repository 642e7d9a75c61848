"""The assignment-request JSON (the input of ``ktk assign``) in and out.

A request names an assignor and describes one rebalance: topics with partition counts (optionally
replica racks and load weights per partition) and members with subscriptions (optionally owned
partitions with their generation, rack and static instance id). Input is JSON Lines (one request
per line) or one JSON array of requests.

>>> text = '{"name": "demo", "assignor": "range", "topics": [{"name": "t0", "partitions": 3}],'\\
...        ' "members": [{"id": "c0", "topics": ["t0"]}, {"id": "c1", "topics": ["t0"]}]}'
>>> [entry] = read_requests(text, source="demo.jsonl")
>>> entry.request.name, entry.request.assignor, entry.line
('demo', 'range', 1)
>>> print(dumps(run(entry)))  # doctest: +NORMALIZE_WHITESPACE
{"name": "demo", "assignor": "range",
 "assignment": {"c0": [["t0", 0], ["t0", 1]], "c1": [["t0", 2]]}}

Every validation error names the source, line, field path and bad value; an invalid request
becomes an error result and the others still run:

>>> [bad] = read_requests('{"assignor": "range", "topics": [{"name": "t0", "partitions": 0}],'
...                       ' "members": []}', source="in.jsonl")
>>> print(run(bad)["error"])
in.jsonl:1: topics[0].partitions: a topic needs at least one partition (got 0)

Owned partitions of topics the request does not list, or beyond a topic's partition count, are
dropped without error: they are what members report after a topic was deleted or shrank. The
others become each member's :class:`~assignors.model.OwnedPartitions`: sorted, distinct integer
indexes into the request's topics, read for all members at once, without a
:class:`~assignors.model.TopicPartition` per pair.

Limits are checked before any work, so a request that cannot fit in memory is refused at once
rather than after gigabytes were allocated: at most :data:`MAX_PARTITIONS` (10,000,000)
partitions summed over a request's topics (each topic at most Kafka's int32 maximum) and
:data:`MAX_MEMBERS` (1,000,000) members. Text is decoded by :mod:`ktkbase.jsonsafe` (no NaN,
integers of at most 20 digits, nesting at most 64 deep, no duplicated keys, no NUL or lone
surrogates), so a request line is at most 64 MiB.

>>> [big] = read_requests('{"assignor": "range", "topics": [{"name": "t0", "partitions": 8000000},'
...                       ' {"name": "t1", "partitions": 8000000}], "members": []}', source="r")
>>> print(big.error)
r:1: topics[1].partitions: the topics hold 16000000 partitions; a request may hold at most \
10000000 (got 8000000)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from assignors import registry
from assignors.base import Assignor
from assignors.errors import InputError
from assignors.model import (
    INT32_MAX,
    MAX_MEMBERS,
    MAX_PARTITIONS,
    NO_GENERATION,
    Assignment,
    Group,
    Member,
    OwnedPartitions,
    PartitionSpace,
    Topic,
    TopicPartition,
    member_runs,
    no_cycle_collection,
)
from ktkbase import jsonsafe

REQUEST_FIELDS = frozenset({"name", "assignor", "options", "topics", "members"})
TOPIC_FIELDS = frozenset({"name", "partitions", "racks", "weights"})
MEMBER_FIELDS = frozenset({"id", "topics", "owned", "generation", "rack", "instance_id"})
_UNWRITABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, lone surrogates: not in ids or names


class Request(NamedTuple):
    """A parsed request: the echoed name, the assignor's protocol name and the group."""

    name: str | None
    assignor: str
    group: Group


@dataclass(frozen=True, slots=True)
class Entry:
    """One request of an input: parsed, or the error that made it invalid.

    ``name`` is the request's name when it could be read even though the request is invalid;
    ``options`` are the request's assignor options (keyword arguments of its factory).
    """

    line: int
    name: str | None
    request: Request | None = None
    error: InputError | None = None
    source: str | None = None
    options: Mapping[str, object] = dataclasses.field(default_factory=dict)


def _fail(message: str, field: str | None, value: object = InputError._NO_VALUE) -> InputError:
    return InputError(message, field=field, value=value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _check_keys(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            raise _fail(
                f"unknown field; expected one of {', '.join(sorted(allowed))}",
                _field_path(path, str(key)),
            )


def parse_request(
    obj: object,
    *,
    assignor_override: str | None = None,
    known_assignors: Sequence[str] | None = None,
) -> Request:
    """Validate one decoded request object; raises InputError naming the field path.

    ``assignor_override`` replaces the request's assignor (which may then be absent);
    ``known_assignors`` defaults to every built-in and installed assignor.
    """
    if not isinstance(obj, dict):
        raise _fail("a request must be a JSON object", None, _preview(obj))
    _check_keys(obj, REQUEST_FIELDS, "")
    name = obj.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail("name must be a string", "name", name)
    if name:
        _check_writable(name, "name")

    known = tuple(registry.names()) if known_assignors is None else tuple(known_assignors)
    if assignor_override is not None:
        assignor = assignor_override
    elif "assignor" not in obj:
        raise _fail("missing; say which assignor to run", "assignor")
    else:
        assignor = obj["assignor"]
        if not isinstance(assignor, str):
            raise _fail("assignor must be a string", "assignor", assignor)
    if assignor not in known:
        raise _fail(f"unknown assignor; known: {', '.join(known)}", "assignor", assignor)

    parse_options(obj)
    topics = _parse_topics(obj.get("topics", _MISSING))
    members = _parse_members(obj.get("members", _MISSING), topics)
    return Request(name, assignor, Group(topics=topics, members=members))


def parse_options(obj: Mapping[str, Any]) -> dict[str, object]:
    """A request's ``options`` object (empty when absent): option names to JSON values, checked
    against the assignor when it is built (:func:`assignors.registry.get`)."""
    options = obj.get("options", {})
    if not isinstance(options, dict):
        raise _fail("options must be an object of option names and values", "options", options)
    return dict(options)


_MISSING = object()


def _parse_topics(raw: object) -> tuple[Topic, ...]:
    if raw is _MISSING:
        raise _fail("missing; list the topics (may be empty)", "topics")
    if not isinstance(raw, list):
        raise _fail("topics must be a list of topic objects", "topics", _preview(raw))
    topics: list[Topic] = []
    seen: set[str] = set()
    total = 0
    for index, entry in enumerate(raw):
        path = f"topics[{index}]"
        if not isinstance(entry, dict):
            raise _fail("a topic must be an object with name and partitions", path, _preview(entry))
        _check_keys(entry, TOPIC_FIELDS, path)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _fail("a topic needs a non-empty string name", f"{path}.name", name)
        _check_writable(name, f"{path}.name")
        if name in seen:
            raise _fail("duplicate topic name", f"{path}.name", name)
        seen.add(name)
        if "partitions" not in entry:
            raise _fail("missing; give the partition count", f"{path}.partitions")
        count = entry["partitions"]
        if not _is_int(count):
            raise _fail("partitions must be an integer", f"{path}.partitions", count)
        if count < 0:
            raise _fail("a partition count cannot be negative", f"{path}.partitions", count)
        if count == 0:
            raise _fail("a topic needs at least one partition", f"{path}.partitions", count)
        if count > INT32_MAX:
            raise _fail("partitions is a 32-bit integer in Kafka", f"{path}.partitions", count)
        total += count
        if total > MAX_PARTITIONS:
            raise _fail(
                f"the topics hold {total} partitions; a request may hold at most {MAX_PARTITIONS}",
                f"{path}.partitions",
                count,
            )
        racks = _parse_per_partition(entry, "racks", count, path, _parse_rack_set)
        weights = _parse_per_partition(entry, "weights", count, path, _parse_weight)
        topics.append(Topic(name, count, racks, weights))
    return tuple(topics)


def _parse_per_partition(
    entry: Mapping[str, Any],
    key: str,
    count: int,
    path: str,
    parse_one: Callable[[object, str], Any],
) -> tuple[Any, ...] | None:
    raw = entry.get(key)
    if raw is None:
        return None
    field = f"{path}.{key}"
    if not isinstance(raw, list):
        raise _fail(f"{key} must be a list with one entry per partition", field, _preview(raw))
    if len(raw) != count:
        raise _fail(f"{key} needs one entry per partition ({count}), has {len(raw)}", field)
    return tuple(parse_one(value, f"{field}[{index}]") for index, value in enumerate(raw))


def _parse_rack_set(value: object, field: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(rack, str) and rack for rack in value):
        raise _fail("replica racks must be a list of non-empty rack names", field, value)
    return frozenset(value)


def _parse_weight(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail("a weight must be a number", field, value)
    if not math.isfinite(value) or value < 0:
        raise _fail("a weight must be finite and >= 0", field, value)
    return float(value)


def _parse_members(raw: object, topics: Sequence[Topic]) -> tuple[Member, ...]:
    if raw is _MISSING:
        raise _fail("missing; list the members (may be empty)", "members")
    if not isinstance(raw, list):
        raise _fail("members must be a list of member objects", "members", _preview(raw))
    if len(raw) > MAX_MEMBERS:
        raise _fail(
            f"{len(raw)} members; a request may list at most {MAX_MEMBERS}", "members", len(raw)
        )
    fields: list[tuple[str, frozenset[str], int, str | None, str | None]] = []
    owned_lists: list[_OwnedPairs | None] = []
    seen_ids: set[str] = set()
    seen_instances: set[str] = set()
    for index, entry in enumerate(raw):
        path = f"members[{index}]"
        if not isinstance(entry, dict):
            raise _fail("a member must be an object with id and topics", path, _preview(entry))
        _check_keys(entry, MEMBER_FIELDS, path)
        member_id = entry.get("id")
        if not isinstance(member_id, str) or not member_id:
            raise _fail("a member needs a non-empty string id", f"{path}.id", member_id)
        _check_writable(member_id, f"{path}.id")
        if member_id in seen_ids:
            raise _fail("duplicate member id", f"{path}.id", member_id)
        seen_ids.add(member_id)
        subscription = entry.get("topics", _MISSING)
        if subscription is _MISSING:
            raise _fail("missing; list the subscribed topic names", f"{path}.topics")
        # one C-level pass over the names' types (members may list thousands of topics)
        if not isinstance(subscription, list) or not set(map(type, subscription)) <= {str}:
            raise _fail(
                "topics must be a list of topic names", f"{path}.topics", _preview(subscription)
            )
        generation = entry.get("generation", NO_GENERATION)
        if generation is None:
            generation = NO_GENERATION
        if not _is_int(generation) or not NO_GENERATION <= generation <= INT32_MAX:
            raise _fail(
                "generation must be a 32-bit integer >= -1", f"{path}.generation", generation
            )
        rack = _optional_name(entry, "rack", path)
        instance_id = _optional_name(entry, "instance_id", path)
        if instance_id is not None:
            if instance_id in seen_instances:
                raise _fail("duplicate instance_id", f"{path}.instance_id", instance_id)
            seen_instances.add(instance_id)
        owned_lists.append(_parse_owned(entry.get("owned"), f"{path}.owned"))
        fields.append((member_id, frozenset(subscription), generation, rack, instance_id))
    owned = _owned_indexes(owned_lists, topics)
    return tuple(
        Member(member_id, subscription, held, generation, rack, instance_id)
        for (member_id, subscription, generation, rack, instance_id), held in zip(
            fields, owned, strict=True
        )
    )


def _optional_name(entry: Mapping[str, Any], key: str, path: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(f"{key} must be a string", f"{path}.{key}", value)
    if value:
        _check_writable(value, f"{path}.{key}")
    return value or None  # Kafka treats an empty rack or instance id as absent


class _OwnedPairs(NamedTuple):
    """A member's ``owned`` list, checked: its topic names and partition numbers."""

    names: list[str]
    numbers: list[int]


def _parse_owned(raw: object, field: str) -> _OwnedPairs | None:
    """The topic names and numbers of an ``owned`` list, after checking every pair's shape
    (C-level passes over the pairs; the first bad pair is found only when there is one)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise _fail("owned must be a list of [topic, partition] pairs", field, _preview(raw))
    if set(map(type, raw)) <= {list} and set(map(len, raw)) <= {2}:
        names = list(map(operator.itemgetter(0), raw))
        numbers = list(map(operator.itemgetter(1), raw))
        if set(map(type, names)) <= {str} and set(map(type, numbers)) <= {int}:
            return _OwnedPairs(names, numbers)
    for index, pair in enumerate(raw):
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not isinstance(pair[0], str)
            or not _is_int(pair[1])
        ):
            raise _fail(
                "an owned partition is a [topic, partition] pair",
                f"{field}[{index}]",
                _preview(pair),
            )
    return _OwnedPairs([pair[0] for pair in raw], [int(pair[1]) for pair in raw])


def _owned_indexes(
    owned: Sequence[_OwnedPairs | None], topics: Sequence[Topic]
) -> list[OwnedPartitions | tuple[TopicPartition, ...]]:
    """Each member's owned partitions as sorted, distinct indexes into the partition space of
    the request's topics (by name), all members in one pass: pairs naming a topic the request
    does not list, or a partition the topic does not have, are dropped; no
    :class:`TopicPartition` is made (:class:`~assignors.model.OwnedPartitions` makes them
    when asked)."""
    lengths = [0 if pairs is None else len(pairs.names) for pairs in owned]
    if not any(lengths):
        return [()] * len(owned)
    ordered = sorted(topics, key=operator.attrgetter("name"))
    space = PartitionSpace(
        tuple(topic.name for topic in ordered), tuple(topic.num_partitions for topic in ordered)
    )
    listed = [pairs for pairs in owned if pairs is not None]
    names = list(itertools.chain.from_iterable(pairs.names for pairs in listed))
    numbers_listed = list(itertools.chain.from_iterable(pairs.numbers for pairs in listed))
    total = len(numbers_listed)
    starts = dict(zip(space.topic_names, space.offsets, strict=True))
    counts = dict(zip(space.topic_names, space.partition_counts, strict=True))
    offsets = np.fromiter(map(starts.get, names, itertools.repeat(-1)), np.int64, total)
    limits = np.fromiter(map(counts.get, names, itertools.repeat(0)), np.int64, total)
    try:
        numbers = np.fromiter(numbers_listed, np.int64, total)
    except OverflowError:  # beyond int64: no topic has such a partition
        numbers = np.fromiter((min(max(n, -1), INT32_MAX) for n in numbers_listed), np.int64)
    member = np.repeat(np.arange(len(owned), dtype=np.int64), lengths)
    kept = (offsets >= 0) & (numbers >= 0) & (numbers < limits)
    # one sort of (member, index) keys gives every member's indexes sorted and distinct (a
    # stable sort: members usually list their partitions in order, runs it merges cheaply)
    keys = np.sort(member[kept] * space.size + offsets[kept] + numbers[kept], kind="stable")
    if keys.size > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    bounds = np.searchsorted(keys, np.arange(len(owned) + 1, dtype=np.int64) * space.size)
    indexes = keys - np.repeat(np.arange(len(owned), dtype=np.int64), np.diff(bounds)) * space.size
    indexes.flags.writeable = False  # every member's indexes are a slice of this one array
    return [
        OwnedPartitions.checked(space, indexes[start:stop]) if stop > start else ()
        for start, stop in itertools.pairwise(bounds.tolist())
    ]


def _check_writable(text: str, field: str) -> None:
    """Ids and names are echoed in results: no NUL, no lone surrogate (not writable as UTF-8)."""
    if _UNWRITABLE.search(text):
        raise _fail("must not contain NUL or lone surrogate characters", field, text)


def _preview(value: object, limit: int = 60) -> object:
    """The bad value itself when short, else its start (error lines stay one line)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else text[: limit - 3] + "..."


def _request_name(obj: object) -> str | None:
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        name: str = obj["name"]
        return None if _UNWRITABLE.search(name) else name
    return None


def read_requests(
    text: str, *, source: str | None = None, assignor_override: str | None = None
) -> list[Entry]:
    """Every request of a JSON Lines text or a JSON array text, in order, each parsed or carrying
    its error. Raises InputError when the text is not JSON at all (no line is JSON text, or an
    array that is not); JSON the decoder refuses (NaN, nesting, ...) fails its request only."""
    # a request of a million partitions is millions of small objects, none in a cycle
    with no_cycle_collection():
        return _read_requests(text, source, assignor_override)


def _read_requests(text: str, source: str | None, assignor_override: str | None) -> list[Entry]:
    known = tuple(registry.names())
    decoded = list(_decode(text, source))
    if decoded and all(isinstance(obj, _NotJSONError) for _, obj in decoded):
        first = decoded[0][1]
        assert isinstance(first, _NotJSONError)
        raise InputError(
            "input is not JSON Lines or a JSON array: " + first.message,
            source=source,
            line=first.line,
            field=first.field,
            value=first.value,
        )
    entries: list[Entry] = []
    for line, obj in decoded:
        if isinstance(obj, InputError):
            entries.append(Entry(line, None, error=obj))
            continue
        try:
            request = parse_request(obj, assignor_override=assignor_override, known_assignors=known)
        except InputError as error:
            located = error.located(source=source, line=line)
            entries.append(Entry(line, _request_name(obj), error=located))
        else:
            options = parse_options(obj)  # type: ignore[arg-type]
            entries.append(
                Entry(line, request.name, request=request, source=source, options=options)
            )
    return entries


class _NotJSONError(InputError):
    """A line (or array) that is not JSON text at all, as opposed to JSON ktk refuses."""


def _decode_error(error: jsonsafe.JSONInputError, prefix: str) -> InputError:
    """The decoder's error as this package's, worded as before for syntax errors."""
    if error.column is not None:  # a syntax error, at a place in the text
        return _NotJSONError(
            f"{prefix}: {error.reason}", source=error.source, line=error.line, field=error.field
        )
    if error.message.startswith("not valid JSON: "):
        return InputError(
            f"{prefix}: {error.reason}", source=error.source, line=error.line, field=error.field
        )
    return InputError(
        error.message, source=error.source, line=error.line, field=error.field, value=error.value
    )


def _decode(text: str, source: str | None) -> Iterator[tuple[int, object]]:
    """(line, decoded object or InputError) for each request of the text."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from _decode_array(text, source)
        return
    # only "\n" ends a line: str.splitlines would also split at U+2028 inside JSON strings
    for number, raw_line in enumerate(text.split("\n"), start=1):
        if not raw_line.strip():
            continue
        try:
            yield number, jsonsafe.loads(raw_line, source=source, line=number)
        except jsonsafe.JSONInputError as error:
            yield number, _decode_error(error, "malformed JSON")


def _decode_array(text: str, source: str | None) -> Iterator[tuple[int, object]]:
    """The elements of a JSON array, each with the line it starts on. The whole array is
    checked first (a broken array is no input at all), then each element is decoded again
    with the limits of one request."""
    try:
        jsonsafe.loads(text, source=source, max_chars=len(text), max_depth=jsonsafe.MAX_DEPTH + 1)
    except jsonsafe.JSONInputError as error:
        if error.column is not None:  # not JSON at all; refusals fail only their request
            raise _decode_error(error, "malformed JSON array") from None
    position = text.index("[") + 1
    line, counted_to = 1, 0
    while True:
        position = _skip_blank(text, position)
        if position < len(text) and text[position] == "]":
            return
        if position < len(text) and text[position] == ",":
            position = _skip_blank(text, position + 1)
        line += text.count("\n", counted_to, position)  # counted incrementally: linear overall
        counted_to = position
        try:
            obj, position = jsonsafe.decode_at(text, position, source=source, line=line)
        except jsonsafe.JSONInputError as error:
            if error.column is not None:  # only reachable when the array was too deep to check
                raise _decode_error(error, "malformed JSON array") from None
            yield line, _decode_error(error, "malformed JSON")
            position = error.end if error.end is not None else _container_end(text, position)
            continue
        yield line, obj


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _container_end(text: str, position: int) -> int:
    """The end of the array or object at ``position`` in valid JSON text, found by counting
    brackets outside strings (for values nested too deep to decode)."""
    depth = 0
    for token in _TOKEN.finditer(text, position):
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(token.group(), 0)
        if depth == 0:
            return token.end()
    return len(text)


def _skip_blank(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def run(entry: Entry, assignor: Assignor | None = None) -> dict[str, object]:
    """The result object of one entry: its assignment, or its error. ``assignor`` defaults to
    the one the request names."""
    outcome = _outcome(entry, assignor)
    if isinstance(outcome, dict):
        return outcome
    return assignment_result(*outcome)


def run_text(
    entry: Entry, assignor: Assignor | None = None, *, pretty: bool = False
) -> tuple[str, bool]:
    """``dumps(run(entry, assignor), pretty=pretty)`` and whether the entry failed. An answer
    kept as arrays (:meth:`Assignment.from_owners`) is written from its arrays, without a
    :class:`TopicPartition` or a small JSON list per partition; the text is the same.

    >>> [entry] = read_requests('{"name": "n", "assignor": "roundrobin", "topics": '
    ...     '[{"name": "t", "partitions": 3}], "members": [{"id": "b", "topics": ["t"]}, '
    ...     '{"id": "a", "topics": ["t"]}]}')
    >>> print(run_text(entry, pretty=True)[0])
    {
      "name": "n",
      "assignor": "roundrobin",
      "assignment": {
        "a": [["t", 0], ["t", 2]],
        "b": [["t", 1]]
      }
    }
    """
    outcome = _outcome(entry, assignor)
    if isinstance(outcome, dict):
        return dumps(outcome, pretty=pretty), "error" in outcome
    text = _array_result_text(*outcome, pretty=pretty)
    if text is None:
        text = dumps(assignment_result(*outcome), pretty=pretty)
    return text, False


def _outcome(
    entry: Entry, assignor: Assignor | None
) -> dict[str, object] | tuple[str | None, str, Assignment, Group]:
    """The error result of an entry, or what :func:`assignment_result` needs for its answer."""
    if entry.request is None:
        assert entry.error is not None
        return error_result(entry.name, entry.error)
    try:
        if assignor is not None and not entry.options:
            chosen = assignor
        else:
            name = assignor.name if assignor is not None else entry.request.assignor
            chosen = registry.get(name, entry.options)
    except InputError as error:
        return error_result(entry.name, error.located(source=entry.source, line=entry.line))
    except ImportError as error:
        unavailable = InputError(
            f"assignor is not available: {error}",
            source=entry.source,
            line=entry.line,
            field="assignor",
            value=entry.request.assignor,
        )
        return error_result(entry.name, unavailable)
    try:
        assignment = chosen.assign(entry.request.group)
    except InputError as error:
        return error_result(entry.name, error)
    return entry.request.name, chosen.name, assignment, entry.request.group


def _array_result_text(
    name: str | None,
    assignor_name: str,
    assignment: Assignment,
    group: Group,
    *,
    pretty: bool,
) -> str | None:
    """The text :func:`dumps` gives for :func:`assignment_result`, built from the answer's
    arrays with one ``str.join`` per member; None when the answer is not kept as arrays."""
    member_ids = tuple(member.member_id for member in group.members)
    owners, space = assignment.owners, assignment.space
    if owners is None or space is None or assignment.member_ids != member_ids:
        return None
    order, bounds = member_runs(owners, len(member_ids))
    pairs = _pair_texts(space, order[bounds[0] :])
    base = int(bounds[0])
    starts = (bounds - base).tolist()
    lists = ["[" + ", ".join(pairs[start:stop]) + "]" for start, stop in itertools.pairwise(starts)]
    withheld = assignment.withheld_indexes
    fields = [("name", _json(name)), ("assignor", _json(assignor_name))]
    keys = list(map(_json, member_ids))
    if not pretty:
        members = ", ".join(map("{}: {}".format, keys, lists))
        fields.append(("assignment", "{" + members + "}"))
    elif keys:
        members = ",\n".join(map("    {}: {}".format, keys, lists))
        fields.append(("assignment", "{\n" + members + "\n  }"))
    else:
        fields.append(("assignment", "{}"))
    if withheld is not None and withheld.size:
        fields.append(("withheld", "[" + ", ".join(_pair_texts(space, withheld)) + "]"))
    if not pretty:
        return "{" + ", ".join(f"{_json(key)}: {value}" for key, value in fields) + "}"
    return "{\n" + ",\n".join(f"  {_json(key)}: {value}" for key, value in fields) + "\n}"


def _pair_texts(space: PartitionSpace, indexes: np.ndarray) -> list[str]:
    """``'["topic", 7]'`` for each partition index, in the order given: one head string per
    topic and one tail string per partition number, joined in C.

    >>> _pair_texts(PartitionSpace(("a", "b\u00e9"), (2, 11)), np.array([12, 0]))
    ['["b\u00e9", 10]', '["a", 0]']
    """
    if not indexes.size:
        return []
    positions, numbers = space.locate(indexes)
    heads = np.asarray(["[" + _json(name) + ", " for name in space.topic_names], dtype=object)
    tails = np.asarray(list(map("{}]".format, range(int(numbers.max()) + 1))), dtype=object)
    return list(map(operator.add, heads[positions].tolist(), tails[numbers].tolist()))


def assignment_result(
    name: str | None, assignor_name: str, assignment: Assignment, group: Group
) -> dict[str, object]:
    """``{"name", "assignor", "assignment"[, "withheld"]}`` with every member of the group
    present, members sorted by id and partitions sorted."""
    ordered = Assignment.build(
        (member.member_id for member in group.members), assignment.partitions, assignment.withheld
    )
    result: dict[str, object] = {
        "name": name,
        "assignor": assignor_name,
        "assignment": ordered.to_json(),
    }
    if ordered.withheld:
        result["withheld"] = [[tp.topic, tp.partition] for tp in ordered.withheld]
    return result


def error_result(name: str | None, error: InputError) -> dict[str, object]:
    return {"name": name, "error": str(error)}


def dumps(result: Mapping[str, object], *, pretty: bool = False) -> str:
    """One result as one line of JSON; ``pretty`` puts each field and each member on its own
    line (partition lists stay on the member's line).

    >>> print(dumps({"name": "n", "assignment": {"c0": [["t0", 0]], "c1": []}}, pretty=True))
    {
      "name": "n",
      "assignment": {
        "c0": [["t0", 0]],
        "c1": []
      }
    }
    """
    if not pretty:
        return json.dumps(result, ensure_ascii=False)
    lines = []
    for key, value in result.items():
        if isinstance(value, dict) and value:
            members = [
                f"    {_json(member)}: {_json(partitions)}" for member, partitions in value.items()
            ]
            lines.append(f"  {_json(key)}: {{\n" + ",\n".join(members) + "\n  }")
        else:
            lines.append(f"  {_json(key)}: {_json(value)}")
    return "{\n" + ",\n".join(lines) + "\n}"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def group_to_request(group: Group, assignor: str, name: str | None = None) -> dict[str, object]:
    """The request object describing ``group`` (the inverse of :func:`parse_request`)."""
    request: dict[str, object] = {}
    if name is not None:
        request["name"] = name
    request["assignor"] = assignor
    topics = [topic.to_json() for topic in group.topics]
    members: list[dict[str, object]] = []
    for member in group.members:
        described: dict[str, object] = {"id": member.member_id, "topics": sorted(member.topics)}
        if member.owned_partitions:
            described["owned"] = [[tp.topic, tp.partition] for tp in member.owned_partitions]
        if member.generation != NO_GENERATION:
            described["generation"] = member.generation
        if member.rack is not None:
            described["rack"] = member.rack
        if member.instance_id is not None:
            described["instance_id"] = member.instance_id
        members.append(described)
    request["topics"] = topics
    request["members"] = members
    return request
