"""`ktk demo`: the main job end to end on local Spark.

Generates a mixed set of rebalance traces (seeded), replays them through every built-in assignor
on Spark, scores the bundled producer key trace under the Java and librdkafka default
partitioners, builds the dashboard, and prints where everything is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from assignors.traces.scoring import SummaryRow
from ktk.console import err, fail, out, reported_errors

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEY_TRACE_PARTITIONERS = ("java-builtin", "librdkafka-default")


def _generate_traces(directory: Path, groups: int, seed: int) -> Path:
    from assignors.traces import files as trace_files
    from assignors.traces import generate

    path = directory / f"mixed-s{seed}.jsonl"
    rows = generate.generate_rows("mixed", groups, seed, members=(3, 40), partitions=(12, 600))
    trace_files.write_traces_jsonl(rows, path)
    return path


def _print_assignor_totals(summary: list[SummaryRow]) -> None:
    import pandas as pd
    from rich.table import Table

    frame = pd.DataFrame(summary)
    totals = frame.groupby("assignor", sort=False).agg(
        traces=("trace_id", "nunique"),
        moved=("total_moved", "sum"),
        forced=("total_forced", "sum"),
        revoked=("total_revoked", "sum"),
        rounds=("total_rounds", "sum"),
        spread=("max_spread", "max"),
        invalid=("invalid_generations", "sum"),
    )
    table = Table(title="Assignors over all traces", title_justify="left", box=None, pad_edge=False)
    for header in ("assignor", *totals.columns):
        table.add_column(header, justify="left" if header == "assignor" else "right", no_wrap=True)
    for assignor, row in totals.iterrows():
        table.add_row(str(assignor), *(f"{int(value):,}" for value in row))
    out.print(table)


def demo_command(
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Where traces, results and the report go.")
    ] = Path("ktk-demo"),
    groups: Annotated[int, typer.Option("--groups", help="Generated consumer groups.")] = 40,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the trace generator.")] = 1,
    master: Annotated[
        str | None, typer.Option("--master", help="Spark master (default local[*]).")
    ] = None,
) -> None:
    """Run the main job on local Spark: traces through every assignor, then the dashboard."""
    from assignors import registry
    from assignors.traces import replay
    from dashboards.rebalance import write_rebalance_page
    from spark_jobs import replay_traces, score_key_traces
    from spark_jobs.session import JavaNotFoundError, get_session

    if groups < 1:
        raise fail(f"--groups must be >= 1 (got {groups})")
    started = time.perf_counter()
    with reported_errors():
        traces_dir = out_dir / "traces"
        traces_dir.mkdir(parents=True, exist_ok=True)
        traces_file = _generate_traces(traces_dir, groups, seed)
        err.print(f"generated {groups} traces: {traces_file}")
        try:
            spark = get_session(master=master, app_name="ktk-demo")
        except JavaNotFoundError as error:
            raise fail(str(error)) from None
        assignors = [*registry.builtin_names(), replay.RECORDED]
        results_dir = out_dir / "results"
        result = replay_traces.run(
            [str(traces_dir)], assignors, str(results_dir), timings=True, spark=spark
        )
        key_trace_dir = EXAMPLES / "key-traces"
        key_scores = None
        if key_trace_dir.is_dir():
            key_scores = score_key_traces.run(
                [str(key_trace_dir)], list(KEY_TRACE_PARTITIONERS), spark=spark
            )
            key_scores_path = out_dir / "key-trace-scores.csv"
            key_scores.drop(columns=["records_per_partition", "bytes_per_partition"]).to_csv(
                key_scores_path, index=False
            )
        page = write_rebalance_page(results_dir, out_dir / "report.html")

    _print_assignor_totals(result.summary)
    if key_scores is not None:
        columns = ["trace_id", "partitioner", "records", "bytes_skew", "batches", "keys_remapped"]
        out.print(key_scores[columns].to_string(index=False))
    else:
        err.print("no bundled key trace found (examples/key-traces); key-trace scoring skipped")
    for failure in result.errors:
        err.print(f"skipped trace {failure.trace_id}: {failure.reason}")
    elapsed = time.perf_counter() - started
    out.print(f"\ntraces:     {traces_dir}")
    out.print(f"results:    {results_dir} (scores.parquet, summary.parquet, errors.jsonl)")
    if key_scores is not None:
        out.print(f"key traces: {key_scores_path}")
    out.print(f"dashboard:  {page.path} ({page.size_bytes / 1e6:.1f} MB)")
    out.print(f"done in {elapsed:.0f} s")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
