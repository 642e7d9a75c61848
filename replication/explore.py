"""Random fault schedules against the simulator, sorted into the known loss classes S1-S5 and
shrunk to minimal replayable scenario files.

A schedule is a seeded random walk over the scenario operations (produce with acks, fetch
rounds, lost fetch replies, crashes that keep or lose unflushed data, restarts, controlled
shutdowns, flushes, time advances, isolate/heal, elections, consumer reads), generated step by
step against a live ``Cluster`` so that each operation is one that can happen now (a restart
only for a broker that is down, a forced election only of an ISR member unless unclean election
is enabled). It ends with a settle phase (heal, restart, elect, a few fetch rounds, a read) so
that a loss or divergence becomes visible. Each schedule is then run as a ``Scenario`` by
``run_scenario``, which checks the invariants after every step.

A schedule "violates" when an invariant broke, an acknowledged record is lost or two replicas'
logs diverged. The violation is classified by the fault that explains it (protocol spec
section 7), most specific first:

- ``S5`` ISR shrank to one replica and that replica was lost: a lost record was acknowledged
  while the ISR was a single broker, or the sole ISR member crashed losing its unflushed tail;
- ``S4`` an unclean election made a replica outside the ISR leader;
- ``S2`` a replica restarted after losing its unflushed tail;
- ``S1`` a restart cut a replica's log back to its local HW, which lags the leader's by a
  round trip (the two-round HW lag);
- ``S3`` none of those: leadership moved faster than followers caught up (with or without a
  crash on the way), and truncation by epochs could not tell the logs apart.

Every class found is shrunk by delta debugging (drop chunks of steps, then single steps, then
simplify options: lossy crash -> keep, lost reply -> ok, forced election -> auto, shorter time
advances, renumbered record values) for as long as the *same class* still occurs; the minimal
schedule gets an ``expect`` step stating what it shows, so ``ktk replicate FILE`` replays it and
exits 0. Lossy crashes are limited per schedule (``max_lossy_crashes``, by default
max(1, min.insync.replicas - 1)): losing more copies than the ISR guarantee covers is not a
protocol flaw.

Five schedules of the KIP-101 generation on two brokers (no lossy crashes) already hit the
fast-leader-change divergence that KIP-279 fixed, shrunk from 32 steps to 8:

>>> report = explore("kip-101", brokers=(1, 2), max_lossy_crashes=0, schedules=5, seed=9)
>>> report.class_counts, report.first_schedule
({'S3': 1}, {'S3': 1})
>>> finding = report.findings[0]
>>> finding.original_steps, len(finding.scenario.steps) - 1, finding.diverged
(32, 8, True)
>>> print(*(step.describe() for step in finding.scenario.steps[:5]), sep="; ")
produce m1 (acks=all); elect 2; produce m2 (acks=all); elect preferred; produce m3 (acks=all)

The same schedules under ``current`` with min.insync.replicas=2 and acks=all find nothing:

>>> explore("current", min_insync_replicas=2, max_lossy_crashes=0, schedules=30, seed=9).findings
()
"""

from __future__ import annotations

import bisect
import heapq
import json
import random
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from replication.checks import AnomalyFound
from replication.errors import InputError
from replication.invariants import select_invariants
from replication.modes import ALL_MODE_NAMES, get_mode
from replication.producer import ProducerSettings
from replication.scenario import (
    MAX_CLOCK_TICKS,
    MAX_PARTITIONS,
    MAX_TIME_MS,
    OptionValue,
    Scenario,
    ScenarioConfig,
    Step,
    load_scenario,
    scenario_to_dict,
    scenario_to_text,
)
from replication.sim import (
    Cluster,
    PartitionResult,
    Runner,
    ScenarioResult,
    effective_mode,
    run_scenario,
)
from replication.view import JsonObject

CLASS_NAMES: tuple[str, ...] = ("S1", "S2", "S3", "S4", "S5")
CLASS_DESCRIPTIONS: dict[str, str] = {
    "S1": "two-round HW lag: a restart cut a log back to its stale local HW",
    "S2": "lossy restart: a replica came back without its unflushed tail",
    "S3": "fast leader changes: epochs could not tell diverging logs apart",
    "S4": "unclean election: a replica outside the ISR became leader",
    "S5": "ISR shrank to one replica and that last replica was lost",
}
# the queue anomalies the explorer looks for when it runs a producer (a lost acknowledged
# write is already what the S classes are about)
ANOMALY_CLASSES: tuple[str, ...] = ("DuplicateWrite", "ReorderedWrite", "TruncatedRead")
ANOMALY_DESCRIPTIONS: dict[str, str] = {
    "DuplicateWrite": "a record sent once is in the log twice (a retry after a lost answer)",
    "ReorderedWrite": "a producer's records are in the log out of the order sent (a retry "
    "behind a later batch)",
    "TruncatedRead": "a consumer read a record that was truncated later",
}
DEFAULT_MAX_STEPS = 24
CONSUMER_ID = "c1"
PRODUCER_NAME = "p1"
# documented limits of one exploration (docs/replication-explore.md)
MAX_SCHEDULES = 10_000_000
MAX_SCHEDULE_STEPS = 1_000
MAX_SEED = 2**63 - 1


