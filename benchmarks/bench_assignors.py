"""Assignor speed at scale: ktk against kafka-python's assignors, same groups, same run.

Assignors: sticky, cooperative-sticky (first round of each rebalance: what it hands out while
moving partitions are withheld), range, roundrobin against kafka-python; then ktk's assignors
that kafka-python lacks, alone: the KIP-848 server-side ``uniform`` and ``server-range`` (Java's
own are timed beside them by ``bench_server_assignors.py --oracle``), ``optimal``, ``load-aware``
and ``load-aware-cooperative`` (no weights here: they balance counts), at the smallest peer
size and at 2,000 x 100,000.

Each scenario is a group of C consumers subscribed to every topic (topics of 1,000 partitions,
P partitions in all): an initial assignment with no owned partitions, then a rebalance after
every tenth consumer left, the others reporting what the initial round gave them (generation
1). Both sides get identical kafka-python JoinGroup members (decoded subscriptions, sticky user
data) and a stand-in cluster answering partition counts; both return kafka-python
``ConsumerProtocolAssignment``s. ktk runs behind its kafka-python adapter, so its time includes
reading the members and writing the answer; the time of ktk's ``assign`` alone is printed too.

    python benchmarks/bench_assignors.py            # peers at 200 x 20,000 and 500 x 50,000
    python benchmarks/bench_assignors.py --quick    # peers at 100 x 10,000 only
    python benchmarks/bench_assignors.py --million  # adds ktk at 2,000 x 1,000,000
    python benchmarks/bench_assignors.py --check    # then the targets below; exit 1 on a miss
    python benchmarks/bench_assignors.py --oracle DIR   # Kafka's own Java assignors beside ktk

``--oracle DIR`` (the ``classes`` directory the Java oracle's ``build.sh`` makes; see
``shared/tools/java-oracle/README.md``) runs only the Java comparison at Kafka's sizes: 500
topics x 2,000 partitions, 2,000 consumers subscribed to all of them. For sticky,
cooperative-sticky, range and roundrobin it times the ``assign`` call alone, first the initial
assignment, then a rebalance after every tenth consumer left (the others owning what the initial
round gave them, generation 1): Java's ``Harness bench`` (first call = cold, then 3 warm-up calls,
then 3 timed ones: warm is the fastest) and ktk in this process (first call cold, warm the
fastest of the next 3), with wall and CPU seconds and the ktk/Java ratios. It checks that both
sides hand out the same owners. Then the whole process, JSON in, JSON out: ``ktk assign`` on a
1M request file (initial, then 10% leave with the others listing the 900,000 partitions ktk's
initial round gave them) beside ``Harness assign`` on the same file, wall and CPU seconds and
peak RSS of each (``getrusage(RUSAGE_CHILDREN)`` in a fresh interpreter per command). The load
average is printed first and last: the timings are of one run on whatever the machine is doing.

kafka-python's sticky assignor needs about 11 s per round at 200 x 20,000 and about 75 s at
500 x 50,000, and does not finish 1,000 x 100,000 in minutes, so larger sizes run ktk only:
2,000 x 100,000 (the targets: each round under 10 s), a heterogeneous variant of it (the last
consumer subscribes to one topic only, as in Kafka's own non-equal-subscription test) and, with
``--million``, 2,000 x 1,000,000.

``--check`` then times the targets (``assign`` alone, on a ready group, best of three) and exits
1 when one is missed: sticky and cooperative-sticky each round under 10 s at 2,000 x 100,000
(initial, then after every tenth consumer left); range (with racks) and roundrobin
(heterogeneous subscriptions) under 5 s at 100,000 partitions, and linear in the group's size:
the exponent fitted to their times over 25,000 to 200,000 partitions (fixed topics growing in
partitions, consumers and so subscriptions in proportion) stays below 1.5 (linear is 1,
quadratic 2; timed in CPU time with the garbage collector paused); and replay scoring's exact
references (optimal max load and fewest moves) under 5 s for 500 members x 100,000 partitions.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from assignors.model import (
    Assignment,
    Group,
    Member,
    PartitionSpace,
    Topic,
    TopicPartition,
    member_runs,
)
from assignors.protocol.kafka_python import kafka_python_assignor
from assignors.registry import get
from assignors.traces.scoring import min_moved, optimal_max_load

PARTITIONS_PER_TOPIC = 1_000


@dataclass(frozen=True)
class Scenario:
    consumers: int
    partitions: int
    heterogeneous: bool = False

    @property
    def label(self) -> str:
        shape = " heterogeneous" if self.heterogeneous else ""
        return f"{self.consumers:,} x {self.partitions:,}{shape}"

    def topic_names(self) -> list[str]:
        return [f"topic-{i:04d}" for i in range(max(1, self.partitions // PARTITIONS_PER_TOPIC))]

    def subscription(self, consumer: int) -> list[str]:
        names = self.topic_names()
        return names[:1] if self.heterogeneous and consumer == self.consumers - 1 else names

    def member_id(self, consumer: int) -> str:
        return f"consumer-{consumer:05d}"


class StandInCluster:
    """What the assignors ask the cluster: topic names and partition ids per topic."""

    def __init__(self, names: list[str], per_topic: int) -> None:
        self.ids = {name: set(range(per_topic)) for name in names}

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        return set(self.ids)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.ids.get(topic)


def join_members(
    scenario: Scenario, protocol: str, owned: dict[str, list[TopicPartition]] | None
) -> list[Any]:
    """Decoded JoinGroup members as kafka-python's coordinator hands them to the leader."""
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.protocol.consumer.group import JoinGroupResponse
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    members = []
    for consumer in range(scenario.consumers):
        member_id = scenario.member_id(consumer)
        if owned is not None and member_id not in owned:
            continue  # this consumer left
        topics = scenario.subscription(consumer)
        if protocol == "sticky" and owned is not None:
            metadata = StickyPartitionAssignor._metadata(topics, owned[member_id], 1)
        elif protocol == "cooperative-sticky" and owned is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in owned[member_id]:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            metadata = ConsumerProtocolSubscription(
                version=2,
                topics=topics,
                user_data=b"",
                generation_id=1,
                owned_partitions=[
                    ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=p)
                    for t, p in sorted(by_topic.items())
                ],
            )
        else:
            metadata = ConsumerProtocolSubscription(0, topics, b"")
        # through the wire format, as the coordinator receives it
        decoded = ConsumerProtocolSubscription.decode(metadata.encode())
        members.append(
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=member_id, group_instance_id=None, metadata=decoded
            )
        )
    return members


