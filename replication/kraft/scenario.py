"""Quorum scenario files: a KRaft controller quorum (nodes, roles, voters, rule switches) and a
list of steps (elections, deliveries, ticks, crashes, restarts, link cuts, proposals, snapshots,
KIP-853 voter changes), plus ``expect`` steps. A file with a top-level ``quorum`` (instead of
the data-plane ``config``) is a quorum scenario; ``ktk replicate FILE`` runs either kind.

>>> scenario = load_quorum_scenario('''
... name: tiny
... quorum: {nodes: {1: controller, 2: controller, 3: controller}, voters: [1, 2, 3]}
... steps:
...   - {elect: 1}
...   - {propose: {broker: 7}}
...   - {settle: 3}
...   - {expect: {leader: 1, epoch: 1, hw: {1: 2, 2: 2, 3: 2}, brokers: {3: [7]}}}
... ''')
>>> result = run_quorum_scenario(scenario)
>>> result.expect_failures, [entry["op"] for entry in result.timeline]
((), ['elect 1', 'propose broker 7', 'settle 3', 'expect'])
>>> load_quorum_scenario(quorum_scenario_to_dict(scenario)) == scenario
True

Every problem is one ``ScenarioError`` naming the step and the field:

>>> load_quorum_scenario('''
... name: bad
... quorum: {nodes: {1: controller, 2: controller, 3: controller}, voters: [1, 2, 3]}
... steps: [{elect: 1}, {remove_voter: 5}]
... ''')
Traceback (most recent call last):
...
replication.errors.ScenarioError: step 1: remove_voter: unknown voter (got 5)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from replication.errors import InputError, ReplicationError, ScenarioError
from replication.kraft.control import ElectionConfig
from replication.kraft.invariants import INVARIANTS
from replication.kraft.quorum import (
    DISRUPTION,
    AlterPartition,
    BrokerHeartbeat,
    BrokerLiveness,
    BrokerRegistration,
    BrokerRegistrationReply,
    NodeSpec,
    Quorum,
    parse_process_roles,
)
from replication.kraft.raft import (
    BeginQuorumEpoch,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftConfig,
    RaftRules,
    VoterChangeError,
    VoteRequest,
    VoteResponse,
)
from replication.kraft.records import (
    ControlledShutdown,
    FenceBroker,
    MetadataRecord,
    PartitionChange,
    RegisterBroker,
    TopicRecord,
)
from replication.scenario import (
    MAX_TIME_MS,
    _check_tree,
    _decode,
    _integer,
    _parse_header,
    _parse_invariants,
    _raw_steps,
    _read_text,
    _shown,
)

__all__ = [
    "QUORUM_INVARIANTS",
    "QuorumScenario",
    "QuorumScenarioResult",
    "QuorumSettings",
    "QuorumStep",
    "is_quorum_document",
    "load_quorum_scenario",
    "node_changes",
    "node_view",
    "quorum_scenario_to_dict",
    "quorum_scenario_to_text",
    "record_text",
    "run_quorum_scenario",
]

QUORUM_INVARIANTS = (*(invariant.name for invariant in INVARIANTS), DISRUPTION)
RULE_NAMES = tuple(f.name for f in fields(RaftRules))
MAX_NODES = 16
MAX_SETTLE_TICKS = 1000
# ops whose target is one node id
NODE_OPS = ("timeout", "crash", "restart", "snapshot", "isolate", "rejoin", "add_voter")
LINK_OPS = ("cut", "heal")
OPS = (
    *NODE_OPS,
    "remove_voter",
    *LINK_OPS,
    "elect",
    "deliver",
    "tick",
    "settle",
    "propose",
    "alter_partition",
    "heartbeat",
    "expect",
)
_OP_OPTIONS = {"snapshot": ("end_offset",)}
_COMMON_OPTIONS = ("comment",)
EXPECT_KEYS = (
    "brokers",
    "broker_epoch",
    "broker_epochs",
    "fenced",
    "partitions",
    "committed",
    "delivered",
    "end_offset",
    "epoch",
    "hw",
    "leader",
    "log_start",
    "not_delivered",
    "roles",
    "snapshots",
    "topics",
    "violations",
    "voted_for",
    "voters",
)
_PER_NODE_EXPECT = (
    "brokers",
    "broker_epoch",
    "broker_epochs",
    "fenced",
    "partitions",
    "end_offset",
    "hw",
    "log_start",
    "roles",
    "snapshots",
    "topics",
    "voted_for",
)
_TOP_LEVEL = ("name", "description", "quorum", "invariants", "steps", "comment")
_QUORUM_FIELDS = (
    "nodes",
    "voters",
    "dynamic_voters",
    "seed",
    "rules",
    "election_timeout_ms",
    "fetch_timeout_ms",
    "request_timeout_ms",
    "broker_heartbeats",
    "elections",
)
ROLE_LETTERS = {
    "leader": "L",
    "follower": "F",
    "candidate": "C",
    "prospective": "P",
    "unattached": "U",
}


@dataclass(frozen=True, slots=True)
class QuorumSettings:
    """The quorum a scenario runs on: ``process.roles`` per node, the first voter set, whether
    KIP-853 voter changes are allowed (``dynamic_voters``), the seed of the election jitter, the
    rule switches and the timeouts."""

    nodes: tuple[tuple[int, tuple[str, ...]], ...]
    voters: tuple[int, ...]
    dynamic_voters: bool = False
    seed: int = 0
    rules: RaftRules = field(default_factory=RaftRules)
    config: RaftConfig = field(default_factory=RaftConfig)
    # KIP-631 heartbeats and fencing by the active controller (None: brokers are not fenced)
    liveness: BrokerLiveness | None = None
    # what the controller elects by (min.insync.replicas, KIP-966 ELR, unclean elections)
    elections: ElectionConfig = field(default_factory=ElectionConfig)

    def specs(self) -> list[NodeSpec]:
        return [NodeSpec(node_id, frozenset(roles)) for node_id, roles in self.nodes]

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(node_id for node_id, _ in self.nodes)

    def is_controller(self, node_id: int) -> bool:
        return any(n == node_id and "controller" in roles for n, roles in self.nodes)


@dataclass(frozen=True, slots=True)
class QuorumStep:
    """One step: ``op``, its target (a node id, a link ``(a, b)``, a count, a record or the
    expectations as sorted pairs) and its options."""

    op: str
    target: Any
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str) -> Any:
        return dict(self.options).get(name)

    def describe(self) -> str:
        if self.op == "expect":
            return "expect"
        target = self.target
        if self.op in LINK_OPS or (self.op == "deliver" and isinstance(target, tuple)):
            return (
                f"{self.op} {target[0]}-{target[1]}"
                if self.op in LINK_OPS
                else (f"deliver {target[0]}->{target[1]}")
            )
        if self.op == "propose":
            return f"propose {record_text(target)}"
        if self.op == "alter_partition":
            text = f"alter_partition by {target[0]}: {target[1]}-{target[2]} isr {list(target[3])}"
            if target[4]:
                text += " broker epochs " + ", ".join(f"{b}@{e}" for b, e in target[4])
            return text
        if self.op == "heartbeat":
            shown = "" if target[1] is None else f" (broker epoch {target[1]})"
            return f"heartbeat by {target[0]}{shown}"
        text = f"{self.op} {target}"
        end_offset = self.option("end_offset")
        if end_offset is not None:
            text += f" (end_offset={end_offset})"
        return text

    def to_dict(self) -> dict[str, Any]:
        target: Any = self.target
        if self.op in LINK_OPS or (self.op == "deliver" and isinstance(target, tuple)):
            target = {"from": target[0], "to": target[1]}
        elif self.op == "propose":
            target = _record_dict(target)
        elif self.op == "alter_partition":
            by, topic, number, isr, epochs = target
            target = {"by": by, "partition": f"{topic}-{number}", "isr": list(isr)}
            if epochs:
                target["broker_epochs"] = {b: e for b, e in epochs}
        elif self.op == "heartbeat":
            target = {"by": target[0]} | ({} if target[1] is None else {"broker_epoch": target[1]})
        elif self.op == "expect":
            target = _thaw(target)
        entry: dict[str, Any] = {self.op: target}
        for key, value in self.options:
            entry[key] = value
        return entry


@dataclass(frozen=True, slots=True)
class QuorumScenario:
    name: str
    settings: QuorumSettings
    steps: tuple[QuorumStep, ...]
    source: str | None = None
    description: str | None = None
    invariants: tuple[str, ...] | None = None


# ------------------------------------------------------------------------------ loading


def is_quorum_document(document: object) -> bool:
    return isinstance(document, Mapping) and "quorum" in document


def read_document(path: str | Path) -> object:
    """Decode a scenario file (JSON or YAML) within the scenario format's limits."""
    source = str(path)
    document = _decode(_read_text(Path(path), source), source)
    try:
        _check_tree(document)
    except ScenarioError as error:
        raise error.located(source=source) from None
    return document


