"""Kafka murmur2 throughput: keys hashed per second on one core, ktk against its peers.

In one run: ktk's vectorized murmur2 (``murmur2_array``) end to end from a pyarrow binary array
and from a Python list of ``bytes`` (building the Arrow array included), ktk's scalar
``murmur2``, kafka-python's ``kafka.partitioner.default.murmur2`` (pure Python), the compiled
PyPI ``murmurhash2`` (seed 0x9747b28c, unsigned result) and, with ``--oracle DIR``, the Java
client's own ``Utils.murmur2`` through the Java oracle harness
(``../shared/tools/java-oracle``, ``Harness murmur2``), with the ratios. Every peer's result is
checked against ktk's (Java's by the checksum of all hashes and its first hashes) before its
figures are printed.

    python benchmarks/bench_murmur2.py              # 10,000,000 16-byte keys, 1,000,000 mixed
    python benchmarks/bench_murmur2.py --oracle DIR # the same, beside Java (DIR: BUILD/classes)
    python benchmarks/bench_murmur2.py --quick      # 1,000,000 and 100,000

Key sets (seeded, the same as the oracle's ``compare.py``): fixed-width 16-byte random keys;
mixed-length random keys of 0-64 bytes (uniform length, about 32 bytes on average). Per-key
Python peers run over at most ``--peer-keys`` keys (their rate does not depend on the count).
ktk figures are the best of ``--repeat`` runs. Java runs in ``--java-runs`` fresh JVMs
(``java -cp DIR Harness murmur2 --keys-file F --warmups 3 --reps 5``); it builds one
``byte[]`` per key untimed and times ``Utils.murmur2`` over all keys, first call (cold) and then
5 calls after 3 untimed warm-up calls (warm); the best of each over the JVMs is shown, with the
calling thread's CPU time. Without ``--oracle``, or when ``DIR/Harness.class`` is missing or
``java`` is not on the PATH, Java is skipped with a note. Rates are printed by wall clock and
by CPU time; on a shared machine CPU time is the steadier figure, and the load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
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


def write_keys_file(path: Path, keys: pa.Array) -> None:
    """The oracle harness's keys file: int64 count, int64 offsets[count + 1], the bytes."""
    keys = keys.cast(pa.large_binary())
    offsets = np.frombuffer(keys.buffers()[1], dtype="<i8")[
        keys.offset : keys.offset + len(keys) + 1
    ]
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)
    with path.open("wb") as out:
        out.write(np.array([len(keys)], dtype="<i8").tobytes())
        out.write((offsets - offsets[0]).astype("<i8").tobytes())
        out.write(data[int(offsets[0]) : int(offsets[-1])].tobytes())


def java_oracle(oracle: Path | None) -> list[str] | None:
    """The command prefix of the Java harness, or None (with a printed note) to skip Java."""
    if oracle is None:
        print("Java skipped: no --oracle DIR (the harness classes of ../shared/tools/java-oracle)")
        return None
    if not (oracle / "Harness.class").is_file():
        print(f"Java skipped: {oracle / 'Harness.class'} not built (see java-oracle/README.md)")
        return None
    java = shutil.which("java")
    if java is None:
        print("Java skipped: no java on the PATH")
        return None
    return [java, "-cp", str(oracle), "Harness", "murmur2"]


def java_rates(
    command: list[str], keys: pa.Array, hashes: np.ndarray, runs: int
) -> dict[str, tuple[float, float]]:
    """Best cold and warm (wall, CPU) keys/s of Kafka's Utils.murmur2 over ``runs`` fresh JVMs."""
    count = len(keys)
    best: dict[str, list[float]] = {"cold": [0.0, 0.0], "warm": [0.0, 0.0]}
    with tempfile.TemporaryDirectory(prefix="ktk-murmur2-") as work:
        path = Path(work) / "keys.bin"
        write_keys_file(path, keys)
        for _ in range(runs):
            completed = subprocess.run(
                [*command, "--keys-file", str(path), "--warmups", "3", "--reps", "5"],
                capture_output=True,
                text=True,
                check=False,
            )
            if completed.returncode != 0:
                raise SystemExit(f"Java harness failed: {completed.stderr.strip()[-500:]}")
            report = json.loads(completed.stdout.strip().splitlines()[-1])
            checksum = int(hashes.astype(np.int64).sum())
            first = hashes[: len(report["first_hashes"])].tolist()
            if report["checksum"] != checksum or report["first_hashes"] != first:
                raise SystemExit("Java's murmur2 disagrees with ktk's on these keys")
            samples = {
                "cold": ([report["cold_s"]], [report["cold_thread_cpu_s"]]),
                "warm": (report["warm_s"], report["warm_thread_cpu_s"]),
            }
            for phase, (walls, cpus) in samples.items():
                best[phase][0] = max(best[phase][0], count / min(walls))
                best[phase][1] = max(best[phase][1], count / min(cpus))
    return {phase: (wall, cpu) for phase, (wall, cpu) in best.items()}


