"""`ktk replicate`: run a replication scenario (`ktk replicate FILE`) or explore random fault
schedules (`ktk replicate explore`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ktk.console import err, escape, fail, out, reported_errors

EXIT_EXPECT_FAILED = 1
EXPLORE = "explore"


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
    """Run a scenario and print its timeline and verdict, or explore fault schedules.

    `ktk replicate FILE [--mode M] [--json] [--html page.html]` exits 0 when every `expect`
    held, 1 when one failed and 2 when the file is invalid.
    `ktk replicate explore --mode M [--min-isr N --acks A --unclean --elr] --schedules N
    --seed S [--out DIR]` prints each violation found as a replayable scenario.
    """
    if target == EXPLORE:
        _explore(mode, min_isr, acks, unclean, elr, schedules, seed, out_dir and Path(out_dir))
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
) -> None:
    try:
        from replication import explore as explore_module
    except ModuleNotFoundError:
        raise fail("the explorer (replication.explore) is not installed") from None
    with reported_errors():
        report = explore_module.explore(
            mode=mode or "current",
            min_insync_replicas=min_isr,
            acks=acks,
            unclean_leader_election=unclean,
            eligible_leader_replicas=elr,
            schedules=schedules,
            seed=seed,
            out_dir=out_dir,
        )
    typer.echo(json.dumps(report, indent=1, default=str))


def register(app: typer.Typer) -> None:
    app.command("replicate")(replicate_command)
