"""KIP-848 reconciliation (assignors.traces.reconcile) against the group coordinator's own tests.

The ``next_member_state`` cases are Kafka's ``CurrentAssignmentBuilderTest`` (group-coordinator,
``modern/consumer``, apache/kafka 1eb7644349cb07139d6a3c1ad1986979647cac99), one test each, with
topic ids as topic names: ``HELD`` is ``withCurrentPartitionEpoch((t, p) -> 10)`` (every
partition has an owner), ``FREE`` is ``-1``, and ``owned=None`` a heartbeat without owned
partitions. Then the worked example of docs/traces.md, hand-computed, through ``reconcile`` and
through replay of a recorded consumer-protocol trace, and the KIP-848 importer fixture replayed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.model import TopicPartition
from assignors.traces.cost import CostModel, with_costs
from assignors.traces.format import build_trace, parse_generation
from assignors.traces.importers.dump_log import import_dump_log
from assignors.traces.job import replay_trace
from assignors.traces.reconcile import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    MemberState,
    next_member_state,
    reconcile,
)
from assignors.traces.replay import recorded_protocol, replay, replay_recorded
from assignors.traces.verdict import build_verdict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def tps(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


def both(first: tuple[int, ...], second: tuple[int, ...]) -> frozenset[TopicPartition]:
    return tps("t1", *first) | tps("t2", *second)


class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


HELD = _Everything()
FREE: frozenset[TopicPartition] = frozenset()


def member(state: str, epoch: int, previous: int, assigned, pending=frozenset()) -> MemberState:
    return MemberState(state, epoch, previous, frozenset(assigned), frozenset(pending))  # type: ignore[arg-type]


# --- CurrentAssignmentBuilderTest ---------------------------------------------------------


def test_stable_to_stable() -> None:
    start = member(STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    after = next_member_state(start, 11, both((1, 2, 3), (4, 5, 6)), HELD, None)
    assert after == member(STABLE, 11, 10, both((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_partitions() -> None:
    start = member(STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    after = next_member_state(start, 11, both((1, 2, 3, 4), (4, 5, 6, 7)), FREE, None)
    assert after == member(STABLE, 11, 10, both((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions() -> None:
    start = member(STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    after = next_member_state(start, 11, both((2, 3, 4), (5, 6, 7)), FREE, None)
    assert after == member(UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))


def test_stable_to_unreleased_partitions() -> None:
    start = member(STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    after = next_member_state(start, 11, both((1, 2, 3, 4), (4, 5, 6, 7)), HELD, None)
    assert after == member(UNRELEASED_PARTITIONS, 11, 10, both((1, 2, 3), (4, 5, 6)))


def test_stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_ones() -> None:
    start = member(STABLE, 10, 10, both((1, 2, 3), (4, 5, 6)))
    held_in_t2 = tps("t2", *range(10))
    after = next_member_state(start, 11, both((1, 2, 3), (4, 5, 7)), held_in_t2, ())
    assert after == member(UNRELEASED_PARTITIONS, 11, 10, both((1, 2, 3), (4, 5)))


def test_unrevoked_partitions_to_stable() -> None:
    start = member(UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))
    after = next_member_state(start, 11, both((2, 3), (5, 6)), FREE, both((2, 3), (5, 6)))
    assert after == member(STABLE, 11, 10, both((2, 3), (5, 6)))


def test_remains_in_unrevoked_partitions() -> None:
    start = member(UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))
    target = both((3,), (6,))
    for owned in (None, both((1, 2, 3), (5, 6)), both((2, 3), (4, 5, 6))):
        assert next_member_state(start, 12, target, FREE, owned) == start


def test_unrevoked_partitions_to_unrevoked_partitions() -> None:
    start = member(UNREVOKED_PARTITIONS, 10, 10, both((2, 3), (5, 6)), both((1,), (4,)))
    after = next_member_state(start, 12, both((3,), (6,)), FREE, both((2, 3), (5, 6)))
    assert after == member(UNREVOKED_PARTITIONS, 11, 10, both((3,), (6,)), both((2,), (5,)))


def test_unrevoked_partitions_to_unreleased_partitions() -> None:
    start = member(UNREVOKED_PARTITIONS, 11, 10, both((2, 3), (5, 6)))
    after = next_member_state(start, 11, both((2, 3, 4), (5, 6, 7)), HELD, both((2, 3), (5, 6)))
    assert after == member(UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable() -> None:
    start = member(UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    after = next_member_state(start, 12, both((2, 3), (5, 6)), HELD, None)
    assert after == member(STABLE, 12, 11, both((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable_with_new_partitions() -> None:
    start = member(UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    after = next_member_state(start, 11, both((2, 3, 4), (5, 6, 7)), FREE, None)
    assert after == member(STABLE, 11, 11, both((2, 3, 4), (5, 6, 7)))


def test_unreleased_partitions_to_unreleased_partitions() -> None:
    start = member(UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    assert next_member_state(start, 11, both((2, 3, 4), (5, 6, 7)), HELD, None) == start


def test_unreleased_partitions_to_unrevoked_partitions() -> None:
    start = member(UNRELEASED_PARTITIONS, 11, 11, both((2, 3), (5, 6)))
    after = next_member_state(start, 12, both((3,), (6,)), HELD, None)
    assert after == member(UNREVOKED_PARTITIONS, 11, 11, both((3,), (6,)), both((2,), (5,)))


# --- the worked example: a, b, c on t (6 partitions); c leaves, d joins -----------------------

T = [TopicPartition("t", p) for p in range(6)]


def test_worked_example_heartbeats_intervals_and_paused_partitions_by_hand() -> None:
    result = reconcile(
        epoch=2,
        previous={"a": T[0:2], "b": T[2:5]},
        target={"a": T[0:2], "b": T[2:4], "d": T[4:6]},
    )
    # a: tick 1 -> STABLE at epoch 2
    # b: tick 1 -> UNREVOKED (t-4); its acknowledgement at tick 1 -> STABLE
    # d: join (tick 0) takes t-5 -> UNRELEASED; ack (tick 0); tick 1 still waits; tick 2 takes t-4
    assert [(m.member_id, m.heartbeats, m.intervals) for m in result.members] == [
        ("a", 1, 1),
        ("b", 2, 1),
        ("d", 4, 2),
    ]
    assert result.members[1].states == (UNREVOKED_PARTITIONS, STABLE)
    assert [(p.partition, p.revoked_by, p.assigned_to, p.revoked_at, p.assigned_at)
            for p in result.pauses] == [(T[4], "b", "d", 1, 2)]  # fmt: skip
    assert (result.heartbeats, result.intervals, result.paused_intervals) == (4, 2, 1)


def _row(generation: int, assigned: dict[str, list[int]], weights: list[float] | None = None):
    topic: dict[str, Any] = {"name": "t", "partitions": 6}
    if weights is not None:
        topic["weights"] = weights
    return {
        "trace_id": "g",
        "generation": generation,
        "protocol": "uniform",
        "group_protocol": "consumer",
        "topics": [topic],
        "members": [
            {"member_id": m, "topics": ["t"], "assigned": [["t", p] for p in ps]}
            for m, ps in assigned.items()
        ],
    }


def _worked_trace(weights: list[float] | None = None):
    first = _row(1, {"a": [0, 1], "b": [2, 3, 4], "c": [5]}, weights)
    second = _row(2, {"a": [0, 1], "b": [2, 3], "d": [4, 5]}, weights)
    return build_trace(
        "g", [parse_generation(first, "g.jsonl", 1), parse_generation(second, "g.jsonl", 2)]
    )


def test_recorded_consumer_protocol_trace_is_costed_by_reconciliation() -> None:
    trace = _worked_trace()
    assert recorded_protocol(trace) == "consumer"
    first, second = with_costs(replay_recorded(trace), "consumer", CostModel(heartbeat_seconds=2.0))
    assert first.reconcile_heartbeats is None and first.paused_partition_seconds == 0.0
    assert (second.revoked, second.moved, second.forced) == (1, 1, 1)
    assert (second.reconcile_heartbeats, second.reconcile_intervals) == (4, 2)
    assert second.paused_intervals == 1
    assert second.paused_partition_seconds == 2.0  # t-4, one interval of 2 s
    assert second.reconcile_seconds == 4.0


def test_weighted_pause_is_the_paused_partitions_weight_times_its_pause() -> None:
    trace = _worked_trace(weights=[1.0, 1.0, 1.0, 1.0, 7.5, 3.0])
    second = with_costs(replay_recorded(trace), "consumer", CostModel())[1]
    assert second.paused_weight_intervals == 7.5
    assert second.delayed_weight == 7.5 * 5.0


def test_consumer_groups_are_labelled_from_the_trace_in_summary_and_verdict() -> None:
    result = replay_trace(_worked_trace(), ["recorded", "range"], timings=False)
    protocols = {row.assignor: row.protocol for row in result.summary}
    assert protocols == {"recorded": "consumer", "range": "eager"}
    recorded = next(row for row in result.summary if row.assignor == "recorded")
    assert (recorded.max_reconcile_heartbeats, recorded.max_reconcile_seconds) == (4, 10.0)
    verdict = build_verdict(result.summary, CostModel().describe())
    labels = {entry["assignor"]: entry["protocol_label"] for entry in verdict["assignors"]}
    assert labels == {"recorded": "consumer (KIP-848)", "range": "eager"}
    reconciled = {entry["assignor"]: entry["reconcile"] for entry in verdict["assignors"]}
    assert reconciled == {"recorded": {"max_heartbeats": 4, "max_seconds": 10.0}, "range": None}


def test_classic_trace_without_group_protocol_is_not_reconciled() -> None:
    rows = [
        dict(_row(g, a))
        for g, a in ((1, {"a": [0, 1, 2], "b": [3, 4, 5]}), (2, {"a": [0, 1, 2, 3, 4, 5]}))
    ]
    for row in rows:
        del row["group_protocol"]
    trace = build_trace("g", [parse_generation(row, "g.jsonl", i) for i, row in enumerate(rows, 1)])
    assert recorded_protocol(trace) == "eager"
    assert all(row.reconcile_heartbeats is None for row in replay_recorded(trace))


def test_group_protocol_other_than_classic_or_consumer_names_the_field() -> None:
    row = _row(1, {"a": [0]})
    row["group_protocol"] = "share"
    with pytest.raises(
        Exception,
        match=r"g.jsonl:3: trace g: group_protocol: must be one of classic, consumer or null "
        r"\(got 'share'\)",
    ):
        parse_generation(row, "g.jsonl", 3)


def test_server_side_assignors_replay_one_target_and_reconcile() -> None:
    trace = _worked_trace()
    for name in ("uniform", "server-range"):
        first, second = with_costs(replay(trace, name, timings=False), "consumer", CostModel())
        assert (first.rounds, second.rounds) == (1, 1)
        assert (second.unassigned, second.invalid) == (0, 0)
        assert second.reconcile_heartbeats is not None and second.reconcile_intervals is not None
        assert second.paused_partition_seconds == second.paused_intervals * 5.0


def test_cooperative_assignor_on_a_consumer_trace_keeps_its_own_protocol() -> None:
    rows = replay(_worked_trace(), "cooperative-sticky", timings=False)
    assert all(row.reconcile_heartbeats is None for row in rows)


# --- a recorded KIP-848 trace from the importer fixtures ---------------------------------------


def test_kip848_importer_fixture_replays_with_reconciliation() -> None:
    path = EXAMPLES / "importers" / "dump-log.txt"
    rows = [
        row
        for row in import_dump_log([(str(path), path.read_text(encoding="utf-8"))]).rows
        if row["trace_id"] == "orders-848"
    ]
    assert {row["group_protocol"] for row in rows} == {"consumer"}
    trace = build_trace(
        "orders-848", [parse_generation(r, str(path), i) for i, r in enumerate(rows, 1)]
    )
    assert recorded_protocol(trace) == "consumer"
    costed = with_costs(replay_recorded(trace), "consumer", CostModel())
    by_epoch = {row.generation: row for row in costed}
    # epoch 2: a member joins; the first revokes orders-2 and -3 at tick 1, the joiner takes
    # them at tick 2 (its join, tick 1, tick 2): 2 partitions paused for one interval each
    second = by_epoch[2]
    assert (second.reconcile_heartbeats, second.reconcile_intervals, second.paused_intervals) == (
        3,
        2,
        2,
    )
    assert second.paused_partition_seconds == 10.0
    # epoch 3: the first member left; the other takes everything at its next heartbeat, and
    # partitions of a member that left are not charged
    third = by_epoch[3]
    assert (third.reconcile_heartbeats, third.reconcile_intervals, third.paused_intervals) == (
        1,
        1,
        0,
    )
    assert third.forced == 3 and third.paused_partition_seconds == 0.0


def test_dashboard_labels_a_recorded_kip848_group_from_its_results(tmp_path: Path) -> None:
    from assignors.traces.results import write_results
    from dashboards.rebalance.page import render_rebalance
    from dashboards.rebalance.reading import read_results

    result = replay_trace(_worked_trace(), ["recorded", "range"], timings=False)
    write_results(tmp_path / "r", result.scores, [], result.summary)
    html = render_rebalance(read_results(tmp_path / "r"))
    assert "consumer (KIP-848)" in html


def test_group_protocol_survives_jsonl_rows_and_parquet(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from assignors.traces.format import generation_to_row, traces_table

    generation = _worked_trace().generations[0]
    row = generation_to_row(generation)
    assert row["group_protocol"] == "consumer"
    pq.write_table(traces_table([row]), tmp_path / "t.parquet")
    [read] = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert parse_generation(read, "t.parquet", 1).group_protocol == "consumer"


def test_kip848_coordinator_log_rows_say_consumer_and_classic_ones_do_not() -> None:
    from assignors.traces.importers.common import parse_topics_file
    from assignors.traces.importers.coordinator_log import import_coordinator_log

    directory = EXAMPLES / "importers"
    catalog = parse_topics_file((directory / "topics.json").read_text(encoding="utf-8"), "t.json")
    path = directory / "coordinator-kip848.log"
    rows = import_coordinator_log([(str(path), path.read_text(encoding="utf-8"))], catalog).rows
    protocols = {row["trace_id"]: row.get("group_protocol") for row in rows}
    assert set(protocols.values()) == {None, "consumer"}


def test_a_plugin_declaring_the_consumer_protocol_is_reconciled_and_labelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assignors.model import Assignment, Group
    from assignors.traces import job
    from assignors.uniform import UniformAssignor

    class Plugin:
        """A third-party server-side assignor: the coordinator's uniform target."""

        name = "my-server-side"
        rebalance_protocol = "cooperative"
        group_protocol = "consumer"

        def assign(self, group: Group) -> Assignment:
            return UniformAssignor().assign(group)

        def target(self, group: Group) -> Assignment:
            return UniformAssignor().target(group)

    # the job's per-process assignor cache stands in for an installed entry point
    monkeypatch.setitem(job._assignors, "my-server-side", Plugin())
    result = replay_trace(_worked_trace(), ["my-server-side"], timings=False)
    assert [row.protocol for row in result.summary] == ["consumer"]
    assert result.scores[1].reconcile_heartbeats is not None


