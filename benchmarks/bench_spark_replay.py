"""Trace replay: wall and CPU seconds of the in-process engine, Spark local[2] and a loopback
standalone cluster, on the same traces in one file and in 16 files.

    python benchmarks/bench_spark_replay.py                        # 2,000 traces, all engines
    python benchmarks/bench_spark_replay.py --traces 2000 10000    # docs/spark.md's table
    python benchmarks/bench_spark_replay.py --traces 50 200 1000 --engines python spark \\
        --files 1                                                   # the auto-engine crossover

Every run is a separate process (``python -m ktk replay`` or ``spark-submit``), so its CPU
seconds are the application's: the driver, its JVM and the Python workers, each process
counted once (see ``timed``). Wall time includes everything a user waits for (JVM start,
session, writing results). The cluster (a master and two one-core workers on 127.0.0.1,
from pyspark's spark-class) is started once before its runs and stopped by pid. Its
executors are the workers' children, not the driver's: they count as the application's,
and the daemons' own CPU seconds over the run are printed apart, then added, since a real
cluster's daemons run whether or not a job does.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from assignors.traces import files as trace_files
from assignors.traces import generate

SEED = 20261122
REPO = Path(__file__).resolve().parent.parent


def write_traces(directory: Path, groups: int, files: int) -> int:
    """``groups`` mixed traces spread over ``files`` files; returns the number of generations."""
    rows = list(generate.generate_rows("mixed", groups, SEED))
    per_file = -(-len(rows) // files)
    for index in range(files):
        chunk = rows[index * per_file : (index + 1) * per_file]
        if chunk:
            trace_files.write_traces_jsonl(chunk, directory / f"part-{index:03d}.jsonl")
    return len(rows)


PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True, slots=True)
class Process:
    """One /proc/PID/stat: parent, state, own CPU seconds (utime + stime, every thread of
    the process) and its reaped children's (cutime + cstime)."""

    parent: int
    state: str
    own: float
    reaped: float


def _process_table() -> dict[int, Process]:
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, Process] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        own = (int(fields[11]) + int(fields[12])) / tick
        reaped = (int(fields[13]) + int(fields[14])) / tick
        table[int(entry)] = Process(int(fields[1]), fields[0], own, reaped)
    return table


def _descendants(table: dict[int, Process], roots: Iterable[int]) -> set[int]:
    """``roots`` and everything below them."""
    children: dict[int, list[int]] = {}
    for pid, process in table.items():
        children.setdefault(process.parent, []).append(pid)
    found: set[int] = set()
    pending = list(roots)
    while pending:
        pid = pending.pop()
        if pid in table and pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, []))
    return found


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and every live descendant, each with the children
    it has waited for, from /proc: the CPU of a process tree whose processes are all still
    running (a Spark session's driver, its JVM and reused Python workers)."""
    table = _process_table()
    return sum(table[pid].own + table[pid].reaped for pid in _descendants(table, [root]))


def become_subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux PR_SET_CHILD_SUBREAPER):
    a JVM or Python worker whose parent exits without waiting for it is re-parented here,
    not to init, so :func:`timed` still reaps it and reads its exact CPU seconds."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


@dataclass(frozen=True, slots=True)
class Figures:
    """One run: wall seconds, the application's CPU seconds and, on the loopback cluster,
    the standalone daemons' own CPU seconds over the same run (None elsewhere)."""

    wall: float
    cpu: float
    daemons: float | None = None


SIGCHLD_MASK = 1 << (17 - 1)  # SIGCHLD's bit in /proc/PID/status's SigIgn


def _ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD: the kernel then reaps its children itself and drops
    their CPU seconds instead of adding them to its reaped-children time (pyspark's daemon,
    which forks the Python workers, does so)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & SIGCHLD_MASK)
    except OSError:
        pass
    return False


