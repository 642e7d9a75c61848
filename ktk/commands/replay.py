"""`ktk replay`: replay rebalance traces through assignors and score every generation."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ktk.commands.options import force_option, out_option
from ktk.console import ensure_one_of, err, escape, fail, out, reported_errors, warn
from ktk.output_formats import checked_format, format_option, plural

if TYPE_CHECKING:
    from assignors.traces.cost import CostModel

EXIT_BAD_TRACES = 1
ENGINES = ("auto", "python", "spark")
# `auto` runs Spark from this many bytes of (uncompressed) local trace input: below it, the
# JVM's start-up costs more than Spark's parallel replay saves (docs/spark.md, measured)
AUTO_SPARK_BYTES = 24_000_000
# .jsonl.gz and .parquet hold several times their size in trace rows
COMPRESSED_FACTOR = 5
# the cost model's defaults, assignors.traces.cost.DEFAULT_ROUND_SECONDS and
# DEFAULT_HEARTBEAT_SECONDS (a test ties them): importing that module for --help would load
# numpy and pyarrow into every `ktk` start-up
DEFAULT_ROUND_SECONDS = 3.0
DEFAULT_HEARTBEAT_SECONDS = 5.0


def input_bytes(paths: list[str]) -> int | None:
    """Estimated uncompressed bytes of the local trace files under ``paths`` (None when any
    path is a URI: its size is not worth a JVM to learn)."""
    from assignors.traces.files import TRACE_SUFFIXES
    from ktkbase.files import data_files
    from spark_jobs.files import local_name

    local = [local_name(path) for path in paths]
    if any(name is None for name in local):
        return None
    total = 0
    for path in data_files([name for name in local if name is not None], TRACE_SUFFIXES):
        size = Path(path).stat().st_size
        total += size if path.name.endswith(".jsonl") else size * COMPRESSED_FACTOR
    return total


def resolve_engine(engine: str, paths: list[str], master: str | None, conf: list[str]) -> str:
    """The engine `auto` stands for: Spark when a master or a Spark setting is given, an
    input is a URI, or the input is at least AUTO_SPARK_BYTES; the in-process engine
    otherwise. Other engines are returned as given."""
    if engine != "auto":
        return engine
    if master is not None or conf:
        return "spark"
    size = input_bytes(paths)
    return "spark" if size is None or size >= AUTO_SPARK_BYTES else "python"


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
    paths: list[str],
    names: list[str],
    out_dir: str,
    timings: bool,
    force: bool,
    command: str,
    cost_model: CostModel,
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

            run = replay_paths(
                paths, names, timings=timings, progress=advance, cost_model=cost_model
            )
        write_result_files(staging, run.scores, run.failures, run.summary, cost_model)
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
    cost_model: CostModel,
) -> tuple[list[Any], list[Any]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ktk import __version__
    from spark_jobs.replay_traces import run
    from spark_jobs.session import parse_conf

    try:
        settings = parse_conf(conf)
    except ValueError as error:
        raise fail(str(error)) from None
    # one bar over traces (Spark's own console progress is off)
    with Progress(
        TextColumn("replaying on Spark"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("replay", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

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
            progress=advance,
            cost_model=cost_model,
        )
    return result.summary, result.errors


PER_TRACE_COLUMNS = (
    ("trace", "trace_id"),
    ("assignor", "assignor"),
    ("protocol", "protocol"),
    ("gens", "generations"),
    ("paused\npartition-s", "total_paused_partition_seconds"),
    ("moved", "total_moved"),
    ("moves needed\nfor optimal\nbalance", "total_min_moved"),
    ("moves beyond\nthe least\nneeded", "total_excess_moved"),
    ("forced", "total_forced"),
    ("revoked", "total_revoked"),
    ("rounds", "total_rounds"),
    ("max spread", "max_spread"),
    ("load imbalance", "max_load_imbalance"),
    ("weight imbalance", "max_weight_skew"),
    ("invalid gens", "invalid_generations"),
    ("mean ms", "mean_assign_ms"),
)

ASSIGNOR_COLUMNS = (
    # (table heading, csv header)
    ("rank", "rank"),
    ("assignor", "assignor"),
    ("protocol", "protocol"),
    ("traces", "traces"),
    ("paused\npartition-s", "paused_partition_seconds"),
    ("per trace\nmedian", "paused_per_trace_median"),
    ("per trace\np95", "paused_per_trace_p95"),
    ("per trace\nworst", "paused_per_trace_worst"),
    ("delayed\nweight x s", "delayed_weight_seconds"),
    ("warm-up\nweight", "warmup_weight"),
    ("moved", "moved"),
    ("moves needed\nfor optimal\nbalance", "moves_needed_for_optimal_balance"),
    ("moves beyond\nthe least\nneeded", "moves_beyond_least_needed"),
    ("revoked", "revoked"),
    ("rounds", "rounds"),
    ("load\nimbalance\n(median)", "load_imbalance_median"),
)


def assignor_rows(verdict: dict[str, Any]) -> list[list[object]]:
    """One row per assignor, in verdict rank order (``recorded`` last, unranked)."""
    rank_of = {entry["assignor"]: entry["rank"] for entry in verdict["ranking"]}
    order = [entry["assignor"] for entry in verdict["ranking"]]
    stats = {entry["assignor"]: entry for entry in verdict["assignors"]}
    order += [name for name in sorted(stats) if name not in rank_of]
    rows: list[list[object]] = []
    for name in order:
        entry = stats[name]
        totals = entry["totals"]
        paused = entry["per_trace"]["paused_partition_seconds"] or {}
        imbalance = entry["per_trace"]["load_imbalance"] or {}
        rows.append(
            [
                rank_of.get(name),
                name,
                entry.get("protocol_label", entry["protocol"]),
                entry["traces"],
                totals["paused_partition_seconds"],
                paused.get("median"),
                paused.get("p95"),
                paused.get("worst"),
                totals["delayed_weight"],
                totals["warmup_weight"],
                totals["moved"],
                totals["min_moved"],
                totals["excess_moved"],
                totals["revoked"],
                totals["rounds"],
                imbalance.get("median"),
            ]
        )
    return rows


def verdict_lines(verdict: dict[str, Any]) -> list[str]:
    """The verdict in words: the headline, and the comparison with the recorded groups."""
    from ktk.output_formats import plural

    if verdict["headline"] is None:
        return []
    model = verdict["cost_model"] or {}
    lines = [
        f"verdict over {plural(verdict['traces'], 'trace')}: adopt {verdict['headline']}",
    ]
    if verdict["recorded"] is not None:
        lines.append(verdict["recorded"]["sentence"])
    reconciled = [
        f"{entry['assignor']} {entry['reconcile']['max_seconds']:g} s (at most "
        f"{plural(entry['reconcile']['max_heartbeats'], 'heartbeat')} per member)"
        for entry in verdict["assignors"]
        if entry.get("reconcile") is not None
    ]
    if reconciled:
        lines.append(
            "KIP-848 reconciliation, until every member had the target in the slowest "
            "rebalance: " + "; ".join(reconciled)
        )
    if model:
        lines.append(
            f"cost model: a rebalance round lasts {model['round_seconds']:g} s, a KIP-848 "
            f"heartbeat {model['heartbeat_seconds']:g} s; ties are within "
            f"{verdict['tie_tolerance']:.0%} (docs/traces.md, Cost model)"
        )
    return lines


def print_results(
    summary: list[Any], verdict: dict[str, Any], output_format: str, per_trace: bool
) -> None:
    """The per-assignor table and the verdict (and, with ``per_trace``, one row per trace x
    assignor) in the chosen format."""
    from ktk.output_formats import csv_text, json_text, plural, print_plain, print_table

    per_trace_rows = [[getattr(row, name) for _, name in PER_TRACE_COLUMNS] for row in summary]
    if output_format == "json":
        document: dict[str, Any] = {"verdict": verdict}
        if per_trace:
            document["per_trace"] = [row._asdict() for row in summary]
        print_plain(json_text(document))
        return
    if output_format == "csv":
        if per_trace:
            headers = [name for _, name in PER_TRACE_COLUMNS]
            print_plain(csv_text(headers, per_trace_rows))
        else:
            headers = [name for _, name in ASSIGNOR_COLUMNS]
            print_plain(csv_text(headers, assignor_rows(verdict)))
        return
    if per_trace:
        print_table(
            "per trace (one row per trace x assignor)",
            [heading for heading, _ in PER_TRACE_COLUMNS],
            per_trace_rows,
            left=3,
        )
    traces = plural(verdict["traces"], "trace")
    print_table(
        f"assignors over {traces} (fewest paused partition-seconds first)",
        [heading for heading, _ in ASSIGNOR_COLUMNS],
        assignor_rows(verdict),
        left=3,
    )
    for line in verdict_lines(verdict):
        out.print(escape(line))


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
    engine: str = typer.Option(
        "auto",
        "--engine",
        help="auto (in process for small inputs, Spark for large ones or with --master/--conf), "
        "python (in process) or spark.",
    ),
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
        list[str] | None,
        typer.Option("--conf", metavar="KEY=VALUE", help="Spark setting (engine spark)."),
    ] = None,
    per_trace: bool = typer.Option(
        False, "--per-trace", help="Also print one row per trace x assignor."
    ),
    output_format: Annotated[str, format_option()] = "table",
    round_seconds: float = typer.Option(
        DEFAULT_ROUND_SECONDS,
        "--round-seconds",
        metavar="SECONDS",
        help="Cost model: how long one rebalance round pauses the partitions it stops "
        "(docs/traces.md, Cost model).",
    ),
    heartbeat_seconds: float = typer.Option(
        DEFAULT_HEARTBEAT_SECONDS,
        "--heartbeat-seconds",
        metavar="SECONDS",
        help="Cost model: KIP-848 heartbeat interval (group.consumer.heartbeat.interval.ms); "
        "consumer-protocol groups (uniform, server-range, recorded KIP-848 groups) reconcile "
        "member by member in steps of it.",
    ),
) -> None:
    """Replay rebalance traces through assignors and score every generation.

    Writes scores.parquet, summary.parquet, errors.jsonl, verdict.json and ktk's manifest
    .ktk-output.json into --out, then _SUCCESS once all are in place, and prints one row per
    assignor (totals and the spread over traces of paused partition-seconds, moves,
    revocations, rounds, imbalance) and the verdict: which assignor to adopt and why. --out
    may replace only an earlier ktk result (or, with --force, ktk's own files inside another
    directory); never an input or the current directory.

    A broken trace is listed in errors.jsonl and skipped: exit 0 with a warning, 1 with --strict.

    A missing path, an unknown assignor or a refused --out exits 2.
    """
    from assignors.traces.cost import CostModel
    from assignors.traces.verdict import build_verdict

    ensure_one_of("--engine", engine, ENGINES)
    output_format = checked_format(output_format)
    try:
        cost_model = CostModel(round_seconds, heartbeat_seconds)
    except ValueError as error:
        raise fail(f"--{str(error).replace('_', '-', 1)}") from None
    paths = list(traces)
    _check_paths(paths, out_dir, engine)
    given_engine = engine
    engine = resolve_engine(engine, paths, master, conf or [])
    command = shlex.join(
        ["ktk", "replay", *paths, "--out", out_dir, "--engine", given_engine]
        + (["--assignors", assignors] if assignors is not None else [])
        + ([] if timings else ["--no-timings"])
        + (
            ["--round-seconds", f"{round_seconds:g}"]
            if round_seconds != DEFAULT_ROUND_SECONDS
            else []
        )
        + (
            ["--heartbeat-seconds", f"{heartbeat_seconds:g}"]
            if heartbeat_seconds != DEFAULT_HEARTBEAT_SECONDS
            else []
        )
        + (["--force"] if force else [])
    )
    with reported_errors():
        names = _assignor_names(assignors)
        if engine == "python":
            summary, failures = _run_python(
                paths, names, out_dir, timings, force, command, cost_model
            )
        else:
            summary, failures = _run_spark(
                paths, names, out_dir, timings, force, command, master, conf or [], cost_model
            )
    if not summary and not failures:
        warn("no traces found (looked for .jsonl, .jsonl.gz and .parquet files)")
    verdict = build_verdict(summary, cost_model.describe())
    print_results(summary, verdict, output_format, per_trace)
    if output_format == "table":
        out.print(f"results: {escape(out_dir)}")
    if failures:
        errors_file = f"{out_dir.rstrip('/')}/errors.jsonl"
        warn(f"{plural(len(failures), 'trace')} skipped; reasons in {errors_file}")
        if strict:
            raise typer.Exit(EXIT_BAD_TRACES)


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)
