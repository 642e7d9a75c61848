"""Reading a replay results directory into typed tables: scores, summary, protocols, errors.

A results directory (written by ``ktk replay`` or the Spark replay job, spec/traces.md) holds

- ``scores.parquet``: one row per trace x assignor x generation;
- ``summary.parquet``: one row per trace x assignor, the totals the domain computed;
- ``errors.jsonl``: the traces that could not be replayed, one JSON object a line.

Each Parquet table is a single file (the in-process engine) or a dataset directory (Spark): part
files, possibly below ``assignor=<name>/`` partition directories, beside ``_SUCCESS`` and
``.crc`` files, which are skipped like every hidden name (:func:`ktkbase.files.is_hidden_name`).
The dashboard reads only the columns listed in :data:`SCORE_FIELDS` and :data:`SUMMARY_FIELDS`
and checks each part file: required columns present, types as listed, text valid UTF-8, numbers
finite and at most 2^53 in magnitude. The protocol each assignor ran is the ``protocol`` column
the results carry (summary first, else scores); it is never guessed from the numbers.

>>> import pandas as pd
>>> scores = normalise_scores(pd.DataFrame({
...     "trace_id": ["t1"], "assignor": ["range"], "generation": [1], "moved": [0]}))
>>> scores["trace_id"].tolist(), scores["generation"].tolist(), scores["moved"].tolist()
(['t1'], [1], [0.0])
>>> protocol_labels(pd.DataFrame({"assignor": ["range", "recorded", "recorded"],
...                               "protocol": ["eager", "cooperative", "eager"]}))
{'range': ('eager',), 'recorded': ('cooperative', 'eager')}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dashboards.errors import InputError
from dashboards.page import unencodable_text
from ktkbase import jsonsafe
from ktkbase.files import data_files

SCORES_FILE = "scores.parquet"
SUMMARY_FILE = "summary.parquet"
ERRORS_FILE = "errors.jsonl"
VERDICT_FILE = "verdict.json"
RESULT_FILES = (SCORES_FILE, SUMMARY_FILE, ERRORS_FILE, VERDICT_FILE)

# counts beyond 2^53 are no partition counts, and float64 sums of them stop being exact
MAX_MAGNITUDE = 2**53
# a hive partition directory whose value was null (Spark's spelling)
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

ColumnKind = Literal["text", "integer", "number"]


@dataclass(frozen=True, slots=True)
class ResultColumn:
    """One result column the dashboard reads: its name, kind, what it means and what it feeds."""

    name: str
    kind: ColumnKind
    description: str
    required: bool = True  # False: the column may be absent or null (shown as —)


SCORE_FIELDS = (
    ResultColumn("trace_id", "text", "the replayed trace"),
    ResultColumn("assignor", "text", "the assignor, or recorded for the real group"),
    ResultColumn("generation", "integer", "the generation within the trace"),
    ResultColumn("members", "integer", "members in the group (timeline)"),
    ResultColumn("max_load", "integer", "partitions of the most loaded member (gap chart)"),
    ResultColumn(
        "optimal_max_load",
        "integer",
        "the smallest max_load any valid assignment reaches (gap chart, share at optimum)",
    ),
    ResultColumn("spread", "integer", "max - min partitions per member (timeline)"),
    ResultColumn("moved", "integer", "partitions moved to another live member (timeline)"),
    ResultColumn("revoked", "integer", "partitions revoked (per-rebalance box, timeline)"),
    ResultColumn("rounds", "integer", "rebalance rounds (per-rebalance rounds chart)"),
    ResultColumn(
        "rack_mismatch",
        "integer",
        "partitions on a member whose rack holds no replica (summary table)",
        required=False,
    ),
    ResultColumn(
        "assign_ms", "number", "time spent in the assignor (summary table)", required=False
    ),
    ResultColumn(
        "interval_ms",
        "integer",
        "milliseconds since the previous generation, from the traces' timestamp_ms (the "
        "timeline's time axis; results version 3)",
        required=False,
    ),
)
SUMMARY_FIELDS = (
    ResultColumn("trace_id", "text", "the replayed trace"),
    ResultColumn("assignor", "text", "the assignor, or recorded for the real group"),
    ResultColumn("generations", "integer", "generations replayed"),
    ResultColumn("total_moved", "integer", "partitions moved, summed over the trace"),
    ResultColumn("total_forced", "integer", "partitions whose owner left, summed"),
    ResultColumn("total_min_moved", "integer", "the fewest moves at optimal balance, summed"),
    ResultColumn("total_revoked", "integer", "partitions revoked, summed"),
    ResultColumn("total_rounds", "integer", "rebalance rounds, summed"),
    ResultColumn("max_spread", "integer", "the worst spread in the trace"),
    ResultColumn("max_weight_skew", "number", "the worst weight skew in the trace", required=False),
    ResultColumn(
        "invalid_generations", "integer", "generations with a partition unassigned or misplaced"
    ),
    ResultColumn(
        "total_excess_moved",
        "integer",
        "moves beyond the least needed for the assignor's own balance, per generation clipped "
        "at 0, summed (results version 3)",
        required=False,
    ),
    ResultColumn(
        "total_paused_partition_seconds",
        "number",
        "cost model: revoked partitions x how long they paused, summed (results version 3)",
        required=False,
    ),
    ResultColumn(
        "max_load_imbalance",
        "number",
        "the worst largest-member load over the mean load in the trace (results version 3)",
        required=False,
    ),
)
PROTOCOL_FIELD = ResultColumn(
    "protocol",
    "text",
    "the rebalance protocol the group ran (eager, cooperative, or a KIP-848 group protocol); "
    "read from summary.parquet when it has the column, else from scores.parquet",
    required=False,
)

SCORE_COLUMNS = tuple(column.name for column in SCORE_FIELDS)
SUMMARY_COLUMNS = tuple(column.name for column in SUMMARY_FIELDS)
KEY_COLUMNS = ("trace_id", "assignor", "generation")
TRACE_KEYS = ("trace_id", "assignor")
MEASURE_COLUMNS = SCORE_COLUMNS[3:]
SUMMARY_MEASURES = SUMMARY_COLUMNS[2:]


@dataclass(frozen=True, slots=True, eq=False)
class RebalanceResults:
    """What a results directory holds, typed: score rows (trace x assignor x generation), summary
    rows (trace x assignor), the protocols recorded per assignor, and the skipped traces."""

    scores: pd.DataFrame
    summary: pd.DataFrame
    protocols: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    errors: tuple[dict[str, Any], ...] = ()
    source: str = "results"
    inputs: tuple[Path, ...] = ()  # every file read, so that no output replaces one
    verdict: Mapping[str, Any] | None = None  # verdict.json (results version 3), else None


# ---------------------------------------------------------------------------------------------
# Parquet: one file or a dataset directory, checked part by part


def shown(path: Path) -> str:
    """A path as an error message can print it: bytes that are no UTF-8 as escapes."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _kind_of(data_type: pa.DataType) -> str | None:
    """The column kind an Arrow type can stand for (None: none the dashboard reads)."""
    if pa.types.is_dictionary(data_type):
        return _kind_of(data_type.value_type)
    if pa.types.is_null(data_type):
        return "null"
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return "text"
    if pa.types.is_integer(data_type):
        return "integer"
    if pa.types.is_floating(data_type):
        return "number"
    return None


