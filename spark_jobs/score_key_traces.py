"""Score producer key traces per partitioner on Spark.

Data flow::

    key-trace files (JSON Lines / Parquet; local or any Hadoop-compatible path)
      -> one task per file: partitioners.keytrace reads and validates it into Arrow batches
         (file and row order kept as columns)
      -> rows grouped by trace id, crossed with the partitioner names
      -> applyInPandas: partitioners.scoring.score_trace per (trace, partitioner), which hashes
         the keys with the vectorized murmur2 over the batch and runs the producer model

The job only distributes: reading, hashing, the producer model and the scores are the
partitioners package's, so a trace scores the same here as with ``--engine python``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from partitioners import keytrace, scoring
from partitioners.registry import DEFAULT_BATCH_SIZE
from spark_jobs import files
from spark_jobs.schemas import spark_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ORDER_COLUMNS = ("file_index", "row_index")


def _read_file(file_index: int, uri: str, content: bytes | None) -> pd.DataFrame:
    with files.readable(uri, content) as (path, source):
        try:
            frame = keytrace.read_key_trace(path)
        except keytrace.InputError as error:
            raise keytrace.InputError(str(error).replace(path, source)) from None
    frame = frame.reset_index(drop=True)
    frame["file_index"] = file_index
    frame["row_index"] = range(len(frame))
    return frame


def read_key_traces(spark: SparkSession, paths: Sequence[str]) -> object:
    """A Spark DataFrame of every record of every key trace under ``paths``, with its file and
    row position (a trace's records keep their order through the shuffle). Tasks read whole
    files into Arrow batches: local files in place, remote ones through Spark's binaryFile
    source."""
    trace_files = files.list_files(spark, paths, keytrace.KEY_TRACE_SUFFIXES)
    indexed = {uri: index for index, uri in enumerate(trace_files)}
    schema = spark_ddl(keytrace.TRACE_SCHEMA, ("file_index bigint", "row_index bigint"))

    def read(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            for uri, content in zip(batch["path"], batch["content"], strict=True):
                yield _read_file(indexed[uri], uri, content)

    return files.listing(spark, trace_files).mapInPandas(read, schema)


def score_frame(
    partitioner: str, records: pd.DataFrame, batch_size: int, linger_ms: int, seed: int
) -> pd.DataFrame:
    """The scores of one trace's records (any order) under one partitioner."""
    ordered = records.sort_values(list(ORDER_COLUMNS), kind="stable").drop(
        columns=list(ORDER_COLUMNS)
    )
    return scoring.score_trace(
        ordered.reset_index(drop=True),
        partitioner,
        batch_size=batch_size,
        linger_ms=linger_ms,
        seed=seed,
    )


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
    columns of ``partitioners.scoring.SCORE_SCHEMA``."""
    from pyspark.sql import functions as F

    from spark_jobs.session import get_session

    if spark is None:
        spark = get_session(master=master, conf=conf, app_name="ktk-key-traces")
    records = read_key_traces(spark, paths)
    names = spark.createDataFrame([(name,) for name in partitioners], "partitioner string")

    def score_udf(key: tuple[str, ...], rows: pd.DataFrame) -> pd.DataFrame:
        return score_frame(key[1], rows.drop(columns=["partitioner"]), batch_size, linger_ms, seed)

    scores = (
        records.crossJoin(F.broadcast(names))
        .groupBy("trace_id", "partitioner")
        .applyInPandas(score_udf, schema=spark_ddl(scoring.SCORE_SCHEMA))
    )
    frame = scores.toPandas()
    if frame.empty:
        return scoring.empty_scores()
    return frame.sort_values(["trace_id", "partitioner"], ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/score_key_traces.py TRACES... --partitioners a,b``."""
    parser = argparse.ArgumentParser(prog="score_key_traces.py", description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--partitioners", default="java-builtin,librdkafka-default")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--linger-ms", type=int, default=scoring.DEFAULT_LINGER_MS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", default=None)
    parser.add_argument("--out", default=None, help="also write the scores as Parquet here")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.partitioners.split(",") if name.strip()]
    frame = run(args.traces, names, args.batch_size, args.linger_ms, args.seed, args.master)
    if args.out:
        table = pa.Table.from_pandas(frame, schema=scoring.SCORE_SCHEMA, preserve_index=False)
        import pyarrow.parquet as pq

        pq.write_table(table, args.out)
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
