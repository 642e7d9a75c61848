"""The replay job on a real (loopback) standalone cluster.

A master and two one-core workers are started from the pyspark installation's
``bin/spark-class`` on 127.0.0.1 and stopped by pid. No executor can import ktk, so results
equal to the in-process engine's prove the job ships its own code:

- the documented spark-submit recipe runs with a venv-pack archive (``spark.archives``) that
  holds the executors' dependencies but not ktk;
- the other tests' executors run a fresh virtual environment whose only addition is a ``.pth``
  line naming the dependency directory (``.pth`` files inside a directory added that way are
  not processed, so the editable install of ktk there stays invisible).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from assignors.traces import files as trace_files
from assignors.traces import generate, job
from assignors.traces.results import write_results

pytestmark = [pytest.mark.slow, pytest.mark.spark]

REPO = Path(__file__).resolve().parent.parent
ASSIGNORS = ["range", "roundrobin", "cooperative-sticky"]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _master_state(webui: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json", timeout=5) as response:
        return json.load(response)


def _alive_workers(webui: int) -> int:
    return sum(worker["state"] == "ALIVE" for worker in _master_state(webui)["workers"])


def _wait(condition, seconds: float, what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.5)
    tails = "\n".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in logs if log.exists())
    pytest.fail(f"{what} not ready after {seconds} s\n{tails}")


WITHOUT_KTK_PROBE = """
import numpy, pandas, pyarrow
try:
    import spark_jobs
except ModuleNotFoundError:
    print("no ktk")
