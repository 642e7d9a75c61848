"""`ktk replicate` for KRaft quorum scenarios (a file with a top-level `quorum`) and
`ktk replicate explore --quorum N`: the quorum timeline (epochs, votes, HW per voter,
snapshots), the verdict, the HTML page, and the explorer's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ktk import __version__
from ktk.commands.replicate import exit_if_expect_failed, write_page
from ktk.console import escape, out, progress_bar, reported_errors

EXIT_VIOLATIONS_FOUND = 1
# messages the printed timeline leaves out (the HTML page and --json keep every one)
_ROUTINE = (" offset ", "nothing new", " acknowledged")
MAX_PRINTED_MESSAGES = 6


def is_quorum_file(path: str) -> bool:
    """Whether ``path`` is a readable scenario whose top level names a ``quorum``; a file that
    does not decode is left to the partition scenario reader, which reports the problem."""
    from replication.kraft.scenario import is_quorum_document, read_document
    from replication.kraft.zookeeper import is_zookeeper_document

    try:
        document = read_document(Path(path))
        return is_quorum_document(document) or is_zookeeper_document(document)
    except (OSError, ValueError):
        return False


def run_quorum_file(
    path: str,
    *,
    mode: str | None,
    as_json: bool,
    html: str | None,
    invariants: list[str] | None,
    log_dir: str | None,
    force: bool,
) -> None:
    """Run a quorum scenario file, print its timeline and verdict, write the page."""
    from dataclasses import replace

    from ktk.console import fail
    from replication.kraft.scenario import (
        QUORUM_INVARIANTS,
        load_quorum_scenario,
        run_quorum_scenario,
    )

    if mode is not None:
        raise fail("--mode: applies to partition scenarios; a quorum scenario has no mode")
    if log_dir is not None:
        raise fail("--log-dir: applies to partition scenarios, not to a quorum scenario")
    with reported_errors():
        if html is not None:
            from dashboards.page import is_ktk_page
            from ktkbase.outputs import check_output_file

            check_output_file(html, inputs=[path], force=force, is_ours=is_ktk_page)
        from replication.kraft.scenario import read_document
        from replication.kraft.zookeeper import is_zookeeper_document

        raw = read_document(Path(path))
        if is_zookeeper_document(raw):
            if invariants is not None:
                raise fail("--invariants: a ZooKeeper scenario checks its own three invariants")
            _run_zookeeper(raw, path, as_json=as_json, html=html, force=force)
            return
        scenario = load_quorum_scenario(Path(path))
        if invariants is not None:
            from replication.errors import InputError

            for name in invariants:
                if name not in QUORUM_INVARIANTS:
                    known = ", ".join(QUORUM_INVARIANTS)
                    raise InputError(
                        f"unknown quorum invariant; expected some of {known}",
                        field="--invariants",
                        value=name,
                    )
            scenario = replace(scenario, invariants=tuple(invariants))
        result = run_quorum_scenario(scenario)
    document = result.to_json()
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        print_quorum_timeline(document)
        print_quorum_verdict(document, result.expectations_checked)
    if html is not None:
        from dashboards.quorum import render_quorum

        write_page(lambda: render_quorum(document), html, [path], force)
    exit_if_expect_failed(result.expect_failures)


def _run_zookeeper(raw: Any, path: str, *, as_json: bool, html: str | None, force: bool) -> None:
    """A ZooKeeper-era controller scenario: its timeline, verdict and page."""
    from replication.kraft.zookeeper import load_zookeeper_scenario, run_zookeeper_scenario

    document = run_zookeeper_scenario(load_zookeeper_scenario(raw, source=path))
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        print_zookeeper(document)
    if html is not None:
        from dashboards.quorum import render_zookeeper

        write_page(lambda: render_zookeeper(document), html, [path], force)
    exit_if_expect_failed(document["expect_failures"])


def zookeeper_cell(state: dict[str, Any]) -> str:
    """``C e2 orders-0:1@0``: C while it believes it is the controller, the newest controller
    epoch it has seen, each partition's leader @ leader epoch; ``expired`` without a session."""
    parts = ["C" if state["believes_controller"] else "-", f"e{state['seen_controller_epoch']}"]
    parts += [f"{name}:{leader}@{epoch}" for name, (leader, epoch) in state["cache"].items()]
    if not state["session"]:
        parts.append("expired")
    return " ".join(parts)


