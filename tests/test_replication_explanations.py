"""Every timeline row says which rule changed a value, in the result document, in `ktk replicate`
and on the HTML page; the words come from the simulator's record of the rule that fired."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from conftest import EXAMPLES
from typer.testing import CliRunner

from dashboards.replication import render_replication
from ktk.cli import app
from replication.modes import get_mode
from replication.scenario import COMMENT, Step, load_scenario, scenario_to_dict
from replication.sim import Runner, run_scenario

S1 = EXAMPLES / "scenarios" / "s1-two-round-hw-lag.yaml"


def _changes(document: dict, step: int) -> list[str]:
    return next(entry for entry in document["timeline"] if entry["step"] == step).get("changes", [])


def test_restart_under_pre_011_says_it_truncated_to_the_high_watermark() -> None:
    document = run_scenario(load_scenario(S1), "pre-0.11").to_json()
    assert _changes(document, 8) == [
        "replica 1 truncated to its high watermark 1 on restart, dropping offset 1 (pre-0.11 rule)"
    ]


def test_restart_under_current_truncates_nothing_and_says_nothing_of_truncation() -> None:
    document = run_scenario(load_scenario(S1), "current").to_json()
    assert not any("truncated" in change for change in _changes(document, 8))


def test_isr_join_names_the_catch_up_rule_and_the_step_it_was_sent_at() -> None:
    document = run_scenario(load_scenario(S1), "pre-0.11").to_json()
    assert _changes(document, 12) == [
        "controller: 2 joined the ISR (AlterPartition from leader 1, sent at step 12: 2 caught "
        "up: its LEO 2 reached leader 1's high watermark 2 (R2.4))"
    ]


def test_fencing_and_election_are_explained_by_the_controller() -> None:
    document = run_scenario(load_scenario(S1), "pre-0.11").to_json()
    assert _changes(document, 9) == [
        "controller: 2 left the ISR; 1 became leader in epoch 1, chosen from the ISR {1} "
        "(broker 2 fenced: no heartbeat (R2.7))"
    ]


def test_high_watermark_moves_and_acknowledgements_say_why() -> None:
    document = run_scenario(load_scenario(S1), "pre-0.11").to_json()
    assert _changes(document, 6) == [
        "leader 2 HW 1 -> 2: the lowest LEO over the ISR {2, 1} and the caught-up followers (R1.5)",
        "m2 acknowledged: leader 2's high watermark 2 covers its offset 1 (acks=all, R3.4)",
    ]
    assert _changes(document, 3) == [
        "replica 1 HW 0 -> 1: the leader's high watermark in the fetch response, capped at its "
        "own LEO (R2.2)"
    ]
    # a step that changes no LEO, HW, ISR, leader or ack explains nothing
    assert "changes" not in document["timeline"][13]


def test_diverging_epoch_truncation_names_the_fetch_response(tmp_path: Path) -> None:
    # leader 1 takes m1-m2 alone; broker 2 leads in a new epoch and writes m3, then 1 follows
    # and its fetch learns that its epoch-0 log diverges at offset 0
    scenario = tmp_path / "diverge.yaml"
    scenario.write_text(
        "name: diverge\nconfig: {brokers: [1, 2], replicas: [1, 2], min_insync_replicas: 1,"
        " unclean_leader_election: true}\nsteps:\n"
        "  - {isolate: 2}\n  - {advance_ms: 40000}\n  - {produce: m1, acks: 1}\n"
        "  - {crash: 1, detected: true}\n  - {heal: 2}\n  - {elect: unclean}\n"
        "  - {produce: m3, acks: 1}\n  - {restart: 1}\n  - {fetch: 1}\n"
    )
    document = run_scenario(load_scenario(scenario), "current").to_json()
    fetch = document["timeline"][-1]
    assert fetch["result"].startswith("diverging(")
    assert any(
        change.startswith("replica 1 truncated to 0: the leader said its log diverges")
        and change.endswith("(DivergingEpoch in the fetch response) (current rule)")
        for change in fetch["changes"]
    ), fetch


def test_the_explorer_runs_build_no_explanations() -> None:
    runner = Runner(load_scenario(S1).config, get_mode("pre-0.11"))
    outcome = runner.step(Step("produce", "m1", (("acks", 1),)))
    assert outcome.changes == () and runner.cluster.notes is None
    assert all(broker.replica.notes is None for broker in runner.cluster.brokers.values())


def test_comment_steps_reach_the_timeline_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\ndescription: two brokers, one record\nconfig: {brokers: [1, 2], "
        "replicas: [2, 1]}\nsteps:\n  - {comment: first we produce}\n  - {produce: m1}\n"
    )
    scenario = load_scenario(path)
    assert scenario.steps[0] == Step(COMMENT, "first we produce")
    assert scenario_to_dict(scenario)["steps"][0] == {"comment": "first we produce"}
    document = run_scenario(scenario).to_json()
    assert document["description"] == "two brokers, one record"
    first = document["timeline"][0]
    assert (first["op"], first["comment"], first["result"]) == ("comment", "first we produce", "")
    outcome = CliRunner().invoke(app, ["replicate", str(path)], env={"COLUMNS": "200"})
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.splitlines()[0] == "two brokers, one record"
    assert "# first we produce" in outcome.stdout
    page = render_replication(document)
    assert '<p class="note" id="description">two brokers, one record</p>' in page
    assert '<div class="comment"># first we produce</div>' in page


class _Cells(HTMLParser):
    """Text of the cells of #steps-table, row by row, and its header cells."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.header: list[str] = []
        self.why: list[list[str]] = []
        self._cell: str | None = None
        self._in_why = False
        self._div: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "table" and values.get("id") == "steps-table":
            self.inside = True
        if not self.inside:
            return
        if tag == "th":
            self._cell = ""
        if tag == "td" and "why" in (values.get("class") or ""):
            self._in_why = True
            self.why.append([])
        if tag == "div" and self._in_why:
            self._div = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        if tag == "th" and self._cell is not None:
            self.header.append(self._cell)
            self._cell = None
        if tag == "div" and self._div is not None:
            self.why[-1].append(self._div)
            self._div = None
        if tag == "td":
            self._in_why = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data
        if self._div is not None:
            self._div += data