def _accepts(kind: ColumnKind, found: str | None) -> bool:
    if found == "null":
        return True
    if kind == "text":
        return found == "text"
    # integer columns arrive as floats when a nullable integer went through pandas or Spark
    return found in ("integer", "number")


def _hive_values(part: Path, root: Path) -> dict[str, str | None]:
    """Partition values named by the directories between `root` and `part` (`assignor=range`)."""
    values: dict[str, str | None] = {}
    for directory in part.relative_to(root).parts[:-1]:
        if "=" not in directory:
            continue
        key, value = directory.split("=", 1)
        if unencodable_text(directory) is not None:
            raise InputError(
                "partition directory name is not valid UTF-8",
                source=shown(part.parent),
                field=shown(Path(key)),
            )
        values[key] = None if value == _HIVE_NULL else unquote(value)
    return values


def _first_bad_row(table: pa.Table, mask: pa.ChunkedArray) -> int:
    return int(pc.index(mask.fill_null(False), True).as_py())


def _trace_of(table: pa.Table, row: int) -> str | None:
    if "trace_id" not in table.column_names:
        return None
    try:
        value = table.column("trace_id")[row].as_py()
    except (UnicodeDecodeError, pa.ArrowException):
        return None
    return value if isinstance(value, str) else None


def _check_part(
    table: pa.Table, part: Path, fields: Sequence[ResultColumn], optional: Sequence[ResultColumn]
) -> pa.Table:
    """The known columns of one part file, after checking presence, types and values."""
    keep: list[str] = []
    for column in (*fields, *optional):
        if column.name not in table.column_names:
            if column.required:
                raise InputError(
                    "required column is missing", source=shown(part), field=column.name
                )
            continue
        values = table.column(column.name)
        found = _kind_of(values.type)
        if not _accepts(column.kind, found):
            raise InputError(
                f"column has type {values.type}, expected {column.kind}",
                source=shown(part),
                field=column.name,
            )
        if found == "text":
            try:
                values.validate(full=True)
            except pa.ArrowInvalid:
                raise InputError(
                    "text is not valid UTF-8 (a lone surrogate or a cut character)",
                    source=shown(part),
                    field=column.name,
                ) from None
            if column.required and values.null_count:
                raise InputError("empty value", source=shown(part), field=column.name)
        elif found in ("integer", "number"):
            numbers = values.cast(pa.float64(), safe=False)
            bad = pc.invert(pc.less_equal(pc.abs(numbers), float(MAX_MAGNITUDE)))
            if pc.any(bad.fill_null(False)).as_py():
                row = _first_bad_row(table, bad)
                raise InputError(
                    f"not a finite number of magnitude at most 2^53 (row {row})",
                    source=shown(part),
                    trace_id=_trace_of(table, row),
                    field=column.name,
                    value=values[row].as_py(),
                )
        keep.append(column.name)
    return table.select(keep)