def print_zookeeper(document: dict[str, Any]) -> None:
    if document.get("description"):
        out.print(escape(document["description"]))
    table = Table(
        title=f"{escape(document['name'])} (ZooKeeper-era controller)",
        title_justify="left",
        caption="broker columns: C = believes it is the controller, e = newest controller epoch "
        "seen, partition:leader@leader epoch it acts on",
        caption_justify="left",
    )
    table.add_column("step", justify="right")
    table.add_column("op")
    table.add_column("ZooKeeper")
    brokers = [str(b) for b in document["brokers"]]
    for broker in brokers:
        table.add_column(f"b{broker}")
    table.add_column("what happened")
    for entry in document["timeline"]:
        state = entry["state"]
        zk = f"/controller {state['controller']}, epoch {state['controller_epoch']}; " + ", ".join(
            f"{n}:{leader}@{epoch}" for n, (leader, epoch) in state["zk"].items()
        )
        op = escape(entry["op"])
        if entry.get("comment"):
            op += f"\n[dim]# {escape(entry['comment'])}[/]"
        lines = [escape(entry["note"])] if entry.get("note") else []
        lines += [f"[dim]{escape(m)}[/]" for m in entry["messages"]]
        lines += [
            f"[yellow]{escape(v['invariant'])}[/]: {escape(v['detail'])}"
            for v in entry["violations"]
        ]
        cells = [escape(zookeeper_cell(state["brokers"][b])) for b in brokers]
        table.add_row(str(entry["step"]), op, escape(zk), *cells, "\n".join(lines))
    out.print(table)
    for violation in document["violations"]:
        out.print(
            f"[yellow]violation[/] {escape(violation['invariant'])} at step "
            f"{violation['step']}: {escape(violation['detail'])}"
        )
    if not document["violations"]:
        out.print("StaleControllerApplied, ZkStateFenced, MetadataAgreement: all held")
    if document["expect_failures"]:
        out.print("expectations: [bold red]failed[/]")
    else:
        out.print("expectations: all held")


def node_cell(view: dict[str, Any]) -> str:
    """``L e2 5/5`` (role letter, epoch, log end / HW), ``s3-1`` with a snapshot, or ``down``."""
    from replication.kraft.scenario import ROLE_LETTERS

    if not view["up"]:
        return f"down e{view['epoch']} {view['end_offset']}"
    text = (
        f"{ROLE_LETTERS.get(view['role'], '?')} e{view['epoch']} {view['end_offset']}/{view['hw']}"
    )
    if view["snapshot"]:
        text += f" s{view['snapshot']}"
    return text


