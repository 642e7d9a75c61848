"""The data plane's controller backed by a KRaft metadata log: every decision the simulator's
controller makes (fencing, unfencing, registration, controlled shutdown, elections,
AlterPartition) is written as metadata records to the active controller of a
:class:`~replication.kraft.quorum.Quorum`, replicated to a majority of voters, and the
partition and broker registrations the data plane reads are then replayed from the applied
log, not kept by an oracle. A controller failover loses what was not committed and the next
active controller goes on from what its log holds.

The decisions themselves are those of :class:`replication.controller.Controller` (Kafka's
``ReplicationControlManager`` and ``PartitionChangeBuilder`` rules); this class turns each
outcome into the records Kafka's ``QuorumController`` writes for it, in Kafka's order
(registrations and unfencing first, then ``PartitionChangeRecord``s, then fencing and
controlled shutdown, so that a committed prefix never names a fenced leader), and broker
epochs become the offsets of the brokers' ``RegisterBrokerRecord``s
(``ClusterControlManager.registerBroker``).

Fencing broker 1, which leads: the change is three records on the voters' log; the state read
back says 2 leads in epoch 1, and the restarted broker's epoch is its record's offset:

>>> controller = MetadataLogController(replicas=(1, 2, 3))
>>> controller.fence(1)
True
>>> r = controller.registration
>>> r.leader, r.isr, r.leader_epoch
(2, (2, 3), 1)
>>> [type(record).__name__ for record in controller.written[-2:]]
['PartitionChange', 'FenceBroker']
>>> controller.register(1) == controller.log_end_offset() - 2
True
>>> controller.failover()  # the active controller crashes; another takes over from its log
>>> controller.registration.leader, controller.brokers[1].fenced
(2, False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from replication.controller import RECOVERED, RECOVERING, Controller, PartitionRegistration
from replication.errors import ReplicationError
from replication.kraft.quorum import Quorum
from replication.kraft.raft import RaftNode
from replication.kraft.records import (
    ControlledShutdown,
    Entry,
    FenceBroker,
    LeaderChange,
    MetadataImage,
    MetadataRecord,
    PartitionChange,
    RegisterBroker,
    TopicRecord,
    VotersChange,
)
from replication.kraft.scenario import node_changes, node_view, record_text

__all__ = ["CONTROLLER_IDS", "TOPIC", "MetadataLogController"]

# the data plane's partitions are numbered; in the metadata log they are one topic's
TOPIC = "replicated"
# node ids of the controller quorum (apart from the brokers', as dedicated controllers are)
CONTROLLER_IDS = (3001, 3002, 3003)
# the operations that decide something (those absent from a Controller version are skipped)
DECISIONS = (
    "fence",
    "unfence",
    "controlled_shutdown",
    "register",
    "elect",
    "handle_alter_partition",
    "maybe_elect_leaderless",
    "reassign",
)
_ROUNDS = 200  # ticks allowed for a decision to commit
_TICK_MS = 50

BrokerState = tuple[int, bool, bool]


def _recovering(registration: PartitionRegistration) -> bool:
    return registration.leader_recovery_state == RECOVERING


class MetadataLogController(Controller):
    """A :class:`Controller` whose state lives in a KRaft metadata log (see the module).

    ``written`` lists every record this controller appended (committed or not); ``quorum`` is
    the controller quorum, for faults between data-plane steps (:meth:`failover`,
    :meth:`isolate_active`)."""

    kind: ClassVar[str] = "kraft"

    def __init__(
        self,
        *args: Any,
        controller_ids: tuple[int, ...] = CONTROLLER_IDS,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        self._deciding = 1  # the base class builds the initial state without writing
        self._isolated: int | None = None  # the controller an isolate step cut off
        self._writer = 0  # the active controller that appended the last decision
        super().__init__(*args, **kwargs)
        self.quorum = Quorum.static(voters=controller_ids, seed=seed)
        self.quorum.keep_trace = False
        self.quorum.elect()
        self.written: list[MetadataRecord] = []
        # whether the last decision's records were committed (lost in a failover: False)
        self.committed = True
        self._deciding = 0
        records: list[MetadataRecord] = [
            RegisterBroker(broker_id, -2) for broker_id in sorted(self.brokers)
        ]
        records.append(TopicRecord(TOPIC, len(self._registrations())))
        records += [
            self._partition_record(index, registration)
            for index, registration in enumerate(self._registrations())
        ]
        records += [FenceBroker(b) for b, r in sorted(self.brokers.items()) if r.fenced]
        self._write(records)
        # the quorum after each data-plane step (note_step), in the quorum timeline's format
        self.quorum_timeline: list[dict[str, Any]] = []
        self._views = self._node_views()
        leader = self.quorum.leader()
        self._committed_to = leader.high_watermark if leader is not None else 0

    # ------------------------------------------------------------------ state <-> records

    def _registrations(self) -> list[PartitionRegistration]:
        many = getattr(self, "registrations", None)
        return list(many) if isinstance(many, list) else [self.registration]

    def _set_registration(self, index: int, value: PartitionRegistration) -> None:
        many = getattr(self, "registrations", None)
        if isinstance(many, list):
            many[index] = value
        else:
            self.registration = value

    def _broker_states(self) -> dict[int, BrokerState]:
        return {
            b: (r.broker_epoch, r.fenced, r.in_controlled_shutdown) for b, r in self.brokers.items()
        }

    @staticmethod
    def _partition_record(index: int, registration: PartitionRegistration) -> PartitionChange:
        return PartitionChange(
            TOPIC,
            index,
            registration.leader,
            registration.isr,
            registration.leader_epoch,
            registration.replicas,
            registration.elr,
            registration.last_known_elr,
            _recovering(registration),
            registration.partition_epoch,
            getattr(registration, "adding_replicas", ()),
            getattr(registration, "removing_replicas", ()),
        )

    def _delta(
        self,
        partitions_before: list[PartitionRegistration],
        brokers_before: dict[int, BrokerState],
    ) -> list[MetadataRecord]:
        """The records taking the log's state to the decided one, in Kafka's order."""
        first: list[MetadataRecord] = []
        last: list[MetadataRecord] = []
        for broker_id, (epoch, fenced, leaving) in sorted(self._broker_states().items()):
            old_epoch, was_fenced, was_leaving = brokers_before[broker_id]
            if epoch != old_epoch:
                first.append(RegisterBroker(broker_id, -2, fenced=True))
                if not fenced:
                    first.append(FenceBroker(broker_id, fenced=False))
            elif (was_fenced and not fenced) or (was_leaving and not leaving):
                first.append(FenceBroker(broker_id, fenced=False))
            if fenced and not was_fenced and epoch == old_epoch:
                last.append(FenceBroker(broker_id))
            if leaving and not was_leaving:
                last.append(ControlledShutdown(broker_id))
        changes: list[MetadataRecord] = [
            self._partition_record(index, registration)
            for index, registration in enumerate(self._registrations())
            if registration != partitions_before[index]
        ]
        return [*first, *changes, *last]

    def _load(self, image: MetadataImage) -> None:
        """Replace the decided state by what ``image`` (an applied log) says."""
        for index, registration in enumerate(self._registrations()):
            state = image.partition(TOPIC, index)
            if state is None:
                continue
            fields: dict[str, Any] = {
                "replicas": state.replicas,
                "isr": state.isr,
                "leader": state.leader,
                "leader_epoch": state.leader_epoch,
                "partition_epoch": state.partition_epoch,
                "elr": state.elr,
                "last_known_elr": state.last_known_elr,
                "leader_recovery_state": RECOVERING if state.recovering else RECOVERED,
            }
            if hasattr(registration, "adding_replicas"):  # a registration with reassignments
                fields["adding_replicas"] = state.adding_replicas
                fields["removing_replicas"] = state.removing_replicas
            self._set_registration(index, dataclasses.replace(registration, **fields))
        for broker_id, broker in self.brokers.items():
            if broker_id in image.brokers:
                broker.broker_epoch = image.broker_epoch(broker_id)
                broker.fenced = broker_id in image.fenced
                broker.in_controlled_shutdown = broker_id in image.shutting_down
        self._broker_epochs = None  # brokers are sent a fresh epochs map
        version = getattr(self, "version", None)
        if isinstance(version, int):
            self.version = version + 1  # brokers follow the controller when it moves

    # ------------------------------------------------------------------ the log

    def active(self) -> RaftNode:
        """The active controller, electing one if the quorum has none."""
        leader = self.quorum.leader()
        if leader is None:
            leader = self.quorum.elect()
            self._commit(leader, leader.end_offset)
        return leader

    def log_end_offset(self) -> int:
        return self.active().end_offset

    def _commit(self, leader: RaftNode, end_offset: int) -> bool:
        """Replicate until ``end_offset`` is committed; False if the quorum cannot (the
        leader lost its majority or its leadership)."""
        quorum = self.quorum
        for _ in range(_ROUNDS):
            if leader.role != "leader" or leader.node_id not in quorum.up:
                return False
            if leader.high_watermark >= end_offset:
                return True
            quorum.tick(_TICK_MS)
            quorum.deliver_all()
        return False

    def _write(self, records: list[MetadataRecord]) -> bool:
        """Append ``records`` at the active controller and replicate them; the state is then
        what is committed. True if they were committed."""
        leader = self.active()
        self._writer = leader.node_id
        for record in records:
            if isinstance(record, RegisterBroker) and record.broker_epoch == -2:
                record = RegisterBroker(record.broker_id, leader.end_offset, record.fenced)
            leader.propose(record)
            self.written.append(record)
        committed = self._commit(leader, leader.end_offset)
        # what is committed now: the decision, or (lost with a failover) the new leader's log
        self._load((self.quorum.leader() or leader).image)
        return committed

    def _decide(self, operation: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._deciding:
            return operation(self, *args, **kwargs)
        partitions_before = self._registrations()
        brokers_before = self._broker_states()
        self._deciding += 1
        try:
            result = operation(self, *args, **kwargs)
        finally:
            self._deciding -= 1
        records = self._delta(partitions_before, brokers_before)
        self.committed = self._write(records) if records else True
        if not self.committed:
            self._note_lost(len(records))
        return result

    def _note_lost(self, count: int) -> None:
        """Say in the timeline that the decision just noted never reached the brokers."""
        lists = [self.notes, *getattr(self, "partition_notes", {}).values()]
        text = (
            f"controller {self._writer}: the {count} records of that decision were never "
            f"committed (it lost its quorum), so no broker applies them; "
            f"{self._active_text()} goes on from its own log"
        )
        for notes in {id(n): n for n in lists if n is not None}.values():
            notes.append(text)

    # ------------------------------------------------------------------ faults

    def failover(self) -> None:
        """The active controller crashes; the others elect a new one, which goes on from its
        log (uncommitted records of the old one may be lost). The crashed node restarts as a
        follower."""
        leader = self.quorum.leader()
        if leader is None:
            raise ReplicationError("no active controller to fail over from")
        self.quorum.crash(leader.node_id)
        self._load(self.active().image)
        self.quorum.restart(leader.node_id)
        self.quorum.settle()

    def isolate_active(self) -> int:
        """Cut the active controller off from the other voters: it can append but not commit
        (what it decides next is lost); returns its id. :meth:`heal` undoes it."""
        node_id = self.active().node_id
        self.quorum.isolate(node_id)
        return node_id

    def heal(self, node_id: int) -> None:
        self.quorum.rejoin(node_id)
        self.quorum.settle()
        self._load(self.active().image)

    def fault(self, name: str) -> str:
        """A scenario's ``controller`` step: ``failover`` (:meth:`failover`), ``isolate``
        (:meth:`isolate_active`) or ``heal`` (the controller an ``isolate`` cut off rejoins);
        returns what happened, for the timeline.

        >>> controller = MetadataLogController(replicas=(1, 2))
        >>> controller.fault("failover")
        'controller 3002 crashed; 3003 active in epoch 3'
        >>> controller.fault("isolate")
        'controller 3003 cut off from the other voters'
        >>> controller.fault("heal")  # no decision in between: it is still the active one
        'controller 3003 rejoins; 3003 active in epoch 3'
        """
        if name == "failover":
            old = self.active().node_id
            self.failover()
            return f"controller {old} crashed; {self._active_text()}"
        if name == "isolate":
            self._isolated = self.isolate_active()
            return f"controller {self._isolated} cut off from the other voters"
        if name == "heal":
            node_id = self._isolated
            if node_id is None:
                raise ReplicationError("no controller is cut off (heal follows an isolate)")
            self._isolated = None
            self.heal(node_id)
            return f"controller {node_id} rejoins; {self._active_text()}"
        raise ReplicationError(f"unknown controller fault {name!r}")

    # ------------------------------------------------------------------ the quorum timeline

    def _node_views(self) -> dict[int, dict[str, Any]]:
        return {node_id: node_view(self.quorum, node_id) for node_id in sorted(self.quorum.nodes)}

    def note_step(self, step: int, op: str) -> None:
        """Record the quorum after data-plane step ``step`` (``op`` as the timeline shows it):
        the active controller and its epoch, each voter's view (role, epoch, log end, HW, as
        ``ktk replicate`` shows a quorum scenario's nodes), what changed, and the records the
        active controller committed during the step. Reads the quorum; changes nothing.

        >>> controller = MetadataLogController(replicas=(1, 2, 3))
        >>> controller.fence(1)
        True
        >>> controller.note_step(0, "crash 1")
        >>> entry = controller.quorum_timeline[0]
        >>> entry["active"], entry["epoch"], entry["committed"]
        (3002, 1, ['partition replicated-0 leader 2 isr [2, 3] epoch 1', 'fence broker 1'])
        >>> controller.fault("failover")
        'controller 3002 crashed; 3003 active in epoch 3'
        >>> controller.note_step(1, "controller failover")
        >>> entry = controller.quorum_timeline[1]
        >>> entry["active"], entry["epoch"], entry["changes"][0]
        (3003, 3, 'leader change: 3003 leads epoch 3')
        """
        quorum = self.quorum
        leader = quorum.leader()
        committed: list[str] = []
        if leader is not None:
            start = max(min(self._committed_to, leader.high_watermark), leader.log_start)
            for offset in range(start, leader.high_watermark):
                committed.append(_entry_text(leader.entry_at(offset)))
            self._committed_to = leader.high_watermark
        after = self._node_views()
        self.quorum_timeline.append(
            {
                "step": step,
                "op": op,
                "active": leader.node_id if leader is not None else None,
                "epoch": leader.epoch if leader is not None else None,
                "nodes": {str(node_id): view for node_id, view in after.items()},
                "changes": [
                    *(c for c in committed if c.startswith("leader change")),
                    *node_changes(self._views, after),
                    *(f"committed: {c}" for c in committed if not c.startswith("leader change")),
                ],
                "committed": [c for c in committed if not c.startswith("leader change")],
                "messages": [],
                "violations": [],
            }
        )
        self._views = after

    def quorum_document(self, name: str) -> dict[str, Any]:
        """The quorum's part of a data-plane result: its voters and timeline, in the shape
        ``ktk replicate`` prints and the quorum page draws for a quorum scenario."""
        leader = self.quorum.leader() or self.quorum.nodes[min(self.quorum.nodes)]
        return {
            "kind": "quorum",
            "name": name,
            "nodes": {str(node_id): "controller" for node_id in sorted(self.quorum.nodes)},
            "voters": list(leader.voters),
            "timeline": self.quorum_timeline,
        }

    def _active_text(self) -> str:
        leader = self.active()
        return f"{leader.node_id} active in epoch {leader.epoch}"


def _entry_text(entry: Entry) -> str:
    """One committed metadata log entry as the quorum timeline shows it."""
    payload = entry.payload
    if isinstance(payload, LeaderChange):
        return f"leader change: {payload.leader_id} leads epoch {entry.epoch}"
    if isinstance(payload, VotersChange):
        return f"voters {list(payload.voters)}"
    return record_text(payload)


def _wrap(name: str) -> None:
    operation = getattr(Controller, name)

    def decided(self: MetadataLogController, *args: Any, **kwargs: Any) -> Any:
        result = self._decide(operation, *args, **kwargs)
        if name == "handle_alter_partition" and not self._deciding and not self.committed:
            # the controller lost its quorum before committing: the broker's channel sends
            # the request again to the next active controller, which decides on its own log
            result = self._decide(operation, *args, **kwargs)
            if not self.committed:
                return "NOT_CONTROLLER"
        if name == "register" and not self._deciding:
            return self.brokers[args[0]].broker_epoch  # the offset of its record
        return result

    decided.__name__ = name
    decided.__doc__ = operation.__doc__
    setattr(MetadataLogController, name, decided)


for _name in DECISIONS:
    if hasattr(Controller, _name):
        _wrap(_name)