def bench(
    label: str,
    keys: pa.Array,
    peer_keys: int,
    repeat: int,
    peers: dict[str, Callable[[bytes], int]],
    java: list[str] | None,
    java_runs: int,
) -> None:
    count = len(keys)
    print(f"\n{label}: {count:,} keys, {keys.nbytes / 1e6:,.0f} MB")
    everything = keys.to_pylist()
    sample = everything[:peer_keys]
    vectorized = murmur2_array(keys)
    expected = [murmur2(key) for key in sample[:20_000]]
    assert vectorized[: len(expected)].tolist() == expected, "vectorized != scalar"
    assert (murmur2_array(everything) == vectorized).all(), "list input != Arrow input"
    unsigned = [h & 0xFFFFFFFF for h in expected]
    for name, function in peers.items():
        assert [function(key) for key in sample[:20_000]] == unsigned, f"{name} disagrees"

    wall, cpu = best_seconds(lambda: murmur2_array(keys), repeat)
    ours = (count / wall, count / cpu)
    wall, cpu = best_seconds(lambda: murmur2_array(everything), repeat)
    from_list = (count / wall, count / cpu)
    rows = [
        ("ktk murmur2_array, Arrow array in", ours, count),
        ("ktk murmur2_array, list in (+Arrow)", from_list, count),
    ]
    java_figures = java_rates(java, keys, vectorized, java_runs) if java else {}
    for phase, figures in java_figures.items():
        rows.append((f"Java Utils.murmur2 ({phase})", figures, count))
    rows.append(("ktk murmur2 (scalar)", per_key_rate(murmur2, sample), len(sample)))
    for name, function in peers.items():
        rows.append((name, per_key_rate(function, sample), len(sample)))
    print(
        f"{'implementation':<40}{'keys hashed':>13}{'M keys/s':>10}{'(CPU time)':>12}"
        f"{'ktk Arrow in / it (wall, CPU)':>32}"
    )
    for name, (wall_rate, cpu_rate), hashed in rows:
        ratio = f"{ours[0] / wall_rate:,.2f}x {ours[1] / cpu_rate:,.2f}x"
        print(f"{name:<40}{hashed:>13,}{wall_rate / 1e6:>10.2f}{cpu_rate / 1e6:>12.2f}{ratio:>32}")
    if "warm" in java_figures:
        warm = java_figures["warm"]
        print(
            f"ktk / Java warm throughput: Arrow in {ours[0] / warm[0]:.2f}x wall, "
            f"{ours[1] / warm[1]:.2f}x CPU; list in {from_list[0] / warm[0]:.2f}x wall, "
            f"{from_list[1] / warm[1]:.2f}x CPU"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000,000 and 100,000 keys")
    parser.add_argument("--peer-keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--oracle",
        type=Path,
        default=None,
        metavar="DIR",
        help="classes directory of the Java oracle harness (Harness.class); without it no Java",
    )
    parser.add_argument("--java-runs", type=int, default=3, help="fresh JVMs per key set")
    arguments = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average before: {load_average()}")
    fixed_count, mixed_count = (1_000_000, 100_000) if arguments.quick else (10_000_000, 1_000_000)
    peer_keys = min(arguments.peer_keys, 200_000) if arguments.quick else arguments.peer_keys
    # imported (and reported missing) once for both key shapes
    peers = load_peers()
    java = java_oracle(arguments.oracle)
    bench(
        "16-byte keys",
        fixed_width_keys(fixed_count, 16, arguments.seed),
        peer_keys,
        arguments.repeat,
        peers,
        java,
        arguments.java_runs,
    )
    bench(
        "mixed-length keys (0-64 bytes)",
        mixed_length_keys(mixed_count, 64, arguments.seed),
        peer_keys,
        arguments.repeat,
        peers,
        java,
        arguments.java_runs,
    )

    print(f"\nload average after: {load_average()}")


def load_average() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
