"""Protocol generations of Kafka's replica/HW protocol as explicit switch sets.

Each mode names what a follower does when it must reconcile its log with a leader, and which
later safety rules are on. The four generations, oldest first:

>>> [mode.truncation for mode in (get_mode(name) for name in MODE_NAMES)]
['high-watermark', 'kip-101', 'kip-279', 'diverging-epoch']
>>> current = get_mode("current")
>>> current.strict_min_isr, current.maximal_isr, current.leso_isr_join
(True, True, True)
>>> current.with_switches(maximal_isr=False).maximal_isr
False

``pre-0.11`` truncates to the local HW when it follows a new leader or restarts; ``kip-101`` asks
the leader for the start of the first later epoch; ``kip-279`` gets back the epoch the leader used
and iterates, and a new leader caches (epoch, LEO) at election (KAFKA-7415, shipped in 2.1 and
modelled with it, like the LESO rule of KAFKA-7128 and reconciling after every epoch change of
KAFKA-7164); ``current`` fences stale epochs (KIP-320),
detects divergence inside fetch responses (KAFKA-10554), freezes HW while the ISR is below
min.insync.replicas (3.7), counts the maximal ISR for HW (KIP-497) and only lets a follower join
the ISR at or past the leader-epoch start offset. ``eligible_leader_replicas`` (KIP-966) is an
option of ``current`` only.

Next to the four ISR generations, ``majority`` is not a Kafka version but the design Kafka did
not choose for the data plane: a partition commits what a majority of its replicas holds and
elects by log comparison, Raft's rules as KRaft applies them to the metadata log
(``replication.raft_rules``). Its own switches can be turned off to watch each rule matter:

>>> majority = get_mode("majority")
>>> majority.commit_rule, majority.vote_log_check, majority.flush_before_ack
('majority', True, True)
>>> majority.with_switches(vote_log_check=False).vote_log_check
False
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from replication.errors import InputError

Truncation = Literal["high-watermark", "kip-101", "kip-279", "diverging-epoch"]
CommitRule = Literal["isr", "majority"]

# Kafka's ISR generations, oldest first (every bundled scenario states a verdict for each)
MODE_NAMES: tuple[str, ...] = ("pre-0.11", "kip-101", "kip-279", "current")
# quorum designs next to them, for comparison
QUORUM_MODE_NAMES: tuple[str, ...] = ("majority",)
ALL_MODE_NAMES: tuple[str, ...] = MODE_NAMES + QUORUM_MODE_NAMES
SWITCH_NAMES: tuple[str, ...] = (
    "maximal_isr",
    "leso_isr_join",
    "strict_min_isr",
    "eligible_leader_replicas",
)
# the majority mode's rules (KRaft's RaftRules of the same names)
MAJORITY_SWITCH_NAMES: tuple[str, ...] = (
    "vote_log_check",
    "epoch_start_commit",
    "flush_before_ack",
)


@dataclass(frozen=True, slots=True)
class ProtocolMode:
    """One protocol generation: how followers truncate and which safety rules apply."""

    name: str
    # how a follower reconciles its log with the leader (R4.7)
    truncation: Truncation
    # a new leader writes (epoch, LEO) into its epoch cache before any append (R1.4 step 2)
    cache_epoch_at_election: bool
    # fetches carry the current leader epoch; stale or future epochs are refused (KIP-320, R4.8)
    leader_epoch_fencing: bool
    # HW stays put while |ISR| < min.insync.replicas (KIP-966 part 1, 3.7, R1.5)
    strict_min_isr: bool
    # a follower reconciles after every leader-epoch change, not only a leader change (KAFKA-7164)
    reconcile_on_every_epoch: bool
    # HW counts pending ISR additions (PendingExpand) at once (KIP-497, R2.4)
    maximal_isr: bool
    # a follower joins the ISR only with LEO >= leader-epoch start offset (KAFKA-7128, R2.4)
    leso_isr_join: bool
    # KIP-966 eligible leader replicas; a restart removes the broker from ISR and ELR (R2.7, R5.5)
    eligible_leader_replicas: bool = False
    # a follower is ISR-eligible only while the broker epoch of its last fetch is its current
    # registration (KIP-903, Partition.isReplicaIsrEligible); a restarted broker that has not
    # fetched since neither joins the ISR nor holds the HW back
    broker_epoch_isr_check: bool = False
    # what moves the HW and who may lead: the ISR (Kafka) or a majority of the replicas (Raft)
    commit_rule: CommitRule = "isr"
    # majority only: a replica leads only with the votes of a majority whose (last epoch, LEO)
    # is at most its own (Raft 5.4.1, KRaft's canGrantVote)
    vote_log_check: bool = False
    # majority only: the HW passes earlier epochs' records only with a record of the leader's
    # own epoch (Raft 5.4.2; KRaft's LeaderChange record makes one at once)
    epoch_start_commit: bool = False
    # majority only: a replica flushes what it appends before acknowledging it (a follower
    # before its next fetch), as KRaft does; Raft's votes assume durable logs
    flush_before_ack: bool = False

    def with_switches(self, **switches: bool) -> ProtocolMode:
        """This mode with some switches turned on or off.

        >>> get_mode("kip-101").with_switches(eligible_leader_replicas=True)
        Traceback (most recent call last):
        ...
        replication.errors.InputError: eligible_leader_replicas: ELR is an option of the \
