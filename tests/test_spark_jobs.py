"""The Spark jobs give the same rows as the Python engine, quarantine bad traces and commit
their output atomically. All tests share the run's one SparkSession."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXAMPLES

from assignors import registry
from assignors.traces import files as trace_files
from assignors.traces import generate, replay, scoring
from assignors.traces.results import read_errors, write_results
from partitioners import keytrace
from partitioners import scoring as key_scoring
from spark_jobs import replay_traces, score_key_traces

pytestmark = pytest.mark.spark

ASSIGNORS = [*registry.builtin_names(), replay.RECORDED]
KEY_COLUMNS = ["trace_id", "assignor", "generation"]


def _python_scores(paths: list[Path], names: list[str]) -> tuple[pd.DataFrame, list]:
    traces, failures = trace_files.read_traces(paths)
    rows = [row for each in traces for row in replay.replay_assignors(each, names, timings=False)]
    table = scoring.scores_table(rows)
    return _normalised(table.to_pandas()), failures


def _normalised(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype({"assignor": str})[list(scoring.SCORE_SCHEMA.names)]
    return frame.sort_values(KEY_COLUMNS, ignore_index=True)


def _spark_scores(out_dir: Path) -> pd.DataFrame:
    table = pq.read_table(out_dir / "scores.parquet")
    return _normalised(table.to_pandas())


@pytest.fixture(scope="module")
def mixed_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated mixed set (racks, weights, static members) spread over two files."""
    directory = tmp_path_factory.mktemp("mixed")
    rows = list(generate.generate_rows("mixed", 16, seed=7, members=(2, 9), partitions=(4, 60)))
    assert any(m.get("instance_id") for row in rows for m in row["members"]), "no static member"
    assert any(t.get("racks") for row in rows for t in row["topics"]), "no racks"
    assert any(t.get("weights") for row in rows for t in row["topics"]), "no weights"
    half = len(rows) // 2
    trace_files.write_traces_jsonl(rows[:half], directory / "part-a.jsonl")
    trace_files.write_traces_jsonl(rows[half:], directory / "nested" / "part-b.jsonl")
    return directory


def test_spark_replay_gives_the_python_engines_rows(spark, mixed_traces, tmp_path) -> None:
    out_dir = tmp_path / "results"
    replay_traces.run([str(mixed_traces)], ASSIGNORS, str(out_dir), timings=False, spark=spark)
    expected, failures = _python_scores([mixed_traces], ASSIGNORS)
    assert failures == []
    actual = _spark_scores(out_dir)
    assert len(actual) == len(expected) > 0
    pd.testing.assert_frame_equal(actual, expected, check_dtype=False)


def test_spark_summary_matches_the_python_summary(spark, mixed_traces, tmp_path) -> None:
    out_dir = tmp_path / "results"
    result = replay_traces.run(
        [str(mixed_traces)], ASSIGNORS, str(out_dir), timings=False, spark=spark
    )
    traces, _ = trace_files.read_traces([mixed_traces])
    rows = [row for each in traces for row in replay.replay_assignors(each, ASSIGNORS, False)]
    expected = scoring.summary_table(scoring.summarize(rows)).to_pandas()
    expected = expected.sort_values(["trace_id", "assignor"], ignore_index=True)
    on_disk = pq.read_table(out_dir / "summary.parquet").to_pandas().astype({"assignor": str})
    on_disk = on_disk[expected.columns].sort_values(["trace_id", "assignor"], ignore_index=True)
    pd.testing.assert_frame_equal(on_disk, expected, check_dtype=False)
    returned = scoring.summary_table(result.summary).to_pandas()[expected.columns]
    pd.testing.assert_frame_equal(returned, expected, check_dtype=False)


