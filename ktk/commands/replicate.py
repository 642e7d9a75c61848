"""`ktk replicate`: run a replication scenario (`ktk replicate FILE`, the same as
`ktk replicate run FILE`) or explore random fault schedules (`ktk replicate explore`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperGroup

from ktk import __version__
from ktk.console import ensure_one_of, err, escape, fail, out, progress_bar, reported_errors

if TYPE_CHECKING:
    from replication.explore import ExploreReport, ExploreSettings
    from replication.scenario import Scenario
    from replication.sim import ScenarioResult

EXIT_EXPECT_FAILED = 1
ENGINES = ("auto", "python", "spark")
# `auto` explores on Spark from this many schedules: below it, starting the JVM and the tasks
# costs more than the cores save (docs/replication.md, measured with benchmarks/bench_explore.py)
AUTO_SPARK_SCHEDULES = 50_000
EXIT_VIOLATIONS_FOUND = 1
# the header line naming who decided leaders and ISRs
CONTROLLER_TEXT = {
    "builtin": "builtin (the simulator's own)",
    "kraft": "kraft (decisions committed to a 3-voter metadata log, state read back from it)",
}
RUN = "run"
EXIT_CODES_RUN = (
    "Exit status: 0 the scenario ran and every expect step for this mode held (or it has none "
    "for this mode); 1 an expect step failed; 2 the file or an option is invalid, or an output "
    "was refused (one line naming the file, the step or line, and the field)."
)
EXIT_CODES_EXPLORE = (
    "Exit status: 0 no schedule broke anything; 1 some schedule broke an invariant, lost an "
    "acknowledged record or diverged, or (with a producer) showed a duplicate, a reordering or a "
    "truncated read (each class is shrunk to a minimal scenario); 2 an option is invalid or an "
    "output was refused."
)
HELP = (
    "Run a replication scenario and print its timeline and verdict, or explore fault schedules."
    "\n\n"
    "ktk replicate FILE [--mode M] [--controller builtin|kraft] [--json] [--html page.html] "
    "[--invariants A,B] [--log-dir DIR]: the same as "
    "ktk replicate run FILE. " + EXIT_CODES_RUN + "\n\n"
    "ktk replicate explore --mode M [--min-isr N] [--acks A] [--unclean] [--elr] [--link-cuts] "
    "--schedules N --seed S [--out DIR] [--json] [--engine python|spark|auto]: run seeded "
    "random fault schedules; each "
    "violation class found is shrunk to a minimal scenario file that ktk replicate replays. "
    "ktk replicate explore --quorum 3 [--rule-off vote_log_check|pre_vote|...] [--rule-on "
    "count_observers]: the same for a KRaft controller quorum. A scenario file with a "
    "top-level quorum runs the controller quorum and prints its timeline. "
    + EXIT_CODES_EXPLORE
    + "\n\n"
    "ktk replicate compare [--schedules N] [--seed S] [--link-cuts] [--format table|json|csv]: "
    "ISR against a majority quorum on the same seeded schedules."
)
RUN_HELP = (
    "Run a scenario file (JSON or YAML) and print its timeline and verdict.\n\n" + EXIT_CODES_RUN
)
EXPLORE_HELP = (
    "Run seeded random fault schedules; classify what breaks (S1-S5; with --producer also "
    "duplicates, reorderings and truncated reads) and shrink each class to "
    "a minimal scenario file that `ktk replicate FILE` replays.\n\n" + EXIT_CODES_EXPLORE
)


class _ReplicateGroup(TyperGroup):
    """`ktk replicate FILE ...` is `ktk replicate run FILE ...`: anything that is not a
    subcommand or a help option goes to `run`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [RUN, *args]
        return super().parse_args(ctx, args)