"""


def _executor_python(directory: Path) -> Path:
    """A venv that imports pandas/pyarrow/numpy but not ktk."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=60
    )
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    Path(purelib, "ktk-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run(
        [str(python), "-c", WITHOUT_KTK_PROBE],
        cwd=directory,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "no ktk", probe.stdout + probe.stderr  # deps yes, ktk no
    return python


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    spark_class = _spark_home() / "bin" / "spark-class"
    if not spark_class.is_file():
        pytest.skip(f"this pyspark installation has no bin/spark-class ({spark_class})")
    base = tmp_path_factory.mktemp("cluster")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_CONF_DIR")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(_spark_home()))
    port, webui = _free_port(), _free_port()
    processes: list[subprocess.Popen] = []
    workers: dict[int, subprocess.Popen] = {}
    logs: list[Path] = []

    def start(name: str, *arguments: str) -> subprocess.Popen:
        log = base / f"{name}.log"
        logs.append(log)
        with log.open("ab") as sink:
            process = subprocess.Popen(
                [str(spark_class), *arguments],
                cwd=base,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        processes.append(process)
        return process

    def start_worker(index: int) -> None:
        workers[index] = start(
            f"worker{index}",
            "org.apache.spark.deploy.worker.Worker",
            f"spark://127.0.0.1:{port}",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(_free_port()),
            "--work-dir",
            str(base / f"work{index}"),
        )

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(webui),
        )
        _wait(lambda: _master_state(webui)["status"] == "ALIVE", 90, "master", logs)
        for index in (1, 2):
            start_worker(index)
        _wait(lambda: _alive_workers(webui) == 2, 90, "two workers", logs)
        yield {
            "url": f"spark://127.0.0.1:{port}",
            "webui": webui,
            "base": base,
            "env": env,
            "logs": logs,
            "workers": workers,
            "start_worker": start_worker,
        }
    finally:
        # by pid, each daemon this fixture started (a worker stops its executors)
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _requirements(name: str) -> list[str]:
    """The distributions ``name`` needs (no extras; markers other than extras are ignored)."""
    needed = []
    for requirement in importlib.metadata.distribution(name).requires or []:
        if "extra ==" in requirement:
            continue
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        if match:
            needed.append(match.group(0))
    return needed


def _packed_environment(directory: Path) -> Path:
    """docs/spark.md's packed environment: a venv holding ktk's executor dependencies (not
    ktk), packed with venv-pack. The dependencies are copied from this installation,
    file by file as their RECORDs list them (tests excluded), instead of downloaded: same
    files as ``pip install``, offline."""
    pytest.importorskip("venv_pack")
    from spark_jobs.session import EXECUTOR_DEPENDENCIES

    environment = directory / "ktk-env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=60
    )
    python = environment / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    )
    pending, copied = list(EXECUTOR_DEPENDENCIES.values()), set()
    while pending:
        name = pending.pop()
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement for another Python version
        key = distribution.metadata["Name"].lower()
        if key in copied:
            continue
        copied.add(key)
        for file in distribution.files or []:
            parts = Path(file).parts
            if parts[0] == ".." or "__pycache__" in parts or "tests" in parts[:2]:
                continue
            target = purelib / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(distribution.locate_file(file), target)
        pending.extend(_requirements(name))
    archive = directory / "ktk-env.tar.gz"
    subprocess.run(
        [sys.executable, "-m", "venv_pack", "--prefix", str(environment), "-o", str(archive)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    shutil.rmtree(environment)
    return archive


def test_spark_submit_recipe_with_a_packed_environment_runs_on_the_cluster(
    cluster, tmp_path
) -> None:
    """docs/spark.md's standalone recipe, as written there: the executors' Python is
    ``./environment/bin/python`` from ``spark.archives`` (a relative path that only exists in
    an executor's working directory once the archive is unpacked there), which has pandas,
    numpy and pyarrow but not ktk; ktk ships itself. The application appears on the master
    with the submitted --name and --conf values, and its result files equal the in-process
    engine's."""
    archive = _packed_environment(tmp_path)
    with tarfile.open(archive) as packed:
        names = packed.getnames()
    assert any(name.startswith("lib/") and "/pyarrow/" in name for name in names)
    assert not [name for name in names if re.search(r"(spark_jobs|ktk)[-/.]", name)], names[:5]

    traces = tmp_path / "traces"
    rows = list(generate.generate_rows("mixed", 40, seed=11, members=(2, 6), partitions=(4, 40)))
    trace_files.write_traces_jsonl(rows, traces / "all.jsonl")
    out = tmp_path / "out"
    events = tmp_path / "events"
    events.mkdir()
    submitted = subprocess.run(
        [
            str(_spark_home() / "bin" / "spark-submit"),
            "--master",
            cluster["url"],
            "--name",
            "ktk-cluster-check",
            # two keys ktk's DEFAULT_CONF sets (to 16 and false) when nobody else has
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            "spark.ui.enabled=true",
            "--conf",
            "spark.ui.port=0",
            "--conf",
            "spark.executor.memory=512m",
            # the event log records the configuration the application ran with
            "--conf",
            "spark.eventLog.enabled=true",
            "--conf",
            f"spark.eventLog.dir=file://{events}",
            "--conf",
            "spark.eventLog.compress=false",
            "--conf",
            f"spark.archives={archive}#environment",
            "--conf",
            "spark.pyspark.python=./environment/bin/python",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            str(REPO / "spark_jobs" / "replay_traces.py"),
            str(traces),
            "--out",
            str(out),
            "--no-timings",
            "--assignors",
            ",".join(ASSIGNORS),
        ],
        cwd=tmp_path,
        env=dict(cluster["env"], PYTHONPATH=str(REPO)),  # the driver's ktk: a checkout
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    assert "trace x assignor summaries written" in submitted.stdout

    apps = [*(state := _master_state(cluster["webui"]))["activeapps"], *state["completedapps"]]
    mine = [app for app in apps if app["name"] == "ktk-cluster-check"]
    assert len(mine) == 1, apps  # the submitted --name, not ktk's default
    assert mine[0]["memoryperslave"] == 512  # the submitted spark.executor.memory
    unpacked = list((cluster["base"]).glob(f"work*/{mine[0]['id']}/*/environment/bin/python"))
    assert unpacked, "no executor unpacked the environment"
    ran_with = _spark_properties(events, mine[0]["id"])
    assert ran_with["spark.master"] == cluster["url"]
    assert ran_with["spark.sql.shuffle.partitions"] == "4"
    assert ran_with["spark.ui.enabled"] == "true"

    expected_run = job.replay_paths([traces], ASSIGNORS, timings=False)
    expected = write_results(
        tmp_path / "python", expected_run.scores, expected_run.failures, expected_run.summary
    )
    for name in ("scores.parquet", "summary.parquet", "errors.jsonl"):
        assert (out / name).read_bytes() == (Path(expected) / name).read_bytes(), name
    assert (out / "_SUCCESS").read_bytes() == b""  # the commit marker, written last


def _events(events: Path, app_id: str) -> Iterator[dict]:
    """The events of application ``app_id`` from its uncompressed event log in ``events``: one
    file named by the id, or a rolling log's directory of event files."""
    single = events / app_id
    logs = [single] if single.is_file() else sorted(events.glob(f"*_{app_id}/events_*_{app_id}"))
    assert logs, f"no event log for {app_id} in {events}"
    for log in logs:
        for line in log.read_text().splitlines():
            yield json.loads(line)


def _spark_properties(events: Path, app_id: str) -> dict[str, str]:
    """The Spark properties application ``app_id`` ran with."""
    for event in _events(events, app_id):
        if event.get("Event") == "SparkListenerEnvironmentUpdate":
            return dict(event["Spark Properties"])
    raise AssertionError(f"no environment update for {app_id} in {events}")


def _replay_stage_executors(events: Path, app_id: str) -> list[str]:
    """The executor of each successful task of the replay stage: the last stage of the jobs
    run in the job group ``ktk-replay``."""
    stages: list[int] = []
    executors: dict[int, list[str]] = {}
    for event in _events(events, app_id):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            if event.get("Properties", {}).get("spark.jobGroup.id") == "ktk-replay":
                stages.extend(event["Stage IDs"])
        elif kind == "SparkListenerTaskEnd" and event["Task End Reason"]["Reason"] == "Success":
            executors.setdefault(event["Stage ID"], []).append(event["Task Info"]["Executor ID"])
    assert stages, f"no ktk-replay job in the event log of {app_id}"
    return executors.get(max(stages), [])


def _minor(python: str) -> int | None:
    check = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[1])"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return int(check.stdout) if check.returncode == 0 and check.stdout.strip() else None


def _other_minor_python() -> str | None:
    """A Python 3 of another minor version than this one: python3.X on the PATH, else one
    that pyenv manages."""
    candidates = [shutil.which(f"python3.{minor}") for minor in (13, 12, 10, 9)]
    if shutil.which("pyenv"):
        listed = subprocess.run(
            ["pyenv", "versions", "--bare"], capture_output=True, text=True, timeout=30
        ).stdout.split()
        for version in listed:
            prefix = subprocess.run(
                ["pyenv", "prefix", version], capture_output=True, text=True, timeout=30
            ).stdout.strip()
            candidates.append(str(Path(prefix, "bin", "python")) if prefix else None)
    for python in candidates:
        if python and Path(python).exists():
            minor = _minor(python)
            if minor is not None and minor != sys.version_info[1] and minor >= 8:
                return python
    return None


def test_executors_on_another_python_version_fail_in_one_line(cluster, tmp_path) -> None:
    other = _other_minor_python()
    if other is None:
        pytest.skip("no python3.X of another minor version on the PATH")
    traces = tmp_path / "traces"
    rows = list(generate.generate_rows("mixed", 2, seed=1, members=(2, 3), partitions=(2, 4)))
    trace_files.write_traces_jsonl(rows, traces / "t.jsonl")
    driver_env = dict(cluster["env"], PYTHONPATH=str(REPO), PYSPARK_DRIVER_PYTHON=sys.executable)
    submitted = subprocess.run(
        [
            str(_spark_home() / "bin" / "spark-submit"),
            "--master",
            cluster["url"],
            "--conf",
            f"spark.pyspark.python={other}",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            str(REPO / "spark_jobs" / "replay_traces.py"),
            str(traces),
            "--out",
            str(tmp_path / "out"),
            "--assignors",
            "range",
        ],
        cwd=tmp_path,
        env=driver_env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert submitted.returncode == 2, submitted.stderr[-3000:]
    # spark-submit passes the Python driver's stderr on through its stdout
    console = submitted.stdout + submitted.stderr
    errors = [line for line in console.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, console[-3000:]
    assert "Python" in errors[0] and "spark.pyspark.python" in errors[0]
    assert "Traceback" not in submitted.stdout
    assert not (tmp_path / "out").exists()


# a driver run in its own process (one SparkContext per process): the replay job through
# spark_jobs.replay_traces.run on the cluster, printing its application id, progress and the
# tasks' timings; its event log goes to events/ in its working directory
DRIVER = """
import json, os, sys, time
from spark_jobs import replay_traces
from spark_jobs.session import get_session

master, traces, out, assignors = sys.argv[1:5]
os.makedirs("events", exist_ok=True)  # the event log, in the driver's working directory
conf = {
    "spark.executor.memory": "512m",
    "spark.eventLog.enabled": "true",
    "spark.eventLog.dir": "file://" + os.path.abspath("events"),
    "spark.eventLog.compress": "false",
}
spark = get_session(master=master, conf=conf, app_name=sys.argv[5])
print("app", spark.sparkContext.applicationId, flush=True)
result = replay_traces.run(
    [traces], assignors.split(","), out, timings=False, spark=spark,
    progress=lambda done, total: print(f"progress {done} {total} {time.time()}", flush=True),
)
print("tasks", json.dumps([list(task) for task in result.tasks]), flush=True)
spark.stop()
"""


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _executor_python(tmp_path_factory.mktemp("executor") / "venv")


def _driver(cluster, executor_python: Path, tmp_path: Path, *arguments: str) -> subprocess.Popen:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(
        cluster["env"],
        PYTHONPATH=str(REPO),
        PYSPARK_PYTHON=str(executor_python),
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return subprocess.Popen(
        [sys.executable, str(script), cluster["url"], *arguments],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _tasks(stdout: str) -> list[list]:
    (line,) = [line for line in stdout.splitlines() if line.startswith("tasks ")]
    return json.loads(line[len("tasks ") :])


def test_one_file_of_2000_traces_runs_on_every_core_with_the_longest_task_within_twice_the_mean(
    cluster, executor_python, tmp_path
) -> None:
    from spark_jobs.replay_traces import BUCKETS_PER_CORE

    source = tmp_path / "all.jsonl"
    trace_files.write_traces_jsonl(generate.generate_rows("mixed", 2000, seed=20261122), source)
    driver = _driver(
        cluster,
        executor_python,
        tmp_path,
        str(source),
        str(tmp_path / "out"),
        "range,roundrobin",
        "ktk-balance",
    )
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-4000:]
    tasks = _tasks(stdout)  # [bucket, traces, CPU seconds, wall seconds], one per task
    cores = 2
    assert len(tasks) == BUCKETS_PER_CORE * cores  # the one file spread over every core
    assert sorted(task[0] for task in tasks) == list(range(len(tasks)))
    assert sum(task[1] for task in tasks) == 2000
    cpu = [task[2] for task in tasks]
    assert max(cpu) <= 2 * (sum(cpu) / len(cpu)), tasks
    # and both executors ran replay tasks (Spark's own record of where each task ran)
    (app_id,) = [line.split()[1] for line in stdout.splitlines() if line.startswith("app ")]
    executors = _replay_stage_executors(tmp_path / "events", app_id)
    assert len(executors) == len(tasks) and len(set(executors)) == cores, executors


def test_killing_a_worker_mid_job_still_gives_the_in_process_result(
    cluster, executor_python, tmp_path
) -> None:
    """Runs last: it leaves the cluster one worker short."""
    traces = tmp_path / "traces"
    rows = list(generate.generate_rows("mixed", 400, seed=5))
    trace_files.write_traces_jsonl(rows, traces / "all.jsonl")
    out = tmp_path / "out"
    driver = _driver(
        cluster, executor_python, tmp_path, str(traces), str(out), ",".join(ASSIGNORS), "ktk-kill"
    )
    assert driver.stdout is not None
    seen = []
    for line in driver.stdout:
        seen.append(line)
        if line.startswith("progress 0 "):
            break  # the replay stage starts
    time.sleep(0.5)
    assert driver.poll() is None, "".join(seen)
    worker = cluster["workers"][1]
    killed_at = time.time()
    worker.kill()  # by pid; its executor exits when it loses its worker
    worker.wait(timeout=30)
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-4000:]
    progress = [
        (int(done), int(total), float(at))
        for _, done, total, at in (
            line.split() for line in [*seen, *stdout.splitlines()] if line.startswith("progress ")
        )
    ]
    before_kill = [done for done, _, at in progress if at < killed_at]
    assert before_kill[-1] < 400, progress  # the kill came before the last trace was replayed
    assert progress[-1][:2] == (400, 400)
    assert _alive_workers(cluster["webui"]) == 1

    expected_run = job.replay_paths([traces], ASSIGNORS, timings=False)
    expected = write_results(
        tmp_path / "python", expected_run.scores, expected_run.failures, expected_run.summary
    )
    for name in ("scores.parquet", "summary.parquet", "errors.jsonl"):
        assert (out / name).read_bytes() == (Path(expected) / name).read_bytes(), name
