"""The replication scenario file (JSON or YAML): a cluster config and a list of steps, each one
operation on the simulated cluster, plus ``expect`` steps that state the verdict.

>>> scenario = load_scenario('''
... name: tiny
... config: {brokers: [1, 2], replicas: [1, 2]}
... steps:
...   - {produce: m1, acks: all}
...   - {fetch: 2}
...   - {expect: {acked: []}}
... ''')
>>> [step.op for step in scenario.steps], scenario.config.mode
(['produce', 'fetch', 'expect'], 'current')
>>> load_scenario(scenario_to_dict(scenario)) == scenario
True

Invalid files raise ``ScenarioError`` naming the step index and the field:

>>> load_scenario('{"name": "x", "config": {"brokers": [1], "replicas": [1]},'
...               ' "steps": [{"produce": "m", "acks": 2}]}')
Traceback (most recent call last):
...
replication.errors.ScenarioError: step 0: acks: acks must be 0, 1, -1 or "all" (got 2)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeAlias, cast

import yaml

from replication.checks import ANOMALY_NAMES
from replication.errors import ScenarioError
from replication.invariants import INVARIANT_NAMES
from replication.modes import ALL_MODE_NAMES
from replication.producer import SETTING_FIELDS, ProducerSettings
from replication.view import JsonObject, JsonValue

ELECT_KINDS = ("auto", "preferred", "unclean")
# who decides leaders and ISRs: the simulator's built-in controller, or the same decisions
# written to a KRaft metadata log and read back (replication.kraft.log_controller)
CONTROLLERS = ("builtin", "kraft")
# faults of the KRaft controller quorum (``controller: failover``): the active controller
# crashes and another takes over; it is cut off from the other voters; it rejoins
CONTROLLER_FAULTS = ("failover", "isolate", "heal")
EXPECT_KEYS = (
    "acked",
    "anomalies",
    "acked_lost",
    "consumed",
    "diverged",
    "elr",
    "hw",
    "isr",
    "leader",
    "leader_epoch",
    "logs",
    "results",
    "truncation_detected",
    "unclean_elections",
    "violations",
)
BROKER_OPS = (
    "fetch",
    "crash",
    "restart",
    "shutdown",
    "flush",
    "isolate",
    "heal",
    "fail_log_dir",
)
# ops on one network link: ``cut: {from: 1, to: 2, both: false}`` (``heal`` takes a broker id
# to end an ``isolate``, or a link like ``cut``)
LINK_OPS = ("cut", "heal")
# link endpoints besides broker ids: the controller, and the clients (producers, consumers)
LINK_ENDPOINTS = ("controller", "clients")
OPS = (
    *BROKER_OPS,
    "delete_records",
    "cut",
    "produce",
    "producer",
    "send",
    "advance_ms",
    "elect",
    "reassign",
    "consume",
    "controller",
    "expect",
)
# ops about one partition: with more than one partition the step names it (``partition: 1``)
PARTITION_OPS = ("produce", "producer", "consume", "delete_records", "reassign", "expect")
# ops that may name a partition, else act on every partition the broker holds (``fetch``,
# ``flush``) or on every partition (``elect`` auto, preferred or unclean)
PARTITION_OPTIONAL_OPS = ("fetch", "flush", "elect")
# the settings a ``producer`` step takes (replication.producer.ProducerSettings)
PRODUCER_OPTIONS = tuple(SETTING_FIELDS)
# ``{comment: "text"}`` alone is a step that changes nothing and shows its text in the timeline
COMMENT = "comment"

# Documented limits (docs/replication.md), checked before anything runs.
MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 16
# decoded values in one document, every use of a YAML alias counted again
MAX_VALUES = 200_000
MAX_TEXT_CHARS = 10_000
MAX_ID_CHARS = 256
MAX_BROKERS = 32
MAX_PARTITIONS = 64
MAX_BROKER_ID = 2**31 - 1
MAX_STEPS = 10_000
MAX_TIME_MS = 10**12
# ISR-expiry checks the clock runs through (simulated time / (replica.lag.time.max.ms / 2))
MAX_CLOCK_TICKS = 100_000
# longer integer literals are refused while decoding (Python converts at most 4,300 digits)
MAX_INTEGER_DIGITS = 4_000

Frozen: TypeAlias = "bool | int | float | str | tuple[Frozen, ...] | None"
OptionValue: TypeAlias = "str | int | bool | tuple[str, ...] | None"
ExpectFields: TypeAlias = "tuple[tuple[str, Frozen], ...]"
LinkTarget: TypeAlias = "tuple[tuple[str, int | str | bool], ...]"
StepTarget: TypeAlias = "int | str | ExpectFields | LinkTarget | tuple[int, ...]"

_OP_OPTIONS: dict[str, dict[str, OptionValue]] = {
    "produce": {"acks": "all", "timeout_ms": None, "to": None},
    # every setting optional; only those given are kept (Kafka's defaults otherwise)
    "producer": {name: None for name in SETTING_FIELDS},
    "send": {"producer": None},
    "fetch": {"response": "ok"},
    "crash": {"unflushed": "keep", "detected": False},
    "expect": {"modes": None},
}
_COMMON_OPTIONS = ("at_ms", "comment")
_TOP_LEVEL = ("name", "description", "config", "invariants", "steps", "comment")


@dataclass(frozen=True, slots=True)
class ScenarioConfig:
    """The cluster a scenario runs on; names as in the public scenario format.

    >>> ScenarioConfig(brokers=(1,), replicas=(1,), replica_lag_time_max_ms=0)
    Traceback (most recent call last):
    ...
    replication.errors.ScenarioError: config.replica_lag_time_max_ms: must be an integer from 1 \
