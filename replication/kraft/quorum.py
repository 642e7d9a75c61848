"""A simulated KRaft cluster: controllers (voters) and brokers (observers) on a seeded network.

Each node has ``process.roles`` (``broker``, ``controller`` or both: combined mode); the static
``controller.quorum.voters`` names the first voter set (KIP-853 changes it later through the
log). Messages travel on per-link FIFO queues (a TCP connection each way); cutting a link or
crashing a node drops what was in flight. Time is a simulated millisecond clock moved by
``tick``; nothing reads the wall clock, and every random choice comes from the seed.

>>> quorum = Quorum.static(voters=(1, 2, 3), brokers=(4,), seed=7)
>>> leader = quorum.elect()
>>> offset = quorum.propose(RegisterBroker(4))
>>> quorum.settle()
>>> [quorum.nodes[i].image.brokers for i in (1, 2, 3, 4)]
[(4,), (4,), (4,), (4,)]
>>> quorum.violations
[]
"""

from __future__ import annotations

import random
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from replication.errors import InputError, ReplicationError
from replication.kraft.control import (
    NONE,
    ElectionConfig,
    alter_partition,
    fence_broker,
    heartbeat,
    register_broker,
)
from replication.kraft.invariants import InvariantChecker
from replication.kraft.raft import (
    CANDIDATE,
    LEADER,
    PROSPECTIVE,
    Message,
    Outbox,
    RaftConfig,
    RaftNode,
    RaftRules,
    VoterChangeError,
)
from replication.kraft.records import (
    MetadataImage,
    MetadataRecord,
    PartitionChange,
    RegisterBroker,
    TopicRecord,
)
from replication.kraft.snapshot import MemoryStore, SnapshotId, SnapshotStore
from replication.view import Violation

__all__ = [
    "DISRUPTION",
    "AlterPartition",
    "BrokerHeartbeat",
    "BrokerLiveness",
    "BrokerRegistration",
    "BrokerRegistrationReply",
    "DisruptionCheck",
    "NodeSpec",
    "Quorum",
    "ScheduleResult",
    "measure_schedules_per_second",
    "parse_process_roles",
    "parse_quorum_voters",
    "random_schedule",
]

_VOTER = re.compile(r"^(\d+)@([^:@,\s]+):(\d+)$")
ROLES = ("broker", "controller")


def parse_process_roles(text: str, *, node_id: int) -> frozenset[str]:
    """``process.roles``: ``broker``, ``controller`` or ``broker,controller`` (combined)."""
    roles = [part.strip() for part in text.split(",") if part.strip()]
    if not roles or any(role not in ROLES for role in roles) or len(set(roles)) != len(roles):
        raise InputError(
            "process.roles must be broker, controller or broker,controller",
            field=f"node {node_id}: process.roles",
            value=text,
        )
    return frozenset(roles)


def parse_quorum_voters(text: str) -> tuple[int, ...]:
    """``controller.quorum.voters``: ``id@host:port`` separated by commas.

    >>> parse_quorum_voters("1@controller-1:9093,2@controller-2:9093,3@controller-3:9093")
    (1, 2, 3)
    """
    ids = []
    for part in text.split(","):
        found = _VOTER.match(part.strip())
        if found is None:
            raise InputError(
                "a voter is id@host:port", field="controller.quorum.voters", value=part.strip()
            )
        ids.append(int(found.group(1)))
    if len(set(ids)) != len(ids):
        raise InputError("voter ids repeat", field="controller.quorum.voters", value=text)
    return tuple(ids)


DISRUPTION = "QuorumDisruption"


