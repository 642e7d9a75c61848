"""Replay throughput: generations replayed (assigned and scored) per second per assignor.

Runs a seeded mixed set of generated traces through each of ktk's built-in assignors and, in the
same run, through kafka-python's assignor of the same name (the peer: range, roundrobin,
sticky), printing both figures and the ratio of the time spent inside the assignor.

    python benchmarks/bench_replay.py                 # small and medium sets
    python benchmarks/bench_replay.py --size large    # 1,000 members x 100,000 partitions
    python benchmarks/bench_replay.py --no-peer
    python benchmarks/bench_replay.py --size traces   # generations/s per core, CPU time
    python benchmarks/bench_replay.py --check         # the same, failing below THROUGHPUT_FLOORS
    python benchmarks/bench_replay.py --size traces --assignors range,roundrobin

Each size ends with the whole Python engine on the same traces written to a file: reading,
every assignor and the summary (``assignors.traces.job.replay_paths``), then the result bytes.

Sizes (initial members x partitions per group, generations per trace at most):
small 40 groups of 3-12 x 8-200 (24); medium 4 groups of 100-300 x 2,000-10,000 (8);
large 1 group of 1,000 x 100,000 (4).

``traces`` is the common case of recorded traces, 40 groups of 3-50 members x 10-500
partitions (24): each assignor alone, every generation assigned, scored and costed as the job
does (:func:`assignors.traces.job.replay_trace`), timed in CPU seconds of this process
(``time.process_time``, so other load on the machine slows it less than a wall clock), best of
``--repeat`` runs, each starting with the process-wide caches emptied
(:func:`clear_process_caches`); "in a job" is the same assignor with each generation's shared
parts (its group, scoring shape and what the array assignors share of it) made beforehand,
and timed apart (a job replaying several assignors makes them once per trace); "share of a
job" charges each assignor its equal share of those parts in a job of the assignors listed
(all nine built-ins by default, as ``ktk replay`` runs them), what the job really spends per
assignor; when fewer are listed, "share of 9" is the same for the nine-assignor job.
``--check`` exits 1 when an assignor alone falls below its floor in :data:`THROUGHPUT_FLOORS`,
or in a job below its floor in :data:`JOB_FLOORS`: the floors are about half the figures
measured on a loaded 2-core machine, so only a bad regression trips them.
"""

from __future__ import annotations

import argparse
import collections
import time
from dataclasses import dataclass
from typing import Any

from assignors import registry
from assignors.base import RebalanceProtocol
from assignors.model import Assignment, Group
from assignors.traces.format import Trace, build_trace, parse_generation
from assignors.traces.generate import generate_rows, parse_size_range
from assignors.traces.replay import replay_with

SIZES: dict[str, dict[str, Any]] = {
    "small": {"groups": 40, "members": (3, 12), "partitions": (8, 200), "max_generations": 24},
    "medium": {
        "groups": 4,
        "members": (100, 300),
        "partitions": (2_000, 10_000),
        "max_generations": 8,
    },
    "traces": {"groups": 40, "members": (3, 50), "partitions": (10, 500), "max_generations": 24},
    "large": {
        "groups": 1,
        "members": (1_000, 1_000),
        "partitions": (100_000, 100_000),
        "max_generations": 4,
    },
}
SEED = 2024

THROUGHPUT_FLOORS: dict[str, float] = {
    "range": 3000,
    "roundrobin": 3200,
    "sticky": 1000,
    "cooperative-sticky": 800,
    "uniform": 750,
    "server-range": 600,
    "optimal": 650,
    "load-aware": 600,
    "load-aware-cooperative": 450,
}
"""Least generations per CPU second ``--check`` accepts on the ``traces`` size, per assignor
replayed alone."""

JOB_FLOORS: dict[str, float] = {
    "range": 5500,
    "roundrobin": 6500,
    "sticky": 1500,
    "cooperative-sticky": 1100,
}
"""Least generations per CPU second ``--check`` accepts on the ``traces`` size, per assignor
replayed in a job (the shared parts of each generation made beforehand)."""


def build_traces(size: str) -> list[Trace]:
    by_trace: dict[str, list] = collections.defaultdict(list)
    for line, row in enumerate(generate_rows("mixed", seed=SEED, **SIZES[size]), 1):
        by_trace[row["trace_id"]].append(parse_generation(row, size, line))
    return [build_trace(trace_id, rows) for trace_id, rows in sorted(by_trace.items())]


# --- the peer: kafka-python's assignors behind ktk's Assignor contract -----------------------


