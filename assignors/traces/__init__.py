"""Rebalance traces: the format, trace files, replay through assignors, scoring with exact
references, result files, the seeded generator and the importers of real group history.

- :mod:`assignors.traces.format`: the trace model (format v1), row validation, Arrow schema.
- :mod:`assignors.traces.files`: finding, reading and writing trace files.
- :mod:`assignors.traces.replay`: one trace through one assignor, generation by generation.
- :mod:`assignors.traces.scoring`: validity, balance and churn of a generation, exact references.
- :mod:`assignors.traces.results`: the result directory a replay writes.
- :mod:`assignors.traces.generate`: seeded synthetic histories.
- :mod:`assignors.traces.importers`: real history (coordinator logs, dump-log, formatter) in.
"""
