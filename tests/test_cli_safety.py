"""No command deletes or overwrites what it did not create, and nothing ends in a traceback.

`ktk traces generate`, `ktk traces import` and `ktk demo` write their --out directory whole
through ktkbase.outputs; bad numbers, Ctrl-C, SIGKILL, a stale JAVA_HOME, a full or read-only
disk, a closed pipe and unencodable ids each end as one line and a documented exit code.
"""

from __future__ import annotations

import errno
import gzip
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer
from conftest import EXAMPLES, ktk_process
from typer.testing import CliRunner

from ktk.cli import app
from ktkbase import outputs
from ktkbase.outputs import MANIFEST_NAME, SUCCESS_NAME, read_manifest

DUMP_LOG = EXAMPLES / "importers" / "dump-log.txt"


def invoke(*args: str, stdin: str | bytes | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=stdin)


def generate(out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return invoke(
        "traces",
        "generate",
        "-n",
        "2",
        "--members",
        "2-3",
        "--partitions",
        "4",
        "--out",
        str(out),
        *extra,
    )


def error_lines(outcome) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in outcome.stderr.splitlines() if line.strip()]


def debris(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.ktk-"))


def wait_for(condition, seconds: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


# -- refusals -------------------------------------------------------------------------------


def test_generate_refuses_a_directory_ktk_did_not_create_and_keeps_its_files(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    outcome = generate(out)
    assert outcome.exit_code == 2
    assert len(error_lines(outcome)) == 1 and "--force" in outcome.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "keep me"
    assert debris(tmp_path, "mine") == []


def test_force_adds_ktk_files_beside_foreign_ones_and_keeps_them(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert generate(out, "--force").exit_code == 0
    assert (out / "notes.txt").read_text() == "keep me"
    assert (out / "mixed-s0.jsonl").exists()
    assert read_manifest(out).entries == (SUCCESS_NAME, "mixed-s0.jsonl")  # type: ignore[union-attr]
    # a second forced run replaces only what ktk wrote there
    assert generate(out, "--force", "--seed", "3").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        MANIFEST_NAME,
        SUCCESS_NAME,
        "mixed-s3.jsonl",
        "notes.txt",
    ]


def test_second_run_replaces_the_first_one_whole(tmp_path):
    out = tmp_path / "traces"
    assert generate(out, "--seed", "1").exit_code == 0
    manifest = read_manifest(out)
    assert manifest is not None and manifest.command == "traces generate"
    assert generate(out, "--seed", "2").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, SUCCESS_NAME, "mixed-s2.jsonl"]
    assert debris(tmp_path, "traces") == []


@pytest.mark.parametrize("target", [".", "./"])
def test_out_dot_is_refused(tmp_path, monkeypatch, target):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("x")
    outcome = generate(Path(target))
    assert outcome.exit_code == 2 and len(error_lines(outcome)) == 1
    assert "current directory" in outcome.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_out_that_holds_the_current_directory_is_refused(tmp_path, monkeypatch):
    inner = tmp_path / "work"
    inner.mkdir()
    monkeypatch.chdir(inner)
    outcome = generate(tmp_path)
    assert outcome.exit_code == 2 and "current directory" in outcome.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_out_that_is_a_file_is_refused_and_the_file_kept(tmp_path):
    target = tmp_path / "results.txt"
    target.write_text("precious")
    for outcome in (
        generate(target),
        invoke("traces", "import", "--from", "dump-log", str(DUMP_LOG), "--out", str(target)),
        invoke("demo", "--out", str(target)),
    ):
        assert outcome.exit_code == 2, outcome.output
        assert len(error_lines(outcome)) == 1 and "not a directory" in outcome.stderr
    assert target.read_text() == "precious"


def test_import_into_the_directory_of_its_input_is_refused_and_the_input_kept(tmp_path):
    capture = tmp_path / "captures" / "dump.txt"
    capture.parent.mkdir()
    capture.write_bytes(DUMP_LOG.read_bytes())
    for out in (capture.parent, tmp_path):
        outcome = invoke("traces", "import", "--from", "dump-log", str(capture), "--out", str(out))
        assert outcome.exit_code == 2
        assert error_lines(outcome) == [
            f"error: refusing to write into {out}/: it contains the input {capture}; "
            "choose a new directory"
        ]
    # --force never overrides it
    outcome = invoke(
        "traces",
        "import",
        "--from",
        "dump-log",
        str(capture),
        "--out",
        str(capture.parent),
        "--force",
    )
    assert outcome.exit_code == 2
    assert capture.read_bytes() == DUMP_LOG.read_bytes()
    assert sorted(p.name for p in capture.parent.iterdir()) == ["dump.txt"]


def test_import_refuses_an_out_that_is_its_topics_file_directory(tmp_path):
    topics = tmp_path / "side" / "topics.json"
    topics.parent.mkdir()
    topics.write_text('{"orders": 4}')
    outcome = invoke(
        "traces",
        "import",
        "--from",
        "dump-log",
        str(DUMP_LOG),
        "--topics",
        str(topics),
        "--out",
        str(topics.parent),
    )
    assert outcome.exit_code == 2 and "contains the input" in outcome.stderr
    assert topics.read_text() == '{"orders": 4}'


def test_demo_refuses_a_foreign_directory_before_starting_spark(tmp_path, monkeypatch):
    import spark_jobs.session

    def no_spark(**_: object) -> None:
        raise AssertionError("Spark must not start for a refused output")

    monkeypatch.setattr(spark_jobs.session, "get_session", no_spark)
    out = tmp_path / "demo"
    out.mkdir()
    (out / "report.html").write_text("someone else's")
    outcome = invoke("demo", "--out", str(out), "-n", "2")
    assert outcome.exit_code == 2 and len(error_lines(outcome)) == 1
    assert (out / "report.html").read_text() == "someone else's"


# -- numbers, help ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--groups", "-1"], "--groups must be between 1 and 100,000 (got -1)"),
        (["-n", "0"], "--groups must be between 1 and 100,000 (got 0)"),
        (["--groups", str(10**9)], "--groups must be between 1 and 100,000 (got 1,000,000,000)"),
        (["--generations", "0"], "--generations must be between 1 and 10,000 (got 0)"),
        (["--members", "1-1000000000000"], "--members must be N or LOW-HIGH within 1-100,000"),
        (["--members", "0-3"], "--members must be N or LOW-HIGH within 1-100,000"),
        (["--partitions", "200000"], "--partitions must be N or LOW-HIGH within 1-100,000"),
        (["--members", "9-3"], "--members: LOW must not exceed HIGH"),
        (["-n", "1000", "--members", "100000"], "must be at most 100,000,000"),
    ],
)
def test_generate_checks_numbers_up_front_naming_option_and_limit(tmp_path, args, named):
    outcome = invoke("traces", "generate", *args, "--out", str(tmp_path / "t"))
    assert outcome.exit_code == 2
    assert len(error_lines(outcome)) == 1 and named in outcome.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("groups", ["0", "-5", "100000"])
