"""Kafka murmur2 bit-exact with the Java client: scalar, vectorized, every input shape."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners.hashing import (
    crc32,
    crc32_array,
    fnv1a,
    fnv1a_array,
    fnv1a_positive,
    fnv1a_positive_array,
    murmur2,
    murmur2_array,
    murmur3,
    to_positive,
)

KAFKA_UTILS_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


@pytest.fixture(scope="module")
def java_vectors(vectors_dir: Path) -> tuple[list[bytes], list[int]]:
    rows = [json.loads(line) for line in (vectors_dir / "murmur2-java.jsonl").open()]
    return [bytes.fromhex(row["key_hex"]) for row in rows], [row["murmur2"] for row in rows]


def test_kafka_utils_test_vectors_match_scalar_and_vectorized():
    keys = list(KAFKA_UTILS_VECTORS)
    assert [murmur2(key) for key in keys] == list(KAFKA_UTILS_VECTORS.values())
    assert murmur2_array(keys).tolist() == list(KAFKA_UTILS_VECTORS.values())


def test_all_3000_java_vectors_match_the_scalar_hash(java_vectors):
    keys, expected = java_vectors
    assert len(keys) == 3000
    assert [murmur2(key) for key in keys] == expected


def test_all_3000_java_vectors_match_the_vectorized_hash_from_every_input_shape(java_vectors):
    keys, expected = java_vectors
    assert murmur2_array(keys).tolist() == expected
    assert murmur2_array(pa.array(keys, type=pa.binary())).tolist() == expected
    assert murmur2_array(pa.array(keys, type=pa.large_binary())).tolist() == expected
    assert murmur2_array(np.array(keys, dtype=object)).tolist() == expected
    chunked = pa.chunked_array([pa.array(keys[:1000]), pa.array(keys[1000:])])
    assert murmur2_array(chunked).tolist() == expected


def test_vectorized_hash_is_int32_signed_like_java(java_vectors):
    keys, _ = java_vectors
    hashes = murmur2_array(keys)
    assert hashes.dtype == np.int32
    assert hashes.min() < 0 < hashes.max()


def test_fixed_width_keys_agree_between_matrix_arrow_and_scalar_paths():
    rng = np.random.default_rng(5)
    for width in (1, 2, 3, 4, 5, 7, 8, 16, 17, 36):
        matrix = rng.integers(0, 256, size=(70_000, width), dtype=np.uint8)
        as_arrow = pa.array([bytes(row) for row in matrix], type=pa.binary())
        from_matrix = murmur2_array(matrix)
        assert (from_matrix == murmur2_array(as_arrow)).all()
        assert [murmur2(bytes(row)) for row in matrix[:300]] == from_matrix[:300].tolist()


def test_mixed_length_keys_spanning_several_passes_agree_with_the_scalar_hash():
    rng = np.random.default_rng(6)
    keys = [rng.bytes(int(length)) for length in rng.integers(0, 1400, size=7_000)]
    assert murmur2_array(keys).tolist() == [murmur2(key) for key in keys]


def test_sliced_arrays_and_null_entries_hash_like_empty_keys():
    array = pa.array([b"skip", b"21", None, b"abc", b""])
    assert murmur2_array(array.slice(1)).tolist() == [-973932308, 275646681, 479470107, 275646681]


def test_strings_are_hashed_as_utf8_like_the_java_string_serializer():
    assert murmur2_array(["abc", "é"]).tolist() == [murmur2(b"abc"), murmur2("é".encode())]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=60))
def test_vectorized_murmur2_equals_scalar_for_any_keys(keys):
    assert murmur2_array(keys).tolist() == [murmur2(key) for key in keys]


# key lengths where murmur2 changes path: empty, tail only (1-3), whole blocks, a tail after
# blocks (4k+1..4k+3), one full 16-block window (64 bytes) and past it, several windows
_EDGE_LENGTHS = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 63, 64, 65, 67, 68, 69, 127, 128, 131])
_KEY_LENGTHS = st.one_of(_EDGE_LENGTHS, st.integers(0, 70), st.integers(0, 600))


@st.composite
def _mixed_keys(draw: st.DrawFn, max_keys: int = 80) -> list[bytes | None]:
    lengths = draw(st.lists(_KEY_LENGTHS, max_size=max_keys))
    keys: list[bytes | None] = []
    for length in lengths:
        if draw(st.integers(0, 9)) == 0:
            keys.append(None)
        else:
            keys.append(draw(st.binary(min_size=length, max_size=length)))
    return keys


def _scalar(keys: list[bytes | None]) -> list[int]:
    return [murmur2(key if key is not None else b"") for key in keys]


@settings(max_examples=300, deadline=None)
@given(_mixed_keys())
def test_vectorized_murmur2_equals_scalar_for_mixed_length_keys_with_nulls(keys):
    expected = _scalar(keys)
    assert murmur2_array(keys).tolist() == expected
    assert murmur2_array(pa.array(keys, type=pa.binary())).tolist() == expected
    assert murmur2_array(pa.array(keys, type=pa.large_binary())).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(_mixed_keys(max_keys=40), st.integers(0, 40), st.integers(0, 40))
def test_vectorized_murmur2_of_a_slice_reads_only_the_slices_keys(keys, skip, keep):
    """A slice's keys sit between other keys' bytes; rows read past a key never leak in."""
    array = pa.array(keys, type=pa.binary()).slice(skip, keep)
    assert murmur2_array(array).tolist() == _scalar(keys[skip : skip + keep])


@settings(max_examples=100, deadline=None)
@given(_mixed_keys(max_keys=30), st.data())
def test_null_entries_hash_like_empty_keys_whatever_bytes_their_offsets_span(keys, data):
    """Arrow allows a null entry to span bytes; Kafka's partitioners see no key there."""
    values = [key if key is not None else data.draw(st.binary(max_size=70)) for key in keys]
    offsets = np.concatenate(([0], np.cumsum([len(v) for v in values]))).astype(np.int32)
    valid = np.array([key is not None for key in keys], dtype=bool)
    bitmap = pa.array(valid).buffers()[1] if len(keys) else None
    array = pa.Array.from_buffers(
        pa.binary(),
        len(keys),
        [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))],
        null_count=int((~valid).sum()),
    )
    assert murmur2_array(array).tolist() == _scalar(keys)


