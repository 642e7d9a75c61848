"""Traces are spread over replay tasks by estimated cost, not by file."""

from __future__ import annotations

import random

import pytest

from assignors.traces.files import write_traces
from spark_jobs import replay_traces


def test_bucket_plan_keeps_the_largest_task_within_twice_the_mean_on_skewed_costs() -> None:
    generator = random.Random(7)
    costs = {f"t{index:04d}": generator.choice([1, 2, 5, 40, 400]) for index in range(2000)}
    plan = replay_traces.bucket_plan(costs, 12)
    assert len(plan.loads) == 12 and sorted(set(plan.bucket_of.values())) == list(range(12))
    assert plan.imbalance() <= 2.0
    assert sum(plan.loads) == sum(costs.values())
    assert replay_traces.bucket_plan(costs, 12) == plan  # deterministic


def test_bucket_plan_never_makes_more_buckets_than_traces() -> None:
    plan = replay_traces.bucket_plan({"a": 3, "b": 1}, 8)
    assert plan.loads == [3, 1]


def _generated_rows(count: int) -> list[dict]:
    generator = random.Random(3)
    rows = []
    for index in range(count):
        partitions = generator.choice([1, 3, 8, 30])
        members = [{"member_id": f"m{m}", "topics": ["t"]} for m in range(generator.randint(1, 4))]
        for generation in range(1, generator.randint(2, 4)):
            rows.append(
                {
                    "trace_id": f"trace-{index:04d}",
                    "generation": generation,
                    "topics": [{"name": "t", "partitions": partitions}],
                    "members": members,
                }
            )
    return rows


@pytest.mark.slow
@pytest.mark.spark
def test_one_input_file_spreads_over_every_core_with_balanced_tasks(spark, tmp_path) -> None:
    source = tmp_path / "all.jsonl"
    write_traces(_generated_rows(2000), source)
    job = replay_traces.build_scores(spark, [str(source)], ["range"], timings=False)
    try:
        cores = spark.sparkContext.defaultParallelism
        assert len(job.plan.bucket_of) == 2000
        assert len(job.plan.loads) >= cores
        assert job.scored.getNumPartitions() == len(job.plan.loads)
        assert job.plan.imbalance() <= 2.0
        # each task got exactly its planned traces
        outcomes = job.scored.collect()
        assert sorted(outcome.bucket for outcome in outcomes) == list(range(len(job.plan.loads)))
        for outcome in outcomes:
            traces = {row.trace_id for row in outcome.summary}
            assert len(traces) == outcome.traces
            assert {job.plan.bucket_of[trace] for trace in traces} == {outcome.bucket}
        assert sum(outcome.traces for outcome in outcomes) == 2000
    finally:
        job.parts.unpersist()


@pytest.mark.slow
@pytest.mark.spark
def test_progress_counts_traces_up_to_the_total(spark, tmp_path) -> None:
    source = tmp_path / "all.jsonl"
    write_traces(_generated_rows(60), source)
    seen: list[tuple[int, int]] = []
    replay_traces.run(
        [str(source)],
        ["range"],
        str(tmp_path / "out"),
        timings=False,
        spark=spark,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen[0] == (0, 60) and seen[-1] == (60, 60)
    assert all(total == 60 for _, total in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
