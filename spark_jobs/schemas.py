"""Spark DDL for the Arrow schemas the domain packages declare for their result tables."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa


def spark_type(arrow_type: pa.DataType) -> str:
    """Spark SQL type name of an Arrow type (the flat and list types result tables use)."""
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return f"array<{spark_type(arrow_type.value_type)}>"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    if pa.types.is_int8(arrow_type) or pa.types.is_int16(arrow_type):
        return "smallint"
    if pa.types.is_int32(arrow_type):
        return "int"
    if pa.types.is_integer(arrow_type):
        return "bigint"
    if pa.types.is_floating(arrow_type):
        return "double"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "binary"
    raise TypeError(f"no Spark type for Arrow type {arrow_type}")


def spark_ddl(schema: pa.Schema, extra: Sequence[str] = ()) -> str:
    """``name type, ...`` for ``schema`` plus ``extra`` columns given as DDL fragments.

    >>> spark_ddl(pa.schema([("trace_id", pa.string()), ("loads", pa.list_(pa.int64()))]),
    ...           ["error string"])
    '`trace_id` string, `loads` array<bigint>, error string'
    """
    return ", ".join([*(f"`{field.name}` {spark_type(field.type)}" for field in schema), *extra])
