"""benchmarks/bench_spark_replay.py runs and prints, for each input layout, every engine's
wall and CPU seconds and their ratios to the in-process engine's (docs/spark.md's table comes
from it at 2,000 and 10,000 traces; here a tiny input on engines that start no JVM)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
FIGURES = r"wall +[0-9.]+ s  CPU +[0-9.]+ s"


def test_the_replay_benchmark_prints_wall_cpu_and_ratios_for_one_file_and_many() -> None:
    script = REPO / "benchmarks" / "bench_spark_replay.py"
    arguments = ["--traces", "12", "--files", "1", "3", "--engines", "python", "auto"]
    finished = subprocess.run(
        [sys.executable, str(script), *arguments, "--assignors", "range"],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    lines = finished.stdout.splitlines()
    headers = [line for line in lines if re.match(r"12 traces \(\d+ generations, ", line)]
    assert [header.rsplit(" in ", 1)[1] for header in headers] == ["1 file(s):", "3 file(s):"]
    assert len([line for line in lines if re.fullmatch(f"  python +{FIGURES}", line)]) == 2
    ratio = f"  auto +{FIGURES}  wall [0-9.]+x, CPU [0-9.]+x in-process"
    assert len([line for line in lines if re.fullmatch(ratio, line)]) == 2, finished.stdout
