"""`ktk replicate`: run a replication scenario (`ktk replicate FILE`) or explore random fault
schedules (`ktk replicate explore`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ktk.console import err, escape, fail, is_interactive, out, reported_errors

EXIT_EXPECT_FAILED = 1
EXPLORE = "explore"
HELP = (
    "Run a replication scenario and print its timeline and verdict, or explore fault schedules."
    "\n\n"
    "ktk replicate FILE [--mode M] [--json] [--html page.html]: "
    "exit 0 when every expect step held, 1 when one failed, 2 when the file is invalid."
    "\n\n"
    "ktk replicate explore --mode M [--min-isr N] [--acks A] [--unclean] [--elr] "
    "--schedules N --seed S [--out DIR] [--json]: run seeded random fault schedules; each "
    "violation class found is shrunk to a minimal scenario file that ktk replicate replays."
)


def replicate_command(
    target: str = typer.Argument(
        ...,
        metavar="FILE|explore",
        help="A scenario file (JSON or YAML), or 'explore' to search random fault schedules.",
    ),
    mode: str | None = typer.Option(
        None, "--mode", "-m", help="pre-0.11, kip-101, kip-279 or current (default: the file's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result document as JSON."),
    html: str | None = typer.Option(None, "--html", help="Also write the timeline page here."),
    min_isr: int = typer.Option(2, "--min-isr", help="explore: min.insync.replicas."),
    acks: str = typer.Option("all", "--acks", help="explore: producer acks (0, 1 or all)."),
    unclean: bool = typer.Option(
        False, "--unclean/--no-unclean", help="explore: unclean leader election."
    ),
    elr: bool = typer.Option(False, "--elr", help="explore: eligible leader replicas (current)."),
    schedules: int = typer.Option(1000, "--schedules", help="explore: how many schedules to run."),
    seed: int = typer.Option(0, "--seed", help="explore: seed of the schedule generator."),
    out_dir: str | None = typer.Option(
        None, "--out", help="explore: write each counterexample scenario into this directory."
    ),
) -> None:
    """Run a scenario, or explore fault schedules (help text: HELP)."""
    if target == EXPLORE:
        explore_dir = Path(out_dir) if out_dir else None
        _explore(mode, min_isr, acks, unclean, elr, schedules, seed, explore_dir, as_json)
        return
    _run_file(target, mode, as_json, html)


def _run_file(path: str, mode: str | None, as_json: bool, html: str | None) -> None:
    from replication.modes import get_mode
    from replication.scenario import load_scenario
    from replication.sim import run_scenario

    with reported_errors():
        if mode is not None:
            get_mode(mode)
        scenario = load_scenario(Path(path))
        result = run_scenario(scenario, mode)
    document = result.to_json()
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        _print_timeline(document)
        _print_verdict(document)
    if html is not None:
        from dashboards.replication import write_replication_page

        written = write_replication_page(document, html)
        err.print(f"wrote {escape(str(written))}", highlight=False)
    if result.expect_failures:
        for failure in result.expect_failures:
            err.print(f"[bold red]expect failed:[/] {escape(failure)}")
        raise typer.Exit(EXIT_EXPECT_FAILED)


def _print_timeline(document: dict[str, Any]) -> None:
    broker_ids = list(document["replicas"])
    table = Table(
        title=f"{document['name']} ({document['mode']})",
        title_justify="left",
        caption="replica columns: LEO/HW/leader epoch, L = leader",
        caption_justify="left",
    )
    table.add_column("step", justify="right")
    table.add_column("op")
    for broker_id in broker_ids:
        table.add_column(f"r{broker_id}", justify="right")
    table.add_column("ISR")
    table.add_column("acked")
    table.add_column("result")
    acked_before: set[str] = set()
    for entry in document["timeline"]:
        cells = []
        for broker_id in broker_ids:
            view = entry["replicas"][broker_id]
            text = f"{view['leo']}/{view['hw']}/{view['epoch']}"
            if not view["online"]:
                text = f"[dim]{text} down[/]"
            elif str(entry["leader"]) == broker_id:
                text = f"[bold]{text} L[/]"
            cells.append(text)
        newly_acked = [v for v in entry["acked"] if v not in acked_before]
        acked_before.update(entry["acked"])
        table.add_row(
            str(entry["step"]),
            escape(entry["op"]),
            *cells,
            escape(",".join(map(str, entry["isr"]))),
            escape(" ".join(newly_acked)),
            escape(str(entry["result"])),
        )
    out.print(table)


def _print_verdict(document: dict[str, Any]) -> None:
    for broker_id, view in document["replicas"].items():
        records = ", ".join(f"{offset}:e{epoch} {value}" for offset, epoch, value in view["log"])
        state = "" if view["online"] else " (down)"
        out.print(f"r{broker_id} log [{escape(records)}] HW {view['hw']}{state}")
    lost = document["acked_lost"]
    out.print(
        f"acknowledged: {len(document['acked'])}, lost: "
        + (f"[bold red]{escape(' '.join(lost))}[/]" if lost else "none")
        + f"; logs diverged: {'[bold red]yes[/]' if document['diverged'] else 'no'}"
    )
    for violation in document["violations"]:
        out.print(
            f"[yellow]violation[/] {escape(violation['invariant'])} at step {violation['step']}: "
            f"{escape(violation['detail'])}"
        )
    if not document["violations"]:
        out.print("invariants: all held after every step")
    failures = document["expect_failures"]
    out.print("expectations: " + ("[bold red]failed[/]" if failures else "all held"))


def _explore(
    mode: str | None,
    min_isr: int,
    acks: str,
    unclean: bool,
    elr: bool,
    schedules: int,
    seed: int,
    out_dir: Path | None,
    as_json: bool,
) -> None:
    import time

    from replication.explore import explore
    from replication.scenario import scenario_to_text

    acks_value: str | int = "all" if acks in ("all", "-1") else acks
    if acks_value != "all":
        if acks not in ("0", "1"):
            raise fail(f"--acks: must be 0, 1 or all (got {acks!r})")
        acks_value = int(acks)
    with reported_errors(), _progress(schedules) as progress:
        report = explore(
            mode or "current",
            min_insync_replicas=min_isr,
            acks=acks_value,
            unclean_leader_election=unclean,
            eligible_leader_replicas=elr,
            schedules=schedules,
            seed=seed,
            out_dir=out_dir,
            timer=time.perf_counter,
            progress=progress,
        )
    if as_json:
        typer.echo(json.dumps(report.to_json(include_timing=True), indent=2))
        return
    out.print(escape(report.summary()))
    if out_dir is None:
        for finding in report.findings:
            out.print(f"\n# {escape(finding.file_name)}")
            typer.echo(scenario_to_text(finding.scenario, "json"), nl=False)


@contextmanager
def _progress(total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on an interactive terminal; nothing otherwise."""
    if not is_interactive():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("schedules", total=total)

        def update(done: int, _total: int) -> None:
            bar.update(task, completed=done)

        yield update


def register(app: typer.Typer) -> None:
    app.command("replicate", help=HELP)(replicate_command)
