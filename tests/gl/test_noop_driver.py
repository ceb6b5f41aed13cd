"""Replay under Mesa's noop driver (GALLIUM_NOOP=1: llvmpipe accepting every call and
drawing nothing, what Mesa developers time the CPU side of GL with).

That driver stores into the client vertex arrays a draw reads (`_vm.c`, "the data pool"),
which made every trace with client arrays a SIGSEGV at its first draw from one; eglretrace,
whose arrays are heap memory, replays most of them to the end (the table is in
traces/corpus/README.md). Every committed trace replays to the end under it, except where
the driver crashes by itself, in eglretrace too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES, run_retrace

# Mesa 22.3's noop driver crashes here in eglretrace too: glMapBufferRange with
# GL_MAP_INVALIDATE_RANGE_BIT (its threaded context's buffer invalidation).
MAP_CRASH = TRACES / "piglit-map-buffer-range.trace"
BASE = [
    TRACES / line.split("\t")[0] for line in (TRACES / "manifest.tsv").read_text().splitlines()[1:]
]
CASES = [t for t in BASE + sorted((TRACES / "corpus").glob("*.trace")) if t != MAP_CRASH]


def noop_replay(trace: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GALLIUM_NOOP="1")
    return subprocess.run(
        [sys.executable, "-m", "retrace", "replay", "-b", str(trace)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def frames_of(trace: Path) -> int:
    return json.loads(run_retrace("info", str(trace), check=True).stdout)["FramesCount"]


@pytest.mark.parametrize("trace", CASES, ids=lambda t: t.name)
def test_every_trace_replays_to_the_end_under_the_noop_driver(trace):
    r = noop_replay(trace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Rendered {frames_of(trace)} frames"), r.stdout


def test_a_crash_of_the_noop_driver_itself_is_the_drivers():
    """Where the driver crashes by itself, retrace says so in one line naming the call."""
    r = noop_replay(MAP_CRASH)
    if r.returncode == 0:  # a Mesa whose noop driver does not crash there
        assert r.stdout.startswith(f"Rendered {frames_of(MAP_CRASH)} frames"), r.stdout
        return
    # The driver writes past the buffer it mapped at call 387: a fault there, or, where
    # that memory is the heap's (its layout varies from run to run), a corruption that the
    # C library aborts on later, having said so on stderr itself. retrace's own is one line.
    lines = r.stderr.splitlines()
    ours = [line for line in lines if line.startswith("retrace") or "Traceback" in line]
    assert r.stdout == "" and ours == lines[-1:], r.stderr
    assert re.match(
        r"retrace: error: driver crashed \((SIGSEGV\) at call 387 glMapBufferRange\("
        r"|SIGABRT\) at call \d+ gl)",
        ours[0],
    ), r.stderr
