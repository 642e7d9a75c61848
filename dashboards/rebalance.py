"""The rebalance comparison dashboard: replay results -> one self-contained HTML page.

A results directory (written by ``ktk replay`` or the Spark replay job) holds ``scores.parquet``
(one row per trace x assignor x generation, spec/traces.md), optionally ``summary.parquet`` and
``errors.jsonl``. Either Parquet may be a single file or a directory of parts partitioned by
``assignor=...``. Everything the page shows is aggregated here with pandas, so the HTML stays
small for 20,000 traces; only the worst traces travel to the page in full, for the timeline.

>>> import pandas as pd
>>> scores = normalise_scores(pd.DataFrame({
...     "trace_id": ["t1", "t1", "t1", "t1"], "assignor": ["range", "range", "sticky", "sticky"],
...     "generation": [1, 2, 1, 2], "moved": [0, 3, 0, 1], "spread": [2, 2, 1, 0],
...     "revoked": [0, 9, 0, 1], "rounds": [1, 1, 1, 2]}))
>>> summary = summarise_assignors(scores)
>>> summary.loc["sticky", ["moved", "spread_max", "rounds"]].tolist()
[1.0, 1.0, 3.0]
>>> sorted(best_assignors(summary)["moved"])
['sticky']
>>> infer_protocols(scores)
{'range': 'eager', 'sticky': 'cooperative'}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from plotly.subplots import make_subplots

from dashboards.errors import InputError
from dashboards.page import (
    assignor_colours,
    document,
    embed_json,
    escape,
    figure_divs,
    format_number,
    write_atomically,
)

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

RECORDED = "recorded"
DEFAULT_TIMELINE_TRACES = 200
# beyond this many distinct (moved, spread) points per assignor the scatter is binned
MAX_SCATTER_POINTS = 1500
SCATTER_BINS = 120
MAX_ERRORS_SHOWN = 200
MAX_ROUNDS_BUCKET = 5


@dataclass(frozen=True, slots=True, eq=False)
class RebalanceResults:
    """What a results directory holds: the score rows and the traces that could not be replayed."""

    scores: pd.DataFrame
    errors: tuple[dict[str, Any], ...] = ()
    source: str = "results"


@dataclass(frozen=True, slots=True)
class SummaryColumn:
    """One column of the per-assignor summary table."""

    key: str
    header: str
    digits: int
    better: str | None  # "low", "high" or None (not ranked)


SUMMARY_COLUMNS = (
    SummaryColumn("traces", "traces", 0, None),
    SummaryColumn("generations", "generations", 0, None),
    SummaryColumn("moved", "moved (partitions, total)", 0, "low"),
    SummaryColumn("forced", "forced (partitions, total)", 0, "low"),
    SummaryColumn("revoked", "revoked (partitions, total)", 0, "low"),
    SummaryColumn("rounds", "rounds (total)", 0, "low"),
    SummaryColumn("spread_max", "max spread (partitions)", 0, "low"),
    SummaryColumn("weight_skew_max", "worst weight skew (max/mean)", 3, "low"),
    SummaryColumn("rack_mismatch", "rack mismatches (partitions, total)", 0, "low"),
    SummaryColumn("assign_ms_mean", "mean assign time (ms)", 3, "low"),
    SummaryColumn("invalid_generations", "invalid generations", 0, "low"),
    SummaryColumn("extra_moved", "moves above minimum (partitions, total)", 0, "low"),
    SummaryColumn("optimal_balance_share", "generations at optimal max load (%)", 1, "high"),
)


# ---------------------------------------------------------------------------------------------
# reading


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


# ---------------------------------------------------------------------------------------------
# aggregation (pure pandas)


def assignor_order(names: Sequence[str] | pd.Index) -> list[str]:
    """Alternatives alphabetically, the recorded history last."""
    unique = sorted(set(names))
    return [name for name in unique if name != RECORDED] + (
        [RECORDED] if RECORDED in unique else []
    )


def summarise_assignors(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per assignor: the totals, maxima and means of the summary table."""
    optimal_known = scores["optimal_max_load"].notna() & scores["max_load"].notna()
    frame = scores.assign(
        invalid_generation=(
            (scores["invalid"].fillna(0) > 0) | (scores["unassigned"].fillna(0) > 0)
        ).astype("int64"),
        extra_moved=scores["moved"] - scores["min_moved"],
        extra_max_load=scores["max_load"] - scores["optimal_max_load"],
        at_optimal=(scores["max_load"] <= scores["optimal_max_load"])
        .astype("float64")
        .where(optimal_known),
    )
    grouped = frame.groupby("assignor", sort=True)
    summary = pd.DataFrame(
        {
            "traces": grouped["trace_id"].nunique().astype("float64"),
            "generations": grouped.size().astype("float64"),
            "moved": grouped["moved"].sum(min_count=1),
            "forced": grouped["forced"].sum(min_count=1),
            "revoked": grouped["revoked"].sum(min_count=1),
            "rounds": grouped["rounds"].sum(min_count=1),
            "spread_max": grouped["spread"].max(),
            "weight_skew_max": grouped["weight_skew"].max(),
            "rack_mismatch": grouped["rack_mismatch"].sum(min_count=1),
            "assign_ms_mean": grouped["assign_ms"].mean(),
            "invalid_generations": grouped["invalid_generation"].sum().astype("float64"),
            "extra_moved": grouped["extra_moved"].sum(min_count=1),
            "extra_max_load_mean": grouped["extra_max_load"].mean(),
            "optimal_balance_share": grouped["at_optimal"].mean() * 100.0,
        }
    )
    return summary.reindex(assignor_order(summary.index))


