"""Replay rebalance traces through assignors on Spark: the main job.

Data flow (docs/spark.md)::

    trace files (JSONL / JSONL.gz / Parquet; local or any Hadoop-compatible path)
      -> one task per file reads its rows with assignors.traces          (file, line kept)
         and keeps them per trace, pickled once, with an estimated cost   (persisted)
      -> per-trace cost (generations x partitions) collected to the driver
      -> traces planned into buckets, longest-processing-time first (bucket_plan)
      -> rows partitioned by bucket, one task per bucket, 3 buckets per core
      -> each task: assignors.traces.job.replay_trace_rows per trace      (pure Python)
      -> its score rows as one compressed Arrow stream, its summary and error rows (and its
         CPU seconds) collected to the driver
      -> the score streams concatenated, sorted and written with the summary and errors by
         assignors.traces.results into a staged directory (ktkbase.outputs) that is moved
         into place

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
import logging
import marshal
import pickle
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from assignors.model import no_cycle_collection
from assignors.traces import files as trace_files
from assignors.traces import format as trace_format
from assignors.traces import job, results, scoring
from assignors.traces import replay as replay_module
from assignors.traces.cost import CostModel
from ktkbase.errors import KtkError
from ktkbase.outputs import plan_output_directory, staged_directory
from spark_jobs import files
from spark_jobs.session import stage_progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


# rows travel between stages as one serialised list per trace and file: the read task parses
# each row once, and later stages move opaque bytes (no JSON or Arrow round trips)
class TracePart(NamedTuple):
    """One trace's rows from one file (``trace_id`` None: the file's rows naming no trace,
    as failures), with their estimated cost; ``payload`` is the list of
    :class:`~assignors.traces.files.RawRow` in reading order (:func:`rows_payload`), or the
    pickled list of failures."""

    trace_id: str | None
    file_index: int
    cost: int
    payload: bytes


# replay tasks per core: enough that the last task to finish is short, few enough that each
# task's start-up (a Python worker, a round trip) stays small next to its work
BUCKETS_PER_CORE = 3

DEFAULT_COMMAND = "spark_jobs/replay_traces.py"


def read_file_parts(
    uri: str, content: bytes | None = None, name: str | None = None, file_index: int = 0
) -> Iterator[TracePart]:
    """The rows of one trace file by trace, reported under ``name`` (default: the file's own
    name): one :class:`TracePart` per trace in order of first appearance, then one for the
    rows naming no trace (as failures), if any.

    A row that cannot be read stays a raw row with its error; its trace (when the row names
    one) is then reported and skipped as a whole by the replay stage.
    """
    by_trace: dict[str, list[trace_files.RawRow]] = {}
    costs: dict[str, int] = {}
    orphans: list[trace_format.TraceFailure] = []
    # the rows are many small objects without cycles: the cycle collector would only walk them
    with files.readable(uri, content) as (path, source), no_cycle_collection():
        shown = name if name is not None else source
        for trace_id, raw in trace_files.file_raw_rows(path):
            if raw.source != shown or raw.error is not None:
                error = None if raw.error is None else raw.error.replace(path, shown)
                raw = raw._replace(source=shown, error=error)
            if trace_id is None:
                orphans.append(trace_format.TraceFailure(None, shown, raw.line, raw.error or ""))
                continue
            by_trace.setdefault(trace_id, []).append(raw)
            costs[trace_id] = costs.get(trace_id, 0) + row_cost(raw.row)
    for trace_id, rows in by_trace.items():
        yield TracePart(trace_id, file_index, costs[trace_id], rows_payload(rows))
    if orphans:
        yield TracePart(None, file_index, 0, pickle.dumps(orphans, protocol=5))


# marshal writes and reads the parsed rows (dicts, lists, strings, numbers) in half the CPU
# seconds pickle takes (0.20 s against 0.40 s for 2,000 traces, docs/spark.md); rows holding
# anything else (a Parquet timestamp, say) are pickled
_MARSHALLED, _PICKLED = b"M", b"P"


def rows_payload(rows: Sequence[trace_files.RawRow]) -> bytes:
    """``rows`` as bytes for :func:`payload_rows`: marshalled when every value allows it,
    else pickled; the first byte says which.

    >>> from datetime import date
    >>> rows = [trace_files.RawRow("a.jsonl", 1, {"trace_id": "g", "x": [1.5, None, True]})]
    >>> rows_payload(rows)[:1], payload_rows(rows_payload(rows)) == rows
    (b'M', True)
    >>> odd = [trace_files.RawRow("a.parquet", 1, {"day": date(2026, 1, 2)})]
    >>> rows_payload(odd)[:1], payload_rows(rows_payload(odd)) == odd
    (b'P', True)
    """
    try:
        return _MARSHALLED + marshal.dumps([tuple(row) for row in rows])
    except ValueError:  # a value marshal does not know
        return _PICKLED + pickle.dumps(list(rows), protocol=5)


def payload_rows(payload: bytes) -> list[trace_files.RawRow]:
    """The rows :func:`rows_payload` wrote, equal and in the same order."""
    if payload[:1] == _MARSHALLED:
        return [trace_files.RawRow._make(row) for row in marshal.loads(payload[1:])]
    rows: list[trace_files.RawRow] = pickle.loads(payload[1:])
    return rows


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


class TaskOutcome(NamedTuple):
    """What one replay task (a bucket of traces) returns: its rows, and how long it took in
    its Python worker (CPU and wall seconds, from its first input row to its last output).
    ``scores`` is an Arrow IPC stream of its score rows (:func:`scores_stream`): the bulk of
    the results travels as compressed columns, not as pickled row objects the driver would
    unpickle one by one."""

    bucket: int
    traces: int
    cpu_seconds: float
    wall_seconds: float
    scores: bytes
    summary: list[scoring.SummaryRow]
    failures: list[trace_format.TraceFailure]


# zstd: a task's score stream is a seventh of its pickled rows' size, and costs less CPU to
# write than pickling them (docs/spark.md); the JVMs then move a seventh of the bytes. A name,
# not IpcWriteOptions: under spark-submit this module is __main__, pickled with the tasks
STREAM_COMPRESSION = "zstd"


def scores_stream(rows: Sequence[scoring.ScoreRow]) -> bytes:
    """Score rows as one Arrow IPC stream (zstd-compressed, the score schema).

    >>> row = scoring.ScoreRow("g", "range", 1, 2, 4, 0, 0, 2, 2, 0, True, 2, None, 0, 0, 0,
    ...                        0, 1, None, None)
    >>> score_table([scores_stream([row]), scores_stream([])]).to_pylist()[0]["trace_id"]
    'g'
    """
    sink = pa.BufferOutputStream()
    table = scoring.scores_table(rows)
    options = pa.ipc.IpcWriteOptions(compression=STREAM_COMPRESSION)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def score_table(streams: Iterable[bytes]) -> pa.Table:
    """The score rows of every stream in one table (unsorted; the writer sorts)."""
    tables = [pa.ipc.open_stream(stream).read_all() for stream in streams]
    if not tables:
        return scoring.SCORE_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def replay_bucket(
    parts: Iterable[TracePart],
    assignors: Sequence[str],
    timings: bool = True,
    cost_model: CostModel | None = None,
    bucket: int = 0,
) -> TaskOutcome:
    """Replay the traces of one bucket with the domain job, in trace id order; each trace's
    rows in reading order (files as listed, rows as read).

    >>> import json
    >>> row = {"trace_id": "g", "generation": 1, "topics": [{"name": "t", "partitions": 2}],
    ...        "members": [{"member_id": "a", "topics": ["t"]}]}
    >>> parts = list(read_file_parts("hdfs://nn/g.jsonl", json.dumps(row).encode() + b"\\n"))
    >>> [(part.trace_id, part.cost) for part in parts]
    [('g', 2)]
    >>> outcome = replay_bucket(parts, ["range"], timings=False)
    >>> [(row.assignor, row.generations) for row in outcome.summary], outcome.traces
    ([('range', 1)], 1)
    """
    cpu, wall = time.process_time(), time.perf_counter()
    by_trace: dict[str, list[tuple[int, bytes]]] = {}
    for part in parts:
        assert part.trace_id is not None
        by_trace.setdefault(part.trace_id, []).append((part.file_index, part.payload))
    traces = len(by_trace)
    scores: list[scoring.ScoreRow] = []
    summary: list[scoring.SummaryRow] = []
    failures: list[trace_format.TraceFailure] = []
    # unpickled rows and the replay's rows are many small objects without cycles: with the
    # cycle collector on, unpickling alone took 10x longer (it walked them, again and again)
    with no_cycle_collection():
        for trace_id in sorted(by_trace):
            rows = [
                row
                for _, payload in sorted(by_trace.pop(trace_id), key=lambda item: item[0])
                for row in payload_rows(payload)
            ]
            outcome = job.replay_trace_rows(
                trace_id, rows, assignors, timings=timings, cost_model=cost_model
            )
            if isinstance(outcome, trace_format.TraceFailure):
                failures.append(outcome)
            else:
                scores.extend(outcome.scores)
                summary.extend(outcome.summary)
        stream = scores_stream(scores)
    return TaskOutcome(
        bucket,
        traces,
        time.process_time() - cpu,
        time.perf_counter() - wall,
        stream,
        summary,
        failures,
    )


class ScoringJob(NamedTuple):
    """The replay stage, planned: ``scored`` yields one :class:`TaskOutcome` per task (a
    bucket of traces); ``parts`` (the rows read, by trace and file) is persisted: unpersist
    once collected."""

    scored: Any  # pyspark RDD of TaskOutcome
    orphan_errors: list[trace_format.TraceFailure]
    parts: Any  # pyspark RDD of TracePart
    plan: BucketPlan


def replay_buckets(spark: SparkSession, trace_count: int) -> int:
    """How many replay tasks: :data:`BUCKETS_PER_CORE` per core of the cluster
    (``defaultParallelism``), never more than there are traces."""
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    return max(1, min(trace_count, BUCKETS_PER_CORE * cores))


def _read_stage(spark: SparkSession, paths: Sequence[str]) -> Any:
    """An RDD of the :class:`TracePart` of every input file: one task per file (up to 4 per
    core), local files read in place, remote ones from the bytes Spark's binaryFile source
    read."""
    found = files.list_inputs(spark, paths, trace_files.TRACE_SUFFIXES)
    # listing order decides which of a trace's rows comes first, as in the Python engine
    indexed = {location: (index, name) for index, (location, name) in enumerate(found)}
    context = spark.sparkContext
    local = [location for location, _ in found if files.local_name(location) is not None]
    remote = [location for location, _ in found if files.local_name(location) is None]

    def read(entry: tuple[str, bytes | None]) -> Iterator[TracePart]:
        uri, content = entry
        index, name = indexed.get(uri, (len(indexed), uri))
        return read_file_parts(uri, content, name, index)

    sources = []
    if local:
        slices = max(1, min(len(local), 4 * context.defaultParallelism))
        sources.append(context.parallelize([(uri, None) for uri in local], slices))
    if remote:
        loaded = spark.read.format("binaryFile").load(remote).select("path", "content")
        sources.append(loaded.rdd.map(lambda row: (row[0], row[1])))
    if not sources:
        return context.emptyRDD()
    return (sources[0] if len(sources) == 1 else context.union(sources)).flatMap(read)


def build_scores(
    spark: SparkSession,
    paths: Sequence[str],
    assignors: Sequence[str],
    timings: bool = True,
    cost_model: CostModel | None = None,
) -> ScoringJob:
    """Read the rows, plan the traces into buckets by cost, and the replay stage over them."""
    from pyspark import StorageLevel

    parts = _read_stage(spark, paths).persist(StorageLevel.MEMORY_AND_DISK)
    # a cheap pass over the read rows (one number per trace and file, and the rows naming no
    # trace) lets the driver balance the heavy stage: the input is split by trace, not by
    # file, so one large file spreads over every core
    costs: dict[str, int] = {}
    orphan_errors: list[trace_format.TraceFailure] = []
    for trace_id, cost, orphans in parts.map(
        lambda part: (part.trace_id, part.cost, part.payload if part.trace_id is None else None)
    ).collect():
        if trace_id is None:
            orphan_errors.extend(pickle.loads(orphans))
        else:
            costs[trace_id] = costs.get(trace_id, 0) + cost
    plan = bucket_plan(costs, replay_buckets(spark, len(costs)))
    log.info(
        "%d traces in %d replay tasks (largest task %.2fx the mean cost)",
        len(costs),
        len(plan.loads),
        plan.imbalance(),
    )
    bucket_of = spark.sparkContext.broadcast(plan.bucket_of)
    names = list(assignors)

    def replay_partition(pairs: Iterable[tuple[int, TracePart]]) -> Iterator[TaskOutcome]:
        from pyspark import TaskContext

        task = TaskContext.get()
        bucket = task.partitionId() if task is not None else 0
        yield replay_bucket((part for _, part in pairs), names, timings, cost_model, bucket)

    keyed = parts.filter(lambda part: part.trace_id is not None).map(
        lambda part: (bucket_of.value[part.trace_id], part)
    )
    scored = keyed.partitionBy(len(plan.loads), lambda bucket: bucket).mapPartitions(
        replay_partition
    )
    return ScoringJob(scored, orphan_errors, parts, plan)


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
    with stage_progress(
        spark,
        group=_PROGRESS_GROUP,
        description="replaying traces",
        tasks=len(plan.loads),
        total=len(plan.bucket_of),
        progress=progress,
    ):
        yield


class RunResult(NamedTuple):
    """What a run wrote: the summary rows (sorted by trace, assignor) and the skipped traces,
    the same values the Python engine returns; and how the traces were spread over tasks."""

    summary: list[scoring.SummaryRow]
    errors: list[trace_format.TraceFailure]
    plan: BucketPlan | None = None
    tasks: tuple[TaskTiming, ...] = ()


class TaskTiming(NamedTuple):
    """How long one replay task ran in its Python worker (see :class:`TaskOutcome`)."""

    bucket: int
    traces: int
    cpu_seconds: float
    wall_seconds: float


def _collected(
    outcomes: Sequence[TaskOutcome],
) -> tuple[pa.Table, list[scoring.SummaryRow], list[trace_format.TraceFailure]]:
    """Scores (one table), summary and error rows of every task on the driver (they are small
    next to the work that made them); logs how the tasks' CPU seconds spread."""
    summary, failures = [], []
    for outcome in outcomes:
        summary.extend(outcome.summary)
        failures.extend(outcome.failures)
    scores = score_table(outcome.scores for outcome in outcomes)
    if outcomes:
        seconds = sorted(outcome.cpu_seconds for outcome in outcomes)
        log.info(
            "%d replay tasks, CPU seconds min %.1f / median %.1f / max %.1f",
            len(seconds),
            seconds[0],
            seconds[len(seconds) // 2],
            seconds[-1],
        )
    return scores, summary, failures


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

    Writes ``scores.parquet``, ``summary.parquet``, ``errors.jsonl``, ``verdict.json`` and the
    manifest ``.ktk-output.json`` (``command``, ``version``, the inputs) by the rules of
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
            with _watched(spark, planned.plan, progress), no_cycle_collection():
                outcomes = planned.scored.collect()
            scores, summary, failures = _collected(outcomes)
        finally:
            planned.parts.unpersist()
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
    tasks = tuple(
        TaskTiming(outcome.bucket, outcome.traces, outcome.cpu_seconds, outcome.wall_seconds)
        for outcome in sorted(outcomes, key=lambda outcome: outcome.bucket)
    )
    return RunResult(summary, errors, planned.plan, tasks)


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
