"""PySpark jobs that distribute the domain packages' work over many traces.

A job only distributes: assignment, hashing, scoring and replication logic live in the domain
packages, so a trace replayed here gives the same rows as in plain Python."""
