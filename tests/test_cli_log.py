"""`ktk log inspect DIR` and `ktk log compare DIR...`: text, JSON, exit 0/1/2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_dirs import epoch_batches, snapshot, write_log_dir_checkpoints, write_partition
from typer.testing import CliRunner

from kafka_format.partition_dir import segment_file_name
from ktk.cli import app


def invoke(*args: str):
    return CliRunner().invoke(app, ["log", *args])


def _log_dir(tmp_path: Path) -> Path:
    write_partition(tmp_path, "orders", 0, [epoch_batches((0, 0, 1)), epoch_batches((1, 2), 6)])
    write_partition(tmp_path, "orders", 1, [epoch_batches((0,))])
    write_log_dir_checkpoints(tmp_path, high_watermarks={("orders", 0): 8, ("orders", 1): 2})
    return tmp_path


def _corrupt(partition: Path) -> None:
    log = partition / segment_file_name(0, "log")
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF
    log.write_bytes(bytes(data))


def test_inspect_clean_log_dir_prints_partitions_and_exits_0(tmp_path: Path):
    outcome = invoke("inspect", str(_log_dir(tmp_path)))
    assert outcome.exit_code == 0, outcome.output
    assert f"log directory {tmp_path}" in outcome.stdout
    assert "log end offset 10; high watermark 8" in outcome.stdout
    assert "leader-epoch cache: 0@0 1@4 2@8" in outcome.stdout
    assert "segment 6: " in outcome.stdout and "3 batches, offsets 0..5" in outcome.stdout
    assert outcome.stdout.rstrip().endswith("OK: 2 partitions, no problems")


def test_inspect_with_problems_exits_1_and_names_file_byte_and_field(tmp_path: Path):
    _corrupt(_log_dir(tmp_path) / "orders-0")
    outcome = invoke("inspect", str(tmp_path / "orders-0"))
    assert outcome.exit_code == 1, outcome.output
    log = tmp_path / "orders-0" / segment_file_name(0, "log")
    assert f"problem {log}: byte 17: batch.crc: Record is corrupt" in outcome.stdout
    assert "PROBLEMS FOUND: 1 problem in 1 partition (crc-mismatch 1)" in outcome.stdout


def test_inspect_json_is_stable_and_keyed_for_scripts(tmp_path: Path):
    _corrupt(_log_dir(tmp_path) / "orders-0")
    first = invoke("inspect", str(tmp_path), "--json")
    second = invoke("inspect", str(tmp_path), "--json")
    assert first.exit_code == second.exit_code == 1
    assert first.stdout == second.stdout
    document = json.loads(first.stdout)
    assert list(document) == [
        "path",
        "kind",
        "checkpoints",
        "meta_properties",
        "findings",
        "partitions",
        "verdict",
    ]
    assert document["verdict"]["problems"] == 1 and document["verdict"]["ok"] is False
    orders_0 = document["partitions"][0]
    assert orders_0["high_watermark"] == 8 and orders_0["log_end_offset"] == 10
    assert orders_0["segments"][0]["crc_failures"] == [0]
    assert orders_0["findings"][0]["kind"] == "crc-mismatch"
    assert orders_0["findings"][0]["position"] == 17
    assert document["checkpoints"]["replication-offset-checkpoint"] == [
        {"topic": "orders", "partition": 0, "offset": 8},
        {"topic": "orders", "partition": 1, "offset": 2},
    ]
    assert orders_0["leader_epoch_cache"][1] == {"epoch": 1, "start_offset": 4}
    assert orders_0["segments"][0]["offset_index"]["first_entry"] == {"offset": 3, "position": 165}


def test_inspect_missing_directory_is_one_line_and_exit_2(tmp_path: Path):
    outcome = invoke("inspect", str(tmp_path / "gone"))
    assert outcome.exit_code == 2
    assert outcome.output.strip() == f"error: {tmp_path / 'gone'}: no such directory"


def test_inspect_bad_checkpoint_is_reported_not_fatal(tmp_path: Path):
    _log_dir(tmp_path)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n2\norders 0 x\norders 1 2\n")
    outcome = invoke("inspect", str(tmp_path))
    assert outcome.exit_code == 1, outcome.output
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    assert (
        f"problem {checkpoint}:3: offset: malformed line: not an int64 (got 'x') (bad-checkpoint)"
        in outcome.stdout
    )
    assert "log end offset 10; high watermark 8" in outcome.stdout


def test_compare_diverged_replicas_exit_1_with_offset_and_epochs(tmp_path: Path):
    common = epoch_batches((0, 1))
    one = write_partition(tmp_path / "b1", "orders", 0, [common + epoch_batches((1,), 4)])
    two = write_partition(tmp_path / "b2", "orders", 0, [common + epoch_batches((3, 3), 4)])
    outcome = invoke("compare", str(one), str(two))
    assert outcome.exit_code == 1, outcome.output
    assert "#0 vs #1: diverged at offset 4 (leader epoch)" in outcome.stdout
    assert "leader epochs there 1 and 3" in outcome.stdout
    assert "DIVERGED: 1 of 1 replica pairs differ; first divergence at offset 4" in outcome.stdout
    document = json.loads(invoke("compare", str(one), str(two), "--json").stdout)
    divergence = document["pairs"][0]["divergence"]
    assert (divergence["offset"], divergence["epochs"]) == (4, [1, 3])
    assert [r["log_end_offset"] for r in document["replicas"]] == [6, 8]
    cache = document["replicas"][1]["leader_epoch_cache"]
    assert [(e["epoch"], e["start_offset"]) for e in cache] == [(0, 0), (1, 2), (3, 4)]


def test_compare_prefix_exits_0(tmp_path: Path):
    batches = epoch_batches((0, 1, 1))
    one = write_partition(tmp_path / "b1", "orders", 0, [batches])
    two = write_partition(tmp_path / "b2", "orders", 0, [batches[:2]])
    before = snapshot(tmp_path)
    outcome = invoke("compare", str(one), str(two))
    assert outcome.exit_code == 0, outcome.output
    assert "#0 vs #1: #1 is a prefix of #0 (same batches from offset 0 up to 4)" in outcome.stdout
    assert "AGREE" in outcome.stdout
    assert snapshot(tmp_path) == before


def test_compare_needs_two_directories_exit_2(tmp_path: Path):
    one = write_partition(tmp_path, "orders", 0, [epoch_batches((0,))])
    outcome = invoke("compare", str(one))
    assert outcome.exit_code == 2
    assert outcome.output.strip() == "error: DIR: give at least two partition directories"
    missing = invoke("compare", str(one), str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert missing.output.strip() == f"error: {tmp_path / 'nope'}: no such directory"


def test_help_documents_the_exit_codes():
    for verb in ("inspect", "compare"):
        outcome = invoke(verb, "--help")
        assert outcome.exit_code == 0
        assert "Exit codes: 0" in " ".join(outcome.stdout.split())
