"""KIP-848 server-side assignors at scale: ktk against Kafka's group coordinator, same run.

Groups of 2,000 members over 500 topics of 2,000 partitions (1,000,000 partitions): every member
on every topic (homogeneous) or each member on a seeded random half of the topics
(heterogeneous, the oracle harness's SplitMix64 stream, so both sides get the same group). Each
group is assigned from scratch ("initial") and again after every tenth member left, the others
owning what the first round gave them ("rebalance", uniform only; both sides start from ktk's
first round).

Java is Kafka's own ``UniformAssignor`` / server ``RangeAssignor`` through the oracle harness
(shared/tools/java-oracle; ``--oracle`` points at its built classes), timed inside its JVM:
its first call (cold), then after 3 warm-up calls the median of ``--reps`` calls (warm). ktk is
timed in this process on ``assign(group)`` alone, building the group untimed (members own their
partitions as integer indexes, :class:`~assignors.model.OwnedPartitions`, as the request reader
gives them and as the harness gives Java its ``Set<Integer>`` per topic): its first call and the
median of ``--reps`` more. Printed: wall seconds per side, CPU seconds (ktk: this process; Java:
the calling thread, and the whole JVM with its GC and JIT threads) and the ratios ktk / Java
(cpu: against Java's calling thread, which leaves out its garbage collection; jvm: against
the whole JVM). Under load, compare the CPU columns.

    python benchmarks/bench_server_assignors.py --oracle BUILD/classes
    python benchmarks/bench_server_assignors.py --oracle BUILD/classes --topics 100 --per-topic 1000
    python benchmarks/bench_server_assignors.py            # ktk only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from assignors.model import (
    Assignment,
    Group,
    Member,
    OwnedPartitions,
    PartitionSpace,
    Topic,
    member_runs,
)
from assignors.registry import get

MASK64 = (1 << 64) - 1
SEED = 20241025
LEAVE_EVERY = 10


def splitmix64(seed: int) -> Iterator[int]:
    """The oracle harness's SplitMix64 stream."""
    state = seed & MASK64
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


def subscriptions(topics: int, members: int, shape: str, seed: int) -> list[list[int]]:
    """Topic indexes per member: all, or a seeded random half (as the harness draws them)."""
    if shape == "uniform":
        return [list(range(topics))] * members
    stream, result = splitmix64(seed), []
    for _ in range(members):
        order, take = list(range(topics)), topics // 2
        for i in range(take):
            j = i + next(stream) % (topics - i)
            order[i], order[j] = order[j], order[i]
        result.append(sorted(order[:take]))
    return result


def build_group(
    topics: int, per_topic: int, members: int, shape: str, owners: np.ndarray | None
) -> Group:
    """The harness's group; with ``owners`` (consumer number per partition) every tenth member
    has left and the others own what ``owners`` gives them, as integer indexes
    (:class:`OwnedPartitions`, as the request reader makes them), in generation 1."""
    names = [f"topic-{t:04d}" for t in range(topics)]
    subscribed = subscriptions(topics, members, shape, SEED)
    owned: dict[int, OwnedPartitions] = {}
    if owners is not None:
        space = PartitionSpace(tuple(names), (per_topic,) * topics)
        order, bounds = member_runs(owners.astype(np.int64), members)
        for c in range(members):
            owned[c] = OwnedPartitions(space, order[bounds[c] : bounds[c + 1]])
    return Group(
        tuple(Topic(name, per_topic) for name in names),
        tuple(
            Member(
                f"consumer-{c:05d}",
                frozenset(names[t] for t in subscribed[c]),
                owned.get(c, ()),
                generation=1 if owners is not None else -1,
            )
            for c in range(members)
            if owners is None or c % LEAVE_EVERY != 0
        ),
    )


def owners_of(answer: Assignment, group: Group, topics: int, per_topic: int) -> np.ndarray:
    """Consumer number per partition (the harness's owners file), -1 none."""
    assert answer.owners is not None and answer.space is not None
    number = np.asarray([int(m.member_id.rsplit("-", 1)[1]) for m in group.members] + [-1])
    space = PartitionSpace(tuple(f"topic-{t:04d}" for t in range(topics)), (per_topic,) * topics)
    owners = np.full(space.size, -1, dtype=np.int32)
    every = np.arange(answer.space.size)
    positions, numbers = answer.space.locate(every)
    starts = np.asarray(
        [space.offsets[space.topic_names.index(n)] for n in answer.space.topic_names]
    )
    owners[starts[positions] + numbers] = number[answer.owners]
    return owners


