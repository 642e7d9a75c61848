"""Partitioner names ktk knows, and how to build a fresh (stateful, seeded) one.

>>> [name for name in names() if name.startswith("java-")]  # doctest: +NORMALIZE_WHITESPACE
['java-builtin', 'java-builtin-ignore-keys', 'java-default', 'java-legacy-roundrobin',
 'java-roundrobin', 'java-roundrobin-fixed', 'java-sticky', 'java-uniform-sticky']
>>> import random
>>> create("librdkafka-default", rng=random.Random(0)).name
'librdkafka-consistent_random'
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from partitioners.base import KeyRule, Partitioner
from partitioners.errors import UnknownPartitionerError
from partitioners.keyed import JAVA_MURMUR2
from partitioners.librdkafka import (
    DEFAULT_PARTITIONER,
    DEFAULT_STICKY_LINGER_MS,
    LIBRDKAFKA_PARTITIONERS,
    RULES,
    LibrdkafkaSticky,
)
from partitioners.limits import MAX_INT32, check_bool, check_int
from partitioners.round_robin import LegacyRoundRobin, RoundRobin
from partitioners.sticky import BuiltInSticky, Kip480Sticky

DEFAULT_BATCH_SIZE = 16384


@dataclass(frozen=True, slots=True)
class Settings:
    """Producer settings a partitioner reads (Java ``batch.size``, librdkafka
    ``sticky.partitioning.linger.ms``, Java ``partitioner.adaptive.partitioning.enable``)."""

    batch_size: int = DEFAULT_BATCH_SIZE
    sticky_linger_ms: int = DEFAULT_STICKY_LINGER_MS
    adaptive: bool = True

    def __post_init__(self) -> None:
        check_int("Settings", "batch_size", self.batch_size, low=1, high=MAX_INT32)
        check_int("Settings", "sticky_linger_ms", self.sticky_linger_ms, low=0, high=MAX_INT32)
        check_bool("Settings", "adaptive", self.adaptive)


Factory = Callable[[random.Random, Settings], Partitioner]

DESCRIPTIONS: dict[str, str] = {
    "java-builtin": "Java 3.3+ default: murmur2 for keys, KIP-794 sticky (batch.size bytes, "
    "adaptive to queue sizes) for null keys",
    "java-builtin-ignore-keys": "java-builtin with partitioner.ignore.keys=true",
    "java-sticky": "Java 2.4-3.2 DefaultPartitioner: murmur2 for keys, KIP-480 sticky "
    "(switch on new batch) for null keys",
    "java-uniform-sticky": "Java UniformStickyPartitioner: KIP-480 sticky, keys ignored",
    "java-legacy-roundrobin": "Java before 2.4: murmur2 for keys, round robin over available "
    "partitions for null keys",
    "java-roundrobin": "Java RoundRobinPartitioner as shipped until 3.8 (KAFKA-9965: skips a "
    "partition whenever a record opens a batch)",
    "java-roundrobin-fixed": "Java RoundRobinPartitioner with the KAFKA-17632 fix (3.9/4.0)",
}
ALIASES = {
    "java-default": "java-builtin",
    "librdkafka-default": f"librdkafka-{DEFAULT_PARTITIONER}",
}


def _java(name: str) -> Factory:
    def build(rng: random.Random, settings: Settings) -> Partitioner:
        if name in ("java-builtin", "java-builtin-ignore-keys"):
            rule = KeyRule.NONE if name.endswith("ignore-keys") else KeyRule.NON_NULL
            unkeyed = BuiltInSticky(rng, settings.batch_size, settings.adaptive)
            return Partitioner(name, rule, JAVA_MURMUR2, unkeyed, False, DESCRIPTIONS[name])
        if name == "java-sticky":
            return Partitioner(
                name, KeyRule.NON_NULL, JAVA_MURMUR2, Kip480Sticky(rng), True, DESCRIPTIONS[name]
            )
        if name == "java-uniform-sticky":
            return Partitioner(
                name, KeyRule.NONE, JAVA_MURMUR2, Kip480Sticky(rng), True, DESCRIPTIONS[name]
            )
        if name == "java-legacy-roundrobin":
            return Partitioner(
                name,
                KeyRule.NON_NULL,
                JAVA_MURMUR2,
                LegacyRoundRobin(rng),
                False,
                DESCRIPTIONS[name],
            )
        fixed = name == "java-roundrobin-fixed"
        return Partitioner(
            name, KeyRule.NONE, JAVA_MURMUR2, RoundRobin(fixed=fixed), True, DESCRIPTIONS[name]
        )

    return build


def _librdkafka(variant: str) -> Factory:
    def build(rng: random.Random, settings: Settings) -> Partitioner:
        rule, key_hash = RULES[variant]
        unkeyed = LibrdkafkaSticky(
            rng,
            settings.sticky_linger_ms,
            sticky_for_empty_key=variant == "consistent_random",
        )
        description = f"librdkafka partitioner={variant}"
        if variant == DEFAULT_PARTITIONER:
            description += " (librdkafka's default)"
        return Partitioner(f"librdkafka-{variant}", rule, key_hash, unkeyed, False, description)

    return build


_FACTORIES: dict[str, Factory] = {name: _java(name) for name in DESCRIPTIONS}
for _variant in LIBRDKAFKA_PARTITIONERS:
    _FACTORIES[f"librdkafka-{_variant}"] = _librdkafka(_variant)
    DESCRIPTIONS[f"librdkafka-{_variant}"] = f"librdkafka partitioner={_variant}"


def names() -> tuple[str, ...]:
    """Every accepted name (aliases included), Java first."""
    java = sorted(n for n in (*_FACTORIES, *ALIASES) if n.startswith("java-"))
    librdkafka = sorted(n for n in (*_FACTORIES, *ALIASES) if n.startswith("librdkafka-"))
    return (*java, *librdkafka)


def canonical(name: str) -> str:
    """The registered name behind an alias; raises ``UnknownPartitionerError``."""
    resolved = ALIASES.get(name, name)
    if resolved not in _FACTORIES:
        raise UnknownPartitionerError(
            f"unknown partitioner; known: {', '.join(names())}", field="partitioner", value=name
        )
    return resolved


def create(
    name: str,
    *,
    rng: random.Random | None = None,
    settings: Settings | None = None,
    seed: int = 0,
) -> Partitioner:
    """A fresh partitioner; its random draws come from ``rng`` (or ``random.Random(seed)``)."""
    factory = _FACTORIES[canonical(name)]
    return factory(rng if rng is not None else random.Random(seed), settings or Settings())
