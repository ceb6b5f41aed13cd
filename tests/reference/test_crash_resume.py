"""glretrace crashes on the trace whose driver crash retrace contains
(tests/gl/test_crash_resume.py).
"""

from __future__ import annotations

import os
import signal
import subprocess

from conftest import reference_tool
from gl.test_crash_resume import crashing_trace


def test_glretrace_crashes_on_the_same_trace(tmp_path, x_display):
    trace = tmp_path / "crash.trace"
    crashing_trace(trace)
    env = dict(os.environ, DISPLAY=x_display)
    r = subprocess.run(
        [reference_tool("glretrace"), str(trace)], capture_output=True, env=env, timeout=120
    )
    assert r.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), r.returncode
