"""Fuzzing `ktk traces import`: mutated kafka-dump-log output, GroupMetadataMessageFormatter
output, coordinator logs and topics side files must give exit 0 or 2 (never a traceback), an
error naming the capture file (or the topics file) and its line, and rows that pass the trace
reader's own checks."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES
from fuzzing import (
    LONG_EXAMPLES,
    check_outcome,
    dumps,
    encode,
    invoke,
    long_run,
    mutated_bytes,
    mutated_value,
    run_examples,
)
from hypothesis import strategies as st

IMPORTERS = EXAMPLES / "importers"
DUMP_LOG = (IMPORTERS / "dump-log.txt").read_text()
FORMATTER = (IMPORTERS / "formatter.json").read_text()
COORDINATOR_LOGS = (IMPORTERS / "coordinator-classic.log").read_text() + (
    IMPORTERS / "coordinator-kip848.log"
).read_text()
TOPICS = json.loads((IMPORTERS / "topics.json").read_text())

SPECIAL_TOKENS = (
    "9" * 5001,
    "-" + "9" * 30,
    str(2**31),
    str(2**63),
    "-1",
    "0",
    "",
    "\x00",
    "\ud800",
    "x" * 100_000,
    "é🙂",
    "[",
    "{",
    '"',
    "null",
    "<DELETE>",
    "payload: ",
    "key: ",
)


def check_import(capture: bytes, kind: str, topics: bytes | None = None) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "capture.txt"
        path.write_bytes(capture)
        args = ["traces", "import", str(path), "--from", kind, "--out", str(Path(directory) / "o")]
        names = [str(path), "--from"]
        if topics is not None:
            topics_path = Path(directory) / "topics.json"
            topics_path.write_bytes(topics)
            args += ["--topics", str(topics_path)]
            names.append(str(topics_path))
        result = invoke(args)
    check_outcome(result, names)
    assert result.exit_code in (0, 2), result.exit_code


@st.composite
def dump_logs(draw: st.DrawFn) -> bytes:
    """The example dump with some record lines' key or payload JSON mutated, some numbers
    replaced, then maybe byte-level mutations."""
    lines = DUMP_LOG.split("\n")
    records = [index for index, line in enumerate(lines) if " key: {" in line]
    for index in draw(st.lists(st.sampled_from(records), min_size=1, max_size=2, unique=True)):
        line = lines[index]
        key_at = line.index(" key: ") + len(" key: ")
        decoder = json.JSONDecoder()
        key, key_end = decoder.raw_decode(line, key_at)
        payload_at = line.find("payload: ", key_end)
        part = draw(st.sampled_from(("key", "payload", "number", "time")))
        if part == "key":
            line = line[:key_at] + dumps(draw(mutated_value(key))) + line[key_end:]
        elif part == "payload" and payload_at >= 0 and line[payload_at + 9] == "{":
            payload, payload_end = decoder.raw_decode(line, payload_at + 9)
            mutated = dumps(draw(mutated_value(payload)), ascii_only=draw(st.booleans()))
            line = line[: payload_at + 9] + mutated + line[payload_end:]
        elif part == "time":
            line = re.sub(
                r"CreateTime: -?\d+",
                "CreateTime: "
                + draw(st.sampled_from(("9" * 5001, "-" + "9" * 25, str(2**63), "-1"))),
                line,
            )
        else:
            line = _replace_token(draw, line)
        lines[index] = line
    data = encode("\n".join(lines))
    if draw(st.integers(0, 3)) == 3:
        data = draw(mutated_bytes(data))
    return data


def _replace_token(draw: st.DrawFn, line: str) -> str:
    """``line`` with one number or word replaced by a special token."""
    tokens = list(re.finditer(r"-?\d+|[A-Za-z][\w.-]*", line))
    if not tokens:
        return line
    token = draw(st.sampled_from(tokens))
    return line[: token.start()] + draw(st.sampled_from(SPECIAL_TOKENS)) + line[token.end() :]


def _formatter_records() -> list[object]:
    decoder, position, records = json.JSONDecoder(), 0, []
    while position < len(FORMATTER):
        while position < len(FORMATTER) and FORMATTER[position].isspace():
            position += 1
        if position >= len(FORMATTER):
            break
        record, position = decoder.raw_decode(FORMATTER, position)
        records.append(record)
    return records


FORMATTER_RECORDS = _formatter_records()


@st.composite
def formatter_outputs(draw: st.DrawFn) -> bytes:
    records = list(FORMATTER_RECORDS)
    for index in draw(st.lists(st.integers(0, len(records) - 1), min_size=1, max_size=2)):
        records[index] = draw(mutated_value(records[index]))
    separator = draw(st.sampled_from(("", "\n", " ")))
    data = encode(
        separator.join(dumps(record, ascii_only=draw(st.booleans())) for record in records)
    )
    if draw(st.integers(0, 3)) == 3:
        data = draw(mutated_bytes(data))
    return data


@st.composite
def coordinator_logs(draw: st.DrawFn) -> bytes:
    lines = COORDINATOR_LOGS.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        lines[index] = _replace_token(draw, lines[index])
    data = encode("\n".join(lines))
    if draw(st.integers(0, 3)) == 3:
        data = draw(mutated_bytes(data))
    return data


@st.composite
def topics_files(draw: st.DrawFn) -> bytes:
    data = encode(dumps(draw(mutated_value(TOPICS))))
    if draw(st.integers(0, 3)) == 3:
        data = draw(mutated_bytes(data))
    return data


TOPICS_BYTES = (IMPORTERS / "topics.json").read_bytes()


def test_fuzzed_dump_logs_import_cleanly_naming_file_and_line():
    run_examples(lambda data: check_import(data, "dump-log"), dump_logs(), 200)


def test_fuzzed_formatter_output_imports_cleanly_naming_file_and_line():
    run_examples(lambda data: check_import(data, "formatter"), formatter_outputs(), 200)


def test_fuzzed_coordinator_logs_import_cleanly_naming_file_and_line():
    run_examples(
        lambda data: check_import(data, "coordinator-log", TOPICS_BYTES), coordinator_logs(), 200
    )


def test_fuzzed_topics_files_are_refused_naming_the_file():
    capture = COORDINATOR_LOGS.encode()
    run_examples(lambda data: check_import(capture, "coordinator-log", data), topics_files(), 200)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_dump_logs():
    run_examples(lambda data: check_import(data, "dump-log"), dump_logs(), LONG_EXAMPLES)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_formatter_output():
    run_examples(lambda data: check_import(data, "formatter"), formatter_outputs(), LONG_EXAMPLES)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzed_coordinator_logs_and_topics_files():
    run_examples(
        lambda data: check_import(data, "coordinator-log", TOPICS_BYTES),
        coordinator_logs(),
        LONG_EXAMPLES,
    )
    capture = COORDINATOR_LOGS.encode()
    run_examples(
        lambda data: check_import(capture, "coordinator-log", data), topics_files(), LONG_EXAMPLES
    )
