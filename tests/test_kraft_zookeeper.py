"""The ZooKeeper-era controller beside KRaft: the zombie controller after a session expiry
(examples/quorum/z1, z2) and its KRaft counterpart (k7), and bad ZooKeeper scenario files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app
from replication.kraft.scenario import load_quorum_scenario, run_quorum_scenario
from replication.kraft.zookeeper import ZkCluster, ZkRules

QUORUM = EXAMPLES / "quorum"


def invoke(*args: str):
    return CliRunner().invoke(app, ["replicate", *args])


def run_json(name: str) -> dict:
    outcome = invoke(str(QUORUM / f"{name}.yaml"), "--json")
    assert outcome.exit_code == 0, outcome.output
    return json.loads(outcome.stdout)


def zombie_cluster(rules: ZkRules) -> ZkCluster:
    cluster = ZkCluster(brokers=(1, 2, 3), partitions={"orders-0": (1, 2, 3)}, rules=rules)
    cluster.elect_controller(1)
    cluster.deliver_all()
    cluster.expire_session(1)
    cluster.elect_controller(2)
    return cluster


def test_zombie_controller_before_kafka_6082_diverges_the_brokers_metadata():
    document = run_json("z1-zombie-controller-before-kafka-6082")
    assert sorted({v["invariant"] for v in document["violations"]}) == [
        "MetadataAgreement",
        "StaleControllerApplied",
        "ZkStateFenced",
    ]
    caches = {b: state["cache"]["orders-0"] for b, state in document["final"]["brokers"].items()}
    assert caches == {"1": [3, 1], "2": [1, 0], "3": [3, 1]}


def test_zombie_controller_with_kafka_6082_is_fenced_and_resigns():
    document = run_json("z2-zombie-controller-fenced")
    assert document["violations"] == []
    assert "controller 1 resigns" in document["timeline"][4]["note"]
    assert not document["final"]["brokers"]["1"]["believes_controller"]


def test_without_the_broker_epoch_check_the_new_controller_applies_the_zombies_request():
    cluster = zombie_cluster(ZkRules(broker_epoch_check=False, fence_zk_writes=False))
    cluster.elect_leader(1, "orders-0", 3)
    cluster.deliver(1, 2)
    assert any("broker 2 applied" in v.detail for v in cluster.violations)


def test_a_broker_refuses_a_stale_controller_epoch():
    cluster = zombie_cluster(ZkRules(fence_zk_writes=False))
    cluster.elect_leader(1, "orders-0", 3)
    cluster.deliver(1, 2)
    assert cluster.delivered[-1].endswith("rejected (stale controller epoch, seen 2)")


def test_kraft_counterpart_never_lets_a_broker_act_on_the_zombies_record():
    result = run_quorum_scenario(load_quorum_scenario(QUORUM / "k7-zombie-controller.yaml"))
    assert result.expect_failures == () and result.violations == ()
    # while node 1 is cut off, broker 4 holds its uncommitted record but never applies it
    cut_off = result.timeline[7]["nodes"]
    assert (cut_off["4"]["end_offset"], cut_off["4"]["hw"]) == (3, 2)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            "[{elect_leader: {by: 1, partition: orders-0, leader: 7}}]",
            "step 0: elect_leader.leader",
        ),
        ("[{elect_controller: 1}, {elect_controller: 2}]", "step 1: elect_controller: /controller"),
        (
            "[{elect_leader: {by: 1, partition: orders-0, leader: 2}}]",
            "step 0: elect_leader: broker 1",
        ),
        ("[{crash: 1}]", "step 0: crash"),
    ],
)
def test_bad_zookeeper_scenario_is_one_line_exit_2(tmp_path: Path, steps: str, expected: str):
    path = tmp_path / "zk.yaml"
    path.write_text(
        f"name: bad\nzookeeper: {{brokers: [1, 2, 3], partitions: {{orders-0: [1, 2, 3]}}}}\n"
        f"steps: {steps}\n",
        encoding="utf-8",
    )
    outcome = invoke(str(path))
    assert outcome.exit_code == 2, outcome.output
    assert expected in outcome.output and len(outcome.output.strip().splitlines()) == 1


def test_zookeeper_scenario_page(tmp_path: Path):
    page = tmp_path / "zk.html"
    outcome = invoke(
        str(QUORUM / "z1-zombie-controller-before-kafka-6082.yaml"), "--html", str(page)
    )
    assert outcome.exit_code == 0, outcome.output
    html = page.read_text(encoding="utf-8")
    assert 'id="zookeeper-timeline"' in html and "MetadataAgreement" in html
