"""The sample traces in traces/ are there."""

from __future__ import annotations

from conftest import SAMPLE_TRACES


def test_there_are_sample_traces():
    assert len(SAMPLE_TRACES) >= 10
    assert all(p.stat().st_size < 1 << 20 for p in SAMPLE_TRACES)
