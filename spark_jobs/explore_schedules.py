"""Explore random fault schedules on Spark: the seeds of one exploration spread over the cluster.

Data flow (docs/spark.md)::

    explore settings (mode, config, acks, seed, schedules...)      checked on the driver
      -> schedules 0..N cut into contiguous ranges, 3 per core (at most MAX_RANGE each)
      -> each task: replication.explore.scan_schedules(settings, start, end)   (pure Python)
         generates and runs its schedules and returns the violating ones by signature
      -> the scans collected to the driver, in range order
      -> replication.explore.finish_exploration: counts, first schedules, and the first
         schedule of each finding class shrunk (on the driver, in schedule order)
      -> the shrunk scenario files written once, through ktkbase.outputs (the layout of
         ``ktk replicate explore --out``)

The job only distributes. Generating, running, classifying and shrinking are the domain's
(:mod:`replication.explore`), and ``explore()`` is the same two functions over one range, so a
seed gives the same report, the same findings and the same scenario files byte for byte here
as with ``ktk replicate explore --engine python``. Schedule ``i`` of a seed is generated from
the seed and ``i`` alone, whichever task runs it.

Runnable as ``spark-submit spark_jobs/explore_schedules.py --mode kip-101 --schedules 100000
[--partitions 3] --out DIR`` or through ``ktk replicate explore ... --engine spark``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ktkbase.errors import KtkError
from ktkbase.outputs import output_directory, plan_output_directory, staged_directory
from replication.explore import (
    ExploreReport,
    ExploreSettings,
    ScheduleScan,
    explore_settings,
    finish_exploration,
    scan_schedules,
    write_scenarios,
)
from replication.modes import ALL_MODE_NAMES
from replication.producer import ProducerSettings
from replication.scenario import scenario_to_text
from spark_jobs import files
from spark_jobs.session import stage_progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# ranges per core: enough that the last task to finish is short (schedules vary in cost: a
# suspicious one runs twice), few enough that each task's start-up stays small next to its work
RANGES_PER_CORE = 3
# at most this many schedules per task (about 10-20 s of one core), so a lost task is cheap to
# run again and progress moves on long explorations
MAX_RANGE = 20_000
DEFAULT_COMMAND = "spark_jobs/explore_schedules.py"
OUTPUT_COMMAND = "replicate explore"


def schedule_ranges(schedules: int, tasks: int) -> list[tuple[int, int]]:
    """Schedules 0 to ``schedules`` (exclusive) cut into ``tasks`` contiguous ranges of sizes
    differing by at most one (fewer when there are fewer schedules).

    >>> schedule_ranges(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    >>> schedule_ranges(2, 4), schedule_ranges(0, 4)
    ([(0, 1), (1, 2)], [])
    """
    count = max(1, min(tasks, schedules)) if schedules else 0
    ranges, start = [], 0
    for task in range(count):
        end = start + schedules // count + (1 if task < schedules % count else 0)
        ranges.append((start, end))
        start = end
    return ranges


def range_count(spark: SparkSession, schedules: int) -> int:
    """How many tasks: :data:`RANGES_PER_CORE` per core of the cluster
    (``defaultParallelism``), more when ranges would exceed :data:`MAX_RANGE` schedules."""
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    return max(RANGES_PER_CORE * cores, -(-schedules // MAX_RANGE))


class TaskScan(NamedTuple):
    """One task's scan and the CPU seconds its Python worker spent on it."""

    scan: ScheduleScan
    cpu_seconds: float


def scan_range(settings: ExploreSettings, bounds: tuple[int, int]) -> TaskScan:
    """Run on an executor: the domain scan of schedules ``bounds[0]`` to ``bounds[1]``."""
    started = time.process_time()
    scan = scan_schedules(settings, bounds[0], bounds[1])
    return TaskScan(scan, time.process_time() - started)


class RunResult(NamedTuple):
    """The report (the one-process explorer's for the same settings) and how the work was
    spread: the ranges, and the CPU seconds of the tasks and of the driver's shrinking."""

    report: ExploreReport
    ranges: list[tuple[int, int]]
    task_cpu_seconds: float
    driver_cpu_seconds: float


_PROGRESS_GROUP = "ktk-explore"


@contextlib.contextmanager
def _watched(
    spark: SparkSession,
    ranges: Sequence[tuple[int, int]],
    progress: Callable[[int, int], None] | None,
) -> Iterator[None]:
    """Report schedules run to ``progress`` while the scan runs, from the tasks Spark's status
    tracker counts as finished (each task one range)."""
    if progress is None or not ranges:
        yield
        return
    with stage_progress(
        spark,
        group=_PROGRESS_GROUP,
        description="exploring fault schedules",
        tasks=len(ranges),
        total=ranges[-1][1],
        progress=progress,
    ):
        yield


def _local_output(
    out_dir: str | None, command: str, version: str, force: bool
) -> AbstractContextManager[Any]:
    """The checked staging directory for a local ``out_dir``, entered before any JVM starts
    (a refused directory fails first); None for no ``out_dir`` or a Hadoop URI."""
    if out_dir is not None and files.is_local(out_dir):
        return output_directory(out_dir, command=command, version=version, force=force)
    return nullcontext(None)


def _write_remote(
    spark: SparkSession,
    report: ExploreReport,
    out_dir: str,
    command: str,
    version: str,
    force: bool,
) -> None:
    """The shrunk scenario files into a Hadoop URI, staged and moved into place by the rules
    of :mod:`ktkbase.outputs`; the same bytes :func:`replication.explore.write_scenarios`
    writes locally."""
    fs = files.HadoopFileSystem(spark)
    plan = plan_output_directory(out_dir, command=command, version=version, force=force, fs=fs)
    with staged_directory(plan) as staging:
        for finding in report.findings:
            data = scenario_to_text(finding.scenario).encode("utf-8")
            fs.write_bytes(fs.join(staging, finding.file_name), data)


def run(
    settings: ExploreSettings,
    *,
    out_dir: str | None = None,
    force: bool = False,
    master: str | None = None,
    conf: Sequence[str] | dict[str, str] = (),
    spark: SparkSession | None = None,
    command: str = OUTPUT_COMMAND,
    version: str = "unknown",
    timer: Callable[[], float] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Explore ``settings`` with its schedules spread over Spark tasks; write each finding's
    minimal scenario into ``out_dir`` (when given) as ``ktk replicate explore --out`` does.

    ``out_dir`` follows :mod:`ktkbase.outputs` (a manifest naming ``command`` and
    ``version``; a directory ktk did not create is refused unless ``force``); a local one is
    checked before any JVM starts, a Hadoop URI once Spark runs. ``timer`` (e.g.
    ``time.perf_counter``) times the run for the report's schedules per second;
    ``progress(done, total)`` gets the schedules of the finished tasks.
    """
    with _local_output(out_dir, command, version, force) as local_staging:
        if spark is None:
            from spark_jobs.session import get_session, parse_conf

            conf_map = dict(conf) if isinstance(conf, dict) else parse_conf(conf)
            spark = get_session(master=master, conf=conf_map, app_name="ktk-explore")
        from spark_jobs.session import prepare_executors

        started = timer() if timer is not None else None
        prepare_executors(spark)
        ranges = schedule_ranges(settings.schedules, range_count(spark, settings.schedules))
        log.info("%d schedules in %d tasks", settings.schedules, len(ranges))
        tasks: list[TaskScan] = []
        if ranges:
            job = spark.sparkContext.parallelize(ranges, len(ranges))
            with _watched(spark, ranges, progress):
                tasks = job.map(lambda bounds: scan_range(settings, bounds)).collect()
        driver_started = time.process_time()
        report = finish_exploration(settings, [task.scan for task in tasks])
        driver_cpu = time.process_time() - driver_started
        if timer is not None and started is not None:
            report = replace(report, elapsed_seconds=timer() - started)
        if local_staging is not None:
            write_scenarios(report, local_staging)
        elif out_dir is not None:
            _write_remote(spark, report, out_dir, command, version, force)
    return RunResult(report, ranges, sum(task.cpu_seconds for task in tasks), driver_cpu)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/explore_schedules.py --mode M --schedules N [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="explore_schedules.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--mode", default="current", choices=ALL_MODE_NAMES)
    parser.add_argument("--min-isr", type=int, default=2)
    parser.add_argument("--acks", default="all", choices=("0", "1", "all", "-1"))
    parser.add_argument("--unclean", action="store_true")
    parser.add_argument("--elr", action="store_true")
    parser.add_argument("--link-cuts", action="store_true")
    parser.add_argument("--disk-faults", action="store_true")
    parser.add_argument("--producer", action="store_true", help="send through Kafka's producer")
    parser.add_argument("--idempotence", action="store_true", help="implies --producer")
    parser.add_argument("--max-in-flight", type=int, default=None, help="implies --producer")
    parser.add_argument("--retries", type=int, default=None, help="implies --producer")
    parser.add_argument("--delivery-timeout-ms", type=int, default=None, help="implies --producer")
    parser.add_argument(
        "--partitions", type=int, default=1, help="partitions on the same brokers (1 to 64)"
    )
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="directory (any Hadoop URI) for the scenarios")
    parser.add_argument(
        "--force", action="store_true", help="write into a directory ktk did not create"
    )
    parser.add_argument("--master", default=None)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    acks: str | int = "all" if args.acks in ("all", "-1") else int(args.acks)
    try:
        given = {
            name: value
            for name, value in (
                ("idempotence", args.idempotence or None),
                ("max_in_flight", args.max_in_flight),
                ("retries", args.retries),
                ("delivery_timeout_ms", args.delivery_timeout_ms),
            )
            if value is not None
        }
        producer = None
        if args.producer or given:
            producer = ProducerSettings(acks=acks, **given)
        settings = explore_settings(
            args.mode,
            min_insync_replicas=args.min_isr,
            acks=acks,
            unclean_leader_election=args.unclean,
            eligible_leader_replicas=args.elr,
            link_cuts=args.link_cuts,
            disk_faults=args.disk_faults,
            producer=producer,
            partitions=args.partitions,
            schedules=args.schedules,
            seed=args.seed,
        )
        result = run(
            settings,
            out_dir=args.out,
            force=args.force,
            master=args.master,
            conf=args.conf,
            command=DEFAULT_COMMAND,
            timer=time.perf_counter,
        )
    except KtkError as failure:  # bad settings, refused output, executors that cannot run
        print(f"error: {failure}", file=sys.stderr)
        return 2
    print(result.report.summary())
    return 1 if result.report.violating_schedules else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