def _read_part(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as error:
        if isinstance(error, FileNotFoundError | PermissionError):
            raise
        raise InputError(f"not readable as Parquet: {error}", source=shown(path)) from None


def read_result_table(
    path: Path,
    fields: Sequence[ResultColumn],
    optional: Sequence[ResultColumn] = (),
) -> tuple[pa.Table, tuple[Path, ...]]:
    """One result table from a Parquet file or a dataset directory, and the files it came from.

    A directory is read part by part (hidden names skipped at any depth), partition values of
    `key=value` directories becoming columns; each part is checked on its own, so an error
    names the very part file.
    """
    if not path.is_dir():
        parts = [path]
        tables = [_check_part(_read_part(path), path, fields, optional)]
    else:
        parts = data_files([path], (".parquet",))
        if not parts:
            raise InputError(
                "a Parquet dataset directory without part files (*.parquet)", source=shown(path)
            )
        tables = []
        for part in parts:
            partition = _hive_values(part, path)
            table = _read_part(part)
            for key, value in partition.items():
                if key not in table.column_names:
                    table = table.append_column(key, pa.array([value] * len(table), pa.string()))
            tables.append(_check_part(table, part, fields, optional))
    names = [
        column.name
        for column in (*fields, *optional)
        if any(column.name in table.column_names for table in tables)
    ]
    aligned = []
    for table in tables:
        columns = []
        for name in names:
            if name in table.column_names:
                values = table.column(name)
                if pa.types.is_dictionary(values.type):
                    values = values.cast(values.type.value_type)
                columns.append(values)
            else:
                columns.append(pa.nulls(len(table)))
        aligned.append(pa.table(columns, names=names))
    try:
        combined = pa.concat_tables(aligned, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise InputError(
            f"part files disagree on column types: {error}", source=shown(path)
        ) from None
    return combined, tuple(parts)


# ---------------------------------------------------------------------------------------------
# typed frames


def _keys(frame: pd.DataFrame, names: Sequence[str], source: str) -> pd.DataFrame:
    normalised = pd.DataFrame(index=frame.index)
    for column in names:
        if column not in frame.columns:
            raise InputError("required column is missing", source=source, field=column)
    for column in names:
        values = frame[column]
        if values.isna().any():
            raise InputError("empty value", source=source, field=column)
        if column != "generation":
            normalised[column] = values.astype(str)
            continue
        try:
            generation = pd.to_numeric(values, errors="raise")
        except (ValueError, TypeError):
            bad = _first_non_numeric(values)
            raise InputError("not a number", source=source, field=column, value=bad) from None
        normalised[column] = generation.astype("int64")
    return normalised


def _measures(
    frame: pd.DataFrame, normalised: pd.DataFrame, names: Sequence[str], source: str
) -> pd.DataFrame:
    for column in names:
        if column not in frame.columns:
            normalised[column] = np.nan
            continue
        values = frame[column]
        if values.dtype == bool:
            values = values.astype("float64")
        try:
            normalised[column] = pd.to_numeric(values, errors="raise").astype("float64")
        except (ValueError, TypeError):
            bad = _first_non_numeric(values)
            raise InputError("not a number", source=source, field=column, value=bad) from None
    return normalised


def normalise_scores(frame: pd.DataFrame, source: str = "scores") -> pd.DataFrame:
    """Score rows in :data:`SCORE_COLUMNS` order: keys as str/int, measures as float (NaN = null),
    sorted by trace, assignor and generation."""
    normalised = _measures(frame, _keys(frame, KEY_COLUMNS, source), MEASURE_COLUMNS, source)
    return normalised.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)


def normalise_summary(frame: pd.DataFrame, source: str = "summary") -> pd.DataFrame:
    """Summary rows in :data:`SUMMARY_COLUMNS` order, sorted by trace and assignor; a trace x
    assignor listed twice is an error."""
    normalised = _measures(frame, _keys(frame, TRACE_KEYS, source), SUMMARY_MEASURES, source)
    normalised = normalised.sort_values(list(TRACE_KEYS), kind="stable").reset_index(drop=True)
    repeated = normalised.duplicated(list(TRACE_KEYS))
    if repeated.any():
        row = normalised[repeated].iloc[0]
        raise InputError(
            f"trace x assignor listed twice (assignor {row['assignor']!r})",
            source=source,
            trace_id=str(row["trace_id"]),
            field="assignor",
        )
    return normalised


def _first_non_numeric(values: pd.Series) -> object:
    for value in values:
        if isinstance(value, bool | int | float | np.number) or value is None:
            continue
        try:
            float(value)
        except (TypeError, ValueError):
            return value
    return None


def protocol_labels(rows: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """Per assignor, the distinct protocol values recorded for it, sorted (nulls ignored)."""
    known = rows.dropna(subset=["protocol"])
    labels: dict[str, tuple[str, ...]] = {}
    for assignor, group in known.groupby("assignor", sort=True):
        labels[str(assignor)] = tuple(sorted({str(value) for value in group["protocol"]}))
    return labels


def _check_same_traces(scores: pd.DataFrame, summary: pd.DataFrame, source: str) -> None:
    """Every trace x assignor of the scores has its summary row, and no other one exists."""
    scored = scores[list(TRACE_KEYS)].drop_duplicates()
    merged = scored.merge(summary[list(TRACE_KEYS)], how="outer", indicator=True)
    lonely = merged[merged["_merge"] != "both"]
    if lonely.empty:
        return
    row = lonely.sort_values(list(TRACE_KEYS)).iloc[0]
    where = SCORES_FILE if row["_merge"] == "left_only" else SUMMARY_FILE
    raise InputError(
        f"assignor {row['assignor']!r} of this trace is only in {where}; scores.parquet and "
        "summary.parquet must come from the same run",
        source=source,
        trace_id=str(row["trace_id"]),
    )


# ---------------------------------------------------------------------------------------------
# errors.jsonl


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    return value


def read_errors(path: Path) -> tuple[dict[str, Any], ...]:
    """The skipped traces listed in errors.jsonl: one JSON object a line (blank lines skipped).

    A line that is no UTF-8, no JSON object, or holds a lone surrogate, a NaN or an integer
    of thousands of digits is an :class:`InputError` naming the file and line.
    """
    if not path.exists():
        return ()
    if path.is_dir():
        raise InputError("expected a file, found a directory", source=shown(path))
    errors: list[dict[str, Any]] = []
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                raise InputError(
                    f"not UTF-8 text (byte {error.start})", source=shown(path), line=number
                ) from None
            if not text:
                continue
            try:
                value = json.loads(
                    text,
                    parse_constant=lambda name: _finite(float(name)),
                    parse_float=lambda digits: _finite(float(digits)),
                )
            except (ValueError, RecursionError) as error:
                raise InputError(
                    f"not a JSON object: {str(error)[:120]}", source=shown(path), line=number
                ) from None
            if not isinstance(value, dict):
                raise InputError(
                    f"not a JSON object (a JSON {type(value).__name__})",
                    source=shown(path),
                    line=number,
                )
            bad = unencodable_text(value)
            if bad is not None:
                raise InputError(
                    "text holds a lone surrogate (\\ud800-\\udfff)",
                    source=shown(path),
                    line=number,
                    field=bad,
                )
            errors.append(value)
    return tuple(errors)


# ---------------------------------------------------------------------------------------------
# the directory


def result_inputs(results_dir: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The results directory and the result files in it: what an output may never replace."""
    directory = Path(results_dir)
    return (directory, *(directory / name for name in RESULT_FILES))


def _table_path(directory: Path, name: str) -> Path:
    path = directory / name
    if not path.exists():
        raise InputError(
            f"no {name} here (expected the output directory of `ktk replay` or the Spark "
            "replay job)",
            source=shown(directory),
        )
    return path


def read_results(results_dir: str | os.PathLike[str]) -> RebalanceResults:
    """Read `scores.parquet`, `summary.parquet` (files or dataset directories) and
    `errors.jsonl` of a results directory; any bad content is one :class:`InputError`."""
    directory = Path(results_dir)
    if not directory.exists():
        raise FileNotFoundError(2, "No such file or directory", str(directory))
    if not directory.is_dir():
        raise InputError("expected a results directory, found a file", source=shown(directory))
    scores_path = _table_path(directory, SCORES_FILE)
    summary_path = _table_path(directory, SUMMARY_FILE)
    scores_table, score_parts = read_result_table(scores_path, SCORE_FIELDS, (PROTOCOL_FIELD,))
    summary_table, summary_parts = read_result_table(
        summary_path, SUMMARY_FIELDS, (PROTOCOL_FIELD,)
    )
    score_frame = scores_table.to_pandas()
    summary_frame = summary_table.to_pandas()
    scores = normalise_scores(score_frame, source=shown(scores_path))
    if scores.empty:
        raise InputError("no score rows", source=shown(scores_path))
    summary = normalise_summary(summary_frame, source=shown(summary_path))
    _check_same_traces(scores, summary, shown(summary_path))
    protocol_source = summary_frame if "protocol" in summary_frame.columns else score_frame
    protocols = (
        protocol_labels(protocol_source[["assignor", "protocol"]].astype({"assignor": str}))
        if "protocol" in protocol_source.columns
        else {}
    )
    errors_path = directory / ERRORS_FILE
    errors = read_errors(errors_path)
    verdict_path = directory / VERDICT_FILE
    verdict = read_verdict_file(verdict_path)
    inputs = (
        *score_parts,
        *summary_parts,
        *((errors_path,) if errors_path.exists() else ()),
        *((verdict_path,) if verdict is not None else ()),
    )
    return RebalanceResults(
        scores=scores,
        summary=summary,
        protocols=protocols,
        errors=errors,
        source=directory.name,
        inputs=inputs,
        verdict=verdict,
    )


def read_verdict_file(path: Path) -> dict[str, Any] | None:
    """``verdict.json`` (None when absent: results older than version 3); a file that is no
    verdict document, or JSON :mod:`ktkbase.jsonsafe` refuses (NaN, nesting, huge numbers...),
    is one :class:`InputError`."""
    if not path.exists():
        return None
    try:
        document = jsonsafe.loads(path.read_text(encoding="utf-8"), source=shown(path))
    except UnicodeDecodeError as error:
        raise InputError(f"not a JSON document: {error}", source=shown(path)) from None
    except jsonsafe.JSONInputError as error:
        raise InputError(
            f"not a JSON document: {error.reason}",
            source=shown(path),
            field=error.field,
            value=error.value,
        ) from None
    required = ("ranking", "assignors", "headline")
    if not isinstance(document, dict) or any(key not in document for key in required):
        raise InputError(
            "not a verdict document (needs ranking, assignors, headline)", source=shown(path)
        )
    return document
