"""Printing and error reporting for the command line (the only place that prints).

Everything that reaches the edge of a command ends as one line and a documented exit code,
never a traceback: bad input or a refused output (2), Ctrl-C (130, after stopping Spark), a
reader that went away (``ktk ... | head -1``: quiet, 141 like coreutils killed by SIGPIPE).
Every print path survives any ``str``, lone surrogates included (they are printed escaped).
"""

from __future__ import annotations

import codecs
import errno
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import IO, Any, TypeVar

import typer
from rich.console import Console
from rich.segment import Segment

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `cat big | head -1`

STDIN = "-"
STDIN_NAME = "<stdin>"
_STDIN_FILES: set[str] = set()  # standard input's temporary files (see stdin_as_files)


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    r"""Codec error handler: each character the stream cannot encode becomes ``\uXXXX``
    (a surrogate pair beyond the BMP), which is also how JSON spells it."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escaped = []
    for character in error.object[error.start : error.end]:
        code = ord(character)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), error.end


codecs.register_error("ktk-escape", _json_escapes)


def printable(text: str, stream: IO[str] | None = None) -> str:
    r"""``text`` as ``stream`` can encode it: what it cannot (a lone surrogate from a broken
    id, a non-Latin name on an ASCII terminal) becomes a ``\uXXXX`` escape instead of a
    crash; inside a JSON string that escape means the same character.

    >>> printable("member-\ud800")
    'member-\\ud800'
    >>> printable("naïve")
    'naïve'
    """
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        return text.encode(encoding, "ktk-escape").decode(encoding)
    except LookupError:
        return text.encode("utf-8", "ktk-escape").decode("utf-8")


def _quiet_after_broken_pipe() -> None:
    """The reader of our output went away: stop writing there (the interpreter's final flush
    would fail again and print a traceback) and leave quietly."""
    for stream in (sys.stdout, sys.__stdout__):
        try:
            fileno = stream.fileno() if stream is not None else None
        except (AttributeError, OSError, ValueError):
            fileno = None
        if fileno is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fileno)
            os.close(devnull)
            break


class _SafeConsole(Console):
    """A rich Console that prints any text (escaping what the stream cannot encode) and turns
    a closed pipe into a quiet exit."""

    def _render_buffer(self, buffer: Any) -> str:
        segments: list[Segment] = list(buffer)
        return printable(super()._render_buffer(segments), self.file)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _quiet_after_broken_pipe()
        raise SystemExit(EXIT_BROKEN_PIPE)


out = _SafeConsole(highlight=False, soft_wrap=True)
err = _SafeConsole(stderr=True, highlight=False, soft_wrap=True)


def echo(text: str) -> None:
    """One line on standard output, verbatim (no markup, no wrapping), whatever it holds."""
    stream = sys.stdout
    try:
        stream.write(printable(text, stream) + "\n")
        stream.flush()
    except BrokenPipeError:
        _quiet_after_broken_pipe()
        raise SystemExit(EXIT_BROKEN_PIPE) from None


def input_error_types() -> tuple[type[BaseException], ...]:
    """Every package's input errors and refused outputs share the bases in ktkbase.errors."""
    from ktkbase.errors import InputError, OutputError

    return (InputError, OutputError)


def _cited(message: str) -> str:
    """``message`` with standard input's temporary file named ``<stdin>``."""
    for staged in _STDIN_FILES:
        message = message.replace(staged, STDIN_NAME)
    return message


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print one error line on stderr; return the Exit to raise."""
    line = " ".join(_cited(str(message)).splitlines()) or "failed"
    err.print(f"[bold red]error:[/] {escape(line)}", markup=True, highlight=False)
    return typer.Exit(code)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(_cited(message))}", markup=True, highlight=False)


_OS_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
}


def describe_os_error(error: OSError) -> str:
    """One line for a file the system refused: the path, then why in plain words.

    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device", "out/a.jsonl"))
    'out/a.jsonl: the disk is full'
    """
    reason = _OS_REASONS.get(error.errno or 0) or error.strerror or str(error)
    return f"{error.filename}: {reason}" if error.filename else reason


@contextmanager
def reported_errors(code: int = EXIT_BAD_INPUT) -> Iterator[None]:
    """Turn the packages' input errors, refused outputs and files the system refuses into one
    line and an exit code."""
    try:
        yield
    except input_error_types() as error:
        raise fail(str(error), code) from None
    except (BrokenPipeError, ConnectionError):
        raise  # not a file problem: the edge (see `guarded`) knows what they mean
    except OSError as error:
        raise fail(describe_os_error(error), code) from None
    except UnicodeEncodeError as error:  # a file name holding a lone surrogate
        raise fail(f"a file name is not valid text: {error.reason}", code) from None
    except ValueError as error:
        if "embedded null byte" not in str(error):
            raise
        raise fail("a file name holds a NUL byte", code) from None


# -- the edge of every command --------------------------------------------------------------

_Function = TypeVar("_Function", bound=Callable[..., Any])


def _spark_failure(error: BaseException) -> str | None:
    if "spark_jobs.session" not in sys.modules and "pyspark" not in sys.modules:
        return None
    from spark_jobs.session import describe_spark_failure

    return describe_spark_failure(error)


def _stop_spark() -> None:
    if "pyspark" in sys.modules:
        from spark_jobs.session import stop_active_session

        stop_active_session()


def interrupted() -> typer.Exit:
    """Ctrl-C: stop Spark's jobs and session, say so in one line; return the Exit (130)."""
    with suppress(KeyboardInterrupt):  # a second Ctrl-C while stopping: leave at once
        _stop_spark()
    return fail("interrupted", EXIT_INTERRUPTED)