replicate_app = typer.Typer(
    name="replicate",
    cls=_ReplicateGroup,
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _invariant_names(option: str | None) -> list[str] | None:
    if option is None:
        return None
    return [name.strip() for name in option.split(",") if name.strip()]


CONTROLLER_HELP = (
    "Who decides leaders and ISRs: builtin (the simulator's controller) or kraft (the same "
    "decisions written to a 3-voter KRaft metadata log and read back; needed by controller "
    "steps). Default: the file's config.controller, else builtin. Not for quorum files."
)
INVARIANTS_HELP = (
    "Check only these invariants (comma-separated names of spec section 8, e.g. "
    "StrongIsr,LogMatching); default: the scenario's `invariants`, else all."
)


@replicate_app.command(RUN, help=RUN_HELP)
def run_command(
    path: str = typer.Argument(..., metavar="FILE", help="A scenario file (JSON or YAML)."),
    mode: str | None = typer.Option(
        None,
        "--mode",
        "-m",
        help="pre-0.11, kip-101, kip-279, current or majority (default: the file's).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result document as JSON."),
    html: str | None = typer.Option(None, "--html", help="Also write the timeline page here."),
    invariants: str | None = typer.Option(None, "--invariants", help=INVARIANTS_HELP),
    controller: str | None = typer.Option(None, "--controller", help=CONTROLLER_HELP),
    log_dir: str | None = typer.Option(
        None,
        "--log-dir",
        help="Keep each broker's log directory (Kafka's files: record batches, indexes, "
        "checkpoints) in DIR/broker-<id>, for `ktk log inspect` and `ktk log compare` "
        "(created by ktk; a directory ktk did not create is refused unless --force).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Overwrite an --html file ktk did not write; write into a --log-dir directory ktk "
        "did not create (its other files are kept).",
    ),
) -> None:
    from ktk.commands.replicate_quorum import is_quorum_file, run_quorum_file
    from replication.modes import get_mode
    from replication.scenario import CONTROLLERS, load_scenario
    from replication.sim import run_scenario

    if controller is not None:
        ensure_one_of("--controller", controller, CONTROLLERS)
    if is_quorum_file(path):
        if controller is not None:
            raise fail(
                "--controller: a quorum file runs its own controller quorum; the option is for "
                "data-plane scenario files"
            )
        run_quorum_file(
            path,
            mode=mode,
            as_json=as_json,
            html=html,
            invariants=_invariant_names(invariants),
            log_dir=log_dir,
            force=force,
        )
        return
    with reported_errors():
        if mode is not None:
            get_mode(mode)
        if html is not None:
            _check_html_target(html, [path], force)
        if log_dir is not None:
            from ktkbase.outputs import plan_output_directory

            # refuse a foreign directory before running anything
            plan_output_directory(
                log_dir, command="replicate run", version=__version__, inputs=[path], force=force
            )
        scenario = load_scenario(Path(path))
        if log_dir is None:
            result = run_scenario(
                scenario, mode, invariants=_invariant_names(invariants), controller=controller
            )
        else:
            result = _run_keeping_logs(scenario, mode, invariants, log_dir, path, force, controller)
    document = result.to_json()
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        _print_timeline(document)
        _print_verdict(document, result)
    if html is not None:
        from dashboards.replication import render_replication

        write_page(lambda: render_replication(document), html, [path], force)
    exit_if_expect_failed(result.expect_failures)


def _run_keeping_logs(
    scenario: Scenario,
    mode: str | None,
    invariants: str | None,
    log_dir: str,
    path: str,
    force: bool,
    controller: str | None = None,
) -> ScenarioResult:
    """Run with every replica log on disk, one Kafka log directory per broker under
    ``log_dir`` (written through ktk's safe output directory)."""
    from ktkbase.outputs import output_directory
    from replication.sim import run_scenario
    from replication.storage import DiskLogStorage

    with output_directory(
        log_dir, command="replicate run", version=__version__, inputs=[path], force=force
    ) as staging:

        def broker_storage(broker_id: int, partition: int = 0) -> DiskLogStorage:
            return DiskLogStorage(staging / f"broker-{broker_id}", partition=partition)

        return run_scenario(
            scenario,
            mode,
            invariants=_invariant_names(invariants),
            storage_factory=broker_storage,
            controller=controller,
        )


def _check_html_target(html: str, inputs: list[str], force: bool) -> None:
    from dashboards.page import is_ktk_page
    from ktkbase.outputs import check_output_file

    check_output_file(html, inputs=inputs, force=force, is_ours=is_ktk_page)


def write_page(render: Callable[[], str], html: str, inputs: list[str], force: bool) -> None:
    """Render a scenario's page and write it to ``html`` (a file ktk did not write is refused
    unless ``force``), then say where it went."""
    from dashboards.page import is_ktk_page
    from ktkbase.outputs import write_output_file

    with reported_errors():
        written = write_output_file(html, render(), inputs=inputs, force=force, is_ours=is_ktk_page)
    err.print(f"wrote {escape(str(written))}", highlight=False)


def exit_if_expect_failed(failures: Sequence[str]) -> None:
    """Name each failed ``expect`` of a scenario and exit with EXIT_EXPECT_FAILED."""
    if failures:
        for failure in failures:
            err.print(f"[bold red]expect failed:[/] {escape(failure)}")
        raise typer.Exit(EXIT_EXPECT_FAILED)


def _print_timeline(document: dict[str, Any]) -> None:
    """One table per partition (one partition: one table, as before)."""
    if document.get("description"):
        out.print(escape(document["description"]))
    out.print(f"controller: {CONTROLLER_TEXT.get(document.get('controller', 'builtin'), '?')}")
    for partition in document.get("partitions") or [document]:
        _print_partition_timeline(document, partition)
    if document.get("quorum") is not None:
        from ktk.commands.replicate_quorum import print_quorum_timeline

        # the KRaft controller's quorum over the same steps
        print_quorum_timeline(document["quorum"])


def _print_partition_timeline(document: dict[str, Any], partition: dict[str, Any]) -> None:
    # the final replicas first, then any a reassignment removed on the way
    broker_ids = list(partition["replicas"])
    for entry in partition["timeline"]:
        broker_ids.extend(b for b in entry["replicas"] if b not in broker_ids)
    which = f", partition {partition['partition']}" if "partition" in partition else ""
    table = Table(
        title=f"{escape(document['name'])} ({document['mode']}{which})",
        title_justify="left",
        caption="replica columns: LEO/HW/leader epoch, L = leader; under each result, the "
        "rule that changed a value in that step (from the simulator's own record)",
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
    for entry in partition["timeline"]:
        cells = []
        for broker_id in broker_ids:
            view = entry["replicas"].get(broker_id)
            if view is None:
                cells.append("[dim]-[/]")
                continue
            text = f"{view['leo']}/{view['hw']}/{view['epoch']}"
            if not view["online"]:
                text = f"[dim]{text} down[/]"
            elif str(entry["leader"]) == broker_id:
                text = f"[bold]{text} L[/]"
            cells.append(text)
        newly_acked = [v for v in entry["acked"] if v not in acked_before]
        acked_before.update(entry["acked"])
        op = escape(entry["op"])
        if entry.get("comment"):
            op += f"\n[dim]# {escape(entry['comment'])}[/]"
        result = escape(str(entry["result"]))
        for change in entry.get("changes", ()):
            result += f"\n[cyan]\u21b3 {escape(change)}[/]"
        table.add_row(
            str(entry["step"]),
            op,
            *cells,
            escape(",".join(map(str, entry["isr"]))),
            escape(" ".join(newly_acked)),
            result.lstrip("\n"),
        )
    out.print(table)


def _print_verdict(document: dict[str, Any], result: ScenarioResult) -> None:
    for partition in document.get("partitions") or [document]:
        which = f"partition {partition['partition']}: " if "partition" in partition else ""
        for broker_id, view in partition["replicas"].items():
            records = ", ".join(
                f"{offset}:e{epoch} {value}" for offset, epoch, value in view["log"]
            )
            state = "" if view["online"] else " (down)"
            out.print(f"{which}r{broker_id} log [{escape(records)}] HW {view['hw']}{state}")
        lost = partition["acked_lost"]
        out.print(
            f"{which}acknowledged: {len(partition['acked'])}, lost: "
            + (f"[bold red]{escape(' '.join(lost))}[/]" if lost else "none")
            + f"; logs diverged: {'[bold red]yes[/]' if partition['diverged'] else 'no'}"
        )
    for violation in document["violations"]:
        out.print(
            f"[yellow]violation[/] {escape(violation['invariant'])} at step {violation['step']}: "
            f"{escape(violation['detail'])}"
        )
    for found in document.get("anomalies", []):
        out.print(f"[yellow]anomaly[/] {escape(found['anomaly'])}: {escape(found['detail'])}")
    checked = (
        "invariants"
        if "invariants" not in document
        else ("invariants " + ", ".join(document["invariants"]))
    )
    if not document["violations"]:
        out.print(f"{checked}: all held after every step")
    failures = document["expect_failures"]
    if failures:
        out.print("expectations: [bold red]failed[/]")
    elif result.expectations_checked:
        out.print("expectations: all held")
    else:
        out.print("expectations: no expectations for this mode")


@replicate_app.command("explore", help=EXPLORE_HELP)
def explore_command(
    mode: str = typer.Option(
        "current", "--mode", "-m", help="pre-0.11, kip-101, kip-279, current or majority."
    ),
    min_isr: int = typer.Option(2, "--min-isr", help="min.insync.replicas."),
    acks: str = typer.Option("all", "--acks", help="Producer acks: 0, 1 or all."),
    unclean: bool = typer.Option(False, "--unclean/--no-unclean", help="Unclean leader election."),
    elr: bool = typer.Option(False, "--elr", help="Eligible leader replicas (current only)."),
    link_cuts: bool = typer.Option(
        False, "--link-cuts", help="Also draw network link cuts and heals (one way or both)."
    ),
    disk_faults: bool = typer.Option(
        False,
        "--disk-faults",
        help="Also draw torn tails, failed log directories and DeleteRecords on the leader.",
    ),
    partitions: int = typer.Option(
        1,
        "--partitions",
        help="Partitions on the same brokers (each on every broker, the preferred leader "
        "rotating): a broker fault hits all of them at once.",
    ),
    producer: bool = typer.Option(
        False,
        "--producer",
        help="Send records through Kafka's producer (retries, requests in flight, idempotence) "
        "and look for duplicates, reorderings and truncated reads too; implied by the options "
        "below.",
    ),
    idempotence: bool | None = typer.Option(
        None, "--idempotence/--no-idempotence", help="enable.idempotence (default off)."
    ),
    max_in_flight: int | None = typer.Option(
        None, "--max-in-flight", help="max.in.flight.requests.per.connection (default 5)."
    ),
    retries: int | None = typer.Option(None, "--retries", help="retries (default 2147483647)."),
    delivery_timeout_ms: int | None = typer.Option(
        None, "--delivery-timeout-ms", help="delivery.timeout.ms (default 120000)."
    ),
    schedules: int = typer.Option(1000, "--schedules", help="How many schedules to run."),
    seed: int = typer.Option(0, "--seed", help="Seed of the schedule generator."),
    invariants: str | None = typer.Option(None, "--invariants", help=INVARIANTS_HELP),
    out_dir: str | None = typer.Option(
        None,
        "--out",
        help="Write each counterexample scenario into this directory (created by ktk; a "
        "directory ktk did not create is refused unless --force).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Write into an --out directory ktk did not create (its other files are kept).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    quorum: int = typer.Option(
        0,
        "--quorum",
        help="Explore a KRaft controller quorum of this many voters instead of a partition "
        "(crashes, restarts, link cuts, isolations, clock jumps, snapshots).",
    ),
    observers: int = typer.Option(1, "--observers", help="With --quorum: brokers (observers)."),
    steps: int = typer.Option(80, "--steps", help="With --quorum: steps per schedule."),
    rule_off: str | None = typer.Option(
        None,
        "--rule-off",
        help="With --quorum: switch off rules Kafka runs (comma-separated: vote_log_check, "
        "pre_vote, check_quorum, flush_before_ack, epoch_start_commit, one_voter_change).",
    ),
    rule_on: str | None = typer.Option(
        None, "--rule-on", help="With --quorum: switch on count_observers (a bug to explore)."
    ),
    clock_jumps: bool = typer.Option(
        True, "--clock-jumps/--no-clock-jumps", help="With --quorum: draw clock jumps."
    ),
    engine: str = typer.Option(
        "auto",
        "--engine",
        help="auto (in process below "
        f"{AUTO_SPARK_SCHEDULES:,} schedules, Spark from there or with --master/--conf), "
        "python (in process) or spark (schedules spread over Spark tasks; the same findings "
        "and files).",
    ),
    master: str | None = typer.Option(None, "--master", help="Spark master (engine spark)."),
    conf: Annotated[
        list[str] | None,
        typer.Option("--conf", metavar="KEY=VALUE", help="Spark setting (engine spark)."),
    ] = None,
) -> None:
    import time

    from replication.explore import explore, explore_settings

    ensure_one_of("--engine", engine, ENGINES)
    if quorum:
        from ktk.commands.replicate_quorum import explore_quorum_command

        if invariants is not None:
            raise fail("--invariants: a quorum exploration checks every quorum invariant")
        if engine == "spark" or master is not None or conf:
            raise fail("--engine spark: a quorum exploration runs in process")
        if partitions != 1:
            raise fail("--partitions: a quorum exploration has one metadata log, no partitions")

        explore_quorum_command(
            voters=quorum,
            brokers=observers,
            steps=steps,
            schedules=schedules,
            seed=seed,
            rules_off=_invariant_names(rule_off) or [],
            rules_on=_invariant_names(rule_on) or [],
            clock_jumps=clock_jumps,
            out_dir=out_dir,
            force=force,
            as_json=as_json,
        )
        return

    engine = resolve_explore_engine(engine, schedules, master, conf or [])
    acks_value: str | int = "all" if acks in ("all", "-1") else acks
    if acks_value != "all":
        if acks not in ("0", "1"):
            raise fail(f"--acks: must be 0, 1 or all (got {acks!r})")
        acks_value = int(acks)
    with (
        reported_errors(),
        progress_bar(
            "schedules on Spark" if engine == "spark" else "schedules", schedules
        ) as progress,
    ):
        producer_settings = None
        chosen = {
            "idempotence": idempotence,
            "max_in_flight": max_in_flight,
            "retries": retries,
            "delivery_timeout_ms": delivery_timeout_ms,
        }
        given = {name: value for name, value in chosen.items() if value is not None}
        if producer or given:
            from replication.producer import ProducerSettings

            producer_settings = ProducerSettings(acks=acks_value, **given)  # type: ignore[arg-type]
        options: dict[str, Any] = {
            "min_insync_replicas": min_isr,
            "acks": acks_value,
            "unclean_leader_election": unclean,
            "eligible_leader_replicas": elr,
            "link_cuts": link_cuts,
            "disk_faults": disk_faults,
            "partitions": partitions,
            "producer": producer_settings,
            "schedules": schedules,
            "seed": seed,
            "invariants": _invariant_names(invariants),
        }
        if engine == "spark":
            settings = explore_settings(mode, **options)
            report = _explore_on_spark(settings, out_dir, force, master, conf or [], progress)
        else:
            if out_dir is not None:
                # refuse a foreign directory before running anything
                from ktkbase.outputs import plan_output_directory

                plan_output_directory(
                    out_dir, command="replicate explore", version=__version__, force=force
                )
            report = explore(mode, **options, timer=time.perf_counter, progress=progress)
            if out_dir is not None:
                _write_findings(report, out_dir, force)
    if as_json:
        typer.echo(json.dumps(report.to_json(include_timing=True), indent=2))
    else:
        from replication.scenario import scenario_to_text

        out.print(escape(report.summary()))
        if out_dir is None:
            for finding in report.findings:
                out.print(f"\n# {escape(finding.file_name)}")
                typer.echo(scenario_to_text(finding.scenario, "json"), nl=False)
    if report.violating_schedules or report.anomaly_counts:
        raise typer.Exit(EXIT_VIOLATIONS_FOUND)


def resolve_explore_engine(engine: str, schedules: int, master: str | None, conf: list[str]) -> str:
    """The engine `auto` stands for: Spark when a master or a Spark setting is given or from
    AUTO_SPARK_SCHEDULES schedules, in process otherwise; other engines as given.

    >>> resolve_explore_engine("auto", 1000, None, [])
    'python'
    >>> resolve_explore_engine("auto", 10, "local[2]", [])
    'spark'
    """
    if engine != "auto":
        return engine
    if master is not None or conf or schedules >= AUTO_SPARK_SCHEDULES:
        return "spark"
    return "python"


def _explore_on_spark(
    settings: ExploreSettings,
    out_dir: str | None,
    force: bool,
    master: str | None,
    conf: list[str],
    progress: Callable[[int, int], None] | None,
) -> ExploreReport:
    """The schedules spread over Spark tasks (spark_jobs/explore_schedules.py); the scenario
    files written once, as the in-process engine writes them."""
    import time

    from spark_jobs.explore_schedules import run
    from spark_jobs.session import parse_conf

    try:
        spark_conf = parse_conf(conf)
    except ValueError as error:
        raise fail(str(error)) from None
    result = run(
        settings,
        out_dir=out_dir,
        force=force,
        master=master,
        conf=spark_conf,
        command="replicate explore",
        version=__version__,
        timer=time.perf_counter,
        progress=progress,
    )
    return result.report


def _write_findings(report: ExploreReport, out_dir: str, force: bool) -> None:
    """Every finding's minimal scenario into ``out_dir`` through ktk's safe output directory."""
    from ktkbase.outputs import output_directory
    from replication.explore import write_scenarios

    with output_directory(
        out_dir, command="replicate explore", version=__version__, force=force
    ) as staging:
        write_scenarios(report, staging)


COMPARE_HELP = (
    "ISR against a majority quorum: run the same seeded fault schedules through current (min "
    "ISR 1 and 2, acks all and 1, unclean election off and on; min ISR 2 with eligible leader "
    "replicas) and the majority mode (with and without flush before ack), and print "
    "per configuration the acknowledged writes lost, the writes refused and the steps without "
    "a leader. Deterministic for a seed.\n\n"
    "Exit status: 0 the comparison ran; 2 an option is invalid."
)


@replicate_app.command("compare", help=COMPARE_HELP)
def compare_command(
    schedules: int = typer.Option(1000, "--schedules", help="How many schedules to run."),
    seed: int = typer.Option(0, "--seed", help="Seed of the schedule generator."),
    max_steps: int = typer.Option(
        24, "--max-steps", help="Random steps per schedule (then a settle phase)."
    ),
    lossy_crashes: int = typer.Option(
        1, "--lossy-crashes", help="At most this many crashes per schedule lose unflushed data."
    ),
    link_cuts: bool = typer.Option(
        False, "--link-cuts", help="Also draw network link cuts and heals (one way or both)."
    ),
    output_format: str = typer.Option(
        "table", "--format", metavar="table|json|csv", help="table, json or csv."
    ),
) -> None:
    from ktk.output_formats import checked_format, csv_text, json_text, print_plain, print_table
    from replication.compare import HEADERS, compare

    output_format = checked_format(output_format)
    with reported_errors(), progress_bar("schedules", schedules) as progress:
        report = compare(
            schedules=schedules,
            seed=seed,
            max_steps=max_steps,
            max_lossy_crashes=lossy_crashes,
            link_cuts=link_cuts,
            progress=progress,
        )
    if output_format == "json":
        print_plain(json_text(report.to_json()))
    elif output_format == "csv":
        print_plain(csv_text(HEADERS, report.rows()))
    else:
        title = (
            f"{report.schedules:,} schedules, seed {report.seed}, brokers "
            f"{list(report.brokers)}, at most {report.max_lossy_crashes} lossy crash(es)"
            + (", link cuts" if report.link_cuts else "")
        )
        print_table(title, HEADERS, report.rows())


def register(app: typer.Typer) -> None:
    app.add_typer(replicate_app, name="replicate")
