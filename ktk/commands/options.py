"""Options that mean the same on every verb that has them (`--out`, `--force`, `-n`, and
`--format` where it names a trace file format)."""

from __future__ import annotations

from typing import Any

import typer

FORCE_HELP = (
    "Write into --out even though ktk did not create it (no .ktk-output.json there): files of "
    "the same names, and those an earlier ktk run listed in its .ktk-output.json, are "
    "replaced; nothing else there is touched. Another job's _SUCCESS commit marker there is "
    "refused, not replaced."
)
GROUPS_HELP = "How many traces (consumer groups) to generate."
TRACE_FORMATS = ("jsonl", "jsonl.gz", "parquet")


def out_option(help_text: str) -> Any:
    """``--out/-o DIR``: the directory a verb writes whole."""
    return typer.Option("--out", "-o", metavar="DIR", help=help_text)


def force_option() -> Any:
    return typer.Option("--force", help=FORCE_HELP)


def groups_option(maximum: int) -> Any:
    """``--groups/-n``: how many traces to generate, 1..maximum."""
    return typer.Option("--groups", "-n", help=f"{GROUPS_HELP} 1-{maximum:,}.")


def trace_format_option() -> Any:
    """``--format``: the file format of the traces a verb writes (one of TRACE_FORMATS)."""
    return typer.Option("--format", help="jsonl, jsonl.gz or parquet.")
