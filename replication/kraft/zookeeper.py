"""The ZooKeeper-era controller, for comparison with KRaft: one controller elected through the
ephemeral ``/controller`` znode, a controller epoch (``/controller_epoch`` and its zkVersion)
that fences a zombie controller, and partition state written to ZooKeeper and pushed to brokers
with LeaderAndIsr requests.

The known failure mode: a controller whose ZooKeeper session expired (a long GC pause, a cut to
the ensemble) does not know it yet and keeps acting (a zombie). Brokers refuse its requests once
they have seen the new controller's higher epoch, but a broker that has not heard from the new
controller yet applies them; before KAFKA-6082 (Kafka 2.1) the zombie's partition-state write
also lands in ZooKeeper whenever the partition's own zkVersion still matches, and the brokers'
metadata diverges until the next change of that partition.

Rules (switches, both on as Kafka 2.1+ runs them):

- ``broker_epoch_check``: a broker refuses a request whose controller epoch is older than the
  newest it has seen (``STALE_CONTROLLER_EPOCH``);
- ``fence_zk_writes``: every partition-state write is a ZooKeeper multi-op that also checks the
  zkVersion of ``/controller_epoch`` the controller wrote when elected (KAFKA-6082); a zombie's
  write fails with ``ControllerMovedException`` and it resigns.

>>> cluster = ZkCluster(brokers=(1, 2, 3), partitions={"t-0": (1, 2, 3)})
>>> _ = cluster.elect_controller(1)
>>> cluster.deliver_all()
>>> cluster.expire_session(1)          # node 1 pauses; ZooKeeper deletes /controller
>>> _ = cluster.elect_controller(2)
>>> cluster.elect_leader(1, "t-0", 3)  # the zombie's write is fenced
'ZooKeeper refused: /controller_epoch moved to 2 (KAFKA-6082); controller 1 resigns'
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from replication.errors import ScenarioError
from replication.view import Violation

__all__ = [
    "ZK_INVARIANTS",
    "LeaderAndIsr",
    "PartitionState",
    "ZkCluster",
    "ZkRules",
    "ZkScenario",
    "is_zookeeper_document",
    "load_zookeeper_scenario",
    "run_zookeeper_scenario",
]

ZK_INVARIANTS = ("StaleControllerApplied", "ZkStateFenced", "MetadataAgreement")


@dataclass(frozen=True, slots=True)
class ZkRules:
    broker_epoch_check: bool = True
    fence_zk_writes: bool = True


class PartitionState(NamedTuple):
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, leader epoch, ISR, and the epoch
    of the controller that wrote it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


class LeaderAndIsr(NamedTuple):
    controller: int
    controller_epoch: int
    partition: str
    state: PartitionState


@dataclass
class _Broker:
    broker_id: int
    believes_controller: bool = False
    controller_epoch: int = 0  # the epoch it won, while it believes it is the controller
    controller_epoch_version: int = 0  # zkVersion of /controller_epoch after its increment
    view: dict[str, tuple[PartitionState, int]] | None = None  # controller's cached znodes
    seen_controller_epoch: int = 0
    cache: dict[str, PartitionState] | None = None  # what the broker acts on


class ZkCluster:
    """ZooKeeper (one linearizable store), brokers, and controller -> broker FIFO links."""

    def __init__(
        self,
        *,
        brokers: tuple[int, ...],
        partitions: Mapping[str, tuple[int, ...]],
        rules: ZkRules | None = None,
    ) -> None:
        self.rules = rules or ZkRules()
        self.replicas = dict(partitions)
        # ZooKeeper: znodes and sessions
        self.zk_controller: int | None = None
        self.zk_controller_epoch = 0
        self.zk_controller_epoch_version = 0
        self.zk_partitions: dict[str, tuple[PartitionState, int]] = {
            name: (PartitionState(replicas[0], 0, tuple(replicas), 0), 0)
            for name, replicas in partitions.items()
        }
        self.sessions = {b: True for b in brokers}
        self.brokers = {
            b: _Broker(b, cache={n: s for n, (s, _) in self.zk_partitions.items()}) for b in brokers
        }
        self.queues: dict[tuple[int, int], deque[LeaderAndIsr]] = {}
        self.violations: list[Violation] = []
        self.delivered: list[str] = []
        self.step = 0
        self._reported: set[str] = set()

    # --- ZooKeeper side --------------------------------------------------------------------
    def elect_controller(self, broker_id: int) -> str:
        """``broker_id`` creates the ephemeral ``/controller`` and bumps the controller epoch,
        reads every partition state and sends it to every broker."""
        if self.zk_controller is not None:
            raise ValueError(f"/controller exists: broker {self.zk_controller} is the controller")
        if not self.sessions[broker_id]:
            raise ValueError(f"broker {broker_id}'s ZooKeeper session has expired")
        broker = self.brokers[broker_id]
        self.zk_controller = broker_id
        self.zk_controller_epoch += 1
        self.zk_controller_epoch_version += 1
        broker.believes_controller = True
        broker.controller_epoch = self.zk_controller_epoch
        broker.controller_epoch_version = self.zk_controller_epoch_version
        broker.view = dict(self.zk_partitions)
        for name, (state, _) in sorted(self.zk_partitions.items()):
            self._send_all(broker, name, state)
        return f"broker {broker_id} is the controller, epoch {broker.controller_epoch}"

    def expire_session(self, broker_id: int) -> None:
        """ZooKeeper expires the session (the broker does not know yet): its ephemeral
        ``/controller`` znode is deleted."""
        self.sessions[broker_id] = False
        if self.zk_controller == broker_id:
            self.zk_controller = None

    def reconnect(self, broker_id: int) -> str:
        """The broker learns its session expired: a controller resigns; a new session."""
        broker = self.brokers[broker_id]
        was = broker.believes_controller and self.zk_controller != broker_id
        if was:
            broker.believes_controller = False
        self.sessions[broker_id] = True
        return f"broker {broker_id} reconnects" + (" and resigns" if was else "")

    # --- the controller --------------------------------------------------------------------
    def elect_leader(self, controller_id: int, partition: str, leader: int) -> str:
        """Controller ``controller_id`` makes ``leader`` the partition's leader: a conditional
        write of the partition state (retried once after re-reading on a BadVersion), then a
        LeaderAndIsr to every broker."""
        broker = self.brokers[controller_id]
        if not broker.believes_controller or broker.view is None:
            raise ValueError(f"broker {controller_id} does not believe it is the controller")
        for _attempt in range(2):
            state, version = broker.view[partition]
            new = PartitionState(
                leader,
                state.leader_epoch + 1,
                tuple(sorted({*state.isr, leader})),
                broker.controller_epoch,
            )
            if (
                self.rules.fence_zk_writes
                and self.zk_controller_epoch_version != broker.controller_epoch_version
            ):
                broker.believes_controller = False
                return (
                    f"ZooKeeper refused: /controller_epoch moved to {self.zk_controller_epoch} "
                    f"(KAFKA-6082); controller {controller_id} resigns"
                )
            current, zk_version = self.zk_partitions[partition]
            if zk_version != version:
                broker.view[partition] = (current, zk_version)  # BadVersion: re-read, retry
                continue
            self.zk_partitions[partition] = (new, zk_version + 1)
            broker.view[partition] = (new, zk_version + 1)
            if broker.controller_epoch < self.zk_controller_epoch:
                self._report(
                    "ZkStateFenced",
                    f"zk {partition} {new}",
                    f"ZooKeeper took {partition}'s state (leader {leader}, leader epoch "
                    f"{new.leader_epoch}) from controller {controller_id} of epoch "
                    f"{broker.controller_epoch}; /controller_epoch is {self.zk_controller_epoch}",
                )
            self._send_all(broker, partition, new)
            return f"{partition}: leader {leader}, leader epoch {new.leader_epoch} in ZooKeeper"
        return f"{partition}: BadVersion twice; controller {controller_id} gives up"

    def _send_all(self, controller: _Broker, partition: str, state: PartitionState) -> None:
        request = LeaderAndIsr(controller.broker_id, controller.controller_epoch, partition, state)
        for broker_id in sorted(self.brokers):
            if broker_id != controller.broker_id:
                self.queues.setdefault((controller.broker_id, broker_id), deque()).append(request)
            else:
                self._apply(broker_id, request)

    # --- brokers -----------------------------------------------------------------------------
    def deliver(self, src: int, dst: int) -> bool:
        queue = self.queues.get((src, dst))
        if not queue:
            return False
        self._apply(dst, queue.popleft())
        return True

    def deliver_all(self) -> None:
        while any(self.queues.values()):
            for link in sorted(self.queues):
                self.deliver(*link)

    def _apply(self, broker_id: int, request: LeaderAndIsr) -> None:
        broker = self.brokers[broker_id]
        assert broker.cache is not None
        text = (
            f"LeaderAndIsr {request.controller}->{broker_id} controller epoch "
            f"{request.controller_epoch}: {request.partition} leader {request.state.leader} "
            f"epoch {request.state.leader_epoch}"
        )
        if (
            self.rules.broker_epoch_check
            and request.controller_epoch < broker.seen_controller_epoch
        ):
            self.delivered.append(
                f"{text} rejected (stale controller epoch, seen {broker.seen_controller_epoch})"
            )
            return
        broker.seen_controller_epoch = max(broker.seen_controller_epoch, request.controller_epoch)
        current = broker.cache.get(request.partition)
        if current is not None and request.state.leader_epoch <= current.leader_epoch:
            self.delivered.append(f"{text} ignored (leader epoch {current.leader_epoch})")
            return
        broker.cache[request.partition] = request.state
        self.delivered.append(f"{text} applied")
        if request.controller_epoch < self.zk_controller_epoch:
            self._report(
                "StaleControllerApplied",
                f"stale {broker_id} {request}",
                f"broker {broker_id} applied {request.partition} leader {request.state.leader} "
                f"from controller {request.controller} of epoch {request.controller_epoch}; "
                f"/controller_epoch is {self.zk_controller_epoch}",
            )

    # --- checks ------------------------------------------------------------------------------
    def _report(self, name: str, key: str, detail: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.violations.append(Violation(name, self.step, detail))

    def check_agreement(self) -> None:
        """``MetadataAgreement``: with nothing in flight, every broker acts on the partition
        state that ZooKeeper holds."""
        if any(self.queues.values()):
            return
        for name, (state, _) in sorted(self.zk_partitions.items()):
            differ = {
                b: broker.cache[name]
                for b, broker in sorted(self.brokers.items())
                if broker.cache is not None and broker.cache[name][:2] != state[:2]
            }
            if differ:
                shown = ", ".join(
                    f"broker {b}: leader {s.leader} epoch {s.leader_epoch}"
                    for b, s in differ.items()
                )
                self._report(
                    "MetadataAgreement",
                    f"agree {name} {state} {sorted(differ.items())}",
                    f"nothing in flight, ZooKeeper has {name} leader {state.leader} epoch "
                    f"{state.leader_epoch}, but {shown}",
                )

    def view(self) -> dict[str, Any]:
        return {
            "controller": self.zk_controller,
            "controller_epoch": self.zk_controller_epoch,
            "zk": {
                n: [s.leader, s.leader_epoch] for n, (s, _) in sorted(self.zk_partitions.items())
            },
            "brokers": {
                str(b): {
                    "session": self.sessions[b],
                    "believes_controller": broker.believes_controller,
                    "seen_controller_epoch": broker.seen_controller_epoch,
                    "cache": {
                        n: [s.leader, s.leader_epoch]
                        for n, s in sorted((broker.cache or {}).items())
                    },
                }
                for b, broker in sorted(self.brokers.items())
            },
        }


# ---------------------------------------------------------------------------- scenario files

ZK_OPS = ("elect_controller", "expire_session", "reconnect", "elect_leader", "deliver", "expect")
ZK_EXPECT_KEYS = (
    "controller",
    "controller_epoch",
    "zk",
    "cache",
    "believes_controller",
    "violations",
    "delivered",
)


@dataclass(frozen=True, slots=True)
class ZkScenario:
    name: str
    brokers: tuple[int, ...]
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    rules: ZkRules
    steps: tuple[tuple[str, Any, str | None], ...]
    description: str | None = None
    source: str | None = None


def is_zookeeper_document(document: object) -> bool:
    return isinstance(document, Mapping) and "zookeeper" in document


def _int(value: object, field: str, step: int | None = None) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise ScenarioError("must be a broker id", step=step, field=field, value=value)
    return value


def load_zookeeper_scenario(document: Mapping[str, Any], source: str | None = None) -> ZkScenario:
    """Parse a ``zookeeper`` scenario; one ``ScenarioError`` naming the step and field."""
    try:
        return _parse_zk(document, source)
    except ScenarioError as error:
        raise error.located(source=source) from None


def _parse_zk(document: Mapping[str, Any], source: str | None) -> ZkScenario:
    unknown = [
        k for k in document if k not in ("name", "description", "zookeeper", "steps", "comment")
    ]
    if unknown:
        raise ScenarioError("unknown top-level field", field=str(unknown[0]), value=unknown[0])
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError("a scenario needs a name", field="name", value=name)
    raw = document["zookeeper"]
    if not isinstance(raw, Mapping):
        raise ScenarioError("zookeeper must be a mapping", field="zookeeper", value=raw)
    for key in raw:
        if key not in ("brokers", "partitions", "rules"):
            raise ScenarioError("unknown field", field=f"zookeeper.{key}", value=key)
    raw_brokers = raw.get("brokers")
    if not isinstance(raw_brokers, list) or not raw_brokers:
        raise ScenarioError("a list of broker ids", field="zookeeper.brokers", value=raw_brokers)
    brokers = tuple(sorted({_int(b, "zookeeper.brokers") for b in raw_brokers}))
    raw_partitions = raw.get("partitions")
    if not isinstance(raw_partitions, Mapping) or not raw_partitions:
        raise ScenarioError(
            "maps each partition to its replicas",
            field="zookeeper.partitions",
            value=raw_partitions,
        )
    partitions = []
    for partition, replicas in raw_partitions.items():
        where = f"zookeeper.partitions.{partition}"
        if not isinstance(replicas, list) or not replicas:
            raise ScenarioError("a list of replicas", field=where, value=replicas)
        ids = tuple(_int(r, where) for r in replicas)
        for replica in ids:
            if replica not in brokers:
                raise ScenarioError("unknown broker", field=where, value=replica)
        partitions.append((str(partition), ids))
    raw_rules = raw.get("rules", {})
    names = [f.name for f in fields(ZkRules)]
    if not isinstance(raw_rules, Mapping):
        raise ScenarioError("maps rule names to true/false", field="zookeeper.rules")
    for key, value in raw_rules.items():
        if key not in names:
            raise ScenarioError(
                f"unknown rule; expected one of {', '.join(names)}",
                field="zookeeper.rules",
                value=key,
            )
        if not isinstance(value, bool):
            raise ScenarioError(
                "must be true or false", field=f"zookeeper.rules.{key}", value=value
            )
    raw_steps = document.get("steps")
    if not isinstance(raw_steps, list):
        raise ScenarioError("steps must be a list", field="steps", value=raw_steps)
    steps = []
    known_partitions = {p for p, _ in partitions}
    for index, step in enumerate(raw_steps):
        if not isinstance(step, Mapping):
            raise ScenarioError("a step is a mapping", step=index, value=step)
        ops = [k for k in step if k in ZK_OPS]
        extra = [k for k in step if k not in ZK_OPS and k != "comment"]
        if len(ops) != 1 or extra:
            shown = extra[0] if extra else "op"
            raise ScenarioError(
                "a step holds exactly one known op",
                step=index,
                field=str(shown),
                value=sorted(map(str, step)),
            )
        op = ops[0]
        value = step[op]
        target: Any
        if op in ("elect_controller", "expire_session", "reconnect"):
            target = _int(value, op, index)
            if target not in brokers:
                raise ScenarioError("unknown broker", step=index, field=op, value=target)
        elif op == "elect_leader":
            if not isinstance(value, Mapping) or set(value) != {"by", "partition", "leader"}:
                raise ScenarioError(
                    "{by: CONTROLLER, partition: P, leader: B}",
                    step=index,
                    field=op,
                    value=str(value),
                )
            by = _int(value["by"], f"{op}.by", index)
            leader = _int(value["leader"], f"{op}.leader", index)
            if by not in brokers:
                raise ScenarioError("unknown broker", step=index, field=f"{op}.by", value=by)
            if (
                not isinstance(value["partition"], str)
                or value["partition"] not in known_partitions
            ):
                raise ScenarioError(
                    "unknown partition",
                    step=index,
                    field=f"{op}.partition",
                    value=value["partition"],
                )
            if leader not in dict(partitions)[value["partition"]]:
                raise ScenarioError(
                    "not a replica of the partition", step=index, field=f"{op}.leader", value=leader
                )
            target = (by, value["partition"], leader)
        elif op == "deliver":
            if value == "all":
                target = "all"
            elif isinstance(value, Mapping) and set(value) == {"from", "to"}:
                target = (
                    _int(value["from"], "deliver.from", index),
                    _int(value["to"], "deliver.to", index),
                )
            else:
                raise ScenarioError(
                    "all or {from: A, to: B}", step=index, field=op, value=str(value)
                )
        else:
            if not isinstance(value, Mapping):
                raise ScenarioError("a mapping", step=index, field=op, value=str(value))
            for key, item in value.items():
                if key not in ZK_EXPECT_KEYS:
                    raise ScenarioError(
                        f"unknown expectation; expected one of {', '.join(ZK_EXPECT_KEYS)}",
                        step=index,
                        field=f"expect.{key}",
                        value=key,
                    )
                _check_zk_expect_value(index, key, item, brokers)
            target = json.dumps(value, sort_keys=True)
        comment = step.get("comment")
        steps.append((op, target, comment if isinstance(comment, str) else None))
    description = document.get("description")
    return ZkScenario(
        name,
        brokers,
        tuple(partitions),
        ZkRules(**dict(raw_rules)),
        tuple(steps),
        description if isinstance(description, str) else None,
        source,
    )


def _check_zk_expect_value(index: int, key: str, item: object, brokers: tuple[int, ...]) -> None:
    """The shape each expectation takes, so that a check never meets a value it cannot read."""
    where = f"expect.{key}"

    def pair(value: object) -> bool:
        return (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        )

    def partition_map(value: object) -> bool:
        return isinstance(value, Mapping) and all(pair(v) for v in value.values())

    if key in ("controller", "controller_epoch"):
        ok = item is None or (isinstance(item, int) and not isinstance(item, bool))
        shape = "a broker id or null" if key == "controller" else "an integer"
    elif key == "zk":
        ok, shape = partition_map(item), "{partition: [leader, leader epoch]}"
    elif key == "cache":
        ok = isinstance(item, Mapping) and all(
            partition_map(v) and str(b).isdigit() and int(b) in brokers for b, v in item.items()
        )
        shape = "{broker: {partition: [leader, leader epoch]}} for known brokers"
    elif key == "believes_controller":
        ok = isinstance(item, list) and all(
            isinstance(b, int) and not isinstance(b, bool) for b in item
        )
        shape = "a list of broker ids"
    elif key == "violations":
        ok = isinstance(item, list) and all(v in ZK_INVARIANTS for v in item)
        shape = f"a list of {', '.join(ZK_INVARIANTS)}"
    else:
        ok = isinstance(item, list) and all(isinstance(t, str) for t in item)
        shape = "a list of texts"
    if not ok:
        raise ScenarioError(f"must be {shape}", step=index, field=where, value=str(item)[:80])


def run_zookeeper_scenario(scenario: ZkScenario) -> dict[str, Any]:
    """Run the steps; the result document (``kind: zookeeper``) with the timeline."""

    cluster = ZkCluster(
        brokers=scenario.brokers, partitions=dict(scenario.partitions), rules=scenario.rules
    )
    timeline = []
    failures: list[str] = []
    since: list[str] = []
    for index, (op, target, comment) in enumerate(scenario.steps):
        cluster.step = index
        before_messages = len(cluster.delivered)
        before_violations = len(cluster.violations)
        note = None
        try:
            if op == "elect_controller":
                note = cluster.elect_controller(target)
            elif op == "expire_session":
                cluster.expire_session(target)
            elif op == "reconnect":
                note = cluster.reconnect(target)
            elif op == "elect_leader":
                note = cluster.elect_leader(*target)
            elif op == "deliver":
                if target == "all":
                    cluster.deliver_all()
                elif not cluster.deliver(*target):
                    note = "nothing in flight"
            else:
                failures += _check_zk_expect(index, json.loads(target), cluster, since)
                since = []
        except ValueError as error:
            raise ScenarioError(str(error), source=scenario.source, step=index, field=op) from None
        cluster.check_agreement()
        messages = cluster.delivered[before_messages:]
        since += messages
        entry: dict[str, Any] = {
            "step": index,
            "op": _describe(op, target),
            "state": cluster.view(),
            "messages": messages,
            "violations": [
                {"invariant": v.invariant, "detail": v.detail}
                for v in cluster.violations[before_violations:]
            ],
        }
        if note:
            entry["note"] = note
        if comment:
            entry["comment"] = comment
        timeline.append(entry)
    return {
        "kind": "zookeeper",
        "name": scenario.name,
        "description": scenario.description,
        "brokers": list(scenario.brokers),
        "rules": {f.name: getattr(scenario.rules, f.name) for f in fields(ZkRules)},
        "timeline": timeline,
        "final": cluster.view(),
        "violations": [
            {"invariant": v.invariant, "step": v.step, "detail": v.detail}
            for v in cluster.violations
        ],
        "expect_failures": failures,
    }


def _describe(op: str, target: Any) -> str:
    if op == "elect_leader":
        by, partition, leader = target
        return f"controller {by} elects {leader} for {partition}"
    if op == "deliver" and isinstance(target, tuple):
        return f"deliver {target[0]}->{target[1]}"
    if op == "expect":
        return "expect"
    return f"{op} {target}"


def _check_zk_expect(
    index: int, wanted: dict[str, Any], cluster: ZkCluster, since: list[str]
) -> list[str]:
    failures = []
    view = cluster.view()
    for key, value in wanted.items():
        if key == "delivered":
            missing = [t for t in value if not any(t in m for m in since)]
            if missing:
                failures.append(f"step {index}: expect.delivered: no message like {missing[0]!r}")
            continue
        if key == "violations":
            actual: Any = sorted({v.invariant for v in cluster.violations})
            value = sorted(value)
        elif key == "believes_controller":
            actual = [int(b) for b, s in view["brokers"].items() if s["believes_controller"]]
        elif key == "cache":
            actual = {b: view["brokers"][str(b)]["cache"] for b in value}
            value = {str(b): c for b, c in value.items()}
            actual = {str(b): c for b, c in actual.items()}
        else:
            actual = view[key]
        if actual != value:
            failures.append(f"step {index}: expect.{key}: got {actual!r}, expected {value!r}")
    return failures
