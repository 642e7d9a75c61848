"""The optimal assignor reaches the exact references scoring computes (least max load, fewest
moves at it) and, among those, the fewest rack mismatches: checked on every generation of the
bundled and generated traces and against brute force on tiny groups."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence

from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from sticky_checks import valid_claims
from strategies import groups

from assignors import registry
from assignors.model import Group, Member, Topic, TopicPartition
from assignors.optimal import OptimalAssignor, plan_optimal
from assignors.traces.files import read_traces
from assignors.traces.format import build_trace, parse_generation
from assignors.traces.generate import generate_rows
from assignors.traces.replay import replay, replay_with
from assignors.traces.scoring import min_moved, optimal_max_load

TP = TopicPartition


def _previous_owner(group: Group) -> dict[TopicPartition, str]:
    by_id = {member.member_id: member for member in group.members}
    return {tp: by_id[claimant].identity for tp, claimant in valid_claims(group).items()}


def _mismatch(group: Group, partitions: Mapping[str, Sequence[TopicPartition]]) -> int:
    """Partitions on a member whose rack holds none of their replicas (scoring's definition)."""
    mismatched = 0
    for member in group.members:
        for tp in partitions.get(member.member_id, ()):
            topic = group.topic(tp.topic)
            if member.rack is not None and topic is not None and topic.replica_racks is not None:
                mismatched += member.rack not in topic.replica_racks[tp.partition]
    return mismatched


def _score(
    group: Group, partitions: Mapping[str, Sequence[TopicPartition]]
) -> tuple[int, int, int]:
    """(max load, moved, rack mismatches) of a valid assignment."""
    active = [m for m in group.members if any(group.num_partitions(t) > 0 for t in m.topics)]
    max_load = max((len(partitions.get(m.member_id, ())) for m in active), default=0)
    owner = {tp: member for member, tps in partitions.items() for tp in tps}
    moves = sum(1 for tp, claimant in valid_claims(group).items() if owner[tp] != claimant)
    return max_load, moves, _mismatch(group, partitions) if group.has_racks() else 0


def _brute_force_best(group: Group) -> tuple[int, int, int]:
    """The lexicographically least (max load, moved, mismatches) over every valid assignment."""
    partitions = group.subscribed_partitions()
    choices = [[m.member_id for m in group.members if tp.topic in m.topics] for tp in partitions]
    best = None
    for owners in itertools.product(*choices):
        assigned: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp, member_id in zip(partitions, owners, strict=True):
            assigned[member_id].append(tp)
        score = _score(group, assigned)
        best = score if best is None or score < best else best
    return best if best is not None else (0, 0, 0)


def _valid(group: Group, partitions: Mapping[str, Sequence[TopicPartition]]) -> bool:
    members = {m.member_id: m for m in group.members}
    held = [tp for tps in partitions.values() for tp in tps]
    return sorted(held) == sorted(group.subscribed_partitions()) and all(
        tp.topic in members[member_id].topics for member_id, tps in partitions.items() for tp in tps
    )


def test_optimal_equals_the_exact_references_on_every_example_trace_generation():
    traces, failures = read_traces([EXAMPLES / "traces"])
    assert traces and not failures
    checked = 0
    for trace in traces:
        for row in replay(trace, "optimal", timings=False):
            assert (row.unassigned, row.invalid) == (0, 0), row
            assert row.max_load == row.optimal_max_load, row
            assert row.moved == row.min_moved, row
            checked += 1
    assert checked == sum(len(trace.generations) for trace in traces)


def test_optimal_equals_the_exact_references_on_generated_heterogeneous_traces():
    by_trace = defaultdict(list)
    for scenario, seed in (("subscription-change", 3), ("mixed", 11), ("skewed-weights", 2)):
        rows = generate_rows(
            scenario, 6, seed=seed, members=(2, 9), partitions=(4, 80), max_generations=10
        )
        for line, row in enumerate(rows, 1):
            by_trace[row["trace_id"]].append(parse_generation(row, scenario, line))
    assignor = OptimalAssignor()
    checked = 0
    for trace_id, generations in by_trace.items():
        for row in replay_with(build_trace(trace_id, generations), assignor, timings=False):
            assert (row.max_load, row.moved) == (row.optimal_max_load, row.min_moved), row
            checked += 1
    assert checked > 50


def test_optimal_first_generations_have_no_more_rack_mismatches_than_sticky():
    traces, _ = read_traces([EXAMPLES / "traces"])
    for trace in traces:
        optimal_rows = replay(trace, "optimal", timings=False)
        sticky_rows = replay(trace, "sticky", timings=False)
        # generation 1 has no previous owners: both balance from nothing, only racks differ
        first_optimal, first_sticky = optimal_rows[0], sticky_rows[0]
        if first_optimal.rack_mismatch is not None:
            assert first_optimal.rack_mismatch <= first_sticky.rack_mismatch


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(group=groups(max_members=3, max_topics=2, max_partitions=3))
def test_optimal_matches_brute_force_on_tiny_groups(group: Group):
    if len(group.subscribed_partitions()) > 7:
        return
    plan = plan_optimal(group)
    assignment = OptimalAssignor().assign(group)
    assert _valid(group, assignment.partitions)
    reached = _score(group, assignment.partitions)
    assert reached == _brute_force_best(group)
    assert reached[0] == plan.max_load == optimal_max_load(group)
    assert reached[1] == plan.moved == min_moved(group, _previous_owner(group))
    if group.has_racks():
        assert reached[2] == plan.rack_mismatch


def test_optimal_gives_up_only_what_balance_needs():
    sub = frozenset({"a"})
    owned = tuple(TP("a", p) for p in range(6))
    group = Group(
        (Topic("a", 6),),
        (Member("c0", sub, owned, generation=2), Member("c1", sub), Member("c2", sub)),
    )
    assignment = OptimalAssignor().assign(group)
    assert [len(tps) for tps in assignment.partitions.values()] == [2, 2, 2]
    assert set(assignment.partitions["c0"]) < set(owned)


def test_optimal_assigns_around_a_subscribed_topic_without_partitions():
    group = Group(
        (Topic("a", 3), Topic("b", 2), Topic("empty", 0)),
        (Member("c0", frozenset({"a", "empty"})), Member("c1", frozenset({"a", "b"}))),
    )
    assignment = OptimalAssignor().assign(group)
    assert {tp for tps in assignment.partitions.values() for tp in tps} == set(
        group.subscribed_partitions()
    )
    assert max(len(tps) for tps in assignment.partitions.values()) == optimal_max_load(group) == 3


def test_optimal_prefers_a_rack_local_member_for_what_moves():
    racks = (frozenset({"x"}), frozenset({"y"}))
    sub = frozenset({"a"})
    group = Group(
        (Topic("a", 2, replica_racks=racks),),
        (Member("c0", sub, rack="y"), Member("c1", sub, rack="x")),
    )
    assignment = OptimalAssignor().assign(group)
    assert assignment.partitions == {"c0": (TP("a", 1),), "c1": (TP("a", 0),)}
    assert plan_optimal(group).rack_mismatch == 0


def test_optimal_keeps_a_local_partition_rather_than_a_remote_one_when_one_must_go():
    racks = (frozenset({"x"}), frozenset({"y"}))
    sub = frozenset({"a"})
    group = Group(
        (Topic("a", 2, replica_racks=racks),),
        (
            Member("c0", sub, (TP("a", 0), TP("a", 1)), generation=1, rack="y"),
            Member("c1", sub, rack="x"),
        ),
    )
    plan = plan_optimal(group)
    assert (plan.max_load, plan.moved, plan.rack_mismatch) == (1, 1, 0)
    assert OptimalAssignor().assign(group).partitions["c0"] == (TP("a", 1),)


def test_optimal_deals_heavy_partitions_to_the_lightest_members_among_equal_counts():
    sub = frozenset({"a"})
    topic = Topic("a", 4, weights=(9.0, 1.0, 8.0, 2.0))
    group = Group((topic,), (Member("c0", sub), Member("c1", sub)))
    assignment = OptimalAssignor().assign(group)
    loads = sorted(
        sum(topic.weights[tp.partition] for tp in tps)  # type: ignore[index]
        for tps in assignment.partitions.values()
    )
    assert loads == [10.0, 10.0]


def test_optimal_is_registered_and_eager():
    assignor = registry.get("optimal")
    assert (assignor.name, assignor.rebalance_protocol) == ("optimal", "eager")
