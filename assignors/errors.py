"""Errors raised by the assignors package (all derive from :mod:`ktkbase.errors`).

Every input error names where the bad value came from (file and line when known), the field and
the value, so the command line can print one clear line.

>>> str(InputError("partitions must be > 0", source="req.jsonl", line=3,
...                field="topics[0].partitions", value=-2))
'req.jsonl:3: topics[0].partitions: partitions must be > 0 (got -2)'
>>> type(UnknownAssignorError("no such assignor").located(source="r.json")).__name__
'UnknownAssignorError'
"""

from __future__ import annotations

from ktkbase.errors import InputError as _BaseInputError
from ktkbase.errors import KtkError


class AssignorError(KtkError):
    """Base class of every error the assignors package raises on purpose."""


class InputError(AssignorError, _BaseInputError):
    """A request, trace or file that breaks the documented format."""


class UnknownAssignorError(InputError):
    """The requested assignor name is neither built in nor installed as a plugin."""
