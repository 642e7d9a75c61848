"""Errors raised by the replication package (all derive from :mod:`ktkbase.errors`).

Every input error names where the bad value came from (the scenario file and the step index, or
the file and line, when known), the field and the value, so the command line can print one clear
line.

>>> str(InputError("acks must be 0, 1 or all", source="s1.yaml", step=3,
...                field="acks", value=2))
's1.yaml: step 3: acks: acks must be 0, 1 or all (got 2)'
"""

from __future__ import annotations

from ktkbase.errors import InputError as _BaseInputError
from ktkbase.errors import KtkError


class ReplicationError(KtkError):
    """Base class of every error the replication package raises on purpose."""


class InputError(ReplicationError, _BaseInputError):
    """A scenario or configuration that breaks the documented format."""


class ScenarioError(InputError):
    """A scenario file that cannot be run: unknown op, unknown broker, bad acks, time going back.

    >>> str(ScenarioError("unknown broker", step=0, field="fetch", value=7))
    'step 0: fetch: unknown broker (got 7)'
    """
