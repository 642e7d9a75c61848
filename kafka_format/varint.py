"""Kafka's variable-length integers (``ByteUtils``), bit-exact with the Java client.

Records of message format v2 store lengths and deltas as zig-zag varints (int32) and varlongs
(int64); request headers use unsigned varints. Encoding is canonical; decoding accepts what
Java's ``ByteUtils.readVarint(ByteBuffer)`` accepts -- non-canonical paddings such as ``80 00``
included -- and rejects what it rejects: a varint whose 5th byte has its top bit set, a varlong
of more than 10 bytes, and input that ends inside the number.

>>> write_varint(-1).hex(), write_varint(300).hex(), write_varlong(-(2**63)).hex()
('01', 'd804', 'ffffffffffffffffff01')
>>> read_varint(bytes.fromhex("d80400"), 0)
(300, 2)
>>> read_varint(bytes.fromhex("ffffffff1f"), 0)   # Java keeps 4 bits of the 5th byte
(-2147483648, 5)
"""

from __future__ import annotations

from kafka_format.errors import KafkaFormatError

__all__ = [
    "read_unsigned_varint",
    "read_varint",
    "read_varlong",
    "size_of_varint",
    "size_of_varlong",
    "write_unsigned_varint",
    "write_varint",
    "write_varlong",
]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _truncated(kind: str, position: int) -> KafkaFormatError:
    return KafkaFormatError(f"input ends inside a {kind}", position=position, field=kind)


def read_unsigned_varint(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``position``; returns (value as Java's signed int32, next
    position). At most 5 bytes; only the low 4 bits of a 5th byte count, as in Java."""
    result = 0
    shift = 0
    index = position
    end = len(data)
    while True:
        if index >= end:
            raise _truncated("varint", index)
        byte = data[index]
        index += 1
        if shift == 28:
            if byte & 0x80:
                raise KafkaFormatError(
                    "varint is too long: the most significant bit in the 5th byte is set",
                    position=position,
                    field="varint",
                )
            result = (result | (byte << 28)) & _MASK32
            break
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    if result & 0x80000000:
        result -= 1 << 32
    return result, index


def read_varint(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Decode a zig-zag varint (int32) at ``position``; returns (value, next position)."""
    raw, index = read_unsigned_varint(data, position)
    raw &= _MASK32
    return (raw >> 1) ^ -(raw & 1), index


def read_varlong(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (int64) at ``position``; returns (value, next position).
    At most 10 bytes; bits past the 64th are dropped, as Java's shifts drop them."""
    raw = 0
    shift = 0
    index = position
    end = len(data)
    while True:
        if index >= end:
            raise _truncated("varlong", index)
        byte = data[index]
        index += 1
        if not byte & 0x80:
            raw |= byte << shift
            break
        raw |= (byte & 0x7F) << shift
        shift += 7
        if shift > 63:
            raise KafkaFormatError(
                "varlong is too long: the most significant bit in the 10th byte is set",
                position=position,
                field="varlong",
            )
    raw &= _MASK64
    return (raw >> 1) ^ -(raw & 1), index


def write_unsigned_varint(value: int) -> bytes:
    """Encode the low 32 bits of ``value`` as an unsigned varint (1-5 bytes)."""
    raw = value & _MASK32
    out = bytearray()
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """Encode an int32 as a zig-zag varint (1-5 bytes)."""
    if not -(2**31) <= value < 2**31:
        raise KafkaFormatError("varint out of int32 range", field="varint", value=value)
    return write_unsigned_varint((value << 1) ^ (value >> 31))


def write_varlong(value: int) -> bytes:
    """Encode an int64 as a zig-zag varlong (1-10 bytes)."""
    if not -(2**63) <= value < 2**63:
        raise KafkaFormatError("varlong out of int64 range", field="varlong", value=value)
    raw = ((value << 1) ^ (value >> 63)) & _MASK64
    out = bytearray()
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def size_of_varint(value: int) -> int:
    """Bytes :func:`write_varint` uses for ``value``."""
    raw = ((value << 1) ^ (value >> 31)) & _MASK32
    return max(1, (raw.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    """Bytes :func:`write_varlong` uses for ``value``."""
    raw = ((value << 1) ^ (value >> 63)) & _MASK64
    return max(1, (raw.bit_length() + 6) // 7)
