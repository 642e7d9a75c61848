"""Key-trace scoring, one entry point for both engines.

``score_key_trace`` takes the records of one trace (any order of files already resolved: send
order), the partitioner names and the producer settings, and returns a ``TraceOutcome``: one
score row per partitioner, for exactly two partitioners how many keys they place differently,
or the failure that kept the trace from being scored. ``score_paths`` walks files and
directories (the data-file rule of ``ktkbase.files``), reads every file with
``read_trace_file`` and scores every trace, reporting progress to an optional callback.
``ktk partition score`` calls ``score_paths``; the Spark job (``spark_jobs.score_key_traces``)
calls ``read_trace_file`` in its read tasks and ``score_key_trace`` per trace, and only lists,
groups and collects: both engines give the same report.

A file that cannot be read (bad JSON, a value out of range, not Parquet) is one failure naming
file, line and field; it is skipped and the other files still score. A trace whose records are
spread over several files is scored from the files that could be read.

>>> import pandas as pd
>>> rows = pd.DataFrame({"trace_id": ["t"] * 3, "timestamp_ms": [0, 1, 2],
...     "topic": ["orders"] * 3, "num_partitions": [15] * 3,
...     "key": [b"TT0124", b"TT0124", None], "value_bytes": [100] * 3, "partition": [None] * 3})
>>> outcome = score_key_trace(rows, ["java-builtin", "librdkafka-default"], ScoreSettings())
>>> outcome.scores["partitioner"].tolist(), outcome.failure is None
(['java-builtin', 'librdkafka-consistent_random'], True)
>>> outcome.comparison.keys_differing, outcome.comparison.records_differing
(1, 2)
>>> bad = score_key_trace(rows.assign(num_partitions=0), ["java-builtin"], ScoreSettings())
>>> bad.failure.message
'row 1: num_partitions: must be an integer in [1, 1000000] (got 0)'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd
import pyarrow as pa

from partitioners.errors import InputError
from partitioners.keytrace import STDIN_SOURCE, key_trace_files, read_jsonl_stream, read_key_trace
from partitioners.limits import MAX_INT32, MAX_INT64, MIN_INT64, check_int
from partitioners.registry import DEFAULT_BATCH_SIZE, canonical
from partitioners.scoring import (
    DEFAULT_LINGER_MS,
    SCORE_SCHEMA,
    keyed_key_count,
    score_pair,
    score_trace,
)

# stage ("read" or "score"), items done, items in all
Progress = Callable[[str, int, int], None]

STDIN_PATH = "-"


@dataclass(frozen=True, slots=True)
class ScoreSettings:
    """Producer settings of a scoring run (Java ``batch.size``, ``linger.ms``) and the seed of
    the partitioners' draws."""

    batch_size: int = DEFAULT_BATCH_SIZE
    linger_ms: int = DEFAULT_LINGER_MS
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("ScoreSettings", "batch_size", self.batch_size, low=1, high=MAX_INT32)
        check_int("ScoreSettings", "linger_ms", self.linger_ms, low=0, high=MAX_INT32)
        check_int("ScoreSettings", "seed", self.seed, low=MIN_INT64, high=MAX_INT64)


@dataclass(frozen=True, slots=True)
class Comparison:
    """How many keyed records of one trace two partitioners place differently."""

    trace_id: str
    partitioner_a: str
    partitioner_b: str
    keys_differing: int
    records_differing: int
    keyed_keys: int


@dataclass(frozen=True, slots=True)
class Failure:
    """A file or trace that could not be scored; ``message`` is the one line to print (file,
    line or row, field, value)."""

    message: str
    source: str | None = None
    line: int | None = None
    trace_id: str | None = None

    @classmethod
    def of(cls, error: InputError, trace_id: str | None = None) -> Failure:
        return cls(str(error), error.source, error.line, trace_id or error.trace_id)


