"""Errors raised by the assignors package.

Every input error names where the bad value came from (file and line when known), the field and
the value, so the command line can print one clear line.
"""

from __future__ import annotations


class AssignorError(Exception):
    """Base class of every error the assignors package raises on purpose."""


class InputError(AssignorError, ValueError):
    """A request, trace or file that breaks the documented format.

    >>> str(InputError("partitions must be > 0", source="req.jsonl", line=3,
    ...                field="topics[0].partitions", value=-2))
    'req.jsonl:3: topics[0].partitions: partitions must be > 0 (got -2)'
    """

    _NO_VALUE = object()

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        value: object = _NO_VALUE,
        trace_id: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        self.value = value
        self.trace_id = trace_id
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source if self.line is None else f"{self.source}:{self.line}"
        elif self.line is not None:
            where = f"line {self.line}"
        parts = [
            p for p in (where, f"trace {self.trace_id}" if self.trace_id else "", self.field) if p
        ]
        text = self.message
        if self.value is not InputError._NO_VALUE:
            text += f" (got {self.value!r})"
        return ": ".join([*parts, text])

    def located(self, *, source: str | None = None, line: int | None = None) -> InputError:
        """The same error with the file and line filled in (keeps what is already known)."""
        return InputError(
            self.message,
            source=self.source or source,
            line=self.line if self.line is not None else line,
            field=self.field,
            value=self.value,
            trace_id=self.trace_id,
        )


class UnknownAssignorError(InputError):
    """The requested assignor name is neither built in nor installed as a plugin."""
