"""uniform and server-range against the Kafka group coordinator's own classes.

``tests/data/kip848-java.jsonl`` holds random requests (homogeneous and heterogeneous groups,
with and without a current assignment, with and without racks) and the assignment Kafka's
``UniformAssignor`` / server ``RangeAssignor`` gave for each, recorded with the oracle harness
(shared/tools/java-oracle) at apache/kafka 1eb7644349cb07139d6a3c1ad1986979647cac99. Its first
line says how it was produced. ktk must give the same partitions member by member: uniform when
iterating in the harness's ``HashMap`` orders (:mod:`kip848_java`), server-range as it is.

With ``KTK_JAVA_ORACLE=BUILD/classes`` (a built harness) and ``java`` on the path, the live
test also runs fresh random requests through the harness. To record the vectors again:

    python tests/test_kip848_parity_java.py --oracle BUILD/classes  # writes tests/data/
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data" / "kip848-java.jsonl"
KAFKA_COMMIT = "1eb7644349cb07139d6a3c1ad1986979647cac99"
VECTOR_SEED = 20241025
SHAPES = ("small", "medium", "large")


def random_request(rng: random.Random, assignor: str, name: str, shape: str) -> dict[str, Any]:
    """One random group: topics (some empty), members with a shared or a random subscription
    (sometimes naming a topic that does not exist), maybe a previous assignment with one owner
    per partition (sometimes naming a partition that no longer exists), maybe racks."""
    max_topics, max_partitions, max_members = {
        "small": (4, 8, 5),
        "medium": (8, 24, 14),
        "large": (12, 60, 40),
    }[shape]
    topics: list[dict[str, Any]] = [
        {"name": f"t{i}", "partitions": rng.randint(0, max_partitions)}
        for i in range(rng.randint(1, max_topics))
    ]
    racked = rng.random() < 0.25
    if racked:
        for topic in topics:
            topic["racks"] = [
                sorted(rng.sample(["r0", "r1", "r2"], rng.randint(1, 2)))
                for _ in range(topic["partitions"])
            ]
    names = [topic["name"] for topic in topics] + (["gone"] if rng.random() < 0.2 else [])
    homogeneous = rng.random() < 0.5
    shared = sorted(rng.sample(names, rng.randint(1, len(names))))
    members: list[dict[str, Any]] = []
    for index in range(rng.randint(1, max_members)):
        member: dict[str, Any] = {
            "id": f"m{rng.randint(0, 999):03d}-{index}",
            "topics": shared
            if homogeneous
            else sorted(rng.sample(names, rng.randint(0, len(names)))),
        }
        if racked:
            member["rack"] = rng.choice(["r0", "r1", "r2"])
        if assignor == "server-range" and rng.random() < 0.3:
            member["instance_id"] = f"pod-{index}"
        members.append(member)
    if rng.random() < 0.6:
        for topic in topics:
            for partition in range(topic["partitions"] + (1 if rng.random() < 0.1 else 0)):
                if rng.random() < 0.75:
                    holder = rng.choice(members)
                    holder.setdefault("owned", []).append([topic["name"], partition])
        for member in members:
            if "owned" in member:
                rng.shuffle(member["owned"])
                member["generation"] = 1
    return {"name": name, "assignor": assignor, "topics": topics, "members": members}


def random_requests(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    requests = []
    for index in range(count):
        assignor = "uniform" if index % 4 else "server-range"
        shape = SHAPES[index % 3]
        requests.append(random_request(rng, assignor, f"kip848-{seed}-{index}", shape))
    return requests


def java_answers(oracle: str, requests: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The harness's answer to each request (one ``java`` process for all of them)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        for request in requests:
            handle.write(json.dumps(request) + "\n")
        path = handle.name
    try:
        done = subprocess.run(
            ["java", "-cp", oracle, "Harness", "assign", path],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(path)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def ktk_answer(request: dict[str, Any]) -> dict[str, list[list[object]]]:
    from kip848_java import harness_order
    from sticky_checks import group_from_request

    from assignors.server_range import plan_server_range
    from assignors.uniform import assignment_of, plan_uniform

    group = group_from_request(request)
    if request["assignor"] == "uniform":
        # the harness picks the builder on the members' existing topics, the coordinator on
        # topic names; the requests are replayed with the harness's choice
        known = {topic["name"] for topic in request["topics"]}
        same = len({frozenset(m["topics"]) & known for m in request["members"]}) <= 1
        kind = "homogeneous" if same else "heterogeneous"
        plan = plan_uniform(group, harness_order(request), subscription_type=kind)
    else:
        plan = plan_server_range(group)
    assignment = assignment_of(plan)  # the coordinator's target: nothing withheld
    return {m: [list(tp) for tp in tps] for m, tps in assignment.partitions.items()}


def _rows() -> list[dict[str, Any]]:
    if not DATA.is_file():
        return []
    with DATA.open(encoding="utf-8") as lines:
        return [row for row in map(json.loads, lines) if "request" in row]


def test_vectors_file_names_its_kafka_commit() -> None:
    header = json.loads(DATA.read_text(encoding="utf-8").splitlines()[0])["header"]
    assert header["kafka_commit"] == KAFKA_COMMIT
    assert header["cases"] == len(_rows()) >= 200


def test_vectors_cover_both_assignors_shapes_owners_and_racks() -> None:
    rows = _rows()
    requests = [row["request"] for row in rows]
    assert {r["assignor"] for r in requests} == {"uniform", "server-range"}
    uniform = [r for r in requests if r["assignor"] == "uniform"]
    same = [len({tuple(m["topics"]) for m in r["members"]}) == 1 for r in uniform]
    assert any(same) and not all(same)
    assert any(any("owned" in m for m in r["members"]) for r in uniform)
    assert any(any("racks" in t for t in r["topics"]) for r in uniform)


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row["request"]["name"])
def test_ktk_gives_the_coordinators_partitions(row: dict[str, Any]) -> None:
    assert ktk_answer(row["request"]) == row["java_assignment"]


@pytest.mark.skipif(
    not os.environ.get("KTK_JAVA_ORACLE") or shutil.which("java") is None,
    reason="set KTK_JAVA_ORACLE to the oracle harness classes to run Java live",
)
def test_ktk_gives_the_coordinators_partitions_live() -> None:
    requests = random_requests(seed=random.randrange(1 << 30), count=150)
    answers = java_answers(os.environ["KTK_JAVA_ORACLE"], requests)
    for request, answer in zip(requests, answers, strict=True):
        assert "error" not in answer, answer
        assert ktk_answer(request) == answer["assignment"], json.dumps(request)


def main() -> None:
    parser = argparse.ArgumentParser(description="record tests/data/kip848-java.jsonl")
    parser.add_argument("--oracle", required=True, help="the harness classes directory")
    parser.add_argument("--out", default=str(DATA))
    parser.add_argument("--count", type=int, default=200)
    arguments = parser.parse_args()
    requests = random_requests(VECTOR_SEED, arguments.count)
    answers = java_answers(arguments.oracle, requests)
    header = {
        "header": {
            "what": "random KIP-848 requests and the Kafka group coordinator's answers",
            "kafka_commit": KAFKA_COMMIT,
            "classes": "UniformAssignor, server RangeAssignor through the oracle harness "
            "(shared/tools/java-oracle, Harness assign)",
            "produced_by": "python tests/test_kip848_parity_java.py --oracle BUILD/classes",
            "seed": VECTOR_SEED,
            "cases": len(requests),
        }
    }
    with open(arguments.out, "w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for request, answer in zip(requests, answers, strict=True):
            if "error" in answer:
                raise SystemExit(f"{request['name']}: Java failed: {answer['error']}")
            out.write(json.dumps({"request": request, "java_assignment": answer["assignment"]}))
            out.write("\n")


if __name__ == "__main__":
    import sys

    sys.path[:0] = [
        str(Path(__file__).resolve().parent),
        str(Path(__file__).resolve().parent.parent),
    ]
    main()