@dataclass(frozen=True, slots=True, eq=False)
class TraceOutcome:
    """One trace's result: score rows (``SCORE_SCHEMA`` columns, one per partitioner), the
    comparison of exactly two partitioners, or the failure (then ``scores`` is empty)."""

    trace_id: str | None
    scores: pd.DataFrame
    comparison: Comparison | None = None
    failure: Failure | None = None

    def to_json(self) -> str:
        """The outcome as one JSON text (what a Spark task sends back); floats round-trip."""
        return json.dumps(
            {
                "trace_id": self.trace_id,
                "scores": _score_table(self.scores).to_pylist(),
                "comparison": None if self.comparison is None else _fields(self.comparison),
                "failure": None if self.failure is None else _fields(self.failure),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TraceOutcome:
        data = json.loads(text)
        scores = pa.Table.from_pylist(data["scores"], schema=SCORE_SCHEMA).to_pandas()
        comparison = data["comparison"]
        failure = data["failure"]
        return cls(
            data["trace_id"],
            scores,
            None if comparison is None else Comparison(**comparison),
            None if failure is None else Failure(**failure),
        )


@dataclass(frozen=True, slots=True, eq=False)
class KeyTraceReport:
    """Every trace's scores (traces in order of first appearance, partitioners in the order
    given), the two-partitioner comparisons, and the files and traces that failed (files in
    listing order, then traces)."""

    scores: pd.DataFrame
    comparisons: tuple[Comparison, ...]
    failures: tuple[Failure, ...]


def _fields(value: Comparison | Failure) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__slots__}


def _score_table(scores: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(scores, schema=SCORE_SCHEMA, preserve_index=False)


def empty_scores() -> pd.DataFrame:
    return SCORE_SCHEMA.empty_table().to_pandas()


def resolve_partitioners(names: Iterable[str]) -> tuple[str, ...]:
    """Canonical names (aliases resolved); at least one; UnknownPartitionerError otherwise."""
    resolved = tuple(canonical(name) for name in names)
    if not resolved:
        raise InputError("needs at least one name", field="partitioners", value="")
    return resolved


def score_key_trace(
    rows: pd.DataFrame, partitioners: Sequence[str], settings: ScoreSettings
) -> TraceOutcome:
    """Score one trace's records (in send order) under every partitioner; for exactly two,
    also compare them. Pure; bad records give a ``failure``, not an exception."""
    names = resolve_partitioners(partitioners)
    trace_ids = pd.unique(rows["trace_id"]) if "trace_id" in rows.columns else []
    trace_id = str(trace_ids[0]) if len(trace_ids) == 1 else None
    batch_size, linger_ms, seed = settings.batch_size, settings.linger_ms, settings.seed
    try:
        if len(names) == 2:
            scores, differing = score_pair(
                rows, names[0], names[1], batch_size=batch_size, linger_ms=linger_ms, seed=seed
            )
            comparison = Comparison(
                str(scores["trace_id"].iloc[0]),
                names[0],
                names[1],
                int(differing["key"].nunique()) if len(differing) else 0,
                int(differing["records"].sum()) if len(differing) else 0,
                keyed_key_count(rows),
            )
            return TraceOutcome(comparison.trace_id, scores, comparison)
        scores = pd.concat(
            [
                score_trace(rows, name, batch_size=batch_size, linger_ms=linger_ms, seed=seed)
                for name in names
            ],
            ignore_index=True,
        )
        return TraceOutcome(str(scores["trace_id"].iloc[0]), scores)
    except InputError as error:
        return TraceOutcome(trace_id, empty_scores(), failure=Failure.of(error, trace_id))


def read_trace_file(path: str | Path, source: str | None = None) -> pd.DataFrame | Failure:
    """One key-trace file's records, validated, or the failure naming file, line and field.
    ``source`` is the name errors give (default: the path)."""
    name = source if source is not None else str(path)
    try:
        return read_key_trace(path, source=name)
    except InputError as error:
        return Failure.of(error)
    except (PermissionError, IsADirectoryError) as error:
        return Failure(f"{name}: {error.strerror}", name)


def score_frames(
    frames: Sequence[pd.DataFrame],
    partitioners: Sequence[str],
    settings: ScoreSettings,
    progress: Progress | None = None,
) -> list[TraceOutcome]:
    """Outcomes of every trace in ``frames`` (files in order; a trace may span files), in
    order of the trace's first record."""
    if not frames:
        return []
    records = pd.concat(frames, ignore_index=True)
    groups = list(records.groupby("trace_id", sort=False))
    outcomes = []
    for done, (_, rows) in enumerate(groups, start=1):
        outcomes.append(score_key_trace(rows.reset_index(drop=True), partitioners, settings))
        if progress is not None:
            progress("score", done, len(groups))
    return outcomes


def assemble(outcomes: Iterable[TraceOutcome], read_failures: Iterable[Failure]) -> KeyTraceReport:
    """The report of outcomes already in trace order and of files that could not be read."""
    outcomes = list(outcomes)
    scored = [outcome.scores for outcome in outcomes if outcome.failure is None]
    scores = (
        _score_table(pd.concat(scored, ignore_index=True)).to_pandas() if scored else empty_scores()
    )
    comparisons = tuple(o.comparison for o in outcomes if o.comparison is not None)
    failures = (*read_failures, *(o.failure for o in outcomes if o.failure is not None))
    return KeyTraceReport(scores, comparisons, failures)


def score_paths(
    paths: Sequence[str | Path],
    partitioners: Sequence[str],
    settings: ScoreSettings,
    progress: Progress | None = None,
    stdin: IO[bytes] | None = None,
) -> KeyTraceReport:
    """Score every key trace under ``paths`` (files, directories; ``-`` reads JSON Lines from
    ``stdin``). Missing paths raise FileNotFoundError and no trace file at all InputError
    before any work; unreadable files and traces become ``failures``."""
    names = resolve_partitioners(partitioners)
    sources: list[Path | None] = []  # None: standard input
    for path in paths:
        if str(path) == STDIN_PATH:
            sources.append(None)
        else:
            sources.extend(key_trace_files([path]))
    if not sources:
        raise InputError("no key-trace files found", field="TRACE", value=[str(p) for p in paths])
    frames: list[pd.DataFrame] = []
    failures: list[Failure] = []
    for done, source in enumerate(sources, start=1):
        if source is None:
            if stdin is None:
                raise InputError("no standard input to read", field="TRACE", value=STDIN_PATH)
            try:
                read: pd.DataFrame | Failure = read_jsonl_stream(stdin, STDIN_SOURCE)
            except InputError as error:
                read = Failure.of(error)
        else:
            read = read_trace_file(source)
        if isinstance(read, Failure):
            failures.append(read)
        else:
            frames.append(read)
        if progress is not None:
            progress("read", done, len(sources))
    return assemble(score_frames(frames, names, settings, progress), failures)
