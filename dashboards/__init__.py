"""Self-contained HTML dashboards built from result files (no network needed to view them)."""
