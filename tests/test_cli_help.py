"""Every command's help shows each paragraph of its description wrapped to the terminal."""

from __future__ import annotations

import inspect

import pytest
import typer
from typer.testing import CliRunner

from ktk.cli import app, flowing_help


def _commands(typer_app: typer.Typer, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for info in typer_app.registered_commands:
        assert info.callback is not None
        found.append((*path, info.name or info.callback.__name__.replace("_", "-")))
    for group in typer_app.registered_groups:
        assert group.typer_instance is not None and group.name is not None
        found.extend(_commands(group.typer_instance, (*path, group.name)))
    return found


def _paragraphs(path: tuple[str, ...]) -> list[str]:
    typer_app = app
    for name in path[:-1]:
        typer_app = next(g.typer_instance for g in typer_app.registered_groups if g.name == name)
    info = next(
        i
        for i in typer_app.registered_commands
        if (i.name or i.callback.__name__.replace("_", "-")) == path[-1]  # type: ignore[union-attr]
    )
    assert info.callback is not None
    doc = info.callback.__doc__
    given = info.help is not None and (doc is None or info.help != flowing_help(doc))
    written = info.help if given else doc  # help given at registration, else the docstring
    assert written, f"ktk {' '.join(path)} has no description"
    doc = inspect.cleandoc(written).partition("\f")[0]
    return [" ".join(paragraph.split()) for paragraph in doc.split("\n\n")]


@pytest.mark.parametrize("path", _commands(app), ids=" ".join)
def test_each_help_paragraph_is_one_line_on_a_wide_terminal(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    for paragraph in _paragraphs(path):
        assert paragraph in lines, f"{paragraph!r} is not one line of `ktk {' '.join(path)} --help`"
