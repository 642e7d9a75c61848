"""Seeded synthetic rebalance traces for what-if studies (format v1 rows).

Each scenario tells the story of one group: a rolling restart (dynamic members leave and rejoin
under new ids; static members come back under the same instance id), scaling out or in, a member
in a crash loop, a flapping member, topics growing partitions, a new topic rolled into the
subscriptions, a rack going dark and coming back, skewed partition weights under churn; ``mixed``
picks one of them per group. The same scenario, seed and sizes always give the same rows.

>>> rows = list(generate_rows("scale-out", groups=1, seed=7, members=(2, 2), partitions=(4, 4)))
>>> [(row["generation"], len(row["members"]), row["reason"]) for row in rows][:3]
[(1, 2, 'initial join'), (2, 3, 'scale out: consumer-2-0003 joined'), (3, 4, 'scale out: \
consumer-3-0004 joined')]
>>> sum(topic["partitions"] for topic in rows[0]["topics"])
4

Sizes go from a few members to thousands and up to 10^5 partitions per group; a scenario that
would need more generations than ``max_generations`` (a rolling restart of 2,000 members) stops
there.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from assignors.errors import InputError

START_MS = 1_762_000_000_000
RACKS = ("az1", "az2", "az3")

SCENARIOS = (
    "rolling-restart",
    "static-rolling-restart",
    "scale-out",
    "scale-in",
    "crash-loop",
    "flapping",
    "partition-expansion",
    "subscription-change",
    "rack-outage",
    "skewed-weights",
    "mixed",
)

MAX_PARTITIONS_PER_GROUP = 100_000


@dataclass(slots=True)
class _TopicState:
    name: str
    partitions: int
    racks: list[list[str]] | None
    weights: list[float] | None


@dataclass(slots=True)
class _MemberState:
    slot: int
    member_id: str
    instance_id: str | None
    rack: str | None
    topics: list[str]


@dataclass(slots=True)
class _Story:
    """A group being told: mutable state plus the rows emitted so far."""

    trace_id: str
    rng: random.Random
    max_generations: int
    topics: list[_TopicState] = field(default_factory=list)
    members: list[_MemberState] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    static: bool = False
    with_racks: bool = False
    weight_style: str | None = None
    next_sequence: int = 1
    next_slot: int = 0
    clock_ms: int = START_MS

    @property
    def full(self) -> bool:
        return len(self.rows) >= self.max_generations

    # --- building blocks -------------------------------------------------------------------

    def new_member(
        self, topics: list[str], slot: int | None = None, rack: str | None = None
    ) -> _MemberState:
        if slot is None:
            slot = self.next_slot
            self.next_slot += 1
        member_id = f"consumer-{slot}-{self.next_sequence:04d}"
        self.next_sequence += 1
        if rack is None and self.with_racks:
            rack = RACKS[slot % len(RACKS)]
        return _MemberState(
            slot, member_id, f"pod-{slot}" if self.static else None, rack, list(topics)
        )

    def rejoined(self, member: _MemberState) -> _MemberState:
        """The same process after a restart: a new member id, the same slot, rack and topics."""
        return self.new_member(member.topics, slot=member.slot, rack=member.rack)

    def replica_racks(self, count: int) -> list[list[str]]:
        return [sorted(self.rng.sample(RACKS, 2)) for _ in range(count)]

    def weights(self, count: int) -> list[float]:
        if self.weight_style == "skewed":
            # a few hot partitions carry most of the load (Pareto tail)
            return [round(self.rng.paretovariate(1.2), 3) for _ in range(count)]
        return [round(self.rng.lognormvariate(0.0, 0.8), 3) for _ in range(count)]

    def new_topic(self, name: str, partitions: int) -> _TopicState:
        return _TopicState(
            name,
            partitions,
            self.replica_racks(partitions) if self.with_racks else None,
            self.weights(partitions) if self.weight_style else None,
        )

    def grow(self, topic: _TopicState, extra: int) -> None:
        topic.partitions += extra
        if topic.racks is not None:
            topic.racks.extend(self.replica_racks(extra))
        if topic.weights is not None:
            topic.weights.extend(self.weights(extra))

    def emit(self, reason: str) -> None:
        if self.full:
            return
        if self.rows:
            self.clock_ms += self.rng.randint(3_000, 90_000)
        topics = []
        for topic in self.topics:
            topic_row: dict[str, Any] = {"name": topic.name, "partitions": topic.partitions}
            if topic.racks is not None:
                topic_row["racks"] = [list(racks) for racks in topic.racks]
            if topic.weights is not None:
                topic_row["weights"] = list(topic.weights)
            topics.append(topic_row)
        members = [
            {
                "member_id": member.member_id,
                "instance_id": member.instance_id,
                "rack": member.rack,
                "topics": sorted(member.topics),
            }
            for member in self.members
        ]
        self.rows.append(
            {
                "trace_id": self.trace_id,
                "generation": len(self.rows) + 1,
                "timestamp_ms": self.clock_ms,
                "reason": reason,
                "topics": topics,
                "members": members,
            }
        )


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` partitions over ``parts`` topics, every topic at least one."""
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 else []
    bounds = [0, *cuts, total]
    return [high - low for low, high in itertools.pairwise(bounds)]


