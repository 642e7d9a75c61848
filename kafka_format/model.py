"""Values shared by both record formats: timestamp types, headers, records to write.

>>> Header.of("trace-id", b"7f").key_text
'trace-id'
>>> TimestampType.from_attributes(0x08).label
'LOG_APPEND_TIME'
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["NO_TIMESTAMP", "Header", "NewRecord", "TimestampType"]

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class TimestampType(enum.IntEnum):
    """``TimestampType``: what a batch's timestamps mean (magic 0 has none)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        """Kafka's spelling, as ``kafka-dump-log`` prints it."""
        return self.name

    @classmethod
    def from_attributes(cls, attributes: int) -> TimestampType:
        """Bit 3 of the attributes (magic 1 and 2)."""
        return cls.LOG_APPEND_TIME if attributes & 0x08 else cls.CREATE_TIME

    @classmethod
    def from_name(cls, name: str) -> TimestampType:
        from kafka_format.errors import KafkaFormatError

        try:
            return cls[name.upper()]
        except KeyError:
            raise KafkaFormatError(
                "unknown timestamp type (CREATE_TIME, LOG_APPEND_TIME)",
                field="timestamp_type",
                value=name,
            ) from None


@dataclass(frozen=True, slots=True)
class Header:
    """A record header (magic 2): the key's raw UTF-8 bytes and a nullable value."""

    key: bytes
    value: bytes | None

    @classmethod
    def of(cls, key: str | bytes, value: bytes | None) -> Header:
        return cls(key.encode("utf-8") if isinstance(key, str) else bytes(key), value)

    @property
    def key_text(self) -> str:
        """The key as Java's ``RecordHeader.key()`` decodes it (bad UTF-8 becomes U+FFFD)."""
        return self.key.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class NewRecord:
    """One record to write: ``MemoryRecordsBuilder.append`` (``offset`` None: the next offset)
    or ``appendWithOffset`` (an explicit offset, as log compaction leaves gaps)."""

    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[Header, ...] = ()
    offset: int | None = None
