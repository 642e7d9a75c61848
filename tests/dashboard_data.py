"""Test fixtures for the dashboard tests: synthetic replay results written with pyarrow.

The numbers are made up (seeded) but keep the relations the replay guarantees: the first
generation moves nothing, eager assignors revoke everything the survivors owned while
cooperative ones revoke exactly what moved and need an extra round to hand it over,
min_moved <= moved and optimal_max_load <= max_load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dashboards.rebalance.reading import (
    RebalanceResults,
    normalise_scores,
    normalise_summary,
    protocol_labels,
)

ASSIGNORS = ("cooperative-sticky", "range", "roundrobin", "sticky")
COOPERATIVE = frozenset({"cooperative-sticky"})
# fraction of partitions each assignor moves per rebalance, and its spread on top of the optimum
CHURN = {
    "range": 0.45,
    "roundrobin": 0.6,
    "sticky": 0.12,
    "cooperative-sticky": 0.12,
    "recorded": 0.3,
}
EXTRA_SPREAD = {"range": 3, "roundrobin": 1, "sticky": 0, "cooperative-sticky": 0, "recorded": 2}


def synthetic_scores(
    num_traces: int,
    *,
    assignors: Sequence[str] = ASSIGNORS,
    seed: int = 7,
    recorded_every: int = 3,
    trace_prefix: str = "trace-",
    interval_ms: int | None = None,
) -> pd.DataFrame:
    """Score rows for `num_traces` traces x assignors (+ `recorded` on every n-th trace);
    with `interval_ms`, generations are that far apart (the interval_ms column, null on each
    trace's first generation)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 11, size=num_traces)
    trace_index = np.repeat(np.arange(num_traces), lengths)
    starts = np.cumsum(lengths) - lengths
    position = np.arange(len(trace_index)) - np.repeat(starts, lengths)
    generation = position + 1
    partitions = np.repeat(rng.integers(6, 200, size=num_traces), lengths)
    members = rng.integers(1, 13, size=len(trace_index))
    members = np.minimum(members, partitions)
    first = position == 0
    has_weights = np.repeat(rng.random(num_traces) < 0.5, lengths)
    has_racks = np.repeat(rng.random(num_traces) < 0.5, lengths)
    optimal_max = -(-partitions // members)
    trace_ids = np.array([f"{trace_prefix}{index:05d}" for index in range(num_traces)])

    frames = []
    names = list(assignors)
    if recorded_every:
        names.append("recorded")
    for offset, assignor in enumerate(names):
        noise = rng.random(len(trace_index))
        keep = np.ones(len(trace_index), dtype=bool)
        if assignor == "recorded":
            keep = trace_index % recorded_every == 0
        moved = np.where(first, 0, np.floor(partitions * CHURN[assignor] * noise)).astype(int)
        min_moved = np.floor(moved * 0.6).astype(int)
        if assignor == "sticky" or assignor == "cooperative-sticky":
            min_moved = moved - (noise > 0.8)
            min_moved = np.maximum(min_moved, 0)
        forced = np.where(first, 0, rng.integers(0, 4, size=len(trace_index)))
        spread = np.minimum(
            (partitions % members > 0).astype(int)
            + rng.integers(0, EXTRA_SPREAD[assignor] + 1, size=len(trace_index)),
            partitions,
        )
        max_load = optimal_max + (spread > 1) * (spread - 1)
        if assignor in COOPERATIVE:
            revoked = moved
            rounds = 1 + (moved > 0)
        else:
            owned_by_survivors = np.where(first, 0, partitions - forced)
            revoked = np.maximum(owned_by_survivors, moved)
            rounds = np.ones(len(trace_index), dtype=int)
        frame = pd.DataFrame(
            {
                "trace_id": trace_ids[trace_index],
                "assignor": assignor,
                "generation": generation,
                "members": members,
                "partitions": partitions,
                "unassigned": 0,
                "invalid": 0,
                "min_load": max_load - spread,
                "max_load": max_load,
                "spread": spread,
                "balanced": spread <= 1,
                "optimal_max_load": optimal_max,
                "weight_skew": np.where(
                    has_weights, 1.0 + spread / np.maximum(max_load, 1), np.nan
                ),
                "moved": moved,
                "forced": forced,
                "min_moved": min_moved,
                "revoked": revoked,
                "rounds": rounds,
                "rack_mismatch": np.where(
                    has_racks, (noise * 3 * (offset + 1)).astype(int), np.nan
                ),
                "assign_ms": np.where(
                    assignor == "recorded", np.nan, np.round(0.05 + noise * (offset + 1), 3)
                ),
            }
        )
        frames.append(frame[keep])
    scores = pd.concat(frames, ignore_index=True)
    if interval_ms is not None:
        scores["interval_ms"] = pd.array(
            [None if generation == 1 else interval_ms for generation in scores["generation"]],
            dtype="Int64",
        )
    rack_values = scores["rack_mismatch"]
    scores["rack_mismatch"] = pd.array(
        [None if np.isnan(value) else int(value) for value in rack_values], dtype="Int64"
    )
    return scores


def summary_frame(scores: pd.DataFrame) -> pd.DataFrame:
    """The summary rows the replay writes beside the scores (as assignors.traces.scoring's
    summarize does): one per trace x assignor, columns as in summary.parquet (a column absent
    from the scores stays null)."""

    def column(name: str) -> pd.Series:
        if name in scores.columns:
            return pd.to_numeric(scores[name]).astype("float64")
        return pd.Series(np.nan, index=scores.index)

    frame = pd.DataFrame(
        {
            "trace_id": scores["trace_id"],
            "assignor": scores["assignor"],
            "moved": column("moved"),
            "forced": column("forced"),
            "min_moved": column("min_moved"),
            "revoked": column("revoked"),
            "rounds": column("rounds"),
            "spread": column("spread"),
            "weight_skew": column("weight_skew"),
            "assign_ms": column("assign_ms"),
            "invalid_generation": (
                (column("invalid").fillna(0) > 0) | (column("unassigned").fillna(0) > 0)
            ).astype("int64"),
            "unbalanced_generation": (column("spread").fillna(0) > 1).astype("int64"),
        }
    )
    grouped = frame.groupby(["trace_id", "assignor"], sort=True)
    summary = pd.DataFrame(
        {
            "generations": grouped.size(),
            "total_moved": grouped["moved"].sum(min_count=1),
            "total_forced": grouped["forced"].sum(min_count=1),
            "total_min_moved": grouped["min_moved"].sum(min_count=1),
            "total_revoked": grouped["revoked"].sum(min_count=1),
            "total_rounds": grouped["rounds"].sum(min_count=1),
            "max_spread": grouped["spread"].max(),
            "max_weight_skew": grouped["weight_skew"].max(),
            "mean_assign_ms": grouped["assign_ms"].mean(),
            "invalid_generations": grouped["invalid_generation"].sum(),
            "unbalanced_generations": grouped["unbalanced_generation"].sum(),
        }
    ).reset_index()
    for name in summary.columns[2:]:
        if name not in ("max_weight_skew", "mean_assign_ms"):
            summary[name] = summary[name].astype("Int64")
    return summary


def protocols_of(assignors: pd.Series) -> pd.Series:
    """The protocol each fixture assignor runs (recorded groups: eager)."""
    return assignors.map(lambda name: "cooperative" if name in COOPERATIVE else "eager")


def results_of(
    scores: pd.DataFrame,
    errors: Sequence[dict] = (),
    *,
    source: str = "results",
    protocols: dict[str, str] | None = None,
) -> RebalanceResults:
    """In-memory results as read_results gives them, the summary made by summary_frame;
    `protocols` maps assignor -> the protocol recorded for it."""
    recorded = protocols or {}
    return RebalanceResults(
        scores=normalise_scores(scores),
        summary=normalise_summary(summary_frame(scores)),
        protocols=protocol_labels(
            pd.DataFrame({"assignor": list(recorded), "protocol": list(recorded.values())})
        ),
        errors=tuple(errors),
        source=source,
    )


def write_results(
    directory: Path,
    scores: pd.DataFrame,
    *,
    partitioned: bool = False,
    errors: Sequence[dict] = (),
    protocol_in: str | None = None,
) -> Path:
    """Write a results directory the way the replay does: scores.parquet, summary.parquet and
    errors.jsonl; `partitioned` writes both Parquet tables as Spark does (dataset directories
    partitioned by assignor, with _SUCCESS and .crc files); `protocol_in` ("scores" or
    "summary") adds a protocol column to that table."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = summary_frame(scores)
    if protocol_in == "scores":
        scores = scores.assign(protocol=protocols_of(scores["assignor"]))
    elif protocol_in == "summary":
        summary = summary.assign(protocol=protocols_of(summary["assignor"]))
    table = pa.Table.from_pandas(scores, preserve_index=False)
    summary_table = pa.Table.from_pandas(summary, preserve_index=False)
    if partitioned:
        for name, written in (("scores.parquet", table), ("summary.parquet", summary_table)):
            dataset = directory / name
            pq.write_to_dataset(written, dataset, partition_cols=["assignor"])
            (dataset / "_SUCCESS").write_text("")
            for part in sorted(dataset.rglob("*.parquet")):
                (part.parent / f".{part.name}.crc").write_bytes(b"crc\x00\x01")
    else:
        pq.write_table(table, directory / "scores.parquet")
        pq.write_table(summary_table, directory / "summary.parquet")
    with (directory / "errors.jsonl").open("w", encoding="utf-8") as handle:
        for error in errors:
            handle.write(json.dumps(error) + "\n")
    return directory


def _replica(leo: int, hw: int, epoch: int, online: bool = True) -> dict:
    return {"leo": leo, "hw": hw, "leader_epoch": epoch, "online": online}


def s1_like_result(record_prefix: str = "m", consumer: str = "c1") -> dict:
    """A hand-written result in spec/replication.md's shape: the two-round HW lag of S1.

    Leader 2 acknowledges m1 and m2; follower 1 restarts, truncates to its stale HW, takes
    over when 2 crashes, and m2 is gone.
    """
    m1, m2 = f"{record_prefix}1", f"{record_prefix}2"
    steps = [
        ("produce " + m1, {"1": _replica(0, 0, 0), "2": _replica(1, 0, 0)}, [2, 1], 2, []),
        ("fetch 1", {"1": _replica(1, 0, 0), "2": _replica(1, 1, 0)}, [2, 1], 2, [m1]),
        ("fetch 1", {"1": _replica(1, 1, 0), "2": _replica(1, 1, 0)}, [2, 1], 2, [m1]),
        ("produce " + m2, {"1": _replica(1, 1, 0), "2": _replica(2, 1, 0)}, [2, 1], 2, [m1]),
        ("fetch 1", {"1": _replica(2, 1, 0), "2": _replica(2, 2, 0)}, [2, 1], 2, [m1, m2]),
        ("crash 1", {"1": _replica(2, 1, 0, False), "2": _replica(2, 2, 0)}, [2, 1], 2, [m1, m2]),
        ("restart 1", {"1": _replica(1, 1, 0), "2": _replica(2, 2, 0)}, [2, 1], 2, [m1, m2]),
        ("crash 2", {"1": _replica(1, 1, 1), "2": _replica(2, 2, 0, False)}, [1], 1, [m1, m2]),
        ("restart 2", {"1": _replica(1, 1, 1), "2": _replica(1, 1, 1)}, [1, 2], 1, [m1, m2]),
        (
            "consume " + consumer,
            {"1": _replica(1, 1, 1), "2": _replica(1, 1, 1)},
            [1, 2],
            1,
            [m1, m2],
        ),
    ]
    timeline = [
        {
            "step": index,
            "op": op,
            "replicas": replicas,
            "isr": isr,
            "leader": leader,
            "acked": acked,
        }
        for index, (op, replicas, isr, leader, acked) in enumerate(steps)
    ]
    return {
        "name": "s1-two-round-hw-lag",
        "mode": "pre-0.11",
        "leader": 1,
        "leader_epoch": 1,
        "isr": [1, 2],
        "hw": 1,
        "replicas": {
            "1": {
                "log": [[0, 0, m1]],
                "leo": 1,
                "hw": 1,
                "epoch_cache": [[0, 0], [1, 1]],
                "online": True,
            },
            "2": {
                "log": [[0, 0, m1]],
                "leo": 1,
                "hw": 1,
                "epoch_cache": [[0, 0], [1, 1]],
                "online": True,
            },
        },
        "acked": [m1, m2],
        "acked_lost": [m2],
        "diverged": False,
        "consumed": {consumer: [m1]},
        "violations": [
            {"invariant": "StrongIsr", "step": 7, "detail": f"leader 1 lacks acknowledged {m2}"}
        ],
        "timeline": timeline,
    }
