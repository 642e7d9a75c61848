"""Errors raised by the partitioners package.

Every input error names where the bad value came from (file and line or row when known), the
field and the value, so the command line can print one clear line.
"""

from __future__ import annotations


class PartitionerError(Exception):
    """Base class of every error the partitioners package raises on purpose."""


class InputError(PartitionerError, ValueError):
    """A key, trace or option that breaks the documented format.

    >>> str(InputError("num_partitions must be > 0", source="trace.jsonl", line=3,
    ...                field="num_partitions", value=0))
    'trace.jsonl:3: num_partitions: num_partitions must be > 0 (got 0)'
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
        trace = f"trace {self.trace_id}" if self.trace_id else ""
        parts = [part for part in (where, trace, self.field) if part]
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


class UnknownPartitionerError(InputError):
    """The requested partitioner name is not one ktk knows."""
