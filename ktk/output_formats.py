"""`--format table|json|csv`: one way for every verb to print rows.

``table`` is for people (rich, never wrapped mid-cell: a pipe gets whole rows), ``csv`` has a
header line and plain values, ``json`` is one document. Values are printed as given: ``None``
is ``-`` in a table, empty in CSV and ``null`` in JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import typer

from ktk.console import ensure_one_of, escape, out

FORMATS = ("table", "json", "csv")
FORMAT_HELP = "Output: table (for people), json (one document) or csv (a header line, then rows)."


def format_option() -> Any:
    return typer.Option("--format", metavar="table|json|csv", help=FORMAT_HELP)


def checked_format(value: str) -> str:
    """The format, or exit 2 naming the choices."""
    ensure_one_of("--format", value, FORMATS)
    return value


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """``1 trace``, ``2 traces``, ``1,000 traces``.

    >>> plural(1, "trace"), plural(2, "trace"), plural(0, "assignor"), plural(2, "pass", "passes")
    ('1 trace', '2 traces', '0 assignors', '2 passes')
    """
    word = noun if count == 1 else (plural_noun if plural_noun is not None else noun + "s")
    return f"{count:,} {word}"


def cell(value: object, digits: int = 2) -> str:
    """A table cell: ``-`` for None, fixed digits for floats, thousands separators for ints."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_table(
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    left: int = 1,
) -> None:
    """Rows as a rich table; the first ``left`` columns left-aligned, the rest right-aligned.
    A pipe gets the rows whole (a wide console that never folds a cell)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, header in enumerate(headers):
        justify: Literal["left", "right"] = "left" if index < left else "right"
        table.add_column(escape(header), justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*(escape(cell(value)) for value in row))
    if out.is_terminal:
        out.print(table)
    else:
        Console(file=out.file, width=400, highlight=False, soft_wrap=True).print(table)


def csv_text(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """CSV with a header line; None is an empty field, floats keep their full value.

    >>> print(csv_text(["name", "value"], [["a", 1.5], ["b", None]]), end="")
    name,value
    a,1.5
    b,
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    for row in rows:
        writer.writerow(["" if value is None else value for value in row])
    return buffer.getvalue()


def json_text(document: Mapping[str, Any] | Sequence[Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def print_plain(text: str) -> None:
    """Machine-readable text to stdout, unstyled and unwrapped."""
    out.file.write(text)
    out.file.flush()
