"""The cost model of rebalances (assignors/traces/cost.py, docs/traces.md "Cost model")."""

from __future__ import annotations

import json

import pytest

from assignors.model import Group, Member, Topic, TopicPartition
from assignors.traces.cost import CostModel, group_protocol, pause_seconds, with_cost
from assignors.traces.files import RawRow
from assignors.traces.job import replay_trace_rows
from assignors.traces.scoring import ScoreRow, score_generation

SUBSCRIBED = frozenset({"t"})


def _row(**changes: object) -> ScoreRow:
    row = ScoreRow("g", "x", 2, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 2, 0, 0, 4, 1, None, None)
    return row._replace(**changes)


def test_eager_pauses_every_revoked_partition_for_all_rounds():
    row = with_cost(_row(revoked=4, rounds=2), "eager", CostModel(round_seconds=3.0))
    assert row.paused_partition_seconds == 4 * 2 * 3.0


def test_cooperative_pauses_only_revoked_partitions_for_the_extra_round():
    row = with_cost(_row(revoked=2, rounds=2), "cooperative", CostModel(round_seconds=3.0))
    assert row.paused_partition_seconds == 2 * 1 * 3.0


def test_kip848_pauses_a_moved_partition_one_heartbeat_whatever_the_rounds():
    model = CostModel(heartbeat_seconds=5.0)
    assert with_cost(_row(revoked=3, rounds=4), "consumer", model).paused_partition_seconds == 15.0


def test_nothing_revoked_costs_nothing():
    for protocol in ("eager", "cooperative", "consumer"):
        row = with_cost(_row(revoked=0, revoked_weight=0.0), protocol, CostModel())
        assert row.paused_partition_seconds == 0.0 and row.delayed_weight == 0.0


def test_round_duration_is_bounded_by_the_gap_between_timestamped_generations():
    row = _row(revoked=4, rounds=1, interval_ms=500)
    assert pause_seconds(row, "eager", CostModel(round_seconds=3.0)) == 0.5
    assert pause_seconds(row._replace(interval_ms=60_000), "eager", CostModel()) == 3.0


def test_weights_turn_paused_seconds_into_weight_delayed_and_warmup():
    row = with_cost(
        _row(revoked=2, rounds=2, revoked_weight=30.0, moved_weight=10.0),
        "cooperative",
        CostModel(round_seconds=2.0),
    )
    assert (row.delayed_weight, row.warmup_weight) == (60.0, 10.0)


def test_unweighted_groups_have_null_delay_and_warmup():
    row = with_cost(_row(revoked=2), "eager", CostModel())
    assert row.delayed_weight is None and row.warmup_weight is None


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_cost_model_refuses_non_positive_or_non_finite_durations(bad):
    with pytest.raises(ValueError, match="round_seconds"):
        CostModel(round_seconds=bad)
    with pytest.raises(ValueError, match="heartbeat_seconds"):
        CostModel(heartbeat_seconds=bad)


def test_server_side_assignors_are_charged_as_kip848_consumer_protocol():
    assert group_protocol("uniform", "cooperative") == "consumer"
    assert group_protocol("server-range", "cooperative") == "consumer"
    assert group_protocol("cooperative-sticky", "cooperative") == "cooperative"


def test_score_generation_sums_weights_of_revoked_and_moved_partitions():
    group = Group(
        (Topic("t", 3, weights=(10.0, 20.0, 30.0)),),
        (Member("a", SUBSCRIBED), Member("b", SUBSCRIBED)),
    )
    tps = [TopicPartition("t", p) for p in range(3)]
    row = score_generation(
        group,
        {"a": [tps[0], tps[1]], "b": [tps[2]]},
        trace_id="g",
        assignor="x",
        generation=2,
        previous_owner={tp: "a" for tp in tps},
        protocol="cooperative",
    )
    assert (row.revoked, row.revoked_weight, row.moved_weight) == (1, 30.0, 30.0)


def test_excess_moves_count_against_the_assignors_own_balance_and_never_go_negative():
    # range keeps a 3-1 split in place: moved 0, while optimal balance (2-2) needs one move
    group = Group((Topic("t", 4),), (Member("a", SUBSCRIBED), Member("b", SUBSCRIBED)))
    tps = [TopicPartition("t", p) for p in range(4)]
    previous = {tps[0]: "a", tps[1]: "a", tps[2]: "a", tps[3]: "b"}
    kept = score_generation(
        group,
        {"a": tps[:3], "b": tps[3:]},
        trace_id="g",
        assignor="x",
        generation=2,
        previous_owner=previous,
    )
    assert (kept.moved, kept.min_moved, kept.min_moved_own, kept.excess_moved) == (0, 1, 0, 0)
    churned = score_generation(
        group,
        {"a": [tps[3], tps[2]], "b": [tps[0], tps[1]]},
        trace_id="g",
        assignor="x",
        generation=2,
        previous_owner=previous,
    )
    assert (churned.moved, churned.min_moved_own, churned.excess_moved) == (3, 1, 2)


def test_a_replayed_trace_carries_cost_columns_per_protocol():
    rows = [
        {
            "trace_id": "g",
            "generation": generation,
            "timestamp_ms": 1_000 * generation,
            "topics": [{"name": "t", "partitions": 6}],
            "members": [{"member_id": m, "topics": ["t"]} for m in members],
        }
        for generation, members in ((1, "ab"), (2, "abc"))
    ]
    raw = [
        RawRow("g.jsonl", index + 1, json.loads(json.dumps(row))) for index, row in enumerate(rows)
    ]
    result = replay_trace_rows(
        "g",
        raw,
        ["range", "cooperative-sticky", "uniform"],
        timings=False,
        cost_model=CostModel(round_seconds=3.0, heartbeat_seconds=5.0),
    )
    second = {row.assignor: row for row in result.scores if row.generation == 2}
    # the generations are 1 s apart: a round cannot last longer
    assert second["range"].interval_ms == 1_000
    assert second["range"].paused_partition_seconds == second["range"].revoked * 1.0
    assert second["cooperative-sticky"].paused_partition_seconds == (
        second["cooperative-sticky"].revoked * 1.0
    )
    assert second["uniform"].paused_partition_seconds == second["uniform"].revoked * 5.0
    protocols = {row.assignor: row.protocol for row in result.summary}
    assert protocols == {
        "range": "eager",
        "cooperative-sticky": "cooperative",
        "uniform": "consumer",
    }
