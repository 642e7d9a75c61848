"""The plotly figures of the rebalance page, built from the aggregates (no I/O).

Every label that carries a trace id or an assignor name is entity-escaped: plotly reads labels
as light markup.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards.page import escape, format_number
from dashboards.rebalance.aggregation import MAX_ROUNDS_BUCKET, RECORDED


def _label(name: str) -> str:
    return escape(name)


MARKER_SYMBOLS = (
    "circle",
    "square",
    "diamond",
    "triangle-up",
    "cross",
    "x",
    "triangle-down",
    "star",
    "hexagon",
    "pentagon",
)
"""One marker shape per assignor (in legend order), so overlapping colours stay apart."""

# a log axis once the largest value is this many times the smallest positive one
LOG_SPAN = 100.0


def spans_orders_of_magnitude(values: np.ndarray) -> bool:
    """True when the positive values span at least :data:`LOG_SPAN` (a log axis then)."""
    positive = values[np.isfinite(values) & (values > 0)]
    return bool(positive.size) and float(positive.max()) >= LOG_SPAN * float(positive.min())


def verdict_figure(
    spreads: pd.DataFrame, colours: dict[str, str], protocols: dict[str, str]
) -> go.Figure:
    """Paused partition-seconds per trace, one box per assignor (best first): the quartiles,
    whiskers to the least and the worst trace, and a diamond at p95. ``spreads`` holds per
    assignor (index, verdict rank order) ``min``, ``q1``, ``median``, ``q3``, ``p95``, ``max``:
    precomputed, so the page stays small at 20,000 traces."""
    figure = go.Figure()
    names = list(spreads.index)
    labels = [f"{_label(name)} ({escape(protocols.get(name, ''))})" for name in names]
    for label, name in zip(labels, names, strict=True):
        row = spreads.loc[name]
        figure.add_trace(
            go.Box(
                y=[label],
                q1=[row["q1"]],
                median=[row["median"]],
                q3=[row["q3"]],
                lowerfence=[row["min"]],
                upperfence=[row["max"]],
                orientation="h",
                name=_label(name),
                marker={"color": colours[name]},
                line={"color": colours[name]},
                fillcolor=colours[name],
                opacity=0.75,
                showlegend=False,
                hoverinfo="x+name",
            )
        )
        figure.add_trace(
            go.Scatter(
                x=[row["p95"]],
                y=[label],
                mode="markers",
                marker={"symbol": "diamond", "size": 10, "color": "#222222"},
                name="p95",
                showlegend=False,
                hovertemplate="p95 %{x:,.0f} partition-seconds<extra>%{y}</extra>",
            )
        )
    values = spreads[["min", "max"]].to_numpy(dtype="float64").ravel()
    log = spans_orders_of_magnitude(values) and bool((spreads["min"] > 0).all())
    figure.update_layout(
        title={"text": "Paused partition-seconds per trace (box: quartiles; whiskers: least "
               "and worst trace; diamond: p95)"},
        xaxis={"title": {"text": "partition-seconds paused over one trace (cost model)"},
               "type": "log" if log else "linear"},
        yaxis={"autorange": "reversed"},
        height=max(220, 60 + 46 * len(names)),
        margin={"t": 60, "l": 230, "r": 20, "b": 60},
    )  # fmt: skip
    return figure


def churn_balance_figure(points: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    figure = go.Figure()
    moved_values = points["moved"].to_numpy(dtype="float64") if not points.empty else np.array([])
    log_x = spans_orders_of_magnitude(moved_values)
    positive = moved_values[moved_values > 0]
    # a log axis cannot show 0: such points sit at half the smallest positive value
    zero_at = float(positive.min()) / 2 if log_x else 0.0
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
        # numbers travel as typed arrays and the wording once per assignor in the template;
        # the name comes in as data (%{fullData.name}), so a "%{" in it is no placeholder
        examples = [
            escape(", ".join(names) + (", …" if count > len(names) else ""))
            for count, names in zip(own["traces"], own["examples"], strict=True)
        ]
        moved = own["moved"].to_numpy(dtype="float64")
        figure.add_trace(
            go.Scatter(
                x=np.where(moved > 0, moved, zero_at) if log_x else moved,
                y=(own["spread"].to_numpy() + offset).round(4),
                mode="markers",
                name=_label(assignor),
                marker={
                    "symbol": MARKER_SYMBOLS[position % len(MARKER_SYMBOLS)],
                    "color": colours[assignor],
                    "size": (6 + 22 * np.sqrt(own["traces"].to_numpy() / largest)).round(2),
                    "opacity": 0.6,
                    "line": {"width": 0.5, "color": "#ffffff"},
                },
                customdata=np.column_stack(
                    (
                        own["spread"].to_numpy(dtype="float64"),
                        own["traces"].to_numpy("float64"),
                        moved,
                    )
                ),
                text=examples,
                hovertemplate=(
                    f"%{{fullData.name}}<br>moved {'≈ ' if binned else ''}%{{customdata[2]:,.0f}} "
                    f"partitions<br>worst spread %{{customdata[0]:,.{spread_digits}f}} "
                    "partitions<br>%{customdata[1]:,.0f} trace(s): %{text}<extra></extra>"
                ),
            )
        )
    figure.update_layout(
        title={"text": "Churn vs balance: one point per trace and assignor"},
        xaxis={
            "title": {
                "text": "partitions moved over the whole trace (sum of moved"
                + ("; log scale, 0 at the left edge)" if log_x else ")")
            },
            "type": "log" if log_x else "linear",
        },
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
            "moves beyond the least needed",
            "max load above the optimum",
            "generations at optimal max load",
        ),
        horizontal_spacing=0.09,
    )
    for column, key, digits in (
        (1, "excess_moved", 0),
        (2, "extra_max_load_mean", 3),
        (3, "optimal_balance_share", 1),
    ):
        figure.add_trace(
            _labelled_bars(labels, summary[key], bar_colours, digits), row=1, col=column
        )
    figure.update_yaxes(
        title_text="max(0, moved − least for own balance) (partitions, total)", row=1, col=1
    )
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
        label = _label(f"{name} ({protocols[str(name)]})")
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


def timeline_figure(assignors: Sequence[str], colours: dict[str, str]) -> go.Figure:
    """Four stacked panels, empty until the page script draws a trace into them; trace order is
    fixed so the script can swap data.

    Trace 0 is members; assignor i owns traces 1+3i (spread), 2+3i (moved), 3+3i (revoked).
    Each point's customdata is its generation number, so the hover names it on a time axis too.
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
    figure.add_trace(
        go.Scatter(
            x=[],
            y=[],
            mode="lines+markers",
            name="members",
            line={"color": "#555555", "shape": "hv"},
            hovertemplate="generation %{customdata}: %{y} members<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for assignor in assignors:
        label = _label(assignor)
        dash = "dot" if assignor == RECORDED else "solid"
        for row, what in ((2, "spread"), (3, "moved"), (4, "revoked")):
            figure.add_trace(
                go.Scatter(
                    x=[],
                    y=[],
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=row == 2,
                    line={"color": colours[assignor], "dash": dash, "width": 1.6},
                    marker={"size": 4},
                    hovertemplate=(
                        f"generation %{{customdata}}: %{{y}} partitions {what}"
                        f"<extra>{label}</extra>"
                    ),
                ),
                row=row,
                col=1,
            )
    figure.update_xaxes(title_text="generation", row=4, col=1)
    for row, unit in ((1, "members"), (2, "partitions"), (3, "partitions"), (4, "partitions")):
        figure.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    figure.update_layout(
        title={"text": "Pick a trace"},
        height=820,
        legend_title_text="assignor",
        hovermode="x unified",
        margin={"t": 80, "l": 70, "r": 20, "b": 50},
    )
    return figure
