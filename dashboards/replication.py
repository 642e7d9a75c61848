"""The replication timeline page: one `ktk replicate --json` result -> a self-contained HTML page.

It shows, step by step, every replica's log end offset (LEO), high watermark (HW) and leader
epoch, the ISR and the leader, when each `acks=all` record was acknowledged, which acknowledged
records were lost in the end, and the invariant violations the checker found. A result of
several partitions gets every partition's verdict, leader and ISR side by side, then one
section per partition.

>>> result = {"name": "s1", "mode": "pre-0.11", "acked": ["m1"], "acked_lost": ["m1"],
...           "timeline": [{"step": 0, "op": "produce m1", "isr": [1, 2],
...                         "replicas": {"1": {"leo": 1, "hw": 0}, "2": {"leo": 0, "hw": 0}}}]}
>>> [(row.step, row.replicas["1"].leo) for row in timeline_rows(result)]
[(0, 1)]
>>> "acknowledged, then lost" in render_replication(result)
True
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards.errors import InputError
from dashboards.page import (
    PALETTE,
    description_note,
    document,
    escape,
    figure_divs,
    format_number,
    write_atomically,
)
from dashboards.quorum import quorum_timeline_section

# ------------------------------------------------------------------------- reading and checking

# Documented limits of a result document (docs/replication.md), checked before rendering.
MAX_RESULT_BYTES = 64_000_000
MAX_RESULT_DEPTH = 32
MAX_TIMELINE_STEPS = 100_000
MAX_REPLICAS = 1_000
MAX_RESULT_TEXT_CHARS = 100_000
MAX_PARTITIONS = 64


class _ResultValueError(ValueError):
    pass


def _result_integer(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise _ResultValueError(f"an integer of {len(text):,} digits")
    return int(text)


def _result_constant(text: str) -> float:
    raise _ResultValueError(f"{text} is not a number JSON allows")


def load_replication_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a `ktk replicate --json` result file: size, encoding, JSON, then every
    field (:func:`check_replication_result`). Raises :class:`InputError` naming the file."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_RESULT_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except OSError as error:
        raise InputError(f"cannot read the file: {error.strerror}", source=source) from None
    if len(data) > MAX_RESULT_BYTES:
        raise InputError(f"the result is over {MAX_RESULT_BYTES:,} bytes; the limit", source=source)
    nul = data.find(b"\x00")
    if nul != -1:
        raise InputError("a NUL byte; a result is UTF-8 JSON", source=source, position=nul)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError("not UTF-8 text", source=source, position=error.start) from None
    try:
        result = json.loads(text, parse_int=_result_integer, parse_constant=_result_constant)
    except json.JSONDecodeError as error:
        raise InputError(
            f"not a JSON replication result: {error.msg}", source=source, line=error.lineno
        ) from None
    except _ResultValueError as error:
        raise InputError(f"not a JSON replication result: {error}", source=source) from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_RESULT_DEPTH} levels", source=source) from None
    try:
        return check_replication_result(result)
    except InputError as error:
        raise error.located(source=source) from None


def check_replication_result(result: object) -> dict[str, Any]:
    """The result document if every field has the type and range the page needs; else an
    :class:`InputError` naming the field (e.g. ``timeline[3].replicas.1.leo``).

    >>> check_replication_result({"name": "s1", "timeline": [{"step": "x"}]})
    Traceback (most recent call last):
    ...
    dashboards.errors.InputError: timeline[0].step: must be an integer (got 'x')
    """
    if not isinstance(result, dict):
        raise InputError("a replication result must be a JSON object", value=type(result).__name__)
    _check_values(result)
    for key in ("name", "mode"):
        if key in result and result[key] is not None and not isinstance(result[key], str):
            raise InputError("must be text", field=key, value=result[key])
    _check_state_fields(result, "")
    quorum = result.get("quorum")
    if quorum is not None:
        if not isinstance(quorum, dict):
            raise InputError("must be an object", field="quorum", value=quorum)
        for key in ("nodes", "timeline"):
            wanted = dict if key == "nodes" else list
            if not isinstance(quorum.get(key), wanted):
                kind = "an object" if key == "nodes" else "a list"
                raise InputError(f"must be {kind}", field=f"quorum.{key}", value=quorum.get(key))
    partitions = result.get("partitions")
    if partitions is not None:
        if not isinstance(partitions, list):
            raise InputError("must be a list of partitions", field="partitions", value=partitions)
        if len(partitions) > MAX_PARTITIONS:
            raise InputError(
                f"more than {MAX_PARTITIONS} partitions", field="partitions", value=len(partitions)
            )
        for position, partition in enumerate(partitions):
            where = f"partitions[{position}]"
            if not isinstance(partition, dict):
                raise InputError("must be an object", field=where, value=partition)
            if partition.get("partition") is not None and not _is_int(partition["partition"]):
                raise InputError(
                    "must be an integer", field=f"{where}.partition", value=partition["partition"]
                )
            _check_state_fields(partition, f"{where}.")
    return result


def _check_state_fields(result: Mapping[str, Any], prefix: str) -> None:
    """The fields of one partition's state (the top level, or ``partitions[N].``)."""
    for key in ("acked", "acked_lost", "isr", "elr", "violations", "expect_failures"):
        if key in result and result[key] is not None and not isinstance(result[key], list):
            raise InputError("must be a list", field=f"{prefix}{key}", value=result[key])
    for key in ("results", "consumed"):
        if key in result and result[key] is not None and not isinstance(result[key], dict):
            raise InputError("must be an object", field=f"{prefix}{key}", value=result[key])
    _check_replica_map(result.get("replicas"), f"{prefix}replicas")
    timeline = result.get("timeline")
    if timeline is not None:
        if not isinstance(timeline, list):
            raise InputError("must be a list of steps", field=f"{prefix}timeline", value=timeline)
        if len(timeline) > MAX_TIMELINE_STEPS:
            raise InputError(
                f"more than {MAX_TIMELINE_STEPS:,} steps",
                field=f"{prefix}timeline",
                value=len(timeline),
            )
        for position, entry in enumerate(timeline):
            where = f"{prefix}timeline[{position}]"
            if not isinstance(entry, dict):
                raise InputError("must be an object", field=where, value=entry)
            for key in ("step", "time_ms", "leader_epoch"):
                if entry.get(key) is not None and not _is_int(entry[key]):
                    raise InputError("must be an integer", field=f"{where}.{key}", value=entry[key])
            for key in ("isr", "acked"):
                if entry.get(key) is not None and not isinstance(entry[key], list):
                    raise InputError("must be a list", field=f"{where}.{key}", value=entry[key])
            _check_replica_map(entry.get("replicas"), f"{where}.replicas")
    for position, violation in enumerate(result.get("violations") or ()):
        if not isinstance(violation, dict | str):
            raise InputError(
                "must be an object or a name",
                field=f"{prefix}violations[{position}]",
                value=violation,
            )
        if (
            isinstance(violation, dict)
            and violation.get("step") is not None
            and not _is_int(violation["step"])
        ):
            raise InputError(
                "must be an integer",
                field=f"{prefix}violations[{position}].step",
                value=violation["step"],
            )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_replica_map(replicas: object, where: str) -> None:
    if replicas is None:
        return
    if not isinstance(replicas, dict):
        raise InputError("must be an object of replicas", field=where, value=replicas)
    if len(replicas) > MAX_REPLICAS:
        raise InputError(f"more than {MAX_REPLICAS:,} replicas", field=where, value=len(replicas))
    for replica_id, state in replicas.items():
        if not isinstance(state, dict):
            raise InputError("must be an object", field=f"{where}.{replica_id}", value=state)
        for key in ("leo", "hw", "epoch", "leader_epoch"):
            if state.get(key) is not None and not _is_int(state[key]):
                raise InputError(
                    "must be an integer", field=f"{where}.{replica_id}.{key}", value=state[key]
                )
        if state.get("log") is not None and not isinstance(state["log"], list):
            raise InputError(
                "must be a list", field=f"{where}.{replica_id}.log", value=state["log"]
            )


