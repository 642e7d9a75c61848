"""Properties every built-in assignor keeps on random groups: a valid assignment, a fixed point
when fed its own answer, and an answer that does not depend on the order of the request."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import groups, next_round

from assignors import registry
from assignors.base import Assignor
from assignors.model import Assignment, Group, TopicPartition
from assignors.protocol.request import group_to_request, parse_request

BUILTINS = registry.builtin_names()
PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
# cooperative assignors hand withheld partitions out in follow-up rounds
MAX_ROUNDS_TO_SETTLE = 4


def _assignor(name: str) -> Assignor:
    return registry.get(name)


def _check_valid(group: Group, assignment: Assignment, cooperative: bool) -> None:
    members = {member.member_id: member for member in group.members}
    assert set(assignment.partitions) == set(members), "every member present, no strangers"
    expected = set(group.subscribed_partitions())
    seen: set[TopicPartition] = set()
    for member_id, partitions in assignment.partitions.items():
        for tp in partitions:
            assert tp not in seen, f"{tp} assigned twice"
            seen.add(tp)
            assert tp.topic in members[member_id].topics, f"{tp} given to non-subscriber"
    withheld = set(assignment.withheld)
    if cooperative:
        assert not withheld & seen, "a withheld partition is also assigned"
        assert seen | withheld == expected, "assigned and withheld together cover everything"
    else:
        assert not withheld, "an eager assignor withholds nothing"
        assert seen == expected, "every subscribed partition assigned"


def _settled(assignor: Assignor, group: Group) -> tuple[Group, Assignment]:
    """The group and answer once nothing is withheld (at once for eager assignors)."""
    assignment = assignor.assign(group)
    for _ in range(MAX_ROUNDS_TO_SETTLE):
        if not assignment.withheld:
            return group, assignment
        group = next_round(group, assignment)
        assignment = assignor.assign(group)
    assert not assignment.withheld, f"still withholding after {MAX_ROUNDS_TO_SETTLE} rounds"
    return group, assignment


@pytest.mark.parametrize("name", BUILTINS)
@PROPERTY_SETTINGS
@given(group=groups(min_members=0))
def test_assignment_is_valid(name: str, group: Group):
    assignor = _assignor(name)
    _check_valid(group, assignor.assign(group), assignor.rebalance_protocol == "cooperative")


@pytest.mark.parametrize("name", BUILTINS)
@PROPERTY_SETTINGS
@given(group=groups(min_members=0, max_members=0))
def test_empty_group_gets_empty_assignment(name: str, group: Group):
    assignment = _assignor(name).assign(group)
    assert dict(assignment.partitions) == {}
    assert assignment.withheld == ()


@pytest.mark.parametrize("racks", [False, True], ids=["no-racks", "racks"])
@pytest.mark.parametrize("name", BUILTINS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_feeding_back_the_answer_changes_nothing(name: str, racks: bool, data: st.DataObject):
    assignor = _assignor(name)
    group = data.draw(groups(racks=racks), label="group")
    group, assignment = _settled(assignor, group)
    again = assignor.assign(next_round(group, assignment))
    assert again == assignment


@pytest.mark.parametrize("name", BUILTINS)
@PROPERTY_SETTINGS
@given(group=groups(), seed=st.integers(0, 2**32 - 1))
def test_request_order_does_not_change_the_answer(name: str, group: Group, seed: int):
    assignor = _assignor(name)
    request = group_to_request(group, name)
    shuffler = random.Random(seed)
    shuffled = json.loads(json.dumps(request))
    shuffler.shuffle(shuffled["topics"])
    shuffler.shuffle(shuffled["members"])
    for member in shuffled["members"]:
        shuffler.shuffle(member["topics"])
        shuffler.shuffle(member.get("owned", []))
    original = assignor.assign(parse_request(request).group)
    reordered = assignor.assign(parse_request(shuffled).group)
    assert reordered == original
