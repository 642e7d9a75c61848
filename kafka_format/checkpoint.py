"""The text files next to the segments: offset checkpoints, the leader-epoch checkpoint,
``partition.metadata`` and ``meta.properties``, read and written as Kafka does.

Checkpoint files (``CheckpointFile``): a version line, a count line, then one entry a line,
fields split on whitespace; Kafka writes "\\n" line ends (``BufferedWriter.newLine`` on Linux).

- in the log directory: ``replication-offset-checkpoint`` (high watermarks),
  ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``cleaner-offset-checkpoint``: version 0, entries ``topic partition offset``;
- in each partition directory: ``leader-epoch-checkpoint``: version 0, entries
  ``epoch startOffset``; ``partition.metadata``: ``version: 0`` then ``topic_id: <uuid>`` (the
  topic id as Kafka's ``Uuid.toString``: URL-safe base64 of 16 bytes, no padding).

Reading follows ``CheckpointReadBuffer``: an empty file is no entries, a version other than 0
or a line that does not parse is an error, and so is a count that differs from the lines. Errors
are :class:`KafkaFormatError` naming the file, line and field.

>>> text = format_offset_checkpoint([("orders", 0, 42), ("orders", 1, 40)])
>>> print(text, end="")
0
2
orders 0 42
orders 1 40
>>> parse_offset_checkpoint(text, source="replication-offset-checkpoint")[("orders", 1)]
40
>>> parse_leader_epoch_checkpoint("0\\n2\\n0 0\\n3 17\\n")
(EpochEntry(epoch=0, start_offset=0), EpochEntry(epoch=3, start_offset=17))
>>> try:
...     parse_offset_checkpoint("1\\n0\\n", source="recovery-point-offset-checkpoint")
... except KafkaFormatError as error:
...     print(error)
recovery-point-offset-checkpoint:1: version: unrecognised version, expected 0 (got 1)
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from kafka_format.errors import KafkaFormatError

__all__ = [
    "CHECKPOINT_VERSION",
    "LOG_DIR_CHECKPOINTS",
    "EpochEntry",
    "PartitionMetadata",
    "format_leader_epoch_checkpoint",
    "format_offset_checkpoint",
    "format_partition_metadata",
    "parse_leader_epoch_checkpoint",
    "parse_meta_properties",
    "parse_offset_checkpoint",
    "parse_partition_metadata",
    "topic_id_from_string",
    "topic_id_to_string",
]

CHECKPOINT_VERSION = 0
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
#: The offset checkpoints of a log directory, by file name: what each offset is.
LOG_DIR_CHECKPOINTS = {
    REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
    RECOVERY_POINT_CHECKPOINT: "recovery_point",
    LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
    CLEANER_OFFSET_CHECKPOINT: "cleaner_offset",
}

_WHITESPACE = re.compile(r"\s+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
T = TypeVar("T")


class EpochEntry(NamedTuple):
    """A leader-epoch cache entry: ``epoch`` began at ``start_offset``."""

    epoch: int
    start_offset: int


def _java_int(
    text: str, bounds: tuple[int, int], *, source: str | None, line: int, field: str
) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: an optional sign and ASCII digits in range."""
    if not _JAVA_INT.fullmatch(text) or not bounds[0] <= int(text) <= bounds[1]:
        kind = "an int32" if bounds == _INT32 else "an int64"
        raise KafkaFormatError(
            f"malformed line: not {kind}", source=source, line=line, field=field, value=text
        )
    return int(text)


