"""Reading a replay results directory into typed score rows and the list of skipped traces.

A results directory (written by ``ktk replay`` or the Spark replay job) holds ``scores.parquet``
(one row per trace x assignor x generation, spec/traces.md), optionally ``summary.parquet`` and
``errors.jsonl``. Either Parquet may be a single file or a directory of parts partitioned by
``assignor=...``.

>>> import pandas as pd
>>> scores = normalise_scores(pd.DataFrame({
...     "trace_id": ["t1"], "assignor": ["range"], "generation": [1], "moved": [0]}))
>>> scores["trace_id"].tolist(), scores["generation"].tolist(), scores["moved"].tolist()
(['t1'], [1], [0.0])
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dashboards.errors import InputError

SCORE_COLUMNS = (
    "trace_id",
    "assignor",
    "generation",
    "members",
    "partitions",
    "unassigned",
    "invalid",
    "min_load",
    "max_load",
    "spread",
    "balanced",
    "optimal_max_load",
    "weight_skew",
    "moved",
    "forced",
    "min_moved",
    "revoked",
    "rounds",
    "rack_mismatch",
    "assign_ms",
)
KEY_COLUMNS = ("trace_id", "assignor", "generation")
MEASURE_COLUMNS = SCORE_COLUMNS[3:]


@dataclass(frozen=True, slots=True, eq=False)
class RebalanceResults:
    """What a results directory holds: the score rows and the traces that could not be replayed."""

    scores: pd.DataFrame
    errors: tuple[dict[str, Any], ...] = ()
    source: str = "results"


def _hive_keys(directory: Path) -> list[str]:
    """Partition keys of a hive-style directory (`assignor=range/part-0.parquet` -> [assignor])."""
    keys: list[str] = []
    level = directory
    while True:
        children = sorted(
            child
            for child in level.iterdir()
            if child.is_dir() and "=" in child.name and not child.name.startswith(("_", "."))
        )
        if not children:
            return keys
        keys.append(children[0].name.split("=", 1)[0])
        level = children[0]


def read_parquet_table(path: Path) -> pd.DataFrame:
    """One Parquet file, or a directory of parts (hive partition values are read as strings)."""
    try:
        if path.is_dir():
            keys = _hive_keys(path)
            partitioning = (
                ds.partitioning(pa.schema([(key, pa.string()) for key in keys]), flavor="hive")
                if keys
                else None
            )
            table = ds.dataset(path, format="parquet", partitioning=partitioning).to_table()
        else:
            table = pq.read_table(path)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise InputError(f"not readable as Parquet: {error}", source=str(path)) from None
    frame = table.to_pandas()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(str)
    return frame


def normalise_scores(frame: pd.DataFrame, source: str = "scores") -> pd.DataFrame:
    """Score rows in spec column order: keys as str/int, every measure as float (NaN = null)."""
    for column in KEY_COLUMNS:
        if column not in frame.columns:
            raise InputError("required column is missing", source=source, field=column)
    normalised = pd.DataFrame(index=frame.index)
    for column in ("trace_id", "assignor"):
        values = frame[column]
        if values.isna().any():
            raise InputError("empty value", source=source, field=column)
        normalised[column] = values.astype(str)
    try:
        generation = pd.to_numeric(frame["generation"], errors="raise")
    except (ValueError, TypeError):
        bad = _first_non_numeric(frame["generation"])
        raise InputError("not a number", source=source, field="generation", value=bad) from None
    if generation.isna().any():
        raise InputError("empty value", source=source, field="generation")
    normalised["generation"] = generation.astype("int64")
    for column in MEASURE_COLUMNS:
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
    normalised = normalised.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)
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


def read_errors(path: Path) -> tuple[dict[str, Any], ...]:
    """The skipped traces listed in errors.jsonl; a line that is no JSON object is kept as text."""
    if not path.exists():
        return ()
    errors: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for text in lines:
            text = text.strip()
            if not text:
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
            errors.append(value if isinstance(value, dict) else {"message": text})
    return tuple(errors)


def read_results(results_dir: str | os.PathLike[str]) -> RebalanceResults:
    """Read `scores.parquet` (file or partitioned directory) and `errors.jsonl` of a results dir."""
    directory = Path(results_dir)
    if not directory.exists():
        raise FileNotFoundError(2, "No such file or directory", str(directory))
    scores_path = directory / "scores.parquet"
    if not scores_path.exists():
        raise InputError(
            "no scores.parquet here (expected the output directory of `ktk replay`)",
            source=str(directory),
        )
    frame = read_parquet_table(scores_path)
    scores = normalise_scores(frame, source=str(scores_path))
    if scores.empty:
        raise InputError("no score rows", source=str(scores_path))
    return RebalanceResults(
        scores=scores, errors=read_errors(directory / "errors.jsonl"), source=directory.name
    )
