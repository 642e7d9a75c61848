"""Live capture offline: trace rows from a leader's group and answer, capture files (append,
torn lines, other groups), merging by generation, and the adapter's recorder (a row only after
a successful sync, on the leader only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assignors.errors import InputError
from assignors.model import Group, Member, Topic, TopicPartition
from assignors.traces.capture import (
    CaptureRecorder,
    capture_row,
    merge_capture_files,
    read_capture,
)
from assignors.traces.files import read_traces

GROUP = Group(
    topics=(Topic("orders", 3, (frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"}))),),
    members=(
        Member("c0", frozenset({"orders"}), rack="a", instance_id="pod-0"),
        Member("c1", frozenset({"orders"}), rack="b"),
    ),
)
ANSWER = {
    "c0": (TopicPartition("orders", 0), TopicPartition("orders", 2)),
    "c1": (TopicPartition("orders", 1),),
}


def test_capture_row_holds_members_racks_and_the_answer() -> None:
    row = capture_row("payments", 7, GROUP, ANSWER, protocol="sticky", timestamp_ms=5)
    assert row["trace_id"] == "payments" and row["generation"] == 7
    assert row["topics"] == [
        {"name": "orders", "partitions": 3, "racks": [["a"], ["b"], ["a", "b"]]}
    ]
    assert row["members"][0] == {
        "member_id": "c0",
        "instance_id": "pod-0",
        "rack": "a",
        "topics": ["orders"],
        "assigned": [["orders", 0], ["orders", 2]],
    }


def test_capture_row_refuses_an_answer_naming_a_missing_partition() -> None:
    with pytest.raises(InputError, match=r"members\[0\]\.assigned\[0\]"):
        capture_row(
            "g", 1, GROUP, {"c0": [TopicPartition("orders", 9)]}, protocol=None, timestamp_ms=None
        )


def test_recorder_appends_one_fsynced_line_per_generation(tmp_path: Path) -> None:
    path = tmp_path / "capture.jsonl"
    recorder = CaptureRecorder(path, "payments")
    recorder.record(1, GROUP, ANSWER, protocol="range", timestamp_ms=1)
    recorder.record(2, GROUP, ANSWER, protocol="range", timestamp_ms=2)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    assert [json.loads(line)["generation"] for line in lines[:-1]] == [1, 2]
    (trace,), failures = read_traces([path])
    assert failures == [] and [g.generation for g in trace.generations] == [1, 2]


def test_recorder_refuses_a_capture_file_of_another_group_and_leaves_it_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "capture.jsonl"
    CaptureRecorder(path, "orders").record(1, GROUP, ANSWER, protocol=None, timestamp_ms=None)
    before = path.read_bytes()
    with pytest.raises(InputError, match=r"another group than 'payments'.*got 'orders'"):
        CaptureRecorder(path, "payments")
    assert path.read_bytes() == before


def test_recorder_cuts_a_torn_last_line_and_keeps_every_whole_row(tmp_path: Path) -> None:
    path = tmp_path / "capture.jsonl"
    CaptureRecorder(path, "g").record(1, GROUP, ANSWER, protocol=None, timestamp_ms=None)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"trace_id": "g", "genera')  # a write cut short by a crash
    assert read_capture(path)[1] is True
    recorder = CaptureRecorder(path, "g")
    assert path.read_bytes() == whole
    recorder.record(2, GROUP, ANSWER, protocol=None, timestamp_ms=None)
    generations, torn = read_capture(path)
    assert [g.generation for g in generations] == [1, 2] and not torn


def test_merge_keeps_one_row_per_generation_from_several_member_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    CaptureRecorder(first, "g").record(1, GROUP, ANSWER, protocol=None, timestamp_ms=1)
    CaptureRecorder(second, "g").record(3, GROUP, ANSWER, protocol=None, timestamp_ms=3)
    CaptureRecorder(first, "g").record(4, GROUP, ANSWER, protocol=None, timestamp_ms=4)
    (second.parent / "copy.jsonl").write_bytes(first.read_bytes())  # the same rows twice
    rows, notes = merge_capture_files([second, first, second.parent / "copy.jsonl"])
    assert [row["generation"] for row in rows] == [1, 3, 4] and notes == []


def test_merge_refuses_two_different_rows_for_one_generation(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    CaptureRecorder(first, "g").record(2, GROUP, ANSWER, protocol=None, timestamp_ms=1)
    CaptureRecorder(second, "g").record(2, GROUP, ANSWER, protocol=None, timestamp_ms=9)
    with pytest.raises(InputError, match="generation 2 differs between"):
        merge_capture_files([first, second])


def test_merge_refuses_files_of_two_groups(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    CaptureRecorder(first, "g").record(1, GROUP, ANSWER, protocol=None, timestamp_ms=1)
    CaptureRecorder(second, "h").record(2, GROUP, ANSWER, protocol=None, timestamp_ms=1)
    with pytest.raises(InputError, match=r"b.jsonl:1: trace_id: .*got 'h'"):
        merge_capture_files([first, second])


# --- `ktk traces capture` ----------------------------------------------------------------------


def _capture(*args: str):  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from ktk.cli import app

    return CliRunner().invoke(app, ["traces", "capture", *args])


def test_cli_merges_member_captures_into_a_trace_directory(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    CaptureRecorder(first, "pay/eu").record(1, GROUP, ANSWER, protocol="range", timestamp_ms=1)
    CaptureRecorder(second, "pay/eu").record(2, GROUP, ANSWER, protocol="range", timestamp_ms=2)
    outcome = _capture("--from", "leader", str(first), str(second), "--out", str(tmp_path / "t"))
    assert outcome.exit_code == 0, outcome.output
    assert "group pay/eu: 2 generations" in outcome.output
    (trace,), failures = read_traces([tmp_path / "t"])
    assert failures == [] and [g.generation for g in trace.generations] == [1, 2]
    assert (tmp_path / "t" / "leader-pay_eu.jsonl").is_file()


def test_cli_refuses_captures_of_two_groups_in_one_line(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    CaptureRecorder(first, "g").record(1, GROUP, ANSWER, protocol=None, timestamp_ms=1)
    CaptureRecorder(second, "h").record(2, GROUP, ANSWER, protocol=None, timestamp_ms=1)
    before = second.read_bytes()
    outcome = _capture("--from", "leader", str(first), str(second), "--out", str(tmp_path / "t"))
    assert outcome.exit_code == 2
    assert "b.jsonl:1: trace_id:" in outcome.output and "Traceback" not in outcome.output
    assert second.read_bytes() == before and not (tmp_path / "t").exists()


def test_cli_refuses_a_missing_capture_file_and_an_unknown_source(tmp_path: Path) -> None:
    missing = _capture(
        "--from", "leader", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "t")
    )
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output
    unknown = _capture("--from", "zookeeper", str(tmp_path / "x"), "--out", str(tmp_path / "t"))
    assert unknown.exit_code == 2
    assert "--from must be one of leader, describe, offsets-topic" in unknown.output


# --- the kafka-python adapter's recorder -------------------------------------------------------

kafka = pytest.importorskip("kafka")


class StandInCluster:
    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {0, 1, 2} if topic == "orders" else None


def _join(adapters: dict[str, object]) -> list[object]:
    from kafka.protocol.consumer.group import JoinGroupResponse

    return [
        JoinGroupResponse.JoinGroupResponseMember(
            member_id=member_id,
            group_instance_id=None,
            metadata=adapter.metadata({"orders"}).encode(),  # type: ignore[attr-defined]
        )
        for member_id, adapter in adapters.items()
    ]


def _adapters(path: Path) -> dict[str, object]:
    from assignors.protocol.kafka_python import kafka_python_assignor

    recorder = CaptureRecorder(path, "g")
    return {
        member_id: kafka_python_assignor("sticky", recorder=recorder) for member_id in ("c0", "c1")
    }


def test_adapter_records_the_leaders_generation_after_its_sync(tmp_path: Path) -> None:
    path = tmp_path / "capture.jsonl"
    adapters = _adapters(path)
    leader, follower = adapters["c0"], adapters["c1"]
    members = _join(adapters)
    answer = leader.assign(StandInCluster(), members)  # type: ignore[attr-defined]
    assert not path.exists()  # nothing before SyncGroup completed
    follower.on_assignment(answer["c1"], 5)  # type: ignore[attr-defined]
    assert not path.exists()  # followers never write
    leader.on_assignment(answer["c0"], 5)  # type: ignore[attr-defined]
    (generation,), _ = read_capture(path)
    assert generation.generation == 5 and generation.protocol == "sticky"
    assert {m.member_id: m.assigned for m in generation.members} == {
        member_id: tuple(TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions())
        for member_id, assignment in answer.items()
    }


def test_adapter_never_records_a_generation_whose_sync_failed(tmp_path: Path) -> None:
    path = tmp_path / "capture.jsonl"
    adapters = _adapters(path)
    leader = adapters["c0"]
    leader.assign(StandInCluster(), _join(adapters))  # type: ignore[attr-defined]
    # SyncGroup failed: the consumer rejoins, which starts with metadata(); then it follows
    leader.metadata({"orders"})  # type: ignore[attr-defined]
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    leader.on_assignment(ConsumerProtocolAssignment(0, [("orders", [1])], b""), 6)  # type: ignore[attr-defined]
    assert not path.exists()


# --- DescribeGroups answers -> rows ------------------------------------------------------------


def _described(state: str = "Stable", generation_ids: tuple[int, int] = (4, 4)):  # type: ignore[no-untyped-def]
    """A described group whose member metadata kafka-python's consumer itself encoded."""
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
    )

    from assignors.traces.capture import DescribedGroup, DescribedMember

    def subscription(generation: int, rack: str) -> bytes:
        return ConsumerProtocolSubscription(
            version=3,
            topics=["orders"],
            user_data=b"",
            owned_partitions=[],
            generation_id=generation,
            rack_id=rack,
        ).encode()

    def assignment(partitions: list[int]) -> bytes:
        return ConsumerProtocolAssignment(0, [("orders", partitions)], b"").encode()

    return DescribedGroup(
        "payments",
        state,
        "consumer",
        "cooperative-sticky",
        (
            DescribedMember(
                "m-1", "pod-1", subscription(generation_ids[0], "a"), assignment([0, 2])
            ),
            DescribedMember("m-2", None, subscription(generation_ids[1], "b"), assignment([1])),
        ),
    )


