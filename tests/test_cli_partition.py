"""`ktk partition`: the keys form (default), remap, score, names; bad input exits 2."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ktk.cli import app

EXAMPLE_TRACE = EXAMPLES / "key-traces" / "orders-and-clicks.jsonl"


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, ["partition", *args], input=stdin)


def lines(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line.strip()]


def test_keys_form_prints_each_key_and_its_java_partition():
    outcome = invoke("TT0124", "fd7af248-ce5c-46a5-93d7-1c0c9005b99d", "--partitions", "32")
    assert outcome.exit_code == 0, outcome.output
    assert lines(outcome.stdout) == [
        ["TT0124", "22"],
        ["fd7af248-ce5c-46a5-93d7-1c0c9005b99d", "26"],
    ]


def test_compare_shows_the_librdkafka_default_beside_java():
    outcome = invoke("TT0124", "-n", "15", "--compare", "librdkafka-default")
    assert outcome.exit_code == 0, outcome.output
    assert lines(outcome.stdout) == [["TT0124", "10", "9"]]


def test_options_may_come_first_and_keys_may_be_subcommand_names():
    outcome = invoke("--partitions", "15", "--partitioner", "java-default", "TT0124")
    assert lines(outcome.stdout) == [["TT0124", "10"]]
    named = invoke("keys", "score", "-n", "32")
    assert named.exit_code == 0 and lines(named.stdout)[0][0] == "score"


def test_hex_keys_and_keys_from_stdin():
    outcome = invoke("--hex", "545430313234", "-n", "15")
    assert lines(outcome.stdout) == [["545430313234", "10"]]
    piped = invoke("-", "-n", "15", stdin="TT0124\na\n")
    assert lines(piped.stdout) == [["TT0124", "10"], ["a", "4"]]


def test_a_key_ignoring_partitioner_prints_a_dash_and_warns():
    outcome = invoke("k", "-n", "6", "-p", "java-roundrobin")
    assert outcome.exit_code == 0
    assert lines(outcome.stdout) == [["k", "-"]]
    assert "does not hash" in outcome.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("k", "--partitions", "0"), "--partitions must be > 0 (got 0)"),
        (("k", "--partitions", "-4"), "--partitions must be > 0 (got -4)"),
        (("--hex", "zz", "-n", "3"), "key is not valid hex (got 'zz')"),
        (("k", "-n", "3", "-p", "java-magic"), "unknown partitioner"),
        (("remap", "--from", "0", "--to", "4", "k"), "--from must be > 0"),
        (("k", "-n", "1000001"), "--partitions must be at most 1,000,000 (got 1000001)"),
        (("k", "-n", str(10**30)), "--partitions must be at most 1,000,000"),
        (("remap", "--from", "3", "--to", "1000000000", "k"), "--to must be at most 1,000,000"),
        (("k", "-n", "3", "\ud800"), "key is not text that can be written as bytes"),
        (("score", str(EXAMPLE_TRACE), "--batch-size", "0"), "--batch-size must be in [1, "),
        (("score", str(EXAMPLE_TRACE), "--batch-size", "-1"), "--batch-size must be in [1, "),
        (("score", str(EXAMPLE_TRACE), "--linger-ms", "-5"), "--linger-ms must be in [0, "),
        (("score", str(EXAMPLE_TRACE), "--seed", str(2**63)), "--seed must be in ["),
        (("score", str(EXAMPLE_TRACE), "-p", " , "), "--partitioners needs at least one name"),
        (("score", "-", "--engine", "spark"), "needs --engine python"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(args, message):
    outcome = invoke(*args)
    assert outcome.exit_code == 2
    assert message in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1
    assert "Traceback" not in outcome.output


def test_remap_says_which_keys_change_partition():
    outcome = invoke("remap", "--from", "12", "--to", "16", "a", "c")
    assert outcome.exit_code == 0, outcome.output
    rows = lines(outcome.stdout)
    assert rows[0] == ["a", "4", "12", "moves"]
    assert rows[1] == ["c", "10", "10", "stays"]
    assert rows[2][0].startswith("1 of 2 keys change partition going from 12 to 16")


def test_score_prints_a_table_per_trace_and_partitioner_and_the_disagreement():
    outcome = invoke(
        "score",
        str(EXAMPLE_TRACE),
        "--partitioners",
        "java-builtin,librdkafka-default",
        "--seed",
        "1",
    )
    assert outcome.exit_code == 0, outcome.output
    text = outcome.stdout
    assert text.count("orders-2024-06-11") >= 3 and "librdkafka-consistent_random" in text
    assert (
        "land on different partitions under java-builtin and librdkafka-consistent_random" in text
    )


def test_score_of_a_trace_with_missing_columns_fails_in_one_line(tmp_path: Path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"trace_id": ["t"], "key": [b"k"]}), path)
    outcome = invoke("score", str(path))
    assert outcome.exit_code == 2
    assert "missing column(s) timestamp_ms" in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1


def test_score_of_a_missing_file_fails_in_one_line(tmp_path: Path):
    outcome = invoke("score", str(tmp_path / "nope.jsonl"))
    assert outcome.exit_code == 2 and "No such file" in outcome.stderr


def test_spark_engine_hands_paths_and_settings_to_the_spark_job(monkeypatch):
    from partitioners.keytrace_job import score_paths

    calls = []

    def report(paths, partitioners, settings, master):
        calls.append((paths, partitioners, settings, master))
        return score_paths(paths, partitioners, settings)

    job = types.ModuleType("spark_jobs.score_key_traces")
    job.report = report
    monkeypatch.setitem(sys.modules, "spark_jobs.score_key_traces", job)
    import spark_jobs

    monkeypatch.setattr(spark_jobs, "score_key_traces", job, raising=False)
    outcome = invoke(
        "score",
        str(EXAMPLE_TRACE),
        "-p",
        "java-sticky",
        "--engine",
        "spark",
        "--batch-size",
        "8192",
        "--linger-ms",
        "2",
        "--master",
        "local[1]",
    )
    assert outcome.exit_code == 0, outcome.output
    from partitioners.keytrace_job import ScoreSettings

    assert calls == [([str(EXAMPLE_TRACE)], ["java-sticky"], ScoreSettings(8192, 2, 0), "local[1]")]
    assert "clickstream-2024-06-11" in outcome.stdout


def test_unknown_engine_is_refused():
    outcome = invoke("score", str(EXAMPLE_TRACE), "--engine", "flink")
    assert outcome.exit_code == 2 and "--engine must be python or spark" in outcome.stderr


def test_names_lists_java_and_librdkafka_partitioners():
    outcome = invoke("names")
    names = [row[0] for row in lines(outcome.stdout)]
    assert "java-builtin" in names and "librdkafka-murmur2_random" in names


def test_score_reads_directories_and_scores_a_trace_spread_over_files(tmp_path) -> None:
    from typer.testing import CliRunner

    from ktk.cli import app

    lines = (EXAMPLES / "key-traces" / "orders-and-clicks.jsonl").read_text().splitlines()
    (tmp_path / "nested").mkdir()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    (tmp_path / "nested" / "b.jsonl").write_text("\n".join(lines[len(lines) // 2 :]) + "\n")
    whole = CliRunner().invoke(
        app, ["partition", "score", str(EXAMPLES / "key-traces"), "--partitioners", "java-builtin"]
    )
    split = CliRunner().invoke(
        app, ["partition", "score", str(tmp_path), "--partitioners", "java-builtin"]
    )
    assert whole.exit_code == split.exit_code == 0
    assert whole.output == split.output


def test_score_of_a_directory_without_key_traces_is_an_input_error(tmp_path) -> None:
    from typer.testing import CliRunner

    from ktk.cli import app

    result = CliRunner().invoke(app, ["partition", "score", str(tmp_path)])
    assert result.exit_code == 2
    assert "no key-trace files found" in result.output


def _jsonl(trace_id: str, num_partitions: int = 4, count: int = 3) -> str:
    import base64
    import json

    return "".join(
        json.dumps(
            {
                "trace_id": trace_id,
                "timestamp_ms": index,
                "topic": "orders",
                "num_partitions": num_partitions,
                "key": base64.b64encode(f"k{index}".encode()).decode(),
                "value_bytes": 10,
                "partition": None,
            }
        )
        + "\n"
        for index in range(count)
    )


def test_a_bad_file_in_a_batch_is_reported_and_skipped_and_the_rest_scores(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text(_jsonl("good"))
    (tmp_path / "b.jsonl").write_text(_jsonl("good-too") + "{broken\n")
    (tmp_path / "c.parquet").write_bytes(b"PAR1 not parquet")
    outcome = invoke("score", str(tmp_path), "-p", "java-builtin")
    assert outcome.exit_code == 1
    assert "good" in outcome.stdout and "good-too" not in outcome.stdout
    errors = outcome.stderr.strip().splitlines()
    assert len(errors) == 2
    assert errors[0].startswith(f"error: {tmp_path / 'b.jsonl'}:4: not valid JSON")
    assert errors[0].endswith("(skipped)")
    assert errors[1].startswith(f"error: {tmp_path / 'c.parquet'}: not a readable Parquet file")
    assert "Traceback" not in outcome.output


def test_a_single_bad_file_is_one_error_line_and_exit_2(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text(_jsonl("t", num_partitions=10**9))
    outcome = invoke("score", str(path))
    assert outcome.exit_code == 2
    assert outcome.stderr.strip().splitlines() == [
        f"error: {path}:1: num_partitions: must be an integer in [1, 1000000] (got 1000000000)"
    ]
    assert outcome.stdout == ""


def test_score_reads_a_trace_from_stdin():
    piped = invoke("score", "-", "-p", "java-builtin", stdin=EXAMPLE_TRACE.read_text())
    from_file = invoke("score", str(EXAMPLE_TRACE), "-p", "java-builtin")
    assert piped.exit_code == from_file.exit_code == 0, piped.output
    assert piped.stdout == from_file.stdout


def test_a_bad_trace_on_stdin_names_stdin_and_its_line():
    outcome = invoke("score", "-", stdin=_jsonl("t") + '{"trace_id": 1}\n')
    assert outcome.exit_code == 2
    assert outcome.stderr.startswith("error: <stdin>:4: timestamp_ms, topic, num_partitions")


def test_stdin_keys_are_bytes_and_print_back_as_given():
    from partitioners.keyed import java_partition_for_key

    key = b"caf\xe9-\x00-\xff"
    outcome = CliRunner().invoke(app, ["partition", "-", "-n", "15"], input=key + b"\n")
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout_bytes == key + f"\t{java_partition_for_key(key, 15)}\n".encode()


def test_non_utf8_command_line_keys_are_the_bytes_the_shell_passed():
    import os

    from partitioners.keyed import java_partition_for_key

    key = b"k\xff"
    outcome = invoke(os.fsdecode(key), "-n", "15")
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout_bytes == key + f"\t{java_partition_for_key(key, 15)}\n".encode()


def test_two_partitioners_on_the_python_engine_print_the_disagreement_after_the_table():
    outcome = invoke("score", str(EXAMPLE_TRACE), "-p", "java-builtin,librdkafka-murmur2_random")
    assert outcome.exit_code == 0
    assert outcome.stdout.strip().splitlines()[-1] == (
        "clickstream-2024-06-11: 0 of 61 keys (0 records) land on different partitions under "
        "java-builtin and librdkafka-murmur2_random"
    )


def test_keys_format_csv_has_a_header_and_one_row_per_key():
    import csv
    import io

    outcome = invoke("a", "b", "-n", "6", "--compare", "librdkafka-default", "--format", "csv")
    assert outcome.exit_code == 0, outcome.output
    rows = list(csv.reader(io.StringIO(outcome.stdout)))
    assert rows[0] == ["key", "partition", "compare_partition"]
    plain = lines(invoke("a", "b", "-n", "6", "--compare", "librdkafka-default").stdout)
    assert rows[1:] == plain


def test_keys_format_json_lists_keys_and_partitions():
    import json

    outcome = invoke("TT0124", "-n", "32", "--format", "json")
    assert outcome.exit_code == 0, outcome.output
    [entry] = json.loads(outcome.stdout)
    assert entry["key"] == "TT0124"
    assert entry["partition"] == int(lines(invoke("TT0124", "-n", "32").stdout)[0][1])


def test_score_format_csv_and_json_carry_every_score_row():
    import csv
    import io
    import json

    args = ("score", str(EXAMPLE_TRACE), "-p", "java-builtin,librdkafka-default", "--seed", "1")
    as_csv = invoke(*args, "--format", "csv")
    assert as_csv.exit_code == 0, as_csv.output
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == 4 and rows[0]["trace_id"] == "orders-2024-06-11"
    assert {"bytes_skew", "keys_remapped"} <= set(rows[0])
    as_json = json.loads(invoke(*args, "--format", "json").stdout)
    assert [s["records"] for s in as_json["scores"]] == [int(r["records"]) for r in rows]
    assert as_json["disagreements"][0]["partitioner_b"] == "librdkafka-consistent_random"


def test_an_unknown_format_exits_two_on_keys_and_score():
    for args in (("a", "-n", "2"), ("score", str(EXAMPLE_TRACE))):
        outcome = invoke(*args, "--format", "yaml")
        assert outcome.exit_code == 2
        assert "--format must be one of table, json, csv (got 'yaml')" in outcome.stderr


def test_partition_help_shows_no_python_types():
    for sub in ("keys", "score"):
        text = invoke(sub, "--help").stdout
        assert "--format" in text
        for python_type in ("<bool>", "list[str]", "<class", "NoneType"):
            assert python_type not in text