def time_ktk(assignor_name: str, group: Group, reps: int) -> dict[str, Any]:
    """Wall and CPU seconds of the first call and the medians of the next ``reps``."""
    assignor = get(assignor_name)
    seconds, cpu_seconds, answer = [], [], None
    for _ in range(1 + reps):
        answer = None
        cpu = time.process_time()
        started = time.perf_counter()
        answer = assignor.assign(group)
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu)
    return {
        "cold_s": seconds[0],
        "warm_s": statistics.median(seconds[1:]),
        "warm_cpu_s": statistics.median(cpu_seconds[1:]),
        "answer": answer,
    }


def time_java(
    oracle: str,
    assignor_name: str,
    topics: int,
    per_topic: int,
    members: int,
    shape: str,
    reps: int,
    owners_in: Path | None,
) -> dict[str, float]:
    command = [
        "java", "-cp", oracle, "Harness", "bench", "--assignor", assignor_name,
        "--topics", str(topics), "--per-topic", str(per_topic), "--consumers", str(members),
        "--subscription", shape, "--seed", str(SEED), "--warmups", "3", "--reps", str(reps),
    ]  # fmt: skip
    if owners_in is not None:
        command += ["--owners-in", str(owners_in), "--leave-every", str(LEAVE_EVERY)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report["duplicates"]:
        raise SystemExit(f"Java assigned {report['duplicates']} partitions twice")
    return {
        "cold_s": float(report["cold_s"]),
        "warm_s": statistics.median(report["warm_s"]),
        "warm_thread_cpu_s": statistics.median(report["warm_thread_cpu_s"]),
        "warm_process_cpu_s": statistics.median(report["warm_process_cpu_s"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--oracle", help="the oracle harness's classes directory (Java side)")
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--per-topic", type=int, default=2_000)
    parser.add_argument("--members", type=int, default=2_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--assignors", default="uniform,server-range")
    arguments = parser.parse_args()
    topics, per_topic, members = arguments.topics, arguments.per_topic, arguments.members
    print(
        f"{members:,} members x {topics * per_topic:,} partitions ({topics} x {per_topic:,});"
        " seconds, warm = median of the calls after the first (Java: after 3 warm-ups);"
        " cpu: ktk process, Java calling thread / whole JVM; ratios ktk / Java"
    )
    print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    header = f"{'case':40} {'ktk cold':>8} {'warm':>6} {'cpu':>6}"
    if arguments.oracle:
        header += f" {'Java cold':>9} {'warm':>6} {'cpu':>6} {'jvm cpu':>7}"
        header += f" {'cold':>5} {'warm':>5} {'cpu':>5} {'jvm':>5}"
    print(header)
    for assignor_name in arguments.assignors.split(","):
        for shape in ("uniform", "half"):
            phases = ("initial", "rebalance") if assignor_name == "uniform" else ("initial",)
            owners = None
            for phase in phases:
                group = build_group(topics, per_topic, members, shape, owners)
                ours = time_ktk(assignor_name, group, arguments.reps)
                label = f"{assignor_name} {'homogeneous' if shape == 'uniform' else 'random half'}"
                row = f"{label + ' ' + phase:40} {ours['cold_s']:8.3f} {ours['warm_s']:6.3f}"
                row += f" {ours['warm_cpu_s']:6.3f}"
                if arguments.oracle:
                    with tempfile.TemporaryDirectory() as work:
                        owners_file = None
                        if owners is not None:
                            owners_file = Path(work) / "owners.bin"
                            owners.astype("<i4").tofile(owners_file)
                        java = time_java(
                            arguments.oracle, assignor_name, topics, per_topic, members,
                            shape, arguments.reps, owners_file,
                        )  # fmt: skip
                    row += f" {java['cold_s']:9.3f} {java['warm_s']:6.3f}"
                    row += f" {java['warm_thread_cpu_s']:6.3f} {java['warm_process_cpu_s']:7.3f}"
                    row += f" {ours['cold_s'] / java['cold_s']:5.2f}"
                    row += f" {ours['warm_s'] / java['warm_s']:5.2f}"
                    row += f" {ours['warm_cpu_s'] / java['warm_thread_cpu_s']:5.2f}"
                    row += f" {ours['warm_cpu_s'] / java['warm_process_cpu_s']:5.2f}"
                print(row, flush=True)
                owners = owners_of(ours["answer"], group, topics, per_topic)
    print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
