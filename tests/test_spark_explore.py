"""The Spark exploration job (spark_jobs/explore_schedules.py) and `ktk replicate explore
--engine`: the same seeds give the same findings, first schedules and scenario files byte for
byte as the one-process explorer; bad options are one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ktk.cli import app
from ktkbase.errors import OutputError
from replication.explore import explore, explore_settings
from replication.producer import ProducerSettings
from spark_jobs.explore_schedules import main, run, schedule_ranges

# small explorations that still find several classes, shrink several schedules of a signature
# and cut over many tasks (local[2]: 6 ranges)
CASES: list[tuple[str, dict[str, Any]]] = [
    ("kip-101", {"brokers": (1, 2), "schedules": 300, "seed": 4, "shrink_per_class": 3}),
    ("current", {"unclean_leader_election": True, "schedules": 60, "seed": 1, "link_cuts": True}),
    ("kip-101", {"brokers": (1, 2), "schedules": 200, "seed": 2, "stop_when_found": ("S5",)}),
    (
        "current",
        {
            "brokers": (1, 2),
            "producer": ProducerSettings(acks=1, max_in_flight=3),
            "schedules": 150,
            "seed": 1,
            "disk_faults": True,
        },
    ),
]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["replicate", "explore", *args])


def scenario_files(directory: Path) -> dict[str, bytes]:
    """The scenario files of an --out directory (not ktk's manifest, which holds a time)."""
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.glob("*.json"))
        if not path.name.startswith(".")
    }


def without_timing(document: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in document.items() if k not in ("elapsed_seconds", "schedules_per_second")
    }


@pytest.mark.spark
@pytest.mark.parametrize(("mode", "options"), CASES)
def test_spark_exploration_gives_the_one_process_report_and_files(
    spark: Any, tmp_path: Path, mode: str, options: dict[str, Any]
) -> None:
    in_process = explore(mode, **options, out_dir=tmp_path / "python")
    result = run(explore_settings(mode, **options), spark=spark, out_dir=str(tmp_path / "spark"))
    assert len(result.ranges) > 1
    assert json.dumps(result.report.to_json()) == json.dumps(in_process.to_json())
    assert in_process.findings
    files = scenario_files(tmp_path / "spark")
    assert files == scenario_files(tmp_path / "python")
    assert sorted(files) == sorted(finding.file_name for finding in in_process.findings)
    assert (tmp_path / "spark" / ".ktk-output.json").is_file()


@pytest.mark.spark
def test_spark_exploration_writes_the_same_files_to_a_hadoop_uri(
    spark: Any, tmp_path: Path
) -> None:
    mode, options = CASES[1]
    explore(mode, **options, out_dir=tmp_path / "python")
    target = tmp_path / "uri"
    settings = explore_settings(mode, **options)
    run(settings, spark=spark, out_dir=f"file://{target}")
    assert scenario_files(target) == scenario_files(tmp_path / "python")
    assert (target / ".ktk-output.json").is_file()
    # a second run replaces its own directory; a foreign one is refused
    run(settings, spark=spark, out_dir=f"file://{target}")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError):
        run(settings, spark=spark, out_dir=f"file://{foreign}")
    assert sorted(path.name for path in foreign.iterdir()) == ["notes.txt"]


@pytest.mark.spark
def test_spark_exploration_reports_progress_from_none_to_every_schedule(spark: Any) -> None:
    mode, options = CASES[1]
    seen: list[tuple[int, int]] = []
    result = run(explore_settings(mode, **options), spark=spark, progress=lambda *p: seen.append(p))
    total = options["schedules"]
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert all(0 <= done <= total and whole == total for done, whole in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert result.report.schedules == total


@pytest.mark.spark
def test_explore_engine_spark_prints_and_writes_what_engine_python_does(
    spark: Any, tmp_path: Path
) -> None:
    args = ("--mode", "pre-0.11", "--min-isr", "1", "--schedules", "80", "--seed", "3", "--json")
    python = invoke(*args, "--engine", "python", "--out", str(tmp_path / "python"))
    on_spark = invoke(*args, "--engine", "spark", "--out", str(tmp_path / "spark"))
    assert python.exit_code == on_spark.exit_code == 1, on_spark.output
    first, second = json.loads(python.stdout), json.loads(on_spark.stdout)
    assert without_timing(first) == without_timing(second)
    assert second["classes"] and second["schedules_per_second"] > 0
    assert scenario_files(tmp_path / "spark") == scenario_files(tmp_path / "python")
    manifest = json.loads((tmp_path / "spark" / ".ktk-output.json").read_text())
    assert manifest["command"] == "replicate explore"


@pytest.mark.spark
def test_the_spark_submit_entry_point_writes_the_findings_and_exits_1(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--mode", "pre-0.11", "--min-isr", "1", "--schedules", "80", "--seed", "3"]
    assert main([*args, "--out", str(tmp_path / "found")]) == 1
    expected = explore("pre-0.11", min_insync_replicas=1, schedules=80, seed=3)
    assert capsys.readouterr().out.startswith(expected.summary().splitlines()[0].split(":")[0])
    assert sorted(scenario_files(tmp_path / "found")) == sorted(
        finding.file_name for finding in expected.findings
    )
    manifest = json.loads((tmp_path / "found" / ".ktk-output.json").read_text())
    assert manifest["command"] == "spark_jobs/explore_schedules.py"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--engine", "flink"), "--engine must be one of auto, python, spark (got 'flink')"),
        (("--engine", "spark", "--conf", "no-equals-sign"), "--conf expects key=value"),
        (("--quorum", "3", "--engine", "spark"), "a quorum exploration runs in process"),
    ],
)
def test_explore_bad_engine_options_are_one_line_and_exit_2(
    args: tuple[str, ...], message: str
) -> None:
    outcome = invoke("--schedules", "10", *args)
    assert outcome.exit_code == 2, outcome.output
    assert message in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1
    assert "Traceback" not in outcome.output


def test_the_spark_submit_entry_point_reports_bad_producer_settings_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--idempotence", "--acks", "1", "--schedules", "10"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: acks: the idempotent producer needs acks=all")
    assert len(error.strip().splitlines()) == 1


def test_explore_on_spark_refuses_a_foreign_out_dir_before_starting_spark(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    # a master no JVM could reach: the refusal must come first
    outcome = invoke("--schedules", "10", "--master", "spark://nowhere:1", "--out", str(target))
    assert outcome.exit_code == 2, outcome.output
    assert "notes.txt" in outcome.stderr or "did not create" in outcome.stderr
    assert sorted(path.name for path in target.iterdir()) == ["notes.txt"]


def test_schedule_ranges_cover_every_schedule_once_in_order() -> None:
    for schedules in (0, 1, 5, 17, 1000):
        for tasks in (1, 2, 6, 40):
            ranges = schedule_ranges(schedules, tasks)
            assert [i for start, end in ranges for i in range(start, end)] == list(range(schedules))
            sizes = [end - start for start, end in ranges]
            assert not sizes or max(sizes) - min(sizes) <= 1