def _check_values(document: object) -> None:
    """Plain JSON within the limits: nesting, text (no NUL, no lone surrogate), finite numbers
    of at most 64 bits, text keys."""
    stack: list[tuple[object, int, str]] = [(document, 0, "")]
    while stack:
        value, depth, where = stack.pop()
        field = where or None
        if depth > MAX_RESULT_DEPTH:
            raise InputError(f"nested deeper than {MAX_RESULT_DEPTH} levels", field=field)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            _check_result_text(value, field)
        elif isinstance(value, int):
            if value.bit_length() > 63:
                raise InputError("an integer beyond 64 bits", field=field, value=value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InputError("not a finite number", field=field, value=value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InputError("keys must be text", field=field, value=key)
                _check_result_text(key, field)
                shown = key if key.isprintable() and len(key) <= 60 else repr(key)[:60]
                stack.append((item, depth + 1, f"{where}.{shown}" if where else shown))
        elif isinstance(value, list):
            for position, item in enumerate(value):
                stack.append((item, depth + 1, f"{where}[{position}]"))
        else:
            raise InputError(f"not a JSON value ({type(value).__name__})", field=field)


def _check_result_text(value: str, field: str | None) -> None:
    if len(value) > MAX_RESULT_TEXT_CHARS:
        raise InputError(
            f"text longer than {MAX_RESULT_TEXT_CHARS:,} characters", field=field, value=value
        )
    if "\x00" in value:
        raise InputError("text holds a NUL character", field=field, value=value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            "text holds a lone surrogate (not Unicode)", field=field, value=value
        ) from None


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica at one step; None where the result does not say."""

    leo: int | None
    hw: int | None
    leader_epoch: int | None
    online: bool | None


@dataclass(frozen=True, slots=True)
class StepRow:
    """One timeline step, with acknowledgements made new at this step."""

    step: int
    op: str
    replicas: dict[str, ReplicaState]
    leader: str | None
    isr: tuple[str, ...] | None
    newly_acked: tuple[str, ...]
    outcome: str
    time_ms: int | None = None
    comment: str = ""
    # the rules that changed a value at this step, as the simulator recorded them
    changes: tuple[str, ...] = ()


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _epoch_of(state: Mapping[str, Any]) -> int | None:
    for key in ("leader_epoch", "epoch"):
        if key in state:
            return _int_or_none(state[key])
    cache = state.get("epoch_cache")
    # the epoch cache lists (epoch, start offset); the latest entry is the replica's epoch
    if isinstance(cache, list) and cache and isinstance(cache[-1], list | tuple) and cache[-1]:
        return _int_or_none(cache[-1][0])
    return None


def _replica_state(state: object) -> ReplicaState:
    if not isinstance(state, Mapping):
        return ReplicaState(None, None, None, None)
    online = state.get("online")
    return ReplicaState(
        leo=_int_or_none(state.get("leo")),
        hw=_int_or_none(state.get("hw")),
        leader_epoch=_epoch_of(state),
        online=online if isinstance(online, bool) else None,
    )


def _ids(values: object) -> tuple[str, ...] | None:
    if not isinstance(values, list | tuple):
        return None
    return tuple(str(value) for value in values)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def replica_ids(result: Mapping[str, Any]) -> list[str]:
    """Every replica id named in the final state or in any step, in the order the result lists
    them (the assignment order, as `ktk replicate` prints its columns), then any only a step
    names."""
    found: dict[str, None] = {}
    replicas = result.get("replicas")
    if isinstance(replicas, Mapping):
        found.update((str(key), None) for key in replicas)
    for entry in _timeline(result):
        states = entry.get("replicas")
        if isinstance(states, Mapping):
            found.update((str(key), None) for key in states if str(key) not in found)
    return list(found)


def _timeline(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    timeline = result.get("timeline")
    if timeline is None:
        return []
    if not isinstance(timeline, list):
        raise InputError("must be a list of steps", field="timeline", value=type(timeline).__name__)
    for position, entry in enumerate(timeline):
        if not isinstance(entry, Mapping):
            raise InputError("must be an object", field=f"timeline[{position}]", value=entry)
    return timeline


def timeline_rows(result: Mapping[str, Any]) -> list[StepRow]:
    """The timeline as typed rows; `acked` per step may be cumulative or only the new acks."""
    rows: list[StepRow] = []
    acked_so_far: set[str] = set()
    for position, entry in enumerate(_timeline(result)):
        states = entry.get("replicas")
        replicas = (
            {str(key): _replica_state(value) for key, value in states.items()}
            if isinstance(states, Mapping)
            else {}
        )
        acked_here = [str(value) for value in entry.get("acked") or entry.get("acks") or ()]
        newly_acked = tuple(value for value in acked_here if value not in acked_so_far)
        acked_so_far.update(acked_here)
        leader = entry.get("leader")
        outcome = entry.get("result", entry.get("results", entry.get("error")))
        step = _int_or_none(entry.get("step"))
        rows.append(
            StepRow(
                step=position if step is None else step,
                op=_text(entry.get("op", "")),
                replicas=replicas,
                leader=None if leader is None else str(leader),
                isr=_ids(entry.get("isr")),
                newly_acked=newly_acked,
                outcome=_text(outcome),
                time_ms=_int_or_none(entry.get("time_ms")),
                comment=_text(entry.get("comment")),
                changes=tuple(_text(change) for change in _list(entry.get("changes"))),
            )
        )
    return rows


def _violations(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    violations = result.get("violations") or []
    if not isinstance(violations, list):
        raise InputError("must be a list", field="violations", value=type(violations).__name__)
    return [
        violation if isinstance(violation, dict) else {"invariant": str(violation)}
        for violation in violations
    ]


def _violations_block(violations: Sequence[Mapping[str, Any]], prefix: str, none: str) -> str:
    """The table of invariant violations (ids start with ``prefix``), or ``none`` (HTML) when
    there are none."""
    if not violations:
        return none
    rows = "".join(
        '<tr class="violation">'
        f'<td class="text">{escape(_text(violation.get("invariant")))}</td>'
        f"<td>{escape(_text(violation.get('step')))}</td>"
        f'<td class="text">{escape(_text(violation.get("detail")))}</td></tr>'
        for violation in violations
    )
    return (
        f'<table id="{prefix}violations-table"><thead><tr><th>invariant</th><th>step</th>'
        '<th class="text">detail</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _replica_steps(
    steps: Sequence[int],
    values: Sequence[int | None],
    ops: Sequence[str],
    replica: str,
    *,
    name: str,
    label: str,
    **style: Any,
) -> go.Scatter:
    """One replica's value per step as a step line; the hover names the step's op and replica."""
    return go.Scatter(
        x=steps,
        y=values,
        customdata=ops,
        mode="lines+markers",
        name=f"replica {escape(replica)} {name}",
        legendgroup=f"replica {escape(replica)}",
        hovertemplate=(
            f"step %{{x}} (%{{customdata}}): {label} %{{y}}<extra>replica {escape(replica)}</extra>"
        ),
        **style,
    )


# the plot width labels are laid out for: narrower than the chart at 1280 px and wider, so
# labels that clear each other here clear each other on any larger screen too
LABEL_LAYOUT_PX = 700
LABEL_CHAR_PX = 7.5  # an upper bound on one character at the band's 11 px font
LABEL_GAP_PX = 10
BAND_LEVEL_PX = 22


@dataclass(frozen=True, slots=True)
class EventLabel:
    """One labelled marker of the events band: an acknowledgement or an invariant violation."""

    step: int
    text: str
    kind: str  # "acked", "lost" or "violation"
    level: int = 0
    # the label runs to the right of its marker, or to the left near the right edge
    side: str = "right"


def layout_labels(
    events: Sequence[EventLabel], first_step: int, last_step: int
) -> list[EventLabel]:
    """Give each label a level (a line of the band) and a side so that no two labels on one
    level overlap and none runs past the right edge: a label is as wide as its text at
    :data:`LABEL_LAYOUT_PX`, runs right of its step (left of it when it would pass the edge),
    and takes the lowest level where it overlaps nothing.

    >>> events = [EventLabel(1, "m1", "acked"), EventLabel(1, "m2", "acked"),
    ...           EventLabel(10, "m3", "lost")]
    >>> [(label.level, label.side) for label in layout_labels(events, 0, 10)]
    [(0, 'right'), (1, 'right'), (0, 'left')]
    """
    step_px = LABEL_LAYOUT_PX / max(last_step - first_step + 1, 1)
    levels: list[list[tuple[float, float]]] = []
    placed: list[EventLabel] = []
    for event in sorted(events, key=lambda event: (event.step, event.kind, event.text)):
        at = (event.step - first_step + 0.5) * step_px
        width = 12 + LABEL_CHAR_PX * len(event.text) + LABEL_GAP_PX
        side = "right" if at + width <= LABEL_LAYOUT_PX else "left"
        span = (at, at + width) if side == "right" else (at - width, at)
        level = next(
            (
                index
                for index, taken in enumerate(levels)
                if all(span[1] <= low or high <= span[0] for low, high in taken)
            ),
            len(levels),
        )
        if level == len(levels):
            levels.append([])
        levels[level].append(span)
        placed.append(EventLabel(event.step, event.text, event.kind, level, side))
    return placed


EVENT_STYLES = {
    "acked": ("acknowledged (acks=all)", "triangle-up", "#1b7f3b"),
    "lost": ("acknowledged, then lost", "triangle-up", "#b3261e"),
    "violation": ("invariant violated (also a dotted line)", "x", "#b3261e"),
}
# what the markers of the ISR panel mean, shown in the legend
ISR_KEY = (
    ("in the ISR (filled)", "circle", "#555555", "#555555"),
    ("not in the ISR (hollow)", "circle", "#ffffff", "#555555"),
    ("leader (star)", "star", "#555555", "#555555"),
    ("offline (red outline)", "circle", "#ffffff", "#b3261e"),
)


def _events(
    rows: Sequence[StepRow], acked_lost: frozenset[str], violations: Sequence[Mapping[str, Any]]
) -> list[EventLabel]:
    events = [
        EventLabel(row.step, record, "lost" if record in acked_lost else "acked")
        for row in rows
        for record in row.newly_acked
    ]
    by_step: dict[int, list[str]] = {}
    for violation in violations:
        step = _int_or_none(violation.get("step"))
        if step is None:
            continue
        names = by_step.setdefault(step, [])
        name = _text(violation.get("invariant", "violation"))
        if name not in names:
            names.append(name)
    events += [EventLabel(step, ", ".join(names), "violation") for step, names in by_step.items()]
    return events


def timeline_figure(
    rows: Sequence[StepRow],
    replicas: Sequence[str],
    acked_lost: frozenset[str],
    violations: Sequence[Mapping[str, Any]],
) -> go.Figure:
    """Four panels over steps: the events (acknowledgements and violations, each labelled, the
    labels laid out by :func:`layout_labels` so none overlaps another), LEO and HW per replica,
    leader epoch, ISR and leader. Every kind of marker has a legend entry."""
    steps = [row.step for row in rows]
    first_step, last_step = (min(steps), max(steps)) if steps else (0, 0)
    events = layout_labels(_events(rows, acked_lost, violations), first_step, last_step)
    levels = max((event.level for event in events), default=0) + 1
    band_px = 30 + BAND_LEVEL_PX * levels
    height = 760 + band_px
    figure = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        row_heights=[band_px / height, 0.5, 0.22, 0.22],
        subplot_titles=(
            "events: acknowledgements and invariant violations",
            "log end offset (solid) and high watermark (dashed), in offsets",
            "leader epoch per replica",
            "ISR membership and leader",
        ),
    )
    ops = [escape(row.op) for row in rows]
    for index, replica in enumerate(replicas):
        colour = _colour(index)
        states = [row.replicas.get(replica) for row in rows]
        for attribute, dash, label in (("leo", "solid", "LEO"), ("hw", "dash", "HW")):
            values = [getattr(state, attribute) if state else None for state in states]
            figure.add_trace(
                _replica_steps(
                    steps,
                    values,
                    ops,
                    replica,
                    name=label,
                    label=label,
                    line={"color": colour, "dash": dash, "shape": "hv"},
                    marker={"size": 5},
                ),
                row=2,
                col=1,
            )
        # a replica without a known epoch (offline) reports a negative one: draw a gap instead
        epochs = [
            state.leader_epoch
            if state and state.leader_epoch is not None and state.leader_epoch >= 0
            else None
            for state in states
        ]
        figure.add_trace(
            _replica_steps(
                steps,
                epochs,
                ops,
                replica,
                name="epoch",
                label="leader epoch",
                line={"color": colour, "shape": "hv"},
                showlegend=False,
            ),
            row=3,
            col=1,
        )
        in_isr = [row.isr is not None and replica in row.isr for row in rows]
        offline = [bool(state and state.online is False) for state in states]
        figure.add_trace(
            go.Scatter(
                x=steps,
                y=[escape(f"replica {replica}")] * len(rows),
                customdata=ops,
                mode="markers",
                name=f"replica {escape(replica)} ISR",
                legendgroup=f"replica {escape(replica)}",
                showlegend=False,
                marker={
                    "color": [colour if member else "#ffffff" for member in in_isr],
                    "line": {
                        "color": ["#b3261e" if down else colour for down in offline],
                        "width": 2,
                    },
                    "size": 11,
                    "symbol": ["star" if row.leader == replica else "circle" for row in rows],
                },
                hovertext=[
                    f"step {row.step} ({escape(row.op)}): "
                    + ("in ISR" if member else "not in ISR")
                    + (", leader" if row.leader == replica else "")
                    + (", offline" if down else "")
                    for row, member, down in zip(rows, in_isr, offline, strict=True)
                ],
                hoverinfo="text",
            ),
            row=4,
            col=1,
        )
    for name, symbol, fill, outline in ISR_KEY:
        # legend entries only: no point is drawn (x and y are empty)
        figure.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=name,
                legendgroup="key",
                legendgrouptitle_text="ISR panel",
                marker={"symbol": symbol, "color": fill, "size": 11,
                        "line": {"color": outline, "width": 2}},
                hoverinfo="skip",
            ),
            row=4,
            col=1,
        )  # fmt: skip
    for kind, (name, symbol, colour) in EVENT_STYLES.items():
        own = [event for event in events if event.kind == kind]
        if not own:
            continue
        figure.add_trace(
            go.Scatter(
                x=[event.step for event in own],
                y=[-event.level for event in own],
                mode="markers+text",
                name=name,
                legendgroup="events",
                legendgrouptitle_text="events",
                text=[escape(event.text) for event in own],
                textposition=[f"middle {event.side}" for event in own],
                textfont={"size": 11, "color": colour},
                cliponaxis=False,
                marker={"symbol": symbol, "size": 10, "color": colour},
                hovertemplate=f"{escape(name)} at step %{{x}}: %{{text}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        if kind in ("acked", "lost"):
            # the same acknowledgements at the HW level they reached, unlabelled
            level_of = {
                row.step: max(
                    (state.hw for state in row.replicas.values() if state.hw is not None),
                    default=0,
                )
                for row in rows
            }
            figure.add_trace(
                go.Scatter(
                    x=[event.step for event in own],
                    y=[level_of.get(event.step, 0) for event in own],
                    mode="markers",
                    name=name,
                    legendgroup="events",
                    showlegend=False,
                    text=[escape(event.text) for event in own],
                    marker={"symbol": symbol, "size": 12, "color": colour},
                    hovertemplate=f"{escape(name)} at step %{{x}}: %{{text}}<extra></extra>",
                ),
                row=2,
                col=1,
            )
    for event in events:
        if event.kind == "violation":
            figure.add_vline(x=event.step, line={"color": "#b3261e", "width": 1.5, "dash": "dot"})
    highest_offset = max(
        (
            value
            for row in rows
            for state in row.replicas.values()
            for value in (state.leo, state.hw)
            if value is not None
        ),
        default=0,
    )
    if highest_offset <= 20:
        figure.update_yaxes(dtick=1, row=2, col=1)
    figure.update_yaxes(visible=False, range=[-levels + 0.4, 0.6], fixedrange=True, row=1, col=1)
    figure.update_xaxes(title_text="scenario step", dtick=1, row=4, col=1)
    figure.update_yaxes(title_text="offset", rangemode="tozero", row=2, col=1)
    figure.update_yaxes(title_text="epoch", rangemode="tozero", dtick=1, row=3, col=1)
    figure.update_yaxes(title_text="replica", row=4, col=1)
    figure.update_layout(
        height=height,
        margin={"t": 60, "l": 80, "r": 20, "b": 50},
        hovermode="closest",
        legend={"title": {"text": "replicas and markers"}, "groupclick": "toggleitem"},
    )
    return figure


def _verdict_section(
    result: Mapping[str, Any], violations: Sequence[Mapping[str, Any]], prefix: str = ""
) -> str:
    """The outcome and violation tables; ``prefix`` starts every element id (one partition's
    section of a several-partition page)."""
    acked = [str(value) for value in result.get("acked") or ()]
    lost = [str(value) for value in result.get("acked_lost") or ()]
    diverged = result.get("diverged")
    facts = [
        ("mode", _text(result.get("mode"))),
        *([("controller", _text(result["controller"]))] if "controller" in result else []),
        ("leader", _text(result.get("leader"))),
        ("leader epoch", _text(result.get("leader_epoch"))),
        ("ISR", ", ".join(_ids(result.get("isr")) or ())),
        ("high watermark", _text(result.get("hw"))),
        ("acknowledged", ", ".join(acked) or "none"),
    ]
    if "elr" in result:
        facts.append(("ELR (eligible leader replicas)", ", ".join(_ids(result["elr"]) or ())))
    if "unclean_elections" in result:
        facts.append(("unclean elections", _text(result["unclean_elections"])))
    results = result.get("results")
    if isinstance(results, Mapping) and results:
        facts.append(
            (
                "produce results",
                ", ".join(f"{record}: {_text(outcome)}" for record, outcome in results.items()),
            )
        )
    cells = "".join(
        f'<tr><td>{escape(label)}</td><td class="text mono">{escape(value)}</td></tr>'
        for label, value in facts
    )
    lost_cell = (
        f'<span class="lost">{escape(", ".join(lost))} (acknowledged, then lost)</span>'
        if lost
        else '<span class="ok">none</span>'
    )
    diverged_cell = (
        '<span class="bad">yes: replica logs differ below the high watermark</span>'
        if diverged
        else '<span class="ok">no</span>'
    )
    consumed = result.get("consumed") or {}
    consumed_cells = ""
    if isinstance(consumed, Mapping):
        consumed_cells = "".join(
            f"<tr><td>consumer {escape(name)} read</td>"
            f'<td class="text mono">{escape(", ".join(str(v) for v in values or ()))}</td></tr>'
            for name, values in sorted(consumed.items(), key=lambda item: str(item[0]))
        )
    violations_block = _violations_block(
        violations,
        prefix,
        f'<p class="ok" id="{prefix}no-violations">No invariant was violated.</p>',
    )
    return (
        f'<section id="{prefix}verdict"><h2>Outcome</h2>'
        f'<table id="{prefix}outcome-table"><tbody>{cells}'
        f'<tr><td>acknowledged and lost</td><td class="text">{lost_cell}</td></tr>'
        f'<tr><td>diverged</td><td class="text">{diverged_cell}</td></tr>'
        f"{consumed_cells}{_expect_rows(result)}</tbody></table>"
        f"<h2>Invariant violations ({len(violations)})</h2>{violations_block}</section>"
    )


def _expect_rows(result: Mapping[str, Any]) -> str:
    failures = result.get("expect_failures")
    if not isinstance(failures, list):
        return ""
    if not failures:
        checked = result.get("expectations_checked")
        if checked == 0:
            return (
                '<tr><td>expectations</td><td class="text" id="expectations">no expectations '
                "for this mode</td></tr>"
            )
        if not _is_int(checked):
            return ""  # an older result: whether any expect step applied is unknown
        return (
            '<tr><td>expectations</td><td class="text" id="expectations">'
            '<span class="ok">all held</span></td></tr>'
        )
    items = "<br>".join(escape(_text(failure)) for failure in failures)
    return (
        '<tr><td>failed expectations</td><td class="text">'
        f'<span class="bad">{items}</span></td></tr>'
    )


def _steps_table(
    rows: Sequence[StepRow],
    replicas: Sequence[str],
    acked_lost: frozenset[str],
    violation_steps: frozenset[int],
    prefix: str = "",
) -> str:
    replica_headers = "".join(
        f"<th>replica {escape(replica)}<br>LEO / HW / epoch</th>" for replica in replicas
    )
    # simulated time only says something once a step advanced the clock
    with_time = any(row.time_ms for row in rows)
    body: list[str] = []
    previous_isr: tuple[str, ...] | None = None
    for row in rows:
        isr_changed = row.isr is not None and previous_isr is not None and row.isr != previous_isr
        previous_isr = row.isr if row.isr is not None else previous_isr
        css = (
            ' class="violation"'
            if row.step in violation_steps
            else (' class="marked"' if isr_changed else "")
        )
        replica_cells = []
        for replica in replicas:
            state = row.replicas.get(replica)
            if state is None:
                replica_cells.append("<td>—</td>")
                continue
            numbers = " / ".join(
                "—" if value is None else str(value)
                for value in (state.leo, state.hw, state.leader_epoch)
            )
            suffix = " (offline)" if state.online is False else ""
            replica_cells.append(f"<td>{escape(numbers + suffix)}</td>")
        acks = ", ".join(
            f'<span class="{"lost" if record in acked_lost else "acked"}">{escape(record)}</span>'
            for record in row.newly_acked
        )
        isr_text = "—" if row.isr is None else "{" + ", ".join(row.isr) + "}"
        if isr_changed:
            isr_text += " (changed)"
        body.append(
            f"<tr{css}><td>{row.step}</td>"
            + (f"<td>{format_number(row.time_ms)}</td>" if with_time else "")
            + f'<td class="text"><span class="mono">{escape(row.op)}</span>'
            + (f'<div class="comment"># {escape(row.comment)}</div>' if row.comment else "")
            + f"</td>{''.join(replica_cells)}<td>{escape(row.leader or '—')}</td>"
            f'<td class="text">{escape(isr_text)}</td><td class="text">{acks}</td>'
            f'<td class="text">{escape(row.outcome)}</td>'
            f'<td class="text why">{"".join(f"<div>{escape(c)}</div>" for c in row.changes)}'
            "</td></tr>"
        )
    return (
        f'<div class="table-wrap"><table id="{prefix}steps-table"><thead><tr><th>step</th>'
        + ("<th>time (ms)</th>" if with_time else "")
        + '<th class="text">operation</th>'
        f'{replica_headers}<th>leader</th><th class="text">ISR</th>'
        '<th class="text">acknowledged</th><th class="text">result</th>'
        '<th class="text" title="each rule that changed a value in this step, as the simulator '
        'applied it">why (the rule that fired)</th>'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _logs_section(result: Mapping[str, Any], acked_lost: frozenset[str], prefix: str = "") -> str:
    replicas = result.get("replicas")
    if not isinstance(replicas, Mapping) or not replicas:
        return ""
    acked = frozenset(str(value) for value in result.get("acked") or ())
    rows = []
    by_id = {str(key): state for key, state in replicas.items()}
    for replica in by_id:
        state = by_id[replica]
        if not isinstance(state, Mapping):
            continue
        entries = []
        for record in state.get("log") or ():
            if not isinstance(record, list | tuple) or len(record) < 3:
                entries.append(f'<td class="mono">{escape(_text(record))}</td>')
                continue
            offset, epoch, value = record[0], record[1], str(record[2])
            css = "lost" if value in acked_lost else ("acked" if value in acked else "")
            entries.append(
                f'<td class="mono {css}">[{escape(_text(offset))}:{escape(_text(epoch))} '
                f"{escape(value)}]</td>"
            )
        summary = _replica_state(state)
        status = "online" if summary.online is not False else "offline"
        rows.append(
            f"<tr><td>replica {escape(replica)}</td><td>{escape(_text(summary.leo))}</td>"
            f"<td>{escape(_text(summary.hw))}</td><td>{escape(status)}</td>{''.join(entries)}</tr>"
        )
    return (
        f'<section id="{prefix}logs"><h2>Final replica logs</h2><p class="note">Each record as '
        "[offset:epoch value]; green: acknowledged, red: acknowledged and missing from the "
        "leader's log in the end.</p>"
        f'<div class="table-wrap"><table id="{prefix}logs-table"><thead><tr><th>replica</th>'
        "<th>LEO</th>"
        f"<th>HW</th><th>state</th><th>log</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        "</table></div></section>"
    )


def render_replication(result: dict[str, Any]) -> str:
    """The page for one replication result (the dict `ktk replicate --json` prints). A result of
    several partitions (its `partitions` list) gets :func:`_partitions_page`."""
    result = check_replication_result(result)
    partitions = [entry for entry in result.get("partitions") or () if isinstance(entry, dict)]
    if len(partitions) > 1:
        return _partitions_page(result, partitions)
    rows = timeline_rows(result)
    replicas = replica_ids(result)
    acked_lost = frozenset(str(value) for value in result.get("acked_lost") or ())
    violations = _violations(result)
    violation_steps = _violation_steps(violations)
    sections = [_verdict_section(result, violations)]
    if rows:
        divs = figure_divs(
            [("replication-chart", timeline_figure(rows, replicas, acked_lost, violations))]
        )
        sections.append(_timeline_section(divs["replication-chart"]))
        sections.append(
            '<section id="steps"><h2>Steps</h2><p class="note">Orange rows change the ISR; '
            "red rows violate an invariant.</p>"
            f"{_steps_table(rows, replicas, acked_lost, violation_steps)}</section>"
        )
    else:
        sections.append(
            '<section id="timeline"><h2>Replicas over the scenario</h2>'
            '<p class="note">This result has no timeline.</p></section>'
        )
    sections.append(_logs_section(result, acked_lost))
    sections += _quorum_sections(result)
    name = _text(result.get("name")) or "replication scenario"
    subtitle = (
        f"mode {_text(result.get('mode')) or '?'}, {len(rows)} steps, {len(replicas)} replicas"
    )
    if note := description_note(result):
        sections.insert(0, note)
    # document() puts ktk's generator tag into <head>, so `--html` may replace the page later
    return document(f"Replication: {name}", subtitle, "\n".join(sections))


def _violation_steps(violations: Sequence[Mapping[str, Any]]) -> frozenset[int]:
    return frozenset(
        step for step in (_int_or_none(v.get("step")) for v in violations) if step is not None
    )


def _timeline_section(chart: str, prefix: str = "") -> str:
    return (
        f'<section id="{prefix}timeline"><h2>Replicas over the scenario</h2><p class="note">One '
        "point per scenario step. The top band names each acks=all acknowledgement at the "
        "step it arrived (red: the record was lost later) and each invariant violation "
        "(also a dotted red line across the panels); the legend says what every marker "
        f"means.</p>{chart}</section>"
    )


# ------------------------------------------------------------------ several partitions


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition of a several-partition result: its number, its document and its rows."""

    number: int
    document: Mapping[str, Any]
    rows: list[StepRow]
    replicas: list[str]

    @property
    def prefix(self) -> str:
        """The start of every element id of this partition's section."""
        return f"partition-{self.number}-"

    @property
    def label(self) -> str:
        return f"partition {self.number}"


def partition_views(result: Mapping[str, Any]) -> list[PartitionView]:
    """Each partition of a result's `partitions` list, numbered by its `partition` field (its
    position when that is missing), with its timeline as typed rows.

    >>> views = partition_views({"partitions": [
    ...     {"partition": 0, "timeline": [{"step": 0, "leader": 1, "isr": [1, 2]}]},
    ...     {"partition": 1, "timeline": [{"step": 0, "leader": 2, "isr": [2]}]}]})
    >>> [(view.label, view.rows[0].leader, view.rows[0].isr) for view in views]
    [('partition 0', '1', ('1', '2')), ('partition 1', '2', ('2',))]
    """
    views = []
    for position, entry in enumerate(result.get("partitions") or ()):
        if not isinstance(entry, Mapping):
            continue
        number = _int_or_none(entry.get("partition"))
        views.append(
            PartitionView(
                number=position if number is None else number,
                document=entry,
                rows=timeline_rows(entry),
                replicas=replica_ids(entry),
            )
        )
    return views


# what a partition's marker in the combined leader/ISR view means
PARTITION_STATES = {
    "full": ("every replica in the ISR", "circle", "#1b7f3b"),
    "shrunk": ("ISR shrunk (some replica out)", "diamond", "#c76e00"),
    "leaderless": ("no leader", "x", "#b3261e"),
}


def _partition_state(row: StepRow, replicas: Sequence[str]) -> str:
    if row.leader is None or row.leader in ("-1", ""):
        return "leaderless"
    if row.isr is not None and set(replicas) <= set(row.isr):
        return "full"
    return "shrunk"


def partitions_figure(
    views: Sequence[PartitionView], violations: Sequence[Mapping[str, Any]]
) -> go.Figure:
    """One row per partition over the scenario's steps: a marker per step labelled with the
    leader, its shape and colour saying whether the ISR holds every replica, is shrunk, or the
    partition has no leader; each invariant violation a dotted line across every row. A broker
    failure shows as the same step changing every row it touches."""
    figure = go.Figure()
    labels = [escape(view.label) for view in views]
    for state, (name, symbol, colour) in PARTITION_STATES.items():
        xs: list[int] = []
        ys: list[str] = []
        texts: list[str] = []
        hovers: list[str] = []
        for view, label in zip(views, labels, strict=True):
            for row in view.rows:
                if _partition_state(row, view.replicas) != state:
                    continue
                xs.append(row.step)
                ys.append(label)
                texts.append(escape(row.leader or ""))
                isr = "—" if row.isr is None else "{" + ", ".join(row.isr) + "}"
                hovers.append(
                    f"{label}, step {row.step} ({escape(row.op)}): leader "
                    f"{escape(row.leader or '—')}, ISR {escape(isr)}"
                )
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers+text",
                name=name,
                text=texts,
                textposition="top center",
                textfont={"size": 10},
                cliponaxis=False,
                marker={"symbol": symbol, "size": 12, "color": colour},
                hovertext=hovers,
                hoverinfo="text",
            )
        )
    for step in sorted(_violation_steps(violations)):
        figure.add_vline(x=step, line={"color": "#b3261e", "width": 1.5, "dash": "dot"})
    steps = [row.step for view in views for row in view.rows]
    if steps:
        figure.update_xaxes(range=[min(steps) - 0.5, max(steps) + 0.5])
    figure.update_xaxes(title_text="scenario step", dtick=1)
    figure.update_yaxes(
        title_text="partition",
        type="category",
        categoryorder="array",
        categoryarray=list(reversed(labels)),
    )
    figure.update_layout(
        height=160 + 46 * len(views),
        margin={"t": 30, "l": 110, "r": 20, "b": 50},
        hovermode="closest",
        legend={"title": {"text": "leader (label) and ISR"}},
    )
    return figure


