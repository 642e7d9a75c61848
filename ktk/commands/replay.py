"""`ktk replay`: replay rebalance traces through assignors and score every generation."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ktk.commands.options import force_option, out_option
from ktk.console import err, escape, fail, out, reported_errors, warn

EXIT_BAD_TRACES = 1
ENGINES = ("python", "spark")


def _assignor_names(option: str | None) -> list[str]:
    from assignors import registry
    from assignors.traces.replay import RECORDED

    if option is None:
        # `recorded` gives no rows for a trace without `assigned`: listing it costs nothing
        return [*registry.builtin_names(), RECORDED]
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


def _check_paths(paths: list[str], out_dir: str, engine: str) -> None:
    """Missing local inputs exit 2 here, before any output is touched or a JVM starts; so do
    URIs given to the Python engine, which reads and writes local files only."""
    from spark_jobs.files import is_local, local_name

    for path in paths:
        local = local_name(path)
        if local is not None and not Path(local).exists():
            raise fail(f"{path}: No such file or directory")
    if engine == "python":
        for path in [*paths, out_dir]:
            if not is_local(path):
                raise fail(
                    f"{path}: --engine python reads and writes local paths only; "
                    "use --engine spark for URIs"
                )


def _run_python(
    paths: list[str], names: list[str], out_dir: str, timings: bool, force: bool, command: str
) -> tuple[list[Any], list[Any]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from assignors.traces.job import replay_paths
    from assignors.traces.results import open_results, write_result_files
    from ktk import __version__

    with open_results(
        out_dir, command=command, version=__version__, inputs=paths, force=force
    ) as staging:
        with Progress(
            TextColumn("replaying"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[current]}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as progress:
            task = progress.add_task("replay", total=None, current="")

            def advance(done: int, total: int, current: str) -> None:
                progress.update(task, completed=done, total=total, current=current)

            run = replay_paths(paths, names, timings=timings, progress=advance)
        write_result_files(staging, run.scores, run.failures, run.summary)
    return run.summary, run.failures


def _run_spark(
    paths: list[str],
    names: list[str],
    out_dir: str,
    timings: bool,
    force: bool,
    command: str,
    master: str | None,
    conf: list[str],
) -> tuple[list[Any], list[Any]]:
    from ktk import __version__
    from spark_jobs.replay_traces import run
    from spark_jobs.session import JavaNotFoundError, parse_conf

    try:
        settings = parse_conf(conf)
    except ValueError as error:
        raise fail(str(error)) from None
    try:
        # Spark draws its own progress bar on stderr
        result = run(
            paths,
            names,
            out_dir,
            timings=timings,
            master=master,
            conf=settings,
            command=command,
            version=__version__,
            force=force,
        )
    except JavaNotFoundError as error:
        raise fail(str(error)) from None
    return result.summary, result.errors


def _print_summary(summary: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="replay summary (one row per trace x assignor)", title_justify="left")
    columns = (
        ("trace", "trace_id"),
        ("assignor", "assignor"),
        ("protocol", "protocol"),
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
        justify: Literal["left", "right"] = (
            "left" if heading in ("trace", "assignor", "protocol") else "right"
        )
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
        str,
        out_option(
            "Result directory. Created if missing; replaced (atomically) only when an earlier "
            "ktk run wrote it. A directory holding anything else, an input, or the current "
            "directory is refused (exit 2)."
        ),
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
    force: Annotated[bool, force_option()] = False,
    master: str | None = typer.Option(None, "--master", help="Spark master (engine spark)."),
    conf: Annotated[
        list[str] | None, typer.Option("--conf", help="Spark setting KEY=VALUE (engine spark).")
    ] = None,
) -> None:
    """Replay rebalance traces through assignors and score every generation.

    Writes scores.parquet, summary.parquet, errors.jsonl and ktk's manifest .ktk-output.json
    into --out and prints the summary. --out may replace only an earlier ktk result (or, with
    --force, ktk's own files inside another directory); never an input or the current directory.

    A broken trace is listed in errors.jsonl and skipped: exit 0 with a warning, 1 with --strict.

    A missing path, an unknown assignor or a refused --out exits 2.
    """
    if engine not in ENGINES:
        raise fail(f"--engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    paths = list(traces)
    _check_paths(paths, out_dir, engine)
    command = shlex.join(
        ["ktk", "replay", *paths, "--out", out_dir, "--engine", engine]
        + (["--assignors", assignors] if assignors is not None else [])
        + ([] if timings else ["--no-timings"])
        + (["--force"] if force else [])
    )
    with reported_errors():
        names = _assignor_names(assignors)
        if engine == "python":
            summary, failures = _run_python(paths, names, out_dir, timings, force, command)
        else:
            summary, failures = _run_spark(
                paths, names, out_dir, timings, force, command, master, conf or []
            )
    if not summary and not failures:
        warn("no traces found (looked for .jsonl, .jsonl.gz and .parquet files)")
    _print_summary(summary)
    out.print(f"results: {escape(out_dir)}")
    if failures:
        errors_file = f"{out_dir.rstrip('/')}/errors.jsonl"
        warn(f"{len(failures)} trace(s) skipped; reasons in {errors_file}")
        if strict:
            raise typer.Exit(EXIT_BAD_TRACES)


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)
