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

import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    # the key-trace job's grouped stage shuffles few bytes but heavy work: keep every
    # partition a separate task (the replay stage plans its own tasks, see bucket_plan)
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    # progress is ktk's own bar over traces, not Spark's stage bars redrawn with \r
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.sources.partitionOverwriteMode": "static",
    "spark.sql.parquet.compression.codec": "snappy",
}

# The JVMs move bytes (listing, shuffle blocks, results) while Python workers do the work:
# the JIT's optimising tier costs more CPU than it saves in such a run (5-6 of the driver's
# 13-15 CPU seconds of overhead on a local[2] replay; 11.5 s against 5.6 s for the two
# executors of a 2,000-trace replay on a standalone cluster, docs/spark.md), so the driver
# and the executors stop at the quick tier. Set spark.driver.extraJavaOptions or
# spark.executor.extraJavaOptions to choose otherwise.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# The driver's JVM that ktk starts itself (local mode: the whole cluster, with the 2 GB heap
# ktk fills in) also takes the serial collector: it cost 0.13 s (3%) less of that JVM's CPU in
# four paired local[2] runs, every pair alike (docs/spark.md). Executors keep the JVM's own
# choice: their heaps and cores are the cluster's to size, and a serial collector pauses long
# on a large heap.
DRIVER_GC = "-XX:+UseSerialGC"

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


LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def spark_log_file() -> Path:
    """Where the JVM's log4j lines go (never the console): one file per driver process
    under the temporary directory, named in the ``-v`` output."""
    directory = Path(tempfile.gettempdir()) / "ktk-spark-logs"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"driver-{os.getpid()}.log"


def _defaults_file() -> Path | None:
    """The spark-defaults.conf spark-submit would load: ``$SPARK_CONF_DIR`` or
    ``$SPARK_HOME/conf``."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if conf_dir:
        return Path(conf_dir) / "spark-defaults.conf"
    spark_home = os.environ.get("SPARK_HOME")
    return Path(spark_home) / "conf" / "spark-defaults.conf" if spark_home else None


def read_defaults_file(path: Path) -> dict[str, str]:
    """Keys of a spark-defaults.conf (``key value`` or ``key=value`` lines, ``#`` comments).

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d) / "spark-defaults.conf"
    ...     _ = f.write_text("# c\\nspark.master  spark://h:7077\\nspark.a=1\\n")
    ...     read_defaults_file(f)
    {'spark.master': 'spark://h:7077', 'spark.a': '1'}
    """
    found: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"(\S+?)(?:\s*=\s*|\s+)(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def preset_conf() -> dict[str, str]:
    """Settings someone other than ktk already made: under ``spark-submit`` (its JVM is
    running and handed us its gateway) everything the JVM was started with, ``--master`` and
    every ``--conf`` included; otherwise the spark-defaults.conf spark-submit will load."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        return dict(SparkConf().getAll())
    defaults = _defaults_file()
    if defaults is not None and defaults.is_file():
        return read_defaults_file(defaults)
    return {}


