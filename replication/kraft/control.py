"""The active controller's decisions as metadata records: broker registration, fencing,
unfencing and controlled shutdown, the partition changes each implies, and AlterPartition.

Each function reads a :class:`MetadataImage` (what the controller has in memory: applied plus
its own uncommitted records) and returns the records to append; nothing else changes. They
follow Kafka's ``org.apache.kafka.controller`` classes: ``ClusterControlManager``
(``registerBroker``: the broker epoch is the offset of the ``RegisterBrokerRecord``, and the new
incarnation starts fenced; ``checkBrokerEpoch``: STALE_BROKER_EPOCH), ``BrokerHeartbeatManager``
(a fenced broker is unfenced once its metadata offset reaches its registration),
``ReplicationControlManager`` (``handleBrokerFenced``, ``handleBrokerUnfenced``,
``handleBrokerInControlledShutdown``, ``handleBrokerUncleanShutdown``, ``alterPartition`` with
KIP-903's broker epochs: INELIGIBLE_REPLICA) and ``PartitionChangeBuilder`` (the leader comes
from the ISR, else, with KIP-966, from the ELR, else, with
``unclean.leader.election.enable``, from any live replica: an unclean election that leaves
the partition RECOVERING).

Broker 5 leads ``orders-0`` with ISR [5, 6]; fencing it elects 6 from the ISR. Then 6 is
fenced too: without ELR the last ISR member stays and the partition has no leader; with
unclean elections on, the live out-of-sync replica 7 leads:

>>> image = MetadataImage.empty()
>>> for record in [RegisterBroker(5, 0), RegisterBroker(6, 1), RegisterBroker(7, 2),
...                PartitionChange("orders", 0, 5, (5, 6), 0, replicas=(5, 6, 7))]:
...     image = image.apply(record)
>>> records = fence_broker(image, ElectionConfig(), 5)
>>> [(r.leader, r.isr, r.leader_epoch) for r in records[:1]], records[1]
([(6, (6,), 1)], FenceBroker(broker_id=5, fenced=True))
>>> for record in records:
...     image = image.apply(record)
>>> clean = fence_broker(image, ElectionConfig(), 6)[0]
>>> clean.leader, clean.isr, clean.leader_epoch
(-1, (6,), 2)
>>> unclean = fence_broker(image, ElectionConfig(unclean_leader_election=True), 6)[0]
>>> unclean.leader, unclean.isr, unclean.recovering
(7, (7,), True)

AlterPartition names the broker epoch of every ISR member it adds (KIP-903); a member that
re-registered since (a new broker epoch) is refused:

>>> alter_partition(image, ElectionConfig(), 6, "orders", 0, (6, 7), leader_epoch=1,
...                 broker_epochs=((6, 1), (7, 0)))
('INELIGIBLE_REPLICA', None, 'broker 7 has broker epoch 2, the request names 0')
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from replication.kraft.records import (
    ControlledShutdown,
    FenceBroker,
    MetadataImage,
    MetadataRecord,
    PartitionChange,
    PartitionState,
    RegisterBroker,
)

__all__ = [
    "CLEAN",
    "INELIGIBLE_REPLICA",
    "NONE",
    "PREFERRED",
    "STALE_BROKER_EPOCH",
    "UNCLEAN",
    "ElectionConfig",
    "alter_partition",
    "controlled_shutdown",
    "elect",
    "fence_broker",
    "heartbeat",
    "partition_change",
    "register_broker",
    "unfence_broker",
]

NONE = "NONE"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
CLEAN = "clean"
PREFERRED = "preferred"
UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    """The topic settings the controller elects by: ``min.insync.replicas``, KIP-966's
    eligible leader replicas, and ``unclean.leader.election.enable``."""

    min_insync_replicas: int = 1
    eligible_leader_replicas: bool = False
    unclean_leader_election: bool = False


def _ordered(ids: Iterable[int], replicas: tuple[int, ...]) -> tuple[int, ...]:
    """``ids`` in assignment order (members outside the assignment last, sorted)."""
    chosen = set(ids)
    inside = [r for r in replicas if r in chosen]
    return (*inside, *sorted(chosen - set(inside)))


def partition_change(
    image: MetadataImage,
    config: ElectionConfig,
    topic: str,
    partition: int,
    target_isr: Iterable[int],
    *,
    election: str = CLEAN,
    forced_leader: int | None = None,
    unclean_shutdown: Collection[int] = (),
    recovered: bool = False,
) -> PartitionChange | None:
    """``PartitionChangeBuilder.build``: the record moving the partition to ``target_isr``
    with the leader it then elects, or None when nothing would change.

    The leader stays while in the target ISR (``shouldTryElection``; ``preferred``: the first
    replica instead if it is in the ISR and acceptable); else the first acceptable ISR member
    in assignment order; with an empty ISR and ELR, the first acceptable ELR member (or the
    single last-known ELR member, an unclean recovery); then, when unclean elections are on
    (or ``election`` is ``unclean``), the first acceptable replica. Without ELR the last ISR
    member is never removed; with ELR, members leaving an ISR that falls below
    ``min.insync.replicas`` join the ELR unless they shut down uncleanly."""
    state = image.partition(topic, partition)
    if state is None:
        return None
    replicas = state.replicas or state.isr
    target = _ordered(target_isr, replicas)
    elr_enabled = config.eligible_leader_replicas
    # without ELR the last ISR member stays in the ISR, though it cannot be elected
    kept = _ordered(state.isr, replicas)[:1] if not target and not elr_enabled else ()
    elr = set(state.elr)
    last_known_elr = state.last_known_elr
    if elr_enabled:
        if len(target) >= config.min_insync_replicas:
            elr, last_known_elr = set(), ()
        else:
            elr = (elr | set(state.isr)) - set(target) - set(unclean_shutdown)
            if not target and state.isr:
                last_known_elr = (state.leader,) if state.leader != -1 else state.isr[:1]
    acceptable = image.is_acceptable
    leader = state.leader
    recovering = False if recovered else state.recovering
    unclean = False
    if forced_leader is not None:
        if forced_leader in target and acceptable(forced_leader):
            leader = forced_leader
    else:
        leader = -1
        if election == PREFERRED and replicas[0] in target and acceptable(replicas[0]):
            leader = replicas[0]
        elif state.leader in target:
            leader = state.leader  # no election while the leader stays in the ISR
        else:
            leader = next((r for r in replicas if r in target and acceptable(r)), -1)
        if leader == -1 and not target and elr_enabled:
            leader = next((r for r in replicas if r in elr and acceptable(r)), -1)
            if leader != -1:
                target, elr = (leader,), elr - {leader}
            elif not elr and len(last_known_elr) == 1 and acceptable(last_known_elr[0]):
                leader, target, unclean = last_known_elr[0], last_known_elr, True
        if leader == -1 and (config.unclean_leader_election or election == UNCLEAN):
            leader = next((r for r in replicas if acceptable(r)), -1)
            if leader != -1:
                target, elr, last_known_elr, unclean = (leader,), set(), (), True
    if not target:
        target = kept
    if unclean:
        recovering = True
    new_elr = _ordered(elr, replicas)
    if (
        target == state.isr
        and leader == state.leader
        and new_elr == state.elr
        and last_known_elr == state.last_known_elr
        and recovering == state.recovering
    ):
        return None
    epoch = state.leader_epoch + (1 if leader != state.leader else 0)
    return PartitionChange(
        topic, partition, leader, target, epoch, (), new_elr, last_known_elr, recovering
    )


def _leaving(
    image: MetadataImage,
    config: ElectionConfig,
    broker_id: int,
    *,
    unclean_shutdown: bool = False,
) -> list[MetadataRecord]:
    """Partition changes taking ``broker_id`` out of every ISR (and ELR on an unclean
    shutdown) and leadership, decided on ``image`` where it is already unacceptable."""
    out: list[MetadataRecord] = []
    for (topic, number), state in image.partitions:
        in_elr = unclean_shutdown and broker_id in state.elr
        if broker_id not in state.isr and state.leader != broker_id and not in_elr:
            continue
        change = partition_change(
            image,
            config,
            topic,
            number,
            (b for b in state.isr if b != broker_id),
            unclean_shutdown=(broker_id,) if unclean_shutdown else (),
        )
        if change is not None:
            out.append(change)
    return out


def fence_broker(
    image: MetadataImage, config: ElectionConfig, broker_id: int
) -> list[MetadataRecord]:
    """``ReplicationControlManager.handleBrokerFenced``: out of every ISR and leadership (a new
    leader elected where it led), then the fence record, so that a committed prefix never
    names a fenced leader."""
    if broker_id not in image.brokers or broker_id in image.fenced:
        return []
    return [
        *_leaving(image.apply(FenceBroker(broker_id)), config, broker_id),
        FenceBroker(broker_id),
    ]


def controlled_shutdown(
    image: MetadataImage, config: ElectionConfig, broker_id: int
) -> list[MetadataRecord]:
    """``handleBrokerInControlledShutdown``: leadership and ISR membership move away before
    the broker stops; it stays registered and unfenced until its session ends."""
    if broker_id not in image.brokers or broker_id in image.shutting_down:
        return []
    marked = image.apply(ControlledShutdown(broker_id))
    return [*_leaving(marked, config, broker_id), ControlledShutdown(broker_id)]


def unfence_broker(
    image: MetadataImage, config: ElectionConfig, broker_id: int
) -> list[MetadataRecord]:
    """``handleBrokerUnfenced``: the unfence record, then a leader for every leaderless
    partition that can now have one."""
    if broker_id not in image.brokers or (
        broker_id not in image.fenced and broker_id not in image.shutting_down
    ):
        return []
    out: list[MetadataRecord] = [FenceBroker(broker_id, fenced=False)]
    unfenced = image.apply(out[0])
    for (topic, number), state in unfenced.partitions:
        if state.leader != -1:
            continue
        change = partition_change(unfenced, config, topic, number, state.isr)
        if change is not None:
            out.append(change)
    return out


def register_broker(
    image: MetadataImage,
    config: ElectionConfig,
    broker_id: int,
    next_offset: int,
    *,
    clean_shutdown: bool = False,
) -> tuple[int, list[MetadataRecord]]:
    """``ClusterControlManager.registerBroker``: a new incarnation of ``broker_id``; returns
    its broker epoch (the offset its ``RegisterBrokerRecord`` lands at, ``next_offset`` being
    the controller's next write offset) and the records. An old incarnation that still leads
    is fenced first; with ELR, a restart after an unclean shutdown also leaves every ISR and
    ELR (``handleBrokerUncleanShutdown``: it may have lost acknowledged records)."""
    records: list[MetadataRecord] = []
    working = image
    if broker_id in image.brokers:
        if broker_id not in image.fenced:
            records += fence_broker(image, config, broker_id)
            for record in records:
                working = working.apply(record)
        if config.eligible_leader_replicas and not clean_shutdown:
            fenced = working.apply(FenceBroker(broker_id))
            extra = _leaving(fenced, config, broker_id, unclean_shutdown=True)
            records += extra
    epoch = next_offset + len(records)
    records.append(RegisterBroker(broker_id, epoch, fenced=True))
    return epoch, records


def heartbeat(
    image: MetadataImage,
    config: ElectionConfig,
    broker_id: int,
    broker_epoch: int,
    metadata_offset: int,
) -> tuple[str, list[MetadataRecord]]:
    """A ``BrokerHeartbeatRequest`` with the broker's epoch and the offset of the last
    metadata record it applied: STALE_BROKER_EPOCH unless the epoch is its registration's
    (``ClusterControlManager.checkBrokerEpoch``); a fenced broker that has caught up with its
    registration is unfenced (``BrokerHeartbeatManager``)."""
    registered = image.broker_epoch(broker_id)
    if broker_id not in image.brokers or registered != broker_epoch:
        return STALE_BROKER_EPOCH, []
    if broker_id in image.fenced and metadata_offset >= registered:
        return NONE, unfence_broker(image, config, broker_id)
    return NONE, []


def elect(
    image: MetadataImage, config: ElectionConfig, topic: str, partition: int, target: str | int
) -> PartitionChange | None:
    """``ElectLeaders``: ``auto`` (a leader if there is none or it is unacceptable),
    ``preferred``, ``unclean`` or a broker id (leadership moved to that ISR member)."""
    state = image.partition(topic, partition)
    if state is None:
        return None
    isr: tuple[int, ...] = state.isr
    if state.leader != -1 and not image.is_acceptable(state.leader):
        isr = tuple(b for b in isr if b != state.leader)  # a leader that may not lead leaves
    if isinstance(target, int):
        return partition_change(image, config, topic, partition, isr, forced_leader=target)
    election = target if target in (PREFERRED, UNCLEAN) else CLEAN
    return partition_change(image, config, topic, partition, isr, election=election)


def alter_partition(
    image: MetadataImage,
    config: ElectionConfig,
    broker_id: int,
    topic: str,
    partition: int,
    isr: tuple[int, ...],
    *,
    leader_epoch: int,
    partition_epoch: int = -1,
    broker_epochs: tuple[tuple[int, int], ...] = (),
) -> tuple[str, PartitionChange | None, str]:
    """``ReplicationControlManager.alterPartition``: (error, the record to append, why).

    Checked in order: the partition exists; the request's leader epoch is the controller's
    (newer: NOT_CONTROLLER, older: FENCED_LEADER_EPOCH); it comes from the leader; its
    partition epoch (when given) is current (INVALID_UPDATE_VERSION); the ISR is within the
    assignment and holds the leader; every member may join (registered, unfenced, not
    shutting down) and, KIP-903, its broker epoch in the request, when given, is its current
    registration's: INELIGIBLE_REPLICA otherwise."""
    state: PartitionState | None = image.partition(topic, partition)
    if state is None:
        return "UNKNOWN_TOPIC_OR_PARTITION", None, "no such partition"
    epochs = f"leader epoch {leader_epoch}, controller has {state.leader_epoch}"
    if leader_epoch > state.leader_epoch or partition_epoch > state.partition_epoch:
        return "NOT_CONTROLLER", None, epochs
    if leader_epoch < state.leader_epoch:
        return "FENCED_LEADER_EPOCH", None, epochs
    if broker_id != state.leader:
        return "INVALID_REQUEST", None, f"{broker_id} does not lead (leader {state.leader})"
    if partition_epoch != -1 and partition_epoch < state.partition_epoch:
        return (
            "INVALID_UPDATE_VERSION",
            None,
            f"partition epoch {partition_epoch}, controller has {state.partition_epoch}",
        )
    replicas = state.replicas or state.isr
    if broker_id not in isr or not set(isr) <= set(replicas):
        return "INVALID_REQUEST", None, f"ISR {list(isr)} for replicas {list(replicas)}"
    named = dict(broker_epochs)
    for member in isr:
        if member != broker_id and not image.is_acceptable(member):
            return INELIGIBLE_REPLICA, None, f"broker {member} is fenced or shutting down"
        given = named.get(member, -1)
        registered = image.broker_epoch(member)
        if given != -1 and given != registered:
            return (
                INELIGIBLE_REPLICA,
                None,
                f"broker {member} has broker epoch {registered}, the request names {given}",
            )
    change = partition_change(image, config, topic, partition, isr, recovered=True)
    return NONE, change, ""