class DisruptionCheck:
    """``QuorumDisruption``, a liveness property KIP-996 gives: a working leader (fetched from
    by a majority of voters within ``controller.quorum.fetch.timeout.ms``) is never deposed by
    an epoch that a voter started with a log behind what was committed when its election round
    began, an election it cannot win.

    With pre-vote such a voter cannot start the epoch (the voters holding the committed entry
    refuse its pre-vote); without it, a voter cut off from the others times out again and
    again, and the first Vote it sends when it returns makes the leader step down.
    """

    def __init__(self, fetch_timeout_ms: int) -> None:
        self.fetch_timeout_ms = fetch_timeout_ms
        self.states: dict[int, tuple[str, int, int]] = {}
        self.round_committed: dict[int, int] = {}
        # (epoch, node that started it) -> (its log end, the committed end it lacked)
        self.started_behind: dict[tuple[int, int], tuple[int, int]] = {}
        self.reported: set[int] = set()

    def check(
        self,
        nodes: Mapping[int, RaftNode],
        up: Iterable[int],
        now: int,
        committed: int,
        step: int,
        touched: Iterable[int] | None,
        sender: int | None = None,
    ) -> list[Violation]:
        """New violations after an event; ``sender`` sent the message it delivered, if any."""
        out: list[Violation] = []
        running = up if isinstance(up, set | frozenset) else set(up)
        ids = sorted(running) if touched is None else sorted(i for i in touched if i in running)
        for node_id in ids:
            node = nodes[node_id]
            state = (node.role, node.epoch, node.incarnation)
            before = self.states.get(node_id)
            if before == state:
                continue
            self.states[node_id] = state
            if before is None or before[2] != node.incarnation:
                self.round_committed.pop(node_id, None)
                continue
            role_before, epoch_before, _ = before
            if node.role == PROSPECTIVE and role_before != PROSPECTIVE:
                self.round_committed[node_id] = committed
            if (
                node.role == CANDIDATE
                and node.voted_for == node_id
                and (role_before != CANDIDATE or node.epoch > epoch_before)
            ):
                limit = committed
                if role_before == PROSPECTIVE:
                    limit = self.round_committed.pop(node_id, committed)
                if node.end_offset < limit:
                    self.started_behind[(node.epoch, node_id)] = (node.end_offset, limit)
            if (
                role_before == LEADER
                and node.role != LEADER
                and node.epoch > epoch_before
                and epoch_before not in self.reported
                and sender is not None
                and (node.epoch, sender) in self.started_behind
            ):
                self._deposed(node, epoch_before, sender, now, step, out)
        return out

    def _deposed(
        self,
        node: RaftNode,
        epoch_before: int,
        starter: int,
        now: int,
        step: int,
        out: list[Violation],
    ) -> None:
        voters = node.voters
        since = now - self.fetch_timeout_ms
        # voters that really fetched within the fetch timeout (not the grace a new leader gives)
        heard = [
            v
            for v in voters
            if v == node.node_id
            or (v in node.replica_end and node.last_fetch_ms.get(v, since - 1) >= since)
        ]
        if len(heard) * 2 <= len(voters):
            return  # not a working leader: check-quorum would have it resign
        end, limit = self.started_behind[(node.epoch, starter)]
        self.reported.add(epoch_before)
        out.append(
            Violation(
                DISRUPTION,
                step,
                f"leader {node.node_id} of epoch {epoch_before}, fetched from by voters "
                f"{heard}, was deposed by a Vote for epoch {node.epoch} from node {starter}, "
                f"which started it with a log ending at {end}, behind the committed offset "
                f"{limit}",
            )
        )


@dataclass(frozen=True, slots=True)
class BrokerLiveness:
    """KIP-631: brokers heartbeat the active controller, which registers them, fences one that
    misses ``broker.session.timeout.ms`` (moving the partitions it leads to another in-sync
    broker first) and unfences it when it heartbeats again."""

    session_timeout_ms: int = 9000  # broker.session.timeout.ms
    heartbeat_interval_ms: int = 2000  # broker.heartbeat.interval.ms


class BrokerRegistration(NamedTuple):
    """``BrokerRegistrationRequest`` from a broker process without a broker epoch (just
    started); ``incarnation`` tells its replies from an earlier process's."""

    broker: int
    incarnation: int


class BrokerRegistrationReply(NamedTuple):
    """Sent once the ``RegisterBrokerRecord`` is committed: the broker's new epoch."""

    broker_epoch: int
    incarnation: int


