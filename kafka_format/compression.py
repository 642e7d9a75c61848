"""Kafka's compression codecs with Kafka's own framing, for both directions.

The codec id lives in the low 3 bits of a batch's (or legacy wrapper message's) attributes:

======  ====  ===================================================================================
codec    id   framing (what ``Compression.wrapForOutput`` / ``wrapForInput`` write and read)
======  ====  ===================================================================================
none     0    the records as they are
gzip     1    one gzip member as ``java.util.zip.GZIPOutputStream`` writes it: header
              ``1f8b 08 00 00000000 00 ff`` (no name, no mtime, XFL 0, OS 255), raw deflate
              (zlib, window 15, memLevel 8), CRC-32 and length little-endian
snappy   2    xerial framing of snappy-java's ``SnappyOutputStream``: ``82 'SNAPPY' 00``,
              int32 version 1, int32 compatible version 1, then chunks [int32 BE length][raw
              snappy block] of at most 32 KiB input each; a stream without that header is read
              as one raw snappy block, as ``SnappyInputStream`` does
lz4      3    Kafka's LZ4 frame (``Lz4BlockOutputStream``): magic ``04224d18``, FLG ``60``
              (version 1, independent blocks, no checksums), BD ``40`` (64 KiB blocks), header
              checksum byte = (xxh32(FLG BD) >> 8) & 0xff -- for magic 0, xxh32 over magic + FLG
              + BD, the old bug Kafka keeps; blocks [int32 LE size, top bit = stored][data]; end
              mark ``00000000``
zstd     4    one zstd frame (zstd-jni streaming output: no content size)
======  ====  ===================================================================================

>>> payload = b"kafka " * 100
>>> all(decompress(codec, compress(codec, payload)) == payload for codec in Compression)
True
>>> compress(Compression.GZIP, b"")[:10].hex()
'1f8b08000000000000ff'
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam

from kafka_format.errors import KafkaFormatError

__all__ = [
    "Compression",
    "compress",
    "decompress",
    "xxh32",
]


class Compression(enum.IntEnum):
    """Codec id of a batch (``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """Kafka's name: none, gzip, snappy, lz4, zstd."""
        return self.name.lower()

    @classmethod
    def from_id(cls, codec_id: int) -> Compression:
        try:
            return cls(codec_id)
        except ValueError:
            raise KafkaFormatError(
                "unknown compression codec id", field="attributes.compression", value=codec_id
            ) from None

    @classmethod
    def from_name(cls, name: str) -> Compression:
        try:
            return cls[name.upper()]
        except KeyError:
            raise KafkaFormatError(
                "unknown compression codec (none, gzip, snappy, lz4, zstd)",
                field="compression",
                value=name,
            ) from None


# Kafka's default levels (CompressionType.defaultLevel) and ranges (minLevel..maxLevel).
DEFAULT_LEVELS = {Compression.GZIP: -1, Compression.LZ4: 9, Compression.ZSTD: 3}
LEVEL_RANGES = {Compression.GZIP: (1, 9), Compression.LZ4: (1, 17), Compression.ZSTD: (-131072, 22)}

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_HEADER = _SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
_SNAPPY_BLOCK = 32 * 1024
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK = 64 * 1024
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
_LZ4_STORED = 0x80000000


def _error(codec: Compression, message: str) -> KafkaFormatError:
    return KafkaFormatError(message, field=f"{codec.label} payload")


# --- xxHash32 (only the frame header checksum needs it; a few bytes per batch) -------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(value: int, count: int) -> int:
    return ((value << count) | (value >> (32 - count))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the LZ4 frame's checksum function).

    >>> hex(xxh32(b"")), hex(xxh32(b"abc"))
    ('0x2cc5d05', '0x32d153ff')
    """
    length = len(data)
    index = 0
    if length >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while index + 16 <= length:
            a, b, c, d = struct.unpack_from("<IIII", data, index)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            index += 16
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + length) & _M32
    while index + 4 <= length:
        (word,) = struct.unpack_from("<I", data, index)
        acc = (_rotl((acc + word * _P3) & _M32, 17) * _P4) & _M32
        index += 4
    while index < length:
        acc = (_rotl((acc + data[index] * _P5) & _M32, 11) * _P1) & _M32
        index += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


# --- writing --------------------------------------------------------------------------------
def _check_level(codec: Compression, level: int | None) -> int:
    if level is None:
        return DEFAULT_LEVELS[codec]
    low, high = LEVEL_RANGES[codec]
    if codec is Compression.GZIP and level == -1:
        return level
    if not low <= level <= high:
        raise KafkaFormatError(
            f"{codec.label} level must be in {low}..{high}", field="compression_level", value=level
        )
    return level


def compress(codec: Compression, data: bytes, *, level: int | None = None, magic: int = 2) -> bytes:
    """``data`` compressed with ``codec`` in Kafka's framing (``level`` None = Kafka's default).

    gzip output is byte-identical to Kafka's (same zlib); snappy, lz4 and zstd framing is
    Kafka's, while the compressed blocks are those of the library here (libraries differ)."""
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        deflater = zlib.compressobj(_check_level(codec, level), zlib.DEFLATED, -15, 8)
        body = deflater.compress(data) + deflater.flush()
        trailer = struct.pack("<II", zlib.crc32(data) & _M32, len(data) & _M32)
        return _GZIP_HEADER + body + trailer
    if codec is Compression.SNAPPY:
        if level is not None:
            raise KafkaFormatError("snappy has no levels", field="compression_level", value=level)
        out = [_SNAPPY_HEADER]
        for start in range(0, len(data), _SNAPPY_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _SNAPPY_BLOCK]))
            out.append(struct.pack(">i", len(block)))
            out.append(block)
        return b"".join(out)
    if codec is Compression.LZ4:
        return _lz4_frame(data, _check_level(codec, level), magic)
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_check_level(codec, level)))
    raise _error(codec, "unsupported codec")  # pragma: no cover - the enum is closed


