"""The verdict of a replay: which assignor to adopt, why in one sentence, and what it costs.

From the summary rows (one per trace x assignor) it builds, per assignor, totals over all traces
and the spread per trace (median, p95, worst) of paused partition-seconds, moves, revocations,
rounds and imbalance; then ranks the assignors by paused partition-seconds (fewest first; ties
within :data:`TIE_TOLERANCE` share a rank and are called ties), and, when traces carry what the
real group did (``recorded``), compares the first-ranked assignor with it on those traces.

>>> from assignors.traces.scoring import SummaryRow
>>> def summary(trace, assignor, protocol, paused, revoked, rounds):
...     return SummaryRow(trace, assignor, protocol, 3, 4, 0, 4, revoked, rounds, 1, None, None,
...                       0, 0, 0, 1.25, paused, None, None)
>>> rows = [summary("a", "range", "eager", 120.0, 40, 3),
...         summary("a", "sticky", "eager", 30.0, 10, 3),
...         summary("a", "cooperative-sticky", "cooperative", 12.0, 4, 5)]
>>> result = build_verdict(rows)
>>> [(entry["assignor"], entry["rank"]) for entry in result["ranking"]]
[('cooperative-sticky', 1), ('sticky', 2), ('range', 3)]
>>> print(result["headline"])  # doctest: +NORMALIZE_WHITESPACE
cooperative-sticky: 90% fewer partition-seconds paused than range, the same balance, 1 extra
round per rebalance
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from assignors.traces.scoring import SummaryRow

VERDICT_VERSION = 1
TIE_TOLERANCE = 0.01
"""Two totals are a tie when they differ by at most 1% of the larger (or both are 0)."""
RECORDED = "recorded"

PROTOCOL_LABELS = {"consumer": "consumer (KIP-848)"}
"""How people name a protocol value: KIP-848's ``consumer`` group protocol says so."""


def protocol_label(protocols: Iterable[str]) -> str | None:
    """The label of the protocol(s) recorded for one assignor, joined by "/".

    >>> protocol_label(["consumer"]), protocol_label(["cooperative", "eager"]), protocol_label([])
    ('consumer (KIP-848)', 'cooperative/eager', None)
    """
    labels = [PROTOCOL_LABELS.get(name, name) for name in protocols]
    return "/".join(labels) if labels else None


METRICS: dict[str, tuple[str, str, str]] = {
    # key: (label, unit, what it counts)
    "paused_partition_seconds": (
        "paused partition-seconds",
        "partition-seconds",
        "partitions that stopped being consumed during rebalances, times how long (cost model)",
    ),
    "delayed_weight": (
        "delayed weight-seconds",
        "weight x seconds",
        "paused partitions' weights (records/s or bytes/s) times how long: records/bytes delayed",
    ),
    "warmup_weight": (
        "warm-up weight",
        "weight",
        "weight of the partitions that changed owner: state the new owners rebuild",
    ),
    "moved": ("moved", "partitions", "partitions that changed owner (owner still present)"),
    "min_moved": (
        "moves needed for optimal balance",
        "partitions",
        "fewest moves any assignment reaching the optimal largest load needs",
    ),
    "excess_moved": (
        "moves beyond the least needed",
        "partitions",
        "per rebalance max(0, moved - fewest moves needed for this assignor's own balance)",
    ),
    "revoked": ("revoked", "partitions", "partitions members gave up (eager: all they owned)"),
    "rounds": ("rounds", "rounds", "join/sync rounds the rebalances took"),
    "load_imbalance": (
        "load imbalance",
        "x mean",
        "largest member's partition count over the mean (1.00 = perfect)",
    ),
    "weight_imbalance": (
        "weight imbalance",
        "x mean",
        "largest member's summed partition weight over the mean (1.00 = perfect)",
    ),
}


def _is_tie(first: float, second: float) -> bool:
    largest = max(abs(first), abs(second))
    return largest == 0 or abs(first - second) <= TIE_TOLERANCE * largest


