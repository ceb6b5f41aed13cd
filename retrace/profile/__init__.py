"""Profiling: metric selections, the pass driver, and what backends see of the replay."""
