"""`ktk demo`: the main job end to end on local Spark.

Generates a mixed set of rebalance traces (seeded), replays them through every built-in assignor
on Spark, scores the bundled producer key trace under the Java and librdkafka default
partitioners, builds the dashboard, and prints where everything is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ktk.commands.options import force_option, groups_option, out_option
from ktk.console import ensure_within, err, escape, out, reported_errors
from ktk.output_formats import checked_format, format_option, json_text, print_plain

if TYPE_CHECKING:
    import pandas as pd

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEY_TRACE_PARTITIONERS = ("java-builtin", "librdkafka-default")
# the key-trace score columns the demo prints (table) and puts in its JSON document
KEY_SCORE_COLUMNS = ("trace_id", "partitioner", "records", "bytes_skew", "batches", "keys_remapped")
KEY_SCORES_FILE = "key-trace-scores.csv"
REPORT_FILE = "report.html"


def _generate_traces(directory: Path, groups: int, seed: int) -> Path:
    from assignors.traces import files as trace_files
    from assignors.traces import generate

    path = directory / f"mixed-s{seed}.jsonl"
    rows = generate.generate_rows("mixed", groups, seed, members=(3, 40), partitions=(12, 600))
    trace_files.write_traces_jsonl(rows, path)
    return path


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
    output_format: Annotated[str, format_option()] = "table",
) -> None:
    """Run the main job on local Spark: traces through every assignor, then the dashboard.

    OUT is written whole (traces/, results/, key-trace-scores.csv, report.html): a new
    directory, or one an earlier ktk run wrote, which is then replaced; an interrupted run
    leaves the previous OUT as it was.

    Prints one row per assignor and the verdict (which assignor to adopt and why); --format
    json prints the verdict document and the key-trace scores, csv the per-assignor rows.
    """
    import ktk
    from assignors import registry
    from assignors.traces import replay
    from assignors.traces.results import read_verdict
    from assignors.traces.verdict import build_verdict
    from dashboards.rebalance import write_rebalance_page
    from ktk.commands.replay import print_results
    from ktkbase.outputs import plan_output_directory, staged_directory
    from spark_jobs import replay_traces, score_key_traces
    from spark_jobs.session import get_session

    ensure_within("--groups", groups, 1, MAX_DEMO_GROUPS)
    output_format = checked_format(output_format)
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

    verdict = read_verdict(out_dir / "results")
    if verdict is None:  # written by the same run; absent only if the writer changed
        verdict = build_verdict(result.summary)
    if key_scores is None:
        err.print("no bundled key trace found (examples/key-traces); key-trace scoring skipped")
    for failure in result.errors:
        err.print(f"skipped trace {escape(str(failure.trace_id))}: {escape(failure.reason)}")
    if output_format == "json":
        print_plain(json_text({"verdict": verdict, "key_traces": _key_records(key_scores)}))
    else:
        print_results(result.summary, verdict, output_format, per_trace=False)
    if output_format == "table" and key_scores is not None:
        out.print(escape(key_scores[list(KEY_SCORE_COLUMNS)].to_string(index=False)))
    # with csv/json, stdout holds only the document; where things went goes to stderr
    where = out if output_format == "table" else err
    elapsed = time.perf_counter() - started
    where.print(f"\ntraces:     {escape(str(out_dir / 'traces'))}")
    results_dir = out_dir / "results"
    where.print(
        f"results:    {escape(str(results_dir))} "
        "(scores.parquet, summary.parquet, errors.jsonl, verdict.json)"
    )
    if key_scores is not None:
        where.print(f"key traces: {escape(str(out_dir / KEY_SCORES_FILE))}")
    where.print(
        f"dashboard:  {escape(str(out_dir / REPORT_FILE))} ({page.size_bytes / 1e6:.1f} MB)"
    )
    where.print(f"done in {elapsed:.0f} s")


def _key_records(key_scores: pd.DataFrame | None) -> list[dict[str, Any]]:
    if key_scores is None:
        return []
    return [
        {name: (value.item() if hasattr(value, "item") else value) for name, value in row.items()}
        for row in key_scores[list(KEY_SCORE_COLUMNS)].to_dict(orient="records")
    ]


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