def plan_conf(
    preset: Mapping[str, str],
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    environment_master: str | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The settings ktk gives the session builder, and which of them are ktk's defaults.

    What spark-submit or spark-defaults.conf set (``preset``) is never overridden by a
    default; only an explicit ``master`` or ``conf`` (the user's own ``--master`` /
    ``--conf`` to ktk) wins over it.

    >>> "spark.master" in plan_conf({"spark.master": "spark://h:7077"})[0]
    False
    >>> "spark.ui.enabled" in plan_conf({"spark.ui.enabled": "true"})[0]
    False
    >>> plan_conf({})[0]["spark.master"]
    'local[*]'
    """
    planned: dict[str, str] = {}
    filled: list[str] = []
    if master is not None:
        planned["spark.master"] = master
    elif "spark.master" not in preset:
        planned["spark.master"] = environment_master or "local[*]"
        filled.append("spark.master")
    for key, value in DEFAULT_CONF.items():
        if key not in preset:
            planned[key] = value
            filled.append(key)
    if "spark.driver.extraJavaOptions" not in preset and LOG4J_CONFIG.is_file():
        planned["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -Dktk.spark.log={spark_log_file()} "
            + f"{QUICK_JIT} {DRIVER_GC}"
        )
        filled.append("spark.driver.extraJavaOptions")
    if "spark.executor.extraJavaOptions" not in preset:
        # executors start after the session does, so this holds under spark-submit too
        planned["spark.executor.extraJavaOptions"] = QUICK_JIT
        filled.append("spark.executor.extraJavaOptions")
    planned.update(conf or {})
    return planned, [key for key in filled if key not in (conf or {})]


@contextlib.contextmanager
def _jvm_stderr_to(path: Path | None) -> Iterator[None]:
    """While the JVM starts, point file descriptor 2 at ``path`` so the JVM (and the Python
    workers it spawns) inherit it: the launcher's own warnings ("Using incubator modules")
    land in Spark's log file, not on the console. Python's stderr is restored afterwards."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def get_session(
    master: str | None = None,
    conf: dict[str, str] | None = None,
    app_name: str = "ktk",
) -> SparkSession:
    """A SparkSession: the active one when running under spark-submit, else a new one.

    Settings spark-submit or spark-defaults.conf made are kept (see :func:`plan_conf`); ktk
    fills in only the keys nobody set (``local[*]`` unless ``KTK_SPARK_MASTER`` says
    otherwise, and :data:`DEFAULT_CONF`) and logs which. ``master`` and ``conf`` given here
    win over both.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    under_submit = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    if not under_submit:
        check_java()
    # workers must run the driver's interpreter, or they miss ktk's dependencies
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    preset = preset_conf()
    planned, filled = plan_conf(preset, master, conf, os.environ.get("KTK_SPARK_MASTER"))
    resolved_master = planned.get("spark.master") or preset.get("spark.master", "")
    if resolved_master.startswith("local"):
        # local mode binds to the loopback interface, not the machine's public address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        # py4j logs every broken connection with a traceback; the CLI reports them in one line
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
    builder = SparkSession.builder
    if "spark.app.name" not in preset:
        builder = builder.appName(app_name)
    for key, value in planned.items():
        builder = builder.config(key, value)
    with _jvm_stderr_to(spark_log_file() if not under_submit else None):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _quiet_accumulator_server(session.sparkContext)
    log.info("Spark %s on %s", session.version, session.sparkContext.master)
    if filled:
        log.info("ktk set %s (nobody else had)", ", ".join(filled))
    if "spark.driver.extraJavaOptions" in filled:
        log.info("Spark's own log: %s", spark_log_file())
    return session


def _quiet_accumulator_server(context: object) -> None:
    """PySpark's accumulator server (a thread in the driver) prints a traceback to the console
    when the JVM's connection to it breaks, as it does when the JVM dies; the CLI reports that
    in one line, so the server's errors go to ktk's log instead."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return

    def handle_error(request: object, client_address: object) -> None:
        log.debug("Spark's accumulator connection ended: %r", sys.exc_info()[1])

    server.handle_error = handle_error


