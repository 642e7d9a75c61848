"""Traces from :func:`assignors.traces.generate.generate_rows`, parsed and built as a reader
would (rows grouped by trace id, traces in id order): the inputs of replay tests that compare
a fast path with the path it replaces over many small groups.

>>> [trace.trace_id for trace in generated_traces("mixed", 1, groups=2)]
['rolling-restart-s1-0000', 'scale-out-s1-0001']
"""

from __future__ import annotations

from assignors.traces.format import Generation, Trace, build_trace, parse_generation
from assignors.traces.generate import generate_rows


def generated_traces(
    scenario: str,
    seed: int,
    *,
    groups: int = 4,
    members: tuple[int, int] = (3, 9),
    partitions: tuple[int, int] = (6, 60),
    max_generations: int = 8,
    source: str | None = "g.jsonl",
) -> list[Trace]:
    """``groups`` generated traces of ``scenario`` (seeded), each row parsed as line N of
    ``source``."""
    by_trace: dict[str, list[Generation]] = {}
    rows = generate_rows(
        scenario,
        groups,
        seed,
        members=members,
        partitions=partitions,
        max_generations=max_generations,
    )
    for line, row in enumerate(rows, 1):
        by_trace.setdefault(row["trace_id"], []).append(parse_generation(row, source, line))
    return [build_trace(trace_id, found) for trace_id, found in sorted(by_trace.items())]
