"""Errors raised while reading the files a dashboard is built from."""

from __future__ import annotations


class InputError(ValueError):
    """A results file that cannot be turned into a dashboard; names the file, field and value.

    >>> str(InputError("missing column", source="results/scores.parquet", field="assignor"))
    'results/scores.parquet: assignor: missing column'
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        value: object = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        self.value = value
        super().__init__(self._render())

    def _render(self) -> str:
        parts: list[str] = []
        if self.source is not None:
            parts.append(self.source if self.line is None else f"{self.source}:{self.line}")
        if self.field is not None:
            parts.append(self.field)
        text = ": ".join([*parts, self.message])
        if self.value is not None:
            text += f" (got {self.value!r})"
        return text
