"""Errors raised while reading the files a dashboard is built from.

>>> str(InputError("missing column", source="results/scores.parquet", field="assignor"))
'results/scores.parquet: assignor: missing column'
>>> str(InputError("must be a number", source="run.json", field="steps[0].time", value=None))
'run.json: steps[0].time: must be a number (got None)'
"""

from __future__ import annotations

from ktkbase.errors import InputError as _BaseInputError
from ktkbase.errors import KtkError


class DashboardError(KtkError):
    """Base class of every error the dashboards package raises on purpose."""


class InputError(DashboardError, _BaseInputError):
    """A results file that cannot be turned into a dashboard; names the file, field and value."""
