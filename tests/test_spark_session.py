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
