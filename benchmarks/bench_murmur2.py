"""Kafka murmur2 throughput: keys hashed per second on one core, ktk against its peers.

In one run: ktk's vectorized murmur2 (``murmur2_array`` over a pyarrow binary array), ktk's
scalar ``murmur2``, kafka-python's ``kafka.partitioner.default.murmur2`` (pure Python) and the
compiled PyPI ``murmurhash2`` (seed 0x9747b28c, unsigned result), with the ratios. Every
peer's result is checked against ktk's on a sample before timing.

    python benchmarks/bench_murmur2.py            # 10,000,000 16-byte keys, 1,000,000 mixed
    python benchmarks/bench_murmur2.py --quick    # 1,000,000 and 100,000

Key sets (seeded): fixed-width 16-byte random keys; mixed-length random keys of 0-64 bytes
(uniform length, about 32 bytes on average). Per-key peers run over at most
``--peer-keys`` keys (their rate does not depend on the count). The vectorized figure is the
best of ``--repeat`` runs and includes reading the Arrow buffers, not building them from
Python objects (that conversion is printed separately). Rates are printed by wall-clock and by
CPU time; the ratios use CPU time, which other processes on a shared machine disturb less.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from partitioners.hashing import MURMUR2_SEED, murmur2, murmur2_array


def fixed_width_keys(count: int, width: int, seed: int) -> pa.Array:
    """``count`` random keys of ``width`` bytes as a binary array over one buffer."""
    data = np.random.default_rng(seed).integers(0, 256, size=count * width, dtype=np.uint8)
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int64)
    return pa.Array.from_buffers(
        pa.large_binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def mixed_length_keys(count: int, max_length: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, max_length + 1, size=count)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    data = rng.integers(0, 256, size=int(offsets[-1]), dtype=np.uint8)
    return pa.Array.from_buffers(
        pa.large_binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def best_seconds(action: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best (wall, CPU) seconds of ``repeat`` runs; CPU time is the steadier figure on a
    shared machine."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu


def per_key_rate(function: Callable[[bytes], Any], keys: Sequence[bytes]) -> tuple[float, float]:
    """(wall, CPU) keys per second of one call per key."""

    def run() -> None:
        for key in keys:
            function(key)

    wall, cpu = best_seconds(run, 1)
    return len(keys) / wall, len(keys) / cpu


def load_peers() -> dict[str, Callable[[bytes], int]]:
    """Peer name -> function returning the unsigned 32-bit murmur2 of a key."""
    peers: dict[str, Callable[[bytes], int]] = {}
    try:
        from kafka.partitioner.default import murmur2 as kafka_python_murmur2

        peers["kafka-python murmur2 (pure Python)"] = kafka_python_murmur2
    except ImportError:
        print("kafka-python not installed: its murmur2 is skipped (pip install kafka-python)")
    try:
        import murmurhash2

        def compiled(key: bytes) -> int:
            return murmurhash2.murmurhash2(key, MURMUR2_SEED)

        peers["murmurhash2 (compiled, PyPI)"] = compiled
    except ImportError:
        print("murmurhash2 not installed: skipped (pip install murmurhash2)")
    return peers


def bench(
    label: str,
    keys: pa.Array,
    peer_keys: int,
    repeat: int,
    peers: dict[str, Callable[[bytes], int]],
) -> None:
    count = len(keys)
    print(f"\n{label}: {count:,} keys, {keys.nbytes / 1e6:,.0f} MB")
    sample = keys.slice(0, min(peer_keys, count)).to_pylist()
    vectorized = murmur2_array(keys)
    expected = [murmur2(key) for key in sample[:20_000]]
    assert vectorized[: len(expected)].tolist() == expected, "vectorized != scalar"
    unsigned = [h & 0xFFFFFFFF for h in expected]
    for name, function in peers.items():
        assert [function(key) for key in sample[:20_000]] == unsigned, f"{name} disagrees"

    wall, cpu = best_seconds(lambda: murmur2_array(keys), repeat)
    ours = (count / wall, count / cpu)
    rows = [("ktk murmur2_array (vectorized)", ours, count)]
    rows.append(("ktk murmur2 (scalar)", per_key_rate(murmur2, sample), len(sample)))
    for name, function in peers.items():
        rows.append((name, per_key_rate(function, sample), len(sample)))
    conversion, _ = best_seconds(lambda: pa.array(sample, type=pa.binary()), 1)
    print(
        f"{'implementation':<38}{'keys hashed':>13}{'M keys/s':>10}{'(CPU time)':>12}"
        f"{'ktk vectorized is':>20}"
    )
    for name, (wall_rate, cpu_rate), hashed in rows:
        ratio = "" if cpu_rate == ours[1] else f"{ours[1] / cpu_rate:,.1f}x faster"
        print(f"{name:<38}{hashed:>13,}{wall_rate / 1e6:>10.2f}{cpu_rate / 1e6:>12.2f}{ratio:>20}")
    print(
        f"(ratios from CPU time; building the Arrow array from {len(sample):,} Python bytes "
        f"objects: {len(sample) / conversion / 1e6:.1f} M keys/s, not included above)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000,000 and 100,000 keys")
    parser.add_argument("--peer-keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    fixed_count, mixed_count = (1_000_000, 100_000) if arguments.quick else (10_000_000, 1_000_000)
    peer_keys = min(arguments.peer_keys, 200_000) if arguments.quick else arguments.peer_keys
    # imported (and reported missing) once for both key shapes
    peers = load_peers()
    bench(
        "16-byte keys",
        fixed_width_keys(fixed_count, 16, arguments.seed),
        peer_keys,
        arguments.repeat,
        peers,
    )
    bench(
        "mixed-length keys (0-64 bytes)",
        mixed_length_keys(mixed_count, 64, arguments.seed),
        peer_keys,
        arguments.repeat,
        peers,
    )


if __name__ == "__main__":
    main()
