"""Progress inside a pass: a live line on a terminal, nothing extra in a pipe or a log."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

from conftest import TRACES

TRACE = TRACES / "glmark2-desktop-fbo.trace"
ARGS = [sys.executable, "-m", "retrace", "--pframes", "opengl: CPU Duration", "--repeat", "2"]


def on_a_terminal(args: list[str]) -> tuple[int, str]:
    """Run `args` with stderr a terminal: (exit status, what the terminal got)."""
    master, slave = pty.openpty()
    done = subprocess.run(args, stderr=slave, stdout=subprocess.DEVNULL, timeout=300)
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
    return done.returncode, seen.decode()


def test_a_terminal_gets_frames_of_the_total(tmp_path):
    status, text = on_a_terminal([*ARGS, "-o", str(tmp_path / "out.tsv"), str(TRACE)])
    assert status == 0
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


def test_the_live_line_counts_the_passes_once_planned(tmp_path):
    """Two passes: the line never says 'pass 1 of 1' (the plan is made at the first
    context, after the line's first label)."""
    two = [
        "--pframes",
        "opengl: Pixels Drawn, GPU Duration",
        "--pdrawcalls",
        "opengl: Pixels Drawn",
    ]
    status, text = on_a_terminal(
        [sys.executable, "-m", "retrace", *two, "-o", str(tmp_path / "out.tsv"), str(TRACE)]
    )
    assert status == 0 and "pass 1 of 2 done in" in text and "pass 2 of 2: frame " in text
    assert "of 1" not in text


def test_many_runs_print_a_line_a_second_at_most(tmp_path):
    """--repeat 100 of a short trace: not 100 lines, at most one a second and the last."""
    started = time.monotonic()
    done = subprocess.run(
        [*ARGS[:-1], "100", "-o", str(tmp_path / "out.tsv"), str(TRACES / "es2tri.trace")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    lines = done.stderr.count(" done in ")
    assert "(run 100 of 100) done in" in done.stderr and lines <= seconds + 2
