"""Trace files: finding them, reading their rows into traces, writing traces out.

Files are JSON Lines (optionally gzipped) or Parquet with the columns of
:data:`~assignors.traces.format.TRACE_SCHEMA`; the rows of one trace may be spread over many
files. Directories are searched with the one data-file rule of :mod:`ktkbase.files` (entries
starting with ``.`` or ``_`` are skipped), the same rule the Spark jobs use.

>>> import tempfile, pathlib
>>> from assignors.traces.format import parse_generation, build_trace
>>> row = {"trace_id": "g", "generation": 1, "topics": [{"name": "t", "partitions": 2}],
...        "members": [{"member_id": "a", "topics": ["t"]}]}
>>> with tempfile.TemporaryDirectory() as directory:
...     _ = write_traces([row], pathlib.Path(directory) / "g.jsonl")
...     traces, failures = read_traces([directory])
>>> [trace.trace_id for trace in traces], failures
(['g'], [])
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from assignors.errors import InputError
from assignors.traces.format import (
    Generation,
    Trace,
    TraceFailure,
    _rows,
    build_trace,
    failure_key,
    parse_generation,
    traces_table,
)
from ktkbase import jsonsafe
from ktkbase.files import data_files
from ktkbase.outputs import atomic_file

TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")

_JSON_SEPARATORS = (",", ":")


def is_trace_file(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES)


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The trace files named by ``paths``: files as given, directories searched recursively for
    .jsonl, .jsonl.gz and .parquet files by the one data-file rule of :mod:`ktkbase.files`
    (entries starting with ``.`` or ``_`` skipped, as Spark does)."""
    return data_files(paths, TRACE_SUFFIXES)


MAX_LINE_BYTES = jsonsafe.MAX_TEXT_CHARS
"""Longest line of a JSON Lines trace file (64 MiB); a longer line is reported, not read whole."""

_TOO_LONG = object()


