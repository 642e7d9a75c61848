"""Groups whose members are made on first read (a replay's groups from owner arrays): such a
group equals, prints, hashes and pickles as the group made with its members, makes them once,
and the readers that take members' ids, topics, racks and instance ids from the group's member
columns give what they gave from the members."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import pytest
from generated import generated_traces
from hypothesis import HealthCheck, given, settings
from strategies import groups

from assignors import arrays, registry, sticky
from assignors.arrays import GroupArrays
from assignors.model import Group, Member, MemberColumns
from assignors.traces import replay

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _columns(members: tuple[Member, ...]) -> MemberColumns:
    return (
        tuple(member.member_id for member in members),
        tuple(member.topics for member in members),
        tuple(member.rack for member in members),
        tuple(member.instance_id for member in members),
    )


def _made(
    group: Group, members: tuple[Member, ...] | Callable[[], tuple[Member, ...]], columns: bool
) -> Group:
    return Group.checked(
        group.topics,
        members,
        {topic.name: topic for topic in group.topics},
        None,
        None,
        None,
        _columns(group.members) if columns else None,
    )


class _Maker:
    """Makes a group's members (fresh objects equal to ``members``), counting its calls."""

    def __init__(self, members: tuple[Member, ...]) -> None:
        self.members = members
        self.calls = 0

    def __call__(self) -> tuple[Member, ...]:
        self.calls += 1
        return tuple(copy.copy(member) for member in self.members)


def _lazy(group: Group, columns: bool = True) -> tuple[Group, _Maker]:
    maker = _Maker(group.members)
    return _made(group, maker, columns), maker


def _hash_or_error(group: Group) -> object:
    try:
        return hash(group)
    except TypeError as error:
        return str(error)


@SETTINGS
@given(groups(min_members=0))
def test_a_group_with_members_made_on_first_read_is_the_group_made_with_them(
    group: Group,
) -> None:
    """Equal (both ways), the same repr and hash, pickled to the same bytes, copied equal."""
    for columns in (True, False):
        eager = _made(group, group.members, columns)
        # each check starts from a group whose members are not made yet
        checks: list[Callable[[Group], object]] = [
            lambda lazy, eager=eager: lazy == eager,  # type: ignore[misc]
            lambda lazy, eager=eager: eager == lazy,  # type: ignore[misc]
            lambda lazy, eager=eager: (lazy != eager) is False,  # type: ignore[misc]
            lambda lazy, eager=eager: repr(lazy) == repr(eager),  # type: ignore[misc]
            lambda lazy, eager=eager: _hash_or_error(lazy) == _hash_or_error(eager),  # type: ignore[misc]
            lambda lazy, eager=eager: pickle.dumps(lazy) == pickle.dumps(eager),  # type: ignore[misc]
            lambda lazy, eager=eager: pickle.loads(pickle.dumps(lazy)) == eager,  # type: ignore[misc]
            lambda lazy, eager=eager: copy.copy(lazy) == eager,  # type: ignore[misc]
            lambda lazy, eager=eager: copy.deepcopy(lazy) == eager,  # type: ignore[misc]
            lambda lazy, eager=eager: lazy.members == eager.members,  # type: ignore[misc]
        ]
        for position, check in enumerate(checks):
            lazy, maker = _lazy(group, columns)
            assert check(lazy), position
            assert maker.calls == 1
    # a maker that cannot be pickled is dropped once the members are made
    lazy = _made(group, lambda: group.members, columns=True)
    assert pickle.dumps(lazy) == pickle.dumps(_made(group, group.members, columns=True))


@SETTINGS
@given(groups(min_members=0))
def test_a_group_makes_its_members_once_on_first_read(group: Group) -> None:
    lazy, maker = _lazy(group)
    assert maker.calls == 0
    lazy.partition_space()
    assert maker.calls == 0
    first = lazy.members
    assert lazy.members is first and lazy == group and repr(lazy)
    assert maker.calls == 1