def best_assignors(summary: pd.DataFrame) -> dict[str, frozenset[str]]:
    """Per ranked column, the assignors holding the best value (ties all win).

    Only assignors that cover the most traces compete, so `recorded` covering a subset of the
    traces is not crowned for totals over fewer traces.
    """
    if summary.empty:
        return {}
    competing = summary[summary["traces"] == summary["traces"].max()]
    best: dict[str, frozenset[str]] = {}
    for column in SUMMARY_COLUMNS:
        if column.better is None:
            continue
        values = competing[column.key].dropna()
        if values.empty:
            continue
        target = values.min() if column.better == "low" else values.max()
        winners = values[np.isclose(values.to_numpy(), target, rtol=1e-9, atol=1e-12)]
        best[column.key] = frozenset(winners.index)
    return best


def infer_protocols(scores: pd.DataFrame) -> dict[str, str]:
    """Which rebalance protocol each assignor's scores show.

    Only cooperative assignors need more than one round. Otherwise eager assignors give away
    everything the surviving members owned, so in total they revoke more than they move plus
    what is forced away; a cooperative member revokes only what it no longer holds.
    """
    protocols: dict[str, str] = {}
    for assignor, rows in scores.groupby("assignor", sort=True):
        revoked = rows["revoked"].sum()
        if (rows["rounds"].fillna(1) > 1).any():
            protocol = "cooperative"
        elif rows["revoked"].isna().all() or revoked == 0:
            protocol = "unknown"
        elif revoked > rows["moved"].sum() + rows["forced"].sum():
            protocol = "eager"
        else:
            protocol = "cooperative"
        protocols[str(assignor)] = protocol
    return protocols


