"""Fixtures shared by the whole suite.

Reference vectors live in ``../shared/vectors`` beside the checkout (override with
``KTK_VECTORS``); a test that needs them fails when they are missing, so a run without them can
never pass by skipping. One SparkSession serves the whole run; it starts on first use.
Property tests are derandomized unless ``KTK_HYPOTHESIS=random``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests draw the same examples on every run, so a suite that passed passes again on
# the same code; KTK_HYPOTHESIS=random draws new examples each run (a search for new failures,
# reported with the seed that replays them). The fuzz suites choose their own (tests/fuzzing.py).
hypothesis_settings.register_profile("fixed", derandomize=True)
hypothesis_settings.register_profile("random", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("KTK_HYPOTHESIS", "fixed"))

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"


def ktk_process(*args: str, cwd: Path, **settings: Any) -> subprocess.Popen[bytes]:
    """`python -m ktk ARGS` with real standard streams (pipes unless ``settings`` say
    otherwise), this checkout on PYTHONPATH, 200 columns, and ``env`` added to the environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200"}
    env.update(settings.pop("env", {}))
    return subprocess.Popen(
        [sys.executable, "-m", "ktk", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **settings,
    )


def _vectors_dir() -> Path:
    return Path(os.environ.get("KTK_VECTORS", REPO_ROOT.parent / "shared" / "vectors"))


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    path = _vectors_dir()
    if not path.is_dir():
        pytest.fail(
            f"reference vectors not found at {path}: put Kafka's reference vectors there or "
            "point KTK_VECTORS at their directory",
            pytrace=False,
        )
    return path


_SPARK: dict[str, Any] = {}


@pytest.fixture
def spark() -> object:
    """The one SparkSession of the test run (local[2], quiet), started on first use. A test
    that exercises ktk's Ctrl-C handling in process stops the active session, as the command
    line must; the next test that needs Spark then gets a fresh one."""
    from spark_jobs.session import get_session

    session = _SPARK.get("session")
    if session is None or session.sparkContext._jsc is None:
        session = _SPARK["session"] = get_session(master="local[2]", app_name="ktk-tests")
    return session


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    started = _SPARK.pop("session", None)
    if started is not None:
        started.stop()