def test_a_group_without_members_or_their_maker_names_the_missing_attribute() -> None:
    made = object.__new__(Group)
    with pytest.raises(AttributeError, match="'members'"):
        made.members  # noqa: B018
    lazy, _ = _lazy(Group((), ()))
    with pytest.raises(AttributeError, match="'no_such_thing'"):
        lazy.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    assert lazy.members == ()


@SETTINGS
@given(groups(min_members=0))
def test_members_fields_racks_count_and_topics_read_from_the_columns_are_the_members_own(
    group: Group,
) -> None:
    members_racks = tuple(member.rack for member in group.members)
    members_have_racks = any(rack is not None for rack in members_racks) and any(
        topic.replica_racks is not None for topic in group.topics
    )
    for columns in (True, False):
        lazy, maker = _lazy(group, columns)
        assert lazy.racks() == members_racks
        assert lazy.has_racks() == members_have_racks
        assert lazy.num_members() == len(group.members)
        assert lazy.member_fields() == _columns(group.members)
        assert lazy.subscribed_topics() == group.subscribed_topics()
        assert maker.calls == (0 if columns else 1)


_LAYOUT_FIELDS = (
    "topics",
    "space",
    "member_ids",
    "member_topics",
    "instance_ids",
    "subscriptions",
    "rank",
    "topic_of",
)


@SETTINGS
@given(groups(min_members=0))
def test_a_layout_made_from_member_columns_is_the_one_made_from_the_members(group: Group) -> None:
    lazy, maker = _lazy(group)
    from_columns = arrays._Layout.of(lazy)
    assert maker.calls == 0
    from_members = arrays._Layout.of(_made(group, group.members, columns=False))
    for name in _LAYOUT_FIELDS:
        left, right = getattr(from_columns, name), getattr(from_members, name)
        if name in ("rank", "topic_of"):
            assert left.dtype == right.dtype and left.tolist() == right.tolist(), name
        else:
            assert left == right, name
    assert from_members.describes(lazy) and from_columns.describes(group)


def _traces() -> list:
    made = []
    for scenario, seed in (("mixed", 3), ("static-rolling-restart", 4), ("crash-loop", 5)):
        made += generated_traces(scenario, seed, members=(2, 9), partitions=(4, 60), source=None)
    return made


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_a_sticky_replay_assigns_and_scores_its_groups_without_making_their_members(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Group] = []
    built: list[int] = []
    from_owners, members_of = replay._group_from_owners, replay._members_of

    def capture(*arguments):  # type: ignore[no-untyped-def]
        group = from_owners(*arguments)
        made.append(group)
        return group

    def count(*arguments):  # type: ignore[no-untyped-def]
        built.append(1)
        return members_of(*arguments)

    monkeypatch.setattr(replay, "_group_from_owners", capture)
    monkeypatch.setattr(replay, "_members_of", count)
    traces = _traces()
    assert any(member.rack for trace in traces for g in trace.generations for member in g.members)
    for trace in traces:
        replay.replay_with(trace, registry.get(name), timings=False)
    assert made and not built


@SETTINGS
@given(groups(min_members=0, racks=True))
def test_a_rack_map_made_from_member_columns_is_the_one_made_from_the_members(
    group: Group,
) -> None:
    lazy, maker = _lazy(group)
    space = group.partition_space()
    subscriptions = GroupArrays.of(group).subscriptions
    from_columns = sticky._RackMap.build(lazy, space, subscriptions)
    assert maker.calls == 0
    from_members = sticky._RackMap.build(_made(group, group.members, False), space, subscriptions)
    if from_members is None or from_columns is None:
        assert from_members is from_columns is None
        return
    names = sorted({member.rack for member in group.members if member.rack is not None})
    assert from_columns.member_rack.tolist() == [
        -1 if member.rack is None else names.index(member.rack) for member in group.members
    ]
    for name in ("local", "member_rack", "codes"):
        left, right = getattr(from_columns, name), getattr(from_members, name)
        assert (left is None) == (right is None), name
        if left is not None:
            assert left.dtype == right.dtype and left.tolist() == right.tolist(), name
