"""Metric backends (installed as retrace.backends)."""
