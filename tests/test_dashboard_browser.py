"""The dashboards opened from disk in headless Chromium with every network request refused.

Needs Debian's Chromium (`apt-get install chromium`) and Playwright's Python package; the
tests skip when either is missing. Screenshots land in test-artifacts/ for a human to look at.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, REPO_ROOT
from dashboard_data import results_of, s1_like_result, synthetic_scores, write_results

from dashboards.page import write_atomically
from dashboards.rebalance import render_rebalance, write_rebalance_page
from dashboards.replication import write_replication_page

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "test-artifacts"
HOSTILE = "<img src=x onerror=alert(1)>"
# at least `count` charts drawn with their traces (a chart's svg appears before its traces do,
# so counting svg elements alone can pass while the last chart is still empty)
CHART_RENDERED = """count => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(
    chart => chart.querySelector('.main-svg')
        && chart.querySelector('g.trace, g.boxlayer path, g.barlayer path')).length >= count"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Visit:
    """An opened page and everything it tried that a test must see."""

    page: Any
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)


@contextmanager
def opened(browser: Any, path: Path, charts: int) -> Iterator[Visit]:
    """Open `path` with the network cut off and wait until `charts` plotly charts are drawn."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    visit = Visit(page)

    def refuse_network(route: Any) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            visit.blocked.append(route.request.url)
            route.abort()

    def on_dialog(dialog: Any) -> None:
        visit.dialogs.append(dialog.message)
        dialog.dismiss()

    context.route("**/*", refuse_network)
    page.on(
        "console", lambda message: message.type == "error" and visit.errors.append(message.text)
    )
    page.on("pageerror", lambda error: visit.errors.append(str(error)))
    page.on("dialog", on_dialog)
    try:
        page.goto(path.resolve().as_uri())
        page.wait_for_function(CHART_RENDERED, arg=charts, timeout=30_000)
        yield visit
    finally:
        context.close()


def _screenshot(visit: Visit, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / name
    visit.page.screenshot(path=str(target), full_page=True)
    return target


def _chart_states(visit: Visit) -> list[dict[str, Any]]:
    return visit.page.evaluate(
        """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(chart => ({
            id: chart.id,
            svg: chart.querySelectorAll('svg.main-svg').length,
            traces: chart.querySelectorAll('g.trace, g.boxlayer path, g.barlayer path').length,
        }))"""
    )


def test_rebalance_dashboard_draws_every_chart_offline(browser: Any, tmp_path: Path) -> None:
    errors = [{"trace_id": "trace-99999", "file": "traces.jsonl", "line": 7, "reason": "bad"}]
    results_dir = write_results(tmp_path / "r", synthetic_scores(60, seed=21), errors=errors)
    report = write_rebalance_page(results_dir, tmp_path / "report.html").path
    with opened(browser, report, charts=5) as visit:
        charts = _chart_states(visit)
        assert [chart["id"] for chart in charts] == [
            "churn-balance-chart",
            "optimal-gap-chart",
            "revocation-chart",
            "recorded-chart",
            "timeline-chart",
        ]
        assert all(chart["svg"] > 0 and chart["traces"] > 0 for chart in charts), charts
        summary_rows = visit.page.locator("#summary-table tbody tr")
        assert summary_rows.count() == 5
        assert visit.page.locator("#summary-table td.best").count() > 0
        assert visit.page.locator("#errors-table tbody tr").count() == 1
        _screenshot(visit, "rebalance-dashboard.png")
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


def test_timeline_search_narrows_the_traces_and_redraws(browser: Any, tmp_path: Path) -> None:
    scores = synthetic_scores(40, seed=8)
    report = write_atomically(
        tmp_path / "report.html", render_rebalance(results_of(scores), timeline_traces=40)
    )
    target = "trace-00017"
    expected = scores[(scores.trace_id == target) & (scores.assignor == "cooperative-sticky")]
    with opened(browser, report, charts=5) as visit:
        page = visit.page
        assert page.locator("#timeline-select option").count() == 40
        page.fill("#timeline-search", "00017")
        page.wait_for_function(
            "id => document.getElementById('timeline-chart').dataset.trace === id", arg=target
        )
        assert page.locator("#timeline-select option").count() == 1
        assert page.inner_text("#timeline-count") == "1 of 40 traces match"
        drawn = page.evaluate(
            "() => { const chart = document.getElementById('timeline-chart');"
            " return [chart.data[1].x, chart.data[1].y, chart.layout.title.text]; }"
        )
        assert drawn[0] == expected["generation"].tolist()
        assert drawn[1] == expected["spread"].tolist()
        assert target in drawn[2]
        title = page.locator("#timeline-chart .gtitle").text_content()
        assert title == f"Trace {target}"
        page.fill("#timeline-search", "no-such-trace")
        assert page.locator("#timeline-select option").count() == 0
        assert visit.errors == [] and visit.dialogs == []


def test_hostile_trace_member_and_topic_names_render_as_text(browser: Any, tmp_path: Path) -> None:
    scores = synthetic_scores(6, seed=4, trace_prefix=HOSTILE)
    scores.loc[scores.assignor == "range", "assignor"] = HOSTILE
    errors = [
        {
            "trace_id": HOSTILE,
            "file": "traces.jsonl",
            "line": 3,
            "reason": f"members[0].member_id {HOSTILE} subscribes to unknown topic {HOSTILE}",
        }
    ]
    report = write_rebalance_page(
        write_results(tmp_path / HOSTILE.replace("/", "_"), scores, errors=errors),
        tmp_path / "report.html",
    ).path
    with opened(browser, report, charts=5) as visit:
        page = visit.page
        page.fill("#timeline-search", "onerror")
        page.wait_for_function(
            "() => document.getElementById('timeline-chart').dataset.trace !== undefined"
        )
        page.wait_for_timeout(300)
        assert page.evaluate("() => document.querySelectorAll('img').length") == 0
        assert HOSTILE in page.inner_text("#summary-table")
        assert HOSTILE in page.inner_text("#errors-table")
        assert HOSTILE in page.locator("#timeline-select option").first.text_content()
        assert HOSTILE in page.locator("#timeline-chart .gtitle").text_content()
        legend = page.locator("#churn-balance-chart .legendtext").all_text_contents()
        assert HOSTILE in legend
        page.evaluate(
            "() => { const chart = document.getElementById('churn-balance-chart');"
            " const curve = chart.data.findIndex(trace => trace.name.includes('onerror'));"
            " Plotly.Fx.hover(chart, [{curveNumber: curve, pointNumber: 0}]); }"
        )
        hover = page.locator("#churn-balance-chart .hovertext").first
        hover.wait_for()
        hover_text = hover.text_content() or ""
        assert hover_text.startswith(f"{HOSTILE}moved ")  # lines are separate tspans
        assert f"trace(s): {HOSTILE}" in hover_text and "%{" not in hover_text
        assert page.evaluate("() => document.querySelectorAll('img').length") == 0
        _screenshot(visit, "rebalance-dashboard-hostile-names.png")
        assert visit.dialogs == [] and visit.errors == []


def test_replication_page_draws_the_timeline_offline(browser: Any, tmp_path: Path) -> None:
    result = s1_like_result(record_prefix=HOSTILE + "m")
    page_path = write_replication_page(result, tmp_path / "replication.html")
    with opened(browser, page_path, charts=1) as visit:
        page = visit.page
        charts = _chart_states(visit)
        assert [chart["id"] for chart in charts] == ["replication-chart"]
        assert charts[0]["traces"] > 0
        assert page.locator("#steps-table tbody tr").count() == len(result["timeline"])
        assert page.locator("#violations-table tbody tr").count() == 1
        assert page.locator("#steps-table tr.violation").count() == 1
        assert f"{HOSTILE}m2 (acknowledged, then lost)" in page.inner_text("#outcome-table")
        assert page.evaluate("() => document.querySelectorAll('img').length") == 0
        _screenshot(visit, "replication-page.png")
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


def _trace_inputs(vectors_dir: Path) -> list[Path]:
    examples = EXAMPLES / "traces"
    if examples.is_dir() and any(examples.iterdir()):
        return [examples]
    return [vectors_dir / "traces.jsonl"]


@pytest.mark.slow
def test_real_replay_of_example_traces_renders(
    browser: Any, tmp_path: Path, vectors_dir: Path
) -> None:
    from assignors import registry
    from assignors.traces import replay
    from assignors.traces.files import read_traces
    from assignors.traces.results import write_results as write_replay_results

    traces, failures = read_traces(_trace_inputs(vectors_dir))
    assert traces
    names = list(registry.names())
    rows = [
        row
        for trace in traces
        for row in replay.replay_assignors(trace, [*names, "recorded"], timings=True)
    ]
    results_dir = write_replay_results(tmp_path / "results", rows, failures)
    written = write_rebalance_page(results_dir, tmp_path / "report.html")
    assert written.traces == len(traces)
    # the verdict chart, churn/balance, optimal gap, revocations, timeline (+ recorded)
    expected_charts = 6 if any(trace.has_recorded_assignment() for trace in traces) else 5
    with opened(browser, written.path, charts=expected_charts) as visit:
        charts = _chart_states(visit)
        assert len(charts) == expected_charts
        assert all(chart["svg"] > 0 and chart["traces"] > 0 for chart in charts), charts
        rows_shown = visit.page.locator("#summary-table tbody tr").count()
        assert rows_shown == len(written.assignors)
        _screenshot(visit, "rebalance-dashboard-replayed-traces.png")
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


def test_real_run_of_an_example_scenario_renders(browser: Any, tmp_path: Path) -> None:
    scenario_file = EXAMPLES / "scenarios" / "s1-two-round-hw-lag.yaml"
    from replication.scenario import load_scenario
    from replication.sim import run_scenario

    result = run_scenario(load_scenario(scenario_file)).to_json()
    assert result["acked_lost"], "S1 under pre-0.11 loses an acknowledged record"
    page_path = write_replication_page(result, tmp_path / "s1.html")
    with opened(browser, page_path, charts=1) as visit:
        page = visit.page
        assert _chart_states(visit)[0]["traces"] > 0
        assert page.locator("#steps-table tbody tr").count() == len(result["timeline"])
        violations = page.locator("#violations-table tbody tr")
        assert violations.count() == len(result["violations"])
        lost = result["acked_lost"][0]
        assert f"{lost} (acknowledged, then lost)" in page.inner_text("#outcome-table")
        assert page.locator("#logs-table td.lost").count() >= 1
        _screenshot(visit, "replication-page-s1.png")
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


def test_a_several_partition_scenario_page_draws_every_partition(
    browser: Any, tmp_path: Path
) -> None:
    from replication.scenario import load_scenario
    from replication.sim import run_scenario

    scenario_file = EXAMPLES / "scenarios" / "s27-one-crash-loses-on-every-partition.yaml"
    result = run_scenario(load_scenario(scenario_file), "current").to_json()
    partitions = result["partitions"]
    page_path = write_replication_page(result, tmp_path / "s27.html")
    with opened(browser, page_path, charts=1 + len(partitions)) as visit:
        page = visit.page
        charts = _chart_states(visit)
        assert [chart["id"] for chart in charts] == [
            "partitions-chart",
            *(f"partition-{entry['partition']}-chart" for entry in partitions),
        ]
        assert all(chart["svg"] > 0 and chart["traces"] > 0 for chart in charts), charts
        assert page.locator("#partitions-table tbody tr").count() == len(partitions)
        steps = {row["step"] for entry in partitions for row in entry["timeline"]}
        assert page.locator("#partition-steps-table tbody tr").count() == len(steps)
        _screenshot(visit, "replication-page-partitions.png")
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


@pytest.mark.slow
def test_twenty_thousand_trace_dashboard_draws_every_chart(browser: Any, tmp_path: Path) -> None:
    results_dir = write_results(
        tmp_path / "big", synthetic_scores(20_000, seed=9), partitioned=True
    )
    report = write_rebalance_page(results_dir, tmp_path / "big.html").path
    with opened(browser, report, charts=5) as visit:
        assert visit.page.locator("#timeline-select option").count() == 200
        assert visit.errors == [] and visit.blocked == []


def _demo_like_results(tmp_path: Path) -> Path:
    """What `ktk demo` writes for the dashboard: generated mixed traces replayed through every
    built-in assignor, costed, with verdict.json."""
    from assignors import registry
    from assignors.traces.files import write_traces_jsonl
    from assignors.traces.generate import generate_rows
    from assignors.traces.job import replay_paths
    from assignors.traces.results import write_results as write_replay_results

    traces = tmp_path / "traces" / "mixed.jsonl"
    rows = generate_rows("mixed", 24, 1, members=(3, 12), partitions=(12, 120), max_generations=6)
    write_traces_jsonl(rows, traces)
    run = replay_paths([traces.parent], [*registry.builtin_names(), "recorded"], timings=False)
    return write_replay_results(tmp_path / "results", run.scores, run.failures, run.summary)


def test_verdict_section_reads_as_a_verdict_with_its_chart(browser: Any, tmp_path: Path) -> None:
    import json

    results_dir = _demo_like_results(tmp_path)
    verdict = json.loads((results_dir / "verdict.json").read_text())
    report = write_rebalance_page(results_dir, tmp_path / "report.html").path
    with opened(browser, report, charts=5) as visit:
        page = visit.page
        headline = page.inner_text("#verdict-headline")
        assert headline.startswith("Over 24 traces, adopt ")
        assert verdict["headline"] in headline
        ranking = page.locator("#verdict-ranking li")
        assert ranking.count() == len(verdict["ranking"])
        chart = page.evaluate(
            "() => { const c = document.getElementById('verdict-chart');"
            " return c.data.filter(t => t.type === 'box').map(t => t.name); }"
        )
        assert chart == [entry["assignor"] for entry in verdict["ranking"]]
        # the verdict is the first thing on the page
        top = page.locator("#verdict").bounding_box()
        assert top is not None and top["y"] < page.locator("#summary").bounding_box()["y"]
        shot = tmp_path / "verdict.png"
        page.locator("#verdict").screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


def test_summary_table_fits_a_1280_pixel_window(browser: Any, tmp_path: Path) -> None:
    results_dir = _demo_like_results(tmp_path)
    report = write_rebalance_page(results_dir, tmp_path / "report.html").path
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(report.resolve().as_uri())
        page.wait_for_function(CHART_RENDERED, arg=5, timeout=30_000)
        box = page.locator("#summary-table").bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1280, box
        wrap = page.evaluate(
            "() => { const w = document.querySelector('#summary .table-wrap');"
            " return [w.scrollWidth, w.clientWidth]; }"
        )
        assert wrap[0] <= wrap[1], wrap  # nothing hidden behind a horizontal scroll
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280
        titles = page.eval_on_selector_all(
            "#summary-table thead th", "cells => cells.map(c => c.title)"
        )
        assert titles and all(titles)
        shot = tmp_path / "summary-1280.png"
        page.locator("#summary-table").screenshot(path=str(shot))
        assert shot.stat().st_size > 5_000
    finally:
        context.close()


def test_timeline_search_without_a_match_says_so(browser: Any, tmp_path: Path) -> None:
    scores = synthetic_scores(12, seed=8)
    report = write_atomically(
        tmp_path / "report.html", render_rebalance(results_of(scores), timeline_traces=12)
    )
    with opened(browser, report, charts=5) as visit:
        page = visit.page
        assert page.locator("#timeline-empty").is_hidden()
        page.fill("#timeline-search", "no-such-trace")
        message = page.locator("#timeline-empty")
        assert message.is_visible()
        assert message.inner_text() == (
            "No trace id contains \u201cno-such-trace\u201d (searched all 12 traces)."
        )
        assert page.locator("#timeline-select").is_disabled()
        page.fill("#timeline-search", "00003")
        assert page.locator("#timeline-empty").is_hidden()
        assert not page.locator("#timeline-select").is_disabled()
        assert visit.errors == [] and visit.dialogs == []


TIMELINE_READY = "() => document.getElementById('timeline-chart').dataset.ready === 'true'"


def _drawn_trace(page: Any) -> str:
    return page.evaluate("() => document.getElementById('timeline-chart').dataset.trace")


def test_search_finds_a_trace_outside_the_worst_and_draws_it(browser: Any, tmp_path: Path) -> None:
    scores = synthetic_scores(300, seed=5)
    results = results_of(scores)
    report = write_atomically(
        tmp_path / "report.html", render_rebalance(results, timeline_traces=10)
    )
    from dashboards.rebalance.aggregation import summarise_traces, worst_traces

    worst = worst_traces(summarise_traces(results.summary), 10)
    target = next(f"trace-{n:05d}" for n in range(300) if f"trace-{n:05d}" not in worst)
    expected = scores[(scores.trace_id == target) & (scores.assignor == "range")]
    with opened(browser, report, charts=5) as visit:
        page = visit.page
        page.wait_for_function(TIMELINE_READY)
        assert page.locator("#timeline-select option").count() == 10
        assert _drawn_trace(page) == worst[0]
        page.fill("#timeline-search", target)
        page.wait_for_function(
            "id => document.getElementById('timeline-chart').dataset.trace === id", arg=target
        )
        assert page.inner_text("#timeline-count") == "1 of 300 traces match"
        assert page.locator("#timeline-empty").is_hidden()
        drawn = page.evaluate(
            "() => { const chart = document.getElementById('timeline-chart');"
            " const range = chart.data.findIndex(t => t.name === 'range');"
            " return [chart.data[range].x, chart.data[range].y, chart.data[range + 1].y,"
            " chart.layout.title.text, chart.dataset.axis]; }"
        )
        assert drawn[0] == expected["generation"].tolist()
        assert drawn[1] == expected["spread"].tolist()
        assert drawn[2] == expected["moved"].tolist()
        assert drawn[3] == f"Trace {target}" and drawn[4] == "generation"
        # every assignor's numbers, whichever one the page stores the others relative to
        moved = page.evaluate(
            "() => Object.fromEntries(document.getElementById('timeline-chart').data"
            ".filter((t, i) => i % 3 === 2).map(t => [t.name, t.y]))"
        )
        for name, values in moved.items():
            rows = scores[(scores.trace_id == target) & (scores.assignor == name)]
            assert values == rows["moved"].tolist(), name
        page.fill("#timeline-search", "trace-99999")
        message = page.locator("#timeline-empty")
        message.wait_for(state="visible")
        assert message.inner_text() == (
            "No trace id contains \u201ctrace-99999\u201d (searched all 300 traces)."
        )
        assert page.locator("#timeline-select option").count() == 0
        assert visit.errors == [] and visit.dialogs == [] and visit.blocked == []


def test_traces_with_timestamps_are_drawn_against_time(browser: Any, tmp_path: Path) -> None:
    scores = synthetic_scores(20, seed=6, interval_ms=45_000)
    # one gap of trace 3 is unknown: that trace is drawn against generations
    scores.loc[(scores.trace_id == "trace-00003") & (scores.generation == 2), "interval_ms"] = None
    report = write_atomically(tmp_path / "report.html", render_rebalance(results_of(scores)))
    target = "trace-00007"
    generations = int(((scores.trace_id == target) & (scores.assignor == "range")).sum())
    with opened(browser, report, charts=5) as visit:
        page = visit.page
        page.wait_for_function(TIMELINE_READY)
        page.fill("#timeline-search", target)
        page.wait_for_function(
            "id => document.getElementById('timeline-chart').dataset.trace === id", arg=target
        )
        drawn = page.evaluate(
            "() => { const chart = document.getElementById('timeline-chart');"
            " return [chart.data[1].x, chart.data[1].customdata, chart.dataset.axis,"
            " chart.layout.xaxis4.title.text]; }"
        )
        assert drawn[0] == [45 * step for step in range(generations)]
        assert drawn[1] == list(range(1, generations + 1))
        assert drawn[2] == "time"
        assert drawn[3] == "seconds since the trace's first generation (from its timestamp_ms)"
        page.fill("#timeline-search", "trace-00003")
        page.wait_for_function(
            "() => document.getElementById('timeline-chart').dataset.trace === 'trace-00003'"
        )
        axis = page.evaluate(
            "() => { const chart = document.getElementById('timeline-chart');"
            " return [chart.dataset.axis, chart.data[1].x.slice(0, 3)]; }"
        )
        assert axis == ["generation", [1, 2, 3]]
        assert visit.errors == [] and visit.dialogs == []


def _overlapping(boxes: list[dict[str, float]]) -> list[tuple[int, int]]:
    return [
        (first, second)
        for first in range(len(boxes))
        for second in range(first + 1, len(boxes))
        if boxes[first]["x"] < boxes[second]["x"] + boxes[second]["width"]
        and boxes[second]["x"] < boxes[first]["x"] + boxes[first]["width"]
        and boxes[first]["y"] < boxes[second]["y"] + boxes[second]["height"]
        and boxes[second]["y"] < boxes[first]["y"] + boxes[first]["height"]
    ]


@pytest.mark.parametrize("width", [1280, 1600])
def test_replication_chart_labels_never_overlap_and_every_marker_has_a_legend(
    browser: Any, tmp_path: Path, width: int
) -> None:
    result = s1_like_result()
    # crowd the chart: many acknowledgements on one step and on neighbouring steps, and a
    # violation on every one of three neighbouring steps
    last = result["timeline"][-1]["step"]
    for entry in result["timeline"][1:6]:
        entry["acked"] = [*entry["acked"], *(f"record-{entry['step']}-{n}" for n in range(3))]
    result["violations"] = [
        {"invariant": name, "step": step, "detail": "x"}
        for step, name in ((last - 2, "StrongIsr"), (last - 1, "LeaderCompleteness"),
                           (last, "LogMatching"), (last, "StrongIsr"))
    ]  # fmt: skip
    page_path = write_replication_page(result, tmp_path / "replication.html")
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(page_path.resolve().as_uri())
        page.wait_for_function(CHART_RENDERED, arg=1, timeout=30_000)
        labels = page.locator("#replication-chart .textpoint text")
        texts = labels.all_text_contents()
        assert "record-1-2" in texts and "LeaderCompleteness" in texts
        assert "LogMatching, StrongIsr" in texts
        boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
        assert all(box is not None for box in boxes)
        assert _overlapping(boxes) == []  # type: ignore[arg-type]
        band = page.locator("#replication-chart .bglayer rect").first.bounding_box()
        assert band is not None
        for box in boxes:  # inside the plot, not under the legend or cut at the edge
            assert box is not None
            assert band["x"] <= box["x"] and box["x"] + box["width"] <= band["x"] + band["width"]
        legend = page.locator("#replication-chart .legendtext").all_text_contents()
        for entry in (
            "in the ISR (filled)",
            "not in the ISR (hollow)",
            "leader (star)",
            "offline (red outline)",
            "acknowledged (acks=all)",
            "acknowledged, then lost",
            "invariant violated (also a dotted line)",
        ):
            assert entry in legend, legend  # fmt: skip
        _screenshot_page(page, f"replication-crowded-{width}.png")
    finally:
        context.close()


def _screenshot_page(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
