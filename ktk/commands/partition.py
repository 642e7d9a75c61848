"""`ktk partition`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Placeholder until the partition verb lands."""
