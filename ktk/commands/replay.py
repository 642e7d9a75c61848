"""`ktk replay`: replay rebalance traces through assignors and score every generation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ktk.console import err, escape, fail, out, reported_errors, warn

EXIT_BAD_TRACES = 1
ENGINES = ("python", "spark")


def _assignor_names(option: str | None, with_recorded: bool) -> list[str]:
    from assignors import registry
    from assignors.traces.replay import RECORDED

    if option is None:
        return [*registry.builtin_names(), *([RECORDED] if with_recorded else [])]
    names = [name.strip() for name in option.split(",") if name.strip()]
    if not names:
        raise fail("--assignors names no assignor")
    for name in names:
        if name == RECORDED:
            continue
        try:
            registry.get(name)
        except ImportError as error:
            raise fail(f"assignor {name!r} is not available: {error}") from None
    return list(dict.fromkeys(names))


def _run_python(
    paths: list[str], assignors: str | None, out_dir: Path, timings: bool
) -> tuple[list[Any], list[Any]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from assignors.traces.files import read_traces
    from assignors.traces.format import TraceFailure
    from assignors.traces.replay import replay
    from assignors.traces.results import write_results
    from assignors.traces.scoring import summarize

    traces, failures = read_traces(paths)
    names = _assignor_names(assignors, any(t.has_recorded_assignment() for t in traces))
    rows = []
    with Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[current]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("replay", total=len(traces) * len(names), current="")
        for trace in traces:
            trace_rows = []
            try:
                for name in names:
                    progress.update(task, current=f"{trace.trace_id} / {name}")
                    trace_rows.extend(replay(trace, name, timings=timings))
                    progress.advance(task)
            except Exception as error:  # an assignor crashing on one trace must not stop the run
                source = (trace.generations[0].source or "") if trace.generations else ""
                reason = (
                    f"trace {trace.trace_id}: assignor {name} failed: "
                    f"{type(error).__name__}: {error}"
                )
                failures.append(TraceFailure(trace.trace_id, source, None, reason))
                progress.advance(task, len(names) - names.index(name))
                continue
            rows.extend(trace_rows)
    write_results(out_dir, rows, failures)
    return summarize(rows), failures


def _run_spark(
    paths: list[str],
    assignors: str | None,
    out_dir: Path,
    timings: bool,
    master: str | None,
    conf: list[str],
) -> tuple[list[Any], list[Any]]:
    from spark_jobs.replay_traces import run
    from spark_jobs.session import JavaNotFoundError, parse_conf

    names = _assignor_names(assignors, with_recorded=True)
    try:
        settings = parse_conf(conf)
    except ValueError as error:
        raise fail(str(error)) from None
    try:
        # Spark draws its own progress bar on stderr
        result = run(paths, names, str(out_dir), timings=timings, master=master, conf=settings)
    except JavaNotFoundError as error:
        raise fail(str(error)) from None
    return result.summary, result.errors


def _print_summary(summary: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="replay summary (one row per trace x assignor)", title_justify="left")
    columns = (
        ("trace", "trace_id"),
        ("assignor", "assignor"),
        ("gens", "generations"),
        ("moved", "total_moved"),
        ("min moved", "total_min_moved"),
        ("forced", "total_forced"),
        ("revoked", "total_revoked"),
        ("rounds", "total_rounds"),
        ("max spread", "max_spread"),
        ("max skew", "max_weight_skew"),
        ("invalid gens", "invalid_generations"),
        ("mean ms", "mean_assign_ms"),
    )
    for heading, _ in columns:
        justify = "left" if heading in ("trace", "assignor") else "right"
        table.add_column(heading, justify=justify, no_wrap=True)
    for row in summary:
        cells = []
        for _, name in columns:
            value = getattr(row, name)
            if value is None:
                cells.append("-")
            elif isinstance(value, float):
                cells.append(f"{value:.2f}")
            else:
                cells.append(escape(str(value)))
        table.add_row(*cells)
    if out.is_terminal:
        out.print(table)
    else:
        # piped output has no terminal width; keep rows whole rather than ellipsised
        from rich.console import Console

        Console(file=out.file, width=240, highlight=False, soft_wrap=True).print(table)


def replay_command(
    traces: Annotated[
        list[str], typer.Argument(metavar="TRACES...", help="Trace files or directories.")
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Result directory (replaced atomically).")
    ],
    assignors: str | None = typer.Option(
        None,
        "--assignors",
        "-a",
        help="Comma-separated assignor names; default: every built-in, plus `recorded` when the "
        "traces carry what the real group assigned.",
    ),
    engine: str = typer.Option("spark", "--engine", help="python (in process) or spark."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any trace could not be read."),
    timings: bool = typer.Option(
        True,
        "--timings/--no-timings",
        help="Record assign_ms (wall time). --no-timings leaves it null: identical input then "
        "gives byte-identical result files.",
    ),
    master: str | None = typer.Option(None, "--master", help="Spark master (engine spark)."),
    conf: Annotated[
        list[str] | None, typer.Option("--conf", help="Spark setting KEY=VALUE (engine spark).")
    ] = None,
) -> None:
    """Replay rebalance traces through assignors and score every generation.

    Writes scores.parquet, summary.parquet and errors.jsonl into --out and prints the summary.

    A broken trace is listed in errors.jsonl and skipped: exit 0 with a warning, 1 with --strict.

    A missing path or an unknown assignor exits 2.
    """
    if engine not in ENGINES:
        raise fail(f"--engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    with reported_errors():
        if engine == "python":
            summary, failures = _run_python(list(traces), assignors, out_dir, timings)
        else:
            summary, failures = _run_spark(
                list(traces), assignors, out_dir, timings, master, conf or []
            )
    if not summary and not failures:
        warn("no traces found (looked for .jsonl, .jsonl.gz and .parquet files)")
    _print_summary(summary)
    out.print(f"results: {escape(str(out_dir))}")
    if failures:
        warn(f"{len(failures)} trace(s) skipped; reasons in {out_dir / 'errors.jsonl'}")
        if strict:
            raise typer.Exit(EXIT_BAD_TRACES)


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)