def ktk_group(scenario: Scenario, owned: dict[str, list[TopicPartition]] | None) -> Group:
    topics = tuple(Topic(name, PARTITIONS_PER_TOPIC) for name in scenario.topic_names())
    members = []
    for consumer in range(scenario.consumers):
        member_id = scenario.member_id(consumer)
        if owned is not None and member_id not in owned:
            continue
        claims = tuple(owned[member_id]) if owned is not None else ()
        members.append(
            Member(
                member_id, frozenset(scenario.subscription(consumer)), claims, 1 if claims else -1
            )
        )
    return Group(topics, tuple(members))


def leaving(assignment: dict[str, Any]) -> dict[str, list[TopicPartition]]:
    """What the consumers that stay owned: every tenth consumer leaves."""
    return {
        member_id: [TopicPartition(tp.topic, tp.partition) for tp in answer.partitions()]
        for position, (member_id, answer) in enumerate(sorted(assignment.items()))
        if position % 10 != 0
    }


def timed(
    action: Callable[[], Any], clock: Callable[[], float] = time.perf_counter
) -> tuple[float, Any]:
    started = clock()
    result = action()
    return clock() - started, result


def peer_assignor(protocol: str) -> Any:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return {
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
    }[protocol]()


def run_scenario(protocol: str, scenario: Scenario, with_peer: bool) -> list[tuple[Any, ...]]:
    """Rows (assignor, size, round, peer s, ktk s via adapter, ktk assign s)."""
    cluster = StandInCluster(scenario.topic_names(), PARTITIONS_PER_TOPIC)
    ours = kafka_python_assignor(protocol)
    rows: list[tuple[Any, ...]] = []
    owned = None
    for round_name in ("initial", "10% leave"):
        members = join_members(scenario, protocol, owned)
        peer_seconds = None
        if with_peer:
            peer_seconds, _ = timed(partial(peer_assignor(protocol).assign, cluster, members))
        adapter_seconds, answer = timed(partial(ours.assign, cluster, members))
        assign_seconds, _ = timed(partial(get(protocol).assign, ktk_group(scenario, owned)))
        rows.append(
            (protocol, scenario.label, round_name, peer_seconds, adapter_seconds, assign_seconds)
        )
        owned = leaving(answer)
    return rows


