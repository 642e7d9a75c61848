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
from assignors.traces import generate, job, replay, scoring
from assignors.traces.results import read_errors, read_scores, read_summary, write_results
from ktkbase.errors import OutputError
from ktkbase.outputs import SUCCESS_NAME
from partitioners import keytrace
from partitioners import scoring as key_scoring
from spark_jobs import files, replay_traces, score_key_traces

pytestmark = pytest.mark.spark

ASSIGNORS = [*registry.builtin_names(), replay.RECORDED]
KEY_COLUMNS = ["trace_id", "assignor", "generation"]


def _python_scores(paths: list[Path], names: list[str]) -> tuple[pd.DataFrame, list]:
    run = job.replay_paths(paths, names, timings=False)
    table = scoring.scores_table(run.scores)
    return _normalised(table.to_pandas()), run.failures


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
    python_run = job.replay_paths([mixed_traces], ASSIGNORS, timings=False)
    assert {row.protocol for row in python_run.summary} == {"eager", "cooperative", "consumer"}
    expected = scoring.summary_table(python_run.summary).to_pandas()
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


def test_spark_output_replaces_its_own_result_and_refuses_a_foreign_directory(
    spark, mixed_traces, tmp_path
) -> None:
    out_dir = tmp_path / "results"
    write_results(out_dir, [], [])
    replay_traces.run([str(mixed_traces)], ["range"], str(out_dir), timings=False, spark=spark)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results"]
    assert sorted(path.name for path in out_dir.iterdir()) == [
        ".ktk-output.json",
        "_SUCCESS",
        "errors.jsonl",
        "scores.parquet",
        "summary.parquet",
        "verdict.json",
    ]
    assert len(read_scores(out_dir)) > 0
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="refusing to replace"):
        replay_traces.run([str(mixed_traces)], ["range"], str(foreign), spark=spark)
    assert sorted(path.name for path in foreign.iterdir()) == ["notes.txt"]


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


def test_key_trace_job_reads_a_file_reached_by_two_arguments_once(spark) -> None:
    directory = EXAMPLES / "key-traces"
    inside = sorted(directory.iterdir())[0]
    names = ["java-builtin", "librdkafka-default"]
    once = score_key_traces.run([str(directory)], names, seed=5, spark=spark)
    twice = score_key_traces.run([str(directory), str(inside)], names, seed=5, spark=spark)
    pd.testing.assert_frame_equal(twice, once)


def test_key_trace_job_out_writes_a_new_file_and_never_replaces_one_it_did_not_make(
    spark, tmp_path, capsys
) -> None:
    trace = sorted((EXAMPLES / "key-traces").iterdir())[0]
    foreign = tmp_path / "mine.parquet"
    foreign.write_bytes(b"someone else's file")
    assert score_key_traces.main([str(trace), "--out", str(foreign)]) == 2
    assert foreign.read_bytes() == b"someone else's file"
    assert score_key_traces.main([str(trace), "--out", str(trace)]) == 2
    assert "it is the input" in capsys.readouterr().err
    fresh = tmp_path / "scores.parquet"
    assert score_key_traces.main([str(trace), "--out", str(fresh)]) == 0
    assert pq.read_table(fresh).num_rows > 0


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
    _assert_same_result_bytes(tmp_path / "spark", tmp_path / "python")


# -- engine parity: the same input gives the same result files on both engines ---------------

RESULT_FILES = ("scores.parquet", "summary.parquet", "errors.jsonl", "verdict.json")


def _assert_same_result_bytes(first: Path, second: Path) -> None:
    for name in RESULT_FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    manifests = [json.loads((d / ".ktk-output.json").read_text()) for d in (first, second)]
    entries = sorted([*RESULT_FILES, SUCCESS_NAME])
    assert manifests[0]["entries"] == manifests[1]["entries"] == entries
    assert (first / SUCCESS_NAME).read_bytes() == (second / SUCCESS_NAME).read_bytes() == b""


def _replay_both(inputs: list[Path], out_root: Path, *extra: str) -> dict[str, object]:
    from typer.testing import CliRunner

    from ktk.cli import app

    outcomes = {}
    for engine in ("python", "spark"):
        arguments = ["replay", *map(str, inputs), "--engine", engine, "--no-timings"]
        arguments += ["--out", str(out_root / engine), *extra]
        outcomes[engine] = CliRunner().invoke(app, arguments)
    return outcomes