@contextlib.contextmanager
def stage_progress(
    spark: SparkSession,
    *,
    group: str,
    description: str,
    tasks: int,
    total: int,
    progress: Callable[[int, int], None],
) -> Iterator[None]:
    """Run the body's Spark jobs in job group ``group`` and report ``progress(done, total)``
    every 0.3 s, ``done`` being ``total`` in proportion to the finished tasks of the group's
    stage that has ``tasks`` tasks (Spark's status tracker); ``(0, total)`` first and
    ``(total, total)`` last."""
    context = spark.sparkContext
    stopped = threading.Event()

    def watch() -> None:
        tracker = context.statusTracker()
        while not stopped.wait(0.3):
            finished = 0
            for job_id in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None and stage.numTasks == tasks:
                        finished = max(finished, stage.numCompletedTasks)
            progress(total * finished // max(1, tasks), total)

    context.setJobGroup(group, description)
    progress(0, total)
    watcher = threading.Thread(target=watch, name="ktk-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stopped.set()
        watcher.join(timeout=5)
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    progress(total, total)


# what executors import: ktk's packages Spark jobs need (not the CLI or the dashboards)
SHIPPED_PACKAGES = (
    "ktkbase",
    "kafka_format",
    "assignors",
    "partitioners",
    "replication",
    "spark_jobs",
)
# third-party modules executors import, with the distribution that provides each (docs/spark.md:
# shipping them as a packed environment): ortools for the assignors' cost flows, mmh3 for the
# key-trace job's partitioners, PyYAML for the explorer's scenarios
EXECUTOR_DEPENDENCIES: dict[str, str] = {
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "numpy": "numpy",
    "ortools": "ortools",
    "mmh3": "mmh3",
    "yaml": "PyYAML",
}
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_shipped: dict[str, Path] = {}
# applications whose executors passed the check: later jobs of the same run skip it
_checked: set[str] = set()


def build_code_zip(directory: Path) -> Path:
    """A zip of :data:`SHIPPED_PACKAGES` (sources and package data, no caches) in
    ``directory``, byte-identical for identical sources: sorted entries, fixed timestamps and
    modes. Named by its content hash. PySpark puts .zip/.egg/.jar files on the executors'
    ``sys.path``, not wheels, hence a zip."""
    root = Path(__file__).resolve().parent.parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in SHIPPED_PACKAGES:
            base = root / package
            for path in sorted(base.rglob("*")):
                relative = path.relative_to(root)
                if not path.is_file() or "__pycache__" in relative.parts:
                    continue
                if path.suffix in (".pyc", ".pyo"):
                    continue
                info = zipfile.ZipInfo(relative.as_posix(), date_time=_ZIP_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    target = directory / f"ktk-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    target.write_bytes(data)
    return target


def _executor_environment(_: object) -> tuple[tuple[int, int], list[str]]:
    """Run on an executor: its Python version and the dependencies it cannot import."""
    import importlib.util
    import sys as executor_sys

    missing = [m for m in EXECUTOR_DEPENDENCIES if importlib.util.find_spec(m) is None]
    return (executor_sys.version_info[0], executor_sys.version_info[1]), missing


def prepare_executors(spark: SparkSession) -> None:
    """Ship ktk's code to the executors of a cluster and check, with a tiny job, that they
    run the driver's Python version and have ktk's dependencies (both once per application:
    `ktk demo` runs two jobs); raises KtkError (one line) when not. Local mode needs neither:
    its workers run the driver's interpreter with the driver's path."""
    context = spark.sparkContext
    if str(context.master or "").startswith("local"):
        return
    application = context.applicationId
    if application in _checked:
        return
    if application not in _shipped:
        directory = Path(tempfile.mkdtemp(prefix="ktk-code-"))
        archive = build_code_zip(directory)
        context.addPyFile(str(archive))
        _shipped[application] = archive
        log.info("shipped ktk to the executors as %s", archive.name)
    driver = sys.version_info[:2]
    try:
        (version, missing), *_ = context.parallelize([0], 1).map(_executor_environment).collect()
    except Exception as error:  # PySpark refuses a worker of another minor version itself
        text = str(error)
        if "PYTHON_VERSION_MISMATCH" in text or "different version" in text:
            raise KtkError(
                f"the executors' Python differs from the driver's {driver[0]}.{driver[1]}; "
                "set spark.pyspark.python (or PYSPARK_PYTHON) to a Python "
                f"{driver[0]}.{driver[1]} with ktk's dependencies"
            ) from None
        described = describe_spark_failure(error) or _first_line(text)
        raise KtkError(
            f"the executors' Python could not run ktk's check job ({described}); set "
            f"spark.pyspark.python (or PYSPARK_PYTHON) to a Python {driver[0]}.{driver[1]} "
            "with ktk's dependencies"
        ) from None
    if tuple(version) != driver:
        raise KtkError(
            f"the executors run Python {version[0]}.{version[1]}, the driver "
            f"{driver[0]}.{driver[1]}; set spark.pyspark.python (or PYSPARK_PYTHON) to a "
            f"Python {driver[0]}.{driver[1]} with ktk's dependencies"
        )
    if missing:
        raise KtkError(
            f"the executors' Python lacks {', '.join(missing)}; install them there or ship a "
            "packed environment with spark.archives (docs/spark.md)"
        )
    _checked.add(application)


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
