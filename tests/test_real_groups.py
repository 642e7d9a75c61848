"""ktk assignors inside real consumer groups: kafka-python consumers (threads of this process)
against librdkafka's mock cluster (tests/mock_cluster.py), each running a ktk assignor through
the kafka-python adapter with the leader recording the group's history.

Checked on what the consumers themselves were given: every stable generation is valid (each
partition owned once, every partition assigned); the capture the leader wrote holds exactly
what the consumers received; replayed offline, every captured generation gives the same answer
again (owned partitions = the previous generation's), and ``ktk replay`` of the capture scores
the `recorded` rows like the assignor the group ran. Groups of several kafka-python members do
not settle against the mock (docs/capture.md, "Limits of the mock"); ``run_group`` drives them
and is kept for a broker that does.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kafka")
pytest.importorskip("confluent_kafka")

from kafka import KafkaConsumer
from kafka.errors import KafkaError

from assignors.model import Group, TopicPartition
from assignors.model import Member as GroupMember
from assignors.protocol.kafka_python import kafka_python_assignor
from assignors.registry import get
from assignors.traces.capture import CaptureRecorder, read_capture
from assignors.traces.files import read_traces
from assignors.traces.format import Generation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mock_cluster import MockCluster

pytestmark = pytest.mark.slow

TOPICS = {"orders": 7, "audit": 3}
ALL_PARTITIONS = frozenset(
    TopicPartition(topic, partition)
    for topic, count in TOPICS.items()
    for partition in range(count)
)
STABLE_TIMEOUT_S = 30.0
SETTLE_S = 1.0


class Member:
    """One kafka-python consumer polling in a thread; remembers every assignment it received."""

    def __init__(self, name: str, assignor: str, bootstrap: str, group_id: str, capture: Path):
        self.name = name
        self.adapter = kafka_python_assignor(assignor, recorder=CaptureRecorder(capture, group_id))
        self.received: dict[int, frozenset[TopicPartition]] = {}
        self.member_ids: dict[int, str] = {}
        adapter_on_assignment = self.adapter.on_assignment

        def on_assignment(assignment: Any, generation: int) -> None:
            adapter_on_assignment(assignment, generation)
            self.received[generation] = frozenset(
                TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()
            )
            self.member_ids[generation] = self.consumer._coordinator._generation.member_id

        self.adapter.on_assignment = on_assignment
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            api_version=(2, 3),
            group_id=group_id,
            client_id=name,
            partition_assignment_strategy=[self.adapter],
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
        )
        self.consumer.topics()  # the leader must know every partition count before it assigns
        self.consumer.subscribe(list(TOPICS))
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        # the mock answers a SyncGroup racing a new join with INVALID_REQUEST (docs/capture.md)
        self.errors: list[KafkaError] = []
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    self.consumer.poll(timeout_ms=100)
                except KafkaError as error:  # as applications do: log and poll again
                    self.errors.append(error)
        except BaseException as error:  # surfaced by the test, not lost in the thread
            self.failure = error
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=15)

    def latest(self) -> tuple[int, frozenset[TopicPartition]] | None:
        if not self.received:
            return None
        generation = max(self.received)
        return generation, self.received[generation]


def _captured(capture: Path) -> dict[int, Generation]:
    if not capture.exists():
        return {}
    generations, _ = read_capture(capture)
    return {generation.generation: generation for generation in generations}


def wait_stable(members: list[Member], capture: Path) -> int:
    """The generation all ``members`` settle on with every partition assigned (and captured)."""
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    candidate: tuple[int, float] | None = None
    while time.monotonic() < deadline:
        for member in members:
            assert member.failure is None, f"{member.name}: {member.failure!r}"
        latest = [member.latest() for member in members]
        generations = {entry[0] for entry in latest if entry is not None}
        stable = None
        if None not in latest and len(generations) == 1:
            generation = generations.pop()
            owned = [entry[1] for entry in latest if entry is not None]
            if frozenset().union(*owned) == ALL_PARTITIONS and generation in _captured(capture):
                stable = generation
        if stable is None:
            candidate = None
        elif candidate is None or candidate[0] != stable:
            candidate = (stable, time.monotonic())
        elif time.monotonic() - candidate[1] >= SETTLE_S:
            return stable
        time.sleep(0.1)
    raise AssertionError(
        f"no stable generation within {STABLE_TIMEOUT_S} s: "
        f"{[(member.name, member.latest()) for member in members]}"
    )


def check_valid(members: list[Member], generation: int) -> None:
    owned = [member.received[generation] for member in members]
    assert sum(len(partitions) for partitions in owned) == len(ALL_PARTITIONS)
    assert frozenset().union(*owned) == ALL_PARTITIONS


def reassign_offline(assignor_name: str, generations: list[Generation]) -> Iterator[int]:
    """Run the assignor on every captured group (owned = the previous captured answer) and
    yield each generation whose answer it reproduces; the caller compares with all of them."""
    assignor = get(assignor_name)
    previous: Generation | None = None
    for generation in generations:
        owned = {}
        if previous is not None:
            owned = {member.member_id: member.assigned or () for member in previous.members}
        group = Group(
            generation.topics,
            tuple(
                replace(
                    GroupMember(
                        member.member_id,
                        member.topics,
                        rack=member.rack,
                        instance_id=member.instance_id,
                    ),
                    owned_partitions=tuple(owned.get(member.member_id, ())),
                    generation=previous.generation
                    if previous is not None and member.member_id in owned
                    else -1,
                )
                for member in generation.members
            ),
        )
        answer = assignor.assign(group)
        recorded = {member.member_id: tuple(member.assigned or ()) for member in generation.members}
        if dict(answer.partitions) == recorded:
            yield generation.generation
        previous = generation


def run_group(assignor: str, capture: Path, bootstrap: str, group_id: str) -> list[int]:
    """Three members join, a fourth joins, the first leaves; the stable generations."""
    members = [Member(f"c{i}", assignor, bootstrap, group_id, capture) for i in range(3)]
    stable = [wait_stable(members, capture)]
    members.append(Member("c3", assignor, bootstrap, group_id, capture))
    stable.append(wait_stable(members, capture))
    leaving = members.pop(0)
    leaving.stop()
    stable.append(wait_stable(members, capture))
    for member in members:
        member.stop()
    everyone = [leaving, *members]
    for generation in stable:
        present = [member for member in everyone if generation in member.received]
        check_valid(present, generation)
    check_capture_matches(everyone, capture)
    return stable


def check_capture_matches(members: list[Member], capture: Path) -> None:
    """Every captured generation holds exactly what each member received in it."""
    captured = _captured(capture)
    assert captured
    for generation, row in captured.items():
        given = {
            member.member_ids[generation]: member.received[generation]
            for member in members
            if generation in member.received
        }
        recorded = {member.member_id: frozenset(member.assigned or ()) for member in row.members}
        assert recorded == given, f"generation {generation}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(TOPICS, racks=["a", "b", "c"], lifetime_s=240) as running:
        yield running


def test_ktk_replay_of_a_live_capture_shows_what_the_group_did(
    cluster: MockCluster, tmp_path: Path
) -> None:
    capture = tmp_path / "captures" / "capture.jsonl"
    capture.parent.mkdir()
    member = Member("solo", "sticky", cluster.bootstrap_servers, "group-replayed", capture)
    wait_stable([member], capture)
    member.stop()
    check_capture_matches([member], capture)
    out = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktk",
            "replay",
            str(capture.parent),
            "--engine",
            "python",
            "--assignors",
            "recorded,sticky",
            "--no-timings",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    from assignors.traces.results import read_scores

    rows = read_scores(out)
    recorded = [row for row in rows if row.assignor == "recorded"]
    sticky = [row for row in rows if row.assignor == "sticky"]
    assert [row.generation for row in recorded] == sorted(_captured(capture))
    # the group ran ktk's sticky, so replaying sticky offline scores the same as the recording
    keys = ("members", "partitions", "unassigned", "invalid", "max_load", "moved", "min_moved")
    assert [[getattr(row, key) for key in keys] for row in recorded] == [
        [getattr(row, key) for key in keys] for row in sticky
    ]


def test_a_single_member_group_is_captured_and_replays(
    cluster: MockCluster, tmp_path: Path
) -> None:
    capture = tmp_path / "capture.jsonl"
    member = Member("solo", "sticky", cluster.bootstrap_servers, "group-solo", capture)
    generation = wait_stable([member], capture)
    member.stop()
    check_valid([member], generation)
    check_capture_matches([member], capture)
    (trace,), failures = read_traces([capture])
    assert failures == []
    assert list(reassign_offline("sticky", list(trace.generations))) == [
        g.generation for g in trace.generations
    ]
