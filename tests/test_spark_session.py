"""The Spark session's Java check and --conf parsing (no JVM started here)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

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


def test_check_java_without_any_java_says_how_to_install(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "absent"))
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    with pytest.raises(session.JavaNotFoundError, match="no `java` found"):
        session.check_java()


def test_parse_conf_splits_at_the_first_equals_sign() -> None:
    conf = session.parse_conf(["spark.executor.memory=4g", "spark.x.opts=-Da=b"])
    assert conf == {"spark.executor.memory": "4g", "spark.x.opts": "-Da=b"}


@pytest.mark.parametrize("bad", ["spark.executor.memory", "=4g", " =x"])
def test_parse_conf_rejects_pairs_without_a_key_or_equals_sign(bad) -> None:
    with pytest.raises(ValueError, match="key=value"):
        session.parse_conf([bad])
