"""`ktk traces import`: real consumer-group history -> rebalance traces (format v1)."""

from __future__ import annotations

import gc
import gzip
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from ktk.console import escape, fail, out, reported_errors, warn

FORMATS = ("jsonl", "jsonl.gz", "parquet")
SHOWN_NOTES = 5


def _read_text(path: Path) -> str:
    return "".join(_lines(path))


def _lines(path: Path) -> Iterator[str]:
    """The file's lines as it is read (.gz decompressed), so large captures are not held whole."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        yield from handle


class _Source(NamedTuple):
    """A capture file, opened when the importer reaches it."""

    name: str
    lines: Iterator[str]


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Parsed records hold no reference cycles; the cycle collector only halves the speed on
    large dumps (its passes are triggered by the many small objects)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _validated(rows: tuple[dict[str, Any], ...], target: str) -> None:
    """Rows must pass the trace reader's own checks before they are written."""
    from assignors.traces.format import build_trace, parse_generation

    generations = [parse_generation(row, target, line) for line, row in enumerate(rows, 1)]
    for trace_id, group in itertools.groupby(generations, key=lambda item: item.trace_id):
        build_trace(trace_id, list(group))


def _output_name(kind: str, first: Path, file_format: str) -> str:
    stem = first.name.split(".")[0] or "input"
    return f"{kind}-{stem}.{file_format}"


def register(traces_app: typer.Typer) -> None:
    """Add `import` to the `ktk traces` group."""

    @traces_app.command("import")
    def import_command(
        files: Annotated[
            list[Path],
            typer.Argument(help="Captured history, oldest first (.gz is read too)."),
        ],
        source_kind: Annotated[
            str,
            typer.Option("--from", help="dump-log, formatter or coordinator-log."),
        ],
        out_dir: Annotated[
            Path, typer.Option("--out", "-o", help="Directory to write the traces into.")
        ],
        topics: Annotated[
            Path | None,
            typer.Option(
                "--topics",
                help='JSON side file: {"topic": partitions, ...} (required for coordinator-log).',
            ),
        ] = None,
        file_format: Annotated[
            str, typer.Option("--format", help="jsonl, jsonl.gz or parquet.")
        ] = "jsonl",
        groups: Annotated[
            list[str] | None,
            typer.Option("--group", "-g", help="Import only this group (repeat for more)."),
        ] = None,
        prefix: Annotated[
            str,
            typer.Option("--prefix", help="Put this before every trace id (group id)."),
        ] = "",
        skip_bad_records: Annotated[
            bool,
            typer.Option(
                "--skip-bad-records",
                help="Skip (and list) records or lines that break their format instead of "
                "stopping at the first.",
            ),
        ] = False,
    ) -> None:
        """Turn kafka-dump-log, GroupMetadataMessageFormatter or coordinator-log output into
        traces, one per group, written to OUT/<from>-<first file>.<format>."""
        from assignors.traces.files import write_traces
        from assignors.traces.importers import (
            SOURCE_KINDS,
            ImportOptions,
            import_history,
            parse_topics_file,
        )

        if source_kind not in SOURCE_KINDS:
            raise fail(f"--from must be one of {', '.join(SOURCE_KINDS)} (got {source_kind!r})")
        if file_format not in FORMATS:
            raise fail(f"--format must be one of {', '.join(FORMATS)} (got {file_format!r})")
        with reported_errors():
            catalog = None
            if topics is not None:
                catalog = parse_topics_file(_read_text(topics), str(topics))
            elif source_kind == "coordinator-log":
                raise fail("coordinator logs name no partition counts: give --topics FILE")
            for path in files:
                if not path.is_file():  # fail before any work, naming the file
                    path.open().close()
            sources = (_Source(str(path), _lines(path)) for path in files)
            options = ImportOptions(
                frozenset(groups) if groups else None, strict=not skip_bad_records
            )
            with _no_cycle_collection():
                result = import_history(source_kind, sources, catalog, options)
            target = out_dir / _output_name(source_kind, files[0], file_format)
            if not result.rows:
                for note in result.skipped:
                    warn(str(note))
                raise fail(
                    f"no consumer-group generations found in {len(files)} file(s); is "
                    f"this the output --from {source_kind} expects?"
                )
            rows = tuple({**row, "trace_id": prefix + row["trace_id"]} for row in result.rows)
            _validated(rows, str(target))
            written = write_traces(rows, target)
        for note in result.skipped[:SHOWN_NOTES]:
            warn(str(note))
        if len(result.skipped) > SHOWN_NOTES:
            warn(f"... and {len(result.skipped) - SHOWN_NOTES} more (-v lists them all)")
        out.print(
            f"{len(result.trace_ids())} traces, {written} generations -> {escape(str(target))}"
        )
