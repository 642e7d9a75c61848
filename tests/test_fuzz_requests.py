"""Fuzzing `ktk assign`: mutated assignment requests (JSON Lines, a JSON array, stdin) must give
exit 0, 1 or 2, never a traceback, and every error must name the file and the line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from fuzzing import (
    LONG_EXAMPLES,
    check_outcome,
    dumps,
    encode,
    invoke,
    long_run,
    mutated_bytes,
    mutated_json_lines,
    mutated_value,
    run_examples,
)
from hypothesis import strategies as st

REQUESTS = [
    {
        "name": "rich",
        "assignor": "cooperative-sticky",
        "topics": [
            {
                "name": "t0",
                "partitions": 3,
                "racks": [["a", "b"], ["b"], []],
                "weights": [1, 5.0, 0],
            },
            {"name": "t1", "partitions": 2},
        ],
        "members": [
            {
                "id": "c0",
                "topics": ["t0", "t1"],
                "owned": [["t0", 0], ["t1", 1]],
                "generation": 3,
                "rack": "a",
                "instance_id": "pod-0",
            },
            {"id": "c1", "topics": ["t0"], "owned": [["t0", 2]], "generation": 3},
        ],
    },
    {
        "name": "plain",
        "assignor": "range",
        "topics": [{"name": "orders", "partitions": 4}],
        "members": [{"id": "a", "topics": ["orders"]}, {"id": "b", "topics": ["orders"]}],
    },
]


def check_assign(data: bytes, *, array: bool = False, stdin: bool = False) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / ("requests.json" if array else "requests.jsonl")
        path.write_bytes(data)
        source = "<stdin>" if stdin else str(path)
        result = invoke(["assign", "-"], stdin=data) if stdin else invoke(["assign", str(path)])
    check_outcome(result, [source])
    if result.exit_code in (0, 1):
        for line in result.stdout.splitlines():
            outcome = json.loads(line)
            if "error" in outcome:
                assert outcome["error"].startswith(f"{source}:"), outcome["error"][:300]
                assert outcome["error"][len(source) + 1].isdigit(), outcome["error"][:300]


@st.composite
def request_arrays(draw: st.DrawFn) -> bytes:
    values = [
        draw(mutated_value(request)) if draw(st.booleans()) else request for request in REQUESTS
    ]
    text = "[\n" + ",\n".join(dumps(value) for value in values) + "\n]\n"
    data = encode(text)
    if draw(st.integers(0, 3)) == 3:
        data = draw(mutated_bytes(data))
    return data


def test_fuzzed_request_lines_exit_cleanly_naming_file_and_line():
    run_examples(check_assign, mutated_json_lines(REQUESTS), 300)


def test_fuzzed_request_arrays_exit_cleanly_naming_file_and_line():
    run_examples(lambda data: check_assign(data, array=True), request_arrays(), 150)


def test_fuzzed_requests_on_stdin_exit_cleanly_naming_stdin():
    run_examples(lambda data: check_assign(data, stdin=True), mutated_json_lines(REQUESTS[1:]), 50)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_request_lines():
    run_examples(check_assign, mutated_json_lines(REQUESTS), LONG_EXAMPLES)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_request_arrays():
    run_examples(lambda data: check_assign(data, array=True), request_arrays(), LONG_EXAMPLES)
