"""Shared mutation strategies and checks for the fuzz suites (tests/test_fuzz_*.py).

A fuzz test takes a valid input (a request, a trace file, an importer capture, a command line),
mutates it with hypothesis and runs it through the real entry point: the ``ktk`` command in
process (typer's CliRunner) or the library reader. Whatever the input, the outcome must be one
of the documented ones: exit code 0, 1 or 2, no traceback, an error line naming the file and a
line or field, within a time (hypothesis deadline) and memory bound (peak RSS growth, with an
address-space cap so a blow-up fails the test instead of the machine).

Mutations:

- structural (:func:`mutated_value`): a field replaced by another type (str, int, list, dict,
  null, bool), a huge or boundary integer (10^9, 2^31, 2^63, 10^30, a 5,001-digit literal),
  NaN/Infinity/1e999, 10^5-deep nesting, a 10 MB string, NUL and lone-surrogate strings, a list
  repeated (10^3, 10^5 times), a key deleted, added or duplicated;
- textual (:func:`mutated_bytes`): truncation, NUL bytes, invalid UTF-8, a byte changed, a line
  break inserted, a line duplicated, a byte-order mark, CRLF line ends.

Counts: each default test runs a fixed small number of examples (the whole default fuzz suite
stays within about three minutes of CPU); tests marked ``fuzz_long`` run ``KTK_FUZZ_EXAMPLES``
examples per format and are skipped unless that variable is set::

    KTK_FUZZ_EXAMPLES=1000 pytest -m fuzz_long tests/test_fuzz_*.py
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import resource
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

LONG_EXAMPLES = int(os.environ.get("KTK_FUZZ_EXAMPLES", "0") or 0)
"""Examples per format of the long run (0: the long tests are skipped)."""

long_run = pytest.mark.skipif(
    LONG_EXAMPLES <= 0, reason="extended fuzzing: set KTK_FUZZ_EXAMPLES and run -m fuzz_long"
)

EXIT_CODES = frozenset({0, 1, 2})
DEADLINE = timedelta(seconds=20)
MAX_RSS_GROWTH = 1536 * 1024 * 1024
"""Most the peak resident size may grow while one example runs."""
ADDRESS_SPACE_HEADROOM = 6 * 1024 * 1024 * 1024
"""Address space allowed beyond what the process held when fuzzing began: an input that makes
ktk allocate beyond it fails with MemoryError instead of exhausting the machine."""


def fuzz_settings(examples: int) -> settings:
    """Hypothesis settings of a fuzz test: ``examples`` inputs, a per-example deadline, no
    example database on disk; the default run is derandomized (the same inputs every time), the
    long run explores."""
    return settings(
        max_examples=examples,
        deadline=DEADLINE,
        database=None,
        derandomize=LONG_EXAMPLES <= 0,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# ---------------------------------------------------------------------------------------------
# structural mutations of decoded JSON values


class Raw:
    """JSON text spliced in verbatim where this stands (what json.dumps cannot write)."""

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label

    def __repr__(self) -> str:
        return f"Raw({self.label})"


_BIG_DIGITS = "9" * 5001
RAW_VALUES: tuple[Raw, ...] = (
    Raw("NaN", "NaN"),
    Raw("Infinity", "Infinity"),
    Raw("-Infinity", "-Infinity"),
    Raw("1e999", "1e999"),
    Raw(_BIG_DIGITS, "5001 digits"),
    Raw("-" + _BIG_DIGITS, "-5001 digits"),
    Raw("0." + _BIG_DIGITS, "long fraction"),
    Raw("[" * 100_000 + "]" * 100_000, "10^5 nested lists"),
    Raw('{"a":' * 100_000 + "1" + "}" * 100_000, "10^5 nested objects"),
    Raw('"' + "x" * 10_000_000 + '"', "10 MB string"),
    Raw('"\\ud800"', "lone high surrogate"),
    Raw('"a\\udfffb"', "lone low surrogate"),
    Raw('"a\\u0000b"', "escaped NUL"),
)

PLAIN_VALUES: tuple[object, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1.5,
    -0.0,
    1e308,
    10**6,
    10**9,
    2**31 - 1,
    2**31,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    10**30,
    "",
    "x",
    "0",
    "-1",
    "9" * 30,
    "a b\tc",
    "\u2028",
    "é🙂",
    [],
    [None],
    [[]],
    {},
    {"a": 1},
    ["x", 1],
)


def replacement_values() -> st.SearchStrategy[object]:
    """A value to put in place of a field: type swaps, boundaries, and the raw specials."""
    return st.one_of(
        st.sampled_from(RAW_VALUES),
        st.sampled_from(PLAIN_VALUES).map(copy.deepcopy),  # later mutations must not reach it
        st.integers(min_value=-(2**70), max_value=2**70),
        st.text(max_size=8),
        st.lists(st.integers(-3, 3), max_size=3),
    )


def paths(value: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a decoded JSON value (dict keys and list indexes), outermost first."""
    found: list[tuple[Any, ...]] = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value[:50]):  # long lists: the first items suffice
            found.extend(paths(item, (*prefix, index)))
    return found


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


