"""The result directory of a replay: ``scores.parquet``, ``summary.parquet``, ``errors.jsonl``,
``verdict.json``.

Both engines write the same layout, four single files plus ktk's manifest ``.ktk-output.json``,
with the same bytes for the same rows: rows are sorted (trace, assignor, generation), Parquet is
written with fixed settings and carries the result format version under
:data:`RESULTS_VERSION_KEY`. The score rows may come as rows or, already columnar, as an Arrow
table (:func:`~assignors.traces.scoring.scores_table`; the Spark job's tasks send theirs so):
the same rows give the same bytes either way. The directory is written through
:mod:`ktkbase.outputs`: staged beside the target and moved into place, refusing to replace a
directory ktk did not create, an input, or the current directory.

>>> import tempfile, pathlib
>>> from assignors.traces.scoring import ScoreRow
>>> row = ScoreRow("g", "range", 1, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 0, 0, 0, 0, 1, None, None)
>>> with tempfile.TemporaryDirectory() as parent:
...     out = write_results(pathlib.Path(parent) / "out", [row], [])
...     print(*sorted(path.name for path in out.iterdir()), read_scores(out) == [row])
.ktk-output.json _SUCCESS errors.jsonl scores.parquet summary.parquet verdict.json True
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from assignors.traces.cost import CostModel
from assignors.traces.format import TraceFailure, failure_key
from assignors.traces.scoring import (
    SCORE_SCHEMA,
    SUMMARY_SCHEMA,
    ScoreRow,
    SummaryRow,
    scores_table,
    summarize,
    summary_table,
)
from assignors.traces.verdict import build_verdict, verdict_json
from ktkbase.outputs import output_directory

SCORES_FILE = "scores.parquet"
SUMMARY_FILE = "summary.parquet"
ERRORS_FILE = "errors.jsonl"
VERDICT_FILE = "verdict.json"
RESULT_FILES = (SCORES_FILE, SUMMARY_FILE, ERRORS_FILE, VERDICT_FILE)

RESULTS_VERSION = 4
"""Version of the documented result columns (docs/traces.md); 2 added ``summary.protocol``;
3 added the cost-model and ``excess_moved`` columns and ``verdict.json``; 4 the KIP-848
reconciliation columns."""
RESULTS_VERSION_KEY = "ktk.results.version"
"""Parquet schema metadata key holding :data:`RESULTS_VERSION` in both result files."""

# fixed writer settings: byte-identical files for identical rows
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": True,
    "write_statistics": True,
    "version": "2.6",
}
_METADATA = {RESULTS_VERSION_KEY: str(RESULTS_VERSION)}


def default_version() -> str:
    try:
        return metadata.version("ktk")
    except metadata.PackageNotFoundError:
        return "unknown"


def parquet_bytes(table: pa.Table) -> bytes:
    """One result table as Parquet bytes, written with the settings every result file uses
    (no pandas metadata; the result format version in the schema metadata)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(_METADATA), sink, **_PARQUET_OPTIONS)
    return bytes(sink.getvalue().to_pybytes())


def errors_jsonl(failures: Iterable[TraceFailure]) -> str:
    """errors.jsonl content: one {"trace_id", "file", "reason"} object a line, sorted."""
    lines = [
        json.dumps(
            {"trace_id": f.trace_id, "file": f.file, "reason": f.reason},
            ensure_ascii=False,
        )
        for f in sorted(failures, key=failure_key)
    ]
    return "".join(line + "\n" for line in lines)


_SCORE_ORDER = [("trace_id", "ascending"), ("assignor", "ascending"), ("generation", "ascending")]


def sorted_scores(table: pa.Table) -> pa.Table:
    """A score table (one or many chunks) in the result files' order, (trace, assignor,
    generation), as one chunk: the order sorting the rows by those fields gives (the key is
    unique per row, and Arrow compares strings by their UTF-8 bytes, which is code point
    order like Python's)."""
    if table.num_rows == 0:
        return SCORE_SCHEMA.empty_table()
    order = pc.sort_indices(table, sort_keys=_SCORE_ORDER)
    return table.take(order).combine_chunks()


def result_files(
    scores: Iterable[ScoreRow] | pa.Table,
    failures: Iterable[TraceFailure],
    summary: Iterable[SummaryRow] | None = None,
    cost_model: CostModel | None = None,
) -> dict[str, bytes]:
    """The bytes of the four result files, by file name: the one writer both engines use
    (locally through :func:`write_result_files`, on Hadoop file systems through its streams).

    ``scores`` are rows, or a table of :data:`~assignors.traces.scoring.SCORE_SCHEMA` in any
    order and chunking (:func:`~assignors.traces.scoring.scores_table`); both give the same
    bytes. ``summary``
    defaults to :func:`~assignors.traces.scoring.summarize` of ``scores`` (which knows no
    protocols: the column is then null). ``verdict.json`` is
    :func:`~assignors.traces.verdict.build_verdict` of the summary; ``cost_model`` (the
    settings the rows were costed with, default :class:`~assignors.traces.cost.CostModel`)
    is recorded in it.
    """
    if isinstance(scores, pa.Table):
        if not scores.schema.equals(SCORE_SCHEMA):
            raise ValueError(f"score table's schema is not the score schema: {scores.schema}")
        table = sorted_scores(scores)
    else:
        table = sorted_scores(scores_table(scores))
    if summary is None:
        summary = summarize(ScoreRow(**row) for row in table.to_pylist())
    summary_rows = sorted(summary, key=lambda row: (row.trace_id, row.assignor))
    return {
        SCORES_FILE: parquet_bytes(table),
        SUMMARY_FILE: parquet_bytes(summary_table(summary_rows)),
        ERRORS_FILE: errors_jsonl(failures).encode("utf-8"),
        VERDICT_FILE: verdict_json(
            build_verdict(
                summary_rows, (cost_model if cost_model is not None else CostModel()).describe()
            )
        ),
    }


