"""Outputs that never destroy what ktk did not create.

Every ktk command that writes a directory goes through :func:`output_directory`; every command
that writes one file goes through :func:`output_file`. The rules:

- A directory may be **replaced** only when ktk created it: it holds the manifest
  ``.ktk-output.json`` (tool, version, command, inputs, time, and the entries ktk wrote) and no
  entry the manifest does not list. A new directory, or an empty one, is simply created.
- **Always refused**, ``force`` or not: ``/``, the home directory, the current directory and any
  directory holding them; a target that is, or contains, an input; a target that is a file.
- A non-empty directory ktk did not create (or holding entries ktk did not write) is refused
  unless ``force``; with ``force`` ktk writes its own entries into it, replacing only entries of
  the same names and those an earlier ktk manifest there lists, and leaves every other entry
  alone. Atomicity is then per entry, not for the directory as a whole.
- Everything is written into a sibling staging directory ``.<name>.ktk-staging-<host>-<pid>-<id>``
  first and moved into place by rename (an atomic exchange where the system has one), so an
  interrupted run (Ctrl-C, SIGKILL, a full disk) leaves the previous result intact. Debris of an
  interrupted run is cleared by the next run writing the same target: staging directories of dead
  processes are deleted, and a previous result caught mid-swap is put back.
- The commit marker ``_SUCCESS`` (empty, as Hadoop's FileOutputCommitter writes it) is written
  last, once every other entry is in place and the previous result's debris is gone; a run that
  replaces a result deletes the old marker first, before it moves anything, and a run that fails
  writes none. On object stores (S3, GCS, ABFS), where a directory rename copies file by file,
  readers wait for the marker instead of trusting that the directory exists. The manifest lists
  it among ktk's entries; a ``_SUCCESS`` ktk did not write is refused even with ``force``.

Local paths use the operating system; other file systems (HDFS, S3A, GCS through Hadoop) plug in
through the small :class:`FileSystem` protocol, so the Spark jobs share these rules.

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as parent:
...     out = pathlib.Path(parent) / "results"
...     with output_directory(out, command="demo", version="1") as staging:
...         _ = (staging / "a.txt").write_text("first")
...     with output_directory(out, command="demo", version="1") as staging:
...         _ = (staging / "a.txt").write_text("second")
...     (out / "a.txt").read_text(), sorted(p.name for p in out.iterdir())
('second', ['.ktk-output.json', '_SUCCESS', 'a.txt'])
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from ktkbase.errors import OutputError

MANIFEST_NAME = ".ktk-output.json"
"""The manifest ktk writes into every directory it creates: what wrote it and its entries."""

SUCCESS_NAME = "_SUCCESS"
"""The commit marker ktk writes last into every directory it writes: the name (and the empty
content) of Hadoop's FileOutputCommitter marker, which Spark and Hadoop readers, and ktk's own
listing rule (:mod:`ktkbase.files`), skip as data; readers on object stores wait for it."""

_STAGING_MARKER = ".ktk-staging"
_DEBRIS = re.compile(
    r"^\.(?P<name>.+)\.ktk-(?P<kind>staging|retired|tmp)-(?P<host>[^-]+)-(?P<pid>\d+)-[^.]*$"
)
"""Names of what a write leaves beside its target until it ends: staging and retired
directories (:func:`output_directory`) and temporary files (:func:`atomic_file`)."""


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _debris_prefix(name: str, kind: str) -> str:
    """How this process names its ``kind`` of debris of ``name`` (a unique suffix follows)."""
    return f".{name}.ktk-{kind}-{_host()}-{os.getpid()}-"


# -- file systems ---------------------------------------------------------------------------


class FileSystem(Protocol):
    """What the output rules need of a file system; paths are strings in its own syntax."""

    def exists(self, path: str) -> bool: ...
    def is_dir(self, path: str) -> bool: ...
    def children(self, path: str) -> list[str]: ...
    def read_text(self, path: str) -> str | None: ...
    def write_text(self, path: str, text: str) -> None: ...
    def make_dirs(self, path: str) -> None: ...
    def rename(self, source: str, target: str) -> None: ...
    def exchange(self, first: str, second: str) -> bool: ...
    def delete_tree(self, path: str) -> None: ...
    def join(self, parent: str, name: str) -> str: ...
    def split(self, path: str) -> tuple[str, str]: ...
    def protected_reason(self, path: str, inputs: Sequence[str]) -> str | None: ...
    def process_alive(self, host: str, pid: int) -> bool: ...


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


class LocalFileSystem:
    """The machine's own file system."""

    _exchange_function = _renameat2()

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path) and not os.path.islink(path)

    def children(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def read_text(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read(1 << 20)
        except (OSError, UnicodeDecodeError):
            return None

    def write_text(self, path: str, text: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    def make_dirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def exchange(self, first: str, second: str) -> bool:
        function = self._exchange_function
        if function is None:
            return False
        result = function(
            _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
        )
        if result == 0:
            return True
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise OSError(code, os.strerror(code), second)

    def delete_tree(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)

    def join(self, parent: str, name: str) -> str:
        return os.path.join(parent, name)

    def split(self, path: str) -> tuple[str, str]:
        return os.path.split(path)

    def protected_reason(self, path: str, inputs: Sequence[str]) -> str | None:
        return protected_local_reason(Path(path), [Path(i) for i in inputs])

    def process_alive(self, host: str, pid: int) -> bool:
        if host != _host():
            return True  # another machine's process: not ours to judge
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


LOCAL = LocalFileSystem()


def _resolved(path: Path) -> Path:
    return Path(os.path.abspath(path.expanduser())).resolve(strict=False)


def _is_within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def protected_local_reason(target: Path, inputs: Sequence[Path]) -> str | None:
    """Why ``target`` may never be replaced, or None.

    >>> protected_local_reason(Path("/"), []) is not None
    True
    >>> protected_local_reason(Path("out"), [Path("out/traces.jsonl")])
    'it contains the input out/traces.jsonl'
    """
    resolved = _resolved(target)
    if resolved == Path(resolved.anchor):
        return "it is the root directory"
    home = _resolved(Path.home())
    if _is_within(home, resolved):
        return "it is the home directory" if resolved == home else "it holds the home directory"
    cwd = _resolved(Path.cwd())
    if _is_within(cwd, resolved):
        return (
            "it is the current directory" if resolved == cwd else "it holds the current directory"
        )
    for given in inputs:
        source = _resolved(given)
        if source == resolved:
            return f"it is the input {given}"
        if _is_within(source, resolved):
            return f"it contains the input {given}"
    return None


# -- the manifest ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Manifest:
    """What ktk writes into a directory it created (``.ktk-output.json``)."""

    command: str
    version: str
    inputs: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    created: str = ""
    tool: str = "ktk"

    def to_json(self) -> str:
        document = {
            "tool": self.tool,
            "version": self.version,
            "command": self.command,
            "inputs": list(self.inputs),
            "created": self.created,
            "entries": list(self.entries),
        }
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

    @staticmethod
    def parse(text: str | None) -> Manifest | None:
        """The manifest in ``text``, or None when it is not one ktk wrote."""
        if not text:
            return None
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(document, dict) or document.get("tool") != "ktk":
            return None
        entries = document.get("entries")
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            return None
        inputs = document.get("inputs", [])
        return Manifest(
            command=str(document.get("command", "")),
            version=str(document.get("version", "")),
            inputs=tuple(str(i) for i in inputs) if isinstance(inputs, list) else (),
            entries=tuple(entries),
            created=str(document.get("created", "")),
        )


def read_manifest(directory: str | os.PathLike[str], fs: FileSystem = LOCAL) -> Manifest | None:
    """The manifest of a directory ktk wrote, or None."""
    return Manifest.parse(fs.read_text(fs.join(os.fspath(directory), MANIFEST_NAME)))


# -- directories ----------------------------------------------------------------------------


@dataclass
class _Plan:
    fs: FileSystem
    target: str
    parent: str
    name: str
    mode: str  # "create", "swap" or "merge"
    previous: Manifest | None
    command: str
    version: str
    inputs: tuple[str, ...]
    staging: str = ""
    done: list[str] = field(default_factory=list)


def _display(path: str) -> str:
    return path.rstrip("/") + "/"


def plan_output_directory(
    target: str | os.PathLike[str],
    *,
    command: str,
    version: str,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
    fs: FileSystem = LOCAL,
) -> _Plan:
    """Check that ``target`` may be written (raises :class:`OutputError` when not) and say
    how: create it, swap a previous ktk result, or (``force``) merge into a foreign directory."""
    path = os.fspath(target)
    if not path or path in (".", "./"):
        raise OutputError(f"refusing to write into {path or '.'!r}: it is the current directory")
    shown = _display(path)
    input_paths = tuple(os.fspath(i) for i in inputs)
    reason = fs.protected_reason(path, input_paths)
    if reason is not None:
        raise OutputError(f"refusing to write into {shown}: {reason}; choose a new directory")
    parent, name = fs.split(path.rstrip("/"))
    if not name:
        raise OutputError(f"refusing to write into {shown}: it names no directory")
    parent = parent or "."
    if not fs.exists(path):
        mode, previous = "create", None
    elif not fs.is_dir(path):
        raise OutputError(f"{path} exists and is not a directory; choose a directory to write into")
    else:
        previous = read_manifest(path, fs)
        present = [child for child in fs.children(path) if child != MANIFEST_NAME]
        if previous is None and present:
            if not force:
                raise OutputError(
                    f"refusing to replace {shown}: it is not empty and ktk did not create it "
                    f"(no {MANIFEST_NAME}); choose a new directory, or pass --force to add "
                    "ktk's files beside what is there"
                )
            mode = "merge"
        elif previous is not None and (foreign := sorted(set(present) - set(previous.entries))):
            if not force:
                listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
                raise OutputError(
                    f"refusing to replace {shown}: it holds entries ktk did not write "
                    f"({listed}); move them away, or pass --force to keep them and replace "
                    "only ktk's own files"
                )
            mode = "merge"
        else:
            mode = "swap"
        if mode == "merge" and SUCCESS_NAME in present and not _lists_marker(previous):
            raise OutputError(
                f"refusing to write into {shown}: its {SUCCESS_NAME} was not written by ktk "
                "(another job's commit marker, which ktk's own would replace even with --force); "
                "move it away, or choose a new directory"
            )
    return _Plan(fs, path, parent, name, mode, previous, command, version, input_paths)


def _lists_marker(manifest: Manifest | None) -> bool:
    """Whether ``manifest`` claims the directory's commit marker as ktk's."""
    return manifest is not None and SUCCESS_NAME in manifest.entries


def _dead_debris(
    fs: FileSystem, children: Sequence[str], name: str, kinds: tuple[str, ...]
) -> Iterator[tuple[str, str]]:
    """(child, kind) of the ``kinds`` of debris of ``name`` among ``children`` that processes
    no longer running left behind (a write killed with SIGKILL cannot clean up after itself)."""
    for child in children:
        match = _DEBRIS.match(child)
        if (
            match is not None
            and match["name"] == name
            and match["kind"] in kinds
            and not fs.process_alive(match["host"], int(match["pid"]))
        ):
            yield child, match["kind"]


def _clear_debris(plan: _Plan) -> None:
    """Delete what interrupted runs on this target left behind; restore a result caught
    mid-swap (the old result moved aside, the new one not yet in place)."""
    fs = plan.fs
    if not fs.exists(plan.parent):
        return
    children = fs.children(plan.parent)
    for child, kind in _dead_debris(fs, children, plan.name, ("staging", "retired")):
        path = fs.join(plan.parent, child)
        if kind == "staging":
            names = set(fs.children(path)) if fs.is_dir(path) else {"?"}
            if _STAGING_MARKER in names or not names:
                fs.delete_tree(path)
        elif read_manifest(path, fs) is not None:
            if not fs.exists(plan.target):
                fs.rename(path, plan.target)
                plan.mode, plan.previous = "swap", read_manifest(plan.target, fs)
            else:
                fs.delete_tree(path)


def _sibling(plan: _Plan, kind: str) -> str:
    unique = uuid.uuid4().hex[:8]
    return plan.fs.join(plan.parent, _debris_prefix(plan.name, kind) + unique)


def _begin(plan: _Plan) -> str:
    fs = plan.fs
    fs.make_dirs(plan.parent)
    _clear_debris(plan)
    plan.staging = _sibling(plan, "staging")
    fs.make_dirs(plan.staging)
    fs.write_text(fs.join(plan.staging, _STAGING_MARKER), "")
    return plan.staging


def _retract_marker(plan: _Plan) -> bool:
    """Delete the previous result's commit marker (one ktk wrote) before anything else of the
    target is touched, so no reader sees it beside a half-replaced directory. True when one was
    deleted."""
    fs = plan.fs
    marker = fs.join(plan.target, SUCCESS_NAME)
    if plan.mode == "create" or not _lists_marker(plan.previous) or not fs.exists(marker):
        return False
    fs.delete_tree(marker)
    return True


def _commit(plan: _Plan) -> None:
    """Move the staged result into place, then write the commit marker last."""
    fs = plan.fs
    staging = plan.staging
    fs.delete_tree(fs.join(staging, _STAGING_MARKER))
    if fs.exists(fs.join(staging, SUCCESS_NAME)):
        fs.delete_tree(fs.join(staging, SUCCESS_NAME))  # ktk's own marker comes last, below
    written = [c for c in fs.children(staging) if c != MANIFEST_NAME]
    entries = tuple(sorted([*written, SUCCESS_NAME]))
    manifest = Manifest(
        command=plan.command,
        version=plan.version,
        inputs=plan.inputs,
        entries=entries,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    fs.write_text(fs.join(staging, MANIFEST_NAME), manifest.to_json())
    retracted = _retract_marker(plan)
    if plan.mode == "create" and not fs.exists(plan.target):
        fs.rename(staging, plan.target)
    elif plan.mode in ("create", "swap"):
        try:
            exchanged = fs.exchange(staging, plan.target)
        except BaseException:
            _restore_marker(plan, retracted)  # nothing was exchanged: the previous result stands
            raise
        if exchanged:
            fs.delete_tree(staging)  # now the previous result, which ktk wrote
        else:
            retired = _sibling(plan, "retired")
            fs.rename(plan.target, retired)
            try:
                fs.rename(staging, plan.target)
            except BaseException:
                fs.rename(retired, plan.target)  # the disk said no: put the previous result back
                _restore_marker(plan, retracted)
                raise
            fs.delete_tree(retired)
    else:
        _merge(plan, tuple(written), manifest)
    fs.write_text(fs.join(plan.target, SUCCESS_NAME), "")


def _restore_marker(plan: _Plan, retracted: bool) -> None:
    """Mark the previous result complete again once it is back whole after a failed move."""
    if retracted:
        plan.fs.write_text(plan.fs.join(plan.target, SUCCESS_NAME), "")


def _merge(plan: _Plan, entries: tuple[str, ...], manifest: Manifest) -> None:
    """--force into a directory ktk did not create: move ktk's entries in one by one, retire
    the entries an earlier ktk manifest lists that this run no longer writes, write the
    manifest last (the commit marker follows in :func:`_commit`); nothing else in the
    directory is touched."""
    fs = plan.fs
    retired = _sibling(plan, "retired")
    fs.make_dirs(retired)
    fs.write_text(fs.join(retired, MANIFEST_NAME), manifest.to_json())
    # the previous marker is already gone (_retract_marker); the new one follows the manifest
    replaced = (set(entries) | set(plan.previous.entries if plan.previous else ())) - {SUCCESS_NAME}
    for name in sorted(replaced):
        old = fs.join(plan.target, name)
        if fs.exists(old):
            fs.rename(old, fs.join(retired, name))
        if name in entries:
            fs.rename(fs.join(plan.staging, name), old)
    fs.rename(fs.join(plan.staging, MANIFEST_NAME), fs.join(plan.target, MANIFEST_NAME))
    fs.delete_tree(plan.staging)
    fs.delete_tree(retired)


def _abort(plan: _Plan) -> None:
    if plan.staging:
        plan.fs.delete_tree(plan.staging)


def _os_failure(shown: str, error: OSError) -> OutputError:
    what = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exceeded",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }.get(error.errno or 0, error.strerror or str(error))
    return OutputError(f"cannot write {shown}: {what}; nothing was changed there")


@contextmanager
def staged_directory(plan: _Plan) -> Iterator[str]:
    """Yield the staging directory of a checked plan; commit on success, remove on failure."""
    try:
        staging = _begin(plan)
    except OSError as error:
        raise _os_failure(_display(plan.target), error) from None
    try:
        yield staging
        _commit(plan)
    except ConnectionError:
        # not the disk: a connection the work inside the block used (a Spark JVM that died)
        _abort(plan)
        raise
    except OSError as error:
        _abort(plan)
        raise _os_failure(_display(plan.target), error) from None
    except BaseException:
        _abort(plan)
        raise


@contextmanager
def output_directory(
    target: str | os.PathLike[str],
    *,
    command: str,
    version: str,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
) -> Iterator[Path]:
    """Write a local output directory safely: check, stage, then move into place.

    Raises :class:`OutputError` (before anything is written) when the target may not be
    replaced, and when the disk refuses (the previous result is then left as it was).
    """
    plan = plan_output_directory(
        target, command=command, version=version, inputs=inputs, force=force
    )
    with staged_directory(plan) as staging:
        yield Path(staging)


# -- single files ---------------------------------------------------------------------------


def check_output_file(
    target: str | os.PathLike[str],
    *,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
    is_ours: Callable[[bytes], bool] = lambda head: False,
) -> Path:
    """Check that one output file may be written: never an input, never a directory, and an
    existing file only when ``is_ours`` recognises ktk's own work in its first 4 KiB (or
    ``force``). Returns the path; raises :class:`OutputError`."""
    path = Path(target)
    resolved = _resolved(path)
    for given in inputs:
        if _resolved(Path(given)) == resolved:
            raise OutputError(f"refusing to write {path}: it is the input {given}")
    if path.is_dir():
        raise OutputError(f"{path} is a directory; give a file name to write")
    if path.exists() or path.is_symlink():
        try:
            with open(path, "rb") as handle:
                head = handle.read(4096)
        except OSError:
            head = b""
        if not force and not is_ours(head):
            raise OutputError(
                f"refusing to overwrite {path}: ktk did not write it; choose another name, "
                "or pass --force"
            )
    return path


def _clear_stale_temporaries(parent: Path, name: str) -> None:
    """Delete the temporary files of ``name`` that processes no longer running left behind."""
    try:
        children = os.listdir(parent)
    except OSError:
        return
    for child, _ in _dead_debris(LOCAL, children, name, ("tmp",)):
        with suppress(OSError):
            os.unlink(parent / child)


@contextmanager
def atomic_file(target: str | os.PathLike[str], *, fsync: bool = False) -> Iterator[BinaryIO]:
    """Write one file whole or not at all, streaming: yields a binary handle on a temporary
    file beside ``target`` (``.<name>.ktk-tmp-<host>-<pid>-<random>``), renamed over ``target``
    when the block ends normally and deleted when it raises (``target`` is then left as it was).
    A temporary file a killed process left beside ``target`` is deleted by the next write.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     path = pathlib.Path(parent) / "a.txt"
    ...     with atomic_file(path) as handle:
    ...         _ = handle.write(b"one")
    ...     try:
    ...         with atomic_file(path) as handle:
    ...             _ = handle.write(b"half of tw")
    ...             raise KeyboardInterrupt
    ...     except KeyboardInterrupt:
    ...         pass
    ...     path.read_text(), sorted(p.name for p in path.parent.iterdir())
    ('one', ['a.txt'])
    """
    path = Path(target)
    parent = path.parent if str(path.parent) else Path(".")
    _clear_stale_temporaries(parent, path.name)
    descriptor, temporary = tempfile.mkstemp(prefix=_debris_prefix(path.name, "tmp"), dir=parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)  # mkstemp makes it private; ktk's outputs are shared
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def atomic_write(target: str | os.PathLike[str], data: bytes | str, *, fsync: bool = False) -> Path:
    """Write a whole file or nothing: a temporary file beside it, then one rename.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     path = atomic_write(pathlib.Path(parent) / "a.txt", "one")
    ...     path = atomic_write(path, "two")
    ...     path.read_text(), sorted(p.name for p in path.parent.iterdir())
    ('two', ['a.txt'])
    """
    path = Path(target)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path, fsync=fsync) as handle:
        handle.write(payload)
    return path


def write_output_file(
    target: str | os.PathLike[str],
    data: bytes | str,
    *,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
    is_ours: Callable[[bytes], bool] = lambda head: False,
) -> Path:
    """Check (:func:`check_output_file`) then write atomically; a refusing disk becomes an
    :class:`OutputError` and leaves any earlier file as it was."""
    path = check_output_file(target, inputs=inputs, force=force, is_ours=is_ours)
    try:
        if str(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write(path, data)
    except OSError as error:
        raise _os_failure(_display(str(path)), error) from None