def load_quorum_scenario(
    path_or_text: str | Path | Mapping[str, Any], *, source: str | None = None
) -> QuorumScenario:
    """Parse a quorum scenario from a path, JSON/YAML text or a decoded mapping."""
    if isinstance(path_or_text, Mapping):
        document: object = path_or_text
    else:
        text = str(path_or_text)
        if isinstance(path_or_text, Path) or ("\n" not in text and not text.startswith("{")):
            source = str(path_or_text)
            document = read_document(path_or_text)
        else:
            document = _decode(text, source)
    try:
        _check_tree(document)
        return _parse(document, source)
    except ScenarioError as error:
        raise error.located(source=source) from None


def _parse(document: object, source: str | None) -> QuorumScenario:
    if not isinstance(document, Mapping):
        raise ScenarioError("a scenario is a mapping with name, quorum and steps")
    name, description = _parse_header(document, _TOP_LEVEL)
    settings = _parse_settings(document.get("quorum"))
    invariants = _parse_invariants(document.get("invariants"), QUORUM_INVARIANTS)
    raw_steps = _raw_steps(document)
    voters = set(settings.voters)
    steps = []
    clock = 0
    for index, raw in enumerate(raw_steps):
        step = _parse_step(index, raw, settings, voters)
        if step.op == "tick":
            clock += step.target
        elif step.op == "settle":
            clock += step.target * 100
        if clock > MAX_TIME_MS:
            raise ScenarioError(
                f"the clock would pass {MAX_TIME_MS:,} ms", step=index, field=step.op, value=clock
            )
        steps.append(step)
    return QuorumScenario(name, settings, tuple(steps), source, description, invariants)


