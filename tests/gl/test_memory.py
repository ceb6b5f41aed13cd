"""Peak memory stays flat in the trace's length: a trace four times longer, of the same
frames, replays and profiles in about the same peak RSS (the compiled trace keeps its
data in a file whose pages leave the process once run: `retrace/replay/program.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tracegen import TraceWriter, glx_context

GL_TEXTURE_2D, GL_RGBA, GL_UNSIGNED_BYTE = 0x0DE1, 0x1908, 0x1401
GL_ARRAY_BUFFER, GL_STREAM_DRAW, GL_MAP_WRITE_BIT = 0x8892, 0x88E0, 0x0002
SIDE = 256  # a 256 x 256 RGBA texture: 256 KiB a frame, and as much again through a mapping
UPLOAD = SIDE * SIDE * 4
MAPPED_AT = 0x7F0000000000  # where the traced program saw its buffer mapped
FRAMES = 60
MIB = 1024


def uploads_trace(path: Path, frames: int) -> str:
    """Every frame uploads a texture (a blob the loop passes to the driver) and fills a
    mapped buffer (a fake memcpy, a Python entry), each 256 KiB of its own, then draws."""
    w = TraceWriter()
    glx_context(w)
    for gen in ("glGenTextures", "glGenBuffers"):
        no = w.enter(gen, ("n", "names"), {0: w.int(1)})
        w.leave(no, {1: w.array(w.int(1))})
    w.call("glBindTexture", ("target", "texture"), {0: w.int(GL_TEXTURE_2D), 1: w.int(1)})
    w.call("glEnable", ("cap",), {0: w.int(GL_TEXTURE_2D)})
    w.call("glBindBuffer", ("target", "buffer"), {0: w.int(GL_ARRAY_BUFFER), 1: w.int(1)})
    w.call(
        "glBufferData",
        ("target", "size", "data", "usage"),
        {0: w.int(GL_ARRAY_BUFFER), 1: w.int(UPLOAD), 2: w.null, 3: w.int(GL_STREAM_DRAW)},
    )
    texture_args: tuple[str, ...] = (
        "target",
        "level",
        "internalformat",
        "width",
        "height",
        "border",
        "format",
    )
    texture_args += ("type", "pixels")
    for frame in range(frames):
        pixels = bytes((frame + k) & 0xFF for k in range(256)) * (UPLOAD // 256)
        fixed = (GL_TEXTURE_2D, 0, GL_RGBA, SIDE, SIDE, 0, GL_RGBA, GL_UNSIGNED_BYTE)
        w.call(
            "glTexImage2D",
            texture_args,
            {**{i: w.int(v) for i, v in enumerate(fixed)}, 8: w.blob(pixels)},
        )
        w.call(
            "glMapBufferRange",
            ("target", "offset", "length", "access"),
            {0: w.int(GL_ARRAY_BUFFER), 1: w.int(0), 2: w.int(UPLOAD), 3: w.int(GL_MAP_WRITE_BIT)},
            ret=w.opaque(MAPPED_AT),
        )
        w.call(
            "memcpy",
            ("dest", "src", "n"),
            {0: w.opaque(MAPPED_AT), 1: w.blob(pixels[::-1]), 2: w.int(UPLOAD)},
            fake=True,
        )
        w.call("glUnmapBuffer", ("target",), {0: w.int(GL_ARRAY_BUFFER)})
        w.call(
            "glRectf",
            ("x1", "y1", "x2", "y2"),
            {i: w.float(v) for i, v in enumerate((-1,) * 2 + (1,) * 2)},
        )
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return str(path)


# Runs a command and prints the peak RSS of it and its descendants in KiB (ru_maxrss of each
# process reaped). The replay child outlives retrace's own process (it lingers, and is killed
# when that ends: `contain.let_children_linger`), so this process is their subreaper, which
# waits for them too. A child's ru_maxrss starts at its parent's RSS when it was forked, so
# the command is started from this small process, not from pytest.
MEASURE = """
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
errors = child.stderr.read()
peak, status = 0, 1
while True:
    try:
        pid, waited, usage = os.wait4(-1, 0)
    except ChildProcessError:
        break
    peak = max(peak, usage.ru_maxrss)
    if pid == child.pid:
        status = os.waitstatus_to_exitcode(waited)