HEADER = (
    f"{'assignor':<20}{'consumers x partitions':<36}{'round':<11}"
    f"{'kafka-python s':>15}{'ktk s':>9}{'ratio':>9}{'ktk assign s':>14}"
)


def format_row(row: tuple[Any, ...]) -> str:
    protocol, label, round_name, peer, adapter, assign = row
    peer_text = f"{peer:15.3f}" if peer is not None else f"{'-':>15}"
    ratio = f"{peer / adapter:8.1f}x" if peer is not None and adapter > 0 else f"{'-':>9}"
    return (
        f"{protocol:<20}{label:<36}{round_name:<11}{peer_text}{adapter:9.3f}{ratio}{assign:14.3f}"
    )


# --------------------------------------------------------------------------- --check targets

STICKY_TARGET_SECONDS = 10.0  # each round of the sticky family at 2,000 x 100,000
LINEAR_TARGET_SECONDS = 5.0  # range and roundrobin at 100,000 partitions
GROWTH_SIZES = (25_000, 50_000, 100_000, 200_000)
MAX_GROWTH_EXPONENT = 1.5
REPEATS = 3


@dataclass(frozen=True)
class Target:
    name: str
    measured: float
    limit: float
    unit: str

    @property
    def met(self) -> bool:
        return self.measured < self.limit


def best_assign(protocol: str, group: Group, *, growth: bool = False) -> tuple[float, Assignment]:
    """The fastest of ``REPEATS`` runs of ``assign`` on a ready group (and its answer). For
    ``growth`` fits the garbage collector is paused during each run, as ``timeit`` does (its
    full collections walk every live object, which would make any allocating code look
    superlinear), and the clock is the process's CPU time, which other jobs on the machine
    disturb far less than the wall clock."""
    assignor = get(protocol)
    runs = []
    for _ in range(REPEATS):
        gc.collect()
        if growth:
            gc.disable()
        try:
            clock = time.process_time if growth else time.perf_counter
            runs.append(timed(partial(assignor.assign, group), clock))
        finally:
            gc.enable()
    return min(seconds for seconds, _ in runs), runs[0][1]


def assigned_count(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.partitions.values())


def sticky_targets() -> list[Target]:
    scenario = Scenario(2_000, 100_000)
    targets = []
    for protocol in ("sticky", "cooperative-sticky"):
        initial_seconds, initial = best_assign(protocol, ktk_group(scenario, None))
        owned = {
            member_id: list(partitions)
            for position, (member_id, partitions) in enumerate(sorted(initial.partitions.items()))
            if position % 10 != 0
        }
        rebalance_seconds, rebalanced = best_assign(protocol, ktk_group(scenario, owned))
        if assigned_count(initial) != scenario.partitions:
            raise SystemExit(f"{protocol} left partitions out of the initial assignment")
        if assigned_count(rebalanced) + len(rebalanced.withheld) != scenario.partitions:
            raise SystemExit(f"{protocol} lost partitions in the rebalance")
        for round_name, seconds in (("initial", initial_seconds), ("10% leave", rebalance_seconds)):
            name = f"{protocol} {scenario.label} {round_name}"
            targets.append(Target(name, seconds, STICKY_TARGET_SECONDS, "s"))
    return targets


