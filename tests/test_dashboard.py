"""Dashboards at the string level: reading results, aggregation, highlighting, escaping, size."""

from __future__ import annotations

import base64
import doctest
import errno
import gzip
import json
import os
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from dashboard_data import (
    results_of,
    s1_like_result,
    summary_frame,
    synthetic_scores,
    write_results,
)
from typer.testing import CliRunner, Result

from dashboards import errors as dashboard_errors
from dashboards import page, replication
from dashboards.errors import InputError
from dashboards.rebalance import aggregation, reading
from dashboards.rebalance.aggregation import (
    best_assignors,
    rebalance_rows,
    recorded_comparison,
    revoked_distribution,
    rounds_distribution,
    scatter_points,
    summarise_assignors,
    summarise_traces,
    trace_table,
    worst_traces,
)
from dashboards.rebalance.page import render_rebalance, write_rebalance_page
from dashboards.rebalance.reading import normalise_scores, normalise_summary, read_results
from dashboards.replication import render_replication, timeline_rows, write_replication_page

HOSTILE = "<img src=x onerror=alert(1)>"


def _unpacked(html: str, element_id: str) -> dict:
    """The packed JSON of one element of a rebalance page, unpacked as the page does."""
    found = re.search(f'id="{element_id}">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(gzip.decompress(base64.b64decode(found.group(1))))


def _trace_data(html: str) -> dict:
    """The packed per-trace columns a rebalance page carries."""
    return _unpacked(html, "trace-data-packed")


SCRIPT_BREAKOUT = "</script><script>alert(2)</script><!--"


def _rows(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


def _per_trace(scores: pd.DataFrame) -> pd.DataFrame:
    return summarise_traces(normalise_summary(summary_frame(scores)))


def _assignors(scores: pd.DataFrame) -> pd.DataFrame:
    return summarise_assignors(_per_trace(scores), normalise_scores(scores))


def _hand_scores() -> pd.DataFrame:
    """Two traces, two assignors, every summary column with a value computed by hand below."""
    return _rows(
        dict(trace_id="a", assignor="range", generation=1, members=2, unassigned=0, invalid=0,
             max_load=3, optimal_max_load=3, spread=1, weight_skew=1.2, moved=0, forced=0,
             min_moved=0, revoked=0, rounds=1, rack_mismatch=1, assign_ms=2.0),
        dict(trace_id="a", assignor="range", generation=2, members=3, unassigned=1, invalid=0,
             max_load=4, optimal_max_load=2, spread=3, weight_skew=1.9, moved=4, forced=1,
             min_moved=1, revoked=6, rounds=1, rack_mismatch=2, assign_ms=4.0),
        dict(trace_id="b", assignor="range", generation=7, members=2, unassigned=0, invalid=2,
             max_load=5, optimal_max_load=5, spread=0, weight_skew=None, moved=0, forced=0,
             min_moved=0, revoked=0, rounds=1, rack_mismatch=None, assign_ms=None),
        dict(trace_id="a", assignor="sticky", generation=1, members=2, unassigned=0, invalid=0,
             max_load=3, optimal_max_load=3, spread=1, weight_skew=1.2, moved=0, forced=0,
             min_moved=0, revoked=0, rounds=1, rack_mismatch=0, assign_ms=1.0),
        dict(trace_id="a", assignor="sticky", generation=2, members=3, unassigned=0, invalid=0,
             max_load=2, optimal_max_load=2, spread=0, weight_skew=1.1, moved=1, forced=1,
             min_moved=1, revoked=1, rounds=2, rack_mismatch=0, assign_ms=3.0),
        dict(trace_id="b", assignor="sticky", generation=7, members=2, unassigned=0, invalid=0,
             max_load=5, optimal_max_load=5, spread=0, weight_skew=None, moved=0, forced=0,
             min_moved=0, revoked=0, rounds=1, rack_mismatch=None, assign_ms=None),
    )  # fmt: skip


class _TableCells(HTMLParser):
    """Collects the text and class of every cell of one table, by row."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id = table_id
        self.inside = False
        self.rows: list[list[tuple[str, str]]] = []
        self.row_classes: list[str] = []
        self._cell: list[str] | None = None
        self._class = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table" and attributes.get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
            self.row_classes.append(attributes.get("class") or "")
        elif self.inside and tag in ("td", "th"):
            self._cell, self._class = [], attributes.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(("".join(self._cell).strip(), self._class))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _table(html: str, table_id: str) -> list[list[tuple[str, str]]]:
    parser = _TableCells(table_id)
    parser.feed(html)
    return parser.rows


def _row_classes(html: str, table_id: str) -> dict[str, str]:
    """First cell text -> class of its row."""
    parser = _TableCells(table_id)
    parser.feed(html)
    return {row[0][0]: css for row, css in zip(parser.rows, parser.row_classes, strict=True)}


# --- reading -------------------------------------------------------------------------------


def test_single_file_and_spark_style_dataset_directories_read_the_same(tmp_path: Path) -> None:
    scores = synthetic_scores(30, seed=3)
    single = read_results(write_results(tmp_path / "single", scores, protocol_in="summary"))
    parts_dir = write_results(tmp_path / "parts", scores, partitioned=True, protocol_in="summary")
    hidden = {path.name for path in (parts_dir / "scores.parquet").rglob("*") if path.is_file()}
    assert "_SUCCESS" in hidden and any(name.endswith(".crc") for name in hidden)
    partitioned = read_results(parts_dir)
    assert partitioned.scores["assignor"].dtype == object
    pd.testing.assert_frame_equal(single.scores, partitioned.scores)
    pd.testing.assert_frame_equal(single.summary, partitioned.summary)
    assert single.protocols == partitioned.protocols
    assert list(single.scores.columns) == list(reading.SCORE_COLUMNS)
    assert list(single.summary.columns) == list(reading.SUMMARY_COLUMNS)
    assert all(path.suffix == ".parquet" for path in partitioned.inputs[:-1])


def _kind_of_arrow(data_type: pa.DataType) -> str:
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return "text"
    if pa.types.is_integer(data_type):
        return "integer"
    if pa.types.is_floating(data_type):
        return "number"
    return str(data_type)


def test_every_result_column_the_dashboard_reads_is_in_the_replay_schema() -> None:
    from assignors.traces.scoring import SCORE_SCHEMA, SUMMARY_SCHEMA

    for fields, schema in (
        (reading.SCORE_FIELDS, SCORE_SCHEMA),
        (reading.SUMMARY_FIELDS, SUMMARY_SCHEMA),
    ):
        for column in fields:
            assert column.name in schema.names, f"{column.name} is not a replay result column"
            written = schema.field(column.name)
            assert _kind_of_arrow(written.type) == column.kind, (column.name, written.type)
            # the dashboard tolerates absence exactly where the replay may write null
            assert column.required == (not written.nullable), column.name
            assert column.description
    for schema in (SCORE_SCHEMA, SUMMARY_SCHEMA):
        if reading.PROTOCOL_FIELD.name in schema.names:
            assert _kind_of_arrow(schema.field(reading.PROTOCOL_FIELD.name).type) == "text"


def test_page_lists_every_column_it_reads_with_its_description(tmp_path: Path) -> None:
    html = render_rebalance(read_results(write_results(tmp_path / "r", synthetic_scores(3))))
    rows = _table(html, "sources-table")
    listed = {(file, column): text for (file, _), (column, _), (text, _), _ in rows[1:]}
    for file, fields in (
        ("scores.parquet", reading.SCORE_FIELDS),
        ("summary.parquet", reading.SUMMARY_FIELDS),
    ):
        for column in fields:
            assert listed[file, column.name] == column.description
    assert listed["summary.parquet, else scores.parquet", "protocol"].startswith("the rebalance")


def test_dataset_directory_of_plain_part_files_reads_like_a_single_file(tmp_path: Path) -> None:
    scores = synthetic_scores(12, seed=4)
    single = read_results(write_results(tmp_path / "single", scores))
    directory = write_results(tmp_path / "plain", scores)
    for name in ("scores.parquet", "summary.parquet"):
        table = pq.read_table(directory / name)
        (directory / name).unlink()
        (directory / name).mkdir()
        half = table.num_rows // 2
        pq.write_table(table.slice(0, half), directory / name / "part-00000.snappy.parquet")
        pq.write_table(table.slice(half), directory / name / "part-00001.snappy.parquet")
        (directory / name / "_SUCCESS").write_text("")
        (directory / name / ".part-00000.snappy.parquet.crc").write_bytes(b"\x00")
    plain = read_results(directory)
    pd.testing.assert_frame_equal(single.scores, plain.scores)
    pd.testing.assert_frame_equal(single.summary, plain.summary)


def test_reading_keeps_skipped_traces_from_errors_jsonl(tmp_path: Path) -> None:
    errors = [{"trace_id": "t9", "file": "traces.jsonl", "line": 4, "reason": "bad generation"}]
    results = read_results(write_results(tmp_path / "r", synthetic_scores(3), errors=errors))
    assert results.errors == tuple(errors)


def test_missing_scores_file_is_an_input_error_naming_the_directory(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"empty: no scores\.parquet"):
        read_results(empty)


def _corrupt(path: Path) -> None:
    path.write_bytes(b"PAR1" + b"\x00garbage" * 20 + b"PAR1")


def _rewrite(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    pq.write_table(change(pq.read_table(path)), path)


def _set_column(name: str, values: pa.Array) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        return table.set_column(table.column_names.index(name), name, values)

    return change


def _replace_first(name: str, value: object, type_: pa.DataType) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        column = table.column(name).to_pylist()
        column[0] = value
        return _set_column(name, pa.array(column, type_))(table)

    return change


def _invalid_utf8_first(name: str) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        raw = [value.encode() for value in table.column(name).to_pylist()]
        raw[0] = b"trace-\xed\xa0\x80"  # UTF-8 bytes of a lone surrogate: no valid text
        return _set_column(name, pa.array(raw, pa.binary()).view(pa.string()))(table)

    return change


BAD_RESULT_FILES = {
    "scores-corrupt": ("scores.parquet", _corrupt, r"scores\.parquet: not readable as Parquet"),
    "summary-corrupt": ("summary.parquet", _corrupt, r"summary\.parquet: not readable"),
    "scores-missing-column": (
        "scores.parquet",
        lambda path: _rewrite(path, lambda table: table.drop_columns(["revoked"])),
        r"scores\.parquet: revoked: required column is missing",
    ),
    "summary-missing-column": (
        "summary.parquet",
        lambda path: _rewrite(path, lambda table: table.drop_columns(["total_rounds"])),
        r"summary\.parquet: total_rounds: required column is missing",
    ),
    "scores-text-measure": (
        "scores.parquet",
        lambda path: _rewrite(
            path, lambda table: _set_column("moved", pa.array(["x"] * table.num_rows))(table)
        ),
        r"scores\.parquet: moved: column has type string, expected integer",
    ),
    "scores-boolean-measure": (
        "scores.parquet",
        lambda path: _rewrite(
            path, lambda table: _set_column("rounds", pa.array([True] * table.num_rows))(table)
        ),
        r"scores\.parquet: rounds: column has type bool, expected integer",
    ),
    "summary-numeric-trace-id": (
        "summary.parquet",
        lambda path: _rewrite(
            path, lambda table: _set_column("trace_id", pa.array(range(table.num_rows)))(table)
        ),
        r"summary\.parquet: trace_id: column has type int64, expected text",
    ),
    "scores-huge-value": (
        "scores.parquet",
        lambda path: _rewrite(path, _replace_first("moved", 2**62, pa.int64())),
        r"scores\.parquet: trace trace-00000: moved: not a finite number of magnitude at most "
        r"2\^53 \(row 0\) \(got 4611686018427387904\)",
    ),
    "scores-infinite-value": (
        "scores.parquet",
        lambda path: _rewrite(path, _replace_first("assign_ms", float("inf"), pa.float64())),
        r"scores\.parquet: trace trace-00000: assign_ms: not a finite number .*\(got inf\)",
    ),
    "summary-huge-unsigned": (
        "summary.parquet",
        lambda path: _rewrite(path, _replace_first("total_moved", 2**64 - 1, pa.uint64())),
        r"summary\.parquet: trace trace-00000: total_moved: not a finite number",
    ),
    "scores-lone-surrogate-trace-id": (
        "scores.parquet",
        lambda path: _rewrite(path, _invalid_utf8_first("trace_id")),
        r"scores\.parquet: trace_id: text is not valid UTF-8",
    ),
    "summary-from-another-run": (
        "summary.parquet",
        lambda path: _rewrite(path, lambda table: table.slice(1)),
        r"summary\.parquet: trace trace-00000: assignor 'cooperative-sticky' of this trace is "
        r"only in scores\.parquet",
    ),
    "summary-row-twice": (
        "summary.parquet",
        lambda path: _rewrite(path, lambda table: pa.concat_tables([table, table.slice(0, 1)])),
        r"summary\.parquet: trace trace-00000: assignor: trace x assignor listed twice",
    ),
    "summary-absent": (
        "summary.parquet",
        lambda path: path.unlink(),
        r"r: no summary\.parquet here",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RESULT_FILES))
def test_bad_result_file_is_one_input_error_naming_file_and_field(
    tmp_path: Path, case: str
) -> None:
    name, spoil, message = BAD_RESULT_FILES[case]
    directory = write_results(tmp_path / "r", synthetic_scores(4, seed=1))
    spoil(directory / name)
    with pytest.raises(InputError, match=message):
        read_results(directory)


def test_bad_part_of_a_dataset_is_named_by_its_path(tmp_path: Path) -> None:
    directory = write_results(tmp_path / "r", synthetic_scores(4, seed=1), partitioned=True)
    corrupt = sorted((directory / "scores.parquet" / "assignor=range").glob("*.parquet"))[0]
    _corrupt(corrupt)
    with pytest.raises(InputError, match=re.escape(f"{corrupt}: not readable as Parquet")):
        read_results(directory)
    corrupt.unlink()
    mistyped = sorted((directory / "scores.parquet" / "assignor=sticky").glob("*.parquet"))[0]
    _rewrite(mistyped, lambda table: _set_column("rounds", pa.array(["1"] * table.num_rows))(table))
    with pytest.raises(InputError, match=re.escape(f"{mistyped}: rounds: column has type string")):
        read_results(directory)


def test_dataset_directory_without_part_files_is_an_input_error(tmp_path: Path) -> None:
    directory = write_results(tmp_path / "r", synthetic_scores(3, seed=1))
    (directory / "summary.parquet").unlink()
    (directory / "summary.parquet").mkdir()
    (directory / "summary.parquet" / "_SUCCESS").write_text("")
    with pytest.raises(InputError, match=r"summary\.parquet: a Parquet dataset directory without"):
        read_results(directory)


BAD_ERROR_LINES = {
    "not-json": (b"{trace_id: t1}\n", r"errors\.jsonl:2: not a JSON object"),
    "not-an-object": (b"[1, 2]\n", r"errors\.jsonl:2: not a JSON object \(a JSON list\)"),
    "not-utf8": (b'{"trace_id": "\xff\xfe"}\n', r"errors\.jsonl:2: not UTF-8 text"),
    "lone-surrogate": (
        b'{"trace_id": "t\\ud800"}\n',
        r"errors\.jsonl:2: trace_id: text holds a lone surrogate",
    ),
    "nested-surrogate": (
        b'{"value": {"ids": ["ok", "\\udfff"]}}\n',
        r"errors\.jsonl:2: value\.ids\[1\]: text holds a lone surrogate",
    ),
    "nan": (b'{"value": NaN}\n', r"errors\.jsonl:2: not a JSON object: nan is not a finite"),
    "float-overflow": (b'{"value": 1e999}\n', r"errors\.jsonl:2: not a JSON object: inf is"),
    "huge-integer": (b'{"value": ' + b"9" * 5000 + b"}\n", r"errors\.jsonl:2: not a JSON"),
    "deep-nesting": (b"[" * 100_000 + b"]" * 100_000 + b"\n", r"errors\.jsonl:2: not a JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD_ERROR_LINES))
def test_bad_errors_jsonl_line_is_an_input_error_naming_file_and_line(
    tmp_path: Path, case: str
) -> None:
    line, message = BAD_ERROR_LINES[case]
    directory = write_results(tmp_path / "r", synthetic_scores(3, seed=1))
    good = json.dumps({"trace_id": "t0", "file": "a.jsonl", "reason": "r"}).encode()
    (directory / "errors.jsonl").write_bytes(good + b"\n" + line)
    with pytest.raises(InputError, match=message):
        read_results(directory)


def test_huge_error_texts_are_cut_on_the_page(tmp_path: Path) -> None:
    reason = "x" * 2_000_000
    errors = [{"trace_id": "t", "file": "f", "reason": reason}]
    results = read_results(write_results(tmp_path / "r", synthetic_scores(3), errors=errors))
    html = render_rebalance(results)
    assert "x" * 300 + "… (2,000,000 characters)" in html
    assert "x" * 301 not in html


def test_non_numeric_measure_names_the_column_and_value(tmp_path: Path) -> None:
    frame = pd.DataFrame({"trace_id": ["t"], "assignor": ["range"], "generation": [1],
                          "moved": ["lots"]})  # fmt: skip
    with pytest.raises(InputError, match=r"moved: not a number \(got 'lots'\)"):
        normalise_scores(frame, source="scores.parquet")


def test_missing_key_column_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"scores\.parquet: assignor: required column"):
        normalise_scores(pd.DataFrame({"trace_id": ["t"], "generation": [1]}), "scores.parquet")


def test_absent_optional_columns_become_null_not_zero() -> None:
    scores = _rows(dict(trace_id="t", assignor="range", generation=1, moved=2, spread=1))
    summary = _assignors(scores)
    assert np.isnan(summary.loc["range", "weight_skew_max"])
    assert np.isnan(summary.loc["range", "rack_mismatch"])
    assert summary.loc["range", "moved"] == 2


# --- aggregation ---------------------------------------------------------------------------


def test_summary_totals_maxima_and_means_match_hand_computation() -> None:
    summary = _assignors(_hand_scores())
    range_row = summary.loc["range"]
    assert range_row["traces"] == 2 and range_row["generations"] == 3
    assert (range_row["moved"], range_row["forced"], range_row["revoked"]) == (4, 1, 6)
    assert range_row["rounds"] == 3
    assert range_row["spread_max"] == 3
    assert range_row["weight_skew_max"] == pytest.approx(1.9)
    assert range_row["rack_mismatch"] == 3
    assert range_row["assign_ms_mean"] == pytest.approx(3.0)
    # generation 2 left a partition unassigned, trace b's generation double-assigned
    assert range_row["invalid_generations"] == 2
    assert range_row["min_moved"] == 1
    # results without total_excess_moved (before version 3) show no gap rather than a netted one
    assert np.isnan(range_row["excess_moved"])
    assert range_row["extra_max_load_mean"] == pytest.approx(2 / 3)
    assert range_row["optimal_balance_share"] == pytest.approx(200 / 3)
    sticky_row = summary.loc["sticky"]
    assert (sticky_row["moved"], sticky_row["rounds"], sticky_row["invalid_generations"]) == (
        1,
        4,
        0,
    )
    assert sticky_row["optimal_balance_share"] == 100.0


def test_best_values_are_the_lowest_except_share_at_optimum_and_ties_crown_nobody() -> None:
    summary = _assignors(_hand_scores())
    best = best_assignors(summary)
    assert best["moved"] == {"sticky"}
    assert best["rounds"] == {"range"}
    assert best["optimal_balance_share"] == {"sticky"}
    assert "traces" not in best and "forced" not in best  # forced is not the assignor's doing
    # within 1% of each other is a tie: no column winner
    summary.loc[:, "moved"] = [1000.0, 1005.0]
    summary.loc[:, "rounds"] = [3.0, 3.0]
    tied = best_assignors(summary)
    assert "moved" not in tied and "rounds" not in tied
    summary.loc[:, "moved"] = [1000.0, 1011.0]
    assert best_assignors(summary)["moved"] == {summary.index[0]}


def test_summary_table_highlights_exactly_the_best_cells() -> None:
    html = render_rebalance(results_of(_hand_scores()))
    rows = _table(html, "summary-table")
    header = [text for text, _ in rows[0]]
    by_assignor = {row[0][0]: row for row in rows[1:]}
    moved_column = header.index("moved")
    rounds_column = header.index("rounds")
    assert by_assignor["sticky"][moved_column] == ("1", "best")
    assert by_assignor["range"][moved_column] == ("4", "")
    assert by_assignor["range"][rounds_column][1] == "best"
    assert by_assignor["sticky"][rounds_column][1] == ""
    best_cells = sum(cell_class == "best" for row in rows[1:] for _, cell_class in row)
    assert best_cells == sum(len(winners) for winners in best_assignors(
        _assignors(_hand_scores())).values())  # fmt: skip


def test_recorded_on_fewer_traces_is_never_crowned_best() -> None:
    scores = synthetic_scores(12, seed=5, recorded_every=3)
    summary = _assignors(scores)
    assert summary.loc["recorded", "moved"] < summary.drop("recorded")["moved"].min()
    assert all("recorded" not in winners for winners in best_assignors(summary).values())
    assert list(summary.index)[-1] == "recorded"


def _protocol_cells(html: str) -> dict[str, str]:
    rows = _table(html, "summary-table")
    column = [text for text, _ in rows[0]].index("protocol")
    return {row[0][0].removesuffix(" (real group)"): row[column][0] for row in rows[1:]}


@pytest.mark.parametrize("partitioned", [False, True])
def test_protocol_is_read_from_summary_before_scores(tmp_path: Path, partitioned: bool) -> None:
    scores = synthetic_scores(6, seed=1).assign(protocol="written-in-scores")
    directory = write_results(
        tmp_path / "r", scores, protocol_in="summary", partitioned=partitioned
    )
    html = render_rebalance(read_results(directory))
    assert _protocol_cells(html) == {
        "cooperative-sticky": "cooperative",
        "range": "eager",
        "roundrobin": "eager",
        "sticky": "eager",
        "recorded": "eager",
    }


def test_protocol_is_read_from_scores_when_summary_has_no_protocol_column(
    tmp_path: Path,
) -> None:
    directory = write_results(tmp_path / "r", synthetic_scores(6, seed=1), protocol_in="scores")
    results = read_results(directory)
    assert results.protocols["cooperative-sticky"] == ("cooperative",)
    assert _protocol_cells(render_rebalance(results))["sticky"] == "eager"


def test_protocol_is_never_guessed_from_the_numbers(tmp_path: Path) -> None:
    # cooperative-sticky needs two rounds and revokes only what moves, range revokes all:
    # without a protocol column the page still says nothing about either
    directory = write_results(tmp_path / "r", synthetic_scores(20, seed=1))
    html = render_rebalance(read_results(directory))
    assert set(_protocol_cells(html).values()) == {"not recorded"}
    figures = json.dumps(_unpacked(html, "plotly-figures-packed"), ensure_ascii=False)
    assert "cooperative-sticky (not recorded)" in figures


def test_any_recorded_protocol_value_is_labelled_as_recorded(tmp_path: Path) -> None:
    scores = synthetic_scores(9, seed=2, recorded_every=1)
    scores["protocol"] = np.where(scores["assignor"] == "range", "consumer", "eager")
    recorded = scores["assignor"] == "recorded"
    scores.loc[recorded, "protocol"] = np.where(
        scores.loc[recorded, "trace_id"] == "trace-00001", "cooperative", HOSTILE
    )
    html = render_rebalance(read_results(write_results(tmp_path / "r", scores)))
    cells = _protocol_cells(html)
    assert cells["range"] == "consumer (KIP-848)"
    assert cells["recorded"] == f"{HOSTILE}, cooperative"
    assert HOSTILE not in html


def test_worst_traces_rank_by_moved_plus_worst_spread_under_any_assignor() -> None:
    scores = _rows(
        dict(trace_id="calm", assignor="range", generation=1, moved=1, spread=0),
        dict(trace_id="busy", assignor="range", generation=1, moved=2, spread=0),
        dict(trace_id="busy", assignor="sticky", generation=1, moved=0, spread=0),
        dict(trace_id="skewed", assignor="sticky", generation=1, moved=0, spread=5),
        dict(trace_id="also-calm", assignor="range", generation=1, moved=1, spread=0),
    )
    per_trace = _per_trace(scores)
    assert worst_traces(per_trace, 3) == ["skewed", "busy", "also-calm"]
    assert worst_traces(per_trace, 0) == []


def test_scatter_keeps_every_trace_when_binning_many_points() -> None:
    per_trace = _per_trace(synthetic_scores(4000, seed=2))
    exact = scatter_points(per_trace, max_points=10**9)
    binned = scatter_points(per_trace, max_points=200)
    assert exact["traces"].sum() == binned["traces"].sum() == len(per_trace)
    assert binned.groupby("assignor").size().max() < exact.groupby("assignor").size().max()
    assert binned.attrs["moved_bin_width"] > 0 and exact.attrs["moved_bin_width"] == 0


def test_revocations_count_rebalances_after_each_traces_first_generation() -> None:
    rebalances = rebalance_rows(normalise_scores(_hand_scores()))
    assert sorted(zip(rebalances["assignor"], rebalances["generation"], strict=True)) == [
        ("range", 2), ("sticky", 2)]  # fmt: skip
    revoked = revoked_distribution(rebalances)
    assert revoked.loc["range", "max"] == 6 and revoked.loc["sticky", "mean"] == 1
    rounds = rounds_distribution(rebalances)
    assert rounds.loc["sticky", 2] == 100.0 and rounds.loc["range", 1] == 100.0
    assert np.allclose(rounds.sum(axis=1), 100.0)


def test_recorded_comparison_counts_traces_with_fewer_same_more_moves() -> None:
    scores = _rows(
        dict(trace_id="x", assignor="recorded", generation=1, moved=3, spread=1),
        dict(trace_id="y", assignor="recorded", generation=1, moved=0, spread=1),
        dict(trace_id="x", assignor="sticky", generation=1, moved=1, spread=0),
        dict(trace_id="y", assignor="sticky", generation=1, moved=0, spread=0),
        dict(trace_id="z", assignor="sticky", generation=1, moved=9, spread=0),
    )
    comparison = recorded_comparison(_per_trace(scores))
    assert comparison.loc["sticky", ["fewer", "same", "more", "traces"]].tolist() == [1, 1, 0, 2]
    assert comparison.loc["sticky", "moved"] == 1  # trace z has no recorded history
    assert recorded_comparison(_per_trace(scores[scores.assignor != "recorded"])).empty


def test_trace_table_holds_every_trace_with_one_column_per_assignor_and_null_where_absent() -> None:
    table = trace_table(normalise_scores(_hand_scores()), ["range", "sticky", "uniform"], ["b"])
    assert table["ids"] == ["a", "b"] and table["lengths"] == [2, 1]
    assert table["generation"] == [1, 2, 7] and table["members"] == [2, 3, 2]
    assert table["series"][0] == {"spread": [1, 3, 0], "moved": [0, 4, 0], "revoked": [0, 6, 0]}
    assert table["series"][2]["moved"] == [None, None, None]
    assert table["worst"] == [1]
    assert table["interval_ms"] == [None, None, None]


def test_delta_encoded_series_add_back_to_every_assignors_own_values() -> None:
    scores = normalise_scores(synthetic_scores(30, seed=3))
    names = aggregation.assignor_order(scores["assignor"].unique())
    table = trace_table(scores, names, [])
    encoded = aggregation.delta_encoded(table)
    assert set(encoded["reference"]) == {"spread", "moved", "revoked"}
    for measure, reference in encoded["reference"].items():
        base = encoded["series"][reference][measure]
        for position, columns in enumerate(encoded["series"]):
            decoded = [
                value if position == reference or value is None or root is None else value + root
                for value, root in zip(columns[measure], base, strict=True)
            ]
            assert decoded == table["series"][position][measure], (measure, names[position])


def test_trace_table_keeps_the_gaps_between_generations_and_none_before_a_first() -> None:
    scores = _rows(
        dict(trace_id="t", assignor="range", generation=1, members=2, interval_ms=5_000),
        dict(trace_id="t", assignor="range", generation=2, members=2, interval_ms=30_000),
        dict(trace_id="t", assignor="range", generation=3, members=2, interval_ms=1_500),
        dict(trace_id="u", assignor="range", generation=1, members=2, interval_ms=None),
        dict(trace_id="u", assignor="range", generation=2, members=2, interval_ms=None),
    )
    table = trace_table(normalise_scores(scores), ["range"], [])
    assert table["interval_ms"] == [None, 30_000, 1_500, None, None]


# --- the page ------------------------------------------------------------------------------


def test_page_embeds_plotly_once_packed_and_references_nothing_remote(tmp_path: Path) -> None:
    html = render_rebalance(read_results(write_results(tmp_path / "r", synthetic_scores(40))))
    blobs = re.findall(r'id="plotly-js-packed">(.*?)</script>', html, re.S)
    assert len(blobs) == 1
    unpacked = gzip.decompress(base64.b64decode(blobs[0])).decode("utf-8")
    assert unpacked == page.plotly.offline.get_plotlyjs()
    figures = _unpacked(html, "plotly-figures-packed")
    assert [entry["id"] for entry in figures["figures"]] == [
        "churn-balance-chart", "optimal-gap-chart", "revocation-chart", "recorded-chart",
        "timeline-chart"]  # fmt: skip
    assert html.count("Plotly.newPlot(") == 1  # the loader draws every figure
    assert "<script src" not in html.replace(" ", "") and 'src="http' not in html
    assert "cdn.plot.ly" not in html


def test_page_inlines_the_timeline_script_shipped_as_package_data() -> None:
    from importlib import resources

    shipped = resources.files("dashboards").joinpath("static/rebalance-timeline.js")
    script = shipped.read_text(encoding="utf-8")
    assert "trace-data-packed" in script
    html = render_rebalance(results_of(_hand_scores()))
    assert html.endswith(f"<script>\n\n{script}\n</script>\n</body>\n</html>\n")
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert re.search(r'dashboards = \[[^\]]*"static/\*\.js"', pyproject)


def test_same_results_in_any_row_order_give_the_same_bytes(tmp_path: Path) -> None:
    scores = synthetic_scores(50, seed=11)
    shuffled = scores.sample(frac=1.0, random_state=4).reset_index(drop=True)
    first = render_rebalance(results_of(scores, source="r"))
    second = render_rebalance(results_of(shuffled, source="r"))
    assert first == second


def test_hostile_ids_reach_the_page_only_escaped() -> None:
    scores = _rows(
        dict(trace_id=HOSTILE, assignor="range", generation=1, moved=5, spread=2, revoked=1),
        dict(trace_id=SCRIPT_BREAKOUT, assignor=HOSTILE, generation=1, moved=1, spread=1),
        dict(trace_id=HOSTILE, assignor="recorded", generation=1, moved=2, spread=1),
    )
    errors = ({"trace_id": HOSTILE, "file": SCRIPT_BREAKOUT, "line": 2,
               "reason": f"member {HOSTILE} subscribes to unknown topic {HOSTILE}"},)  # fmt: skip
    html = render_rebalance(results_of(scores, errors, source=HOSTILE), timeline_traces=5)
    # plotly.js travels packed (base64), so every character of the body is the page's own
    own_markup = html.split("<body>", 1)[1]
    assert HOSTILE not in html
    assert "<img" not in own_markup
    assert "</script><script>alert" not in html
    assert "<!--" not in own_markup
    assert "&lt;img src=x onerror=alert(1)&gt;" in own_markup
    index = _trace_data(html)
    assert set(index["ids"]) == {HOSTILE, SCRIPT_BREAKOUT}
    assert HOSTILE in index["assignors"]


@pytest.mark.parametrize("partitioned", [False, True])
def test_hostile_ids_read_from_result_files_never_leave_their_text(
    tmp_path: Path, partitioned: bool
) -> None:
    hostile_assignor = HOSTILE + "/a=b%20\u2028"
    scores = synthetic_scores(6, seed=3, trace_prefix=SCRIPT_BREAKOUT + "\u2028\u2029&")
    scores["assignor"] = scores["assignor"].replace("sticky", hostile_assignor)
    scores["protocol"] = np.where(scores["assignor"] == "range", SCRIPT_BREAKOUT, "eager")
    errors = [{"trace_id": SCRIPT_BREAKOUT, "file": HOSTILE, "reason": HOSTILE, "value": HOSTILE}]
    directory = write_results(tmp_path / "r", scores, partitioned=partitioned, errors=errors)
    html = render_rebalance(read_results(directory), timeline_traces=6)
    assert HOSTILE not in html and "</script><script>alert" not in html
    for script in re.finditer(r"<script[^>]*>(.*?)</script>", html, re.S):
        assert "\u2028" not in script.group(1) and "\u2029" not in script.group(1)
        assert "<!--" not in script.group(1)
    index = _trace_data(html)
    assert hostile_assignor in index["assignors"]
    assert all(trace_id.startswith(SCRIPT_BREAKOUT) for trace_id in index["ids"])
    assert _protocol_cells(html)["range"] == SCRIPT_BREAKOUT


def test_partition_directory_name_that_is_no_utf8_is_an_input_error(tmp_path: Path) -> None:
    directory = write_results(tmp_path / "r", synthetic_scores(3, seed=1), partitioned=True)
    dataset = os.fsencode(directory / "scores.parquet")
    os.rename(dataset + b"/assignor=range", dataset + b"/assignor=r\xffnge")
    with pytest.raises(InputError, match=r"assignor: partition directory name is not valid UTF-8"):
        read_results(directory)
    result = _dashboard(str(directory), "-o", str(tmp_path / "o.html"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "assignor=r\\udcffnge" in result.output


def test_embedded_json_round_trips_and_cannot_close_its_script() -> None:
    value = {"ids": [SCRIPT_BREAKOUT, HOSTILE, "a&b", "\u2028"]}
    embedded = page.embed_json(value)
    assert "<" not in embedded and ">" not in embedded and "\u2028" not in embedded
    assert json.loads(embedded) == value


def test_page_size_grows_per_trace_slowly_enough_for_twenty_thousand_under_six_megabytes() -> None:
    """The page's fixed part plus its per-trace growth, measured at 1,000 and 2,000 traces
    (every trace searchable), projects to under 6 MB at 20,000 (the slow test renders them)."""
    sizes = {}
    for count in (1_000, 2_000):
        scores = synthetic_scores(count, seed=9, recorded_every=0, interval_ms=30_000)
        html = render_rebalance(results_of(scores))
        assert len(_trace_data(html)["ids"]) == count
        sizes[count] = len(html.encode("utf-8"))
    per_trace = (sizes[2_000] - sizes[1_000]) / 1_000
    projected = sizes[1_000] + per_trace * 19_000
    assert per_trace > 0, per_trace
    assert projected < 6_000_000, projected


@pytest.mark.slow
def test_twenty_thousand_traces_by_four_assignors_render_under_six_megabytes(
    tmp_path: Path,
) -> None:
    scores = synthetic_scores(20_000, seed=9, recorded_every=0)
    results_dir = write_results(tmp_path / "big", scores, partitioned=True, protocol_in="summary")
    written = write_rebalance_page(results_dir, tmp_path / "big.html")
    assert written.traces == 20_000 and len(written.assignors) == 4
    assert written.size_bytes < 6_000_000, written.size_bytes
    index = _trace_data(written.path.read_text(encoding="utf-8"))
    assert len(index["ids"]) == 20_000 and sum(index["lengths"]) == scores["generation"].size // 4
    assert len(index["worst"]) == aggregation.DEFAULT_TIMELINE_TRACES


def test_write_atomically_replaces_the_page_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.html"
    page.write_atomically(target, "first")
    page.write_atomically(target, "second")
    assert target.read_text() == "second"
    assert [path.name for path in target.parent.iterdir()] == ["report.html"]


def test_page_head_names_ktk_as_generator_in_its_first_bytes() -> None:
    html = render_rebalance(results_of(_hand_scores()))
    assert page.GENERATOR_META in html[: html.index("</head>")]
    assert page.is_ktk_page(html.encode()[:4096])
    assert page.is_ktk_page(render_replication(s1_like_result()).encode()[:4096])


def test_a_foreign_page_quoting_the_generator_meta_in_its_body_is_not_taken_for_ktks() -> None:
    foreign = f"<!DOCTYPE html><html><head><title>notes</title></head><body>{page.GENERATOR_META}"
    assert not page.is_ktk_page(foreign.encode())
    assert not page.is_ktk_page(b"plain text " + page.GENERATOR_META.encode())


# --- replication page ----------------------------------------------------------------------


def test_replication_rows_read_per_step_states_and_new_acknowledgements() -> None:
    rows = timeline_rows(s1_like_result())
    assert [row.newly_acked for row in rows][:5] == [(), ("m1",), (), (), ("m2",)]
    assert rows[7].isr == ("1",) and rows[7].leader == "1"
    assert rows[7].replicas["1"].leader_epoch == 1
    assert rows[5].replicas["1"].online is False


def test_replication_page_marks_lost_acks_isr_changes_and_violations() -> None:
    html = render_replication(s1_like_result())
    steps = _table(html, "steps-table")
    isr_column = [text for text, _ in steps[0]].index("ISR")
    changed = [row[0][0] for row in steps[1:] if "(changed)" in row[isr_column][0]]
    assert changed == ["7", "8"]
    violations = _table(html, "violations-table")
    assert violations[1][0][0] == "StrongIsr" and violations[1][1][0] == "7"
    assert '<span class="lost">m2</span>' in html
    assert "m2 (acknowledged, then lost)" in html
    assert html.count("Plotly.newPlot(") == 1


def test_replication_page_escapes_record_values_consumers_and_details(tmp_path: Path) -> None:
    result = s1_like_result(record_prefix=HOSTILE, consumer=SCRIPT_BREAKOUT)
    result["name"] = HOSTILE
    result["violations"][0]["invariant"] = HOSTILE
    path = write_replication_page(result, tmp_path / "replication.html")
    html = path.read_text(encoding="utf-8")
    assert HOSTILE not in html and "</script><script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;1" in html


def test_replication_result_without_timeline_still_renders_the_outcome() -> None:
    result = s1_like_result()
    del result["timeline"]
    html = render_replication(result)
    assert "has no timeline" in html and "Plotly.newPlot(" not in html


def test_malformed_replication_timeline_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"timeline\[1\]: must be an object"):
        render_replication({"timeline": [{"step": 0}, "crash 2"]})


# --- command line --------------------------------------------------------------------------


def _cli() -> typer.Typer:
    from ktk.commands import dashboard

    app = typer.Typer()
    app.callback()(lambda: None)
    dashboard.register(app)
    return app


def test_cli_writes_the_report_and_says_what_it_holds(tmp_path: Path) -> None:
    results_dir = write_results(tmp_path / "r", synthetic_scores(8))
    output = tmp_path / "report.html"
    result = CliRunner().invoke(_cli(), ["dashboard", str(results_dir), "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert "8 traces x 5 assignors" in result.output
    assert output.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_cli_renders_a_replication_result_file(tmp_path: Path) -> None:
    result_file = tmp_path / "s1.json"
    result_file.write_text(json.dumps(s1_like_result()), encoding="utf-8")
    result = CliRunner().invoke(
        _cli(), ["dashboard", str(result_file), "-o", str(tmp_path / "s1.html")]
    )
    assert result.exit_code == 0, result.output
    assert "StrongIsr" in (tmp_path / "s1.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("make_input", ["missing", "no-scores", "bad-json"])
def test_cli_reports_unreadable_results_in_one_line_with_exit_2(
    tmp_path: Path, make_input: str
) -> None:
    target = tmp_path / "input"
    if make_input == "no-scores":
        target.mkdir()
    elif make_input == "bad-json":
        target = tmp_path / "result.json"
        target.write_text("{not json", encoding="utf-8")
    result = CliRunner().invoke(_cli(), ["dashboard", str(target), "-o", str(tmp_path / "o.html")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "o.html").exists()


def _dashboard(*args: str) -> Result:
    return CliRunner().invoke(_cli(), ["dashboard", *args])


def test_cli_refuses_to_overwrite_a_foreign_file_and_leaves_it_intact(tmp_path: Path) -> None:
    results_dir = write_results(tmp_path / "r", synthetic_scores(4))
    output = tmp_path / "notes.html"
    output.write_text("<!DOCTYPE html><title>my notes</title>", encoding="utf-8")
    result = _dashboard(str(results_dir), "-o", str(output))
    assert result.exit_code == 2
    assert "refusing to overwrite" in result.output and "--force" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert output.read_text(encoding="utf-8") == "<!DOCTYPE html><title>my notes</title>"


def test_cli_replaces_an_earlier_ktk_page(tmp_path: Path) -> None:
    output = tmp_path / "report.html"
    result_file = tmp_path / "s1.json"
    result_file.write_text(json.dumps(s1_like_result()), encoding="utf-8")
    assert _dashboard(str(result_file), "-o", str(output)).exit_code == 0
    for traces in (4, 6):
        results_dir = write_results(tmp_path / f"r{traces}", synthetic_scores(traces))
        result = _dashboard(str(results_dir), "-o", str(output))
        assert result.exit_code == 0, result.output
        assert f"{traces} traces × 5 assignors" in output.read_text(encoding="utf-8")


def test_cli_force_replaces_a_foreign_file(tmp_path: Path) -> None:
    results_dir = write_results(tmp_path / "r", synthetic_scores(4))
    output = tmp_path / "notes.html"
    output.write_text("my notes", encoding="utf-8")
    result = _dashboard(str(results_dir), "-o", str(output), "--force")
    assert result.exit_code == 0, result.output
    assert page.is_ktk_page(output.read_bytes()[:4096])


@pytest.mark.parametrize("target", ["errors.jsonl", "summary.parquet", "part", "directory"])
def test_cli_never_writes_over_an_input_or_a_directory_even_with_force(
    tmp_path: Path, target: str
) -> None:
    results_dir = write_results(
        tmp_path / "r", synthetic_scores(4), partitioned=target == "part", errors=[{"a": 1}]
    )
    if target == "part":
        output = sorted((results_dir / "scores.parquet").rglob("*.parquet"))[0]
    elif target == "directory":
        output = results_dir
    else:
        output = results_dir / target
    files = sorted(path for path in results_dir.rglob("*") if path.is_file())
    before = [path.read_bytes() for path in files]
    for flags in ((), ("--force",)):
        result = _dashboard(str(results_dir), "-o", str(output), *flags)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
    assert sorted(path for path in results_dir.rglob("*") if path.is_file()) == files
    assert [path.read_bytes() for path in files] == before


def test_cli_never_writes_over_the_replication_result_it_reads(tmp_path: Path) -> None:
    result_file = tmp_path / "s1.json"
    text = json.dumps(s1_like_result())
    result_file.write_text(text, encoding="utf-8")
    result = _dashboard(str(result_file), "-o", str(result_file), "--force")
    assert result.exit_code == 2 and "it is the input" in result.output
    assert result_file.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    "content",
    [b'{"name": "s\\ud800"}', b"[" * 100_000, b'{"hw": ' + b"7" * 5000 + b"}"],
    ids=["lone-surrogate", "deep-nesting", "huge-integer"],
)
def test_cli_reports_a_bad_replication_result_in_one_line(tmp_path: Path, content: bytes) -> None:
    result_file = tmp_path / "s1.json"
    result_file.write_bytes(content)
    result = _dashboard(str(result_file), "-o", str(tmp_path / "s1.html"))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert str(result_file) in result.output
    assert not (tmp_path / "s1.html").exists()


@pytest.mark.parametrize(
    "content",
    [b"[" * 100_000, b'{"ranking": ' + b"7" * 5000 + b"}", b'{"headline": NaN}', b"{"],
    ids=["deep-nesting", "huge-integer", "nan", "not-json"],
)
def test_cli_reports_a_bad_verdict_file_in_one_line(tmp_path: Path, content: bytes) -> None:
    directory = write_results(tmp_path / "r", synthetic_scores(4, seed=1))
    (directory / "verdict.json").write_bytes(content)
    result = _dashboard(str(directory), "-o", str(tmp_path / "o.html"))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert "verdict.json" in result.output and "not a JSON document" in result.output
    assert not (tmp_path / "o.html").exists()


@pytest.mark.parametrize("case", ["summary-absent", "scores-lone-surrogate-trace-id"])
def test_cli_reports_a_bad_result_file_in_one_line_with_exit_2(tmp_path: Path, case: str) -> None:
    name, spoil, _ = BAD_RESULT_FILES[case]
    directory = write_results(tmp_path / "r", synthetic_scores(4, seed=1))
    spoil(directory / name)
    (directory / "errors.jsonl").write_bytes(b"{}\n")
    result = _dashboard(str(directory), "-o", str(tmp_path / "o.html"))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "o.html").exists()


def test_interrupted_write_leaves_the_earlier_page_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "out" / "report.html"
    write_rebalance_page(write_results(tmp_path / "r1", synthetic_scores(3)), output)
    earlier = output.read_bytes()
    later = write_results(tmp_path / "r2", synthetic_scores(5))

    def interrupted(source: object, target: object) -> None:
        raise KeyboardInterrupt

    def disk_full(source: object, target: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", interrupted)
        with pytest.raises(KeyboardInterrupt):
            write_rebalance_page(later, output)
    assert output.read_bytes() == earlier
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", disk_full)
        result = _dashboard(str(later), "-o", str(output))
    assert result.exit_code == 2 and "the disk is full" in result.output
    assert output.read_bytes() == earlier
    assert [path.name for path in output.parent.iterdir()] == ["report.html"]


# --- worked examples -----------------------------------------------------------------------


@pytest.mark.parametrize("module", [page, dashboard_errors, reading, aggregation, replication])
def test_module_examples_hold(module: object) -> None:
    outcome = doctest.testmod(module, raise_on_error=False)  # type: ignore[arg-type]
    assert outcome.attempted > 0 and outcome.failed == 0


def test_replication_page_of_a_real_simulator_run_marks_each_violation_step() -> None:
    scenario_file = Path(__file__).resolve().parent.parent / "examples" / "scenarios"
    scenario_file = scenario_file / "s1-two-round-hw-lag.yaml"
    from replication.scenario import load_scenario
    from replication.sim import run_scenario

    result = run_scenario(load_scenario(scenario_file)).to_json()
    rows = timeline_rows(result)
    assert [row.step for row in rows] == [entry["step"] for entry in result["timeline"]]
    acked_at = [record for row in rows for record in row.newly_acked]
    assert sorted(acked_at) == sorted(result["acked"])
    html = render_replication(result)
    violation_steps = {str(violation["step"]) for violation in result["violations"]}
    classes = _row_classes(html, "steps-table")
    assert {step for step, css in classes.items() if css == "violation"} == violation_steps


@pytest.mark.spark
@pytest.mark.slow
def test_results_written_by_spark_partitioned_by_assignor_read_like_a_single_file(
    spark, tmp_path: Path
) -> None:
    scores = synthetic_scores(25, seed=6)
    scores["rack_mismatch"] = scores["rack_mismatch"].astype("float64")
    single = read_results(write_results(tmp_path / "single", scores, protocol_in="summary"))
    summary = summary_frame(scores).assign(protocol="eager")
    summary["protocol"] = summary["protocol"].where(
        summary["assignor"] != "cooperative-sticky", "cooperative"
    )
    for column in summary.columns[2:]:
        if str(summary[column].dtype) == "Int64":
            summary[column] = summary[column].astype("int64")
    spark_dir = tmp_path / "spark"
    spark_dir.mkdir()
    spark.createDataFrame(scores).repartition(2).write.partitionBy("assignor").parquet(
        str(spark_dir / "scores.parquet")
    )
    spark.createDataFrame(summary).coalesce(1).write.partitionBy("assignor").parquet(
        str(spark_dir / "summary.parquet")
    )
    names = {path.name for path in (spark_dir / "scores.parquet").iterdir()}
    assert "_SUCCESS" in names and "assignor=cooperative-sticky" in names
    assert any(path.name.endswith(".crc") for path in (spark_dir / "summary.parquet").rglob("*"))
    from_spark = read_results(spark_dir)
    pd.testing.assert_frame_equal(from_spark.scores, single.scores)
    pd.testing.assert_frame_equal(from_spark.summary, single.summary)
    assert from_spark.protocols == single.protocols


# --- verdict (results version 3) -----------------------------------------------------------


def _with_verdict(directory: Path) -> Path:
    """Add version 3 cost columns to a synthetic results directory and write its verdict.json
    with the domain's own writer pieces."""
    from assignors.traces.results import read_summary
    from assignors.traces.verdict import build_verdict, verdict_json

    path = directory / "summary.parquet"
    summary = pq.read_table(path).to_pandas()
    eager = summary["assignor"].isin(["range", "roundrobin", "sticky"])
    summary["total_paused_partition_seconds"] = np.where(
        eager, summary["total_revoked"] * 3.0, summary["total_moved"] * 3.0
    ).astype("float64")
    summary["total_excess_moved"] = (summary["total_moved"] // 2).astype("int64")
    summary["max_load_imbalance"] = 1.0 + summary["max_spread"] / 10.0
    pq.write_table(pa.Table.from_pandas(summary, preserve_index=False), path)
    rows = read_summary(directory)
    (directory / "verdict.json").write_bytes(
        verdict_json(build_verdict(rows, {"round_seconds": 3.0, "heartbeat_seconds": 5.0}))
    )
    return directory


def test_verdict_section_comes_first_and_says_which_assignor_to_adopt(tmp_path: Path) -> None:
    results_dir = _with_verdict(write_results(tmp_path / "r", synthetic_scores(30, seed=3)))
    verdict = json.loads((results_dir / "verdict.json").read_text())
    html = render_rebalance(read_results(results_dir))
    assert html.index('id="verdict"') < html.index('id="summary"')
    assert f"adopt <strong>{page.escape(verdict['headline'])}</strong>" in html
    for entry in verdict["ranking"]:
        assert page.escape(entry["reason"]) in html
    assert 'id="verdict-chart"' in html
    assert "a round lasts 3 s, a heartbeat 5 s" in html


def test_results_without_verdict_json_say_how_to_get_one(tmp_path: Path) -> None:
    html = render_rebalance(read_results(write_results(tmp_path / "r", synthetic_scores(5))))
    assert "These results carry no verdict.json" in html
    assert 'id="verdict-chart"' not in html


def test_a_broken_verdict_json_is_one_input_error(tmp_path: Path) -> None:
    results_dir = write_results(tmp_path / "r", synthetic_scores(3))
    (results_dir / "verdict.json").write_text("{not json")
    with pytest.raises(InputError, match=r"verdict\.json: not a JSON document"):
        read_results(results_dir)
    (results_dir / "verdict.json").write_text("[]")
    with pytest.raises(InputError, match="not a verdict document"):
        read_results(results_dir)


def test_every_summary_column_header_has_a_tooltip_with_its_unit() -> None:
    html = render_rebalance(results_of(_hand_scores()))
    head = re.search(r'<table id="summary-table"><thead><tr>(.*?)</tr></thead>', html, re.S)
    assert head is not None
    headers = re.findall(r"<th([^>]*)>", head.group(1))
    assert len(headers) == 2 + len(aggregation.TABLE_COLUMNS)
    assert all('title="' in attributes for attributes in headers)
    for column in aggregation.TABLE_COLUMNS:
        assert "(" in column.title and ")" in column.title  # the unit, in parentheses


def test_verdict_chart_carries_quartiles_not_every_trace() -> None:
    per_trace = pd.DataFrame(
        {"assignor": ["a"] * 100 + ["b"] * 100, "paused": [float(i) for i in range(200)]}
    )
    spreads = aggregation.paused_spreads(per_trace, ["b", "a"])
    assert list(spreads.index) == ["b", "a"]
    assert spreads.loc["a"].tolist() == [0.0, 24.75, 49.5, 74.25, 94.0, 99.0]


@pytest.mark.slow
def test_twenty_thousand_traces_with_the_verdict_stay_under_six_megabytes(tmp_path: Path) -> None:
    scores = synthetic_scores(20_000, seed=9, recorded_every=0)
    results_dir = _with_verdict(write_results(tmp_path / "big", scores, protocol_in="summary"))
    written = write_rebalance_page(results_dir, tmp_path / "big.html")
    assert written.traces == 20_000
    assert written.size_bytes < 6_000_000, written.size_bytes
    assert 'id="verdict-chart"' in written.path.read_text(encoding="utf-8")
