"""Quorum scenario files (examples/quorum): the worked examples run through `ktk replicate`,
the quorum timeline in text, JSON and HTML, and bad files refused with one line, exit 2."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app
from replication.errors import ScenarioError
from replication.kraft.scenario import (
    load_quorum_scenario,
    quorum_scenario_to_dict,
    run_quorum_scenario,
)

QUORUM = EXAMPLES / "quorum"
BUNDLED = sorted(QUORUM.glob("k*.yaml"))
NODES = "{1: controller, 2: controller, 3: controller}"


def invoke(*args: str):
    return CliRunner().invoke(app, ["replicate", *args])


def run_bundled(stem: str):
    result = run_quorum_scenario(load_quorum_scenario(QUORUM / f"{stem}.yaml"))
    assert result.expect_failures == ()
    assert result.expectations_checked >= 1
    return result


def messages(result) -> list[str]:
    return [message for entry in result.timeline for message in entry["messages"]]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_stale_candidate_refused_two_of_three_elect_and_old_leader_truncates():
    result = run_bundled("k1-election-of-the-seeds")
    sent = messages(result)
    assert "PreVote 2->3 refused (epoch 1)" in sent
    assert "Vote 3->2 granted (epoch 2)" in sent
    assert "BeginQuorumEpoch 2->3 epoch 2" in sent
    assert "Fetch 2->1 diverging: truncate to 3 (epoch 1)" in sent
    final = result.document["final"]
    assert (final["leader"], final["epoch"]) == (2, 2)
    assert result.violations == ()


def test_snapshot_written_log_truncated_and_older_snapshot_deleted():
    result = run_bundled("k2-snapshot-and-truncation")
    node = result.timeline[6]["nodes"]["1"]
    assert (node["log_start"], node["snapshot"]) == (4, "4-1")
    assert "1: snapshot 4-1, log start 4" in result.timeline[6]["changes"]
    assert result.timeline[10]["nodes"]["1"]["snapshots"] == [
        "00000000000000000005-00000000000000000001"
    ]


def test_lagging_broker_catches_up_through_fetch_snapshot():
    result = run_bundled("k3-lagging-broker-fetches-snapshot")
    assert "FetchSnapshot 4->1 5-1" in messages(result)
    broker = result.document["final"]["nodes"]["4"]
    assert (broker["log_start"], broker["end_offset"], broker["voter"]) == (5, 6, False)


def test_restart_loads_snapshot_then_local_log_then_fetches():
    result = run_bundled("k4-restart-from-snapshot-and-log")
    restarted = next(entry for entry in result.timeline if entry["op"] == "restart 2")
    assert (restarted["nodes"]["2"]["log_start"], restarted["nodes"]["2"]["end_offset"]) == (3, 4)


def test_returning_voter_with_pre_vote_does_not_disrupt_the_leader():
    result = run_bundled("k5-returning-voter-with-pre-vote")
    assert result.document["final"]["epoch"] == 1
    assert not any(m.startswith("Vote ") for m in messages(result)[10:])


def test_returning_voter_without_pre_vote_deposes_a_working_leader():
    result = run_bundled("k6-returning-voter-without-pre-vote")
    assert [v["invariant"] for v in result.violations] == ["QuorumDisruption"]
    assert result.violations[0]["step"] == 10  # the settle after `rejoin: 3`


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_quorum_scenario_round_trips_and_exits_0(path: Path):
    scenario = load_quorum_scenario(path)
    assert load_quorum_scenario(quorum_scenario_to_dict(scenario)) == replace(scenario, source=None)
    outcome = invoke(str(path))
    assert outcome.exit_code == 0, outcome.output
    assert "expectations: all held" in outcome.stdout


def test_replicate_prints_the_quorum_timeline_with_roles_epochs_and_hw():
    outcome = invoke(str(QUORUM / "k1-election-of-the-seeds.yaml"))
    assert "k1-election-of-the-seeds (quorum, voters [1, 2, 3])" in outcome.stdout
    assert "L e2 4/4" in outcome.stdout
    assert "leader: 2, epoch 2" in outcome.stdout


def test_replicate_json_and_html_show_the_quorum(tmp_path: Path):
    page = tmp_path / "quorum.html"
    outcome = invoke(
        str(QUORUM / "k3-lagging-broker-fetches-snapshot.yaml"), "--json", "--html", str(page)
    )
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.stdout)
    assert document["kind"] == "quorum"
    assert document["timeline"][-1]["nodes"]["4"]["snapshot"] == "5-1"
    html = page.read_text(encoding="utf-8")
    assert 'id="quorum-timeline"' in html and "FetchSnapshot 4-&gt;1 5-1" in html


def test_a_failed_quorum_expectation_exits_1(tmp_path: Path):
    path = write(
        tmp_path,
        f"name: x\nquorum: {{nodes: {NODES}, voters: [1, 2, 3]}}\n"
        "steps: [{elect: 1}, {expect: {leader: 2}}]\n",
    )
    outcome = invoke(str(path))
    assert outcome.exit_code == 1
    assert "step 1: expect.leader: got 1, expected 2" in outcome.output


BAD_FILES = [
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 4]}}\nsteps: []",
        "quorum.voters: unknown voter (got 4)",
    ),
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 3], dynamic_voters: true}}\n"
        "steps: [{elect: 1}, {remove_voter: 7}]",
        "step 1: remove_voter: unknown voter (got 7)",
    ),
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 3]}}\nsteps: [{{crash: 9}}]",
        "step 0: crash: unknown node (got 9)",
    ),
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 3]}}\n"
        "steps: [{elect: 1}, {remove_voter: 3}]",
        "step 1: remove_voter: the voters are static",
    ),
    (
        "quorum: {nodes: {1: controller, 2: controller, 3: controller, 4: controller, "
        "5: controller}, voters: [1, 2, 3], dynamic_voters: true}\n"
        "steps: [{elect: 1}, {propose: {broker: 1}}, {settle: 3}, {add_voter: 4}, "
        "{add_voter: 5}]",
        "step 4: add_voter: the leader refuses: a voter change is pending at offset 2",
    ),
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 3]}}\n"
        "steps: [{elect: 1}, {propose: {broker: 1}}, {snapshot: 1, end_offset: 2}]",
        "step 2: snapshot.end_offset: beyond node 1's high watermark 1",
    ),
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 3]}}\nsteps: [{{elect: 1, at: 3}}]",
        "step 0: at: field not allowed on elect",
    ),
    (
        f"quorum: {{nodes: {NODES}, voters: [1, 2, 3], rules: {{pre_votes: false}}}}\nsteps: []",
        "quorum.rules: unknown rule",
    ),
]


@pytest.mark.parametrize(("body", "expected"), BAD_FILES, ids=lambda v: v[:30])
def test_bad_quorum_scenario_is_one_line_naming_step_and_field_exit_2(
    tmp_path: Path, body: str, expected: str
):
    path = write(tmp_path, f"name: bad\n{body}\n")
    outcome = invoke(str(path))
    assert outcome.exit_code == 2, outcome.output
    assert expected in outcome.output
    assert "Traceback" not in outcome.output
    assert len(outcome.output.strip().splitlines()) == 1


def test_load_error_names_the_file(tmp_path: Path):
    path = write(tmp_path, f"name: bad\nquorum: {{nodes: {NODES}, voters: [1, 2, 4]}}\nsteps: []\n")
    with pytest.raises(ScenarioError) as raised:
        load_quorum_scenario(path)
    assert str(raised.value).startswith(f"{path}: quorum.voters")


def test_mode_option_is_refused_for_a_quorum_scenario():
    outcome = invoke(str(QUORUM / "k1-election-of-the-seeds.yaml"), "--mode", "current")
    assert outcome.exit_code == 2
    assert "--mode" in outcome.output


def test_the_format_example_in_the_docs_runs_and_holds(tmp_path: Path):
    docs = (Path(__file__).resolve().parent.parent / "docs" / "kraft.md").read_text("utf-8")
    example = docs.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = write(tmp_path, example)
    outcome = invoke(str(path))
    assert outcome.exit_code == 0, outcome.output
    assert "expectations: all held" in outcome.stdout


def test_a_broker_that_cannot_fetch_metadata_still_thinks_it_leads():
    result = run_bundled("k8-metadata-lag")
    lagging = result.timeline[7]
    assert lagging["op"] == "expect"
    assert (lagging["nodes"]["4"]["hw"], lagging["nodes"]["5"]["hw"]) == (2, 3)


def test_controller_fences_a_silent_broker_and_a_new_controller_decides_again():
    result = run_bundled("k9-broker-fenced-across-controller-failover")
    decisions = [c for e in result.timeline for c in e["changes"] if c.startswith("controller ")]
    assert decisions == [
        "controller 1 registers broker 4 (broker epoch 1, fenced)",
        "controller 1 registers broker 5 (broker epoch 2, fenced)",
        "controller 1 unfences broker 4",  # its heartbeat shows it applied its registration
        "controller 1 unfences broker 5",
        "controller 1 fences broker 4",
        "controller 1: orders-0 leader 5 epoch 1 isr [5]",
        "controller 1 fences broker 5",  # never committed: node 1 is cut off, then truncated
        "controller 1: orders-0 leader -1 epoch 2 isr [5]",
        "controller 3 fences broker 5",
        "controller 3: orders-0 leader -1 epoch 2 isr [5]",  # the last ISR member stays
    ]
    assert result.timeline[12]["nodes"]["2"]["hw"] == 8


def test_broker_heartbeat_settings_are_checked(tmp_path: Path):
    path = write(
        tmp_path,
        f"name: x\nquorum: {{nodes: {NODES}, voters: [1, 2, 3], "
        "broker_heartbeats: {session_timeout_ms: 0}}\nsteps: []\n",
    )
    outcome = invoke(str(path))
    assert outcome.exit_code == 2
    assert "quorum.broker_heartbeats.session_timeout_ms" in outcome.output


def _node_paths(value, prefix=()):
    found = [prefix]
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found += _node_paths(item, (*prefix, key))
    return found


def test_mutated_scenario_files_run_or_fail_with_one_scenario_error_never_a_crash():
    import copy
    import random

    import yaml

    from ktkbase.errors import InputError
    from replication.kraft.zookeeper import (
        is_zookeeper_document,
        load_zookeeper_scenario,
        run_zookeeper_scenario,
    )

    documents = [yaml.safe_load(p.read_text("utf-8")) for p in sorted(QUORUM.glob("*.yaml"))]
    values = [None, True, 0, -1, 3, 9, 2**40, 1.5, "x", "", "all", "any", [], [1, 9], {},
              {"from": 1, "to": 1}, {"broker": "x"}, {"a": 1}, "1@x:1"]  # fmt: skip
    chooser = random.Random(7)
    for _ in range(400):
        document = copy.deepcopy(chooser.choice(documents))
        path = chooser.choice([p for p in _node_paths(document) if p])
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = copy.deepcopy(chooser.choice(values))
        try:
            if is_zookeeper_document(document):
                run_zookeeper_scenario(load_zookeeper_scenario(document))
            else:
                run_quorum_scenario(load_quorum_scenario(document))
        except InputError:
            pass


def test_an_isr_change_accepted_by_a_cut_off_controller_is_lost_and_asked_again():
    result = run_bundled("k10-isr-change-across-controller-failover")
    decisions = [c for e in result.timeline for c in e["changes"] if c.startswith("controller ")]
    assert decisions == [
        "controller 1 accepts AlterPartition orders-0 isr [4]",  # never committed
        "controller 3 accepts AlterPartition orders-0 isr [4]",
        "controller 3 refuses AlterPartition orders-0 from 4 (leader epoch 0, controller has 1)",
    ]


def test_alter_partition_from_a_broker_that_does_not_lead_is_one_line_exit_2(tmp_path: Path):
    path = write(
        tmp_path,
        "name: x\nquorum: {nodes: {1: controller, 2: controller, 3: controller, 4: broker, "
        "5: broker}, voters: [1, 2, 3]}\nsteps: [{elect: 1}, {propose: {topic: t, partition: 0, "
        "leader: 4, isr: [4, 5], leader_epoch: 0}}, {settle: 3}, "
        "{alter_partition: {by: 5, partition: t-0, isr: [5]}}]\n",
    )
    outcome = invoke(str(path))
    assert outcome.exit_code == 2, outcome.output
    assert "step 3: alter_partition: broker 5 does not lead t-0 (leader 4)" in outcome.output


def test_dynamic_voters_add_one_then_the_leader_removes_itself_and_steps_down():
    result = run_bundled("k11-add-and-remove-voters")
    final = result.document["final"]
    assert final["voters"] == [2, 3, 4]
    assert (final["nodes"]["1"]["voter"], final["nodes"]["4"]["voter"]) == (False, True)
