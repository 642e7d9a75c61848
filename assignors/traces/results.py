"""The result directory of a replay: ``scores.parquet``, ``summary.parquet``, ``errors.jsonl``.

Rows are sorted (trace, assignor, generation) and Parquet is written with fixed settings, so the
same rows give the same bytes. The directory appears atomically: everything is written into a
temporary directory beside it, which is then renamed into place (replacing an older result).

>>> import tempfile, pathlib
>>> from assignors.traces.scoring import ScoreRow
>>> row = ScoreRow("g", "range", 1, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 0, 0, 0, 0, 1, None, None)
>>> with tempfile.TemporaryDirectory() as parent:
...     out = write_results(pathlib.Path(parent) / "out", [row], [])
...     sorted(path.name for path in out.iterdir()), read_scores(out) == [row]
(['errors.jsonl', 'scores.parquet', 'summary.parquet'], True)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from assignors.traces.format import TraceFailure, failure_key
from assignors.traces.scoring import (
    ScoreRow,
    SummaryRow,
    score_key,
    scores_table,
    summarize,
    summary_table,
)

SCORES_FILE = "scores.parquet"
SUMMARY_FILE = "summary.parquet"
ERRORS_FILE = "errors.jsonl"

# fixed writer settings: byte-identical files for identical rows
_PARQUET_OPTIONS = {
    "compression": "zstd",
    "use_dictionary": True,
    "write_statistics": True,
    "version": "2.6",
}


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write one table with the settings every result file uses (no pandas metadata)."""
    pq.write_table(table.replace_schema_metadata(None), path, **_PARQUET_OPTIONS)


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


def write_results(
    out_dir: str | os.PathLike[str],
    scores: Iterable[ScoreRow],
    failures: Iterable[TraceFailure],
    summary: Iterable[SummaryRow] | None = None,
) -> Path:
    """Write the three result files into ``out_dir`` atomically and return its path.

    ``summary`` defaults to :func:`~assignors.traces.scoring.summarize` of ``scores``.
    """
    target = Path(out_dir)
    ordered = sorted(scores, key=score_key)
    summary_rows = sorted(
        summary if summary is not None else summarize(ordered),
        key=lambda row: (row.trace_id, row.assignor),
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; results are meant to be shared
        write_parquet(scores_table(ordered), staging / SCORES_FILE)
        write_parquet(summary_table(summary_rows), staging / SUMMARY_FILE)
        (staging / ERRORS_FILE).write_text(errors_jsonl(failures), encoding="utf-8")
        _swap_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _swap_into_place(staging: Path, target: Path) -> None:
    if not target.exists():
        os.rename(staging, target)
        return
    if not target.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(target))
    retired = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    os.rename(target, retired / target.name)
    os.rename(staging, target)
    shutil.rmtree(retired, ignore_errors=True)


def read_scores(out_dir: str | os.PathLike[str]) -> list[ScoreRow]:
    table = pq.read_table(Path(out_dir) / SCORES_FILE)
    return [ScoreRow(**row) for row in table.to_pylist()]


def read_summary(out_dir: str | os.PathLike[str]) -> list[SummaryRow]:
    table = pq.read_table(Path(out_dir) / SUMMARY_FILE)
    return [SummaryRow(**row) for row in table.to_pylist()]


def read_errors(out_dir: str | os.PathLike[str]) -> list[dict[str, object]]:
    path = Path(out_dir) / ERRORS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
