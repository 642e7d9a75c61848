"""`ktk assign`: results in input order, error lines, exit codes 0/1/2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, ktk_process
from typer.testing import CliRunner

from ktk.cli import app

REQUEST = {
    "name": "two",
    "assignor": "range",
    "topics": [{"name": "t0", "partitions": 3}, {"name": "t1", "partitions": 3}],
    "members": [{"id": "c0", "topics": ["t0", "t1"]}, {"id": "c1", "topics": ["t0", "t1"]}],
}
RANGE_ANSWER = {"c0": [["t0", 0], ["t0", 1], ["t1", 0], ["t1", 1]], "c1": [["t0", 2], ["t1", 2]]}


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, ["assign", *args], input=stdin)


def results(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_assign_reads_stdin_and_prints_one_result_per_request():
    outcome = invoke(stdin=json.dumps(REQUEST) + "\n" + json.dumps({**REQUEST, "name": "again"}))
    assert outcome.exit_code == 0, outcome.output
    assert results(outcome.stdout) == [
        {"name": "two", "assignor": "range", "assignment": RANGE_ANSWER},
        {"name": "again", "assignor": "range", "assignment": RANGE_ANSWER},
    ]


def test_assign_reads_a_json_array_file(tmp_path: Path):
    path = tmp_path / "requests.json"
    path.write_text(json.dumps([REQUEST, {**REQUEST, "assignor": "roundrobin"}], indent=2))
    outcome = invoke(str(path))
    assert outcome.exit_code == 0, outcome.output
    assert [r["assignor"] for r in results(outcome.stdout)] == ["range", "roundrobin"]


def test_assignor_option_overrides_the_requests_choice():
    outcome = invoke("--assignor", "roundrobin", stdin=json.dumps(REQUEST))
    assert outcome.exit_code == 0, outcome.output
    [result] = results(outcome.stdout)
    assert result["assignor"] == "roundrobin"
    assert result["assignment"] == {
        "c0": [["t0", 0], ["t0", 2], ["t1", 1]],
        "c1": [["t0", 1], ["t1", 0], ["t1", 2]],
    }


def test_invalid_request_prints_an_error_line_and_the_run_goes_on_with_exit_1():
    bad = {**REQUEST, "name": "bad", "topics": [{"name": "t0", "partitions": -1}]}
    text = "\n".join([json.dumps(bad), "{broken", json.dumps(REQUEST)])
    outcome = invoke(stdin=text)
    assert outcome.exit_code == 1
    first, second, third = results(outcome.stdout)
    assert first == {
        "name": "bad",
        "error": "<stdin>:1: topics[0].partitions: a partition count cannot be negative (got -1)",
    }
    assert second["name"] is None and second["error"].startswith("<stdin>:2: malformed JSON")
    assert third["assignment"] == RANGE_ANSWER
    assert "2 of 3 requests failed" in outcome.stderr


def test_missing_file_exits_2_with_one_line():
    outcome = invoke("no-such-requests.jsonl")
    assert outcome.exit_code == 2
    assert outcome.stdout == ""
    assert outcome.stderr.strip().splitlines() == [
        "error: no-such-requests.jsonl: No such file or directory"
    ]


@pytest.mark.parametrize("text", ["this is not json\n", "[1, 2", "\u00ff\u00fe"])
def test_input_that_is_not_json_at_all_exits_2(text: str):
    outcome = invoke(stdin=text)
    assert outcome.exit_code == 2
    assert outcome.stderr.startswith("error: <stdin>:1:")
    assert "Traceback" not in outcome.output


def test_binary_input_exits_2(tmp_path: Path):
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage")
    outcome = invoke(str(path))
    assert outcome.exit_code == 2
    assert "not UTF-8" in outcome.stderr


def test_unknown_assignor_option_exits_2():
    outcome = invoke("--assignor", "fancy", stdin=json.dumps(REQUEST))
    assert outcome.exit_code == 2
    assert "unknown assignor" in outcome.stderr and "'fancy'" in outcome.stderr


def test_pretty_output_puts_each_member_on_its_own_line():
    outcome = invoke("--pretty", stdin=json.dumps(REQUEST))
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.splitlines() == [
        "{",
        '  "name": "two",',
        '  "assignor": "range",',
        '  "assignment": {',
        '    "c0": [["t0", 0], ["t0", 1], ["t1", 0], ["t1", 1]],',
        '    "c1": [["t0", 2], ["t1", 2]]',
        "  }",
        "}",
    ]
    assert json.loads(outcome.stdout)["assignment"] == RANGE_ANSWER


def test_empty_input_prints_nothing_and_succeeds():
    outcome = invoke(stdin="")
    assert outcome.exit_code == 0
    assert outcome.stdout == ""


@pytest.mark.parametrize(
    "example", ["basic.jsonl", "racks.json", "static-members.jsonl"], ids=lambda name: name
)
def test_bundled_range_and_roundrobin_examples_run_cleanly(example: str):
    outcome = invoke(str(EXAMPLES / "requests" / example))
    assert outcome.exit_code == 0, outcome.output
    assert all("assignment" in result for result in results(outcome.stdout))


def test_bundled_second_round_example_runs_cleanly():
    outcome = invoke(str(EXAMPLES / "requests" / "second-round.jsonl"))
    assert outcome.exit_code == 0, outcome.output
    joined = {r["name"]: r for r in results(outcome.stdout)}["member-joins-cooperative"]
    assigned = {tuple(tp) for tps in joined["assignment"].values() for tp in tps}
    assert assigned | {tuple(tp) for tp in joined.get("withheld", [])} == {
        ("orders", p) for p in range(6)
    }


def test_static_example_keeps_ranges_across_new_member_ids():
    outcome = invoke(str(EXAMPLES / "requests" / "static-members.jsonl"))
    before, after, dynamic = results(outcome.stdout)
    by_pod = {
        "pod-0": ("consumer-1-7f3a", "consumer-9-c1d0"),
        "pod-1": ("consumer-2-91c4", "consumer-5-44aa"),
        "pod-2": ("consumer-3-0b2e", "consumer-4-e6f1"),
    }
    for old_id, new_id in by_pod.values():
        assert before["assignment"][old_id] == after["assignment"][new_id]
    assert dynamic["assignment"]["consumer-4-e6f1"] != after["assignment"]["consumer-4-e6f1"]


def test_assignor_installed_through_the_entry_point_runs_by_name(tmp_path: Path, monkeypatch):
    package = tmp_path / "my_assignors"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "alphabet.py").write_text(
        "from assignors.model import Assignment\n"
        "class AlphabetAssignor:\n"
        "    name = 'alphabet'\n"
        "    rebalance_protocol = 'eager'\n"
        "    def assign(self, group):\n"
        "        given = {}\n"
        "        for tp in group.subscribed_partitions():\n"
        "            owner = min(m.member_id for m in group.members if tp.topic in m.topics)\n"
        "            given.setdefault(owner, []).append(tp)\n"
        "        return Assignment.build((m.member_id for m in group.members), given)\n"
    )
    dist_info = tmp_path / "my_assignors-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-assignors\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(
        "[ktk.assignors]\nalphabet = my_assignors.alphabet:AlphabetAssignor\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    outcome = invoke(stdin=json.dumps({**REQUEST, "assignor": "alphabet"}))
    assert outcome.exit_code == 0, outcome.output
    [result] = results(outcome.stdout)
    assert result["assignment"] == {
        "c0": [["t0", 0], ["t0", 1], ["t0", 2], ["t1", 0], ["t1", 1], ["t1", 2]],
        "c1": [],
    }


SURROGATE_REQUEST = json.dumps(
    {
        "name": "broken-\ud800",
        "assignor": "range",
        "topics": [{"name": "t", "partitions": 2}],
        "members": [{"id": "member-\udcff", "topics": ["t"]}],
    }
)


SURROGATE_ERROR = (
    "<stdin>:1: name: lone surrogate \\ud800: not writable as UTF-8 (got 'broken-\\ud800')"
)


def test_surrogate_ids_are_refused_with_an_error_result_assign_can_print():
    outcome = invoke(stdin=SURROGATE_REQUEST)
    assert outcome.exit_code == 1, outcome.output
    assert json.loads(outcome.stdout) == {"name": None, "error": SURROGATE_ERROR}


def test_surrogate_ids_survive_a_real_stdout_and_error_lines(tmp_path):
    process = ktk_process("assign", cwd=tmp_path, stdin=subprocess.PIPE)
    stdout, stderr = process.communicate(SURROGATE_REQUEST.encode(), timeout=120)
    assert process.returncode == 1, stderr.decode()
    assert json.loads(stdout)["error"] == SURROGATE_ERROR
    bad = SURROGATE_REQUEST.replace('"range"', '"nope\\ud800"')
    process = ktk_process("assign", "--assignor", "x\udcff", cwd=tmp_path, stdin=subprocess.PIPE)
    stdout, stderr = process.communicate(bad.encode(), timeout=120)
    assert process.returncode == 2
    assert stderr.decode().count("\n") == 1 and "Traceback" not in stderr.decode()


def test_closed_output_pipe_ends_quietly(tmp_path):
    many = tmp_path / "many.jsonl"
    many.write_text((SURROGATE_REQUEST + "\n") * 5000)
    process = ktk_process("assign", str(many), cwd=tmp_path)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()
    _, stderr = process.communicate(timeout=120)
    assert json.loads(first)["error"].endswith("(got 'broken-\\ud800')")
    assert process.returncode == 141
    assert stderr == b""
