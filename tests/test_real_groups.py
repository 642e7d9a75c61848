"""ktk assignors inside real consumer groups: kafka-python consumers (threads of this process)
against librdkafka's mock cluster (tests/mock_cluster.py), each running a ktk assignor through
the kafka-python adapter with the leader recording the group's history.

Checked on what the consumers themselves were given: every stable generation is valid (each
partition owned once, every partition assigned); the capture the leader wrote holds exactly
what the consumers received; replayed offline, every captured generation gives the same answer
again (owned partitions = the previous generation's), and ``ktk traces capture --from leader``
then ``ktk replay`` of the capture scores the `recorded` rows like the assignor the group ran.
Mixed groups add a confluent-kafka (librdkafka) member on range and roundrobin, with a
kafka-python member leading. The mock's limits (docs/capture.md) shape the timing settings
below. In the default run; ``KTK_REAL_GROUPS=0`` skips them.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
from assignors.traces.replay import replay_recorded

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mock_cluster import MockCluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("KTK_REAL_GROUPS") == "0",
        reason="real-group tests against librdkafka's mock cluster: KTK_REAL_GROUPS=0 skips them",
    ),
]

TOPICS = {"orders": 7, "audit": 3}
ALL_PARTITIONS = frozenset(
    TopicPartition(topic, partition)
    for topic, count in TOPICS.items()
    for partition in range(count)
)
STABLE_TIMEOUT_S = 45.0
TEST_BUDGET_S = 100.0
"""No test runs longer (they take 10-30 s each on a loaded 2-core machine): every wait for a stable
group ends at this budget's deadline as well as at its own timeout."""
_deadline = [float("inf")]
SETTLE_S = 1.0
SESSION_TIMEOUT_MS = 4000
"""The mock waits session timeout - 1 s for members to join a rebalance that adds a member."""
POLL_TIMEOUT_MS = 2000
"""Each consumer polls this long. kafka-python (3.0) keeps a JoinGroup+SyncGroup round running
when a poll times out, but the next poll starts a new JoinGroup instead of taking the result of
a round that finished in between, and the mock starts a rebalance for every JoinGroup of a
settled group (a broker answers a known follower's rejoin with its current assignment). With
100 ms polls that lost round came every few rebalances under load, and each costs the mock's
join window again; polls longer than a round make it rare."""
LEADER_SYNC_DELAY_S = 0.3
"""The mock completes SyncGroup as soon as the leader's arrives and answers a follower's later
SyncGroup with INVALID_REQUEST; the leader waits this long so followers sync first."""


class Member:
    """One kafka-python consumer polling in a thread; remembers every assignment it received."""

    def __init__(self, name: str, assignor: str, bootstrap: str, group_id: str, capture: Path):
        self.name = name
        self.adapter = kafka_python_assignor(assignor, recorder=CaptureRecorder(capture, group_id))
        self.received: dict[int, frozenset[TopicPartition]] = {}
        self.member_ids: dict[int, str] = {}
        adapter_on_assignment = self.adapter.on_assignment
        adapter_assign = self.adapter.assign

        def assign(cluster: Any, members: Any) -> Any:
            answer = adapter_assign(cluster, members)
            time.sleep(LEADER_SYNC_DELAY_S)
            return answer

        self.adapter.assign = assign

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
            session_timeout_ms=SESSION_TIMEOUT_MS,
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
                    self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
                except KafkaError as error:  # as applications do: log and poll again
                    self.errors.append(error)
        except BaseException as error:  # surfaced by the test, not lost in the thread
            self.failure = error
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=15)

    @staticmethod
    def stop_all(members: list[Member]) -> None:
        """Stop members together: each finishes its current poll at the same time."""
        for member in members:
            member.stopping.set()
        for member in members:
            member.stop()

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
    deadline = _wait_deadline()
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
        f"no stable generation within {STABLE_TIMEOUT_S} s (or the test's budget): "
        f"{[(member.name, member.latest(), member.errors) for member in members]}"
    )


def _wait_deadline() -> float:
    return min(time.monotonic() + STABLE_TIMEOUT_S, _deadline[0])


@pytest.fixture(autouse=True)
def time_budget() -> Iterator[None]:
    """Every test of this file ends within TEST_BUDGET_S (its waits fail at the deadline)."""
    _deadline[0] = time.monotonic() + TEST_BUDGET_S
    yield
    _deadline[0] = float("inf")


