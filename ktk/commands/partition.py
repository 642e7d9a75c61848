"""`ktk partition`: which partition a key goes to, key-trace scores, keys moved by a resize.

Three forms share the verb: `ktk partition KEY... --partitions N` (the default, also spelled
`ktk partition keys ...`), `ktk partition score TRACE...` and `ktk partition remap`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from ktk.console import (
    EXIT_BAD_INPUT,
    err,
    escape,
    fail,
    is_interactive,
    out,
    reported_errors,
    warn,
)
from ktk.output_formats import checked_format, csv_text, format_option, json_text, print_plain

if TYPE_CHECKING:
    from collections.abc import Sequence

    from partitioners.keytrace_job import Comparison, KeyTraceReport, ScoreSettings

DEFAULT_PARTITIONER = "java-builtin"
SUBCOMMANDS = ("keys", "score", "remap")


class _KeysByDefault(TyperGroup):
    """A group whose first word, when it is not a subcommand, starts the `keys` form."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["keys", *args]
        return super().parse_args(ctx, args)


partition_app = typer.Typer(
    name="partition",
    cls=_KeysByDefault,
    no_args_is_help=True,
    help="Which partition a key goes to (Java, librdkafka), key-trace scores, keys a resize "
    "moves. `ktk partition KEY... --partitions N` is short for `ktk partition keys ...`.",
)


def _read_keys(keys: list[str], use_hex: bool) -> list[tuple[bytes, bytes]]:
    """(as typed, key bytes) per key; `-` reads one key per line from stdin (blank lines
    skipped). Keys are bytes: a command-line key is the bytes the shell passed (the UTF-8 of
    the text, or non-UTF-8 bytes as they were), a stdin key the bytes of its line; both are
    printed back exactly as given."""
    if keys == ["-"]:
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
        typed = [line for line in data.splitlines() if line]
    elif "-" in keys:
        raise fail("`-` (read keys from stdin) cannot be mixed with keys on the command line")
    else:
        typed = [_argument_bytes(text) for text in keys]
    if not typed:
        raise fail("no keys: give KEY... or `-` to read keys from stdin, one per line")
    if not use_hex:
        return [(text, text) for text in typed]
    decoded = []
    for text in typed:
        try:
            decoded.append((text, bytes.fromhex(text.decode("ascii"))))
        except ValueError:
            shown = text.decode("utf-8", "backslashreplace")
            raise fail(f"key is not valid hex (got {shown!r})") from None
    return decoded


def _argument_bytes(text: str) -> bytes:
    """The bytes of a command-line argument as the shell passed them."""
    try:
        return os.fsencode(text)
    except UnicodeEncodeError:
        raise fail(f"key is not text that can be written as bytes (got {text!r})") from None


def _check_partitions(option: str, value: int) -> None:
    from partitioners.limits import MAX_PARTITIONS

    if not 0 < value <= MAX_PARTITIONS:
        if value > MAX_PARTITIONS:
            raise fail(f"{option} must be at most {MAX_PARTITIONS:,} (got {value})")
        raise fail(f"{option} must be > 0 (got {value})")


def _partitions_of(name: str, keys: list[bytes], num_partitions: int) -> list[int]:
    from partitioners.registry import create

    partitioner = create(name)
    partitions = partitioner.keyed_partitions(keys, num_partitions).tolist()
    if any(p < 0 for p in partitions):
        warn(f"{partitioner.name} does not hash these keys: their partition is not fixed ('-')")
    return partitions


def _tsv(cells: list[str], typed: bytes | None = None) -> None:
    """One tab-separated line, verbatim (rich would expand the tabs); ``typed`` (a key as
    given, bytes) goes first, written as the bytes it is."""
    line = "\t".join(cells).encode("utf-8")
    typer.echo(line if typed is None else typed + b"\t" + line)


def _cell(partition: int) -> str:
    return "-" if partition < 0 else str(partition)


@partition_app.command("keys")
def keys_command(
    keys: Annotated[
        list[str],
        typer.Argument(
            metavar="KEY",
            help="Keys (UTF-8 text, or hex with --hex); `-` reads one key per line from stdin.",
        ),
    ],
    partitions: Annotated[int, typer.Option("--partitions", "-n", help="Partition count.")],
    partitioner: Annotated[
        str, typer.Option("--partitioner", "-p", help="See `ktk partition names`.")
    ] = DEFAULT_PARTITIONER,
    use_hex: Annotated[bool, typer.Option("--hex", help="Keys are hex-encoded bytes.")] = False,
    compare: Annotated[
        str | None, typer.Option("--compare", "-c", help="Also show this partitioner's choice.")
    ] = None,
    output_format: Annotated[str, format_option()] = "table",
) -> None:
    """Print KEY<TAB>PARTITION per key (and the --compare partitioner's partition).

    --format csv prints a header line (key,partition[,compare_partition]) and one row per key,
    json a list of objects; there a key that is not UTF-8 is shown with backslash escapes, and
    a partition the partitioner does not fix is empty (csv) or null (json)."""
    output_format = checked_format(output_format)
    _check_partitions("--partitions", partitions)
    decoded = _read_keys(keys, use_hex)
    with reported_errors():
        raw = [key for _, key in decoded]
        chosen = _partitions_of(partitioner, raw, partitions)
        other = _partitions_of(compare, raw, partitions) if compare else None
    if output_format != "table":
        _print_keys(decoded, chosen, other, output_format)
        return
    for index, (typed, _) in enumerate(decoded):
        cells = [_cell(chosen[index])]
        if other is not None:
            cells.append(_cell(other[index]))
        _tsv(cells, typed)


