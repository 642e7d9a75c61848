"""The `ktk` command: one verb per module in ktk/commands, each registering itself.

Every command runs inside :func:`ktk.console.guarded`, so whatever reaches the edge ends as one
line and a documented exit code (0 done, 1 some inputs failed, 2 bad input or refused output,
130 interrupted), never a traceback.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from ktk import __version__
from ktk.commands import assign, dashboard, demo, log, partition, replay, replicate, traces
from ktk.console import EXIT_INTERRUPTED, guarded, interrupted

app = typer.Typer(
    name="ktk",
    help="See how Kafka spreads work (assignors, partitioners, replication) and compare.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for command_module in (assign, partition, replay, traces, dashboard, replicate, demo, log):
    command_module.register(app)


def flowing_help(docstring: str) -> str:
    """A command's docstring as its help: each paragraph one line, so the help wraps every
    paragraph to the terminal (typer re-wraps only the first one itself); a paragraph that
    starts with ``\\b`` keeps its lines, as click's convention says.

    >>> flowing_help("Replay traces.\\n\\n    Writes scores\\n    and a verdict.\\n")
    'Replay traces.\\n\\nWrites scores and a verdict.'
    """
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(
        paragraph if paragraph.startswith("\b") else " ".join(paragraph.split("\n"))
        for paragraph in paragraphs
    )


def _guard_commands(typer_app: typer.Typer) -> None:
    """Wrap every registered command (sub-groups included) in the one edge handler, with its
    docstring as flowing help."""
    for info in typer_app.registered_commands:
        if info.callback is not None and info.help is None and info.callback.__doc__:
            info.help = flowing_help(info.callback.__doc__)
        if info.callback is not None and not getattr(info.callback, "ktk_guarded", False):
            info.callback = guarded(info.callback)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _guard_commands(group.typer_instance)


_guard_commands(app)


def _plain_value_names() -> None:
    """Help shows what a value is (an option's metavar, or INTEGER, TEXT, PATH) rather than
    Python types (`<int>`, `list[str]`, `<bool>` on flags), which newer typer prints."""
    from typer import core

    parameter = getattr(core, "_TyperParameter", None)
    if parameter is None or not hasattr(parameter, "display_type"):
        return  # typer versions built on click print click's own names already
    python_type = parameter.display_type
    names = {"int": "INTEGER", "str": "TEXT", "float": "FLOAT", "Path": "PATH"}

    def value_name(param: Any, ctx: Any) -> str | None:
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            return None
        if param.metavar is not None:  # an argument shows its metavar as its name already
            return None if isinstance(param, core.TyperArgument) else str(param.metavar)
        label = str(python_type(param, ctx)).strip("<>")
        if label.startswith("list[") and label.endswith("]"):
            label = label[len("list[") : -1]
        return names.get(label, label.upper())

    core.TyperOption.display_type_rich = value_name  # type: ignore[method-assign, assignment]
    core.TyperArgument.display_type_rich = value_name  # type: ignore[method-assign, assignment]


_plain_value_names()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ktk {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what the packages do."),
) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    if not verbose:
        handler.addFilter(_not_from_py4j)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """py4j logs a dropped JVM connection (and Ctrl-C mid-call) with a traceback on the root
    logger; the command reports those in one line, so they show only with --verbose."""
    return "py4j" not in Path(record.pathname).parts


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; Ctrl-C before a command starts (while importing) is one line too."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="ktk")
    except KeyboardInterrupt:
        interrupted()
        sys.exit(EXIT_INTERRUPTED)
