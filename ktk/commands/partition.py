"""`ktk partition`: which partition a key goes to, key-trace scores, keys moved by a resize.

Three forms share the verb: `ktk partition KEY... --partitions N` (the default, also spelled
`ktk partition keys ...`), `ktk partition score TRACE...` and `ktk partition remap`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ktk.console import escape, fail, out, reported_errors, warn

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


def _read_keys(keys: list[str], use_hex: bool) -> list[tuple[str, bytes]]:
    """(as typed, bytes) per key; `-` reads one key per line from stdin (blank lines skipped)."""
    if keys == ["-"]:
        typed = [line.rstrip("\r\n") for line in sys.stdin]
        typed = [line for line in typed if line]
    elif "-" in keys:
        raise fail("`-` (read keys from stdin) cannot be mixed with keys on the command line")
    else:
        typed = list(keys)
    if not typed:
        raise fail("no keys: give KEY... or `-` to read keys from stdin, one per line")
    decoded = []
    for text in typed:
        if use_hex:
            try:
                decoded.append((text, bytes.fromhex(text)))
            except ValueError:
                raise fail(f"key is not valid hex (got {text!r})") from None
        else:
            decoded.append((text, text.encode("utf-8")))
    return decoded


def _check_partitions(option: str, value: int) -> None:
    if value <= 0:
        raise fail(f"{option} must be > 0 (got {value})")


def _partitions_of(name: str, keys: list[bytes], num_partitions: int) -> list[int]:
    from partitioners.registry import create

    partitioner = create(name)
    partitions = partitioner.keyed_partitions(keys, num_partitions).tolist()
    if any(p < 0 for p in partitions):
        warn(f"{partitioner.name} does not hash these keys: their partition is not fixed ('-')")
    return partitions


def _tsv(cells: list[str]) -> None:
    """One tab-separated line, verbatim (rich would expand the tabs)."""
    typer.echo("\t".join(cells))


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
) -> None:
    """Print KEY<TAB>PARTITION per key (and the --compare partitioner's partition)."""
    _check_partitions("--partitions", partitions)
    decoded = _read_keys(keys, use_hex)
    with reported_errors():
        raw = [key for _, key in decoded]
        chosen = _partitions_of(partitioner, raw, partitions)
        other = _partitions_of(compare, raw, partitions) if compare else None
    for index, (typed, _) in enumerate(decoded):
        cells = [typed, _cell(chosen[index])]
        if other is not None:
            cells.append(_cell(other[index]))
        _tsv(cells)


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
        _tsv([typed, _cell(old), _cell(new), verdict])
    out.print(
        f"{moved} of {len(decoded)} keys change partition going from {from_partitions} to "
        f"{to_partitions} partitions ({escape(partitioner)})"
    )


@partition_app.command("score")
def score_command(
    traces: Annotated[
        list[Path], typer.Argument(metavar="TRACE", help="Key traces (JSON Lines or Parquet).")
    ],
    partitioners: Annotated[
        str, typer.Option("--partitioners", "-p", help="Comma-separated partitioner names.")
    ] = f"{DEFAULT_PARTITIONER},librdkafka-default",
    batch_size: Annotated[int, typer.Option("--batch-size", help="batch.size in bytes.")] = 16384,
    linger_ms: Annotated[int, typer.Option("--linger-ms", help="linger.ms.")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the partitioners' draws.")] = 0,
    engine: Annotated[str, typer.Option("--engine", help="python or spark.")] = "python",
    master: Annotated[
        str | None, typer.Option("--master", help="Spark master (spark engine only).")
    ] = None,
) -> None:
    """Score key traces under each partitioner (producer model) and print a table."""
    names = [name.strip() for name in partitioners.split(",") if name.strip()]
    if not names:
        raise fail("--partitioners needs at least one name")
    if batch_size <= 0:
        raise fail(f"--batch-size must be > 0 (got {batch_size})")
    if linger_ms < 0:
        raise fail(f"--linger-ms must be >= 0 (got {linger_ms})")
    if engine not in ("python", "spark"):
        raise fail(f"--engine must be python or spark (got {engine!r})")
    from partitioners.registry import canonical

    with reported_errors():
        names = [canonical(name) for name in names]
        if engine == "spark":
            scores = _spark_scores(traces, names, batch_size, linger_ms, seed, master)
            comparisons = None
        else:
            scores, comparisons = _python_scores(traces, names, batch_size, linger_ms, seed)
    _print_scores(scores)
    if comparisons is not None:
        _print_disagreement(comparisons, names)


def _python_scores(
    paths: list[Path], names: list[str], batch_size: int, linger_ms: int, seed: int
) -> tuple[Any, list[tuple[str, Any, int]] | None]:
    """Scores, and for two partitioners (trace id, disagreement, keyed key count) per trace."""
    import pandas as pd

    from partitioners.errors import InputError
    from partitioners.keytrace import key_trace_files, read_key_trace
    from partitioners.scoring import empty_scores, keyed_key_count, score_pair, score_traces

    # a trace's records may be spread over files: score the concatenation, as Spark does
    frames = [read_key_trace(path) for path in key_trace_files(paths)]
    if not frames:
        raise InputError("no key-trace files found", field="TRACE", value=[str(p) for p in paths])
    records = pd.concat(frames, ignore_index=True)
    settings = {"batch_size": batch_size, "linger_ms": linger_ms, "seed": seed}
    if len(names) != 2:
        return score_traces(records, names, **settings), None
    # scores and disagreement from the same model runs
    rows = []
    comparisons = []
    for trace_id, trace in records.groupby("trace_id", sort=False):
        scores, differing = score_pair(trace, names[0], names[1], **settings)
        rows.append(scores)
        comparisons.append((str(trace_id), differing, keyed_key_count(trace)))
    scores = pd.concat(rows, ignore_index=True) if rows else empty_scores()
    return scores, comparisons


def _spark_scores(
    paths: list[Path],
    names: list[str],
    batch_size: int,
    linger_ms: int,
    seed: int,
    master: str | None,
) -> Any:
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(path))
    try:
        from spark_jobs import score_key_traces
    except ModuleNotFoundError:
        raise fail("the spark engine is not available (spark_jobs.score_key_traces)") from None
    return score_key_traces.run(
        [str(path) for path in paths], names, batch_size, linger_ms, seed, master
    )


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


def _print_disagreement(comparisons: list[tuple[str, Any, int]], names: list[str]) -> None:
    first, second = names
    for trace_id, differing, keyed_keys in comparisons:
        keys = differing["key"].nunique() if len(differing) else 0
        records = int(differing["records"].sum()) if len(differing) else 0
        out.print(
            f"{escape(trace_id)}: {keys} of {keyed_keys} keys "
            f"({records} records) land on different partitions under {first} and {second}"
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
