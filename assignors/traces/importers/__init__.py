"""Real consumer-group history -> rebalance traces (format v1, spec/traces.md).

Four sources, one module each; every parser is pure (text or bytes in, rows out) and names the
file and line (or byte) of anything it cannot read:

- ``dump-log``: ``kafka-dump-log.sh --offsets-decoder`` over ``__consumer_offsets`` segments
  (classic groups and KIP-848 consumer groups; :mod:`.dump_log`);
- ``formatter``: the console consumer's JSON ``GroupMetadataMessageFormatter`` output
  (classic groups, ConsumerProtocol bytes in base64; :mod:`.formatter`);
- ``coordinator-log``: broker group-coordinator INFO lines (membership and timing only;
  :mod:`.coordinator_log`);
- ``segments``: the ``__consumer_offsets`` ``.log`` segment files themselves, decoded from their
  bytes into the records dump-log and the formatter give (:mod:`.segments`).

A trace is a group (``trace_id`` = group id; ``<group>#2`` after the group was deleted and
re-created). Partition counts come from the ``--topics`` side file when given, else from KIP-848
topic metadata, else the smallest count consistent with every partition assigned so far.

>>> import_history("formatter", [("empty.json", "")]).rows
()
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Literal

from assignors.errors import InputError
from assignors.traces.importers.common import (
    ImportOptions,
    ImportResult,
    Skipped,
    TopicCatalog,
    TopicInfo,
    parse_topics_file,
)
from assignors.traces.importers.coordinator_log import import_coordinator_log
from assignors.traces.importers.dump_log import import_dump_log
from assignors.traces.importers.formatter import import_formatter
from assignors.traces.importers.segments import import_segments, segment_files

SourceKind = Literal["dump-log", "formatter", "coordinator-log", "segments"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("dump-log", "formatter", "coordinator-log", "segments")

__all__ = [
    "SOURCE_KINDS",
    "ImportOptions",
    "ImportResult",
    "Skipped",
    "SourceKind",
    "TopicCatalog",
    "TopicInfo",
    "import_coordinator_log",
    "import_dump_log",
    "import_formatter",
    "import_history",
    "import_segments",
    "parse_topics_file",
    "segment_files",
]


def import_history(
    kind: str,
    sources: Iterable[tuple[str, str | Iterable[str] | bytes]],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Rows from ``(name, text or lines)`` sources of one kind (``(name, bytes)`` for
    ``segments``), oldest first."""
    if kind == "segments":
        return import_segments(_binary(sources), catalog, options)
    text_sources = _textual(sources)
    if kind == "dump-log":
        return import_dump_log(text_sources, catalog, options)
    if kind == "formatter":
        return import_formatter(text_sources, catalog, options)
    if kind == "coordinator-log":
        if catalog is None or not catalog.topics:
            raise InputError(
                "coordinator logs name no partition counts: give a topics file", field="--topics"
            )
        return import_coordinator_log(text_sources, catalog, options)
    raise InputError(
        f"unknown source kind (expected one of {', '.join(SOURCE_KINDS)})",
        field="--from",
        value=kind,
    )


def _binary(
    sources: Iterable[tuple[str, str | Iterable[str] | bytes]],
) -> Iterator[tuple[str, bytes]]:
    for name, data in sources:
        if not isinstance(data, bytes):
            raise InputError("a segment file is read as bytes, not text", source=name)
        yield name, data


def _textual(
    sources: Iterable[tuple[str, str | Iterable[str] | bytes]],
) -> Iterator[tuple[str, str | Iterable[str]]]:
    for name, data in sources:
        if isinstance(data, bytes):
            raise InputError("give segment files (bytes) with --from segments", source=name)
        yield name, data
