"""benchmarks/make_traces.py writes the large traces the scale figures are taken on: its
streamed writer must keep producing a trace that reads as the calls and frames it was
asked for (it broke once, unnoticed, when the tests' writer renamed a field)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from retrace.trace.reader import read_counts

ROOT = Path(__file__).resolve().parents[2]


def test_a_streamed_trace_reads_as_the_calls_and_frames_asked_for(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/make_traces.py"), "--calls", "25005", tmp_path],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    counts, damage = read_counts(str(tmp_path / "calls-25005.trace"))
    assert damage is None
    # a frame ends every 10,000 calls; the context's few set-up calls come first
    assert counts.frames == 2 and counts.after_last_frame == 5005
    assert 0 < counts.calls - 25005 - counts.frames < 20
