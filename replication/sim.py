"""A deterministic discrete-event cluster of one partition (or several on the same brokers,
``PartitionedCluster``): brokers with replica logs, a controller, a simulated clock, a network
that can isolate brokers and lose replies, crashes that keep, lose or tear unflushed data,
failed log directories, partition reassignment, producers and consumers. Nothing
here reads the wall clock or a global random generator: the same steps give the same run, byte
for byte.

S1 (KIP-101 scenario 1) in ``pre-0.11``: the follower restarts, truncates to its lagging HW and
is then elected, so the acknowledged m2 disappears; ``current`` keeps it:

>>> from replication.scenario import load_scenario
>>> s1 = load_scenario('''
... name: s1
... config: {brokers: [1, 2], replicas: [2, 1], min_insync_replicas: 1}
... steps:
...   - {produce: m1}
...   - {fetch: 1}
...   - {fetch: 1}
...   - {produce: m2}
...   - {fetch: 1}
...   - {fetch: 1}
...   - {crash: 1}
...   - {restart: 1}
...   - {crash: 2, detected: true}
... ''')
>>> run_scenario(s1, mode="pre-0.11").acked_lost
['m2']
>>> run_scenario(s1, mode="current").acked_lost
[]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from replication.checks import AnomalyFound, History, final_replica, find_anomalies
from replication.controller import NEEDS_KRAFT, Controller, PartitionRegistration
from replication.errors import ScenarioError
from replication.invariants import (
    INVARIANT_NAMES,
    INVARIANTS,
    Invariant,
    InvariantChecker,
    log_matching,
    majority_invariants,
    select_invariants,
)
from replication.log import LogStorage, ReplicaLog
from replication.modes import ProtocolMode, get_mode
from replication.partition import (
    DUPLICATE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OK,
    REQUEST_TIMED_OUT,
    AlterPartitionRequest,
    PartitionReplica,
)
from replication.producer import FIRST_PRODUCER_ID, Batch, ProducerClient, ProducerSettings
from replication.scenario import (
    COMMENT,
    PRODUCER_OPTIONS,
    Scenario,
    ScenarioConfig,
    Step,
    expect_fields,
    load_scenario,
    scenario_to_dict,
)
from replication.view import (
    ClusterState,
    ClusterView,
    ConsumerView,
    JsonObject,
    LeaderView,
    ReplicaView,
    TimelineEntry,
    Violation,
)

__all__ = [
    "Cluster",
    "PartitionedCluster",
    "Runner",
    "Scenario",
    "ScenarioResult",
    "StorageFactory",
    "controller_factory_for",
    "load_scenario",
    "run_scenario",
    "scenario_to_dict",
]

logger = logging.getLogger(__name__)

# a broker's log storage: ``factory(broker_id)`` for partition 0, ``factory(broker_id,
# partition)`` for the others
StorageFactory = Callable[..., LogStorage]
# builds the controller from Controller's arguments (replication.kraft.log_controller's
# MetadataLogController keeps its state in a KRaft metadata log)
ControllerFactory = type[Controller]
PENDING = "pending"
# the two link endpoints that are not brokers (``cut: {from: controller, to: 2}``)
CONTROLLER = "controller"
CLIENTS = "clients"
Endpoint = int | str


def new_controller(
    factory: ControllerFactory,
    config: ScenarioConfig,
    mode: ProtocolMode,
    partitions: Sequence[tuple[int, ...]],
    quorum_votes: Callable[[int], Mapping[int, tuple[int, int]]],
) -> Controller:
    """The controller of a scenario's ``partitions`` under ``mode``: its rules come from the
    mode (ELR, an epoch bump on every ISR change before KIP-101's diverging epochs, votes by
    log position in the majority mode, asked of ``quorum_votes``) and its settings from the
    config."""
    return factory(
        partitions=partitions,
        min_insync_replicas=config.min_insync_replicas,
        unclean_leader_election=config.unclean_leader_election,
        eligible_leader_replicas=mode.eligible_leader_replicas,
        bump_epoch_on_isr_change=mode.truncation != "diverging-epoch",
        brokers=config.brokers,
        quorum_votes=quorum_votes if mode.commit_rule == "majority" else None,
        vote_log_check=mode.vote_log_check,
    )


@dataclass(slots=True)
class Broker:
    broker_id: int
    replica: PartitionReplica
    broker_epoch: int
    online: bool = True
    isolated: bool = False
    # since when the controller has not heard a heartbeat (crashed or cut off), if so
    silent_since_ms: int | None = None
    # restarted while cut off: registers with the controller once reachable
    needs_registration: bool = False
    # the log directory holding the partition failed: the replica is offline, the process runs
    log_dir_failed: bool = False
    # how many times the process started again: the controller takes a registration from
    # the same start once (the partitions of one broker share its registration)
    incarnation: int = 0


@dataclass(slots=True)
class ProduceRequest:
    value: str
    step: int
    acks: str | int
    leader_id: int
    leader_epoch: int
    required_offset: int
    deadline_ms: int
    result: str = PENDING
    # the producer (and its batch) waiting for this answer; None for a ``produce`` step
    owner: tuple[ProducerClient, Batch] | None = None


@dataclass(slots=True)
class InFlightAlterPartition:
    deliver_at_ms: int
    request: AlterPartitionRequest
    # why the leader sent it, with the step it was sent at (the controller's explanation)
    reason: str = ""


@dataclass(slots=True)
class ConsumerState:
    position: int = 0
    last_epoch: int = -1
    records: list[tuple[int, str]] = field(default_factory=list)
    truncation_detected: bool = False


def effective_mode(config: ScenarioConfig, mode: str | ProtocolMode | None = None) -> ProtocolMode:
    """The mode a scenario runs under: ``mode`` by name (or the config's) with the config's
    switches applied; a ``ProtocolMode`` object is used exactly as given.

    ELR is an option of ``current`` only; under older modes the config's flag is ignored.
    """
    if isinstance(mode, ProtocolMode):
        return mode
    protocol = get_mode(mode or config.mode)
    switches: dict[str, bool] = {}
    if config.maximal_isr is not None:
        switches["maximal_isr"] = config.maximal_isr
    if config.leso_isr_join is not None:
        switches["leso_isr_join"] = config.leso_isr_join
    if config.eligible_leader_replicas and protocol.name == "current":
        switches["eligible_leader_replicas"] = True
    return protocol.with_switches(**switches)


class Cluster:
    """One partition on a few brokers, driven one operation at a time. Several partitions on
    the same brokers (``PartitionedCluster``) are one ``Cluster`` each sharing one controller.
    ``brokers`` holds the brokers with a replica of the partition; every broker of the config
    is kept too (also those without a replica, in ``_all_brokers``), so that broker-wide
    operations reach it and a reassignment can add it with the process state it has."""

    def __init__(
        self,
        config: ScenarioConfig,
        mode: ProtocolMode,
        storage_factory: StorageFactory | None = None,
        *,
        controller: Controller | None = None,
        partition: int = 0,
        controller_factory: ControllerFactory = Controller,
    ) -> None:
        self.config = config
        self.mode = mode
        self.now_ms = 0
        self.step_index = -1
        self.partition = partition
        # read by every view
        self._min_insync_replicas = config.min_insync_replicas
        self._eligible_leader_replicas = mode.eligible_leader_replicas
        self.storage_factory = storage_factory
        if controller is None:
            controller = new_controller(
                controller_factory, config, mode, (config.replicas,), self._quorum_votes
            )
        self.controller = controller
        # the controller's list (changed in place): read directly on the hot paths
        self._registrations = controller.registrations
        replicas = controller.registrations[partition].replicas
        self.brokers: dict[int, Broker] = {}
        # every broker of the cluster: ``brokers`` plus those holding no replica of this
        # partition (same objects; broker-wide operations look brokers up here)
        self._all_brokers: dict[int, Broker] = {}
        for broker_id in (*replicas, *(b for b in config.brokers if b not in replicas)):
            hosted = broker_id in replicas
            broker = Broker(
                broker_id,
                self._new_replica(broker_id, replicas, hosted),
                controller.brokers[broker_id].broker_epoch,
            )
            self._all_brokers[broker_id] = broker
            if hosted:
                self.brokers[broker_id] = broker
        self._assignment = replicas
        self.in_flight: list[InFlightAlterPartition] = []
        self.produces: list[ProduceRequest] = []
        self.acked: list[str] = []
        # the acks=all subset of ``acked``: what the protocol promises to keep
        self.acked_all: list[str] = []
        self.consumers: dict[str, ConsumerState] = {}
        # offset -> value of every record a current leader ever had below its HW
        self.committed: dict[int, str] = {}
        self._committed_view: tuple[tuple[int, str], ...] = ()
        # the offsets from 0 up to this one are all in ``committed``
        self._committed_prefix = 0
        self.lossy_shutdowns = 0
        # directed links that drop every message: (from, to); empty unless a scenario cuts one
        self.cuts: set[tuple[Endpoint, Endpoint]] = set()
        # no broker isolated and no link cut: ``hears`` answers without looking (most steps)
        self._links_intact = True
        # producers declared by ``producer`` steps, by name, in declaration order
        self.producers: dict[str, ProducerClient] = {}
        self._acked_values: set[str] = set()
        # values below a log start a leader moved (delete_records)
        self.deleted: frozenset[str] = frozenset()
        # when a list (record_notes): the rules that changed a value, one sentence each
        self.notes: list[str] | None = None
        self._propagate()

    def _new_replica(
        self, broker_id: int, replicas: tuple[int, ...], hosted: bool
    ) -> PartitionReplica:
        """A replica with an empty log: on disk (``storage_factory``) when the broker hosts
        the partition, in memory and offline when it does not."""
        config = self.config
        storage = None
        if hosted and self.storage_factory is not None:
            factory = self.storage_factory
            storage = (
                factory(broker_id)
                if self.partition == 0
                else factory(broker_id, partition=self.partition)
            )
        log = ReplicaLog(storage=storage)
        log.checkpoint_every_change = config.high_watermark_checkpoint_interval_ms is None
        replica = PartitionReplica(
            broker_id,
            replicas,
            self.mode,
            log=log,
            min_insync_replicas=config.min_insync_replicas,
            lag_time_max_ms=config.replica_lag_time_max_ms,
        )
        if not hosted:
            replica.go_offline()
        return replica

    @property
    def registration(self) -> PartitionRegistration:
        """The controller's record of this cluster's partition."""
        return self.controller.registrations[self.partition]

    def _quorum_votes(self, partition: int) -> dict[int, tuple[int, int]]:
        return self._vote_positions()

    def sync(self) -> None:
        """The brokers learn the controller's current state: for a change made on the
        controller directly (a fencing decided elsewhere, e.g. by a metadata quorum)."""
        self._propagate()

    def record_notes(self) -> list[str]:
        """From now on every rule that changes a replica's LEO or HW, the ISR, the leader or
        an acknowledgement says so in the returned list (shared by the controller and every
        replica; the caller empties it between steps)."""
        notes: list[str] = []
        self.notes = notes
        self.controller.notes = notes
        self.controller.partition_notes[self.partition] = notes
        for broker in self.brokers.values():
            broker.replica.notes = notes
        return notes

    # ------------------------------------------------------------------ queries

    def leader_broker(self) -> Broker | None:
        """The controller's leader if it runs and believes it leads in the current epoch."""
        registration = self._registrations[self.partition]
        broker = self.brokers.get(registration.leader)
        if broker is None or not broker.online:
            return None
        replica = broker.replica
        if replica.role != "leader" or replica.leader_epoch != registration.leader_epoch:
            return None
        return broker

    def _vote_positions(self) -> dict[int, tuple[int, int]]:
        """Majority mode: (epoch of the last record, LEO) of every running replica the
        controller hears from, the position a Raft vote compares (Raft 5.4.1)."""
        positions: dict[int, tuple[int, int]] = {}
        for broker_id, broker in self.brokers.items():
            if broker.online and self.connected(broker_id, CONTROLLER):
                records = broker.replica.log.records
                last_epoch = records[-1].leader_epoch if records else -1
                positions[broker_id] = (last_epoch, broker.replica.log.log_end_offset)
        return positions

    def reachable(self, broker_id: int) -> bool:
        broker = self._all_brokers[broker_id]
        return broker.online and not broker.isolated

    def hears(self, source: Endpoint, target: Endpoint) -> bool:
        """Messages from ``source`` reach ``target``: neither end is an isolated broker
        (``isolate`` drops all of a broker's links) and no ``cut`` step dropped that direction.
        Whether a broker runs is not a link's business: callers check ``online``."""
        if self._links_intact:
            return True
        brokers = self._all_brokers
        if isinstance(source, int) and brokers[source].isolated:
            return False
        if isinstance(target, int) and brokers[target].isolated:
            return False
        return not self.cuts or (source, target) not in self.cuts

    def connected(self, first: Endpoint, second: Endpoint) -> bool:
        """Messages get through both ways between ``first`` and ``second``."""
        return self.hears(first, second) and self.hears(second, first)

    # ------------------------------------------------------------------ clients

    def produce(
        self,
        value: str,
        acks: str | int = "all",
        timeout_ms: int | None = None,
        to: int | None = None,
    ) -> str:
        """Send one record to the leader the controller names, or to broker ``to`` (a producer
        with stale metadata); the broker appends only if it believes it leads."""
        target = self._registrations[self.partition].leader if to is None else to
        if target == -1:
            return self._record_produce(value, acks, NOT_LEADER_OR_FOLLOWER)
        if not self._all_brokers[target].online or not self.hears(CLIENTS, target):
            return self._record_produce(value, acks, REQUEST_TIMED_OUT)
        leader = self._all_brokers[target].replica
        error, offset = leader.append_as_leader(
            value, acks="all" if acks == "all" else str(acks), now_ms=self.now_ms
        )
        if error != NONE:
            return self._record_produce(value, acks, error)
        request = ProduceRequest(
            value,
            self.step_index,
            acks,
            leader.broker_id,
            leader.leader_epoch,
            offset + 1,
            self.now_ms + (timeout_ms or self.config.request_timeout_ms),
        )
        self.produces.append(request)
        if acks == 0:
            request.result = "sent"
        elif acks == 1:
            if self.hears(target, CLIENTS):
                request.result = OK
                self.acked.append(value)
            else:
                request.result = REQUEST_TIMED_OUT  # appended, but the answer never arrives
        self._complete_produces()
        if request.result == PENDING:
            return f"appended at {offset}, waiting for HW"
        return f"appended at {offset}: {request.result}"

    def _record_produce(self, value: str, acks: str | int, result: str) -> str:
        self.produces.append(ProduceRequest(value, self.step_index, acks, -1, -1, -1, -1, result))
        return result

    def _complete_produces(self) -> None:
        """acks=all responses: ok once HW passes the record, or an error (R3.4)."""
        for request in self.produces:
            if request.result != PENDING:
                continue
            broker = self._all_brokers[request.leader_id]
            replica = broker.replica
            if not broker.online:
                # no answer comes: a producer finds out by its own request timeout
                request.result = REQUEST_TIMED_OUT
                continue
            # no leader-epoch check: a leader whose epoch was bumped while it stayed leader
            # completes the request once HW passes it (DelayedProduce.tryComplete,
            # Partition.checkEnoughReplicasReachOffset; makeLeader keeps the followers' LEOs)
            if replica.role != "leader":
                request.result = NOT_LEADER_OR_FOLLOWER
                self._answer_owner(request)
                continue
            if not self.hears(request.leader_id, CLIENTS):
                if self.now_ms >= request.deadline_ms:
                    request.result = REQUEST_TIMED_OUT
                continue
            outcome = replica.produce_completion(request.required_offset)
            if outcome is not None:
                request.result = outcome
                if request.owner is not None:
                    self._answer_owner(request)
                elif outcome == OK:
                    self.acked.append(request.value)
                    self.acked_all.append(request.value)
                if self.notes is not None:
                    self.notes.append(
                        f"{request.value} {'acknowledged' if outcome == OK else outcome}: "
                        f"leader {replica.broker_id}'s high watermark "
                        f"{replica.log.high_watermark} covers its offset "
                        f"{request.required_offset - 1} (acks=all, R3.4)"
                    )
            elif self.now_ms >= request.deadline_ms:
                request.result = REQUEST_TIMED_OUT
                self._answer_owner(request)

    def _answer_owner(self, request: ProduceRequest) -> None:
        """Hand a producer-owned request's answer to its producer (sent while the broker
        runs and its link to the clients is up)."""
        if request.owner is None or not self.hears(request.leader_id, CLIENTS):
            return
        client, batch = request.owner
        self._answer(client, batch, request.result)

    # ------------------------------------------------------------------ producers

    def add_producer(self, name: str, settings: ProducerSettings) -> str:
        """A producer with Kafka's client rules (``replication.producer``); an idempotent one
        gets a producer id (InitProducerId) and epoch 0."""
        producer_id = FIRST_PRODUCER_ID + len(self.producers) if settings.idempotence else -1
        self.producers[name] = ProducerClient(name, settings, producer_id)
        if producer_id >= 0:
            return f"producer id {producer_id}, epoch 0"
        return "producer ready (not idempotent)"

    def send(self, value: str, producer: str) -> str:
        """The application hands ``value`` to ``producer``; the sender drains it at the end of
        the step when a request slot is free."""
        self.producers[producer].send(value, self.now_ms)
        return "queued"

    def _answer(self, client: ProducerClient, batch: Batch, error: str) -> None:
        if not any(flight.batch is batch for flight in client.in_flight):
            return  # the producer stopped waiting for this request
        if (
            client.answer(batch, error, self.now_ms) == "ok"
            and batch.value not in self._acked_values
        ):
            self._acked_values.add(batch.value)
            self.acked.append(batch.value)
            if client.settings.acks == "all":
                self.acked_all.append(batch.value)

    def pump(self) -> None:
        """Every producer sends what it may now (``Runner.step`` calls it after each step; the
        clock calls it after each simulated event)."""
        for client in self.producers.values():
            if not client.queue:
                continue
            while (batch := client.next_to_send(self.now_ms)) is not None:
                self._dispatch(client, batch)

    def _dispatch(self, client: ProducerClient, batch: Batch) -> None:
        """One produce request to the leader the (fresh) metadata names: lost if the broker is
        down or the clients' link to it cut (the producer times out), else handled at once."""
        client.dispatched(batch, self.now_ms)
        acks = client.settings.acks
        target = self._registrations[self.partition].leader
        if target == -1:
            self._answer(client, batch, NOT_LEADER_OR_FOLLOWER)
            return
        if not self._all_brokers[target].online or not self.hears(CLIENTS, target):
            return
        leader = self._all_brokers[target].replica
        error, offset = leader.append_as_leader(
            batch.value,
            acks="all" if acks == "all" else str(acks),
            now_ms=self.now_ms,
            producer=client.fields(batch),
        )
        answered = self.hears(target, CLIENTS)
        if error not in (NONE, DUPLICATE):
            if answered:
                self._answer(client, batch, error)
            return
        if acks == 0:
            return
        if acks == 1:
            if answered:
                self._answer(client, batch, OK)
            return
        request = ProduceRequest(
            batch.value,
            self.step_index,
            acks,
            leader.broker_id,
            leader.leader_epoch,
            offset + 1,
            self.now_ms + client.settings.request_timeout_ms,
            owner=(client, batch),
        )
        produces = self.produces
        if len(produces) >= 64 and len(produces) & (len(produces) - 1) == 0:
            # answered producer requests live on in their producer only: drop them here, so
            # that retries over a long run do not slow every step down
            self.produces = [r for r in produces if r.owner is None or r.result == PENDING]
        self.produces.append(request)
        self._complete_produces()

    def _producer_events(self) -> None:
        """Request timeouts and delivery timeouts that are due, then whatever may be sent."""
        now = self.now_ms
        for client in self.producers.values():
            for batch in client.timed_out(now):
                self._answer(client, batch, REQUEST_TIMED_OUT)
            client.expire(now)
        self.pump()

    def consume(self, consumer_id: str) -> str:
        """Read committed records from the leader; ``current`` validates the position against
        the leader's epoch cache first and so notices truncation (KIP-320)."""
        consumer = self.consumers.setdefault(consumer_id, ConsumerState())
        leader = self.leader_broker()
        if leader is None or not self.connected(CLIENTS, leader.broker_id):
            return "no reachable leader"
        log = leader.replica.log
        note = ""
        if self.mode.leader_epoch_fencing and consumer.last_epoch != -1:
            _epoch, end_offset = log.epoch_cache.end_offset_for(
                consumer.last_epoch, log.log_end_offset
            )
            if 0 <= end_offset < consumer.position:
                consumer.truncation_detected = True
                note = f"truncation detected at {end_offset}; "
                consumer.position = end_offset
        if consumer.position > log.log_end_offset:
            # out of range without validation: reset to the latest committed offset
            consumer.position = log.high_watermark
            note = "offset out of range, reset; "
        elif consumer.position < log.log_start_offset:
            # deleted below the position: auto.offset.reset=earliest
            consumer.position = log.log_start_offset
            note = "offset out of range (deleted), reset to the log start; "
        read = [r for r in log.read_from(consumer.position) if r.offset < log.high_watermark]
        for record in read:
            consumer.records.append((record.offset, record.value))
            consumer.last_epoch = record.leader_epoch
        consumer.position = max(consumer.position, log.high_watermark)
        return f"{note}read {len(read)} records"

    # ------------------------------------------------------------------ replication

    def fetch(self, broker_id: int, response_lost: bool = False) -> str:
        """One fetch round trip of follower ``broker_id`` with the leader it knows."""
        broker = self.brokers.get(broker_id)
        if broker is None:
            return "no replica of this partition"
        replica = broker.replica
        if not broker.online:
            return "offline"
        if broker.log_dir_failed:
            return "log directory offline"
        if replica.role == "leader":
            return "is leader"
        if replica.leader_id == -1:
            return "no leader known"
        if broker.isolated or not self.reachable(replica.leader_id):
            return "leader unreachable"
        if not self.hears(broker_id, replica.leader_id):
            return f"request lost (link {broker_id}->{replica.leader_id} cut)"
        if not self.hears(replica.leader_id, broker_id):
            response_lost = True
        leader = self._all_brokers[replica.leader_id].replica
        if replica.truncating:
            if leader.role != "leader":
                return NOT_LEADER_OR_FOLLOWER
            epoch, end_offset = leader.end_offset_for_epoch(replica.epoch_request())
            if response_lost:
                return "epoch request answered, reply lost"
            outcome, _done = replica.apply_epoch_answer(epoch, end_offset)
            return outcome
        response = leader.handle_fetch(replica.fetch_request(broker.broker_epoch), self.now_ms)
        if response.error == NONE and response.diverging_epoch is None:
            request = leader.maybe_expand_isr(broker_id)
            if request is not None:
                self._send_alter_partition(request)
                if replica.role != "follower":
                    # the ISR change completed a reassignment that made this replica leader:
                    # becoming leader stops its fetcher, and the answer in flight is dropped
                    return "reply dropped: became leader"
            self._complete_produces()
        if response_lost:
            return "reply lost"
        return replica.apply_fetch_response(response)

    def flush(self, broker_id: int) -> str:
        broker = self.brokers.get(broker_id)
        if broker is None:
            return "no replica of this partition"
        if not broker.online:
            return "offline"
        if broker.log_dir_failed:
            return "log directory offline"
        broker.replica.log.flush()
        return f"flushed to {broker.replica.log.flushed}"

    def _send_alter_partition(self, request: AlterPartitionRequest) -> None:
        reason = ""
        if self.notes is not None:
            pending = self._all_brokers[request.leader_id].replica.pending
            why = f": {pending.reason}" if pending is not None and pending.reason else ""
            reason = f"sent at step {self.step_index}{why}"
        self.in_flight.append(
            InFlightAlterPartition(
                self.now_ms + self.config.alter_partition_delay_ms, request, reason
            )
        )
        self._deliver_alter_partitions()

    def _deliver_alter_partitions(self) -> None:
        """Hand due AlterPartition requests to the controller (held while the sender is cut off)."""
        for item in list(self.in_flight):
            sender = self._all_brokers[item.request.leader_id]
            if (
                item.deliver_at_ms > self.now_ms
                or not sender.online
                or not self.hears(sender.broker_id, CONTROLLER)
            ):
                continue
            self.in_flight.remove(item)
            error = self.controller.handle_alter_partition(
                item.request, item.reason, self.partition
            )
            registration = self.registration
            if self.hears(CONTROLLER, sender.broker_id):
                sender.replica.handle_alter_partition_response(
                    item.request, error, registration.isr, registration.partition_epoch, self.now_ms
                )
            self._propagate()

    def _propagate(self) -> None:
        """Every reachable broker applies the controller's latest partition state."""
        registration = self._registrations[self.partition]
        if registration.replicas is not self._assignment:
            self._apply_assignment(registration.replicas)
        eligible = self.controller.eligible_brokers()
        broker_epochs = self.controller.broker_epochs()
        for broker in self.brokers.values():
            if (
                not broker.online
                or broker.log_dir_failed
                or not self.hears(CONTROLLER, broker.broker_id)
            ):
                continue
            replica = broker.replica
            replica.eligible_brokers = eligible
            replica.broker_epochs = broker_epochs
            if replica.replicas is not registration.replicas:
                replica.update_assignment(registration.replicas)
            if registration.leader == broker.broker_id:
                if replica.role != "leader" or replica.leader_epoch != registration.leader_epoch:
                    replica.become_leader(
                        registration.leader_epoch,
                        registration.partition_epoch,
                        registration.isr,
                        self.now_ms,
                    )
                elif registration.partition_epoch > replica.partition_epoch:
                    replica.update_committed_isr(
                        registration.isr, registration.partition_epoch, self.now_ms
                    )
            elif (
                replica.role != "follower"
                or replica.leader_epoch != registration.leader_epoch
                or replica.leader_id != registration.leader
            ):
                replica.become_follower(
                    registration.leader, registration.leader_epoch, registration.partition_epoch
                )
            else:
                replica.partition_epoch = registration.partition_epoch
        self._complete_produces()

    def _apply_assignment(self, replicas: tuple[int, ...]) -> None:
        """The controller changed the partition's replicas (a reassignment): a broker that is
        added gets an empty replica of the partition, with its process as it is (running or
        not), and fetches from the start; a broker that is removed deletes its replica."""
        for broker_id in replicas:
            if broker_id not in self.brokers:
                broker = self._all_brokers[broker_id]
                broker.replica = replica = self._new_replica(broker_id, replicas, True)
                replica.notes = self.notes
                if not broker.online or broker.log_dir_failed:
                    replica.go_offline()
                if self.notes is not None:
                    self.notes.append(
                        f"replica {broker_id} created with an empty log: it is an adding replica "
                        "and fetches from the leader (KIP-455)"
                    )
        for broker_id, broker in list(self.brokers.items()):
            if broker_id not in replicas:
                broker.replica = self._new_replica(broker_id, replicas, False)
                self.in_flight = [i for i in self.in_flight if i.request.leader_id != broker_id]
                if self.notes is not None:
                    self.notes.append(
                        f"replica {broker_id} deleted: the reassignment removed it (KIP-455)"
                    )
        self.brokers = {broker_id: self._all_brokers[broker_id] for broker_id in replicas}
        self._assignment = replicas

    def reassign(self, target_replicas: Sequence[int]) -> str:
        """Move the partition to ``target_replicas`` (KIP-455): the controller records the
        union with adding and removing replicas; the move completes when every target replica
        is in the ISR (``Controller.reassign``)."""
        self.controller.reassign(target_replicas, self.partition)
        self._propagate()
        registration = self.registration
        if registration.adding_replicas or registration.removing_replicas:
            return (
                f"replicas {list(registration.replicas)}: adding "
                f"{list(registration.adding_replicas)}, removing "
                f"{list(registration.removing_replicas)}"
            )
        return f"replicas {list(registration.replicas)}"

    # ------------------------------------------------------------------ faults

    def crash(
        self,
        broker_id: int,
        lose_unflushed: bool = False,
        detected: bool = False,
        torn_tail: bool = False,
    ) -> str:
        broker = self._all_brokers[broker_id]
        if not broker.online:
            return "already offline"
        broker.online = False
        log = broker.replica.log
        before = log.log_end_offset
        log.recover_after_crash(lose_unflushed, torn_tail=torn_tail)
        lost = before - log.log_end_offset
        broker.replica.go_offline()
        self.in_flight = [i for i in self.in_flight if i.request.leader_id != broker_id]
        if (lose_unflushed or lost) and broker_id in self.brokers:
            self.lossy_shutdowns += 1
        if broker.silent_since_ms is None:
            broker.silent_since_ms = self.now_ms
        self._complete_produces()
        if torn_tail:
            outcome = f"torn tail: recovery cut {lost} records" if lost else "crashed"
        else:
            outcome = f"lost {lost} unflushed records" if lose_unflushed else "crashed"
        if detected:
            self.controller.fence(broker_id)
            self._propagate()
            # a KRaft controller cut off from its quorum decides but cannot commit the fence
            outcome += ", fenced" if self._fenced(broker_id) else ", fence not committed"
        return outcome

    def shutdown(self, broker_id: int) -> str:
        """Controlled shutdown: leadership and ISR move away, the log is flushed, then stop."""
        broker = self._all_brokers[broker_id]
        if not broker.online:
            return "already offline"
        if not broker.isolated:
            self.controller.controlled_shutdown(broker_id)
            self._propagate()
        broker.replica.log.flush()
        # a clean shutdown writes the HW checkpoint last (ReplicaManager.shutdown)
        broker.replica.log.checkpoint_high_watermark()
        broker.online = False
        broker.replica.log.recover_after_crash(lose_unflushed=False)
        broker.replica.go_offline()
        self.in_flight = [i for i in self.in_flight if i.request.leader_id != broker_id]
        broker.silent_since_ms = self.now_ms
        if not broker.isolated:
            self.controller.fence(broker_id)
            self._propagate()
        self._complete_produces()
        return "shut down"

    def fail_log_dir(self, broker_id: int) -> str:
        """The broker's log directory fails (an I/O error): the replica goes offline while the
        process keeps running and heartbeating. The controller learns it (KIP-858's heartbeat
        with offline log directories; the ZooKeeper-era log-dir event notification) and treats
        the replica as unavailable: out of the ISR and leadership, not electable, as fencing
        does for this one partition. The directory comes back (with its data) when the broker
        restarts."""
        broker = self._all_brokers[broker_id]
        if not broker.online:
            return "offline"
        if broker.log_dir_failed:
            return "log directory already offline"
        broker.log_dir_failed = True
        broker.replica.go_offline()
        self.in_flight = [i for i in self.in_flight if i.request.leader_id != broker_id]
        self._complete_produces()
        if not self.hears(broker_id, CONTROLLER):
            return "log directory offline (controller not told: cut off)"
        self.controller.fence(broker_id)
        self._propagate()
        return "log directory offline; replica out of ISR and leadership"

    def restart(self, broker_id: int) -> str:
        broker = self._all_brokers[broker_id]
        if broker.log_dir_failed:
            # a restart is how the directory comes back: stop the process, then start it
            broker.log_dir_failed = False
            broker.replica.log.recover_after_crash(lose_unflushed=False)
            broker.online = False
        if broker.online:
            return "already running"
        broker.online = True
        broker.incarnation += 1
        if broker_id in self.brokers:
            broker.replica.role = "follower"
        if not self.connected(broker_id, CONTROLLER):
            broker.needs_registration = True
            return "restarted, cut off"
        self._register(broker)
        return f"restarted (broker epoch {broker.broker_epoch})"

    def _register(self, broker: Broker) -> None:
        broker.needs_registration = False
        broker.silent_since_ms = None
        broker.broker_epoch = self.controller.register(broker.broker_id, broker.incarnation)
        self._propagate()

    def isolate(self, broker_id: int) -> str:
        broker = self._all_brokers[broker_id]
        broker.isolated = True
        self._links_intact = False
        if broker.online and broker.silent_since_ms is None:
            broker.silent_since_ms = self.now_ms
        return "isolated"

    def heal(self, broker_id: int) -> str:
        broker = self._all_brokers[broker_id]
        broker.isolated = False
        self._note_links()
        if not broker.online:
            return "healed (offline)"
        return self._reconnect(broker) or "healed"

    def _note_links(self) -> None:
        """After a heal: are all links up again?"""
        self._links_intact = not self.cuts and not any(
            broker.isolated for broker in self._all_brokers.values()
        )

    def _reconnect(self, broker: Broker) -> str | None:
        """After a heal: register a restart that happened while cut off, resume heartbeats,
        hand over metadata and held AlterPartition requests."""
        if broker.isolated or not broker.online:
            return None
        broker_id = broker.broker_id
        if broker.log_dir_failed:
            # the controller hears of the failed directory now; the replica stays offline
            if self.hears(broker_id, CONTROLLER):
                broker.silent_since_ms = None
                self.controller.fence(broker_id)
                self._propagate()
            return None
        if broker.needs_registration:
            if not self.connected(broker_id, CONTROLLER):
                return None
            self._register(broker)
            return "healed, registered"
        if self.hears(broker_id, CONTROLLER) and broker.silent_since_ms is not None:
            broker.silent_since_ms = None
            self.controller.unfence(broker_id)
        self._propagate()
        self._deliver_alter_partitions()
        return None

    def cut(self, source: Endpoint, target: Endpoint, both: bool = True) -> str:
        """Drop every message from ``source`` to ``target`` (and back, with ``both``). A cut
        broker-to-controller link stops heartbeats: fenced after the session timeout."""
        links = [(source, target), (target, source)] if both else [(source, target)]
        self.cuts.update(links)
        self._links_intact = False
        for broker in self._all_brokers.values():
            if (
                broker.online
                and broker.silent_since_ms is None
                and (broker.broker_id, CONTROLLER) in self.cuts
            ):
                broker.silent_since_ms = self.now_ms
        return "cut " + _link_text(source, target, both)

    def heal_link(self, source: Endpoint, target: Endpoint, both: bool = True) -> str:
        links = [(source, target), (target, source)] if both else [(source, target)]
        self.cuts.difference_update(links)
        self._note_links()
        outcomes = [
            outcome
            for endpoint in (source, target)
            if isinstance(endpoint, int)
            for outcome in [self._reconnect(self._all_brokers[endpoint])]
            if outcome is not None
        ]
        self._complete_produces()
        return "healed " + _link_text(source, target, both) + "".join(f", {o}" for o in outcomes)

    def delete_records(self, offset: int) -> str:
        """DeleteRecords (KIP-107) on the leader: its log start moves to ``offset`` and the
        records below are deleted (retention deleting old segments moves it the same way).
        Past the HW it is refused, as ``maybeIncrementLogStartOffset`` refuses it. Followers
        move theirs when a fetch answer carries it; one whose log ends below it starts over
        at it."""
        leader = self.leader_broker()
        if leader is None or not self.hears(CLIENTS, leader.broker_id):
            return "no reachable leader"
        log = leader.replica.log
        if offset > log.high_watermark:
            return f"OFFSET_OUT_OF_RANGE (HW {log.high_watermark})"
        gone = {record.value for record in log.prefix(offset)}
        if not log.delete_below(offset):
            return f"log start stays {log.log_start_offset}"
        self.deleted = self.deleted | gone
        return f"log start {log.log_start_offset}"

    def elect(self, target: str | int) -> str:
        registration = self.registration
        outcome = self.controller.elect(target, self.partition)
        self._propagate()
        after = self.registration
        if not outcome.changed or after.leader == registration.leader:
            return f"leader stays {after.leader}"
        kind = "unclean " if outcome.unclean else ""
        return f"{kind}leader {after.leader} in epoch {after.leader_epoch}"

    def _rebalance_leader(self) -> list[str]:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval a partition
        whose leader is not its first replica gets a preferred election, which moves it only
        when that replica is in the ISR and unfenced (KRaft's
        ``ReplicationControlManager.maybeBalancePartitionLeaders``)."""
        registration = self.registration
        if registration.leader == registration.replicas[0]:
            return []
        outcome = self.controller.elect(
            "preferred",
            self.partition,
            cause="auto.leader.rebalance.enable: periodic preferred leader election",
        )
        if not outcome.changed:
            return []
        self._propagate()
        after = self.registration
        if after.leader == registration.leader:
            return []
        where = f"partition {self.partition} " if len(self.controller.registrations) > 1 else ""
        return [f"t={self.now_ms}: {where}preferred leader {after.leader} elected"]

    # ------------------------------------------------------------------ time

    def advance(self, duration_ms: int) -> str:
        """Let time pass: ISR expiry every lag/2, session timeouts, AlterPartition delivery and
        produce timeouts happen in time order."""
        target = self.now_ms + duration_ms
        events: list[str] = []
        while True:
            next_time = self._next_event_time(target)
            if next_time is None:
                break
            self.now_ms = next_time
            events.extend(self._fire_events())
            if self.producers:
                self._producer_events()
        self.now_ms = target
        self._complete_produces()
        return "; ".join(events) if events else f"clock at {self.now_ms} ms"

    def advance_to(self, time_ms: int) -> None:
        if time_ms > self.now_ms:
            self.advance(time_ms - self.now_ms)

    def _next_event_time(self, target: int) -> int | None:
        candidates: list[int] = []
        period = max(self.config.replica_lag_time_max_ms // 2, 1)
        next_tick = (self.now_ms // period + 1) * period
        candidates.append(next_tick)
        interval = self.config.high_watermark_checkpoint_interval_ms
        if interval is not None:
            candidates.append((self.now_ms // interval + 1) * interval)
        rebalance = self.config.leader_imbalance_check_interval_ms
        if rebalance is not None:
            candidates.append((self.now_ms // rebalance + 1) * rebalance)
        for broker in self._all_brokers.values():
            if broker.silent_since_ms is not None and not self._fenced(broker.broker_id):
                deadline = broker.silent_since_ms + self.config.broker_session_timeout_ms
                candidates.append(max(deadline, self.now_ms + 1))
        for item in self.in_flight:
            if item.deliver_at_ms > self.now_ms and self.reachable(item.request.leader_id):
                candidates.append(item.deliver_at_ms)
        for request in self.produces:
            if request.result == PENDING and request.deadline_ms > self.now_ms:
                candidates.append(request.deadline_ms)
        for client in self.producers.values():
            if client.busy:
                event_ms = client.next_event_ms(self.now_ms)
                if event_ms is not None:
                    candidates.append(event_ms)
        due = [time for time in candidates if time <= target]
        return min(due) if due else None

    def _fenced(self, broker_id: int) -> bool:
        return self.controller.brokers[broker_id].fenced

    def _fire_events(self) -> list[str]:
        events: list[str] = []
        interval = self.config.high_watermark_checkpoint_interval_ms
        if interval is not None and self.now_ms % interval == 0:
            # ReplicaManager's periodic checkpointHighWatermarks on every running broker
            for broker in self.brokers.values():
                if broker.online:
                    broker.replica.log.checkpoint_high_watermark()
        self._deliver_alter_partitions()
        rebalance = self.config.leader_imbalance_check_interval_ms
        if rebalance is not None and self.now_ms % rebalance == 0:
            events.extend(self._rebalance_leader())
        for broker in self._all_brokers.values():
            silent = broker.silent_since_ms
            if (
                silent is not None
                and not self._fenced(broker.broker_id)
                and self.now_ms >= silent + self.config.broker_session_timeout_ms
            ):
                self.controller.fence(broker.broker_id)
                events.append(f"t={self.now_ms}: broker {broker.broker_id} fenced")
                self._propagate()
        period = max(self.config.replica_lag_time_max_ms // 2, 1)
        if self.now_ms % period == 0:
            for broker in self.brokers.values():
                if not broker.online or broker.replica.role != "leader":
                    continue
                request = broker.replica.maybe_shrink_isr(self.now_ms)
                if request is not None:
                    events.append(f"t={self.now_ms}: leader {broker.broker_id} shrinks ISR")
                    self._send_alter_partition(request)
        self._complete_produces()
        return events

    # ------------------------------------------------------------------ bookkeeping

    def note_committed(self) -> None:
        """Remember what a current leader holds below its HW (the committed history)."""
        self._note_committed(self.leader_broker())

    def _note_committed(self, leader: Broker | None) -> None:
        if leader is None:
            return
        log = leader.replica.log
        high_watermark = log.high_watermark
        committed = self.committed
        # every offset below ``_committed_prefix`` is known already: setdefault would keep it
        known = self._committed_prefix
        if high_watermark <= known:
            return
        records = log.records
        before = len(committed)
        for index in range(max(known - log.log_start_offset, 0), len(records)):
            record = records[index]
            if record.offset >= high_watermark:
                break
            committed.setdefault(record.offset, record.value)
        if len(committed) != before:
            while known in committed:
                known += 1
            self._committed_prefix = known
            self._committed_view = tuple(sorted(committed.items()))

    def view(self) -> ClusterView:
        """A read-only snapshot of the cluster now, for the invariants."""
        return self._view(self.leader_broker())

    def _view(self, leader: Broker | None) -> ClusterView:
        leader_view = None
        if leader is not None:
            replica = leader.replica
            leader_view = LeaderView(
                leader.broker_id,
                replica.leader_epoch,
                replica.partition_epoch,
                replica.pending is not None,
                replica.maximal_isr(),
            )
        replicas = []
        leader_replica = None
        for broker in self.brokers.values():
            log = broker.replica.log
            replica_view = ReplicaView(
                broker.broker_id,
                log.records,
                log.log_start_offset,
                log.high_watermark,
                broker.replica.leader_epoch,
                log.epoch_cache.entries,
                broker.online and not broker.log_dir_failed,
                broker.isolated,
            )
            replicas.append(replica_view)
            if broker is leader:
                leader_replica = replica_view
        consumers = self.consumers
        return ClusterView(
            self.step_index,
            self.now_ms,
            self._registrations[self.partition],
            tuple(replicas),
            leader_view,
            leader_replica,
            self._committed_view,
            tuple(self.acked),
            tuple(self.acked_all),
            tuple(
                ConsumerView(consumer_id, tuple(consumer.records), consumer.truncation_detected)
                for consumer_id, consumer in sorted(consumers.items())
            )
            if consumers
            else (),
            self.lossy_shutdowns,
            self._min_insync_replicas,
            self._eligible_leader_replicas,
            self.deleted,
        )

    def acked_lost(self, view: ClusterView | None = None) -> list[str]:
        """Acknowledged values the leader no longer has (with no leader: no replica has)."""
        view = view if view is not None else self.view()
        return acked_lost(view)

    def state(self, view: ClusterView | None = None) -> ClusterState:
        """The result fields that describe the cluster now (spec/replication.md)."""
        view = view if view is not None else self.view()
        registration = view.registration
        leader = view.leader
        return ClusterState(
            leader=registration.leader,
            leader_epoch=registration.leader_epoch,
            isr=registration.isr,
            elr=registration.elr,
            hw=view.replica(leader.broker_id).high_watermark if leader is not None else None,
            replicas=view.replicas,
            acked=view.acked,
            acked_lost=tuple(acked_lost(view)),
            diverged=diverged(view),
            consumed=tuple((c.consumer_id, tuple(v for _, v in c.records)) for c in view.consumers),
            truncation_detected=tuple(
                (c.consumer_id, c.truncation_detected) for c in view.consumers
            ),
            results=tuple(self._results().items()),
            unclean_elections=self.controller.partition_unclean_elections[self.partition],
            anomalies=self.anomalies(view),
        )

    def _results(self) -> dict[str, str]:
        """Record value -> the last answer of a ``produce`` step, or how a ``send`` ended."""
        results = {r.value: r.result for r in self.produces if r.owner is None}
        for client in self.producers.values():
            results.update(client.results)
        return results

    def history(self, view: ClusterView | None = None) -> History:
        """The run as the queue checks read it (``replication.checks``)."""
        view = view if view is not None else self.view()
        final = final_replica(view)
        return History(
            final.records,
            view.acked,
            tuple((name, tuple(client.sent_order)) for name, client in self.producers.items()),
            tuple((c.consumer_id, c.records) for c in view.consumers),
            final.log_start_offset,
            view.deleted,
        )

    def anomalies(self, view: ClusterView | None = None) -> tuple[AnomalyFound, ...]:
        """Lost, duplicated and reordered writes and truncated reads (Jepsen's queue checks)."""
        return find_anomalies(self.history(view))

    def apply(self, step: Step) -> str:
        """Run one scenario step (``expect`` steps are checked by the caller)."""
        at_ms = step.option("at_ms")
        if isinstance(at_ms, int):
            self.advance_to(at_ms)
        op, target = step.op, step.target
        # a parsed (or generated) step's target has the type its op takes
        if op == "send":
            return self.send(cast(str, target), cast(str, step.option("producer")))
        if op == "producer":
            return self.add_producer(cast(str, target), producer_settings(step))
        if op == "produce":
            return self.produce(
                cast(str, target),
                cast("str | int", step.option("acks", "all")),
                cast("int | None", step.option("timeout_ms")),
                cast("int | None", step.option("to")),
            )
        if op == "fetch":
            return self.fetch(cast(int, target), response_lost=step.option("response") == "lost")
        if op == "crash":
            return self.crash(
                cast(int, target),
                lose_unflushed=step.option("unflushed") == "lose",
                detected=bool(step.option("detected", False)),
                torn_tail=step.option("unflushed") == "torn",
            )
        if op == "advance_ms":
            return self.advance(cast(int, target))
        if op == "consume":
            return self.consume(cast(str, target))
        if op in ("cut", "heal") and isinstance(target, tuple):
            link = dict(cast("tuple[tuple[str, Endpoint], ...]", target))
            both = bool(link.get("both", True))
            if op == "cut":
                return self.cut(link["from"], link["to"], both)
            return self.heal_link(link["from"], link["to"], both)
        if op == "reassign":
            return self.reassign(cast("tuple[int, ...]", target))
        if op == "controller":
            text = self.controller.fault(cast(str, target))
            self._propagate()
            return text
        if op == "expect":
            return "expect"
        if op == COMMENT:
            return ""
        handler: Callable[[str | int], str] = getattr(self, op)
        return handler(cast("str | int", target))


class PartitionedCluster:
    """Several partitions on the same brokers: one ``Cluster`` per partition, all sharing one
    controller (one registration per partition and one per broker, as KRaft's
    ``ReplicationControlManager`` and ``ClusterControlManager`` keep them).

    A broker-wide step (crash, restart, shutdown, isolate, heal, a cut link, a failed log
    directory, the passing of time) happens to every partition at once, so a fenced broker
    leaves every ISR and every leadership in the same step (correlated failures); a step
    about one partition (produce, consume, reassign, expect, an election of one broker) names
    it; ``fetch`` and ``flush`` without a partition act on every partition the broker holds,
    and ``elect`` auto, preferred or unclean on every partition.

    Two partitions led by broker 1: one detected crash moves both leaderships in one step.

    >>> config = ScenarioConfig(brokers=(1, 2, 3), partitions=((1, 2, 3), (1, 3, 2)))
    >>> cluster = PartitionedCluster(config, get_mode("current"))
    >>> cluster.apply(Step("crash", 1, (("detected", True),)))
    ['crashed, fenced', 'crashed, fenced']
    >>> [(c.registration.leader, c.registration.isr) for c in cluster.partitions]
    [(2, (2, 3)), (3, (3, 2))]
    """

    def __init__(
        self,
        config: ScenarioConfig,
        mode: ProtocolMode,
        storage_factory: StorageFactory | None = None,
        controller_factory: ControllerFactory = Controller,
    ) -> None:
        self.config = config
        self.mode = mode
        self.controller = new_controller(
            controller_factory, config, mode, config.partition_replicas, self._quorum_votes
        )
        self.partitions = [
            Cluster(config, mode, storage_factory, controller=self.controller, partition=index)
            for index in range(len(config.partition_replicas))
        ]
        # the partition each declared producer writes to
        self.producer_partition: dict[str, int] = {}
        self._synced = self.controller.version

    def _quorum_votes(self, partition: int) -> dict[int, tuple[int, int]]:
        return self.partitions[partition]._vote_positions()

    @property
    def now_ms(self) -> int:
        return self.partitions[0].now_ms

    def sync(self) -> None:
        """Every partition's brokers learn what the controller changed since the last sync
        (a fence decided in one partition's step moves the others too)."""
        if self.controller.version != self._synced:
            for cluster in self.partitions:
                cluster._propagate()
            self._synced = self.controller.version

    def apply(self, step: Step) -> list[str]:
        """Run one step; returns each partition's answer ("" where it did nothing)."""
        at_ms = step.option("at_ms")
        if isinstance(at_ms, int) and at_ms > self.now_ms:
            self.advance(at_ms - self.now_ms)
        op, target = step.op, step.target
        clusters = self.partitions
        if op == "advance_ms":
            return [self.advance(cast(int, target))] * len(clusters)
        if op == "controller":  # one controller for every partition: the fault happens once
            text = self.controller.fault(cast(str, target))
            self.sync()
            return [text] * len(clusters)
        partition = step.option("partition")
        if op == "send":
            partition = self.producer_partition[cast(str, step.option("producer"))]
        elif op == "producer":
            self.producer_partition[cast(str, target)] = cast(int, partition or 0)
        results = [""] * len(clusters)
        if isinstance(partition, int):
            chosen = [partition]
        elif op in ("fetch", "flush"):
            chosen = [index for index, c in enumerate(clusters) if target in c.brokers]
        else:
            chosen = list(range(len(clusters)))
        for index in chosen:
            results[index] = clusters[index].apply(step)
            self.sync()
        return results

    def advance(self, duration_ms: int) -> str:
        """Let time pass on every partition together, event by event in time order (a
        session timeout fences a broker in all of them at the same instant)."""
        clusters = self.partitions
        target = self.now_ms + duration_ms
        events: list[str] = []
        while True:
            due = [t for c in clusters if (t := c._next_event_time(target)) is not None]
            if not due:
                break
            now = min(due)
            for cluster in clusters:
                cluster.now_ms = now
            for cluster in clusters:
                events.extend(cluster._fire_events())
                if cluster.producers:
                    cluster._producer_events()
                self.sync()
        for cluster in clusters:
            cluster.now_ms = target
            cluster._complete_produces()
        return "; ".join(events) if events else f"clock at {target} ms"


def controller_factory_for(name: str | None) -> ControllerFactory:
    """The controller a scenario names (``config.controller``): ``builtin`` (or None) is
    :class:`Controller`, ``kraft`` the same decisions kept in a KRaft metadata log."""
    if name in (None, "builtin"):
        return Controller
    if name == "kraft":
        from replication.kraft.log_controller import MetadataLogController

        return MetadataLogController
    raise ScenarioError(
        "unknown controller; expected builtin or kraft", field="controller", value=name
    )


def check_controller_steps(scenario: Scenario, factory: ControllerFactory) -> None:
    """Refuse, before anything runs, a ``controller`` step in a run whose controller has no
    quorum (the first such step is named)."""
    if factory.kind != Controller.kind:
        return
    for index, step in enumerate(scenario.steps):
        if step.op == "controller":
            raise ScenarioError(
                NEEDS_KRAFT,
                source=scenario.source,
                step=index,
                field="controller",
                value=step.target,
            )


def producer_settings(step: Step) -> ProducerSettings:
    """The settings a ``producer`` step gives (checked when the scenario was parsed)."""
    options = {key: value for key, value in step.options if key in PRODUCER_OPTIONS}
    return ProducerSettings(**options)  # type: ignore[arg-type]


def _link_text(source: Endpoint, target: Endpoint, both: bool) -> str:
    return f"{source}{'<->' if both else '->'}{target}"


def acked_lost(view: ClusterView) -> list[str]:
    """Acknowledged values the leader no longer has (with no leader: values no replica has);
    values deleted on purpose (``delete_records``) are not lost."""
    if view.leader is not None:
        present = set(view.replica(view.leader.broker_id).values())
    else:
        present = {value for replica in view.replicas for value in replica.values()}
    deleted = view.deleted
    return [value for value in view.acked if value not in present and value not in deleted]


def diverged(view: ClusterView) -> bool:
    """Two replicas hold different records at an offset below both their HWs: the
    ``LogMatching`` invariant fails."""
    return bool(log_matching(view.replicas))


class StepOutcome(NamedTuple):
    """What one step did: its index, the cluster's answer, the view after it and the
    violations that started with it."""

    step_index: int
    result: str
    view: ClusterView
    new_violations: tuple[Violation, ...]
    # the rules that changed a value in this step, in the order they fired (record_changes)
    changes: tuple[str, ...] = ()
    # with several partitions: every partition's outcome (this one is partition 0's)
    partitions: tuple[StepOutcome, ...] = ()


class Runner:
    """The one run loop: apply a step, note what is committed, check the invariants.

    ``run_scenario``, the explorer's schedule generator, the state machine and the matrix tests
    all drive a cluster through this class, so a verdict reached in one is the verdict of a
    replay in another.

    >>> from replication.scenario import ScenarioConfig, Step
    >>> runner = Runner(ScenarioConfig(brokers=(1, 2), replicas=(1, 2)), get_mode("current"))
    >>> runner.step(Step("produce", "m1", (("acks", 1),))).result
    'appended at 0: ok'
    >>> runner.step(Step("fetch", 2)).view.replica(2).values(), runner.violations
    (['m1'], [])
    """

    def __init__(
        self,
        config: ScenarioConfig,
        mode: ProtocolMode,
        *,
        invariants: Sequence[Invariant] = INVARIANTS,
        storage_factory: StorageFactory | None = None,
        record_changes: bool = False,
        controller_factory: ControllerFactory = Controller,
    ) -> None:
        # several partitions: one cluster (and one checker) per partition, one controller
        self.partitioned: PartitionedCluster | None = None
        if len(config.partition_replicas) > 1:
            self.partitioned = PartitionedCluster(config, mode, storage_factory, controller_factory)
            self.clusters = self.partitioned.partitions
        else:
            self.clusters = [
                Cluster(config, mode, storage_factory, controller_factory=controller_factory)
            ]
        self.cluster = self.clusters[0]
        if mode.commit_rule == "majority":
            invariants = majority_invariants(invariants)
        self.checkers = [InvariantChecker(invariants) for _ in self.clusters]
        self.checker = self.checkers[0]
        self.steps_run = 0
        # the explorer runs without: no sentence is built when nobody reads it
        self._notes = self.cluster.record_notes() if record_changes else None
        self._partition_notes = (
            [self._notes, *(c.record_notes() for c in self.clusters[1:])]
            if record_changes and self.partitioned is not None
            else None
        )

    def step(self, step: Step) -> StepOutcome:
        if self.partitioned is not None:
            return self._step_partitions(step, self.partitioned)
        index = self.steps_run
        cluster = self.cluster
        cluster.step_index = index
        notes = self._notes
        if notes is not None:
            notes.clear()
        result = cluster.apply(step)
        if cluster.producers:
            # what the producers may send now goes out at the end of the step
            cluster.pump()
        leader = cluster.leader_broker()
        cluster._note_committed(leader)
        view = cluster._view(leader)
        new = self.checker.check(view)
        self.steps_run = index + 1
        changes = tuple(notes) if notes is not None else ()
        return StepOutcome(index, result, view, tuple(new), changes)

    def _step_partitions(self, step: Step, partitioned: PartitionedCluster) -> StepOutcome:
        """One step on several partitions: apply it, then check each partition."""
        index = self.steps_run
        for cluster in self.clusters:
            cluster.step_index = index
        notes = self._partition_notes
        if notes is not None:
            for partition_notes in notes:
                if partition_notes is not None:
                    partition_notes.clear()
        results = partitioned.apply(step)
        for cluster in self.clusters:
            if cluster.producers:
                cluster.pump()
        partitioned.sync()
        outcomes = []
        for partition, cluster in enumerate(self.clusters):
            cluster.note_committed()
            view = cluster.view()
            new = self.checkers[partition].check(view)
            partition_notes = notes[partition] if notes is not None else None
            changes = tuple(partition_notes) if partition_notes is not None else ()
            outcomes.append(
                StepOutcome(
                    index, results[partition], view, tuple(_tagged(partition, new)), changes
                )
            )
        self.steps_run = index + 1
        return outcomes[0]._replace(
            new_violations=tuple(v for o in outcomes for v in o.new_violations),
            partitions=tuple(outcomes),
        )

    @property
    def violations(self) -> list[Violation]:
        if self.partitioned is None:
            return self.checker.violations
        merged = [
            violation
            for partition, checker in enumerate(self.checkers)
            for violation in _tagged(partition, checker.violations)
        ]
        return sorted(merged, key=lambda v: v.step)

    def partition_violations(self, partition: int) -> list[Violation]:
        """The violations found in one partition (untagged)."""
        return self.checkers[partition].violations

    def suspicious(self) -> bool:
        """Did the run break an invariant, lose an acknowledged record or diverge?"""
        if any(checker.violations for checker in self.checkers):
            return True
        for cluster in self.clusters:
            view = cluster.view()
            if acked_lost(view) or diverged(view):
                return True
        return False


def _tagged(partition: int, violations: Iterable[Violation]) -> list[Violation]:
    """Violations of one of several partitions, their detail naming the partition."""
    return [
        Violation(v.invariant, v.step, f"partition {partition}: {v.detail}") for v in violations
    ]


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition of a several-partition run: its final state, violations and timeline."""

    partition: int
    final: ClusterState
    violations: tuple[Violation, ...]
    timeline: tuple[TimelineEntry, ...]

    def to_json(self) -> JsonObject:
        document: JsonObject = {"partition": self.partition}
        document.update(self.final.to_json())
        document["violations"] = [v.to_json() for v in self.violations]
        document["timeline"] = [entry.to_json() for entry in self.timeline]
        return document


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """Everything a run produced: final state, violations, timeline and failed expectations."""

    name: str
    mode: str
    final: ClusterState
    violations: tuple[Violation, ...]
    timeline: tuple[TimelineEntry, ...]
    expect_failures: tuple[str, ...]
    scenario: Scenario
    # how many expect steps applied to this mode (0: the verdict checked nothing)
    expectations_checked: int = 0
    invariants: tuple[str, ...] = INVARIANT_NAMES
    # who decided leaders and ISRs: builtin, or kraft (the decisions in a metadata log)
    controller: str = "builtin"
    # with several partitions: each one's result (``final`` and ``timeline`` above are
    # partition 0's; ``violations`` above are all partitions', each naming its partition)
    partitions: tuple[PartitionResult, ...] = ()
    # with the KRaft controller: its quorum after every step (voters, active controller,
    # records committed), the document ``ktk replicate`` prints for a quorum scenario
    quorum: JsonObject | None = None

    @property
    def acked_lost(self) -> list[str]:
        if not self.partitions:
            return list(self.final.acked_lost)
        return [value for result in self.partitions for value in result.final.acked_lost]

    @property
    def diverged(self) -> bool:
        if not self.partitions:
            return self.final.diverged
        return any(result.final.diverged for result in self.partitions)

    @property
    def ok(self) -> bool:
        return not self.expect_failures

    def violation_names(self) -> list[str]:
        return sorted({v.invariant for v in self.violations})

    def to_json(self) -> JsonObject:
        """The result document of spec/replication.md (plus a few extra fields)."""
        document: JsonObject = {
            "name": self.name,
            "mode": self.mode,
            "controller": self.controller,
        }
        if self.scenario.description is not None:
            document["description"] = self.scenario.description
        document.update(self.final.to_json())
        if self.invariants != INVARIANT_NAMES:
            document["invariants"] = list(self.invariants)
        document["violations"] = [v.to_json() for v in self.violations]
        document["expect_failures"] = list(self.expect_failures)
        document["expectations_checked"] = self.expectations_checked
        document["timeline"] = [entry.to_json() for entry in self.timeline]
        if self.partitions:
            document["partitions"] = [result.to_json() for result in self.partitions]
        if self.quorum is not None:
            document["quorum"] = self.quorum
        return document


def run_scenario(
    scenario: Scenario,
    mode: str | ProtocolMode | None = None,
    *,
    storage_factory: StorageFactory | None = None,
    invariants: Iterable[str] | None = None,
    controller_factory: ControllerFactory | None = None,
    controller: str | None = None,
) -> ScenarioResult:
    """Run every step of ``scenario`` under ``mode`` (default: the scenario's), checking the
    invariants after each step (``invariants`` names a subset; default: the scenario's own
    list, else all) and every ``expect`` that applies to the mode. ``controller`` (builtin
    or kraft; default: the scenario's ``config.controller``, else builtin) chooses who decides
    leaders and ISRs, unless ``controller_factory`` builds it."""
    protocol = effective_mode(scenario.config, mode)
    if controller_factory is None:
        controller_factory = controller_factory_for(controller or scenario.config.controller)
    check_controller_steps(scenario, controller_factory)
    chosen = select_invariants(invariants if invariants is not None else scenario.invariants)
    runner = Runner(
        scenario.config,
        protocol,
        invariants=chosen,
        storage_factory=storage_factory,
        record_changes=True,
        controller_factory=controller_factory,
    )
    timelines: list[list[TimelineEntry]] = [[] for _ in runner.clusters]
    expect_failures: list[str] = []
    expectations_checked = 0
    # a KRaft controller records its quorum after each step (the built-in one has none)
    note_quorum = runner.cluster.controller.note_step
    for step in scenario.steps:
        outcome = runner.step(step)
        each = outcome.partitions or (outcome,)
        if step.op == "expect":
            modes = step.option("modes")
            if not isinstance(modes, tuple) or protocol.name in modes:
                expectations_checked += 1
                partition = step.option("partition")
                index = partition if isinstance(partition, int) else 0
                state = runner.clusters[index].state(each[index].view)
                violations = (
                    runner.partition_violations(index) if outcome.partitions else runner.violations
                )
                expect_failures.extend(
                    check_expect(
                        outcome.step_index,
                        expect_fields(step),
                        state,
                        violations,
                        partition if isinstance(partition, int) else None,
                    )
                )
            continue
        comment = step.target if step.op == COMMENT else step.option("comment")
        text = comment if isinstance(comment, str) else None
        note_quorum(outcome.step_index, step.describe())
        for index, partition_outcome in enumerate(each):
            view = partition_outcome.view
            registration = view.registration
            timelines[index].append(
                TimelineEntry(
                    step=outcome.step_index,
                    op=step.describe(),
                    time_ms=view.time_ms,
                    result=partition_outcome.result,
                    leader=registration.leader,
                    leader_epoch=registration.leader_epoch,
                    isr=registration.isr,
                    replicas=view.replicas,
                    acked=view.acked,
                    comment=text,
                    changes=partition_outcome.changes,
                )
            )
    partitions: tuple[PartitionResult, ...] = ()
    if runner.partitioned is not None:
        partitions = tuple(
            PartitionResult(
                index,
                cluster.state(),
                tuple(runner.partition_violations(index)),
                tuple(timelines[index]),
            )
            for index, cluster in enumerate(runner.clusters)
        )
    return ScenarioResult(
        name=scenario.name,
        mode=protocol.name,
        final=runner.cluster.state(),
        violations=tuple(runner.violations),
        timeline=tuple(timelines[0]),
        expect_failures=tuple(expect_failures),
        scenario=scenario,
        expectations_checked=expectations_checked,
        invariants=tuple(invariant.name for invariant in runner.checker.invariants),
        partitions=partitions,
        controller=controller_factory.kind,
        quorum=cast(
            "JsonObject | None",
            runner.cluster.controller.quorum_document(f"{scenario.name}: KRaft controller"),
        ),
    )


def check_expect(
    index: int,
    expected: Mapping[str, object],
    state: ClusterState,
    violations: Sequence[Violation],
    partition: int | None = None,
) -> list[str]:
    """Failed expectations of one ``expect`` step, each as one readable line (naming the
    partition when the step names one)."""
    failures: list[str] = []
    where = f"step {index}" if partition is None else f"step {index} (partition {partition})"
    document = state.to_json()
    for key, want in expected.items():
        got: object
        if key == "anomalies":
            got = sorted(found.anomaly for found in state.anomalies)
            want = sorted(str(name) for name in want) if isinstance(want, list) else want
        elif key == "violations":
            got = sorted({v.invariant for v in violations})
            want = sorted({str(name) for name in want}) if isinstance(want, list) else want
        elif key == "logs":
            wanted_logs = want if isinstance(want, dict) else {}
            got = {
                str(replica.broker_id): replica.values()
                for replica in state.replicas
                if str(replica.broker_id) in wanted_logs
            }
            want = {str(k): v for k, v in wanted_logs.items()}
        elif key in ("consumed", "results", "truncation_detected"):
            have = document[key]
            wanted_keys = want if isinstance(want, dict) else {}
            got = (
                {k: v for k, v in have.items() if k in wanted_keys}
                if isinstance(have, dict)
                else have
            )
        else:
            got = document[key]
        if got != want:
            failures.append(f"{where}: expect {key}: wanted {want!r}, got {got!r}")
    return failures
