"""Capturing a group's history from a running cluster: DescribeGroups and ConsumerGroupDescribe
polled (``--from describe``), or ``__consumer_offsets`` consumed (``--from offsets-topic``).

Both talk to the cluster through kafka-python (already a dependency): its client handles the
connection, SASL and SSL; ktk chooses the requests and turns the answers into trace rows.

- **Settings** are given as Kafka clients name them (``security.protocol``, ``sasl.mechanism``,
  ``sasl.jaas.config``, ``ssl.truststore.location`` ..., or librdkafka's ``sasl.username``,
  ``ssl.ca.location`` ...) and passed to kafka-python under its own names
  (:func:`client_settings`). Values are never logged nor put in an error message; a setting
  ktk cannot pass on is named, never its value.
- **Describe**: each poll finds the group's coordinator, asks ConsumerGroupDescribe (a KIP-848
  group) or DescribeGroups v5 (a classic group), then Metadata for the subscribed topics'
  partition counts and replica racks, and makes a row of a stable group
  (:func:`~assignors.traces.capture.described_row`, :func:`consumer_group_row`). A row is
  written only when the stable assignment changes (:func:`~assignors.traces.capture.
  same_assignment`).
- **Offsets topic**: every partition of ``__consumer_offsets`` is read from its start; each
  record's key and value bytes go through the segment importer's own decoder
  (:func:`assignors.traces.importers.segments.decode_record`) and the records of the group
  through its row builder (:func:`assignors.traces.importers.offsets.rows_from_records`).

Rows are appended to a capture file one batch at a time (one write, fsynced; see
:class:`~assignors.traces.capture.CaptureRecorder`), so an interrupted capture keeps every
batch written before, and running the same capture again resumes after the file's last row.

>>> client_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
...     "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
...                         'required username="ktk" password="secret";'})["sasl_plain_username"]
'ktk'
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from assignors.errors import InputError
from assignors.model import Member, TopicPartition
from assignors.traces.capture import (
    CaptureRecorder,
    DescribedGroup,
    DescribedMember,
    capture_row,
    described_row,
    read_capture,
    same_assignment,
    subscribed_group,
)


class CaptureError(InputError):
    """The cluster refused or could not answer what a capture needs (one line, exit 2).
    ``transient``: a later poll may succeed (a lost connection, a coordinator moving)."""

    transient = False


def _transient(error: CaptureError) -> CaptureError:
    error.transient = True
    return error


MAX_FAILED_POLLS = 5
"""A capture that has polled once goes on through this many transient failures in a row."""


# ---------------------------------------------------------------------------------------------
# client settings: Kafka's names -> kafka-python's

SECRET_SETTINGS = frozenset(
    {
        "sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
    }
)
"""Settings whose values are credentials: never shown, not even in an error about them."""

_RENAMED = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",  # librdkafka's spelling
    "sasl.username": "sasl_plain_username",  # librdkafka
    "sasl.password": "sasl_plain_password",  # librdkafka
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.domain.name": "sasl_kerberos_domain_name",
    "ssl.ca.location": "ssl_cafile",  # librdkafka
    "ssl.certificate.location": "ssl_certfile",  # librdkafka
    "ssl.key.location": "ssl_keyfile",  # librdkafka
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",  # librdkafka
}
_MILLISECONDS = {
    "request.timeout.ms": "request_timeout_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
}
_PEM_ONLY = {
    "ssl.truststore.location": "ssl.truststore.type",
    "ssl.keystore.location": "ssl.keystore.type",
}
_IGNORED = frozenset({"ssl.truststore.type", "ssl.keystore.type", "sasl.login.class"})
_JAAS = re.compile(r"""(\w+)\s*=\s*"((?:[^"\\]|\\.)*)\"""")
_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")


def _setting_error(key: str, message: str, settings: Mapping[str, str]) -> InputError:
    shown = InputError._NO_VALUE if key in SECRET_SETTINGS else settings.get(key)
    return InputError(message, field=key, value=shown)


def client_settings(settings: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python's keyword arguments for client ``settings`` named as Kafka clients name them.

    ``api.version`` (``2.3``) is kafka-python's own ``api_version``: a broker whose version
    kafka-python cannot probe (librdkafka's mock cluster) needs it. Raises :class:`InputError`
    naming the setting (never a credential's value) for one ktk cannot pass on.

    >>> client_settings({"bootstrap.servers": "b1:9092,b2:9092", "api.version": "2.3"})
    {'api_version': (2, 3), 'bootstrap_servers': ['b1:9092', 'b2:9092']}
    >>> client_settings({"sasl.password": "hunter2", "ssl.keystore.password": "x"})
    Traceback (most recent call last):
    ...
    assignors.errors.InputError: ssl.keystore.password: not a client setting ktk can pass on \
(kafka-python reads PEM files: see docs/capture.md)
    """
    config: dict[str, Any] = {}
    for key in sorted(settings):
        value = settings[key]
        if key in _RENAMED:
            config[_RENAMED[key]] = value
        elif key == "bootstrap.servers":
            config["bootstrap_servers"] = value
        elif key in _MILLISECONDS:
            if not value.isdigit():
                raise _setting_error(key, "must be a whole number of milliseconds", settings)
            config[_MILLISECONDS[key]] = int(value)
        elif key in _PEM_ONLY:
            kind = settings.get(_PEM_ONLY[key], "JKS").upper()
            if kind != "PEM":
                raise _setting_error(
                    key,
                    f"kafka-python reads PEM files only: set {_PEM_ONLY[key]}=PEM and give a "
                    "PEM file",
                    settings,
                )
            if key == "ssl.truststore.location":
                config["ssl_cafile"] = value
            else:  # a PEM keystore holds the certificate and its key
                config["ssl_certfile"] = value
                config["ssl_keyfile"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            config["ssl_check_hostname"] = value.lower() == "https"
        elif key == "sasl.jaas.config":
            config.update(_jaas_credentials(value))
        elif key == "api.version":
            parts = value.split(".")
            if not (2 <= len(parts) <= 3 and all(part.isdigit() for part in parts)):
                raise _setting_error(key, "must be a broker version such as 2.3", settings)
            config["api_version"] = tuple(int(part) for part in parts)
        elif key in _IGNORED:
            continue
        else:
            raise _setting_error(
                key,
                "not a client setting ktk can pass on (kafka-python reads PEM files: see "
                "docs/capture.md)",
                settings,
            )
    if "bootstrap_servers" in config:
        servers = [item.strip() for item in str(config["bootstrap_servers"]).split(",")]
        config["bootstrap_servers"] = [server for server in servers if server]
    return config


def _jaas_credentials(text: str) -> dict[str, str]:
    """Username and password of a PLAIN or SCRAM ``sasl.jaas.config`` (the only JAAS logins
    kafka-python can act out); the text itself is never shown."""
    if not any(module in text for module in _JAAS_MODULES):
        raise InputError(
            "only PlainLoginModule and ScramLoginModule logins can be passed on (use "
            "sasl.kerberos.service.name for GSSAPI)",
            field="sasl.jaas.config",
        )
    options = {name: value.replace('\\"', '"') for name, value in _JAAS.findall(text)}
    if "username" not in options or "password" not in options:
        raise InputError('needs username="..." and password="..."', field="sasl.jaas.config")
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def read_client_properties(path: str | Path) -> dict[str, str]:
    """The settings of a Java ``.properties`` file (``key=value`` or ``key: value`` lines,
    ``#``/``!`` comments, ``\\`` continuations), as ``--command-config`` files hold them.

    Raises :class:`InputError` naming the file and line of a line without a key."""
    source = str(path)
    settings: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    pending = ""
    start = 0
    for number, raw in enumerate(lines, 1):
        line = raw.strip() if not pending else raw.lstrip()
        if not pending:
            start = number
            if not line or line[0] in "#!":
                continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            raise InputError("expected key=value", source=source, line=start)
        settings[match.group(1)] = match.group(2).strip()
    return settings


# ---------------------------------------------------------------------------------------------
# talking to the cluster


class Exchange(Protocol):
    """What a capture asks of a cluster: where a group's coordinator is, which APIs the brokers
    offer, and one request answered (kafka-python's request and response classes)."""

    def coordinator(self, group_id: str) -> object: ...

    def supports(self, api_key: int) -> bool: ...

    def send(self, request: Any, node_id: object = None) -> Any: ...


ERROR_NAMES = {
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    24: "INVALID_GROUP_ID",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND",
}
DENIED = frozenset({29, 30, 31})
RETRIABLE = frozenset({14, 15, 16})
GROUP_ID_NOT_FOUND = 69
CONSUMER_GROUP_DESCRIBE = 69
DESCRIBE_GROUPS_VERSION = 5
"""DescribeGroups v5 is the first to carry members' static instance ids (KIP-345)."""


def _error_text(code: int) -> str:
    return f"{ERROR_NAMES.get(code, 'error')} ({code})"


def require_kafka_python() -> None:
    """Live capture talks to clusters through kafka-python 3 (the ``kafka`` extra): refuse
    with one line when it is missing or older."""
    try:
        import kafka
    except ImportError:
        raise CaptureError(
            "live capture needs kafka-python 3 or newer: pip install 'ktk[kafka]'"
        ) from None
    major = str(getattr(kafka, "__version__", "0")).split(".")[0]
    if not major.isdigit() or int(major) < 3:
        raise CaptureError(
            f"live capture needs kafka-python 3 or newer (found {kafka.__version__}): "
            "pip install 'ktk[kafka]'"
        )


class KafkaPythonExchange:
    """An :class:`Exchange` over kafka-python's admin client (connection, SASL and SSL are its
    own); ``timeout_s`` bounds the bootstrap and every request."""

    def __init__(self, settings: Mapping[str, Any], *, timeout_s: float = 30.0) -> None:
        require_kafka_python()
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        self.servers = ",".join(settings.get("bootstrap_servers", []))
        if not self.servers:
            raise CaptureError("no bootstrap servers given", field="--bootstrap-servers")
        timeout_ms = int(timeout_s * 1000)
        config = {"request_timeout_ms": timeout_ms, **settings}
        config.setdefault("bootstrap_timeout_ms", timeout_ms)
        try:
            self.admin = KafkaAdminClient(**config)
        except KafkaError as error:
            raise CaptureError(
                f"cannot reach the bootstrap servers {self.servers} within {timeout_s:g} s "
                f"({type(error).__name__})",
                field="bootstrap.servers",
            ) from None
        self.manager = self.admin._manager

    def coordinator(self, group_id: str) -> object:
        from kafka.errors import KafkaError

        try:
            return self.manager.run(self.admin._find_coordinator_id, group_id)
        except KafkaError as error:
            raise _kafka_failure(error, f"FindCoordinator for group {group_id!r}") from None

    def forget_coordinator(self, group_id: str) -> None:
        """Drop kafka-python's cached coordinator of the group (it moved or is loading)."""
        cached = getattr(self.admin._client.cluster, "_coordinators", None)
        if isinstance(cached, dict):
            for key in [key for key in cached if key[-1] == group_id]:
                del cached[key]

    def supports(self, api_key: int) -> bool:
        data = self.manager.broker_version_data
        versions = getattr(data, "api_versions", None) if data is not None else None
        return isinstance(versions, Mapping) and api_key in versions

    def send(self, request: Any, node_id: object = None) -> Any:
        from kafka.errors import KafkaError

        try:
            return self.manager.run(self.manager.send, request, node_id)
        except KafkaError as error:
            raise _kafka_failure(error, type(request).__name__.removesuffix("Request")) from None

    def close(self) -> None:
        self.admin.close()


def _kafka_failure(error: Exception, what: str) -> CaptureError:
    name = type(error).__name__
    if "Authorization" in name or "Authentication" in name:
        return CaptureError(f"{what} was denied: {name}", field="request")
    if "ConnectionError" in name:
        return _transient(
            CaptureError(
                f"{what}: the broker closed the connection ({name}; a broker without this API, "
                "such as librdkafka's mock cluster, does that)",
                field="request",
            )
        )
    failure = CaptureError(f"{what} failed: {name}", field="request")
    return _transient(failure) if getattr(error, "retriable", False) else failure


# ---------------------------------------------------------------------------------------------
# answers -> rows


def _racks(
    metadata: Any, names: Iterable[str]
) -> tuple[dict[str, int], dict[str, list[frozenset[str]]]]:
    """Partition counts and replica racks of ``names`` from a Metadata response (topics the
    cluster does not have are left out; a topic the client may not describe is denied)."""
    rack_of = {broker.node_id: broker.rack for broker in metadata.brokers}
    counts: dict[str, int] = {}
    racks: dict[str, list[frozenset[str]]] = {}
    wanted = set(names)
    for topic in metadata.topics:
        if topic.name not in wanted:
            continue
        if topic.error_code in DENIED:
            raise CaptureError(
                f"Metadata for topic {topic.name!r} was denied: {_error_text(topic.error_code)}",
                field="request",
            )
        if topic.error_code:
            continue
        partitions = sorted(topic.partitions, key=lambda partition: partition.partition_index)
        counts[topic.name] = len(partitions)
        per_partition = [
            frozenset(rack for node in partition.replica_nodes if (rack := rack_of.get(node)))
            for partition in partitions
        ]
        if any(per_partition):
            racks[topic.name] = per_partition
    return counts, racks


def consumer_group_row(
    group: Any,
    partition_counts: Mapping[str, int],
    replica_racks: Mapping[str, Sequence[frozenset[str]]] | None,
    *,
    timestamp_ms: int | None,
) -> dict[str, Any] | None:
    """The trace row of a KIP-848 consumer group as ConsumerGroupDescribe shows it, or None
    unless it is ``Stable`` (every member has reconciled to its target assignment).

    The generation is the group's assignment epoch (the epoch of the target assignment every
    member now holds), and ``reason`` says so.
    """
    if group.group_state != "Stable":
        return None
    members = []
    answer: dict[str, tuple[TopicPartition, ...]] = {}
    for member in group.members:
        members.append(
            Member(
                member.member_id,
                frozenset(member.subscribed_topic_names),
                rack=member.rack_id or None,
                instance_id=member.instance_id or None,
            )
        )
        answer[member.member_id] = tuple(
            TopicPartition(topic.topic_name, partition)
            for topic in member.assignment.topic_partitions
            for partition in topic.partitions
        )
    return capture_row(
        group.group_id,
        group.assignment_epoch,
        subscribed_group(members, partition_counts, replica_racks),
        answer,
        protocol=group.assignor_name or None,
        timestamp_ms=timestamp_ms,
        reason="described (ConsumerGroupDescribe); generation is the group's assignment epoch",
        group_protocol="consumer",
    )


@dataclass(frozen=True, slots=True)
class Described:
    """One poll's outcome: the group's state, which API answered, and its row when stable."""

    state: str
    api: str
    row: dict[str, Any] | None


class GroupDescriber:
    """Polls one group: ConsumerGroupDescribe first when the brokers offer it and ``kind`` allows
    (``auto``: a classic group then answers GROUP_ID_NOT_FOUND and DescribeGroups follows),
    DescribeGroups v5 otherwise; Metadata for the subscribed topics."""

    def __init__(self, exchange: Exchange, group_id: str, *, kind: str = "auto") -> None:
        if kind not in ("auto", "classic", "consumer"):
            raise InputError(
                "must be auto, classic or consumer", field="--group-protocol", value=kind
            )
        self.exchange = exchange
        self.group_id = group_id
        self.kind = kind

    def poll(self, previous_generation: int | None, *, timestamp_ms: int) -> Described:
        node = self.exchange.coordinator(self.group_id)
        if self.kind != "classic" and self.exchange.supports(CONSUMER_GROUP_DESCRIBE):
            described = self._consumer_group(node, timestamp_ms)
            if described is not None:
                return described
        elif self.kind == "consumer":
            raise CaptureError(
                "the brokers do not offer ConsumerGroupDescribe (KIP-848 groups need Kafka 4.0+)",
                field="--group-protocol",
                value="consumer",
            )
        return self._classic_group(node, previous_generation, timestamp_ms)

    def _metadata(
        self, topics: Iterable[str]
    ) -> tuple[dict[str, int], dict[str, list[frozenset[str]]]]:
        from kafka.protocol.metadata import MetadataRequest

        names = sorted(set(topics))
        if not names:
            return {}, {}
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in names],
            allow_auto_topic_creation=False,
        )
        return _racks(self.exchange.send(request), names)

    def _consumer_group(self, node: object, timestamp_ms: int) -> Described | None:
        from assignors.traces.kafka_messages import ConsumerGroupDescribeRequest

        response = self.exchange.send(
            ConsumerGroupDescribeRequest(
                group_ids=[self.group_id], include_authorized_operations=False
            ),
            node,
        )
        group = _the_group(response.groups, self.group_id, "ConsumerGroupDescribe")
        if group.error_code == GROUP_ID_NOT_FOUND and self.kind == "auto":
            return None  # not a KIP-848 group: ask DescribeGroups
        self._check(group.error_code, "ConsumerGroupDescribe")
        if group.group_state != "Stable":
            return Described(group.group_state, "ConsumerGroupDescribe", None)
        topics = (name for member in group.members for name in member.subscribed_topic_names)
        counts, racks = self._metadata(topics)
        row = consumer_group_row(group, counts, racks, timestamp_ms=timestamp_ms)
        return Described(group.group_state, "ConsumerGroupDescribe", row)

    def _classic_group(
        self, node: object, previous_generation: int | None, timestamp_ms: int
    ) -> Described:
        from kafka.protocol.admin import DescribeGroupsRequest

        request = DescribeGroupsRequest(
            groups=[self.group_id],
            include_authorized_operations=False,
            max_version=DESCRIBE_GROUPS_VERSION,  # older brokers answer without instance ids
        )
        response = self.exchange.send(request, node)
        group = _the_group(response.groups, self.group_id, "DescribeGroups")
        self._check(group.error_code, "DescribeGroups")
        if group.group_state == "Dead" or (group.group_state == "Empty" and not group.members):
            if group.group_state == "Dead":
                raise CaptureError(
                    f"group {self.group_id!r} does not exist (DescribeGroups says Dead)",
                    field="--group",
                    value=self.group_id,
                )
            return Described(group.group_state, "DescribeGroups", None)
        if group.protocol_type and group.protocol_type != "consumer":
            raise CaptureError(
                f"group {self.group_id!r} is not a consumer group (protocol type "
                f"{group.protocol_type!r})",
                field="--group",
                value=self.group_id,
            )
        described = DescribedGroup(
            group.group_id,
            group.group_state,
            group.protocol_type,
            group.protocol_data,
            tuple(
                DescribedMember(
                    member.member_id,
                    member.group_instance_id,
                    bytes(member.member_metadata),
                    bytes(member.member_assignment),
                )
                for member in group.members
            ),
        )
        topics: set[str] = set()
        if described.state == "Stable":
            from assignors.protocol.wire import decode_subscription

            for member in described.members:
                # described_row names the member whose metadata does not decode
                with contextlib.suppress(InputError):
                    topics.update(decode_subscription(member.metadata).topics)
        counts, racks = self._metadata(topics)
        row = described_row(
            described,
            counts,
            racks,
            previous_generation=previous_generation,
            timestamp_ms=timestamp_ms,
        )
        return Described(group.group_state, "DescribeGroups", row)

    def _check(self, code: int, api: str) -> None:
        if not code:
            return
        if code in DENIED:
            raise CaptureError(
                f"{api} for group {self.group_id!r} was denied: {_error_text(code)}",
                field="request",
            )
        if code == GROUP_ID_NOT_FOUND:
            raise CaptureError(
                f"group {self.group_id!r} does not exist ({api}: {_error_text(code)})",
                field="--group",
                value=self.group_id,
            )
        failure = CaptureError(
            f"{api} for group {self.group_id!r}: {_error_text(code)}", field="request"
        )
        if code in RETRIABLE:
            forget = getattr(self.exchange, "forget_coordinator", None)
            if forget is not None:
                forget(self.group_id)  # ask FindCoordinator again next poll
            raise _transient(failure)
        raise failure