class BrokerHeartbeat(NamedTuple):
    """KIP-631's ``BrokerHeartbeatRequest``: the broker epoch and the offset of the last
    metadata record the broker applied (-1: none)."""

    broker: int
    broker_epoch: int = -1
    metadata_offset: int = -1


class AlterPartition(NamedTuple):
    """A partition leader asks the controller to change the ISR (KIP-497), naming the leader
    epoch it acts on and, KIP-903, the broker epoch of each ISR member as its metadata shows."""

    broker: int
    topic: str
    partition: int
    isr: tuple[int, ...]
    leader_epoch: int
    broker_epochs: tuple[tuple[int, int], ...] = ()


def latest_image(node: RaftNode) -> MetadataImage:
    """The metadata as the leader sees it: applied, plus its uncommitted records."""
    image = node.image
    for index in range(node.applied_offset - node.log_start, len(node.entries)):
        image = image.apply(node.entries[index].payload)
    return image


@dataclass(frozen=True, slots=True)
class NodeSpec:
    node_id: int
    roles: frozenset[str]

    @property
    def controller(self) -> bool:
        return "controller" in self.roles


class Quorum:
    """Nodes, links and a clock; every event is followed by an invariant check."""

    def __init__(
        self,
        specs: Iterable[NodeSpec],
        voters: tuple[int, ...],
        *,
        seed: int = 0,
        rules: RaftRules | None = None,
        config: RaftConfig | None = None,
        stores: Mapping[int, SnapshotStore] | None = None,
        invariants: Iterable[str] | None = None,
        disruption: bool = False,
        liveness: BrokerLiveness | None = None,
        elections: ElectionConfig | None = None,
    ) -> None:
        specs = list(specs)
        by_id = {spec.node_id: spec for spec in specs}
        for voter in voters:
            if voter not in by_id or not by_id[voter].controller:
                raise InputError(
                    "every voter must be a node with the controller role",
                    field="controller.quorum.voters",
                    value=voter,
                )
        self.rules = rules or RaftRules()
        self.config = config or RaftConfig()
        self.nodes: dict[int, RaftNode] = {
            spec.node_id: RaftNode(
                spec.node_id,
                voters,
                seed=seed,
                rules=self.rules,
                config=self.config,
                store=(stores or {}).get(spec.node_id, MemoryStore()),
                controller=spec.controller,
            )
            for spec in sorted(specs, key=lambda s: s.node_id)
        }
        self.specs = by_id
        self.up: set[int] = set(self.nodes)
        self.cut: set[frozenset[int]] = set()
        self.queues: dict[tuple[int, int], deque[Message]] = {}
        self.now = 0
        self.step = 0
        self.checker = InvariantChecker(invariants)
        self.disruption = DisruptionCheck(self.config.fetch_timeout_ms) if disruption else None
        self.sender: int | None = None  # who sent the message being delivered
        self.liveness = liveness
        self.elections = elections or ElectionConfig()
        self.heartbeat_sent: dict[int, int] = {}
        # the broker epoch each running broker process holds (gone when it crashes)
        self.broker_epochs: dict[int, int] = {}
        # registrations waiting to commit: (controller, its epoch, broker epoch, broker,
        # the broker's incarnation); the reply goes out once the record is committed
        self.registrations: list[tuple[int, int, int, int, int]] = []
        # (controller, epoch) -> broker -> last heartbeat: volatile, each new controller starts
        # every registered broker with a fresh session
        self.heard: dict[tuple[int, int], dict[int, int]] = {}
        self.violations: list[Violation] = []
        self.trace: list[str] = []
        self.keep_trace = True  # the explorer runs without the text of every event
        # (sender, receiver, message) of each delivery, kept when ``keep_messages`` is set
        self.keep_messages = False
        self.delivered: list[tuple[int, int, Message]] = []

    @classmethod
    def static(
        cls,
        *,
        voters: tuple[int, ...],
        brokers: tuple[int, ...] = (),
        seed: int = 0,
        rules: RaftRules | None = None,
        config: RaftConfig | None = None,
        stores: Mapping[int, SnapshotStore] | None = None,
        invariants: Iterable[str] | None = None,
    ) -> Quorum:
        """Dedicated controllers ``voters`` and brokers ``brokers`` (observers)."""
        specs = [NodeSpec(v, frozenset({"controller"})) for v in voters]
        specs += [NodeSpec(b, frozenset({"broker"})) for b in brokers]
        return cls(
            specs,
            voters,
            seed=seed,
            rules=rules,
            config=config,
            stores=stores,
            invariants=invariants,
        )

    # --- events ------------------------------------------------------------------------------
    def _event(self, text: str, touched: Iterable[int] | None = None) -> None:
        self.step += 1
        if self.keep_trace:
            self.trace.append(text)
        self.violations.extend(self.checker.check(self.nodes, self.up, self.step, touched))
        if self.disruption is not None:
            self.violations.extend(
                self.disruption.check(
                    self.nodes,
                    self.up,
                    self.now,
                    len(self.checker.committed),
                    self.step,
                    touched,
                    self.sender,
                )
            )

    def _send(self, src: int, out: Outbox) -> None:
        for dst, message in out:
            if dst in self.up and frozenset((src, dst)) not in self.cut and dst != src:
                queue = self.queues.get((src, dst))
                if queue is None:
                    queue = self.queues[(src, dst)] = deque()
                queue.append(message)

    def pending(self) -> list[tuple[int, int]]:
        """Links with messages in flight, sorted."""
        return sorted(link for link, queue in self.queues.items() if queue)

    def deliver(self, src: int, dst: int) -> None:
        """Deliver the oldest message on link ``src`` -> ``dst``."""
        message = self.queues[(src, dst)].popleft()
        if self.keep_messages:
            self.delivered.append((src, dst, message))
        if isinstance(message, BrokerHeartbeat):
            self._on_heartbeat(dst, message)
            return
        if isinstance(message, BrokerRegistration):
            self._on_register(dst, message)
            return
        if isinstance(message, BrokerRegistrationReply):
            self._on_registration_reply(dst, message)
            return
        if isinstance(message, AlterPartition):
            self._on_alter_partition(dst, message)
            return
        self._send(dst, self.nodes[dst].handle(src, message, self.now))
        text = f"deliver {src}->{dst} {type(message).__name__}" if self.keep_trace else ""
        self.sender = src
        self._event(text, (dst,))
        self.sender = None

    def tick(self, ms: int = 100) -> None:
        """Move the clock and let every running node run its timers."""
        self.now += ms
        for node_id in sorted(self.up):
            self._send(node_id, self.nodes[node_id].tick(self.now))
        self._event(f"tick {ms}" if self.keep_trace else "")
        if self.liveness is not None:
            self._heartbeats()

    # --- KIP-631: broker heartbeats and fencing by the active controller ---------------------
    def _heartbeats(self) -> None:
        assert self.liveness is not None
        self._reply_to_registrations()
        for node_id in sorted(self.up):
            if "broker" not in self.specs[node_id].roles:
                continue
            sent = self.heartbeat_sent.get(node_id)
            if sent is not None and self.now - sent < self.liveness.heartbeat_interval_ms:
                continue
            node = self.nodes[node_id]
            if node.leader_id is None:
                continue
            self.heartbeat_sent[node_id] = self.now
            epoch = self.broker_epochs.get(node_id)
            if epoch is None:
                self._broker_sends(node_id, BrokerRegistration(node_id, node.incarnation))
            else:
                self._broker_sends(
                    node_id, BrokerHeartbeat(node_id, epoch, node.applied_offset - 1)
                )
        leader = self.leader()
        if leader is not None:
            self._fence_silent(leader)

    def _broker_sends(self, broker_id: int, message: BrokerHeartbeat | BrokerRegistration) -> None:
        """To the controller the broker knows (handled at once in combined mode)."""
        controller_id = self.nodes[broker_id].leader_id
        assert controller_id is not None
        if controller_id != broker_id:
            self._send(broker_id, [(controller_id, message)])  # type: ignore[list-item]
        elif isinstance(message, BrokerHeartbeat):
            self._on_heartbeat(broker_id, message)
        else:
            self._on_register(broker_id, message)

    def heartbeat(self, broker_id: int, broker_epoch: int | None = None) -> str:
        """Broker ``broker_id`` heartbeats now, with its broker epoch or ``broker_epoch`` (a
        heartbeat an earlier incarnation sent, delayed on the network)."""
        node = self._node(broker_id)
        if broker_id not in self.up:
            raise ReplicationError(f"broker {broker_id} is down")
        if node.leader_id is None:
            return "no controller known"
        epoch = self.broker_epochs.get(broker_id, -1) if broker_epoch is None else broker_epoch
        self._broker_sends(broker_id, BrokerHeartbeat(broker_id, epoch, node.applied_offset - 1))
        return f"sent to {node.leader_id}"

    def _on_register(self, controller_id: int, request: BrokerRegistration) -> None:
        node = self.nodes[controller_id]
        broker_id = request.broker
        if node.role != LEADER:
            self._event(f"registration {broker_id}->{controller_id} (not the controller)", ())
            return
        key = (controller_id, node.epoch)
        if any((c, e) == key and b == broker_id for c, e, _, b, _ in self.registrations):
            return  # a retry while the registration commits
        image = latest_image(node)
        epoch, records = register_broker(image, self.elections, broker_id, node.end_offset)
        for record in records:
            node.propose(record)
        self._session(node, image)[broker_id] = self.now
        self.registrations.append(
            (controller_id, node.epoch, epoch, broker_id, request.incarnation)
        )
        self._event(
            f"controller {controller_id} registers broker {broker_id} (broker epoch {epoch}, "
            "fenced)",
            (controller_id,),
        )
        self._describe_changes(controller_id, records)

    def _reply_to_registrations(self) -> None:
        """Answer each registration whose record is committed; drop those of a controller
        that lost its epoch (the broker asks the next one)."""
        waiting = []
        for item in self.registrations:
            controller_id, epoch, broker_epoch, broker_id, incarnation = item
            node = self.nodes[controller_id]
            if controller_id not in self.up or node.role != LEADER or node.epoch != epoch:
                continue
            if node.high_watermark <= broker_epoch:
                waiting.append(item)
                continue
            reply = BrokerRegistrationReply(broker_epoch, incarnation)
            if controller_id == broker_id:
                self._on_registration_reply(broker_id, reply)
            else:
                self._send(controller_id, [(broker_id, reply)])  # type: ignore[list-item]
        self.registrations = waiting

    def _on_registration_reply(self, broker_id: int, reply: BrokerRegistrationReply) -> None:
        if reply.incarnation != self.nodes[broker_id].incarnation:
            return  # an earlier process asked
        self.broker_epochs[broker_id] = reply.broker_epoch
        self._event(f"broker {broker_id} registered with broker epoch {reply.broker_epoch}", ())

    def _describe_changes(self, controller_id: int, records: Iterable[MetadataRecord]) -> None:
        """One trace line per partition change a decision wrote (the timeline shows them)."""
        for record in records:
            if not isinstance(record, PartitionChange):
                continue
            text = (
                f"controller {controller_id}: {record.topic}-{record.partition} leader "
                f"{record.leader} epoch {record.leader_epoch} isr {list(record.isr)}"
            )
            if record.elr:
                text += f" elr {list(record.elr)}"
            if record.recovering:
                text += " (unclean election: RECOVERING)"
            self._event(text, ())

    def _session(self, leader: RaftNode, image: MetadataImage) -> dict[int, int]:
        key = (leader.node_id, leader.epoch)
        if key not in self.heard:
            self.heard[key] = {broker: self.now for broker in image.brokers}
        return self.heard[key]

    def alter_partition(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        isr: tuple[int, ...],
        broker_epochs: Mapping[int, int] | None = None,
    ) -> str:
        """Broker ``broker_id`` sends AlterPartition to the controller it knows, with the leader
        epoch of its applied metadata and each ISR member's broker epoch as that metadata
        shows it (KIP-903; ``broker_epochs`` overrides some); returns what it did."""
        node = self._node(broker_id)
        if broker_id not in self.up:
            raise ReplicationError(f"broker {broker_id} is down")
        state = node.image.partition(topic, partition)
        if state is None:
            raise ReplicationError(f"broker {broker_id} knows no partition {topic}-{partition}")
        if state.leader != broker_id:
            raise ReplicationError(
                f"broker {broker_id} does not lead {topic}-{partition} (leader {state.leader})"
            )
        controller_id = node.leader_id
        if controller_id is None:
            self._event(f"alter-partition {broker_id}: no controller known", ())
            return "no controller known"
        members = tuple(sorted(isr))
        epochs = {member: node.image.broker_epoch(member) for member in members}
        epochs.update(broker_epochs or {})
        request = AlterPartition(
            broker_id,
            topic,
            partition,
            members,
            state.leader_epoch,
            tuple((m, epochs[m]) for m in members if epochs.get(m, -1) != -1),
        )
        if controller_id == broker_id:
            self._on_alter_partition(broker_id, request)
        else:
            self._send(broker_id, [(controller_id, request)])  # type: ignore[list-item]
            self._event(f"alter-partition {broker_id}->{controller_id}", ())
        return f"sent to {controller_id}"

    def _on_alter_partition(self, controller_id: int, request: AlterPartition) -> None:
        node = self.nodes[controller_id]
        key = f"{request.topic}-{request.partition}"
        if node.role != LEADER:
            self._event(
                f"controller {controller_id} is not active: AlterPartition {key} dropped", ()
            )
            return
        error, change, why = alter_partition(
            latest_image(node),
            self.elections,
            request.broker,
            request.topic,
            request.partition,
            request.isr,
            leader_epoch=request.leader_epoch,
            broker_epochs=request.broker_epochs,
        )
        if error != NONE:
            shown = "" if error in ("FENCED_LEADER_EPOCH", "NOT_CONTROLLER") else f": {error}"
            self._event(
                f"controller {controller_id} refuses AlterPartition {key} from "
                f"{request.broker}{shown} ({why})",
                (),
            )
            return
        if change is not None:
            node.propose(change)
        self._event(
            f"controller {controller_id} accepts AlterPartition {key} isr {list(request.isr)}",
            (controller_id,),
        )

    def _on_heartbeat(self, controller_id: int, request: BrokerHeartbeat) -> None:
        node = self.nodes[controller_id]
        broker_id = request.broker
        if node.role != LEADER:
            self._event(f"heartbeat {broker_id}->{controller_id} (not the controller)", ())
            return
        image = latest_image(node)
        error, records = heartbeat(
            image, self.elections, broker_id, request.broker_epoch, request.metadata_offset
        )
        if error != NONE:
            self._event(
                f"controller {controller_id} rejects the heartbeat of broker {broker_id}: "
                f"{error} (broker epoch {request.broker_epoch}, registered "
                f"{image.broker_epoch(broker_id)})",
                (),
            )
            return
        self._session(node, image)[broker_id] = self.now
        if records:
            for record in records:
                node.propose(record)
            self._event(f"controller {controller_id} unfences broker {broker_id}", (controller_id,))
            self._describe_changes(controller_id, records)
        else:
            self._event(f"heartbeat {broker_id}->{controller_id}", ())

    def _fence_silent(self, leader: RaftNode) -> None:
        assert self.liveness is not None
        image = latest_image(leader)
        heard = self._session(leader, image)
        limit = self.now - self.liveness.session_timeout_ms
        for broker_id in image.brokers:
            if broker_id in image.fenced or heard.get(broker_id, self.now) > limit:
                continue
            records = fence_broker(image, self.elections, broker_id)
            for record in records:
                leader.propose(record)
                image = image.apply(record)
            self._event(f"controller {leader.node_id} fences broker {broker_id}", (leader.node_id,))
            self._describe_changes(leader.node_id, records)

    def timeout(self, node_id: int) -> None:
        """Expire ``node_id``'s election timer now (a pre-vote, or a candidacy)."""
        self._send(node_id, self._node(node_id).start_election(self.now))
        self._event(f"timeout {node_id}", (node_id,))

    def crash(self, node_id: int) -> None:
        self._node(node_id).crash()
        self.broker_epochs.pop(node_id, None)
        self.heartbeat_sent.pop(node_id, None)
        self.up.discard(node_id)
        self._drop(lambda link: node_id in link)
        self._event(f"crash {node_id}", (node_id,))

    def restart(self, node_id: int) -> None:
        self._node(node_id).restart(self.now)
        self.up.add(node_id)
        self._event(f"restart {node_id}", (node_id,))

    def cut_link(self, a: int, b: int) -> None:
        self.cut.add(frozenset((a, b)))
        self._drop(lambda link: set(link) == {a, b})
        self._event(f"cut {a}-{b}", ())

    def heal_link(self, a: int, b: int) -> None:
        self.cut.discard(frozenset((a, b)))
        self._event(f"heal {a}-{b}", ())

    def _drop(self, which: object) -> None:
        for link in list(self.queues):
            if which(link):  # type: ignore[operator]
                del self.queues[link]

    def _node(self, node_id: int) -> RaftNode:
        if node_id not in self.nodes:
            raise InputError("unknown node", field="node", value=node_id)
        return self.nodes[node_id]

    def leader(self) -> RaftNode | None:
        """The running leader of the highest epoch, if any."""
        leaders = [self.nodes[i] for i in sorted(self.up) if self.nodes[i].role == LEADER]
        return max(leaders, key=lambda n: n.epoch) if leaders else None

    def propose(self, record: MetadataRecord) -> int:
        leader = self.leader()
        if leader is None:
            raise ReplicationError("no leader to propose to")
        offset = leader.propose(record)
        self._event(f"propose {record}", (leader.node_id,))
        return offset

    def add_voter(self, node_id: int) -> int:
        """KIP-853 AddVoter through the leader (the node must be a controller)."""
        if not self.specs[node_id].controller:
            raise InputError("only a controller can become a voter", field="voter", value=node_id)
        leader = self._leader_or_fail()
        offset = leader.change_voters(tuple(sorted({*leader.voters, node_id})))
        self._event(f"add-voter {node_id}")
        return offset

    def remove_voter(self, node_id: int) -> int:
        leader = self._leader_or_fail()
        offset = leader.change_voters(tuple(v for v in leader.voters if v != node_id))
        self._event(f"remove-voter {node_id}")
        return offset

    def _leader_or_fail(self) -> RaftNode:
        leader = self.leader()
        if leader is None:
            raise ReplicationError("no leader to change the voters")
        return leader

    def isolate(self, node_id: int) -> None:
        """Cut every link of ``node_id``."""
        self.cut.update(frozenset((node_id, other)) for other in self.nodes if other != node_id)
        self._drop(lambda link: node_id in link)
        self._event(f"isolate {node_id}", ())

    def rejoin(self, node_id: int) -> None:
        """Heal every link of ``node_id``."""
        self.cut = {link for link in self.cut if node_id not in link}
        self._event(f"rejoin {node_id}", ())

    def snapshot(self, node_id: int, end_offset: int | None = None) -> SnapshotId | None:
        snapshot_id = self._node(node_id).take_snapshot(self.now, end_offset)
        self._event(f"snapshot {node_id}", (node_id,))
        return snapshot_id

    # --- drivers -----------------------------------------------------------------------------
    def deliver_all(self, limit: int = 10_000) -> None:
        """Deliver until no message is in flight (links in sorted order, one message each)."""
        for _ in range(limit):
            links = self.pending()
            if not links:
                return
            for src, dst in links:
                if self.queues.get((src, dst)):
                    self.deliver(src, dst)
        raise ReplicationError(f"messages still in flight after {limit} rounds")

    def settle(self, ticks: int = 5) -> None:
        """Deliver everything, then a few ticks (each followed by delivery)."""
        self.deliver_all()
        for _ in range(ticks):
            self.tick()
            self.deliver_all()

    def elect(self, candidate: int | None = None, max_ticks: int = 200) -> RaftNode:
        """Run until a leader is elected (``candidate`` first times out when given)."""
        if candidate is not None:
            self.timeout(candidate)
        for _ in range(max_ticks):
            self.deliver_all()
            leader = self.leader()
            if leader is not None and all(
                self.nodes[v].leader_id == leader.node_id
                for v in leader.voters
                if v in self.up and frozenset((v, leader.node_id)) not in self.cut
            ):
                return leader
            self.tick()
        raise ReplicationError(f"no leader after {max_ticks} ticks")


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    seed: int
    violations: tuple[Violation, ...]
    trace: tuple[str, ...]
    committed: int


