"""What a replay makes once per trace and shares among generations and assignors: topics equal
to an earlier generation's are that same object, and range finds its replica placement of them
by identity, never handing back the placement of other racks; the groups it builds from owner
arrays carry their members' owned partitions as claims, the same ones the members list, none
twice, and the columns they made their members from."""

from __future__ import annotations

import pytest
from generated import generated_traces

from assignors import range as range_assignor
from assignors import registry
from assignors.arrays import GroupArrays, owned_claims
from assignors.model import Group
from assignors.range import RangeAssignor
from assignors.traces import replay
from assignors.traces.format import build_trace, parse_generation
from assignors.traces.replay import prepare, replay_with


def _row(generation: int, topics: list[dict], members: list[str]) -> dict:
    return {
        "trace_id": "g",
        "generation": generation,
        "topics": topics,
        "members": [
            {"member_id": m, "topics": [t["name"] for t in topics], "rack": f"r{i % 2}"}
            for i, m in enumerate(members)
        ],
    }


RACKED = {"name": "a", "partitions": 4, "racks": [["r0"], ["r1"], ["r0"], ["r1"]]}
PLAIN = {"name": "b", "partitions": 3}


def test_prepare_hands_equal_racked_topics_of_later_generations_as_the_same_object() -> None:
    moved = {"name": "a", "partitions": 4, "racks": [["r1"], ["r1"], ["r0"], ["r1"]]}
    rows = [
        _row(1, [RACKED, PLAIN], ["c0", "c1"]),
        _row(2, [RACKED, PLAIN], ["c0", "c1", "c2"]),
        _row(3, [moved, PLAIN], ["c0", "c1", "c2"]),
        _row(4, [RACKED, PLAIN], ["c0", "c1"]),
    ]
    trace = build_trace("g", [parse_generation(row, None, i) for i, row in enumerate(rows, 1)])
    first, second, third, fourth = (step.topic_by_name for step in prepare(trace).steps)
    # parsed apart, equal: one object from the first generation on
    assert trace.generations[0].topics[0] is not trace.generations[1].topics[0]
    assert second["a"] is first["a"] and fourth["a"] is first["a"]
    assert third["a"] is not first["a"]
    assert third["a"].replica_racks == ({"r1"}, {"r1"}, {"r0"}, {"r1"})
    # a topic without replica racks is left as it was read (nothing keeps it by identity)
    assert second["b"] == first["b"] and second["b"] is trace.generations[1].topics[1]


def test_replay_answers_do_not_depend_on_sharing_topics() -> None:
    rows = [_row(g, [RACKED, PLAIN], [f"c{i}" for i in range(1 + g % 3)]) for g in range(1, 7)]
    trace = build_trace("g", [parse_generation(row, None, i) for i, row in enumerate(rows, 1)])
    shared = replay_with(trace, RangeAssignor(), timings=False)
    range_assignor._placement_of.cache_clear()
    range_assignor._rack_placement.cache_clear()
    # each generation alone, as its own trace: nothing shared between generations
    alone = [
        replay_with(build_trace("g", [generation]), RangeAssignor(), timings=False)[0]
        for generation in trace.generations
    ]
    keys = ("max_load", "min_load", "rack_mismatch", "partitions", "members")
    assert [tuple(getattr(r, k) for k in keys) for r in shared] == [
        tuple(getattr(r, k) for k in keys) for r in alone
    ]


def test_range_placement_by_identity_is_the_placement_of_those_racks() -> None:
    lookup = range_assignor._PlacementsByIdentity()
    lookup.KEPT = 2
    a, b = frozenset({"a"}), frozenset({"b"})
    racks = (a, b, b)
    equal = tuple([a, b, b])
    other = (b, b, a)
    assert lookup(racks) is lookup(racks) is range_assignor._rack_placement(racks)
    assert lookup(equal).by_rack == lookup(racks).by_rack
    assert lookup(other).by_rack == {"a": (2,), "b": (0, 1)}
    # full: emptied, and still right
    assert lookup((a,)).by_rack == {"a": (0,)}
    assert len(lookup._by_id) <= 2
    assert lookup(racks).by_rack == {"a": (0,), "b": (1, 2)}


def _traces(scenario: str, seed: int) -> list:
    return generated_traces(scenario, seed, members=(2, 9), partitions=(4, 60), source=None)


def _shared_identity_trace():
    """Members c1 and c2 rejoin with one static identity: both own what it held."""

    def row(generation: int, members: list[tuple[str, str | None]]) -> dict:
        return {
            "trace_id": "shared",
            "generation": generation,
            "topics": [{"name": "a", "partitions": 6}],
            "members": [
                {"member_id": m, "topics": ["a"], **({"instance_id": i} if i else {})}
                for m, i in members
            ],
        }

    rows = [
        row(1, [("c0", None), ("c1", "pod")]),
        row(2, [("c0", None), ("c1", "pod"), ("c2", "pod")]),
        row(3, [("c0", None), ("c3", "pod")]),
    ]
    return build_trace("shared", [parse_generation(r, None, i) for i, r in enumerate(rows, 1)])


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky", "optimal", "load-aware"])
def test_claims_a_replay_hands_with_its_groups_are_the_members_owned_partitions(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Group] = []
    from_owners, rejoin = replay._group_from_owners, replay.rejoin

    def capture(function):
        def wrapped(*arguments):
            group = function(*arguments)
            made.append(group)
            return group

        return wrapped

    monkeypatch.setattr(replay, "_group_from_owners", capture(from_owners))
    monkeypatch.setattr(replay, "rejoin", capture(rejoin))
    traces = [_shared_identity_trace()]
    for scenario, seed in (("mixed", 3), ("static-rolling-restart", 4), ("crash-loop", 5)):
        traces += _traces(scenario, seed)
    for trace in traces:
        replay.replay_with(trace, registry.get(name), timings=False)
    assert any(group.owned_claim_arrays() is not None for group in made)
    assert any(group.member_columns() is not None for group in made)
    for group in made:
        columns = group.member_columns()
        if columns is not None:
            # the columns the group's layout is checked by are its members' own values
            assert columns == tuple(
                tuple(getattr(member, slot) for member in group.members)
                for slot in ("member_id", "topics", "rack", "instance_id")
            )
        space = group.partition_space()
        plain = Group.checked(group.topics, group.members, group._topic_by_name, space)
        given, read = owned_claims(group, space), owned_claims(plain, space)
        assert given.member.tolist() == read.member.tolist()
        assert given.index.tolist() == read.index.tolist()
        cut_from = group.owned_claim_arrays()
        if cut_from is not None:
            assert [part.tolist() for part in cut_from] == [
                read.member.tolist(),
                read.index.tolist(),
            ]
            # no partition claimed twice: GroupArrays resolves them without a count
            assert len(set(read.index.tolist())) == read.index.size
            fast, counted = GroupArrays.of(group), GroupArrays.of(plain)
            for name in ("claimant", "contested", "unsubscribed_owner"):
                assert getattr(fast, name).tolist() == getattr(counted, name).tolist()


def test_prepare_makes_its_objects_with_the_cycle_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from assignors.traces import scoring

    collector_on: list[bool] = []
    shape_of = scoring.GenerationShape.of

    def recording(*args: object, **kwargs: object) -> scoring.GenerationShape:
        collector_on.append(gc.isenabled())
        return shape_of(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(replay.GenerationShape, "of", recording)
    was_on = gc.isenabled()
    gc.enable()
    try:
        prepare(generated_traces("mixed", 1)[0])
        assert collector_on and not any(collector_on)
        assert gc.isenabled()
    finally:
        if not was_on:
            gc.disable()
