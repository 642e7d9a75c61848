"""`ktk assign`: run assignors on assignment requests (JSON Lines or a JSON array)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ktk.console import STDIN, STDIN_NAME, echo, fail, reported_errors, warn

EXIT_SOME_FAILED = 1


def _read_text(path: str) -> tuple[str, str]:
    """The input text and the name errors should cite for it."""
    if path == STDIN:
        data, source = sys.stdin.buffer.read(), STDIN_NAME
    else:
        data, source = Path(path).read_bytes(), path
    try:
        return data.decode("utf-8-sig"), source
    except UnicodeDecodeError as error:
        raise fail(f"{source}: not UTF-8 text (byte {error.start})") from None


def assign_command(
    file: str = typer.Argument("-", metavar="[FILE|-]", help="Requests file; '-' reads stdin."),
    assignor: str | None = typer.Option(
        None, "--assignor", "-a", help="Run this assignor instead of the one each request names."
    ),
    pretty: bool = typer.Option(False, "--pretty", help="Indent each result."),
) -> None:
    """Print each request's assignment, one JSON result per request, in input order.

    Text the output cannot encode (a lone surrogate in an id) is printed as a JSON escape
    (\\ud800), so every line stays valid JSON.

    Exit 0 when every request was assigned, 1 when some were invalid (their result carries
    "error"), 2 when the input cannot be read or is not JSON at all.
    """
    from assignors import registry
    from assignors.protocol.request import read_requests, run_text

    with reported_errors():
        try:
            chosen = registry.get(assignor) if assignor is not None else None
        except ImportError as error:
            raise fail(f"assignor {assignor!r} is not available: {error}") from None
        text, source = _read_text(file)
        entries = read_requests(text, source=source, assignor_override=assignor)

    failed = 0
    for entry in entries:
        text, entry_failed = run_text(entry, chosen, pretty=pretty)
        failed += entry_failed
        echo(text)  # ids are printed whatever they hold
    if failed:
        warn(f"{failed} of {len(entries)} requests failed")
        raise typer.Exit(EXIT_SOME_FAILED)


def register(app: typer.Typer) -> None:
    app.command("assign")(assign_command)
