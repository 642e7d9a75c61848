"""Building blocks shared by the dashboards: escaping, embedded JSON, plotly divs, page files.

Every page is one self-contained HTML file: plotly's JavaScript is embedded once (with the first
figure) and nothing is fetched from the network. Its head names ktk as the generator, which is
how a later run knows that it may replace the file (:func:`write_page`).

>>> escape('<img src=x onerror=alert(1)>')
'&lt;img src=x onerror=alert(1)&gt;'
>>> embed_json({"id": "</script><!--"})
'{"id": "\\\\u003c/script\\\\u003e\\\\u003c!--"}'
>>> is_ktk_page(document("t", "s", "").encode()), is_ktk_page(b"<!DOCTYPE html><p>notes</p>")
(True, False)
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io
import plotly.offline

from ktkbase.outputs import atomic_write, write_output_file

# one colour per assignor, stable across all charts of a page; `recorded` is always near-black
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
RECORDED_COLOUR = "#222222"

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

# in the head of every page; a file whose head lacks it is not replaced without --force
GENERATOR_META = '<meta name="generator" content="ktk">'

_JSON_UNSAFE = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #1d1d1f; background: #fafafa; }
header { background: #233044; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px 0; font-size: 24px; }
header p { margin: 0; color: #c9d3e0; }
main { padding: 8px 24px 40px 24px; max-width: 1600px; }
section { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 12px 20px;
          margin: 18px 0; }
section h2 { font-size: 18px; margin: 6px 0 6px 0; }
section p.note { color: #555; margin: 4px 0 10px 0; font-size: 14px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 4px 7px; text-align: right;
         white-space: nowrap; }
th { background: #f0f2f5; white-space: normal; max-width: 6.2em; vertical-align: bottom;
     font-size: 12px; }
.table-wrap { overflow-x: auto; max-width: 100%; }
th:first-child, td:first-child { text-align: left; }
td.text, th.text { text-align: left; white-space: normal; }
th.text { max-width: none; }
td.best { background: #d3f2dc; font-weight: 600; }
tr.recorded td { font-style: italic; }
tr.marked td { background: #fff4e0; }
tr.violation td { background: #fde2e1; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
          margin-right: 6px; }
.controls { display: flex; gap: 12px; align-items: center; flex-wrap: wrap; margin: 6px 0; }
.controls input, .controls select { font-size: 14px; padding: 4px 6px; }
.controls select { min-width: 420px; }
.lost { color: #b3261e; font-weight: 600; }
.acked { color: #1b7f3b; }
.ok { color: #1b7f3b; font-weight: 600; }
.bad { color: #b3261e; font-weight: 600; }
td.why { min-width: 22em; max-width: 40em; font-size: 12px; color: #2b4a6b; }
td.why div + div { margin-top: 3px; }
.comment { color: #666; font-style: italic; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
"""


def escape(text: object) -> str:
    """Text safe to put into HTML markup (and into plotly labels, which decode entities)."""
    return html.escape(str(text), quote=True)


