"""Bad scenario files and result documents through the command line: one clear line on stderr
naming the file, the line or step and the field; exit 2; never a traceback; bounded time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboards.errors import InputError as PageInputError
from dashboards.replication import check_replication_result, load_replication_result
from ktk.cli import app

CONFIG = '"config": {"brokers": [1, 2], "replicas": [1, 2]}'
CONFIG_YAML = "config: {brokers: [1, 2], replicas: [1, 2]}\n"


def run_cli(*args: str) -> tuple[int, str, str]:
    outcome = CliRunner().invoke(app, list(args))
    return outcome.exit_code, outcome.stdout, outcome.stderr


def assert_refused(path: Path, *expected: str) -> str:
    started = time.monotonic()
    code, stdout, stderr = run_cli("replicate", str(path), "--json")
    assert time.monotonic() - started < 10
    assert code == 2, (code, stdout[:300], stderr[:300])
    assert "Traceback" not in stdout + stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert path.name in lines[0], lines[0]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def json_file(tmp_path: Path, text: str, name: str = "bad.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def steps_file(tmp_path: Path, steps: str) -> Path:
    return json_file(tmp_path, '{"name": "bad", ' + CONFIG + ', "steps": [' + steps + "]}")


# ---------------------------------------------------------------------- wrong types


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # once: TypeError: '<' not supported between instances of 'str' and 'int'
        ('{"expect": {"violations": ["StrongIsr", 1]}}', ("step 0", "expect.violations")),
        # once: TypeError: unhashable type: 'list'
        ('{"expect": {"violations": [["StrongIsr"]]}}', ("step 0", "expect.violations")),
        # once: TypeError: 'int' object is not iterable
        ('{"expect": {"violations": 3}}', ("step 0", "expect.violations")),
        ('{"expect": {"logs": [1, 2]}}', ("step 0", "expect.logs")),
        ('{"expect": {"consumed": {"c1": 5}}}', ("step 0", "expect.consumed")),
        ('{"fetch": 1, "comment": ["a"]}', ("step 0", "comment")),
        ('{"produce": "m1", "acks": [1]}', ("step 0", "acks")),
        ('{"crash": 1, "unflushed": ["lose"]}', ("step 0", "unflushed")),
        ('{"expect": {"acked": []}, "modes": [["current"]]}', ("step 0", "modes")),
        ('{"elect": ["auto"]}', ("step 0", "elect")),
    ],
)
def test_fields_of_the_wrong_type_are_refused_naming_step_and_field(
    tmp_path: Path, steps: str, expected: tuple[str, ...]
) -> None:
    assert_refused(steps_file(tmp_path, steps), *expected)


def test_an_op_on_a_broker_without_a_replica_is_refused(tmp_path: Path) -> None:
    # once: KeyError: 2
    path = json_file(
        tmp_path,
        '{"name": "x", "config": {"brokers": [1, 2], "replicas": [1]}, "steps": [{"crash": 2}]}',
    )
    assert_refused(path, "step 0", "crash", "no replica")


def test_booleans_are_not_integers(tmp_path: Path) -> None:
    assert_refused(steps_file(tmp_path, '{"advance_ms": true}'), "step 0", "advance_ms")
    assert_refused(steps_file(tmp_path, '{"fetch": true}'), "step 0", "fetch")
    path = json_file(tmp_path, '{"name": "b", "config": {"brokers": [true], "replicas": [1]}}')
    assert_refused(path, "config.brokers")


def test_wrong_top_level_types_are_refused(tmp_path: Path) -> None:
    assert_refused(json_file(tmp_path, '{"name": ["x"], ' + CONFIG + ', "steps": []}'), "name")
    assert_refused(
        json_file(tmp_path, '{"name": "x", "description": 5, ' + CONFIG + ', "steps": []}'),
        "description",
    )
    assert_refused(
        json_file(
            tmp_path,
            '{"name": "x", "config": {"brokers": [1], "replicas": [1], '
            '"mode": ["current"]}, "steps": []}',
        ),
        "config.mode",
    )
    assert_refused(json_file(tmp_path, "[1, 2, 3]"), "a scenario is a mapping")


# ---------------------------------------------------------------------- numbers


def test_huge_integers_are_refused(tmp_path: Path) -> None:
    assert_refused(steps_file(tmp_path, '{"advance_ms": 1' + "0" * 30 + "}"), "advance_ms")
    assert_refused(steps_file(tmp_path, '{"fetch": 99999999999999999}'), "step 0", "fetch")


def test_an_integer_of_5001_digits_is_refused_in_json_and_yaml(tmp_path: Path) -> None:
    digits = "7" * 5001
    assert_refused(steps_file(tmp_path, '{"advance_ms": ' + digits + "}"), "digits")
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\n" + CONFIG_YAML + f"steps:\n  - {{advance_ms: {digits}}}\n")
    assert_refused(path)


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "NaN"])
def test_infinity_and_nan_are_refused(tmp_path: Path, constant: str) -> None:
    assert_refused(steps_file(tmp_path, '{"advance_ms": ' + constant + "}"), constant)


def test_yaml_infinity_and_floats_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\n" + CONFIG_YAML + "steps:\n  - {advance_ms: .inf}\n")
    assert_refused(path, "step 0", "advance_ms")
    path.write_text("name: x\n" + CONFIG_YAML + "steps:\n  - {advance_ms: 1.5}\n")
    assert_refused(path, "step 0", "advance_ms")


def test_simulated_time_beyond_the_limit_is_refused_up_front(tmp_path: Path) -> None:
    path = json_file(
        tmp_path,
        '{"name": "x", "config": {"brokers": [1], "replicas": [1], '
        '"replica_lag_time_max_ms": 2}, "steps": [{"advance_ms": 100000000}]}',
    )
    assert_refused(path, "step 0", "ISR checks", "100,000")


# ---------------------------------------------------------------------- structure and encoding


def test_deeply_nested_json_is_refused(tmp_path: Path) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    assert_refused(steps_file(tmp_path, '{"expect": {"acked": ' + nested + "}}"), "nested")


def test_deeply_nested_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\n" + CONFIG_YAML + "steps: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert_refused(path, "nested")


def test_a_lone_surrogate_in_an_id_is_refused(tmp_path: Path) -> None:
    assert_refused(steps_file(tmp_path, '{"produce": "m\\ud800"}'), "step 0", "surrogate")
    assert_refused(steps_file(tmp_path, '{"consume": "\\udfff"}'), "step 0", "surrogate")


def test_nul_and_non_utf8_bytes_are_refused_with_their_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"name: x\n" + CONFIG_YAML.encode() + b"steps:\n  - {produce: m\x001}\n")
    assert_refused(path, "NUL", ":4")
    path.write_bytes(b"name: x\n" + CONFIG_YAML.encode() + b"steps:\n  - {produce: m\xff1}\n")
    assert_refused(path, "not UTF-8", ":4")
    assert_refused(steps_file(tmp_path, '{"produce": "m\\u0000"}'), "step 0", "NUL")


def test_a_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, 9):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\nname: x\n" + CONFIG_YAML + "steps: []\n")
    assert_refused(path)


def test_yaml_python_tags_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tag.yaml"
    path.write_text(
        "name: !!python/object/apply:os.system ['true']\n" + CONFIG_YAML + "steps: []\n"
    )
    assert_refused(path, "!!python")


def test_a_10_mb_line_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text('{"name": "' + "x" * 10_000_000 + '", ' + CONFIG + ', "steps": []}')
    assert_refused(path, "1,000,000")


# ---------------------------------------------------------------------- counts


def test_too_many_brokers_are_refused_naming_the_limit(tmp_path: Path) -> None:
    brokers = list(range(40))
    path = json_file(
        tmp_path,
        json.dumps({"name": "x", "config": {"brokers": brokers, "replicas": [1]}, "steps": []}),
    )
    assert_refused(path, "config.brokers", "more than 32 brokers")


def test_too_many_steps_are_refused_naming_the_limit(tmp_path: Path) -> None:
    document = {"name": "x", "config": {"brokers": [1], "replicas": [1]}}
    document["steps"] = [{"flush": 1}] * 10_001
    path = json_file(tmp_path, json.dumps(document))
    assert_refused(path, "steps", "more than 10,000 steps")


def test_an_unknown_invariant_is_refused(tmp_path: Path) -> None:
    path = json_file(tmp_path, '{"name": "x", ' + CONFIG + ', "invariants": ["Nope"], "steps": []}')
    assert_refused(path, "invariants", "unknown invariant")
    good = json_file(tmp_path, '{"name": "x", ' + CONFIG + ', "steps": []}', "good.json")
    code, _, stderr = run_cli("replicate", str(good), "--invariants", "StrongIsr,Nope")
    assert code == 2 and "invariants: unknown invariant" in stderr


# ---------------------------------------------------------------------- result documents


def result_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "result.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"name": "x", "timeline": [{"step": "1"}]}', "timeline[0].step"),
        ('{"name": "x", "timeline": [{"replicas": {"1": {"leo": [1]}}}]}', "timeline[0]"),
        ('{"name": "x", "acked": 5}', "acked"),
        ('{"name": "x", "violations": [{"step": "a"}]}', "violations[0].step"),
        ('{"name": "\\ud800"}', "surrogate"),
        ('{"name": "x", "hw": Infinity}', "Infinity"),
        ('{"name": "x", "hw": 1' + "0" * 5000 + "}", "digits"),
        ('{"name": "x", "acked": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
    ],
)
def test_bad_result_documents_are_refused_naming_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = result_file(tmp_path, text)
    with pytest.raises(PageInputError) as raised:
        load_replication_result(path)
    assert str(raised.value).startswith(str(path))
    assert expected in str(raised.value)


def test_dashboard_refuses_a_result_with_a_bad_field_in_one_line(tmp_path: Path) -> None:
    path = result_file(tmp_path, '{"name": "x", "timeline": [{"step": 1, "isr": 3}]}')
    code, stdout, stderr = run_cli("dashboard", str(path), "-o", str(tmp_path / "page.html"))
    assert code == 2
    assert "Traceback" not in stdout + stderr
    assert len(stderr.strip().splitlines()) == 1
    assert "timeline[0].isr: must be a list" in stderr
    assert not (tmp_path / "page.html").exists()


def test_a_result_document_with_a_lone_surrogate_is_refused_before_writing() -> None:
    with pytest.raises(PageInputError, match="surrogate"):
        check_replication_result({"name": "x", "acked": ["\ud800"]})