def range_with_racks(partitions: int) -> Group:
    """50 topics, each partition replicated on two of three racks (the pair shifting per
    topic), one consumer per 100 partitions spread over the racks, everyone on every topic: the
    input (partitions, subscriptions, replica racks) grows in proportion to ``partitions``."""
    racks = ("a", "b", "c")
    per_topic = partitions // 50
    topics = tuple(
        Topic(
            f"t{index:02d}",
            per_topic,
            replica_racks=tuple(
                frozenset({racks[p % 3], racks[(p + index) % 3]}) for p in range(per_topic)
            ),
        )
        for index in range(50)
    )
    names = frozenset(topic.name for topic in topics)
    members = tuple(
        Member(f"c{index:05d}", names, rack=racks[index % 3]) for index in range(partitions // 100)
    )
    return Group(topics, members)


def roundrobin_heterogeneous(partitions: int) -> Group:
    """100 topics, one consumer per 50 partitions, each consumer subscribed to a tenth of the
    topics: the input grows in proportion to ``partitions``."""
    topics = tuple(Topic(f"t{index:03d}", partitions // 100) for index in range(100))
    names = [topic.name for topic in topics]
    members = tuple(
        Member(f"c{index:05d}", frozenset(names[index % 10 :: 10]))
        for index in range(partitions // 50)
    )
    return Group(topics, members)


def growth_exponent(sizes: Sequence[int], seconds: Sequence[float]) -> float:
    """The least-squares slope of log(time) over log(size): 1 for linear, 2 for quadratic."""
    xs = [math.log(size) for size in sizes]
    ys = [math.log(max(value, 1e-9)) for value in seconds]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return covariance / sum((x - mean_x) ** 2 for x in xs)


def linear_targets() -> list[Target]:
    targets = []
    for protocol, build, shape in (
        ("range", range_with_racks, "with racks"),
        ("roundrobin", roundrobin_heterogeneous, "heterogeneous"),
    ):
        times = []
        for size in GROWTH_SIZES:
            group = build(size)
            seconds, assignment = best_assign(protocol, group, growth=True)
            if assigned_count(assignment) != size:
                raise SystemExit(f"{protocol} left partitions out at {size:,} partitions")
            times.append(seconds)
            if size == 100_000:
                seconds, _ = best_assign(protocol, group)
                name = f"{protocol} {shape} 100,000 partitions"
                targets.append(Target(name, seconds, LINEAR_TARGET_SECONDS, "s"))
        sizes = f"{GROWTH_SIZES[0]:,}-{GROWTH_SIZES[-1]:,}"
        name = f"{protocol} {shape} growth exponent over {sizes} partitions"
        exponent = growth_exponent(GROWTH_SIZES, times)
        targets.append(Target(name, exponent, MAX_GROWTH_EXPONENT, ""))
    return targets


def scoring_targets() -> list[Target]:
    """Replay scoring's exact references (optimal max load, fewest moves) on 500 members over
    20 topics of 5,000 partitions with overlapping subscriptions, everyone owning a share."""
    topics = tuple(Topic(f"t{i:02d}", 5_000) for i in range(20))
    members = tuple(
        Member(f"m{i:03d}", frozenset(topics[j].name for j in range(20) if (i + j) % 3))
        for i in range(500)
    )
    group = Group(topics, members)
    previous = {
        TopicPartition(topic.name, p): f"m{(p * 7 + k) % 520:03d}"
        for k, topic in enumerate(topics)
        for p in range(topic.num_partitions)
    }

    def references() -> tuple[int, int]:
        return optimal_max_load(group), min_moved(group, previous)

    runs = []
    for _ in range(REPEATS):
        gc.collect()
        runs.append(timed(references))
    seconds = min(seconds for seconds, _ in runs)
    name = "scoring exact references 500 members x 100,000 partitions"
    return [Target(name, seconds, LINEAR_TARGET_SECONDS, "s")]


def format_target(target: Target) -> str:
    unit = f" {target.unit}" if target.unit else ""
    measured = f"{target.measured:.3f}{unit}"
    limit = f"< {target.limit:g}{unit}"
    return f"{target.name:<72}{measured:>12}{limit:>10}  {'met' if target.met else 'MISSED'}"


# --------------------------------------------------------------------------- --oracle (Java)

ORACLE_TOPICS, ORACLE_PER_TOPIC, ORACLE_CONSUMERS = 500, 2_000, 2_000
ORACLE_LEAVE_EVERY = 10
ORACLE_WARMUPS, ORACLE_REPS = 3, 3
ORACLE_ASSIGNORS = ("sticky", "cooperative-sticky", "range", "roundrobin")
KTK_ONLY = ("uniform", "server-range", "optimal", "load-aware", "load-aware-cooperative")


def oracle_names() -> tuple[list[str], list[str]]:
    topics = [f"topic-{t:04d}" for t in range(ORACLE_TOPICS)]
    members = [f"consumer-{c:05d}" for c in range(ORACLE_CONSUMERS)]
    return topics, members


def oracle_group(previous: np.ndarray | None) -> Group:
    """The harness's group: everyone on every topic; with ``previous`` (owner per partition,
    consumer index) every tenth consumer has left and the others own what it gave them."""
    topic_names, member_ids = oracle_names()
    topics = tuple(Topic(name, ORACLE_PER_TOPIC) for name in topic_names)
    everything = frozenset(topic_names)
    if previous is None:
        return Group(topics, tuple(Member(member_id, everything) for member_id in member_ids))
    space = PartitionSpace(tuple(topic_names), (ORACLE_PER_TOPIC,) * ORACLE_TOPICS)
    order, bounds = member_runs(previous, ORACLE_CONSUMERS)
    objects = space.partition_objects(order)
    members = [
        Member(member_id, everything, tuple(objects[bounds[c] : bounds[c + 1]]), 1)
        for c, member_id in enumerate(member_ids)
        if c % ORACLE_LEAVE_EVERY != 0
    ]
    return Group(topics, tuple(members))


def consumer_owners(assignment: Assignment, group: Group) -> np.ndarray:
    """Owner per partition as the consumer's number (the harness's owners file), -1 none."""
    if assignment.owners is None:
        raise SystemExit("ktk's answer has no owner array")
    number = np.asarray([int(m.member_id.rsplit("-", 1)[1]) for m in group.members] + [-1])
    return number[assignment.owners]  # -1 indexes the appended -1


def ktk_timings(protocol: str, group: Group) -> dict[str, Any]:
    """Cold (first call) and warm (fastest of the next ``ORACLE_REPS``) wall and CPU seconds."""
    assignor = get(protocol)
    walls, cpus, answer = [], [], None
    for _ in range(1 + ORACLE_REPS):
        gc.collect()
        cpu = time.process_time()
        wall, answer = timed(partial(assignor.assign, group))
        cpus.append(time.process_time() - cpu)
        walls.append(wall)
    best = min(range(1, len(walls)), key=walls.__getitem__)
    return {
        "cold_s": walls[0],
        "cold_cpu_s": cpus[0],
        "warm_s": walls[best],
        "warm_cpu_s": cpus[best],
        "answer": answer,
    }


def java_timings(oracle: Path, protocol: str, owners_in: Path | None, owners_out: Path) -> dict:
    command = [
        "java", "-cp", str(oracle), "Harness", "bench", "--assignor", protocol,
        "--topics", str(ORACLE_TOPICS), "--per-topic", str(ORACLE_PER_TOPIC),
        "--consumers", str(ORACLE_CONSUMERS), "--subscription", "uniform",
        "--warmups", str(ORACLE_WARMUPS), "--reps", str(ORACLE_REPS),
        "--owners-out", str(owners_out),
    ]  # fmt: skip
    if owners_in is not None:
        command += ["--owners-in", str(owners_in), "--leave-every", str(ORACLE_LEAVE_EVERY)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    best = min(range(len(report["warm_s"])), key=report["warm_s"].__getitem__)
    report["warm_best_s"] = report["warm_s"][best]
    report["warm_best_cpu_s"] = report["warm_process_cpu_s"][best]
    return report


def whole_process(command: list[str], request: Path) -> dict[str, float]:
    """Wall, CPU (user + system) seconds and peak RSS (KiB) of ``command`` run on ``request``,
    measured from a fresh interpreter so RUSAGE_CHILDREN holds that one process only."""
    probe = (
        "import json, resource, subprocess, sys, time\n"
        "started = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
        "wall = time.perf_counter() - started\n"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps({'wall_s': wall, 'cpu_s': usage.ru_utime + usage.ru_stime,"
        " 'max_rss_kb': usage.ru_maxrss}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command, str(request)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured: dict[str, float] = json.loads(done.stdout)
    return measured


def oracle_request(path: Path, protocol: str, previous: np.ndarray | None = None) -> None:
    """The harness's group as a request file; with ``previous`` (owner per partition, consumer
    index) every tenth consumer has left and the others list what it gave them as owned."""
    topic_names, member_ids = oracle_names()
    topics = [{"name": name, "partitions": ORACLE_PER_TOPIC} for name in topic_names]
    members: list[dict[str, Any]] = []
    if previous is None:
        members = [{"id": member_id, "topics": topic_names} for member_id in member_ids]
    else:
        order, bounds = member_runs(previous, ORACLE_CONSUMERS)
        for c, member_id in enumerate(member_ids):
            if c % ORACLE_LEAVE_EVERY == 0:
                continue
            owned = [
                [topic_names[index // ORACLE_PER_TOPIC], index % ORACLE_PER_TOPIC]
                for index in order[bounds[c] : bounds[c + 1]].tolist()
            ]
            members.append(
                {"id": member_id, "topics": topic_names, "owned": owned, "generation": 1}
            )
    request = {"name": "oracle", "assignor": protocol, "topics": topics, "members": members}
    path.write_text(json.dumps(request) + "\n", encoding="utf-8")


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def run_oracle(oracle: Path, whole: Sequence[str]) -> None:
    print(f"Java oracle {oracle}; {load_text()}")
    print(
        f"{'assignor':<20}{'round':<11}{'java cold':>10}{'java warm':>10}{'(cpu)':>8}"
        f"{'ktk cold':>10}{'ktk warm':>10}{'(cpu)':>8}{'ktk/warm':>10}{'same':>6}"
    )
    with tempfile.TemporaryDirectory(prefix="ktk-oracle-") as scratch:
        work = Path(scratch)
        for protocol in ORACLE_ASSIGNORS:
            previous_java: Path | None = None
            previous_ktk: np.ndarray | None = None
            for round_name in ("initial", "10% leave"):
                owners_out = work / f"{protocol}-{len(round_name)}.owners"
                java = java_timings(oracle, protocol, previous_java, owners_out)
                group = oracle_group(previous_ktk)
                ours = ktk_timings(protocol, group)
                owners = consumer_owners(ours["answer"], group)
                java_owners = np.fromfile(owners_out, dtype="<i4").astype(np.int64)
                same = "yes" if np.array_equal(owners, java_owners) else "NO"
                ratio = ours["warm_s"] / java["warm_best_s"]
                print(
                    f"{protocol:<20}{round_name:<11}{java['cold_s']:10.3f}"
                    f"{java['warm_best_s']:10.3f}{java['warm_best_cpu_s']:8.3f}"
                    f"{ours['cold_s']:10.3f}{ours['warm_s']:10.3f}{ours['warm_cpu_s']:8.3f}"
                    f"{ratio:9.2f}x{same:>6}",
                    flush=True,
                )
                previous_java, previous_ktk = owners_out, owners
                del ours, group
        if whole:
            print()
            print(
                f"{'whole process (JSON in, JSON out)':<44}{'wall s':>8}{'cpu s':>8}"
                f"{'peak RSS MiB':>14}{'ktk/java wall':>15}{'rss':>7}"
            )
        for protocol, round_name in itertools.product(whole, ("initial", "10% leave")):
            request = work / f"{protocol}-{len(round_name)}.json"
            previous = None
            if round_name != "initial":
                initial = oracle_group(None)
                previous = consumer_owners(get(protocol).assign(initial), initial)
            oracle_request(request, protocol, previous)
            java_side = whole_process(["java", "-cp", str(oracle), "Harness", "assign"], request)
            ktk_side = whole_process([sys.executable, "-m", "ktk", "assign"], request)
            for side, measured in (("java Harness assign", java_side), ("ktk assign", ktk_side)):
                label = f"{protocol} 1M {round_name}: {side}"
                print(
                    f"{label:<44}{measured['wall_s']:8.2f}{measured['cpu_s']:8.2f}"
                    f"{measured['max_rss_kb'] / 1024:14.0f}",
                    end="",
                )
                if side == "ktk assign":
                    wall = ktk_side["wall_s"] / java_side["wall_s"]
                    rss = ktk_side["max_rss_kb"] / java_side["max_rss_kb"]
                    print(f"{wall:14.2f}x{rss:6.2f}x", end="")
                print(flush=True)
    usage = os.times()
    print(
        f"this process: user {usage.user:.1f} s, system {usage.system:.1f} s; "
        f"children: user {usage.children_user:.1f} s, system {usage.children_system:.1f} s; "
        f"{load_text()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="peers at 100 x 10,000 only")
    parser.add_argument("--million", action="store_true", help="add ktk at 2,000 x 1,000,000")
    parser.add_argument("--no-peer", action="store_true", help="skip kafka-python")
    parser.add_argument(
        "--check", action="store_true", help="then check the time targets; exit 1 on a miss"
    )
    parser.add_argument(
        "--oracle",
        type=Path,
        metavar="DIR",
        help="only the Java comparison: Kafka's assignors compiled into DIR (Harness classes)",
    )
    parser.add_argument(
        "--whole",
        default="sticky",
        help="assignors for the whole-process row with --oracle (comma-separated; '' for none)",
    )
    arguments = parser.parse_args()
    if arguments.oracle is not None:
        run_oracle(arguments.oracle, [name for name in arguments.whole.split(",") if name])
        return

    with_peer = not arguments.no_peer and importlib.util.find_spec("kafka") is not None
    peer_sizes = (
        [Scenario(100, 10_000)]
        if arguments.quick
        else [Scenario(200, 20_000), Scenario(500, 50_000)]
    )
    ktk_sizes = [Scenario(2_000, 100_000), Scenario(2_000, 100_000, heterogeneous=True)]
    if arguments.million:
        ktk_sizes += [Scenario(2_000, 1_000_000), Scenario(2_000, 1_000_000, heterogeneous=True)]
    plan = [
        (protocol, scenario, with_peer)
        for protocol in ("sticky", "cooperative-sticky", "range", "roundrobin")
        for scenario in peer_sizes
    ]
    # kafka-python cannot finish these sizes: ktk alone
    plan += [("sticky", scenario, False) for scenario in ktk_sizes]
    # assignors kafka-python does not have: ktk alone
    plan += [
        (protocol, scenario, False)
        for protocol in KTK_ONLY
        for scenario in (peer_sizes[0], ktk_sizes[0])
    ]

    print(HEADER)
    print("-" * len(HEADER))
    for protocol, scenario, peer in plan:
        for row in run_scenario(protocol, scenario, peer):
            print(format_row(row), flush=True)

    if arguments.check:
        print()
        print(f"{'target (assign alone, best of 3)':<72}{'measured':>12}{'limit':>10}")
        missed = []
        for measure in (sticky_targets, linear_targets, scoring_targets):
            for target in measure():
                print(format_target(target), flush=True)
                if not target.met:
                    missed.append(target.name)
        if missed:
            raise SystemExit(f"missed {len(missed)} target(s): {', '.join(missed)}")


if __name__ == "__main__":
    main()
