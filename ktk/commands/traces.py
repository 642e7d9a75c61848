"""`ktk traces`: make and convert rebalance traces (`generate`; `import` when installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ktk.commands import traces_capture, traces_import
from ktk.commands.options import (
    TRACE_FORMATS,
    force_option,
    groups_option,
    out_option,
    trace_format_option,
)
from ktk.console import ensure_one_of, ensure_within, escape, fail, out, reported_errors

traces_app = typer.Typer(
    name="traces",
    help="Make rebalance traces: seeded synthetic histories, imports of real group history.",
    no_args_is_help=True,
)


MAX_GROUPS = 100_000
MAX_GENERATIONS = 10_000
MAX_GROUP_SIZE = 100_000
MAX_WORK = 100_000_000
"""groups x generations x (members + partitions) of the largest group: about the number of
values written; beyond it a run takes hours and gigabytes (generate in several runs instead)."""


def check_size_range(option: str, text: str) -> tuple[int, int]:
    """``N`` or ``LOW-HIGH`` within 1..MAX_GROUP_SIZE, or one line naming the option (exit 2)."""
    from assignors.traces.generate import parse_size_range

    with reported_errors():
        low, high = parse_size_range(text, option)
    if low < 1 or high > MAX_GROUP_SIZE:
        raise fail(f"{option} must be N or LOW-HIGH within 1-{MAX_GROUP_SIZE:,} (got {text!r})")
    return low, high


def check_work(groups: int, generations: int, members: int, partitions: int) -> None:
    work = groups * generations * (members + partitions)
    if work > MAX_WORK:
        raise fail(
            f"--groups x --generations x (most --members + most --partitions) must be at most "
            f"{MAX_WORK:,} (got {work:,}); generate fewer or smaller groups per run"
        )


@traces_app.command("generate")
def generate_command(
    out_dir: Annotated[Path, out_option("Directory to write (replaced whole; see --force).")],
    scenario: str = typer.Option(
        "mixed",
        "--scenario",
        "-s",
        help="rolling-restart, static-rolling-restart, scale-out, scale-in, crash-loop, flapping, "
        "partition-expansion, subscription-change, rack-outage, skewed-weights or mixed.",
    ),
    groups: Annotated[int, groups_option(MAX_GROUPS)] = 10,
    seed: int = typer.Option(0, "--seed", help="Same seed, same traces, byte for byte."),
    members: str = typer.Option(
        "3-12",
        "--members",
        help=f"Initial members per group: N or LOW-HIGH (at most {MAX_GROUP_SIZE:,}).",
    ),
    partitions: str = typer.Option(
        "8-200",
        "--partitions",
        help=f"Partitions per group: N or LOW-HIGH (at most {MAX_GROUP_SIZE:,}).",
    ),
    generations: int = typer.Option(
        24, "--generations", help=f"At most this many per trace, 1-{MAX_GENERATIONS:,}."
    ),
    file_format: Annotated[str, trace_format_option()] = "jsonl",
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Write seeded synthetic traces (format v1) as one file, OUT/<scenario>-s<seed>.<format>.

    OUT is written whole: a new directory, or one an earlier ktk run wrote, which is then
    replaced (a run that is interrupted leaves the previous OUT as it was).
    """
    import ktk
    from assignors.traces.files import write_traces
    from assignors.traces.generate import SCENARIOS, generate_rows
    from ktkbase.outputs import plan_output_directory, staged_directory

    if scenario not in SCENARIOS:
        raise fail(
            f"--scenario: unknown scenario; known: {', '.join(SCENARIOS)} (got {scenario!r})"
        )
    ensure_one_of("--format", file_format, TRACE_FORMATS)
    ensure_within("--groups", groups, 1, MAX_GROUPS)
    ensure_within("--generations", generations, 1, MAX_GENERATIONS)
    member_range = check_size_range("--members", members)
    partition_range = check_size_range("--partitions", partitions)
    check_work(groups, generations, member_range[1], partition_range[1])
    name = f"{scenario}-s{seed}.{file_format}"
    with reported_errors():
        plan = plan_output_directory(
            out_dir, command="traces generate", version=ktk.__version__, force=force
        )
        with staged_directory(plan) as staging:
            rows = generate_rows(
                scenario,
                groups,
                seed,
                members=member_range,
                partitions=partition_range,
                max_generations=generations,
            )
            written = write_traces(rows, Path(staging) / name)
    out.print(f"{groups} traces, {written} generations -> {escape(str(out_dir / name))}")


def register(app: typer.Typer) -> None:
    traces_import.register(traces_app)
    traces_capture.register(traces_app)
    app.add_typer(traces_app, name="traces")