def _check_int(value: object, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InputError(
            f"must be an integer from {minimum:,} to {maximum:,}", field=field, value=value
        )
    return value


@dataclass(frozen=True, slots=True)
class ExploreSettings:
    """What one exploration runs, checked on construction.

    >>> from replication.scenario import ScenarioConfig
    >>> ExploreSettings(ScenarioConfig(brokers=(1, 2), replicas=(1, 2)), max_steps=-3)
    Traceback (most recent call last):
    ...
    replication.errors.InputError: max_steps: must be an integer from 1 to 1,000 (got -3)
    """

    config: ScenarioConfig
    acks: str | int = "all"
    schedules: int = 1000
    seed: int = 0
    max_steps: int = DEFAULT_MAX_STEPS
    max_lossy_crashes: int = 1
    max_crashes: int | None = None
    shrink_per_class: int = 1
    stop_when_found: tuple[str, ...] = ()
    invariants: tuple[str, ...] | None = None
    # draw link cuts and heals (one direction or both) as faults too; off by default, so the
    # schedules of a seed stay what they were
    link_cuts: bool = False
    # records go through a producer with these settings (retries, in-flight, idempotence)
    # instead of single produce requests, and the queue anomalies are looked for too
    producer: ProducerSettings | None = None
    # draw disk faults too: torn tails, failed log directories, DeleteRecords on the leader
    disk_faults: bool = False

    def __post_init__(self) -> None:
        acks = self.acks
        if acks in (-1, "-1") and not isinstance(acks, bool):
            acks = "all"
        if isinstance(acks, bool) or acks not in ("all", 0, 1):
            raise InputError('acks must be 0, 1, -1 or "all"', field="acks", value=self.acks)
        object.__setattr__(self, "acks", acks)
        _check_int(self.schedules, "schedules", 0, MAX_SCHEDULES)
        _check_int(self.seed, "seed", -MAX_SEED, MAX_SEED)
        _check_int(self.max_steps, "max_steps", 1, MAX_SCHEDULE_STEPS)
        _check_int(self.max_lossy_crashes, "max_lossy_crashes", 0, MAX_SCHEDULE_STEPS)
        if self.max_crashes is not None:
            _check_int(self.max_crashes, "max_crashes", 0, MAX_SCHEDULE_STEPS)
        _check_int(self.shrink_per_class, "shrink_per_class", 0, MAX_SCHEDULES)
        if self.producer is not None and not isinstance(self.producer, ProducerSettings):
            raise InputError("must be producer settings", field="producer", value=self.producer)
        for name in self.stop_when_found:
            if name not in CLASS_NAMES + ANOMALY_CLASSES:
                raise InputError("unknown violation class", field="stop_when_found", value=name)
        if not isinstance(self.link_cuts, bool):
            raise InputError("must be true or false", field="link_cuts", value=self.link_cuts)
        if not isinstance(self.disk_faults, bool):
            raise InputError("must be true or false", field="disk_faults", value=self.disk_faults)
        if self.invariants is not None:
            names = tuple(i.name for i in select_invariants(self.invariants))
            object.__setattr__(self, "invariants", names)
        # every generated step may advance the clock by a session timeout or a lag time
        config = self.config
        longest = max(config.replica_lag_time_max_ms, config.broker_session_timeout_ms) + 1
        clock_ms = (self.max_steps + 1) * longest
        if clock_ms > MAX_TIME_MS or clock_ms // config.clock_tick_ms > MAX_CLOCK_TICKS:
            raise InputError(
                f"schedules of {self.max_steps} steps could advance the clock {clock_ms:,} ms, "
                f"past the scenario limits ({MAX_TIME_MS:,} ms, {MAX_CLOCK_TICKS:,} ISR checks)",
                field="max_steps",
                value=self.max_steps,
            )


@dataclass(frozen=True, slots=True)
class Finding:
    """One violating schedule, shrunk: its class, what broke and the minimal scenario."""

    violation_class: str
    schedule: int
    violations: tuple[str, ...]
    acked_lost: tuple[str, ...]
    diverged: bool
    original_steps: int
    scenario: Scenario
    file_name: str
    # queue anomalies the shrunk scenario shows (an anomaly finding: its class is one)
    anomalies: tuple[str, ...] = ()

    @property
    def shrunk_steps(self) -> int:
        """Operations left in the shrunk scenario (its ``expect`` steps not counted)."""
        return sum(1 for step in self.scenario.steps if step.op != "expect")

    def to_json(self) -> JsonObject:
        return {
            "class": self.violation_class,
            **({"anomalies": list(self.anomalies)} if self.anomalies else {}),
            "schedule": self.schedule,
            "violations": list(self.violations),
            "acked_lost": list(self.acked_lost),
            "diverged": self.diverged,
            "original_steps": self.original_steps,
            "shrunk_steps": self.shrunk_steps,
            "file": self.file_name,
            "scenario": scenario_to_dict(self.scenario),
        }


@dataclass(frozen=True, slots=True)
class ExploreReport:
    """What an exploration found; ``to_json`` is deterministic for a given seed."""

    mode: str
    config: ScenarioConfig
    seed: int
    requested: int
    schedules: int
    max_steps: int
    max_lossy_crashes: int
    max_crashes: int | None
    acks: str | int
    violating_schedules: int
    class_counts: dict[str, int]
    first_schedule: dict[str, int]
    findings: tuple[Finding, ...]
    elapsed_seconds: float | None = None
    # the invariants checked (None: all of them)
    invariants: tuple[str, ...] | None = None
    link_cuts: bool = False
    producer: ProducerSettings | None = None
    disk_faults: bool = False
    # schedules showing each queue anomaly (only with a producer), and the first of each
    anomaly_counts: dict[str, int] = field(default_factory=dict)
    first_anomaly: dict[str, int] = field(default_factory=dict)

    @property
    def schedules_per_second(self) -> float | None:
        if not self.elapsed_seconds:
            return None
        return self.schedules / self.elapsed_seconds

    def to_json(self, *, include_timing: bool = False) -> JsonObject:
        """The report as JSON data; timing only on request, so equal seeds give equal bytes."""
        document: JsonObject = {
            "mode": self.mode,
            "config": scenario_to_dict(Scenario("config", self.config, ()))["config"],
            "seed": self.seed,
            "acks": self.acks,
            "max_steps": self.max_steps,
            "max_lossy_crashes": self.max_lossy_crashes,
            "max_crashes": self.max_crashes,
            **({"invariants": list(self.invariants)} if self.invariants is not None else {}),
            **({"link_cuts": True} if self.link_cuts else {}),
            **({"disk_faults": True} if self.disk_faults else {}),
            "requested_schedules": self.requested,
            "schedules": self.schedules,
            "violating_schedules": self.violating_schedules,
            "classes": {
                name: {
                    "count": self.class_counts[name],
                    "first_schedule": self.first_schedule[name],
                    "description": CLASS_DESCRIPTIONS[name],
                }
                for name in sorted(self.class_counts)
            },
            "findings": [finding.to_json() for finding in self.findings],
        }
        if self.producer is not None:
            document["producer"] = dict(self.producer.to_options())
            document["anomalies"] = {
                name: {
                    "count": self.anomaly_counts[name],
                    "first_schedule": self.first_anomaly[name],
                    "description": ANOMALY_DESCRIPTIONS[name],
                }
                for name in sorted(self.anomaly_counts)
            }
        if include_timing and self.elapsed_seconds is not None:
            document["elapsed_seconds"] = round(self.elapsed_seconds, 3)
            rate = self.schedules_per_second
            document["schedules_per_second"] = round(rate, 1) if rate is not None else None
        return document

    def summary(self) -> str:
        """A few human lines: what ran, what was found, where the minimal scenarios are."""
        config = self.config
        if get_mode(self.mode).commit_rule == "majority":  # no ISR: its settings do nothing
            settings = f"acks {self.acks}"
        else:
            settings = (
                f"min.insync.replicas {config.min_insync_replicas}, acks {self.acks}, unclean "
                f"election {'on' if config.unclean_leader_election else 'off'}, "
                f"ELR {'on' if config.eligible_leader_replicas else 'off'}"
            )
        lines = [
            f"{self.schedules} schedules of mode {self.mode} (seed {self.seed}, brokers "
            f"{list(config.brokers)}, {settings}"
            + (", link cuts" if self.link_cuts else "")
            + (", disk faults" if self.disk_faults else "")
            + (f", producer {_producer_text(self.producer)}" if self.producer is not None else "")
            + ")"
        ]
        rate = self.schedules_per_second
        if rate is not None:
            lines[0] += f": {rate:,.0f} schedules/s"
        if not self.class_counts:
            lines.append("no violation found")
        if self.producer is not None and not self.anomaly_counts:
            lines.append("no duplicate, reordering or truncated read found")
        for name in sorted(self.anomaly_counts):
            lines.append(
                f"{name}: {self.anomaly_counts[name]} schedules (first: "
                f"#{self.first_anomaly[name]}) - {ANOMALY_DESCRIPTIONS[name]}"
            )
        for name in sorted(self.class_counts):
            lines.append(
                f"{name}: {self.class_counts[name]} schedules (first: #{self.first_schedule[name]})"
                f" - {CLASS_DESCRIPTIONS[name]}"
            )
        for finding in self.findings:
            what = ", ".join(
                [*finding.violations, *finding.anomalies]
                + ([f"acked lost {list(finding.acked_lost)}"] if finding.acked_lost else [])
                + (["logs diverged"] if finding.diverged else [])
            )
            lines.append(
                f"  {finding.file_name}: {finding.original_steps} -> {finding.shrunk_steps}"
                f" steps; {what}"
            )
        return "\n".join(lines)


def _producer_text(settings: ProducerSettings) -> str:
    """``idempotence on, max.in.flight 5, retries 2147483647, acks all``."""
    return (
        f"idempotence {'on' if settings.idempotence else 'off'}, max.in.flight "
        f"{settings.max_in_flight}, retries {settings.retries}, acks {settings.acks}"
    )


# ------------------------------------------------------------------------- classification


def lost_acks_all(result: ScenarioResult) -> list[str]:
    """Lost records that were acknowledged with acks=all (acks=1 promises nothing more)."""
    all_acks = {
        step.target
        for step in result.scenario.steps
        if step.op == "produce" and step.option("acks", "all") == "all"
    }
    producers_all = {
        step.target
        for step in result.scenario.steps
        if step.op == "producer" and step.option("acks", "all") == "all"
    }
    all_acks |= {
        step.target
        for step in result.scenario.steps
        if step.op == "send" and step.option("producer") in producers_all
    }
    return [value for value in result.acked_lost if value in all_acks]


def anomaly_classes(anomalies: Iterable[AnomalyFound]) -> list[str]:
    """The explorer's anomaly classes among a run's queue anomalies."""
    names = {found.anomaly for found in anomalies}
    return [name for name in ANOMALY_CLASSES if name in names]


def is_violation(result: ScenarioResult) -> bool:
    return bool(result.violations or lost_acks_all(result) or result.diverged)


def classify(result: ScenarioResult) -> str | None:
    """The S-class of a run (see the module docstring), or None when nothing broke. With
    several partitions: the class of the first partition that broke."""
    if result.partitions:
        for partition in result.partitions:
            found = classify(_one_partition(result, partition))
            if found is not None:
                return found
        return None
    if not is_violation(result):
        return None
    steps = result.scenario.steps
    isr_after = {entry.step: entry.isr for entry in result.timeline}
    initial_isr = result.scenario.config.replicas
    isr_before: dict[int, tuple[int, ...]] = {}
    current = initial_isr
    for index in range(len(steps)):
        isr_before[index] = current
        current = isr_after.get(index, current)

    lost = set(lost_acks_all(result))
    acked_alone: set[str] = set()
    seen: set[str] = set()
    for entry in result.timeline:
        newly = [value for value in entry.acked if value not in seen]
        seen.update(newly)
        if len(entry.isr) == 1:
            acked_alone.update(newly)
    lossy_crashes = [
        (index, step.target)
        for index, step in enumerate(steps)
        if step.op == "crash" and step.option("unflushed") in ("lose", "torn")
    ]
    if lost & acked_alone or any(isr_before[i] == (broker,) for i, broker in lossy_crashes):
        return "S5"
    if result.final.unclean_elections:
        return "S4"
    if lossy_crashes:
        return "S2"
    if _restart_truncated(result):
        return "S1"
    return "S3"


def _one_partition(result: ScenarioResult, partition: PartitionResult) -> ScenarioResult:
    """One partition of a several-partition result, as if it were the only one."""
    config = replace(
        result.scenario.config,
        replicas=result.scenario.config.partition_replicas[partition.partition],
        partitions=None,
    )
    return replace(
        result,
        final=partition.final,
        violations=partition.violations,
        timeline=partition.timeline,
        scenario=replace(result.scenario, config=config),
        partitions=(),
    )


def _restart_truncated(result: ScenarioResult) -> bool:
    """Did a restart itself cut a replica's log (truncation to a stale local HW)?"""
    leo_before: dict[int, int] = {broker_id: 0 for broker_id in result.scenario.config.replicas}
    for entry in result.timeline:
        step = result.scenario.steps[entry.step]
        if step.op == "restart":
            for replica in entry.replicas:
                if (
                    replica.broker_id == step.target
                    and replica.log_end_offset < leo_before[replica.broker_id]
                ):
                    return True
        leo_before = {replica.broker_id: replica.log_end_offset for replica in entry.replicas}
    return False


# ------------------------------------------------------------------------- schedules


@dataclass(slots=True)
class _Generator:
    """Builds one random schedule against a live cluster (so every step makes sense now)."""

    config: ScenarioConfig
    rng: random.Random
    acks: str | int
    max_lossy_crashes: int
    max_crashes: int | None = None
    invariants: tuple[str, ...] | None = None
    link_cuts: bool = False
    producer: ProducerSettings | None = None
    disk_faults: bool = False
    runner: Runner = field(init=False)
    steps: list[Step] = field(default_factory=list)
    lossy_crashes: int = 0
    crashes: int = 0
    produced: int = 0
    partitions: int = field(init=False, default=1)

    def __post_init__(self) -> None:
        self.runner = Runner(
            self.config, effective_mode(self.config), invariants=select_invariants(self.invariants)
        )
        # several partitions: one-partition steps name a partition (drawn only then, so the
        # schedules of one partition stay what they were)
        self.partitions = len(self.config.partition_replicas)

    def _partition(self) -> dict[str, int]:
        """A random partition for a one-partition step, when there is more than one."""
        if self.partitions == 1:
            return {}
        return {"partition": self.rng.randrange(self.partitions)}

    @property
    def cluster(self) -> Cluster:
        return self.runner.cluster

    def run(self, max_steps: int) -> list[JsonObject]:
        if self.producer is not None:
            # declaring the producer changes nothing the invariants read: applied unchecked
            options = self.producer.to_options()
            if self.partitions > 1:
                options["partition"] = 0
            declare = _step("producer", PRODUCER_NAME, **options)
            self.steps.append(declare)
            if self.runner.partitioned is not None:
                self.runner.partitioned.apply(declare)
            else:
                self.cluster.apply(declare)
        for _ in range(max_steps):
            self._do(self._random_step())
        self._settle()
        return [step.to_dict() for step in self.steps]

    def suspicious(self) -> bool:
        """Did the run break an invariant, lose an acknowledged record or diverge?"""
        return self.runner.suspicious()

    def anomalies(self) -> list[str]:
        """With a producer: the anomaly classes the run shows (duplicates, reorderings,
        truncated reads); the same a replay's result shows."""
        if self.producer is None:
            return []
        return anomaly_classes(self.cluster.anomalies())

    def _do(self, step: Step) -> None:
        # the runner of run_scenario, so the verdict here is the verdict of a replay
        self.steps.append(step)
        self.runner.step(step)

    def _online(self) -> list[int]:
        return [b for b, broker in self.cluster.brokers.items() if broker.online]

    def _offline(self) -> list[int]:
        return [b for b, broker in self.cluster.brokers.items() if not broker.online]

    def _dir_failed(self) -> list[int]:
        return [b for b, broker in self.cluster.brokers.items() if broker.log_dir_failed]

    def _isolated(self) -> list[int]:
        return [b for b, broker in self.cluster.brokers.items() if broker.isolated]

    def _leader_or_random(self, candidates: list[int]) -> int:
        leader = self.cluster.controller.registration.leader
        if leader in candidates and self.rng.random() < 0.5:
            return leader
        return self.rng.choice(candidates)

    def _random_step(self) -> Step:
        rng = self.rng
        config = self.config
        online, offline, isolated = self._online(), self._offline(), self._isolated()
        choices: list[tuple[float, str]] = [(4.0, "produce"), (6.0, "fetch"), (1.2, "advance")]
        choices += [(1.0, "flush"), (1.0, "elect"), (0.4, "consume")]
        if online:
            choices.append((0.2, "shutdown"))
            if self.max_crashes is None or self.crashes < self.max_crashes:
                choices.append((0.8, "crash"))
            if not isolated:
                choices.append((0.4, "isolate"))
        if offline:
            choices.append((2.0, "restart"))
        if isolated:
            choices.append((1.5, "heal"))
        if self.link_cuts:
            # only with the setting on: without it the random stream is what it always was
            choices.append((0.6, "cut"))
            if self.cluster.cuts:
                choices.append((1.5, "heal_link"))
        if self.disk_faults:
            # the same: drawn only with the setting on
            choices.append((0.4, "delete_records"))
            if [b for b in online if not self.cluster.brokers[b].log_dir_failed]:
                choices.append((0.3, "fail_log_dir"))
            if self._dir_failed():
                choices.append((1.5, "restart_dir"))
        total = sum(weight for weight, _ in choices)
        pick = rng.random() * total
        kind = choices[-1][1]
        for weight, name in choices:
            pick -= weight
            if pick < 0:
                kind = name
                break
        replicas = list(config.replicas)
        if kind == "produce":
            self.produced += 1
            if self.producer is not None:
                return _step("send", f"m{self.produced}", producer=PRODUCER_NAME)
            if self.partitions == 1:
                return _step("produce", f"m{self.produced}", acks=self.acks)
            return _step("produce", f"m{self.produced}", acks=self.acks, **self._partition())
        if kind == "fetch":
            broker = rng.choice(replicas)
            if rng.random() < 0.15:
                return _step("fetch", broker, response="lost")
            return _step("fetch", broker)
        if kind == "advance":
            durations = (
                1000,
                config.replica_lag_time_max_ms // 2 + 1,
                config.replica_lag_time_max_ms + 1,
                config.broker_session_timeout_ms + 1,
            )
            return _step("advance_ms", rng.choice(durations))
        if kind == "flush":
            return _step("flush", rng.choice(online or replicas))
        if kind == "consume":
            if self.partitions == 1:
                return _step("consume", CONSUMER_ID)
            return _step("consume", CONSUMER_ID, **self._partition())
        if kind == "crash":
            self.crashes += 1
            target = self._leader_or_random(online)
            options: dict[str, OptionValue] = {}
            if self.lossy_crashes < self.max_lossy_crashes and rng.random() < 0.5:
                self.lossy_crashes += 1
                options["unflushed"] = "lose"
                if self.disk_faults and rng.random() < 0.5:
                    options["unflushed"] = "torn"
            if rng.random() < 0.4:
                options["detected"] = True
            return _step("crash", target, **options)
        if kind == "shutdown":
            return _step("shutdown", self._leader_or_random(online))
        if kind == "isolate":
            return _step("isolate", self._leader_or_random(online))
        if kind == "restart":
            return _step("restart", rng.choice(offline))
        if kind == "heal":
            return _step("heal", rng.choice(isolated))
        if kind == "cut":
            return self._random_cut()
        if kind == "heal_link":
            link = rng.choice(sorted(self.cluster.cuts, key=str))
            return _link_step("heal", link[0], link[1], both=False)
        if kind == "delete_records":
            return _step(
                "delete_records", rng.randint(0, max(self.produced, 1)), **self._partition()
            )
        if kind == "fail_log_dir":
            working = [b for b in online if not self.cluster.brokers[b].log_dir_failed]
            return _step("fail_log_dir", self._leader_or_random(working))
        if kind == "restart_dir":
            return _step("restart", rng.choice(self._dir_failed()))
        if self.partitions == 1:
            return _step("elect", self._election_target())
        partition = self._partition()
        elected = self._election_target(partition["partition"])
        if not isinstance(elected, int):
            partition = {}  # auto, preferred and unclean: every partition
        return _step("elect", elected, **partition)

    def _random_cut(self) -> Step:
        """One link: leader to a follower, a broker to the controller, or clients to the
        leader, in one direction or both."""
        rng = self.rng
        replicas = list(self.config.replicas)
        broker = self._leader_or_random(replicas)
        roll = rng.random()
        other: int | str
        if roll < 0.5:
            others = [r for r in replicas if r != broker]
            other = rng.choice(others) if others else "controller"
        elif roll < 0.8:
            other = "controller"
        else:
            other = "clients"
        source: int | str = broker
        target: int | str = other
        if rng.random() < 0.5:
            source, target = other, broker
        return _link_step("cut", source, target, both=rng.random() < 0.4)

    def _election_target(self, partition: int = 0) -> str | int:
        rng = self.rng
        registration = self.cluster.controller.registrations[partition]
        # forcing a replica outside the ISR is an unclean election: only where it is allowed
        unclean = self.config.unclean_leader_election
        pool = list(self.config.replicas if unclean else registration.isr)
        roll = rng.random()
        if roll < 0.5 and pool:
            return rng.choice(pool)
        if roll < 0.7:
            return "preferred"
        if roll < 0.8 and self.config.unclean_leader_election:
            return "unclean"
        return "auto"

    def _settle(self) -> None:
        """Heal and restart everyone, elect, let followers catch up and read once."""
        for source, target in sorted(self.cluster.cuts, key=str):
            if (source, target) in self.cluster.cuts:
                self._do(_link_step("heal", source, target, both=False))
        for broker_id in self._isolated():
            self._do(_step("heal", broker_id))
        for broker_id in self._offline() + self._dir_failed():
            self._do(_step("restart", broker_id))
        self._do(_step("elect", "auto"))
        for _ in range(3):
            for broker_id in self.config.replicas:
                self._do(_step("fetch", broker_id))
        producer = self.producer
        if producer is not None and any(c.busy for c in self.cluster.producers.values()):
            # let lost requests time out and their first retries land (a duplicate or a
            # reordering is in the leader's log from then on)
            wait = producer.request_timeout_ms + producer.retry_backoff_max_ms + 1
            self._do(_step("advance_ms", wait))
        if self.partitions == 1:
            self._do(_step("consume", CONSUMER_ID))
        for partition in range(self.partitions if self.partitions > 1 else 0):
            self._do(_step("consume", CONSUMER_ID, partition=partition))


def _step(op: str, target: int | str, **options: OptionValue) -> Step:
    """A generated step: built valid for the live cluster, so it needs no parsing."""
    return Step(op, target, tuple(options.items()))


def _link_step(op: str, source: int | str, target: int | str, *, both: bool) -> Step:
    """``cut`` or ``heal`` of one link, as ``Step.from_dict`` would parse it."""
    return Step(op, (("both", both), ("from", source), ("to", target)))


def generate_schedule(
    config: ScenarioConfig,
    seed: int,
    index: int,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    acks: str | int = "all",
    max_lossy_crashes: int = 1,
    max_crashes: int | None = None,
    link_cuts: bool = False,
    producer: ProducerSettings | None = None,
    disk_faults: bool = False,
) -> list[JsonObject]:
    """Schedule ``index`` of the exploration with ``seed``, as scenario step dicts."""
    return _generate(
        config,
        seed,
        index,
        max_steps,
        acks,
        max_lossy_crashes,
        max_crashes,
        link_cuts=link_cuts,
        producer=producer,
        disk_faults=disk_faults,
    )[0]


def _generate(
    config: ScenarioConfig,
    seed: int,
    index: int,
    max_steps: int,
    acks: str | int,
    max_lossy_crashes: int,
    max_crashes: int | None,
    invariants: tuple[str, ...] | None = None,
    *,
    link_cuts: bool = False,
    producer: ProducerSettings | None = None,
    disk_faults: bool = False,
) -> tuple[list[JsonObject], bool, list[str]]:
    """A schedule, whether running it broke anything and the anomaly classes it shows
    (checked while generating)."""
    # string seeds hash the same on every platform and Python run
    rng = random.Random(f"ktk-explore/{seed}/{index}")
    generator = _Generator(
        config,
        rng,
        acks,
        max_lossy_crashes,
        max_crashes,
        invariants,
        link_cuts=link_cuts,
        producer=producer,
        disk_faults=disk_faults,
    )
    steps = generator.run(max_steps)
    return steps, generator.suspicious(), generator.anomalies()


def build_scenario(
    name: str,
    config: ScenarioConfig,
    steps: Iterable[JsonObject],
    invariants: tuple[str, ...] | None = None,
) -> Scenario:
    """A validated scenario from a config and step dicts in the file format."""
    document = scenario_to_dict(Scenario(name, config, (), invariants=invariants))
    document["steps"] = list(steps)
    return load_scenario(document)


# ------------------------------------------------------------------------- shrinking


def shrink(steps: list[JsonObject], holds: Callable[[list[JsonObject]], bool]) -> list[JsonObject]:
    """The smallest schedule found for which ``holds`` is still true (delta debugging).

    ``holds(steps)`` must be true on entry. Drops chunks (ddmin), then single steps, then
    simplifies options, repeating until nothing changes.

    >>> def has_crash(steps): return any("crash" in step for step in steps)
    >>> shrink([{"fetch": 1}, {"crash": 2, "unflushed": "lose"}, {"fetch": 1}], has_crash)
    [{'crash': 2}]
    """
    current = list(steps)
    while True:
        before = current
        current = _ddmin(current, holds)
        current = _simplify(current, holds)
        if current == before:
            return _renumber(current, holds)


def _ddmin(steps: list[JsonObject], holds: Callable[[list[JsonObject]], bool]) -> list[JsonObject]:
    chunks = 2
    while len(steps) >= 2:
        size = -(-len(steps) // chunks)
        reduced = False
        for start in range(0, len(steps), size):
            candidate = steps[:start] + steps[start + size :]
            if candidate and holds(candidate):
                steps, chunks, reduced = candidate, max(chunks - 1, 2), True
                break
        if not reduced:
            if chunks >= len(steps):
                break
            chunks = min(chunks * 2, len(steps))
    return steps


def _simplify(
    steps: list[JsonObject], holds: Callable[[list[JsonObject]], bool]
) -> list[JsonObject]:
    for index in range(len(steps)):
        for simpler in _simpler_versions(steps[index]):
            candidate = [*steps[:index], simpler, *steps[index + 1 :]]
            if holds(candidate):
                steps = candidate
                break
    return steps


def _simpler_versions(step: JsonObject) -> list[JsonObject]:
    simpler: list[JsonObject] = []
    if step.get("unflushed") in ("lose", "torn"):
        simpler.append({key: value for key, value in step.items() if key != "unflushed"})
    if step.get("detected"):
        simpler.append({key: value for key, value in step.items() if key != "detected"})
    if step.get("response") == "lost":
        simpler.append({key: value for key, value in step.items() if key != "response"})
    if "elect" in step and step["elect"] != "auto":
        simpler.append({"elect": "auto"})
    duration = step.get("advance_ms")
    if isinstance(duration, int) and duration > 1:
        simpler.append({"advance_ms": duration // 2})
    return simpler


def _renumber(
    steps: list[JsonObject], holds: Callable[[list[JsonObject]], bool]
) -> list[JsonObject]:
    """Record values m1, m2, ... in the order they are produced (kept only if it still holds)."""
    names: dict[str, str] = {}
    renamed = []
    for step in steps:
        for op in ("produce", "send"):
            value = step.get(op)
            if isinstance(value, str):
                names.setdefault(value, f"m{len(names) + 1}")
                step = {**step, op: names[value]}
        renamed.append(step)
    if renamed != steps and holds(renamed):
        return renamed
    return steps


# ------------------------------------------------------------------------- exploring


# class, divergence and acknowledged loss of a violating schedule: what shrinking keeps
Signature = tuple[str, bool, bool]


def explore_settings(
    mode: str = "current",
    *,
    brokers: Collection[int] = (1, 2, 3),
    replicas: Collection[int] | None = None,
    min_insync_replicas: int = 1,
    unclean_leader_election: bool = False,
    eligible_leader_replicas: bool = False,
    replica_lag_time_max_ms: int = 30000,
    broker_session_timeout_ms: int = 9000,
    acks: str | int = "all",
    schedules: int = 1000,
    seed: int = 0,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_lossy_crashes: int | None = None,
    max_crashes: int | None = None,
    shrink_per_class: int = 1,
    stop_when_found: Collection[str] = (),
    invariants: Collection[str] | None = None,
    link_cuts: bool = False,
    producer: ProducerSettings | None = None,
    disk_faults: bool = False,
    partitions: int = 1,
) -> ExploreSettings:
    """The checked settings of an exploration, from :func:`explore`'s arguments: what every
    engine running it (in process, or spread over Spark tasks) is given.

    >>> explore_settings("kip-101", brokers=(1, 2), min_insync_replicas=2).max_lossy_crashes
    1
    >>> explore_settings("kip-999")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    replication.errors.InputError: mode: unknown mode; expected one of ... (got 'kip-999')
    """
    if mode not in ALL_MODE_NAMES:
        raise InputError(
            f"unknown mode; expected one of {', '.join(ALL_MODE_NAMES)}", field="mode", value=mode
        )
    replica_ids = tuple(replicas) if replicas is not None else tuple(brokers)
    _check_int(partitions, "partitions", 1, MAX_PARTITIONS)
    document: dict[str, object] = {
        "brokers": list(brokers),
        "replicas": list(replica_ids),
        "mode": mode,
        "min_insync_replicas": min_insync_replicas,
        "unclean_leader_election": unclean_leader_election,
        "eligible_leader_replicas": eligible_leader_replicas,
        "replica_lag_time_max_ms": replica_lag_time_max_ms,
        "broker_session_timeout_ms": broker_session_timeout_ms,
    }
    if partitions > 1:
        # the same replicas for each partition, the preferred leader rotating over them
        del document["replicas"]
        document["partitions"] = [
            list(replica_ids[index % len(replica_ids) :] + replica_ids[: index % len(replica_ids)])
            for index in range(partitions)
        ]
    config = load_scenario({"name": "explore", "config": document, "steps": []}).config
    if max_lossy_crashes is None and isinstance(min_insync_replicas, int):
        max_lossy_crashes = max(1, min_insync_replicas - 1)
    return ExploreSettings(
        config=config,
        acks=acks,
        schedules=schedules,
        seed=seed,
        max_steps=max_steps,
        max_lossy_crashes=max_lossy_crashes,
        max_crashes=max_crashes,
        shrink_per_class=shrink_per_class,
        stop_when_found=tuple(stop_when_found),
        invariants=None if invariants is None else tuple(invariants),
        link_cuts=link_cuts,
        producer=producer,
        disk_faults=disk_faults,
    )


def explore(
    mode: str = "current",
    *,
    brokers: Collection[int] = (1, 2, 3),
    replicas: Collection[int] | None = None,
    min_insync_replicas: int = 1,
    unclean_leader_election: bool = False,
    eligible_leader_replicas: bool = False,
    replica_lag_time_max_ms: int = 30000,
    broker_session_timeout_ms: int = 9000,
    acks: str | int = "all",
    schedules: int = 1000,
    seed: int = 0,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_lossy_crashes: int | None = None,
    max_crashes: int | None = None,
    shrink_per_class: int = 1,
    stop_when_found: Collection[str] = (),
    invariants: Collection[str] | None = None,
    link_cuts: bool = False,
    producer: ProducerSettings | None = None,
    disk_faults: bool = False,
    partitions: int = 1,
    out_dir: str | Path | None = None,
    timer: Callable[[], float] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExploreReport:
    """Run ``schedules`` random fault schedules under ``mode``; classify and shrink violations.

    The first ``shrink_per_class`` violating schedules of each class and kind (with or without
    divergence, with or without acknowledged loss) are shrunk; all are counted.
    ``stop_when_found`` ends the search once every named class was seen. ``invariants`` names
    the invariants to check (default: all); the shrunk scenarios name them too. ``out_dir`` receives
    the shrunk scenarios as ``<class>-<n>.json``. ``link_cuts`` adds link cuts and heals to the
    faults drawn (off: the same schedules as without the setting). ``producer`` sends the
    records through a producer with those settings (``producer`` and ``send`` steps) and looks
    for duplicates, reorderings and truncated reads too: each is counted and shrunk like a
    class, the shrunk scenario expecting the anomaly. ``disk_faults`` draws torn tails (as one
    kind of lossy crash), failed log directories (and restarts that bring them back) and
    DeleteRecords on the leader. ``timer`` (e.g.
    ``time.perf_counter``) is read at start and end only, to report schedules per second.
    ``progress(done, total)`` is called every 100 schedules.

    This is :func:`scan_schedules` over every schedule followed by :func:`finish_exploration`:
    an engine that scans contiguous ranges elsewhere (``spark_jobs/explore_schedules.py``) and
    finishes with their scans gets the same report.
    """
    settings = explore_settings(
        mode,
        brokers=brokers,
        replicas=replicas,
        min_insync_replicas=min_insync_replicas,
        unclean_leader_election=unclean_leader_election,
        eligible_leader_replicas=eligible_leader_replicas,
        replica_lag_time_max_ms=replica_lag_time_max_ms,
        broker_session_timeout_ms=broker_session_timeout_ms,
        acks=acks,
        schedules=schedules,
        seed=seed,
        max_steps=max_steps,
        max_lossy_crashes=max_lossy_crashes,
        max_crashes=max_crashes,
        shrink_per_class=shrink_per_class,
        stop_when_found=stop_when_found,
        invariants=invariants,
        link_cuts=link_cuts,
        producer=producer,
        disk_faults=disk_faults,
        partitions=partitions,
    )
    started = timer() if timer is not None else None
    scan = scan_schedules(settings, 0, settings.schedules, progress=progress)
    report = finish_exploration(settings, [scan])
    if timer is not None and started is not None:
        report = replace(report, elapsed_seconds=timer() - started)
    if out_dir is not None:
        write_scenarios(report, out_dir)
    return report


@dataclass(frozen=True, slots=True)
class ScheduleScan:
    """What schedules ``start`` to ``end`` (exclusive) showed, before any shrinking: for each
    signature (class, diverged, acknowledged loss), the indexes of its violating schedules in
    order, and of each queue anomaly (with a producer), the schedules showing it. ``stop`` is
    one past the last schedule run: ``end``, unless the settings' ``stop_when_found`` classes
    were all seen earlier in the range.

    Small next to the work that made it (one index per violating schedule), so a task of a
    distributed engine returns it whole.
    """

    start: int
    end: int
    stop: int
    violating: dict[Signature, tuple[int, ...]]
    # with a producer: the schedules showing each queue anomaly, in order
    anomalies: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def class_counts(self) -> dict[str, int]:
        """Violating schedules of each class in the range."""
        counts: dict[str, int] = {}
        for (violation_class, _, _), indexes in sorted(self.violating.items()):
            counts[violation_class] = counts.get(violation_class, 0) + len(indexes)
        return counts


def scan_schedules(
    settings: ExploreSettings,
    start: int,
    end: int,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> ScheduleScan:
    """Generate and run schedules ``start`` to ``end`` (exclusive) of ``settings``' seed and
    sort the violating ones by signature; nothing is shrunk. Schedule ``i`` is the same
    whichever range holds it, so scans of contiguous ranges, in any process, add up to the scan
    of their union. ``progress(done, total)`` is called every 100 schedules of the range.

    >>> settings = explore_settings("kip-101", brokers=(1, 2), max_lossy_crashes=0, seed=9)
    >>> scan = scan_schedules(settings, 0, 60)
    >>> scan.violating, scan.stop
    ({('S3', True, False): (1, 6, 46)}, 60)
    >>> scan_schedules(settings, 30, 60).violating
    {('S3', True, False): (46,)}
    """
    _check_int(start, "start", 0, MAX_SCHEDULES)
    _check_int(end, "end", start, MAX_SCHEDULES)
    config = settings.config
    wanted = settings.stop_when_found
    found: dict[Signature, list[int]] = {}
    shown: dict[str, list[int]] = {}
    seen: dict[str, int] = {}
    done = start
    for index in range(start, end):
        steps, suspicious, anomalies = _schedule(settings, index)
        done = index + 1
        if progress is not None and (done - start) % 100 == 0:
            progress(done - start, end - start)
        for name in anomalies:
            shown.setdefault(name, []).append(index)
            seen.setdefault(name, index)
        if suspicious:
            result = run_scenario(
                build_scenario(f"schedule-{index}", config, steps, settings.invariants)
            )
            violation_class = classify(result)
            if violation_class is not None:
                found.setdefault(_signature(violation_class, result), []).append(index)
                seen.setdefault(violation_class, index)
        # the search stops after the whole schedule that showed the last wanted class
        if _all_found(wanted, seen):
            break
    return ScheduleScan(
        start,
        end,
        done,
        {key: tuple(found[key]) for key in sorted(found)},
        {name: tuple(shown[name]) for name in ANOMALY_CLASSES if name in shown},
    )


def finish_exploration(settings: ExploreSettings, scans: Sequence[ScheduleScan]) -> ExploreReport:
    """The report of an exploration from the scans of contiguous ranges covering schedules 0
    to ``settings.schedules``, in order: counts cut at the schedule where ``stop_when_found``
    ended the search, and the first ``shrink_per_class`` schedules of each signature and of
    each queue anomaly shrunk, in schedule order, exactly as one pass over all schedules does (a
    shrunk scenario equal to an earlier one is dropped and the next schedule of its kind shrunk
    instead). Each schedule to shrink is generated again from the seed and its index.

    >>> settings = explore_settings(
    ...     "kip-101", brokers=(1, 2), max_lossy_crashes=0, schedules=60, seed=9
    ... )
    >>> halves = [scan_schedules(settings, 0, 30), scan_schedules(settings, 30, 60)]
    >>> report = finish_exploration(settings, halves)
    >>> report.class_counts, report.first_schedule, [f.file_name for f in report.findings]
    ({'S3': 3}, {'S3': 1}, ['S3-1.json'])
    """
    expected = 0
    for scan in scans:
        if scan.start != expected or not scan.start <= scan.stop <= scan.end:
            raise ValueError(
                f"scans must cover schedules 0 to {settings.schedules} in order: a scan of "
                f"{scan.start}-{scan.end} (run to {scan.stop}) follows schedule {expected}"
            )
        expected = scan.end
    if expected != settings.schedules:
        raise ValueError(f"scans cover schedules 0 to {expected}, not to {settings.schedules}")
    by_signature: dict[Signature, list[int]] = {}
    by_anomaly: dict[str, list[int]] = {}
    for scan in scans:
        for signature, found in scan.violating.items():
            by_signature.setdefault(signature, []).extend(found)
        for name, showing in scan.anomalies.items():
            by_anomaly.setdefault(name, []).extend(showing)
    first_schedule: dict[str, int] = {}
    for (violation_class, _, _), all_found in by_signature.items():
        if all_found:
            first = min(first_schedule.get(violation_class, all_found[0]), all_found[0])
            first_schedule[violation_class] = first
    first_seen = {
        **first_schedule,
        **{name: showing[0] for name, showing in by_anomaly.items() if showing},
    }
    wanted = settings.stop_when_found
    if _all_found(wanted, first_seen):
        # the search ends at the schedule that showed the last wanted class
        done = max(first_seen[name] for name in wanted) + 1
    else:
        done = scans[-1].stop if scans else 0
    anomalies_kept = {
        name: showing[: bisect.bisect_left(showing, done)]
        for name, showing in by_anomaly.items()
        if showing and showing[0] < done
    }
    kept = {
        signature: indexes[: bisect.bisect_left(indexes, done)]
        for signature, indexes in sorted(by_signature.items())
        if indexes and indexes[0] < done
    }
    class_counts: dict[str, int] = {}
    for (violation_class, _, _), counted in kept.items():
        class_counts[violation_class] = class_counts.get(violation_class, 0) + len(counted)
    first_schedule = {name: first_schedule[name] for name in class_counts}
    findings = _shrink_findings(settings, kept, anomalies_kept)
    return ExploreReport(
        mode=settings.config.mode,
        config=settings.config,
        seed=settings.seed,
        requested=settings.schedules,
        schedules=done,
        max_steps=settings.max_steps,
        max_lossy_crashes=settings.max_lossy_crashes,
        max_crashes=settings.max_crashes,
        acks=settings.acks,
        violating_schedules=sum(len(counted) for counted in kept.values()),
        class_counts=dict(sorted(class_counts.items())),
        first_schedule=dict(sorted(first_schedule.items())),
        findings=findings,
        invariants=settings.invariants,
        link_cuts=settings.link_cuts,
        producer=settings.producer,
        disk_faults=settings.disk_faults,
        anomaly_counts={n: len(anomalies_kept[n]) for n in sorted(anomalies_kept)},
        first_anomaly={n: anomalies_kept[n][0] for n in sorted(anomalies_kept)},
    )


def _schedule(settings: ExploreSettings, index: int) -> tuple[list[JsonObject], bool, list[str]]:
    return _generate(
        settings.config,
        settings.seed,
        index,
        settings.max_steps,
        settings.acks,
        settings.max_lossy_crashes,
        settings.max_crashes,
        settings.invariants,
        link_cuts=settings.link_cuts,
        producer=settings.producer,
        disk_faults=settings.disk_faults,
    )


def _shrink_findings(
    settings: ExploreSettings,
    violating: dict[Signature, list[int]],
    anomalies: dict[str, list[int]],
) -> tuple[Finding, ...]:
    """Shrink the first ``shrink_per_class`` schedules of each signature and of each queue
    anomaly, in schedule order (within a schedule: its anomalies, then its violation)."""
    limit = settings.shrink_per_class
    findings: list[Finding] = []
    shrunk: dict[Signature | str, int] = {}
    shrunk_seen: set[str] = set()
    keys: list[Signature | str] = [*violating, *anomalies]
    # within a schedule its anomalies come first (kind 0, in ANOMALY_CLASSES order)
    events: list[list[tuple[int, int, Signature | int]]] = [
        [(index, 1, signature) for index in indexes] for signature, indexes in violating.items()
    ]
    events += [
        [(index, 0, ANOMALY_CLASSES.index(name)) for index in showing]
        for name, showing in anomalies.items()
    ]
    merged = heapq.merge(*events)
    for index, _, what in merged:
        if all(shrunk.get(key, 0) >= limit for key in keys):
            break
        key = ANOMALY_CLASSES[what] if isinstance(what, int) else what
        if shrunk.get(key, 0) >= limit:
            continue
        steps, _, _ = _schedule(settings, index)
        if isinstance(key, str):
            number = shrunk.get(key, 0) + 1
            finding = _shrink_anomaly(
                settings.config, steps, index, key, number, settings.invariants
            )
        else:
            number = sum(1 for f in findings if f.violation_class == key[0]) + 1
            finding = _shrink_finding(
                settings.config, steps, index, key, number, settings.invariants
            )
        text = json.dumps(scenario_to_dict(finding.scenario)["steps"])
        if text not in shrunk_seen:
            shrunk_seen.add(text)
            findings.append(finding)
            shrunk[key] = shrunk.get(key, 0) + 1
    return tuple(findings)


def _signature(violation_class: str, result: ScenarioResult) -> Signature:
    """Class, divergence and loss: shrinking keeps all three (a divergence stays one)."""
    return violation_class, result.diverged, bool(lost_acks_all(result))


def _all_found(wanted: Collection[str], class_counts: dict[str, int]) -> bool:
    return bool(wanted) and all(name in class_counts for name in wanted)


def _shrink_finding(
    config: ScenarioConfig,
    steps: list[JsonObject],
    index: int,
    signature: Signature,
    number: int,
    invariants: tuple[str, ...] | None = None,
) -> Finding:
    violation_class = signature[0]

    def same_class(candidate: list[JsonObject]) -> bool:
        try:
            scenario = build_scenario("candidate", config, candidate, invariants)
        except InputError:
            return False
        result = run_scenario(scenario)
        found = classify(result)
        return found is not None and _signature(found, result) == signature

    minimal = shrink(steps, same_class)
    name = f"{violation_class}-{number}"
    result = run_scenario(build_scenario(name, config, minimal, invariants))
    expects: list[JsonObject] = []
    for partition in result.partitions or (None,):
        one = result if partition is None else _one_partition(result, partition)
        expect: JsonObject = {
            "acked_lost": list(one.acked_lost),
            "diverged": one.diverged,
            "violations": one.violation_names(),
        }
        if one.final.unclean_elections:
            expect["unclean_elections"] = one.final.unclean_elections
        step: JsonObject = {"expect": expect}
        if partition is not None:
            step["partition"] = partition.partition
        expects.append(step)
    scenario = build_scenario(
        f"{name.lower()}-{config.mode}", config, [*minimal, *expects], invariants
    )
    return Finding(
        violation_class=violation_class,
        schedule=index,
        violations=tuple(result.violation_names()),
        acked_lost=tuple(lost_acks_all(result)),
        diverged=result.diverged,
        original_steps=len(steps),
        scenario=scenario,
        file_name=f"{name}.json",
    )


def _shrink_anomaly(
    config: ScenarioConfig,
    steps: list[JsonObject],
    index: int,
    anomaly: str,
    number: int,
    invariants: tuple[str, ...] | None = None,
) -> Finding:
    """Shrink a schedule for as long as it still shows ``anomaly``; the minimal scenario
    expects it (and whatever else the minimal run shows)."""

    def shows(candidate: list[JsonObject]) -> bool:
        try:
            scenario = build_scenario("candidate", config, candidate, invariants)
        except InputError:
            return False
        return anomaly in anomaly_classes(run_scenario(scenario).final.anomalies)

    minimal = shrink(steps, shows)
    name = f"{anomaly}-{number}"
    result = run_scenario(build_scenario(name, config, minimal, invariants))
    shown = tuple(sorted(found.anomaly for found in result.final.anomalies))
    # the producer writes to partition 0 (with several partitions: its expect names it)
    first = _one_partition(result, result.partitions[0]) if result.partitions else result
    expect: JsonObject = {
        "anomalies": list(shown),
        "acked_lost": list(first.acked_lost),
        "violations": first.violation_names(),
    }
    step: JsonObject = {"expect": expect}
    if result.partitions:
        step["partition"] = 0
    scenario = build_scenario(f"{name.lower()}-{config.mode}", config, [*minimal, step], invariants)
    return Finding(
        violation_class=anomaly,
        schedule=index,
        violations=tuple(result.violation_names()),
        acked_lost=tuple(lost_acks_all(result)),
        diverged=result.diverged,
        original_steps=len(steps),
        scenario=scenario,
        file_name=f"{name}.json",
        anomalies=shown,
    )


def write_scenarios(report: ExploreReport, out_dir: str | Path) -> list[Path]:
    """Write every finding's minimal scenario to ``out_dir/<class>-<n>.json``."""
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for finding in report.findings:
        path = directory / finding.file_name
        path.write_text(scenario_to_text(finding.scenario), encoding="utf-8")
        written.append(path)
    return written
