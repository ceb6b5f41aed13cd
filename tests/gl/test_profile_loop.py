"""`--loop=N` on a profile: after the replay up to the frames looped (the last frame, or
`--frames A-B`), those frames replay N more times after `--warmup` loops, and the tables
hold the N measured loops, one after the other; per-loop statistics go to stderr and the
metadata."""

from __future__ import annotations

import io
import json
import math
import statistics
from pathlib import Path

import pytest
from compare_runs import retrace
from conftest import TRACES
from tracegen import TraceWriter, glx_context

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

TRACE = TRACES / "glmark2-desktop-fbo.trace"  # 5 SwapBuffers: frames 0-4 and a partial 5
PIXELS = ["--pframes", "opengl: Pixels Drawn", "--pdrawcalls", "opengl: Pixels Drawn"]


def profile(*args: str) -> tuple[dict, str]:
    done = retrace(*args, "--quiet", str(TRACE))
    assert done.returncode == 0, done.stderr
    return read_tables(io.StringIO(done.stdout)), done.stderr


@pytest.fixture(scope="module")
def whole() -> dict:
    return profile(*PIXELS)[0]


@pytest.mark.parametrize(("loops", "first", "last"), [(3, 2, 3), (2, 1, 1)])
def test_the_tables_hold_every_loop_of_the_frames(whole, loops, first, last):
    tables, stderr = profile(*PIXELS, f"--loop={loops}", "--frames", f"{first}-{last}")
    count = last - first + 1
    frames = list(tables[Boundary.FRAME].column("Pixels Drawn"))
    assert len(frames) == loops * count
    assert frames == list(whole[Boundary.FRAME].column("Pixels Drawn")[first : last + 1]) * loops
    draws, all_draws = tables[Boundary.DRAWCALL], whole[Boundary.DRAWCALL]
    once = [r for r in all_draws.rows() if first <= r.frame <= last]
    assert once
    expected = [
        (r.call_no, r.name, r.program, r.frame - first + k * count, r.values)
        for k in range(loops)
        for r in once
    ]
    assert [(r.call_no, r.name, r.program, r.frame, r.values) for r in draws.rows()] == expected
    assert draws.frames_ended == loops * count
    looped = f"frame {first}" if first == last else f"frames {first}-{last}"
    assert f"retrace: warning: --loop replayed {looped} again;" in stderr


