"""`ktk log inspect` and `ktk log compare` on the log directories the simulator leaves behind
(`ktk replicate run --log-dir`), and the simulator's files read back with kafka_format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from kafka_format.checkpoint import (
    REPLICATION_OFFSET_CHECKPOINT,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
)
from kafka_format.segment import read_segment_file
from ktk.cli import app
from replication.modes import MODE_NAMES
from replication.sim import load_scenario, run_scenario
from replication.storage import LEADER_EPOCH_CHECKPOINT, DiskLogStorage

SCENARIOS = EXAMPLES / "scenarios"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def first_difference(logs: list[list[list[Any]]]) -> tuple[int, list[int]] | None:
    """Where the simulator's final logs first differ: (offset, each replica's epoch there)."""
    for offset in range(min(len(log) for log in logs)):
        if len({(log[offset][1], log[offset][2]) for log in logs}) > 1:
            return offset, [log[offset][1] for log in logs]
    return None


@pytest.mark.parametrize(
    ("scenario", "mode"),
    [
        ("s2-both-lose-unflushed", "pre-0.11"),
        ("s3-fast-leader-changes", "pre-0.11"),
        ("s3-fast-leader-changes", "kip-101"),
    ],
)
def test_ktk_log_compare_finds_the_divergence_the_simulator_left_on_disk(
    scenario: str, mode: str, tmp_path: Path
) -> None:
    path = SCENARIOS / f"{scenario}.yaml"
    log_dir = tmp_path / "logs"
    ran = invoke("replicate", "run", str(path), "--mode", mode, "--json", "--log-dir", str(log_dir))
    assert ran.exit_code == 0, ran.output  # every expect step of the scenario held
    result = json.loads(ran.stdout)
    brokers = sorted(result["replicas"], key=int)
    partitions = [str(log_dir / f"broker-{broker}" / "ktk-0") for broker in brokers]

    compared = invoke("log", "compare", "--json", *partitions)
    report = json.loads(compared.stdout)
    (pair,) = report["pairs"]
    expected = first_difference([result["replicas"][broker]["log"] for broker in brokers])
    if expected is None:
        assert compared.exit_code == 0, compared.output
        assert pair["relation"] in ("identical", "prefix")
        assert pair["divergence"] is None
    else:
        offset, epochs = expected
        assert compared.exit_code == 1, compared.output
        assert pair["relation"] == "diverged"
        assert pair["divergence"]["offset"] == offset
        assert pair["divergence"]["epochs"] == epochs
        assert pair["agreed_until"] == offset
    # the scenario's own verdict: the replicas diverged, or they did not
    assert result["diverged"] == (expected is not None)
    for replica, broker in zip(report["replicas"], brokers, strict=True):
        assert replica["log_end_offset"] == result["replicas"][broker]["leo"]
        assert replica["high_watermark"] == result["replicas"][broker]["hw"]

    for broker in brokers:
        inspected = invoke("log", "inspect", "--json", str(log_dir / f"broker-{broker}"))
        assert inspected.exit_code == 0, inspected.output
        document = json.loads(inspected.stdout)
        assert document["verdict"]["ok"] is True
        assert document["verdict"]["problems"] == 0


def test_s2_in_pre_011_diverges_at_offset_1_between_epochs_0_and_3(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    path = SCENARIOS / "s2-both-lose-unflushed.yaml"
    ran = invoke("replicate", "run", str(path), "--mode", "pre-0.11", "--log-dir", str(log_dir))
    assert ran.exit_code == 0, ran.output
    first, second = (str(log_dir / f"broker-{broker}" / "ktk-0") for broker in (1, 2))
    compared = invoke("log", "compare", first, second)
    assert compared.exit_code == 1
    assert "diverged at offset 1 (leader epoch)" in compared.stdout
    assert "leader epochs there 0 and 3" in compared.stdout


def test_replicate_run_log_dir_refuses_a_directory_ktk_did_not_create(tmp_path: Path) -> None:
    foreign = tmp_path / "data"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    path = SCENARIOS / "s2-both-lose-unflushed.yaml"
    ran = invoke("replicate", "run", str(path), "--log-dir", str(foreign))
    assert ran.exit_code == 2
    assert sorted(p.name for p in foreign.iterdir()) == ["keep.txt"]


def test_replicate_run_log_dir_writes_nothing_for_an_invalid_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: bad\nconfig: {brokers: [1], replicas: [1]}\nsteps: [{jump: 1}]\n")
    ran = invoke("replicate", "run", str(scenario), "--log-dir", str(tmp_path / "logs"))
    assert ran.exit_code == 2
    assert "Traceback" not in ran.output
    assert not (tmp_path / "logs").exists()


def test_replicate_run_log_dir_writes_the_same_bytes_twice(tmp_path: Path) -> None:
    path = SCENARIOS / "s3-fast-leader-changes.yaml"

    def files(log_dir: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(log_dir)): p.read_bytes()
            for p in sorted(log_dir.rglob("*"))
            if p.is_file() and p.name != ".ktk-output.json"
        }

    for name in ("first", "second"):
        ran = invoke("replicate", "run", str(path), "--log-dir", str(tmp_path / name))
        assert ran.exit_code == 0, ran.output
    assert files(tmp_path / "first") == files(tmp_path / "second")
    assert any(name.endswith(".log") for name in files(tmp_path / "first"))


SCENARIO_FILES = sorted(
    path for path in SCENARIOS.glob("*") if path.suffix in (".json", ".yaml", ".yml")
)


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[path.stem for path in SCENARIO_FILES])
def test_the_simulators_segments_decode_to_its_in_memory_logs(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    for mode in MODE_NAMES:
        run_dir = tmp_path / mode

        def disk_storage(
            broker_id: int, run_dir: Path = run_dir, partition: int = 0
        ) -> DiskLogStorage:
            # small segments: the logs roll and get index entries
            return DiskLogStorage(
                run_dir / f"broker-{broker_id}",
                partition=partition,
                segment_bytes=150,
                index_interval_bytes=60,
            )

        result = cast(
            dict[str, Any], run_scenario(scenario, mode, storage_factory=disk_storage).to_json()
        )
        for index, partition in enumerate(result.get("partitions") or [result]):
            _check_partition_on_disk(scenario, mode, run_dir, index, partition)


def _check_partition_on_disk(
    scenario: Any, mode: str, run_dir: Path, index: int, result: dict[str, Any]
) -> None:
    """Partition ``index``'s segments and checkpoints on every broker match its result."""
    for broker, replica in result["replicas"].items():
        broker_dir = run_dir / f"broker-{broker}"
        partition_dir = broker_dir / f"ktk-{index}"
        on_disk = []
        for segment in sorted(partition_dir.glob("*.log")):
            scan = read_segment_file(segment)
            assert scan.error is None and scan.trailing_bytes == 0
            for batch in scan.batches:
                assert batch.is_valid and batch.magic == 2
                for record in batch.records():
                    value = (record.value or b"").decode("utf-8")
                    on_disk.append([record.offset, batch.partition_leader_epoch, value])
        assert on_disk == replica["log"], (mode, broker)
        high_watermarks = parse_offset_checkpoint(
            (broker_dir / REPLICATION_OFFSET_CHECKPOINT).read_text()
        )
        if scenario.config.high_watermark_checkpoint_interval_ms is None:
            assert high_watermarks[("ktk", index)] == replica["hw"]
            assert {partition for _, partition in high_watermarks} <= set(
                range(len(scenario.config.partition_replicas))
            )
        else:
            # checkpointed periodically: the file may lag the HW in memory, never lead it
            assert high_watermarks[("ktk", index)] <= replica["hw"]
        epochs = parse_leader_epoch_checkpoint(
            (partition_dir / LEADER_EPOCH_CHECKPOINT).read_text()
        )
        assert [list(entry) for entry in epochs] == replica["epoch_cache"]
