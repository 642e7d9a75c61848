"""The `ktk` command: one verb per module in ktk/commands, each registering itself."""

from __future__ import annotations

import logging

import typer

from ktk import __version__
from ktk.commands import assign, dashboard, demo, log, partition, replay, replicate, traces

app = typer.Typer(
    name="ktk",
    help="See how Kafka spreads work (assignors, partitioners, replication) and compare.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for command_module in (assign, partition, replay, traces, dashboard, replicate, demo, log):
    command_module.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ktk {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what the packages do."),
) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


def main() -> None:
    app()