@dataclass
class _Cluster:
    counts: dict[str, int]

    def topics(self) -> set[str]:
        return set(self.counts)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self.counts.get(topic)
        return None if count is None else set(range(count))


@dataclass
class _JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: Any


class KafkaPythonPeer:
    """kafka-python's assignor of the same protocol name; sticky gets its previous assignment
    as StickyAssignorUserData, as a real kafka-python member would send it."""

    def __init__(self, name: str) -> None:
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        self.name = name
        self.rebalance_protocol: RebalanceProtocol = "eager"
        self._assignor = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
        }[name]()

    def assign(self, group: Group) -> Assignment:
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserData
        from kafka.protocol.consumer import ConsumerProtocolSubscription

        members = []
        for member in group.members:
            user_data = b""
            if self.name == "sticky" and member.owned_partitions:
                by_topic: dict[str, list[int]] = collections.defaultdict(list)
                for tp in member.owned_partitions:
                    by_topic[tp.topic].append(tp.partition)
                user_data = StickyAssignorUserData(list(by_topic.items()), member.generation)
            metadata = ConsumerProtocolSubscription(0, sorted(member.topics), user_data)
            members.append(_JoinedMember(member.member_id, member.instance_id, metadata))
        cluster = _Cluster({topic.name: topic.num_partitions for topic in group.topics})
        answer = self._assignor.assign(cluster, members)
        return Assignment.build(
            [member.member_id for member in group.members],
            {member_id: list(assignment.partitions()) for member_id, assignment in answer.items()},
        )


def kafka_python_available() -> bool:
    try:
        import kafka  # noqa: F401
    except ImportError:
        return False
    return True


# --- measuring ------------------------------------------------------------------------------


Figures = tuple[int, float, float, int]


def measure(
    traces: list[Trace], assignor: Any, budget_seconds: float | None = None
) -> list[Figures | None]:
    """Per trace: (generations, wall seconds for the whole replay, seconds inside the assignor,
    moved), or None when the assignor raised on that trace or the budget ran out before it."""
    figures: list[Figures | None] = []
    spent = 0.0
    for trace in traces:
        if budget_seconds is not None and spent > budget_seconds:
            figures.append(None)
            continue
        started = time.perf_counter()
        try:
            rows = replay_with(trace, assignor, timings=True)
        except Exception:  # the peer has known crashes (roundrobin, mixed subscriptions)
            figures.append(None)
            continue
        elapsed = time.perf_counter() - started
        spent += elapsed
        inside = sum(row.assign_ms or 0.0 for row in rows) / 1000.0
        figures.append((len(rows), elapsed, inside, sum(row.moved for row in rows)))
    return figures


