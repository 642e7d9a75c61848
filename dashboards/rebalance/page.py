"""The rebalance page: aggregates and figures -> one self-contained HTML document, and its file.

The page script (the per-trace timeline picker) is the package file
``dashboards/static/rebalance-timeline.js``, inlined into the page so it works offline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dashboards.page import (
    assignor_colours,
    compact_json,
    document,
    escape,
    format_number,
    is_ktk_page,
    packed,
    packed_figures,
    static_script,
    write_page,
)
from dashboards.rebalance.aggregation import (
    DEFAULT_TIMELINE_TRACES,
    MAX_ERRORS_SHOWN,
    RECORDED,
    TABLE_COLUMNS,
    assignor_order,
    best_assignors,
    delta_encoded,
    paused_spreads,
    protocol_label,
    rebalance_rows,
    recorded_comparison,
    revoked_distribution,
    rounds_distribution,
    scatter_points,
    summarise_assignors,
    summarise_traces,
    trace_table,
    worst_traces,
)
from dashboards.rebalance.figures import (
    churn_balance_figure,
    optimal_gap_figure,
    recorded_figure,
    revocation_figure,
    timeline_figure,
    verdict_figure,
)
from dashboards.rebalance.reading import (
    PROTOCOL_FIELD,
    SCORE_FIELDS,
    SCORES_FILE,
    SUMMARY_FIELDS,
    SUMMARY_FILE,
    RebalanceResults,
    read_results,
    result_inputs,
)
from ktkbase.outputs import check_output_file

TIMELINE_SCRIPT = "static/rebalance-timeline.js"


def page_script(name: str = TIMELINE_SCRIPT) -> str:
    """The text of a script shipped in the dashboards package (declared as package data)."""
    return static_script(name)


def _summary_table(
    summary: pd.DataFrame, protocols: dict[str, str], colours: dict[str, str]
) -> str:
    best = best_assignors(summary)
    header = "".join(
        f'<th title="{escape(column.title)}">{escape(column.header)}</th>'
        for column in TABLE_COLUMNS
    )
    rows: list[str] = []
    for name, values in summary.iterrows():
        assignor = str(name)
        cells: list[str] = []
        for column in TABLE_COLUMNS:
            is_best = assignor in best.get(column.key, frozenset())
            css = ' class="best" title="best in this column by more than 1%"' if is_best else ""
            cells.append(f"<td{css}>{format_number(values[column.key], column.digits)}</td>")
        row_class = ' class="recorded"' if assignor == RECORDED else ""
        caption = " (real group)" if assignor == RECORDED else ""
        rows.append(
            f'<tr{row_class} data-assignor="{escape(assignor)}"><td>'
            f'<span class="swatch" style="background:{colours[assignor]}"></span>'
            f"{escape(assignor)}{caption}</td>"
            f"<td>{escape(protocols[assignor])}</td>{''.join(cells)}</tr>"
        )
    return (
        '<div class="table-wrap"><table id="summary-table"><thead><tr>'
        '<th title="the assignor replayed, or recorded: what the real group did">assignor</th>'
        '<th title="the rebalance protocol the results record for it: eager, cooperative or '
        'consumer (KIP-848)">protocol</th>'
        f"{header}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


VERDICT_STYLE = (
    "<style>#verdict .headline { font-size: 1.15em; margin: 6px 0; }"
    " #verdict-ranking { padding-left: 0; list-style: none; }"
    " #verdict-ranking li { margin: 3px 0; }"
    " #verdict-ranking .rank { display: inline-block; min-width: 1.6em; font-weight: 600; }"
    " #summary-table { font-size: 13px; }"
    " #summary-table th, #summary-table td { padding: 3px 4px; }"
    " #summary-table th { max-width: 5.6em; }"
    " .empty { color: #8a1c1c; font-weight: 600; }</style>"
)


def _verdict_section(verdict: Any, chart: str) -> str:
    """The verdict in words (from verdict.json), then the chart that answers it."""
    if verdict is None:
        return (
            f'<section id="verdict">{VERDICT_STYLE}<h2>Verdict</h2><p class="note">'
            "These results carry no "
            "verdict.json (result format version 3 writes one): rerun <code>ktk replay</code> "
            "to get which assignor to adopt and what its rebalances cost.</p>"
            f"{chart}</section>"
        )
    parts = [f'<section id="verdict">{VERDICT_STYLE}<h2>Verdict</h2>']
    headline = verdict.get("headline")
    traces = int(verdict.get("traces") or 0)
    noun = "trace" if traces == 1 else "traces"
    if headline:
        parts.append(
            f'<p id="verdict-headline" class="headline">Over {traces:,} {noun}, adopt '
            f"<strong>{escape(str(headline))}</strong>.</p>"
        )
    recorded = verdict.get("recorded")
    if recorded:
        parts.append(f'<p id="verdict-recorded">{escape(str(recorded["sentence"]))[:1].upper()}'
                     f"{escape(str(recorded['sentence']))[1:]}.</p>")  # fmt: skip
    items = "".join(
        f'<li data-assignor="{escape(str(entry["assignor"]))}">'
        f'<span class="rank">{int(entry["rank"])}</span> {escape(str(entry["reason"]))}</li>'
        for entry in verdict.get("ranking", [])
    )
    if items:
        parts.append(f'<ol id="verdict-ranking">{items}</ol>')
    model = verdict.get("cost_model") or {}
    tolerance = float(verdict.get("tie_tolerance") or 0.0)
    if model:
        parts.append(
            '<p class="note">Cost model (docs/traces.md): eager rebalances pause every partition '
            "the members owned for all rounds, cooperative ones only the revoked partitions for "
            "their extra round, KIP-848 assignors a moved partition until its new owner's next "
            f"heartbeat; a round lasts {float(model.get('round_seconds', 0)):g} s, a heartbeat "
            f"{float(model.get('heartbeat_seconds', 0)):g} s. Assignors within "
            f"{tolerance:.0%} of each other share a rank (a tie).</p>"
        )
    parts.append(chart)
    parts.append("</section>")
    return "".join(parts)


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


PROTOCOL_SOURCES = "summary.parquet, else scores.parquet"


def _sources_section() -> str:
    """The result columns the page reads, with what each means (the dashboard's contract)."""
    listed = (
        *((SCORES_FILE, column) for column in SCORE_FIELDS),
        *((SUMMARY_FILE, column) for column in SUMMARY_FIELDS),
        (PROTOCOL_SOURCES, PROTOCOL_FIELD),
    )
    rows = "".join(
        f'<tr><td class="text mono">{escape(file)}</td>'
        f'<td class="text mono">{escape(column.name)}</td>'
        f'<td class="text">{escape(column.description)}</td>'
        f'<td class="text">{"required" if column.required else "may be absent or null"}</td></tr>'
        for file, column in listed
    )
    return (
        '<section id="sources"><h2>What this page reads</h2><p class="note">The result '
        "columns behind every number above (spec/traces.md). Either Parquet table may be one "
        "file or a dataset directory of part files.</p>"
        '<table id="sources-table"><thead><tr><th class="text">file</th>'
        '<th class="text">column</th><th class="text">meaning</th><th class="text">presence</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></section>"
    )


# errors.jsonl texts may be megabytes long; the page shows their start (the file keeps them)
MAX_ERROR_TEXT = 300


def _error_cell(value: object, css: str) -> str:
    text = str(value)
    if len(text) > MAX_ERROR_TEXT:
        text = text[:MAX_ERROR_TEXT] + f"… ({len(text):,} characters)"
    return f'<td class="{css}">{escape(text)}</td>'


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
            + _error_cell(error.get("trace_id") or "", "text")
            + _error_cell(where, "text mono")
            + _error_cell("" if field is None else field, "text")
            + _error_cell(message, "text")
            + _error_cell("" if value is None else json.dumps(value), "text mono")
            + "</tr>"
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


def render_rebalance(
    results: RebalanceResults, *, timeline_traces: int = DEFAULT_TIMELINE_TRACES
) -> str:
    """The whole dashboard as one HTML string (deterministic: same results, same bytes)."""
    scores = results.scores
    per_trace = summarise_traces(results.summary)
    summary = summarise_assignors(per_trace, scores)
    assignors = list(summary.index)
    colours = assignor_colours(assignors)
    protocols = {name: protocol_label(results.protocols.get(name, ())) for name in assignors}
    trace_count = int(scores["trace_id"].nunique())
    rebalances = rebalance_rows(scores)
    comparison = recorded_comparison(per_trace)
    worst = worst_traces(per_trace, timeline_traces)
    traces = trace_table(scores, assignors, worst)
    timed = any(value is not None for value in traces["interval_ms"])

    verdict = results.verdict
    ranked = [str(entry["assignor"]) for entry in verdict["ranking"]] if verdict else []
    order = [name for name in ranked if name in assignors] + [
        name for name in assignors if name not in ranked
    ]
    spreads = paused_spreads(per_trace, order)
    figures: list[tuple[str, go.Figure]] = []
    if not spreads.empty:
        figures.append(("verdict-chart", verdict_figure(spreads, colours, protocols)))
    figures += [
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
    figures.append(("timeline-chart", timeline_figure(assignors, colours)))
    divs, plotly_markup = packed_figures(figures)

    has_optimal = (
        results.summary["total_min_moved"].notna().any() or scores["optimal_max_load"].notna().any()
    )
    sections = [
        _verdict_section(verdict, divs.get("verdict-chart", "")),
        '<section id="summary"><h2>Summary per assignor</h2>'
        f'<p class="note">{trace_count:,} traces, {len(scores):,} scored generations. Totals are '
        "sums over every generation of every trace; a highlighted cell is the best value of "
        "its column by more than 1% among assignors that ran on all traces (a tie highlights "
        "nothing). Hover a column header for what it counts. Totals per trace come from "
        "summary.parquet. Protocol is the one the results record (the protocol column of "
        "summary.parquet, else of scores.parquet), “not recorded” when they carry none. "
        "Invalid generations left partitions "
        "unassigned or assigned twice / to a non-subscriber.</p>"
        f"{_summary_table(summary, protocols, colours)}</section>",
        '<section id="churn-balance"><h2>Trade-off: churn vs balance</h2><p class="note">Lower '
        "left is better: few partitions moved and an even spread. Each assignor has its own "
        "colour and marker shape; the x axis turns logarithmic when the moves span two orders "
        "of magnitude or more. Point size grows with the number of "
        "traces at that spot; each assignor's points sit slightly above or below the whole "
        "spread value so they do not hide each other (the hover gives the exact values).</p>"
        f"{divs['churn-balance-chart']}</section>",
        '<section id="optimal-gap"><h2>Gap to the optimal references</h2><p class="note">'
        "Moves beyond the least needed: per rebalance, max(0, moved − the fewest moves any "
        "assignment as balanced as this assignor's own needs), summed, so it is never negative "
        "(moved − min_moved is not: an assignor that stays unbalanced moves less than optimal "
        "balance needs); max_load − optimal_max_load: how far the most loaded member is "
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
    time_note = (
        " Traces whose generations carry timestamps (timestamp_ms) are drawn against the "
        "time since their first generation; the others against the generation number."
        if timed
        else " These results carry no time between generations (interval_ms), so the x axis "
        "is the generation number."
    )
    sections.append(
        '<section id="timeline"><h2>Per-trace timeline</h2><p class="note">Every one of the '
        f"{trace_count:,} traces: type part of a trace id to find it. Without a search the "
        f"picker lists the {len(traces['worst']):,} worst (highest partitions moved plus worst "
        f"spread under any assignor).{time_note}</p>"
        '<p id="timeline-empty" class="empty" hidden></p>'
        '<div class="controls"><label>search <input id="timeline-search" type="search" '
        'placeholder="trace id" autocomplete="off"></label>'
        '<select id="timeline-select" aria-label="trace"></select>'
        '<span id="timeline-count" class="note"></span></div>'
        f"{divs['timeline-chart']}"
        '<script type="application/octet-stream" id="trace-data-packed">'
        f"{packed(compact_json(delta_encoded(traces)))}</script></section>"
    )
    sections.append(_errors_section(results.errors))
    sections.append(_sources_section())
    subtitle = (
        f"{results.source}: {trace_count:,} traces × {len(assignors)} assignors "
        f"({', '.join(assignors)})"
    )
    sections.append(plotly_markup)
    return document("Rebalance comparison", subtitle, "\n".join(sections), "\n" + page_script())


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
    force: bool = False,
) -> PageSummary:
    """Read a results directory and write the dashboard to `path` atomically.

    `path` may replace an earlier ktk page, never an input, a directory or (unless `force`)
    a file ktk did not write: see :func:`dashboards.page.write_page`.
    """
    inputs = result_inputs(results_dir)
    check_output_file(path, inputs=inputs, force=force, is_ours=is_ktk_page)
    results = read_results(results_dir)
    page = render_rebalance(results, timeline_traces=timeline_traces)
    target = write_page(path, page, inputs=(*inputs, *results.inputs), force=force)
    return PageSummary(
        path=target,
        size_bytes=len(page.encode("utf-8")),
        traces=int(results.scores["trace_id"].nunique()),
        assignors=tuple(assignor_order(results.scores["assignor"].unique())),
        skipped_traces=len(results.errors),
    )