def test_without_frames_the_last_frame_loops_and_callbacks_measure_it(whole):
    tables, _ = profile("--pcalls", "cpu: Wall Duration", "--loop=2")
    calls = tables[Boundary.CALL]
    last = max(r.frame for r in whole[Boundary.DRAWCALL].rows())  # the last complete frame
    once = [r for r in whole[Boundary.DRAWCALL].rows() if r.frame == last]
    nos = [r.call_no for r in calls.rows()]
    assert len(nos) % 2 == 0 and nos[: len(nos) // 2] == nos[len(nos) // 2 :]
    assert {r.call_no for r in once} <= set(nos)
    assert {r.frame for r in calls.rows()} == {0, 1} and calls.frames_ended == 2
    assert all(v > 0 for v in calls.column("Wall Duration"))


def test_warmup_loops_are_not_measured_and_statistics_are_kept(tmp_path):
    out = tmp_path / "loop.tsv"
    selection = ["--pframes", "opengl: GPU Duration, Pixels Drawn"]  # two passes
    done = retrace(
        *selection, "--loop=4", "--warmup", "2", "--frames", "3-4", "-o", str(out), str(TRACE)
    )
    assert done.returncode == 0, done.stderr
    frames = read_tables(io.StringIO(out.read_text()))[Boundary.FRAME]
    durations = list(frames.column("GPU Duration"))
    assert len(durations) == 8 and all(d > 0 for d in durations)
    metadata = json.loads((tmp_path / "loop.tsv.json").read_text())
    loops = metadata["loops"]
    assert (loops["count"], loops["warmup"], loops["frames"]) == (4, 2, [3, 4])
    per_loop = loops["per_loop"]["frames"]["GPU Duration"]
    assert per_loop == [durations[2 * k] + durations[2 * k + 1] for k in range(4)]
    stats = loops["statistics"]["frames"]["GPU Duration"]
    assert stats["min"] == min(per_loop) and stats["unit"] == "ns"
    assert stats["mean"] == pytest.approx(sum(per_loop) / 4)
    assert (metadata["loop"], metadata["measured_frames"]) == (4, [3, 4])
    lines = [line for line in done.stderr.splitlines() if " loops of " in line]
    assert len(lines) == 1  # one line per duration column
    assert lines[0].startswith("retrace: 4 loops of frames 3-4: frames GPU Duration per loop: min ")


def fill_trace(path: Path, clean_up: bool = False) -> Path:
    """Four frames of four blended 1024x1024 rectangles: llvmpipe's rasterizer takes tens of
    ms a frame and the swap waits for the frame before, so a frame event that does not
    hold the swap before it (and its wait) reads a fraction of one that does. `clean_up`:
    the program releases its context after the last frame, as mpv does."""
    w = TraceWriter()
    glx_context(w)
    w.call(
        "glViewport",
        ("x", "y", "width", "height"),
        {i: w.int(v) for i, v in enumerate((0, 0, 1024, 1024))},
    )
    w.call("glEnable", ("cap",), {0: w.int(0x0BE2)})  # GL_BLEND
    w.call("glBlendFunc", ("sfactor", "dfactor"), {0: w.int(0x0302), 1: w.int(0x0303)})
    for frame in range(4):
        w.call("glClear", ("mask",), {0: w.int(0x4000)})
        for i in range(4):
            rgba = (i / 4, frame / 4, 0.5, 0.3)
            w.call(
                "glColor4f",
                ("red", "green", "blue", "alpha"),
                {k: w.float(v) for k, v in enumerate(rgba)},
            )
            w.call(
                "glRectf",
                ("x1", "y1", "x2", "y2"),
                {k: w.float(v) for k, v in enumerate((-1, -1, 1, 1))},
            )
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    if clean_up:
        w.call("glXMakeCurrent", ("dpy", "drawable", "ctx"), {1: w.int(0), 2: w.null}, ret=w.true)
    path.write_bytes(w.snappy())
    return path


def test_the_last_frame_loops_before_the_programs_clean_up(tmp_path):
    """Calls after the last frame that release the context: the loops run before them (run
    first, they left the loops nothing current: GPU Duration '-', CPU a few microseconds)."""
    trace = fill_trace(tmp_path / "fill.trace", clean_up=True)
    selection = ["--pframes", "opengl: Pixels Drawn, GPU Duration", "--quiet", str(trace)]
    done = retrace(*selection, "--loop=3")
    assert done.returncode == 0, done.stderr
    frames = read_tables(io.StringIO(done.stdout))[Boundary.FRAME]
    whole = read_tables(io.StringIO(retrace(*selection).stdout))[Boundary.FRAME]
    last = whole.column("Pixels Drawn")[3]
    assert last > 0 and list(frames.column("Pixels Drawn")) == [last] * 3
    assert not any(math.isnan(v) for v in frames.column("GPU Duration"))


@pytest.mark.parametrize(
    ("trace", "selection", "frames", "warmup"),
    [
        ("glxgears.trace", "opengl: GPU Duration", None, "3"),
        ("glxgears.trace", "opengl: GPU Duration", "2-3", "0"),
        ("es2gears.trace", "opengl: GPU Duration", None, "0"),
        ("es2gears.trace", "opengl: GPU Duration", "1-3", "3"),
        ("glmark2-es2-effect2d.trace", "opengl: GPU Duration", "2-3", "3"),
        ("fill", "opengl: CPU Duration, GPU Duration", None, "3"),
        ("fill", "opengl: CPU Duration", "1-2", "3"),
        ("fill", "cpu: Wall Duration, Process CPU Duration", None, "3"),
        ("fill", "cpu: Wall Duration", "1-2", "3"),
    ],
)
def test_the_first_loop_frame_is_bracketed_like_the_others(
    tmp_path, trace, selection, frames, warmup
):
    """A frame event runs from the frame end before it (ahead of that frame's swap) to its
    own: the first loop's first frame too, not from the loop's first call. Bracketed from
    there it read 1,232 ns of GPU time where the same frame in later loops read ~400,000,
    and a few percent of the CPU time on a trace whose swaps wait: a tenth of the median
    of the same frame in the other loops is far from both. (Without --warmup, an unmeasured
    loop leads; the fill trace's first frames after the pass's glFinish are short whatever
    the bracket, its pipeline of frames refilling, so it is measured after warm-up loops.)"""
    path = fill_trace(tmp_path / "fill.trace") if trace == "fill" else TRACES / trace
    window = ["--frames", frames] if frames else []
    out = tmp_path / "loop.tsv"
    done = retrace("--pframes", selection, "--loop=6", "--warmup", warmup, *window, "-o", out, path)
    assert done.returncode == 0, done.stderr
    table = read_tables(io.StringIO(out.read_text()))[Boundary.FRAME]
    first, last = (int(f) for f in frames.split("-")) if frames else (0, 0)
    per_loop = last - first + 1
    for metric in table.metrics:
        values = list(table.column(metric))
        assert len(values) == 6 * per_loop and all(v > 0 for v in values), (metric, values)
        same_frame = values[per_loop::per_loop]  # the loops' first frame, after the first loop
        assert values[0] > statistics.median(same_frame) / 10, (metric, values)


def test_loops_in_the_api(whole):
    from retrace.api import open_trace

    result = open_trace(TRACE).profile(frames="opengl: Pixels Drawn", loop=3, frame_range="2")
    assert (
        list(result.frames["Pixels Drawn"]) == [whole[Boundary.FRAME].column("Pixels Drawn")[2]] * 3
    )
    assert result.metadata["loops"]["count"] == 3


@pytest.mark.parametrize(
    ("args", "status", "line"),
    [
        (
            ["--loop"],
            2,
            "retrace: error: --loop without a count loops until interrupted, but the selection "
            "takes 2 passes: the later ones would never run (give --loop=N)",
        ),
        (
            ["--loop=2", "--frames", "9-12"],
            2,  # refused before the replay, as without --loop
            "retrace: error: --frames 9-12: the trace has 5 frames (0-4) and 29 calls after the "
            "last one (frame 5)",
        ),
    ],
)
def test_loop_errors_are_one_line(args, status, line):
    done = retrace(*PIXELS, *args, "--quiet", str(TRACE))  # (a bare --loop before an option)
    assert done.returncode == status
    assert done.stderr.strip().splitlines()[-1] == line


@pytest.mark.parametrize("loop", ["--loop=1000000", "--loop"])
def test_an_interrupted_loop_keeps_the_loops_measured(tmp_path, loop):
    """Ctrl-C during the loops (a million, or a bare --loop: until interrupted): the tables
    hold the loops measured, not a row of '-' for every loop not run, and the statistics
    are of those."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "loops.tsv"
    args = [
        "--pframes",
        "opengl: GPU Duration",
        "--pcalls",
        "opengl: CPU Duration",
        "--frames",
        "2",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrace", *args, loop, "-o", str(out), str(TRACE)],
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("retrace: measuring into ")
        time.sleep(3)  # well into the loops (the replay before them takes 0.1 s)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGINT
    tables = read_tables(io.StringIO(out.read_text()))
    frames = list(tables[Boundary.FRAME].column("GPU Duration"))
    assert 0 < len(frames) < 1_000_000 and all(v == v and v > 0 for v in frames)
    calls = tables[Boundary.CALL]  # each loop's calls, every one measured
    assert calls.frames_ended == len(frames) and len(calls) % len(frames) == 0
    assert all(v == v for v in calls.column("CPU Duration"))
    lines = [line for line in stderr.splitlines() if " loops of " in line]
    assert [line.split(" per loop")[0] for line in lines] == [
        f"retrace: {len(frames)} loops of frame 2: frames GPU Duration",
        f"retrace: {len(frames)} loops of frame 2: calls CPU Duration",
    ]
    asked = "of 1000000" if "=" in loop else "looping until interrupted"
    assert stderr.splitlines()[-1].startswith(
        f"retrace: interrupted by SIGINT: the tables hold the {len(frames)} loops measured "
        f"({asked}); resume with: retrace profile --resume "
    )
    metadata = json.loads((tmp_path / "loops.tsv.json").read_text())
    assert metadata["loops"]["count"] == len(frames) and not metadata["complete"]
