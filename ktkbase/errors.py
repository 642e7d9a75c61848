"""One error base for every package: what went wrong, and exactly where.

Every error a ktk package raises on purpose derives from :class:`KtkError`; bad input derives
from :class:`InputError`, whose message names the place (file and line, scenario step, byte
position, trace) and the field, then says what is wrong and shows the bad value, shortened so
that a 10 MB value still gives one readable line.

>>> str(InputError("partitions must be > 0", source="req.jsonl", line=3,
...                field="topics[0].partitions", value=-2))
'req.jsonl:3: topics[0].partitions: partitions must be > 0 (got -2)'
>>> str(InputError("unknown broker", source="s1.yaml", step=4, field="fetch", value=7))
's1.yaml: step 4: fetch: unknown broker (got 7)'
>>> str(InputError("CRC mismatch", source="0.log", position=61, field="crc"))
'0.log: byte 61: crc: CRC mismatch'
>>> str(InputError("no value given", field="x", value=None))
'x: no value given (got None)'
"""

from __future__ import annotations

import copy
import reprlib
from typing import Self

_VALUE_REPR = reprlib.Repr()
_VALUE_REPR.maxstring = 60
_VALUE_REPR.maxother = 60
_VALUE_REPR.maxlong = 40
_VALUE_REPR.maxlist = 6
_VALUE_REPR.maxdict = 4
_VALUE_REPR.maxlevel = 3


def short_repr(value: object) -> str:
    """``repr`` of a bad value, cut to a readable length (values may be megabytes long).

    >>> short_repr("x" * 1000)[:12], len(short_repr("x" * 1000)) < 80
    ("'xxxxxxxxxxx", True)
    >>> short_repr(10 ** 5000)[-3:], len(short_repr(10 ** 5000)) < 60
    ('...', True)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits..."
    try:
        return _VALUE_REPR.repr(value)
    except Exception:  # a value whose repr fails is still an error to report, not a new crash
        return f"<{type(value).__name__}>"


class KtkError(Exception):
    """Base class of every error a ktk package raises on purpose."""


class InputError(KtkError, ValueError):
    """Input that breaks a documented format or limit; the command line prints it as one line
    and exits 2."""

    _NO_VALUE = object()

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        step: int | None = None,
        position: int | None = None,
        trace_id: str | None = None,
        field: str | None = None,
        value: object = _NO_VALUE,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.step = step
        self.position = position
        self.trace_id = trace_id
        self.field = field
        self.value = value
        super().__init__(self._render())

    @property
    def has_value(self) -> bool:
        return self.value is not InputError._NO_VALUE

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source if self.line is None else f"{self.source}:{self.line}"
        elif self.line is not None:
            where = f"line {self.line}"
        parts = [
            where,
            f"step {self.step}" if self.step is not None else "",
            f"byte {self.position}" if self.position is not None else "",
            f"trace {self.trace_id}" if self.trace_id else "",
            self.field or "",
        ]
        text = self.message
        if self.has_value:
            text += f" (got {short_repr(self.value)})"
        return ": ".join([*(part for part in parts if part), text])

    def located(
        self,
        *,
        source: str | None = None,
        line: int | None = None,
        step: int | None = None,
        position: int | None = None,
    ) -> Self:
        """The same error (same class) with the place filled in; what is known already stays."""
        located = copy.copy(self)
        located.source = self.source or source
        located.line = self.line if self.line is not None else line
        located.step = self.step if self.step is not None else step
        located.position = self.position if self.position is not None else position
        located.args = (located._render(),)
        return located


class OutputError(KtkError):
    """An output ktk refuses to write, or cannot write, because it would destroy something
    (an input, a directory ktk did not create, the current or home directory) or because the
    disk said no. The command line prints it as one line and exits 2."""
