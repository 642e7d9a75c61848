"""The timeline page (`ktk replicate run --html`, dashboards/replication.py) of a scenario with
several partitions: every partition's verdict, leader and ISR over the steps and its own
timeline; one-partition pages keep their shape; every user-provided string escaped."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from dashboards.errors import InputError
from dashboards.replication import render_replication
from ktk.cli import app
from replication.scenario import load_scenario
from replication.sim import run_scenario

SCENARIOS = EXAMPLES / "scenarios"


def result_of(name: str, mode: str) -> dict[str, Any]:
    return run_scenario(load_scenario(SCENARIOS / f"{name}.yaml"), mode).to_json()


def element_ids(html: str) -> list[str]:
    return re.findall(r' id="([^"]+)"', html)


def summary_row(html: str, partition: int) -> str:
    found = re.search(rf'<tr id="partition-{partition}-summary"[^>]*>(.*?)</tr>', html)
    assert found, f"no summary row for partition {partition}"
    return found.group(1)


def test_the_page_of_several_partitions_names_every_partition_and_its_verdict() -> None:
    # s27: one crash loses an acks=1 write on each of the two partitions the broker led
    result = result_of("s27-one-crash-loses-on-every-partition", "current")
    html = render_replication(result)
    assert "2 partitions" in html
    for entry in result["partitions"]:
        number = entry["partition"]
        row = summary_row(html, number)
        assert f'href="#partition-{number}-section">partition {number}</a>' in row
        assert '<span class="bad">unsafe</span>' in row
        for record in entry["acked_lost"]:
            assert record in row
        section = f'<section id="partition-{number}-section" class="partition">'
        assert html.count(section) == 1
        for own in ("outcome-table", "steps-table", "logs-table", "chart"):
            assert f'id="partition-{number}-{own}"' in html
    ids = element_ids(html)
    assert len(ids) == len(set(ids)), "every element id once"
    assert "partitions-chart" in ids and "partition-steps-table" in ids


def test_a_safe_partition_reads_safe_next_to_the_others() -> None:
    result = result_of("s24-broker-down-moves-every-leader", "current")
    html = render_replication(result)
    assert [entry["partition"] for entry in result["partitions"]] == [0, 1, 2]
    for number in (0, 1, 2):
        assert '<span class="ok">safe</span>' in summary_row(html, number)
    assert 'id="no-violations">No invariant was violated on any partition.' in html


def test_the_combined_steps_table_marks_a_broker_wide_step_in_every_partition() -> None:
    # s24 fences broker 1: every partition it is in changes leader or ISR at the same step
    result = result_of("s24-broker-down-moves-every-leader", "current")
    html = render_replication(result)
    table = re.search(r'<table id="partition-steps-table">(.*?)</table>', html, re.S)
    assert table
    rows = re.findall(r"<tr[^>]*><td>(\d+)</td>(.*?)</tr>", table.group(1))
    changed = {int(step): cells.count('class="text changed"') for step, cells in rows}
    partitions = len(result["partitions"])
    # some step changes every partition at once, and each partition's own timeline agrees
    steps = [step for step, count in changed.items() if count == partitions]
    assert steps
    step = steps[0]
    for entry in result["partitions"]:
        by_step = {row["step"]: (row["leader"], row["isr"]) for row in entry["timeline"]}
        before = max(s for s in by_step if s < step)
        assert by_step[before] != by_step[step]


def test_one_partition_pages_keep_their_shape() -> None:
    # the element ids, in order, of the one-partition page: a change of its shape fails here
    html = render_replication(result_of("s1-two-round-hw-lag", "pre-0.11"))
    assert element_ids(html) == [
        "description",
        "verdict",
        "outcome-table",
        "expectations",
        "violations-table",
        "timeline",
        "replication-chart",
        "steps",
        "steps-table",
        "logs",
        "logs-table",
    ]
    assert "partition" not in " ".join(element_ids(html))


def test_a_result_listing_one_partition_renders_as_one_without_the_list() -> None:
    result = result_of("s1-two-round-hw-lag", "current")
    listed = copy.deepcopy(result)
    listed["partitions"] = [{"partition": 0, **{k: v for k, v in result.items() if k != "name"}}]
    assert render_replication(listed) == render_replication(result)


def test_the_several_partition_page_is_deterministic() -> None:
    result = result_of("s25-auto-leader-rebalance", "kip-279")
    assert render_replication(copy.deepcopy(result)) == render_replication(result)


HOSTILE_NAME = "<script>alert('name')</script>"
HOSTILE_NOTE = '"><img src=x onerror=alert(1)>'
HOSTILE_RECORD = "<b>m&1</b>"


def hostile_result() -> dict[str, Any]:
    result = result_of("s27-one-crash-loses-on-every-partition", "current")
    result["name"] = HOSTILE_NAME
    result["description"] = HOSTILE_NOTE
    for entry in result["partitions"]:
        for row in entry["timeline"]:
            row["op"] = f"{row['op']} {HOSTILE_NOTE}"
            row["comment"] = HOSTILE_NAME
        entry["acked_lost"] = [*entry["acked_lost"], HOSTILE_RECORD]
        entry["acked"] = [*entry["acked"], HOSTILE_RECORD]
        entry["consumed"] = {HOSTILE_NAME: [HOSTILE_RECORD]}
        entry["violations"] = [{"invariant": HOSTILE_NAME, "step": 1, "detail": HOSTILE_NOTE}]
    result["violations"] = [{"invariant": HOSTILE_NAME, "step": 2, "detail": HOSTILE_NOTE}]
    return result


def test_the_several_partition_page_escapes_names_notes_and_records() -> None:
    html = render_replication(hostile_result())
    for raw in (HOSTILE_NAME, HOSTILE_NOTE, HOSTILE_RECORD, "<img", "<script>alert"):
        assert raw not in html
    assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;m&amp;1&lt;/b&gt;" in html


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda r: r["partitions"][1]["timeline"][0].update(step="x"),
            "partitions[1].timeline[0].step",
        ),
        (lambda r: r["partitions"].__setitem__(1, "p1"), "partitions[1]"),
        (lambda r: r["partitions"][0].update(partition="0"), "partitions[0].partition"),
        (lambda r: r["partitions"][1].update(acked_lost="m1"), "partitions[1].acked_lost"),
        (lambda r: r.update(partitions={"0": {}}), "partitions"),
    ],
)
def test_a_malformed_partition_is_an_input_error_naming_it(change: Any, field: str) -> None:
    result = result_of("s27-one-crash-loses-on-every-partition", "current")
    change(result)
    with pytest.raises(InputError) as failure:
        render_replication(result)
    assert str(failure.value).startswith(f"{field}: ")


def test_cli_writes_the_several_partition_page(tmp_path: Path) -> None:
    page = tmp_path / "s24.html"
    scenario = SCENARIOS / "s24-broker-down-moves-every-leader.yaml"
    outcome = CliRunner().invoke(app, ["replicate", "run", str(scenario), "--html", str(page)])
    assert outcome.exit_code == 0, outcome.output
    html = page.read_text(encoding="utf-8")
    assert all(f'id="partition-{n}-section"' in html for n in (0, 1, 2))