def test_demo_checks_groups_up_front(tmp_path, groups):
    outcome = invoke("demo", "-n", groups, "--out", str(tmp_path / "d"))
    assert outcome.exit_code == 2 and "--groups must be between 1 and 2,000" in outcome.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "verb", [["traces", "generate"], ["traces", "import"], ["demo"], ["assign"], []]
)
def test_help_shows_no_python_types(verb):
    outcome = invoke(*verb, "--help")
    assert outcome.exit_code == 0
    for python_type in ("<bool>", "<int>", "<str>", "<path>", "list[", "<Path"):
        assert python_type not in outcome.stdout


def help_text(*verb: str) -> str:
    """The help of a verb as plain words (box drawing and line wrapping removed)."""
    text = invoke(*verb, "--help").stdout
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def test_n_means_groups_on_every_verb_that_generates():
    for verb in (["traces", "generate"], ["demo"]):
        assert "--groups -n INTEGER How many traces (consumer groups)" in help_text(*verb)


def test_force_help_says_exactly_what_it_may_replace():
    for verb in (["traces", "generate"], ["traces", "import"], ["demo"]):
        text = help_text(*verb)
        assert "--force" in text and "are replaced; nothing else there is touched" in text


# -- standard input ---------------------------------------------------------------------------


def test_stdin_helper_gives_readers_a_file_with_the_right_suffix(monkeypatch, capsys):
    import io

    from ktk import console

    for data, name in (
        (b'{"a": 1}\n', "stdin.jsonl"),
        (gzip.compress(b'{"a": 1}\n'), "stdin.jsonl.gz"),
        (b"PAR1....", "stdin.parquet"),
    ):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        with console.stdin_as_files(["x.jsonl", "-"], suffix=".jsonl") as paths:
            assert paths[0] == "x.jsonl" and Path(paths[1]).name == name
            assert Path(paths[1]).read_bytes() == data
            assert console.shown_name(paths[1]) == "<stdin>"
            with pytest.raises(typer.Exit):
                raise console.fail(f"{paths[1]}:3: row: not valid JSON")
            assert capsys.readouterr().err.strip() == "error: <stdin>:3: row: not valid JSON"
        assert not Path(paths[1]).exists() and console.shown_name(paths[1]) == paths[1]


