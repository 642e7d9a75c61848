"""score_owners' shortcuts give the row of the path each one skips, bit for bit, on the
generations of replayed traces."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest
from generated import generated_traces

from assignors import registry
from assignors.traces import replay as replay_module
from assignors.traces.format import Trace
from assignors.traces.replay import prepare, replay_with
from assignors.traces.scoring import GenerationShape, PreviousOwners, score_owners


def _traces(scenario: str, seed: int) -> list[Trace]:
    return generated_traces(scenario, seed)


def _scored_calls(
    monkeypatch: pytest.MonkeyPatch, scenario: str, assignor: str
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every (arguments, keywords) a replay of ``scenario``'s traces passes to score_owners."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return score_owners(*args, **kwargs)

    monkeypatch.setattr(replay_module, "score_owners", recording)
    for seed in (1, 2):
        for trace in _traces(scenario, seed):
            replay_with(trace, registry.get(assignor), timings=False, prepared=prepare(trace))
    monkeypatch.undo()
    return calls


def _with_one_unheld_partition(previous: PreviousOwners) -> PreviousOwners:
    """``previous`` and one more previous partition that nobody held and that is gone."""

    def more(values: np.ndarray | None, value: float) -> np.ndarray | None:
        return None if values is None else np.append(values, np.asarray([value], values.dtype))

    identity = more(previous.identity, -1)
    current = more(previous.current, -1)
    assert identity is not None and current is not None
    return previous._replace(
        identity=identity,
        current=current,
        weight=more(previous.weight, 0.0),
        order=more(previous.order, 0),
    )


SCENARIOS = ["mixed", "skewed-weights", "rack-outage", "subscription-change", "scale-in"]
ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_score_owners_when_every_previous_partition_was_held_equals_the_held_subset_path(
    monkeypatch: pytest.MonkeyPatch, scenario: str, assignor: str
) -> None:
    calls = _scored_calls(monkeypatch, scenario, assignor)
    every_one_held = 0
    for args, kwargs in calls:
        shape, owners, previous = args
        if previous is None:
            continue
        every_one_held += bool(previous.identity.size and previous.identity.min() >= 0)
        assert score_owners(shape, owners, previous, **kwargs) == score_owners(
            shape, owners, _with_one_unheld_partition(previous), **kwargs
        )
    assert every_one_held  # the shortcut was taken


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_score_owners_balance_check_when_every_member_is_considered_equals_the_masked_one(
    monkeypatch: pytest.MonkeyPatch, scenario: str, assignor: str
) -> None:
    calls = _scored_calls(monkeypatch, scenario, assignor)
    for args, kwargs in calls:
        shape, owners, previous = args
        masked: GenerationShape = dataclasses.replace(shape, all_considered=False)
        assert score_owners(shape, owners, previous, **kwargs) == score_owners(
            masked, owners, previous, **kwargs
        )


@pytest.mark.parametrize("scenario", ["mixed", "skewed-weights", "rack-outage"])
def test_generation_shape_keeps_each_partitions_class_and_index(
    monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    for args, _ in _scored_calls(monkeypatch, scenario, "range"):
        shape = args[0]
        assert shape.class_of_partition.tolist() == shape.class_of_topic[shape.topic_of].tolist()
        assert shape.partition_indexes.tolist() == list(range(shape.topic_of.size))
        assert shape.all_considered == (shape.considered.size == len(shape.member_ids))
        assert shape.topic_cells.tolist() == [
            topic * len(shape.member_ids) for topic in shape.topic_of.tolist()
        ]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("assignor", ["range", "sticky", "cooperative-sticky"])
def test_score_owners_reading_the_carried_partitions_a_replay_keeps_equals_working_them_out(
    monkeypatch: pytest.MonkeyPatch, scenario: str, assignor: str
) -> None:
    kept = 0
    for args, kwargs in _scored_calls(monkeypatch, scenario, assignor):
        shape, owners, previous = args
        if previous is None:
            continue
        assert previous.carried is not None
        kept += 1
        carried = previous.carried
        assert carried.exists.tolist() == (previous.current >= 0).tolist()
        exists = carried.exists
        assert carried.topic[exists].tolist() == shape.topic_of[previous.current[exists]].tolist()
        assert (
            carried.class_of[exists].tolist()
            == shape.class_of_partition[previous.current[exists]].tolist()
        )
        everyone = shape.subscribes_all and shape.topic_of.size and shape.member_ids
        assert carried.churn_bits.tolist() == [2 * e + (8 if everyone else 0) for e in exists]
        assert score_owners(shape, owners, previous, **kwargs) == score_owners(
            shape, owners, previous._replace(carried=None), **kwargs
        )
    assert kept


def _same_shape(made: GenerationShape, fresh: GenerationShape) -> None:
    for field in dataclasses.fields(GenerationShape):
        left, right = getattr(made, field.name), getattr(fresh, field.name)
        if field.name == "group":
            assert left is not None and left.members == right.members, field.name
        elif field.name == "hall":
            assert (left is None) == (right is None), field.name
            for left_part, right_part in zip(left or (), right or (), strict=True):
                assert left_part.tolist() == right_part.tolist(), field.name
        elif isinstance(left, np.ndarray):
            assert left.dtype == right.dtype and left.tolist() == right.tolist(), field.name
        else:
            assert left == right, field.name


def test_generation_shape_repeating_an_earlier_generations_subscriptions_equals_a_fresh_one() -> (
    None
):
    reused = 0
    for scenario, seed in itertools.product(
        [*SCENARIOS, "static-rolling-restart", "rolling-restart"], (1, 2, 3)
    ):
        for trace in _traces(scenario, seed):
            steps = prepare(trace).steps
            for position, step in enumerate(steps):
                fresh = GenerationShape.of(step.shape.group, None, step.member_identities)
                _same_shape(step.shape, fresh)
                assert step.shape.group is not None
                reused += any(
                    earlier.shape.subscribed is step.shape.subscribed
                    for earlier in steps[:position]
                )
    assert reused


def test_generation_shape_of_other_members_with_the_same_subscriptions_names_them() -> None:
    from assignors.model import Group, Member, Topic
    from assignors.traces.scoring import ShapeCache

    topics = (Topic("a", 3), Topic("b", 2))
    cache = ShapeCache()
    first = Group(topics, (Member("c0", frozenset("ab"), rack="r"), Member("c1", frozenset("a"))))
    renamed = Group(
        topics,
        (Member("d0", frozenset("ab"), rack="r"), Member("d1", frozenset("a"), instance_id="i")),
    )
    made = GenerationShape.of(first, cache)
    again = GenerationShape.of(renamed, cache)
    assert again.classes is made.classes
    assert again.group is renamed and again.member_ids == ("d0", "d1")
    assert again.speaker == {"d0": 0, "i": 1}
    _same_shape(again, GenerationShape.of(renamed))


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_score_owners_when_everyone_subscribes_to_everything_equals_looking_subscriptions_up(
    monkeypatch: pytest.MonkeyPatch, scenario: str, assignor: str
) -> None:
    everyone = 0
    for args, kwargs in _scored_calls(monkeypatch, scenario, assignor):
        shape, owners, previous = args
        if not shape.subscribes_all:
            continue
        everyone += 1
        looked_up = dataclasses.replace(shape, subscribes_all=False)
        assert score_owners(shape, owners, previous, **kwargs) == score_owners(
            looked_up, owners, previous, **kwargs
        )
    assert everyone


def test_least_moved_of_keys_all_with_a_keeper_equals_dropping_the_keeperless() -> None:
    from assignors.model import Group, Member, Topic
    from assignors.traces.scoring import _least_moved_if_reachable, subscription_classes

    classes = subscription_classes(
        Group(
            (Topic("a", 6), Topic("b", 3)),
            (
                Member("x", frozenset({"a"})),
                Member("y", frozenset({"a", "b"})),
                Member("z", frozenset({"b"})),
            ),
        )
    )
    keys = np.array([0, 0, 1]), np.array([0, 1, 2]), np.array([5, 1, 2])
    # one more key of nobody's, holding nothing: the general path drops it
    with_nobody = tuple(np.append(key, extra) for key, extra in zip(keys, (1, -1, 0), strict=True))
    for capacity in range(2, 7):
        assert _least_moved_if_reachable(classes, *keys, capacity) == _least_moved_if_reachable(
            classes, *with_nobody, capacity
        )


def test_carried_partitions_of_a_generation_with_the_previous_ones_space_are_read_in_place() -> (
    None
):
    in_place = 0
    for trace in _traces("scale-out", 1):
        for step in prepare(trace).steps[1:]:
            assert step.current is not None and step.carried is not None
            if step.current is not step.shape.partition_indexes:
                continue
            in_place += 1
            # the same as gathering at every index
            assert step.carried.topic.tolist() == step.shape.topic_of.tolist()
            assert step.carried.class_of.tolist() == step.shape.class_of_partition.tolist()
            assert step.carried.exists.all()
    assert in_place


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("assignor", ["range", "sticky", "cooperative-sticky"])
def test_score_owners_of_partitions_all_where_they_were_equals_looking_each_one_up(
    monkeypatch: pytest.MonkeyPatch, scenario: str, assignor: str
) -> None:
    in_place = 0
    for args, kwargs in _scored_calls(monkeypatch, scenario, assignor):
        shape, owners, previous = args
        if previous is None or previous.current is not shape.partition_indexes:
            continue
        in_place += 1
        # an equal array that is not the shape's own: each partition's owner is looked up
        looked_up = previous._replace(current=previous.current.copy(), carried=None)
        assert score_owners(shape, owners, previous, **kwargs) == score_owners(
            shape, owners, looked_up, **kwargs
        )
    assert in_place