def write_result_files(
    directory: str | os.PathLike[str],
    scores: Iterable[ScoreRow] | pa.Table,
    failures: Iterable[TraceFailure],
    summary: Iterable[SummaryRow] | None = None,
    cost_model: CostModel | None = None,
) -> None:
    """Write the four result files into ``directory`` (a staging directory of
    :func:`open_results`; nothing here checks what it replaces); ``scores`` as for
    :func:`result_files`."""
    for name, data in result_files(scores, failures, summary, cost_model).items():
        path = Path(directory) / name
        path.write_bytes(data)
        path.chmod(0o644)


@contextmanager
def open_results(
    out_dir: str | os.PathLike[str],
    *,
    command: str = "assignors.traces.results",
    version: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
) -> Iterator[Path]:
    """A staging directory for a result directory (:func:`ktkbase.outputs.output_directory`):
    checked on entry (raises :class:`~ktkbase.errors.OutputError` before anything is written),
    moved into place when the block ends without an error, removed otherwise."""
    with output_directory(
        out_dir,
        command=command,
        version=version if version is not None else default_version(),
        inputs=inputs,
        force=force,
    ) as staging:
        staging.chmod(0o755)  # results are meant to be shared
        yield staging


def write_results(
    out_dir: str | os.PathLike[str],
    scores: Iterable[ScoreRow],
    failures: Iterable[TraceFailure],
    summary: Iterable[SummaryRow] | None = None,
    *,
    command: str = "assignors.traces.results",
    version: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
) -> Path:
    """Write the three result files into ``out_dir`` safely (:func:`open_results`) and return
    its path. ``command``, ``version`` and ``inputs`` go into the manifest; ``force`` writes
    into a directory ktk did not create, keeping its other entries."""
    with open_results(
        out_dir, command=command, version=version, inputs=inputs, force=force
    ) as staging:
        write_result_files(staging, scores, failures, summary)
    return Path(out_dir)


# -- reading ----------------------------------------------------------------------------------


def _read_table(path: Path, schema: pa.Schema, order: list[str]) -> pa.Table:
    """A result table from a single Parquet file or a Parquet dataset directory (part files,
    ``assignor=x/`` partitions, ``_SUCCESS`` and ``.crc`` files skipped), with ``schema``'s
    columns in order, sorted by ``order``. Columns a version 1 file lacks come back null."""
    if path.is_dir():
        import pyarrow.dataset as ds  # slow to import; only older Spark results need it

        table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    else:
        table = pq.read_table(path)
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            if pa.types.is_dictionary(column.type):
                column = column.cast(column.type.value_type)
            columns.append(column.cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    table = pa.Table.from_arrays(columns, names=schema.names)
    return table.sort_by([(name, "ascending") for name in order])


def read_scores(out_dir: str | os.PathLike[str]) -> list[ScoreRow]:
    """The score rows of a result directory, sorted (trace, assignor, generation)."""
    table = _read_table(
        Path(out_dir) / SCORES_FILE, SCORE_SCHEMA, ["trace_id", "assignor", "generation"]
    )
    return [ScoreRow(**row) for row in table.to_pylist()]


def read_summary(out_dir: str | os.PathLike[str]) -> list[SummaryRow]:
    """The summary rows of a result directory, sorted (trace, assignor); ``protocol`` is null
    in results of format version 1."""
    table = _read_table(Path(out_dir) / SUMMARY_FILE, SUMMARY_SCHEMA, ["trace_id", "assignor"])
    return [SummaryRow(**row) for row in table.to_pylist()]


def read_errors(out_dir: str | os.PathLike[str]) -> list[dict[str, object]]:
    """The lines of ``errors.jsonl`` (a file, or a directory of part files), in order."""
    path = Path(out_dir) / ERRORS_FILE
    if not path.exists():
        return []
    if path.is_dir():
        parts = sorted(p for p in path.iterdir() if not p.name.startswith((".", "_")))
        text = "".join(part.read_text(encoding="utf-8") for part in parts)
    else:
        text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def read_verdict(out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``verdict.json`` of a result directory; None for results older than version 3."""
    path = Path(out_dir) / VERDICT_FILE
    if not path.is_file():
        return None
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document
