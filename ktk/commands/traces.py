"""`ktk traces`: make and convert rebalance traces (`generate`; `import` when installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ktk.commands import traces_import
from ktk.console import escape, fail, out, reported_errors

FORMATS = ("jsonl", "jsonl.gz", "parquet")

traces_app = typer.Typer(
    name="traces",
    help="Make rebalance traces: seeded synthetic histories, imports of real group history.",
    no_args_is_help=True,
)


@traces_app.command("generate")
def generate_command(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the file into.")],
    scenario: str = typer.Option(
        "mixed",
        "--scenario",
        "-s",
        help="rolling-restart, static-rolling-restart, scale-out, scale-in, crash-loop, flapping, "
        "partition-expansion, subscription-change, rack-outage, skewed-weights or mixed.",
    ),
    groups: int = typer.Option(10, "--groups", "-n", help="How many traces (groups) to generate."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same traces, byte for byte."),
    members: str = typer.Option(
        "3-12", "--members", help="Initial members per group: N or LOW-HIGH."
    ),
    partitions: str = typer.Option(
        "8-200", "--partitions", help="Partitions per group: N or LOW-HIGH (at most 100000)."
    ),
    generations: int = typer.Option(24, "--generations", help="At most this many per trace."),
    file_format: str = typer.Option("jsonl", "--format", help="jsonl, jsonl.gz or parquet."),
) -> None:
    """Write seeded synthetic traces (format v1) to OUT/<scenario>-s<seed>.<format>."""
    from assignors.traces.files import write_traces
    from assignors.traces.generate import generate_rows, parse_size_range

    if file_format not in FORMATS:
        raise fail(f"--format must be one of {', '.join(FORMATS)} (got {file_format!r})")
    with reported_errors():
        member_range = parse_size_range(members, "members")
        partition_range = parse_size_range(partitions, "partitions")
        rows = list(
            generate_rows(
                scenario,
                groups,
                seed,
                members=member_range,
                partitions=partition_range,
                max_generations=generations,
            )
        )
        target = out_dir / f"{scenario}-s{seed}.{file_format}"
        written = write_traces(rows, target)
    out.print(f"{groups} traces, {written} generations -> {escape(str(target))}")


def register(app: typer.Typer) -> None:
    traces_import.register(traces_app)
    app.add_typer(traces_app, name="traces")
