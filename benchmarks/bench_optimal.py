"""Cost of the optimal and load-aware assignors at 10^4, 10^5 and 10^6 partitions, beside sticky.

Each size runs a fresh assignment (nobody owns anything) and an incremental one (the fresh
answer is owned, every tenth member leaves and one new member joins), on three subscription
shapes: uniform; heterogeneous (the first half of the members subscribe to every topic, the
rest to every other topic); random (each member subscribes to a random half of the topics, so
every topic has its own subscribers: the worst case for the optimal assignor's flow). Replica
racks on three racks and skewed (Pareto) partition weights throughout.
Sticky is the peer: same groups, same run, and the ratio of the times is printed.

    python benchmarks/bench_optimal.py                    # 10^4 and 10^5
    python benchmarks/bench_optimal.py --size 1000000     # one size
    python benchmarks/bench_optimal.py --all              # 10^4, 10^5 and 10^6
    python benchmarks/bench_optimal.py --shape random     # one subscription shape

Sizes: partitions -> members (100 partitions per topic): 10^4 -> 100, 10^5 -> 1,000,
10^6 -> 2,000 (the size of Kafka's own largest sticky test).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from assignors.load_aware import LoadAwareAssignor
from assignors.model import Assignment, Group, Member, Topic, TopicPartition
from assignors.optimal import OptimalAssignor
from assignors.sticky import StickyAssignor

PARTITIONS_PER_TOPIC = 100
MEMBERS = {10_000: 100, 100_000: 1_000, 1_000_000: 2_000}
RACKS = ("az1", "az2", "az3")
SHAPES = ("uniform", "heterogeneous", "random")


def make_topics(partitions: int, seed: int = 0) -> tuple[Topic, ...]:
    rng = np.random.default_rng(seed)
    num_topics = partitions // PARTITIONS_PER_TOPIC
    rack_sets = [frozenset(pair) for pair in (("az1", "az2"), ("az1", "az3"), ("az2", "az3"))]
    topics = []
    for index in range(num_topics):
        choices = rng.integers(0, len(rack_sets), PARTITIONS_PER_TOPIC)
        weights = np.round(rng.pareto(1.2, PARTITIONS_PER_TOPIC) + 1.0, 3)
        topics.append(
            Topic(
                f"topic-{index:05d}",
                PARTITIONS_PER_TOPIC,
                replica_racks=tuple(rack_sets[c] for c in choices.tolist()),
                weights=tuple(weights.tolist()),
            )
        )
    return tuple(topics)


def make_group(
    topics: tuple[Topic, ...],
    num_members: int,
    shape: str,
    owned: Assignment | None = None,
) -> Group:
    everything = frozenset(topic.name for topic in topics)
    every_other = frozenset(topic.name for topic in topics[::2])
    rng = np.random.default_rng(1)
    members = []
    ids = [f"consumer-{i:05d}" for i in range(num_members)]
    if owned is not None:  # every tenth member leaves, one joins
        ids = [member_id for i, member_id in enumerate(ids) if i % 10 != 0] + ["consumer-new"]
    for position, member_id in enumerate(ids):
        subscription = everything
        if shape == "heterogeneous" and position >= len(ids) // 2:
            subscription = every_other
        elif shape == "random":  # every topic ends up with its own set of subscribers
            chosen = rng.random(len(topics)) < 0.5
            subscription = frozenset(t.name for t, keep in zip(topics, chosen, strict=True) if keep)
        claims: tuple[TopicPartition, ...] = ()
        if owned is not None:
            claims = tuple(
                tp for tp in owned.partitions.get(member_id, ()) if tp.topic in subscription
            )
        members.append(
            Member(
                member_id,
                subscription,
                claims,
                1 if claims else -1,
                rack=RACKS[position % len(RACKS)],
            )
        )
    return Group(topics, tuple(members))


def timed(assign: Callable[[Group], Assignment], group: Group) -> tuple[float, Assignment]:
    started = time.perf_counter()
    answer = assign(group)
    return time.perf_counter() - started, answer


def run(partitions: int, shapes: tuple[str, ...]) -> None:
    topics = make_topics(partitions)
    num_members = MEMBERS[partitions]
    peer = StickyAssignor()
    ours = {"optimal": OptimalAssignor(), "load-aware": LoadAwareAssignor()}
    for shape in shapes:
        fresh = make_group(topics, num_members, shape)
        peer_fresh_s, peer_answer = timed(peer.assign, fresh)
        incremental = make_group(topics, num_members, shape, owned=peer_answer)
        peer_incremental_s, _ = timed(peer.assign, incremental)
        for name, assignor in ours.items():
            fresh_s, _ = timed(assignor.assign, fresh)
            incremental_s, _ = timed(assignor.assign, incremental)
            print(
                f"{partitions:>9,} partitions x {num_members:>5,} members {shape:13s} {name:10s}"
                f" fresh {fresh_s:7.2f}s (sticky {peer_fresh_s:6.2f}s,"
                f" x{fresh_s / peer_fresh_s:5.1f})"
                f"  incremental {incremental_s:7.2f}s (sticky {peer_incremental_s:6.2f}s,"
                f" x{incremental_s / peer_incremental_s:5.1f})",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, choices=sorted(MEMBERS), action="append")
    parser.add_argument("--all", action="store_true", help="10^4, 10^5 and 10^6 partitions")
    parser.add_argument(
        "--shape", choices=SHAPES, action="append", help="subscription shape (default: all)"
    )
    arguments = parser.parse_args()
    sizes = sorted(MEMBERS) if arguments.all else arguments.size or [10_000, 100_000]
    for size in sizes:
        run(size, tuple(arguments.shape or SHAPES))


if __name__ == "__main__":
    main()
