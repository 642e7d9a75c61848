"""The Spark session's Java check and --conf parsing (no JVM started here)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ktkbase.errors import KtkError
from spark_jobs import session


def _fake_java(directory: Path, version_line: str) -> Path:
    """An executable that prints ``version_line`` on stderr like ``java -version``."""
    java = directory / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


@pytest.mark.parametrize(
    ("version_line", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_292"', 8),
        ("no version here", None),
    ],
)
def test_java_major_version_reads_old_and_new_numbering(tmp_path, version_line, major) -> None:
    assert session.java_major_version(str(_fake_java(tmp_path, version_line))) == major


def test_check_java_accepts_java_17_from_java_home(tmp_path, monkeypatch) -> None:
    java = _fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert session.check_java() == str(java)


def test_check_java_rejects_java_8_and_says_how_to_install(tmp_path, monkeypatch) -> None:
    _fake_java(tmp_path, 'java version "1.8.0_292"')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(session.JavaNotFoundError) as raised:
        session.check_java()
    message = str(raised.value)
    assert "Java 8" in message
    assert "openjdk-17-jre-headless" in message
    assert "--engine python" in message


def test_check_java_without_any_java_says_how_to_install(monkeypatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    with pytest.raises(session.JavaNotFoundError, match="no `java` found"):
        session.check_java()


@pytest.mark.parametrize("layout", ["missing", "no-bin-java"])
def test_stale_java_home_is_named_even_when_a_java_is_on_the_path(
    tmp_path, monkeypatch, layout
) -> None:
    java_home = tmp_path / "jdk"
    if layout == "no-bin-java":
        java_home.mkdir()
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setattr(session.shutil, "which", lambda name: "/usr/bin/java")
    with pytest.raises(session.JavaNotFoundError) as raised:
        session.check_java()
    message = str(raised.value)
    assert f"JAVA_HOME is {java_home}" in message and "\n" not in message
    assert ("does not exist" if layout == "missing" else "has no bin/java") in message


def test_java_not_found_is_a_ktk_error_the_command_line_reports_in_one_line() -> None:
    assert issubclass(session.JavaNotFoundError, KtkError)


def _py4j_error(name: str, message: str) -> BaseException:
    error_class = type(name, (Exception,), {"__module__": "py4j.protocol"})
    return error_class(message)


def test_jvm_that_died_mid_job_is_described_in_one_line() -> None:
    for error in (
        _py4j_error("Py4JNetworkError", "Answer from Java side is empty"),
        _py4j_error("Py4JError", "An error occurred while calling o33.sc"),
    ):
        described = session.describe_spark_failure(error)
        assert described is not None and described.startswith("the Spark JVM stopped")
        assert "\n" not in described


def test_real_py4j_errors_and_refused_connections_are_spark_failures() -> None:
    from py4j.protocol import Py4JNetworkError

    assert "JVM stopped" in (session.describe_spark_failure(Py4JNetworkError("gone")) or "")
    refused = ConnectionRefusedError(111, "Connection refused")
    assert "Connection refused" in (session.describe_spark_failure(refused) or "")


def test_jvm_that_exits_before_starting_is_described_as_such() -> None:
    error = type("PySparkRuntimeError", (Exception,), {"__module__": "pyspark.errors"})(
        "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."
    )
    assert "exited before it started" in (session.describe_spark_failure(error) or "")


def test_python_worker_failure_keeps_only_the_error_line() -> None:
    error = type("PythonException", (Exception,), {"__module__": "pyspark.errors"})(
        "\n  An exception was thrown from the Python worker.\nTraceback (most recent call "
        'last):\n  File "x.py", line 1\nValueError: bad trace\n'
    )
    assert session.describe_spark_failure(error) == "Spark job failed: ValueError: bad trace"


def test_errors_not_from_spark_are_left_alone() -> None:
    assert session.describe_spark_failure(ValueError("x")) is None
    assert session.describe_spark_failure(KeyError("x")) is None


def test_parse_conf_splits_at_the_first_equals_sign() -> None:
    conf = session.parse_conf(["spark.executor.memory=4g", "spark.x.opts=-Da=b"])
    assert conf == {"spark.executor.memory": "4g", "spark.x.opts": "-Da=b"}


@pytest.mark.parametrize("bad", ["spark.executor.memory", "=4g", " =x"])
def test_parse_conf_rejects_pairs_without_a_key_or_equals_sign(bad) -> None:
    with pytest.raises(ValueError, match="key=value"):
        session.parse_conf([bad])


def test_settings_from_spark_submit_are_never_overridden_by_ktks_defaults() -> None:
    preset = {"spark.master": "spark://10.0.0.1:7077", "spark.sql.shuffle.partitions": "4"}
    planned, filled = session.plan_conf(preset)
    assert "spark.master" not in planned and "spark.sql.shuffle.partitions" not in planned
    assert "spark.master" not in filled and "spark.sql.shuffle.partitions" not in filled
    # the keys nobody set are filled in, and named
    assert planned["spark.ui.showConsoleProgress"] == "false"
    assert "spark.ui.showConsoleProgress" in filled


def test_explicit_master_and_conf_win_over_spark_submit_and_defaults() -> None:
    preset = {"spark.master": "yarn", "spark.driver.memory": "8g"}
    planned, filled = session.plan_conf(
        preset, master="local[1]", conf={"spark.driver.memory": "1g"}
    )
    assert planned["spark.master"] == "local[1]" and planned["spark.driver.memory"] == "1g"
    assert "spark.driver.memory" not in filled


def test_no_preset_master_means_local_or_the_environments_master() -> None:
    assert session.plan_conf({})[0]["spark.master"] == "local[*]"
    assert session.plan_conf({}, environment_master="local[3]")[0]["spark.master"] == "local[3]"


def test_spark_defaults_conf_is_read_from_spark_conf_dir(tmp_path, monkeypatch) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# cluster defaults\nspark.master   spark://h:7077\nspark.executor.memory=3g\n\n"
    )
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    preset = session.preset_conf()
    assert preset == {"spark.master": "spark://h:7077", "spark.executor.memory": "3g"}
    assert "spark.master" not in session.plan_conf(preset)[0]


def test_jvm_logs_go_to_a_file_named_by_the_log4j_config() -> None:
    planned, _ = session.plan_conf({})
    options = planned["spark.driver.extraJavaOptions"]
    assert "log4j2.configurationFile=file:" in options
    assert session.LOG4J_CONFIG.is_file()
    text = session.LOG4J_CONFIG.read_text()
    assert "rootLogger.appenderRef.file.ref = file" in text and "Console" not in text
    assert f"-Dktk.spark.log={session.spark_log_file()}" in options


def test_the_driver_jvm_stops_at_the_quick_jit_tier_unless_someone_set_its_options() -> None:
    planned, filled = session.plan_conf({})
    assert " -XX:TieredStopAtLevel=1 " in planned["spark.driver.extraJavaOptions"]
    assert "spark.driver.extraJavaOptions" in filled
    preset = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert "spark.driver.extraJavaOptions" not in session.plan_conf(preset)[0]


def test_the_driver_jvm_ktk_starts_takes_the_serial_collector_unless_someone_set_its_options():
    planned, filled = session.plan_conf({})
    assert planned["spark.driver.extraJavaOptions"].endswith(" -XX:+UseSerialGC")
    assert "spark.driver.extraJavaOptions" in filled
    preset = {"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}
    assert "spark.driver.extraJavaOptions" not in session.plan_conf(preset)[0]
    given = {"spark.driver.extraJavaOptions": "-XX:+UseParallelGC"}
    planned, filled = session.plan_conf({}, conf=given)
    assert planned["spark.driver.extraJavaOptions"] == "-XX:+UseParallelGC"
    assert "spark.driver.extraJavaOptions" not in filled


def test_the_executor_jvms_keep_the_jvms_own_collector() -> None:
    planned, _ = session.plan_conf({"spark.master": "spark://h:7077"})
    assert "GC" not in planned["spark.executor.extraJavaOptions"]


def test_the_executor_jvms_stop_at_the_quick_jit_tier_unless_someone_set_their_options() -> None:
    planned, filled = session.plan_conf({"spark.master": "spark://h:7077"})
    assert planned["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert "spark.executor.extraJavaOptions" in filled
    preset = {"spark.executor.extraJavaOptions": "-Xss4m"}
    assert "spark.executor.extraJavaOptions" not in session.plan_conf(preset)[0]
    given = {"spark.executor.extraJavaOptions": "-Xss8m"}
    planned, filled = session.plan_conf({}, conf=given)
    assert planned["spark.executor.extraJavaOptions"] == "-Xss8m"
    assert "spark.executor.extraJavaOptions" not in filled


def test_code_zip_holds_the_job_packages_and_is_byte_identical_across_builds(tmp_path) -> None:
    import zipfile

    first = session.build_code_zip(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None)
    second = session.build_code_zip(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None)
    assert first.name == second.name and first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    for package in session.SHIPPED_PACKAGES:
        assert f"{package}/__init__.py" in names
    assert "spark_jobs/replay_traces.py" in names and "spark_jobs/log4j2.properties" in names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert not any(name.startswith(("ktk/", "dashboards/")) for name in names)


def test_executor_environment_reports_version_and_missing_dependencies() -> None:
    import sys

    version, missing = session._executor_environment(0)
    assert tuple(version) == sys.version_info[:2] and missing == []


class _ClusterContext:
    """A cluster's SparkContext as prepare_executors sees it: jobs run in this process."""

    master = "spark://127.0.0.1:7077"
    applicationId = "app-20260101000000-0000"

    def __init__(self) -> None:
        self.shipped: list[str] = []
        self.jobs = 0

    def addPyFile(self, path: str) -> None:
        self.shipped.append(path)

    def parallelize(self, data: list[int], slices: int) -> _ClusterContext:
        self.jobs += 1
        self._data = data
        return self

    def map(self, function):  # type: ignore[no-untyped-def]
        self._function = function
        return self

    def collect(self) -> list[object]:
        return [self._function(item) for item in self._data]