def test_spark_replay_reproduces_the_java_rows_for_range_and_roundrobin(
    spark, vectors_dir, tmp_path
) -> None:
    out_dir = tmp_path / "java"
    replay_traces.run(
        [str(vectors_dir / "traces.jsonl")],
        ["range", "roundrobin"],
        str(out_dir),
        timings=False,
        spark=spark,
    )
    actual = _spark_scores(out_dir).set_index(KEY_COLUMNS)
    compared = ["members", "partitions", "unassigned", "invalid", "min_load", "max_load"]
    compared += ["spread", "moved", "forced", "rounds"]
    java_rows = [
        json.loads(line)
        for line in (vectors_dir / "traces-java-scores.jsonl").read_text().splitlines()
        if line.strip()
    ]
    java_rows = [row for row in java_rows if row["assignor"] in ("range", "roundrobin")]
    mismatched = [
        row
        for row in java_rows
        if [
            int(actual.loc[(row["trace_id"], row["assignor"], row["generation"]), column])
            for column in compared
        ]
        != [row[column] for column in compared]
    ]
    assert len(actual) == len(java_rows)
    assert not mismatched, f"{len(mismatched)} of {len(java_rows)} Java rows differ"


def test_bad_traces_are_quarantined_and_the_rest_complete(spark, tmp_path) -> None:
    source = tmp_path / "traces"
    rows = list(generate.generate_rows("scale-out", 6, seed=3, members=(2, 4), partitions=(4, 12)))
    trace_files.write_traces_jsonl(rows, source / "good.jsonl")
    first = dict(rows[0], trace_id="broken-partitions")
    first["topics"] = [dict(first["topics"][0], partitions=-3), *first["topics"][1:]]
    text = "\n".join([json.dumps(first), '{"trace_id": "broken-json", "generation": 1,'])
    (source / "bad.jsonl").write_text(text + "\n")
    out_dir = tmp_path / "out"
    result = replay_traces.run([str(source)], ["range"], str(out_dir), timings=False, spark=spark)
    errors = read_errors(out_dir)
    assert sorted(error["trace_id"] for error in errors) == ["broken-json", "broken-partitions"]
    assert all(error["reason"] for error in errors)
    summarized = sorted(row.trace_id for row in result.summary)
    assert summarized == sorted({row["trace_id"] for row in rows})


def test_spark_output_replaces_the_old_directory_and_leaves_no_staging(
    spark, mixed_traces, tmp_path
) -> None:
    out_dir = tmp_path / "results"
    write_results(out_dir, [], [])
    (out_dir / "stale-file").write_text("from an older run")
    replay_traces.run([str(mixed_traces)], ["range"], str(out_dir), timings=False, spark=spark)
    assert not (out_dir / "stale-file").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results"]
    assert {path.name for path in out_dir.iterdir()} >= {
        "scores.parquet",
        "summary.parquet",
        "errors.jsonl",
    }


def test_missing_input_path_fails_before_any_output(spark, tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        replay_traces.run([str(tmp_path / "nope")], ["range"], str(tmp_path / "out"), spark=spark)
    assert not (tmp_path / "out").exists()


def test_key_trace_job_scores_like_the_python_engine(spark) -> None:
    paths = sorted(str(path) for path in (EXAMPLES / "key-traces").iterdir())
    names = ["java-builtin", "librdkafka-default", "java-roundrobin"]
    actual = score_key_traces.run(paths, names, seed=5, spark=spark)
    records = pd.concat([keytrace.read_key_trace(path) for path in paths], ignore_index=True)
    expected = key_scoring.score_traces(records, names, seed=5)
    expected = expected.sort_values(["trace_id", "partitioner"], ignore_index=True)
    schema = key_scoring.SCORE_SCHEMA
    as_table = [
        pa.Table.from_pandas(f, schema=schema, preserve_index=False) for f in (actual, expected)
    ]
    assert len(actual) == len(expected) > 0
    assert as_table[0].equals(as_table[1])


def test_ktk_replay_on_spark_writes_the_python_engines_rows(spark, mixed_traces, tmp_path) -> None:
    from typer.testing import CliRunner

    from ktk.cli import app

    runner = CliRunner()
    for engine in ("spark", "python"):
        arguments = ["replay", str(mixed_traces), "--engine", engine, "--no-timings"]
        arguments += ["--assignors", "range,sticky", "--out", str(tmp_path / engine)]
        result = runner.invoke(app, arguments)
        assert result.exit_code == 0, result.output
        assert "results:" in result.output
    pd.testing.assert_frame_equal(
        _spark_scores(tmp_path / "spark"), _spark_scores(tmp_path / "python"), check_dtype=False
    )