def test_both_engines_skip_underscore_and_hidden_entries_and_write_the_same_bytes(
    spark, tmp_path
) -> None:
    source = tmp_path / "traces"
    rows = list(generate.generate_rows("mixed", 6, seed=4, members=(2, 5), partitions=(4, 30)))
    trace_files.write_traces_jsonl(rows[:10], source / "a.jsonl")
    trace_files.write_traces_jsonl(rows[10:], source / "nested" / "b.jsonl.gz")
    hidden = [dict(row, trace_id="must-not-appear") for row in rows[:2]]
    trace_files.write_traces_jsonl(hidden, source / "_underscore" / "c.jsonl")
    trace_files.write_traces_jsonl(hidden, source / ".hidden" / "d.jsonl")
    trace_files.write_traces_jsonl(hidden, source / "nested" / "_e.jsonl")
    (source / "bad.jsonl").write_text('{"trace_id": "broken", "generation": 1,\n{"no": 1}\n')
    outcomes = _replay_both([source], tmp_path)
    for outcome in outcomes.values():
        assert outcome.exit_code == 0, outcome.output
    _assert_same_result_bytes(tmp_path / "python", tmp_path / "spark")
    traces = {row.trace_id for row in read_scores(tmp_path / "spark")}
    assert traces == {row["trace_id"] for row in rows}
    errors = read_errors(tmp_path / "spark")
    assert [error["trace_id"] for error in errors] == [None, "broken"]
    assert all(error["file"] == str(source / "bad.jsonl") for error in errors)


def test_an_assignor_that_raises_becomes_the_same_error_line_on_both_engines(
    spark, tmp_path, monkeypatch
) -> None:
    import sys

    import raising_plugin

    plugin = raising_plugin.build(tmp_path)
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.delitem(sys.modules, raising_plugin.MODULE, raising=False)
    spark.sparkContext.addPyFile(str(plugin))
    source = tmp_path / "traces"
    rows = [
        {
            "trace_id": trace_id,
            "generation": 1,
            "topics": [{"name": "t", "partitions": 6}],
            "members": [{"member_id": m, "topics": ["t"]} for m in members],
        }
        for trace_id, members in (("big", "abc"), ("small", "ab"))
    ]
    trace_files.write_traces_jsonl(rows, source / "t.jsonl")
    outcomes = _replay_both([source], tmp_path, "--assignors", f"range,{raising_plugin.NAME}")
    for outcome in outcomes.values():
        assert outcome.exit_code == 0, outcome.output
    _assert_same_result_bytes(tmp_path / "python", tmp_path / "spark")
    [error] = read_errors(tmp_path / "spark")
    assert error == {
        "trace_id": "big",
        "file": str(source / "t.jsonl"),
        "reason": f"trace big: assignor {raising_plugin.NAME} failed: RuntimeError: "
        "cannot handle 3 members",
    }
    assert {row.trace_id for row in read_summary(tmp_path / "spark")} == {"small"}


def test_inputs_sharing_a_trace_id_merge_or_fail_alike_on_both_engines(spark, tmp_path) -> None:
    rows = list(generate.generate_rows("scale-out", 3, seed=8, members=(2, 4), partitions=(4, 9)))
    first = tmp_path / "capture-1.jsonl"
    second = tmp_path / "capture-2.jsonl"
    trace_files.write_traces_jsonl(rows, first)
    conflicting = [
        dict(row, members=row["members"][:1]) if i == 3 else row for i, row in enumerate(rows)
    ]
    trace_files.write_traces_jsonl(conflicting, second)
    outcomes = _replay_both([first, second], tmp_path, "--assignors", "range,sticky")
    for outcome in outcomes.values():
        assert outcome.exit_code == 0, outcome.output
    _assert_same_result_bytes(tmp_path / "python", tmp_path / "spark")
    [error] = read_errors(tmp_path / "spark")
    assert error["trace_id"] == rows[3]["trace_id"]
    assert str(first) in error["reason"] and str(second) in error["reason"]
    assert f"generation {rows[3]['generation']} differs" in error["reason"]
    assert "--prefix" in error["reason"]
    summarised = {row.trace_id for row in read_summary(tmp_path / "spark")}
    assert summarised == {row["trace_id"] for row in rows} - {rows[3]["trace_id"]}
    merged = read_scores(tmp_path / "python")
    alone = job.replay_paths([first], ["range", "sticky"], timings=False).scores
    assert [r for r in merged] == sorted(r for r in alone if r.trace_id in summarised)


def test_spark_engine_refuses_unsafe_out_before_starting_and_force_keeps_foreign_files(
    spark, mixed_traces, tmp_path, monkeypatch
) -> None:
    from typer.testing import CliRunner

    from ktk.cli import app

    def replay(out: Path | str, *extra: str, traces: Path = mixed_traces):  # type: ignore[no-untyped-def]
        arguments = ["replay", str(traces), "--engine", "spark", "--assignors", "range"]
        return CliRunner().invoke(app, [*arguments, "--out", str(out), *extra])

    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    target_file = tmp_path / "a-file"
    target_file.write_text("x")
    before = sorted(p.relative_to(mixed_traces) for p in mixed_traces.rglob("*"))
    monkeypatch.chdir(tmp_path)
    for out in (keep, mixed_traces, mixed_traces / "nested", ".", target_file):
        outcome = replay(out)
        assert outcome.exit_code == 2, (out, outcome.output)
    outcome = replay(mixed_traces, traces=mixed_traces / "part-a.jsonl")
    assert outcome.exit_code == 2 and "contains the input" in outcome.stderr
    assert sorted(p.relative_to(mixed_traces) for p in mixed_traces.rglob("*")) == before
    assert sorted(p.name for p in keep.iterdir()) == ["notes.txt"]
    assert target_file.read_text() == "x"
    outcome = replay(keep, "--force")
    assert outcome.exit_code == 0, outcome.output
    assert (keep / "notes.txt").read_text() == "mine"
    assert read_scores(keep)
    assert not [p for p in tmp_path.iterdir() if ".ktk-" in p.name]


