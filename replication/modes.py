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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from replication.errors import InputError

Truncation = Literal["high-watermark", "kip-101", "kip-279", "diverging-epoch"]

MODE_NAMES: tuple[str, ...] = ("pre-0.11", "kip-101", "kip-279", "current")
SWITCH_NAMES: tuple[str, ...] = (
    "maximal_isr",
    "leso_isr_join",
    "strict_min_isr",
    "eligible_leader_replicas",
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

    def with_switches(self, **switches: bool) -> ProtocolMode:
        """This mode with some switches turned on or off.

        >>> get_mode("kip-101").with_switches(eligible_leader_replicas=True)
        Traceback (most recent call last):
        ...
        replication.errors.InputError: eligible_leader_replicas: ELR is an option of the \
current mode only (got 'kip-101')
        """
        unknown = sorted(set(switches) - set(SWITCH_NAMES))
        if unknown:
            raise InputError("unknown protocol switch", field="switches", value=unknown[0])
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
}


def get_mode(name: str) -> ProtocolMode:
    """The protocol generation called ``name`` (one of ``MODE_NAMES``)."""
    try:
        return _MODES[name]
    except KeyError:
        raise InputError(
            f"unknown mode; expected one of {', '.join(MODE_NAMES)}", field="mode", value=name
        ) from None
