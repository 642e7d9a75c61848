"""Errors raised by the replication package.

Every input error names where the bad value came from (the scenario file and the step index, or
the file and line, when known), the field and the value, so the command line can print one clear
line.
"""

from __future__ import annotations


class ReplicationError(Exception):
    """Base class of every error the replication package raises on purpose."""


class InputError(ReplicationError, ValueError):
    """A scenario or configuration that breaks the documented format.

    >>> str(InputError("acks must be 0, 1 or all", source="s1.yaml", step=3,
    ...                field="acks", value=2))
    's1.yaml: step 3: acks: acks must be 0, 1 or all (got 2)'
    """

    _NO_VALUE = object()

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        step: int | None = None,
        field: str | None = None,
        value: object = _NO_VALUE,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.step = step
        self.field = field
        self.value = value
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.source or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        parts = [
            part
            for part in (
                where,
                f"step {self.step}" if self.step is not None else "",
                self.field or "",
            )
            if part
        ]
        text = self.message
        if self.value is not InputError._NO_VALUE:
            text += f" (got {self.value!r})"
        return ": ".join([*parts, text])

    def located(self, *, source: str | None = None) -> InputError:
        """The same error with the file filled in (keeps what is already known)."""
        return type(self)(
            self.message,
            source=self.source or source,
            step=self.step,
            field=self.field,
            value=self.value,
            line=self.line,
        )


class ScenarioError(InputError):
    """A scenario file that cannot be run: unknown op, unknown broker, bad acks, time going back.

    >>> str(ScenarioError("unknown broker", step=0, field="fetch", value=7))
    'step 0: fetch: unknown broker (got 7)'
    """