to 1,000,000,000,000 (got 0)
    """

    brokers: tuple[int, ...]
    # the partition's replicas, preferred leader first (with ``partitions``: partition 0's,
    # which may be left out)
    replicas: tuple[int, ...] = ()
    mode: str = "current"
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    eligible_leader_replicas: bool = False
    replica_lag_time_max_ms: int = 30000
    broker_session_timeout_ms: int = 9000
    request_timeout_ms: int = 30000
    # how long an AlterPartition takes to reach the controller (0: within the same step)
    alter_partition_delay_ms: int = 0
    # protocol switches (None: as the mode says), for scenarios S6 and S7
    maximal_isr: bool | None = None
    leso_isr_join: bool | None = None
    # replica.high.watermark.checkpoint.interval.ms (None: the HW checkpoint is written on
    # every HW change; Kafka writes it every 5,000 ms)
    high_watermark_checkpoint_interval_ms: int | None = None
    # several partitions on the same brokers: each one's replicas, preferred leader first
    # (None: one partition, ``replicas``); ``replicas`` is then partition 0's list
    partitions: tuple[tuple[int, ...], ...] | None = None
    # auto.leader.rebalance.enable with leader.imbalance.check.interval (None: off; Kafka's
    # default is on, every 300,000 ms)
    leader_imbalance_check_interval_ms: int | None = None
    # builtin or kraft (None: builtin), see CONTROLLERS
    controller: str | None = None

    def __post_init__(self) -> None:
        brokers = _broker_list(self.brokers, "config.brokers")
        partitions = None
        if self.partitions is not None:
            partitions = _partition_lists(self.partitions)
            object.__setattr__(self, "partitions", partitions)
            if not self.replicas:
                object.__setattr__(self, "replicas", partitions[0])
        replicas = _broker_list(self.replicas, "config.replicas")
        if partitions is not None and replicas != partitions[0]:
            raise ScenarioError(
                "with partitions, replicas is partition 0's list: give one or the other",
                field="config.replicas",
                value=list(replicas),
            )
        # frozen: the checked tuples replace whatever sequence was given
        object.__setattr__(self, "brokers", brokers)
        object.__setattr__(self, "replicas", replicas)
        if self.mode not in ALL_MODE_NAMES:
            raise ScenarioError(
                f"unknown mode; expected one of {', '.join(ALL_MODE_NAMES)}",
                field="config.mode",
                value=self.mode,
            )
        if self.controller is not None and self.controller not in CONTROLLERS:
            raise ScenarioError(
                f"unknown controller; expected one of {', '.join(CONTROLLERS)}",
                field="config.controller",
                value=self.controller,
            )
        for name in ("unclean_leader_election", "eligible_leader_replicas"):
            _boolean(getattr(self, name), f"config.{name}")
        for name in ("maximal_isr", "leso_isr_join"):
            if getattr(self, name) is not None:
                _boolean(getattr(self, name), f"config.{name}")
        _integer(self.min_insync_replicas, "config.min_insync_replicas", 1, MAX_BROKERS)
        for name, minimum in (
            ("replica_lag_time_max_ms", 1),
            ("broker_session_timeout_ms", 1),
            ("request_timeout_ms", 1),
            ("alter_partition_delay_ms", 0),
        ):
            _integer(getattr(self, name), f"config.{name}", minimum, MAX_TIME_MS)
        if self.high_watermark_checkpoint_interval_ms is not None:
            _integer(
                self.high_watermark_checkpoint_interval_ms,
                "config.high_watermark_checkpoint_interval_ms",
                1,
                MAX_TIME_MS,
            )
        if self.leader_imbalance_check_interval_ms is not None:
            _integer(
                self.leader_imbalance_check_interval_ms,
                "config.leader_imbalance_check_interval_ms",
                1,
                MAX_TIME_MS,
            )
        # last: each field is checked on its own first
        for index, assignment in enumerate(partitions or (replicas,)):
            for replica in assignment:
                if replica not in brokers:
                    field = (
                        "config.replicas" if partitions is None else f"config.partitions[{index}]"
                    )
                    raise ScenarioError("replica is not a broker", field=field, value=replica)

    @property
    def partition_replicas(self) -> tuple[tuple[int, ...], ...]:
        """Each partition's replicas (one partition: ``(replicas,)``)."""
        return self.partitions if self.partitions is not None else (self.replicas,)

    @property
    def hosting_brokers(self) -> frozenset[int]:
        """The brokers that hold a replica of some partition at the start."""
        return frozenset(b for assignment in self.partition_replicas for b in assignment)

    @property
    def clock_tick_ms(self) -> int:
        """How often a periodic task runs: the leader's check for lagging followers
        (replica.lag.time.max.ms / 2), or the HW checkpoint when that is more often."""
        tick = max(self.replica_lag_time_max_ms // 2, 1)
        for interval in (
            self.high_watermark_checkpoint_interval_ms,
            self.leader_imbalance_check_interval_ms,
        ):
            if interval is not None:
                tick = min(tick, interval)
        return tick


@dataclass(frozen=True, slots=True)
class Step:
    """One scenario step: ``op`` with its ``target`` and the options it accepts."""

    op: str
    target: StepTarget
    options: tuple[tuple[str, OptionValue], ...] = ()

    @classmethod
    def from_dict(cls, raw: object, config: ScenarioConfig, index: int = 0) -> Step:
        """Parse one step of the file format (``{fetch: 1, response: lost}``), checking every
        field against ``config``; the one place a step is parsed.

        >>> config = ScenarioConfig(brokers=(1, 2), replicas=(1, 2))
        >>> Step.from_dict({"crash": 2, "unflushed": "lose"}, config)
        Step(op='crash', target=2, options=(('unflushed', 'lose'), ('detected', False)))
        >>> Step.from_dict({"fetch": 3}, config, 4)
        Traceback (most recent call last):
        ...
        replication.errors.ScenarioError: step 4: fetch: unknown broker (got 3)
        """
        return _parse_step(index, raw, config)

    def to_dict(self) -> JsonObject:
        """The step in the file format (``from_dict`` of the result gives it back)."""
        target: JsonValue
        if self.op == "expect":
            target = expect_fields(self)
        elif self.op == "reassign" and isinstance(self.target, tuple):
            target = list(cast("tuple[int, ...]", self.target))
        elif isinstance(self.target, tuple):
            target = {str(key): value for key, value in cast(LinkTarget, self.target)}
        else:
            target = self.target
        entry: JsonObject = {self.op: target}
        for key, value in self.options:
            entry[key] = list(value) if isinstance(value, tuple) else value
        return entry

    def option(self, name: str, default: OptionValue = None) -> OptionValue:
        for key, value in self.options:
            if key == name:
                return value
        return default

    def describe(self) -> str:
        """A short label for the timeline, e.g. ``fetch 1 (response lost)``."""
        if self.op == COMMENT:
            return COMMENT
        if self.op == "expect":
            text = "expect"
        elif self.op == "reassign" and isinstance(self.target, tuple):
            text = f"reassign {list(self.target)}"
        elif isinstance(self.target, tuple):
            link = dict(cast(LinkTarget, self.target))
            arrow = "<->" if link.get("both", True) else "->"
            text = f"{self.op} {link.get('from')}{arrow}{link.get('to')}"
        else:
            text = f"{self.op} {self.target}"
        extras = [
            f"{key}={value}"
            for key, value in self.options
            if key not in ("comment", "modes")
            and value is not None
            and value != _OP_OPTIONS.get(self.op, {}).get(key)
        ]
        if self.op == "produce":
            extras = [
                f"acks={self.option('acks')}",
                *(e for e in extras if not e.startswith("acks")),
            ]
        return text + (f" ({', '.join(extras)})" if extras else "")


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    config: ScenarioConfig
    steps: tuple[Step, ...]
    source: str | None = None
    # what the scenario shows, in a sentence or two (printed and in the result document)
    description: str | None = None
    # the invariants to check (None: all of them)
    invariants: tuple[str, ...] | None = None


# ---------------------------------------------------------------------------- loading


def load_scenario(path_or_text: str | Path | Mapping[str, Any]) -> Scenario:
    """Parse a scenario from a file path, JSON/YAML text, or an already-decoded mapping.

    Everything is checked before anything runs: size, encoding, nesting, every field's type
    and range, and the limits above; a problem is a ``ScenarioError`` naming the file, the
    line or step, and the field.
    """
    source: str | None = None
    if isinstance(path_or_text, Mapping):
        document: object = path_or_text
    else:
        text = str(path_or_text)
        if isinstance(path_or_text, Path) or (
            "\n" not in text and not text.lstrip().startswith("{")
        ):
            source = str(path_or_text)
            text = _read_text(Path(path_or_text), source)
        else:
            _check_size(len(text.encode("utf-8", "surrogatepass")), None)
        document = _decode(text, source)
    try:
        _check_tree(document)
        return _parse(document, source)
    except ScenarioError as error:
        raise error.located(source=source) from None


def _check_size(size: int, source: str | None) -> None:
    if size > MAX_FILE_BYTES:
        raise ScenarioError(
            f"the scenario is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}", source=source
        )


def _read_text(path: Path, source: str) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except OSError as error:
        raise ScenarioError(f"cannot read the file: {error.strerror}", source=source) from None
    _check_size(len(data), source)
    nul = data.find(b"\x00")
    if nul != -1:
        raise ScenarioError(
            "a NUL byte; scenario files are UTF-8 text",
            source=source,
            line=data.count(b"\n", 0, nul) + 1,
            position=nul,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScenarioError(
            "not UTF-8 text",
            source=source,
            line=data.count(b"\n", 0, error.start) + 1,
            position=error.start,
        ) from None


class _JsonValueError(ValueError):
    pass


def _json_integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _JsonValueError(f"an integer of {len(text):,} digits")
    return int(text)


def _json_constant(text: str) -> float:
    raise _JsonValueError(f"{text} is not a number JSON allows")


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` (no ``!!python`` tags) that refuses anchors used too often."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases = getattr(self, "_aliases", 0) + 1
            if self._aliases > MAX_VALUES // 1000:
                event = self.peek_event()
                raise yaml.YAMLError(
                    f"line {event.start_mark.line + 1}: more than {MAX_VALUES // 1000} YAML aliases"
                )
        return super().compose_node(parent, index)


def _decode(text: str, source: str | None) -> object:
    line: int | None = None
    try:
        if text.lstrip().startswith("{"):
            return json.loads(text, parse_int=_json_integer, parse_constant=_json_constant)
        loader = _BoundedLoader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except json.JSONDecodeError as error:
        message, line = f"not valid JSON: {error.msg}", error.lineno
    except _JsonValueError as error:
        message = f"not valid JSON: {error}"
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        message = f"not valid YAML: {error.problem or error.context}"
        if "python/" in str(error):
            message = "not valid YAML: tags such as !!python/... are not allowed"
    except yaml.YAMLError as error:
        message = f"not valid YAML: {error}"
    except RecursionError:
        message = f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as error:
        # a YAML integer longer than Python converts, or a value YAML's constructors reject
        message = f"not valid YAML: {error}"
        if "digits" in str(error):
            message = "not valid YAML: an integer of more than 4,300 digits"
    raise ScenarioError(message.splitlines()[0], source=source, line=line) from None


def _check_tree(document: object) -> None:
    """Every decoded value is plain JSON data within the limits: depth, count (aliases
    expanded), text without NUL or lone surrogates, finite numbers of sane size."""
    stack: list[tuple[object, int, str]] = [(document, 0, "")]
    count = 0
    while stack:
        value, depth, where = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ScenarioError(
                f"more than {MAX_VALUES:,} values (every use of a YAML alias counts)"
            )
        if depth > MAX_DEPTH:
            raise _tree_error(where, f"nested deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, int):
            if value.bit_length() > 63:
                raise _tree_error(where, "an integer beyond 64 bits", value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _tree_error(where, "not a finite number", value)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, bool) or not isinstance(key, str | int):
                    raise _tree_error(where, "keys must be text", key)
                if isinstance(key, str):
                    _check_text(key, where)
                stack.append((item, depth + 1, f"{where}.{_shown(key)}" if where else _shown(key)))
        elif isinstance(value, list):
            for position, item in enumerate(value):
                stack.append((item, depth + 1, f"{where}[{position}]"))
        else:
            raise _tree_error(where, f"not a JSON value ({type(value).__name__})")


def _tree_error(where: str, message: str, *value: object) -> ScenarioError:
    step: int | None = None
    field = where or None
    if where.startswith("steps["):
        index, _, rest = where[len("steps[") :].partition("]")
        step = int(index)
        field = rest.lstrip(".") or None
    return (
        ScenarioError(message, step=step, field=field, value=value[0])
        if value
        else (ScenarioError(message, step=step, field=field))
    )


def _check_text(value: str, where: str) -> None:
    if len(value) > MAX_TEXT_CHARS:
        raise _tree_error(where, f"text longer than {MAX_TEXT_CHARS:,} characters", value)
    if "\x00" in value:
        raise _tree_error(where, "text holds a NUL character", value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _tree_error(where, "text holds a lone surrogate (not Unicode)", value) from None


def _shown(key: object) -> str:
    """A key as it can be printed in one line (odd keys shown as their repr)."""
    text = str(key)
    if text.isprintable() and len(text) <= 60:
        return text
    return repr(text)[:60]


def _parse_header(
    document: Mapping[Any, Any], top_level: tuple[str, ...]
) -> tuple[str, str | None]:
    """The ``name`` and ``description`` of a scenario document whose top-level fields are
    ``top_level`` (the simulator's and the KRaft quorum's scenarios share these rules)."""
    unknown = sorted(_shown(key) for key in document if key not in top_level)
    if unknown:
        raise ScenarioError("unknown top-level field", field=unknown[0], value=unknown[0])
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError("a scenario needs a name", field="name", value=name)
    _identifier(name, "name")
    description = document.get("description")
    if description is not None and not isinstance(description, str):
        raise ScenarioError("must be text", field="description", value=description)
    return name, description


def _raw_steps(document: Mapping[Any, Any]) -> list[Any]:
    """The document's ``steps`` list, at most ``MAX_STEPS`` long."""
    raw_steps = document.get("steps")
    if not isinstance(raw_steps, list):
        raise ScenarioError("steps must be a list", field="steps", value=raw_steps)
    if len(raw_steps) > MAX_STEPS:
        raise ScenarioError(f"more than {MAX_STEPS:,} steps", field="steps", value=len(raw_steps))
    return raw_steps


def _parse(document: object, source: str | None) -> Scenario:
    if not isinstance(document, Mapping):
        raise ScenarioError("a scenario is a mapping with name, config and steps", source=source)
    name, description = _parse_header(document, _TOP_LEVEL)
    if "comment" in document and not isinstance(document["comment"], str):
        raise ScenarioError("must be text", field="comment", value=document["comment"])
    config = _parse_config(document.get("config"))
    invariants = _parse_invariants(document.get("invariants"))
    raw_steps = _raw_steps(document)
    hosts = _Hosts(config, raw_steps)
    steps = []
    clock_ms = 0
    producers: list[str] = []
    sent: set[str] = set()
    isolated = False  # a controller step cut the active controller off
    for index, raw in enumerate(raw_steps):
        step = _parse_step(index, raw, config, hosts)
        if step.op in ("producer", "send"):
            step = _check_producer_use(index, step, producers, sent)
        if step.op == "controller":
            isolated = _check_controller_fault(index, step, isolated)
        at_ms = step.option("at_ms")
        if isinstance(at_ms, int):
            if at_ms < clock_ms:
                raise ScenarioError(
                    f"time must not go backwards (clock is at {clock_ms} ms)",
                    step=index,
                    field="at_ms",
                    value=at_ms,
                )
            clock_ms = at_ms
        if step.op == "advance_ms" and isinstance(step.target, int):
            clock_ms += step.target
        _check_clock(clock_ms, config, index, "at_ms" if step.op != "advance_ms" else "advance_ms")
        steps.append(step)
    return Scenario(
        name=name,
        config=config,
        steps=tuple(steps),
        source=source,
        description=description,
        invariants=invariants,
    )


def _check_controller_fault(index: int, step: Step, isolated: bool) -> bool:
    """One controller cut off at a time, and ``heal`` only after an ``isolate``; returns
    whether one is cut off after the step."""
    if step.target == "isolate" and isolated:
        raise ScenarioError(
            "a controller is already cut off: heal it first",
            step=index,
            field="controller",
            value=step.target,
        )
    if step.target == "heal" and not isolated:
        raise ScenarioError(
            "no controller is cut off (heal follows an isolate)",
            step=index,
            field="controller",
            value=step.target,
        )
    return step.target == "isolate" or (isolated and step.target != "heal")


class _Hosts:
    """The brokers a scenario's broker steps may name: those holding a replica at the start,
    and those some ``reassign`` step moves a partition to (looked for only when a step names
    a broker of neither kind; each ``reassign`` list is checked when its step is parsed)."""

    __slots__ = ("_config", "_extra", "_initial", "_raw_steps")

    def __init__(self, config: ScenarioConfig, raw_steps: Sequence[object]) -> None:
        self._config = config
        self._initial = config.replicas if config.partitions is None else config.hosting_brokers
        self._raw_steps = raw_steps
        self._extra: frozenset[int] | None = None

    def __contains__(self, broker_id: object) -> bool:
        if broker_id in self._initial:
            return True
        if self._extra is None:
            brokers = self._config.brokers
            self._extra = frozenset(
                target
                for raw in self._raw_steps
                if isinstance(raw, Mapping) and isinstance(raw.get("reassign"), list)
                for target in raw["reassign"]
                if _int_value(target) and target in brokers
            )
        return broker_id in self._extra

    def __iter__(self) -> Iterator[int]:
        yield from self._initial
        yield from self._extra or ()

    def __len__(self) -> int:
        return len(self._initial) + len(self._extra or ())


def _check_producer_use(index: int, step: Step, producers: list[str], sent: set[str]) -> Step:
    """A producer is declared once, before its sends; each value is sent once (so that a
    duplicate in the log is the producer's doing); a ``send`` without ``producer`` names the
    only producer declared so far."""
    name = str(step.target)
    if step.op == "producer":
        if name in producers:
            raise ScenarioError("producer declared twice", step=index, field="producer", value=name)
        producers.append(name)
        return step
    if name in sent:
        raise ScenarioError(
            "each value is sent once (a retry is the producer's job)",
            step=index,
            field="send",
            value=name,
        )
    sent.add(name)
    producer = step.option("producer")
    if producer is None:
        if len(producers) != 1:
            raise ScenarioError(
                "send needs producer: NAME (declare one with a producer step first)"
                if not producers
                else "send needs producer: NAME when several producers are declared",
                step=index,
                field="producer",
                value=None,
            )
        return Step(step.op, step.target, (*step.options, ("producer", producers[0])))
    if producer not in producers:
        raise ScenarioError(
            "unknown producer (declare it with a producer step first)",
            step=index,
            field="producer",
            value=producer,
        )
    return step


def _check_clock(clock_ms: int, config: ScenarioConfig, index: int, field: str) -> None:
    """Simulated time within the documented bound: the clock and the periodic ISR checks it
    runs through."""
    if clock_ms > MAX_TIME_MS:
        raise ScenarioError(
            f"the clock would pass {MAX_TIME_MS:,} ms", step=index, field=field, value=clock_ms
        )
    ticks = clock_ms // config.clock_tick_ms
    if ticks > MAX_CLOCK_TICKS:
        raise ScenarioError(
            f"the clock would reach {clock_ms:,} ms, {ticks:,} ISR checks of "
            f"replica_lag_time_max_ms/2 = {config.clock_tick_ms} ms each; the limit is "
            f"{MAX_CLOCK_TICKS:,}",
            step=index,
            field=field,
            value=clock_ms,
        )


def _parse_invariants(
    raw: object, known: Sequence[str] = INVARIANT_NAMES
) -> tuple[str, ...] | None:
    """The invariant names a scenario's ``invariants`` selects, in ``known``'s order (None:
    all); the quorum scenarios pass their own names."""
    if raw is None:
        return None
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not names:
        raise ScenarioError("a list of invariant names", field="invariants", value=raw)
    for name in names:
        if name not in known:
            raise ScenarioError(
                f"unknown invariant; expected some of {', '.join(known)}",
                field="invariants",
                value=name,
            )
    return tuple(name for name in known if name in names)


def _parse_config(raw: object) -> ScenarioConfig:
    if not isinstance(raw, Mapping):
        raise ScenarioError("config must be a mapping", field="config", value=raw)
    known = {f.name for f in fields(ScenarioConfig)}
    unknown = sorted(_shown(key) for key in raw if key not in known)
    if unknown:
        raise ScenarioError("unknown config field", field=f"config.{unknown[0]}", value=unknown[0])
    # each value is checked once, by ScenarioConfig (file or code: the same rules)
    values = {name: raw[name] for name in known if name in raw}
    values.setdefault("brokers", None)
    values.setdefault("replicas", None)
    return ScenarioConfig(**values)


def _parse_step(
    index: int, raw: object, config: ScenarioConfig, hosts: Collection[int] | None = None
) -> Step:
    if hosts is None:
        hosts = config.hosting_brokers
    if not isinstance(raw, Mapping):
        raise ScenarioError(
            "a step is a mapping like {fetch: 1}", step=index, field="step", value=raw
        )
    if list(raw) == ["comment"]:
        # a step that only says something: the timeline shows it, the cluster does nothing
        comment = raw["comment"]
        if not isinstance(comment, str):
            raise ScenarioError("must be text", step=index, field="comment", value=comment)
        return Step(op=COMMENT, target=comment)
    ops = [key for key in raw if key in OPS]
    if "send" in ops and "producer" in ops:
        ops.remove("producer")  # {send: m1, producer: p1}: here an option of send
    if len(ops) != 1:
        unknown = [key for key in raw if key not in OPS and key not in _options_of_any()]
        if unknown:
            shown = _shown(unknown[0])
            raise ScenarioError("unknown op", step=index, field=shown, value=shown)
        raise ScenarioError(
            "a step holds exactly one op", step=index, field="op", value=sorted(map(_shown, raw))
        )
    op = str(ops[0])
    allowed = _OP_OPTIONS.get(op, {})
    for key in raw:
        if key == "partition" and (op in PARTITION_OPS or op in PARTITION_OPTIONAL_OPS):
            continue
        if key != op and key not in allowed and key not in _COMMON_OPTIONS:
            raise ScenarioError(
                f"field not allowed on {op}", step=index, field=_shown(key), value=raw[key]
            )
    target = _parse_target(index, op, raw[op], config, hosts)
    partition = (
        _parse_partition(index, op, raw, target, config)
        if config.partitions is not None or "partition" in raw
        else None
    )
    options: list[tuple[str, OptionValue]] = []
    if op == "producer":
        options = _producer_options(index, raw)
        allowed = {}
    elif op == "send":
        name = raw.get("producer")
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ScenarioError("a producer name", step=index, field="producer", value=name)
            options.append(("producer", _identifier(name, "producer", index)))
        allowed = {}
    for key, default in allowed.items():
        if key == "to":
            value = raw.get(key)
            if value is not None:
                options.append((key, _replica(index, key, value, config, hosts)))
            continue
        value = _parse_option(index, key, raw.get(key, default))
        if value is not None:
            options.append((key, value))
    if "at_ms" in raw:
        options.append(("at_ms", _integer(raw["at_ms"], "at_ms", 0, MAX_TIME_MS, step=index)))
    if "comment" in raw:
        comment = raw["comment"]
        if not isinstance(comment, str):
            raise ScenarioError("must be text", step=index, field="comment", value=comment)
        options.append(("comment", comment))
    if partition is not None:
        options.append(("partition", partition))
    return Step(op=op, target=target, options=tuple(options))


def _parse_partition(
    index: int, op: str, raw: Mapping[Any, Any], target: StepTarget, config: ScenarioConfig
) -> int | None:
    """The partition a step names: an index into ``config.partitions``; required on a
    one-partition op (and ``elect`` of a broker) once there is more than one partition."""
    if config.partitions is None and "partition" not in raw:
        return None  # one partition: nothing to name
    count = len(config.partition_replicas)
    if "partition" not in raw:
        needs = op in PARTITION_OPS or (op == "elect" and isinstance(target, int))
        if count > 1 and needs:
            raise ScenarioError(
                f"the scenario has {count} partitions: say which one this {op} is about "
                f"(partition: 0 to {count - 1})",
                step=index,
                field="partition",
                value=None,
            )
        return None
    value = raw["partition"]
    if not _int_value(value) or not 0 <= value < count:
        known = "partition 0" if count == 1 else f"partitions 0 to {count - 1}"
        raise ScenarioError(
            f"no such partition: the scenario has {known}",
            step=index,
            field="partition",
            value=value,
        )
    return cast(int, value)


def _producer_options(index: int, raw: Mapping[Any, Any]) -> list[tuple[str, OptionValue]]:
    """The settings of a ``producer`` step, checked together as Kafka's ProducerConfig does."""
    given: dict[str, Any] = {key: raw[key] for key in SETTING_FIELDS if key in raw}
    if "acks" in given:
        given["acks"] = _parse_option(index, "acks", given["acks"])
    try:
        ProducerSettings(**given)
    except ScenarioError as error:
        raise ScenarioError(
            error.message, step=index, field=error.field, value=error.value
        ) from None
    return [(key, given[key]) for key in SETTING_FIELDS if key in given]


def _options_of_any() -> set[str]:
    options = {key for options in _OP_OPTIONS.values() for key in options}
    return options | set(_COMMON_OPTIONS) | {"partition"}


def _identifier(value: str, field: str, step: int | None = None) -> str:
    """A record value, consumer id or name: short text on one line."""
    if len(value) > MAX_ID_CHARS or not value.isprintable():
        raise ScenarioError(
            f"must be printable text of at most {MAX_ID_CHARS} characters",
            step=step,
            field=field,
            value=value,
        )
    return value


def _replica(
    index: int, field: str, value: object, config: ScenarioConfig, hosts: Collection[int]
) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in config.brokers:
        raise ScenarioError("unknown broker", step=index, field=field, value=value)
    if value not in config.replicas and value not in hosts:
        # only brokers with a replica (now or after a reassignment) are simulated
        raise ScenarioError(
            "broker holds no replica of the partition", step=index, field=field, value=value
        )
    return value


def _parse_link(
    index: int, op: str, value: Mapping[Any, Any], config: ScenarioConfig, hosts: Collection[int]
) -> LinkTarget:
    """``{from: A, to: B, both: true}``: A and B are replica ids, ``controller`` or ``clients``
    (at least one a broker); ``both: false`` cuts (or heals) only A -> B."""
    for key in value:
        if key not in ("from", "to", "both"):
            shown = _shown(key)
            raise ScenarioError(
                "a link has from, to and both", step=index, field=f"{op}.{shown}", value=shown
            )
    endpoints: list[int | str] = []
    for key in ("from", "to"):
        if key not in value:
            raise ScenarioError(
                "a link needs from and to", step=index, field=f"{op}.{key}", value=None
            )
        end = value[key]
        if isinstance(end, str) and end in LINK_ENDPOINTS:
            endpoints.append(end)
        else:
            endpoints.append(_replica(index, f"{op}.{key}", end, config, hosts))
    if endpoints[0] == endpoints[1]:
        raise ScenarioError(
            "a link joins two different endpoints", step=index, field=f"{op}.to", value=endpoints[1]
        )
    if not any(isinstance(end, int) for end in endpoints):
        raise ScenarioError(
            "a link has a broker at one end at least",
            step=index,
            field=f"{op}.to",
            value=endpoints[1],
        )
    both = _boolean(value.get("both", True), f"{op}.both", step=index)
    return (("both", both), ("from", endpoints[0]), ("to", endpoints[1]))


def _parse_target(
    index: int, op: str, value: object, config: ScenarioConfig, hosts: Collection[int]
) -> StepTarget:
    if op in LINK_OPS and isinstance(value, Mapping):
        return _parse_link(index, op, value, config, hosts)
    if op == "cut":
        raise ScenarioError(
            "cut takes a link like {from: 1, to: 2, both: false}",
            step=index,
            field=op,
            value=value,
        )
    if op in BROKER_OPS:
        return _replica(index, op, value, config, hosts)
    if op == "reassign":
        return _reassign_target(index, value, config)
    if op == "produce":
        if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
            raise ScenarioError("produce needs a record value", step=index, field=op, value=value)
        return _identifier(str(value), op, index)
    if op == "consume":
        if not isinstance(value, str) or not value:
            raise ScenarioError("consume needs a consumer id", step=index, field=op, value=value)
        return _identifier(value, op, index)
    if op == "producer":
        if not isinstance(value, str) or not value:
            raise ScenarioError("producer needs a name", step=index, field=op, value=value)
        return _identifier(value, op, index)
    if op == "send":
        if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
            raise ScenarioError("send needs a record value", step=index, field=op, value=value)
        return _identifier(str(value), op, index)
    if op == "advance_ms":
        return _integer(value, op, 0, MAX_TIME_MS, step=index)
    if op == "controller":
        if isinstance(value, str) and value in CONTROLLER_FAULTS:
            return value
        raise ScenarioError(
            f"controller takes {', '.join(CONTROLLER_FAULTS)}", step=index, field=op, value=value
        )
    if op == "delete_records":
        return _integer(value, op, 0, MAX_STEPS, step=index)
    if op == "elect":
        if isinstance(value, str) and value in ELECT_KINDS:
            return value
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (value in config.replicas or value in hosts)
        ):
            return value
        raise ScenarioError(
            "elect takes auto, preferred, unclean or a replica id",
            step=index,
            field=op,
            value=value,
        )
    return _parse_expect(index, value)


def _reassign_target(index: int, value: object, config: ScenarioConfig) -> tuple[int, ...]:
    """``reassign: [4, 2, 3]``: the partition's new replicas, preferred leader first."""
    if not isinstance(value, list) or not value:
        raise ScenarioError(
            "reassign takes the new list of replicas, like [4, 2, 3]",
            step=index,
            field="reassign",
            value=value,
        )
    for broker_id in value:
        if not _int_value(broker_id) or broker_id not in config.brokers:
            raise ScenarioError("unknown broker", step=index, field="reassign", value=broker_id)
    if len(set(value)) != len(value):
        raise ScenarioError(
            "broker ids must be unique", step=index, field="reassign", value=list(value)
        )
    return tuple(value)


def _parse_option(index: int, key: str, value: object) -> OptionValue:
    if key == "acks":
        if isinstance(value, bool):
            raise ScenarioError(
                'acks must be 0, 1, -1 or "all"', step=index, field=key, value=value
            )
        if value in ("all", -1, "-1"):
            return "all"
        if value in (0, 1, "0", "1") and isinstance(value, str | int):
            return int(value)
        raise ScenarioError('acks must be 0, 1, -1 or "all"', step=index, field=key, value=value)
    if key == "timeout_ms":
        return None if value is None else _integer(value, key, 1, MAX_TIME_MS, step=index)
    if key == "response":
        if not isinstance(value, str) or value not in ("ok", "lost"):
            raise ScenarioError("response must be ok or lost", step=index, field=key, value=value)
        return value
    if key == "unflushed":
        if not isinstance(value, str) or value not in ("keep", "lose", "torn"):
            raise ScenarioError(
                "unflushed must be keep, lose or torn", step=index, field=key, value=value
            )
        return value
    if key == "detected":
        return _boolean(value, key, step=index)
    if key == "modes":
        if value is None:
            return None
        modes = [value] if isinstance(value, str) else value
        if (
            not isinstance(modes, list)
            or not modes
            or any(not isinstance(m, str) or m not in ALL_MODE_NAMES for m in modes)
        ):
            raise ScenarioError(
                f"modes lists some of {', '.join(ALL_MODE_NAMES)}",
                step=index,
                field=key,
                value=value,
            )
        return tuple(modes)
    raise ScenarioError("unknown option", step=index, field=key, value=value)


def _scalar(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _list_of(value: object, check: Callable[[object], bool]) -> bool:
    return isinstance(value, list) and all(check(item) for item in value)


def _int_value(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapping_of(value: object, check: Callable[[object], bool]) -> bool:
    return isinstance(value, Mapping) and all(
        _scalar(key) and check(item) for key, item in value.items()
    )


# what each expect field holds, and how to say it
_EXPECT_TYPES: dict[str, tuple[Callable[[object], bool], str]] = {
    "acked": (lambda v: _list_of(v, _scalar), "a list of record values"),
    "anomalies": (
        lambda v: _list_of(v, lambda item: isinstance(item, str) and item in ANOMALY_NAMES),
        f"a list of anomaly names ({', '.join(ANOMALY_NAMES)})",
    ),
    "acked_lost": (lambda v: _list_of(v, _scalar), "a list of record values"),
    "consumed": (
        lambda v: _mapping_of(v, lambda item: _list_of(item, _scalar)),
        "a mapping of consumer id to a list of record values",
    ),
    "diverged": (lambda v: isinstance(v, bool), "true or false"),
    "elr": (lambda v: _list_of(v, _int_value), "a list of broker ids"),
    "hw": (lambda v: v is None or _int_value(v), "an integer or null"),
    "isr": (lambda v: _list_of(v, _int_value), "a list of broker ids"),
    "leader": (_int_value, "a broker id (-1: none)"),
    "leader_epoch": (_int_value, "an integer"),
    "logs": (
        lambda v: _mapping_of(v, lambda item: _list_of(item, _scalar)),
        "a mapping of broker id to a list of record values",
    ),
    "results": (
        lambda v: _mapping_of(v, lambda item: isinstance(item, str)),
        "a mapping of record value to a produce result",
    ),
    "truncation_detected": (
        lambda v: _mapping_of(v, lambda item: isinstance(item, bool)),
        "a mapping of consumer id to true or false",
    ),
    "unclean_elections": (_int_value, "an integer"),
    "violations": (
        lambda v: _list_of(v, lambda item: isinstance(item, str) and item in INVARIANT_NAMES),
        f"a list of invariant names ({', '.join(INVARIANT_NAMES)})",
    ),
}


def _parse_expect(index: int, value: object) -> ExpectFields:
    if not isinstance(value, Mapping) or not value:
        raise ScenarioError(
            "expect takes a mapping of result fields", step=index, field="expect", value=value
        )
    for key in value:
        if key not in EXPECT_KEYS:
            shown = _shown(key)
            raise ScenarioError(
                "unknown expect field", step=index, field=f"expect.{shown}", value=shown
            )
        check, what = _EXPECT_TYPES[key]
        if not check(value[key]):
            raise ScenarioError(
                f"must be {what}", step=index, field=f"expect.{key}", value=value[key]
            )
    return tuple((str(key), _freeze(value[key])) for key in sorted(value))


def _freeze(value: object) -> Frozen:
    """Hashable, order-stable form of a decoded JSON/YAML value."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _thaw(value: Frozen, as_mapping: bool = False) -> JsonValue:
    if as_mapping and isinstance(value, tuple):
        mapping: JsonObject = {}
        for pair in value:
            if isinstance(pair, tuple) and len(pair) == 2:
                mapping[str(pair[0])] = _thaw(pair[1])
        return mapping
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


_MAPPING_EXPECTS = ("consumed", "logs", "results", "truncation_detected")


def expect_fields(step: Step) -> JsonObject:
    """An expect step's fields as plain JSON values."""
    if not isinstance(step.target, tuple):
        return {}
    expected = cast(ExpectFields, step.target)
    return {key: _thaw(value, key in _MAPPING_EXPECTS) for key, value in expected}


def _broker_list(value: object, field: str) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise ScenarioError("must be a non-empty list of broker ids", field=field, value=value)
    if len(value) > MAX_BROKERS:
        raise ScenarioError(f"more than {MAX_BROKERS} brokers", field=field, value=len(value))
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item < 0 or item > MAX_BROKER_ID:
            raise ScenarioError(
                f"broker ids are integers from 0 to {MAX_BROKER_ID}", field=field, value=item
            )
    if len(set(value)) != len(value):
        raise ScenarioError("broker ids must be unique", field=field, value=list(value))
    return tuple(value)


def _partition_lists(value: object) -> tuple[tuple[int, ...], ...]:
    """``config.partitions``: a non-empty list of replica lists, one per partition."""
    if not isinstance(value, list | tuple) or not value:
        raise ScenarioError(
            "must be a non-empty list of replica lists, one per partition",
            field="config.partitions",
            value=value,
        )
    if len(value) > MAX_PARTITIONS:
        raise ScenarioError(
            f"more than {MAX_PARTITIONS} partitions", field="config.partitions", value=len(value)
        )
    return tuple(
        _broker_list(assignment, f"config.partitions[{index}]")
        for index, assignment in enumerate(value)
    )


def _boolean(value: object, field: str, step: int | None = None) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError("must be true or false", step=step, field=field, value=value)
    return value


def _integer(value: object, field: str, minimum: int, maximum: int, step: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ScenarioError(
            f"must be an integer from {minimum} to {maximum:,}", step=step, field=field, value=value
        )
    return value


# ---------------------------------------------------------------------------- writing


def scenario_to_dict(scenario: Scenario) -> JsonObject:
    """The scenario in the file format (``load_scenario`` of the result gives it back)."""
    config: JsonObject = {}
    for spec in fields(ScenarioConfig):
        value = getattr(scenario.config, spec.name)
        if value is None or (spec.name == "replicas" and scenario.config.partitions is not None):
            continue
        if spec.name == "partitions":
            config[spec.name] = [
                list(assignment) for assignment in scenario.config.partition_replicas
            ]
            continue
        config[spec.name] = list(value) if isinstance(value, tuple) else value
    steps = [step.to_dict() for step in scenario.steps]
    document: JsonObject = {"name": scenario.name}
    if scenario.description is not None:
        document["description"] = scenario.description
    document["config"] = config
    if scenario.invariants is not None:
        document["invariants"] = list(scenario.invariants)
    document["steps"] = steps
    return document


def scenario_to_text(scenario: Scenario, fmt: str = "json") -> str:
    """The scenario as JSON (one step per line) or YAML text."""
    document = scenario_to_dict(scenario)
    if fmt == "yaml":
        return yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100)
    steps = [step.to_dict() for step in scenario.steps]
    step_lines = ",\n".join("    " + json.dumps(step) for step in steps)
    header = "".join(
        f"  {json.dumps(key)}: {json.dumps(value)},\n"
        for key, value in document.items()
        if key != "steps"
    )
    return "{\n" + header + f'  "steps": [\n{step_lines}\n  ]\n' + "}\n"
