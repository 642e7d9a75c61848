"""The two checksums of Kafka's log: CRC-32C for message format v2 batches (``Crc32C``), CRC-32
(IEEE, ``java.util.zip.CRC32``) for magic 0/1 messages (``LegacyRecord``); both unsigned.

>>> crc32c(b"123456789"), crc32(b"123456789")
(3808858755, 3421780262)
"""

from __future__ import annotations

import zlib

import google_crc32c

__all__ = ["crc32", "crc32c"]


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, hardware-accelerated where the CPU has it."""
    if not isinstance(data, bytes):
        data = bytes(data)  # the C extension takes read-only bytes only
    return int(google_crc32c.value(data))


def crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC-32 (IEEE 802.3, as zlib and ``java.util.zip.CRC32``) of ``data``."""
    return zlib.crc32(data) & 0xFFFFFFFF
