"""``kafka-dump-log.sh --offsets-decoder --files <segment>.log`` output -> trace rows.

Kafka 3.8+ prints every record of a ``__consumer_offsets`` segment on one line; the part ktk
reads is the key and payload JSON (and the record timestamp)::

    | offset: 7 CreateTime: 1762000000000 keySize: 14 valueSize: 205 sequence: -1 \
headerKeys: [] key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{...}}

For a consumer group the tool has already decoded each member's subscription and assignment
bytes into JSON; when it could not, it printed their base64 and ktk decodes them itself. A
tombstone prints ``payload: <DELETE>``; a record type the tool does not know prints ``key:
Unknown record type N at offset M, skipping.`` (skipped here with that reason). Batch headers and
``Dumping ...`` lines carry no record and are passed over. The text format of tools before 3.8
(``key: group_metadata::group=g payload: {...}``) is read too, without subscriptions.

>>> text = ('| offset: 3 CreateTime: 1762000000000 keySize: 9 valueSize: 99 key: '
...         '{"type":"2","data":{"group":"g"}} payload: {"version":"3","data":'
...         '{"protocolType":"consumer","generation":5,"protocol":"range","leader":"a",'
...         '"currentStateTimestamp":-1,"members":[{"memberId":"a","groupInstanceId":null,'
...         '"clientId":"c","clientHost":"/10.0.0.1","rebalanceTimeout":300000,'
...         '"sessionTimeout":45000,"subscription":{"topics":["t"],"userData":null},'
...         '"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0]}],'
...         '"userData":null}}]}}')
>>> row = import_dump_log([("dump.txt", text)]).rows[0]
>>> row["trace_id"], row["generation"], row["timestamp_ms"], row["members"][0]["assigned"]
('g', 5, 1762000000000, [['t', 0]])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from assignors.errors import InputError
from assignors.traces.importers.common import (
    ImportOptions,
    ImportResult,
    Skipped,
    TopicCatalog,
    integer_text,
    lines_of,
    note,
)
from assignors.traces.importers.offsets import GROUP_METADATA, CoordinatorRecord, import_records
from ktkbase import jsonsafe

_KEY = re.compile(r"(?:^|\s)key: ")
_PAYLOAD = re.compile(r"\s*payload: ")
_TIMESTAMP = re.compile(r"\b(?:CreateTime|LogAppendTime): (-?\d+)")
_TOMBSTONE = "<DELETE>"


def _version_number(raw: object, record_field: str, source: str, line: int) -> int:
    """Kafka prints the key type and value version as JSON strings ("2"); accept numbers too."""
    if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw):
        return integer_text(raw, source=source, line=line, field=record_field)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    raise InputError(
        "must be a record type number", source=source, line=line, field=record_field, value=raw
    )


def _not_json_reason(key_text: str) -> str | None:
    """Why a key that is not JSON is skipped (None: nothing worth reporting)."""
    if key_text.startswith("offset_commit::"):
        return None
    shown = key_text if len(key_text) <= 120 else key_text[:117] + "..."
    return f"kafka-dump-log: {shown}"


_LEGACY_KEY = re.compile(r"group_metadata::group=(?P<group>.*?) payload: ")
_LEGACY_MEMBER = re.compile(
    r"(?P<member>[^,{}=\s][^,{}=]*)=\[(?P<partitions>[^\]]*)\](?::[0-9a-f]*)?"
)
LEGACY_NOTE = (
    "text format of kafka-dump-log before 3.8: it has no subscriptions, instance ids "
    "or racks; members subscribe to the topics their group was assigned (newer "
    "tools read old segments too)"
)


def _legacy_group_metadata(
    text: str, source: str, line: int
) -> tuple[str, dict[str, Any] | None] | None:
    """``group_metadata::group=G payload: {"protocolType":..,"generationId":..,
    "assignment":"{m1=[t-0, t-1],m2=[t-2]}"}`` (kafka-dump-log up to 3.7) as a GroupMetadataValue
    without subscriptions; None when the line is not such a record.

    >>> _legacy_group_metadata('group_metadata::group=g payload: {"protocolType":"consumer",'
    ...     '"protocol":"range","generationId":2,"assignment":"{a=[my-topic-0, my-topic-2]}"}',
    ...     "d.txt", 1)[1]["members"][0]["assignment"]
    {'assignedPartitions': [{'topic': 'my-topic', 'partitions': [0]}, \
{'topic': 'my-topic', 'partitions': [2]}]}
    """
    key = _LEGACY_KEY.match(text)
    if key is None:
        return None
    group, rest = key.group("group"), text[key.end() :]
    if rest.startswith(_TOMBSTONE):
        return group, None
    payload, _ = _json_at(rest, 0, "payload", source, line)
    if not isinstance(payload, dict) or not isinstance(payload.get("assignment"), str):
        raise InputError(
            'must be {"protocolType", "generationId", "assignment", ...}',
            source=source,
            line=line,
            field="payload",
            value=payload,
        )
    members: list[dict[str, Any]] = []
    for found in _LEGACY_MEMBER.finditer(payload["assignment"]):
        entries = []
        for text_partition in filter(
            None, (part.strip() for part in found.group("partitions").split(","))
        ):
            topic, _, number = text_partition.rpartition("-")
            if not topic or not number.isdigit():
                raise InputError(
                    "partition must read topic-number",
                    source=source,
                    line=line,
                    field="payload.assignment",
                    value=text_partition,
                )
            partition = integer_text(number, source=source, line=line, field="payload.assignment")
            entries.append({"topic": topic, "partitions": [partition]})
        members.append(
            {
                "memberId": found.group("member").strip(),
                "groupInstanceId": None,
                "assignment": {"assignedPartitions": entries},
            }
        )
    subscribed = sorted(
        {
            entry["topic"]
            for member in members
            for entry in member["assignment"]["assignedPartitions"]
        }
    )
    for member in members:
        member["subscription"] = {"topics": subscribed}
    value = {
        "protocolType": payload.get("protocolType"),
        "generation": payload.get("generationId"),
        "protocol": payload.get("protocol"),
        "members": members,
    }
    return group, value


def _record_time(line: str, key_start: int, source: str, line_number: int) -> int | None:
    timestamp = _TIMESTAMP.search(line, 0, key_start + 1)
    if timestamp is None:
        return None
    return integer_text(timestamp.group(1), source=source, line=line_number, field="CreateTime")


def _json_at(text: str, start: int, what: str, source: str, line: int) -> tuple[Any, int]:
    try:
        return jsonsafe.decode_at(text, start, source=source, line=line)
    except jsonsafe.JSONInputError as error:
        if error.field is None and error.message.startswith("not valid JSON: "):
            message = f"{what} is not valid JSON: {error.reason}"
            raise InputError(message, source=source, line=line, field=what) from None
        raise InputError(
            error.message,
            source=source,
            line=line,
            field=what if error.field is None else f"{what}.{error.field}",
            value=error.value,
        ) from None


def _record(
    line: str, line_number: int, source: str, key_start: int, start: int
) -> CoordinatorRecord:
    """The record of a line whose key is JSON."""
    key, end = _json_at(line, start, "key", source, line_number)
    if not isinstance(key, dict) or not isinstance(key.get("data"), dict):
        raise InputError(
            'must be {"type": ..., "data": {...}}',
            source=source,
            line=line_number,
            field="key",
            value=key,
        )
    key_type = _version_number(key.get("type", key.get("version")), "key.type", source, line_number)
    payload_match = _PAYLOAD.match(line, end)
    if payload_match is None:
        raise InputError(
            "expected ' payload: ' after the key",
            source=source,
            line=line_number,
            field="payload",
            value=line[end : end + 40],
        )
    rest = payload_match.end()
    value: dict[str, Any] | None = None
    value_version: int | None = None
    if not line.startswith(_TOMBSTONE, rest):
        payload, _ = _json_at(line, rest, "payload", source, line_number)
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
            raise InputError(
                'must be {"version": ..., "data": {...}} or <DELETE>',
                source=source,
                line=line_number,
                field="payload",
                value=payload,
            )
        value = payload["data"]
        value_version = _version_number(
            payload.get("version"), "payload.version", source, line_number
        )
    return CoordinatorRecord(
        key_type,
        key["data"],
        value,
        value_version,
        _record_time(line, key_start, source, line_number),
        source,
        line_number,
    )


def parse_dump_log(
    text: str | Iterable[str],
    source: str,
    skipped: list[Skipped] | None = None,
    strict: bool = True,
) -> Iterator[CoordinatorRecord]:
    """The records of one dump, in file order. Lines the tool itself could not decode go to
    ``skipped`` (with their reason); a line that breaks the format raises InputError, or, when
    not ``strict``, is noted in ``skipped`` and passed over."""
    legacy_noted = False
    for line_number, line in enumerate(lines_of(text), start=1):
        key_match = _KEY.search(line)
        if key_match is None:
            continue
        start = key_match.end()
        try:
            legacy = _legacy_group_metadata(line[start:], source, line_number)
            if legacy is not None:
                if not legacy_noted:
                    note(skipped, source, line_number, LEGACY_NOTE)
                    legacy_noted = True
                record = CoordinatorRecord(
                    GROUP_METADATA,
                    {"group": legacy[0]},
                    legacy[1],
                    None,
                    _record_time(line, key_match.start(), source, line_number),
                    source,
                    line_number,
                )
            elif not line.startswith("{", start):
                reason = _not_json_reason(line[start:].strip())
                if reason is not None:
                    note(skipped, source, line_number, reason)
                continue
            else:
                record = _record(line, line_number, source, key_match.start(), start)
        except InputError as error:
            if strict:
                raise
            note(skipped, source, line_number, f"line skipped: {error}")
            continue
        yield record


def import_dump_log(
    sources: Iterable[tuple[str, str | Iterable[str]]],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Trace rows from dumps given as ``(name, text or lines)`` pairs, oldest segment first."""
    return import_records(sources, parse_dump_log, catalog, options)
