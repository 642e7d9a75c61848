"""Trace replay: wall and CPU seconds of the in-process engine, Spark local[2] and a loopback
standalone cluster, on the same traces in one file and in 16 files.

    python benchmarks/bench_spark_replay.py                        # 2,000 traces, all engines
    python benchmarks/bench_spark_replay.py --traces 2000 10000    # docs/spark.md's table
    python benchmarks/bench_spark_replay.py --traces 50 200 1000 --engines python spark \\
        --files 1                                                   # the auto-engine crossover

Every run is a separate process (``python -m ktk replay`` or ``spark-submit``), so its CPU
seconds are the process tree's: the driver, its JVM and the Python workers (see ``timed``).
Wall time includes everything a user waits for (JVM start, session, writing results).
The cluster (a master and two one-core workers on 127.0.0.1, from pyspark's spark-class) is
started once before its runs and stopped by pid; its executors are not descendants of the
submitted driver, so their CPU is read from the workers' process trees (``timed``).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
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


def _process_table() -> tuple[dict[int, list[int]], dict[int, tuple[float, float]]]:
    """Children of every process, and each one's (own, reaped children's) CPU seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[float, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        own = (int(fields[11]) + int(fields[12])) / tick
        reaped = (int(fields[13]) + int(fields[14])) / tick
        stats[int(entry)] = (own, reaped)
    return children, stats


def _tree_cpu(roots: list[int], seen: dict[int, float], skip_roots: bool = False) -> None:
    """Record the CPU seconds (user + system) of every descendant of ``roots`` (and the roots
    themselves unless ``skip_roots``), from /proc."""
    children, stats = _process_table()
    pending = [child for root in roots for child in children.get(root, [])]
    if not skip_roots:
        pending.extend(roots)
    while pending:
        pid = pending.pop()
        if pid in stats:
            seen[pid] = max(seen.get(pid, 0.0), stats[pid][0])
        pending.extend(children.get(pid, []))


def _daemon_cpu(pids: list[int]) -> float:
    """Own plus reaped children's CPU seconds of long-running ``pids`` (the cluster's)."""
    _, stats = _process_table()
    return sum(sum(stats.get(pid, (0.0, 0.0))) for pid in pids)


def timed(
    command: list[str], env: dict[str, str], cluster: Sequence[int] = ()
) -> tuple[float, float]:
    """Wall and CPU seconds of a run. CPU is the larger of two counts of the whole process
    tree: getrusage(RUSAGE_CHILDREN) (exact, but only for processes their parents waited for;
    a JVM or Python worker killed at exit is missed) and the sum over every descendant's
    /proc CPU, sampled every 0.2 s (misses only what ran in the last 0.2 s of a process).
    ``cluster``: pids of a standalone cluster's daemons, whose executors (and their Python
    workers) run the job but descend from the daemons, not from the submitting process; their
    CPU counts too: the larger of their descendants' sampled CPU and the daemons' own plus
    reaped children's CPU over the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    daemons_before = _daemon_cpu(list(cluster))
    start = time.perf_counter()
    seen: dict[int, float] = {}
    executors: dict[int, float] = {}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    while process.poll() is None:
        _tree_cpu([process.pid], seen)
        if cluster:
            _tree_cpu(list(cluster), executors, skip_roots=True)
        time.sleep(0.2)
    stderr = process.stderr.read() if process.stderr else ""
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    waited = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu = max(waited, sum(seen.values()))
    if cluster:
        time.sleep(2)  # the workers reap the application's executors
        cpu += max(sum(executors.values()), _daemon_cpu(list(cluster)) - daemons_before)
    return wall, cpu


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
    args = parser.parse_args()
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
                    figures: dict[str, tuple[float, float]] = {}
                    for engine in args.engines:
                        out = base / f"out-{engine}"
                        shutil.rmtree(out, ignore_errors=True)
                        if engine == "cluster":
                            assert cluster is not None
                            command = [
                                str(_spark_home() / "bin" / "spark-submit"),
                                "--master",
                                cluster.url,
                                str(REPO / "spark_jobs" / "replay_traces.py"),
                                str(source),
                                "--out",
                                str(out),
                                "--assignors",
                                args.assignors,
                            ]
                        else:
                            master = ["--master", "local[2]"] if engine == "spark" else []
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
                                *master,
                            ]
                        daemons = cluster.pids() if engine == "cluster" and cluster else []
                        figures[engine] = timed(command, env, daemons)
                    print(
                        f"{traces} traces ({generations} generations, {size / 1e6:.2f} MB) "
                        f"in {files} file(s):"
                    )
                    reference = figures.get("python")
                    for engine, (wall, cpu) in figures.items():
                        ratio = ""
                        if reference and engine != "python":
                            ratio = (
                                f"  wall {wall / reference[0]:.2f}x, "
                                f"CPU {cpu / reference[1]:.2f}x in-process"
                            )
                        print(
                            f"  {engine:8} wall {wall:7.1f} s  CPU {cpu:7.1f} s{ratio}",
                            flush=True,
                        )
        finally:
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    main()
