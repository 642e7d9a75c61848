"""Kill ``ktk replay`` with SIGKILL in the middle of a run (both engines' tests use it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO_ROOT

from assignors.traces.files import write_traces_jsonl
from assignors.traces.generate import generate_rows

KILLED_RUN_ASSIGNORS = "range,sticky,cooperative-sticky,optimal,load-aware"


def large_traces(directory: Path) -> Path:
    """``small.jsonl`` (2 traces) and ``big/`` (enough traces for several seconds of replay)."""
    rows = list(generate_rows("mixed", 2, seed=5, members=(2, 4), partitions=(4, 12)))
    write_traces_jsonl(rows, directory / "small.jsonl")
    big = list(generate_rows("mixed", 400, seed=9, members=(20, 60), partitions=(200, 800)))
    write_traces_jsonl(big, directory / "big" / "big.jsonl")
    return directory


def replay_killed_mid_run(
    traces: Path, out: Path, engine: str, settle: float = 3.0, timeout: float = 300.0
) -> list[str]:
    """Start ``python -m ktk replay`` on ``traces`` into ``out``, wait until its staging
    directory exists and ``settle`` seconds more (work under way), SIGKILL it; return the
    debris names it left."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ktk",
            "replay",
            str(traces / "big"),
            "--out",
            str(out),
            "--engine",
            engine,
            "--assignors",
            # the run must outlast ``settle`` by a wide margin: with range and sticky alone,
            # Spark on local[1] replayed the big traces in 12.5 s, its 12 s settle included
            KILLED_RUN_ASSIGNORS,
            "--master",
            "local[1]",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            staging = [p.name for p in out.parent.iterdir() if ".ktk-staging-" in p.name]
            if staging:
                time.sleep(settle)
                break
            time.sleep(0.05)
        assert process.poll() is None, "the replay ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # a JVM that outlives its parent
            os.killpg(process.pid, signal.SIGKILL)
    return [p.name for p in out.parent.iterdir() if p.name.startswith(".")]
