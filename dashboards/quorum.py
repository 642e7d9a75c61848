"""The page of a KRaft quorum scenario (the document ``ktk replicate FILE --json`` prints for a
file with a top-level ``quorum``): the verdict, the high watermark and epoch of every node
over the steps, and the quorum timeline (role, epoch, log end, HW and snapshot of each node,
what changed, every message delivered).

>>> page = render_quorum({"kind": "quorum", "name": "q", "nodes": {"1": "controller"},
...     "voters": [1], "timeline": [], "violations": [], "expect_failures": [],
...     "invariants": ["ElectionSafety"],
...     "final": {"leader": None, "epoch": 0, "voters": None, "committed": 0, "nodes": {}}})
>>> 'id="quorum-timeline"' in page and "Quorum: q" in page
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboards.page import PALETTE, description_note, document, escape, figure_divs

__all__ = ["quorum_timeline_section", "render_quorum", "render_zookeeper"]

ROLE_COLOURS = {
    "leader": "#d3f2dc",
    "follower": "#ffffff",
    "candidate": "#fff4e0",
    "prospective": "#fdf7d9",
    "unattached": "#f0f2f5",
    "down": "#e6e6e6",
}


def _cell(view: Mapping[str, Any]) -> str:
    role = str(view.get("role", "?"))
    text = (
        f"{escape(role)} e{escape(view.get('epoch'))}<br>log {escape(view.get('log_start'))}.."
        f"{escape(view.get('end_offset'))} HW {escape(view.get('hw'))}"
    )
    if view.get("snapshot"):
        text += f"<br>snapshot {escape(view['snapshot'])}"
    if view.get("voted_for") is not None:
        text += f"<br>voted {escape(view['voted_for'])}"
    colour = ROLE_COLOURS.get(role, "#ffffff")
    return f'<td style="background:{colour}">{text}</td>'


def _figure(timeline: Sequence[Mapping[str, Any]], node_ids: Sequence[str]) -> go.Figure:
    figure = go.Figure()
    steps = [entry["step"] for entry in timeline]
    for position, node_id in enumerate(node_ids):
        colour = PALETTE[position % len(PALETTE)]
        views = [entry["nodes"][node_id] for entry in timeline]
        figure.add_trace(
            go.Scatter(
                x=steps,
                y=[v["hw"] if v["up"] else None for v in views],
                name=f"node {node_id} HW",
                mode="lines+markers",
                line={"color": colour, "shape": "hv"},
            )
        )
        figure.add_trace(
            go.Scatter(
                x=steps,
                y=[v["epoch"] for v in views],
                name=f"node {node_id} epoch",
                mode="lines",
                line={"color": colour, "dash": "dot", "shape": "hv"},
                yaxis="y2",
            )
        )
    figure.update_layout(
        height=360,
        margin={"l": 50, "r": 50, "t": 20, "b": 40},
        xaxis={"title": "step"},
        yaxis={"title": "high watermark", "rangemode": "tozero"},
        yaxis2={"title": "epoch", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h"},
    )
    return figure


def render_quorum(result: dict[str, Any]) -> str:
    """The page for one quorum scenario result."""
    node_ids = list(result["nodes"])
    timeline = result["timeline"]
    final = result["final"]
    violations = result["violations"]
    failures = result["expect_failures"]
    verdict = [
        f"<p>Leader at the end: <b>{escape(final['leader'])}</b>, epoch {escape(final['epoch'])}"
        f", voters {escape(final['voters'])}, committed offsets {escape(final['committed'])}.</p>"
    ]
    if violations:
        verdict.append("<ul>")
        verdict += [
            f'<li class="bad">{escape(v["invariant"])} at step {escape(v["step"])}: '
            f"{escape(v['detail'])}</li>"
            for v in violations
        ]
        verdict.append("</ul>")
    else:
        verdict.append(
            f'<p class="ok">Invariants {escape(", ".join(result["invariants"]))}: all held '
            "after every step.</p>"
        )
    verdict += [f'<p class="bad">expect failed: {escape(f)}</p>' for f in failures]
    sections = [f'<section id="quorum-verdict"><h2>Quorum verdict</h2>{"".join(verdict)}</section>']
    if timeline:
        divs = figure_divs([("quorum-chart", _figure(timeline, node_ids))])
        sections.append(
            '<section id="quorum-chart-section"><h2>High watermark and epoch per node</h2>'
            '<p class="note">Solid: HW (gaps while a node is down); dotted: epoch.</p>'
            f"{divs['quorum-chart']}</section>"
        )
    sections.append(
        quorum_timeline_section(
            result,
            note="Each node after each step: role and epoch, log start..end, high watermark, "
            "newest snapshot (end offset-epoch), vote. Green: leader.",
        )
    )
    if note := description_note(result):
        sections.insert(0, note)
    subtitle = f"KRaft quorum, voters {result['voters']}, {len(timeline)} steps"
    return document(f"Quorum: {result['name']}", subtitle, "\n".join(sections))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _texts(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def quorum_timeline_section(
    result: Mapping[str, Any],
    *,
    title: str = "Quorum timeline",
    section_id: str = "quorum-timeline",
    note: str = "",
) -> str:
    """The quorum timeline table (one row per step, one column per node, what changed and the
    messages delivered) of a quorum document: a quorum scenario's result, or the ``quorum``
    of a data-plane result run with the KRaft controller. Every value is escaped; a missing
    field shows empty.

    >>> html = quorum_timeline_section({"nodes": {"1": "controller"}, "timeline": [{"step": 0,
    ...     "op": "<b>", "nodes": {"1": {"role": "leader", "epoch": 2}}, "changes": []}]})
    >>> "&lt;b&gt;" in html and "leader e2" in html
    True
    """
    nodes = _mapping(result.get("nodes"))
    node_ids = list(nodes)
    head = "".join(
        f"<th>{'broker' if nodes[n] == 'broker' else 'controller'} {escape(n)}</th>"
        for n in node_ids
    )
    rows = []
    for entry in _texts(result.get("timeline")):
        if not isinstance(entry, Mapping):
            continue
        op = escape(entry.get("op"))
        if entry.get("note"):
            op += f" ({escape(entry['note'])})"
        if entry.get("comment"):
            op += f"<br><i>{escape(entry['comment'])}</i>"
        views = _mapping(entry.get("nodes"))
        cells = "".join(_cell(_mapping(views.get(n))) for n in node_ids)
        what = "<br>".join(escape(c) for c in _texts(entry.get("changes")))
        violations = [_mapping(v) for v in _texts(entry.get("violations"))]
        what += "".join(
            f'<br><span class="bad">{escape(v.get("invariant"))}: {escape(v.get("detail"))}</span>'
            for v in violations
        )
        messages = _texts(entry.get("messages"))
        if messages:
            listed = "<br>".join(escape(m) for m in messages)
            what += (
                f"<details><summary>{len(messages)} messages</summary>"
                f'<span class="mono">{listed}</span></details>'
            )
        marked = ' class="violation"' if violations else ""
        rows.append(
            f'<tr{marked}><td>{escape(entry.get("step"))}</td><td class="text">{op}</td>{cells}'
            f'<td class="text">{what}</td></tr>'
        )
    shown_note = f'<p class="note">{escape(note)}</p>' if note else ""
    return (
        f'<section id="{escape(section_id)}"><h2>{escape(title)}</h2>{shown_note}'
        '<div class="table-wrap"><table><tr><th>step</th><th class="text">op</th>'
        f'{head}<th class="text">what happened</th></tr>{"".join(rows)}</table></div>'
        "</section>"
    )


def render_zookeeper(result: dict[str, Any]) -> str:
    """The page for one ZooKeeper-era controller scenario result."""
    brokers = [str(b) for b in result["brokers"]]
    violations = result["violations"]
    verdict = "".join(
        f'<li class="bad">{escape(v["invariant"])} at step {escape(v["step"])}: '
        f"{escape(v['detail'])}</li>"
        for v in violations
    )
    verdict = f"<ul>{verdict}</ul>" if verdict else '<p class="ok">No invariant broke.</p>'
    verdict += "".join(
        f'<p class="bad">expect failed: {escape(f)}</p>' for f in result["expect_failures"]
    )
    head = "".join(f"<th>broker {escape(b)}</th>" for b in brokers)
    rows = []
    for entry in result["timeline"]:
        state = entry["state"]
        zk = f"/controller {state['controller']}, epoch {state['controller_epoch']}<br>" + (
            "<br>".join(f"{escape(n)}: leader {s[0]} epoch {s[1]}" for n, s in state["zk"].items())
        )
        cells = ""
        for b in brokers:
            broker = state["brokers"][b]
            text = ("controller" if broker["believes_controller"] else "") + (
                "" if broker["session"] else " (session expired)"
            )
            text += f"<br>seen epoch {broker['seen_controller_epoch']}<br>" + "<br>".join(
                f"{escape(n)}: leader {s[0]} epoch {s[1]}" for n, s in broker["cache"].items()
            )
            cells += f"<td>{text}</td>"
        what = "<br>".join(escape(m) for m in [entry.get("note") or "", *entry["messages"]] if m)
        what += "".join(
            f'<br><span class="bad">{escape(v["invariant"])}: {escape(v["detail"])}</span>'
            for v in entry["violations"]
        )
        marked = ' class="violation"' if entry["violations"] else ""
        rows.append(
            f'<tr{marked}><td>{escape(entry["step"])}</td><td class="text">{escape(entry["op"])}'
            f'</td><td class="text">{zk}</td>{cells}<td class="text">{what}</td></tr>'
        )
    body = (
        f'<section id="zookeeper-verdict"><h2>Verdict</h2>{verdict}</section>'
        '<section id="zookeeper-timeline"><h2>Controller timeline</h2><div class="table-wrap">'
        f'<table><tr><th>step</th><th class="text">op</th><th class="text">ZooKeeper</th>{head}'
        f'<th class="text">what happened</th></tr>{"".join(rows)}</table></div></section>'
    )
    body = description_note(result) + body
    return document(
        f"ZooKeeper-era controller: {result['name']}", "for comparison with KRaft", body
    )