def _print_keys(
    decoded: list[tuple[bytes, bytes]],
    chosen: list[int],
    other: list[int] | None,
    output_format: str,
) -> None:
    headers = ["key", "partition"] + (["compare_partition"] if other is not None else [])
    rows: list[list[object]] = []
    for index, (typed, _) in enumerate(decoded):
        row: list[object] = [typed.decode("utf-8", "backslashreplace")]
        row.append(chosen[index] if chosen[index] >= 0 else None)
        if other is not None:
            row.append(other[index] if other[index] >= 0 else None)
        rows.append(row)
    if output_format == "csv":
        print_plain(csv_text(headers, rows))
    else:
        print_plain(json_text([dict(zip(headers, row, strict=True)) for row in rows]))


@partition_app.command("remap")
def remap_command(
    keys: Annotated[
        list[str], typer.Argument(metavar="KEY", help="Keys, or `-` for one per line on stdin.")
    ],
    from_partitions: Annotated[int, typer.Option("--from", help="Partition count before.")],
    to_partitions: Annotated[int, typer.Option("--to", help="Partition count after.")],
    partitioner: Annotated[
        str, typer.Option("--partitioner", "-p", help="See `ktk partition names`.")
    ] = DEFAULT_PARTITIONER,
    use_hex: Annotated[bool, typer.Option("--hex", help="Keys are hex-encoded bytes.")] = False,
) -> None:
    """Print KEY<TAB>BEFORE<TAB>AFTER<TAB>moves|stays per key, then how many keys move."""
    _check_partitions("--from", from_partitions)
    _check_partitions("--to", to_partitions)
    decoded = _read_keys(keys, use_hex)
    with reported_errors():
        raw = [key for _, key in decoded]
        before = _partitions_of(partitioner, raw, from_partitions)
        after = _partitions_of(partitioner, raw, to_partitions)
    moved = 0
    for (typed, _), old, new in zip(decoded, before, after, strict=True):
        moves = old < 0 or new < 0 or old != new
        moved += moves
        verdict = "moves" if moves else "stays"
        _tsv([_cell(old), _cell(new), verdict], typed)
    out.print(
        f"{moved} of {len(decoded)} keys change partition going from {from_partitions} to "
        f"{to_partitions} partitions ({escape(partitioner)})"
    )


