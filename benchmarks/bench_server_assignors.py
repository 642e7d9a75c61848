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
timed in this process on ``assign(group)`` alone, building the group untimed: its first call and
the median of ``--reps`` more. Printed: seconds per side and ktk / Java.

    python benchmarks/bench_server_assignors.py --oracle BUILD/classes
    python benchmarks/bench_server_assignors.py --oracle BUILD/classes --topics 100 --per-topic 1000
    python benchmarks/bench_server_assignors.py            # ktk only
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from assignors.model import Group, Member, Topic, TopicPartition
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
    names = [f"topic-{t:04d}" for t in range(topics)]
    subscribed = subscriptions(topics, members, shape, SEED)
    owned: dict[int, list[TopicPartition]] = {}
    if owners is not None:
        order = np.argsort(owners, kind="stable")
        bounds = np.searchsorted(owners[order], np.arange(members + 1))
        for c in range(members):
            indexes = order[bounds[c] : bounds[c + 1]].tolist()
            owned[c] = [TopicPartition(names[i // per_topic], i % per_topic) for i in indexes]
    return Group(
        tuple(Topic(name, per_topic) for name in names),
        tuple(
            Member(
                f"consumer-{c:05d}",
                frozenset(names[t] for t in subscribed[c]),
                tuple(owned.get(c, ())),
                generation=1 if owners is not None else -1,
            )
            for c in range(members)
            if owners is None or c % LEAVE_EVERY != 0
        ),
    )


def owners_of(assignment, topics: int, per_topic: int) -> np.ndarray:
    owners = np.full(topics * per_topic, -1, dtype=np.int32)
    for member, partitions in assignment.partitions.items():
        c = int(member.rsplit("-", 1)[1])
        for tp in partitions:
            owners[int(tp.topic.rsplit("-", 1)[1]) * per_topic + tp.partition] = c
    return owners


def time_ktk(assignor_name: str, group: Group, reps: int) -> tuple[float, float, object]:
    assignor = get(assignor_name)
    seconds, answer = [], None
    for _ in range(1 + reps):
        answer = None
        started = time.perf_counter()
        answer = assignor.assign(group)
        seconds.append(time.perf_counter() - started)
    return seconds[0], statistics.median(seconds[1:]), answer


def time_java(
    oracle: str,
    assignor_name: str,
    topics: int,
    per_topic: int,
    members: int,
    shape: str,
    reps: int,
    owners_in: Path | None,
) -> tuple[float, float]:
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
    return float(report["cold_s"]), statistics.median(report["warm_s"])


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
        " seconds, warm = median of the calls after the first (Java: after 3 warm-ups)"
    )
    header = f"{'case':44} {'ktk cold':>9} {'ktk warm':>9} {'Java cold':>10} {'Java warm':>10}"
    print(header + f" {'ratio cold':>10} {'ratio warm':>10}")
    for assignor_name in arguments.assignors.split(","):
        for shape in ("uniform", "half"):
            phases = ("initial", "rebalance") if assignor_name == "uniform" else ("initial",)
            owners = None
            for phase in phases:
                group = build_group(topics, per_topic, members, shape, owners)
                ktk_cold, ktk_warm, answer = time_ktk(assignor_name, group, arguments.reps)
                label = f"{assignor_name} {'homogeneous' if shape == 'uniform' else 'random half'}"
                row = f"{label + ' ' + phase:44} {ktk_cold:9.3f} {ktk_warm:9.3f}"
                if arguments.oracle:
                    with tempfile.TemporaryDirectory() as work:
                        owners_file = None
                        if owners is not None:
                            owners_file = Path(work) / "owners.bin"
                            owners.astype("<i4").tofile(owners_file)
                        java_cold, java_warm = time_java(
                            arguments.oracle, assignor_name, topics, per_topic, members,
                            shape, arguments.reps, owners_file,
                        )  # fmt: skip
                    row += f" {java_cold:10.3f} {java_warm:10.3f}"
                    row += f" {ktk_cold / java_cold:10.2f} {ktk_warm / java_warm:10.2f}"
                print(row, flush=True)
                owners = owners_of(answer, topics, per_topic)


if __name__ == "__main__":
    main()
