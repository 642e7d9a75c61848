"""`ktk log`: read a broker's partition directories as they lie on disk (read-only).

`ktk log inspect DIR` checks a partition directory or a whole log directory (segments,
indexes, checkpoints); `ktk log compare DIR1 DIR2 ...` lines up the replicas of one partition
from several brokers and says where they diverge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ktk.console import escape, out, progress_bar, reported_errors

EXIT_PROBLEMS = 1

INSPECT_HELP = (
    "Inspect a partition directory, or a log directory (every <topic>-<partition> directory "
    "and the broker's checkpoints), without writing anything into it: segments (base offset, "
    "size, batches, first/last offset and timestamp), log end offset, leader-epoch cache, "
    "checkpointed high watermark, recovery point and log start offset, and every problem "
    "found (CRC failures, a cut tail, index entries past the end or not at a batch, indexes "
    "not increasing or larger than their segment, time indexes not monotonic, bad "
    "checkpoints)."
    "\n\n"
    "Exit codes: 0 no problems (notes allowed), 1 problems found, 2 unusable input (a "
    "missing directory, or one that is neither a partition nor a log directory)."
)
COMPARE_HELP = (
    "Compare the replicas of one partition (one partition directory per broker): for every "
    "pair, the first offset where their batches differ (offsets, leader epoch, CRC or "
    "content), the epochs there, each replica's log end offset and leader-epoch cache, which "
    "replica is a prefix of which, and where Kafka's leader-epoch truncation would cut each "
    "if it followed the other."
    "\n\n"
    "Exit codes: 0 no divergence (replicas identical, or each a prefix of a longer one), 1 "
    "divergence found, 2 bad input (fewer than two directories, a missing directory)."
)

log_app = typer.Typer(
    name="log",
    no_args_is_help=True,
    help="Inspect a broker's partition directories and compare replicas (read-only).",
)


def _offset(value: int | None) -> str:
    return "-" if value is None else str(value)


def _epochs(entries: list[dict[str, int]] | None) -> str:
    if entries is None:
        return "(no leader-epoch-checkpoint)"
    text = " ".join(f"{entry['epoch']}@{entry['start_offset']}" for entry in entries)
    return text or "(empty)"


def _index_text(index: dict[str, Any] | None) -> str:
    if index is None:
        return "missing"
    text = f"{index['entries']} entr{'y' if index['entries'] == 1 else 'ies'}"
    if index["preallocated_entries"]:
        text += f" (+{index['preallocated_entries']} prealloc.)"
    return text


def _print_findings(findings: list[dict[str, Any]], indent: str = "  ") -> None:
    for finding in findings:
        if finding["severity"] == "problem":
            out.print(f"{indent}[bold red]problem[/] {escape(finding['text'])} ({finding['kind']})")
        else:
            out.print(f"{indent}[dim]note[/] {escape(finding['text'])} ({finding['kind']})")


def _print_partition(partition: dict[str, Any]) -> None:
    name = partition["path"]
    facts = []
    if partition["topic"] is not None:
        facts.append(f"topic {partition['topic']} partition {partition['partition']}")
    if partition["topic_id"]:
        facts.append(f"topic id {partition['topic_id']}")
    out.print(f"[bold]{escape(name)}[/]" + (f" ({escape(', '.join(facts))})" if facts else ""))
    leo = _offset(partition["log_end_offset"])
    if partition["valid_log_end_offset"] != partition["log_end_offset"]:
        leo += f" (recovery would truncate it to {_offset(partition['valid_log_end_offset'])})"
    out.print(
        f"  log end offset {leo}; high watermark {_offset(partition['high_watermark'])}; "
        f"recovery point {_offset(partition['recovery_point'])}; "
        f"log start offset {_offset(partition['log_start_offset'])}"
    )
    out.print(
        f"  leader-epoch cache: {escape(_epochs(partition['leader_epoch_cache']))}; "
        f"epochs in the log: {escape(_epochs(partition['epochs_in_log']))}"
    )
    for segment in partition["segments"]:
        offsets = (
            "no batches"
            if segment["first_offset"] is None
            else f"offsets {segment['first_offset']}..{segment['last_offset']}"
        )
        out.print(
            f"  segment {segment['base_offset']}: {segment['size_in_bytes']} bytes, "
            f"{_plural(segment['batches'], 'batch')}, {offsets}, timestamps "
            f"{_offset(segment['first_timestamp'])}..{_offset(segment['last_timestamp'])} "
            f"(max {_offset(segment['max_timestamp'])}), "
            f"index {_index_text(segment['offset_index'])}, "
            f"timeindex {_index_text(segment['time_index'])}, "
            f"{_plural(len(segment['crc_failures']), 'CRC failure')}, "
            f"{_plural(segment['trailing_bytes'], 'tail byte')}"
        )
    _print_findings(partition["findings"])


def inspect_command(
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="A partition directory or a log directory.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Inspect a partition or log directory (help text: INSPECT_HELP)."""
    from kafka_format.inspect import inspect_path

    with reported_errors(), progress_bar("partitions", enabled=not as_json) as progress:
        report = inspect_path(directory, progress)
    document = report.to_json()
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        if document["kind"] == "log_dir":
            out.print(f"[bold]log directory {escape(document['path'])}[/]")
            for name, entries in document["checkpoints"].items():
                count = "unreadable" if entries is None else f"{len(entries)} entries"
                out.print(f"  {escape(name)}: {count}")
            meta = document["meta_properties"]
            if meta:
                out.print(
                    "  meta.properties: "
                    + escape(", ".join(f"{key}={value}" for key, value in meta.items()))
                )
        _print_findings(document["findings"])
        for partition in document["partitions"]:
            _print_partition(partition)
        verdict = document["verdict"]["text"]
        out.print(
            f"[bold green]{escape(verdict)}[/]" if report.ok else f"[bold red]{escape(verdict)}[/]"
        )
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEMS)


