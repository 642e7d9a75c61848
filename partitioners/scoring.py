"""Scores of one producer key trace under one partitioner, through the producer model.

Per trace x partitioner: records and payload bytes (key + value) per partition, skew (max / mean
over all partitions of the largest partition count), batches and mean batch fill, mean record
latency in the model, and the keys whose partition changes where ``num_partitions`` changes
mid-trace (per-key ordering breaks there). For two partitioners, ``disagreement`` lists the
keys they place differently.

``score_trace`` is a pure function of (trace DataFrame, partitioner name, settings, seed) that
returns one row with ``SCORE_COLUMNS``; ``SCORE_SCHEMA`` is its Arrow schema (what a Spark
``applyInPandas`` declares).

>>> import pandas as pd
>>> trace = pd.DataFrame({"trace_id": ["t"] * 4, "timestamp_ms": [0, 1, 2, 3],
...     "topic": ["orders"] * 4, "num_partitions": [15, 15, 16, 16],
...     "key": [b"TT0124", b"TT0124", b"TT0124", None], "value_bytes": [100] * 4,
...     "partition": [None] * 4})
>>> row = score_trace(trace, "java-builtin", seed=1).iloc[0]
>>> row["records_per_partition"][10], int(row["keys_spanning_change"]), int(row["keys_remapped"])
(2, 1, 1)
>>> differing = disagreement(trace, "java-builtin", "librdkafka-default")
>>> differing[["num_partitions", "partition_a", "partition_b", "records"]].values.tolist()
[[15, 10, 9, 2], [16, 6, 11, 1]]
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pandas as pd
import pyarrow as pa

from partitioners.errors import InputError
from partitioners.keytrace import normalize_frame
from partitioners.producer import (
    RECORD_OVERHEAD_BYTES,
    ClusterModel,
    ProducerConfig,
    ProducerRun,
    Records,
    simulate,
)
from partitioners.registry import DEFAULT_BATCH_SIZE, Settings, canonical, create

DEFAULT_LINGER_MS = 5

SCORE_SCHEMA = pa.schema(
    [
        pa.field("trace_id", pa.string()),
        pa.field("partitioner", pa.string()),
        pa.field("records", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("null_key_records", pa.int64()),
        pa.field("explicit_partition_records", pa.int64()),
        pa.field("num_partitions", pa.int32()),
        pa.field("partitions_used", pa.int32()),
        pa.field("records_per_partition", pa.list_(pa.int64())),
        pa.field("bytes_per_partition", pa.list_(pa.int64())),
        pa.field("records_skew", pa.float64()),
        pa.field("bytes_skew", pa.float64()),
        pa.field("batches", pa.int64()),
        pa.field("mean_batch_fill", pa.float64()),
        pa.field("mean_records_per_batch", pa.float64()),
        pa.field("mean_latency_ms", pa.float64()),
        pa.field("partition_count_changes", pa.int32()),
        pa.field("keys_spanning_change", pa.int64()),
        pa.field("keys_remapped", pa.int64()),
        pa.field("batch_size", pa.int64()),
        pa.field("linger_ms", pa.int64()),
        pa.field("seed", pa.int64()),
    ]
)
SCORE_COLUMNS = tuple(SCORE_SCHEMA.names)

DISAGREEMENT_COLUMNS = (
    "trace_id",
    "key",
    "num_partitions",
    "partition_a",
    "partition_b",
    "records",
)


def derived_seed(seed: int, trace_id: str, partitioner: str) -> int:
    """A per (trace, partitioner) seed that is the same in every process (no ``hash()``)."""
    digest = hashlib.sha256(f"{seed}\x00{trace_id}\x00{partitioner}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _records(trace: pd.DataFrame) -> Records:
    explicit = trace["partition"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    return Records.build(
        list(trace["topic"]),
        list(trace["key"]),
        trace["value_bytes"].to_numpy(),
        trace["timestamp_ms"].to_numpy(),
        trace["num_partitions"].to_numpy(),
        explicit,
    )


def _one_trace_id(trace: pd.DataFrame) -> str:
    trace_ids = pd.unique(trace["trace_id"])
    if len(trace_ids) != 1:
        raise InputError(
            "expected the records of exactly one trace", field="trace_id", value=list(trace_ids[:3])
        )
    return str(trace_ids[0])


def _run_normalized(
    trace: pd.DataFrame,
    trace_id: str,
    name: str,
    batch_size: int,
    linger_ms: int,
    seed: int,
    cluster: ClusterModel | None,
) -> ProducerRun:
    """One normalized trace through the producer model with a freshly seeded partitioner
    (callers normalize and read the trace id once: both are per-row work)."""
    rng = random.Random(derived_seed(seed, trace_id, name))
    instance = create(name, rng=rng, settings=Settings(batch_size=batch_size))
    config = ProducerConfig(batch_size=batch_size, linger_ms=linger_ms)
    return simulate(_records(trace), instance, config, cluster)


def score_trace(
    trace: pd.DataFrame,
    partitioner: str,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    linger_ms: int = DEFAULT_LINGER_MS,
    seed: int = 0,
    cluster: ClusterModel | None = None,
) -> pd.DataFrame:
    """One row of ``SCORE_COLUMNS`` for one trace under one partitioner. Pure."""
    if batch_size <= 0:
        raise InputError("must be > 0", field="batch_size", value=batch_size)
    if linger_ms < 0:
        raise InputError("must be >= 0", field="linger_ms", value=linger_ms)
    trace = normalize_frame(trace)
    trace_id = _one_trace_id(trace)
    name = canonical(partitioner)
    run = _run_normalized(trace, trace_id, name, batch_size, linger_ms, seed, cluster)
    return _score_row(trace, trace_id, name, run, batch_size, linger_ms, seed)


def _score_row(
    trace: pd.DataFrame,
    trace_id: str,
    name: str,
    run: ProducerRun,
    batch_size: int,
    linger_ms: int,
    seed: int,
) -> pd.DataFrame:
    partitions = run.partitions.astype(np.int64)
    width = int(trace["num_partitions"].max())
    # the model sized every record as key + value + a fixed overhead: no second pass over keys
    payload = run.record_bytes.astype(np.int64) - RECORD_OVERHEAD_BYTES
    records_per_partition = np.bincount(partitions, minlength=width)
    bytes_per_partition = np.bincount(partitions, weights=payload, minlength=width).astype(np.int64)
    spanning, remapped = remapped_keys(trace, run.partitions)
    batches = len(run.batches)
    row = {
        "trace_id": trace_id,
        "partitioner": name,
        "records": len(trace),
        "bytes": int(payload.sum()),
        "null_key_records": int(trace["key"].isna().sum()),
        "explicit_partition_records": int(trace["partition"].notna().sum()),
        "num_partitions": width,
        "partitions_used": int(np.count_nonzero(records_per_partition)),
        "records_per_partition": records_per_partition.tolist(),
        "bytes_per_partition": bytes_per_partition.tolist(),
        "records_skew": _skew(records_per_partition),
        "bytes_skew": _skew(bytes_per_partition),
        "batches": batches,
        "mean_batch_fill": run.mean_batch_fill(),
        "mean_records_per_batch": (
            sum(b.records for b in run.batches) / batches if batches else 0.0
        ),
        "mean_latency_ms": run.mean_record_latency_ms(),
        "partition_count_changes": _count_changes(trace),
        "keys_spanning_change": spanning,
        "keys_remapped": remapped,
        "batch_size": batch_size,
        "linger_ms": linger_ms,
        "seed": seed,
    }
    return pd.DataFrame([row], columns=list(SCORE_COLUMNS))


def _skew(per_partition: np.ndarray) -> float:
    mean = float(per_partition.mean()) if len(per_partition) else 0.0
    return float(per_partition.max()) / mean if mean > 0 else 0.0


def _count_changes(trace: pd.DataFrame) -> int:
    changes = 0
    for _, group in trace.groupby("topic", sort=True):
        ordered = group.sort_values("timestamp_ms", kind="stable")["num_partitions"].to_numpy()
        changes += int(np.count_nonzero(np.diff(ordered)))
    return changes


def remapped_keys(trace: pd.DataFrame, partitions: np.ndarray) -> tuple[int, int]:
    """(keys with consecutive records on both sides of a partition-count change, those of them
    whose partition differs across the change). Explicitly partitioned records are left out."""
    frame = pd.DataFrame(
        {
            "topic": trace["topic"].to_numpy(),
            "key": trace["key"].to_numpy(),
            "num_partitions": trace["num_partitions"].to_numpy(),
            "timestamp_ms": trace["timestamp_ms"].to_numpy(),
            "partition": np.asarray(partitions),
            "position": np.arange(len(trace)),
        }
    )
    frame = frame[trace["key"].notna().to_numpy() & trace["partition"].isna().to_numpy()]
    if frame.empty:
        return 0, 0
    frame = frame.sort_values(["timestamp_ms", "position"], kind="stable")
    grouped = frame.groupby(["topic", "key"], sort=False)
    previous_count = grouped["num_partitions"].shift()
    previous_partition = grouped["partition"].shift()
    spanning = previous_count.notna() & (previous_count != frame["num_partitions"])
    remapped = spanning & (previous_partition != frame["partition"])
    spanning_keys = frame.loc[spanning, ["topic", "key"]].drop_duplicates()
    remapped_keys_ = frame.loc[remapped, ["topic", "key"]].drop_duplicates()
    return len(spanning_keys), len(remapped_keys_)


def score_traces(
    traces: pd.DataFrame,
    partitioners: list[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    linger_ms: int = DEFAULT_LINGER_MS,
    seed: int = 0,
    cluster: ClusterModel | None = None,
) -> pd.DataFrame:
    """``score_trace`` for every trace (in order of first appearance) x partitioner."""
    rows = [
        score_trace(
            group, name, batch_size=batch_size, linger_ms=linger_ms, seed=seed, cluster=cluster
        )
        for _, group in traces.groupby("trace_id", sort=False)
        for name in partitioners
    ]
    if not rows:
        return empty_scores()
    return pd.concat(rows, ignore_index=True)


def empty_scores() -> pd.DataFrame:
    return SCORE_SCHEMA.empty_table().to_pandas()


def disagreement(
    trace: pd.DataFrame,
    partitioner_a: str,
    partitioner_b: str,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    linger_ms: int = DEFAULT_LINGER_MS,
    seed: int = 0,
) -> pd.DataFrame:
    """Keyed records of one trace that two partitioners place differently, grouped by (key,
    num_partitions, partition under a, partition under b) with a record count. Pure."""
    trace = normalize_frame(trace)
    trace_id = _one_trace_id(trace)
    under_a, under_b = (
        _run_normalized(
            trace, trace_id, canonical(name), batch_size, linger_ms, seed, None
        ).partitions
        for name in (partitioner_a, partitioner_b)
    )
    return _disagreement_of(trace, trace_id, under_a, under_b)


def score_pair(
    trace: pd.DataFrame,
    partitioner_a: str,
    partitioner_b: str,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    linger_ms: int = DEFAULT_LINGER_MS,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``score_trace`` of one trace under both partitioners and their ``disagreement``, from one
    model run per partitioner (the two calls apart would run each twice). Pure."""
    if batch_size <= 0:
        raise InputError("must be > 0", field="batch_size", value=batch_size)
    if linger_ms < 0:
        raise InputError("must be >= 0", field="linger_ms", value=linger_ms)
    trace = normalize_frame(trace)
    trace_id = _one_trace_id(trace)
    rows = []
    partitions = []
    for name in (canonical(partitioner_a), canonical(partitioner_b)):
        run = _run_normalized(trace, trace_id, name, batch_size, linger_ms, seed, None)
        rows.append(_score_row(trace, trace_id, name, run, batch_size, linger_ms, seed))
        partitions.append(run.partitions)
    differing = _disagreement_of(trace, trace_id, partitions[0], partitions[1])
    return pd.concat(rows, ignore_index=True), differing


def _disagreement_of(
    trace: pd.DataFrame, trace_id: str, under_a: np.ndarray, under_b: np.ndarray
) -> pd.DataFrame:
    keyed = trace["key"].notna().to_numpy() & trace["partition"].isna().to_numpy()
    differs = keyed & (under_a != under_b)
    frame = pd.DataFrame(
        {
            "trace_id": trace_id,
            "key": trace["key"].to_numpy()[differs],
            "num_partitions": trace["num_partitions"].to_numpy()[differs],
            "partition_a": under_a[differs],
            "partition_b": under_b[differs],
        }
    )
    if frame.empty:
        return pd.DataFrame({name: [] for name in DISAGREEMENT_COLUMNS})
    grouped = (
        frame.groupby(
            ["trace_id", "key", "num_partitions", "partition_a", "partition_b"], sort=False
        )
        .size()
        .reset_index(name="records")
    )
    return grouped[list(DISAGREEMENT_COLUMNS)]


def keyed_key_count(trace: pd.DataFrame) -> int:
    """Distinct non-null keys of a trace that the application did not pin to a partition."""
    keyed = trace["key"].notna() & trace["partition"].isna()
    return int(trace.loc[keyed, "key"].nunique())
