"""Key hashes of the Kafka producers, bit-exact: murmur2 (Java client, librdkafka ``murmur2``),
CRC32 (librdkafka ``consistent``), FNV-1a (librdkafka ``fnv1a``, Sarama) and murmur3 (mmh3).

Kafka uses MurmurHash2, not MurmurHash3: ``murmur3`` is here only to show that the two differ.
The Java client's own test vectors (``UtilsTest.testMurmur2``), plus the empty key:

>>> [murmur2(k) for k in (b"21", b"foobar", b"a-little-bit-long-string")]
[-973932308, -790332482, -985981536]
>>> [murmur2(k) for k in (b"a-little-bit-longer-string", b"abc", b"")]
[-1486304829, 479470107, 275646681]
>>> murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")
-58897971
>>> murmur2_array([b"21", b"foobar", b"abc", b""]).tolist()
[-973932308, -790332482, 479470107, 275646681]
>>> to_positive(murmur2(b"TT0124")) % 15, crc32(b"TT0124") % 15
(10, 9)

The array functions take a pyarrow binary array, a sequence of ``bytes`` (``str`` is encoded as
UTF-8, the Java ``StringSerializer`` default) or a 2-D ``uint8`` array of equal-length keys, and
never loop over keys in Python (a list becomes an Arrow array in Arrow's own code). murmur2
mixes each 4-byte block position column-wise over many keys at once with uint32 wrap-around.
Equal-length keys are read straight from the buffer as one matrix. Keys of mixed lengths stay
in place: each key's first 16 blocks and the word after them are read as one row of an
overlapping fixed-width view of the buffer, the block words are mixed as one matrix, and the
hash chain runs over all 16 block positions of every key in a chunk keeping each step's value,
of which a key takes the one after its own last block; the word after that block holds its
tail bytes, so tail and final mix are column-wise too. Keys longer than 64 bytes continue in
further windows of 16 blocks over only the keys that still have blocks. Cost is
O(total key bytes + keys); null entries hash like empty keys (callers that treat null
differently mask them with ``null_mask``). CRC32 and FNV-1a put keys of mixed lengths in
length order first (a radix sort of the lengths, one Arrow ``take``) and then go byte by byte
over each length's matrix.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import mmh3
import numpy as np
import pyarrow as pa

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
FNV1A_OFFSET_BASIS = 0x811C9DC5
FNV1A_PRIME = 0x01000193

_U32 = 0xFFFFFFFF
_M32 = np.uint32(MURMUR2_M)
# rows mixed per pass: three uint32 work columns of this length stay in L2
_CHUNK_ROWS = 32768
# keys per pass of the mixed-length path: a pass holds (window + 1) x rows words three times
_CHUNK_ROWS_RAGGED = 8192
# 4-byte blocks per window of the mixed-length path (one 68-byte row per key and window)
_WINDOW_BLOCKS = 16
_TAIL_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)
_TAIL_MULTIPLIERS = np.array([1, MURMUR2_M, MURMUR2_M, MURMUR2_M], dtype=np.uint32)

KeyInput: TypeAlias = pa.Array | pa.ChunkedArray | np.ndarray | Sequence[Any]


def _signed32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def to_positive(value: Any) -> Any:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``); ints or numpy arrays.

    >>> to_positive(-1), to_positive(-2147483648), to_positive(5)
    (2147483647, 0, 5)
    """
    if isinstance(value, np.ndarray):
        return (value.astype(np.int64, copy=False) & 0x7FFFFFFF).astype(np.int32)
    return value & 0x7FFFFFFF