def _node_id(value: object, where: str, **located: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return _integer(value, where, 0, 2**31 - 1, **located)


def _parse_settings(raw: object) -> QuorumSettings:
    if not isinstance(raw, Mapping):
        raise ScenarioError("quorum must be a mapping", field="quorum", value=raw)
    unknown = sorted(_shown(key) for key in raw if key not in _QUORUM_FIELDS)
    if unknown:
        raise ScenarioError("unknown quorum field", field=f"quorum.{unknown[0]}", value=unknown[0])
    raw_nodes = raw.get("nodes")
    if not isinstance(raw_nodes, Mapping) or not raw_nodes:
        raise ScenarioError(
            "nodes maps each node id to its process.roles", field="quorum.nodes", value=raw_nodes
        )
    if len(raw_nodes) > MAX_NODES:
        raise ScenarioError(
            f"more than {MAX_NODES} nodes", field="quorum.nodes", value=len(raw_nodes)
        )
    nodes: dict[int, tuple[str, ...]] = {}
    for key, roles in raw_nodes.items():
        node_id = _node_id(key, "quorum.nodes")
        if not isinstance(roles, str):
            raise ScenarioError(
                "process.roles is text: broker, controller or broker,controller",
                field=f"quorum.nodes.{node_id}",
                value=roles,
            )
        try:
            parsed = parse_process_roles(roles, node_id=node_id)
        except InputError as error:
            raise ScenarioError(
                str(error.message), field=f"quorum.nodes.{node_id}", value=roles
            ) from None
        if node_id in nodes:
            raise ScenarioError("node listed twice", field="quorum.nodes", value=node_id)
        nodes[node_id] = tuple(sorted(parsed))
    raw_voters = raw.get("voters")
    if isinstance(raw_voters, str):
        from replication.kraft.quorum import parse_quorum_voters

        try:
            voters = parse_quorum_voters(raw_voters)
        except InputError as error:
            raise ScenarioError(
                str(error.message), field="quorum.voters", value=raw_voters
            ) from None
    elif isinstance(raw_voters, list) and raw_voters:
        voters = tuple(_node_id(v, "quorum.voters") for v in raw_voters)
        if len(set(voters)) != len(voters):
            raise ScenarioError("voter ids repeat", field="quorum.voters", value=raw_voters)
    else:
        raise ScenarioError(
            "voters: a list of node ids or controller.quorum.voters text",
            field="quorum.voters",
            value=raw_voters,
        )
    for voter in voters:
        if voter not in nodes:
            raise ScenarioError("unknown voter", field="quorum.voters", value=voter)
        if "controller" not in nodes[voter]:
            raise ScenarioError(
                "a voter must have the controller role", field="quorum.voters", value=voter
            )
    dynamic = raw.get("dynamic_voters", False)
    if not isinstance(dynamic, bool):
        raise ScenarioError("must be true or false", field="quorum.dynamic_voters", value=dynamic)
    seed = _integer(raw.get("seed", 0), "quorum.seed", 0, 2**63 - 1)
    raw_rules = raw.get("rules", {})
    if not isinstance(raw_rules, Mapping):
        raise ScenarioError("rules maps switch names to true/false", field="quorum.rules")
    for name, value in raw_rules.items():
        if name not in RULE_NAMES:
            raise ScenarioError(
                f"unknown rule; expected one of {', '.join(RULE_NAMES)}",
                field="quorum.rules",
                value=_shown(name),
            )
        if not isinstance(value, bool):
            raise ScenarioError("must be true or false", field=f"quorum.rules.{name}", value=value)
    liveness = _parse_liveness(raw.get("broker_heartbeats", False))
    elections = _parse_elections(raw.get("elections", {}))
    config_values = {}
    for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
        if name in raw:
            config_values[name] = _integer(raw[name], f"quorum.{name}", 1, 10**9)
    return QuorumSettings(
        nodes=tuple(sorted(nodes.items())),
        voters=tuple(sorted(voters)),
        dynamic_voters=dynamic,
        seed=seed,
        rules=RaftRules(**dict(raw_rules)),
        config=RaftConfig(**config_values),
        liveness=liveness,
        elections=elections,
    )


def _parse_elections(raw: object) -> ElectionConfig:
    """``{min_insync_replicas: N, eligible_leader_replicas: B, unclean_leader_election: B}``."""
    if not isinstance(raw, Mapping):
        raise ScenarioError(
            "maps min_insync_replicas, eligible_leader_replicas, unclean_leader_election",
            field="quorum.elections",
            value=_shown(raw),
        )
    values: dict[str, Any] = {}
    for key, item in raw.items():
        where = f"quorum.elections.{_shown(key)}"
        if key == "min_insync_replicas":
            values[key] = _integer(item, where, 1, MAX_NODES)
        elif key in ("eligible_leader_replicas", "unclean_leader_election"):
            if not isinstance(item, bool):
                raise ScenarioError("must be true or false", field=where, value=item)
            values[key] = item
        else:
            raise ScenarioError("unknown field", field=where, value=_shown(key))
    return ElectionConfig(**values)


def _parse_liveness(raw: object) -> BrokerLiveness | None:
    """``broker_heartbeats: true`` (Kafka's timeouts) or ``{session_timeout_ms,
    heartbeat_interval_ms}``; false or absent: no heartbeats, no fencing."""
    if raw is False:
        return None
    if raw is True:
        return BrokerLiveness()
    if not isinstance(raw, Mapping):
        raise ScenarioError(
            "true, false or {session_timeout_ms, heartbeat_interval_ms}",
            field="quorum.broker_heartbeats",
            value=_shown(raw),
        )
    values = {}
    for key, item in raw.items():
        if key not in ("session_timeout_ms", "heartbeat_interval_ms"):
            raise ScenarioError(
                "unknown field", field=f"quorum.broker_heartbeats.{_shown(key)}", value=key
            )
        values[key] = _integer(item, f"quorum.broker_heartbeats.{key}", 1, 10**9)
    return BrokerLiveness(**values)


def _parse_step(index: int, raw: object, settings: QuorumSettings, voters: set[int]) -> QuorumStep:
    if not isinstance(raw, Mapping):
        raise ScenarioError("a step is a mapping like {crash: 1}", step=index, value=raw)
    ops = [key for key in raw if key in OPS]
    if len(ops) != 1:
        unknown = [k for k in raw if k not in OPS and k not in (*_COMMON_OPTIONS, "end_offset")]
        if unknown:
            shown = _shown(unknown[0])
            raise ScenarioError("unknown op", step=index, field=shown, value=shown)
        raise ScenarioError(
            "a step holds exactly one op", step=index, field="op", value=sorted(map(_shown, raw))
        )
    op = str(ops[0])
    for key in raw:
        if key != op and key not in _OP_OPTIONS.get(op, ()) and key not in _COMMON_OPTIONS:
            raise ScenarioError(
                f"field not allowed on {op}", step=index, field=_shown(key), value=raw[key]
            )
    located = {"step": index}
    value = raw[op]
    nodes = set(settings.node_ids)

    def known_node(node: object, where: str = op) -> int:
        node_id = _node_id(node, where, **located)
        if node_id not in nodes:
            raise ScenarioError("unknown node", step=index, field=where, value=node_id)
        return node_id

    target: Any
    if op in NODE_OPS:
        target = known_node(value)
        if op == "add_voter":
            _check_voter_change(index, op, settings)
            if not settings.is_controller(target):
                raise ScenarioError(
                    "only a controller can become a voter", step=index, field=op, value=target
                )
            if target in voters:
                raise ScenarioError("already a voter", step=index, field=op, value=target)
            voters.add(target)
    elif op == "remove_voter":
        node_id = _node_id(value, op, **located)
        if node_id not in voters:
            raise ScenarioError("unknown voter", step=index, field=op, value=node_id)
        _check_voter_change(index, op, settings)
        if len(voters) == 1:
            raise ScenarioError(
                "the last voter cannot be removed", step=index, field=op, value=node_id
            )
        voters.discard(node_id)
        target = node_id
    elif op in LINK_OPS or (op == "deliver" and isinstance(value, Mapping)):
        if not isinstance(value, Mapping) or set(value) != {"from", "to"}:
            raise ScenarioError(
                "a link is {from: A, to: B}", step=index, field=op, value=_shown(value)
            )
        a, b = known_node(value["from"], f"{op}.from"), known_node(value["to"], f"{op}.to")
        if a == b:
            raise ScenarioError("a link joins two nodes", step=index, field=f"{op}.to", value=b)
        target = (a, b)
    elif op == "deliver":
        if value != "all":
            raise ScenarioError(
                "deliver takes all or a link {from: A, to: B}", step=index, field=op, value=value
            )
        target = "all"
    elif op == "elect":
        target = value if value == "any" else known_node(value)
    elif op == "tick":
        target = _integer(value, op, 1, MAX_TIME_MS, **located)
    elif op == "settle":
        target = _integer(value, op, 0, MAX_SETTLE_TICKS, **located)
    elif op == "propose":
        target = _parse_record(value, index)
    elif op == "alter_partition":
        target = _parse_alter_partition(value, index, nodes)
    elif op == "heartbeat":
        target = _parse_heartbeat(value, index, settings)
    else:
        target = _parse_expect(value, index, nodes)
    options: list[tuple[str, Any]] = []
    if op == "snapshot" and "end_offset" in raw:
        options.append(
            ("end_offset", _integer(raw["end_offset"], "end_offset", 1, 2**62, **located))
        )
    if "comment" in raw:
        if not isinstance(raw["comment"], str):
            raise ScenarioError("must be text", step=index, field="comment", value=raw["comment"])
        options.append(("comment", raw["comment"]))
    return QuorumStep(op, target, tuple(options))


def _parse_heartbeat(value: object, index: int, settings: QuorumSettings) -> tuple[Any, ...]:
    """``{by: BROKER}`` or ``{by: BROKER, broker_epoch: E}`` (a heartbeat an earlier
    incarnation sent, delayed on the network)."""
    located = {"step": index}
    if not isinstance(value, Mapping) or not {"by"} <= set(value) <= {"by", "broker_epoch"}:
        raise ScenarioError(
            "{by: BROKER} or {by: BROKER, broker_epoch: E}",
            step=index,
            field="heartbeat",
            value=_shown(value),
        )
    by = _node_id(value["by"], "heartbeat.by", **located)
    if not any(n == by and "broker" in roles for n, roles in settings.nodes):
        raise ScenarioError(
            "only a node with the broker role heartbeats",
            step=index,
            field="heartbeat.by",
            value=by,
        )
    if settings.liveness is None:
        raise ScenarioError(
            "set quorum.broker_heartbeats to send heartbeats", step=index, field="heartbeat"
        )
    epoch = value.get("broker_epoch")
    if epoch is not None:
        epoch = _integer(epoch, "heartbeat.broker_epoch", 0, 2**62, **located)
    return (by, epoch)


def _parse_alter_partition(value: object, index: int, nodes: set[int]) -> tuple[Any, ...]:
    """``{by: BROKER, partition: TOPIC-N, isr: [..]}``, optionally with ``broker_epochs:
    {BROKER: E}`` (what the leader's metadata shows, if not what it applied)."""
    located = {"step": index}
    if not isinstance(value, Mapping) or not {"by", "partition", "isr"} <= set(value) <= {
        "by",
        "partition",
        "isr",
        "broker_epochs",
    }:
        raise ScenarioError(
            "{by: BROKER, partition: TOPIC-N, isr: [BROKER, ...], broker_epochs: {BROKER: E}}",
            step=index,
            field="alter_partition",
            value=_shown(value),
        )
    by = _node_id(value["by"], "alter_partition.by", **located)
    if by not in nodes:
        raise ScenarioError("unknown node", step=index, field="alter_partition.by", value=by)
    name = value["partition"]
    topic, _, number = name.rpartition("-") if isinstance(name, str) else ("", "", "")
    if not topic or not number.isdigit():
        raise ScenarioError(
            "a partition is TOPIC-N", step=index, field="alter_partition.partition", value=name
        )
    isr = value["isr"]
    if not isinstance(isr, list) or not isr:
        raise ScenarioError(
            "a list of broker ids", step=index, field="alter_partition.isr", value=_shown(isr)
        )
    ids = tuple(_node_id(i, "alter_partition.isr", **located) for i in isr)
    raw_epochs = value.get("broker_epochs", {})
    if not isinstance(raw_epochs, Mapping):
        raise ScenarioError(
            "maps ISR members to broker epochs",
            step=index,
            field="alter_partition.broker_epochs",
            value=_shown(raw_epochs),
        )
    epochs = []
    for member, epoch in raw_epochs.items():
        member_id = _node_id(member, "alter_partition.broker_epochs", **located)
        if member_id not in ids:
            raise ScenarioError(
                "not in the requested ISR",
                step=index,
                field="alter_partition.broker_epochs",
                value=member_id,
            )
        where = f"alter_partition.broker_epochs.{member_id}"
        epochs.append((member_id, _integer(epoch, where, 0, 2**62, **located)))
    return (by, topic, int(number), ids, tuple(sorted(epochs)))


def _check_voter_change(index: int, op: str, settings: QuorumSettings) -> None:
    if not settings.dynamic_voters:
        raise ScenarioError(
            "the voters are static (controller.quorum.voters); set quorum.dynamic_voters "
            "(KIP-853) to change them",
            step=index,
            field=op,
        )


def _parse_record(value: object, index: int) -> MetadataRecord:
    if not isinstance(value, Mapping):
        raise ScenarioError(
            "a record is {broker: ID}, {topic: NAME, partitions: N} or {partition: ...}",
            step=index,
            field="propose",
            value=_shown(value),
        )
    keys = set(value)
    located = {"step": index}
    if keys == {"broker"}:
        return RegisterBroker(_node_id(value["broker"], "propose.broker", **located))
    if keys in ({"fence"}, {"unfence"}):
        [key] = keys
        return FenceBroker(_node_id(value[key], f"propose.{key}", **located), key == "fence")
    if keys == {"controlled_shutdown"}:
        where = "propose.controlled_shutdown"
        return ControlledShutdown(_node_id(value["controlled_shutdown"], where, **located))
    if keys == {"topic", "partitions"}:
        topic = value["topic"]
        if not isinstance(topic, str) or not topic:
            raise ScenarioError("a topic name", step=index, field="propose.topic", value=topic)
        return TopicRecord(
            topic, _integer(value["partitions"], "propose.partitions", 1, 10**6, **located)
        )
    partition_keys = {"topic", "partition", "leader", "isr", "leader_epoch"}
    if partition_keys <= keys <= partition_keys | {"replicas"}:
        lists = {}
        for name in ("isr", "replicas"):
            items = value.get(name, [])
            if not isinstance(items, list):
                raise ScenarioError(
                    "a list of broker ids", step=index, field=f"propose.{name}", value=items
                )
            lists[name] = tuple(_node_id(i, f"propose.{name}", **located) for i in items)
        if lists["replicas"] and not set(lists["isr"]) <= set(lists["replicas"]):
            raise ScenarioError(
                "the ISR must be among the replicas",
                step=index,
                field="propose.isr",
                value=list(lists["isr"]),
            )
        return PartitionChange(
            str(value["topic"]),
            _integer(value["partition"], "propose.partition", 0, 10**6, **located),
            _node_id(value["leader"], "propose.leader", **located),
            lists["isr"],
            _integer(value["leader_epoch"], "propose.leader_epoch", 0, 2**31 - 1, **located),
            lists["replicas"],
        )
    raise ScenarioError(
        "a record is {broker: ID}, {topic: NAME, partitions: N} or "
        "{topic, partition, leader, isr, leader_epoch}",
        step=index,
        field="propose",
        value=sorted(map(_shown, keys)),
    )


def _record_dict(record: MetadataRecord) -> dict[str, Any]:
    if isinstance(record, RegisterBroker):
        return {"broker": record.broker_id}
    if isinstance(record, TopicRecord):
        return {"topic": record.name, "partitions": record.partitions}
    if isinstance(record, FenceBroker):
        return {"fence" if record.fenced else "unfence": record.broker_id}
    if isinstance(record, ControlledShutdown):
        return {"controlled_shutdown": record.broker_id}
    out: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "leader": record.leader,
        "isr": list(record.isr),
        "leader_epoch": record.leader_epoch,
    }
    if record.replicas:
        out["replicas"] = list(record.replicas)
    return out