class _Ledger:
    """CPU seconds of one run's processes that no parent's reaped-children time holds.

    - Orphans: processes whose parent exited without waiting for them are re-parented to
      this process (:func:`become_subreaper`) and reaped here; wait4's rusage holds their own
      and their reaped descendants' CPU seconds.
    - Dropped: children of a process that ignores SIGCHLD (pyspark's Python workers) are
      reaped by the kernel, which keeps no account of them; their own and reaped CPU seconds
      are sampled (:meth:`observe`, every 0.2 s), so a worker that exits busy loses at most
      its last 0.2 s.

    Every other process is counted by the kernel in its parent's reaped-children time, so
    each process is counted exactly once."""

    def __init__(self, managed: set[int]) -> None:
        self.managed = managed  # children waited for elsewhere (Popen objects)
        self.reaped = 0.0
        self.dropped: dict[int, float] = {}
        self.ignoring: dict[int, bool] = {}

    def orphans(self, table: dict[int, Process]) -> list[int]:
        me = os.getpid()
        return [
            pid
            for pid, process in table.items()
            if process.parent == me and pid not in self.managed
        ]

    def observe(self, table: dict[int, Process], roots: Iterable[int]) -> None:
        """Sample the processes under ``roots`` and the orphans whose parent ignores
        SIGCHLD, then reap the orphans that have exited."""
        orphans = self.orphans(table)
        for pid in _descendants(table, [*roots, *orphans]):
            parent = table[pid].parent
            if parent not in self.ignoring:
                self.ignoring[parent] = _ignores_sigchld(parent)
            if self.ignoring[parent]:
                self.dropped[pid] = table[pid].own + table[pid].reaped
        for pid in orphans:
            try:
                reaped, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if reaped:
                self.reaped += usage.ru_utime + usage.ru_stime
                self.dropped.pop(pid, None)  # re-parented here before it exited: reaped

    def cpu(self) -> float:
        return self.reaped + sum(self.dropped.values())


