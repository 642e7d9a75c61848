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
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from replication.errors import ScenarioError
from replication.modes import MODE_NAMES

ELECT_KINDS = ("auto", "preferred", "unclean")
EXPECT_KEYS = (
    "acked",
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
BROKER_OPS = ("fetch", "crash", "restart", "shutdown", "flush", "isolate", "heal")
OPS = (*BROKER_OPS, "produce", "advance_ms", "elect", "consume", "expect")
_OP_OPTIONS: dict[str, dict[str, Any]] = {
    "produce": {"acks": "all", "timeout_ms": None},
    "fetch": {"response": "ok"},
    "crash": {"unflushed": "keep", "detected": False},
    "expect": {"modes": None},
}
_COMMON_OPTIONS = ("at_ms", "comment")


@dataclass(frozen=True, slots=True)
class ScenarioConfig:
    """The cluster a scenario runs on; names as in the public scenario format."""

    brokers: tuple[int, ...]
    replicas: tuple[int, ...]
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


@dataclass(frozen=True, slots=True)
class Step:
    """One scenario step: ``op`` with its ``target`` and the options it accepts."""

    op: str
    target: Any
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        for key, value in self.options:
            if key == name:
                return value
        return default

    def describe(self) -> str:
        """A short label for the timeline, e.g. ``fetch 1 (response lost)``."""
        text = f"{self.op} {self.target}" if self.op != "expect" else "expect"
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


# ---------------------------------------------------------------------------- loading


def load_scenario(path_or_text: str | Path | Mapping[str, Any]) -> Scenario:
    """Parse a scenario from a file path, JSON/YAML text, or an already-decoded mapping."""
    source: str | None = None
    if isinstance(path_or_text, Mapping):
        document: Any = path_or_text
    else:
        text = str(path_or_text)
        if isinstance(path_or_text, Path) or (
            "\n" not in text and not text.lstrip().startswith("{")
        ):
            source = str(path_or_text)
            text = Path(path_or_text).read_text(encoding="utf-8")
        document = _decode(text, source)
    try:
        return _parse(document, source)
    except ScenarioError as error:
        raise error.located(source=source) from None


def _decode(text: str, source: str | None) -> Any:
    try:
        if text.lstrip().startswith("{"):
            return json.loads(text)
        return yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ScenarioError(
            f"not valid JSON or YAML: {error}".splitlines()[0], source=source
        ) from None


def _parse(document: Any, source: str | None) -> Scenario:
    if not isinstance(document, Mapping):
        raise ScenarioError("a scenario is a mapping with name, config and steps", source=source)
    unknown = sorted(set(document) - {"name", "config", "steps", "comment"})
    if unknown:
        raise ScenarioError("unknown top-level field", field=unknown[0], value=unknown[0])
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError("a scenario needs a name", field="name", value=name)
    config = _parse_config(document.get("config"))
    raw_steps = document.get("steps")
    if not isinstance(raw_steps, list):
        raise ScenarioError("steps must be a list", field="steps", value=raw_steps)
    steps = []
    clock_ms = 0
    for index, raw in enumerate(raw_steps):
        step = _parse_step(index, raw, config)
        at_ms = step.option("at_ms")
        if at_ms is not None:
            if at_ms < clock_ms:
                raise ScenarioError(
                    f"time must not go backwards (clock is at {clock_ms} ms)",
                    step=index,
                    field="at_ms",
                    value=at_ms,
                )
            clock_ms = at_ms
        if step.op == "advance_ms":
            clock_ms += step.target
        steps.append(step)
    return Scenario(name=name, config=config, steps=tuple(steps), source=source)


def _parse_config(raw: Any) -> ScenarioConfig:
    if not isinstance(raw, Mapping):
        raise ScenarioError("config must be a mapping", field="config", value=raw)
    known = {f.name for f in fields(ScenarioConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ScenarioError("unknown config field", field=f"config.{unknown[0]}", value=unknown[0])
    brokers = _broker_list(raw.get("brokers"), "config.brokers")
    replicas = _broker_list(raw.get("replicas"), "config.replicas")
    for replica in replicas:
        if replica not in brokers:
            raise ScenarioError("replica is not a broker", field="config.replicas", value=replica)
    values: dict[str, Any] = {"brokers": brokers, "replicas": replicas}
    mode = raw.get("mode", "current")
    if mode not in MODE_NAMES:
        raise ScenarioError(
            f"unknown mode; expected one of {', '.join(MODE_NAMES)}",
            field="config.mode",
            value=mode,
        )
    values["mode"] = mode
    for name in ("unclean_leader_election", "eligible_leader_replicas"):
        values[name] = _boolean(raw.get(name, False), f"config.{name}")
    for name in ("maximal_isr", "leso_isr_join"):
        if raw.get(name) is not None:
            values[name] = _boolean(raw[name], f"config.{name}")
    for name, minimum in (
        ("min_insync_replicas", 1),
        ("replica_lag_time_max_ms", 1),
        ("broker_session_timeout_ms", 1),
        ("request_timeout_ms", 1),
        ("alter_partition_delay_ms", 0),
    ):
        if name in raw:
            values[name] = _integer(raw[name], f"config.{name}", minimum)
    return ScenarioConfig(**values)


def _parse_step(index: int, raw: Any, config: ScenarioConfig) -> Step:
    if not isinstance(raw, Mapping):
        raise ScenarioError(
            "a step is a mapping like {fetch: 1}", step=index, field="step", value=raw
        )
    ops = [key for key in raw if key in OPS]
    if len(ops) != 1:
        unknown = [key for key in raw if key not in OPS and key not in _options_of_any()]
        if unknown:
            raise ScenarioError("unknown op", step=index, field=str(unknown[0]), value=unknown[0])
        raise ScenarioError(
            "a step holds exactly one op", step=index, field="op", value=sorted(map(str, raw))
        )
    op = ops[0]
    allowed = _OP_OPTIONS.get(op, {})
    for key in raw:
        if key != op and key not in allowed and key not in _COMMON_OPTIONS:
            raise ScenarioError(
                f"field not allowed on {op}", step=index, field=str(key), value=raw[key]
            )
    target = _parse_target(index, op, raw[op], config)
    options: list[tuple[str, Any]] = []
    for key, default in allowed.items():
        value = _parse_option(index, op, key, raw.get(key, default))
        if value is not None:
            options.append((key, value))
    if "at_ms" in raw:
        options.append(("at_ms", _integer(raw["at_ms"], "at_ms", 0, step=index)))
    if "comment" in raw:
        options.append(("comment", str(raw["comment"])))
    return Step(op=op, target=target, options=tuple(options))


def _options_of_any() -> set[str]:
    return {key for options in _OP_OPTIONS.values() for key in options} | set(_COMMON_OPTIONS)


def _parse_target(index: int, op: str, value: Any, config: ScenarioConfig) -> Any:
    if op in BROKER_OPS:
        if isinstance(value, bool) or not isinstance(value, int) or value not in config.brokers:
            raise ScenarioError("unknown broker", step=index, field=op, value=value)
        return value
    if op == "produce":
        if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
            raise ScenarioError("produce needs a record value", step=index, field=op, value=value)
        return str(value)
    if op == "consume":
        if not isinstance(value, str) or not value:
            raise ScenarioError("consume needs a consumer id", step=index, field=op, value=value)
        return value
    if op == "advance_ms":
        return _integer(value, op, 0, step=index)
    if op == "elect":
        if value in ELECT_KINDS:
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value in config.replicas:
            return value
        raise ScenarioError(
            "elect takes auto, preferred, unclean or a replica id",
            step=index,
            field=op,
            value=value,
        )
    return _parse_expect(index, value)


def _parse_option(index: int, op: str, key: str, value: Any) -> Any:
    if key == "acks":
        if value in ("all", -1, "-1"):
            return "all"
        if value in (0, 1, "0", "1") and not isinstance(value, bool):
            return int(value)
        raise ScenarioError('acks must be 0, 1, -1 or "all"', step=index, field=key, value=value)
    if key == "timeout_ms":
        return None if value is None else _integer(value, key, 1, step=index)
    if key == "response":
        if value not in ("ok", "lost"):
            raise ScenarioError("response must be ok or lost", step=index, field=key, value=value)
        return value
    if key == "unflushed":
        if value not in ("keep", "lose"):
            raise ScenarioError(
                "unflushed must be keep or lose", step=index, field=key, value=value
            )
        return value
    if key == "detected":
        return _boolean(value, key, step=index)
    if key == "modes":
        if value is None:
            return None
        modes = [value] if isinstance(value, str) else value
        if not isinstance(modes, list) or not modes or any(m not in MODE_NAMES for m in modes):
            raise ScenarioError(
                f"modes lists some of {', '.join(MODE_NAMES)}", step=index, field=key, value=value
            )
        return tuple(modes)
    raise ScenarioError("unknown option", step=index, field=key, value=value)


def _parse_expect(index: int, value: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, Mapping) or not value:
        raise ScenarioError(
            "expect takes a mapping of result fields", step=index, field="expect", value=value
        )
    for key in value:
        if key not in EXPECT_KEYS:
            raise ScenarioError(
                "unknown expect field", step=index, field=f"expect.{key}", value=key
            )
    return tuple((key, _freeze(value[key])) for key in sorted(value))


def _freeze(value: Any) -> Any:
    """Hashable, order-stable form of a decoded JSON/YAML value."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any, as_mapping: bool = False) -> Any:
    if as_mapping:
        return {k: _thaw(v) for k, v in value}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


_MAPPING_EXPECTS = ("consumed", "logs", "results", "truncation_detected")


def expect_fields(step: Step) -> dict[str, Any]:
    """An expect step's fields as plain JSON values."""
    return {key: _thaw(value, key in _MAPPING_EXPECTS) for key, value in step.target}


def _broker_list(value: Any, field: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ScenarioError("must be a non-empty list of broker ids", field=field, value=value)
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise ScenarioError("broker ids are non-negative integers", field=field, value=item)
    if len(set(value)) != len(value):
        raise ScenarioError("broker ids must be unique", field=field, value=value)
    return tuple(value)


def _boolean(value: Any, field: str, step: int | None = None) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError("must be true or false", step=step, field=field, value=value)
    return value


def _integer(value: Any, field: str, minimum: int, step: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(f"must be an integer >= {minimum}", step=step, field=field, value=value)
    return value


# ---------------------------------------------------------------------------- writing


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The scenario in the file format (``load_scenario`` of the result gives it back)."""
    config: dict[str, Any] = {}
    for spec in fields(ScenarioConfig):
        value = getattr(scenario.config, spec.name)
        if value is None:
            continue
        config[spec.name] = list(value) if isinstance(value, tuple) else value
    steps: list[dict[str, Any]] = []
    for step in scenario.steps:
        entry: dict[str, Any] = {
            step.op: expect_fields(step) if step.op == "expect" else step.target
        }
        for key, value in step.options:
            entry[key] = list(value) if isinstance(value, tuple) else value
        steps.append(entry)
    return {"name": scenario.name, "config": config, "steps": steps}


def scenario_to_text(scenario: Scenario, fmt: str = "json") -> str:
    """The scenario as JSON (one step per line) or YAML text."""
    document = scenario_to_dict(scenario)
    if fmt == "yaml":
        return yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100)
    step_lines = ",\n".join("    " + json.dumps(step) for step in document["steps"])
    return (
        "{\n"
        f'  "name": {json.dumps(document["name"])},\n'
        f'  "config": {json.dumps(document["config"])},\n'
        f'  "steps": [\n{step_lines}\n  ]\n'
        "}\n"
    )
