"""`ktk demo`: the main job end to end on local Spark.

Generates a mixed set of rebalance traces (seeded), replays them through every built-in assignor
on Spark, scores the bundled producer key trace under the Java and librdkafka default
partitioners, builds the dashboard, and prints where everything is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ktk.commands.options import force_option, groups_option, out_option
from ktk.console import ensure_within, err, escape, out, reported_errors

if TYPE_CHECKING:
    from assignors.traces.scoring import SummaryRow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEY_TRACE_PARTITIONERS = ("java-builtin", "librdkafka-default")
KEY_SCORES_FILE = "key-trace-scores.csv"
REPORT_FILE = "report.html"


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


MAX_DEMO_GROUPS = 2_000


def demo_command(
    out_dir: Annotated[
        Path, out_option("Where traces, results and the report go (replaced whole; see --force).")
    ] = Path("ktk-demo"),
    groups: Annotated[int, groups_option(MAX_DEMO_GROUPS)] = 40,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the trace generator.")] = 1,
    master: Annotated[
        str | None,
        typer.Option("--master", metavar="URL", help="Spark master (default local[*])."),
    ] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Run the main job on local Spark: traces through every assignor, then the dashboard.

    OUT is written whole (traces/, results/, key-trace-scores.csv, report.html): a new
    directory, or one an earlier ktk run wrote, which is then replaced; an interrupted run
    leaves the previous OUT as it was.
    """
    import ktk
    from assignors import registry
    from assignors.traces import replay
    from dashboards.rebalance import write_rebalance_page
    from ktkbase.outputs import plan_output_directory, staged_directory
    from spark_jobs import replay_traces, score_key_traces
    from spark_jobs.session import get_session

    ensure_within("--groups", groups, 1, MAX_DEMO_GROUPS)
    started = time.perf_counter()
    key_trace_dir = EXAMPLES / "key-traces"
    with reported_errors():
        plan = plan_output_directory(
            out_dir,
            command="demo",
            version=ktk.__version__,
            inputs=[key_trace_dir] if key_trace_dir.is_dir() else [],
            force=force,
        )
        spark = get_session(master=master, app_name="ktk-demo")
        with staged_directory(plan) as staging_name:
            staging = Path(staging_name)
            traces_file = _generate_traces(staging / "traces", groups, seed)
            err.print(f"generated {groups} traces (mixed, seed {seed}); replaying them on Spark")
            assignors = [*registry.builtin_names(), replay.RECORDED]
            result = replay_traces.run(
                [str(traces_file.parent)],
                assignors,
                str(staging / "results"),
                timings=True,
                spark=spark,
            )
            key_scores = None
            if key_trace_dir.is_dir():
                key_scores = score_key_traces.run(
                    [str(key_trace_dir)], list(KEY_TRACE_PARTITIONERS), spark=spark
                )
                key_scores.drop(columns=["records_per_partition", "bytes_per_partition"]).to_csv(
                    staging / KEY_SCORES_FILE, index=False
                )
            page = write_rebalance_page(staging / "results", staging / REPORT_FILE)

    _print_assignor_totals(result.summary)
    if key_scores is not None:
        columns = ["trace_id", "partitioner", "records", "bytes_skew", "batches", "keys_remapped"]
        out.print(escape(key_scores[columns].to_string(index=False)))
    else:
        err.print("no bundled key trace found (examples/key-traces); key-trace scoring skipped")
    for failure in result.errors:
        err.print(f"skipped trace {escape(str(failure.trace_id))}: {escape(failure.reason)}")
    elapsed = time.perf_counter() - started
    out.print(f"\ntraces:     {escape(str(out_dir / 'traces'))}")
    results_dir = out_dir / "results"
    out.print(
        f"results:    {escape(str(results_dir))} (scores.parquet, summary.parquet, errors.jsonl)"
    )
    if key_scores is not None:
        out.print(f"key traces: {escape(str(out_dir / KEY_SCORES_FILE))}")
    out.print(f"dashboard:  {escape(str(out_dir / REPORT_FILE))} ({page.size_bytes / 1e6:.1f} MB)")
    out.print(f"done in {elapsed:.0f} s")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
