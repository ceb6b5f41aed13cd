"""The tile readback that eglretrace 11.1 dies on, and retrace replays.

traces/readback-pixels.trace (traces/src/readbacks.c) reads a 64 x 64 float tile of its
frame into an image 4096 pixels wide (GL_PACK_ROW_LENGTH 4096): eglretrace hands the
driver a buffer sized for the tile alone, the driver writes rows 4096 pixels apart past
it, and eglretrace dies of SIGSEGV (or of SIGABRT, where glibc's malloc finds the damage
first, or hangs on the malloc lock the damage left taken). retrace sizes the destination
by the pack state and draws the frames of the same program without readbacks
(tests/gl/test_readbacks.py).
"""

from __future__ import annotations

import os
import signal
import subprocess

from conftest import TRACES, reference_tool, run_retrace


def test_eglretrace_crashes_on_the_tile_readback_and_retrace_does_not():
    trace = str(TRACES / "readback-pixels.trace")
    env = {**os.environ, "WAFFLE_PLATFORM": "surfaceless_egl"}
    # the driver's rows land past eglretrace's buffer: a fault, glibc's malloc finding its
    # heap overwritten (SIGABRT), or a hang on a malloc lock the overrun left taken, whichever
    # the heap's layout makes come first; it replays in well under a second when it works
    try:
        done = subprocess.run(
            [reference_tool("eglretrace"), "-b", trace], capture_output=True, env=env, timeout=60
        )
    except subprocess.TimeoutExpired as hung:
        assert b"Rendered" not in (hung.stdout or b"")
    else:
        crashes = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS)
        assert done.returncode in {c for s in crashes for c in (-s, 128 + s)}, done.returncode
        assert b"Rendered" not in done.stdout
    r = run_retrace("replay", "-b", "--strict", trace)
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert r.stdout.startswith(b"Rendered 3 frames")