def murmur2(key: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2`` of one key as a signed 32-bit int (pure Python, O(len))."""
    data = bytes(key)
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _U32
    block_count = length // 4
    for k in struct.unpack_from(f"<{block_count}I", data):
        k = (k * MURMUR2_M) & _U32
        k ^= k >> 24
        k = (k * MURMUR2_M) & _U32
        h = ((h * MURMUR2_M) & _U32) ^ k
    tail = length & 3
    base = block_count * 4
    if tail:
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * MURMUR2_M) & _U32
    h ^= h >> 13
    h = (h * MURMUR2_M) & _U32
    h ^= h >> 15
    return _signed32(h)


def crc32(key: bytes | bytearray | memoryview) -> int:
    """IEEE CRC-32 as zlib and librdkafka's ``rd_crc32`` compute it (unsigned)."""
    return zlib.crc32(key) & _U32


def fnv1a(key: bytes | bytearray | memoryview) -> int:
    """32-bit FNV-1a as a signed int32, before librdkafka takes the absolute value.

    >>> fnv1a(b""), fnv1a(b"a")
    (-2128831035, -468965076)
    """
    h = FNV1A_OFFSET_BASIS
    for byte in bytes(key):
        h = ((h ^ byte) * FNV1A_PRIME) & _U32
    return _signed32(h)


def fnv1a_positive(key: bytes | bytearray | memoryview) -> int:
    """librdkafka's ``rd_fnv1a``: |signed FNV-1a| with C wrap-around (INT_MIN stays 2**31)."""
    return abs(fnv1a(key)) & _U32


def murmur3(key: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """MurmurHash3 x86_32 (mmh3), signed. Not what Kafka uses; see ``murmur2``."""
    return mmh3.hash(bytes(key), seed, signed=True)


# ---------------------------------------------------------------- vectorized key handling


def as_binary_array(keys: KeyInput) -> pa.Array:
    """Keys as one pyarrow binary (or large_binary) array; ``str`` items become UTF-8."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if isinstance(keys, pa.Array):
        if pa.types.is_string(keys.type):
            return keys.cast(pa.binary())
        if pa.types.is_large_string(keys.type):
            return keys.cast(pa.large_binary())
        if pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type):
            return keys
        if pa.types.is_null(keys.type):
            return pa.nulls(len(keys), pa.binary())
        raise TypeError(f"keys must be binary or string, not {keys.type}")
    items = keys.tolist() if isinstance(keys, np.ndarray) else keys
    if not isinstance(items, list):
        items = list(items)
    try:
        # bytes, bytearray, memoryview, str (as UTF-8) and None, converted in Arrow's C++ code
        built = pa.array(items, type=pa.binary())
        if isinstance(built, pa.ChunkedArray):  # over 2 GiB of key bytes
            return pa.array(items, type=pa.large_binary())
        return built
    except (pa.ArrowException, TypeError, ValueError):
        pass  # other buffer objects: one bytes() per key, below
    encoded = [_key_bytes(item) for item in items]
    wide = _total_len(encoded) >= 2**31
    return pa.array(encoded, type=pa.large_binary() if wide else pa.binary())


def _key_bytes(item: Any) -> bytes | None:
    if item is None:
        return None
    if isinstance(item, str):
        return item.encode("utf-8")
    return bytes(item)


def _total_len(items: Iterable[bytes | None]) -> int:
    return sum(len(item) for item in items if item is not None)


def null_mask(keys: KeyInput) -> np.ndarray:
    """True where a key is null (no key), as opposed to empty."""
    array = as_binary_array(keys)
    if array.null_count == 0:
        return np.zeros(len(array), dtype=bool)
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def key_lengths(keys: KeyInput) -> np.ndarray:
    """Length in bytes of every key (0 for null), ``int64``."""
    array = as_binary_array(keys)
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64)
    offsets, _ = _arrow_layout(array)
    lengths = np.diff(offsets).astype(np.int64, copy=False)
    if array.null_count:
        lengths[null_mask(array)] = 0
    return lengths


def _arrow_layout(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (one per key plus one) and the data bytes of a binary array, zero-copy."""
    offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    buffers = array.buffers()
    all_offsets = np.frombuffer(buffers[1], dtype=offset_type)
    offsets = all_offsets[array.offset : array.offset + len(array) + 1]
    data = (
        np.frombuffer(buffers[2], dtype=np.uint8)
        if buffers[2] is not None
        else np.zeros(0, dtype=np.uint8)
    )
    return offsets, data


def _equal_length_groups(
    keys: KeyInput,
) -> tuple[int, list[tuple[slice | np.ndarray, np.ndarray]]]:
    """(key count, [(rows, uint8 matrix of those keys, one key per row)]).

    Equal-length keys that lie back to back (the usual fixed-width case) come back as one
    zero-copy view of the buffer. Keys of mixed lengths are put in length order with one
    Arrow ``take`` (a radix sort of the lengths first), so each length is one contiguous matrix.
    """
    if isinstance(keys, np.ndarray) and keys.ndim == 2 and keys.dtype == np.uint8:
        return len(keys), [(slice(None), np.ascontiguousarray(keys))]
    array = as_binary_array(keys)
    if array.null_count:
        # nulls hash as empty keys whatever bytes their offsets happen to span
        array = array.fill_null(b"")
    count = len(array)
    if count == 0:
        return 0, []
    offsets, data = _arrow_layout(array)
    common_length = _common_length(offsets)
    if common_length is not None:
        start = int(offsets[0])
        matrix = data[start : start + count * common_length].reshape(count, common_length)
        return count, [(slice(None), matrix)]
    lengths = np.diff(offsets)
    # a stable sort of small unsigned ints is a radix sort in numpy
    narrow = np.uint16 if int(lengths.max()) < 2**16 else np.uint32
    order = np.argsort(lengths.astype(narrow), kind="stable")
    grouped = array.take(pa.array(order))
    grouped_offsets, grouped_data = _arrow_layout(grouped)
    sorted_lengths = lengths[order]
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(sorted_lengths)) + 1, [count]))
    groups: list[tuple[slice | np.ndarray, np.ndarray]] = []
    for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        key_length = int(sorted_lengths[first])
        start = int(grouped_offsets[first])
        matrix = grouped_data[start : start + (last - first) * key_length]
        groups.append((order[first:last], matrix.reshape(last - first, key_length)))
    return count, groups