# -- disks that say no ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [(errno.EROFS, "read-only"), (errno.ENOSPC, "the disk is full")],
)
def test_a_disk_that_refuses_the_final_move_is_one_line_and_keeps_the_previous_result(
    tmp_path, monkeypatch, code, words
):
    out = tmp_path / "traces"
    assert generate(out, "--seed", "1").exit_code == 0
    before = (out / "mixed-s1.jsonl").read_bytes()
    real_rename = os.rename

    def refusing_rename(source, target, *args, **kwargs):  # type: ignore[no-untyped-def]
        if ".ktk-staging-" in str(source):
            raise OSError(code, os.strerror(code), str(target))
        return real_rename(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "rename", refusing_rename)
    monkeypatch.setattr("ktkbase.outputs.LocalFileSystem._exchange_function", None)
    outcome = generate(out, "--seed", "2")
    assert outcome.exit_code == 2
    assert len(error_lines(outcome)) == 1 and words in outcome.stderr
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, SUCCESS_NAME, "mixed-s1.jsonl"]
    assert (out / "mixed-s1.jsonl").read_bytes() == before
    assert debris(tmp_path, "traces") == []


def test_a_disk_that_fills_up_while_a_trace_file_is_written_leaves_no_half_file(
    tmp_path, monkeypatch
):
    from assignors.traces import files

    target = tmp_path / "t.jsonl"
    files.write_traces_jsonl([{"trace_id": "old", "generation": 1}], target)
    before = target.read_bytes()

    def full_disk_rows():  # type: ignore[no-untyped-def]
        yield {"trace_id": "new", "generation": 1}
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    with pytest.raises(OSError):
        files.write_traces_jsonl(full_disk_rows(), target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_full_disk_while_generating_is_one_line_and_keeps_the_previous_result(
    tmp_path, monkeypatch
):
    import assignors.traces.files as files

    out = tmp_path / "traces"
    assert generate(out, "--seed", "1").exit_code == 0
    real = files.write_traces

    def filling(rows, path):  # type: ignore[no-untyped-def]
        real(rows, path)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(files, "write_traces", filling)
    outcome = generate(out, "--seed", "2")
    assert outcome.exit_code == 2 and len(error_lines(outcome)) == 1
    assert "the disk is full" in outcome.stderr and "nothing was changed" in outcome.stderr
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, SUCCESS_NAME, "mixed-s1.jsonl"]
    assert debris(tmp_path, "traces") == []


# -- interrupts and kills -----------------------------------------------------------------------


def test_ctrl_c_inside_a_command_is_one_line_exit_130_and_keeps_the_previous_result(
    tmp_path, monkeypatch
):
    import assignors.traces.generate as generator

    out = tmp_path / "traces"
    assert generate(out, "--seed", "1").exit_code == 0

    def interrupted_rows(*args, **kwargs):  # type: ignore[no-untyped-def]
        yield from generator.generate_group("mixed", 0, 1)
        raise KeyboardInterrupt

    monkeypatch.setattr(generator, "generate_rows", interrupted_rows)
    outcome = generate(out, "--seed", "2")
    assert outcome.exit_code == 130
    assert error_lines(outcome) == ["error: interrupted"]
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, SUCCESS_NAME, "mixed-s1.jsonl"]
    assert debris(tmp_path, "traces") == []