@st.composite
def mutated_value(draw: st.DrawFn, base: object, max_mutations: int = 3) -> object:
    """``base`` (a decoded JSON value) with one to ``max_mutations`` structural mutations."""
    value: Any = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_mutations))):
        path = draw(st.sampled_from(paths(value)))
        kind = draw(
            st.sampled_from(("replace", "replace", "replace", "delete", "add", "repeat", "dup"))
        )
        if not path:
            if kind == "replace":
                value = draw(replacement_values())
            continue
        parent = _parent(value, path)
        key = path[-1]
        if kind == "replace":
            parent[key] = draw(replacement_values())
        elif kind == "delete":
            del parent[key]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(("extra", "", "id", "name", "@")))] = draw(
                replacement_values()
            )
        elif kind == "add" and isinstance(parent, list):
            parent.insert(key, draw(replacement_values()))
        elif kind == "repeat" and isinstance(parent[key], list) and parent[key]:
            times = draw(st.sampled_from((2, 1000, 100_000)))
            items = parent[key]
            parent[key] = (items * (times // len(items) + 1))[:times]
        elif kind == "dup" and isinstance(parent, dict):
            parent[DUPLICATE_KEY] = draw(replacement_values())
            parent[DUPLICATE_OF] = key
    return value


DUPLICATE_KEY = "@@duplicate-key@@"
DUPLICATE_OF = "@@duplicate-of@@"


def dumps(value: object, *, ascii_only: bool = True) -> str:
    """JSON text of a mutated value: :class:`Raw` spliced in, duplicated keys written twice,
    non-finite floats as NaN/Infinity (as Python writes them)."""
    raws: list[Raw] = []

    def prepared(item: object) -> object:
        if isinstance(item, Raw):
            raws.append(item)
            return f"@@raw{len(raws) - 1}@@"
        if isinstance(item, dict):
            return {key: prepared(child) for key, child in item.items()}
        if isinstance(item, list):
            return [prepared(child) for child in item]
        return item

    text = json.dumps(prepared(value), ensure_ascii=ascii_only)
    text = re.sub(
        r'"@@duplicate-key@@": (.*?), "@@duplicate-of@@": "((?:[^"\\]|\\.)*)"',
        lambda found: f'"{found.group(2)}": {found.group(1)}',
        text,
    )
    text = text.replace(f'"{DUPLICATE_OF}": ', f'"{DUPLICATE_KEY}": ')
    for index, raw in enumerate(raws):
        text = text.replace(f'"@@raw{index}@@"', raw.text)
    return text


def encode(text: str) -> bytes:
    """UTF-8 bytes of text that may hold lone surrogates (they become invalid UTF-8)."""
    return text.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------------------------
# textual mutations of files


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, max_mutations: int = 2) -> bytes:
    """``data`` with one to ``max_mutations`` byte-level mutations."""
    for _ in range(draw(st.integers(1, max_mutations))):
        position = draw(st.integers(0, len(data)))
        kind = draw(
            st.sampled_from(
                (
                    "nul",
                    "truncate",
                    "invalid-utf8",
                    "flip",
                    "newline",
                    "duplicate-line",
                    "bom",
                    "crlf",
                    "garbage",
                    "empty",
                )
            )
        )
        if kind == "truncate":
            data = data[:position]
        elif kind == "nul":
            data = data[:position] + b"\x00" + data[position:]
        elif kind == "invalid-utf8":
            data = (
                data[:position]
                + draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80")))
                + (data[position:])
            )
        elif kind == "flip" and position < len(data):
            data = data[:position] + bytes([draw(st.integers(0, 255))]) + data[position + 1 :]
        elif kind == "newline":
            data = data[:position] + b"\n" + data[position:]
        elif kind == "duplicate-line":
            lines = data.split(b"\n")
            index = draw(st.integers(0, len(lines) - 1))
            lines.insert(index, lines[index])
            data = b"\n".join(lines)
        elif kind == "bom":
            data = b"\xef\xbb\xbf" + data
        elif kind == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif kind == "garbage":
            data = data[:position] + draw(st.binary(min_size=1, max_size=16)) + data[position:]
        elif kind == "empty":
            data = b""
    return data


@st.composite
def mutated_json_lines(draw: st.DrawFn, rows: Sequence[object]) -> bytes:
    """JSON Lines of ``rows`` with structural mutations of some rows, then maybe textual ones."""
    lines = []
    mutate_at = set(draw(st.lists(st.integers(0, len(rows) - 1), min_size=1, max_size=2)))
    for index, row in enumerate(rows):
        value = draw(mutated_value(row)) if index in mutate_at else row
        lines.append(encode(dumps(value, ascii_only=draw(st.booleans()))))
    data = b"\n".join(lines) + b"\n"
    if draw(st.integers(0, 3)) == 3:
        data = draw(mutated_bytes(data))
    return data


# ---------------------------------------------------------------------------------------------
# running and checking


def _address_space_in_use() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def bounded_memory() -> Iterator[None]:
    """Cap the process's address space at its current size plus
    :data:`ADDRESS_SPACE_HEADROOM` while fuzzing (restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space_in_use() + ADDRESS_SPACE_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.contextmanager
def bounded_rss() -> Iterator[None]:
    """Fail when the peak resident size grows by more than :data:`MAX_RSS_GROWTH` inside."""
    before = peak_rss()
    yield
    grown = peak_rss() - before
    assert grown <= MAX_RSS_GROWTH, f"peak memory grew by {grown / 2**20:.0f} MiB"


def invoke(args: Sequence[str], stdin: bytes | None = None) -> Any:
    """Run ``ktk ARGS`` in process; returns typer's Result."""
    from typer.testing import CliRunner

    from ktk.cli import app

    with bounded_rss():
        return CliRunner().invoke(app, list(args), input=stdin)


def check_outcome(result: Any, names: Sequence[str]) -> None:
    """The outcome rules: exit 0, 1 or 2; no exception escaped (CliRunner keeps it) and no
    traceback printed; exit 2 prints one ``error:`` line naming one of ``names`` (the input
    file, or the option at fault) followed by a line number or a field."""
    exception = result.exception
    if exception is not None and not isinstance(exception, SystemExit):
        raise AssertionError(
            f"{type(exception).__name__} escaped: {exception!s:.300}"
        ) from exception
    assert result.exit_code in EXIT_CODES, (result.exit_code, result.output[-500:])
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-2000:]
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert errors, result.stderr[-500:]
        assert len(errors) == 1, errors
        assert any(_names_place(errors[0], name) for name in names), (errors[0][:500], names)


def _names_place(line: str, name: str) -> bool:
    """``line`` names ``name`` followed by ``:LINE`` or ``: field`` (a file), or names the
    option ``name``."""
    if name.startswith("-"):
        return name in line
    return re.search(re.escape(name) + r"(:\d+|: )", line) is not None


def run_examples(
    check: Callable[..., None], strategy: st.SearchStrategy[Any], examples: int
) -> None:
    """Run ``check`` on ``examples`` inputs drawn from ``strategy`` within the memory cap."""
    from hypothesis import given

    def one_example(value: Any) -> None:
        check(value)

    test = fuzz_settings(examples)(given(strategy)(one_example))
    with bounded_memory():
        test()