def _partitions_table(views: Sequence[PartitionView]) -> str:
    """One row per partition: its final state and its verdict, each linking to its section."""
    rows = []
    for view in views:
        doc = view.document
        lost = [str(value) for value in doc.get("acked_lost") or ()]
        own = _violations(doc)
        lost_cell = (
            f'<span class="lost">{escape(", ".join(lost))}</span>'
            if lost
            else '<span class="ok">none</span>'
        )
        diverged_cell = '<span class="bad">yes</span>' if doc.get("diverged") else "no"
        violated = (
            f'<span class="bad">{escape(", ".join(_violation_names(own)))}</span>'
            if own
            else '<span class="ok">none</span>'
        )
        verdict = (
            '<span class="bad">unsafe</span>'
            if lost or own or doc.get("diverged")
            else '<span class="ok">safe</span>'
        )
        css = ' class="violation"' if own else ""
        rows.append(
            f'<tr id="{view.prefix}summary"{css}>'
            f'<td><a href="#{view.prefix}section">{escape(view.label)}</a></td>'
            f"<td>{verdict}</td><td>{escape(_text(doc.get('leader')))}</td>"
            f"<td>{escape(_text(doc.get('leader_epoch')))}</td>"
            f'<td class="text">{escape(", ".join(_ids(doc.get("isr")) or ()))}</td>'
            f"<td>{escape(_text(doc.get('hw')))}</td>"
            f'<td class="text">{escape(", ".join(str(v) for v in doc.get("acked") or ()))}</td>'
            f'<td class="text">{lost_cell}</td><td>{diverged_cell}</td>'
            f'<td class="text">{violated}</td></tr>'
        )
    return (
        '<div class="table-wrap"><table id="partitions-table"><thead><tr><th>partition</th>'
        '<th>verdict</th><th>leader</th><th>leader epoch</th><th class="text">ISR</th>'
        '<th>high watermark</th><th class="text">acknowledged</th>'
        '<th class="text">acknowledged and lost</th><th>diverged</th>'
        f'<th class="text">invariants violated</th></tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table></div>"
    )