def wait_for_staging(process: subprocess.Popen, parent: Path, name: str) -> None:  # type: ignore[type-arg]
    """Until the run has started writing (its staging directory exists)."""

    def staging() -> bool:
        return any(".ktk-staging-" in n for n in debris(parent, name))

    assert wait_for(lambda: staging() or process.poll() is not None)
    assert staging(), process.communicate()


@pytest.mark.slow
def test_sigint_to_a_running_generate_exits_130_with_one_line(tmp_path):
    out = tmp_path / "traces"
    assert generate(out, "--seed", "1").exit_code == 0
    process = ktk_process("traces", "generate", "-n", "10000", "--out", str(out), cwd=tmp_path)
    try:
        wait_for_staging(process, tmp_path, "traces")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130
    assert stderr.decode().splitlines() == ["error: interrupted"]
    assert stdout == b""
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, SUCCESS_NAME, "mixed-s1.jsonl"]
    assert debris(tmp_path, "traces") == []


@pytest.mark.slow
def test_sigkill_mid_generate_keeps_the_previous_result_and_the_next_run_clears_debris(
    tmp_path,
):
    out = tmp_path / "traces"
    assert generate(out, "--seed", "1").exit_code == 0
    before = (out / "mixed-s1.jsonl").read_bytes()
    process = ktk_process("traces", "generate", "-n", "10000", "--out", str(out), cwd=tmp_path)
    try:
        wait_for_staging(process, tmp_path, "traces")
        time.sleep(0.3)  # let it write part of the file
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGKILL
    assert (out / "mixed-s1.jsonl").read_bytes() == before
    assert debris(tmp_path, "traces") != []  # the killed run could not clean up
    assert generate(out, "--seed", "2").exit_code == 0
    assert debris(tmp_path, "traces") == []
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, SUCCESS_NAME, "mixed-s2.jsonl"]


# -- JVM ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        ("demo", "-n", "2", "--out", "d"),
        (
            "replay",
            str(EXAMPLES / "traces" / "mixed-s137.jsonl"),
            "--engine",
            "spark",
            "--out",
            "r",
        ),
    ],
    ids=["demo", "replay-on-spark"],
)
def test_stale_java_home_is_one_line_exit_2_and_writes_nothing(tmp_path, arguments):
    process = ktk_process(
        *arguments, cwd=tmp_path, env={"JAVA_HOME": str(tmp_path / "nonexistent")}
    )
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    # (the progress bar, transient, leaves a blank line on a stream that is no terminal)
    assert [line for line in stderr.decode().splitlines() if line] == [
        f"error: JAVA_HOME is {tmp_path / 'nonexistent'}, which does not exist; point JAVA_HOME "
        "at a JDK 17+ or unset it to use the `java` on the PATH"
    ]
    assert "Traceback" not in stderr.decode() and stdout == b""
    assert list(tmp_path.iterdir()) == []


