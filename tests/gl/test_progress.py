"""Progress inside a pass: a live line on a terminal, nothing extra in a pipe or a log."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from conftest import TRACES

TRACE = TRACES / "glmark2-desktop-fbo.trace"
ARGS = [sys.executable, "-m", "retrace", "--pframes", "opengl: CPU Duration", "--repeat", "2"]


def test_a_terminal_gets_frames_of_the_total(tmp_path):
    master, slave = pty.openpty()
    done = subprocess.run(
        [*ARGS, "-o", str(tmp_path / "out.tsv"), str(TRACE)],
        stderr=slave, stdout=subprocess.DEVNULL, timeout=300,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's other side is closed and drained
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert done.returncode == 0
    text = seen.decode()
    # the first pass cannot know the frame count; the second one can
    assert "retrace: pass 1 of 1 (run 2 of 2): frame " in text
    assert "frame 1 of 5 (" in text and "frames/s" in text  # 5 SwapBuffers
    assert "retrace: pass 1 of 1 (run 2 of 2) done in" in text


def test_a_pipe_gets_only_the_lines_of_complete_runs(tmp_path):
    done = subprocess.run(
        [*ARGS, "-o", str(tmp_path / "out.tsv"), str(TRACE)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and ": frame " not in done.stderr
    assert done.stderr.count(" done in ") == 2
