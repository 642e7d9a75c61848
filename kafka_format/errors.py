"""The one error class of :mod:`kafka_format`: bytes that break Kafka's record format.

Every failure to read a batch, a record, a compressed payload or a varint raises
:class:`KafkaFormatError` (a :class:`ktkbase.errors.InputError`), naming the file, the byte
position and the field, so that the command line prints one line and exits 2:

>>> str(KafkaFormatError("CRC-32C mismatch", source="00000000000000000000.log", position=241,
...                      field="batch.crc", value=7))
'00000000000000000000.log: byte 241: batch.crc: CRC-32C mismatch (got 7)'
"""

from __future__ import annotations

from ktkbase.errors import InputError

__all__ = ["KafkaFormatError"]


class KafkaFormatError(InputError):
    """Bytes that are not a valid Kafka record batch, record, message set or compressed payload.

    ``position`` is the byte position in the file (or buffer) being read; for a record inside a
    compressed batch it is where the batch's records start, and the message adds the byte within
    the decompressed records. ``field`` names the field (``batch.crc``, ``record[3].key``...)."""