def test_keys_ending_at_the_end_of_the_buffer_hash_like_the_scalar_hash():
    rng = np.random.default_rng(7)
    for total in range(0, 80):
        # the last key is what is left of a buffer of `total` bytes, in every split
        for first in range(0, total + 1, 7):
            buffer = rng.bytes(total)
            keys = [buffer[:first], buffer[first:]]
            assert murmur2_array(keys).tolist() == _scalar(keys)
            assert murmur2_array([b"", *keys, b""]).tolist() == _scalar([b"", *keys, b""])


def test_very_long_mixed_keys_take_several_windows_and_match_the_scalar_hash():
    rng = np.random.default_rng(8)
    lengths = [0, 1, 64, 65, 4096, 4099, 10_001, 3, 200_000, 67]
    keys = [rng.bytes(length) for length in lengths]
    assert murmur2_array(keys).tolist() == _scalar(keys)
    assert murmur2_array(keys[::-1]).tolist() == _scalar(keys[::-1])


def test_a_million_mixed_length_keys_agree_with_the_scalar_hash_on_a_sample():
    """Many chunks of keys, every length 0-64, against the scalar hash on every 97th key."""
    rng = np.random.default_rng(9)
    lengths = rng.integers(0, 65, size=1_000_000)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    data = rng.integers(0, 256, size=int(offsets[-1]), dtype=np.uint8)
    array = pa.Array.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    hashes = murmur2_array(array)
    sample = range(0, len(lengths), 97)
    assert [int(hashes[i]) for i in sample] == [murmur2(array[i].as_py()) for i in sample]


def test_all_3000_java_vectors_match_when_packed_among_other_keys(java_vectors):
    """The vectors as one slice of a larger array, in reverse and interleaved with other keys."""
    keys, expected = java_vectors
    filler = [bytes([i % 251]) * (i % 70) for i in range(len(keys))]
    mixed = [key for pair in zip(filler, keys[::-1], strict=True) for key in pair]
    hashes = murmur2_array(pa.array([b"x" * 5, *mixed], type=pa.binary()).slice(1))
    assert hashes[1::2].tolist() == expected[::-1]


def test_lists_of_other_buffer_objects_still_hash_their_bytes():
    keys = [np.frombuffer(b"foobar", dtype=np.uint8), bytearray(b"21"), memoryview(b"abc"), "é"]
    assert murmur2_array(keys).tolist() == [
        murmur2(b"foobar"),
        murmur2(b"21"),
        murmur2(b"abc"),
        murmur2("é".encode()),
    ]


def test_to_positive_masks_the_sign_bit_instead_of_taking_abs():
    assert to_positive(-2147483648) == 0
    assert to_positive(-1) == 2147483647
    assert to_positive(np.array([-1, -2147483648, 7], dtype=np.int32)).tolist() == [
        2147483647,
        0,
        7,
    ]


def test_crc32_matches_zlib_for_short_and_long_keys(java_vectors):
    keys, _ = java_vectors
    short = [key[:12] for key in keys]
    assert crc32_array(short).tolist() == [zlib.crc32(key) for key in short]
    assert crc32_array(keys).tolist() == [zlib.crc32(key) for key in keys]
    assert crc32(b"") == 0
    assert crc32_array([None, b"TT0124"]).tolist() == [0, zlib.crc32(b"TT0124")]


def _fnv1a_reference(key: bytes) -> int:
    h = 0x811C9DC5
    for byte in key:
        h = ((h ^ byte) * 0x01000193) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_fnv1a_matches_the_32_bit_reference_and_its_published_values(java_vectors):
    keys, _ = java_vectors
    assert fnv1a_array(keys).tolist() == [_fnv1a_reference(key) for key in keys]
    # FNV-1a 32 of "a" is 0xe40c292c and of "foobar" 0xbf9cf968 (the FNV reference tables)
    assert fnv1a(b"a") & 0xFFFFFFFF == 0xE40C292C
    assert fnv1a(b"foobar") & 0xFFFFFFFF == 0xBF9CF968
    assert fnv1a_positive_array(keys).tolist() == [fnv1a_positive(key) for key in keys]


def test_murmur3_is_a_different_hash_from_kafkas_murmur2():
    assert murmur3(b"TT0124") != murmur2(b"TT0124")
