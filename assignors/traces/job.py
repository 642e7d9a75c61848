"""The replay job, the same for every engine: one trace's raw rows in, its score and summary
rows (or one failure) out; and a walk over paths that does it for every trace.

The command line's Python engine calls :func:`replay_paths`; the Spark job moves raw rows to
workers and calls :func:`replay_trace_rows` there, then writes what comes back. So both engines
assemble, validate, merge, replay, summarise and fail traces the same way, with the same
reason texts: a trace with a bad row, a trace two inputs disagree on, and a trace an assignor
(a plugin, say) raises on each become one ``errors.jsonl`` line while the others still run.

>>> from assignors.traces.files import RawRow
>>> row = {"trace_id": "g", "generation": 1, "topics": [{"name": "t", "partitions": 4}],
...        "members": [{"member_id": "a", "topics": ["t"]}, {"member_id": "b", "topics": ["t"]}]}
>>> result = replay_trace_rows("g", [RawRow("g.jsonl", 1, row)], ["range"], timings=False)
>>> [(s.assignor, s.protocol, s.generations, s.max_spread) for s in result.summary]
[('range', 'eager', 1, 0)]
>>> broken = dict(row, topics=[{"name": "t", "partitions": -1}])
>>> replay_trace_rows("g", [RawRow("g.jsonl", 1, broken)], ["range"]).reason
'g.jsonl:1: trace g: topics[0].partitions: must be an integer >= 0 (got -1)'
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from assignors import registry
from assignors.base import Assignor
from assignors.traces.cost import CostModel, assignor_protocol, with_costs
from assignors.traces.files import RawRow, raw_rows_by_trace, trace_or_failure
from assignors.traces.format import Trace, TraceFailure, failure_key
from assignors.traces.replay import (
    RECORDED,
    Prepared,
    prepare,
    recorded_protocol,
    replay_recorded,
    replay_with,
)
from assignors.traces.scoring import ScoreRow, SummaryRow, summarize

Progress = Callable[[int, int, str], None]
"""``progress(done, total, current)``: steps (trace x assignor) done of ``total``, and what
runs now (``"trace / assignor"``)."""


class TraceResult(NamedTuple):
    """What one trace gives: score rows in assignor order, one summary row per assignor."""

    scores: list[ScoreRow]
    summary: list[SummaryRow]


class ReplayRun(NamedTuple):
    """What a walk over paths gives: scores and summary of every trace that ran, and the
    failures (sorted; rows naming no trace last)."""

    scores: list[ScoreRow]
    summary: list[SummaryRow]
    failures: list[TraceFailure]


_assignors: dict[str, Assignor] = {}


def _assignor(name: str) -> Assignor:
    """The registry's assignor, loaded once per process (a plugin's entry point is looked up
    on every registry call)."""
    found = _assignors.get(name)
    if found is None:
        found = _assignors[name] = registry.get(name)
    return found


def assignor_failure(trace: Trace, name: str, error: Exception) -> TraceFailure:
    """The failure of a trace an assignor raised on: the whole trace is skipped."""
    source = (trace.generations[0].source or "") if trace.generations else ""
    reason = f"trace {trace.trace_id}: assignor {name} failed: {type(error).__name__}: {error}"
    return TraceFailure(trace.trace_id, source, None, reason)


def replay_trace(
    trace: Trace,
    assignors: Sequence[str],
    *,
    timings: bool = True,
    step: Callable[[str], None] | None = None,
    cost_model: CostModel | None = None,
) -> TraceResult | TraceFailure:
    """Replay one assembled trace through every named assignor (``recorded`` included: no
    rows when the trace carries no ``assigned``); ``step(name)`` is called before each. Rows
    are costed with ``cost_model`` (default :class:`~assignors.traces.cost.CostModel`); the
    summary's protocol is ``consumer`` for KIP-848 server-side assignors."""
    model = cost_model if cost_model is not None else CostModel()
    prepared: Prepared | None = None  # the generations' shared parts, built for the first assignor
    rows: list[ScoreRow] = []
    protocols: dict[tuple[str, str], str] = {}
    for name in assignors:
        if step is not None:
            step(name)
        try:
            if name == RECORDED:
                if not trace.has_recorded_assignment():
                    continue
                protocol = recorded_protocol(trace)
                rows.extend(with_costs(replay_recorded(trace), protocol, model))
            else:
                assignor = _assignor(name)
                protocol = assignor_protocol(assignor)
                if prepared is None:
                    prepared = prepare(trace)
                replayed = replay_with(trace, assignor, timings=timings, prepared=prepared)
                rows.extend(with_costs(replayed, protocol, model))
            protocols[trace.trace_id, name] = protocol
        except Exception as error:  # an assignor crashing on one trace must not stop the run
            return assignor_failure(trace, name, error)
    return TraceResult(rows, summarize(rows, protocols))


def replay_trace_rows(
    trace_id: str,
    raw_rows: Iterable[RawRow],
    assignors: Sequence[str],
    *,
    timings: bool = True,
    step: Callable[[str], None] | None = None,
    cost_model: CostModel | None = None,
) -> TraceResult | TraceFailure:
    """One trace from its raw rows, in reading order (files as listed, rows as read): assemble
    and check it (:func:`~assignors.traces.files.assemble_trace`, which also merges what two
    inputs both carry), then :func:`replay_trace`. The first problem is the failure."""
    assembled = trace_or_failure(trace_id, raw_rows)
    if isinstance(assembled, TraceFailure):
        return assembled
    return replay_trace(assembled, assignors, timings=timings, step=step, cost_model=cost_model)


def replay_paths(
    paths: Iterable[str | os.PathLike[str]],
    assignors: Sequence[str],
    *,
    timings: bool = True,
    progress: Progress | None = None,
    cost_model: CostModel | None = None,
) -> ReplayRun:
    """Every trace under ``paths`` (files or directories) through every named assignor, one
    trace after another in trace id order. Missing paths raise FileNotFoundError."""
    by_trace, failures = raw_rows_by_trace(paths)
    scores: list[ScoreRow] = []
    summary: list[SummaryRow] = []
    trace_failures: list[TraceFailure] = []
    total = len(by_trace) * len(assignors)
    for index, trace_id in enumerate(sorted(by_trace)):
        step = None
        if progress is not None:
            counter = itertools.count(index * len(assignors))

            def step(name: str, trace_id: str = trace_id, counter: Iterator[int] = counter) -> None:
                progress(next(counter), total, f"{trace_id} / {name}")

        outcome = replay_trace_rows(
            trace_id,
            by_trace.pop(trace_id),
            assignors,
            timings=timings,
            step=step,
            cost_model=cost_model,
        )
        if isinstance(outcome, TraceFailure):
            trace_failures.append(outcome)
        else:
            scores.extend(outcome.scores)
            summary.extend(outcome.summary)
    if progress is not None:
        progress(total, total, "")
    return ReplayRun(scores, summary, sorted(trace_failures, key=failure_key) + failures)
