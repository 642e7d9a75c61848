"""Errors raised by the partitioners package (all derive from :mod:`ktkbase.errors`).

Every input error names where the bad value came from (file and line or row when known), the
field and the value, so the command line can print one clear line.

>>> str(InputError("num_partitions must be > 0", source="trace.jsonl", line=3,
...                field="num_partitions", value=0))
'trace.jsonl:3: num_partitions: num_partitions must be > 0 (got 0)'
"""

from __future__ import annotations

from ktkbase.errors import InputError as _BaseInputError
from ktkbase.errors import KtkError


class PartitionerError(KtkError):
    """Base class of every error the partitioners package raises on purpose."""


class InputError(PartitionerError, _BaseInputError):
    """A key, trace or option that breaks the documented format."""


class UnknownPartitionerError(InputError):
    """The requested partitioner name is not one ktk knows."""
