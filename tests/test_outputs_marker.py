"""The commit marker ``_SUCCESS`` of :mod:`ktkbase.outputs`: written last into every output
directory, deleted first when a run replaces a result, never left by a failed run, and never
taken from a directory where ktk did not write it.

The file system used here is the machine's own; it records every change the output rules make
and, after each one, checks what a reader polling for the marker would see: a marker only ever
stands beside a complete result (the previous one or the new one, never a mix)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktk.cli import app
from ktkbase.errors import OutputError
from ktkbase.outputs import (
    MANIFEST_NAME,
    SUCCESS_NAME,
    LocalFileSystem,
    Manifest,
    output_directory,
    plan_output_directory,
    read_manifest,
    staged_directory,
)

Contents = dict[str, bytes]


def contents(directory: Path) -> Contents:
    """The files of a result directory a reader would use (not the manifest, not the marker)."""
    if not directory.is_dir():
        return {}
    return {
        path.name: path.read_bytes()
        for path in directory.iterdir()
        if path.name not in (MANIFEST_NAME, SUCCESS_NAME)
    }


class WatchedFileSystem(LocalFileSystem):
    """The local file system that logs every change as (operation, names relative to the
    target's parent) and checks after each one that a marker in ``target`` stands only beside
    one of the ``complete`` results. ``exchange=False`` behaves as Hadoop's file systems do (no
    atomic exchange of two directories); ``fail`` raises EIO before the change it matches."""

    def __init__(
        self,
        target: Path,
        complete: Iterable[Contents],
        *,
        exchange: bool = True,
        fail: Callable[[str, tuple[str, ...]], bool] = lambda operation, names: False,
    ) -> None:
        self.target = target
        self.complete = list(complete)
        self.atomic_exchange = exchange
        self.fail = fail
        self.log: list[tuple[str, tuple[str, ...]]] = []

    def _change(self, operation: str, paths: tuple[str, ...], apply: Callable[[], object]) -> None:
        names = tuple(os.path.relpath(path, self.target.parent) for path in paths)
        if self.fail(operation, names):
            raise OSError(errno.EIO, os.strerror(errno.EIO), paths[-1])
        apply()
        self.log.append((operation, names))
        if (self.target / SUCCESS_NAME).exists():
            seen = contents(self.target)
            assert seen in self.complete, f"marker beside an incomplete result after {names}"

    def write_text(self, path: str, text: str) -> None:
        self._change("write", (path,), lambda: LocalFileSystem.write_text(self, path, text))

    def rename(self, source: str, target: str) -> None:
        self._change(
            "rename", (source, target), lambda: LocalFileSystem.rename(self, source, target)
        )

    def exchange(self, first: str, second: str) -> bool:
        if not self.atomic_exchange:
            return False
        swapped: list[bool] = []

        def swap() -> None:
            swapped.append(LocalFileSystem.exchange(self, first, second))

        self._change("exchange", (first, second), swap)
        return swapped[0]

    def delete_tree(self, path: str) -> None:
        self._change("delete", (path,), lambda: LocalFileSystem.delete_tree(self, path))

    def touching_target(self) -> list[tuple[str, tuple[str, ...]]]:
        """The logged changes that involve the target or anything inside it."""
        name = self.target.name
        return [
            (operation, names)
            for operation, names in self.log
            if any(n == name or n.startswith(name + os.sep) for n in names)
        ]


def write(
    target: Path, files: Contents, fs: LocalFileSystem | None = None, *, force: bool = False
) -> None:
    """One run of a command that writes ``files`` into ``target``."""
    plan = plan_output_directory(
        target, command="test", version="1", fs=fs or LocalFileSystem(), force=force
    )
    with staged_directory(plan) as staging:
        for name, data in files.items():
            Path(staging, name).write_bytes(data)


OLD = {"a.txt": b"old a", "b.txt": b"old b"}
NEW = {"a.txt": b"new a", "b.txt": b"new b", "c.txt": b"new c"}
MARKER_WRITE = ("write", (os.path.join("out", SUCCESS_NAME),))
MARKER_DELETE = ("delete", (os.path.join("out", SUCCESS_NAME),))


def debris(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".ktk-" in p.name)


# -- ordering -------------------------------------------------------------------------------


def test_marker_is_written_empty_and_last_into_a_new_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fs = WatchedFileSystem(out, [NEW])
    write(out, NEW, fs)
    assert fs.log[-1] == MARKER_WRITE
    assert (out / SUCCESS_NAME).read_bytes() == b""
    assert contents(out) == NEW and debris(tmp_path) == []


@pytest.mark.parametrize("exchange", [True, False], ids=["atomic-exchange", "rename-aside"])
def test_a_rerun_deletes_the_old_marker_before_it_moves_anything_and_writes_the_new_one_last(
    tmp_path: Path, exchange: bool
) -> None:
    out = tmp_path / "out"
    write(out, OLD)
    assert (out / SUCCESS_NAME).exists()
    fs = WatchedFileSystem(out, [OLD, NEW], exchange=exchange)
    write(out, NEW, fs)
    assert fs.touching_target()[0] == MARKER_DELETE
    assert fs.log[-1] == MARKER_WRITE
    assert contents(out) == NEW and (out / SUCCESS_NAME).exists() and debris(tmp_path) == []


def test_a_forced_rerun_into_a_foreign_directory_deletes_ktks_marker_first(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_bytes(b"not ktk's")
    write(out, OLD, force=True)
    assert read_manifest(out).entries == ("_SUCCESS", "a.txt", "b.txt")  # type: ignore[union-attr]
    foreign = {"notes.txt": b"not ktk's"}
    fs = WatchedFileSystem(out, [OLD | foreign, NEW | foreign])
    write(out, NEW, fs, force=True)
    assert fs.touching_target()[0] == MARKER_DELETE
    assert fs.log[-1] == MARKER_WRITE
    assert contents(out) == NEW | foreign and debris(tmp_path) == []


def test_a_success_file_the_command_staged_is_replaced_by_the_marker_written_last(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    fs = WatchedFileSystem(out, [NEW])
    write(out, NEW | {SUCCESS_NAME: b"written early"}, fs)
    assert fs.log[-1] == MARKER_WRITE
    assert (out / SUCCESS_NAME).read_bytes() == b"" and contents(out) == NEW


# -- failures -------------------------------------------------------------------------------


def test_a_run_that_fails_while_writing_leaves_no_marker_and_no_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with (
        pytest.raises(KeyboardInterrupt),
        output_directory(out, command="t", version="1") as staging,
    ):
        (staging / "a.txt").write_bytes(b"half")
        raise KeyboardInterrupt
    assert not out.exists() and debris(tmp_path) == []


def test_a_run_that_fails_while_writing_keeps_the_previous_result_with_its_marker(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    write(out, OLD)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(RuntimeError), output_directory(out, command="t", version="1") as staging:
        (staging / "a.txt").write_bytes(b"half")
        raise RuntimeError("the job failed")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert SUCCESS_NAME in before and debris(tmp_path) == []


def test_a_failure_midway_through_a_forced_merge_leaves_no_marker(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_bytes(b"not ktk's")
    write(out, OLD, force=True)
    foreign = {"notes.txt": b"not ktk's"}

    def second_entry_moved_in(operation: str, names: tuple[str, ...]) -> bool:
        return operation == "rename" and names[-1] == os.path.join("out", "b.txt")

    fs = WatchedFileSystem(out, [OLD | foreign, NEW | foreign], fail=second_entry_moved_in)
    with pytest.raises(OutputError, match="cannot write"):
        write(out, NEW, fs, force=True)
    assert not (out / SUCCESS_NAME).exists()
    assert (out / "notes.txt").read_bytes() == b"not ktk's"


def test_a_failed_final_move_puts_the_previous_result_back_with_its_marker(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    write(out, OLD)

    def staging_moved_in(operation: str, names: tuple[str, ...]) -> bool:
        return operation == "rename" and ".ktk-staging-" in names[0]

    fs = WatchedFileSystem(out, [OLD, NEW], exchange=False, fail=staging_moved_in)
    with pytest.raises(OutputError, match="nothing was changed"):
        write(out, NEW, fs)
    assert fs.touching_target()[0] == MARKER_DELETE
    assert contents(out) == OLD and (out / SUCCESS_NAME).exists()
    assert debris(tmp_path) == []


def test_a_marker_that_cannot_be_written_fails_the_run_and_none_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out"

    def marker_written(operation: str, names: tuple[str, ...]) -> bool:
        return (operation, names) == MARKER_WRITE

    fs = WatchedFileSystem(out, [NEW], fail=marker_written)
    with pytest.raises(OutputError):
        write(out, NEW, fs)
    assert not (out / SUCCESS_NAME).exists()


# -- ownership ------------------------------------------------------------------------------


def test_the_manifest_lists_the_marker_so_the_next_run_replaces_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write(out, OLD)
    assert SUCCESS_NAME in read_manifest(out).entries  # type: ignore[union-attr]
    write(out, NEW)  # no --force: the marker is ktk's own
    assert contents(out) == NEW and (out / SUCCESS_NAME).read_bytes() == b""


def test_a_result_written_before_markers_is_replaced_and_gains_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_bytes(b"old a")
    (out / MANIFEST_NAME).write_text(Manifest("test", "0", entries=("a.txt",)).to_json())
    write(out, NEW)
    assert contents(out) == NEW and (out / SUCCESS_NAME).exists()


def test_force_refuses_a_success_marker_ktk_did_not_write_and_changes_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000.parquet").write_bytes(b"another job's data")
    (out / SUCCESS_NAME).write_bytes(b"another job's commit")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(OutputError, match=f"its {SUCCESS_NAME} was not written by ktk"):
        write(out, NEW, force=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert debris(tmp_path) == []


def test_a_marker_beside_a_ktk_manifest_that_does_not_list_it_is_foreign(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_bytes(b"old a")
    (out / MANIFEST_NAME).write_text(Manifest("test", "0", entries=("a.txt",)).to_json())
    (out / SUCCESS_NAME).write_bytes(b"")
    with pytest.raises(OutputError, match=r"entries ktk did not write \(_SUCCESS\)"):
        write(out, NEW)
    with pytest.raises(OutputError, match=f"its {SUCCESS_NAME} was not written by ktk"):
        write(out, NEW, force=True)
    assert (out / "a.txt").read_bytes() == b"old a" and (out / SUCCESS_NAME).exists()


def test_ktk_force_into_another_jobs_committed_output_is_one_line_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "spark-output"
    out.mkdir()
    (out / SUCCESS_NAME).write_bytes(b"")
    (out / "part-00000.json").write_bytes(b"{}\n")
    arguments = ["traces", "generate", "-n", "2", "--members", "2-3", "--partitions", "4"]
    outcome = CliRunner().invoke(app, [*arguments, "--out", str(out), "--force"])
    assert outcome.exit_code == 2
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and SUCCESS_NAME in lines[0] and "move it away" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == [SUCCESS_NAME, "part-00000.json"]


def test_force_help_says_another_jobs_success_marker_is_refused() -> None:
    text = CliRunner().invoke(app, ["traces", "generate", "--help"]).stdout
    words = " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())
    assert "Another job's _SUCCESS commit marker there is refused, not replaced." in words