def _the_group(groups: Sequence[Any], group_id: str, api: str) -> Any:
    for group in groups:
        if group.group_id == group_id:
            return group
    raise CaptureError(f"{api} answered without group {group_id!r}", field="request")


# ---------------------------------------------------------------------------------------------
# the polling loop


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a capture is: polls made, rows in the file (written by this run), the last state."""

    polls: int
    rows: int
    written: int
    state: str


def open_capture(path: str | Path, group_id: str) -> tuple[CaptureRecorder, list[dict[str, Any]]]:
    """A recorder appending to ``path`` and the rows it already holds (resuming). A file
    holding rows of another group is refused before anything is written."""
    recorder = CaptureRecorder(path, group_id)
    rows: list[dict[str, Any]] = []
    if Path(path).exists():
        from assignors.traces.format import generation_to_row

        generations, _ = read_capture(path)
        rows = [generation_to_row(generation) for generation in generations]
    return recorder, rows


def poll_group(
    describer: GroupDescriber,
    recorder: CaptureRecorder,
    captured: Sequence[dict[str, Any]],
    *,
    interval_s: float,
    polls: int | None = None,
    progress: Callable[[Progress], None] = lambda progress: None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Poll until ``polls`` are done (forever when None); append a row whenever the stable
    assignment differs from the last captured one. Returns the rows written. A Ctrl-C
    (KeyboardInterrupt) between or during polls leaves every batch already appended whole.

    The first poll's failures stop the capture (bad settings, a missing group, a refusal);
    after it, transient ones (a lost connection, a moving coordinator) are shown as the
    poll's state and polled through, up to MAX_FAILED_POLLS in a row."""
    last = dict(captured[-1]) if captured else None
    rows = len(captured)
    written = 0
    done = 0
    failed = 0
    while polls is None or done < polls:
        if done:
            sleep(interval_s)
        previous = None if last is None else int(last["generation"])
        try:
            outcome = describer.poll(previous, timestamp_ms=int(clock() * 1000))
        except CaptureError as error:
            failed += 1
            if not done or not error.transient or failed > MAX_FAILED_POLLS:
                raise
            done += 1
            progress(Progress(done, rows, written, f"retrying after: {error.message}"))
            continue
        failed = 0
        done += 1
        row = outcome.row
        if row is not None and not same_assignment(row, last):
            if last is not None and row["generation"] <= last["generation"]:
                row = {**row, "generation": last["generation"] + 1}
                row["reason"] = (
                    f"{row['reason']}; renumbered after generation {last['generation']} "
                    "(the estimate did not move past the last captured row)"
                )
            recorder.append_rows([row])
            last = row
            rows += 1
            written += 1
        progress(Progress(done, rows, written, outcome.state))
    return written


