"""Mutation fuzzing of scenario files through the command line.

Each example takes a bundled file of examples/scenarios, mutates it (a value replaced by one of
another type or an extreme one, a key dropped or added, a step duplicated or swapped, a subtree
nested deep, bytes of the file flipped or cut) and writes it as JSON or YAML; ``ktk replicate``
must then exit 0, 1 or 2, never with a traceback, within a few seconds. The default run tries
300 files; ``KTK_FUZZ_EXAMPLES=N pytest -m fuzz_long`` runs the long search.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES
from fuzzing import LONG_EXAMPLES, long_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ktk.cli import app

SCENARIOS = sorted((EXAMPLES / "scenarios").glob("*.yaml"))
DOCUMENTS = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in SCENARIOS]
MODES = ["pre-0.11", "kip-101", "kip-279", "current"]
SECONDS_PER_FILE = 5

texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\ud800", "m\x00", "", "x" * 5000, "auto", "lose", "all", "StrongIsr"]),
)
numbers = st.one_of(
    st.integers(-3, 40),
    st.integers(),
    st.sampled_from([2**31, 2**63, 10**30, -1, 0, 10**12 + 1]),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=3)
    ),
    max_leaves=8,
)


def paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a decoded document: keys of mappings, indexes of lists."""
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += paths(value, (*prefix, index))
    return found


def parent_of(document: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        document = document[key]
    return document


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    for _ in range(draw(st.integers(1, 3))):
        places = paths(document)
        place = draw(st.sampled_from(places))
        kind = draw(
            st.sampled_from(["replace", "drop", "add", "duplicate", "nest", "swap", "retype"])
        )
        if not place:
            if kind == "replace":
                document = draw(values)
            continue
        parent = parent_of(document, place)
        key = place[-1]
        if kind == "replace":
            parent[key] = draw(values)
        elif kind == "drop":
            del parent[key]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(texts)] = draw(values)
        elif kind == "add" and isinstance(parent, list):
            parent.insert(key, draw(values))
        elif kind == "duplicate" and isinstance(parent, list):
            parent.extend([parent[key]] * draw(st.integers(1, 50)))
        elif kind == "nest":
            nested = parent[key]
            for _ in range(draw(st.sampled_from([2, 20, 200]))):
                nested = [nested]
            parent[key] = nested
        elif kind == "swap" and isinstance(parent, list) and len(parent) > 1:
            other = draw(st.integers(0, len(parent) - 1))
            parent[key], parent[other] = parent[other], parent[key]
        elif kind == "retype":
            value = parent[key]
            parent[key] = (
                str(value)
                if isinstance(value, int | bool)
                else ([value] if not isinstance(value, list) else {"x": value})
            )
    return document


def encode(document: Any, as_yaml: bool) -> bytes:
    if as_yaml:
        try:
            return yaml.safe_dump(document, allow_unicode=True).encode("utf-8")
        except (yaml.YAMLError, UnicodeEncodeError):
            pass
    return json.dumps(document).encode("utf-8", "surrogatepass")


@st.composite
def scenario_files(draw: st.DrawFn) -> tuple[bytes, str]:
    as_yaml = draw(st.booleans())
    data = encode(draw(mutated_documents()), as_yaml)
    if draw(st.integers(0, 9)) == 0 and data:
        # byte damage: flip, cut or insert raw bytes
        position = draw(st.integers(0, len(data) - 1))
        damage = draw(st.sampled_from([b"\x00", b"\xff", b"\xc3", b"{", b"*a", b"&a ", b""]))
        data = data[:position] + damage + data[position + draw(st.integers(0, 3)) :]
    return data, ".yaml" if as_yaml else ".json"


def check_one_file(directory: Path, data: bytes, suffix: str, mode: str) -> None:
    path = directory / f"fuzzed{suffix}"
    path.write_bytes(data)
    started = time.monotonic()
    outcome = CliRunner().invoke(app, ["replicate", str(path), "--json", "--mode", mode])
    elapsed = time.monotonic() - started
    crash = outcome.exception if not isinstance(outcome.exception, SystemExit) else None
    assert crash is None, f"{type(crash).__name__}: {crash}\n{data[:2000]!r}"
    assert outcome.exit_code in (0, 1, 2), (outcome.exit_code, data[:2000])
    assert "Traceback" not in outcome.output
    if outcome.exit_code == 2:
        assert len(outcome.stderr.strip().splitlines()) == 1, outcome.stderr
    assert elapsed < SECONDS_PER_FILE, (elapsed, data[:2000])


FUZZ_SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(FUZZ_SETTINGS, max_examples=300)
@given(file=scenario_files(), mode=st.sampled_from(MODES))
def test_mutated_scenario_files_exit_0_1_or_2_without_a_traceback(
    tmp_path_factory: pytest.TempPathFactory, file: tuple[bytes, str], mode: str
) -> None:
    check_one_file(tmp_path_factory.mktemp("fuzz"), *file, mode)


@pytest.mark.fuzz_long
@long_run
def test_long_fuzzing_of_scenario_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    @settings(FUZZ_SETTINGS, max_examples=LONG_EXAMPLES)
    @given(file=scenario_files(), mode=st.sampled_from(MODES))
    def fuzz(file: tuple[bytes, str], mode: str) -> None:
        check_one_file(tmp_path_factory.mktemp("fuzz"), *file, mode)

    fuzz()


def test_every_bundled_scenario_survives_the_encoder_unchanged(tmp_path: Path) -> None:
    # the fuzzer's baseline: each unmutated file, as JSON and as YAML, replays with exit 0
    for document in DOCUMENTS:
        for suffix in (".json", ".yaml"):
            path = tmp_path / f"fuzzed{suffix}"
            path.write_bytes(encode(document, suffix == ".yaml"))
            outcome = CliRunner().invoke(app, ["replicate", str(path), "--json"])
            assert outcome.exit_code == 0, outcome.output
