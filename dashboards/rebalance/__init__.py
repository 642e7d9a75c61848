"""The rebalance comparison dashboard: replay results -> one self-contained HTML page.

The work is split by concern: :mod:`~dashboards.rebalance.reading` turns a results directory
into typed tables, :mod:`~dashboards.rebalance.aggregation` computes what the page shows,
:mod:`~dashboards.rebalance.figures` draws it and :mod:`~dashboards.rebalance.page` writes the
HTML (its script is the package file ``dashboards/static/rebalance-timeline.js``).
"""

from __future__ import annotations

from dashboards.rebalance.page import PageSummary, render_rebalance, write_rebalance_page
from dashboards.rebalance.reading import RebalanceResults, read_results

__all__ = [
    "PageSummary",
    "RebalanceResults",
    "read_results",
    "render_rebalance",
    "write_rebalance_page",
]
