"""The producer key-trace format: read, validate, normalise.

JSON Lines (``key`` base64 or null) or Parquet (``key`` binary), one record per row::

    {"trace_id": "t1", "timestamp_ms": 0, "topic": "orders", "num_partitions": 24,
     "key": "b3JkZXItMQ==", "value_bytes": 512, "partition": null}

``partition`` set means the application chose it. Errors name the file, the line (JSON Lines)
or row (Parquet, 1-based), the field and the bad value.

>>> frame = parse_jsonl_lines(['{"trace_id": "t1", "timestamp_ms": 5, "topic": "orders", '
...     '"num_partitions": 3, "key": "YQ==", "value_bytes": 10, "partition": null}'])
>>> frame.loc[0, "key"], int(frame.loc[0, "num_partitions"]), frame.loc[0, "partition"] is pd.NA
(b'a', 3, True)
>>> parse_jsonl_lines(['{"trace_id": "t1", "timestamp_ms": 5, "topic": "orders", '
...     '"num_partitions": 0, "key": null, "value_bytes": 10, "partition": null}'],
...     source="x.jsonl")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
partitioners.errors.InputError: x.jsonl:1: num_partitions: must be an integer in [1, ...] (got 0)
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ktkbase.files import data_files
from partitioners.errors import InputError
from partitioners.limits import MAX_INT32, MAX_INT64, MAX_PARTITIONS, is_integer

TRACE_COLUMNS = (
    "trace_id",
    "timestamp_ms",
    "topic",
    "num_partitions",
    "key",
    "value_bytes",
    "partition",
)

# the normalised trace as Arrow (what Parquet traces hold and what a Spark job passes along)
TRACE_SCHEMA = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("num_partitions", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value_bytes", pa.int64(), nullable=False),
        pa.field("partition", pa.int32()),
    ]
)


KEY_TRACE_SUFFIXES = (".jsonl", ".json", ".parquet", ".pq")

# longest trace id accepted: it is printed in tables and error lines
MAX_TRACE_ID_CHARS = 1000
# Kafka's own topic-name rule (Topic.validate): 1-249 of these characters, not "." or ".."
MAX_TOPIC_CHARS = 249
_TOPIC_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
# integers in JSON longer than this are not read as numbers (Python refuses 4,300+ digits)
_MAX_JSON_INTEGER_DIGITS = 40
STDIN_SOURCE = "<stdin>"

# (field, lowest, highest) of the integer fields; see partitioners.limits for the reasons
INTEGER_RANGES = (
    ("timestamp_ms", 0, MAX_INT64),
    ("num_partitions", 1, MAX_PARTITIONS),
    ("value_bytes", 0, MAX_INT32),
)


def key_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``: files as given, directories searched recursively for key-trace
    files by the one data-file rule of ``ktkbase.files`` (sorted; ``.x`` and ``_x`` entries
    skipped at any depth). A missing path raises FileNotFoundError."""
    return data_files(paths, KEY_TRACE_SUFFIXES)


def read_key_trace(path: str | Path, source: str | None = None) -> pd.DataFrame:
    """A key trace file (``.parquet`` / ``.pq``, or JSON Lines, gzipped if ``.gz``) as a
    validated DataFrame. Errors name ``source`` (default: the path)."""
    path = Path(path)
    source = source if source is not None else str(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError) as error:
            raise InputError(f"not a readable Parquet file: {error}", source=source) from None
        return frame_from_table(table, source=source)
    if path.suffix.lower() == ".gz":
        import gzip

        with gzip.open(path, "rb") as compressed:
            try:
                return read_jsonl_stream(compressed, source)
            except (OSError, EOFError, zlib.error) as error:
                raise InputError(f"not a readable gzip file: {error}", source=source) from None
    with path.open("rb") as raw:
        return read_jsonl_stream(raw, source)


def read_jsonl_stream(stream: Iterable[bytes], source: str = STDIN_SOURCE) -> pd.DataFrame:
    """JSON Lines from a binary stream (a file, or standard input), each line decoded as UTF-8
    on its own so that a bad byte names its line."""
    return parse_jsonl_lines(_decoded_lines(stream, source), source=source)