# ---------------------------------------------------------------------------------------------
# __consumer_offsets


OFFSETS_TOPIC = "__consumer_offsets"


def offsets_topic_records(
    settings: Mapping[str, Any],
    group_id: str,
    *,
    timeout_s: float = 30.0,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> Iterator[tuple[int, int, int, bytes | None, bytes | None]]:
    """``(partition, offset, timestamp, key, value)`` of every record of ``__consumer_offsets``
    from its start up to the end offsets seen when reading began, partition by partition;
    ``progress(offsets read, offsets to read)`` after each fetch."""
    require_kafka_python()
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.errors import KafkaError

    servers = ",".join(settings.get("bootstrap_servers", []))
    timeout_ms = int(timeout_s * 1000)
    try:
        consumer = KafkaConsumer(
            **{
                "request_timeout_ms": timeout_ms,
                "bootstrap_timeout_ms": timeout_ms,
                **settings,
                "group_id": None,
                "enable_auto_commit": False,
                "auto_offset_reset": "earliest",
                "exclude_internal_topics": False,
            }
        )
    except KafkaError as error:
        raise CaptureError(
            f"cannot reach the bootstrap servers {servers} within {timeout_s:g} s "
            f"({type(error).__name__})",
            field="bootstrap.servers",
        ) from None
    try:
        partitions = consumer.partitions_for_topic(OFFSETS_TOPIC)
        if not partitions:
            raise CaptureError(
                f"the cluster has no {OFFSETS_TOPIC} topic this client may read",
                field="request",
            )
        assigned = [KafkaTopicPartition(OFFSETS_TOPIC, number) for number in sorted(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        ends = consumer.end_offsets(assigned)
        starts = {tp: consumer.position(tp) for tp in assigned}
        total = sum(max(0, ends[tp] - starts[tp]) for tp in assigned)
        pending = {tp for tp in assigned if starts[tp] < ends[tp]}
        deadline = time.monotonic() + timeout_s
        buffered: dict[int, list[tuple[int, int, int, bytes | None, bytes | None]]] = {}
        progress(0, total)
        while pending:
            if time.monotonic() > deadline:
                raise CaptureError(
                    f"{OFFSETS_TOPIC} did not reach its end offsets within {timeout_s:g} s",
                    field="request",
                )
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    if record.offset < ends[tp]:
                        buffered.setdefault(tp.partition, []).append(
                            (
                                tp.partition,
                                record.offset,
                                record.timestamp,
                                record.key,
                                record.value,
                            )
                        )
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
                deadline = time.monotonic() + timeout_s
            done = sum(min(consumer.position(tp), ends[tp]) - starts[tp] for tp in assigned)
            progress(done, total)
        for partition in sorted(buffered):
            yield from buffered[partition]
    except KafkaError as error:
        raise _kafka_failure(error, f"reading {OFFSETS_TOPIC}") from None
    finally:
        consumer.close()


def offsets_topic_rows(
    records: Iterable[tuple[int, int, int, bytes | None, bytes | None]], group_id: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of ``group_id`` from ``__consumer_offsets`` records (the segment importer's
    decoder and row builder), and notes on records skipped."""
    from assignors.traces.importers.common import ImportOptions
    from assignors.traces.importers.offsets import rows_from_records
    from assignors.traces.importers.segments import decode_record

    skipped: list[Any] = []
    decoded: list[Any] = []
    for partition, offset, timestamp, key, value in records:
        decoded.extend(
            decode_record(
                key,
                value,
                timestamp=timestamp,
                offset=offset,
                source=f"{OFFSETS_TOPIC}-{partition}",
                skipped=skipped,
                wants=lambda group: group == group_id,
            )
        )
    result = rows_from_records(decoded, options=ImportOptions(groups=frozenset({group_id})))
    notes = [str(note) for note in (*skipped, *result.skipped)]
    return [dict(row) for row in result.rows if row["trace_id"] == group_id], notes


def new_rows(
    rows: Sequence[dict[str, Any]], captured: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rows after the last captured generation (a capture read again from the topic's start
    resumes where the file ends)."""
    last = max((int(row["generation"]) for row in captured), default=None)
    return [row for row in rows if last is None or int(row["generation"]) > last]


__all__ = [
    "SECRET_SETTINGS",
    "CaptureError",
    "Described",
    "Exchange",
    "GroupDescriber",
    "KafkaPythonExchange",
    "Progress",
    "client_settings",
    "consumer_group_row",
    "new_rows",
    "offsets_topic_records",
    "offsets_topic_rows",
    "open_capture",
    "poll_group",
    "read_client_properties",
]
