"""Key-trace format and per-trace scores."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXAMPLES

from partitioners.errors import InputError
from partitioners.keyed import java_partition_for_key
from partitioners.keytrace import TRACE_COLUMNS, parse_jsonl_lines, read_key_trace
from partitioners.scoring import (
    SCORE_COLUMNS,
    SCORE_SCHEMA,
    disagreement,
    score_pair,
    score_trace,
    score_traces,
)

EXAMPLE_TRACE = EXAMPLES / "key-traces" / "orders-and-clicks.jsonl"


def _row(**overrides) -> str:
    record = {
        "trace_id": "t1",
        "timestamp_ms": 0,
        "topic": "orders",
        "num_partitions": 12,
        "key": base64.b64encode(b"k").decode(),
        "value_bytes": 100,
        "partition": None,
    }
    record.update(overrides)
    return json.dumps(record)


def _trace(keys: list[bytes | None], counts: list[int], trace_id: str = "t") -> pd.DataFrame:
    size = len(keys)
    return pd.DataFrame(
        {
            "trace_id": [trace_id] * size,
            "timestamp_ms": np.arange(size),
            "topic": ["orders"] * size,
            "num_partitions": counts,
            "key": keys,
            "value_bytes": [100] * size,
            "partition": [None] * size,
        }
    )


def test_example_trace_reads_with_a_partition_count_change_and_null_keys():
    frame = read_key_trace(EXAMPLE_TRACE)
    assert list(frame.columns) == list(TRACE_COLUMNS)
    assert frame["key"].isna().sum() > 0
    orders = frame[frame["trace_id"] == "orders-2024-06-11"]
    assert sorted(orders["num_partitions"].unique().tolist()) == [12, 16]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{broken", "trace.jsonl:2: not valid JSON"),
        (_row(key="***"), "trace.jsonl:2: key: is not valid base64 (got '***')"),
        (_row(num_partitions=-3), "trace.jsonl:2: num_partitions: must be an integer in [1, "),
        (_row(partition=12), "trace.jsonl:2: partition: must be null or an integer in [0, 12)"),
        (_row(value_bytes="big"), "trace.jsonl:2: value_bytes: must be an integer in [0, "),
        (json.dumps({"trace_id": "t1"}), "trace.jsonl:2: timestamp_ms, topic, num_partitions"),
    ],
)
def test_bad_jsonl_records_name_file_line_field_and_value(line, message):
    with pytest.raises(InputError) as error:
        parse_jsonl_lines([_row(), line], source="trace.jsonl")
    assert str(error.value).startswith(message)


def test_parquet_trace_round_trips_with_binary_keys(tmp_path: Path):
    frame = read_key_trace(EXAMPLE_TRACE)
    path = tmp_path / "trace.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    again = read_key_trace(path)
    assert again["key"].tolist() == frame["key"].tolist()
    assert again["partition"].isna().tolist() == frame["partition"].isna().tolist()


def test_gzipped_json_lines_read_like_plain_ones(tmp_path: Path):
    import gzip

    path = tmp_path / "trace.jsonl.gz"
    path.write_bytes(gzip.compress(EXAMPLE_TRACE.read_bytes()))
    pd.testing.assert_frame_equal(read_key_trace(path), read_key_trace(EXAMPLE_TRACE))


def test_parquet_trace_with_missing_columns_says_which(tmp_path: Path):
    path = tmp_path / "trace.parquet"
    pq.write_table(pa.table({"trace_id": ["t"], "key": [b"k"]}), path)
    with pytest.raises(InputError, match=r"missing column.*timestamp_ms, topic, num_partitions"):
        read_key_trace(path)


def test_parquet_bad_value_names_the_row(tmp_path: Path):
    table = pa.table(
        {
            "trace_id": ["t", "t"],
            "timestamp_ms": [0, 1],
            "topic": ["o", "o"],
            "num_partitions": [4, 0],
            "key": pa.array([b"a", None]),
            "value_bytes": [1, 1],
            "partition": pa.array([None, None], pa.int32()),
        }
    )
    path = tmp_path / "trace.parquet"
    pq.write_table(table, path)
    with pytest.raises(InputError, match=r"trace.parquet: row 2: num_partitions: must be"):
        read_key_trace(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            _row(num_partitions=10**9),
            "num_partitions: must be an integer in [1, 1000000] (got 1000000000)",
        ),
        (_row(timestamp_ms=2**63), "timestamp_ms: must be an integer in [0, 9223372036854775807]"),
        (_row(value_bytes=2**31), "value_bytes: must be an integer in [0, 2147483647]"),
        (_row(value_bytes=-1), "value_bytes: must be an integer in [0, 2147483647] (got -1)"),
        (
            _row().replace('"value_bytes": 100', '"value_bytes": ' + "9" * 5001),
            "value_bytes: must be an integer in [0, 2147483647] (got <an integer of 5001 digits>)",
        ),
        (_row().replace('"value_bytes": 100', '"value_bytes": Infinity'), "not valid JSON: Inf"),
        (_row().replace('"value_bytes": 100', '"value_bytes": NaN'), "not valid JSON: NaN is"),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON: nested too deeply"),
        (_row(trace_id="t\ud800"), "trace_id: must be valid Unicode"),
        (_row(trace_id="a\u0000b"), "trace_id: must not hold control characters"),
        (_row(topic="a b"), "topic: must be a Kafka topic name"),
        (_row(topic="x" * 250), "topic: must be a Kafka topic name"),
        (_row(trace_id="x" * 1001), "trace_id: must be at most 1000 characters"),
        (_row(num_partitions=True), "num_partitions: must be an integer in [1, "),
    ],
)
def test_out_of_range_and_hostile_jsonl_values_are_refused_naming_line_and_field(line, message):
    with pytest.raises(InputError) as error:
        parse_jsonl_lines([_row(), line], source="trace.jsonl")
    assert str(error.value).startswith("trace.jsonl:2: ")
    assert message in str(error.value)
    assert len(str(error.value)) < 300


def test_non_utf8_bytes_name_their_line(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    path.write_bytes(_row().encode() + b"\n" + _row(trace_id="ok").encode()[:-2] + b"\xff\n")
    with pytest.raises(InputError, match=r"trace.jsonl:2: not valid UTF-8"):
        read_key_trace(path)


def test_a_ten_megabyte_line_reads_and_an_error_in_it_stays_one_short_line(tmp_path: Path):
    big_key = base64.b64encode(b"k" * 10_000_000).decode()
    path = tmp_path / "trace.jsonl"
    path.write_text(_row(key=big_key) + "\n")
    assert len(read_key_trace(path).loc[0, "key"]) == 10_000_000
    path.write_text(_row(key=big_key + "*") + "\n")
    with pytest.raises(InputError) as error:
        read_key_trace(path)
    assert "trace.jsonl:1: key: is not valid base64" in str(error.value)
    assert len(str(error.value)) < 200


def _parquet_trace(**columns) -> pa.Table:
    base = {
        "trace_id": ["t", "t"],
        "timestamp_ms": pa.array([0, 1], pa.int64()),
        "topic": ["o", "o"],
        "num_partitions": pa.array([4, 4], pa.int32()),
        "key": pa.array([b"a", None]),
        "value_bytes": pa.array([1, 1], pa.int64()),
        "partition": pa.array([None, None], pa.int32()),
    }
    base.update(columns)
    return pa.table(base)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            {"num_partitions": pa.array([4, 2**40], pa.int64())},
            "row 2: num_partitions: must be an integer in [1, 1000000] (got 1099511627776)",
        ),
        (
            {"timestamp_ms": pa.array([0, 2**64 - 1], pa.uint64())},
            "row 2: timestamp_ms: must be an integer in [0, 9223372036854775807]",
        ),
        (
            {"value_bytes": pa.array([1.0, float("inf")], pa.float64())},
            "row 2: value_bytes: must be an integer in [0, 2147483647] (got inf)",
        ),
        (
            {"timestamp_ms": pa.array([0.0, 2.0**63], pa.float64())},
            "row 2: timestamp_ms: must be an integer in [0, 9223372036854775807]",
        ),
        ({"partition": pa.array([None, 7], pa.int32())}, "row 2: partition: must be null or"),
        ({"topic": ["o", "bad topic"]}, "row 2: topic: must be a Kafka topic name"),
        (
            {"trace_id": pa.array([None, None], pa.int64())},
            "row 1: trace_id: must be a non-empty string (got nan)",
        ),
    ],
)
def test_out_of_range_parquet_values_are_refused_before_any_cast(tmp_path, columns, message):
    path = tmp_path / "trace.parquet"
    pq.write_table(_parquet_trace(**columns), path)
    with pytest.raises(InputError) as error:
        read_key_trace(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_key_trace_files_skip_underscore_and_dot_entries_by_the_shared_rule(tmp_path: Path):
    from partitioners.keytrace import key_trace_files

    for name in ("a.jsonl", "_staging/b.jsonl", ".hidden/c.jsonl", "d/_e.jsonl", "d/f.pq"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert key_trace_files([tmp_path]) == [tmp_path / "a.jsonl", tmp_path / "d" / "f.pq"]


def test_score_row_has_the_fixed_columns_and_fits_the_arrow_schema():
    frame = read_key_trace(EXAMPLE_TRACE)
    orders = frame[frame["trace_id"] == "orders-2024-06-11"]
    scores = score_trace(orders, "java-builtin", seed=3)
    assert tuple(scores.columns) == SCORE_COLUMNS
    table = pa.Table.from_pandas(scores, schema=SCORE_SCHEMA, preserve_index=False)
    assert table.num_rows == 1
    row = scores.iloc[0]
    assert sum(row["records_per_partition"]) == row["records"] == len(orders)
    assert sum(row["bytes_per_partition"]) == row["bytes"]
    assert row["bytes_skew"] >= 1.0 and row["num_partitions"] == 16


def test_scoring_is_pure_same_inputs_same_row():
    frame = read_key_trace(EXAMPLE_TRACE)
    first = score_traces(frame, ["java-builtin", "librdkafka-default"], seed=5)
    again = score_traces(frame, ["java-builtin", "librdkafka-default"], seed=5)
    pd.testing.assert_frame_equal(first, again)


def test_spark_shaped_input_scores_identically():
    frame = read_key_trace(EXAMPLE_TRACE)
    clicks = frame[frame["trace_id"] == "clickstream-2024-06-11"].reset_index(drop=True)
    as_from_spark = clicks.copy()
    as_from_spark["key"] = [bytearray(k) if k is not None else None for k in clicks["key"]]
    as_from_spark["partition"] = clicks["partition"].astype("float64")
    expected = score_trace(clicks, "java-sticky", seed=2)
    pd.testing.assert_frame_equal(score_trace(as_from_spark, "java-sticky", seed=2), expected)


def test_keys_remapped_by_a_resize_match_the_hash_arithmetic():
    keys = [f"user-{i}".encode() for i in range(400)]
    trace = _trace(keys + keys, [12] * 400 + [16] * 400)
    row = score_trace(trace, "java-builtin").iloc[0]
    moved = sum(java_partition_for_key(k, 12) != java_partition_for_key(k, 16) for k in keys)
    assert row["keys_spanning_change"] == 400
    assert row["keys_remapped"] == moved
    assert row["partition_count_changes"] == 1


def test_java_and_librdkafka_default_disagree_on_keys_while_murmur2_random_agrees():
    keys = [f"user-{i}".encode() for i in range(300)]
    trace = _trace([*keys, None, None], [24] * 302)
    assert disagreement(trace, "java-builtin", "librdkafka-murmur2_random").empty
    differing = disagreement(trace, "java-builtin", "librdkafka-default")
    expected = sum(java_partition_for_key(k, 24) != zlib.crc32(k) % 24 for k in keys)
    assert len(differing) == expected > 250
    assert differing["key"].notna().all()


def test_scoring_a_frame_with_two_traces_is_refused():
    trace = pd.concat([_trace([b"a"], [3], "x"), _trace([b"b"], [3], "y")])
    with pytest.raises(InputError, match="exactly one trace"):
        score_trace(trace, "java-builtin")


def test_unknown_partitioner_is_an_input_error():
    with pytest.raises(InputError, match="unknown partitioner"):
        score_trace(_trace([b"a"], [3]), "java-magic")


def test_score_pair_equals_two_scores_and_their_disagreement():
    trace = read_key_trace(EXAMPLE_TRACE)
    trace = trace[trace["trace_id"] == trace["trace_id"].iloc[0]]
    names = ("java-builtin", "librdkafka-default")
    scores, differing = score_pair(trace, *names, linger_ms=0, seed=3)
    separate = [score_trace(trace, name, linger_ms=0, seed=3) for name in names]
    pd.testing.assert_frame_equal(scores, pd.concat(separate, ignore_index=True))
    pd.testing.assert_frame_equal(differing, disagreement(trace, *names, linger_ms=0, seed=3))
    assert len(differing) > 0


def _trace_dir(root: Path) -> Path:
    """Two traces spread over nested files, plus entries every lister must skip and one bad
    file."""
    lines = EXAMPLE_TRACE.read_text().splitlines()
    half = len(lines) // 2
    (root / "nested").mkdir(parents=True)
    (root / "a-b").mkdir()
    (root / "a.jsonl").write_text("\n".join(lines[:half]) + "\n")
    (root / "nested" / "b.jsonl").write_text("\n".join(lines[half:]) + "\n")
    (root / "a-b" / "c.jsonl").write_text(_row(trace_id="third") + "\n")
    for skipped in ("_underscore", ".hidden"):
        (root / skipped).mkdir()
        (root / skipped / "x.jsonl").write_text(_row(trace_id=f"from-{skipped}") + "\n")
    (root / "_SUCCESS").write_text("")
    (root / "bad.jsonl").write_text(_row() + "\n" + _row(num_partitions=0) + "\n")
    return root


def test_score_paths_skips_hidden_entries_reports_bad_files_and_keeps_first_seen_order(tmp_path):
    from partitioners.keytrace_job import ScoreSettings, score_paths

    root = _trace_dir(tmp_path / "traces")
    steps = []
    report = score_paths(
        [root], ["java-builtin"], ScoreSettings(seed=1), lambda *step: steps.append(step)
    )
    # files in path-component order ("a-b/" before "a.jsonl"), traces by their first record
    assert report.scores["trace_id"].tolist() == [
        "third",
        "orders-2024-06-11",
        "clickstream-2024-06-11",
    ]
    assert [failure.message for failure in report.failures] == [
        f"{root / 'bad.jsonl'}:2: num_partitions: must be an integer in [1, 1000000] (got 0)"
    ]
    assert steps[:4] == [("read", 1, 4), ("read", 2, 4), ("read", 3, 4), ("read", 4, 4)]
    assert steps[-1] == ("score", 3, 3)


def test_trace_outcome_json_round_trips_scores_comparison_and_failure():
    from partitioners.keytrace_job import ScoreSettings, TraceOutcome, score_key_trace

    trace = read_key_trace(EXAMPLE_TRACE)
    clicks = trace[trace["trace_id"] == "clickstream-2024-06-11"].reset_index(drop=True)
    outcome = score_key_trace(clicks, ["java-builtin", "librdkafka-default"], ScoreSettings())
    again = TraceOutcome.from_json(outcome.to_json())
    schema = SCORE_SCHEMA
    assert pa.Table.from_pandas(again.scores, schema=schema, preserve_index=False).equals(
        pa.Table.from_pandas(outcome.scores, schema=schema, preserve_index=False)
    )
    assert again.comparison == outcome.comparison and again.comparison.keys_differing > 0
    failed = score_key_trace(clicks.assign(value_bytes=-1), ["java-builtin"], ScoreSettings())
    assert TraceOutcome.from_json(failed.to_json()).failure == failed.failure
    assert failed.failure.trace_id == "clickstream-2024-06-11"


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"batch_size": 0}, "ScoreSettings.batch_size"),
        ({"linger_ms": -5}, "ScoreSettings.linger_ms"),
        ({"seed": 2**63}, "ScoreSettings.seed"),
    ],
)
def test_score_settings_refuse_out_of_range_values(settings, field):
    from partitioners.keytrace_job import ScoreSettings

    with pytest.raises(InputError, match=field):
        ScoreSettings(**settings)


@pytest.mark.spark
def test_both_engines_give_the_same_report_for_hidden_entries_and_a_bad_file(spark, tmp_path):
    from partitioners.keytrace_job import ScoreSettings, score_paths
    from spark_jobs import score_key_traces

    root = _trace_dir(tmp_path / "traces")
    names = ["java-builtin", "librdkafka-default"]
    settings = ScoreSettings(linger_ms=0, seed=4)
    python = score_paths([str(root)], names, settings)
    on_spark = score_key_traces.report([str(root)], names, settings, spark=spark)
    tables = [
        pa.Table.from_pandas(r.scores, schema=SCORE_SCHEMA, preserve_index=False)
        for r in (python, on_spark)
    ]
    assert tables[0].equals(tables[1]) and tables[0].num_rows == 6
    assert python.comparisons == on_spark.comparisons and len(python.comparisons) == 3
    assert python.failures == on_spark.failures and len(python.failures) == 1


@pytest.mark.spark
def test_both_engines_print_the_same_lines_and_exit_code_on_the_command_line(spark, tmp_path):
    from typer.testing import CliRunner

    from ktk.cli import app

    root = _trace_dir(tmp_path / "traces")
    outcomes = [
        CliRunner().invoke(
            app,
            ["partition", "score", str(root), "-p", "java-builtin,librdkafka-default", *extra],
        )
        for extra in ([], ["--engine", "spark"])
    ]
    python, on_spark = outcomes
    assert python.exit_code == on_spark.exit_code == 1
    assert python.stdout == on_spark.stdout
    assert "land on different partitions" in on_spark.stdout
    assert python.stderr == on_spark.stderr
    assert python.stderr.startswith(f"error: {root / 'bad.jsonl'}:2: num_partitions")
    assert "Traceback" not in python.output + on_spark.output


def test_non_text_trace_ids_and_topics_in_a_frame_are_refused():
    from partitioners.keytrace import normalize_frame

    frame = _trace([b"a", b"b"], [3, 3])
    frame["trace_id"] = ["t", 5]
    with pytest.raises(InputError, match=r"row 2: trace_id: must be a non-empty string \(got 5\)"):
        normalize_frame(frame)
    frame = _trace([b"a"], [3])
    frame["topic"] = [b"orders"]
    with pytest.raises(InputError, match="row 1: topic: must be a non-empty string"):
        normalize_frame(frame)
