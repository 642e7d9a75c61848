"""`ktk traces capture --from describe|offsets-topic`: live capture from a cluster.

The describe loop runs against recorded responses: DescribeGroups v5, ConsumerGroupDescribe v0
and Metadata v8 answers built with kafka-python's message classes (made from Kafka's protocol
schemas), encoded to their wire bytes and decoded again for each request, in the order the
loop sends them. librdkafka's mock cluster has no DescribeGroups (it drops the connection), so
live runs against it check that refusal, unreachable servers, and the offsets-topic capture
(records produced into the mock's ``__consumer_offsets`` and read back).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

pytest.importorskip("kafka")

from kafka.protocol.admin import DescribeGroupsResponse
from kafka.protocol.metadata import MetadataResponse

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.protocol.wire import (
    MemberAssignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from assignors.traces import capture_live
from assignors.traces.capture import CaptureRecorder, read_capture
from assignors.traces.capture_live import (
    CaptureError,
    GroupDescriber,
    client_settings,
    open_capture,
    poll_group,
    read_client_properties,
)
from assignors.traces.kafka_messages import ConsumerGroupDescribeResponse
from ktk.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mock_cluster import MockCluster

GROUP = "payments"
VERSIONS = {"DescribeGroups": 5, "Metadata": 8, "ConsumerGroupDescribe": 0}
RESPONSES = {
    "DescribeGroups": DescribeGroupsResponse,
    "Metadata": MetadataResponse,
    "ConsumerGroupDescribe": ConsumerGroupDescribeResponse,
}


class RecordedExchange:
    """Answers each request with the next recorded response of its API, decoded from the wire
    bytes it was recorded as; fails the test on a request the recording does not expect."""

    def __init__(self, recording: list[tuple[str, bytes]], *, kip848: bool = False) -> None:
        self.recording = list(recording)
        self.kip848 = kip848
        self.sent: list[str] = []
        self.requests: list[Any] = []
        self.closed = False

    def coordinator(self, group_id: str) -> object:
        return 1

    def supports(self, api_key: int) -> bool:
        return self.kip848 and api_key == 69

    def send(self, request: Any, node_id: object = None) -> Any:
        api = type(request).__name__.removesuffix("Request").split("_v")[0]
        self.sent.append(api)
        self.requests.append(request)
        assert self.recording, f"no recorded answer left for {api}"
        expected, data = self.recording.pop(0)
        assert api == expected, f"sent {api}, recorded {expected}"
        return RESPONSES[api].decode(data, version=VERSIONS[api])

    def close(self) -> None:
        self.closed = True


def recorded(api: str, response: Any) -> tuple[str, bytes]:
    return api, response.encode(version=VERSIONS[api])


def subscription(topics: tuple[str, ...], generation: int) -> bytes:
    return encode_subscription(Subscription(topics, generation_id=generation, rack_id="a"))


def assignment(*partitions: tuple[str, int]) -> bytes:
    return encode_assignment(MemberAssignment(tuple(TopicPartition(*p) for p in partitions)))


def describe_groups(
    state: str, members: list[tuple[str, bytes, bytes]], *, error: int = 0, protocol: str = "range"
) -> tuple[str, bytes]:
    group = DescribeGroupsResponse.DescribedGroup(
        error_code=error,
        group_id=GROUP,
        group_state=state,
        protocol_type="consumer" if members or state != "Dead" else "",
        protocol_data=protocol if state == "Stable" else "",
        members=[
            DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
                member_id=member_id,
                group_instance_id=None,
                client_id="app",
                client_host="/10.0.0.1",
                member_metadata=metadata,
                member_assignment=assigned,
            )
            for member_id, metadata, assigned in members
        ],
        authorized_operations=None,  # not asked for
    )
    return recorded("DescribeGroups", DescribeGroupsResponse(throttle_time_ms=0, groups=[group]))


def metadata(topics: dict[str, int], *, error: int = 0) -> tuple[str, bytes]:
    broker = MetadataResponse.MetadataResponseBroker
    topic = MetadataResponse.MetadataResponseTopic
    partition = topic.MetadataResponsePartition
    response = MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            broker(node_id=n, host="127.0.0.1", port=9092, rack=r) for n, r in ((1, "a"), (2, "b"))
        ],
        cluster_id="c",
        controller_id=1,
        topics=[
            topic(
                error_code=error,
                name=name,
                is_internal=False,
                partitions=[
                    partition(
                        error_code=0,
                        partition_index=index,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=[1, 2],
                        isr_nodes=[1, 2],
                        offline_replicas=[],
                    )
                    for index in range(count)
                ],
            )
            for name, count in topics.items()
        ],
    )
    return recorded("Metadata", response)


def consumer_group_describe(state: str, *, error: int = 0, epoch: int = 7) -> tuple[str, bytes]:
    described = ConsumerGroupDescribeResponse.DescribedGroup
    member = described.Member
    topics = member.Assignment.TopicPartitions

    def given(*partitions: int) -> Any:
        return member.Assignment(
            topic_partitions=[
                topics(topic_id=None, topic_name="orders", partitions=list(partitions))
            ]
        )

    group = described(
        error_code=error,
        error_message=None,
        group_id=GROUP,
        group_state=state,
        group_epoch=epoch,
        assignment_epoch=epoch,
        assignor_name="uniform",
        members=[
            member(
                member_id=member_id,
                instance_id=None,
                rack_id=rack,
                member_epoch=epoch,
                client_id="app",
                client_host="/10.0.0.1",
                subscribed_topic_names=["orders"],
                subscribed_topic_regex=None,
                assignment=given(*owned),
                target_assignment=given(*owned),
            )
            for member_id, rack, owned in (("m-1", "a", (0, 1)), ("m-2", "b", (2,)))
        ]
        if error == 0
        else [],
        authorized_operations=-2147483648,
    )
    return recorded(
        "ConsumerGroupDescribe", ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[group])
    )


A = [
    ("m-1", subscription(("orders",), 4), assignment(("orders", 0), ("orders", 1))),
    ("m-2", subscription(("orders",), 4), assignment(("orders", 2))),
]
B = [
    ("m-1", subscription(("orders",), 5), assignment(("orders", 0))),
    ("m-2", subscription(("orders",), 5), assignment(("orders", 1))),
    ("m-3", subscription(("orders",), -1), assignment(("orders", 2))),
]


def run_polls(exchange: RecordedExchange, capture: Path, polls: int, kind: str = "auto") -> int:
    recorder, captured = open_capture(capture, GROUP)
    return poll_group(
        GroupDescriber(exchange, GROUP, kind=kind),
        recorder,
        captured,
        interval_s=0,
        polls=polls,
    )


def test_describe_writes_a_row_only_when_the_stable_assignment_changes(tmp_path: Path) -> None:
    capture = tmp_path / "payments.jsonl"
    exchange = RecordedExchange(
        [
            describe_groups("Stable", A),
            metadata({"orders": 3}),
            describe_groups("Stable", A),
            metadata({"orders": 3}),
            describe_groups("PreparingRebalance", []),
            describe_groups("Stable", B),
            metadata({"orders": 3}),
        ]
    )
    assert run_polls(exchange, capture, 4) == 2
    assert exchange.recording == []
    generations, torn = read_capture(capture)
    assert not torn
    assert [g.generation for g in generations] == [5, 6]  # members' generation_id + 1
    first, second = generations
    assert first.protocol == "range"
    assert "estimated" in (first.reason or "")
    assert {m.member_id: m.assigned for m in second.members} == {
        "m-1": (TopicPartition("orders", 0),),
        "m-2": (TopicPartition("orders", 1),),
        "m-3": (TopicPartition("orders", 2),),
    }
    assert {m.rack for m in first.members} == {"a"}
    # replica racks come from Metadata: replicas on brokers 1 (rack a) and 2 (rack b)
    assert first.topics[0].replica_racks == (frozenset("ab"),) * 3


def test_consumer_group_describe_row_uses_the_assignment_epoch(tmp_path: Path) -> None:
    capture = tmp_path / "payments.jsonl"
    exchange = RecordedExchange(
        [
            consumer_group_describe("Reconciling"),
            consumer_group_describe("Stable"),
            metadata({"orders": 3}),
        ],
        kip848=True,
    )
    assert run_polls(exchange, capture, 2) == 1
    (generation,), _ = read_capture(capture)
    assert generation.generation == 7
    assert generation.protocol == "uniform"
    assert generation.group_protocol == "consumer"  # replayed with KIP-848 reconciliation
    assert "assignment epoch" in (generation.reason or "")
    assert {m.member_id: (m.rack, len(m.assigned or ())) for m in generation.members} == {
        "m-1": ("a", 2),
        "m-2": ("b", 1),
    }


def test_auto_falls_back_to_describe_groups_for_a_classic_group(tmp_path: Path) -> None:
    exchange = RecordedExchange(
        [
            consumer_group_describe("", error=69),
            describe_groups("Stable", A),
            metadata({"orders": 3}),
        ],
        kip848=True,
    )
    assert run_polls(exchange, tmp_path / "c.jsonl", 1) == 1
    assert exchange.sent == ["ConsumerGroupDescribe", "DescribeGroups", "Metadata"]


def test_resumed_capture_appends_after_its_last_row_without_repeating_it(tmp_path: Path) -> None:
    capture = tmp_path / "payments.jsonl"
    run_polls(RecordedExchange([describe_groups("Stable", A), metadata({"orders": 3})]), capture, 1)
    before = capture.read_bytes()
    exchange = RecordedExchange(
        [
            describe_groups("Stable", A),
            metadata({"orders": 3}),
            describe_groups("Stable", B),
            metadata({"orders": 3}),
        ]
    )
    assert run_polls(exchange, capture, 2) == 1
    assert capture.read_bytes().startswith(before)
    generations, _ = read_capture(capture)
    assert [g.generation for g in generations] == [5, 6]


def test_an_estimate_behind_the_capture_is_renumbered_after_its_last_row(tmp_path: Path) -> None:
    capture = tmp_path / "payments.jsonl"
    CaptureRecorder(capture, GROUP).append(
        {
            "trace_id": GROUP, "generation": 10, "topics": [{"name": "orders", "partitions": 3}],
            "members": [{"member_id": "m-9", "topics": ["orders"],
                         "assigned": [["orders", 0], ["orders", 1], ["orders", 2]]}],
        }
    )  # fmt: skip
    exchange = RecordedExchange([describe_groups("Stable", A), metadata({"orders": 3})])
    assert run_polls(exchange, capture, 1) == 1
    generations, _ = read_capture(capture)
    assert [g.generation for g in generations] == [10, 11]  # the members' estimate was 5
    assert "renumbered after generation 10" in (generations[1].reason or "")


def test_a_batch_holding_a_bad_row_appends_nothing(tmp_path: Path) -> None:
    capture = tmp_path / "payments.jsonl"
    recorder = CaptureRecorder(capture, GROUP)
    good = {
        "trace_id": GROUP, "generation": 1, "topics": [{"name": "orders", "partitions": 1}],
        "members": [{"member_id": "m", "topics": ["orders"], "assigned": [["orders", 0]]}],
    }  # fmt: skip
    recorder.append_rows([good])
    before = capture.read_bytes()
    bad = {**good, "generation": 2, "members": [{"member_id": "m", "topics": "orders"}]}
    with pytest.raises(InputError):
        recorder.append_rows([{**good, "generation": 3}, bad])
    assert capture.read_bytes() == before
    recorder.append_rows([{**good, "generation": 2}, {**good, "generation": 3}])
    assert [g.generation for g in read_capture(capture)[0]] == [1, 2, 3]


def test_a_moving_coordinator_is_polled_through_after_the_first_poll(tmp_path: Path) -> None:
    forgotten: list[str] = []

    class Forgetting(RecordedExchange):
        def forget_coordinator(self, group_id: str) -> None:
            forgotten.append(group_id)

    exchange = Forgetting(
        [
            describe_groups("Stable", A),
            metadata({"orders": 3}),
            describe_groups("", [], error=16),  # NOT_COORDINATOR
            describe_groups("Stable", B),
            metadata({"orders": 3}),
        ]
    )
    assert run_polls(exchange, tmp_path / "c.jsonl", 3) == 2
    assert forgotten == [GROUP]
    first = Forgetting([describe_groups("", [], error=16)])
    with pytest.raises(CaptureError, match="NOT_COORDINATOR"):
        run_polls(first, tmp_path / "d.jsonl", 3)  # a first poll that fails stops the capture


def test_consumer_group_describe_missing_group_is_a_capture_error() -> None:
    exchange = RecordedExchange([consumer_group_describe("", error=69)], kip848=True)
    describer = GroupDescriber(exchange, GROUP, kind="consumer")
    with pytest.raises(CaptureError, match="does not exist"):
        describer.poll(None, timestamp_ms=1)


def test_consumer_group_describe_request_negotiates_v0_and_encodes_kafkas_layout() -> None:
    from kafka.protocol.broker_version_data import BrokerVersionData

    from assignors.traces.kafka_messages import ConsumerGroupDescribeRequest

    request = ConsumerGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False)
    assert BrokerVersionData(api_versions={69: (0, 1)}).api_version(request) == 0
    # flexible v0: compact array of one compact string "g", the bool, no tagged fields
    assert request.encode(version=0) == bytes([2, 2, ord("g"), 0, 0])


def test_describe_groups_asks_v5_and_settles_for_what_an_older_broker_has() -> None:
    from kafka.protocol.broker_version_data import BrokerVersionData

    exchange = RecordedExchange([describe_groups("Empty", [])])
    GroupDescriber(exchange, GROUP).poll(None, timestamp_ms=1)
    sent = exchange.requests[0]
    assert BrokerVersionData(api_versions={15: (0, 6)}).api_version(sent) == 5
    assert BrokerVersionData(api_versions={15: (0, 3)}).api_version(sent) == 3


def test_client_settings_take_kafka_names_and_never_show_a_secret() -> None:
    config = client_settings(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="ktk" password="s3cret-value";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "ca.pem",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert config == {
        "bootstrap_servers": ["127.0.0.1:9092"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "ktk",
        "sasl_plain_password": "s3cret-value",
        "ssl_cafile": "ca.pem",
        "ssl_check_hostname": False,
    }
    with pytest.raises(InputError) as refused:
        client_settings({"sasl.jaas.config": 'GssapiLoginModule required password="s3cret-value";'})
    assert "s3cret-value" not in str(refused.value)
    with pytest.raises(InputError, match=r"ssl\.truststore\.location: kafka-python reads PEM"):
        client_settings({"ssl.truststore.location": "trust.jks", "ssl.truststore.password": "x"})


def test_every_setting_ktk_passes_on_is_one_kafka_python_clients_accept() -> None:
    from kafka import KafkaAdminClient, KafkaConsumer

    passed = {
        *capture_live._RENAMED.values(),
        *capture_live._MILLISECONDS.values(),
        "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname", "api_version",
    }  # fmt: skip
    assert passed <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert passed <= set(KafkaConsumer.DEFAULT_CONFIG)


def test_command_config_properties_file_is_read_like_kafkas_tools(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism: PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="u" password="p";\n'
    )
    settings = read_client_properties(path)
    assert settings["sasl.mechanism"] == "PLAIN"
    assert client_settings(settings)["sasl_plain_password"] == "p"


# ---------------------------------------------------------------------------------------------
# the command line: progress, Ctrl-C, bad input (the exchange replays recorded answers)


@pytest.fixture
def recorded_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RecordedExchange]]:
    """`KafkaPythonExchange` replaced by the next prepared RecordedExchange."""
    prepared: list[RecordedExchange] = []

    def connect(settings: Any, *, timeout_s: float) -> RecordedExchange:
        assert settings["sasl_plain_password"] == "s3cret-value"
        return prepared.pop(0)

    monkeypatch.setattr(capture_live, "KafkaPythonExchange", connect)
    yield prepared


def capture_cli(capture: Path, *extra: str) -> Any:
    return CliRunner().invoke(
        app,
        [
            "traces", "capture", "--from", "describe", str(capture), "--group", GROUP,
            "-b", "127.0.0.1:9092", "--interval", "0",
            "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
            "-X", "sasl.password=s3cret-value", "-X", "sasl.username=ktk", *extra,
        ],
    )  # fmt: skip


def test_cli_describe_shows_progress_and_passes_credentials_without_printing_them(
    recorded_cluster: list[RecordedExchange], tmp_path: Path
) -> None:
    capture = tmp_path / "payments.jsonl"
    recorded_cluster.append(
        RecordedExchange([describe_groups("Stable", A), metadata({"orders": 3})] * 2)
    )
    result = capture_cli(capture, "--polls", "2")
    assert result.exit_code == 0, result.output
    assert "row 1 appended" in result.output
    assert "1 rows captured by this run; 1 in" in result.output
    assert "s3cret-value" not in result.output


class Interrupting(RecordedExchange):
    def send(self, request: Any, node_id: object = None) -> Any:
        if not self.recording:
            raise KeyboardInterrupt
        return super().send(request, node_id)


def test_ctrl_c_stops_a_describe_capture_with_every_row_on_disk(
    recorded_cluster: list[RecordedExchange], tmp_path: Path
) -> None:
    capture = tmp_path / "payments.jsonl"
    recorded_cluster.append(
        Interrupting(
            [
                describe_groups("Stable", A),
                metadata({"orders": 3}),
                describe_groups("Stable", B),
                metadata({"orders": 3}),
            ]
        )
    )
    result = capture_cli(capture)  # polls until interrupted
    assert result.exit_code == 0, result.output
    assert "stopped: 2 rows captured by this run; 2 in" in result.output
    generations, torn = read_capture(capture)
    assert [g.generation for g in generations] == [5, 6] and not torn
    assert recorded_cluster == []


def test_group_that_does_not_exist_is_one_line_and_exit_2(
    recorded_cluster: list[RecordedExchange], tmp_path: Path
) -> None:
    recorded_cluster.append(RecordedExchange([describe_groups("Dead", [])]))
    result = capture_cli(tmp_path / "payments.jsonl", "--polls", "1")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --group: group 'payments' does not exist (DescribeGroups says Dead) (got "
        "'payments')"
    ]


def test_denied_describe_is_one_line_exit_2_and_keeps_the_capture(
    recorded_cluster: list[RecordedExchange], tmp_path: Path
) -> None:
    capture = tmp_path / "payments.jsonl"
    run_polls(RecordedExchange([describe_groups("Stable", A), metadata({"orders": 3})]), capture, 1)
    before = capture.read_bytes()
    recorded_cluster.append(RecordedExchange([describe_groups("", [], error=30)]))
    result = capture_cli(capture, "--polls", "1")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[1:] == [
        "error: request: DescribeGroups for group 'payments' was denied: "
        "GROUP_AUTHORIZATION_FAILED (30)"
    ]
    assert capture.read_bytes() == before


def test_capture_file_holding_another_group_is_refused_untouched(
    recorded_cluster: list[RecordedExchange], tmp_path: Path
) -> None:
    capture = tmp_path / "payments.jsonl"
    other = CaptureRecorder(capture, "orders-app")
    other.append({
        "trace_id": "orders-app", "generation": 1, "topics": [{"name": "orders", "partitions": 1}],
        "members": [{"member_id": "m", "topics": ["orders"], "assigned": [["orders", 0]]}],
    })  # fmt: skip
    before = capture.read_bytes()
    result = capture_cli(capture, "--polls", "1")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "capture file already holds rows of another group than 'payments'" in lines[0]
    assert f"{capture}:1: trace_id:" in lines[0]
    assert capture.read_bytes() == before
    assert recorded_cluster == []  # refused before connecting


# ---------------------------------------------------------------------------------------------
# live, against librdkafka's mock cluster


def ktk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ktk", *args], capture_output=True, text=True, timeout=120
    )


def test_unreachable_bootstrap_servers_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with MockCluster({"orders": 1}) as cluster:
        port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)[1]
    capture = tmp_path / "payments.jsonl"
    done = ktk(
        "traces", "capture", "--from", "describe", str(capture), "--group", GROUP,
        "-b", f"127.0.0.1:{port}", "--timeout", "2", "--polls", "1",
        "-X", "sasl.password=s3cret-value",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: bootstrap.servers: cannot reach the bootstrap servers 127.0.0.1:{port} "
        "within 2 s (KafkaTimeoutError)"
    ]
    assert "s3cret-value" not in done.stdout + done.stderr
    assert not capture.exists()


def test_offsets_topic_from_unreachable_servers_is_one_line_and_keeps_the_capture(
    tmp_path: Path,
) -> None:
    capture = tmp_path / "payments.jsonl"
    run_polls(RecordedExchange([describe_groups("Stable", A), metadata({"orders": 3})]), capture, 1)
    before = capture.read_bytes()
    done = ktk(
        "traces", "capture", "--from", "offsets-topic", str(capture), "--group", GROUP,
        "-b", "127.0.0.1:9", "--timeout", "2",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: bootstrap.servers: cannot reach the bootstrap servers 127.0.0.1:9 within 2 s "
        "(KafkaTimeoutError)"
    ]
    assert capture.read_bytes() == before


def test_mock_cluster_without_describe_groups_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with MockCluster({"orders": 1}) as cluster:
        done = ktk(
            "traces", "capture", "--from", "describe", str(tmp_path / "c.jsonl"),
            "--group", GROUP, "-b", cluster.bootstrap_servers, "-X", "api.version=2.3",
            "--timeout", "5", "--polls", "1",
        )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: request: DescribeGroups: the broker closed the connection")


def segment_records() -> list[tuple[bytes | None, bytes | None]]:
    from kafka_format import iter_batches

    data = (EXAMPLES / "importers" / "00000000000000000000.log").read_bytes()
    return [
        (record.key, record.value)
        for batch in iter_batches(data)
        if not batch.attributes & 0x20  # control batches hold no group records
        for record in batch.records()
    ]


def test_offsets_topic_capture_from_the_mock_equals_the_segment_import(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    from assignors.traces.importers import import_segments

    segment = EXAMPLES / "importers" / "00000000000000000000.log"
    expected = [
        row for row in import_segments([("0.log", segment.read_bytes())]).rows
        if row["trace_id"] == GROUP
    ]  # fmt: skip
    assert len(expected) >= 2
    capture = tmp_path / "payments.jsonl"
    with MockCluster({"__consumer_offsets": 1}) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, api_version=(2, 3))
        for key, value in segment_records():
            producer.send("__consumer_offsets", key=key, value=value, partition=0)
        producer.flush()
        producer.close()
        args = (
            "traces", "capture", "--from", "offsets-topic", str(capture), "--group", GROUP,
            "-b", cluster.bootstrap_servers, "-X", "api.version=2.3", "--timeout", "20",
        )  # fmt: skip
        first = ktk(*args)
        again = ktk(*args)
    assert first.returncode == 0, first.stderr
    assert f"{len(expected)} appended" in first.stdout
    generations, _ = read_capture(capture)
    from assignors.traces.format import generation_to_row

    assert [generation_to_row(g) for g in generations] == [
        generation_to_row(g) for g in read_capture_rows(expected, tmp_path)
    ]
    assert again.returncode == 0, again.stderr
    assert "0 appended" in again.stdout  # resumed: nothing after the last captured row


def read_capture_rows(rows: list[dict[str, Any]], tmp_path: Path) -> list[Any]:
    path = tmp_path / "expected.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return read_capture(path)[0]


@pytest.mark.parametrize("installed", [None, "2.2.15"], ids=["missing", "too-old"])
def test_live_capture_without_kafka_python_3_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, installed: str | None
) -> None:
    import sys
    import types

    from assignors.traces.capture_live import require_kafka_python

    if installed is None:
        monkeypatch.setitem(sys.modules, "kafka", None)
    else:
        monkeypatch.setitem(sys.modules, "kafka", types.SimpleNamespace(__version__=installed))
    with pytest.raises(CaptureError, match=r"kafka-python 3 or newer.*ktk\[kafka\]"):
        require_kafka_python()
