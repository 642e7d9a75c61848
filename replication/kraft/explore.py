"""Exploring the metadata quorum: seeded random schedules of deliveries, ticks, clock jumps,
proposals, crashes, restarts, link cuts and node isolations, each checked after every event;
every class of violation found is shrunk to a minimal quorum scenario file that
``ktk replicate FILE`` replays.

A class is the name of the invariant that broke (``LeaderCompleteness``: committed metadata
lost; ``MajorityHighWatermark``; ``QuorumDisruption``: a working leader deposed by a voter that
cannot win). With every rule on, nothing is found; with one switched off, its class is.

>>> report = explore_quorum(QuorumExploreSettings(schedules=20, seed=0))
>>> report.violating, report.findings
(0, ())
>>> QuorumExploreSettings(rules_off=("count_observers",))
Traceback (most recent call last):
...
replication.errors.InputError: rules_off: unknown rule, or one Kafka runs off (count_observers: \
use rules_on) (got 'count_observers')
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from replication.errors import InputError
from replication.explore import MAX_SCHEDULE_STEPS, MAX_SCHEDULES, _check_int, shrink
from replication.kraft.quorum import DISRUPTION, NodeSpec, Quorum
from replication.kraft.raft import RaftRules
from replication.kraft.records import RegisterBroker, TopicRecord
from replication.kraft.scenario import (
    QuorumScenario,
    QuorumSettings,
    QuorumStep,
    _freeze,
    _Runner,
    quorum_scenario_to_text,
)
from replication.view import JsonObject, Violation

__all__ = [
    "DISRUPTION",
    "QuorumExploreReport",
    "QuorumExploreSettings",
    "QuorumFinding",
    "explore_quorum",
    "quorum_schedule",
    "shrink_schedule",
    "write_quorum_findings",
]

RULES_ON_BY_DEFAULT = tuple(f.name for f in fields(RaftRules) if getattr(RaftRules(), f.name))
RULES_OFF_BY_DEFAULT = tuple(f.name for f in fields(RaftRules) if not getattr(RaftRules(), f.name))
CLOCK_JUMPS_MS = (1500, 3000, 6000)


@dataclass(frozen=True, slots=True)
class QuorumExploreSettings:
    """What one exploration runs: ``rules_off`` names rules Kafka runs on that are switched
    off, ``rules_on`` rules Kafka runs off (``count_observers``) that are switched on."""

    voters: int = 3
    brokers: int = 1
    steps: int = 80
    schedules: int = 1000
    seed: int = 0
    rules_off: tuple[str, ...] = ()
    rules_on: tuple[str, ...] = ()
    snapshots: bool = True
    clock_jumps: bool = True
    shrink: bool = True

    def __post_init__(self) -> None:
        for name, value, low, high in (
            ("voters", self.voters, 1, 9),
            ("brokers", self.brokers, 0, 6),
            ("steps", self.steps, 1, MAX_SCHEDULE_STEPS),
            ("schedules", self.schedules, 0, MAX_SCHEDULES),
            ("seed", self.seed, 0, 2**62),
        ):
            _check_int(value, name, low, high)
        for name in self.rules_off:
            if name not in RULES_ON_BY_DEFAULT:
                raise InputError(
                    "unknown rule, or one Kafka runs off (count_observers: use rules_on)",
                    field="rules_off",
                    value=name,
                )
        for name in self.rules_on:
            if name not in RULES_OFF_BY_DEFAULT:
                raise InputError(
                    "unknown rule, or one Kafka runs on (use rules_off)",
                    field="rules_on",
                    value=name,
                )

    @property
    def rules(self) -> RaftRules:
        changes = {name: False for name in self.rules_off}
        changes.update({name: True for name in self.rules_on})
        return replace(RaftRules(), **changes)


@dataclass(frozen=True, slots=True)
class QuorumFinding:
    violation_class: str
    schedule: int
    detail: str
    original_steps: int
    scenario: QuorumScenario

    @property
    def file_name(self) -> str:
        return f"{self.scenario.name}.json"

    @property
    def shrunk_steps(self) -> int:
        return sum(1 for step in self.scenario.steps if step.op != "expect")


@dataclass(frozen=True, slots=True)
class QuorumExploreReport:
    settings: QuorumExploreSettings
    violating: int
    first_found: tuple[tuple[str, int], ...]
    class_counts: tuple[tuple[str, int], ...]
    findings: tuple[QuorumFinding, ...]
    cpu_seconds: float

    @property
    def schedules_per_second(self) -> float:
        return self.settings.schedules / max(self.cpu_seconds, 1e-9)

    def summary(self) -> str:
        settings = self.settings
        switched = [f"{n} off" for n in settings.rules_off] + [f"{n} on" for n in settings.rules_on]
        lines = [
            f"quorum of {settings.voters} voters and {settings.brokers} brokers, "
            f"{settings.schedules:,} schedules of {settings.steps} steps from seed "
            f"{settings.seed}, rules: {', '.join(switched) or 'all as Kafka runs them'}",
            f"{self.schedules_per_second:,.0f} schedules/s (CPU time of one core)",
        ]
        if not self.first_found:
            lines.append("no schedule broke an invariant")
        counts = dict(self.class_counts)
        for name, index in self.first_found:
            lines.append(
                f"{name}: first at schedule {index} (seed {settings.seed + index}), "
                f"in {counts[name]:,} schedules"
            )
        for finding in self.findings:
            lines.append(
                f"  {finding.file_name}: {finding.original_steps} steps shrunk to "
                f"{finding.shrunk_steps}: {finding.detail}"
            )
        return "\n".join(lines)

    def to_json(self, *, include_timing: bool = False) -> dict[str, Any]:
        settings = self.settings
        document: dict[str, Any] = {
            "kind": "quorum",
            "voters": settings.voters,
            "brokers": settings.brokers,
            "steps": settings.steps,
            "schedules": settings.schedules,
            "seed": settings.seed,
            "rules_off": list(settings.rules_off),
            "rules_on": list(settings.rules_on),
            "violating_schedules": self.violating,
            "first_found": dict(self.first_found),
            "class_counts": dict(self.class_counts),
            "findings": [
                {
                    "class": f.violation_class,
                    "schedule": f.schedule,
                    "detail": f.detail,
                    "original_steps": f.original_steps,
                    "shrunk_steps": f.shrunk_steps,
                    "file": f.file_name,
                }
                for f in self.findings
            ],
        }
        if include_timing:
            document["schedules_per_second"] = round(self.schedules_per_second, 1)
        return document


def _quorum_settings(settings: QuorumExploreSettings, seed: int) -> QuorumSettings:
    voters = tuple(range(1, settings.voters + 1))
    brokers = tuple(range(settings.voters + 1, settings.voters + settings.brokers + 1))
    nodes = tuple((v, ("controller",)) for v in voters) + tuple((b, ("broker",)) for b in brokers)
    return QuorumSettings(nodes=nodes, voters=voters, seed=seed, rules=settings.rules)


def quorum_schedule(
    settings: QuorumExploreSettings, seed: int
) -> tuple[list[tuple[str, Any]], list[Violation]]:
    """One schedule drawn from ``seed``: the steps taken (op, target) and the violations,
    stopping at the first. Every random choice comes from ``seed``."""
    chooser = random.Random(seed)
    voter_ids = tuple(range(1, settings.voters + 1))
    broker_ids = tuple(range(settings.voters + 1, settings.voters + settings.brokers + 1))
    ids = voter_ids + broker_ids
    specs = [NodeSpec(v, frozenset({"controller"})) for v in voter_ids]
    specs += [NodeSpec(b, frozenset({"broker"})) for b in broker_ids]
    quorum = Quorum(specs, voter_ids, seed=seed, rules=settings.rules, disruption=True)
    quorum.keep_trace = False
    steps: list[tuple[str, Any]] = []
    record = steps.append
    random_value = chooser.random
    randrange = chooser.randrange
    proposals = 0
    for _ in range(settings.steps):
        links = quorum.pending()
        # Messages travel much faster than timeouts expire: most steps deliver one.
        if links and random_value() < 0.75:
            link = links[randrange(len(links))]
            record(("deliver", link))
            quorum.deliver(*link)
            if quorum.violations:
                break
            continue
        roll = random_value()
        if roll < 0.45:
            ms = 100 if random_value() < 0.6 else 250
            record(("tick", ms))
            quorum.tick(ms)
        elif roll < 0.5:
            if settings.clock_jumps:
                ms = CLOCK_JUMPS_MS[randrange(len(CLOCK_JUMPS_MS))]
                record(("tick", ms))
                quorum.tick(ms)
        elif roll < 0.68:
            if quorum.leader() is not None:
                proposals += 1
                proposal = (
                    RegisterBroker(proposals)
                    if proposals % 3
                    else TopicRecord(f"t{proposals}", 1 + proposals % 4)
                )
                record(("propose", proposal))
                quorum.propose(proposal)
        elif roll < 0.74:
            running = sorted(quorum.up.intersection(voter_ids))
            if len(running) > 1:
                node = running[randrange(len(running))]
                record(("crash", node))
                quorum.crash(node)
        elif roll < 0.81:
            down = sorted(set(ids) - quorum.up)
            if down:
                node = down[randrange(len(down))]
                record(("restart", node))
                quorum.restart(node)
        elif roll < 0.85:
            a, b = chooser.sample(ids, 2)
            record(("cut", (a, b)))
            quorum.cut_link(a, b)
        elif roll < 0.88:
            if quorum.cut:
                a, b = sorted(sorted(quorum.cut, key=sorted)[randrange(len(quorum.cut))])
                record(("heal", (a, b)))
                quorum.heal_link(a, b)
        elif roll < 0.91:
            node = voter_ids[randrange(len(voter_ids))]
            record(("isolate", node))
            quorum.isolate(node)
        elif roll < 0.95:
            isolated = sorted({n for link in quorum.cut for n in link})
            if isolated:
                node = isolated[randrange(len(isolated))]
                record(("rejoin", node))
                quorum.rejoin(node)
        elif settings.snapshots:
            running = sorted(quorum.up)
            node = running[randrange(len(running))]
            record(("snapshot", node))
            quorum.snapshot(node)
        if quorum.violations:
            break
    return steps, quorum.violations


def _steps(raw: list[tuple[str, Any]]) -> list[QuorumStep]:
    return [QuorumStep(op, target) for op, target in raw]


def _replay(
    scenario_settings: QuorumSettings, steps: list[QuorumStep]
) -> tuple[list[Violation], list[str | None]]:
    """Run ``steps`` leniently (a step that cannot apply does nothing); the violations and
    each step's note."""
    runner = _Runner(QuorumScenario("replay", scenario_settings, tuple(steps)), record=False)
    notes = []
    for index, step in enumerate(steps):
        notes.append(runner.apply(index, step, strict=False))
        if runner.quorum.violations:
            notes.extend([None] * (len(steps) - index - 1))
            break
    return runner.quorum.violations, notes


