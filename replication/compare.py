"""ISR against a majority quorum: the same seeded fault schedules through Kafka's ISR rules
(``current`` with min.insync.replicas 1 or 2, acks=all or 1, unclean election off or on, and
min.insync.replicas 2 with KIP-966's eligible leader replicas) and
through the ``majority`` mode, counting per configuration what a user of the partition sees:
acknowledged writes lost, writes refused (unavailability) and steps without a leader.

Each schedule is drawn once, by the explorer's generator against ``current`` with
min.insync.replicas 2, acks=all and unclean election off (so it never forces an unclean
election: the unclean configurations elect uncleanly only when their own rule says so), and
then replayed step by step in every configuration with the acks of that configuration. A step
that cannot happen in a configuration (a forced election of a replica that cannot win there)
changes nothing, as it would on a cluster.

>>> report = compare(schedules=20, seed=3)
>>> row = report.row("current minISR=1 acks=1 unclean")
>>> row.writes == report.row("majority acks=all").writes  # the same schedules everywhere
True
>>> report.row("majority acks=all").acked_lost
0
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from replication.errors import InputError
from replication.explore import (
    DEFAULT_MAX_STEPS,
    MAX_SCHEDULE_STEPS,
    MAX_SCHEDULES,
    MAX_SEED,
    _check_int,
    _Generator,
)
from replication.modes import ProtocolMode, get_mode
from replication.scenario import ScenarioConfig, Step
from replication.sim import Runner, acked_lost
from replication.view import JsonObject

# produce results that are errors: refused before any append (no leader, too small an ISR,
# unreachable) or, once appended, failed (timed out, leader gone, too small an ISR after append)
ERRORS = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "NOT_LEADER_OR_FOLLOWER",
        "REQUEST_TIMED_OUT",
    }
)
HEADERS: tuple[str, ...] = (
    "configuration",
    "schedules",
    "writes",
    "acknowledged",
    "acked lost",
    "schedules losing acked",
    "refused",
    "refused %",
    "failed after append",
    "steps",
    "steps without leader",
    "leaderless %",
)


@dataclass(frozen=True, slots=True)
class CompareConfig:
    """One column of the comparison: a mode, its settings and the producer's acks."""

    mode: str
    acks: str | int = "all"
    min_insync_replicas: int = 1
    unclean: bool = False
    # KIP-966 eligible leader replicas (current only)
    elr: bool = False
    # protocol switches turned off (e.g. the majority mode without flush_before_ack)
    switches_off: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        parts = [self.mode]
        if self.mode != "majority":
            parts.append(f"minISR={self.min_insync_replicas}")
        parts.append(f"acks={self.acks}")
        if self.unclean:
            parts.append("unclean")
        if self.elr:
            parts.append("ELR")
        parts += [f"no {name}" for name in self.switches_off]
        return " ".join(parts)

    def protocol(self) -> ProtocolMode:
        switches = dict.fromkeys(self.switches_off, False)
        if self.elr:
            switches["eligible_leader_replicas"] = True
        return get_mode(self.mode).with_switches(**switches)


DEFAULT_CONFIGS: tuple[CompareConfig, ...] = (
    *(
        CompareConfig("current", acks, min_isr, unclean)
        for min_isr in (1, 2)
        for acks in ("all", 1)
        for unclean in (False, True)
    ),
    CompareConfig("current", "all", 2, elr=True),
    CompareConfig("majority", "all"),
    CompareConfig("majority", "all", switches_off=("flush_before_ack",)),
    CompareConfig("majority", 1),
)


@dataclass(slots=True)
class CompareRow:
    """Totals of one configuration over every schedule."""

    config: CompareConfig
    schedules: int = 0
    writes: int = 0
    acknowledged: int = 0
    acked_lost: int = 0
    schedules_losing_acked: int = 0
    refused: int = 0
    failed_after_append: int = 0
    steps: int = 0
    leaderless_steps: int = 0

    def cells(self) -> list[object]:
        return [
            self.config.label,
            self.schedules,
            self.writes,
            self.acknowledged,
            self.acked_lost,
            self.schedules_losing_acked,
            self.refused,
            _percent(self.refused, self.writes),
            self.failed_after_append,
            self.steps,
            self.leaderless_steps,
            _percent(self.leaderless_steps, self.steps),
        ]

    def to_json(self) -> JsonObject:
        config = self.config
        return {
            "configuration": config.label,
            "mode": config.mode,
            "acks": config.acks,
            "min_insync_replicas": config.min_insync_replicas
            if config.mode != "majority"
            else None,
            "unclean_leader_election": config.unclean,
            "eligible_leader_replicas": config.elr,
            "switches_off": list(config.switches_off),
            "schedules": self.schedules,
            "writes": self.writes,
            "acknowledged": self.acknowledged,
            "acked_lost": self.acked_lost,
            "schedules_losing_acked": self.schedules_losing_acked,
            "refused": self.refused,
            "failed_after_append": self.failed_after_append,
            "steps": self.steps,
            "leaderless_steps": self.leaderless_steps,
        }


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 1) if whole else None