def _setup(story: _Story, num_members: int, num_partitions: int) -> None:
    rng = story.rng
    num_topics = rng.randint(1, max(1, min(5, num_partitions)))
    for position, count in enumerate(_split(num_partitions, num_topics, rng)):
        story.topics.append(story.new_topic(f"topic-{position}", count))
    names = [topic.name for topic in story.topics]
    uniform = rng.random() < 0.6
    for _ in range(num_members):
        topics = names if uniform else sorted(rng.sample(names, rng.randint(1, len(names))))
        story.members.append(story.new_member(topics))
    story.emit("initial join")


def _subscription(story: _Story) -> list[str]:
    """Topics for a newcomer: what most members subscribe to."""
    if not story.members:
        return [topic.name for topic in story.topics]
    return list(story.rng.choice(story.members).topics)


# --- scenarios ---------------------------------------------------------------------------------


def _rolling_restart(story: _Story) -> None:
    for position in range(len(story.members)):
        if story.full:
            return
        member = story.members[position]
        if story.static:
            # a static member rejoins under its instance id before the session times out
            story.members[position] = story.rejoined(member)
            story.emit(f"{member.instance_id} restarted as {story.members[position].member_id}")
        else:
            del story.members[position]
            story.emit(f"{member.member_id} left for restart")
            story.members.insert(position, story.rejoined(member))
            story.emit(f"{member.member_id} restarted as {story.members[position].member_id}")


