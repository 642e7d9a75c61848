"""KIP-848 reconciliation: how members of a ``consumer`` group reach a new target assignment.

Under the consumer group protocol (KIP-848) there is no join barrier. The coordinator computes a
target assignment for the new group epoch and reconciles each member on its own, heartbeat by
heartbeat, with the state machine of Kafka's group coordinator
(``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/consumer/
CurrentAssignmentBuilder.java``, modelled in :func:`next_member_state`):

- ``STABLE``: reconciled at its member epoch. When the target epoch is newer the member keeps
  ``assigned & target``; if it still owns partitions outside its target it moves to
  ``UNREVOKED_PARTITIONS`` at its old epoch and must revoke them first. Otherwise it moves to the
  target epoch and receives the target partitions no other member holds (the coordinator's
  partition epochs: assigned or pending revocation anywhere): ``STABLE`` when it got them all,
  ``UNRELEASED_PARTITIONS`` while some are still held by others.
- ``UNREVOKED_PARTITIONS``: waits until a heartbeat's owned partitions no longer list any pending
  revocation, then reconciles again (at epoch + 1) as above.
- ``UNRELEASED_PARTITIONS``: reconciles again at every heartbeat, receiving the partitions their
  previous owners have released since.

:func:`reconcile` plays one group epoch out with these timing assumptions (docs/traces.md, "Cost
model", states them with the defaults): every member heartbeats at the same ticks, one heartbeat
interval apart, the first a full interval after the target was computed; a member new to the
group sends its joining heartbeat at the target's own moment (tick 0; the join is what computed
the target); a member whose heartbeat response changed its partitions revokes or takes them and
acknowledges with an immediate heartbeat (the client's ACKNOWLEDGING state) at the same tick,
after the tick's regular heartbeats: members that only took partitions first, then those that
revoked some (a revocation commits offsets before it is acknowledged), each in member-id order;
revoking and taking partitions take no time. Members that left the group released their
partitions before the target was computed. The target does not change until every member reached it.

The worked example of docs/traces.md: a, b and c share topic t (6 partitions); c leaves and d
joins. The target gives a t-0..1, b t-2..3 and d t-4..5:

>>> from assignors.model import TopicPartition
>>> t = [TopicPartition("t", p) for p in range(6)]
>>> result = reconcile(
...     epoch=2,
...     previous={"a": t[0:2], "b": t[2:5]},
...     target={"a": t[0:2], "b": t[2:4], "d": t[4:6]},
... )
>>> [(m.member_id, m.heartbeats, m.intervals) for m in result.members]
[('a', 1, 1), ('b', 2, 1), ('d', 4, 2)]
>>> result.members[2].states
('UNRELEASED_PARTITIONS', 'UNRELEASED_PARTITIONS', 'UNRELEASED_PARTITIONS', 'STABLE')
>>> [(p.partition.partition, p.revoked_by, p.assigned_to, p.intervals) for p in result.pauses]
[(4, 'b', 'd', 1)]

Tick 0: d's joining heartbeat takes t-5 (c left, so it is free) but not t-4, still b's
(``UNRELEASED_PARTITIONS``); d acknowledges t-5. Tick 1: a moves to epoch 2 as it is
(``STABLE``); b must revoke t-4 first (``UNREVOKED_PARTITIONS``); d still waits. b revokes t-4
and acknowledges (``STABLE``). Tick 2: d takes t-4 (``STABLE``). The group reached the target
after 2 heartbeat intervals; only t-4 stopped being consumed, for one interval.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal, Protocol, runtime_checkable

from assignors.model import Assignment, Group, Topic, TopicPartition
from assignors.traces.format import Generation
from assignors.traces.scoring import ScoreRow

STABLE: Final = "STABLE"
UNREVOKED_PARTITIONS: Final = "UNREVOKED_PARTITIONS"
UNRELEASED_PARTITIONS: Final = "UNRELEASED_PARTITIONS"
MemberStateName = Literal["STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"]

REVOKED = "revoked"
RECEIVED = "received"

MAX_TICKS = 1000
"""A reconciliation that has not converged after this many heartbeat intervals is a bug."""

_NONE: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class MemberState:
    """What the coordinator keeps of one member (``ConsumerGroupMember``): its state, member
    epoch and previous member epoch, the partitions assigned to it and those it must revoke."""

    state: MemberStateName = STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: frozenset[TopicPartition] = _NONE
    pending_revocation: frozenset[TopicPartition] = _NONE

    def holds(self) -> frozenset[TopicPartition]:
        """Partitions the coordinator counts as this member's (they have a partition epoch)."""
        return self.assigned | self.pending_revocation

    def at_epoch(self, epoch: int) -> MemberState:
        """``ConsumerGroupMember.Builder.updateMemberEpoch``: the old epoch becomes previous."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


def next_member_state(
    member: MemberState,
    target_epoch: int,
    target: Collection[TopicPartition],
    held_by_others: Container[TopicPartition],
    owned: Collection[TopicPartition] | None,
) -> MemberState:
    """``CurrentAssignmentBuilder.build()``: the member's state after one heartbeat.

    ``held_by_others`` are the partitions with a partition epoch (assigned or pending revocation
    at some member; the member's own count too, as in Kafka); ``owned`` is what the heartbeat
    reports the member owns (None: not reported, which never proves a revocation).

    >>> t = [TopicPartition("t", p) for p in range(4)]
    >>> stable = MemberState(STABLE, 10, 10, frozenset(t[0:3]))
    >>> after = next_member_state(stable, 11, t[1:4], (), t[0:3])
    >>> after.state, after.member_epoch
    ('UNREVOKED_PARTITIONS', 10)
    >>> [sorted(tp.partition for tp in tps) for tps in (after.assigned, after.pending_revocation)]
    [[1, 2], [0]]
    """
    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(
            member, member.member_epoch, target_epoch, target, held_by_others, owned
        )
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(
            member, member.member_epoch + 1, target_epoch, target, held_by_others, owned
        )
    return _next_assignment(
        member, member.member_epoch, target_epoch, target, held_by_others, owned
    )


def _owns_any(owned: Collection[TopicPartition] | None, revoked: frozenset[TopicPartition]) -> bool:
    """``ownsRevokedPartitions``: without owned partitions in the request, assume it still does."""
    return owned is None or not revoked.isdisjoint(owned)


def _next_assignment(
    member: MemberState,
    member_epoch: int,
    target_epoch: int,
    target: Collection[TopicPartition],
    held_by_others: Container[TopicPartition],
    owned: Collection[TopicPartition] | None,
) -> MemberState:
    """``computeNextAssignment``."""
    wanted = frozenset(target)
    kept = member.assigned & wanted
    pending_revocation = member.assigned - kept
    candidates = wanted - kept
    unreleased = frozenset(tp for tp in candidates if tp in held_by_others)
    pending_assignment = candidates - unreleased
    if pending_revocation and _owns_any(owned, pending_revocation):
        return replace(
            member.at_epoch(member_epoch),
            state=UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=pending_revocation,
        )
    state: MemberStateName = UNRELEASED_PARTITIONS if unreleased else STABLE
    return replace(
        member.at_epoch(target_epoch),
        state=state,
        assigned=kept | pending_assignment,
        pending_revocation=_NONE,
    )


@dataclass(frozen=True, slots=True)
class MemberReconciliation:
    """One member's way to the target: ``heartbeats`` it sent (acknowledgements included) and
    heartbeat ``intervals`` elapsed until the coordinator had it ``STABLE`` at the target epoch,
    and its state after each of those heartbeats."""

    member_id: str
    heartbeats: int
    intervals: int
    states: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Pause:
    """A partition one member revoked and another received: not consumed from tick
    ``revoked_at`` to tick ``assigned_at``."""

    partition: TopicPartition
    revoked_by: str
    assigned_to: str
    revoked_at: int
    assigned_at: int

    @property
    def intervals(self) -> int:
        return self.assigned_at - self.revoked_at


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """One group epoch reconciled: every member (in member-id order) and every handed-over
    partition (by partition)."""

    epoch: int
    members: tuple[MemberReconciliation, ...]
    pauses: tuple[Pause, ...] = field(default=())

    @property
    def heartbeats(self) -> int:
        """Heartbeats of the member that needed most."""
        return max((member.heartbeats for member in self.members), default=0)

    @property
    def intervals(self) -> int:
        """Heartbeat intervals until the last member reached the target."""
        return max((member.intervals for member in self.members), default=0)

    @property
    def paused_intervals(self) -> int:
        """Partition x heartbeat intervals not consumed, summed over handed-over partitions."""
        return sum(pause.intervals for pause in self.pauses)

    def paused_weight_intervals(self, weights: Mapping[str, Sequence[float]]) -> float:
        """The same, each partition weighted by its topic's ``weights`` (records/s or bytes/s;
        0 for a topic without)."""
        total = 0.0
        for pause in self.pauses:
            topic_weights = weights.get(pause.partition.topic, ())
            if pause.partition.partition < len(topic_weights):
                total += topic_weights[pause.partition.partition] * pause.intervals
        return total


class _Group:
    """The coordinator's side and the clients' side of one epoch being reconciled."""

    def __init__(
        self,
        epoch: int,
        previous_epoch: int,
        previous: Mapping[str, Iterable[TopicPartition]],
        target: Mapping[str, Iterable[TopicPartition]],
    ) -> None:
        self.epoch = epoch
        self.target = {member_id: frozenset(tps) for member_id, tps in target.items()}
        self.members: dict[str, MemberState] = {}
        self.owned: dict[str, frozenset[TopicPartition]] = {}
        self.holder: dict[TopicPartition, str] = {}
        for member_id in sorted(self.target):
            held = frozenset(previous.get(member_id, ()))
            epoch_before = previous_epoch if member_id in previous else 0
            self.members[member_id] = MemberState(STABLE, epoch_before, epoch_before, held)
            self.owned[member_id] = held
            for tp in held:
                self.holder[tp] = member_id
        self.revoked_at: dict[TopicPartition, tuple[str, int]] = {}
        self.pauses: list[Pause] = []
        self.heartbeats = dict.fromkeys(self.target, 0)
        self.states: dict[str, list[str]] = {member_id: [] for member_id in self.target}
        self.reached: dict[str, int] = {}

    def heartbeat(self, member_id: str, tick: int) -> str | None:
        """One heartbeat of ``member_id``: :data:`REVOKED` or :data:`RECEIVED` when its response
        changed its partitions (it then acknowledges at once), else None."""
        before = self.members[member_id]
        after = next_member_state(
            before, self.epoch, self.target[member_id], self.holder, self.owned[member_id]
        )
        self.members[member_id] = after
        for tp in before.holds() - after.holds():
            del self.holder[tp]
        for tp in after.holds() - before.holds():
            self.holder[tp] = member_id
        if member_id not in self.reached:
            self.heartbeats[member_id] += 1
            self.states[member_id].append(after.state)
            if after.state == STABLE and after.member_epoch == self.epoch:
                self.reached[member_id] = tick
        # the client takes what the response says it has: revokes the rest, starts the new
        owned = self.owned[member_id]
        if after.assigned == owned:
            return None
        revoked = owned - after.assigned
        for tp in revoked:
            self.revoked_at[tp] = (member_id, tick)
        for tp in after.assigned - owned:
            handed = self.revoked_at.pop(tp, None)
            if handed is not None:
                self.pauses.append(Pause(tp, handed[0], member_id, handed[1], tick))
        self.owned[member_id] = after.assigned
        return REVOKED if revoked else RECEIVED

    def tick(self, tick: int, senders: Iterable[str]) -> None:
        """Regular heartbeats of ``senders`` (in order), then waves of acknowledgements: those
        that only took partitions first, then those that revoked some (a revocation commits
        offsets first), each kind in member-id order."""
        answers = [(member_id, self.heartbeat(member_id, tick)) for member_id in senders]
        while answers:
            acknowledging = sorted(
                (kind == REVOKED, member_id) for member_id, kind in answers if kind is not None
            )
            answers = [
                (member_id, self.heartbeat(member_id, tick)) for _, member_id in acknowledging
            ]

    def done(self) -> bool:
        return len(self.reached) == len(self.members)


def reconcile(
    *,
    epoch: int,
    previous: Mapping[str, Iterable[TopicPartition]],
    target: Mapping[str, Iterable[TopicPartition]],
    previous_epoch: int | None = None,
) -> Reconciliation:
    """Play out one group epoch (see the module docstring for the timing assumptions).

    ``target`` maps every member of the group to its target partitions; ``previous`` maps the
    members that were in the group before this epoch (a subset of ``target``'s) to what they
    owned, at member epoch ``previous_epoch`` (default ``epoch - 1``); the others join now. A
    partition in nobody's ``previous`` is free from the start.
    """
    stray = sorted(set(previous) - set(target))
    if stray:
        raise ValueError(f"previous members not in the target: {', '.join(stray)}")
    group = _Group(epoch, epoch - 1 if previous_epoch is None else previous_epoch, previous, target)
    ordered = sorted(target)
    group.tick(0, [member_id for member_id in ordered if member_id not in previous])
    tick = 0
    while not group.done():
        tick += 1
        if tick > MAX_TICKS:
            raise RuntimeError(f"epoch {epoch}: no convergence after {MAX_TICKS} heartbeats")
        group.tick(tick, ordered)
    members = tuple(
        MemberReconciliation(
            member_id,
            group.heartbeats[member_id],
            group.reached[member_id],
            tuple(group.states[member_id]),
        )
        for member_id in ordered
    )
    pauses = tuple(sorted(group.pauses, key=lambda pause: pause.partition))
    return Reconciliation(epoch, members, pauses)


# ---------------------------------------------------------------------------------------------
# replay: one generation of a trace, and its score row


@runtime_checkable
class ServerSideAssignor(Protocol):
    """An assignor that runs in the group coordinator under the consumer protocol: replay asks
    it for the coordinator's target (nothing withheld) and reconciles members towards it."""

    name: str
    group_protocol: str

    def target(self, group: Group) -> Assignment: ...


def is_server_side(assignor: object) -> bool:
    """True for assignors of the consumer protocol (``group_protocol == "consumer"``)."""
    # the attribute first: a runtime Protocol check costs tens of microseconds
    return getattr(assignor, "group_protocol", None) == "consumer" and isinstance(
        assignor, ServerSideAssignor
    )


def reconcile_generation(
    generation: Generation,
    target: Mapping[str, Sequence[TopicPartition]],
    owned_by_identity: Mapping[str, Sequence[TopicPartition]],
    previous_identities: Collection[str],
    previous_epoch: int | None,
) -> Reconciliation | None:
    """Reconcile ``generation``'s members from what each identity owned in the previous one
    (partitions that still exist; the greater member id speaks for an identity two members
    share, as in scoring) to ``target``. None when the target gives a partition to two members
    (a broken recorded assignment: no reconciliation reaches it)."""
    seen: set[TopicPartition] = set()
    for member in generation.members:
        partitions = target.get(member.member_id, ())
        if not seen.isdisjoint(partitions) or len(set(partitions)) != len(partitions):
            return None
        seen.update(partitions)
    counts = {topic.name: topic.num_partitions for topic in generation.topics}
    speaker: dict[str, str] = {}
    for member in sorted(generation.members, key=lambda member: member.member_id):
        if member.identity in previous_identities:
            speaker[member.identity] = member.member_id
    previous = {
        member_id: [
            tp
            for tp in owned_by_identity.get(identity, ())
            if 0 <= tp.partition < counts.get(tp.topic, 0)
        ]
        for identity, member_id in speaker.items()
    }
    return reconcile(
        epoch=generation.generation,
        previous=previous,
        target={
            member.member_id: target.get(member.member_id, ()) for member in generation.members
        },
        previous_epoch=previous_epoch,
    )


def with_reconciliation(
    row: ScoreRow, reconciliation: Reconciliation | None, topics: Iterable[Topic]
) -> ScoreRow:
    """``row`` with the reconciliation columns filled in (the cost model turns intervals into
    seconds); ``paused_weight_intervals`` only when some topic carries weights."""
    if reconciliation is None:
        return row
    weights = {topic.name: topic.weights for topic in topics if topic.weights is not None}
    weight_intervals = reconciliation.paused_weight_intervals(weights) if weights else None
    return row._replace(
        reconcile_heartbeats=reconciliation.heartbeats,
        reconcile_intervals=reconciliation.intervals,
        paused_intervals=reconciliation.paused_intervals,
        paused_weight_intervals=weight_intervals,
    )