def _common_length(offsets: np.ndarray) -> int | None:
    """The length shared by all keys, or None; checked in cache-sized chunks, no big temporary."""
    first_length = int(offsets[1] - offsets[0])
    if int(offsets[-1] - offsets[0]) != first_length * (len(offsets) - 1):
        return None
    step = _CHUNK_ROWS
    lengths = np.empty(step, dtype=offsets.dtype)
    for start in range(0, len(offsets) - 1, step):
        stop = min(start + step, len(offsets) - 1)
        chunk = lengths[: stop - start]
        np.subtract(offsets[start + 1 : stop + 1], offsets[start:stop], out=chunk)
        if not np.all(chunk == first_length):
            return None
    return first_length


def murmur2_array(keys: KeyInput) -> np.ndarray:
    """Kafka murmur2 of every key as ``int32`` (null entries hash like empty keys)."""
    if isinstance(keys, np.ndarray) and keys.ndim == 2 and keys.dtype == np.uint8:
        return _murmur2_matrix(np.ascontiguousarray(keys)).view(np.int32)
    array = as_binary_array(keys)
    count = len(array)
    if count == 0:
        return np.zeros(0, dtype=np.int32)
    offsets, data = _arrow_layout(array)
    if array.null_count == 0:
        common_length = _common_length(offsets)
        if common_length is not None:
            start = int(offsets[0])
            matrix = data[start : start + count * common_length].reshape(count, common_length)
            return _murmur2_matrix(matrix).view(np.int32)
    lengths = np.diff(offsets).astype(np.int64, copy=False)
    if array.null_count:
        # a null hashes as an empty key whatever bytes its offsets happen to span
        lengths[null_mask(array)] = 0
    starts = offsets[:-1].astype(np.int64, copy=False)
    return _murmur2_ragged(starts, lengths, data).view(np.int32)


def _byte_rows(buffer: np.ndarray, width: int) -> np.ndarray:
    """Every ``width``-byte window of ``buffer`` as one item (row i starts at byte i), no copy."""
    return np.ndarray(
        (len(buffer) - width + 1,),
        dtype=np.dtype((np.void, width)),
        buffer=buffer,
        strides=(1,),
    )


