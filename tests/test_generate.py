"""The synthetic trace generator: valid format-v1 traces, reproducible from the seed, each
scenario telling the story its name promises."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from assignors.errors import InputError
from assignors.traces.format import Trace, build_trace, parse_generation
from assignors.traces.generate import SCENARIOS, generate_group, generate_rows


def _traces(rows: list[dict[str, Any]]) -> list[Trace]:
    by_trace = defaultdict(list)
    for line, row in enumerate(rows, 1):
        by_trace[row["trace_id"]].append(parse_generation(row, "generated", line))
    return [build_trace(trace_id, generations) for trace_id, generations in by_trace.items()]


def _story(scenario: str, seed: int = 3, **sizes: Any) -> Trace:
    [trace] = _traces(generate_group(scenario, 0, seed, **sizes))
    return trace


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_gives_valid_traces_within_the_sizes(scenario):
    rows = list(
        generate_rows(scenario, 6, seed=1, members=(3, 7), partitions=(10, 60), max_generations=12)
    )
    traces = _traces(rows)
    assert len(traces) == 6
    for trace in traces:
        first = trace.generations[0]
        assert 3 <= len(first.members) <= 7
        assert 10 <= sum(topic.num_partitions for topic in first.topics) <= 60
        assert 2 <= len(trace.generations) <= 12
        assert [g.generation for g in trace.generations] == list(
            range(1, len(trace.generations) + 1)
        )
        stamps = [g.timestamp_ms for g in trace.generations]
        assert stamps == sorted(stamps)


def test_same_seed_same_rows_and_another_seed_other_rows():
    first = list(generate_rows("mixed", 5, seed=9))
    assert first == list(generate_rows("mixed", 5, seed=9))
    assert first != list(generate_rows("mixed", 5, seed=10))


def test_mixed_draws_several_scenarios():
    kinds = {row["trace_id"].rsplit("-s", 1)[0] for row in generate_rows("mixed", 20, seed=2)}
    assert len(kinds) >= 6 and kinds <= set(SCENARIOS)


def test_dynamic_rolling_restart_replaces_every_member_id():
    trace = _story("rolling-restart", members=(4, 4), max_generations=50)
    before = {m.member_id for m in trace.generations[0].members}
    after = {m.member_id for m in trace.generations[-1].members}
    assert len(trace.generations) == 9 and not before & after
    assert all(m.instance_id is None for g in trace.generations for m in g.members)
    assert [len(g.members) for g in trace.generations[1:3]] == [3, 4]


def test_static_rolling_restart_keeps_instance_ids_under_new_member_ids():
    trace = _story("static-rolling-restart", members=(4, 4), max_generations=50)
    first, last = trace.generations[0], trace.generations[-1]
    assert sorted(m.identity for m in first.members) == sorted(m.identity for m in last.members)
    assert not {m.member_id for m in first.members} & {m.member_id for m in last.members}
    assert all(len(g.members) == 4 for g in trace.generations)


def test_scaling_moves_the_member_count_one_way():
    out = [len(g.members) for g in _story("scale-out", members=(4, 4)).generations]
    down = [len(g.members) for g in _story("scale-in", members=(8, 8)).generations]
    assert out == sorted(out) and out[-1] == 8
    assert down == sorted(down, reverse=True) and down[-1] == 4


def test_crash_loop_and_flapping_differ_in_the_member_id_on_return():
    crash = _story("crash-loop", members=(3, 3))
    flap = _story("flapping", members=(3, 3))
    crash_ids = {m.member_id for g in crash.generations for m in g.members}
    flap_ids = {m.member_id for g in flap.generations for m in g.members}
    assert len(crash_ids) > 4 and len(flap_ids) == 3
    assert [len(g.members) for g in flap.generations[:3]] == [3, 2, 3]


def test_partition_expansion_only_grows_topics():
    trace = _story("partition-expansion", seed=4)
    totals = [sum(t.num_partitions for t in g.topics) for g in trace.generations]
    assert totals == sorted(totals) and totals[-1] > totals[0]


def test_subscription_change_rolls_a_new_topic_in_and_the_oldest_out():
    trace = _story("subscription-change", members=(3, 3), max_generations=50)
    new_topic = trace.generations[1].topics[-1].name
    assert all(
        new_topic in m.topics and "topic-0" not in m.topics for m in trace.generations[-1].members
    )


def test_rack_outage_loses_one_rack_then_gets_it_back():
    trace = _story("rack-outage", members=(6, 6), max_generations=50)
    racks = [{m.rack for m in g.members} for g in trace.generations]
    assert racks[0] == {"az1", "az2", "az3"} and len(racks[1]) == 2 and racks[-1] == racks[0]
    assert all(t.replica_racks is not None for t in trace.generations[0].topics)


def test_skewed_weights_have_a_heavy_tail():
    trace = _story("skewed-weights", partitions=(200, 200))
    weights = sorted(w for t in trace.generations[0].topics for w in t.weights or ())
    assert len(weights) == 200
    assert weights[-1] > 10 * weights[len(weights) // 2]


def test_large_groups_respect_the_generation_budget():
    rows = generate_group(
        "rolling-restart",
        0,
        1,
        members=(2_000, 2_000),
        partitions=(100_000, 100_000),
        max_generations=4,
    )
    assert len(rows) == 4
    assert len(rows[0]["members"]) == 2_000
    assert sum(topic["partitions"] for topic in rows[0]["topics"]) == 100_000


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"scenario": "meteor"}, "scenario"),
        ({"members": (0, 3)}, "members"),
        ({"partitions": (1, 200_000)}, "partitions"),
        ({"max_generations": 0}, "generations"),
    ],
)
def test_bad_parameters_are_input_errors(changes, field):
    arguments = {"scenario": "mixed", "index": 0, "seed": 1, **changes}
    with pytest.raises(InputError) as caught:
        generate_group(**arguments)
    assert caught.value.field == field


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "mixed"])
def test_no_scenario_grows_a_group_past_a_hundred_thousand_partitions(scenario):
    rows = generate_group(
        scenario, 0, 2, members=(3, 3), partitions=(100_000, 100_000), max_generations=5
    )
    assert max(sum(t["partitions"] for t in row["topics"]) for row in rows) == 100_000