def record_text(record: MetadataRecord) -> str:
    if isinstance(record, RegisterBroker):
        return f"broker {record.broker_id}"
    if isinstance(record, TopicRecord):
        return f"topic {record.name} ({record.partitions})"
    if isinstance(record, FenceBroker):
        return f"{'fence' if record.fenced else 'unfence'} broker {record.broker_id}"
    if isinstance(record, ControlledShutdown):
        return f"controlled shutdown of broker {record.broker_id}"
    return (
        f"partition {record.topic}-{record.partition} leader {record.leader} "
        f"isr {list(record.isr)} epoch {record.leader_epoch}"
    )


def _freeze(value: Any) -> str:
    """Expectations kept as canonical JSON text (hashable, compared by value)."""
    return json.dumps(value, sort_keys=True)


def _thaw(value: str) -> Any:
    return json.loads(value)


def _parse_expect(value: object, index: int, nodes: set[int]) -> str:
    if not isinstance(value, Mapping) or not value:
        raise ScenarioError(
            f"expect maps some of {', '.join(EXPECT_KEYS)} to values",
            step=index,
            field="expect",
            value=_shown(value),
        )
    for key, item in value.items():
        if key not in EXPECT_KEYS:
            raise ScenarioError(
                f"unknown expectation; expected one of {', '.join(EXPECT_KEYS)}",
                step=index,
                field=f"expect.{_shown(key)}",
                value=_shown(key),
            )
        if key in _PER_NODE_EXPECT:
            if not isinstance(item, Mapping):
                raise ScenarioError(
                    "maps node ids to values", step=index, field=f"expect.{key}", value=item
                )
            for node in item:
                node_id = _node_id(node, f"expect.{key}", step=index)
                if node_id not in nodes:
                    raise ScenarioError(
                        "unknown node", step=index, field=f"expect.{key}", value=node_id
                    )
        if key in ("delivered", "not_delivered", "violations") and not (
            isinstance(item, list) and all(isinstance(text, str) for text in item)
        ):
            raise ScenarioError("a list of texts", step=index, field=f"expect.{key}", value=item)
        if key == "violations":
            for name in item:
                if name not in QUORUM_INVARIANTS:
                    raise ScenarioError(
                        "unknown invariant", step=index, field="expect.violations", value=name
                    )
    normalised = {
        key: (
            {str(_node_id(k, key)): v for k, v in item.items()} if key in _PER_NODE_EXPECT else item
        )
        for key, item in value.items()
    }
    return _freeze(normalised)


