"""The controller's view of the partitions: ISR changes, AlterPartition validation, leader
elections (clean, unclean, preferred, eligible leader replicas) with their epoch bumps, and
partition reassignment. Like KRaft's ``ReplicationControlManager`` it holds one
``PartitionRegistration`` per partition and one registration per broker, so that fencing a
broker changes every partition it is in at once.

Fencing the leader of replicas [1, 2, 3] moves leadership to the first ISR member in assignment
order and bumps the leader epoch; without ELR the last ISR member is never removed:

>>> controller = Controller(replicas=(1, 2, 3), min_insync_replicas=1)
>>> controller.fence(1)
True
>>> r = controller.registration
>>> r.leader, r.isr, r.leader_epoch
(2, (2, 3), 1)
>>> _ = controller.fence(2), controller.fence(3)
>>> r = controller.registration
>>> r.leader, r.isr, r.leader_epoch
(-1, (3,), 3)
>>> _ = controller.unfence(3)  # "last replica standing" comes back and leads again
>>> controller.registration.leader, controller.registration.leader_epoch
(3, 4)

Three partitions on the same three brokers: fencing broker 1 moves the two partitions it leads
or would lead at once (a correlated failure), and a preferred election brings them back once 1
is in their ISR again:

>>> controller = Controller(partitions=[(1, 2, 3), (2, 3, 1), (1, 3, 2)])
>>> _ = controller.fence(1)
>>> [(r.leader, r.isr) for r in controller.registrations]
[(2, (2, 3)), (2, (2, 3)), (3, (3, 2))]
>>> _ = controller.unfence(1)
>>> controller.handle_alter_partition(  # leader 3 of partition 2 adds 1 back
...     AlterPartitionRequest(3, 1, 1, (1, 3, 2), ((1, 1), (2, 2))), partition=2)
'NONE'
>>> controller.elect("preferred", partition=2).changed, controller.registrations[2].leader
(True, 1)

Reassigning partition 0 from [1, 2, 3] to [4, 2, 3] (KIP-455): the replicas become the union
while 4 catches up, and the move completes when 4 is in the ISR (``PartitionChangeBuilder``
completes a reassignment as part of any change, here the leader's AlterPartition):

>>> controller = Controller(replicas=(1, 2, 3), brokers=(1, 2, 3, 4))
>>> controller.reassign((4, 2, 3))
True
>>> r = controller.registration
>>> r.replicas, r.adding_replicas, r.removing_replicas, r.isr
((4, 2, 3, 1), (4,), (1,), (1, 2, 3))
>>> controller.handle_alter_partition(AlterPartitionRequest(1, 0, 1, (1, 2, 3, 4), ((4, 4),)))
'NEW_LEADER_ELECTED'
>>> r = controller.registration
>>> r.replicas, r.isr, r.leader, r.leader_epoch, r.adding_replicas
((4, 2, 3), (4, 2, 3), 4, 1, ())

Under the majority mode the controller is handed each reachable replica's log position
(last epoch, log end offset) and elects by Raft's vote instead of from the ISR: replica 3, which
misses the record 1 and 2 hold, cannot win, and 2 wins with 3's vote:

>>> positions = {2: (0, 1), 3: (0, 0)}
>>> controller = Controller(replicas=(1, 2, 3), quorum_votes=lambda partition: positions)
>>> _ = controller.fence(1)
>>> controller.registration.leader
2
>>> del positions[2]
>>> _ = controller.fence(2)
>>> controller.registration.leader  # 3 alone is no majority: no leader
-1
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from replication.errors import ScenarioError
from replication.partition import NONE, AlterPartitionRequest, ordered
from replication.raft_rules import LogPosition, is_majority, wins_vote

RECOVERED = "RECOVERED"
RECOVERING = "RECOVERING"


NEEDS_KRAFT = (
    "a controller step needs the KRaft controller (config.controller: kraft, or "
    "--controller kraft); this run uses the built-in one"
)


def _names(broker_ids: Iterable[int]) -> str:
    """Brokers in a sentence: "1", "1 and 2", "1, 2 and 3"."""
    names = [str(broker_id) for broker_id in broker_ids]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """The partition record the controller owns (KRaft's PartitionRegistration). During a
    reassignment ``replicas`` is the union of the target and the replicas being removed
    (``PartitionReassignmentReplicas.replicas``), with ``adding_replicas`` and
    ``removing_replicas`` saying which is which."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    leader_recovery_state: str = RECOVERED
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(slots=True)
class BrokerRegistration:
    broker_epoch: int
    fenced: bool = False
    in_controlled_shutdown: bool = False
    # the process start the registration came from (BrokerRegistrationRequest.incarnationId):
    # a second request from the same process start is a retry, not a new registration
    incarnation: int = 0


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    changed: bool
    unclean: bool = False


class _Cause:
    """The ``with`` block of :meth:`Controller._because` (a class: cheaper than a generator on
    the explorer's hot path, where it formats nothing)."""

    __slots__ = ("cause", "controller", "outermost", "values")

    def __init__(self, controller: Controller, cause: str, values: tuple[object, ...]) -> None:
        self.controller = controller
        self.cause = cause
        self.values = values
        self.outermost = False

    def __enter__(self) -> None:
        controller = self.controller
        if controller.notes is not None and controller._cause is None:
            controller._cause = self.cause.format(*self.values)
            self.outermost = True

    def __exit__(self, *exc_info: object) -> None:
        if self.outermost:
            self.controller._cause = None


class Controller:
    """Owns the partition registrations (one per partition, ``registrations``) and the broker
    registrations (fenced or not). Broker events (``fence``, ``unfence``,
    ``controlled_shutdown``, ``register``) change every partition the broker is in; partition
    requests (``elect``, ``handle_alter_partition``, ``reassign``) name their partition
    (default 0, the only one of a one-partition cluster).

    ``kind`` names the controller in results (``builtin``: this one decides in memory).
    :meth:`fault`, :meth:`note_step` and :meth:`quorum_document` are what a scenario run asks
    of any controller; a controller with a quorum behind it (``replication.kraft``'s
    ``MetadataLogController``) overrides them."""

    kind: ClassVar[str] = "builtin"

    def __init__(
        self,
        replicas: tuple[int, ...] | None = None,
        *,
        min_insync_replicas: int = 1,
        unclean_leader_election: bool = False,
        eligible_leader_replicas: bool = False,
        bump_epoch_on_isr_change: bool = False,
        leader: int | None = None,
        brokers: Collection[int] | None = None,
        quorum_votes: Callable[[int], Mapping[int, LogPosition]] | None = None,
        vote_log_check: bool = True,
        partitions: Sequence[tuple[int, ...]] | None = None,
    ) -> None:
        assignments = [tuple(p) for p in partitions] if partitions else []
        if not assignments:
            if replicas is None:
                raise ValueError("a controller needs replicas or partitions")
            assignments = [tuple(replicas)]
        # majority mode: the (last epoch, LEO) of every replica of a partition that can vote
        # now; elections then go by Raft's vote instead of the ISR (None: Kafka's ISR rules)
        self.quorum_votes = quorum_votes
        self.vote_log_check = vote_log_check
        self.min_insync_replicas = min_insync_replicas
        self.unclean_leader_election = unclean_leader_election
        self.eligible_leader_replicas = eligible_leader_replicas
        # the ZooKeeper controller bumps the leader epoch on every ISR change it writes (R5.4)
        self.bump_epoch_on_isr_change = bump_epoch_on_isr_change
        self._next_broker_epoch = 1
        self.brokers: dict[int, BrokerRegistration] = {}
        self._broker_epochs: dict[int, int] | None = None
        hosting = {broker_id for assignment in assignments for broker_id in assignment}
        for broker_id in sorted(set(brokers or ()) | hosting):
            self.brokers[broker_id] = BrokerRegistration(self._new_broker_epoch())
        self.registrations: list[PartitionRegistration] = [
            PartitionRegistration(
                replicas=assignment,
                isr=assignment,
                leader=assignment[0] if leader is None or index else leader,
            )
            for index, assignment in enumerate(assignments)
        ]
        self.partition_indexes = range(len(self.registrations))
        # unclean elections per partition
        self.partition_unclean_elections = [0] * len(self.registrations)
        # when a list: one sentence per partition change saying what changed and which request
        # or rule caused it (the timeline's explanations); None records nothing (the explorer).
        # ``partition_notes`` sends a partition's sentences to a list of its own.
        self.notes: list[str] | None = None
        self.partition_notes: dict[int, list[str]] = {}
        # the cause of the change being made, set by the outermost public call
        self._cause: str | None = None
        # counts changes to any registration or broker state (brokers follow when it moves)
        self.version = 0

    @property
    def registration(self) -> PartitionRegistration:
        """Partition 0's registration (the only one of a one-partition cluster)."""
        return self.registrations[0]

    @registration.setter
    def registration(self, value: PartitionRegistration) -> None:
        self.registrations[0] = value

    @property
    def replicas(self) -> tuple[int, ...]:
        """Partition 0's replicas."""
        return self.registrations[0].replicas

    @property
    def unclean_elections(self) -> int:
        """Unclean elections over all partitions."""
        return sum(self.partition_unclean_elections)

    def _because(self, cause: str, *values: object) -> _Cause:
        """Changes made inside the ``with`` are explained by ``cause`` formatted with
        ``values`` (an enclosing cause wins); nothing is formatted when nobody records."""
        return _Cause(self, cause, values)

    # ------------------------------------------------------------------ brokers

    def _new_broker_epoch(self) -> int:
        epoch = self._next_broker_epoch
        self._next_broker_epoch += 1
        return epoch

    def is_acceptable(self, broker_id: int) -> bool:
        """May lead: registered, unfenced, not shutting down (R5.1)."""
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    def eligible_brokers(self) -> frozenset[int]:
        """ISR-eligible brokers (R2.3), as the metadata brokers receive shows them."""
        return frozenset(b for b in self.brokers if self.is_acceptable(b))

    def broker_epochs(self) -> dict[int, int]:
        """Every broker's current registration (broker epoch), as metadata shows it. A new
        dict after each registration: brokers keep the one they were sent, never mutated."""
        if self._broker_epochs is None:
            self._broker_epochs = {b: r.broker_epoch for b, r in self.brokers.items()}
        return self._broker_epochs

    def fault(self, name: str) -> str:
        """A scenario's ``controller`` step (``failover``, ``isolate``, ``heal``): this
        controller has no quorum to fail, so the step is refused."""
        raise ScenarioError(NEEDS_KRAFT, field="controller", value=name)

    def note_step(self, step: int, op: str) -> None:
        """Record what the controller did during data-plane step ``step``: nothing to record
        here (no quorum)."""

    def quorum_document(self, name: str) -> dict[str, Any] | None:
        """The controller quorum's part of a result named ``name``: None, there is none."""
        return None

    def fence(self, broker_id: int) -> bool:
        """Missed heartbeats: out of every ISR and every leadership, all partitions at once
        (R2.7; ``ReplicationControlManager.handleBrokerFenced``); True if anything changed."""
        broker = self.brokers[broker_id]
        if broker.fenced:
            return False
        broker.fenced = True
        self.version += 1
        with self._because("broker {} fenced: no heartbeat (R2.7)", broker_id):
            return self._remove_everywhere(broker_id)

    def unfence(self, broker_id: int) -> bool:
        """Heartbeats again: eligible to lead a leaderless partition."""
        broker = self.brokers[broker_id]
        changed = broker.fenced or broker.in_controlled_shutdown
        broker.fenced = False
        broker.in_controlled_shutdown = False
        self.version += 1
        with self._because("broker {} unfenced: a leaderless partition takes a leader", broker_id):
            for partition in self.partition_indexes:
                changed = self.maybe_elect_leaderless(partition) or changed
            return changed

    def controlled_shutdown(self, broker_id: int) -> bool:
        """A clean shutdown: the broker leaves every ISR and leadership before it stops."""
        self.brokers[broker_id].in_controlled_shutdown = True
        self.version += 1
        with self._because("broker {} in controlled shutdown", broker_id):
            return self._remove_everywhere(broker_id)

    def register(self, broker_id: int, incarnation: int | None = None) -> int:
        """A new process incarnation registers; with ELR it counts as a possibly unclean
        shutdown and leaves both ISR and ELR of every partition (R2.7, R5.5 rule 6). A request
        repeating the registered ``incarnation`` is a retry and changes nothing
        (``ClusterControlManager.registerBroker``). Returns the broker epoch."""
        broker = self.brokers[broker_id]
        if incarnation is not None and incarnation == broker.incarnation:
            return broker.broker_epoch
        with self._because("broker {} registered a new incarnation", broker_id):
            epoch = self._register(broker_id)
        if incarnation is not None:
            broker.incarnation = incarnation
        return epoch

    def _register(self, broker_id: int) -> int:
        broker = self.brokers[broker_id]
        if not broker.fenced and any(r.leader == broker_id for r in self.registrations):
            # the old incarnation still led: the new one starts fenced, so leadership moves first
            self.fence(broker_id)
        broker.broker_epoch = self._new_broker_epoch()
        self._broker_epochs = None
        self.version += 1
        if self.eligible_leader_replicas:
            for partition in self.partition_indexes:
                registration = self.registrations[partition]
                if broker_id in registration.isr or broker_id in registration.elr:
                    target = tuple(r for r in registration.isr if r != broker_id)
                    self._change(partition, target, unclean_shutdown=frozenset({broker_id}))
        self.unfence(broker_id)
        return broker.broker_epoch

    def _remove_everywhere(self, broker_id: int) -> bool:
        changed = False
        for partition in self.partition_indexes:
            changed = self._remove_from_isr(partition, broker_id) or changed
        return changed

    def _remove_from_isr(self, partition: int, broker_id: int) -> bool:
        registration = self.registrations[partition]
        if broker_id not in registration.isr and registration.leader != broker_id:
            return self.maybe_elect_leaderless(partition)
        target = tuple(r for r in registration.isr if r != broker_id)
        return self._change(partition, target)

    # ------------------------------------------------------------------ elections

    def maybe_elect_leaderless(self, partition: int = 0) -> bool:
        """Give a leaderless partition a leader if any candidate qualifies."""
        registration = self.registrations[partition]
        if registration.leader != -1:
            return False
        return self._change(partition, registration.isr)

    def elect(
        self, target: str | int, partition: int = 0, cause: str | None = None
    ) -> ElectionOutcome:
        """``auto``: elect if leaderless or the leader is unacceptable; ``preferred``: R5.3
        (``PartitionChangeBuilder.electPreferredLeader``: the first replica if it is in the
        ISR and acceptable, else the leader stays); ``unclean``: ElectLeaders(UNCLEAN); a
        broker id: move leadership to that ISR member. ``cause`` explains the change (default:
        the request)."""
        with self._because(cause or "elect {} requested", target):
            return self._elect(partition, target)

    def _elect(self, partition: int, target: str | int) -> ElectionOutcome:
        before = self.partition_unclean_elections[partition]
        registration = self.registrations[partition]
        if target == "preferred":
            changed = self._change(partition, registration.isr, election="preferred")
        elif target == "unclean":
            changed = self._change(partition, registration.isr, election="unclean")
        elif target == "auto":
            if registration.leader != -1 and not self.is_acceptable(registration.leader):
                changed = self._remove_from_isr(partition, registration.leader)
            else:
                changed = self._change(partition, registration.isr)
        else:
            changed = self._change(partition, registration.isr, forced_leader=int(target))
        unclean = self.partition_unclean_elections[partition] > before
        return ElectionOutcome(changed, unclean=unclean)

    def reassign(self, target_replicas: Sequence[int], partition: int = 0) -> bool:
        """Start moving ``partition`` to ``target_replicas`` (KIP-455's
        AlterPartitionReassignments, ``ReplicationControlManager.changePartitionReassignment``):
        the replicas become the target followed by the replicas to remove, ``adding`` and
        ``removing`` are recorded, and the change completes at once if every target replica
        is already in the ISR. Otherwise it completes with the change that brings the last
        adding replica into the ISR. True if anything changed."""
        with self._because(
            "reassignment of partition {} to {} requested", partition, list(target_replicas)
        ):
            current = self.registrations[partition].replicas
            target = tuple(target_replicas)
            removing = tuple(sorted(set(current) - set(target)))
            adding = tuple(sorted(set(target) - set(current)))
            merged = target + removing
            return self._change(
                partition,
                self.registrations[partition].isr,
                assignment=(merged, adding, removing),
            )

    def _change(
        self,
        partition: int,
        target_isr: tuple[int, ...],
        *,
        election: str = "clean",
        forced_leader: int | None = None,
        unclean_shutdown: frozenset[int] = frozenset(),
        recovered: bool = False,
        from_leader: bool = False,
        assignment: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None,
    ) -> bool:
        """Build and apply one partition change (PartitionChangeBuilder in miniature): the
        reassignment completes first if it can, then the ELR, the election, the epochs."""
        current = self.registrations[partition]
        target = ordered(target_isr, current.replicas)
        if assignment is None:
            replicas = current.replicas
            adding, removing = current.adding_replicas, current.removing_replicas
        else:
            replicas, adding, removing = assignment
        if adding or removing:
            # PartitionReassignmentReplicas.maybeCompleteReassignment
            kept_isr = tuple(r for r in target if r not in removing)
            kept_replicas = tuple(r for r in replicas if r not in removing)
            if kept_isr and kept_replicas and set(kept_replicas) <= set(kept_isr):
                target, replicas, adding, removing = kept_isr, kept_replicas, (), ()
        elr_enabled = self.eligible_leader_replicas
        if not target and not elr_enabled:
            # without ELR the controller never empties the ISR: the last member stays (R2.7)
            target = ordered(current.isr, replicas)[:1] if current.isr else ()
        elr = set(current.elr)
        last_known_elr = current.last_known_elr
        if elr_enabled:
            if len(target) >= self.min_insync_replicas:
                elr, last_known_elr = set(), ()
            else:
                elr = (elr | set(current.isr)) - set(target) - set(unclean_shutdown)
                if not target and current.isr:
                    last_known_elr = (current.leader,) if current.leader != -1 else current.isr[:1]
        leader = current.leader
        recovery_state = RECOVERED if recovered else current.leader_recovery_state
        unclean = False
        if self.quorum_votes is not None:
            leader = self._vote(partition, replicas, election, forced_leader)
            if leader != -1 and leader not in target:
                target = ordered((*target, leader), replicas)
        elif forced_leader is not None:
            # a controlled move goes only to an acceptable ISR member (otherwise nothing changes)
            if forced_leader in target and self.is_acceptable(forced_leader):
                leader = forced_leader
            elif leader not in replicas:
                leader = self._choose_leader(current.leader, target, election, replicas)
        else:
            leader = self._choose_leader(current.leader, target, election, replicas)
            if leader == -1 and not target and elr_enabled:
                leader = next((r for r in replicas if r in elr and self.is_acceptable(r)), -1)
                if leader != -1:
                    target, elr = (leader,), elr - {leader}
                elif not elr and len(last_known_elr) == 1 and self.is_acceptable(last_known_elr[0]):
                    leader, target, unclean = last_known_elr[0], (last_known_elr[0],), True
            if leader == -1 and (self.unclean_leader_election or election == "unclean"):
                leader = next((r for r in replicas if self.is_acceptable(r)), -1)
                if leader != -1:
                    target, elr, last_known_elr, unclean = (leader,), set(), (), True
        if unclean:
            recovery_state = RECOVERING
            self.partition_unclean_elections[partition] += 1
        new_elr = ordered(elr, replicas)
        if self.notes is not None:
            self._note_change(
                partition, current, target, leader, new_elr, unclean, (replicas, adding, removing)
            )
        if (
            target == current.isr
            and leader == current.leader
            and new_elr == current.elr
            and last_known_elr == current.last_known_elr
            and recovery_state == current.leader_recovery_state
            and replicas == current.replicas
            and adding == current.adding_replicas
            and removing == current.removing_replicas
        ):
            return False
        bump = (
            leader != current.leader
            or (self.bump_epoch_on_isr_change and not from_leader and target != current.isr)
            # triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: a replica was removed
            or (replicas is not current.replicas and not set(current.replicas) <= set(replicas))
        )
        self.version += 1
        self.registrations[partition] = PartitionRegistration(
            replicas,
            target,
            leader,
            current.leader_epoch + (1 if bump else 0),
            current.partition_epoch + 1,
            new_elr,
            last_known_elr,
            recovery_state,
            adding,
            removing,
        )
        return True

    def _vote(
        self,
        partition: int,
        replicas: tuple[int, ...],
        election: str,
        forced_leader: int | None,
    ) -> int:
        """The majority mode's leader: the current one while acceptable (unless a preferred or
        forced election moves it), else the first candidate in assignment order that collects a
        majority of votes. Unclean elections do not exist here: no vote, no leader."""
        assert self.quorum_votes is not None
        current = self.registrations[partition].leader
        keep = current if current in replicas and self.is_acceptable(current) else -1
        if forced_leader is not None:
            candidates: tuple[int, ...] = (forced_leader,)
        elif election == "preferred":
            candidates = (replicas[0],)
        elif keep != -1:
            return keep
        else:
            candidates = replicas
        positions = self.quorum_votes(partition)
        voters = len(replicas)
        for candidate in candidates:
            if candidate not in positions or not self.is_acceptable(candidate):
                continue
            if self.vote_log_check:
                won = wins_vote(positions[candidate], positions.values(), voters=voters)
            else:
                won = is_majority(len(positions), voters)
            if won:
                return candidate
        return keep

    def _note_change(
        self,
        partition: int,
        current: PartitionRegistration,
        isr: tuple[int, ...],
        leader: int,
        elr: tuple[int, ...],
        unclean: bool,
        assignment: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
    ) -> None:
        """One sentence: what this partition change does and why (``_cause``)."""
        parts: list[str] = []
        replicas, adding, removing = assignment
        if (adding or removing or current.adding_replicas or current.removing_replicas) and (
            adding,
            removing,
        ) != (current.adding_replicas, current.removing_replicas):
            if adding or removing:
                moves = [f"adding {_names(adding)}" if adding else ""]
                moves.append(f"removing {_names(removing)}" if removing else "")
                parts.append(
                    f"reassignment started: replicas {list(replicas)} "
                    f"({', '.join(m for m in moves if m)})"
                )
            else:
                parts.append(f"reassignment complete: replicas {list(replicas)}")
        joined = [r for r in isr if r not in current.isr]
        left = [r for r in current.isr if r not in isr]
        if joined:
            parts.append(f"{_names(joined)} joined the ISR")
        if left:
            parts.append(f"{_names(left)} left the ISR")
        if leader != current.leader:
            epoch = current.leader_epoch + 1
            if leader == -1:
                parts.append("no replica can lead: the partition is offline")
            elif unclean:
                parts.append(
                    f"{leader} became leader in epoch {epoch} by an unclean election (it was "
                    "not in the ISR: acknowledged records it lacks are lost)"
                )
            else:
                parts.append(
                    f"{leader} became leader in epoch {epoch}, chosen from the ISR "
                    f"{{{', '.join(map(str, isr))}}}"
                )
        if elr != current.elr:
            parts.append(f"ELR now {{{', '.join(map(str, elr))}}}")
        if not parts:
            return
        cause = f" ({self._cause})" if self._cause else ""
        notes = self.partition_notes.get(partition, self.notes)
        assert notes is not None
        where = f"partition {partition}: " if len(self.registrations) > 1 else ""
        notes.append(f"controller: {where}{'; '.join(parts)}{cause}")

    def _choose_leader(
        self, current_leader: int, target: tuple[int, ...], election: str, replicas: tuple[int, ...]
    ) -> int:
        if election == "preferred":
            preferred = replicas[0]
            if preferred in target and self.is_acceptable(preferred):
                return preferred
        if current_leader in target and self.is_acceptable(current_leader):
            return current_leader
        return next((r for r in replicas if r in target and self.is_acceptable(r)), -1)

    # ------------------------------------------------------------------ AlterPartition

    def handle_alter_partition(
        self, request: AlterPartitionRequest, reason: str = "", partition: int = 0
    ) -> str:
        """R2.6 checks in order; on success the ISR is committed and partitionEpoch bumped.
        ``reason`` (why the leader proposed it) explains the change in ``notes``."""
        with self._because(
            "AlterPartition from leader {}{}", request.leader_id, f", {reason}" if reason else ""
        ):
            return self._alter_partition(partition, request)

    def _alter_partition(self, partition: int, request: AlterPartitionRequest) -> str:
        current = self.registrations[partition]
        if (
            request.leader_epoch > current.leader_epoch
            or request.partition_epoch > current.partition_epoch
        ):
            return "NOT_CONTROLLER"
        if request.leader_epoch < current.leader_epoch:
            return "FENCED_LEADER_EPOCH"
        if request.leader_id != current.leader:
            return "INVALID_REQUEST"
        if request.partition_epoch < current.partition_epoch:
            return "INVALID_UPDATE_VERSION"
        proposed = set(request.new_isr)
        if not proposed <= set(current.replicas) or request.leader_id not in proposed:
            return "INVALID_REQUEST"
        broker_epochs = dict(request.broker_epochs)
        for member in request.new_isr:
            if member == request.leader_id:
                continue
            broker = self.brokers.get(member)
            if broker is None or not self.is_acceptable(member):
                return "INELIGIBLE_REPLICA"
            if broker_epochs.get(member, -1) not in (-1, broker.broker_epoch):
                return "INELIGIBLE_REPLICA"
        # the leader treats itself as RECOVERED and says so in its request (KIP-704)
        changed = self._change(partition, request.new_isr, recovered=True, from_leader=True)
        if not changed:
            return NONE
        if self.registrations[partition].leader != request.leader_id:
            return "NEW_LEADER_ELECTED"
        return NONE