def test_hadoop_uri_output_follows_the_same_rules_and_bytes(spark, mixed_traces, tmp_path) -> None:
    local = tmp_path / "local"
    replay_traces.run([str(mixed_traces)], ["range"], str(local), timings=False, spark=spark)
    uri = f"file://{tmp_path / 'remote'}"
    for _ in range(2):  # the second run replaces the first through Hadoop renames
        replay_traces.run([str(mixed_traces)], ["range"], uri, timings=False, spark=spark)
    remote = tmp_path / "remote"
    _assert_same_result_bytes(local, remote)
    assert sorted(p.name for p in remote.iterdir()) == [
        ".ktk-output.json",
        "_SUCCESS",
        "errors.jsonl",
        "scores.parquet",
        "summary.parquet",
        "verdict.json",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local", "remote"]
    (remote / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="entries ktk did not write"):
        replay_traces.run([str(mixed_traces)], ["range"], uri, spark=spark)
    replay_traces.run([str(mixed_traces)], ["range"], uri, spark=spark, force=True)
    assert (remote / "notes.txt").read_text() == "mine"
    with pytest.raises(OutputError, match="it is the input"):
        replay_traces.run([str(mixed_traces)], ["range"], f"file://{mixed_traces}", spark=spark)
    with pytest.raises(OutputError, match="contains the input"):
        replay_traces.run(
            [str(mixed_traces / "nested")], ["range"], f"file://{mixed_traces}", spark=spark
        )


def test_hadoop_uri_output_is_committed_by_an_empty_success_marker_written_last(
    spark, mixed_traces, tmp_path, monkeypatch
) -> None:
    """What a reader on an object store relies on: through Hadoop's FileSystem API (no atomic
    directory rename), the job writes ``_SUCCESS`` after every other change to ``--out``, and
    a re-run deletes the old marker before it moves anything."""
    changes: list[tuple[str, tuple[str, ...]]] = []

    class RecordingFileSystem(files.HadoopFileSystem):
        def write_bytes(self, path: str, data: bytes) -> None:
            super().write_bytes(path, data)
            changes.append(("write", (path,)))

        def rename(self, source: str, target: str) -> None:
            super().rename(source, target)
            changes.append(("rename", (source, target)))

        def delete_tree(self, path: str) -> None:
            super().delete_tree(path)
            changes.append(("delete", (path,)))

    monkeypatch.setattr(files, "HadoopFileSystem", RecordingFileSystem)
    uri = f"file://{tmp_path / 'remote'}"
    marker = f"{uri}/{SUCCESS_NAME}"

    def touching_out() -> list[tuple[str, tuple[str, ...]]]:
        return [c for c in changes if any(p == uri or p.startswith(uri + "/") for p in c[1])]

    replay_traces.run([str(mixed_traces)], ["range"], uri, timings=False, spark=spark)
    assert changes[-1] == ("write", (marker,))
    assert (tmp_path / "remote" / SUCCESS_NAME).read_bytes() == b""
    changes.clear()
    replay_traces.run([str(mixed_traces)], ["range"], uri, timings=False, spark=spark)
    assert touching_out()[0] == ("delete", (marker,))
    assert changes[-1] == ("write", (marker,))
    manifest = json.loads((tmp_path / "remote" / ".ktk-output.json").read_text())
    assert SUCCESS_NAME in manifest["entries"]


def test_spark_sigkill_mid_replay_keeps_the_previous_result_and_the_next_run_clears_debris(
    spark, tmp_path
) -> None:
    from replay_kill import large_traces, replay_killed_mid_run

    traces = large_traces(tmp_path / "traces")
    out = tmp_path / "out"
    replay_traces.run(
        [str(traces / "small.jsonl")], ["range"], str(out), timings=False, spark=spark
    )
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    debris = replay_killed_mid_run(traces, out, "spark", settle=12.0)
    assert debris, "the run was not caught while staging"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    replay_traces.run(
        [str(traces / "small.jsonl")], ["range"], str(out), timings=False, spark=spark
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "traces"]


def test_spark_readers_accept_the_older_partitioned_dataset_layout(spark, mixed_traces, tmp_path):
    single = tmp_path / "single"
    replay_traces.run([str(mixed_traces)], ["range", "sticky"], str(single), spark=spark)
    dataset = tmp_path / "dataset"
    for name in ("scores.parquet", "summary.parquet"):
        frame = spark.read.parquet(str(single / name))
        frame.write.partitionBy("assignor").parquet(str(dataset / name))
        assert (dataset / name / "_SUCCESS").exists()
    (dataset / "errors.jsonl").write_bytes((single / "errors.jsonl").read_bytes())
    assert read_scores(dataset) == read_scores(single)
    assert read_summary(dataset) == read_summary(single)
    assert read_errors(dataset) == read_errors(single)
