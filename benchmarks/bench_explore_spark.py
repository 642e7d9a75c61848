"""Fault-schedule exploration on Spark local[2] against the one-process explorer, in one run.

For each configuration it explores the same seed's ``--schedules`` schedules twice: with
``replication.explore.explore`` in this process, and with ``spark_jobs/explore_schedules.py``
on a local[2] session started once before the runs. Both give the same report (checked:
counts, first schedules and every shrunk scenario). It prints schedules per second (wall) of
each, their ratio, and CPU seconds of each: the explorer's is this process's; Spark's is the
process tree's (this driver, its JVM and the Python workers, from /proc) over the run. Then,
from a tiny run (the job's fixed cost) and the session's start-up, the schedule count from which
``--engine spark`` is expected to finish first, which ``ktk replicate explore --engine auto``
uses.

    python benchmarks/bench_explore_spark.py              # 20,000 schedules per configuration
    python benchmarks/bench_explore_spark.py --quick      # 4,000
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench_spark_replay import tree_cpu_seconds  # this folder: run as a script

from replication.explore import explore, explore_settings
from replication.producer import ProducerSettings
from spark_jobs.explore_schedules import run
from spark_jobs.session import get_session

CONFIGURATIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("current", "RF 3, min ISR 2, 1 lossy crash", {"min_insync_replicas": 2}),
    (
        "current",
        "RF 3, unclean on, link cuts",
        {"unclean_leader_election": True, "link_cuts": True},
    ),
    ("kip-101", "RF 2, min ISR 1", {"brokers": (1, 2)}),
    ("pre-0.11", "RF 2, min ISR 1", {"brokers": (1, 2)}),
    (
        "current",
        "producer in flight 5, link cuts",
        {
            "min_insync_replicas": 2,
            "max_lossy_crashes": 0,
            "link_cuts": True,
            "producer": ProducerSettings(max_in_flight=5),
        },
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--quick", action="store_true", help="4,000 schedules per configuration")
    options = parser.parse_args()
    schedules = 4_000 if options.quick else options.schedules

    started = time.perf_counter()
    spark = get_session(master=options.master, app_name="ktk-bench-explore")
    startup = time.perf_counter() - started
    cores = spark.sparkContext.defaultParallelism
    print(
        f"{schedules:,} schedules per configuration, seed {options.seed}; Spark {options.master} "
        f"({cores} cores; session start-up {startup:.1f} s wall, not in the rates below)"
    )
    header = (
        f"{'mode':<9} {'configuration':<32} {'python/s':>9} {'spark/s':>8} {'ratio':>6} "
        f"{'python CPU':>10} {'spark CPU':>9} {'in tasks':>8} {'tasks':>5} {'found':>6}"
    )
    print(header)
    print("-" * len(header))
    pid = os.getpid()
    python_rates: list[float] = []
    cpu_per_schedule: list[float] = []
    spark_rates: list[float] = []
    for mode, label, arguments in CONFIGURATIONS:
        options_for = {**arguments, "schedules": schedules, "seed": options.seed}
        cpu_before = time.process_time()
        in_process = explore(mode, **options_for, timer=time.perf_counter)
        python_cpu = time.process_time() - cpu_before
        tree_before = tree_cpu_seconds(pid)
        result = run(explore_settings(mode, **options_for), spark=spark, timer=time.perf_counter)
        spark_cpu = tree_cpu_seconds(pid) - tree_before
        if json.dumps(result.report.to_json()) != json.dumps(in_process.to_json()):
            raise SystemExit(f"{mode} {label}: the Spark job's report differs from explore()'s")
        python_rate = in_process.schedules_per_second or 0.0
        spark_rate = result.report.schedules_per_second or 0.0
        python_rates.append(python_rate)
        cpu_per_schedule.append(python_cpu / schedules)
        spark_rates.append(spark_rate)
        print(
            f"{mode:<9} {label:<32} {python_rate:>9,.0f} {spark_rate:>8,.0f} "
            f"{spark_rate / python_rate:>5.2f}x {python_cpu:>9.1f}s {spark_cpu:>8.1f}s "
            f"{result.task_cpu_seconds:>7.1f}s {len(result.ranges):>5} "
            f"{in_process.violating_schedules + sum(in_process.anomaly_counts.values()):>6}"
        )

    # the job's fixed cost: a run so small its schedules take no time
    mode, _, arguments = CONFIGURATIONS[0]
    tiny = explore_settings(mode, **arguments, schedules=cores, seed=options.seed)
    started = time.perf_counter()
    run(tiny, spark=spark)
    fixed = time.perf_counter() - started
    python_rate = sum(python_rates) / len(python_rates)
    spark_rate = sum(spark_rates) / len(spark_rates)
    saved_per_schedule = 1 / python_rate - 1 / spark_rate
    print(
        f"fixed cost of a Spark run: {fixed:.2f} s wall (job), {startup:.1f} s (session start-up)"
    )
    if saved_per_schedule > 0:
        crossover = (startup + fixed) / saved_per_schedule
        print(
            f"mean rates {python_rate:,.0f}/s in process, {spark_rate:,.0f}/s on Spark: Spark "
            f"finishes first from about {crossover:,.0f} schedules (start-up included)"
        )
    else:
        print("Spark was not faster per schedule in this run (a busy machine): no crossover")
    # on free cores: the explorer's CPU per schedule, divided over the cores
    per_schedule = sum(cpu_per_schedule) / len(cpu_per_schedule)
    ideal = (startup + fixed) / (per_schedule - per_schedule / cores)
    print(
        f"explorer CPU {per_schedule * 1000:.2f} ms per schedule: on {cores} free cores Spark "
        f"would finish first from about {ideal:,.0f} schedules (start-up included)"
    )
    spark.stop()


if __name__ == "__main__":
    main()
