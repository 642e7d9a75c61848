"""The ground every ktk package stands on: one error base, safe outputs, input limits.

A leaf: it imports nothing of ktk (and nothing beyond the standard library), so the domain
packages, the Spark jobs, the dashboards and the command line can all share it without
pointing at each other.
"""