sys.stderr.buffer.write(errors)
print(peak)
sys.exit(status)
"""


def peak_kib(*args: str, warned: bool = False) -> int:
    """The peak RSS of a retrace command and the processes it waited for (that said nothing
    on stderr, unless `warned`)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "retrace", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and (warned or not done.stderr), done.stderr
    return int(done.stdout)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("uploads")
    return uploads_trace(folder / "short.trace", FRAMES), uploads_trace(
        folder / "long.trace", 4 * FRAMES
    )


@pytest.mark.parametrize(
    "command",
    [
        ("replay", "-b", "--strict"),
        ("--pframes=opengl: Pixels Drawn", "--pcalls=opengl: Pixels Drawn", "--strict", "--quiet"),
    ],
    ids=["replay", "two passes"],
)
def test_peak_rss_is_flat_in_the_traces_length(traces, command):
    # the long trace holds 90 MiB more data than the short one (180 frames of 512 KiB)
    short, long = (peak_kib(*command, trace) for trace in traces)
    assert long - short < 16 * MIB, (short // MIB, long // MIB)


CALLS = 200_000


def colors_trace(path: Path, calls: int) -> str:
    """One frame of `calls` glColor3f calls: an op and three arguments of 32 bytes a call
    (and 15 of metadata), and little else."""
    w = TraceWriter()
    glx_context(w)
    for k in range(calls):
        w.call(
            "glColor3f", ("red", "green", "blue"), {i: w.float((k + i) % 7 / 7) for i in range(3)}
        )
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return str(path)


@pytest.fixture(scope="module")
def colors(tmp_path_factory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("colors")
    return colors_trace(folder / "short.trace", CALLS), colors_trace(
        folder / "long.trace", 2 * CALLS
    )


@pytest.mark.parametrize(
    "command",
    [("replay", "-b"), ("--pframes=opengl: Pixels Drawn", "--quiet")],
    ids=["replay", "profile"],
)
def test_ops_that_run_once_leave_the_heap_behind_the_loop(colors, command):
    """Where no op runs again (a replay, a profile of one pass run once: `Program.once`),
    the ops and their arguments leave memory as they run, from the heap too (each array of
    these traces is under 16 MiB): twice the calls (6 MiB more of them) peak in about the
    same RSS, a profile's only by the metadata its tables read (3 MiB), a replay's not by
    that either (0.2-3 MiB measured). Kept, they peaked 9-10 MiB higher."""
    for trace in colors:  # (read once: both measured from the trace cache)
        peak_kib(*command, trace)
    short, long = (peak_kib(*command, trace) for trace in colors)
    assert long - short < 6 * MIB, (short // MIB, long // MIB)


def test_a_full_disk_under_the_data_replays_what_fitted_then_says_so(traces, tiny_tmpfs, tmp_path):
    """No room left for the compiled trace's data ($TMPDIR a 1 MiB file system, the trace
    30 MiB of uploads): the frames compiled before run and are measured, then one line
    names the data file and the reason, exit status 1."""
    short, _ = traces
    env = {**os.environ, "TMPDIR": str(tiny_tmpfs)}
    done = subprocess.run(
        [sys.executable, "-m", "retrace", "replay", "-b", short],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    error = f"retrace: error: {tiny_tmpfs} (the compiled trace's data): No space left on device"
    assert done.returncode == 1 and done.stderr == error + "\n", done.stderr
    rendered = int(done.stdout.split()[1])  # "Rendered N frames in ..."
    assert 0 < rendered < FRAMES
    out = tmp_path / "frames.tsv"
    selection = ("--pframes=opengl: GPU Duration", "--quiet", f"--store-dir={tmp_path}")
    done = subprocess.run(
        [sys.executable, "-m", "retrace", *selection, "-o", str(out), short],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr == error + "\n", done.stderr
    lines = out.read_text().splitlines()
    frames = [line.split("\t") for line in lines if line.startswith("frame\t")]
    # a row per frame the replay rendered and one for the calls after its last swap, as a
    # whole trace has
    assert len(frames) == rendered + 1 and all(cells[1].isdigit() for cells in frames)