def _scale_out(story: _Story) -> None:
    target = len(story.members) * 2
    while len(story.members) < target and not story.full:
        step = story.rng.randint(1, max(1, len(story.members) // 4))
        joined = [story.new_member(_subscription(story)) for _ in range(step)]
        story.members.extend(joined)
        story.emit(f"scale out: {', '.join(member.member_id for member in joined)} joined")


def _scale_in(story: _Story) -> None:
    target = max(1, len(story.members) // 2)
    while len(story.members) > target and not story.full:
        step = story.rng.randint(1, max(1, (len(story.members) - target) // 2))
        leaving = story.rng.sample(range(len(story.members)), step)
        gone = [story.members[index] for index in sorted(leaving)]
        story.members = [m for index, m in enumerate(story.members) if index not in set(leaving)]
        story.emit(f"scale in: {', '.join(member.member_id for member in gone)} left")


def _crash_loop(story: _Story) -> None:
    position = story.rng.randrange(len(story.members))
    for _ in range(story.rng.randint(3, 8)):
        if story.full:
            return
        victim = story.members.pop(position)
        story.emit(f"{victim.member_id} crashed (session timeout)")
        story.members.insert(position, story.rejoined(victim))
        story.emit(f"{victim.member_id} came back as {story.members[position].member_id}")


def _flapping(story: _Story) -> None:
    position = story.rng.randrange(len(story.members))
    flapper = story.members[position]
    for _ in range(story.rng.randint(3, 8)):
        if story.full:
            return
        story.members.remove(flapper)
        story.emit(f"{flapper.member_id} missed heartbeats and was removed")
        story.members.insert(position, flapper)
        story.emit(f"{flapper.member_id} rejoined")


def _partition_expansion(story: _Story) -> None:
    for _ in range(story.rng.randint(2, 5)):
        if story.full:
            return
        topic = story.rng.choice(story.topics)
        extra = max(1, topic.partitions // story.rng.choice((2, 3, 4)))
        if sum(t.partitions for t in story.topics) + extra > MAX_PARTITIONS_PER_GROUP:
            return
        story.grow(topic, extra)
        story.emit(f"{topic.name} grew to {topic.partitions} partitions")
        if story.rng.random() < 0.5:
            member = story.new_member(_subscription(story))
            story.members.append(member)
            story.emit(f"{member.member_id} joined to follow the growth")


def _subscription_change(story: _Story) -> None:
    name = f"topic-{len(story.topics)}"
    room = MAX_PARTITIONS_PER_GROUP - sum(topic.partitions for topic in story.topics)
    wanted = story.rng.randint(1, max(1, story.topics[0].partitions))
    story.topics.append(story.new_topic(name, max(0, min(wanted, room))))
    story.emit(f"{name} created")
    # a rolling deploy adds the new topic one member at a time, then drops the oldest topic
    oldest = story.topics[0].name
    for position in range(len(story.members)):
        if story.full:
            return
        member = story.members[position]
        member.topics = sorted({*member.topics, name} - {oldest}) or [name]
        story.emit(f"{member.member_id} now subscribes to {', '.join(member.topics)}")


def _rack_outage(story: _Story) -> None:
    dark = story.rng.choice(RACKS)
    left = [member for member in story.members if member.rack == dark]
    if not left or len(left) == len(story.members):
        _scale_in(story)
        return
    story.members = [member for member in story.members if member.rack != dark]
    story.emit(f"rack {dark} unreachable: {len(left)} members lost")
    for _ in range(story.rng.randint(1, 3)):
        story.emit("waiting for the rack to recover")
    for member in left:
        if story.full:
            return
        story.members.append(story.rejoined(member))
        story.emit(f"rack {dark} back: {story.members[-1].member_id} joined")


def _churn(story: _Story) -> None:
    """Random joins and leaves (used under skewed weights)."""
    for _ in range(story.rng.randint(4, 10)):
        if story.full:
            return
        if len(story.members) > 1 and story.rng.random() < 0.5:
            gone = story.members.pop(story.rng.randrange(len(story.members)))
            story.emit(f"{gone.member_id} left")
        else:
            member = story.new_member(_subscription(story))
            story.members.append(member)
            story.emit(f"{member.member_id} joined")


_SCENARIO_STEPS: dict[str, Callable[[_Story], None]] = {
    "rolling-restart": _rolling_restart,
    "static-rolling-restart": _rolling_restart,
    "scale-out": _scale_out,
    "scale-in": _scale_in,
    "crash-loop": _crash_loop,
    "flapping": _flapping,
    "partition-expansion": _partition_expansion,
    "subscription-change": _subscription_change,
    "rack-outage": _rack_outage,
    "skewed-weights": _churn,
}


def _check_range(name: str, bounds: tuple[int, int], low: int, high: int) -> None:
    first, last = bounds
    if not low <= first <= last <= high:
        raise InputError(
            f"must be a range within {low}-{high}", field=name, value=f"{first}-{last}"
        )


def generate_group(
    scenario: str,
    index: int,
    seed: int,
    *,
    members: tuple[int, int] = (3, 12),
    partitions: tuple[int, int] = (8, 200),
    max_generations: int = 24,
) -> list[dict[str, Any]]:
    """The rows of group number ``index`` of a generated set (see :func:`generate_rows`)."""
    if scenario not in SCENARIOS:
        raise InputError(
            f"unknown scenario; known: {', '.join(SCENARIOS)}", field="scenario", value=scenario
        )
    _check_range("members", members, 1, 100_000)
    _check_range("partitions", partitions, 1, MAX_PARTITIONS_PER_GROUP)
    if max_generations < 1:
        raise InputError("must be >= 1", field="generations", value=max_generations)
    rng = random.Random(f"ktk-traces/{seed}/{scenario}/{index}")
    story_kind = (
        rng.choice([name for name in SCENARIOS if name != "mixed"])
        if scenario == "mixed"
        else scenario
    )
    trace_id = f"{story_kind}-s{seed}-{index:04d}"
    story = _Story(trace_id, rng, max_generations)
    story.static = story_kind == "static-rolling-restart" or (
        story_kind != "rolling-restart" and rng.random() < 0.3
    )
    story.with_racks = story_kind == "rack-outage" or rng.random() < 0.25
    story.weight_style = (
        "skewed"
        if story_kind == "skewed-weights"
        else ("lognormal" if rng.random() < 0.4 else None)
    )
    _setup(story, rng.randint(*members), rng.randint(*partitions))
    _SCENARIO_STEPS[story_kind](story)
    return story.rows


def generate_rows(
    scenario: str,
    groups: int,
    seed: int,
    *,
    members: tuple[int, int] = (3, 12),
    partitions: tuple[int, int] = (8, 200),
    max_generations: int = 24,
) -> Iterator[dict[str, Any]]:
    """Format-v1 rows of ``groups`` generated traces, group after group.

    ``members`` and ``partitions`` are inclusive ranges the initial size of each group is drawn
    from; each group has its own random stream derived from (seed, scenario, index).
    """
    if groups < 0:
        raise InputError("must be >= 0", field="groups", value=groups)
    for index in range(groups):
        yield from generate_group(
            scenario,
            index,
            seed,
            members=members,
            partitions=partitions,
            max_generations=max_generations,
        )


def parse_size_range(text: str, name: str) -> tuple[int, int]:
    """``"3-12"`` -> (3, 12); ``"500"`` -> (500, 500).

    >>> parse_size_range("3-12", "members"), parse_size_range("500", "members")
    ((3, 12), (500, 500))
    """
    low_text, separator, high_text = text.partition("-")
    try:
        low = int(low_text)
        high = int(high_text) if separator else low
    except ValueError:
        raise InputError("must be N or LOW-HIGH", field=name, value=text) from None
    if low > high:
        raise InputError("LOW must not exceed HIGH", field=name, value=text)
    return low, high
