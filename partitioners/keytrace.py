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
...     source="x.jsonl")
Traceback (most recent call last):
...
partitioners.errors.InputError: x.jsonl:1: num_partitions: must be an integer > 0 (got 0)
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from partitioners.errors import InputError

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


def key_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``: files as given, directories searched recursively for key-trace
    files (sorted; hidden entries skipped). A missing path raises FileNotFoundError."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                sorted(
                    candidate
                    for candidate in path.rglob("*")
                    if candidate.is_file()
                    and candidate.name.endswith(KEY_TRACE_SUFFIXES)
                    and not any(
                        part.startswith((".", "_")) for part in candidate.relative_to(path).parts
                    )
                )
            )
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(2, "No such file or directory", str(path))
    return found


def read_key_trace(path: str | Path) -> pd.DataFrame:
    """A key trace file (``.parquet`` / ``.pq``, or JSON Lines, gzipped if ``.gz``) as a
    validated DataFrame."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as error:
            if isinstance(error, FileNotFoundError):
                raise
            raise InputError(f"not a readable Parquet file: {error}", source=str(path)) from None
        return frame_from_table(table, source=str(path))
    if path.suffix.lower() == ".gz":
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as lines:
            return parse_jsonl_lines(lines, source=str(path))
    with path.open(encoding="utf-8") as lines:
        return parse_jsonl_lines(lines, source=str(path))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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


def parse_jsonl_lines(lines: Iterable[str], source: str | None = None) -> pd.DataFrame:
    """Validate JSON Lines records (blank lines skipped) into the normalised DataFrame."""
    columns: dict[str, list[Any]] = {name: [] for name in TRACE_COLUMNS}
    for line_number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                f"not valid JSON: {error.msg}", source=source, line=line_number
            ) from None
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
        if not isinstance(record[field], str) or not record[field]:
            raise bad(field, "must be a non-empty string")
    if not _is_int(record["timestamp_ms"]) or record["timestamp_ms"] < 0:
        raise bad("timestamp_ms", "must be an integer >= 0")
    if not _is_int(record["num_partitions"]) or record["num_partitions"] <= 0:
        raise bad("num_partitions", "must be an integer > 0")
    if not _is_int(record["value_bytes"]) or record["value_bytes"] < 0:
        raise bad("value_bytes", "must be an integer >= 0")
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
    return normalize_frame(
        table.select(list(TRACE_COLUMNS)).to_pandas(), source=source, row_label="row"
    )


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
            where = f"{row_label} {row + 1}"
            raise InputError(
                message, source=f"{source}: {where}" if source else where, field=field, value=value
            )

    for field in ("trace_id", "topic"):
        values = frame[field]
        bad = np.array([not isinstance(v, str) or not v for v in values], dtype=bool)
        first_bad(bad, field, "must be a non-empty string")
    integers = {}
    for field, low, message in (
        ("timestamp_ms", 0, "must be an integer >= 0"),
        ("num_partitions", 1, "must be an integer > 0"),
        ("value_bytes", 0, "must be an integer >= 0"),
    ):
        numeric = pd.to_numeric(frame[field], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(numeric) | (numeric < low) | (numeric != np.floor(numeric))
        first_bad(bad, field, message)
        integers[field] = numeric.astype(np.int64)
    partition = pd.to_numeric(frame["partition"], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )
    given = frame["partition"].notna().to_numpy()
    bad = given & (
        ~np.isfinite(partition)
        | (partition != np.floor(partition))
        | (partition < 0)
        | (partition >= integers["num_partitions"])
    )
    first_bad(bad, "partition", "must be null or an integer in [0, num_partitions)")
    keys = [_normalize_key(value) for value in frame["key"]]
    bad_keys = np.array([key is _BAD for key in keys], dtype=bool)
    first_bad(bad_keys, "key", "must be bytes or null")
    partition_values = pd.array(
        [int(p) if g else pd.NA for p, g in zip(partition, given, strict=True)], dtype="Int32"
    )
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
