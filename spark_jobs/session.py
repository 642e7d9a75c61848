"""One way to get a SparkSession for ktk's jobs.

Local mode (``local[*]``) by default with Arrow on, memory sized for a laptop and quiet logs;
``master`` and ``conf`` pass straight through, so the same job runs on a cluster unchanged
(or under ``spark-submit``, where the session already exists and is reused).

Before starting a JVM the session checks for Java 17 or newer and, when it is missing, says how
to install it instead of failing deep inside py4j.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

MIN_JAVA = 17

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "16",
    # the replay stage shuffles few bytes but heavy work: keep every partition a separate task
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "true",
    "spark.sql.sources.partitionOverwriteMode": "static",
    "spark.sql.parquet.compression.codec": "snappy",
}

INSTALL_JAVA_HINT = (
    "Spark needs Java {minimum} or newer. Install it, e.g. on Debian/Ubuntu "
    "`sudo apt-get install openjdk-17-jre-headless`, on macOS `brew install openjdk@17`, or "
    "point JAVA_HOME at an existing JDK {minimum}+. "
    "Or run with `--engine python`, which needs no JVM."
)


class JavaNotFoundError(RuntimeError):
    """No usable Java runtime for Spark."""


def _java_executable() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java")


def java_major_version(java: str) -> int | None:
    """Major version printed by ``java -version`` (``1.8`` -> 8), None if it cannot be read."""
    try:
        completed = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', completed.stderr + completed.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java(minimum: int = MIN_JAVA) -> str:
    """Path of a Java >= ``minimum``; raises JavaNotFoundError with install instructions."""
    java = _java_executable()
    if java is None:
        raise JavaNotFoundError("no `java` found. " + INSTALL_JAVA_HINT.format(minimum=minimum))
    major = java_major_version(java)
    if major is None or major < minimum:
        found = "an unreadable version" if major is None else f"Java {major}"
        raise JavaNotFoundError(f"{java} is {found}. " + INSTALL_JAVA_HINT.format(minimum=minimum))
    return java


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """``key=value`` strings (as given to ``--conf``) to a dict; a malformed one raises."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise ValueError(f"--conf expects key=value (got {pair!r})")
        conf[key.strip()] = value
    return conf


def get_session(
    master: str | None = None,
    conf: dict[str, str] | None = None,
    app_name: str = "ktk",
) -> SparkSession:
    """A SparkSession: the active one when running under spark-submit, else a new one.

    ``master`` defaults to ``local[*]`` unless ``spark.master`` is already configured (by
    spark-submit or ``SPARK_MASTER``-style environment); ``conf`` overrides ktk's defaults.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    # workers must run the driver's interpreter, or they miss ktk's dependencies
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    resolved_master = master or os.environ.get("KTK_SPARK_MASTER") or "local[*]"
    if resolved_master.startswith("local"):
        # local mode binds to the loopback interface, not the machine's public address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).master(resolved_master)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    log.info("Spark %s on %s", session.version, resolved_master)
    return session