def print_quorum_timeline(document: dict[str, Any]) -> None:
    if document.get("description"):
        out.print(escape(document["description"]))
    node_ids = list(document["nodes"])
    table = Table(
        title=f"{escape(document['name'])} (quorum, voters {document['voters']})",
        title_justify="left",
        caption="node columns: role (L leader, F follower, C candidate, P prospective, U "
        "unattached), epoch, log end/HW, s<end>-<epoch> newest snapshot; routine fetches not "
        "shown",
        caption_justify="left",
    )
    table.add_column("step", justify="right")
    table.add_column("op")
    for node_id in node_ids:
        roles = document["nodes"][node_id]
        label = "b" if roles == "broker" else "c"
        table.add_column(f"{label}{node_id}", justify="right")
    table.add_column("what happened")
    for entry in document["timeline"]:
        op = escape(entry["op"])
        if entry.get("note"):
            op += f" [dim]({escape(entry['note'])})[/]"
        if entry.get("comment"):
            op += f"\n[dim]# {escape(entry['comment'])}[/]"
        cells = []
        for node_id in node_ids:
            view = entry["nodes"][node_id]
            text = escape(node_cell(view))
            if not view["up"]:
                text = f"[dim]{text}[/]"
            elif view["role"] == "leader":
                text = f"[bold]{text}[/]"
            cells.append(text)
        shown = [m for m in entry["messages"] if not any(r in m for r in _ROUTINE)]
        lines = [escape(change) for change in entry["changes"]]
        lines += [f"[dim]{escape(m)}[/]" for m in shown[:MAX_PRINTED_MESSAGES]]
        if len(shown) > MAX_PRINTED_MESSAGES:
            lines.append(f"[dim]... {len(shown) - MAX_PRINTED_MESSAGES} more messages[/]")
        lines += [
            f"[yellow]{escape(v['invariant'])}[/]: {escape(v['detail'])}"
            for v in entry["violations"]
        ]
        table.add_row(str(entry["step"]), op, *cells, "\n".join(lines))
    out.print(table)


def print_quorum_verdict(document: dict[str, Any], expectations_checked: int) -> None:
    final = document["final"]
    leader = final["leader"]
    out.print(
        f"leader: {leader if leader is not None else 'none'}, epoch {final['epoch']}, "
        f"voters {final['voters']}, committed offsets: {final['committed']}"
    )
    for node_id, view in final["nodes"].items():
        snapshots = ", ".join(view["snapshots"]) or "none"
        out.print(
            f"node {node_id} ({escape(document['nodes'][node_id])}): {view['role']}, epoch "
            f"{view['epoch']}, log {view['log_start']}..{view['end_offset']}, HW {view['hw']}, "
            f"snapshots: {escape(snapshots)}"
        )
    for violation in document["violations"]:
        out.print(
            f"[yellow]violation[/] {escape(violation['invariant'])} at step "
            f"{violation['step']}: {escape(violation['detail'])}"
        )
    if not document["violations"]:
        out.print(f"invariants {', '.join(document['invariants'])}: all held after every step")
    if document["expect_failures"]:
        out.print("expectations: [bold red]failed[/]")
    elif expectations_checked:
        out.print("expectations: all held")
    else:
        out.print("expectations: none")


def explore_quorum_command(
    *,
    voters: int,
    brokers: int,
    steps: int,
    schedules: int,
    seed: int,
    rules_off: list[str],
    rules_on: list[str],
    clock_jumps: bool,
    out_dir: str | None,
    force: bool,
    as_json: bool,
) -> None:
    from replication.kraft.explore import (
        QuorumExploreSettings,
        explore_quorum,
        write_quorum_findings,
    )
    from replication.kraft.scenario import quorum_scenario_to_text

    with reported_errors():
        settings = QuorumExploreSettings(
            voters=voters,
            brokers=brokers,
            steps=steps,
            schedules=schedules,
            seed=seed,
            rules_off=tuple(rules_off),
            rules_on=tuple(rules_on),
            clock_jumps=clock_jumps,
        )
        if out_dir is not None:
            from ktkbase.outputs import plan_output_directory

            plan_output_directory(
                out_dir, command="replicate explore", version=__version__, force=force
            )
        with progress_bar("schedules", settings.schedules) as progress:
            report = explore_quorum(settings, progress=progress)
        if out_dir is not None:
            from ktkbase.outputs import output_directory

            with output_directory(
                out_dir, command="replicate explore", version=__version__, force=force
            ) as staging:
                write_quorum_findings(report, staging)
    if as_json:
        typer.echo(json.dumps(report.to_json(include_timing=True), indent=2))
    else:
        out.print(escape(report.summary()))
        if out_dir is None:
            for finding in report.findings:
                out.print(f"\n# {escape(finding.file_name)}")
                typer.echo(quorum_scenario_to_text(finding.scenario), nl=False)
    if report.violating:
        raise typer.Exit(EXIT_VIOLATIONS_FOUND)