class _ClusterSession:
    def __init__(self) -> None:
        self.sparkContext = _ClusterContext()


def test_prepare_executors_ships_and_checks_once_per_application(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(session, "_shipped", {})
    monkeypatch.setattr(session, "_checked", set())
    monkeypatch.setattr(session, "build_code_zip", lambda directory: tmp_path / "ktk-code.zip")
    spark = _ClusterSession()
    session.prepare_executors(spark)  # type: ignore[arg-type]
    session.prepare_executors(spark)  # type: ignore[arg-type]
    assert spark.sparkContext.shipped == [str(tmp_path / "ktk-code.zip")]
    assert spark.sparkContext.jobs == 1


def test_key_trace_job_prepares_the_executors_before_reading(monkeypatch) -> None:
    from spark_jobs import score_key_traces

    prepared: list[object] = []

    def prepare(spark: object) -> None:
        prepared.append(spark)
        raise KtkError("executors refused")

    monkeypatch.setattr(session, "prepare_executors", prepare)
    spark = _ClusterSession()
    with pytest.raises(KtkError, match="executors refused"):
        score_key_traces.report(["unread.jsonl"], ["java-builtin"], spark=spark)  # type: ignore[arg-type]
    assert prepared == [spark]


def test_executor_dependencies_cover_every_third_party_module_the_jobs_import(tmp_path) -> None:
    """What an executor imports running both jobs (every built-in assignor, a key trace) is
    ktk, the standard library, pyspark, EXECUTOR_DEPENDENCIES and what those require."""
    import importlib.metadata
    import json
    import re
    import subprocess
    import sys

    probe = """
import json, sys
from assignors import registry
from assignors.traces import files, generate, job
from partitioners import keytrace_job
import spark_jobs.explore_schedules, spark_jobs.replay_traces, spark_jobs.score_key_traces
files.write_traces_jsonl(list(generate.generate_rows("mixed", 6, seed=3)), sys.argv[1])
run = job.replay_paths([sys.argv[1]], registry.builtin_names(), timings=False)
assert not run.failures, run.failures
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""
    imported = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path / "t.jsonl")],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
    )
    provided = importlib.metadata.packages_distributions()
    allowed, pending = set(), list(session.EXECUTOR_DEPENDENCIES.values())
    while pending:
        name = pending.pop().lower()
        if name in allowed:
            continue
        allowed.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        pending += [re.match(r"[\w.-]+", r).group(0) for r in requires if "extra ==" not in r]
    third_party = {
        module
        for module in imported
        if module not in sys.stdlib_module_names
        and not module.startswith("_")
        and module not in (*session.SHIPPED_PACKAGES, "pyspark", "py4j", "cython_runtime")
    }
    uncovered = {
        module
        for module in third_party
        if not {d.lower() for d in provided.get(module, [module])} & allowed
    }
    assert not uncovered


@pytest.mark.spark
def test_a_broken_accumulator_connection_is_logged_not_printed_as_a_traceback(spark, capsys):
    # PySpark's accumulator server prints a traceback when the JVM's connection breaks (a dead
    # JVM); ktk's session sends it to the log, and the CLI reports the dead JVM in one line
    server = spark.sparkContext._accumulatorServer
    try:
        raise EOFError
    except EOFError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
