"""Replay semantics (spec/traces.md): owned partitions carried by identity from the assignor's own
output, generations, cooperative rounds, revocations, and the `recorded` pseudo-assignor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group, TopicPartition
from assignors.traces.format import Trace, build_trace, parse_generation
from assignors.traces.replay import MAX_ROUNDS, RECORDED, replay, replay_assignors, replay_with


def _member(member_id: str, topics=("t",), instance_id=None, assigned=None) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    member: dict[str, Any] = {
        "member_id": member_id,
        "instance_id": instance_id,
        "topics": list(topics),
    }
    if assigned is not None:
        member["assigned"] = [list(pair) for pair in assigned]
    return member


def _trace(
    *generations: tuple[int, list[dict[str, Any]]], partitions: int = 4, protocol=None
) -> Trace:  # type: ignore[no-untyped-def]
    rows = []
    for number, members in generations:
        row: dict[str, Any] = {
            "trace_id": "g",
            "generation": number,
            "topics": [{"name": "t", "partitions": partitions}],
            "members": members,
        }
        if protocol is not None:
            row["protocol"] = protocol
        rows.append(row)
    return build_trace(
        "g", [parse_generation(row, "g.jsonl", line) for line, row in enumerate(rows, 1)]
    )


def _round_robin(group: Group) -> dict[str, list[TopicPartition]]:
    """Subscribed partitions dealt to members in member-id order."""
    target: dict[str, list[TopicPartition]] = {m.member_id: [] for m in group.members}
    ids = [m.member_id for m in group.members]
    for position, tp in enumerate(group.subscribed_partitions()):
        target[ids[position % len(ids)]].append(tp)
    return target


@dataclass
class Recording:
    """Deals partitions round-robin and remembers every group it was asked about."""

    name: str = "recording"
    rebalance_protocol: RebalanceProtocol = "eager"
    seen: list[Group] = field(default_factory=list)

    def assign(self, group: Group) -> Assignment:
        self.seen.append(group)
        return Assignment.build([m.member_id for m in group.members], _round_robin(group))


@dataclass
class CooperativeDealer:
    """Deals round-robin, but withholds any partition a present member still owns and that
    should go elsewhere (as KIP-429 does); with ``never_settles`` it withholds forever."""

    name: str = "coop-dealer"
    rebalance_protocol: RebalanceProtocol = "cooperative"
    never_settles: bool = False
    seen: list[Group] = field(default_factory=list)

    def assign(self, group: Group) -> Assignment:
        self.seen.append(group)
        owner = {tp: m.member_id for m in group.members for tp in m.owned_partitions}
        target = _round_robin(group)
        withheld = [
            tp
            for member_id, tps in target.items()
            for tp in tps
            if self.never_settles or owner.get(tp, member_id) != member_id
        ]
        kept = {
            member_id: [tp for tp in tps if tp not in withheld] for member_id, tps in target.items()
        }
        return Assignment.build(target, kept, withheld)


def test_owned_partitions_come_from_the_assignors_own_previous_output():
    assignor = Recording()
    replay_with(
        _trace((1, [_member("a"), _member("b")]), (5, [_member("a"), _member("b")])), assignor
    )
    second = assignor.seen[1]
    assert [(m.member_id, m.owned_partitions, m.generation) for m in second.members] == [
        ("a", (TopicPartition("t", 0), TopicPartition("t", 2)), 1),
        ("b", (TopicPartition("t", 1), TopicPartition("t", 3)), 1),
    ]
    assert [m.generation for m in assignor.seen[0].members] == [-1, -1]


@dataclass
class NotReadingOwned(Recording):
    """:class:`Recording` declaring that its answer ignores what members owned."""

    name: str = "not-reading-owned"
    reads_owned_partitions: bool = False


def test_an_assignor_not_reading_owned_partitions_gets_the_group_as_traced_and_the_same_rows():
    trace = _trace((1, [_member("a"), _member("b")]), (5, [_member("a"), _member("c")]))
    reading, not_reading = Recording(), NotReadingOwned()
    rows = replay_with(trace, reading, timings=False)
    other_rows = replay_with(trace, not_reading, timings=False)
    assert [(m.owned_partitions, m.generation) for m in not_reading.seen[1].members] == [
        ((), -1),
        ((), -1),
    ]
    assert reading.seen[1].members[0].owned_partitions  # `a` is carried forward for the other
    assert [row._replace(assignor="x") for row in rows] == [
        row._replace(assignor="x") for row in other_rows
    ]


def test_a_static_member_keeps_its_partitions_across_a_new_member_id():
    assignor = Recording()
    trace = _trace(
        (1, [_member("a-1", instance_id="pod-a"), _member("b-1")]),
        (2, [_member("a-2", instance_id="pod-a"), _member("b-2")]),
    )
    rows = replay_with(trace, assignor, timings=False)
    static, dynamic = assignor.seen[1].members
    assert static.owned_partitions == (TopicPartition("t", 0), TopicPartition("t", 2))
    assert static.generation == 1
    assert (dynamic.owned_partitions, dynamic.generation) == ((), -1)
    # b-1's partitions lost their owner: forced, not moved
    assert (rows[1].moved, rows[1].forced) == (0, 2)


def test_an_identity_absent_from_the_previous_generation_rejoins_with_nothing():
    assignor = Recording()
    trace = _trace(
        (1, [_member("a"), _member("b")]),
        (2, [_member("a")]),
        (3, [_member("a"), _member("b")]),
    )
    replay_with(trace, assignor)
    member_b = assignor.seen[2].members[1]
    assert (member_b.member_id, member_b.owned_partitions, member_b.generation) == ("b", (), -1)


def test_owned_partitions_are_restricted_to_partitions_that_still_exist():
    assignor = Recording()
    rows = [
        {
            "trace_id": "g",
            "generation": 1,
            "topics": [{"name": "t", "partitions": 2}, {"name": "u", "partitions": 2}],
            "members": [_member("a", ("t", "u"))],
        },
        {
            "trace_id": "g",
            "generation": 2,
            "topics": [{"name": "t", "partitions": 2}],
            "members": [_member("a", ("t", "u"))],
        },
    ]
    trace = build_trace("g", [parse_generation(row, None, i) for i, row in enumerate(rows, 1)])
    scores = replay_with(trace, assignor, timings=False)
    assert assignor.seen[1].members[0].owned_partitions == (
        TopicPartition("t", 0),
        TopicPartition("t", 1),
    )
    assert (scores[1].moved, scores[1].forced, scores[1].partitions) == (0, 0, 2)


def test_eager_revokes_everything_surviving_members_owned():
    trace = _trace(
        (1, [_member("a"), _member("b")]), (2, [_member("a"), _member("b"), _member("c")])
    )
    first, second = replay_with(trace, Recording(), timings=False)
    assert (first.revoked, first.moved, first.rounds) == (0, 0, 1)
    # a: t0,t2 -> t0,t3; b: t1,t3 -> t1; c takes t2
    assert (second.revoked, second.moved, second.rounds) == (4, 2, 1)


def test_cooperative_revokes_only_what_moved_and_needs_a_second_round():
    assignor = CooperativeDealer()
    trace = _trace(
        (1, [_member("a"), _member("b")]), (2, [_member("a"), _member("b"), _member("c")])
    )
    first, second = replay_with(trace, assignor, timings=False)
    assert first.rounds == 1 and first.unassigned == 0
    assert (second.revoked, second.moved, second.rounds, second.unassigned) == (2, 2, 2, 0)
    # the second round sees the first round's result as owned, in this generation
    follow_up = assignor.seen[-1]
    assert {m.member_id: m.generation for m in follow_up.members} == {"a": 2, "b": 2, "c": 2}
    assert sum(len(m.owned_partitions) for m in follow_up.members) == 2


def test_cooperative_rounds_stop_at_five_and_leave_the_withheld_unassigned():
    rows = replay_with(
        _trace((1, [_member("a"), _member("b")])), CooperativeDealer(never_settles=True)
    )
    assert (rows[0].rounds, rows[0].unassigned) == (MAX_ROUNDS, 4)


def test_recorded_scores_what_the_real_group_assigned():
    t = [("t", p) for p in range(4)]
    trace = _trace(
        (1, [_member("a", assigned=t[:2]), _member("b", assigned=t[2:])]),
        (2, [_member("a", assigned=t[:1]), _member("b", assigned=t[1:])]),
        protocol="cooperative-sticky",
    )
    first, second = replay(trace, RECORDED)
    assert (first.assignor, first.max_load, first.assign_ms) == (RECORDED, 2, None)
    assert (second.moved, second.revoked, second.max_load, second.min_moved) == (1, 1, 3, 0)


def test_recorded_without_assigned_data_gives_no_rows():
    trace = _trace((1, [_member("a")]))
    assert replay(trace, RECORDED) == []
    assert replay_assignors(trace, [RECORDED], timings=False) == []


@pytest.mark.parametrize("timings", [True, False])
def test_assign_ms_is_wall_time_or_null(timings):
    [row] = replay_with(_trace((1, [_member("a")])), Recording(), timings=timings)
    assert (row.assign_ms is None) is not timings
    if timings:
        assert row.assign_ms >= 0.0


def test_replay_by_name_uses_the_registry():
    trace = _trace((1, [_member("a"), _member("b")]), (2, [_member("b")]))
    rows = replay_assignors(trace, ["range", "roundrobin"], timings=False)
    assert [(r.assignor, r.generation) for r in rows] == [
        ("range", 1),
        ("range", 2),
        ("roundrobin", 1),
        ("roundrobin", 2),
    ]
    assert [r.forced for r in rows] == [0, 2, 0, 2]
    assert rows == replay_assignors(trace, ["range", "roundrobin"], timings=False)


def test_no_assignor_beats_the_exact_references_on_generated_traces():
    from collections import defaultdict

    from assignors import registry
    from assignors.traces.generate import generate_rows

    by_trace = defaultdict(list)
    for line, row in enumerate(
        generate_rows("mixed", 12, seed=5, members=(2, 9), partitions=(4, 60), max_generations=8), 1
    ):
        by_trace[row["trace_id"]].append(parse_generation(row, "generated", line))
    traces = [build_trace(trace_id, rows) for trace_id, rows in by_trace.items()]
    names = list(registry.builtin_names())
    checked = 0
    for trace in traces:
        for row in replay_assignors(trace, names, timings=False):
            assert (row.unassigned, row.invalid) == (0, 0), row
            assert row.max_load >= row.optimal_max_load, row
            if row.max_load == row.optimal_max_load:
                assert row.moved >= row.min_moved, row
            checked += 1
    assert checked >= 2 * sum(len(trace.generations) for trace in traces)


# -- the replay job (assignors.traces.job): one trace's rows in, rows or one failure out ------


def _row(trace_id: str, generation: int, members=("a", "b"), partitions: int = 4) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {
        "trace_id": trace_id,
        "generation": generation,
        "topics": [{"name": "t", "partitions": partitions}],
        "members": [_member(m) for m in members],
    }


def _write(path, rows) -> None:  # type: ignore[no-untyped-def]
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_two_inputs_carrying_identical_generations_merge_into_one_trace(tmp_path):
    from assignors.traces.job import replay_paths

    _write(tmp_path / "a.jsonl", [_row("g", 1), _row("g", 2, ("a", "b", "c"))])
    _write(tmp_path / "b.jsonl", [_row("g", 2, ("a", "b", "c")), _row("g", 3, ("a",))])
    run = replay_paths([tmp_path], ["range"], timings=False)
    assert run.failures == []
    assert [row.generation for row in run.scores] == [1, 2, 3]
    assert [row.generations for row in run.summary] == [3]


def test_conflicting_inputs_fail_only_that_trace_naming_both_files_and_the_generation(tmp_path):
    from assignors.traces.job import replay_paths

    _write(tmp_path / "a.jsonl", [_row("g", 1), _row("g", 2), _row("g", 3), _row("other", 1)])
    _write(tmp_path / "b.jsonl", [_row("g", 1), _row("g", 2, ("x",)), _row("g", 3, ("y",))])
    run = replay_paths([tmp_path], ["range"], timings=False)
    assert {row.trace_id for row in run.scores} == {"other"}
    [failure] = run.failures
    assert failure.trace_id == "g"
    assert (
        str(tmp_path / "a.jsonl") in failure.reason and str(tmp_path / "b.jsonl") in failure.reason
    )
    assert "generation 2 differs" in failure.reason
    assert "--prefix" in failure.reason


def test_duplicate_generations_within_one_file_still_fail(tmp_path):
    from assignors.traces.job import replay_paths

    _write(tmp_path / "a.jsonl", [_row("g", 1), _row("g", 1)])
    _write(tmp_path / "b.jsonl", [_row("g", 1)])
    [failure] = replay_paths([tmp_path], ["range"], timings=False).failures
    assert "strictly increasing" in failure.reason


def test_an_assignor_that_raises_fails_its_trace_and_the_others_run(tmp_path, monkeypatch):
    import sys

    import raising_plugin

    from assignors.traces.job import replay_paths

    monkeypatch.syspath_prepend(str(raising_plugin.build(tmp_path)))
    monkeypatch.delitem(sys.modules, raising_plugin.MODULE, raising=False)
    _write(tmp_path / "t" / "a.jsonl", [_row("big", 1, ("a", "b", "c")), _row("small", 1)])
    run = replay_paths([tmp_path / "t"], ["range", raising_plugin.NAME], timings=False)
    assert {(row.trace_id, row.assignor) for row in run.summary} == {
        ("small", "range"),
        ("small", raising_plugin.NAME),
    }
    [failure] = run.failures
    assert failure.trace_id == "big" and failure.file == str(tmp_path / "t" / "a.jsonl")
    assert failure.reason == (
        f"trace big: assignor {raising_plugin.NAME} failed: RuntimeError: cannot handle 3 members"
    )


def test_progress_reports_every_trace_and_assignor_step(tmp_path):
    from assignors.traces.job import replay_paths

    _write(tmp_path / "a.jsonl", [_row("g", 1), _row("h", 1)])
    calls = []
    replay_paths([tmp_path], ["range", "sticky"], progress=lambda *a: calls.append(a))
    assert calls == [
        (0, 4, "g / range"),
        (1, 4, "g / sticky"),
        (2, 4, "h / range"),
        (3, 4, "h / sticky"),
        (4, 4, ""),
    ]


def test_readers_accept_a_partitioned_parquet_dataset_directory(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assignors.traces import scoring
    from assignors.traces.job import replay_paths
    from assignors.traces.results import read_errors, read_scores, read_summary, write_results

    _write(tmp_path / "t" / "a.jsonl", [_row("g", 1), _row("g", 2, ("a",)), _row("h", 1)])
    run = replay_paths([tmp_path / "t"], ["range", "sticky"], timings=False)
    single = write_results(tmp_path / "single", run.scores, run.failures, run.summary)
    dataset = tmp_path / "dataset"
    for name, table in (
        ("scores.parquet", scoring.scores_table(run.scores)),
        ("summary.parquet", scoring.summary_table(run.summary)),
    ):
        # the layout Spark's partitionBy("assignor") writes: part files, _SUCCESS, .crc
        pq.write_to_dataset(table, dataset / name, partition_cols=["assignor"])
        (dataset / name / "_SUCCESS").write_text("")
        (dataset / name / ".part-0.parquet.crc").write_bytes(b"\x00crc")
    (dataset / "errors.jsonl").mkdir()
    (dataset / "errors.jsonl" / "part-00000").write_text('{"trace_id": "x"}\n')
    (dataset / "errors.jsonl" / "_SUCCESS").write_text("")
    assert read_scores(dataset) == read_scores(single) == sorted(run.scores)
    assert read_summary(dataset) == read_summary(single) == run.summary
    assert read_errors(dataset) == [{"trace_id": "x"}]
    # a version 1 summary (no protocol column) reads with protocol null
    old = scoring.summary_table(run.summary).drop_columns(["protocol"])
    (tmp_path / "v1").mkdir()
    pq.write_table(old, tmp_path / "v1" / "summary.parquet")
    assert {row.protocol for row in read_summary(tmp_path / "v1")} == {None}
    assert pa.types.is_string(scoring.SUMMARY_SCHEMA.field("protocol").type)