def guarded(function: _Function) -> _Function:
    """Wrap a command so that nothing leaves it as a traceback: Ctrl-C, a closed output pipe,
    a JVM that died or cannot start, an error a package raised on purpose, a file the system
    refused (see the module docstring for the exit codes)."""
    from ktkbase.errors import KtkError

    # typer's own exceptions (and click's, on the typer versions built on click) end the
    # command as they mean to
    passed = (typer.Exit, typer.Abort, _click_exception_base())

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except passed:
            raise
        except KeyboardInterrupt:
            raise interrupted() from None
        except BrokenPipeError:
            _quiet_after_broken_pipe()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except KtkError as error:
            raise fail(str(error)) from None
        except Exception as error:
            described = _spark_failure(error)
            if described is not None:
                raise fail(described) from None
            if isinstance(error, OSError) and not isinstance(error, ConnectionError):
                raise fail(describe_os_error(error)) from None
            raise

    run.ktk_guarded = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def _click_exception_base() -> type[Exception]:
    for base in typer.BadParameter.__mro__:
        if base.__name__ == "ClickException":
            return base
    return typer.BadParameter


# -- standard input as a file ---------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"


@contextmanager
def stdin_as_files(paths: Sequence[str], *, suffix: str) -> Iterator[list[str]]:
    """``paths`` with ``-`` replaced by a temporary file holding standard input, removed when
    the block ends, for verbs whose readers take file names. Report errors inside the block
    (``with stdin_as_files(paths, suffix=".jsonl") as names, reported_errors():``).

    The file is called ``stdin<suffix>``; gzip data gets ``.gz`` added and Parquet data the
    ``.parquet`` suffix, so readers that go by the name read it right. ``-`` may be given
    once. :func:`fail` and :func:`warn` cite the file as ``<stdin>``; :func:`shown_name` gives
    that name to readers that report their source themselves.

    >>> with stdin_as_files(["a.jsonl", "b.jsonl"], suffix=".jsonl") as names:
    ...     names
    ['a.jsonl', 'b.jsonl']
    """
    if paths.count(STDIN) > 1:
        raise fail("`-` (standard input) may be given only once")
    if STDIN not in paths:
        yield list(paths)
        return
    directory = tempfile.mkdtemp(prefix="ktk-stdin-")
    try:
        source = sys.stdin.buffer
        head = source.read(4)
        name = f"stdin{suffix}"
        if head.startswith(_GZIP_MAGIC) and not suffix.endswith(".gz"):
            name += ".gz"
        elif head.startswith(_PARQUET_MAGIC):
            name = "stdin.parquet"
        staged = os.path.join(directory, name)
        with open(staged, "wb") as handle:
            handle.write(head)
            shutil.copyfileobj(source, handle, 1 << 20)
        _STDIN_FILES.add(staged)
        yield [staged if path == STDIN else path for path in paths]
    finally:
        _STDIN_FILES.difference_update(
            {name for name in _STDIN_FILES if os.path.dirname(name) == directory}
        )
        shutil.rmtree(directory, ignore_errors=True)


def shown_name(path: str | os.PathLike[str]) -> str:
    """How to cite an input in messages: ``<stdin>`` for standard input's temporary file."""
    text = os.fspath(path)
    return STDIN_NAME if text in _STDIN_FILES else text


def escape(text: str) -> str:
    """Text safe to print through rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def is_interactive() -> bool:
    return sys.stderr.isatty()


@contextmanager
def progress_bar(
    label: str, total: int | None = None, *, enabled: bool = True
) -> Iterator[Callable[[int, int], None] | None]:
    """A transient bar on standard error while the body runs, driven by the
    ``progress(done, total)`` callback the packages take; None (no bar) when not ``enabled``
    or standard error is no terminal."""
    if not enabled or not is_interactive():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def ensure_one_of(option: str, value: str, choices: Sequence[str]) -> None:
    """Fail (one line naming the option and its choices, exit 2) unless value is one of them.

    >>> ensure_one_of("--format", "json", ("table", "json", "csv"))
    """
    if value not in choices:
        raise fail(f"{option} must be one of {', '.join(choices)} (got {value!r})")


def ensure_within(option: str, value: int, low: int, high: int) -> None:
    """Fail (one line naming the option and its limits, exit 2) unless low <= value <= high.

    >>> ensure_within("--groups", 10, 1, 100_000)
    """
    if not low <= value <= high:
        shown = (
            f"{value:,}"
            if value.bit_length() <= 128
            else f"an integer of {value.bit_length()} bits"
        )
        raise fail(f"{option} must be between {low:,} and {high:,} (got {shown})")