def _violation_names(violations: Sequence[Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for violation in violations:
        name = _text(violation.get("invariant"))
        if name not in names:
            names.append(name)
    return names


def _combined_steps_table(views: Sequence[PartitionView], violation_steps: frozenset[int]) -> str:
    """One row per step, one leader / ISR cell per partition; a cell whose leader or ISR
    changed at that step is marked, so a broker-wide step shows across every partition."""
    by_step: dict[int, dict[int, StepRow]] = {}
    ops: dict[int, str] = {}
    for index, view in enumerate(views):
        for row in view.rows:
            by_step.setdefault(row.step, {})[index] = row
            ops.setdefault(row.step, row.op)
    previous: dict[int, tuple[str | None, tuple[str, ...] | None]] = {}
    body = []
    for step in sorted(by_step):
        cells = []
        changed_here = False
        for index in range(len(views)):
            here = by_step[step].get(index)
            if here is None:
                cells.append("<td>—</td>")
                continue
            now = (here.leader, here.isr)
            changed = index in previous and previous[index] != now
            previous[index] = now
            changed_here |= changed
            isr = "—" if here.isr is None else "{" + ", ".join(here.isr) + "}"
            text = f"{escape(here.leader or '—')} / {escape(isr)}"
            cells.append(
                f'<td class="text changed"><b>{text}</b></td>'
                if changed
                else f'<td class="text">{text}</td>'
            )
        css = (
            ' class="violation"'
            if step in violation_steps
            else (' class="marked"' if changed_here else "")
        )
        body.append(
            f'<tr{css}><td>{step}</td><td class="text mono">{escape(ops[step])}</td>'
            f"{''.join(cells)}</tr>"
        )
    headers = "".join(
        f'<th class="text">{escape(view.label)}<br>leader / ISR</th>' for view in views
    )
    return (
        '<div class="table-wrap"><table id="partition-steps-table"><thead><tr><th>step</th>'
        f'<th class="text">operation</th>{headers}</tr></thead><tbody>{"".join(body)}</tbody>'
        "</table></div>"
    )


def _overall_section(result: Mapping[str, Any], violations: Sequence[Mapping[str, Any]]) -> str:
    facts = [("mode", _text(result.get("mode"))), ("controller", _text(result.get("controller")))]
    cells = "".join(
        f'<tr><td>{escape(label)}</td><td class="text mono">{escape(value)}</td></tr>'
        for label, value in facts
    )
    violations_block = _violations_block(
        violations,
        "",
        '<p class="ok" id="no-violations">No invariant was violated on any partition.</p>',
    )
    return (
        '<section id="verdict"><h2>Outcome</h2>'
        f'<table id="outcome-table"><tbody>{cells}{_expect_rows(result)}</tbody></table>'
        f"<h2>Every partition</h2>{_partitions_table(partition_views(result))}"
        f"<h2>Invariant violations, every partition ({len(violations)})</h2>"
        f"{violations_block}</section>"
    )


def _partition_section(view: PartitionView, mode: object, chart: str | None) -> str:
    doc = {**view.document, "mode": mode}
    acked_lost = frozenset(str(value) for value in doc.get("acked_lost") or ())
    violations = _violations(doc)
    parts = [
        f'<section id="{view.prefix}section" class="partition">'
        f"<h2>{escape(view.label.capitalize())}</h2>",
        _verdict_section(doc, violations, view.prefix),
    ]
    if chart is not None:
        parts.append(_timeline_section(chart, view.prefix))
        parts.append(
            f'<section id="{view.prefix}steps"><h2>Steps</h2><p class="note">Orange rows change '
            "the ISR; red rows violate an invariant.</p>"
            + _steps_table(
                view.rows, view.replicas, acked_lost, _violation_steps(violations), view.prefix
            )
            + "</section>"
        )
    parts.append(_logs_section(doc, acked_lost, view.prefix))
    parts.append("</section>")
    return "".join(parts)


def _partitions_page(result: Mapping[str, Any], partitions: Sequence[Mapping[str, Any]]) -> str:
    """The page of a several-partition result: the verdict of every partition in one table,
    every partition's leader and ISR over the steps in one chart and one table (a broker-wide
    step is visible across all partitions at once), then each partition's own section: outcome,
    timeline chart, steps and final logs, as the one-partition page shows them."""
    views = partition_views(result)
    violations = _violations(result)
    violation_steps = _violation_steps(violations)
    figures: list[tuple[str, go.Figure]] = [
        ("partitions-chart", partitions_figure(views, violations))
    ]
    for view in views:
        if view.rows:
            own = _violations(view.document)
            acked_lost = frozenset(str(v) for v in view.document.get("acked_lost") or ())
            figures.append(
                (
                    f"{view.prefix}chart",
                    timeline_figure(view.rows, view.replicas, acked_lost, own),
                )
            )
    divs = figure_divs(figures)
    links = " · ".join(
        f'<a href="#{view.prefix}section">{escape(view.label)}</a>' for view in views
    )
    sections = [
        _overall_section(result, violations),
        '<section id="partitions"><h2>Leaders and ISRs of every partition</h2>'
        '<p class="note">One row per partition, one marker per step, labelled with the leader; '
        "a step that changes several rows at once is a broker-wide event (a crash, a fenced "
        "broker, an election). Dotted red lines: invariant violations.</p>"
        f"{divs['partitions-chart']}"
        '<h2>Leader / ISR per step</h2><p class="note">Bold cells changed at that step; orange '
        "rows change some partition's leader or ISR; red rows violate an invariant.</p>"
        f"{_combined_steps_table(views, violation_steps)}"
        f'<p class="note" id="partition-links">Each partition in detail: {links}</p></section>',
    ]
    sections += [
        _partition_section(view, result.get("mode"), divs.get(f"{view.prefix}chart"))
        for view in views
    ]
    sections += _quorum_sections(result)
    if note := description_note(result):
        sections.insert(0, note)
    name = _text(result.get("name")) or "replication scenario"
    steps = len({row.step for view in views for row in view.rows})
    brokers = len({replica for view in views for replica in view.replicas})
    subtitle = (
        f"mode {_text(result.get('mode')) or '?'}, {len(views)} partitions, {steps} steps, "
        f"{brokers} brokers"
    )
    return document(f"Replication: {name}", subtitle, "\n".join(sections))


def _quorum_sections(result: Mapping[str, Any]) -> list[str]:
    """With the KRaft controller: the controller quorum after every step (the quorum page's
    timeline table); none for the built-in controller."""
    quorum = result.get("quorum")
    if not isinstance(quorum, dict):
        return []
    return [
        quorum_timeline_section(
            quorum,
            title="Controller quorum",
            section_id="controller-quorum",
            note="The KRaft controller quorum after each step: each voter's role and epoch, "
            "log start..end, high watermark; what changed, and the metadata records the "
            "active controller committed in the step. Green: the active controller.",
        )
    ]


def write_replication_page(result: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render `result` and write it to `path` atomically; returns the path written."""
    return write_atomically(path, render_replication(result))
