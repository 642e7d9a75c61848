"""`ktk traces capture`: a group's history captured live, as trace rows (format v1).

- ``--from leader``: capture files the group leaders' recorders wrote (a library option,
  ``kafka_python_assignor(..., recorder=CaptureRecorder(path, group_id))``; see
  docs/capture.md) are checked and merged, one generation per row, into a trace directory.
- ``--from describe``: the cluster is polled (DescribeGroups / ConsumerGroupDescribe and
  Metadata) and a row is appended to the capture file whenever the stable assignment changes.
- ``--from offsets-topic``: ``__consumer_offsets`` is read from its start and the group's
  records decoded like the segment importer does; rows after the file's last are appended.

The live sources append to one capture file (created, or resumed after its last row); Ctrl-C
stops a capture with every batch appended so far on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ktk.commands.options import TRACE_FORMATS, force_option, out_option, trace_format_option
from ktk.console import (
    ensure_one_of,
    escape,
    fail,
    out,
    progress_bar,
    reported_errors,
    warn,
)

SOURCES = ("leader", "describe", "offsets-topic")
LIVE_SOURCES = ("describe", "offsets-topic")
GROUP_PROTOCOLS = ("auto", "classic", "consumer")


def register(traces_app: typer.Typer) -> None:
    """Add `capture` to the `ktk traces` group."""

    @traces_app.command("capture")
    def capture_command(
        files: Annotated[
            list[Path],
            typer.Argument(
                metavar="CAPTURE",
                help="leader: capture files of one group, as the leaders' recorders wrote "
                "them. describe, offsets-topic: the one capture file to append to (resumed "
                "after its last row).",
            ),
        ],
        source_kind: Annotated[
            str,
            typer.Option(
                "--from",
                help="leader (merge the leaders' capture files), describe (poll the cluster) "
                "or offsets-topic (read __consumer_offsets).",
            ),
        ],
        out_dir: Annotated[
            Path | None, out_option("leader: the directory to write (replaced whole; see --force).")
        ] = None,
        group: Annotated[
            str | None,
            typer.Option(
                "--group", "-g", help="The group (leader: the files must hold it; default theirs)."
            ),
        ] = None,
        bootstrap_servers: Annotated[
            str | None,
            typer.Option(
                "--bootstrap-servers", "-b", help="describe, offsets-topic: HOST:PORT,..."
            ),
        ] = None,
        command_config: Annotated[
            Path | None,
            typer.Option(
                "--command-config",
                help="A client .properties file (security.protocol, sasl.mechanism, "
                "sasl.jaas.config, ssl.truststore.location ...), as Kafka's tools take it.",
            ),
        ] = None,
        settings: Annotated[
            list[str] | None,
            typer.Option(
                "--property",
                "-X",
                metavar="KEY=VALUE",
                help="One client setting named as Kafka clients name it (repeatable; wins over "
                "--command-config).",
            ),
        ] = None,
        group_protocol: Annotated[
            str,
            typer.Option(
                "--group-protocol",
                help="describe: auto (ConsumerGroupDescribe, else DescribeGroups), classic or "
                "consumer (KIP-848).",
            ),
        ] = "auto",
        interval: Annotated[
            float, typer.Option("--interval", help="describe: seconds between polls.")
        ] = 5.0,
        polls: Annotated[
            int | None,
            typer.Option("--polls", help="describe: stop after this many polls (default: Ctrl-C)."),
        ] = None,
        timeout: Annotated[
            float,
            typer.Option(
                "--timeout", help="Seconds to wait for the cluster (bootstrap, requests)."
            ),
        ] = 30.0,
        file_format: Annotated[str, trace_format_option()] = "jsonl",
        force: Annotated[bool, force_option()] = False,
    ) -> None:
        """Capture a group's history: merge the leaders' capture files into
        OUT/leader-<group>.<format> (--from leader), or append a live group's changes to one
        capture file by polling the cluster (--from describe) or reading __consumer_offsets
        (--from offsets-topic).

        The live sources resume a capture file after its last row; Ctrl-C stops them with
        every row captured so far on disk. Credentials are passed to the client, never shown.
        """
        ensure_one_of("--from", source_kind, SOURCES)
        if source_kind == "leader":
            if out_dir is None:
                raise fail("--from leader needs --out DIR")
            _leader(files, out_dir, group, file_format, force)
            return
        if out_dir is not None:
            raise fail(f"--from {source_kind} appends to CAPTURE; --out is for --from leader")
        if len(files) != 1:
            raise fail(f"--from {source_kind} appends to one capture file (got {len(files)})")
        if not group:
            raise fail(f"--from {source_kind} needs --group")
        ensure_one_of("--group-protocol", group_protocol, GROUP_PROTOCOLS)
        if not interval >= 0 or not timeout > 0:
            raise fail("--interval must be >= 0 and --timeout > 0 seconds")
        if polls is not None and polls < 1:
            raise fail(f"--polls must be at least 1 (got {polls})")
        capture = files[0]
        _silence_client_logs()
        with reported_errors():
            client = _client_settings(bootstrap_servers, command_config, settings or [])
            from assignors.traces.capture_live import open_capture

            recorder, captured = open_capture(capture, group)
        if source_kind == "describe":
            _describe(
                capture, group, client, recorder, captured, group_protocol, interval, polls, timeout
            )
        else:
            _offsets_topic(capture, group, client, recorder, captured, timeout)


def _silence_client_logs() -> None:
    """kafka-python logs its whole configuration (passwords included) at DEBUG and every
    reconnection at WARNING; the command says what matters in its own lines instead."""
    import logging

    client_log = logging.getLogger("kafka")
    client_log.handlers[:] = [logging.NullHandler()]
    client_log.propagate = False


def _client_settings(
    bootstrap_servers: str | None, command_config: Path | None, settings: list[str]
) -> dict[str, Any]:
    from assignors.traces.capture_live import client_settings, read_client_properties
    from ktkbase.errors import InputError

    named: dict[str, str] = {}
    if command_config is not None:
        named.update(read_client_properties(command_config))
    for item in settings:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise InputError("must be KEY=VALUE", field="--property", value=key)
        named[key.strip()] = value
    if bootstrap_servers:
        named["bootstrap.servers"] = bootstrap_servers
    if not named.get("bootstrap.servers"):
        raise InputError("give the cluster's --bootstrap-servers", field="--bootstrap-servers")
    return client_settings(named)


def _describe(
    capture: Path,
    group: str,
    client: dict[str, Any],
    recorder: Any,
    captured: list[dict[str, Any]],
    group_protocol: str,
    interval: float,
    polls: int | None,
    timeout: float,
) -> None:
    from assignors.traces.capture_live import (
        GroupDescriber,
        KafkaPythonExchange,
        Progress,
        poll_group,
    )

    shown = escape(str(capture))
    if captured:
        out.print(
            f"resuming {shown}: {len(captured)} rows, last generation {captured[-1]['generation']}"
        )
    state = {"written": 0, "rows": len(captured)}

    def progress(step: Progress) -> None:
        if step.written > state["written"]:
            out.print(f"poll {step.polls}: {step.state}; row {step.rows} appended to {shown}")
        elif step.state.startswith("retrying"):
            warn(f"poll {step.polls}: {step.state}")
        state["written"], state["rows"] = step.written, step.rows

    with reported_errors():
        exchange = KafkaPythonExchange(client, timeout_s=timeout)
    try:
        with reported_errors():
            poll_group(
                GroupDescriber(exchange, group, kind=group_protocol),
                recorder,
                captured,
                interval_s=interval,
                polls=polls,
                progress=progress,
            )
    except KeyboardInterrupt:
        out.print(
            f"stopped: {state['written']} rows captured by this run; {state['rows']} in {shown}"
        )
        return
    finally:
        exchange.close()
    summary = f"{state['written']} rows captured by this run; {state['rows']} in {shown}"
    out.print(f"group {escape(group)}: {summary}")


def _offsets_topic(
    capture: Path,
    group: str,
    client: dict[str, Any],
    recorder: Any,
    captured: list[dict[str, Any]],
    timeout: float,
) -> None:
    from assignors.traces.capture_live import new_rows, offsets_topic_records, offsets_topic_rows

    try:
        with reported_errors():
            # the bar counts offsets read of those to read
            with progress_bar("__consumer_offsets") as progress:
                records = list(
                    offsets_topic_records(
                        client, group, timeout_s=timeout, progress=progress or _ignore
                    )
                )
            rows, notes = offsets_topic_rows(records, group)
            for note in notes:
                warn(note)
            if not rows:
                raise fail(f"__consumer_offsets holds no generation of group {group!r}")
            appended = new_rows(rows, captured)
            recorder.append_rows(appended)
    except KeyboardInterrupt:
        out.print(f"stopped before appending: {escape(str(capture))} is as it was")
        return
    out.print(
        f"group {escape(group)}: {len(rows)} generations in __consumer_offsets, "
        f"{len(appended)} appended to {escape(str(capture))}"
    )


def _leader(
    files: list[Path], out_dir: Path, group: str | None, file_format: str, force: bool
) -> None:
    import ktk
    from assignors.traces.capture import merge_capture_files
    from assignors.traces.files import write_traces
    from ktkbase.outputs import plan_output_directory, staged_directory

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
    name = f"leader-{_file_stem(group_id)}.{file_format}"
    with reported_errors(), staged_directory(plan) as staging:
        written = write_traces(rows, Path(staging) / name)
    out.print(f"group {escape(group_id)}: {written} generations -> {escape(str(out_dir / name))}")


def _file_stem(group_id: str) -> str:
    """A file-name-safe form of a group id.

    >>> _file_stem("payments/eu-1 (blue)")
    'payments_eu-1__blue_'
    """
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in group_id)[:100] or "group"


def _ignore(done: int, total: int) -> None:
    """No progress shown (standard error is no terminal)."""
