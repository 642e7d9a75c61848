"""Answers kept as arrays: the owner array, the TopicPartition view made on demand, and the
request writer producing from the arrays exactly the text json.dumps gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import groups

from assignors.model import Assignment, Group, PartitionSpace, TopicPartition
from assignors.protocol.request import (
    dumps,
    group_to_request,
    read_requests,
    run,
    run_text,
)
from assignors.registry import get

ARRAY_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


def _owners_from_view(assignment: Assignment, group: Group) -> np.ndarray:
    space = group.partition_space()
    owners = np.full(space.size, -1, dtype=np.int64)
    for index, member in enumerate(group.members):
        for tp in assignment.partitions[member.member_id]:
            owners[space.index(tp)] = index
    return owners


@pytest.mark.parametrize("assignor_name", ARRAY_ASSIGNORS)
@settings(max_examples=60, deadline=None)
@given(group=groups())
def test_array_assignors_answer_with_owner_arrays_matching_their_partition_view(
    assignor_name: str, group: Group
):
    assignment = get(assignor_name).assign(group)
    assert assignment.owners is not None
    assert assignment.member_ids == tuple(member.member_id for member in group.members)
    assert assignment.space == group.partition_space()
    assert np.array_equal(assignment.owners, _owners_from_view(assignment, group))
    withheld = [assignment.space.index(tp) for tp in assignment.withheld]
    assert assignment.withheld_indexes is not None
    assert assignment.withheld_indexes.tolist() == withheld
    assert all(assignment.owners[index] == -1 for index in withheld)
    for partitions in assignment.partitions.values():
        assert list(partitions) == sorted(partitions)


def test_partition_view_of_an_array_answer_is_made_on_first_use_only():
    space = PartitionSpace(("a", "b"), (2, 2))
    assignment = Assignment.from_owners(space, ("c0", "c1"), np.array([0, 1, 1, -1]))
    assert assignment._partitions is None
    view = assignment.partitions
    assert view == {
        "c0": (TopicPartition("a", 0),),
        "c1": (TopicPartition("a", 1), TopicPartition("b", 0)),
    }
    assert assignment.partitions is view
    assert assignment.withheld == ()


def test_assignment_is_immutable():
    assignment = Assignment({"c0": ()})
    with pytest.raises(AttributeError, match="immutable"):
        assignment.owners = np.zeros(1)  # type: ignore[misc]


def test_array_and_object_assignments_compare_by_their_partitions():
    space = PartitionSpace(("a",), (2,))
    arrays = Assignment.from_owners(space, ("c0",), np.array([0, -1]), np.array([1]))
    objects = Assignment({"c0": (TopicPartition("a", 0),)}, (TopicPartition("a", 1),))
    assert arrays == objects
    assert arrays != Assignment({"c0": (TopicPartition("a", 0),)})
    assert "TopicPartition(topic='a', partition=1)" in repr(arrays)


@pytest.mark.parametrize("pretty", [False, True])
@pytest.mark.parametrize("assignor_name", ARRAY_ASSIGNORS)
@settings(max_examples=60, deadline=None)
@given(group=groups(owned=True))
def test_writer_from_arrays_gives_the_bytes_json_dumps_gives(
    assignor_name: str, pretty: bool, group: Group
):
    request = group_to_request(group, assignor_name, name="r")
    [entry] = read_requests(json.dumps(request), source="r.json")
    text, failed = run_text(entry, pretty=pretty)
    assert not failed
    assert text == dumps(run(entry), pretty=pretty)


def test_writer_does_not_build_partition_objects_for_array_answers(monkeypatch):
    made = []
    original = Assignment.from_owners.__func__  # type: ignore[attr-defined]

    def spy(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        assignment = original(cls, *args, **kwargs)
        made.append(assignment)
        return assignment

    monkeypatch.setattr(Assignment, "from_owners", classmethod(spy))
    [entry] = read_requests(
        '{"assignor": "sticky", "topics": [{"name": "t", "partitions": 4}],'
        ' "members": [{"id": "c0", "topics": ["t"]}, {"id": "c1", "topics": ["t"]}]}'
    )
    text, failed = run_text(entry)
    assert not failed
    assert json.loads(text)["assignment"] == {
        "c0": [["t", 0], ["t", 2]],
        "c1": [["t", 1], ["t", 3]],
    }
    [assignment] = made
    assert assignment._partitions is None and assignment._withheld is None


def test_writer_keeps_errors_and_non_ascii_names_as_json_dumps_does():
    text = (
        '{"assignor": "roundrobin", "topics": [{"name": "t\\u00e9\\"", "partitions": 2}],'
        ' "members": [{"id": "\\u00fc", "topics": ["t\\u00e9\\""]}, {"id": "x", "topics": []}]}\n'
        '{"assignor": "range", "topics": [{"name": "t", "partitions": 0}], "members": []}\n'
    )
    for entry in read_requests(text, source="r.jsonl"):
        for pretty in (False, True):
            assert run_text(entry, pretty=pretty) == (
                dumps(run(entry), pretty=pretty),
                "error" in run(entry),
            )


def test_writer_matches_json_dumps_on_every_java_vector_request(vectors_dir: Path):
    lines = (vectors_dir / "assignors-java.jsonl").read_text(encoding="utf-8").splitlines()
    checked = 0
    for line in lines:
        vector = json.loads(line)
        request = vector["request"]
        if request.get("assignor") not in ARRAY_ASSIGNORS:
            continue
        for entry in read_requests(json.dumps(request), source="v.jsonl"):
            assert run_text(entry)[0] == dumps(run(entry))
            checked += 1
    assert checked > 400


@pytest.mark.parametrize("assignor_name", ARRAY_ASSIGNORS)
@settings(max_examples=40, deadline=None)
@given(group=groups(owned=True))
def test_kafka_python_adapter_cuts_array_answers_per_member_and_topic_as_from_objects(
    assignor_name: str, group: Group
):
    from assignors.protocol.kafka_python import _answer_by_topic, _by_topic

    assignment = get(assignor_name).assign(group)
    expected = {member_id: _by_topic(tps) for member_id, tps in assignment.partitions.items()}
    assert _answer_by_topic(assignment) == expected
