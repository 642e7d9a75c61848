"""Score producer key traces per partitioner on Spark.

Data flow::

    key-trace files (JSON Lines / Parquet; local or any Hadoop-compatible path)
      -> one task per file: partitioners.keytrace_job.read_trace_file reads and validates it
         (file and row order kept as columns; a file that cannot be read becomes one failure
         row instead of failing the job)
      -> rows grouped by trace id
      -> applyInPandas: partitioners.keytrace_job.score_key_trace per trace, the same entry
         point ``--engine python`` calls (scores per partitioner, the two-partitioner
         comparison, or the trace's failure), sent back as one JSON text per trace
      -> on the driver: outcomes in order of each trace's first record, as one report

The job only lists, groups and collects: reading, hashing, the producer model and the scores
are the partitioners package's, so a trace scores the same here as with ``--engine python``,
and a bad file is reported the same way.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

import pandas as pd
import pyarrow as pa

from ktkbase.errors import OutputError
from ktkbase.outputs import write_output_file
from partitioners import keytrace, scoring
from partitioners.keytrace_job import (
    Failure,
    KeyTraceReport,
    ScoreSettings,
    TraceOutcome,
    assemble,
    read_trace_file,
    resolve_partitioners,
    score_key_trace,
)
from partitioners.registry import DEFAULT_BATCH_SIZE
from spark_jobs import files
from spark_jobs.schemas import spark_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

ORDER_COLUMNS = ("file_index", "row_index")
# a file that could not be read travels as one row: trace_id null, the failure as JSON
FAILURE_COLUMN = "failure"
OUTCOME_DDL = "trace_id string, file_index bigint, row_index bigint, outcome string"


def _read_schema() -> str:
    nullable = pa.schema([field.with_nullable(True) for field in keytrace.TRACE_SCHEMA])
    return spark_ddl(nullable, ("file_index bigint", "row_index bigint", "failure string"))


def _read_file(file_index: int, uri: str, content: bytes | None) -> pd.DataFrame:
    with files.readable(uri, content) as (path, source):
        read = read_trace_file(path, source)
    if isinstance(read, Failure):
        frame = pd.DataFrame({name: [None] for name in keytrace.TRACE_COLUMNS})
        frame["file_index"] = file_index
        frame["row_index"] = 0
        frame[FAILURE_COLUMN] = TraceOutcome(None, scoring.empty_scores(), failure=read).to_json()
        return frame
    frame = read.reset_index(drop=True)
    frame["file_index"] = file_index
    frame["row_index"] = range(len(frame))
    frame[FAILURE_COLUMN] = None
    return frame


def list_trace_files(spark: SparkSession, paths: Sequence[str]) -> list[str]:
    """Key-trace files under ``paths`` in the order ``ktkbase.files.data_files`` gives them
    (each path's files sorted by path components, each file once), so both engines meet traces
    in the same order."""
    return files.list_files(spark, paths, keytrace.KEY_TRACE_SUFFIXES)


def read_key_traces(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """A Spark DataFrame of every record of every key trace under ``paths``, with its file and
    row position (a trace's records keep their order through the shuffle), and one failure row
    per file that could not be read. Tasks read whole files: local files in place, remote ones
    through Spark's binaryFile source."""
    trace_files = list_trace_files(spark, paths)
    if not trace_files:
        raise keytrace.InputError("no key-trace files found", field="TRACE", value=list(paths))
    indexed = {uri: index for index, uri in enumerate(trace_files)}

    def read(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            for uri, content in zip(batch["path"], batch["content"], strict=True):
                yield _read_file(indexed[uri], uri, content)

    return files.listing(spark, trace_files).mapInPandas(read, _read_schema())


def score_group(
    rows: pd.DataFrame, partitioners: Sequence[str], settings: ScoreSettings
) -> pd.DataFrame:
    """The outcome rows of one group: a trace's records (any order), or the failure rows of
    files that could not be read (trace id null)."""
    failed = rows[FAILURE_COLUMN].notna()
    if failed.any():
        bad = rows[failed]
        return pd.DataFrame(
            {
                "trace_id": [None] * len(bad),
                "file_index": bad["file_index"].to_numpy(),
                "row_index": bad["row_index"].to_numpy(),
                "outcome": bad[FAILURE_COLUMN].to_numpy(),
            }
        )
    ordered = rows.sort_values(list(ORDER_COLUMNS), kind="stable")
    first = ordered.iloc[0]
    records = ordered[list(keytrace.TRACE_COLUMNS)].reset_index(drop=True)
    outcome = score_key_trace(records, partitioners, settings)
    return pd.DataFrame(
        {
            "trace_id": [outcome.trace_id],
            "file_index": [int(first["file_index"])],
            "row_index": [int(first["row_index"])],
            "outcome": [outcome.to_json()],
        }
    )


def report(
    paths: Sequence[str],
    partitioners: Sequence[str],
    settings: ScoreSettings | None = None,
    master: str | None = None,
    *,
    spark: SparkSession | None = None,
    conf: dict[str, str] | None = None,
) -> KeyTraceReport:
    """The report ``partitioners.keytrace_job.score_paths`` gives for the same paths: scores
    (traces in order of first record, partitioners as given), comparisons, failures."""
    from spark_jobs.session import get_session, prepare_executors

    names = resolve_partitioners(partitioners)
    settings = settings or ScoreSettings()
    if spark is None:
        spark = get_session(master=master, conf=conf, app_name="ktk-key-traces")
    prepare_executors(spark)
    records = read_key_traces(spark, paths)

    def score_udf(rows: pd.DataFrame) -> pd.DataFrame:
        return score_group(rows, names, settings)

    scored = records.groupBy("trace_id").applyInPandas(score_udf, OUTCOME_DDL)
    collected = cast(pd.DataFrame, scored.toPandas()).sort_values(
        list(ORDER_COLUMNS), kind="stable"
    )
    unread = collected["trace_id"].isna()
    read_failures = [
        TraceOutcome.from_json(text).failure for text in collected.loc[unread, "outcome"]
    ]
    outcomes = [TraceOutcome.from_json(text) for text in collected.loc[~unread, "outcome"]]
    return assemble(outcomes, [failure for failure in read_failures if failure is not None])


def run(
    paths: Sequence[str],
    partitioners: Sequence[str],
    batch_size: int = DEFAULT_BATCH_SIZE,
    linger_ms: int = scoring.DEFAULT_LINGER_MS,
    seed: int = 0,
    master: str | None = None,
    *,
    spark: SparkSession | None = None,
    conf: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Scores of every trace x partitioner, sorted by (trace_id, partitioner), with exactly the
    columns of ``partitioners.scoring.SCORE_SCHEMA``; files and traces that could not be scored
    are logged as warnings and left out (``report`` returns them)."""
    settings = ScoreSettings(batch_size=batch_size, linger_ms=linger_ms, seed=seed)
    result = report(paths, partitioners, settings, master, spark=spark, conf=conf)
    for failure in result.failures:
        log.warning("skipped: %s", failure.message)
    return result.scores.sort_values(["trace_id", "partitioner"], ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/score_key_traces.py TRACES... --partitioners a,b``."""
    parser = argparse.ArgumentParser(prog="score_key_traces.py", description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--partitioners", default="java-builtin,librdkafka-default")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--linger-ms", type=int, default=scoring.DEFAULT_LINGER_MS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", default=None)
    parser.add_argument(
        "--out", default=None, help="also write the scores as Parquet here (a new file)"
    )
    parser.add_argument(
        "--force", action="store_true", help="--out may replace an existing file (never an input)"
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.partitioners.split(",") if name.strip()]
    try:
        settings = ScoreSettings(
            batch_size=args.batch_size, linger_ms=args.linger_ms, seed=args.seed
        )
        result = report(args.traces, names, settings, args.master)
    except (keytrace.InputError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    frame = result.scores
    if args.out:
        table = pa.Table.from_pandas(frame, schema=scoring.SCORE_SCHEMA, preserve_index=False)
        sink = pa.BufferOutputStream()
        import pyarrow.parquet as pq

        pq.write_table(table, sink)
        try:
            write_output_file(
                args.out, sink.getvalue().to_pybytes(), inputs=args.traces, force=args.force
            )
        except OutputError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    print(frame.to_string(index=False))
    for comparison in result.comparisons:
        print(
            f"{comparison.trace_id}: {comparison.keys_differing} of {comparison.keyed_keys} keys "
            f"({comparison.records_differing} records) differ under {comparison.partitioner_a} "
            f"and {comparison.partitioner_b}"
        )
    for failure in result.failures:
        print(f"error: {failure.message} (skipped)", file=sys.stderr)
    return 1 if result.failures else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