def shrink_schedule(
    scenario_settings: QuorumSettings, steps: list[QuorumStep], violation_class: str
) -> list[QuorumStep]:
    """The smallest schedule found that still breaks ``violation_class``, without steps that
    do nothing (so the file replays strictly)."""

    def picked(keys: list[JsonObject]) -> list[QuorumStep]:
        return [steps[index] for key in keys if isinstance(index := key["i"], int)]

    def holds(candidate: list[JsonObject]) -> bool:
        violations, _ = _replay(scenario_settings, picked(candidate))
        return any(v.invariant == violation_class for v in violations)

    # replication.explore.shrink works on the steps of a file; here each is its index
    keyed: list[JsonObject] = [{"i": index} for index in range(len(steps))]
    kept = picked(shrink(keyed, holds))
    _, notes = _replay(scenario_settings, kept)
    effective = [step for step, note in zip(kept, notes, strict=True) if note is None]
    violations, _ = _replay(scenario_settings, effective)
    if any(v.invariant == violation_class for v in violations):
        return effective
    return kept


def explore_quorum(
    settings: QuorumExploreSettings,
    *,
    progress: Callable[[int, int], None] | None = None,
    timer: Callable[[], float] = time.process_time,
) -> QuorumExploreReport:
    """Run ``settings.schedules`` schedules (seeds ``seed``, ``seed + 1``, ...); record the first
    schedule of each class and shrink it."""
    first: dict[str, tuple[int, list[tuple[str, Any]], Violation]] = {}
    counts: dict[str, int] = {}
    violating = 0
    start = timer()
    for index in range(settings.schedules):
        steps, violations = quorum_schedule(settings, settings.seed + index)
        if violations:
            violating += 1
            violation = violations[0]
            counts[violation.invariant] = counts.get(violation.invariant, 0) + 1
            first.setdefault(violation.invariant, (index, steps, violation))
        if progress is not None and (index + 1) % 100 == 0:
            progress(index + 1, settings.schedules)
    elapsed = timer() - start
    findings = []
    for name, (index, raw, violation) in sorted(first.items(), key=lambda item: item[1][0]):
        if not settings.shrink:
            continue
        scenario_settings = _quorum_settings(settings, settings.seed + index)
        shrunk = shrink_schedule(scenario_settings, _steps(raw), name)
        expect = QuorumStep("expect", _freeze({"violations": [name]}))
        file_name = f"kraft-{_slug(name)}-seed-{settings.seed + index}"
        scenario = QuorumScenario(
            file_name,
            scenario_settings,
            (*shrunk, expect),
            description=(
                f"Found by ktk replicate explore --quorum {settings.voters} at schedule "
                f"{index} and shrunk from {len(raw)} steps: {violation.detail}"
            ),
        )
        findings.append(QuorumFinding(name, index, violation.detail, len(raw), scenario))
    return QuorumExploreReport(
        settings,
        violating,
        tuple(sorted(((n, i) for n, (i, _, _) in first.items()), key=lambda item: item[1])),
        tuple(sorted(counts.items())),
        tuple(findings),
        elapsed,
    )


def _slug(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name).lstrip("-")


def write_quorum_findings(report: QuorumExploreReport, directory: Path) -> list[Path]:
    """Each finding's scenario as ``<name>.json`` in ``directory`` (a ``Path``)."""
    written = []
    for finding in report.findings:
        path = directory / finding.file_name
        path.write_text(quorum_scenario_to_text(finding.scenario), encoding="utf-8")
        written.append(path)
    return written