def total(figures: list[Figures | None], keep: list[bool]) -> Figures:
    kept = [f for f, wanted in zip(figures, keep, strict=True) if wanted and f is not None]
    return (
        sum(f[0] for f in kept),
        sum(f[1] for f in kept),
        sum(f[2] for f in kept),
        sum(f[3] for f in kept),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=(*SIZES, "all"), default=None)
    parser.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--peer-budget",
        type=float,
        default=120.0,
        help="stop running the peer on further traces after this many seconds",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per assignor on the traces size (best kept)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="measure the traces size only; exit 1 when an assignor is below its floor",
    )
    parser.add_argument(
        "--members", default=None, help="traces size: initial members per group, N or LOW-HIGH"
    )
    parser.add_argument(
        "--partitions", default=None, help="traces size: partitions per group, N or LOW-HIGH"
    )
    parser.add_argument(
        "--assignors",
        default=None,
        help="comma-separated assignor names to measure (default: every built-in one)",
    )
    arguments = parser.parse_args()
    for option in ("members", "partitions"):
        if getattr(arguments, option) is not None:
            SIZES["traces"][option] = parse_size_range(getattr(arguments, option), option)
    names = [name for name in registry.builtin_names() if _importable(name)]
    if arguments.assignors is not None:
        wanted = [name.strip() for name in arguments.assignors.split(",") if name.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"--assignors: unknown {', '.join(unknown)} (known: {', '.join(names)})")
        names = wanted
    if arguments.check or arguments.size == "traces":
        default_job = len([name for name in registry.builtin_names() if _importable(name)])
        if not report_throughput(names, max(1, arguments.repeat), arguments.check, default_job):
            raise SystemExit(1)
        return
    sizes = (
        ["small", "medium"]
        if arguments.size is None
        else ([s for s in SIZES if s != "traces"] if arguments.size == "all" else [arguments.size])
    )
    with_peer = arguments.peer and kafka_python_available()
    print(f"replay throughput, mixed traces, seed {SEED}")
    header = (
        f"{'size':<7} {'assignor':<19} {'gens':>5} {'gens/s':>9} {'assign ms/gen':>14} "
        f"{'moved':>8} | {'peer gens/s':>11} {'peer ms/gen':>12} {'peer moved':>10} "
        f"{'assign speedup':>15}"
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        started = time.perf_counter()
        traces = build_traces(size)
        print(f"{size}: {len(traces)} traces generated in {time.perf_counter() - started:.1f}s")
        for name in names:
            ours = measure(traces, registry.get(name))
            everything = [True] * len(traces)
            generations, elapsed, inside, moved = total(ours, everything)
            line = (
                f"{size:<7} {name:<19} {generations:>5} {generations / elapsed:>9.1f} "
                f"{1000 * inside / generations:>14.2f} {moved:>8}"
            )
            peer_fits = with_peer and name in ("range", "roundrobin", "sticky")
            if peer_fits and name == "sticky" and size == "large":
                # one assignment alone outlasts any budget: 1,000 x 100,000 does not finish in 120 s
                print(f"{line} | peer skipped: kafka-python sticky needs minutes per generation")
                continue
            if peer_fits:
                peer = measure(traces, KafkaPythonPeer(name), arguments.peer_budget)
                both = [p is not None for p in peer]
                if not any(both):
                    print(f"{line} | peer crashed on every trace", flush=True)
                    continue
                same_generations, _, same_inside, same_moved = total(ours, both)
                peer_generations, peer_elapsed, peer_inside, peer_moved = total(peer, both)
                line += (
                    f" | {peer_generations / peer_elapsed:>11.1f} "
                    f"{1000 * peer_inside / peer_generations:>12.2f} {peer_moved:>10} "
                    f"{peer_inside / same_inside:>14.1f}x"
                )
                if not all(both):
                    line += (
                        f"  (peer crashed or ran out of budget on {both.count(False)} of "
                        f"{len(traces)} traces; peer "
                        f"columns and speedup over the other {same_generations} generations, "
                        f"where ktk moved {same_moved})"
                    )
            else:
                line += " | " + "-".rjust(11)
            print(line, flush=True)
        replays, seconds = measure_job(size, names)
        print(
            f"{size:<7} {'job, all assignors':<19} {replays:>5} {replays / seconds:>9.1f}"
            "  (read, replay, summarise, result bytes)",
            flush=True,
        )


def clear_process_caches() -> None:
    """Empty the process-wide caches replays fill (replica layouts, range cuts and rack-matched
    ranges of range, sets of subscription classes, Java string hashes, the sticky engine's rack
    tables), so every timed run starts as a fresh job does: a best-of-N figure must not come
    from caches an earlier run filled."""
    from assignors import java_order, sticky
    from assignors import range as range_assignor
    from assignors.traces import scoring

    sticky._rack_tables.clear()

    for cached in (
        range_assignor._rack_matched_ranges,
        range_assignor._co_partitioned_ranges,
        range_assignor._range_cuts,
        range_assignor._rack_placement,
        range_assignor._placement_of,
        range_assignor._no_racks,
        scoring._hall_sets,
        java_order._java_string_hash,
    ):
        cached.cache_clear()


def throughput(
    traces: list[Trace], name: str, repeat: int, shared: list[Any] | None = None
) -> tuple[int, float, float]:
    """(generations, CPU seconds, wall seconds) for ``name`` alone over ``traces``, as the job
    replays them (assign, score, cost, summarise); the run with the least CPU time of
    ``repeat``. With ``shared`` (:func:`~assignors.traces.replay.prepare` of each trace, made
    beforehand), what one more assignor costs in a job that replays several: the generations'
    shared parts are not counted."""
    from assignors.traces.cost import CostModel, assignor_protocol, with_costs
    from assignors.traces.job import TraceResult, replay_trace
    from assignors.traces.scoring import summarize

    assignor = registry.get(name)
    model = CostModel()
    best: tuple[int, float, float] | None = None
    for _ in range(repeat):
        clear_process_caches()
        generations = 0
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        for position, trace in enumerate(traces):
            if shared is None:
                outcome = replay_trace(trace, [name], timings=False)
                if not isinstance(outcome, TraceResult):
                    raise RuntimeError(outcome.reason)
                generations += len(outcome.scores)
                continue
            protocol = assignor_protocol(assignor)
            rows = with_costs(
                replay_with(trace, assignor, timings=False, prepared=shared[position]),
                protocol,
                model,
            )
            summarize(rows, {(trace.trace_id, name): protocol})
            generations += len(rows)
        cpu = time.process_time() - cpu_started
        wall = time.perf_counter() - wall_started
        if best is None or cpu < best[1]:
            best = (generations, cpu, wall)
    assert best is not None
    return best


def report_throughput(
    names: list[str], repeat: int, check: bool, default_job: int | None = None
) -> bool:
    """Print generations/s per assignor on the ``traces`` size, alone and as one more assignor
    of a job (shared parts made once per trace), charged its share of the shared parts in a
    job of ``names`` and, when that is another number, in a job of ``default_job`` assignors
    (what ``ktk replay`` runs by default); False when ``check`` and some assignor is below its
    floor, alone (:data:`THROUGHPUT_FLOORS`) or in a job (:data:`JOB_FLOORS`)."""
    from assignors.traces.replay import prepare, share_owned_parts

    traces = build_traces("traces")
    shape = SIZES["traces"]
    print(
        f"throughput: {len(traces)} mixed traces of {shape['members'][0]}-{shape['members'][1]} "
        f"members x {shape['partitions'][0]}-{shape['partitions'][1]} partitions, seed {SEED}, "
        f"best of {repeat} (CPU time of this process)"
    )
    preparing = float("inf")
    for _ in range(repeat):
        clear_process_caches()
        started = time.process_time()
        shared = [prepare(trace) for trace in traces]
        for prepared in shared:
            # what the array assignors share (in a job the first of them makes it)
            share_owned_parts(prepared)
        preparing = min(preparing, time.process_time() - started)
    jobs = [len(names)]
    if default_job is not None and default_job != len(names):
        jobs.append(default_job)
    print(
        f"shared parts of every generation (group, optimal balance, scoring shape, array "
        f"layout): {preparing:.3f} CPU s, made once per trace for all assignors; "
        + "; ".join(
            f"in a job of {size} assignors each is charged {preparing / size:.3f} s"
            for size in jobs
        )
    )
    header = (
        f"{'assignor':<24} {'gens':>5} {'CPU s':>7} {'gens/s CPU':>11} {'gens/s wall':>12} "
        f"{'in a job':>9} {'share of a job':>15}"
    )
    if len(jobs) > 1:
        header += f" {f'share of {default_job}':>11}"
    if check:
        header += f" {'floor':>7} {'job floor':>9}"
    print(header)
    print("-" * len(header))
    passed = True
    for name in names:
        generations, cpu, wall = throughput(traces, name, repeat)
        rate = generations / cpu if cpu > 0 else float("inf")
        _, shared_cpu, _ = throughput(traces, name, repeat, shared)
        line = (
            f"{name:<24} {generations:>5} {cpu:>7.3f} {rate:>11.0f} {generations / wall:>12.0f} "
            f"{generations / shared_cpu if shared_cpu > 0 else float('inf'):>9.0f} "
            f"{generations / (shared_cpu + preparing / len(names)):>15.0f}"
        )
        if len(jobs) > 1:
            line += f" {generations / (shared_cpu + preparing / jobs[1]):>11.0f}"
        if check:
            job_rate = generations / shared_cpu if shared_cpu > 0 else float("inf")
            failed = []
            for label, floor, measured, width in (
                ("alone", THROUGHPUT_FLOORS.get(name), rate, 7),
                ("in a job", JOB_FLOORS.get(name), job_rate, 9),
            ):
                line += f" {'-' if floor is None else f'{floor:.0f}':>{width}}"
                if floor is not None and measured < floor:
                    failed.append(label)
            passed &= not failed
            line += f" {'BELOW THE FLOOR ' + ', '.join(failed) if failed else 'ok'}"
        print(line, flush=True)
    return passed


def measure_job(size: str, names: list[str]) -> tuple[int, float]:
    """(generations replayed, seconds) for the Python engine end to end on ``size``'s traces:
    the job over a JSON Lines file, then the three result files' bytes."""
    import tempfile
    from pathlib import Path

    from assignors.traces.files import write_traces_jsonl
    from assignors.traces.job import replay_paths
    from assignors.traces.results import result_files

    with tempfile.TemporaryDirectory(prefix="ktk-bench-") as scratch:
        path = Path(scratch) / f"{size}.jsonl"
        write_traces_jsonl(generate_rows("mixed", seed=SEED, **SIZES[size]), path)
        started = time.perf_counter()
        run = replay_paths([path], names)
        result_files(run.scores, run.failures, run.summary)
        return len(run.scores), time.perf_counter() - started


def _importable(name: str) -> bool:
    try:
        registry.get(name)
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
