"""The JSON GroupMetadataMessageFormatter's output -> trace rows.

The console consumer with ``--formatter
org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter`` (Kafka 4.0+) prints one JSON
object per classic group record and no separator at all, so the output is concatenated objects,
possibly all on one line::

    {"key":{"type":2,"data":{"group":"g"}},"value":{"version":3,"data":{...}}}{"key":...

Member subscriptions and assignments are base64 of the ConsumerProtocol bytes; they are
decoded with :mod:`assignors.protocol.wire`. A tombstone has ``"value":null``; a record the
formatter could not read has ``"data":"unknown"`` and is skipped with that reason. Some Kafka
versions name the key's record type ``version`` instead of ``type``; both are read. Should a
formatter print KIP-848 record types, they go through the same path as kafka-dump-log's.

>>> from assignors.protocol.wire import Subscription, MemberAssignment, encode_subscription
>>> from assignors.protocol.wire import encode_assignment
>>> from assignors.model import TopicPartition
>>> import base64, json
>>> b64 = lambda data: base64.b64encode(data).decode()
>>> member = {"memberId": "a", "groupInstanceId": "pod-a", "clientId": "c", "clientHost": "h",
...           "rebalanceTimeout": 1, "sessionTimeout": 1,
...           "subscription": b64(encode_subscription(Subscription(("t",), rack_id="r1"))),
...           "assignment": b64(encode_assignment(MemberAssignment((TopicPartition("t", 1),))))}
>>> record = {"key": {"type": 2, "data": {"group": "g"}}, "value": {"version": 4, "data": {
...     "protocolType": "consumer", "generation": 2, "protocol": "sticky", "leader": "a",
...     "currentStateTimestamp": 1762000000000, "members": [member]}}}
>>> text = json.dumps(record) + json.dumps({"key": {"type": 2, "data": {"group": "g"}},
...                                         "value": None})
>>> result = import_formatter([("out.json", text)])
>>> result.rows[0]["members"][0]["rack"], result.rows[0]["topics"]
('r1', [{'name': 't', 'partitions': 2}])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from assignors.errors import InputError
from assignors.traces.importers.common import (
    ImportOptions,
    ImportResult,
    Skipped,
    TopicCatalog,
    integer_text,
    note,
)
from assignors.traces.importers.offsets import CoordinatorRecord, import_records
from ktkbase import jsonsafe

_WHITESPACE = " \t\r\n"
_RECORD_START = '{"key"'


def _integer(
    node: Mapping[str, Any], names: tuple[str, ...], where: str, source: str, line: int
) -> int:
    for name in names:
        if name in node:
            value = node[name]
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lstrip("-").isdigit():
                return integer_text(value, source=source, line=line, field=f"{where}.{name}")
            raise InputError(
                "must be an integer", source=source, line=line, field=f"{where}.{name}", value=value
            )
    raise InputError("missing", source=source, line=line, field=f"{where}.{names[0]}")


def iter_json_objects(
    text: str, source: str, on_error: Callable[[InputError], None] | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line, object)`` for each of the concatenated JSON values in ``text``.

    Text that is not JSON raises InputError; with ``on_error`` it is reported there instead and
    reading resumes at the next ``{"key"`` (where the formatter starts every record).

    >>> list(iter_json_objects('{"a":1}{"b":2}\\n {"c":3}', "f"))
    [(1, {'a': 1}), (1, {'b': 2}), (2, {'c': 3})]
    """
    position, line = 0, 1
    while True:
        start = position
        while position < len(text) and text[position] in _WHITESPACE:
            position += 1
        line += text.count("\n", start, position)
        if position >= len(text):
            return
        try:
            value, end = jsonsafe.decode_at(text, position, source=source, line=line)
        except jsonsafe.JSONInputError as error:
            problem = InputError(
                error.message,
                source=source,
                line=error.line,
                field="record" if error.field is None else f"record: {error.field}",
                value=error.value,
            )
            if on_error is None:
                raise problem from None
            on_error(problem)
            resume = text.find(_RECORD_START, position + 1)
            end = len(text) if resume < 0 else resume
            line += text.count("\n", position, end)
            position = end
            continue
        yield line, value
        line += text.count("\n", position, end)
        position = end


def _record(
    record: object, record_number: int, line: int, source: str, skipped: list[Skipped] | None
) -> CoordinatorRecord | None:
    if not isinstance(record, Mapping) or not isinstance(record.get("key"), Mapping):
        raise InputError(
            'must be {"key": {...}, "value": {...} | null}',
            source=source,
            line=line,
            field="record",
            value=record,
        )
    key = record["key"]
    key_type = _integer(key, ("type", "version"), "key", source, line)
    if not isinstance(key.get("data"), Mapping):
        note(
            skipped,
            source,
            line,
            f"record {record_number} (type {key_type}) skipped: "
            f"the formatter could not decode it "
            f"(data: {key.get('data')!r})",
        )
        return None
    value = record.get("value")
    if value is not None and (
        not isinstance(value, Mapping) or not isinstance(value.get("data"), Mapping)
    ):
        raise InputError(
            'must be {"version": ..., "data": {...}} or null',
            source=source,
            line=line,
            field="value",
            value=value,
        )
    return CoordinatorRecord(
        key_type=key_type,
        key=key["data"],
        value=None if value is None else value["data"],
        value_version=None
        if value is None
        else _integer(value, ("version",), "value", source, line),
        timestamp_ms=None,
        source=source,
        line=line,
        record_number=record_number,
    )


def parse_formatter(
    text: str | Iterable[str],
    source: str,
    skipped: list[Skipped] | None = None,
    strict: bool = True,
) -> Iterator[CoordinatorRecord]:
    """The records of one formatter output (a whole text, or its lines: records may span them),
    in order. A record that breaks the format raises InputError, or, when not ``strict``, is
    noted in ``skipped`` and passed over."""
    whole = text if isinstance(text, str) else "".join(text)

    def lenient(error: InputError) -> None:
        note(skipped, source, error.line, f"text skipped: {error}")

    objects = iter_json_objects(whole, source, None if strict else lenient)
    for record_number, (line, raw) in enumerate(objects, start=1):
        try:
            record = _record(raw, record_number, line, source, skipped)
        except InputError as error:
            if strict:
                raise
            lenient(error)
            continue
        if record is not None:
            yield record


def import_formatter(
    sources: Iterable[tuple[str, str | Iterable[str]]],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Trace rows from formatter outputs given as ``(name, text or lines)`` pairs, oldest
    first."""
    return import_records(sources, parse_formatter, catalog, options)
