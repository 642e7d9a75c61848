"""Fault-schedule exploration throughput: schedules per second per protocol mode.

For each row of the verdict table's configurations it runs ``--schedules`` seeded schedules
(default 10,000, about 24 random steps plus a settle phase each) through
``replication.explore.explore`` and prints the rate, how many schedules violated something,
and the first schedule of each class found. The peer in the same run is the straightforward
way to do the same search: generate each schedule, replay it through ``run_scenario`` (full
timeline and state per step) and classify the result, over ``--peer-schedules`` of the same
schedules; the explorer checks invariants while it generates and replays only suspicious
schedules. Both give the same classes on the shared prefix (checked).

    python benchmarks/bench_explore.py             # 10,000 schedules per configuration
    python benchmarks/bench_explore.py --quick     # 1,000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from replication.explore import build_scenario, classify, explore, generate_schedule
from replication.producer import ProducerSettings
from replication.scenario import load_scenario
from replication.sim import run_scenario

CONFIGURATIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("pre-0.11", "RF 2, min ISR 1", {"brokers": (1, 2)}),
    ("kip-101", "RF 2, min ISR 1", {"brokers": (1, 2)}),
    ("kip-279", "RF 2, min ISR 1", {"brokers": (1, 2)}),
    ("current", "RF 2, min ISR 1", {"brokers": (1, 2)}),
    ("current", "RF 3, unclean on", {"brokers": (1, 2, 3), "unclean_leader_election": True}),
    (
        "current",
        "RF 3, min ISR 2, no lossy crash",
        {"brokers": (1, 2, 3), "min_insync_replicas": 2, "max_lossy_crashes": 0},
    ),
    (
        "current",
        "RF 3, min ISR 2, cuts, idempotent",
        {
            "brokers": (1, 2, 3),
            "min_insync_replicas": 2,
            "max_lossy_crashes": 0,
            "link_cuts": True,
            "producer": ProducerSettings(idempotence=True),
        },
    ),
    (
        "current",
        "RF 3, min ISR 2, cuts, 5 in flight",
        {
            "brokers": (1, 2, 3),
            "min_insync_replicas": 2,
            "max_lossy_crashes": 0,
            "link_cuts": True,
            "producer": ProducerSettings(max_in_flight=5),
        },
    ),
]


def replay_everything(
    mode: str, arguments: dict[str, Any], schedules: int, seed: int
) -> tuple[float, dict[str, int]]:
    """The peer: every schedule replayed through run_scenario and classified."""
    brokers = list(arguments.get("brokers", (1, 2, 3)))
    document = {
        "brokers": brokers,
        "replicas": brokers,
        "mode": mode,
        **{
            key: value
            for key, value in arguments.items()
            if key in ("min_insync_replicas", "unclean_leader_election")
        },
    }
    config = load_scenario({"name": "peer", "config": document, "steps": []}).config
    min_isr = arguments.get("min_insync_replicas", 1)
    lossy = arguments.get("max_lossy_crashes", max(1, min_isr - 1))
    counts: dict[str, int] = {}
    started = time.perf_counter()
    for index in range(schedules):
        steps = generate_schedule(
            config,
            seed,
            index,
            max_lossy_crashes=lossy,
            link_cuts=arguments.get("link_cuts", False),
            producer=arguments.get("producer"),
        )
        found = classify(run_scenario(build_scenario(f"schedule-{index}", config, steps)))
        if found is not None:
            counts[found] = counts.get(found, 0) + 1
    return time.perf_counter() - started, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--peer-schedules", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1,000 schedules, peer 300")
    options = parser.parse_args()
    schedules = 1_000 if options.quick else options.schedules
    peer_schedules = min(300 if options.quick else options.peer_schedules, schedules)

    header = (
        f"{'mode':<9} {'configuration':<32} {'schedules/s':>11} {'peer/s':>8} {'ratio':>6} "
        f"{'violating':>9}  first schedule per class"
    )
    print(
        f"{schedules:,} schedules per configuration, seed {options.seed}; "
        f"peer: replay every schedule through run_scenario ({peer_schedules:,} schedules)"
    )
    print(header)
    print("-" * len(header))
    for mode, label, arguments in CONFIGURATIONS:
        report = explore(
            mode,
            **arguments,
            schedules=schedules,
            seed=options.seed,
            timer=time.perf_counter,
            shrink_per_class=0,
        )
        peer_seconds, peer_counts = replay_everything(mode, arguments, peer_schedules, options.seed)
        prefix = explore(
            mode, **arguments, schedules=peer_schedules, seed=options.seed, shrink_per_class=0
        )
        if prefix.class_counts != peer_counts:
            raise SystemExit(f"{mode} {label}: explorer {prefix.class_counts} != {peer_counts}")
        rate = report.schedules_per_second or 0.0
        peer_rate = peer_schedules / peer_seconds
        firsts = ", ".join(
            f"{name} #{index}"
            for name, index in {**report.first_schedule, **report.first_anomaly}.items()
        )
        print(
            f"{mode:<9} {label:<32} {rate:>11,.0f} {peer_rate:>8,.0f} {rate / peer_rate:>5.1f}x "
            f"{report.violating_schedules:>9}  {firsts or 'none'}"
        )


if __name__ == "__main__":
    main()
