"""range and roundrobin give the Java client's partitions, member by member, for every vector."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from assignors.model import Group, Member, Topic
from assignors.protocol.request import Entry, parse_request, run
from assignors.range import RangeAssignor
from assignors.round_robin import RoundRobinAssignor

ASSIGNORS = {"range": RangeAssignor(), "roundrobin": RoundRobinAssignor()}


def _vectors(vectors_dir: Path) -> Iterator[dict]:
    with (vectors_dir / "assignors-java.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _as_sets(assignment: dict[str, list]) -> dict[str, set[tuple[str, int]]]:
    return {member: {(topic, p) for topic, p in tps} for member, tps in assignment.items()}


@pytest.mark.parametrize("assignor_name", sorted(ASSIGNORS))
def test_assignor_matches_java_partitions_for_every_vector(vectors_dir: Path, assignor_name: str):
    assignor = ASSIGNORS[assignor_name]
    total, mismatched = 0, []
    for vector in _vectors(vectors_dir):
        request = vector["request"]
        if request["assignor"] != assignor_name or "java_assignment" not in vector:
            continue
        total += 1
        group = parse_request(request).group
        ours = _as_sets(assignor.assign(group).to_json())
        if ours != _as_sets(vector["java_assignment"]):
            mismatched.append(request["name"])
    assert total > 100, f"only {total} {assignor_name} vectors found"
    assert not mismatched, (
        f"{total - len(mismatched)} of {total} {assignor_name} vectors match Java; "
        f"first mismatches: {mismatched[:5]}"
    )


def _without_racks(group: Group) -> Group:
    return Group(
        topics=tuple(Topic(t.name, t.num_partitions, None, t.weights) for t in group.topics),
        members=tuple(
            Member(m.member_id, m.topics, m.owned_partitions, m.generation, None, m.instance_id)
            for m in group.members
        ),
    )


def test_vectors_exercise_rack_aware_range(vectors_dir: Path):
    """The parity above covers KIP-881: many range vectors come out differently with racks."""
    changed_by_racks = 0
    for vector in _vectors(vectors_dir):
        request = vector["request"]
        if request["assignor"] != "range" or "java_assignment" not in vector:
            continue
        group = parse_request(request).group
        if RangeAssignor().assign(group) != RangeAssignor().assign(_without_racks(group)):
            changed_by_racks += 1
    assert changed_by_racks >= 20, f"only {changed_by_racks} range vectors depend on racks"


def test_requests_java_rejects_are_empty_groups_that_ktk_assigns_empty(vectors_dir: Path):
    failing = [vector for vector in _vectors(vectors_dir) if "java_error" in vector]
    assert failing, "the vectors should hold requests the Java client throws on"
    for vector in failing:
        request = vector["request"]
        assert request["members"] == [], request["name"]
        for assignor_name in ASSIGNORS:
            parsed = parse_request(request, assignor_override=assignor_name)
            result = run(Entry(1, parsed.name, request=parsed))
            assert result == {"name": request["name"], "assignor": assignor_name, "assignment": {}}