# --- properties over random groups -----------------------------------------------------------


@st.composite
def epochs(
    draw: st.DrawFn,
) -> tuple[dict[str, list[TopicPartition]], dict[str, list[TopicPartition]]]:
    """(previous, target): partitions t-0..P-1 dealt at random to old members (some of whom
    leave) and again to the new membership (survivors plus joiners; some partitions to nobody)."""
    count = draw(st.integers(0, 30))
    partitions = [TopicPartition("t", p) for p in range(count)]
    old = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    survivors = [m for m in old if draw(st.booleans())]
    joiners = [f"j{i}" for i in range(draw(st.integers(0 if survivors else 1, 3)))]
    members = survivors + joiners
    before = {m: [] for m in old}
    after: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp in partitions:
        before[draw(st.sampled_from(old))].append(tp)
        holder = draw(st.sampled_from([*members, None]))
        if holder is not None:
            after[holder].append(tp)
    return {m: before[m] for m in survivors}, after


@settings(max_examples=300, deadline=None)
@given(epochs())
def test_every_member_reaches_its_target_within_two_intervals(epoch) -> None:
    previous, target = epoch
    result = reconcile(epoch=5, previous=previous, target=target)
    assert [m.member_id for m in result.members] == sorted(target)
    assert all(m.states[-1] == STABLE and m.heartbeats >= 1 for m in result.members)
    assert result.intervals <= 2
    owner_before = {tp: m for m, tps in previous.items() for tp in tps}
    owner_after = {tp: m for m, tps in target.items() for tp in tps}
    handed = {tp for tp, owner in owner_before.items() if owner_after.get(tp) not in (None, owner)}
    # exactly the partitions one survivor gave to another member pause, each at most a tick
    assert {pause.partition for pause in result.pauses} == handed
    assert all(0 <= pause.intervals <= 1 for pause in result.pauses)
    assert all(
        (pause.revoked_by, pause.assigned_to)
        == (owner_before[pause.partition], owner_after[pause.partition])
        for pause in result.pauses
    )