# ------------------------------------------------------------------------------ writing


def quorum_scenario_to_dict(scenario: QuorumScenario) -> dict[str, Any]:
    settings = scenario.settings
    quorum: dict[str, Any] = {
        "nodes": {node_id: ",".join(roles) for node_id, roles in settings.nodes},
        "voters": list(settings.voters),
    }
    if settings.dynamic_voters:
        quorum["dynamic_voters"] = True
    if settings.liveness is not None:
        quorum["broker_heartbeats"] = (
            True
            if settings.liveness == BrokerLiveness()
            else {
                "session_timeout_ms": settings.liveness.session_timeout_ms,
                "heartbeat_interval_ms": settings.liveness.heartbeat_interval_ms,
            }
        )
    if settings.elections != ElectionConfig():
        quorum["elections"] = {
            f.name: getattr(settings.elections, f.name)
            for f in fields(ElectionConfig)
            if getattr(settings.elections, f.name) != getattr(ElectionConfig(), f.name)
        }
    if settings.seed:
        quorum["seed"] = settings.seed
    rules = {
        f.name: getattr(settings.rules, f.name)
        for f in fields(RaftRules)
        if getattr(settings.rules, f.name) != getattr(RaftRules(), f.name)
    }
    if rules:
        quorum["rules"] = rules
    for f in fields(RaftConfig):
        if f.name != "max_fetch_entries" and getattr(settings.config, f.name) != getattr(
            RaftConfig(), f.name
        ):
            quorum[f.name] = getattr(settings.config, f.name)
    document: dict[str, Any] = {"name": scenario.name}
    if scenario.description:
        document["description"] = scenario.description
    document["quorum"] = quorum
    if scenario.invariants is not None:
        document["invariants"] = list(scenario.invariants)
    document["steps"] = [step.to_dict() for step in scenario.steps]
    return document