def timed(
    command: list[str],
    env: dict[str, str],
    *,
    master: int | None = None,
    workers: Sequence[int] = (),
    managed: Iterable[int] = (),
) -> Figures:
    """Wall and CPU seconds of a run, every process it started counted once (this process
    must be a subreaper, :func:`become_subreaper`).

    The application's CPU seconds are the submitted process's own and its reaped
    descendants' (wait4's rusage when it exits) plus what :class:`_Ledger` finds. On the
    loopback cluster (``master`` and ``workers`` given) they also hold the executors and
    their Python workers: children of the workers, which wait for them, so they are the
    workers' reaped-children CPU seconds over the run (and the Python workers, sampled). The
    daemons' CPU seconds are the master's and the workers' own (utime + stime) over the run,
    which leaves out what they reaped, the executors. ``managed``: this process's other
    children, waited for elsewhere (the cluster's daemons)."""
    daemons = ([master] if master is not None else []) + list(workers)
    table = _process_table()
    own_before = sum(table[pid].own for pid in daemons)
    reaped_before = sum(table[pid].reaped for pid in workers)
    # a worker's children from before the run (none, or the launcher left by spark-class)
    idle = {pid for pid, process in table.items() if process.parent in workers}

    def executors(table: dict[int, Process]) -> list[int]:
        return [pid for pid, p in table.items() if p.parent in workers and pid not in idle]

    with tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        ledger = _Ledger({*managed, process.pid})
        while True:
            table = _process_table()
            ledger.observe(table, [process.pid, *executors(table)])
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(0.2)
        wall = time.perf_counter() - start
        if process.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{stderr.read()[-3000:]}")
    # the orphans still running, and the executors the workers have not reaped yet
    deadline = time.monotonic() + 60
    while True:
        table = _process_table()
        ledger.observe(table, executors(table))
        running = ledger.orphans(table) + executors(table)
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    application = usage.ru_utime + usage.ru_stime + ledger.cpu()
    if running:
        # not reaped in time: their CPU seconds so far, as /proc reads them
        print(f"  {len(running)} processes still running after the run", file=sys.stderr)
        for pid in _descendants(table, running):
            if pid not in ledger.dropped:
                application += table[pid].own + (table[pid].reaped if pid in running else 0.0)
    if not daemons:
        return Figures(wall, application)
    application += sum(table[pid].reaped for pid in workers) - reaped_before
    own = sum(table[pid].own for pid in daemons) - own_before
    return Figures(wall, application, own)


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """A master and two one-core workers on 127.0.0.1 (stopped by pid)."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        spark_class = str(_spark_home() / "bin" / "spark-class")
        self.port, self.webui = _port(), _port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes = [
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.webui),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ]
        self._wait(lambda text: '"status" : "ALIVE"' in text or '"status":"ALIVE"' in text)
        for index in (1, 2):
            self.processes.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        self.url,
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(_port()),
                        "--work-dir",
                        str(base / f"work{index}"),
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        self._wait(lambda text: text.count('"ALIVE"') >= 3 or text.count('"state" : "ALIVE"') >= 2)

    def _wait(self, ready) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{self.webui}/json"
                with urllib.request.urlopen(url, timeout=5) as response:
                    if ready(response.read().decode()):
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit("the loopback cluster did not start in 120 s")

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=30)


def table_lines(figures: dict[str, Figures]) -> list[str]:
    """One line per engine: wall and CPU seconds and, against the in-process engine
    (``python``) when it ran, their ratios; for the cluster a second line adds its daemons'
    own CPU seconds to the application's.

    >>> for line in table_lines({"python": Figures(100.0, 60.0),
    ...                          "cluster": Figures(80.0, 63.0, 6.0)}):
    ...     print(line)
      python   wall   100.0 s  CPU    60.0 s
      cluster  wall    80.0 s  CPU    63.0 s  wall 0.80x, CPU 1.05x in-process
               + daemons' own   6.0 s: CPU    69.0 s  CPU 1.15x in-process
    """
    reference = figures.get("python")
    lines = []
    for engine, run in figures.items():
        ratio = ""
        if reference and engine != "python":
            ratio = (
                f"  wall {run.wall / reference.wall:.2f}x, "
                f"CPU {run.cpu / reference.cpu:.2f}x in-process"
            )
        lines.append(f"  {engine:8} wall {run.wall:7.1f} s  CPU {run.cpu:7.1f} s{ratio}")
        if run.daemons is not None:
            total = run.cpu + run.daemons
            ratio = f"  CPU {total / reference.cpu:.2f}x in-process" if reference else ""
            lines.append(f"  {'':8} + daemons' own {run.daemons:5.1f} s: CPU {total:7.1f} s{ratio}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, nargs="+", default=[2000])
    parser.add_argument("--files", type=int, nargs="+", default=[1, 16])
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["python", "spark", "cluster"],
        choices=["python", "spark", "auto", "cluster"],
    )
    parser.add_argument("--assignors", default="range,roundrobin,sticky,cooperative-sticky")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the local[2] and cluster runs (e.g. an event log to profile)",
    )
    args = parser.parse_args()
    become_subreaper()
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONPATH=str(REPO),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    with tempfile.TemporaryDirectory(prefix="ktk-bench-") as scratch:
        base = Path(scratch)
        # the executors get ktk from the job (the zip it ships), not from PYTHONPATH
        daemon_env = {key: value for key, value in env.items() if key != "PYTHONPATH"}
        cluster = Cluster(base, daemon_env) if "cluster" in args.engines else None
        try:
            for traces in args.traces:
                for files in args.files:
                    source = base / f"traces-{traces}-{files}"
                    generations = write_traces(source, traces, files)
                    size = sum(p.stat().st_size for p in source.iterdir())
                    figures: dict[str, Figures] = {}
                    for engine in args.engines:
                        out = base / f"out-{engine}"
                        shutil.rmtree(out, ignore_errors=True)
                        if engine == "cluster":
                            assert cluster is not None
                            command = [
                                str(_spark_home() / "bin" / "spark-submit"),
                                "--master",
                                cluster.url,
                                # docs/spark.md's standalone recipe: spark-submit starts the
                                # driver's JVM before ktk can set its options
                                "--driver-java-options=-XX:TieredStopAtLevel=1",
                                *[f"--conf={pair}" for pair in args.conf],
                                str(REPO / "spark_jobs" / "replay_traces.py"),
                                str(source),
                                "--out",
                                str(out),
                                "--assignors",
                                args.assignors,
                            ]
                        else:
                            spark = ["--master", "local[2]"] if engine == "spark" else []
                            if engine == "spark":
                                spark += [f"--conf={pair}" for pair in args.conf]
                            command = [
                                sys.executable,
                                "-m",
                                "ktk",
                                "replay",
                                str(source),
                                "--out",
                                str(out),
                                "--assignors",
                                args.assignors,
                                "--engine",
                                engine,
                                *spark,
                            ]
                        if cluster is None:
                            figures[engine] = timed(command, env)
                        elif engine == "cluster":
                            master, *workers = cluster.pids()
                            figures[engine] = timed(
                                command,
                                env,
                                master=master,
                                workers=workers,
                                managed=cluster.pids(),
                            )
                        else:
                            figures[engine] = timed(command, env, managed=cluster.pids())
                    print(
                        f"{traces} traces ({generations} generations, {size / 1e6:.2f} MB) "
                        f"in {files} file(s):"
                    )
                    for line in table_lines(figures):
                        print(line, flush=True)
        finally:
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    main()
