"""One way to get a SparkSession for ktk's jobs.

Local mode (``local[*]``) by default with Arrow on, memory sized for a laptop and quiet logs;
``master`` and ``conf`` pass straight through, so the same job runs on a cluster unchanged
(or under ``spark-submit``, where the session already exists and is reused).

Before starting a JVM the session checks for Java 17 or newer and, when it is missing (or
``JAVA_HOME`` points nowhere), says how to install it instead of failing deep inside py4j.
:func:`describe_spark_failure` turns a JVM that died or could not start into one line, and
:func:`stop_active_session` ends the session after Ctrl-C.
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

from ktkbase.errors import KtkError

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
    "Or give `ktk replay` and `ktk partition score` `--engine python`, which needs no JVM."
)


class JavaNotFoundError(KtkError, RuntimeError):
    """No usable Java runtime for Spark."""


def _java_executable() -> str | None:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set (Spark's launcher uses it and nothing
    else then, so a stale JAVA_HOME is an error here too), else ``java`` on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not candidate.is_file():
            where = "does not exist" if not Path(java_home).exists() else "has no bin/java"
            raise JavaNotFoundError(
                f"JAVA_HOME is {java_home}, which {where}; point JAVA_HOME at a JDK "
                f"{MIN_JAVA}+ or unset it to use the `java` on the PATH"
            )
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
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        # py4j logs every broken connection with a traceback; the CLI reports them in one line
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
    builder = SparkSession.builder.appName(app_name).master(resolved_master)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    log.info("Spark %s on %s", session.version, resolved_master)
    return session


_JVM_GONE = (
    "the Spark JVM stopped unexpectedly (out of memory, killed, or crashed); its own log above "
    "says why (for memory, raise spark.driver.memory)"
)


def describe_spark_failure(error: BaseException) -> str | None:
    """One line for an error raised by Spark or py4j (a JVM that died mid-job, could not
    start, or a job that failed), or None when ``error`` did not come from them.

    >>> describe_spark_failure(ValueError("x")) is None
    True
    >>> class Py4JNetworkError(Exception): ...
    >>> Py4JNetworkError.__module__ = "py4j.protocol"
    >>> describe_spark_failure(Py4JNetworkError("Answer from Java side is empty"))[:35]
    'the Spark JVM stopped unexpectedly '
    """
    module = type(error).__module__ or ""
    name = type(error).__name__
    if isinstance(error, ConnectionError) and "py4j" in sys.modules:
        return f"{_JVM_GONE} ({error.strerror or error})"
    if not module.startswith(("py4j", "pyspark")):
        return None
    text = str(error)
    if name == "Py4JJavaError":
        java = getattr(error, "java_exception", None)
        try:
            text = str(java.toString()) if java is not None else text
        except Exception:  # the JVM is gone: its exception can no longer be asked
            return _JVM_GONE
        return f"Spark job failed: {_first_line(text)}"
    if "JAVA_GATEWAY_EXITED" in text or "gateway process exited" in text:
        return (
            "the Spark JVM exited before it started; check JAVA_HOME and the --conf "
            "settings (the JVM's own message is above)"
        )
    if name in ("Py4JNetworkError", "Py4JError"):
        return _JVM_GONE
    if name == "PythonException":
        return f"Spark job failed: {_python_error_line(text)}"
    return f"Spark failed: {_first_line(text)}"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return "(no message)"


def _python_error_line(text: str) -> str:
    """The ``SomeError: message`` line of a Python worker's traceback Spark passed on."""
    found = re.findall(r"^(\w+(?:Error|Exception|Interrupt)\b.*)$", text, flags=re.MULTILINE)
    return found[-1].strip()[:500] if found else _first_line(text)


def stop_active_session() -> None:
    """Cancel the running jobs and stop the session (after Ctrl-C); quiet when the JVM is
    already gone or no session was started."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        return
    for step in (context.cancelAllJobs, context.stop):
        try:
            step()
        except Exception:  # the JVM may already be gone; stopping is best effort
            log.debug("stopping Spark after an interrupt", exc_info=True)
