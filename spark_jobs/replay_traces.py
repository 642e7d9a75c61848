"""Replay rebalance traces through assignors on Spark: the main job.

Data flow (docs/spark.md)::

    trace files (JSONL / JSONL.gz / Parquet; local or any Hadoop-compatible path)
      -> one task per file reads its rows with assignors.traces          (file, line kept)
      -> per-trace cost (generations x partitions) aggregated to the driver
      -> traces planned into buckets, longest-processing-time first (bucket_plan)
      -> rows partitioned by bucket, one task per bucket, 2-4 buckets per core
      -> each task: assignors.traces.job.replay_trace_rows per trace      (pure Python)
      -> score, summary and error rows collected to the driver
      -> scores.parquet, summary.parquet, errors.jsonl written by assignors.traces.results
         into a staged directory (ktkbase.outputs) that is moved into place

The job only distributes: listing, grouping and writing. Parsing, validation, merging,
assignment, scoring and the failure of a trace are the domain job's
(:mod:`assignors.traces.job`), so a trace gives the same rows and the same errors here as with
``ktk replay --engine python``, and with ``--no-timings`` the same bytes.

Runnable as ``spark-submit spark_jobs/replay_traces.py TRACES... --out DIR`` or through
``ktk replay ... --engine spark``.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd
import pyarrow as pa

from assignors.traces import files as trace_files
from assignors.traces import format as trace_format
from assignors.traces import job, results, scoring
from assignors.traces import replay as replay_module
from assignors.traces.cost import CostModel
from ktkbase.errors import KtkError
from ktkbase.outputs import plan_output_directory, staged_directory
from spark_jobs import files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# rows travel between stages as JSON text: the trace format is nested and open-ended
RAW_ROW_SCHEMA = (
    "trace_id string, source string, line long, row string, error string, "
    "file_index long, row_index long, cost long"
)
RAW_ROW_COLUMNS = (
    "trace_id",
    "source",
    "line",
    "row",
    "error",
    "file_index",
    "row_index",
    "cost",
)

ERROR_COLUMNS = ("error_file", "error_line", "error_reason")
# replay tasks per core: enough that the last task to finish is short, few enough that each
# task's start-up (a Python worker, a round trip) stays small next to its work
BUCKETS_PER_CORE = 3

# one output table per trace: score rows, summary rows and error rows told apart by row_kind
SCORE_ROW, SUMMARY_ROW, ERROR_ROW = "score", "summary", "error"
_SUMMARY_ONLY = [f for f in scoring.SUMMARY_SCHEMA if f.name not in scoring.SCORE_SCHEMA.names]
OUTPUT_SCHEMA = pa.schema([*scoring.SCORE_SCHEMA, *_SUMMARY_ONLY])
OUTPUT_COLUMNS = (*OUTPUT_SCHEMA.names, *ERROR_COLUMNS, "row_kind")

DEFAULT_COMMAND = "spark_jobs/replay_traces.py"


def read_file_rows(
    uri: str, content: bytes | None = None, name: str | None = None, file_index: int = 0
) -> Iterator[tuple[object, ...]]:
    """Rows of one trace file as (trace_id, source, line, row JSON, error, file_index,
    row_index), reported under ``name`` (default: the file's own name).

    A row that cannot be read becomes an error row; its trace (when the row names one) is then
    reported and skipped as a whole by the replay stage.
    """
    with files.readable(uri, content) as (path, source):
        shown = name if name is not None else source
        for row_index, (trace_id, raw) in enumerate(trace_files.file_raw_rows(path)):
            text = None if raw.row is None else json.dumps(raw.row)
            error = None if raw.error is None else raw.error.replace(path, shown)
            cost = row_cost(raw.row)
            yield (trace_id, shown, raw.line or 0, text, error, file_index, row_index, cost)


def row_cost(row: object) -> int:
    """Estimated work of replaying one trace row (a generation): its partition count, at least
    1. Only an estimate for planning: a row the domain job rejects still costs 1.

    >>> row_cost({"topics": [{"name": "a", "partitions": 6}, {"name": "b", "partitions": 2}]})
    8
    >>> row_cost({"topics": "bad"}), row_cost(None)
    (1, 1)
    """
    total = 0
    topics = row.get("topics") if isinstance(row, dict) else None
    if isinstance(topics, list):
        for topic in topics:
            count = topic.get("partitions") if isinstance(topic, dict) else None
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                total += count
    return max(1, total)


class BucketPlan(NamedTuple):
    """Which bucket (replay task) each trace goes to, and each bucket's planned cost."""

    bucket_of: dict[str, int]
    loads: list[int]

    def imbalance(self) -> float:
        """Largest bucket's cost over the mean bucket's (1.0: perfectly even).

        >>> BucketPlan({}, [4, 2]).imbalance()
        1.3333333333333333
        """
        if not self.loads or sum(self.loads) == 0:
            return 1.0
        return max(self.loads) / (sum(self.loads) / len(self.loads))


def bucket_plan(costs: Mapping[str, int], buckets: int) -> BucketPlan:
    """Traces into ``buckets`` buckets, longest-processing-time first: the costliest trace
    goes to the least loaded bucket, then the next. The largest bucket then holds at most
    4/3 of the optimum, and never more than the mean plus one trace. Deterministic: ties are
    broken by trace id, then bucket number. Never more buckets than traces.

    >>> plan = bucket_plan({"a": 5, "b": 4, "c": 3, "d": 3, "e": 1}, 2)
    >>> plan.bucket_of, plan.loads
    ({'a': 0, 'b': 1, 'c': 1, 'd': 0, 'e': 1}, [8, 8])
    """
    count = max(1, min(buckets, len(costs)))
    heap = [(0, index) for index in range(count)]
    loads = [0] * count
    bucket_of: dict[str, int] = {}
    for trace_id, cost in sorted(costs.items(), key=lambda item: (-item[1], item[0])):
        load, index = heapq.heappop(heap)
        bucket_of[trace_id] = index
        loads[index] = load + cost
        heapq.heappush(heap, (loads[index], index))
    return BucketPlan(bucket_of, loads)


def _raw_rows(rows: Sequence[tuple[Any, ...]]) -> list[trace_files.RawRow]:
    """One trace's rows (:data:`RAW_ROW_COLUMNS` tuples) as the domain job's raw rows, in
    reading order: files as listed, rows as they stand in each file."""
    ordered = sorted(rows, key=lambda row: (row[5], row[6]))
    return [
        trace_files.RawRow(
            source, int(line) or None, None if text is None else json.loads(text), error
        )
        for _, source, line, text, error, *_ in ordered
    ]


def _replay_trace(
    rows: Sequence[tuple[Any, ...]],
    assignors: Sequence[str],
    timings: bool,
    cost_model: CostModel | None = None,
) -> list[list[Any]]:
    """Replay one trace (``rows``: its raw rows, :data:`RAW_ROW_COLUMNS` tuples) with the
    domain job.

    The output rows (:data:`OUTPUT_COLUMNS` lists) are its score rows, then its summary rows
    (one per assignor), or a single error row, told apart by ``row_kind``.
    """
    trace_id = str(rows[0][0])
    outcome = job.replay_trace_rows(
        trace_id, _raw_rows(rows), assignors, timings=timings, cost_model=cost_model
    )
    if isinstance(outcome, trace_format.TraceFailure):
        error = (trace_id, outcome.file, outcome.line, outcome.reason)
        return _output_rows(ERROR_ROW, [error], ("trace_id", *ERROR_COLUMNS))
    return [
        *_output_rows(SCORE_ROW, outcome.scores, scoring.ScoreRow._fields),
        *_output_rows(SUMMARY_ROW, outcome.summary, scoring.SummaryRow._fields),
    ]


_OUTPUT_POSITION = {name: position for position, name in enumerate(OUTPUT_COLUMNS)}


def _output_rows(kind: str, records: Sequence[tuple], fields: Sequence[str]) -> list[list[Any]]:
    """Rows of one kind with every output column (absent ones, and NaN, None).

    >>> (row,) = _output_rows(ERROR_ROW, [("t", "f.jsonl", 3, "x")], ("trace_id", *ERROR_COLUMNS))
    >>> [value for value in row if value is not None]
    ['t', 'f.jsonl', 3, 'x', 'error']
    """
    positions = [_OUTPUT_POSITION[name] for name in fields]
    rows = []
    for record in records:
        row: list[Any] = [None] * len(OUTPUT_COLUMNS)
        for position, value in zip(positions, record, strict=True):
            row[position] = None if isinstance(value, float) and value != value else value
        row[-1] = kind
        rows.append(row)
    return rows


class ScoringJob(NamedTuple):
    """The replay stage, planned: ``scored`` yields one column dict of output rows per task
    (a bucket of traces); ``raw_rows`` is persisted (unpersist once collected)."""

    scored: Any  # pyspark RDD of dict[str, list]
    orphan_errors: list[trace_format.TraceFailure]
    raw_rows: DataFrame
    plan: BucketPlan


def replay_buckets(spark: SparkSession, trace_count: int) -> int:
    """How many replay tasks: :data:`BUCKETS_PER_CORE` per core of the cluster
    (``defaultParallelism``), never more than there are traces."""
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    return max(1, min(trace_count, BUCKETS_PER_CORE * cores))


def build_scores(
    spark: SparkSession,
    paths: Sequence[str],
    assignors: Sequence[str],
    timings: bool = True,
    cost_model: CostModel | None = None,
) -> ScoringJob:
    """Read the rows, plan the traces into buckets by cost, and the replay stage over them."""
    from pyspark.sql import functions as F

    found = files.list_inputs(spark, paths, trace_files.TRACE_SUFFIXES)
    # listing order decides which of a trace's rows comes first, as in the Python engine
    indexed = {location: (index, name) for index, (location, name) in enumerate(found)}

    def read(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            for uri, content in zip(batch["path"], batch["content"], strict=True):
                index, name = indexed.get(uri, (len(indexed), uri))
                rows = list(read_file_rows(uri, content, name, index))
                yield pd.DataFrame(rows, columns=RAW_ROW_COLUMNS, dtype=object)

    listed = files.listing(spark, [location for location, _ in found])
    raw_rows = listed.mapInPandas(read, RAW_ROW_SCHEMA).persist()

    orphan_errors = [
        trace_format.TraceFailure(None, row["source"], row["line"] or None, row["error"])
        for row in raw_rows.filter(F.col("trace_id").isNull()).collect()
    ]
    named = raw_rows.filter(F.col("trace_id").isNotNull())
    # a cheap aggregate (one number per trace) lets the driver balance the heavy stage: the
    # input is split by trace, not by file, so one large file spreads over every core
    costs = {
        row["trace_id"]: int(row["cost"])
        for row in named.groupBy("trace_id").agg(F.sum("cost").alias("cost")).collect()
    }
    plan = bucket_plan(costs, replay_buckets(spark, len(costs)))
    log.info(
        "%d traces in %d replay tasks (largest task %.2fx the mean cost)",
        len(costs),
        len(plan.loads),
        plan.imbalance(),
    )
    bucket_of = spark.sparkContext.broadcast(plan.bucket_of)
    names = list(assignors)

    def replay_partition(pairs: Iterable[tuple[int, tuple[Any, ...]]]) -> Iterator[dict]:
        by_trace: dict[str, list[tuple[Any, ...]]] = {}
        for _, row in pairs:
            by_trace.setdefault(row[0], []).append(row)
        rows = [
            row
            for trace_id in sorted(by_trace)
            for row in _replay_trace(by_trace[trace_id], names, timings, cost_model)
        ]
        if rows:
            yield {name: [row[i] for row in rows] for i, name in enumerate(OUTPUT_COLUMNS)}

    keyed = named.select(*RAW_ROW_COLUMNS).rdd.map(
        lambda row: (bucket_of.value[row[0]], tuple(row))
    )
    scored = keyed.partitionBy(len(plan.loads), lambda bucket: bucket).mapPartitions(
        replay_partition
    )
    return ScoringJob(scored, orphan_errors, raw_rows, plan)


_PROGRESS_GROUP = "ktk-replay"


@contextlib.contextmanager
def _watched(
    spark: SparkSession, plan: BucketPlan, progress: Callable[[int, int], None] | None
) -> Iterator[None]:
    """Report replayed traces to ``progress`` while the replay stage runs: Spark's status
    tracker counts the finished tasks of the stage with one task per bucket."""
    if progress is None:
        yield
        return
    context = spark.sparkContext
    total, tasks = len(plan.bucket_of), len(plan.loads)
    stopped = threading.Event()

    def watch() -> None:
        tracker = context.statusTracker()
        while not stopped.wait(0.3):
            finished = 0
            for job_id in tracker.getJobIdsForGroup(_PROGRESS_GROUP):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None and stage.numTasks == tasks:
                        finished = max(finished, stage.numCompletedTasks)
            progress(total * finished // max(1, tasks), total)

    context.setJobGroup(_PROGRESS_GROUP, "replaying traces")
    progress(0, total)
    watcher = threading.Thread(target=watch, name="ktk-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stopped.set()
        watcher.join(timeout=5)
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    progress(total, total)


class RunResult(NamedTuple):
    """What a run wrote: the summary rows (sorted by trace, assignor) and the skipped traces,
    the same values the Python engine returns; and how the traces were spread over tasks."""

    summary: list[scoring.SummaryRow]
    errors: list[trace_format.TraceFailure]
    plan: BucketPlan | None = None


def _collected(
    parts: Iterable[dict[str, list[Any]]],
) -> tuple[list[scoring.ScoreRow], list[scoring.SummaryRow], list[trace_format.TraceFailure]]:
    """Score, summary and error rows on the driver, from each task's column lists (the results
    are small next to the work that made them)."""
    scores, summary, failures = [], [], []
    score_fields = scoring.ScoreRow._fields
    summary_fields = scoring.SummaryRow._fields
    for columns in parts:
        for index, kind in enumerate(columns["row_kind"]):
            if kind == SCORE_ROW:
                scores.append(scoring.ScoreRow(*(_plain(columns[f][index]) for f in score_fields)))
            elif kind == SUMMARY_ROW:
                summary.append(
                    scoring.SummaryRow(*(_plain(columns[f][index]) for f in summary_fields))
                )
            elif kind == ERROR_ROW:
                failures.append(
                    trace_format.TraceFailure(
                        columns["trace_id"][index],
                        columns["error_file"][index],
                        _plain(columns["error_line"][index]),
                        columns["error_reason"][index],
                    )
                )
    return scores, summary, failures


def _plain(value: Any) -> Any:
    """A numpy scalar or NaN as the plain Python value (None for missing)."""
    if value is None:
        return None
    if isinstance(value, float) and value != value:
        return None
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _output(
    out_dir: str, command: str, version: str | None, inputs: Sequence[str], force: bool
) -> AbstractContextManager[Any]:
    """The checked staging directory for a local ``out_dir`` (raises OutputError before any
    JVM starts when it may not be written); None for a Hadoop URI (checked once Spark runs)."""
    if files.is_local(out_dir):
        local_inputs = [local for path in inputs if (local := files.local_name(path)) is not None]
        return results.open_results(
            out_dir, command=command, version=version, inputs=local_inputs, force=force
        )
    return nullcontext(None)


def run(
    paths: Sequence[str],
    assignors: Sequence[str],
    out_dir: str,
    *,
    timings: bool = True,
    master: str | None = None,
    conf: Sequence[str] | dict[str, str] = (),
    spark: SparkSession | None = None,
    command: str = DEFAULT_COMMAND,
    version: str | None = None,
    force: bool = False,
    cost_model: CostModel | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Replay every trace under ``paths`` through ``assignors``; write results to ``out_dir``.

    Writes ``scores.parquet``, ``summary.parquet``, ``errors.jsonl`` and the manifest
    ``.ktk-output.json`` (``command``, ``version``, the inputs) by the rules of
    :mod:`ktkbase.outputs`: staged beside ``out_dir`` and moved into place, refusing a
    directory ktk did not create (unless ``force``), one that is or holds an input, and the
    current directory. Local paths are written with :mod:`assignors.traces.results` (the
    Python engine's writer), other URIs through Hadoop's FileSystem API. Missing local inputs
    and a refused local ``out_dir`` raise before any JVM starts. ``progress(done, total)`` is
    called with the traces replayed so far (estimated from finished tasks). Returns the
    summary rows, the skipped traces and the bucket plan.
    """
    files.check_local_inputs(paths)
    with _output(out_dir, command, version, paths, force) as local_staging:
        if spark is None:
            from spark_jobs.session import get_session, parse_conf

            conf_map = dict(conf) if isinstance(conf, dict) else parse_conf(conf)
            spark = get_session(master=master, conf=conf_map, app_name="ktk-replay")
        from spark_jobs.session import prepare_executors

        prepare_executors(spark)
        remote = None
        if local_staging is None:
            fs = files.HadoopFileSystem(spark)
            plan = plan_output_directory(
                out_dir,
                command=command,
                version=version if version is not None else results.default_version(),
                inputs=list(paths),
                force=force,
                fs=fs,
            )
            remote = (fs, plan)
        planned = build_scores(spark, paths, assignors, timings=timings, cost_model=cost_model)
        try:
            with _watched(spark, planned.plan, progress):
                parts = planned.scored.collect()
            scores, summary, failures = _collected(parts)
        finally:
            planned.raw_rows.unpersist()
        errors = planned.orphan_errors
        errors = failures + errors
        if local_staging is not None:
            results.write_result_files(local_staging, scores, errors, summary, cost_model)
        else:
            assert remote is not None
            fs, plan = remote
            with staged_directory(plan) as staging:
                for name, data in results.result_files(scores, errors, summary, cost_model).items():
                    fs.write_bytes(fs.join(staging, name), data)
    summary.sort(key=lambda row: (row.trace_id, row.assignor))
    errors.sort(key=lambda failure: (failure.trace_id is None, trace_format.failure_key(failure)))
    return RunResult(summary, errors, planned.plan)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/replay_traces.py TRACES... --out DIR [--assignors a,b]``."""
    from assignors import registry

    parser = argparse.ArgumentParser(prog="replay_traces.py", description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+", help="trace files or directories (any Hadoop URI)")
    parser.add_argument(
        "--out",
        required=True,
        help="results directory: created, or replaced only when an earlier ktk run wrote it",
    )
    parser.add_argument("--assignors", default=",".join([*registry.builtin_names(), "recorded"]))
    parser.add_argument("--strict", action="store_true", help="exit 1 when any trace is bad")
    parser.add_argument("--no-timings", action="store_true", help="null assign_ms: byte-stable")
    parser.add_argument(
        "--force", action="store_true", help="write ktk's files into a directory ktk did not create"
    )
    parser.add_argument("--master", default=None)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.assignors.split(",") if name.strip()]
    for name in names:
        if name != replay_module.RECORDED:
            registry.get(name)
    try:
        result = run(
            args.traces,
            names,
            args.out,
            timings=not args.no_timings,
            master=args.master,
            conf=args.conf,
            force=args.force,
        )
    except KtkError as failure:  # bad input, refused output, executors that cannot run the job
        print(f"error: {failure}", file=sys.stderr)
        return 2
    for error in result.errors:
        print(f"skipped trace {error.trace_id}: {error.reason}", file=sys.stderr)
    print(f"{len(result.summary)} trace x assignor summaries written to {args.out}")
    return 1 if args.strict and result.errors else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