def _truncation(offset: int | None) -> str:
    return "its high watermark (epoch unknown)" if offset is None else str(offset)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "es" if word.endswith("ch") else "s")


def _batch_text(batch: dict[str, Any] | None) -> str:
    if batch is None:
        return "no batch (log ends)"
    return (
        f"batch {batch['base_offset']}..{batch['last_offset']} epoch {batch['leader_epoch']} "
        f"crc {batch['crc']}"
    )


def compare_command(
    directories: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR...", help="The partition directory of each replica (two or more)."
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare the replicas of one partition (help text: COMPARE_HELP)."""
    from kafka_format.compare import compare_replicas

    with reported_errors():
        comparison = compare_replicas(directories)
    document = comparison.to_json()
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        for replica in document["replicas"]:
            out.print(
                f"[bold]#{replica['index']} {escape(replica['path'])}[/]: first offset "
                f"{_offset(replica['first_offset'])}; log end offset "
                f"{_offset(replica['log_end_offset'])}; high watermark "
                f"{_offset(replica['high_watermark'])}; leader-epoch cache "
                f"{escape(_epochs(replica['leader_epoch_cache']))}"
            )
            for problem in replica["problems"]:
                out.print(f"  [yellow]problem[/] {escape(problem['text'])} ({problem['kind']})")
        for pair in document["pairs"]:
            first, second = pair["replicas"]
            label = f"#{first} vs #{second}"
            if pair["relation"] == "diverged":
                divergence = pair["divergence"]
                epochs = divergence["epochs"]
                out.print(
                    f"{label}: [bold red]diverged at offset {divergence['offset']}[/] "
                    f"({divergence['reason'].replace('_', ' ')}): #{first} has "
                    f"{_batch_text(divergence['batches'][0])}, #{second} has "
                    f"{_batch_text(divergence['batches'][1])}; leader epochs there "
                    f"{epochs[0]} and {epochs[1]}; cache epochs "
                    f"{_offset(divergence['cache_epochs'][0])} and "
                    f"{_offset(divergence['cache_epochs'][1])}"
                )
            elif pair["relation"] == "prefix":
                shorter = pair["shorter"]
                longer = second if shorter == first else first
                out.print(
                    f"{label}: #{shorter} is a prefix of #{longer} (same batches from offset "
                    f"{_offset(pair['compared_from'])} up to {_offset(pair['agreed_until'])})"
                )
            else:
                out.print(
                    f"{label}: identical from offset {_offset(pair['compared_from'])} to "
                    f"{_offset(pair['agreed_until'])}"
                )
            truncation = pair["truncation"]
            out.print(
                f"  following #{second}, #{first} would truncate to "
                f"{_truncation(truncation['first_following_second'])}; following #{first}, "
                f"#{second} would truncate to {_truncation(truncation['second_following_first'])}"
            )
        verdict = document["verdict"]["text"]
        style = "bold red" if comparison.diverged else "bold green"
        out.print(f"[{style}]{escape(verdict)}[/]")
    if comparison.diverged:
        raise typer.Exit(EXIT_PROBLEMS)


def register(app: typer.Typer) -> None:
    log_app.command("inspect", help=INSPECT_HELP)(inspect_command)
    log_app.command("compare", help=COMPARE_HELP)(compare_command)
    app.add_typer(log_app, name="log")
