"""Replay rebalance traces through assignors on Spark: the main job.

Data flow (docs/spark.md)::

    trace files (JSONL / JSONL.gz / Parquet; local or any Hadoop-compatible path)
      -> one task per file reads its rows with assignors.traces          (file, line kept)
      -> rows grouped by trace id, crossed with the assignor names
      -> applyInPandas: assignors.traces.replay per (trace, assignor)           (pure Python)
      -> scores + summary Parquet partitioned by assignor, errors.jsonl
      -> committed by renaming a temporary directory

The job only distributes: parsing, validation, assignment and scoring are the domain package's
functions, so a trace gives the same rows here as with ``ktk replay --engine python``.

Runnable as ``spark-submit spark_jobs/replay_traces.py TRACES... --out DIR`` or through
``ktk replay ... --engine spark``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import pandas as pd
import pyarrow as pa

from assignors.errors import InputError
from assignors.traces import files as trace_files
from assignors.traces import format as trace_format
from assignors.traces import replay as replay_module
from assignors.traces import results, scoring
from spark_jobs import files
from spark_jobs.schemas import spark_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# rows travel between stages as JSON text: the trace format is nested and open-ended
RAW_ROW_SCHEMA = "trace_id string, source string, line long, row string, error string"
RAW_ROW_COLUMNS = ("trace_id", "source", "line", "row", "error")

ERROR_COLUMNS = ("error_file", "error_line", "error_reason")
BUCKETS_PER_SHUFFLE_PARTITION = 4

# one output table per trace: score rows, summary rows and error rows told apart by row_kind
SCORE_ROW, SUMMARY_ROW, ERROR_ROW = "score", "summary", "error"
_SUMMARY_ONLY = [f for f in scoring.SUMMARY_SCHEMA if f.name not in scoring.SCORE_SCHEMA.names]
OUTPUT_SCHEMA = pa.schema([*scoring.SCORE_SCHEMA, *_SUMMARY_ONLY])
OUTPUT_COLUMNS = (*OUTPUT_SCHEMA.names, *ERROR_COLUMNS, "row_kind")


def read_file_rows(uri: str, content: bytes | None = None) -> Iterator[tuple[object, ...]]:
    """Rows of one trace file as (trace_id, source, line, row JSON, error).

    A row that cannot be read becomes an error row; its trace (when the row names one) is then
    reported and skipped as a whole by the replay stage.
    """
    with files.readable(uri, content) as (path, source):
        yield from _rows_of(path, source)


def _rows_of(path: str, source: str) -> Iterator[tuple[object, ...]]:
    for trace_id, raw in trace_files.file_raw_rows(path):
        text = None if raw.row is None else json.dumps(raw.row)
        error = None if raw.error is None else raw.error.replace(path, source)
        yield (trace_id, source, raw.line or 0, text, error)


def _assemble(trace_id: str, rows: pd.DataFrame) -> trace_format.Trace | trace_format.TraceFailure:
    """One trace from its raw rows (in file, line order); the first bad row fails it."""
    raw_rows = [
        trace_files.RawRow(source, int(line), None if text is None else json.loads(text), error)
        for source, line, text, error in zip(
            rows["source"], rows["line"], rows["row"], rows["error"], strict=True
        )
    ]
    try:
        return trace_files.assemble_trace(trace_id, raw_rows)
    except InputError as problem:
        return trace_format.TraceFailure(trace_id, problem.source or "", problem.line, str(problem))


def _replay_trace(rows: pd.DataFrame, assignors: Sequence[str], timings: bool) -> pd.DataFrame:
    """Replay one trace (the group's rows are its raw rows) through every assignor.

    The trace is read once; the output holds its score rows, then its summary rows (one per
    assignor), or a single error row, told apart by ``row_kind``.
    """
    ordered = rows.sort_values(["source", "line"], kind="stable")
    trace_id = str(ordered["trace_id"].iloc[0])
    assembled = _assemble(trace_id, ordered)
    if isinstance(assembled, trace_format.TraceFailure):
        error = (trace_id, assembled.file, assembled.line, assembled.reason)
        return _output_frame(ERROR_ROW, [error], ("trace_id", *ERROR_COLUMNS))
    score_rows = replay_module.replay_assignors(assembled, assignors, timings=timings)
    summary_rows = scoring.summarize(score_rows)
    return pd.concat(
        [
            _output_frame(SCORE_ROW, score_rows, scoring.ScoreRow._fields),
            _output_frame(SUMMARY_ROW, summary_rows, scoring.SummaryRow._fields),
        ],
        ignore_index=True,
    )


def _output_frame(kind: str, records: Sequence[tuple], fields: Sequence[str]) -> pd.DataFrame:
    """Rows of one kind with every output column (absent ones null)."""
    frame = pd.DataFrame.from_records(records, columns=list(fields)).astype(object)
    frame = frame.reindex(columns=OUTPUT_COLUMNS, fill_value=None).astype(object)
    frame = frame.where(frame.notna(), None)
    frame["row_kind"] = kind
    return frame


def build_scores(
    spark: SparkSession, paths: Sequence[str], assignors: Sequence[str], timings: bool = True
) -> tuple[DataFrame, list[trace_format.TraceFailure], DataFrame]:
    """Scores DataFrame (with error columns), the errors of rows that name no trace, and the
    persisted raw rows (to unpersist once the scores are computed)."""
    from pyspark.sql import functions as F

    found = files.list_files(spark, paths, trace_files.TRACE_SUFFIXES)

    def read(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            for uri, content in zip(batch["path"], batch["content"], strict=True):
                rows = list(read_file_rows(uri, content))
                yield pd.DataFrame(rows, columns=RAW_ROW_COLUMNS, dtype=object)

    raw_rows = files.listing(spark, found).mapInPandas(read, RAW_ROW_SCHEMA).persist()

    orphan_errors = [
        trace_format.TraceFailure(None, row["source"], row["line"] or None, row["error"])
        for row in raw_rows.filter(F.col("trace_id").isNull()).collect()
    ]
    named = raw_rows.filter(F.col("trace_id").isNotNull())
    extra = ["error_file string", "error_line bigint", "error_reason string", "row_kind string"]
    schema = spark_ddl(OUTPUT_SCHEMA, extra)
    names = list(assignors)
    buckets = BUCKETS_PER_SHUFFLE_PARTITION * int(spark.conf.get("spark.sql.shuffle.partitions"))

    def replay_bucket(rows: pd.DataFrame) -> pd.DataFrame:
        frames = [
            _replay_trace(trace_rows, names, timings)
            for _, trace_rows in rows.groupby("trace_id", sort=True)
        ]
        return pd.concat(frames, ignore_index=True) if frames else _output_frame("", [], ())

    # a pandas group costs a round trip of its own: hand traces over in hash buckets, each trace
    # still parsed once and replayed through every assignor in the same task
    bucket = F.pmod(F.xxhash64("trace_id"), F.lit(buckets)).alias("bucket")
    scored = named.groupBy(bucket).applyInPandas(replay_bucket, schema=schema)
    return scored, orphan_errors, raw_rows


class RunResult(NamedTuple):
    """What a run wrote: the summary rows (sorted by trace, assignor) and the skipped traces,
    the same values the Python engine returns."""

    summary: list[scoring.SummaryRow]
    errors: list[trace_format.TraceFailure]


def run(
    paths: Sequence[str],
    assignors: Sequence[str],
    out_dir: str,
    *,
    timings: bool = True,
    master: str | None = None,
    conf: Sequence[str] | dict[str, str] = (),
    spark: SparkSession | None = None,
) -> RunResult:
    """Replay every trace under ``paths`` through ``assignors``; write results to ``out_dir``.

    Writes ``scores.parquet/`` and ``summary.parquet/`` (partitioned by assignor) and
    ``errors.jsonl`` into a staging directory beside ``out_dir`` and renames it into place, so
    readers never see a half-written result. Returns the summary rows and the skipped traces.
    """
    from pyspark.sql import functions as F

    from spark_jobs.session import get_session, parse_conf

    if spark is None:
        conf_map = dict(conf) if isinstance(conf, dict) else parse_conf(conf)
        spark = get_session(master=master, conf=conf_map, app_name="ktk-replay")
    scored, errors, raw_rows = build_scores(spark, paths, assignors, timings=timings)
    scored = scored.persist()
    kind = F.col("row_kind")
    scores = scored.filter(kind == SCORE_ROW).select(*scoring.SCORE_SCHEMA.names)
    summary = scored.filter(kind == SUMMARY_ROW).select(*scoring.SUMMARY_SCHEMA.names)
    staging = files.staging_path(out_dir)
    try:
        failed = scored.filter(kind == ERROR_ROW)
        errors += [
            trace_format.TraceFailure(
                row["trace_id"], row["error_file"], row["error_line"], row["error_reason"]
            )
            for row in failed.select("trace_id", *ERROR_COLUMNS).collect()
        ]
        (
            scores.repartition("assignor")
            .sortWithinPartitions("trace_id", "generation")
            .write.partitionBy("assignor")
            .parquet(f"{staging}/scores.parquet")
        )
        summary_rows = [scoring.SummaryRow(**row.asDict()) for row in summary.collect()]
        (
            summary.coalesce(1)
            .sortWithinPartitions("assignor", "trace_id")
            .write.partitionBy("assignor")
            .parquet(f"{staging}/summary.parquet")
        )
        files.write_text(spark, f"{staging}/{results.ERRORS_FILE}", results.errors_jsonl(errors))
        files.commit(spark, staging, out_dir)
    except BaseException:
        files.discard(spark, staging)
        raise
    finally:
        scored.unpersist()
        raw_rows.unpersist()
    summary_rows.sort(key=lambda row: (row.trace_id, row.assignor))
    return RunResult(summary_rows, errors)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/replay_traces.py TRACES... --out DIR [--assignors a,b]``."""
    from assignors import registry

    parser = argparse.ArgumentParser(prog="replay_traces.py", description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+", help="trace files or directories (any Hadoop URI)")
    parser.add_argument("--out", required=True, help="results directory (replaced atomically)")
    parser.add_argument("--assignors", default=",".join([*registry.builtin_names(), "recorded"]))
    parser.add_argument("--strict", action="store_true", help="exit 1 when any trace is bad")
    parser.add_argument("--no-timings", action="store_true", help="null assign_ms: byte-stable")
    parser.add_argument("--master", default=None)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.assignors.split(",") if name.strip()]
    for name in names:
        if name != replay_module.RECORDED:
            registry.get(name)
    result = run(
        args.traces,
        names,
        args.out,
        timings=not args.no_timings,
        master=args.master,
        conf=args.conf,
    )
    for error in result.errors:
        print(f"skipped trace {error.trace_id}: {error.reason}", file=sys.stderr)
    print(f"{len(result.summary)} trace x assignor summaries written to {args.out}")
    return 1 if args.strict and result.errors else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