def _bounded_lines(handle: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[bytes | object]:
    """The file's lines (``\n`` ends a line), each at most ``limit`` bytes, or ``_TOO_LONG`` in
    place of a longer line, whose bytes are skipped without being held in memory."""
    while True:
        chunk = handle.readline(limit + 1)
        if not chunk:
            return
        if len(chunk) <= limit or chunk.endswith(b"\n"):
            yield chunk
            continue
        while chunk and not chunk.endswith(b"\n"):
            chunk = handle.readline(limit + 1)
        yield _TOO_LONG


def _json_lines(
    lines: Iterable[str | bytes | object], source: str, bad_lines: list[InputError] | None
) -> Iterator[tuple[str, int, Any]]:
    """Rows of JSON Lines (text or bytes lines; ``_TOO_LONG`` for a line over the limit), every
    line decoded by :mod:`ktkbase.jsonsafe`."""
    for line, raw in enumerate(lines, start=1):
        problem: InputError | None = None
        text = ""
        if raw is _TOO_LONG:
            problem = InputError(
                f"line longer than {MAX_LINE_BYTES} bytes", source=source, line=line, field="row"
            )
        elif isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                guessed = _TRACE_ID_PATTERN.search(raw.decode("utf-8", "replace"))
                problem = InputError(
                    f"not UTF-8 text (byte {error.start + 1} of the line)",
                    source=source,
                    line=line,
                    field="row",
                    trace_id=guessed.group(1) if guessed else None,
                )
        else:
            text = str(raw)
        if problem is None:
            if not text.strip():
                continue
            try:
                row = jsonsafe.loads(text, source=source, line=line)
            except jsonsafe.JSONInputError as error:
                guessed = _TRACE_ID_PATTERN.search(text)
                problem = InputError(
                    error.message,
                    source=source,
                    line=line,
                    field=error.field or "row",
                    value=error.value,
                    trace_id=guessed.group(1) if guessed else None,
                )
            else:
                yield source, line, row
                continue
        if bad_lines is None:
            raise problem
        bad_lines.append(problem)


def _parquet_rows(parquet: pq.ParquetFile, source: str) -> Iterator[tuple[str, int, Any]]:
    line = 0
    for batch in parquet.iter_batches(batch_size=4096):
        try:
            rows = batch.to_pylist()
        except (ValueError, OverflowError) as error:  # e.g. a timestamp beyond Python's years
            raise InputError(
                f"rows {line + 1}-{line + batch.num_rows} cannot be read: {error}",
                source=source,
                line=line + 1,
            ) from None
        for row in rows:
            line += 1
            yield source, line, row


def iter_trace_rows(
    path: str | os.PathLike[str], bad_lines: list[InputError] | None = None
) -> Iterator[tuple[str, int, Any]]:
    """Yield ``(source, line, row)`` for every row of a .jsonl, .jsonl.gz or .parquet file.

    Blank lines are skipped. A line that is not JSON (by the rules of :mod:`ktkbase.jsonsafe`),
    not UTF-8 or longer than :data:`MAX_LINE_BYTES` raises InputError naming it, or, when
    ``bad_lines`` is given, is appended there (with the trace id it seems to name, if any) and
    skipped. Parquet rows are numbered from 1 and come back as plain dicts.
    """
    source = str(path)
    name = Path(path).name
    if name.endswith(".parquet"):
        yield from _parquet_rows(pq.ParquetFile(path), source)
        return
    opener: Any = gzip.open if name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        yield from _json_lines(_bounded_lines(handle), source, bad_lines)


class RawRow(NamedTuple):
    """A row read from a file but not yet checked (for engines that move rows around before
    putting traces together); ``error`` is set when the row could not be read at all."""

    source: str
    line: int | None
    row: Any
    error: str | None = None


def assemble_trace(trace_id: str, raw_rows: Iterable[RawRow]) -> Trace:
    """:func:`parse_generation` on every row, :func:`merge_inputs`, then :func:`build_trace`;
    a row carrying a read error fails the trace with that error."""
    generations = []
    for raw in raw_rows:
        if raw.error is not None:
            error = InputError(raw.error)
            error.source, error.line, error.trace_id = raw.source, raw.line, trace_id
            raise error
        generations.append(parse_generation(raw.row, raw.source, raw.line))
    return build_trace(trace_id, merge_inputs(trace_id, generations))


def merge_inputs(trace_id: str, generations: Sequence[Generation]) -> list[Generation]:
    """Rows of one trace read from several files, as one trace: a generation that two files
    both carry with identical content is kept once; one they carry with different content means
    two groups (or two captures) share the trace id, and fails the trace naming both files and
    the first such generation. Rows of one file are left alone (:func:`build_trace` judges them).

    >>> from assignors.traces.format import parse_generation
    >>> row = {"trace_id": "g", "generation": 1, "topics": [{"name": "t", "partitions": 2}],
    ...        "members": [{"member_id": "a", "topics": ["t"]}]}
    >>> same = [parse_generation(row, "a.jsonl", 1), parse_generation(row, "b.jsonl", 1)]
    >>> len(merge_inputs("g", same))
    1
    >>> other = parse_generation(dict(row, members=[]), "b.jsonl", 4)
    >>> try:
    ...     merge_inputs("g", [same[0], other])
    ... except InputError as error:
    ...     print(error.message[:52])
    generation 1 differs between a.jsonl:1 and b.jsonl:4
    """
    sources = {generation.source for generation in generations}
    if len(sources) < 2:
        return list(generations)
    by_number: dict[int, list[Generation]] = {}
    for generation in generations:
        by_number.setdefault(generation.generation, []).append(generation)
    for number in sorted(by_number):
        seen = by_number[number]
        for first, second in itertools.combinations(seen, 2):
            if first.source != second.source and first != second:
                raise InputError(
                    f"generation {number} differs between {_where(first)} and {_where(second)}: "
                    "two inputs carry this trace id with different contents (two groups or two "
                    "captures); import them with distinct `ktk traces import --prefix` values "
                    "to replay both",
                    source=first.source,
                    line=first.line,
                    trace_id=trace_id,
                    field="generation",
                    value=number,
                )
    kept: list[Generation] = []
    read: dict[int, list[Generation]] = {}
    for generation in generations:
        earlier = read.setdefault(generation.generation, [])
        # a row equal to one read before it from another file is the same generation twice
        if not any(other.source != generation.source and other == generation for other in earlier):
            kept.append(generation)
        earlier.append(generation)
    return kept


def _where(generation: Generation) -> str:
    source = generation.source or "?"
    return source if generation.line is None else f"{source}:{generation.line}"


_TRACE_ID_PATTERN = re.compile(r'"trace_id"\s*:\s*"([^"\\]+)"')


def file_raw_rows(path: str | os.PathLike[str]) -> Iterator[tuple[str | None, RawRow]]:
    """``(trace_id, row)`` for every row of one trace file, both engines' way in: readable rows
    in line order, then the lines that could not be read (``error`` set, ``trace_id`` when the
    broken text still names one), or one error for a file that cannot be read at all. A row
    naming no trace comes with ``trace_id`` None and an error."""
    source = str(path)
    bad_lines: list[InputError] = []
    try:
        for _, line, row in iter_trace_rows(path, bad_lines):
            trace_id = row.get("trace_id") if isinstance(row, Mapping) else None
            if not isinstance(trace_id, str) or not trace_id:
                yield None, RawRow(source, line, None, f"{source}:{line}: row has no trace_id")
                continue
            yield trace_id, RawRow(source, line, row)
    except (OSError, EOFError, zlib.error, pa.ArrowException) as error:
        yield None, RawRow(source, None, None, f"{path}: unreadable file: {error}")
    except InputError as error:  # Parquet rows Python cannot represent
        yield None, RawRow(source, error.line, None, str(error))
    for problem in bad_lines:
        yield problem.trace_id, RawRow(source, problem.line, None, str(problem))


def raw_rows_by_trace(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[dict[str, list[RawRow]], list[TraceFailure]]:
    """Every row under ``paths`` (files or directories, :func:`trace_files`), grouped by trace
    id in reading order (files as listed, each as :func:`file_raw_rows` yields it), and the
    failures of rows and files naming no trace. Missing paths raise FileNotFoundError."""
    by_trace: dict[str, list[RawRow]] = {}
    unattributed: list[TraceFailure] = []
    for path in trace_files(paths):
        for trace_id, raw in file_raw_rows(path):
            if trace_id is None:
                unattributed.append(TraceFailure(None, raw.source, raw.line, raw.error or ""))
            else:
                by_trace.setdefault(trace_id, []).append(raw)
    return by_trace, sorted(unattributed, key=failure_key)


def trace_or_failure(trace_id: str, raw_rows: Iterable[RawRow]) -> Trace | TraceFailure:
    """:func:`assemble_trace`, with the first problem as a :class:`TraceFailure`."""
    try:
        return assemble_trace(trace_id, raw_rows)
    except InputError as problem:
        return TraceFailure(trace_id, problem.source or "", problem.line, str(problem))


def read_traces(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Trace], list[TraceFailure]]:
    """Read every trace under ``paths`` (files or directories); a trace's rows may be spread
    over several files (:func:`merge_inputs` says how two files carrying the same generation
    combine). A trace with any bad row is reported once (its first error) and skipped; the
    others are returned sorted by trace id. Missing paths raise FileNotFoundError; unreadable
    files and rows naming no trace become failures without a trace id."""
    by_trace, unattributed = raw_rows_by_trace(paths)
    traces: list[Trace] = []
    failures: list[TraceFailure] = []
    for trace_id in sorted(by_trace):
        outcome = trace_or_failure(trace_id, by_trace[trace_id])
        if isinstance(outcome, TraceFailure):
            failures.append(outcome)
        else:
            traces.append(outcome)
    return traces, sorted(failures, key=failure_key) + unattributed


# ---------------------------------------------------------------------------------------------
# Trace -> files


def write_traces_jsonl(
    rows_or_traces: Iterable[Mapping[str, Any] | Trace], path: str | os.PathLike[str]
) -> int:
    """Write format-v1 rows (or whole traces) as JSON Lines, gzipped when the name ends in .gz.

    Rows are streamed (an iterator is never held whole) into a temporary file beside ``path``
    that is renamed into place at the end (:func:`ktkbase.outputs.atomic_file`), so the file
    appears whole or not at all. gzip output carries no timestamp, so the same rows give the
    same bytes. Returns the number of rows written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_file(target) as raw_handle:
        if target.name.endswith(".gz"):
            stream: Any = gzip.GzipFile(filename="", mode="wb", fileobj=raw_handle, mtime=0)
        else:
            stream = raw_handle
        for row in _rows(rows_or_traces):
            stream.write(json.dumps(row, separators=_JSON_SEPARATORS, ensure_ascii=False).encode())
            stream.write(b"\n")
            count += 1
        if stream is not raw_handle:
            stream.close()
    return count


def write_traces_parquet(
    rows_or_traces: Iterable[Mapping[str, Any] | Trace], path: str | os.PathLike[str]
) -> int:
    """Write format-v1 rows (or traces) as one Parquet file, atomically. Returns the row count."""
    target = Path(path)
    table = traces_table(rows_or_traces)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(target) as handle:
        pq.write_table(table, handle, compression="zstd")
    return table.num_rows


def write_traces(
    rows_or_traces: Iterable[Mapping[str, Any] | Trace], path: str | os.PathLike[str]
) -> int:
    """Write by file name: .parquet -> Parquet, .jsonl / .jsonl.gz -> JSON Lines."""
    if str(path).endswith(".parquet"):
        return write_traces_parquet(rows_or_traces, path)
    return write_traces_jsonl(rows_or_traces, path)