def summarise_traces(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per trace x assignor: churn sums and the worst spread over the trace."""
    frame = scores.assign(extra_moved=scores["moved"] - scores["min_moved"])
    grouped = frame.groupby(["trace_id", "assignor"], sort=True)
    per_trace = pd.DataFrame(
        {
            "generations": grouped.size().astype("float64"),
            "moved": grouped["moved"].sum(min_count=1),
            "forced": grouped["forced"].sum(min_count=1),
            "revoked": grouped["revoked"].sum(min_count=1),
            "rounds": grouped["rounds"].sum(min_count=1),
            "spread_max": grouped["spread"].max(),
            "extra_moved": grouped["extra_moved"].sum(min_count=1),
        }
    )
    return per_trace.reset_index()


def worst_traces(per_trace: pd.DataFrame, count: int) -> list[str]:
    """The `count` traces with the highest moved + worst spread under any assignor (ties by id)."""
    badness = per_trace["moved"].fillna(0) + per_trace["spread_max"].fillna(0)
    ranked = (
        per_trace.assign(badness=badness)
        .groupby("trace_id", sort=True)["badness"]
        .max()
        .reset_index()
        .sort_values(["badness", "trace_id"], ascending=[False, True], kind="stable")
    )
    return ranked["trace_id"].head(max(count, 0)).tolist()


def scatter_points(per_trace: pd.DataFrame, max_points: int = MAX_SCATTER_POINTS) -> pd.DataFrame:
    """Points of the churn-vs-balance scatter: one per distinct (assignor, moved, worst spread).

    With more distinct points than `max_points` for an assignor, moved (and spread, if it has
    many values) are binned on a common grid so the page stays small; `traces` counts each point.
    """
    frame = per_trace.dropna(subset=["moved", "spread_max"])[
        ["assignor", "trace_id", "moved", "spread_max"]
    ]
    distinct = frame.drop_duplicates(["assignor", "moved", "spread_max"]).groupby("assignor").size()
    binned = bool(len(distinct)) and int(distinct.max()) > max_points
    moved_x = frame["moved"].to_numpy(dtype="float64")
    spread_y = frame["spread_max"].to_numpy(dtype="float64")
    moved_width = spread_width = 0.0
    if binned:
        moved_x, moved_width = _bin_centres(moved_x, SCATTER_BINS)
        if len(np.unique(spread_y)) > SCATTER_BINS // 2:
            spread_y, spread_width = _bin_centres(spread_y, SCATTER_BINS // 2)
    frame = frame.assign(x=moved_x, y=spread_y)
    grouped = frame.groupby(["assignor", "x", "y"], sort=True)
    points = grouped["trace_id"].agg(["size", lambda ids: list(ids.iloc[:3])]).reset_index()
    points.columns = ["assignor", "moved", "spread", "traces", "examples"]
    points.attrs["moved_bin_width"] = moved_width
    points.attrs["spread_bin_width"] = spread_width
    return points


def _bin_centres(values: np.ndarray, bins: int) -> tuple[np.ndarray, float]:
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return values, 0.0
    width = (high - low) / bins
    index = np.minimum(((values - low) / width).astype("int64"), bins - 1)
    return low + (index + 0.5) * width, width


def rebalance_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """Generations after the first of each trace x assignor: the rebalances of a running group."""
    first = scores.groupby(["trace_id", "assignor"])["generation"].transform("min")
    return scores[scores["generation"] > first]


def revoked_distribution(rebalances: pd.DataFrame) -> pd.DataFrame:
    """Per assignor: min, quartiles, max and mean of partitions revoked per rebalance."""
    rows = rebalances.dropna(subset=["revoked"])
    if rows.empty:
        columns = ["min", "q1", "median", "q3", "max", "mean", "rebalances"]
        return pd.DataFrame(columns=columns, dtype="float64")
    grouped = rows.groupby("assignor", sort=True)["revoked"]
    quantiles = grouped.quantile([0.0, 0.25, 0.5, 0.75, 1.0]).unstack()
    quantiles.columns = ["min", "q1", "median", "q3", "max"]
    quantiles["mean"] = grouped.mean()
    quantiles["rebalances"] = grouped.size()
    return quantiles.reindex(assignor_order(quantiles.index))


def rounds_distribution(rebalances: pd.DataFrame) -> pd.DataFrame:
    """Per assignor, the share (%) of rebalances that took 1, 2, ... 5+ rounds."""
    rows = rebalances.dropna(subset=["rounds"])
    if rows.empty:
        return pd.DataFrame(columns=range(1, MAX_ROUNDS_BUCKET + 1), dtype="float64")
    buckets = rows["rounds"].clip(lower=1, upper=MAX_ROUNDS_BUCKET).astype("int64")
    table = pd.crosstab(rows["assignor"], buckets, normalize="index") * 100.0
    table = table.reindex(columns=range(1, MAX_ROUNDS_BUCKET + 1), fill_value=0.0)
    return table.reindex(assignor_order(table.index))


def recorded_comparison(per_trace: pd.DataFrame) -> pd.DataFrame:
    """On the traces that carry recorded assignments: each assignor's churn next to the real one.

    Columns: totals of moved, revoked and rounds, mean worst spread per trace, and how many
    traces the assignor moves fewer / as many / more partitions than the recorded group did.
    """
    recorded = per_trace[per_trace["assignor"] == RECORDED].set_index("trace_id")
    if recorded.empty:
        return pd.DataFrame()
    common = per_trace[per_trace["trace_id"].isin(recorded.index)]
    grouped = common.groupby("assignor", sort=True)
    comparison = pd.DataFrame(
        {
            "traces": grouped.size().astype("float64"),
            "moved": grouped["moved"].sum(min_count=1),
            "revoked": grouped["revoked"].sum(min_count=1),
            "rounds": grouped["rounds"].sum(min_count=1),
            "spread_mean": grouped["spread_max"].mean(),
        }
    )
    recorded_moved = common["trace_id"].map(recorded["moved"])
    delta = common["moved"] - recorded_moved
    verdicts = (
        common.assign(
            fewer=(delta < 0).astype("float64"),
            same=(delta == 0).astype("float64"),
            more=(delta > 0).astype("float64"),
        )
        .groupby("assignor", sort=True)[["fewer", "same", "more"]]
        .sum()
    )
    comparison = comparison.join(verdicts)
    return comparison.reindex(assignor_order(comparison.index))


def _segments(*keys: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of equal consecutive key tuples (the rows are sorted)."""
    if len(keys[0]) == 0:
        return []
    change = np.zeros(len(keys[0]) - 1, dtype=bool)
    for key in keys:
        change |= key[1:] != key[:-1]
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    stops = np.concatenate((starts[1:], [len(keys[0])]))
    return list(zip(starts.tolist(), stops.tolist(), strict=True))


def timeline_index(
    scores: pd.DataFrame, trace_ids: Sequence[str], assignors: Sequence[str]
) -> list[dict[str, Any]]:
    """The per-trace series the timeline chart switches between, in JSON-ready lists.

    Each trace: id, a label for the selector, members per generation, and per assignor (in
    `assignors` order, null when the assignor has no rows) [generations, spread, moved, revoked].
    Works on sorted numpy slices: 200 traces x 5 assignors take milliseconds, not seconds.
    """
    wanted = scores[scores["trace_id"].isin(set(trace_ids))].sort_values(
        list(KEY_COLUMNS), kind="stable"
    )
    trace_column = wanted["trace_id"].to_numpy()
    assignor_column = wanted["assignor"].to_numpy()
    columns = {
        name: wanted[name].to_numpy(dtype="float64")
        for name in ("generation", "spread", "moved", "revoked")
    }
    position_of = {name: index for index, name in enumerate(assignors)}
    series_by_trace: dict[str, list[list[list[Any]] | None]] = {}
    moved_by_trace: dict[str, float] = {}
    for start, stop in _segments(trace_column, assignor_column):
        trace_id, assignor = str(trace_column[start]), str(assignor_column[start])
        series = series_by_trace.setdefault(trace_id, [None] * len(assignors))
        if assignor in position_of:
            series[position_of[assignor]] = [
                _json_numbers(columns[name][start:stop])
                for name in ("generation", "spread", "moved", "revoked")
            ]
        moved = float(np.nansum(columns["moved"][start:stop]))
        moved_by_trace[trace_id] = max(moved_by_trace.get(trace_id, 0.0), moved)
    members = wanted.groupby(["trace_id", "generation"], sort=True)["members"].max().reset_index()
    members_trace = members["trace_id"].to_numpy()
    members_by_trace = {
        str(members_trace[start]): (
            members["generation"].to_numpy()[start:stop],
            members["members"].to_numpy()[start:stop],
        )
        for start, stop in _segments(members_trace)
    }
    spread_worst = wanted.groupby("trace_id", sort=False)["spread"].max()
    traces: list[dict[str, Any]] = []
    for trace_id in trace_ids:
        if trace_id not in series_by_trace:
            continue
        generations, member_counts = members_by_trace[trace_id]
        label = (
            f"{trace_id} — {len(generations)} generations, up to "
            f"{format_number(moved_by_trace[trace_id])} moved, worst spread "
            f"{format_number(spread_worst[trace_id])}"
        )
        traces.append(
            {
                "id": trace_id,
                "label": label,
                "members": [_json_numbers(generations), _json_numbers(member_counts)],
                "series": series_by_trace[trace_id],
            }
        )
    return traces


def _json_numbers(
    values: Sequence[Any] | pd.Series | pd.Index | np.ndarray,
) -> list[int | float | None]:
    numbers: list[int | float | None] = []
    for value in values:
        number = float(value)
        if math.isnan(number):
            numbers.append(None)
        elif number.is_integer():
            numbers.append(int(number))
        else:
            numbers.append(round(number, 6))
    return numbers


# ---------------------------------------------------------------------------------------------
# charts


def _label(name: str) -> str:
    return escape(name)


def churn_balance_figure(points: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    figure = go.Figure()
    binned = points.attrs.get("moved_bin_width", 0.0) > 0
    spread_digits = 1 if points.attrs.get("spread_bin_width", 0.0) > 0 else 0
    largest = max(int(points["traces"].max()), 1) if not points.empty else 1
    # whole-partition spreads stack every assignor on the same rows: offset each a little
    dodge = 0.0 if spread_digits else 0.5 / max(len(colours), 1)
    for position, assignor in enumerate(colours):
        own = points[points["assignor"] == assignor]
        if own.empty:
            continue
        offset = (position - (len(colours) - 1) / 2) * dodge
        hover = [
            f"{_label(assignor)}<br>moved {'≈ ' if binned else ''}{format_number(moved)} "
            f"partitions<br>worst spread {format_number(spread, spread_digits)} "
            f"partitions<br>{format_number(count)} trace(s): "
            + escape(", ".join(examples) + (", …" if count > len(examples) else ""))
            for moved, spread, count, examples in zip(
                own["moved"], own["spread"], own["traces"], own["examples"], strict=True
            )
        ]
        figure.add_trace(
            go.Scatter(
                x=own["moved"].to_numpy(),
                y=(own["spread"].to_numpy() + offset).round(4),
                mode="markers",
                name=_label(assignor),
                marker={
                    "color": colours[assignor],
                    "size": (6 + 22 * np.sqrt(own["traces"].to_numpy() / largest)).round(2),
                    "opacity": 0.6,
                    "line": {"width": 0.5, "color": "#ffffff"},
                },
                hovertext=hover,
                hoverinfo="text",
            )
        )
    figure.update_layout(
        title={"text": "Churn vs balance: one point per trace and assignor"},
        xaxis_title="partitions moved over the whole trace (sum of moved)",
        yaxis_title="worst spread in the trace (partitions, max − min per member)",
        yaxis={"dtick": 1} if not spread_digits and _spread_range(points) <= 20 else {},
        height=520,
        legend_title_text="assignor",
        margin={"t": 60, "l": 70, "r": 20, "b": 60},
    )
    return figure


def _spread_range(points: pd.DataFrame) -> float:
    if points.empty:
        return 0.0
    return float(points["spread"].max() - points["spread"].min())


def _labelled_bars(
    labels: Sequence[str], values: pd.Series, bar_colours: Sequence[str], digits: int
) -> go.Bar:
    """One bar per assignor, each labelled with its value to ``digits`` decimals."""
    return go.Bar(
        x=labels,
        y=values.to_numpy(),
        marker_color=bar_colours,
        text=[format_number(value, digits) for value in values],
        textposition="auto",
        hovertemplate="%{x}: %{text}<extra></extra>",
        showlegend=False,
    )


def optimal_gap_figure(summary: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    names = list(summary.index)
    labels = [_label(name) for name in names]
    bar_colours = [colours[name] for name in names]
    figure = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=(
            "moves above the minimum",
            "max load above the optimum",
            "generations at optimal max load",
        ),
        horizontal_spacing=0.09,
    )
    for column, key, digits in (
        (1, "extra_moved", 0),
        (2, "extra_max_load_mean", 3),
        (3, "optimal_balance_share", 1),
    ):
        figure.add_trace(
            _labelled_bars(labels, summary[key], bar_colours, digits), row=1, col=column
        )
    figure.update_yaxes(title_text="moved − min_moved (partitions, total)", row=1, col=1)
    figure.update_yaxes(title_text="max_load − optimal_max_load (partitions, mean)", row=1, col=2)
    figure.update_yaxes(title_text="% of generations", range=[0, 105], row=1, col=3)
    figure.update_layout(
        title={"text": "Gap to the optimal references (min_moved, optimal_max_load)"},
        height=440,
        margin={"t": 90, "l": 70, "r": 20, "b": 60},
    )
    return figure


def revocation_figure(
    revoked: pd.DataFrame,
    rounds: pd.DataFrame,
    protocols: dict[str, str],
    colours: dict[str, str],
) -> go.Figure:
    figure = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "partitions revoked per rebalance",
            "rounds per rebalance",
        ),
        horizontal_spacing=0.1,
        column_widths=[0.55, 0.45],
    )
    for name, stats in revoked.iterrows():
        label = f"{_label(str(name))} ({protocols.get(str(name), 'unknown')})"
        figure.add_trace(
            go.Box(
                x=[label],
                q1=[stats["q1"]],
                median=[stats["median"]],
                q3=[stats["q3"]],
                lowerfence=[stats["min"]],
                upperfence=[stats["max"]],
                mean=[stats["mean"]],
                name=label,
                marker_color=colours[str(name)],
                boxmean=True,
                showlegend=False,
            ),
            row=1,
            col=1,
        )
    shades = ("#c6dbef", "#6baed6", "#2171b5", "#08519c", "#08306b")
    for rounds_value in rounds.columns:
        caption = f"{rounds_value}+" if rounds_value == MAX_ROUNDS_BUCKET else str(rounds_value)
        figure.add_trace(
            go.Bar(
                x=[_label(str(name)) for name in rounds.index],
                y=rounds[rounds_value].to_numpy(),
                name=f"{caption} round{'s' if rounds_value != 1 else ''}",
                marker_color=shades[(int(rounds_value) - 1) % len(shades)],
                hovertemplate="%{x}: %{y:.1f}% of rebalances<extra>" + caption + " rounds</extra>",
                legendgroup="rounds",
            ),
            row=1,
            col=2,
        )
    figure.update_yaxes(title_text="partitions revoked (box: min, quartiles, max)", row=1, col=1)
    figure.update_yaxes(title_text="% of rebalances", range=[0, 100], row=1, col=2)
    figure.update_layout(
        title={"text": "Revocations and rounds per rebalance (eager vs cooperative)"},
        barmode="stack",
        height=460,
        legend_title_text="rounds",
        margin={"t": 90, "l": 70, "r": 20, "b": 60},
    )
    return figure