def quorum_scenario_to_text(scenario: QuorumScenario) -> str:
    """The scenario as JSON text with one step per line (what the explorer writes)."""
    document = quorum_scenario_to_dict(scenario)
    steps = document.pop("steps")
    head = json.dumps(document, indent=2)[:-2]
    lines = ",\n".join("    " + json.dumps(step) for step in steps)
    return f'{head},\n  "steps": [\n{lines}\n  ]\n}}\n'


# ------------------------------------------------------------------------------ running


@dataclass(frozen=True, slots=True)
class QuorumScenarioResult:
    name: str
    timeline: tuple[dict[str, Any], ...]
    violations: tuple[dict[str, Any], ...]
    expect_failures: tuple[str, ...]
    expectations_checked: int
    document: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.document


def message_text(src: int, dst: int, message: Any) -> str:
    """One delivered message as the timeline shows it (and ``expect.delivered`` matches)."""
    if isinstance(message, BrokerHeartbeat):
        return f"BrokerHeartbeat {src}->{dst} broker epoch {message.broker_epoch}"
    if isinstance(message, BrokerRegistration):
        return f"BrokerRegistration {src}->{dst}"
    if isinstance(message, BrokerRegistrationReply):
        return f"BrokerRegistration {src}->{dst} broker epoch {message.broker_epoch}"
    if isinstance(message, AlterPartition):
        text = (
            f"AlterPartition {src}->{dst} {message.topic}-{message.partition} isr "
            f"{list(message.isr)} leader epoch {message.leader_epoch}"
        )
        if message.broker_epochs:
            shown = ", ".join(f"{b}@{e}" for b, e in message.broker_epochs)
            text += f" broker epochs {shown}"
        return text
    if isinstance(message, VoteRequest):
        kind = "PreVote" if message.pre_vote else "Vote"
        return (
            f"{kind} {src}->{dst} epoch {message.epoch} log {message.end_offset}"
            f"@e{message.last_epoch}"
        )
    if isinstance(message, VoteResponse):
        kind = "PreVote" if message.pre_vote else "Vote"
        verdict = "granted" if message.granted else "refused"
        return f"{kind} {src}->{dst} {verdict} (epoch {message.epoch})"
    if isinstance(message, BeginQuorumEpoch):
        return f"BeginQuorumEpoch {src}->{dst} epoch {message.epoch}"
    if isinstance(message, BeginQuorumEpochResponse):
        return f"BeginQuorumEpoch {src}->{dst} acknowledged"
    if isinstance(message, FetchRequest):
        return (
            f"Fetch {src}->{dst} offset {message.fetch_offset} epoch {message.last_fetched_epoch}"
        )
    if isinstance(message, FetchResponse):
        if message.kind == "records":
            if not message.entries:
                return f"Fetch {src}->{dst} nothing new, HW {message.high_watermark}"
            last = message.fetch_offset + len(message.entries) - 1
            return (
                f"Fetch {src}->{dst} records {message.fetch_offset}..{last}, "
                f"HW {message.high_watermark}"
            )
        if message.kind == "diverging" and message.diverging is not None:
            return (
                f"Fetch {src}->{dst} diverging: truncate to {message.diverging.end_offset} "
                f"(epoch {message.diverging.epoch})"
            )
        if message.kind == "snapshot" and message.snapshot_id is not None:
            return f"Fetch {src}->{dst} below log start: snapshot {_id_text(message.snapshot_id)}"
        return f"Fetch {src}->{dst} not leader (epoch {message.epoch}, leader {message.leader})"
    if isinstance(message, FetchSnapshotRequest):
        return f"FetchSnapshot {src}->{dst} {_id_text(message.snapshot_id)}"
    assert isinstance(message, FetchSnapshotResponse)
    if message.data is None:
        return f"FetchSnapshot {src}->{dst} {_id_text(message.snapshot_id)} not found"
    return f"FetchSnapshot {src}->{dst} {_id_text(message.snapshot_id)} ({len(message.data)} bytes)"


