"""Fuzzing the command line of `ktk assign`, `ktk traces generate`, `ktk traces import` and
`ktk replay`: random option values and garbage arguments must give exit 0, 1 or 2, never a
traceback, and a refusal must name the option or file at fault (a usage error names it in
click's own words)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import EXAMPLES
from fuzzing import LONG_EXAMPLES, bounded_rss, long_run, run_examples
from hypothesis import strategies as st
from typer.testing import CliRunner

from ktk.cli import app

GARBAGE = (
    "",
    "-",
    "--",
    "0",
    "-1",
    "1.5",
    "9" * 5001,
    "-" + "9" * 30,
    str(2**31),
    str(2**63),
    "1000000000",
    "\x00",
    "\ud800",
    "é🙂",
    "x" * 10_000,
    "a,b,,c",
    "3-1",
    "1-1000000000",
    "--help",
    "--version",
    "no-such-thing",
    "/nonexistent/x",  # not "/": replaying the whole file system is allowed, and slow
    ".",
    "~",
)

EXAMPLE_TRACE = (EXAMPLES / "traces" / "mixed-s137.jsonl").read_text()
SMALL_NUMBERS = ("0", "1", "2", "3", "5", "1-3", "2-4")


def _values(*good: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(good), st.sampled_from(GARBAGE), st.text(max_size=6))


# option -> values, per command; "@in" stands for an input file, "@out" for an output path
COMMANDS: dict[str, dict[str, st.SearchStrategy[str]]] = {
    "assign": {
        "--assignor": _values("range", "roundrobin", "sticky", "cooperative-sticky", "RANGE"),
        "--pretty": st.just(""),
        "@arg": _values("@in", "@in", "-", "@missing", "@dir"),
    },
    "traces generate": {
        "--out": _values("@out", "@out", "@in", "@dir"),
        "--scenario": _values("mixed", "scale-out", "rack-outage", "flapping"),
        "--groups": _values(*SMALL_NUMBERS),
        "--seed": _values("0", "7", "-3"),
        "--members": _values(*SMALL_NUMBERS),
        "--partitions": _values(*SMALL_NUMBERS, "8-20"),
        "--generations": _values(*SMALL_NUMBERS),
        "--format": _values("jsonl", "jsonl.gz", "parquet", "csv"),
    },
    "traces import": {
        "@arg": _values("@capture", "@capture", "@in", "@missing", "@dir"),
        "--from": _values("dump-log", "formatter", "coordinator-log"),
        "--out": _values("@out", "@out", "@in"),
        "--topics": _values("@topics", "@in", "@missing"),
        "--format": _values("jsonl", "jsonl.gz", "parquet"),
        "--group": _values("payments", "orders-848"),
        "--prefix": _values("x-", ""),
        "--skip-bad-records": st.just(""),
    },
    "replay": {
        "@arg": _values("@trace", "@trace", "@in", "@missing", "@dir"),
        "--out": _values("@out", "@out", "@in", "@trace"),
        "--assignors": _values("range", "range,sticky", "recorded", ",", "range,nope"),
        "--engine": _values("python", "python", "cobol"),
        "--strict": st.just(""),
        "--no-timings": st.just(""),
    },
}
REQUIRED = {
    "traces generate": ("--out",),
    "traces import": ("@arg", "--from", "--out"),
    "replay": ("@arg", "--out"),
}


@st.composite
def command_lines(draw: st.DrawFn, command: str) -> list[str]:
    options = COMMANDS[command]
    chosen = set(draw(st.lists(st.sampled_from(sorted(options)), max_size=len(options))))
    if draw(st.integers(0, 4)) > 0:  # mostly a command line that gets past click
        chosen.update(REQUIRED.get(command, ()))
    if command == "replay":
        chosen.add("--engine")  # spark is the default; these tests run the in-process engine
    args = command.split()
    for option in sorted(chosen):
        value = draw(options[option])
        if option == "@arg":
            args.append(value)
        elif option in ("--pretty", "--strict", "--no-timings", "--skip-bad-records"):
            args.append(option)
        else:
            args += [option, value]
    if command == "replay" and "--engine" in chosen:
        index = args.index("--engine") + 1
        if args[index] not in ("python", "cobol"):
            args[index] = "python"
    if draw(st.integers(0, 5)) == 0:
        args.insert(draw(st.integers(1, len(args))), draw(st.sampled_from(GARBAGE)))
    return args


def _materialised(args: Sequence[str], directory: Path) -> list[str]:
    inputs = {
        "@in": EXAMPLES / "requests" / "basic.jsonl",
        "@capture": EXAMPLES / "importers" / "formatter.json",
        "@topics": EXAMPLES / "importers" / "topics.json",
    }
    resolved = []
    for arg in args:
        if arg in inputs:
            copy = directory / inputs[arg].name
            if not copy.exists():
                shutil.copy(inputs[arg], copy)
            resolved.append(str(copy))
        elif arg == "@trace":  # the first generations of the example trace: replays quickly
            trace = directory / "trace.jsonl"
            if not trace.exists():
                trace.write_text("".join(EXAMPLE_TRACE.splitlines(keepends=True)[:4]))
            resolved.append(str(trace))
        elif arg == "@out":
            resolved.append(str(directory / "out"))
        elif arg == "@missing":
            resolved.append(str(directory / "missing.jsonl"))
        elif arg == "@dir":
            resolved.append(str(directory))
        else:
            resolved.append(arg)
    return resolved


def check_command_line(args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        resolved = _materialised(args, Path(directory))
        # relative garbage (--out 1.5) lands in the temporary directory, not the checkout
        with contextlib.chdir(directory), bounded_rss():
            result = CliRunner().invoke(app, resolved)
    exception = result.exception
    if exception is not None and not isinstance(exception, SystemExit):
        raise AssertionError(f"{type(exception).__name__} escaped: {exception!s:.300}") from (
            exception
        )
    assert result.exit_code in (0, 1, 2), (result.exit_code, args)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-2000:]
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        if errors:
            assert len(errors) == 1, errors
        else:  # click's usage error: a panel naming the option or argument
            assert "Usage:" in result.stderr or "Usage:" in result.stdout, result.stderr[-500:]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fuzzed_command_lines_exit_cleanly(command: str):
    run_examples(check_command_line, command_lines(command), 120)


@pytest.mark.fuzz_long
@long_run
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_long_fuzzed_command_lines(command: str):
    run_examples(check_command_line, command_lines(command), LONG_EXAMPLES)


SURVEY = {f"cli {command}": (check_command_line, command_lines(command)) for command in COMMANDS}


# ---------------------------------------------------------------------------------------------
# regressions found by fuzzing the command line: each was a traceback before


@pytest.mark.parametrize("name", ["x" * 300, "9" * 5001])
def test_file_name_too_long_exits_2_naming_it(name: str):
    result = CliRunner().invoke(app, ["assign", name])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {name[:50]}")
    assert "File name too long" in result.stderr


def test_file_name_with_a_nul_byte_exits_2():
    result = CliRunner().invoke(app, ["assign", "requests\x00.jsonl"])
    assert (result.exit_code, result.stderr) == (2, "error: a file name holds a NUL byte\n")


def test_out_naming_an_existing_file_exits_2_naming_it(tmp_path: Path):
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    result = CliRunner().invoke(app, ["traces", "generate", "--out", str(taken), "-n", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {taken}")
    assert taken.read_text() == "mine\n"


def test_file_name_with_a_lone_surrogate_exits_2():
    result = CliRunner().invoke(app, ["assign", "requests\ud800.jsonl"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: a file name is not valid text: surrogates not allowed")