def embed_json(value: Any) -> str:
    """JSON safe inside a <script> element: no `</`, `<!--` or line separators survive."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=False)
    for unsafe, safe in _JSON_UNSAFE:
        text = text.replace(unsafe, safe)
    return text


def compact_json(value: Any) -> str:
    """JSON without spaces (a fifth smaller once compressed), for data that is packed
    (:func:`packed`) rather than written into the markup.

    >>> compact_json({"ids": ["a", "b"], "n": [1, None]})
    '{"ids":["a","b"],"n":[1,null]}'
    """
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def script_safe(json_text: str) -> str:
    """JSON text (already serialised) made safe inside a <script> element, like
    :func:`embed_json`."""
    for unsafe, safe in _JSON_UNSAFE:
        json_text = json_text.replace(unsafe, safe)
    return json_text


def packed(text: str, level: int = 6) -> str:
    """`text` gzip-compressed (no timestamp: same text, same bytes) and base64-encoded, for a
    page script to unpack with the browser's DecompressionStream. Level 6: on the per-trace
    columns of 20,000 traces level 9 is 10% smaller but ten times slower (3.6 s against 0.3 s).

    >>> import base64, gzip
    >>> gzip.decompress(base64.b64decode(packed("ktk"))).decode()
    'ktk'
    """
    data = gzip.compress(text.encode("utf-8"), compresslevel=level, mtime=0)
    return base64.b64encode(data).decode("ascii")


@cache
def packed_plotly() -> str:
    """plotly.js packed (:func:`packed`): a third of its 4.8 MB, so a page of 20,000 traces
    fits in 6 MB."""
    return packed(plotly.offline.get_plotlyjs(), level=9)


PLOTLY_LOADER = "static/plotly-loader.js"


@cache
def static_script(name: str) -> str:
    """The text of a script shipped in the dashboards package (declared as package data)."""
    return resources.files("dashboards").joinpath(name).read_text(encoding="utf-8")


def packed_figures(figures: Iterable[tuple[str, go.Figure]]) -> tuple[dict[str, str], str]:
    """Empty divs for each (div id, figure), and the markup that fills them: plotly.js and the
    figures' JSON, each packed (:func:`packed`), and the loader script
    (``dashboards/static/plotly-loader.js``) that unpacks both and draws the figures. The loader
    sets ``window.ktkReady``, a promise that resolves once every figure is drawn;
    ``window.ktkUnpack(text)`` unpacks other packed data of the page."""
    divs: dict[str, str] = {}
    specs: list[str] = []
    for div_id, figure in figures:
        height = figure.layout.height or 450
        divs[div_id] = (
            f'<div id="{escape(div_id)}" class="plotly-graph-div" '
            f'style="height:{int(height)}px; width:100%;"></div>'
        )
        specs.append(
            f'{{"id":{compact_json(div_id)},'
            f'"figure":{plotly.io.to_json(figure, validate=False, pretty=False)}}}'
        )
    document = f'{{"config":{compact_json(PLOTLY_CONFIG)},"figures":[{",".join(specs)}]}}'
    markup = (
        '<script type="application/octet-stream" id="plotly-js-packed">'
        f"{packed_plotly()}</script>\n"
        '<script type="application/octet-stream" id="plotly-figures-packed">'
        f"{packed(document)}</script>\n"
        f"<script>\n{static_script(PLOTLY_LOADER)}</script>"
    )
    return divs, markup


def unencodable_text(value: object, path: str = "") -> str | None:
    """Where a JSON-like value holds text no page can carry (a lone surrogate), or None.

    >>> unencodable_text({"ok": ["fine"], "id": "a\\udc80b"})
    'id'
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "value"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{path}.{key}" if path else str(key)
            found = unencodable_text(key, name) or unencodable_text(item, name)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = unencodable_text(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def assignor_colours(names: Sequence[str]) -> dict[str, str]:
    """A colour per assignor name in the given order; the pseudo-assignor `recorded` is black."""
    colours: dict[str, str] = {}
    index = 0
    for name in names:
        if name == "recorded":
            colours[name] = RECORDED_COLOUR
        else:
            colours[name] = PALETTE[index % len(PALETTE)]
            index += 1
    return colours


def figure_divs(figures: Iterable[tuple[str, go.Figure]]) -> dict[str, str]:
    """HTML for each (div id, figure); plotly.js is embedded with the first figure only."""
    rendered: dict[str, str] = {}
    for position, (div_id, figure) in enumerate(figures):
        rendered[div_id] = figure.to_html(
            full_html=False,
            include_plotlyjs=position == 0,
            div_id=div_id,
            config=PLOTLY_CONFIG,
            default_width="100%",
        )
    return rendered


def format_number(value: object, digits: int = 0) -> str:
    """A table cell: thousands separators, fixed decimals, an em dash for missing values."""
    if value is None:
        return "—"
    number = float(value)  # type: ignore[arg-type]
    if math.isnan(number):
        return "—"
    if digits == 0:
        return f"{round(number):,}"
    return f"{number:,.{digits}f}"


def description_note(result: Mapping[str, Any]) -> str:
    """The scenario's own ``description`` as a note paragraph, or nothing without one.

    >>> description_note({"description": "a <b> c"})
    '<p class="note" id="description">a &lt;b&gt; c</p>'
    >>> description_note({"description": ""}), description_note({})
    ('', '')
    """
    description = result.get("description")
    if isinstance(description, str) and description:
        return f'<p class="note" id="description">{escape(description)}</p>'
    return ""


def document(title: str, subtitle: str, body: str, script: str = "") -> str:
    """A full HTML page; `title` and `subtitle` are plain text, `body` and `script` are markup."""
    script_block = f"<script>\n{script}\n</script>\n" if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"{GENERATOR_META}\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>\n"
        f"<main>\n{body}\n</main>\n{script_block}</body>\n</html>\n"
    )


def is_ktk_page(head: bytes) -> bool:
    """Whether the first bytes of a file are the head of a page ktk wrote (the generator meta
    comes before the end of the head, not somewhere in a foreign page's text)."""
    text = head.decode("utf-8", errors="replace")
    position = text.find(GENERATOR_META)
    return (
        text.startswith("<!DOCTYPE html>")
        and position >= 0
        and "</head>" not in text[:position]
        and "<body" not in text[:position]
    )


def write_page(
    path: str | os.PathLike[str],
    html_text: str,
    *,
    inputs: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
) -> Path:
    """Write a page atomically where no input, no directory and no foreign file is replaced.

    An existing file is replaced only when it is a ktk page (:func:`is_ktk_page`) or ``force``
    is given; an input or a directory never is. Raises ``ktkbase.errors.OutputError``.
    """
    return write_output_file(path, html_text, inputs=inputs, force=force, is_ours=is_ktk_page)


def write_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` whole or not at all (no overwrite check; see :func:`write_page`)."""
    target = Path(path)
    if str(target.parent):
        target.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(target, text)
