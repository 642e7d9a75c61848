"""The replay job on a real (loopback) standalone cluster, submitted with spark-submit.

A master and two one-core workers are started from the pyspark installation's
``bin/spark-class`` on 127.0.0.1. The executors run a Python that has ktk's third-party
dependencies but cannot import ktk: a fresh virtual environment whose only addition is a
``.pth`` line naming the dependency directory (``.pth`` files inside a directory added that
way are not processed, so the editable install of ktk there stays invisible). Results equal
to the in-process engine's therefore prove the job ships its own code to the executors.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
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
    logs: list[Path] = []

    def start(name: str, *arguments: str) -> None:
        log = base / f"{name}.log"
        logs.append(log)
        with log.open("wb") as sink:
            processes.append(
                subprocess.Popen(
                    [str(spark_class), *arguments],
                    cwd=base,
                    env=env,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
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
            start(
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
        _wait(
            lambda: sum(w["state"] == "ALIVE" for w in _master_state(webui)["workers"]) == 2,
            90,
            "two workers",
            logs,
        )
        yield {
            "url": f"spark://127.0.0.1:{port}",
            "webui": webui,
            "base": base,
            "env": env,
            "logs": logs,
        }
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def test_spark_submit_to_a_standalone_cluster_ships_ktk_and_keeps_the_submitted_conf(
    cluster, tmp_path
) -> None:
    executor_python = _executor_python(tmp_path / "executor-venv")
    probe = subprocess.run(
        [str(executor_python), "-c", "import pandas, pyarrow\nimport spark_jobs"],
        cwd=tmp_path,
        env=cluster["env"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "No module named 'spark_jobs'" in probe.stderr, probe.stderr  # ktk only via the zip

    traces = tmp_path / "traces"
    rows = list(generate.generate_rows("mixed", 40, seed=11, members=(2, 6), partitions=(4, 40)))
    trace_files.write_traces_jsonl(rows, traces / "all.jsonl")
    out = tmp_path / "out"
    driver_env = dict(
        cluster["env"],
        PYTHONPATH=str(REPO),
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYSPARK_PYTHON=str(executor_python),
    )
    submitted = subprocess.run(
        [
            str(_spark_home() / "bin" / "spark-submit"),
            "--master",
            cluster["url"],
            "--name",
            "ktk-cluster-check",
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            f"spark.pyspark.python={executor_python}",
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
        env=driver_env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert submitted.returncode == 0, submitted.stderr[-4000:]
    assert "trace x assignor summaries written" in submitted.stdout

    apps = [*(state := _master_state(cluster["webui"]))["activeapps"], *state["completedapps"]]
    mine = [app for app in apps if app["name"] == "ktk-cluster-check"]
    assert len(mine) == 1, apps  # the submitted --name, not ktk's default
    assert mine[0]["memoryperslave"] == 512  # the submitted spark.executor.memory

    expected_run = job.replay_paths([traces], ASSIGNORS, timings=False)
    expected = write_results(
        tmp_path / "python", expected_run.scores, expected_run.failures, expected_run.summary
    )
    for name in ("scores.parquet", "summary.parquet", "errors.jsonl"):
        assert (out / name).read_bytes() == (Path(expected) / name).read_bytes(), name
    shutil.rmtree(tmp_path / "executor-venv")


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