def _quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (a value that occurred), ``q`` in (0, 1]."""
    ordered = sorted(values)
    index = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[index]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "median": _round(_median(values)),
        "p95": _round(_quantile(values, 0.95)),
        "worst": _round(max(values)),
    }


def _round(value: float) -> float:
    return float(round(value, 6))


def _per_trace(row: SummaryRow) -> dict[str, float | None]:
    return {
        "paused_partition_seconds": row.total_paused_partition_seconds,
        "moved": row.total_moved,
        "revoked": row.total_revoked,
        "rounds": row.total_rounds,
        "load_imbalance": row.max_load_imbalance,
        "weight_imbalance": row.max_weight_skew,
    }


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return _round(sum(present)) if present else None


def assignor_stats(rows: Sequence[SummaryRow]) -> dict[str, Any]:
    """Totals and per-trace spreads of one assignor's summary rows."""
    protocols = sorted({row.protocol for row in rows if row.protocol is not None})
    per_trace = [_per_trace(row) for row in rows]
    spreads = {}
    for key in ("paused_partition_seconds", "moved", "revoked", "rounds"):
        spreads[key] = _spread([float(values[key] or 0) for values in per_trace])
    for key in ("load_imbalance", "weight_imbalance"):
        spreads[key] = _spread([v[key] for v in per_trace if v[key] is not None])  # type: ignore[misc]
    return {
        "assignor": rows[0].assignor,
        "protocol": "/".join(protocols) if protocols else None,
        "protocol_label": protocol_label(protocols),
        "traces": len(rows),
        "generations": sum(row.generations for row in rows),
        "rebalances": sum(max(0, row.generations - 1) for row in rows),
        "totals": {
            "paused_partition_seconds": _round(sum(r.total_paused_partition_seconds for r in rows)),
            "delayed_weight": _sum_or_none(r.total_delayed_weight for r in rows),
            "warmup_weight": _sum_or_none(r.total_warmup_weight for r in rows),
            "moved": sum(r.total_moved for r in rows),
            "min_moved": sum(r.total_min_moved for r in rows),
            "excess_moved": sum(r.total_excess_moved for r in rows),
            "revoked": sum(r.total_revoked for r in rows),
            "rounds": sum(r.total_rounds for r in rows),
            "forced": sum(r.total_forced for r in rows),
            "invalid_generations": sum(r.invalid_generations for r in rows),
        },
        "per_trace": spreads,
        "reconcile": _reconcile_stats(rows),
    }


def _reconcile_stats(rows: Sequence[SummaryRow]) -> dict[str, Any] | None:
    """The slowest reconciliation of a KIP-848 (consumer protocol) group: most heartbeats any
    member needed and most seconds until every member reached a target; None without any."""
    heartbeats = [
        r.max_reconcile_heartbeats for r in rows if r.max_reconcile_heartbeats is not None
    ]
    seconds = [r.max_reconcile_seconds for r in rows if r.max_reconcile_seconds is not None]
    if not heartbeats:
        return None
    return {"max_heartbeats": max(heartbeats), "max_seconds": _round(max(seconds, default=0.0))}


def _percent_fewer(value: float, reference: float) -> str:
    """'90% fewer' / '25% more' / 'as many' paused partition-seconds as ``reference``."""
    if _is_tie(value, reference):
        return "as many partition-seconds paused as"
    if value < reference:
        return f"{round(100 * (1 - value / reference))}% fewer partition-seconds paused than"
    if reference == 0:
        return "partition-seconds paused where none were paused by"
    if value >= 2 * reference:
        return f"{value / reference:.1f}x the partition-seconds paused by"
    return f"{round(100 * (value / reference - 1))}% more partition-seconds paused than"