def recorded_figure(comparison: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    panels = (
        ("moved", "moved", "partitions moved (total)", 0),
        ("revoked", "revoked", "partitions revoked (total)", 0),
        ("spread_mean", "worst spread", "worst spread per trace (partitions, mean)", 2),
        ("rounds", "rounds", "rebalance rounds (total)", 0),
    )
    figure = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[title for _, title, _, _ in panels],
        horizontal_spacing=0.08,
    )
    labels = [_label(str(name)) for name in comparison.index]
    bar_colours = [colours[str(name)] for name in comparison.index]
    for column, (key, _, axis_title, digits) in enumerate(panels, start=1):
        figure.update_yaxes(title_text=axis_title, row=1, col=column)
        figure.add_trace(
            _labelled_bars(labels, comparison[key], bar_colours, digits), row=1, col=column
        )
    figure.update_layout(
        title={"text": "The recorded group next to the alternatives (same traces)"},
        height=420,
        margin={"t": 90, "l": 60, "r": 20, "b": 80},
    )
    return figure


def timeline_figure(
    first_trace: dict[str, Any] | None, assignors: Sequence[str], colours: dict[str, str]
) -> go.Figure:
    """Four stacked panels over generations; trace order is fixed so the page script can swap data.

    Trace 0 is members; assignor i owns traces 1+3i (spread), 2+3i (moved), 3+3i (revoked).
    """
    figure = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        subplot_titles=(
            "members in the group",
            "spread (partitions, max − min per member)",
            "partitions moved",
            "partitions revoked",
        ),
    )
    members = first_trace["members"] if first_trace else [[], []]
    figure.add_trace(
        go.Scatter(
            x=members[0],
            y=members[1],
            mode="lines+markers",
            name="members",
            line={"color": "#555555", "shape": "hv"},
            hovertemplate="generation %{x}: %{y} members<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for index, assignor in enumerate(assignors):
        series = first_trace["series"][index] if first_trace else None
        generations, spread, moved, revoked = series if series else ([], [], [], [])
        label = _label(assignor)
        dash = "dot" if assignor == RECORDED else "solid"
        for row, values, what in (
            (2, spread, "spread"),
            (3, moved, "moved"),
            (4, revoked, "revoked"),
        ):
            figure.add_trace(
                go.Scatter(
                    x=generations,
                    y=values,
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=row == 2,
                    line={"color": colours[assignor], "dash": dash, "width": 1.6},
                    marker={"size": 4},
                    hovertemplate=(
                        f"generation %{{x}}: %{{y}} partitions {what}<extra>{label}</extra>"
                    ),
                ),
                row=row,
                col=1,
            )
    figure.update_xaxes(title_text="generation", row=4, col=1)
    for row, unit in ((1, "members"), (2, "partitions"), (3, "partitions"), (4, "partitions")):
        figure.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    title = f"Trace {escape(first_trace['id'])}" if first_trace else "No traces"
    figure.update_layout(
        title={"text": title},
        height=820,
        legend_title_text="assignor",
        hovermode="x unified",
        margin={"t": 80, "l": 70, "r": 20, "b": 50},
    )
    return figure


# ---------------------------------------------------------------------------------------------
# page


def _summary_table(
    summary: pd.DataFrame, protocols: dict[str, str], colours: dict[str, str]
) -> str:
    best = best_assignors(summary)
    header = "".join(f"<th>{escape(column.header)}</th>" for column in SUMMARY_COLUMNS)
    rows: list[str] = []
    for name, values in summary.iterrows():
        assignor = str(name)
        cells: list[str] = []
        for column in SUMMARY_COLUMNS:
            is_best = assignor in best.get(column.key, frozenset())
            css = ' class="best" title="best in this column"' if is_best else ""
            cells.append(f"<td{css}>{format_number(values[column.key], column.digits)}</td>")
        row_class = ' class="recorded"' if assignor == RECORDED else ""
        caption = " (real group)" if assignor == RECORDED else ""
        rows.append(
            f'<tr{row_class} data-assignor="{escape(assignor)}"><td>'
            f'<span class="swatch" style="background:{colours[assignor]}"></span>'
            f"{escape(assignor)}{caption}</td>"
            f"<td>{escape(protocols.get(assignor, 'unknown'))}</td>{''.join(cells)}</tr>"
        )
    return (
        '<div class="table-wrap"><table id="summary-table"><thead><tr><th>assignor</th>'
        "<th>protocol</th>"
        f"{header}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _recorded_table(comparison: pd.DataFrame) -> str:
    rows = []
    for name, values in comparison.iterrows():
        if name == RECORDED:
            continue
        rows.append(
            f"<tr><td>{escape(str(name))}</td><td>{format_number(values['fewer'])}</td>"
            f"<td>{format_number(values['same'])}</td><td>{format_number(values['more'])}</td></tr>"
        )
    return (
        '<table id="recorded-table"><thead><tr><th>assignor</th>'
        "<th>traces with fewer moves than recorded</th><th>as many</th><th>more</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _errors_section(errors: Sequence[dict[str, Any]]) -> str:
    if not errors:
        return (
            '<section id="errors"><h2>Skipped traces</h2>'
            '<p class="note">None: every trace was replayed.</p></section>'
        )
    rows = []
    known = {"trace_id", "file", "source", "line", "field", "value", "reason", "message"}
    for error in errors[:MAX_ERRORS_SHOWN]:
        where = str(error.get("file") or error.get("source") or "")
        if error.get("line") is not None:
            where = f"{where}:{error['line']}"
        message = error.get("reason") or error.get("message")
        if message is None:
            message = json.dumps(
                {key: value for key, value in error.items() if key not in known}, sort_keys=True
            )
        field = error.get("field")
        value = error.get("value")
        rows.append(
            "<tr>"
            f'<td class="text">{escape(error.get("trace_id") or "")}</td>'
            f'<td class="text mono">{escape(where)}</td>'
            f'<td class="text">{escape("" if field is None else field)}</td>'
            f'<td class="text">{escape(message)}</td>'
            f'<td class="text mono">{escape("" if value is None else json.dumps(value))}</td>'
            "</tr>"
        )
    more = (
        f'<p class="note">Showing {MAX_ERRORS_SHOWN} of {len(errors):,}; '
        "all are in errors.jsonl.</p>"
        if len(errors) > MAX_ERRORS_SHOWN
        else ""
    )
    return (
        f'<section id="errors"><h2>Skipped traces ({len(errors):,})</h2>'
        '<p class="note">Traces that could not be replayed (from errors.jsonl); the other traces '
        "ran.</p>"
        '<table id="errors-table"><thead><tr><th>trace</th><th>where</th><th>field</th>'
        f"<th>message</th><th>value</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"{more}</section>"
    )


_TIMELINE_SCRIPT = """
(function () {
  var source = document.getElementById("timeline-data");
  var chart = document.getElementById("timeline-chart");
  var select = document.getElementById("timeline-select");
  var search = document.getElementById("timeline-search");
  var count = document.getElementById("timeline-count");
  if (!source || !chart || !select || !search) { return; }
  var index = JSON.parse(source.textContent);
  // plotly reads labels as light markup and decodes entities, so text is entity-escaped for it
  function plotlyText(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;")
      .replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function fillOptions(query) {
    var needle = query.trim().toLowerCase();
    while (select.firstChild) { select.removeChild(select.firstChild); }
    var shown = 0;
    index.traces.forEach(function (trace, position) {
      if (needle && trace.id.toLowerCase().indexOf(needle) < 0) { return; }
      var option = document.createElement("option");
      option.value = String(position);
      option.textContent = trace.label;
      select.appendChild(option);
      shown += 1;
    });
    count.textContent = shown + " of " + index.traces.length + " traces match";
    return shown;
  }
  function show(position) {
    var trace = index.traces[position];
    var xs = [trace.members[0]];
    var ys = [trace.members[1]];
    index.assignors.forEach(function (name, i) {
      var series = trace.series[i] || [[], [], [], []];
      xs.push(series[0], series[0], series[0]);
      ys.push(series[1], series[2], series[3]);
    });
    var traceNumbers = xs.map(function (_, i) { return i; });
    Plotly.restyle(chart, {x: xs, y: ys}, traceNumbers);
    Plotly.relayout(chart, {"title.text": "Trace " + plotlyText(trace.id)});
    chart.setAttribute("data-trace", trace.id);
  }
  select.addEventListener("change", function () { show(Number(select.value)); });
  search.addEventListener("input", function () {
    if (fillOptions(search.value) > 0) {
      select.selectedIndex = 0;
      show(Number(select.value));
    }
  });
  fillOptions("");
})();
"""


def render_rebalance(
    results: RebalanceResults, *, timeline_traces: int = DEFAULT_TIMELINE_TRACES
) -> str:
    """The whole dashboard as one HTML string (deterministic: same results, same bytes)."""
    scores = results.scores
    summary = summarise_assignors(scores)
    assignors = list(summary.index)
    colours = assignor_colours(assignors)
    protocols = infer_protocols(scores)
    per_trace = summarise_traces(scores)
    trace_count = int(scores["trace_id"].nunique())
    rebalances = rebalance_rows(scores)
    comparison = recorded_comparison(per_trace)
    worst = worst_traces(per_trace, timeline_traces)
    timeline = timeline_index(scores, worst, assignors)

    figures: list[tuple[str, go.Figure]] = [
        ("churn-balance-chart", churn_balance_figure(scatter_points(per_trace), colours)),
        ("optimal-gap-chart", optimal_gap_figure(summary, colours)),
        (
            "revocation-chart",
            revocation_figure(
                revoked_distribution(rebalances),
                rounds_distribution(rebalances),
                protocols,
                colours,
            ),
        ),
    ]
    if not comparison.empty:
        figures.append(("recorded-chart", recorded_figure(comparison, colours)))
    figures.append(
        ("timeline-chart", timeline_figure(timeline[0] if timeline else None, assignors, colours))
    )
    divs = figure_divs(figures)

    has_optimal = scores["min_moved"].notna().any() or scores["optimal_max_load"].notna().any()
    sections = [
        '<section id="summary"><h2>Summary per assignor</h2>'
        f'<p class="note">{trace_count:,} traces, {len(scores):,} scored generations. Totals are '
        "sums over every generation of every trace; highlighted cells hold the best value of "
        "the column among assignors that ran on all traces. Protocol is inferred from the "
        "scores (more than one round: cooperative; revoking more than moved plus forced: "
        "eager). Invalid generations left partitions "
        "unassigned or assigned twice / to a non-subscriber.</p>"
        f"{_summary_table(summary, protocols, colours)}</section>",
        '<section id="churn-balance"><h2>Churn vs balance</h2><p class="note">Lower left is '
        "better: few partitions moved and an even spread. Point size grows with the number of "
        "traces at that spot; each assignor's points sit slightly above or below the whole "
        "spread value so they do not hide each other (the hover gives the exact values).</p>"
        f"{divs['churn-balance-chart']}</section>",
        '<section id="optimal-gap"><h2>Gap to the optimal references</h2><p class="note">'
        "moved − min_moved: moves an assignor made beyond the fewest any optimally balanced "
        "assignment needs; max_load − optimal_max_load: how far the most loaded member is "
        "above the best possible."
        + ("" if has_optimal else " These results carry no optimal references (all null).")
        + f"</p>{divs['optimal-gap-chart']}</section>",
        '<section id="revocations"><h2>Revocations and rounds</h2><p class="note">Per rebalance '
        "(every generation after a trace's first). Eager assignors revoke everything the "
        "surviving members owned; cooperative ones revoke only what moves, at the price of "
        "extra rounds.</p>"
        f"{divs['revocation-chart']}</section>",
    ]
    if comparison.empty:
        sections.append(
            '<section id="recorded"><h2>Recorded group vs alternatives</h2><p class="note">These '
            "results carry no recorded assignments (the traces had no <code>assigned</code> "
            "field).</p></section>"
        )
    else:
        recorded_traces = int(comparison.loc[RECORDED, "traces"])
        sections.append(
            '<section id="recorded"><h2>Recorded group vs alternatives</h2><p class="note">'
            f"On the {recorded_traces:,} traces with recorded assignments: what the real group "
            "did (recorded) next to what each assignor would have done.</p>"
            f"{divs['recorded-chart']}{_recorded_table(comparison)}</section>"
        )
    sections.append(
        '<section id="timeline"><h2>Per-trace timeline</h2><p class="note">The '
        f"{len(timeline):,} worst of {trace_count:,} traces (highest partitions moved plus "
        "worst spread under any assignor). Pick one, or type part of a trace id.</p>"
        '<div class="controls"><label>search <input id="timeline-search" type="search" '
        'placeholder="trace id" autocomplete="off"></label>'
        '<select id="timeline-select" aria-label="trace"></select>'
        '<span id="timeline-count" class="note"></span></div>'
        f"{divs['timeline-chart']}"
        '<script type="application/json" id="timeline-data">'
        f"{embed_json({'assignors': assignors, 'traces': timeline})}</script></section>"
    )
    sections.append(_errors_section(results.errors))
    subtitle = (
        f"{results.source}: {trace_count:,} traces × {len(assignors)} assignors "
        f"({', '.join(assignors)})"
    )
    return document("Rebalance comparison", subtitle, "\n".join(sections), _TIMELINE_SCRIPT)


@dataclass(frozen=True, slots=True)
class PageSummary:
    """What was written, for the command line to report."""

    path: Path
    size_bytes: int
    traces: int
    assignors: tuple[str, ...]
    skipped_traces: int


def write_rebalance_page(
    results_dir: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    timeline_traces: int = DEFAULT_TIMELINE_TRACES,
) -> PageSummary:
    """Read a results directory and write the dashboard to `path` atomically."""
    results = read_results(results_dir)
    page = render_rebalance(results, timeline_traces=timeline_traces)
    target = write_atomically(path, page)
    return PageSummary(
        path=target,
        size_bytes=len(page.encode("utf-8")),
        traces=int(results.scores["trace_id"].nunique()),
        assignors=tuple(assignor_order(results.scores["assignor"].unique())),
        skipped_traces=len(results.errors),
    )