def test_described_row_decodes_members_and_estimates_the_generation() -> None:
    from assignors.traces.capture import described_row

    racks = {"orders": [frozenset({"a"}), frozenset({"b"}), frozenset({"a"})]}
    row = described_row(
        _described(), {"orders": 3}, racks, previous_generation=None, timestamp_ms=9
    )
    assert row is not None
    assert row["generation"] == 5 and "estimated" in row["reason"]
    assert row["protocol"] == "cooperative-sticky"
    assert row["topics"] == [{"name": "orders", "partitions": 3, "racks": [["a"], ["b"], ["a"]]}]
    assert row["members"] == [
        {
            "member_id": "m-1",
            "instance_id": "pod-1",
            "rack": "a",
            "topics": ["orders"],
            "assigned": [["orders", 0], ["orders", 2]],
        },
        {
            "member_id": "m-2",
            "instance_id": None,
            "rack": "b",
            "topics": ["orders"],
            "assigned": [["orders", 1]],
        },
    ]


def test_described_row_counts_changes_when_no_member_claims_a_generation() -> None:
    from assignors.traces.capture import described_row

    row = described_row(
        _described(generation_ids=(-1, -1)),
        {"orders": 3},
        None,
        previous_generation=7,
        timestamp_ms=None,
    )
    assert row is not None and row["generation"] == 8 and "counting changes" in row["reason"]