def _id_text(snapshot_id: Any) -> str:
    return f"{snapshot_id.end_offset}-{snapshot_id.epoch}"


def node_view(quorum: Quorum, node_id: int) -> dict[str, Any]:
    node = quorum.nodes[node_id]
    snapshots = sorted(
        name.removesuffix(".checkpoint")
        for name in node.store.names()
        if name.endswith(".checkpoint")
    )
    return {
        "up": node_id in quorum.up,
        "role": node.role if node_id in quorum.up else "down",
        "voter": node.is_voter,
        "epoch": node.epoch,
        "voted_for": node.voted_for,
        "leader": node.leader_id,
        "log_start": node.log_start,
        "end_offset": node.end_offset,
        "hw": node.high_watermark,
        "snapshot": _id_text(node.latest_snapshot) if node.latest_snapshot else None,
        "snapshots": snapshots,
    }


class _Runner:
    """Applies steps to a quorum; ``apply`` is shared by scenario runs and the explorer."""

    def __init__(self, scenario: QuorumScenario, *, record: bool = True) -> None:
        settings = scenario.settings
        names = scenario.invariants
        checked = None if names is None else [n for n in names if n != DISRUPTION]
        self.quorum = Quorum(
            settings.specs(),
            settings.voters,
            seed=settings.seed,
            rules=settings.rules,
            config=settings.config,
            invariants=checked if checked else (None if names is None else []),
            disruption=names is None or DISRUPTION in names,
            liveness=settings.liveness,
            elections=settings.elections,
        )
        self.quorum.keep_messages = record
        self.scenario = scenario

    def down(self) -> set[int]:
        return set(self.quorum.nodes) - self.quorum.up

    def apply(self, index: int, step: QuorumStep, *, strict: bool = True) -> str | None:
        """Run one step; returns a note when it did nothing (nothing in flight, no leader).
        With ``strict``, a step the quorum refuses is a ``ScenarioError`` naming it."""
        quorum = self.quorum
        op, target = step.op, step.target
        try:
            if op in ("timeout", "elect") and target in self.down():
                if strict:
                    raise ScenarioError("the node is down", step=index, field=op, value=target)
                return "down"
            if op == "timeout":
                quorum.timeout(target)
            elif op == "crash":
                if target not in quorum.up:
                    return "already down"
                quorum.crash(target)
            elif op == "restart":
                if target in quorum.up:
                    return "already running"
                quorum.restart(target)
            elif op == "snapshot":
                if target not in quorum.up:
                    return "down"
                node = quorum.nodes[target]
                end_offset = step.option("end_offset")
                if end_offset is not None and end_offset > node.high_watermark:
                    if not strict:
                        return "beyond the high watermark"
                    raise ScenarioError(
                        f"beyond node {target}'s high watermark {node.high_watermark} (a "
                        "snapshot holds committed metadata only)",
                        step=index,
                        field="snapshot.end_offset",
                        value=end_offset,
                    )
                if quorum.snapshot(target, end_offset) is None:
                    return "nothing past the log start"
            elif op == "cut":
                quorum.cut_link(*target)
            elif op == "heal":
                quorum.heal_link(*target)
            elif op == "isolate":
                quorum.isolate(target)
            elif op == "rejoin":
                quorum.rejoin(target)
            elif op == "deliver":
                if target == "all":
                    quorum.deliver_all()
                elif quorum.queues.get(target):
                    quorum.deliver(*target)
                else:
                    return "nothing in flight"
            elif op == "tick":
                quorum.tick(target)
            elif op == "settle":
                quorum.settle(ticks=target)
            elif op == "elect":
                quorum.elect(None if target == "any" else target)
            elif op == "propose":
                if quorum.leader() is None:
                    if strict:
                        raise ScenarioError("no leader to propose to", step=index, field=op)
                    return "no leader"
                quorum.propose(target)
            elif op == "alter_partition":
                by, topic, number, isr, epochs = target
                return quorum.alter_partition(by, topic, number, isr, dict(epochs))
            elif op == "heartbeat":
                return quorum.heartbeat(*target)
            elif op in ("add_voter", "remove_voter"):
                if quorum.leader() is None:
                    if strict:
                        raise ScenarioError("no leader to change the voters", step=index, field=op)
                    return "no leader"
                if op == "add_voter":
                    quorum.add_voter(target)
                else:
                    quorum.remove_voter(target)
        except VoterChangeError as error:
            if not strict:
                return "refused"
            raise ScenarioError(
                f"the leader refuses: {error}", step=index, field=op, value=target
            ) from None
        except ScenarioError:
            raise
        except ReplicationError as error:
            if not strict:
                return str(error)
            raise ScenarioError(str(error), step=index, field=op, value=target) from None
        return None


