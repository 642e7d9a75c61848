"""Score rows travel from the Spark job's tasks to the writer as Arrow columns, not as pickled
row objects; the writer takes rows or columns and writes the same bytes for the same rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from conftest import EXAMPLES

from assignors import registry
from assignors.traces import files as trace_files
from assignors.traces import generate, job, replay, results, scoring
from spark_jobs import replay_traces

ASSIGNORS = [*registry.builtin_names(), replay.RECORDED]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> job.ReplayRun:
    """The example traces and a generated mixed set (racks, weights, null columns), replayed
    in process without timings."""
    directory = tmp_path_factory.mktemp("traces")
    rows = list(generate.generate_rows("mixed", 12, seed=5, members=(2, 7), partitions=(4, 40)))
    trace_files.write_traces_jsonl(rows, directory / "mixed.jsonl")
    run = job.replay_paths([EXAMPLES / "traces", directory], ASSIGNORS, timings=False)
    assert len(run.scores) > 500
    assert any(row.weight_skew is None for row in run.scores)
    assert any(row.weight_skew is not None for row in run.scores)
    return run


def _shuffled_chunks(rows: list[scoring.ScoreRow], chunks: int, seed: int) -> pa.Table:
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    size = -(-len(shuffled) // chunks)
    parts = [shuffled[index : index + size] for index in range(0, len(shuffled), size)]
    return pa.concat_tables(scoring.scores_table(part) for part in parts)


def test_columnar_scores_give_the_same_result_files_as_rows(replayed: job.ReplayRun) -> None:
    from_rows = results.result_files(replayed.scores, replayed.failures, replayed.summary)
    table = _shuffled_chunks(replayed.scores, 5, seed=3)
    assert table.column("trace_id").num_chunks == 5
    from_columns = results.result_files(table, replayed.failures, replayed.summary)
    assert from_columns == from_rows


def test_rows_in_any_order_give_the_same_result_files(replayed: job.ReplayRun) -> None:
    shuffled = list(replayed.scores)
    random.Random(11).shuffle(shuffled)
    assert results.result_files(shuffled, [], replayed.summary) == results.result_files(
        replayed.scores, [], replayed.summary
    )


def test_score_columns_equal_the_per_row_table(replayed: job.ReplayRun) -> None:
    per_row = pa.Table.from_pylist(
        [row._asdict() for row in replayed.scores], schema=scoring.SCORE_SCHEMA
    )
    assert scoring.scores_table(replayed.scores).equals(per_row)


def test_no_score_rows_give_the_same_file_as_rows_or_columns() -> None:
    empty = scoring.SCORE_SCHEMA.empty_table()
    assert results.result_files(empty, [], []) == results.result_files([], [], [])


def test_a_table_of_another_schema_is_refused(replayed: job.ReplayRun) -> None:
    table = scoring.scores_table(replayed.scores).drop_columns(["topic_spread"])
    with pytest.raises(ValueError, match="score schema"):
        results.result_files(table, [], replayed.summary)


def test_summary_defaults_to_the_scores_summary_from_columns(replayed: job.ReplayRun) -> None:
    table = _shuffled_chunks(replayed.scores, 3, seed=9)
    assert results.result_files(table, []) == results.result_files(replayed.scores, [])


def test_task_score_streams_hold_the_rows_they_were_given(replayed: job.ReplayRun) -> None:
    rows = replayed.scores
    half = len(rows) // 2
    streams = [
        replay_traces.scores_stream(rows[:half]),
        replay_traces.scores_stream([]),
        replay_traces.scores_stream(rows[half:]),
    ]
    table = replay_traces.score_table(streams)
    assert table.schema.equals(scoring.SCORE_SCHEMA)
    assert table.equals(scoring.scores_table(rows))
    assert replay_traces.score_table([]).num_rows == 0


def test_task_score_streams_are_smaller_than_the_pickled_rows(replayed: job.ReplayRun) -> None:
    import pickle

    stream = replay_traces.scores_stream(replayed.scores)
    assert len(stream) * 3 < len(pickle.dumps(replayed.scores, protocol=5))
