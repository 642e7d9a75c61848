"""`ktk replay --engine auto` (the default): in process for small local inputs, Spark otherwise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from assignors.traces import files as trace_files
from assignors.traces import generate
from ktk.commands import replay

REPO = Path(__file__).resolve().parent.parent


def _small_input(directory: Path) -> Path:
    rows = list(generate.generate_rows("mixed", 5, seed=2, members=(2, 4), partitions=(2, 10)))
    trace_files.write_traces_jsonl(rows, directory / "t.jsonl")
    return directory


def test_auto_runs_small_local_input_in_process(tmp_path) -> None:
    source = _small_input(tmp_path / "in")
    assert replay.resolve_engine("auto", [str(source)], None, []) == "python"


def test_auto_runs_spark_from_the_size_threshold_on(tmp_path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * replay.AUTO_SPARK_BYTES)
    assert replay.resolve_engine("auto", [str(big)], None, []) == "spark"
    smaller = tmp_path / "smaller.jsonl"
    smaller.write_bytes(b"x" * (replay.AUTO_SPARK_BYTES - 1))
    assert replay.resolve_engine("auto", [str(smaller)], None, []) == "python"


def test_auto_counts_compressed_inputs_at_their_estimated_uncompressed_size(tmp_path) -> None:
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(os.urandom(replay.AUTO_SPARK_BYTES // replay.COMPRESSED_FACTOR + 1))
    assert replay.input_bytes([str(tmp_path)]) >= replay.AUTO_SPARK_BYTES
    assert replay.resolve_engine("auto", [str(packed)], None, []) == "spark"


def test_auto_runs_spark_when_a_master_conf_or_uri_is_given(tmp_path) -> None:
    source = str(_small_input(tmp_path / "in"))
    assert replay.resolve_engine("auto", [source], "spark://h:7077", []) == "spark"
    assert replay.resolve_engine("auto", [source], None, ["spark.executor.memory=1g"]) == "spark"
    assert replay.resolve_engine("auto", ["hdfs://nn/traces"], None, []) == "spark"


def test_explicit_engines_are_kept(tmp_path) -> None:
    source = str(_small_input(tmp_path / "in"))
    assert replay.resolve_engine("spark", [source], None, []) == "spark"
    assert replay.resolve_engine("python", [source], "local[2]", []) == "python"


def test_default_engine_replays_small_input_without_a_jvm(tmp_path) -> None:
    source = _small_input(tmp_path / "in")
    # a JAVA_HOME pointing nowhere makes any Spark start fail with exit 2
    env = dict(os.environ, PYTHONPATH=str(REPO), JAVA_HOME=str(tmp_path / "no-java"))
    completed = subprocess.run(
        [sys.executable, "-m", "ktk", "replay", str(source), "--out", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "out" / "scores.parquet").is_file()


@pytest.mark.slow
@pytest.mark.spark
def test_spark_engine_console_has_no_jvm_lines_and_verbose_names_the_log_file(tmp_path) -> None:
    source = _small_input(tmp_path / "in")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktk",
            "-v",
            "replay",
            str(source),
            "--out",
            str(tmp_path / "out"),
            "--engine",
            "spark",
            "--master",
            "local[1]",
            "--assignors",
            "range",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    console = completed.stdout + completed.stderr
    for noise in ("NativeCodeLoader", "incubator", "log4j", "WARN ", "\r"):
        assert noise not in console, noise
    logged = re.search(r"Spark's own log: (\S+)", completed.stderr)
    assert logged is not None, completed.stderr
    assert "NativeCodeLoader" in Path(logged.group(1)).read_text()