def _lz4_frame(data: bytes, level: int, magic: int) -> bytes:
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    checked = struct.pack("<I", _LZ4_MAGIC) + descriptor if magic == 0 else descriptor
    out = [struct.pack("<I", _LZ4_MAGIC), descriptor, bytes(((xxh32(checked) >> 8) & 0xFF,))]
    for start in range(0, len(data), _LZ4_BLOCK):
        block = data[start : start + _LZ4_BLOCK]
        if level == DEFAULT_LEVELS[Compression.LZ4]:
            packed = bytes(cramjam.lz4.compress_block(block, store_size=False))
        else:
            packed = bytes(
                cramjam.lz4.compress_block(
                    block, store_size=False, mode="high_compression", compression=level
                )
            )
        if len(packed) >= len(block):
            out.append(struct.pack("<I", len(block) | _LZ4_STORED))
            out.append(bytes(block))
        else:
            out.append(struct.pack("<I", len(packed)))
            out.append(packed)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


# --- reading --------------------------------------------------------------------------------
def decompress(codec: Compression, payload: bytes | memoryview, *, magic: int = 2) -> bytes:
    """The records inside a compressed payload, read as Kafka's ``wrapForInput`` reads them.
    Raises :class:`KafkaFormatError` (field ``<codec> payload``) for any damage."""
    data = bytes(payload)
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return _gunzip(data)
    if codec is Compression.SNAPPY:
        return _unsnappy(data)
    if codec is Compression.LZ4:
        return _unlz4(data, magic)
    if codec is Compression.ZSTD:
        if not data:
            raise _error(codec, "empty zstd payload")
        try:
            return bytes(cramjam.zstd.decompress(data))
        except Exception as exc:  # the library's errors are one class per binding; keep ours
            raise _error(codec, f"corrupt zstd data: {exc}") from None
    raise _error(codec, "unsupported codec")  # pragma: no cover