def _decoded_lines(stream: Iterable[bytes], source: str) -> Iterator[str]:
    for line_number, raw in enumerate(stream, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(
                f"not valid UTF-8 (byte {error.start} of the line)",
                source=source,
                line=line_number,
                value=raw[max(0, error.start - 8) : error.start + 8],
            ) from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _LongInteger:
    """A JSON integer too long to be any field's value (kept out of ``int()``)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


class _NotJson(ValueError):
    pass


def _parse_int(text: str) -> int | _LongInteger:
    if len(text) > _MAX_JSON_INTEGER_DIGITS:
        return _LongInteger(text)
    return int(text)


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_constant=_refuse_constant)


def _load_json(text: str, source: str | None, line: int) -> Any:
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error.msg}", source=source, line=line) from None
    except _NotJson as error:
        raise InputError(f"not valid JSON: {error}", source=source, line=line) from None
    except RecursionError:
        raise InputError("not valid JSON: nested too deeply", source=source, line=line) from None


def _decode_key(value: Any, source: str | None, line: int) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(
            "must be a base64 string or null", source=source, line=line, field="key", value=value
        )
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(
            "is not valid base64", source=source, line=line, field="key", value=value
        ) from None


def text_problem(field: str, value: Any) -> str | None:
    """What is wrong with a ``trace_id`` or ``topic`` value, or None.

    >>> text_problem("topic", "orders"), text_problem("topic", "a b")
    (None, 'must be a Kafka topic name: 1-249 of a-z A-Z 0-9 . _ -')
    >>> text_problem("trace_id", "t" + chr(0xD800))
    'must be valid Unicode (a lone surrogate cannot be written as UTF-8)'
    """
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if field == "topic":
        if (
            len(value) > MAX_TOPIC_CHARS
            or value in (".", "..")
            or not _TOPIC_CHARACTERS.issuperset(value)
        ):
            return "must be a Kafka topic name: 1-249 of a-z A-Z 0-9 . _ -"
        return None
    if len(value) > MAX_TRACE_ID_CHARS:
        return f"must be at most {MAX_TRACE_ID_CHARS} characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (a lone surrogate cannot be written as UTF-8)"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        return "must not hold control characters"
    return None


def parse_jsonl_lines(lines: Iterable[str], source: str | None = None) -> pd.DataFrame:
    """Validate JSON Lines records (blank lines skipped) into the normalised DataFrame."""
    columns: dict[str, list[Any]] = {name: [] for name in TRACE_COLUMNS}
    for line_number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        record = _load_json(text, source, line_number)
        if not isinstance(record, dict):
            raise InputError("each line must be a JSON object", source=source, line=line_number)
        missing = [name for name in TRACE_COLUMNS if name not in record]
        if missing:
            raise InputError(
                "missing field", source=source, line=line_number, field=", ".join(missing)
            )
        _check_record(record, source, line_number)
        for name in TRACE_COLUMNS:
            columns[name].append(record[name])
        columns["key"][-1] = _decode_key(record["key"], source, line_number)
    if not columns["trace_id"]:
        raise InputError("the trace holds no records", source=source)
    return _frame(columns)


def _check_record(record: dict[str, Any], source: str | None, line: int) -> None:
    def bad(field: str, message: str) -> InputError:
        return InputError(message, source=source, line=line, field=field, value=record[field])

    for field in ("trace_id", "topic"):
        problem = text_problem(field, record[field])
        if problem:
            raise bad(field, problem)
    for field, low, high in INTEGER_RANGES:
        value = record[field]
        if not _is_int(value) or not low <= value <= high:
            raise bad(field, f"must be an integer in [{low}, {high}]")
    partition = record["partition"]
    if partition is not None and (
        not _is_int(partition) or not 0 <= partition < record["num_partitions"]
    ):
        raise bad("partition", f"must be null or an integer in [0, {record['num_partitions']})")


def _frame(columns: dict[str, list[Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "trace_id": pd.Series(columns["trace_id"], dtype=object),
            "timestamp_ms": pd.Series(columns["timestamp_ms"], dtype=np.int64),
            "topic": pd.Series(columns["topic"], dtype=object),
            "num_partitions": pd.Series(columns["num_partitions"], dtype=np.int32),
            "key": pd.Series(columns["key"], dtype=object),
            "value_bytes": pd.Series(columns["value_bytes"], dtype=np.int64),
            "partition": pd.Series(columns["partition"], dtype="Int32"),
        }
    )


def frame_from_table(table: pa.Table, source: str | None = None) -> pd.DataFrame:
    """A Parquet/Arrow trace table, validated, as the normalised DataFrame."""
    missing = [name for name in TRACE_COLUMNS if name not in table.column_names]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; a key trace needs {', '.join(TRACE_COLUMNS)}",
            source=source,
        )
    key_type = table.schema.field("key").type
    if not (
        pa.types.is_binary(key_type)
        or pa.types.is_large_binary(key_type)
        or pa.types.is_null(key_type)
    ):
        raise InputError(
            "must be binary in Parquet", source=source, field="key", value=str(key_type)
        )
    try:
        frame = table.select(list(TRACE_COLUMNS)).to_pandas()
    except (pa.ArrowException, ValueError, OverflowError) as error:
        raise InputError(f"unreadable columns: {error}", source=source) from None
    return normalize_frame(frame, source=source, row_label="row")


def normalize_frame(
    frame: pd.DataFrame, source: str | None = None, row_label: str = "row"
) -> pd.DataFrame:
    """Check and convert any DataFrame with the trace columns (from Parquet, Arrow or Spark,
    where nullable ints may arrive as floats and keys as ``bytearray``). Pure."""
    missing = [name for name in TRACE_COLUMNS if name not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=source)
    count = len(frame)
    if count == 0:
        raise InputError("the trace holds no records", source=source)

    def first_bad(mask: np.ndarray, field: str, message: str) -> None:
        if mask.any():
            row = int(np.flatnonzero(mask)[0])
            value = frame[field].iloc[row]
            if isinstance(value, np.generic):
                value = value.item()
            where = f"{row_label} {row + 1}"
            raise InputError(
                message, source=f"{source}: {where}" if source else where, field=field, value=value
            )

    for field in ("trace_id", "topic"):
        # few distinct ids and topics: check each once
        cells = frame[field].tolist()
        keys = [_hashable(value) for value in cells]
        problems: dict[Any, str | None] = {}
        for key, value in zip(keys, cells, strict=True):
            if key not in problems:
                problems[key] = text_problem(field, value)
        if any(problems.values()):
            bad = np.array([problems[key] is not None for key in keys], dtype=bool)
            first_bad(bad, field, problems[keys[int(np.argmax(bad))]] or "")
    integers = {}
    for field, low, high in INTEGER_RANGES:
        numbers, bad = _integer_column(frame[field], low, high)
        first_bad(bad, field, f"must be an integer in [{low}, {high}]")
        integers[field] = numbers
    given = frame["partition"].notna().to_numpy()
    partition, bad = _integer_column(frame["partition"], 0, MAX_PARTITIONS - 1, nullable=True)
    bad |= given & (partition >= integers["num_partitions"])
    first_bad(bad, "partition", "must be null or an integer in [0, num_partitions)")
    keys = [_normalize_key(value) for value in frame["key"]]
    bad_keys = np.array([key is _BAD for key in keys], dtype=bool)
    first_bad(bad_keys, "key", "must be bytes or null")
    partition_values = pd.array(np.where(given, partition, 0).astype(np.int32), dtype="Int32")
    partition_values[~given] = pd.NA
    return pd.DataFrame(
        {
            "trace_id": pd.Series(list(frame["trace_id"]), dtype=object),
            "timestamp_ms": integers["timestamp_ms"],
            "topic": pd.Series(list(frame["topic"]), dtype=object),
            "num_partitions": integers["num_partitions"].astype(np.int32),
            "key": pd.Series(keys, dtype=object),
            "value_bytes": integers["value_bytes"],
            "partition": partition_values,
        }
    )


_BAD = object()


def _normalize_key(value: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview | np.ndarray):
        return bytes(value)
    return _BAD


def _hashable(value: Any) -> Any:
    """A dictionary key for a cell: strings as themselves, anything else by type and repr
    (so the integer 5 and the text "5" stay apart)."""
    return value if isinstance(value, str) else (type(value).__name__, repr(value))


def _integer_column(
    values: pd.Series, low: int, high: int, nullable: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, mask of the bad ones) of a column that should hold integers in
    ``[low, high]``; checked in the column's own type before any cast, so nothing wraps or
    loses precision (a float past 2**53, a uint64 past 2**63). Nulls are bad unless
    ``nullable`` (then they read as 0 and are left to the caller)."""
    count = len(values)
    nulls = values.isna().to_numpy()
    dtype = values.dtype
    kind = getattr(dtype, "kind", "O")
    if kind in "iu" and not nulls.any():
        raw = values.to_numpy()
        bad = (raw < low) | (raw > high)
        return np.where(bad, 0, raw).astype(np.int64), bad
    if kind == "f":
        raw = values.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            bad = (
                ~np.isfinite(raw) | (raw != np.floor(raw)) | (raw < low) | (raw >= float(high) + 1)
            )
        if nullable:
            bad &= ~nulls
        return np.where(bad | nulls, 0, raw).astype(np.int64), bad
    # object or nullable extension columns: one Python check per value
    numbers = np.zeros(count, dtype=np.int64)
    bad = np.zeros(count, dtype=bool)
    for row, value in enumerate(values.to_numpy(dtype=object, na_value=None)):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            bad[row] = not nullable
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if is_integer(value) and low <= int(value) <= high:
            numbers[row] = int(value)
        else:
            bad[row] = True
    return numbers, bad
