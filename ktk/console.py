"""Printing and error reporting for the command line (the only place that prints)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_BAD_INPUT = 2


def input_error_types() -> tuple[type[BaseException], ...]:
    """Every package's input errors and refused outputs share the bases in ktkbase.errors."""
    from ktkbase.errors import InputError, OutputError

    return (InputError, OutputError)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print one error line on stderr; return the Exit to raise."""
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    return typer.Exit(code)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


@contextmanager
def reported_errors(code: int = EXIT_BAD_INPUT) -> Iterator[None]:
    """Turn the packages' input errors and unreadable files into one line and an exit code."""
    try:
        yield
    except input_error_types() as error:
        raise fail(str(error), code) from None
    except (FileNotFoundError, IsADirectoryError, PermissionError) as error:
        raise fail(f"{error.filename}: {error.strerror}", code) from None


def escape(text: str) -> str:
    """Text safe to print through rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def is_interactive() -> bool:
    return sys.stderr.isatty()