def check_valid(members: list[Member], generation: int) -> None:
    owned = [member.received[generation] for member in members]
    assert sum(len(partitions) for partitions in owned) == len(ALL_PARTITIONS)
    assert frozenset().union(*owned) == ALL_PARTITIONS


def balanced_min_moved(previous: Generation, current: Generation) -> int:
    """The fewest partitions a balanced assignment (loads differ by at most one) moves away
    from members present in both generations, every member subscribing to every topic: of
    ``M`` members, ``P % M`` may keep ``P // M + 1`` partitions, the others ``P // M``."""
    partitions = sum(topic.num_partitions for topic in current.topics)
    present = {member.member_id for member in current.members}
    held = sorted(
        (len(member.assigned or ()) for member in previous.members if member.member_id in present),
        reverse=True,
    )
    quota, extra = divmod(partitions, len(current.members))
    kept = sum(min(count, quota + 1 if rank < extra else quota) for rank, count in enumerate(held))
    return sum(held) - kept


def claims_of(members: list[Member], member_id: str, before: int) -> tuple[tuple, int]:
    """What a member's JoinGroup claimed in generation ``before``: the last assignment it
    received (and that generation), as the adapter's ``metadata()`` sends it; ``((), -1)`` new."""
    for member in members:
        received = [g for g, mid in member.member_ids.items() if mid == member_id and g < before]
        if received:
            last = max(received)
            return tuple(sorted(member.received[last])), last
    return (), -1


def reassign_offline(
    assignor_name: str, generations: list[Generation], members: list[Member]
) -> Iterator[int]:
    """Run the assignor on every captured group, each member claiming what it last received,
    and yield each generation whose captured answer it reproduces."""
    assignor = get(assignor_name)
    for generation in generations:
        group_members = []
        for member in generation.members:
            owned, last = claims_of(members, member.member_id, generation.generation)
            group_members.append(
                GroupMember(
                    member.member_id,
                    member.topics,
                    owned_partitions=owned,
                    generation=last,
                    rack=member.rack,
                    instance_id=member.instance_id,
                )
            )
        answer = assignor.assign(Group(generation.topics, tuple(group_members)))
        recorded = {member.member_id: tuple(member.assigned or ()) for member in generation.members}
        if dict(answer.partitions) == recorded:
            yield generation.generation


def run_group(
    assignor: str, capture: Path, bootstrap: str, group_id: str
) -> tuple[list[int], list[Member]]:
    """Three members join, a fourth joins, the first leaves; the stable generations."""
    members = [Member(f"c{i}", assignor, bootstrap, group_id, capture) for i in range(3)]
    stable = [wait_stable(members, capture)]
    members.append(Member("c3", assignor, bootstrap, group_id, capture))
    stable.append(wait_stable(members, capture))
    leaving = members.pop(0)
    leaving.stop()
    stable.append(wait_stable(members, capture))
    Member.stop_all(members)
    everyone = [leaving, *members]
    for generation in stable:
        present = [member for member in everyone if generation in member.received]
        check_valid(present, generation)
    check_capture_matches(everyone, capture)
    return stable, everyone


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
        recorded = {
            member.member_id: frozenset(member.assigned or ())
            for member in row.members
            if member.member_id in given
        }
        assert recorded == given, f"generation {generation}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    # the lifetime only stops brokers a killed pytest left behind: 8 tests within their budgets
    with MockCluster(TOPICS, racks=["a", "b", "c"], lifetime_s=900) as running:
        yield running


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_real_group_assignments_are_valid_captured_and_replayable(
    assignor: str, cluster: MockCluster, tmp_path: Path
) -> None:
    capture = tmp_path / "capture.jsonl"
    group_id = f"group-{assignor}"
    stable, members = run_group(assignor, capture, cluster.bootstrap_servers, group_id)
    (trace,), failures = read_traces([capture])
    assert failures == []
    generations = list(trace.generations)
    assert [g.generation for g in generations] == sorted(_captured(capture))
    assert all(g.protocol == assignor for g in generations)
    # the racks come from the cluster metadata: 3 replicas on brokers in racks a, b, c
    assert all(
        topic.replica_racks == (frozenset("abc"),) * topic.num_partitions
        for topic in generations[0].topics
    )
    reproduced = list(reassign_offline(assignor, generations, members))
    assert reproduced == [g.generation for g in generations]
    scores = {row.generation: row for row in replay_recorded(trace)}
    for generation in stable:
        assert scores[generation].invalid == 0
        assert scores[generation].unassigned == 0
        assert scores[generation].max_load == scores[generation].optimal_max_load
    if assignor in ("sticky", "cooperative-sticky"):
        checked = 0
        for previous, current in itertools.pairwise(generations):
            delivered = {
                member.member_ids[previous.generation]
                for member in members
                if previous.generation in member.received
            }
            if delivered != {member.member_id for member in previous.members}:
                continue  # a member's SyncGroup failed (the mock's race): it owns an older set
            least = balanced_min_moved(previous, current)
            assert scores[current.generation].moved == least, (current.generation, least)
            assert least >= scores[current.generation].min_moved  # the max-load-only bound
            checked += 1
        assert checked >= 1
    # no partition is ever held twice, also in generations that withhold partitions mid-move
    assert all(row.invalid == 0 for row in scores.values())


