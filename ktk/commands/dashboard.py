"""`ktk dashboard`: a results directory (or a replication result) -> one offline HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ktk.console import out, reported_errors


def dashboard_command(
    results: Annotated[
        Path,
        typer.Argument(
            help="Output directory of `ktk replay` or the Spark replay job (scores.parquet, "
            "summary.parquet, errors.jsonl), or a `ktk replicate --json` result file.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="HTML file to write (atomically). An existing file is replaced only when it "
            "is a page ktk wrote; never an input or a directory.",
        ),
    ] = Path("report.html"),
    timeline_traces: Annotated[
        int,
        typer.Option(
            "--timeline-traces",
            min=1,
            help="How many of the worst traces the timeline's picker lists before a search "
            "(a search covers every trace).",
        ),
    ] = 200,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace the output file even when ktk did not write it (still never an "
            "input or a directory).",
        ),
    ] = False,
) -> None:
    """Write a self-contained HTML dashboard that opens offline in any browser.

    Exit 0 when the page was written; 2 for unreadable results or a refused output.
    """
    with reported_errors():
        if results.is_file():
            _replication_page(results, output, force=force)
            return
        from dashboards.rebalance import write_rebalance_page

        written = write_rebalance_page(
            results, output, timeline_traces=timeline_traces, force=force
        )
    skipped = (
        f", {written.skipped_traces:,} skipped traces listed" if written.skipped_traces else ""
    )
    out.print(
        f"wrote {written.path} ({written.size_bytes / 1e6:.1f} MB): {written.traces:,} traces "
        f"x {len(written.assignors)} assignors{skipped}",
        markup=False,
    )


def _replication_page(result_file: Path, output: Path, *, force: bool) -> None:
    from dashboards.errors import InputError
    from dashboards.page import is_ktk_page, write_page
    from dashboards.replication import load_replication_result, render_replication
    from ktkbase.outputs import check_output_file

    check_output_file(output, inputs=[result_file], force=force, is_ours=is_ktk_page)
    result = load_replication_result(result_file)
    try:
        page = render_replication(result)
    except InputError as error:
        raise error.located(source=str(result_file)) from None
    written = write_page(output, page, inputs=[result_file], force=force)
    out.print(f"wrote {written} (replication scenario {result.get('name', '?')})", markup=False)


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard_command)