@dataclass(frozen=True, slots=True)
class CompareReport:
    """The comparison; ``to_json`` and ``rows`` are the same for the same seed and options."""

    seed: int
    schedules: int
    brokers: tuple[int, ...]
    max_steps: int
    max_lossy_crashes: int
    link_cuts: bool
    results: tuple[CompareRow, ...] = field(default=())

    def row(self, label: str) -> CompareRow:
        for result in self.results:
            if result.config.label == label:
                return result
        raise KeyError(label)

    def rows(self) -> list[list[object]]:
        return [result.cells() for result in self.results]

    def to_json(self) -> JsonObject:
        return {
            "seed": self.seed,
            "schedules": self.schedules,
            "brokers": list(self.brokers),
            "max_steps": self.max_steps,
            "max_lossy_crashes": self.max_lossy_crashes,
            "link_cuts": self.link_cuts,
            "configurations": [result.to_json() for result in self.results],
        }


def compare(
    *,
    schedules: int = 1000,
    seed: int = 0,
    brokers: Sequence[int] = (1, 2, 3),
    max_steps: int = DEFAULT_MAX_STEPS,
    max_lossy_crashes: int = 1,
    link_cuts: bool = False,
    configs: Sequence[CompareConfig] = DEFAULT_CONFIGS,
    progress: Callable[[int, int], None] | None = None,
) -> CompareReport:
    """Run ``schedules`` seeded schedules through every configuration of ``configs``.

    A lossy crash loses a replica's unflushed tail; ``max_lossy_crashes`` (default 1, one
    failure's worth) bounds them per schedule, as the explorer does.
    """
    _check_int(schedules, "schedules", 0, MAX_SCHEDULES)
    _check_int(seed, "seed", -MAX_SEED, MAX_SEED)
    _check_int(max_steps, "max_steps", 1, MAX_SCHEDULE_STEPS)
    _check_int(max_lossy_crashes, "max_lossy_crashes", 0, MAX_SCHEDULE_STEPS)
    if not isinstance(link_cuts, bool):
        raise InputError("must be true or false", field="link_cuts", value=link_cuts)
    if not configs:
        raise InputError("name at least one configuration", field="configs", value=[])
    replicas = tuple(brokers)
    generator_config = ScenarioConfig(
        brokers=replicas, replicas=replicas, mode="current", min_insync_replicas=2
    )
    prepared = []
    for config in configs:
        scenario_config = ScenarioConfig(
            brokers=replicas,
            replicas=replicas,
            mode=config.mode,
            min_insync_replicas=config.min_insync_replicas,
            unclean_leader_election=config.unclean,
            eligible_leader_replicas=config.elr,
        )
        prepared.append((config.protocol(), scenario_config, CompareRow(config)))
    for index in range(schedules):
        steps = _schedule(generator_config, seed, index, max_steps, max_lossy_crashes, link_cuts)
        for protocol, scenario_config, row in prepared:
            _replay(row, protocol, scenario_config, steps)
        if progress is not None and (index + 1) % 100 == 0:
            progress(index + 1, schedules)
    return CompareReport(
        seed=seed,
        schedules=schedules,
        brokers=replicas,
        max_steps=max_steps,
        max_lossy_crashes=max_lossy_crashes,
        link_cuts=link_cuts,
        results=tuple(row for _, _, row in prepared),
    )


def _schedule(
    config: ScenarioConfig,
    seed: int,
    index: int,
    max_steps: int,
    max_lossy_crashes: int,
    link_cuts: bool,
) -> list[Step]:
    """Schedule ``index``: the explorer's generator, on its own seed stream."""
    rng = random.Random(f"ktk-compare/{seed}/{index}")
    generator = _Generator(config, rng, "all", max_lossy_crashes, None, (), link_cuts=link_cuts)
    generator.run(max_steps)
    return generator.steps


def _with_acks(step: Step, acks: str | int) -> Step:
    if step.op != "produce":
        return step
    options = tuple((name, acks if name == "acks" else value) for name, value in step.options)
    return Step(step.op, step.target, options)


def _replay(
    row: CompareRow, protocol: ProtocolMode, config: ScenarioConfig, steps: Sequence[Step]
) -> None:
    runner = Runner(config, protocol, invariants=())
    acks = row.config.acks
    leaderless = 0
    for step in steps:
        if runner.step(_with_acks(step, acks)).view.leader is None:
            leaderless += 1
    cluster = runner.cluster
    lost = len(acked_lost(cluster.view()))
    row.schedules += 1
    row.steps += len(steps)
    row.leaderless_steps += leaderless
    row.writes += len(cluster.produces)
    row.acknowledged += len(cluster.acked)
    row.acked_lost += lost
    row.schedules_losing_acked += 1 if lost else 0
    for request in cluster.produces:
        if request.result in ERRORS:
            # a request refused before any append names no leader (Cluster._record_produce)
            if request.leader_id == -1:
                row.refused += 1
            else:
                row.failed_after_append += 1
