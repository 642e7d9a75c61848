"""The ranges every partitioners value accepts, checked where a value is made.

Config and value objects check their fields in ``__post_init__`` and raise
:class:`partitioners.errors.InputError` naming the field and the value, so a bad setting fails
where it is made, not as a ``ZeroDivisionError`` or a negative batch fill later on.

Limits, and why:

- partition counts: 1 to ``MAX_PARTITIONS`` (1,000,000). The model keeps per-partition state
  and the scores hold one entry per partition, so the count is refused before anything is
  allocated; no real topic comes near it (a whole KRaft cluster is sized for a few million
  partitions across all its topics).
- record and batch sizes (``value_bytes``, ``batch.size``, ``max.request.size``) and times in
  settings (``linger.ms``, latencies): 0 or 1 up to ``MAX_INT32``, as Java ints in the client.
- timestamps: 0 up to ``MAX_INT64`` (Java longs, epoch milliseconds).
- seeds: any signed 64-bit integer (they are stored in an ``int64`` score column).

>>> check_int("ProducerConfig", "batch_size", 16384, low=1, high=MAX_INT32)
16384
>>> check_int("ProducerConfig", "linger_ms", -5, low=0, high=MAX_INT32)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
partitioners.errors.InputError: ProducerConfig.linger_ms: must be an integer in [0, ...] (got -5)
"""

from __future__ import annotations

import math

import numpy as np

from partitioners.errors import InputError

MAX_PARTITIONS = 1_000_000
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)


def _name(owner: str, field: str) -> str:
    return f"{owner}.{field}" if owner else field


def is_integer(value: object) -> bool:
    """An int (Python or numpy), not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_int(owner: str, field: str, value: object, *, low: int, high: int) -> int:
    """``value`` if it is an integer in ``[low, high]``; InputError naming ``owner.field``."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        number = int(value)
        if low <= number <= high:
            return number
    raise InputError(
        f"must be an integer in [{low}, {high}]", field=_name(owner, field), value=value
    )


def check_bool(owner: str, field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InputError("must be true or false", field=_name(owner, field), value=value)
    return value


def check_positive_rate(owner: str, field: str, value: object, *, allow_inf: bool) -> float:
    """A rate > 0 (``math.inf`` allowed when ``allow_inf``: no limit)."""
    number = (
        float(value)
        if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
        else math.nan
    )
    if math.isnan(number) or number <= 0 or (math.isinf(number) and not allow_inf):
        limit = "a number > 0 (inf: no limit)" if allow_inf else "a finite number > 0"
        raise InputError(f"must be {limit}", field=_name(owner, field), value=value)
    return number


def check_partitions(owner: str, field: str, value: object) -> int:
    """A partition count in [1, MAX_PARTITIONS]."""
    return check_int(owner, field, value, low=1, high=MAX_PARTITIONS)