@partition_app.command("score")
def score_command(
    traces: Annotated[
        list[str],
        typer.Argument(
            metavar="TRACE",
            help="Key traces (JSON Lines or Parquet files, directories); `-` reads JSON Lines "
            "from stdin.",
        ),
    ],
    partitioners: Annotated[
        str, typer.Option("--partitioners", "-p", help="Comma-separated partitioner names.")
    ] = f"{DEFAULT_PARTITIONER},librdkafka-default",
    batch_size: Annotated[int, typer.Option("--batch-size", help="batch.size in bytes.")] = 16384,
    linger_ms: Annotated[int, typer.Option("--linger-ms", help="linger.ms.")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the partitioners' draws.")] = 0,
    engine: Annotated[str, typer.Option("--engine", help="python or spark.")] = "python",
    master: Annotated[
        str | None,
        typer.Option("--master", metavar="URL", help="Spark master (spark engine only)."),
    ] = None,
    output_format: Annotated[str, format_option()] = "table",
) -> None:
    """Score key traces under each partitioner (producer model) and print a table.

    --format csv prints the score columns with a header line; json one document with the
    scores and, for two or more partitioners, how often they disagree.

    A file or trace that cannot be scored is reported on one line and skipped; the others are
    still scored (exit 1 then; exit 2 when nothing could be scored)."""
    output_format = checked_format(output_format)
    from partitioners.limits import MAX_INT32, MAX_INT64, MIN_INT64

    names = [name.strip() for name in partitioners.split(",") if name.strip()]
    if not names:
        raise fail("--partitioners needs at least one name")
    _check_range("--batch-size", batch_size, 1, MAX_INT32)
    _check_range("--linger-ms", linger_ms, 0, MAX_INT32)
    _check_range("--seed", seed, MIN_INT64, MAX_INT64)
    if engine not in ("python", "spark"):
        raise fail(f"--engine must be python or spark (got {engine!r})")
    if "-" in traces and engine == "spark":
        raise fail("`-` (read a trace from stdin) needs --engine python")
    from partitioners.keytrace_job import ScoreSettings, resolve_partitioners

    with reported_errors():
        names = list(resolve_partitioners(names))
        settings = ScoreSettings(batch_size=batch_size, linger_ms=linger_ms, seed=seed)
        if engine == "spark":
            report = _spark_report(traces, names, settings, master)
        else:
            report = _python_report(traces, names, settings)
    if len(report.scores):
        if output_format == "table":
            _print_scores(report.scores)
            _print_disagreement(report.comparisons)
        else:
            _print_scores_as(report.scores, report.comparisons, output_format)
    for failure in report.failures:
        # one error line each; the exit status follows once all are printed
        fail(f"{failure.message} (skipped)" if len(report.scores) else failure.message)
    if report.failures:
        raise typer.Exit(1 if len(report.scores) else EXIT_BAD_INPUT)


def _check_range(option: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise fail(f"{option} must be in [{low}, {high}] (got {value})")


def _python_report(paths: list[str], names: list[str], settings: ScoreSettings) -> KeyTraceReport:
    from partitioners.keytrace_job import score_paths

    stdin = sys.stdin.buffer if "-" in paths else None
    if not is_interactive():
        return score_paths(paths, names, settings, stdin=stdin)
    from rich.progress import Progress

    with Progress(console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                label = "reading key traces" if stage == "read" else "scoring traces"
                tasks[stage] = bar.add_task(label, total=total)
            bar.update(tasks[stage], completed=done)

        return score_paths(paths, names, settings, progress, stdin=stdin)


def _spark_report(
    paths: list[str], names: list[str], settings: ScoreSettings, master: str | None
) -> KeyTraceReport:
    for path in paths:
        if not Path(path).exists() and "://" not in path:
            raise FileNotFoundError(2, "No such file or directory", path)
    try:
        from spark_jobs import score_key_traces
    except ModuleNotFoundError:
        raise fail("the spark engine is not available (spark_jobs.score_key_traces)") from None
    return score_key_traces.report(paths, names, settings, master)


def _print_scores(scores: Any) -> None:
    from rich.table import Table

    table = Table(
        title="Key-trace scores (producer model)", show_lines=False, box=None, title_justify="left"
    )
    for header in (
        "trace",
        "partitioner",
        "records",
        "used/partitions",
        "bytes skew",
        "batches",
        "mean fill",
        "latency ms",
        "keys remapped",
    ):
        table.add_column(header, justify="left" if header in ("trace", "partitioner") else "right")
    for row in scores.itertuples(index=False):
        table.add_row(
            escape(str(row.trace_id)),
            escape(str(row.partitioner)),
            str(row.records),
            f"{row.partitions_used}/{row.num_partitions}",
            f"{row.bytes_skew:.2f}",
            str(row.batches),
            f"{row.mean_batch_fill:.1%}",
            f"{row.mean_latency_ms:.1f}",
            f"{row.keys_remapped}/{row.keys_spanning_change}",
        )
    if out.is_terminal:
        out.print(table)
    else:
        from rich.console import Console

        # piped output keeps whole names instead of the 80-column default
        Console(width=200, highlight=False).print(table)
    out.print(
        "bytes skew = max/mean bytes per partition; keys remapped = keys whose partition "
        "changed where num_partitions changed / keys seen on both sides"
    )


SCORE_COLUMNS = (
    "trace_id",
    "partitioner",
    "records",
    "partitions_used",
    "num_partitions",
    "bytes_skew",
    "batches",
    "mean_batch_fill",
    "mean_latency_ms",
    "keys_remapped",
    "keys_spanning_change",
)


def _print_scores_as(scores: Any, comparisons: Sequence[Comparison], output_format: str) -> None:
    columns = [name for name in SCORE_COLUMNS if name in scores.columns]
    records = [
        [value.item() if hasattr(value, "item") else value for value in row]
        for row in scores[columns].itertuples(index=False)
    ]
    if output_format == "csv":
        print_plain(csv_text(columns, records))
        return
    document = {
        "scores": [dict(zip(columns, row, strict=True)) for row in records],
        "disagreements": [
            {
                "trace_id": c.trace_id,
                "partitioner_a": c.partitioner_a,
                "partitioner_b": c.partitioner_b,
                "keyed_keys": int(c.keyed_keys),
                "keys_differing": int(c.keys_differing),
                "records_differing": int(c.records_differing),
            }
            for c in comparisons
        ],
    }
    print_plain(json_text(document))


def _print_disagreement(comparisons: Sequence[Comparison]) -> None:
    for comparison in comparisons:
        out.print(
            f"{escape(comparison.trace_id)}: {comparison.keys_differing} of "
            f"{comparison.keyed_keys} keys ({comparison.records_differing} records) land on "
            f"different partitions under {comparison.partitioner_a} and {comparison.partitioner_b}"
        )


@partition_app.command("names")
def names_command() -> None:
    """List the partitioner names ktk knows, with what each models."""
    from partitioners.registry import ALIASES, DESCRIPTIONS, names

    for name in names():
        text = f"alias of {ALIASES[name]}" if name in ALIASES else DESCRIPTIONS[name]
        _tsv([name, text])


def register(app: typer.Typer) -> None:
    app.add_typer(partition_app, name="partition")
