"""`ktk traces import`: real consumer-group history -> rebalance traces (format v1)."""

from __future__ import annotations

import gzip
import itertools
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from ktk.commands.options import TRACE_FORMATS, force_option, out_option, trace_format_option
from ktk.console import (
    STDIN,
    ensure_one_of,
    escape,
    fail,
    out,
    reported_errors,
    shown_name,
    stdin_as_files,
    warn,
)

SHOWN_NOTES = 5


def _read_text(path: Path) -> str:
    return "".join(_lines(path))


def _lines(path: Path) -> Iterator[str]:
    """The file's lines as it is read (.gz decompressed), so large captures are not held whole."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        yield from handle


def _read_bytes(path: Path) -> bytes:
    """A segment file's bytes (.gz decompressed)."""
    data = path.read_bytes()
    if not path.name.endswith(".gz"):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        from ktkbase.errors import InputError

        raise InputError(f"not readable as gzip: {error}", source=shown_name(path)) from None


class _Source(NamedTuple):
    """A capture file, opened when the importer reaches it."""

    name: str
    lines: Iterator[str]


def _validated(rows: tuple[dict[str, Any], ...], target: str) -> None:
    """Rows must pass the trace reader's own checks before they are written."""
    from assignors.traces.format import build_trace, parse_generation

    generations = [parse_generation(row, target, line) for line, row in enumerate(rows, 1)]
    for trace_id, group in itertools.groupby(generations, key=lambda item: item.trace_id):
        build_trace(trace_id, list(group))


def _output_name(kind: str, first: str, file_format: str) -> str:
    """``<from>-<first file's name up to its first dot>.<format>``; ``stdin`` for ``-``.

    >>> _output_name("dump-log", "captures/offsets-7.txt.gz", "jsonl")
    'dump-log-offsets-7.jsonl'
    >>> _output_name("formatter", "-", "parquet")
    'formatter-stdin.parquet'
    """
    stem = "stdin" if first == STDIN else Path(first).name.split(".")[0] or "input"
    return f"{kind}-{stem}.{file_format}"


def register(traces_app: typer.Typer) -> None:
    """Add `import` to the `ktk traces` group."""

    @traces_app.command("import")
    def import_command(
        files: Annotated[
            list[str],
            typer.Argument(
                metavar="FILE",
                help="Captured history, oldest first (.gz is read too); `-` reads standard input. "
                "With --from segments: .log segment files, or directories holding them.",
            ),
        ],
        source_kind: Annotated[
            str,
            typer.Option("--from", help="dump-log, formatter, coordinator-log or segments."),
        ],
        out_dir: Annotated[Path, out_option("Directory to write (replaced whole; see --force).")],
        topics: Annotated[
            Path | None,
            typer.Option(
                "--topics",
                metavar="FILE",
                help='JSON side file: {"topic": partitions, ...} (required for coordinator-log).',
            ),
        ] = None,
        file_format: Annotated[str, trace_format_option()] = "jsonl",
        groups: Annotated[
            list[str] | None,
            typer.Option(
                "--group", "-g", metavar="GROUP", help="Import only this group (repeat for more)."
            ),
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
        force: Annotated[bool, force_option()] = False,
    ) -> None:
        """Turn kafka-dump-log, GroupMetadataMessageFormatter or coordinator-log output, or
        the __consumer_offsets segment files themselves, into traces, one per group, written to
        OUT/<from>-<first file>.<format>.

        OUT is written whole: a new directory, or one an earlier ktk run wrote, which is then
        replaced (a run that is interrupted leaves the previous OUT as it was).
        """
        import ktk
        from assignors.model import no_cycle_collection
        from assignors.traces.files import write_traces
        from assignors.traces.importers import (
            SOURCE_KINDS,
            ImportOptions,
            import_history,
            parse_topics_file,
            segment_files,
        )
        from ktkbase.outputs import plan_output_directory, staged_directory

        ensure_one_of("--from", source_kind, SOURCE_KINDS)
        ensure_one_of("--format", file_format, TRACE_FORMATS)
        if topics is None and source_kind == "coordinator-log":
            raise fail("coordinator logs name no partition counts: give --topics FILE")
        named = [Path(path) for path in files if path != STDIN]
        inputs = list(named)
        inputs += [topics] if topics is not None else []
        segments = source_kind == "segments"
        with reported_errors():
            # refuse a bad --out before reading a byte of a possibly huge capture
            plan = plan_output_directory(
                out_dir,
                command="traces import",
                version=ktk.__version__,
                inputs=inputs,
                force=force,
            )
            catalog = None
            if topics is not None:
                catalog = parse_topics_file(_read_text(topics), str(topics))
            if segments:  # directories: every <base offset>.log below them
                for path in named:
                    if path.is_dir() and not segment_files([path]):
                        raise fail(f"no segment files (<base offset>.log) under {path}")
                inputs = [path for path in inputs if not path.is_dir()]
            for path in inputs:
                if not path.is_file():  # fail before any work, naming the file
                    path.open().close()
        suffix = ".log" if segments else ".txt"
        with stdin_as_files(files, suffix=suffix) as paths, reported_errors():
            sources: Iterator[tuple[str, Any]]
            if segments:
                sources = ((shown_name(path), _read_bytes(path)) for path in segment_files(paths))
            else:
                sources = (_Source(shown_name(path), _lines(Path(path))) for path in paths)
            options = ImportOptions(
                frozenset(groups) if groups else None, strict=not skip_bad_records
            )
            with no_cycle_collection():
                result = import_history(source_kind, sources, catalog, options)
        name = _output_name(source_kind, files[0], file_format)
        with reported_errors():
            if not result.rows:
                for note in result.skipped:
                    warn(str(note))
                raise fail(
                    f"no consumer-group generations found in {len(files)} file(s); is "
                    f"this the output --from {source_kind} expects?"
                )
            rows = tuple({**row, "trace_id": prefix + row["trace_id"]} for row in result.rows)
            _validated(rows, str(out_dir / name))
            with staged_directory(plan) as staging:
                written = write_traces(rows, Path(staging) / name)
        for note in result.skipped[:SHOWN_NOTES]:
            warn(str(note))
        if len(result.skipped) > SHOWN_NOTES:
            warn(f"... and {len(result.skipped) - SHOWN_NOTES} more (-v lists them all)")
        out.print(
            f"{len(result.trace_ids())} traces, {written} generations -> "
            f"{escape(str(out_dir / name))}"
        )
