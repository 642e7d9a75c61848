"""Trace replay: the Python engine in one process against Spark local[N], same traces, same run.

    python benchmarks/bench_spark_replay.py                 # 2,000 traces, then 20,000 on Spark
    python benchmarks/bench_spark_replay.py --traces 200 --large 0   # quick look

Both engines read the same JSON Lines files, replay every trace through every built-in assignor
and write scores, summary and errors. Spark's session start-up is timed separately (it is paid
once per run, not per trace). Prints both times, the ratio, and traces/s and generations/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from assignors import registry
from assignors.traces import files as trace_files
from assignors.traces import generate
from assignors.traces.job import replay_paths
from assignors.traces.results import write_results

SEED = 20261122


def write_traces(directory: Path, groups: int, files: int) -> int:
    """``groups`` mixed traces spread over ``files`` files; returns the number of generations."""
    rows = list(generate.generate_rows("mixed", groups, SEED))
    per_file = -(-len(rows) // files)
    for index in range(files):
        chunk = rows[index * per_file : (index + 1) * per_file]
        if chunk:
            trace_files.write_traces_jsonl(chunk, directory / f"part-{index:03d}.jsonl")
    return len(rows)


def python_engine(directory: Path, out_dir: Path, names: list[str]) -> float:
    """What ``ktk replay --engine python`` runs: the domain job, then the result writer."""
    started = time.perf_counter()
    run = replay_paths([directory], names)
    write_results(out_dir, run.scores, run.failures, run.summary)
    return time.perf_counter() - started


def spark_engine(spark: object, directory: Path, out_dir: Path, names: list[str]) -> float:
    from spark_jobs import replay_traces

    started = time.perf_counter()
    replay_traces.run([str(directory)], names, str(out_dir), spark=spark)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--large", type=int, default=20000, help="Spark-only run size (0: skip)")
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--files", type=int, default=16)
    args = parser.parse_args()
    names = list(registry.builtin_names())
    print(f"cores on this machine: {os.cpu_count()}; Spark local[{args.cores}]; assignors: {names}")

    with tempfile.TemporaryDirectory(prefix="ktk-bench-") as scratch:
        root = Path(scratch)
        traces_dir = root / "traces"
        generations = write_traces(traces_dir, args.traces, args.files)
        print(f"{args.traces:,} traces, {generations:,} generations, x {len(names)} assignors")

        python_s = python_engine(traces_dir, root / "out-python", names)
        print(f"python engine (1 process):   {python_s:8.1f} s")

        from spark_jobs.session import get_session

        started = time.perf_counter()
        spark = get_session(
            master=f"local[{args.cores}]", conf={"spark.ui.showConsoleProgress": "false"}
        )
        startup_s = time.perf_counter() - started
        spark_engine(spark, traces_dir, root / "warm-up", names[:1])
        spark_s = spark_engine(spark, traces_dir, root / "out-spark", names)
        print(f"spark local[{args.cores}] start-up:     {startup_s:8.1f} s (once per run)")
        print(f"spark local[{args.cores}] replay:       {spark_s:8.1f} s")
        print(f"ratio python / spark:        {python_s / spark_s:8.2f}x")
        print(f"ratio incl. Spark start-up:  {python_s / (spark_s + startup_s):8.2f}x")
        replays = generations * len(names)
        print(f"spark rate: {args.traces / spark_s:,.1f} traces/s, {replays / spark_s:,.0f} gen/s")

        if args.large:
            large_dir = root / "large"
            large_generations = write_traces(large_dir, args.large, max(args.files, 64))
            large_s = spark_engine(spark, large_dir, root / "out-large", names)
            print(
                f"spark, {args.large:,} traces ({large_generations:,} generations): {large_s:.1f} s"
                f" = {args.large / large_s:,.1f} traces/s,"
                f" {large_generations * len(names) / large_s:,.0f} generation replays/s"
            )
        spark.stop()


if __name__ == "__main__":
    main()