def _murmur2_ragged(starts: np.ndarray, lengths: np.ndarray, data: np.ndarray) -> np.ndarray:
    """murmur2 of keys of any lengths lying anywhere in ``data``, in their own order (uint32).

    Key i is ``data[starts[i] : starts[i] + lengths[i]]``. The keys are never reordered or
    copied one by one: their 4-byte blocks are taken in windows of up to ``_WINDOW_BLOCKS``
    blocks (see ``_murmur2_window``). Keys of at most 64 bytes (or whatever the longest key
    is, if shorter) take one window, which also applies the tail bytes and the final mix;
    longer keys take further windows, over only the keys that still have blocks left, and
    get their tail and final mix at the end.
    """
    count = len(lengths)
    hashes = np.empty(count, dtype=np.uint32)
    most_blocks = int(lengths.max()) >> 2 if count else 0
    if most_blocks <= _WINDOW_BLOCKS:
        _murmur2_window(starts, lengths, hashes, data, most_blocks, first=True, finish=True)
        return hashes
    block_counts = lengths >> 2
    window = _WINDOW_BLOCKS
    tail_words = _murmur2_window(starts, lengths, hashes, data, window, first=True, finish=False)
    first_block = window
    pending = np.flatnonzero(block_counts > first_block)
    while len(pending):
        skipped = 4 * first_block
        window_lengths = lengths[pending] - skipped
        window_hashes = hashes[pending]
        window_tails = _murmur2_window(
            starts[pending] + skipped,
            window_lengths,
            window_hashes,
            data,
            window,
            first=False,
            finish=False,
        )
        hashes[pending] = window_hashes
        tail_words[pending] = window_tails
        pending = pending[(window_lengths >> 2) > window]
        first_block += window
    _finish(hashes, tail_words, lengths)
    return hashes


def _finish(hashes: np.ndarray, tail_words: np.ndarray, lengths: np.ndarray) -> None:
    """Tail bytes (the low ``length & 3`` bytes of ``tail_words``) and the final mix, in place."""
    tail_lengths = (lengths & 3).astype(np.intp, copy=False)
    np.bitwise_and(tail_words, np.take(_TAIL_MASKS, tail_lengths), out=tail_words)
    np.bitwise_xor(hashes, tail_words, out=hashes)
    np.multiply(hashes, np.take(_TAIL_MULTIPLIERS, tail_lengths), out=hashes)
    _finalize(hashes, tail_words, hashes)


