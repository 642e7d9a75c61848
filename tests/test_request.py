"""The assignment-request JSON: parsing, every rejected input, and the rendered results."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from strategies import groups

from assignors.errors import InputError
from assignors.model import Assignment, Group, TopicPartition
from assignors.protocol.request import (
    assignment_result,
    dumps,
    group_to_request,
    parse_request,
    read_requests,
    run,
)

VALID = {
    "name": "r1",
    "assignor": "range",
    "topics": [
        {"name": "t0", "partitions": 3, "racks": [["a", "b"], ["b"], []], "weights": [1, 5.0, 0.5]},
        {"name": "t1", "partitions": 2},
    ],
    "members": [
        {
            "id": "c0",
            "topics": ["t0"],
            "owned": [["t0", 0], ["t0", 2]],
            "generation": 1,
            "rack": "a",
            "instance_id": "pod-0",
        },
        {"id": "c1", "topics": ["t0", "t1"]},
        {"id": "c2", "topics": ["t1"]},
    ],
}


def with_change(path: str, value: object) -> dict:
    """VALID with the field at a dotted path (list indexes as numbers) replaced or deleted."""
    request = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    target: object = request
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]  # type: ignore[index]
    key: int | str = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]  # type: ignore[index, arg-type]
    else:
        target[key] = value  # type: ignore[index]
    return request


DELETE = object()


def error_of(request: object, **options: object) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_request(request, **options)  # type: ignore[arg-type]
    return caught.value


def test_valid_request_parses_every_field():
    name, assignor, group = parse_request(VALID)
    assert (name, assignor) == ("r1", "range")
    t0 = group.topic("t0")
    assert t0 is not None
    assert t0.replica_racks == (frozenset({"a", "b"}), frozenset({"b"}), frozenset())
    assert t0.weights == (1.0, 5.0, 0.5)
    c0 = group.members[0]
    assert c0.owned_partitions == (TopicPartition("t0", 0), TopicPartition("t0", 2))
    assert (c0.generation, c0.rack, c0.instance_id) == (1, "a", "pod-0")
    assert group.members[1].generation == -1


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("assignor", DELETE, "assignor", "missing"),
        ("assignor", 7, "assignor", "must be a string"),
        ("assignor", "fancy", "assignor", "unknown assignor"),
        ("name", 3, "name", "must be a string"),
        ("topics", DELETE, "topics", "missing"),
        ("topics", {"t0": 3}, "topics", "must be a list"),
        ("topics.1", "t1", "topics[1]", "must be an object"),
        ("topics.1.name", "", "topics[1].name", "non-empty string name"),
        ("topics.1.name", "t0", "topics[1].name", "duplicate topic name"),
        ("topics.1.partitions", DELETE, "topics[1].partitions", "missing"),
        ("topics.1.partitions", "2", "topics[1].partitions", "must be an integer"),
        ("topics.1.partitions", True, "topics[1].partitions", "must be an integer"),
        ("topics.1.partitions", -2, "topics[1].partitions", "cannot be negative"),
        ("topics.1.partitions", 0, "topics[1].partitions", "at least one partition"),
        ("topics.1.partitions", 2**31, "topics[1].partitions", "32-bit integer"),
        ("topics.0.racks", [["a"], ["b"]], "topics[0].racks", "one entry per partition (3), has 2"),
        ("topics.0.racks", "a", "topics[0].racks", "must be a list"),
        ("topics.0.racks", [["a"], "b", []], "topics[0].racks[1]", "list of non-empty rack names"),
        ("topics.0.racks", [["a"], [""], []], "topics[0].racks[1]", "list of non-empty rack names"),
        ("topics.0.weights", [1, 2], "topics[0].weights", "one entry per partition"),
        ("topics.0.weights", [1, -2, 3], "topics[0].weights[1]", "finite and >= 0"),
        ("topics.0.weights", [1, "x", 3], "topics[0].weights[1]", "must be a number"),
        ("topics.0.weights", [1, float("nan"), 3], "topics[0].weights[1]", "finite"),
        ("topics.0.partition", 3, "topics[0].partition", "unknown field"),
        ("member", [], "member", "unknown field"),
        ("members", DELETE, "members", "missing"),
        ("members", "c0", "members", "must be a list"),
        ("members.2", ["c2"], "members[2]", "must be an object"),
        ("members.2.id", DELETE, "members[2].id", "non-empty string id"),
        ("members.2.id", 2, "members[2].id", "non-empty string id"),
        ("members.2.id", "c0", "members[2].id", "duplicate member id"),
        ("members.2.topics", DELETE, "members[2].topics", "missing"),
        ("members.2.topics", "t1", "members[2].topics", "must be a list of topic names"),
        ("members.2.topics", ["t1", 1], "members[2].topics", "must be a list of topic names"),
        ("members.0.owned", {"t0": 0}, "members[0].owned", "must be a list"),
        ("members.0.owned", [["t0", 0], ["t0"]], "members[0].owned[1]", "[topic, partition] pair"),
        ("members.0.owned", [["t0", "1"]], "members[0].owned[0]", "[topic, partition] pair"),
        ("members.0.generation", "1", "members[0].generation", "integer >= -1"),
        ("members.0.generation", -5, "members[0].generation", "integer >= -1"),
        ("members.0.generation", 2**31, "members[0].generation", "32-bit integer"),
        ("members.0.rack", 1, "members[0].rack", "must be a string"),
        ("members.0.instance_id", 1, "members[0].instance_id", "must be a string"),
        ("members.1.instance_id", "pod-0", "members[1].instance_id", "duplicate instance_id"),
        ("members.1.group", "g", "members[1].group", "unknown field"),
    ],
)
def test_bad_field_is_rejected_naming_its_path(path, value, field, message):
    error = error_of(with_change(path, value))
    assert error.field == field
    assert message in error.message


def test_request_that_is_not_an_object_is_rejected():
    assert "JSON object" in error_of([VALID]).message


def test_bad_value_is_quoted_in_the_message():
    error = error_of(with_change("topics.1.partitions", -2))
    assert str(error) == "topics[1].partitions: a partition count cannot be negative (got -2)"


def test_owned_partitions_of_unknown_topics_or_beyond_the_count_are_dropped():
    owned = [["t0", 0], ["gone", 0], ["t0", 3], ["t0", -1], ["t1", 1]]
    group = parse_request(with_change("members.0.owned", owned)).group
    assert group.members[0].owned_partitions == (TopicPartition("t0", 0), TopicPartition("t1", 1))


def test_assignor_override_replaces_and_may_stand_in_for_a_missing_assignor():
    assert parse_request(VALID, assignor_override="roundrobin").assignor == "roundrobin"
    without = with_change("assignor", DELETE)
    assert parse_request(without, assignor_override="range").assignor == "range"


def test_empty_rack_and_instance_id_count_as_absent():
    request = with_change("members.0.rack", "")
    request["members"][0]["instance_id"] = ""
    member = parse_request(request).group.members[0]
    assert (member.rack, member.instance_id) == (None, None)


def test_json_lines_errors_carry_source_and_line_and_others_still_parse():
    lines = [json.dumps(VALID), "", "{not json", json.dumps(with_change("topics.0.partitions", 0))]
    entries = read_requests("\n".join(lines), source="req.jsonl")
    assert [entry.line for entry in entries] == [1, 3, 4]
    assert entries[0].request is not None
    assert str(entries[1].error).startswith("req.jsonl:3: malformed JSON")
    assert str(entries[2].error).startswith("req.jsonl:4: topics[0].partitions:")
    assert entries[2].name == "r1"


def test_json_array_elements_know_the_line_they_start_on():
    text = "[\n" + json.dumps(VALID) + ",\n\n  " + json.dumps(with_change("name", "r2")) + "\n]\n"
    entries = read_requests(text, source="req.json")
    assert [(entry.line, entry.name) for entry in entries] == [(2, "r1"), (4, "r2")]


def test_empty_json_array_and_empty_text_hold_no_requests():
    assert read_requests("[]") == []
    assert read_requests("\n\n") == []


@pytest.mark.parametrize("text", ["hello\nworld\n", '[{"name": 1},', "\x00\x01"])
def test_text_that_is_not_json_at_all_is_unreadable(text):
    with pytest.raises(InputError, match=r"not JSON Lines or a JSON array|malformed JSON array"):
        read_requests(text, source="x")


def test_result_lists_every_member_sorted_with_sorted_partitions():
    group = parse_request(VALID).group
    assignment = Assignment({"c1": (TopicPartition("t1", 1), TopicPartition("t0", 0))})
    result = assignment_result("r1", "range", assignment, group)
    assert result == {
        "name": "r1",
        "assignor": "range",
        "assignment": {"c0": [], "c1": [["t0", 0], ["t1", 1]], "c2": []},
    }


def test_result_of_a_cooperative_round_lists_withheld_partitions():
    group = parse_request(VALID).group
    assignment = Assignment({"c0": ()}, withheld=(TopicPartition("t0", 1),))
    result = assignment_result(None, "cooperative-sticky", assignment, group)
    assert result["withheld"] == [["t0", 1]]


def test_invalid_request_renders_as_name_and_error():
    [entry] = read_requests(json.dumps(with_change("assignor", "fancy")), source="in.jsonl")
    result = run(entry)
    assert set(result) == {"name", "error"}
    assert result["name"] == "r1"
    assert str(result["error"]).startswith("in.jsonl:1: assignor: unknown assignor")


def test_empty_group_renders_an_empty_assignment():
    request = {
        "name": "e",
        "assignor": "range",
        "topics": [{"name": "t0", "partitions": 3}],
        "members": [],
    }
    [entry] = read_requests(json.dumps(request))
    assert dumps(run(entry)) == '{"name": "e", "assignor": "range", "assignment": {}}'


@settings(max_examples=60, deadline=None, database=None)
@given(group=groups(min_members=0, weights=True))
def test_group_survives_a_round_trip_through_the_request_format(group: Group):
    parsed = parse_request(json.loads(json.dumps(group_to_request(group, "range")))).group
    known = {topic.name: topic.num_partitions for topic in group.topics}
    expected_owned = [
        tuple(tp for tp in member.owned_partitions if 0 <= tp.partition < known.get(tp.topic, 0))
        for member in group.members
    ]
    assert parsed.topics == group.topics
    assert [m.owned_partitions for m in parsed.members] == expected_owned
    assert [(m.member_id, m.topics, m.rack, m.instance_id) for m in parsed.members] == [
        (m.member_id, m.topics, m.rack, m.instance_id) for m in group.members
    ]


def test_json_lines_split_only_at_newlines_not_at_unicode_line_separators():
    text = json.dumps(with_change("name", "a\u2028b"), ensure_ascii=False) + "\r\n"
    [entry] = read_requests(text)
    assert entry.name == "a\u2028b" and entry.request is not None


# ---------------------------------------------------------------------------------------------
# regressions found by fuzzing (tests/test_fuzz_requests.py): each was a traceback, a memory
# blow-up or a hang before


def _line_with(path: str, raw_json: str) -> str:
    """VALID as one JSON line with the value at ``path`` replaced by raw JSON text."""
    return json.dumps(with_change(path, "@@here@@")).replace('"@@here@@"', raw_json)


def test_deeply_nested_request_is_refused_naming_the_line_not_a_recursion_error():
    text = json.dumps(VALID) + "\n" + _line_with("name", "[" * 100_000 + "]" * 100_000)
    entries = read_requests(text, source="req.jsonl")
    assert entries[0].request is not None
    assert str(entries[1].error) == "req.jsonl:2: malformed JSON: nested deeper than 64"


def test_integer_of_5001_digits_is_refused_naming_line_and_field():
    text = _line_with("topics.0.partitions", "9" * 5001)
    [entry] = read_requests(text, source="req.jsonl")
    assert str(entry.error) == (
        "req.jsonl:1: topics[0].partitions: malformed JSON: integer of 5001 digits (at most 20)"
    )


def test_infinity_and_overflowing_numbers_are_refused_naming_the_field():
    [entry] = read_requests(_line_with("topics.0.weights", "[1, 1e999, 2]"), source="r")
    assert str(entry.error) == (
        "r:1: topics[0].weights[1]: malformed JSON: number 1e999 is out of range"
    )


def test_lone_surrogate_in_an_id_is_refused_and_results_stay_writable_as_utf8():
    [entry] = read_requests(_line_with("members.0.id", '"c\\ud800"'), source="r")
    assert str(entry.error) == (
        "r:1: members[0].id: lone surrogate \\ud800: not writable as UTF-8 (got 'c\\ud800')"
    )
    dumps(run(entry)).encode("utf-8")  # the error result itself can be printed
    surrogate = with_change("members.0.id", "c\ud800")
    assert "NUL or lone surrogate" in error_of(surrogate).message


def test_duplicated_key_is_refused_naming_it():
    text = json.dumps(VALID).replace('"assignor": "range"', '"assignor": "range", "assignor": "x"')
    [entry] = read_requests(text, source="r")
    assert str(entry.error) == "r:1: assignor: malformed JSON: key appears twice in one object"


def test_partitions_beyond_the_request_limit_are_refused_before_any_allocation():
    request = with_change("topics.0", {"name": "t0", "partitions": 2**31 - 1})
    error = error_of(request)
    assert error.field == "topics[0].partitions"
    assert "at most 10000000" in error.message
    assert (
        "topics hold 2147483649 partitions"
        in error_of(
            with_change("topics.1", {"name": "t1", "partitions": 2**31 - 1})
            | {"topics": [{"name": "t0", "partitions": 2}, {"name": "t1", "partitions": 2**31 - 1}]}
        ).message
    )


def test_members_beyond_the_request_limit_are_refused_before_reading_them():
    request = {**VALID, "members": [{"id": "m", "topics": []}] * 1_000_001}
    error = error_of(request)
    assert error.field == "members"
    assert error.message == "1000001 members; a request may list at most 1000000"


def test_json_array_with_a_too_deep_element_fails_only_that_request_and_a_cut_one_is_unreadable():
    ok = json.dumps(VALID)
    deep = "[" * 3000 + '"]]"' + "]" * 3000
    entries = read_requests(f"[\n{ok},\n{deep},\n{ok}\n]", source="r.json")
    assert [(entry.line, str(entry.error) if entry.error else None) for entry in entries] == [
        (2, None),
        (3, "r.json:3: malformed JSON: nested deeper than 64"),
        (4, None),
    ]
    with pytest.raises(InputError, match=r"r\.json:3: malformed JSON array: Expecting value"):
        read_requests(f"[\n{ok},\n" + "[" * 3000, source="r.json")
