"""`ktk traces capture`: capture files written live by group leaders -> one trace (format v1).

Capturing is a library option (``kafka_python_assignor(..., recorder=CaptureRecorder(path,
group_id))`` on every consumer of the group; see docs/capture.md): the consumers append rows as
the group rebalances. This verb checks and merges their files, one generation per row, into a
trace directory that `ktk replay` reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ktk.commands.options import TRACE_FORMATS, force_option, out_option, trace_format_option
from ktk.console import ensure_one_of, escape, fail, out, reported_errors, warn

SOURCES = ("leader",)


def register(traces_app: typer.Typer) -> None:
    """Add `capture` to the `ktk traces` group."""

    @traces_app.command("capture")
    def capture_command(
        files: Annotated[
            list[Path],
            typer.Argument(
                metavar="CAPTURE",
                help="Capture files of one group, as the leaders' recorders wrote them.",
            ),
        ],
        source_kind: Annotated[
            str, typer.Option("--from", help="leader (rows written by the group leader).")
        ],
        out_dir: Annotated[Path, out_option("Directory to write (replaced whole; see --force).")],
        group: Annotated[
            str | None,
            typer.Option("--group", "-g", help="The group the files must hold (default: theirs)."),
        ] = None,
        file_format: Annotated[str, trace_format_option()] = "jsonl",
        force: Annotated[bool, force_option()] = False,
    ) -> None:
        """Check and merge live capture files (one group; a generation in several files must
        be the same row in each) into OUT/leader-<group>.<format>.

        The files are only read: a capture still being written stays as it is. OUT is written
        whole: a new directory, or one an earlier ktk run wrote, which is then replaced.
        """
        import ktk
        from assignors.traces.capture import merge_capture_files
        from assignors.traces.files import write_traces
        from ktkbase.outputs import plan_output_directory, staged_directory

        ensure_one_of("--from", source_kind, SOURCES)
        ensure_one_of("--format", file_format, TRACE_FORMATS)
        with reported_errors():
            plan = plan_output_directory(
                out_dir,
                command="traces capture",
                version=ktk.__version__,
                inputs=files,
                force=force,
            )
            for path in files:
                if not path.is_file():  # fail before any work, naming the file
                    path.open().close()
            rows, notes = merge_capture_files(files, group_id=group)
        for note in notes:
            warn(note)
        if not rows:
            raise fail(f"no captured generations in {len(files)} file(s)")
        group_id = rows[0]["trace_id"]
        name = f"{source_kind}-{_file_stem(group_id)}.{file_format}"
        with reported_errors(), staged_directory(plan) as staging:
            written = write_traces(rows, Path(staging) / name)
        out.print(
            f"group {escape(group_id)}: {written} generations -> {escape(str(out_dir / name))}"
        )


def _file_stem(group_id: str) -> str:
    """A file-name-safe form of a group id.

    >>> _file_stem("payments/eu-1 (blue)")
    'payments_eu-1__blue_'
    """
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in group_id)[:100] or "group"