def _murmur2_window(
    window_starts: np.ndarray,
    window_lengths: np.ndarray,
    hashes: np.ndarray,
    data: np.ndarray,
    window: int,
    *,
    first: bool,
    finish: bool,
) -> np.ndarray:
    """Mix up to ``window`` blocks of every key into ``hashes``, in place.

    Key i continues at byte ``window_starts[i]`` with ``window_lengths[i]`` bytes left. With
    ``first`` the hashes start from the seed (``window_lengths`` then being the whole key
    lengths), otherwise from the values ``hashes`` holds. Each key gets one row of
    ``window + 1`` words (a fancy index on an overlapping fixed-width view of the buffer, in
    cache-sized chunks of keys); the block words are mixed as one matrix and the hash chain
    runs block position by block position over all keys of the chunk, keeping every
    intermediate value: a key with ``b`` blocks in this window takes the value after ``b``
    steps, so the bytes a row holds past the end of its key never reach its hash. The word
    after a key's last block of the window holds its tail bytes if the key ends there.
    With ``finish`` (every key ends in this window) tail and final mix are applied too;
    otherwise those words are returned.
    """
    count = len(window_starts)
    width = 4 * (window + 1)
    # rows reaching past the end of the buffer come from a zero-padded copy of its last bytes
    low = max(0, len(data) - 2 * width)
    end_copy = np.zeros(len(data) - low + width, dtype=np.uint8)
    end_copy[: len(data) - low] = data[low:]
    end_rows = _byte_rows(end_copy, width)
    last_inside = len(data) - width
    main_rows = _byte_rows(data, width) if last_inside >= 0 else end_rows
    chunk = min(_CHUNK_ROWS_RAGGED, max(count, 1))
    chain = np.empty((window + 1, chunk), dtype=np.uint32)
    by_position = np.empty((window + 1, chunk), dtype=np.uint32)
    columns = np.arange(chunk, dtype=np.intp)
    steps_buffer = np.empty(chunk, dtype=np.intp)
    tail_words = np.empty(count, dtype=np.uint32)
    for start in range(0, count, chunk):
        stop = min(start + chunk, count)
        n = stop - start
        positions = window_starts[start:stop]
        if int(positions.max()) <= last_inside:
            raw = main_rows[positions]
        else:
            raw = np.empty(n, dtype=main_rows.dtype)
            inside = positions <= last_inside
            raw[inside] = main_rows[positions[inside]]
            raw[~inside] = end_rows[positions[~inside] - low]
        # the words one row per position in the key (contiguous rows for the chain)
        words = by_position[:, :n]
        np.copyto(words, raw.view("<u4").reshape(n, window + 1).T)
        key_lengths = window_lengths[start:stop]
        # steps[i]: blocks of key i in this window, then its flat index in a (window + 1,
        # chunk) matrix at that row: the chain value after its last block, its tail word
        steps = steps_buffer[:n]
        np.right_shift(key_lengths, 2, out=steps, casting="unsafe")
        np.minimum(steps, window, out=steps)
        np.multiply(steps, chunk, out=steps)
        np.add(steps, columns[:n], out=steps)
        tails = tail_words[start:stop]
        np.take(by_position.reshape(-1), steps, out=tails)
        h = chain[:, :n]
        if first:
            np.bitwise_xor(key_lengths, MURMUR2_SEED, out=h[0], casting="unsafe")
        else:
            h[0] = hashes[start:stop]
        if window:
            # mixed in place (the tail words are taken); the chain's rows are scratch until
            # the chain runs
            k = words[:window]
            np.multiply(k, _M32, out=k)
            shifted = chain[1:, :n]
            np.right_shift(k, 24, out=shifted)
            np.bitwise_xor(k, shifted, out=k)
            np.multiply(k, _M32, out=k)
            for block in range(window):
                np.multiply(h[block], _M32, out=h[block + 1])
                np.bitwise_xor(h[block + 1], k[block], out=h[block + 1])
        out = hashes[start:stop]
        np.take(chain.reshape(-1), steps, out=out)
        if finish:
            _finish(out, tails, key_lengths)
    return tail_words


def _mix_block(h: np.ndarray, k: np.ndarray, t: np.ndarray) -> None:
    """One murmur2 block step over columns, in place: k is the block word, t scratch."""
    np.multiply(k, _M32, out=k)
    np.right_shift(k, 24, out=t)
    np.bitwise_xor(k, t, out=k)
    np.multiply(k, _M32, out=k)
    np.multiply(h, _M32, out=h)
    np.bitwise_xor(h, k, out=h)


def _finalize(h: np.ndarray, t: np.ndarray, out: np.ndarray) -> None:
    np.right_shift(h, 13, out=t)
    np.bitwise_xor(h, t, out=h)
    np.multiply(h, _M32, out=h)
    np.right_shift(h, 15, out=t)
    np.bitwise_xor(h, t, out=out)


def _murmur2_matrix(matrix: np.ndarray) -> np.ndarray:
    """murmur2 of each row of a C-contiguous (keys, key_length) uint8 matrix."""
    key_count, key_length = matrix.shape
    block_count = key_length // 4
    tail_length = key_length & 3
    out = np.empty(key_count, dtype=np.uint32)
    # unaligned strided uint32 view: row i, block j = little-endian bytes 4j..4j+3 of key i
    words = (
        np.ndarray(
            (key_count, block_count),
            dtype="<u4",
            buffer=matrix,
            offset=0,
            strides=(key_length, 4),
        )
        if block_count and key_count
        else np.empty((key_count, 0), dtype="<u4")
    )
    rows_per_pass = min(_CHUNK_ROWS, max(key_count, 1))
    h_buf = np.empty(rows_per_pass, dtype=np.uint32)
    k_buf = np.empty(rows_per_pass, dtype=np.uint32)
    t_buf = np.empty(rows_per_pass, dtype=np.uint32)
    initial = np.uint32((MURMUR2_SEED ^ key_length) & _U32)
    for start in range(0, key_count, rows_per_pass):
        stop = min(start + rows_per_pass, key_count)
        n = stop - start
        h, k, t = h_buf[:n], k_buf[:n], t_buf[:n]
        h.fill(initial)
        for block in range(block_count):
            np.copyto(k, words[start:stop, block])
            _mix_block(h, k, t)
        if tail_length:
            base = block_count * 4
            for position in range(tail_length - 1, -1, -1):
                np.copyto(t, matrix[start:stop, base + position])
                if position:
                    np.left_shift(t, 8 * position, out=t)
                np.bitwise_xor(h, t, out=h)
            np.multiply(h, _M32, out=h)
        _finalize(h, t, out[start:stop])
    return out