def test_described_row_skips_a_rebalancing_group() -> None:
    from assignors.traces.capture import described_row

    assert (
        described_row(
            _described("PreparingRebalance"),
            {"orders": 3},
            None,
            previous_generation=None,
            timestamp_ms=None,
        )
        is None
    )


def test_described_row_refuses_unreadable_metadata_naming_the_member() -> None:
    from dataclasses import replace

    from assignors.traces.capture import described_row

    group = _described()
    broken = replace(group, members=(replace(group.members[0], metadata=b"\x00"),))
    with pytest.raises(InputError, match=r"members\[0\]"):
        described_row(broken, {"orders": 3}, None, previous_generation=None, timestamp_ms=None)


def test_same_assignment_ignores_time_and_generation_estimates() -> None:
    from assignors.traces.capture import described_row, same_assignment

    first = described_row(
        _described(), {"orders": 3}, None, previous_generation=None, timestamp_ms=1
    )
    later = described_row(
        _described(generation_ids=(9, 9)),
        {"orders": 3},
        None,
        previous_generation=None,
        timestamp_ms=2,
    )
    grown = described_row(
        _described(), {"orders": 4}, None, previous_generation=None, timestamp_ms=3
    )
    assert same_assignment(first, later) and not same_assignment(first, grown)


def test_ctrl_c_during_a_long_capture_leaves_every_row_whole_on_disk(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "capture.jsonl"
    script = f"""
import sys
from assignors.model import Group, Member, Topic, TopicPartition
from assignors.traces.capture import CaptureRecorder
topics = (Topic("orders", 200),)
group = Group(topics, tuple(Member(f"c{{i}}", frozenset({{"orders"}})) for i in range(50)))
answer = {{f"c{{i}}": [TopicPartition("orders", p) for p in range(i, 200, 50)] for i in range(50)}}
recorder = CaptureRecorder({str(path)!r}, "g")
print("ready", flush=True)
generation = 0
while True:
    generation += 1
    recorder.record(generation, group, answer, protocol="range", timestamp_ms=generation)
"""
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    finally:
        process.kill()
    generations, torn = read_capture(path)
    assert not torn and len(generations) > 1
    assert [g.generation for g in generations] == list(range(1, len(generations) + 1))