def _gunzip(data: bytes) -> bytes:
    codec = Compression.GZIP
    out = []
    rest = data
    first = True
    while first or rest[:2] == b"\x1f\x8b":
        first = False
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(inflater.decompress(rest))
            out.append(inflater.flush())
        except zlib.error as exc:
            raise _error(codec, f"corrupt gzip data: {exc}") from None
        if not inflater.eof:
            raise _error(codec, "gzip stream ends before its end (unexpected end of ZLIB input)")
        rest = inflater.unused_data
    return b"".join(out)


def _unsnappy(data: bytes) -> bytes:
    codec = Compression.SNAPPY
    if not data:
        raise _error(codec, "cannot decompress an empty snappy stream")
    try:
        if len(data) < len(_SNAPPY_HEADER) or not data.startswith(_SNAPPY_MAGIC):
            return bytes(cramjam.snappy.decompress_raw(data))  # raw snappy, as snappy-java reads
        out = []
        index = len(_SNAPPY_HEADER)
        while index < len(data):
            if data.startswith(_SNAPPY_MAGIC, index):
                index += len(_SNAPPY_HEADER)  # a concatenated stream
                continue
            if index + 4 > len(data):
                raise _error(codec, "snappy chunk length cut short")
            (length,) = struct.unpack_from(">i", data, index)
            index += 4
            if length < 0 or index + length > len(data):
                raise _error(codec, f"snappy chunk of {length} bytes does not fit the payload")
            out.append(bytes(cramjam.snappy.decompress_raw(data[index : index + length])))
            index += length
        return b"".join(out)
    except KafkaFormatError:
        raise
    except Exception as exc:
        raise _error(codec, f"corrupt snappy data: {exc}") from None


def _unlz4(data: bytes, magic: int) -> bytes:
    codec = Compression.LZ4
    if len(data) < 6:
        raise _error(codec, "Stream ended prematurely")
    if struct.unpack_from("<I", data, 0)[0] != _LZ4_MAGIC:
        raise _error(codec, "Stream unsupported (invalid magic bytes)")
    flg, bd = data[4], data[5]
    if flg & 0x03 or not flg & 0x20 or (flg >> 6) != 1:
        raise _error(codec, f"unsupported LZ4 frame flags 0x{flg:02x}")
    block_size_id = (bd >> 4) & 0x07
    if bd & 0x8F or not 4 <= block_size_id <= 7:
        raise _error(codec, f"invalid LZ4 block descriptor 0x{bd:02x}")
    max_block = 1 << (2 * block_size_id + 8)
    index = 6
    if flg & 0x08:  # content size present
        index += 8
    if index >= len(data):
        raise _error(codec, "Stream ended prematurely")
    if magic != 0:  # magic 0 frames carry the old, wrong header checksum; Kafka skips it
        expected = (xxh32(data[4:index]) >> 8) & 0xFF
        if data[index] != expected:
            raise _error(codec, "Stream frame descriptor corrupted")
    index += 1
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    out = []
    scratch = bytearray(max_block)
    while True:
        if index + 4 > len(data):
            raise _error(codec, "Stream ended prematurely")
        (word,) = struct.unpack_from("<I", data, index)
        index += 4
        size = word & ~_LZ4_STORED
        if size == 0:
            if content_checksum:
                index += 4
            break
        if size > max_block:
            raise _error(codec, f"Block size {size} exceeded max: {max_block}")
        if index + size > len(data):
            raise _error(codec, "Stream ended prematurely")
        block = data[index : index + size]
        if word & _LZ4_STORED:
            out.append(block)
        else:
            try:
                written = cramjam.lz4.decompress_block_into(block, scratch)
            except Exception as exc:
                raise _error(codec, f"corrupt LZ4 block: {exc}") from None
            out.append(bytes(scratch[:written]))
        index += size
        if block_checksum:
            if index + 4 > len(data):
                raise _error(codec, "Stream ended prematurely")
            if struct.unpack_from("<I", data, index)[0] != xxh32(block):
                raise _error(codec, "Block checksum mismatch")
            index += 4
    return b"".join(out)