def _crc32_table() -> np.ndarray:
    table = np.empty(256, dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xEDB88320 if crc & 1 else crc >> 1
        table[byte] = crc
    return table


_CRC32_TABLE = _crc32_table()


def _bytewise(keys: KeyInput, initial: int, step: Any, final_xor: int) -> np.ndarray:
    """A byte-at-a-time hash over every key, column-wise: ``step(h, byte_column)`` in place."""
    count, groups = _equal_length_groups(keys)
    result = np.empty(count, dtype=np.uint32)
    for rows, matrix in groups:
        group_result = np.empty(len(matrix), dtype=np.uint32)
        for start in range(0, len(matrix), _CHUNK_ROWS):
            h = np.full(min(_CHUNK_ROWS, len(matrix) - start), initial, dtype=np.uint32)
            for position in range(matrix.shape[1]):
                step(h, matrix[start : start + len(h), position])
            group_result[start : start + len(h)] = h
        result[rows] = group_result
    if final_xor:
        np.bitwise_xor(result, np.uint32(final_xor), out=result)
    return result


def _crc32_step(crc: np.ndarray, byte_column: np.ndarray) -> None:
    index = np.bitwise_xor(crc, byte_column, casting="unsafe", dtype=np.uint32)
    np.bitwise_and(index, 0xFF, out=index)
    np.right_shift(crc, 8, out=crc)
    np.bitwise_xor(crc, _CRC32_TABLE[index], out=crc)


def _fnv1a_step(h: np.ndarray, byte_column: np.ndarray) -> None:
    np.bitwise_xor(h, byte_column, out=h, casting="unsafe")
    np.multiply(h, np.uint32(FNV1A_PRIME), out=h)


# above this mean key length one zlib call per key beats column-wise table lookups
_CRC32_VECTOR_MAX_MEAN_LENGTH = 24


def crc32_array(keys: KeyInput) -> np.ndarray:
    """IEEE CRC-32 (zlib) of every key as ``uint32``.

    Short keys: column-wise table lookups over all keys; long keys (mean length above 24
    bytes): one ``zlib.crc32`` call per key, which is faster there. Null entries give 0.
    """
    array = keys if isinstance(keys, np.ndarray) and keys.ndim == 2 else as_binary_array(keys)
    count = len(array)
    if isinstance(array, pa.Array) and count:
        offsets, _ = _arrow_layout(array)
        mean_length = int(offsets[-1] - offsets[0]) / count
        if mean_length > _CRC32_VECTOR_MAX_MEAN_LENGTH:
            return np.fromiter(
                (zlib.crc32(key) if key is not None else 0 for key in array.to_pylist()),
                dtype=np.uint32,
                count=count,
            )
    return _bytewise(array, _U32, _crc32_step, _U32)


def fnv1a_array(keys: KeyInput) -> np.ndarray:
    """Signed 32-bit FNV-1a of every key as ``int32`` (before librdkafka's absolute value)."""
    return _bytewise(keys, FNV1A_OFFSET_BASIS, _fnv1a_step, 0).view(np.int32)


def fnv1a_positive_array(keys: KeyInput) -> np.ndarray:
    """librdkafka's ``rd_fnv1a`` of every key as ``uint32`` (|h| with C wrap-around)."""
    signed = fnv1a_array(keys).astype(np.int64)
    return (np.abs(signed) & _U32).astype(np.uint32)