def _split_fields(line: str) -> list[str]:
    """Java's ``Pattern.split``: a leading empty field is kept, trailing empty ones dropped."""
    parts = _WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _lines(text: str) -> list[str]:
    """``BufferedReader.readLine``: lines end at \\n, \\r or \\r\\n; no empty last line."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _read_checkpoint(
    text: str,
    parse_entry: Callable[[list[str], int], T],
    *,
    source: str | None,
    fields: str,
) -> list[T]:
    lines = _lines(text)
    if not lines:
        return []
    version = _java_int(lines[0], _INT32, source=source, line=1, field="version")
    if version != CHECKPOINT_VERSION:
        raise KafkaFormatError(
            f"unrecognised version, expected {CHECKPOINT_VERSION}",
            source=source,
            line=1,
            field="version",
            value=version,
        )
    if len(lines) < 2:
        return []
    expected = _java_int(lines[1], _INT32, source=source, line=2, field="count")
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        parts = _split_fields(line)
        if len(parts) != fields.count(" ") + 1:
            raise KafkaFormatError(
                f"malformed line: expected '{fields}'", source=source, line=number, value=line
            )
        entries.append(parse_entry(parts, number))
    if len(entries) != expected:
        raise KafkaFormatError(
            f"expected {expected} entries, found {len(entries)}",
            source=source,
            line=2,
            field="count",
            value=expected,
        )
    return entries


def parse_offset_checkpoint(text: str, *, source: str | None = None) -> dict[tuple[str, int], int]:
    """``OffsetCheckpointFile``: ``{(topic, partition): offset}`` (a later line for the same
    partition wins, as Kafka's map does)."""

    def entry(parts: list[str], line: int) -> tuple[str, int, int]:
        partition = _java_int(parts[1], _INT32, source=source, line=line, field="partition")
        offset = _java_int(parts[2], _INT64, source=source, line=line, field="offset")
        return parts[0], partition, offset

    entries = _read_checkpoint(text, entry, source=source, fields="topic partition offset")
    return {(topic, partition): offset for topic, partition, offset in entries}


def parse_leader_epoch_checkpoint(
    text: str, *, source: str | None = None
) -> tuple[EpochEntry, ...]:
    """``LeaderEpochCheckpointFile``: the cache's entries in file order."""

    def entry(parts: list[str], line: int) -> EpochEntry:
        return EpochEntry(
            _java_int(parts[0], _INT32, source=source, line=line, field="epoch"),
            _java_int(parts[1], _INT64, source=source, line=line, field="start_offset"),
        )

    return tuple(_read_checkpoint(text, entry, source=source, fields="epoch startOffset"))


def _entries_text(version: int, lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in [str(version), str(len(lines)), *lines])


def format_offset_checkpoint(entries: Iterable[tuple[str, int, int]]) -> str:
    """The text ``OffsetCheckpointFile.write`` writes for ``(topic, partition, offset)``s."""
    return _entries_text(CHECKPOINT_VERSION, [f"{t} {p} {o}" for t, p, o in entries])


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    """The text ``LeaderEpochCheckpointFile.write`` writes for ``(epoch, start offset)``s."""
    return _entries_text(CHECKPOINT_VERSION, [f"{e} {o}" for e, o in entries])


# --- partition.metadata -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """``partition.metadata``: the file's version and the topic id (16 bytes)."""

    version: int
    topic_id: bytes

    @property
    def topic_id_text(self) -> str:
        return topic_id_to_string(self.topic_id)


def topic_id_to_string(topic_id: bytes) -> str:
    """``Uuid.toString``: URL-safe base64 without padding.

    >>> topic_id_to_string(bytes(range(16)))
    'AAECAwQFBgcICQoLDA0ODw'
    """
    return base64.urlsafe_b64encode(topic_id).decode("ascii").rstrip("=")


def topic_id_from_string(text: str) -> bytes | None:
    """``Uuid.fromString``: 16 bytes from URL-safe base64 (padding optional), else None."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+={0,2}", text):
        return None
    stripped = text.rstrip("=")
    try:
        decoded = base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except ValueError:
        return None
    return decoded if len(decoded) == 16 else None


def parse_partition_metadata(text: str, *, source: str | None = None) -> PartitionMetadata:
    """``PartitionMetadataReadBuffer``: ``version: N`` (N >= 0) then ``topic_id: <uuid>``
    (not the zero uuid); each line ``key: value`` split at the first colon and whitespace."""
    lines = _lines(text)

    def value_of(number: int, key: str) -> str:
        line = lines[number - 1] if len(lines) >= number else None
        parts = re.split(r":\s+", line, maxsplit=1) if line is not None else []
        if len(parts) != 2 or parts[0] != key:
            raise KafkaFormatError(
                f"malformed line: expected '{key}: ...'",
                source=source,
                line=number,
                field=key,
                value=line,
            )
        return parts[1]

    version = _java_int(value_of(1, "version"), _INT32, source=source, line=1, field="version")
    if version < 0:
        raise KafkaFormatError(
            "unrecognized version", source=source, line=1, field="version", value=version
        )
    text_id = value_of(2, "topic_id")
    topic_id = topic_id_from_string(text_id)
    if topic_id is None:
        raise KafkaFormatError(
            "not a topic id (base64 of 16 bytes)",
            source=source,
            line=2,
            field="topic_id",
            value=text_id,
        )
    if topic_id == bytes(16):
        raise KafkaFormatError("invalid topic id (the zero uuid)", source=source, line=2)
    return PartitionMetadata(version, topic_id)


def format_partition_metadata(topic_id: bytes, version: int = 0) -> str:
    """``PartitionMetadata.encode`` (no newline after the topic id, as Kafka writes it)."""
    return f"version: {version}\ntopic_id: {topic_id_to_string(topic_id)}"


def parse_meta_properties(text: str, *, source: str | None = None) -> dict[str, str]:
    """``meta.properties`` (``java.util.Properties`` as Kafka writes it: ``key=value`` lines,
    ``#`` comments); keys sorted. Line continuations and escapes are not interpreted."""
    properties = {}
    for line in _lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]?\s*(.*)", stripped)
        if match:
            properties[match.group(1)] = match.group(2)
    return dict(sorted(properties.items()))