def test_ktk_replay_of_a_live_capture_shows_what_the_group_did(
    cluster: MockCluster, tmp_path: Path
) -> None:
    capture = tmp_path / "captures" / "capture.jsonl"
    capture.parent.mkdir()
    members = [
        Member(f"c{i}", "sticky", cluster.bootstrap_servers, "group-replayed", capture)
        for i in range(2)
    ]
    wait_stable(members, capture)
    members.append(Member("c2", "sticky", cluster.bootstrap_servers, "group-replayed", capture))
    wait_stable(members, capture)
    Member.stop_all(members)
    check_capture_matches(members, capture)
    traces = tmp_path / "traces"
    merged = subprocess.run(
        [sys.executable, "-m", "ktk", "traces", "capture", "--from", "leader", str(capture),
         "--out", str(traces)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    assert (traces / "leader-group-replayed.jsonl").is_file()
    out = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktk",
            "replay",
            str(traces),
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
    assert list(reassign_offline("sticky", list(trace.generations), [member])) == [
        g.generation for g in trace.generations
    ]


class LibrdkafkaMember:
    """A confluent-kafka (librdkafka) consumer polling in a thread, on librdkafka's own
    assignor: the group's protocol name must match the kafka-python members' first one."""

    def __init__(self, bootstrap: str, group_id: str, strategy: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "partition.assignment.strategy": strategy,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 500,
                "client.rack": "c",
            }
        )
        self.consumer.subscribe(list(TOPICS))
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.member_id = ""
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.consumer.poll(0.1)
                self.assigned = frozenset(
                    TopicPartition(tp.topic, tp.partition) for tp in self.consumer.assignment()
                )
                self.member_id = self.consumer.memberid() or ""
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=15)


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_mixed_group_with_a_librdkafka_member_is_valid_and_captured(
    strategy: str, cluster: MockCluster, tmp_path: Path
) -> None:
    capture = tmp_path / "capture.jsonl"
    group_id = f"mixed-{strategy}"
    # the mock elects the member that joined the group first: the librdkafka member joins a
    # settled group of kafka-python members, so one of them leads and ktk assigns for everyone
    members = [
        Member(f"c{i}", strategy, cluster.bootstrap_servers, group_id, capture) for i in range(2)
    ]
    first = wait_stable(members, capture)
    other = LibrdkafkaMember(cluster.bootstrap_servers, group_id, strategy)
    try:
        deadline = _wait_deadline()
        settled_since = None
        while time.monotonic() < deadline:
            latest = [member.latest() for member in members]
            owned = [entry[1] for entry in latest if entry is not None] + [other.assigned]
            stable = (
                None not in latest
                and len({entry[0] for entry in latest if entry is not None}) == 1
                and sum(map(len, owned)) == len(ALL_PARTITIONS)
                and frozenset().union(*owned) == ALL_PARTITIONS
                and latest[0] is not None
                and latest[0][0] > first
                and latest[0][0] in _captured(capture)
            )
            if not stable:
                settled_since = None
            elif settled_since is None:
                settled_since = time.monotonic()
            elif time.monotonic() - settled_since >= SETTLE_S:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"no stable mixed group: {latest}, librdkafka {other.assigned}")
    finally:
        other.stopping.set()
        Member.stop_all(members)
        other.stop()
    generation = members[0].latest()[0]  # type: ignore[index]
    row = _captured(capture)[generation]
    recorded = {member.member_id: frozenset(member.assigned or ()) for member in row.members}
    given = {member.member_ids[generation]: member.received[generation] for member in members}
    assert recorded == {**given, other.member_id: other.assigned}
    assert {member.rack for member in row.members if member.member_id == other.member_id} == {"c"}
    # range and roundrobin ignore what members own: the captured group alone gives the answer
    assert list(reassign_offline(strategy, [row], members)) == [generation]
