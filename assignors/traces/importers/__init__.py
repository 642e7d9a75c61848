"""Real consumer-group history -> rebalance traces (format v1, spec/traces.md).

Three sources, one module each; every parser is pure (text in, rows out) and names the file and
line of anything it cannot read:

- ``dump-log``: ``kafka-dump-log.sh --offsets-decoder`` over ``__consumer_offsets`` segments
  (classic groups and KIP-848 consumer groups; :mod:`.dump_log`);
- ``formatter``: the console consumer's JSON ``GroupMetadataMessageFormatter`` output
  (classic groups, ConsumerProtocol bytes in base64; :mod:`.formatter`);
- ``coordinator-log``: broker group-coordinator INFO lines (membership and timing only;
  :mod:`.coordinator_log`).

A trace is a group (``trace_id`` = group id; ``<group>#2`` after the group was deleted and
re-created). Partition counts come from the ``--topics`` side file when given, else from KIP-848
topic metadata, else the smallest count consistent with every partition assigned so far.

>>> import_history("formatter", [("empty.json", "")]).rows
()
"""

from __future__ import annotations

from collections.abc import Iterable
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

SourceKind = Literal["dump-log", "formatter", "coordinator-log"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("dump-log", "formatter", "coordinator-log")

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
    "parse_topics_file",
]


def import_history(
    kind: str,
    sources: Iterable[tuple[str, str | Iterable[str]]],
    catalog: TopicCatalog | None = None,
    options: ImportOptions | None = None,
) -> ImportResult:
    """Rows from ``(name, text or lines)`` sources of one kind, oldest first."""
    if kind == "dump-log":
        return import_dump_log(sources, catalog, options)
    if kind == "formatter":
        return import_formatter(sources, catalog, options)
    if kind == "coordinator-log":
        if catalog is None or not catalog.topics:
            raise InputError(
                "coordinator logs name no partition counts: give a topics file", field="--topics"
            )
        return import_coordinator_log(sources, catalog, options)
    raise InputError(
        f"unknown source kind (expected one of {', '.join(SOURCE_KINDS)})",
        field="--from",
        value=kind,
    )