def _balance_phrase(stats: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    """Balance against the reference, by partition count and, when both carry weights, by
    weight (the medians over traces of the largest member over the mean)."""
    compared = []
    for key, unit in (("load_imbalance", "partition count"), ("weight_imbalance", "weight")):
        mine, theirs = stats["per_trace"][key], reference["per_trace"][key]
        if (
            mine is not None
            and theirs is not None
            and not _is_tie(mine["median"], theirs["median"])
        ):
            compared.append(
                f"{mine['median']:.2f}x the mean {unit} against {theirs['median']:.2f}x"
            )
    if not compared:
        return "the same balance"
    return f"largest member {' and '.join(compared)} (median over traces)"


def _rounds_phrase(stats: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    rebalances = reference["rebalances"]
    if rebalances == 0:
        return "no rebalance to compare rounds on"
    extra = (stats["totals"]["rounds"] - reference["totals"]["rounds"]) / rebalances
    if abs(extra) < 0.05:
        return "the same rounds per rebalance"
    amount = f"{abs(extra):.1f}".removesuffix(".0")
    noun = "round" if amount == "1" else "rounds"
    return f"{amount} {'extra' if extra > 0 else 'fewer'} {noun} per rebalance"


def _reason(stats: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    paused = stats["totals"]["paused_partition_seconds"]
    theirs = reference["totals"]["paused_partition_seconds"]
    return (
        f"{stats['assignor']}: {_percent_fewer(paused, theirs)} {reference['assignor']}, "
        f"{_balance_phrase(stats, reference)}, {_rounds_phrase(stats, reference)}"
    )


def _ranking(stats: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    ordered = sorted(
        stats,
        key=lambda s: (
            s["totals"]["paused_partition_seconds"],
            s["totals"]["excess_moved"],
            s["assignor"],
        ),
    )
    ranked: list[tuple[int, Mapping[str, Any]]] = []
    leader: Mapping[str, Any] | None = None  # the first assignor of the current rank
    for position, entry in enumerate(ordered):
        # ties are measured against the rank's first assignor, so they never chain
        if leader is not None and _is_tie(
            leader["totals"]["paused_partition_seconds"],
            entry["totals"]["paused_partition_seconds"],
        ):
            ranked.append((ranked[-1][0], entry))
        else:
            leader = entry
            ranked.append((position + 1, entry))
    return ranked


def build_verdict(
    summary: Iterable[SummaryRow], cost_model: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The verdict document (``verdict.json``), a pure function of the summary rows."""
    by_assignor: dict[str, list[SummaryRow]] = defaultdict(list)
    for row in sorted(summary, key=lambda row: (row.assignor, row.trace_id)):
        by_assignor[row.assignor].append(row)
    stats = {name: assignor_stats(rows) for name, rows in sorted(by_assignor.items())}
    candidates = [entry for name, entry in stats.items() if name != RECORDED]
    ranked = _ranking(candidates)
    document: dict[str, Any] = {
        "version": VERDICT_VERSION,
        "tie_tolerance": TIE_TOLERANCE,
        "cost_model": dict(cost_model) if cost_model is not None else None,
        "traces": len({row.trace_id for rows in by_assignor.values() for row in rows}),
        "assignors": list(stats.values()),
        "ranking": [],
        "headline": None,
        "ties": [],
        "recorded": None,
    }
    if not ranked:
        return document
    best = ranked[0][1]
    baseline = next(
        (entry for _, entry in ranked if entry["assignor"] == "range" and entry is not best),
        ranked[-1][1],
    )
    for rank, entry in ranked:
        reference = baseline if entry is best else best
        document["ranking"].append(
            {
                "rank": rank,
                "assignor": entry["assignor"],
                "protocol": entry["protocol"],
                "reason": _reason(entry, reference),
            }
        )
    document["ties"] = [entry["assignor"] for rank, entry in ranked[1:] if rank == 1]
    headline = (
        _reason(best, baseline)
        if baseline is not best
        else f"{best['assignor']}: the only assignor replayed"
    )
    if document["ties"]:
        headline += f"; tied (within {TIE_TOLERANCE:.0%}) with {', '.join(document['ties'])}"
    document["headline"] = headline
    recorded_rows = by_assignor.get(RECORDED)
    if recorded_rows:
        document["recorded"] = _recorded_comparison(
            recorded_rows, by_assignor[best["assignor"]], best["assignor"]
        )
    return document


def _recorded_comparison(
    recorded: Sequence[SummaryRow], best: Sequence[SummaryRow], best_name: str
) -> dict[str, Any]:
    traces = {row.trace_id for row in recorded}
    theirs = sum(row.total_paused_partition_seconds for row in recorded)
    mine = sum(row.total_paused_partition_seconds for row in best if row.trace_id in traces)
    count = len(traces)
    noun = "trace" if count == 1 else "traces"
    where = f"on the {count} {noun} that record what the real group assigned"
    if _is_tie(mine, theirs):
        change = "as many partition-seconds as"
    elif mine < theirs:
        change = f"{round(100 * (1 - mine / theirs))}% fewer partition-seconds than"
    else:
        change = (
            "more partition-seconds than"
            if theirs == 0
            else (f"{round(100 * (mine / theirs - 1))}% more partition-seconds than")
        )
    sentence = f"{where}, {best_name} would have paused {change} your groups did"
    return {
        "traces": count,
        "recorded_paused_partition_seconds": _round(theirs),
        "best_paused_partition_seconds": _round(mine),
        "sentence": sentence,
    }


def verdict_json(document: Mapping[str, Any]) -> bytes:
    """Deterministic bytes of a verdict document."""
    return (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