current mode only (got 'kip-101')
        """
        unknown = sorted(set(switches) - set(SWITCH_NAMES) - set(MAJORITY_SWITCH_NAMES))
        if unknown:
            raise InputError("unknown protocol switch", field="switches", value=unknown[0])
        for name in MAJORITY_SWITCH_NAMES:
            if name in switches and self.commit_rule != "majority":
                raise InputError("a rule of the majority mode only", field=name, value=self.name)
        if switches.get("eligible_leader_replicas") and self.name != "current":
            raise InputError(
                "ELR is an option of the current mode only",
                field="eligible_leader_replicas",
                value=self.name,
            )
        mode = self
        for name, value in switches.items():
            mode = dataclasses.replace(mode, **{name: value})  # type: ignore[arg-type]
        return mode

    def switches(self) -> dict[str, bool]:
        return {name: getattr(self, name) for name in SWITCH_NAMES}


_MODES: dict[str, ProtocolMode] = {
    "pre-0.11": ProtocolMode(
        name="pre-0.11",
        truncation="high-watermark",
        cache_epoch_at_election=False,
        leader_epoch_fencing=False,
        strict_min_isr=False,
        reconcile_on_every_epoch=False,
        maximal_isr=True,
        leso_isr_join=False,
    ),
    "kip-101": ProtocolMode(
        name="kip-101",
        truncation="kip-101",
        cache_epoch_at_election=False,
        leader_epoch_fencing=False,
        strict_min_isr=False,
        reconcile_on_every_epoch=False,
        maximal_isr=True,
        leso_isr_join=False,
    ),
    "kip-279": ProtocolMode(
        name="kip-279",
        truncation="kip-279",
        cache_epoch_at_election=True,
        leader_epoch_fencing=False,
        strict_min_isr=False,
        reconcile_on_every_epoch=True,
        maximal_isr=True,
        leso_isr_join=True,
    ),
    "current": ProtocolMode(
        name="current",
        truncation="diverging-epoch",
        cache_epoch_at_election=True,
        leader_epoch_fencing=True,
        strict_min_isr=True,
        reconcile_on_every_epoch=True,
        maximal_isr=True,
        leso_isr_join=True,
        broker_epoch_isr_check=True,
    ),
    # the data plane of current (epoch caches, KIP-320 fencing, divergence in fetch) with
    # Raft's commit and election in place of the ISR's
    "majority": ProtocolMode(
        name="majority",
        truncation="diverging-epoch",
        cache_epoch_at_election=True,
        leader_epoch_fencing=True,
        strict_min_isr=False,
        reconcile_on_every_epoch=True,
        maximal_isr=True,
        leso_isr_join=True,
        broker_epoch_isr_check=True,
        commit_rule="majority",
        vote_log_check=True,
        epoch_start_commit=True,
        flush_before_ack=True,
    ),
}


def get_mode(name: str) -> ProtocolMode:
    """The protocol mode called ``name`` (one of ``ALL_MODE_NAMES``)."""
    try:
        return _MODES[name]
    except KeyError:
        raise InputError(
            f"unknown mode; expected one of {', '.join(ALL_MODE_NAMES)}", field="mode", value=name
        ) from None