def random_schedule(
    seed: int,
    *,
    rules: RaftRules | None = None,
    voters: int = 3,
    brokers: int = 1,
    steps: int = 150,
    snapshots: bool = True,
    spare_controllers: int = 0,
    invariants: Iterable[str] | None = None,
) -> ScheduleResult:
    """One seeded schedule: deliveries, ticks, proposals, crashes, restarts, link cuts and heals,
    snapshots and (with ``spare_controllers``, controllers outside the first voter set) KIP-853
    voter changes, in a random order drawn from ``seed`` only. Stops at the first violation."""
    chooser = random.Random(seed)
    voter_ids = tuple(range(1, voters + 1))
    controller_ids = tuple(range(1, voters + spare_controllers + 1))
    broker_ids = tuple(range(len(controller_ids) + 1, len(controller_ids) + brokers + 1))
    specs = [NodeSpec(c, frozenset({"controller"})) for c in controller_ids]
    specs += [NodeSpec(b, frozenset({"broker"})) for b in broker_ids]
    quorum = Quorum(specs, voter_ids, seed=seed, rules=rules, invariants=invariants)
    ids = controller_ids + broker_ids
    voter_ids = controller_ids
    records = 0
    for _ in range(steps):
        links = quorum.pending()
        # Messages travel much faster than timeouts expire: most steps deliver one.
        if links and chooser.random() < 0.75:
            quorum.deliver(*links[chooser.randrange(len(links))])
            if quorum.violations:
                break
            continue
        roll = chooser.random()
        if roll < 0.55:
            quorum.tick(chooser.choice((100, 250)))
        elif roll < 0.75:
            if quorum.leader() is not None:
                records += 1
                quorum.propose(
                    RegisterBroker(records)
                    if records % 3
                    else TopicRecord(f"t{records}", 1 + records % 4)
                )
        elif roll < 0.81:
            running = sorted(quorum.up & set(voter_ids))
            if len(running) > 1:
                quorum.crash(running[chooser.randrange(len(running))])
        elif roll < 0.88:
            down = sorted(set(ids) - quorum.up)
            if down:
                quorum.restart(down[chooser.randrange(len(down))])
        elif roll < 0.92:
            a, b = chooser.sample(ids, 2)
            quorum.cut_link(a, b)
        elif roll < 0.96:
            if quorum.cut:
                a, b = sorted(sorted(quorum.cut, key=sorted)[chooser.randrange(len(quorum.cut))])
                quorum.heal_link(a, b)
        elif spare_controllers and roll < 0.98:
            leader = quorum.leader()
            if leader is not None:
                target = controller_ids[chooser.randrange(len(controller_ids))]
                try:
                    if target in leader.voters and len(leader.voters) > 1:
                        quorum.remove_voter(target)
                    elif target not in leader.voters:
                        quorum.add_voter(target)
                except VoterChangeError:
                    pass  # refused: one change at a time, or nothing committed in this epoch
        elif snapshots:
            running = sorted(quorum.up)
            quorum.snapshot(running[chooser.randrange(len(running))])
        if quorum.violations:
            break
    return ScheduleResult(
        seed, tuple(quorum.violations), tuple(quorum.trace), len(quorum.checker.committed)
    )


def measure_schedules_per_second(count: int, *, steps: int = 150) -> float:
    """Schedules per second of CPU time (one core) for a 3-voter, 1-broker quorum, all rules
    on, invariants checked after every event."""
    start = time.process_time()
    for seed in range(count):
        random_schedule(seed, steps=steps)
    return count / max(time.process_time() - start, 1e-9)
