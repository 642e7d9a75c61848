"""The replay hands each member what it owned as integer arrays
(:class:`~assignors.model.OwnedPartitions` of the generation's partition space), carried from the
previous generation's owner array and, between a cooperative group's rounds, from the round's
answer: the same partitions the object path gave, and no :class:`TopicPartition` made for them
while the sticky family assigns."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from generated import generated_traces

from assignors import registry
from assignors.base import Assignor
from assignors.model import Assignment, Group, OwnedPartitions, TopicPartition
from assignors.traces.format import Trace, build_trace, parse_generation
from assignors.traces.replay import replay_with


def _traces(scenario: str, seed: int) -> list[Trace]:
    if scenario == "delete":
        return [_deleting_trace()]
    return generated_traces(scenario, seed)


def _deleting_trace() -> Trace:
    """Topic ``b`` is deleted while its subscribers stay: what they held of it is owned by
    nobody after; then generations with the same topics (partitions where they were)."""

    def row(generation: int, topics: dict[str, int], members: list[str]) -> dict[str, object]:
        return {
            "trace_id": "delete",
            "generation": generation,
            "topics": [{"name": name, "partitions": count} for name, count in topics.items()],
            "members": [{"member_id": m, "topics": ["a", "b", "c"]} for m in members],
        }

    rows = [
        row(1, {"a": 6, "b": 3, "c": 2}, ["c0", "c1"]),
        row(2, {"a": 6, "c": 2}, ["c0", "c1", "c2"]),
        row(3, {"a": 6, "c": 2}, ["c0", "c1", "c2"]),
        row(4, {"a": 6, "c": 2}, ["c1", "c2"]),
    ]
    return build_trace("delete", [parse_generation(r, None, i) for i, r in enumerate(rows, 1)])


class _Recording:
    """An assignor that records every group it is given and every answer, and whether the
    group's owned partitions were still unmade as objects once the real assignor answered."""

    def __init__(self, inner: Assignor) -> None:
        self.inner = inner
        self.name = inner.name
        self.rebalance_protocol = inner.rebalance_protocol
        self.calls: list[tuple[Group, Assignment, bool]] = []

    def assign(self, group: Group) -> Assignment:
        answer = self.inner.assign(group)
        unmade = all(
            not member.owned_partitions.is_made
            for member in group.members
            if isinstance(member.owned_partitions, OwnedPartitions)
        )
        self.calls.append((group, answer, unmade))
        return answer


def _cases() -> Iterator[tuple[str, str, int]]:
    for scenario, seed in (
        ("mixed", 3),
        ("partition-expansion", 7),
        ("subscription-change", 9),
        ("rack-outage", 5),
        ("delete", 0),
    ):
        for name in ("sticky", "cooperative-sticky"):
            yield name, scenario, seed


def _existing(group: Group) -> set[TopicPartition]:
    return {
        TopicPartition(topic.name, p) for topic in group.topics for p in range(topic.num_partitions)
    }


@pytest.mark.parametrize(("name", "scenario", "seed"), list(_cases()))
def test_replay_carries_owned_partitions_as_arrays_equal_to_the_previous_answer(
    name: str, scenario: str, seed: int
) -> None:
    rejoins = as_arrays = 0
    for trace in _traces(scenario, seed):
        recording = _Recording(registry.get(name))
        rows = replay_with(trace, recording, timings=False)
        calls = iter(recording.calls)
        previous: tuple[Group, Assignment] | None = None
        for row in rows:
            for round_number in range(row.rounds):
                group, answer, unmade = next(calls)
                assert unmade, "the assignor made TopicPartition objects of owned arrays"
                if previous is None:
                    assert all(member.owned_partitions == () for member in group.members)
                    previous = (group, answer)
                    continue
                before_group, before = previous
                if round_number:  # a rejoin: each member holds what the last round gave it
                    rejoins += 1
                    expected = {m.member_id: before.partitions[m.member_id] for m in group.members}
                else:  # by identity, the greater member id speaking for a shared one
                    by_identity = {}
                    for member in sorted(before_group.members, key=lambda m: m.member_id):
                        by_identity[member.identity] = before.partitions.get(member.member_id, ())
                    exists = _existing(group)
                    expected = {
                        m.member_id: tuple(
                            tp for tp in by_identity.get(m.identity, ()) if tp in exists
                        )
                        for m in group.members
                    }
                for member in group.members:
                    owned = member.owned_partitions
                    if isinstance(owned, OwnedPartitions):
                        assert owned.space is group.partition_space()
                        as_arrays += 1
                    assert owned == expected[member.member_id]
                previous = (group, answer)
        assert next(calls, None) is None
    assert as_arrays > 0
    if name == "cooperative-sticky":
        assert rejoins > 0


def _row(generation: int, subscriptions: dict[str, list[str]]) -> dict[str, object]:
    return {
        "trace_id": "g",
        "generation": generation,
        "topics": [{"name": "t0", "partitions": 2}, {"name": "t1", "partitions": 2}],
        "members": [{"member_id": m, "topics": topics} for m, topics in subscriptions.items()],
    }


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_replay_keeps_owned_partitions_of_a_topic_nobody_subscribes_to_any_more(name: str) -> None:
    both = ["t0", "t1"]
    trace = build_trace(
        "g",
        [
            parse_generation(_row(1, {"a": both, "b": both}), None, 1),
            parse_generation(_row(2, {"a": ["t1"], "b": ["t1"]}), None, 2),
            parse_generation(_row(3, {"a": ["t1"], "b": ["t1"]}), None, 3),
        ],
    )
    recording = _Recording(registry.get(name))
    rows = replay_with(trace, recording, timings=False)
    first = recording.calls[rows[0].rounds - 1][1]
    second = recording.calls[rows[0].rounds][0]
    # t0 left the partition space of generation 2 but still exists: its partitions stay owned
    assert {m.member_id: m.owned_partitions for m in second.members} == dict(first.partitions)
    assert any(tp.topic == "t0" for m in second.members for tp in m.owned_partitions)
    third = recording.calls[rows[0].rounds + rows[1].rounds][0]
    assert all(isinstance(m.owned_partitions, OwnedPartitions) for m in third.members)
