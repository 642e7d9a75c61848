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
        (_row(num_partitions=-3), "trace.jsonl:2: num_partitions: must be an integer > 0"),
        (_row(partition=12), "trace.jsonl:2: partition: must be null or an integer in [0, 12)"),
        (_row(value_bytes="big"), "trace.jsonl:2: value_bytes: must be an integer >= 0"),
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