def test_jvm_that_dies_is_one_line_exit_2(tmp_path, monkeypatch):
    from py4j.protocol import Py4JNetworkError

    import spark_jobs.replay_traces

    out = tmp_path / "demo"

    def dead_jvm(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise Py4JNetworkError("Answer from Java side is empty")

    monkeypatch.setattr("spark_jobs.session.get_session", lambda **_: object())
    monkeypatch.setattr(spark_jobs.replay_traces, "run", dead_jvm)
    outcome = invoke("demo", "-n", "2", "--out", str(out))
    assert outcome.exit_code == 2
    assert len(error_lines(outcome)) == 2  # the "generated" progress line, then the error
    assert error_lines(outcome)[-1].startswith("error: the Spark JVM stopped unexpectedly")
    assert not out.exists() and debris(tmp_path, "demo") == []


@pytest.mark.spark
@pytest.mark.slow
def test_demo_writes_its_directory_whole_and_ctrl_c_or_a_dead_jvm_keep_it(tmp_path):
    out = tmp_path / "demo"
    first = ktk_process("demo", "-n", "3", "--master", "local[2]", "--out", str(out), cwd=tmp_path)
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr.decode()[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        MANIFEST_NAME,
        SUCCESS_NAME,
        "key-trace-scores.csv",
        "report.html",
        "results",
        "traces",
    ]
    assert read_manifest(out).command == "demo"  # type: ignore[union-attr]
    report = (out / "report.html").read_bytes()

    returncode, text = _disturbed_demo(out, tmp_path, lambda p: p.send_signal(signal.SIGINT))
    assert returncode == 130, text[-2000:]
    assert "Traceback" not in text and "py4j" not in text
    assert _error_lines(text) == ["error: interrupted"]
    assert (out / "report.html").read_bytes() == report
    assert debris(tmp_path, "demo") == []

    returncode, text = _disturbed_demo(out, tmp_path, _kill_the_jvm)
    assert returncode == 2, text[-2000:]
    assert "Traceback" not in text and "py4j" not in text
    errors = _error_lines(text)
    assert len(errors) == 1 and errors[0].startswith("error: the Spark JVM stopped unexpectedly")
    assert (out / "report.html").read_bytes() == report
    assert debris(tmp_path, "demo") == []


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _kill_the_jvm(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """SIGKILL the JVM that ``process`` started (its child running java)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == process.pid and b"java" in command:
            os.kill(int(stat.parent.name), signal.SIGKILL)
            return
    raise AssertionError("no JVM found under the demo process")


def _disturbed_demo(out: Path, cwd: Path, disturb) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """Run `ktk demo -n 40` into ``out``, ``disturb`` it two seconds into the replay job; the
    exit code and everything it printed on stderr."""
    process = ktk_process("demo", "-n", "40", "--master", "local[2]", "--out", str(out), cwd=cwd)
    seen: list[str] = []

    def collect() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            seen.append(raw.decode(errors="replace"))

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: any("generated 40 traces" in line for line in seen), 300)
        time.sleep(2)  # into the replay job
        disturb(process)
        process.wait(timeout=120)
        reader.join(timeout=30)
    finally:
        process.kill()
    return process.returncode, "".join(seen)


def test_every_verb_runs_inside_the_one_edge_handler():
    def callbacks(typer_app):  # type: ignore[no-untyped-def]
        for info in typer_app.registered_commands:
            yield info.callback
        for group in typer_app.registered_groups:
            yield from callbacks(group.typer_instance)

    found = list(callbacks(app))
    assert len(found) >= 10
    assert all(getattr(callback, "ktk_guarded", False) for callback in found)


# -- single files: the dashboard page -----------------------------------------------------------


@pytest.mark.slow
def test_sigkill_mid_dashboard_keeps_the_previous_page_and_the_next_run_clears_debris(tmp_path):
    from dashboard_data import synthetic_scores
    from dashboard_data import write_results as write_dashboard_results

    results = write_dashboard_results(
        tmp_path / "results", synthetic_scores(20_000), protocol_in="summary"
    )
    page = tmp_path / "report.html"
    first = ktk_process("dashboard", str(results), "-o", str(page), cwd=tmp_path)
    assert first.wait(timeout=300) == 0, first.communicate()
    before = page.read_bytes()
    # a temporary file as a killed write leaves it: named for a process that has ended
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    stale = tmp_path / f".report.html.ktk-tmp-{outputs._host()}-{ended.pid}-x1y2z3"
    stale.write_bytes(before[: len(before) // 2])
    process = ktk_process("dashboard", str(results), "-o", str(page), cwd=tmp_path)
    try:
        time.sleep(1.0)  # reading and aggregating 20,000 traces is under way
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
    finally:
        process.kill()
    assert page.read_bytes() == before  # whole, and the previous page
    again = ktk_process("dashboard", str(results), "-o", str(page), cwd=tmp_path)
    assert again.wait(timeout=300) == 0, again.communicate()
    assert not stale.exists()
    assert [p.name for p in tmp_path.iterdir() if ".ktk-tmp-" in p.name] == []
    assert page.read_bytes() == before  # same results, same page
