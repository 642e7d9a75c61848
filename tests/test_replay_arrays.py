"""The replay's array path (owner arrays, shared generation shapes) gives the rows the object
path gives: every generation scored by ``score_generation`` from TopicPartition objects, groups
built member by member, as the replay did before it worked on arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from generated import generated_traces
from hypothesis import HealthCheck, given, settings
from strategies import groups

from assignors import registry
from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group, Member, PartitionSpace, TopicPartition, rejoin
from assignors.traces.format import Trace
from assignors.traces.job import replay_trace
from assignors.traces.reconcile import (
    ServerSideAssignor,
    is_server_side,
    reconcile_generation,
    with_reconciliation,
)
from assignors.traces.replay import MAX_ROUNDS, prepare, replay_with
from assignors.traces.scoring import ScoreRow, score_generation


def _traces(scenario: str, seed: int, groups: int = 4) -> list[Trace]:
    return generated_traces(scenario, seed, groups=groups)


def _reference_replay(trace: Trace, assignor: object) -> list[ScoreRow]:
    """The replay on objects: groups made with every check, scored by ``score_generation``."""
    rows: list[ScoreRow] = []
    owned: dict[str, tuple[TopicPartition, ...]] = {}
    previous_owner: dict[TopicPartition, str] | None = None
    previous_generation: int | None = None
    previous_identities: frozenset[str] = frozenset()
    previous_timestamp: int | None = None
    protocol: RebalanceProtocol = assignor.rebalance_protocol  # type: ignore[attr-defined]
    server_side = is_server_side(assignor)  # type: ignore[arg-type]
    assign = (
        assignor.target
        if server_side and isinstance(assignor, ServerSideAssignor)
        else assignor.assign  # type: ignore[attr-defined]
    )
    for generation in trace.generations:
        counts = {topic.name: topic.num_partitions for topic in generation.topics}
        members = []
        for member in generation.members:
            before = previous_generation is not None and member.identity in previous_identities
            kept = tuple(
                tp
                for tp in owned.get(member.identity, ())
                if 0 <= tp.partition < counts.get(tp.topic, 0)
            )
            members.append(
                Member(
                    member.member_id,
                    member.topics,
                    kept if before else (),
                    previous_generation if before and previous_generation is not None else -1,
                    member.rack,
                    member.instance_id,
                )
            )
        group = base_group = Group(generation.topics, tuple(members))
        rounds = 0
        while True:
            rounds += 1
            assignment = assign(group)
            if (
                server_side
                or not (protocol == "cooperative" and assignment.withheld)
                or rounds >= MAX_ROUNDS
            ):
                break
            group = rejoin(group, assignment, generation.generation)
        final = assignment.partitions
        interval = (
            None
            if previous_timestamp is None or generation.timestamp_ms is None
            else generation.timestamp_ms - previous_timestamp
        )
        row = score_generation(
            base_group,
            final,
            trace_id=trace.trace_id,
            assignor=assignor.name,  # type: ignore[attr-defined]
            generation=generation.generation,
            previous_owner=previous_owner,
            protocol=protocol,
            rounds=rounds,
            interval_ms=interval,
        )
        if server_side and previous_owner is not None:
            reconciliation = reconcile_generation(
                generation, final, owned, previous_identities, previous_generation
            )
            row = with_reconciliation(row, reconciliation, generation.topics)
        rows.append(row)
        owned = {}
        for member in sorted(generation.members, key=lambda member: member.member_id):
            owned[member.identity] = tuple(final.get(member.member_id, ()))
        previous_owner = {tp: identity for identity, tps in owned.items() for tp in tps}
        previous_generation = generation.generation
        previous_identities = frozenset(member.identity for member in generation.members)
        previous_timestamp = generation.timestamp_ms
    return rows


SCENARIOS = ("mixed", "skewed-weights", "rack-outage", "subscription-change", "flapping")


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_array_replay_scores_every_generation_as_the_object_replay(scenario: str, name: str):
    assignor = registry.get(name)
    for trace in _traces(scenario, seed=3):
        assert replay_with(trace, assignor, timings=False) == _reference_replay(trace, assignor)


@pytest.mark.parametrize("name", ["uniform", "server-range", "load-aware-cooperative"])
def test_array_replay_matches_the_object_replay_for_the_other_assignors(name: str):
    assignor = registry.get(name)
    for trace in _traces("mixed", seed=11, groups=3):
        assert replay_with(trace, assignor, timings=False) == _reference_replay(trace, assignor)


class _AsObjects:
    """Wraps an assignor and hands its answer back as TopicPartition tuples (no owner array),
    in reverse order, as a plugin might."""

    def __init__(self, name: str) -> None:
        self.inner = registry.get(name)
        self.name = name
        self.rebalance_protocol = self.inner.rebalance_protocol

    def assign(self, group: Group) -> Assignment:
        answer = self.inner.assign(group)
        return Assignment(
            {member: tuple(reversed(tps)) for member, tps in answer.partitions.items()},
            answer.withheld,
        )


def test_an_assignment_of_objects_scores_like_the_same_owner_array():
    for trace in _traces("mixed", seed=5, groups=3):
        arrays = replay_with(trace, registry.get("sticky"), timings=False)
        assert replay_with(trace, _AsObjects("sticky"), timings=False) == arrays


class _Broken:
    """Gives every member the partitions of the first topic and partition 99 of a topic nobody
    has, every other generation: an invalid answer the owner arrays cannot hold."""

    name = "broken"
    rebalance_protocol: RebalanceProtocol = "eager"

    def __init__(self) -> None:
        self.calls = 0

    def assign(self, group: Group) -> Assignment:
        self.calls += 1
        first = group.topics[0].name if group.topics else "none"
        given: Mapping[str, Sequence[TopicPartition]] = {
            member.member_id: [TopicPartition(first, 0), TopicPartition("ghost", 99)]
            if self.calls % 2
            else []
            for member in group.members
        }
        return Assignment.build([member.member_id for member in group.members], given)


def test_an_invalid_assignment_is_scored_on_objects_and_the_next_generation_too():
    for trace in _traces("mixed", seed=7, groups=3):
        rows = replay_with(trace, _Broken(), timings=False)
        assert rows == _reference_replay(trace, _Broken())
        if len(rows) > 1:
            assert rows[0].invalid > 0


def test_a_prepared_trace_is_shared_by_the_assignors_of_one_replay(monkeypatch):
    import assignors.traces.job as job

    made: list[str] = []

    def counting(trace: Trace):  # type: ignore[no-untyped-def]
        made.append(trace.trace_id)
        return prepare(trace)

    monkeypatch.setattr(job, "prepare", counting)
    [trace] = _traces("mixed", seed=2, groups=1)
    result = replay_trace(trace, ["range", "roundrobin", "sticky"], timings=False)
    assert made == [trace.trace_id]
    assert [row.assignor for row in result.summary] == ["range", "roundrobin", "sticky"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=groups(owned=True, unknown_topics=True))
def test_claims_are_the_same_from_the_subscription_table_and_the_pair_search(group: Group):
    import assignors.arrays as arrays

    from_table = arrays.GroupArrays.of(group)
    original = arrays._SUBSCRIPTION_TABLE_CELLS
    arrays._SUBSCRIPTION_TABLE_CELLS = 0  # the pair search, as for groups too big for a table
    try:
        searched = arrays.GroupArrays.of(group)
    finally:
        arrays._SUBSCRIPTION_TABLE_CELLS = original
    assert from_table.claimant.tolist() == searched.claimant.tolist()
    assert from_table.contested.tolist() == searched.contested.tolist()
    assert from_table.unsubscribed_owner.tolist() == searched.unsubscribed_owner.tolist()
    assert from_table.objects.tolist() == searched.objects.tolist()


class _ForeignSpace:
    """Answers with an owner array over a space of its own: a topic the group does not have."""

    name = "foreign-space"
    rebalance_protocol: RebalanceProtocol = "eager"

    def __init__(self) -> None:
        self.owned: list[dict[str, tuple[TopicPartition, ...]]] = []

    def assign(self, group: Group) -> Assignment:
        self.owned.append({member.member_id: member.owned_partitions for member in group.members})
        member_ids = tuple(member.member_id for member in group.members)
        owners = np.array([0, -1, 0], dtype=np.int64)
        return Assignment.from_owners(PartitionSpace(("ghost",), (3,)), member_ids, owners)


def test_an_owner_array_over_another_numbering_is_carried_like_objects():
    for trace in _traces("mixed", seed=9, groups=2):
        replayed, reference = _ForeignSpace(), _ForeignSpace()
        rows = replay_with(trace, replayed, timings=False)
        assert rows == _reference_replay(trace, reference)
        assert all(row.unassigned == row.partitions for row in rows)
        # the partition of a topic the group does not have is not carried as owned
        assert replayed.owned == reference.owned
        assert all(not any(owned.values()) for owned in replayed.owned)