def test_cli_and_page_print_the_simulators_explanations_word_for_word() -> None:
    runner = CliRunner()
    as_json = runner.invoke(app, ["replicate", str(S1), "--json"])
    document = json.loads(as_json.stdout)
    printed = runner.invoke(app, ["replicate", str(S1)], env={"COLUMNS": "400"}).stdout
    cells = _Cells()
    cells.feed(render_replication(document))
    for position, entry in enumerate(document["timeline"]):
        expected = entry.get("changes", [])
        assert cells.why[position] == expected
        for change in expected:
            assert f"\u21b3 {change}" in printed


def test_cli_and_page_list_replicas_in_the_same_order() -> None:
    runner = CliRunner()
    document = json.loads(runner.invoke(app, ["replicate", str(S1), "--json"]).stdout)
    printed = runner.invoke(app, ["replicate", str(S1)], env={"COLUMNS": "200"}).stdout
    header = next(line for line in printed.splitlines() if "step" in line and "ISR" in line)
    cli_order = re.findall(r"\br(\d+)\b", header)
    cells = _Cells()
    cells.feed(render_replication(document))
    page_order = [
        re.match(r"replica (\d+)", text).group(1)  # type: ignore[union-attr]
        for text in cells.header
        if text.startswith("replica ")
    ]
    assert cli_order == page_order == ["2", "1"]  # the assignment order, leader first


def test_page_says_no_expectations_for_this_mode_when_none_applied(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(
        "name: e\nconfig: {brokers: [1, 2], replicas: [2, 1]}\nsteps:\n  - {produce: m1}\n"
        "  - expect: {acked: []}\n    modes: [pre-0.11]\n"
    )
    document = run_scenario(load_scenario(path), "current").to_json()
    assert document["expectations_checked"] == 0
    page = render_replication(document)
    assert '<td class="text" id="expectations">no expectations for this mode</td>' in page
    assert "all held</span>" not in page.split('id="outcome-table"')[1].split("</table>")[0]
    checked = run_scenario(load_scenario(S1), "pre-0.11").to_json()
    assert checked["expectations_checked"] > 0 and checked["expect_failures"] == []
    assert '<span class="ok">all held</span>' in render_replication(checked)