def run_quorum_scenario(scenario: QuorumScenario) -> QuorumScenarioResult:
    """Run every step, recording the quorum timeline and checking the expectations."""
    runner = _Runner(scenario)
    quorum = runner.quorum
    node_ids = scenario.settings.node_ids
    timeline: list[dict[str, Any]] = []
    failures: list[str] = []
    expectations = 0
    since_expect: list[str] = []
    try:
        for index, step in enumerate(scenario.steps):
            before_messages = len(quorum.delivered)
            before_trace = len(quorum.trace)
            before_violations = len(quorum.violations)
            before = {i: node_view(quorum, i) for i in node_ids}
            note = None
            if step.op == "expect":
                expectations += 1
                failures.extend(_check_expect(index, step, quorum, since_expect))
                since_expect = []
            else:
                note = runner.apply(index, step)
            events = [message_text(*m) for m in quorum.delivered[before_messages:]]
            since_expect.extend(events)
            after = {i: node_view(quorum, i) for i in node_ids}
            entry: dict[str, Any] = {
                "step": index,
                "op": step.describe(),
                "nodes": {str(i): after[i] for i in node_ids},
                "changes": [
                    *(t for t in quorum.trace[before_trace:] if t.startswith("controller ")),
                    *node_changes(before, after),
                ],
                "messages": events,
                "violations": [
                    {"invariant": v.invariant, "detail": v.detail}
                    for v in quorum.violations[before_violations:]
                ],
            }
            if note:
                entry["note"] = note
            comment = step.option("comment")
            if comment:
                entry["comment"] = comment
            timeline.append(entry)
    except ScenarioError as error:
        raise error.located(source=scenario.source) from None
    violations = tuple(
        {"invariant": v["invariant"], "step": entry["step"], "detail": v["detail"]}
        for entry in timeline
        for v in entry["violations"]
    )
    leader = quorum.leader()
    document: dict[str, Any] = {
        "kind": "quorum",
        "name": scenario.name,
        "description": scenario.description,
        "nodes": {str(i): ",".join(roles) for i, roles in scenario.settings.nodes},
        "voters": list(scenario.settings.voters),
        "rules": {f.name: getattr(scenario.settings.rules, f.name) for f in fields(RaftRules)},
        "seed": scenario.settings.seed,
        "invariants": list(scenario.invariants or QUORUM_INVARIANTS),
        "timeline": timeline,
        "final": {
            "leader": leader.node_id if leader else None,
            "epoch": leader.epoch if leader else max(n.epoch for n in quorum.nodes.values()),
            "voters": list(leader.voters) if leader else None,
            "committed": len(quorum.checker.committed),
            "nodes": {str(i): node_view(quorum, i) for i in node_ids},
        },
        "violations": list(violations),
        "expect_failures": failures,
    }
    return QuorumScenarioResult(
        scenario.name, tuple(timeline), violations, tuple(failures), expectations, document
    )


def node_changes(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> list[str]:
    """What a step changed, one line per node: role and epoch, vote, truncation, HW, snapshot."""
    changes = []
    for node_id, now in after.items():
        old = before[node_id]
        parts = []
        if now["role"] != old["role"] or now["epoch"] != old["epoch"]:
            text = f"{now['role']} e{now['epoch']}"
            if now["role"] == "follower" and now["leader"] is not None:
                text += f" of {now['leader']}"
            parts.append(text)
        if now["voted_for"] != old["voted_for"] and now["voted_for"] is not None:
            parts.append(f"voted for {now['voted_for']}")
        if now["end_offset"] < old["end_offset"] and now["up"] and old["up"]:
            parts.append(f"log truncated to {now['end_offset']}")
        if now["hw"] != old["hw"] and now["up"]:
            parts.append(f"HW {now['hw']}")
        if now["snapshot"] != old["snapshot"] and now["snapshot"] is not None:
            parts.append(f"snapshot {now['snapshot']}, log start {now['log_start']}")
        if parts:
            changes.append(f"{node_id}: " + ", ".join(parts))
    return changes


def _partitions_as_expected(node: Any, wanted: object) -> dict[str, list[Any]]:
    """The node's applied partitions, ``name: [leader, leader epoch]``, with the ISR, the ELR
    and whether it is RECOVERING (an unclean election) as further items where the
    expectation lists them."""
    out: dict[str, list[Any]] = {}
    for (topic, number), state in node.image.partitions:
        name = f"{topic}-{number}"
        expected = wanted.get(name) if isinstance(wanted, dict) else None
        full = [
            state.leader,
            state.leader_epoch,
            list(state.isr),
            list(state.elr),
            state.recovering,
        ]
        out[name] = full[: len(expected)] if isinstance(expected, list) else full[:2]
    return out


def _check_expect(index: int, step: QuorumStep, quorum: Quorum, since: list[str]) -> list[str]:
    failures = []
    leader = quorum.leader()
    for key, wanted in _thaw(step.target).items():
        if key in _PER_NODE_EXPECT:
            for node_text, value in wanted.items():
                view = node_view(quorum, int(node_text))
                node = quorum.nodes[int(node_text)]
                if key == "roles":
                    actual: Any = view["role"]
                elif key == "brokers":
                    actual = list(node.image.brokers)
                elif key == "fenced":
                    actual = list(node.image.fenced)
                elif key == "broker_epochs":
                    actual = {str(b): e for b, e in node.image.broker_epochs}
                    value = (
                        {str(b): e for b, e in value.items()} if isinstance(value, dict) else value
                    )
                elif key == "broker_epoch":
                    actual = quorum.broker_epochs.get(int(node_text))
                elif key == "topics":
                    actual = dict(node.image.topics)
                elif key == "partitions":
                    actual = _partitions_as_expected(node, value)
                else:
                    actual = view[key]
                if actual != value:
                    failures.append(
                        f"step {index}: expect.{key}: node {node_text} has {actual!r}, "
                        f"expected {value!r}"
                    )
            continue
        if key == "leader":
            actual = leader.node_id if leader else None
        elif key == "epoch":
            actual = leader.epoch if leader else None
        elif key == "voters":
            actual = list(leader.voters) if leader else None
        elif key == "committed":
            actual = len(quorum.checker.committed)
        elif key == "violations":
            actual = sorted({v.invariant for v in quorum.violations})
            wanted = sorted(set(wanted))
        elif key == "delivered":
            missing = [text for text in wanted if not any(text in event for event in since)]
            if missing:
                failures.append(
                    f"step {index}: expect.delivered: no message like {missing[0]!r} since the "
                    "previous expect step"
                )
            continue
        else:  # not_delivered
            seen = [text for text in wanted if any(text in event for event in since)]
            if seen:
                failures.append(
                    f"step {index}: expect.not_delivered: a message like {seen[0]!r} was "
                    "delivered since the previous expect step"
                )
            continue
        if actual != wanted:
            failures.append(f"step {index}: expect.{key}: got {actual!r}, expected {wanted!r}")
    return failures
