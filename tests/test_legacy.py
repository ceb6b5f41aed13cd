"""The legacy profiler (--pcpu --pgpu --ppd --pmem --pframe-times) against Debian's glretrace.

Both replay the sample traces for real (retrace on headless EGL, glretrace on a
private Xvfb); the expected lines, call sets and pixel counts are glretrace's
own output, read in the test, never written down from retrace's.
"""

from __future__ import annotations

import io
import os
import subprocess
import time
import tracemalloc

import numpy as np
import pytest
from conftest import TRACES, apitrace_dump, reference_tool

from retrace.profile import legacy
from retrace.profile.driver import Profiler
from retrace.profile.legacy import legacy_selections, run_legacy, write_legacy
from retrace.profile.options import ProfileOptions
from retrace.vocabulary import Boundary
from retrace.writer.tsv import LegacyWriter

GEARS = TRACES / "glxgears.trace"
GLMARK = TRACES / "glmark2-build-clientarrays.trace"
SAMPLES = [GEARS, GLMARK]
HEADER = (
    "# call no gpu_start gpu_dura cpu_start cpu_dura vsize_start vsize_dura "
    "rss_start rss_dura pixels program name"
)
# token positions in a call line
NO, GPU_START, GPU_DURA, CPU_START, CPU_DURA = 1, 2, 3, 4, 5
VSIZE_START, VSIZE_DURA, RSS_START, RSS_DURA, PIXELS, PROGRAM, NAME = 6, 7, 8, 9, 10, 11, 12
GPU = (GPU_START, GPU_DURA)
CPU = (CPU_START, CPU_DURA)
MEMORY = (VSIZE_START, VSIZE_DURA, RSS_START, RSS_DURA)

# option name -> run_legacy keyword
FLAGS = {"--pcpu": "cpu", "--pgpu": "gpu", "--ppd": "pixels", "--pmem": "memory"}


@pytest.fixture(scope="session")
def glretrace(x_display):
    """glretrace's stdout lines for (trace, options), each run once per session."""
    exe = reference_tool("glretrace")
    env = {**os.environ, "DISPLAY": x_display}
    cache: dict[tuple, list[str]] = {}

    def run(trace, *options: str) -> list[str]:
        key = (str(trace), options)
        if key not in cache:
            done = subprocess.run(
                [exe, *options, str(trace)],
                capture_output=True,
                env=env,
                check=True,
                timeout=300,
                text=True,
            )
            cache[key] = done.stdout.splitlines()
        return cache[key]

    return run


def ours(trace, *options: str, **kwargs) -> list[str]:
    """retrace's lines for glretrace-style options."""
    flags = {name: False for name in FLAGS.values()}
    min_cpu_time = 1000
    for option in options:
        if option.startswith("--min-cpu-time="):
            min_cpu_time = int(option.split("=", 1)[1])
        elif option != "--pframe-times":
            flags[FLAGS[option]] = True
    out = io.StringIO()
    run_legacy(
        str(trace),
        **flags,
        frame_times="--pframe-times" in options,
        min_cpu_time=min_cpu_time,
        out=out,
        **kwargs,
    )
    return out.getvalue().splitlines()


def as_glretrace(lines: list[str]) -> list[str]:
    """Without the call lines after the last frame_end, which glretrace never prints.

    glretrace prints the pending calls at frame ends and context switches only, not
    at the end of the trace: the calls after the last SwapBuffers are measured but
    their lines lost. retrace prints them (see test_calls_after_the_last_swap).
    """
    if "frame_end" not in lines:
        return [line for line in lines if not line.startswith("call ")]
    last = len(lines) - 1 - lines[::-1].index("frame_end")
    return lines[:last] + [line for line in lines[last:] if not line.startswith("call ")]


def calls(lines: list[str]) -> list[list[str]]:
    return [line.split(" ") for line in lines if line.startswith("call ")]


def structure(lines: list[str]) -> list[tuple[str, ...]]:
    """Call lines as (no, program, name), and the frame_end lines, in order."""
    out = []
    for line in lines:
        if line.startswith("call "):
            tokens = line.split(" ")
            out.append((tokens[NO], tokens[PROGRAM], tokens[NAME]))
        elif line == "frame_end":
            out.append(("frame_end",))
    return out


def with_frames(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(frame number, tokens) of every call line."""
    frame, out = 0, []
    for line in lines:
        if line == "frame_end":
            frame += 1
        elif line.startswith("call "):
            out.append((frame, line.split(" ")))
    return out


# glretrace's --min-cpu-time also lands in --ignore-calls (its option switch falls
# through): "=0" skips call 0, a glXChooseVisual / glXGetFBConfigs call that gets
# no line anyway, so every GL call gets a line.
FULL = {
    "--pcpu --ppd": ("--pcpu", "--ppd", "--min-cpu-time=0"),
    "--pgpu": ("--pgpu",),
    "--pmem": ("--pmem",),
    "--ppd": ("--ppd",),
    "--pframe-times": ("--pframe-times",),
}


@pytest.mark.parametrize("trace", SAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("options", list(FULL), ids=str)
def test_same_lines_as_glretrace(glretrace, trace, options):
    expected = glretrace(trace, *FULL[options])
    got = as_glretrace(ours(trace, *FULL[options]))
    assert got[0] == expected[0] == HEADER
    assert structure(got) == structure(expected)
    assert calls(got), "no call lines"
    assert all(len(tokens) == 13 for tokens in calls(got))
    # the exit summary, on stdout after everything else in both
    assert got[-1].startswith("Rendered ") and expected[-1].startswith("Rendered ")
    assert got[-1].split(" ")[1] == expected[-1].split(" ")[1]  # frame count


@pytest.mark.parametrize("trace", SAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("options", [("--ppd",), FULL["--pcpu --ppd"]], ids=" ".join)
def test_pixels_as_glretrace(glretrace, trace, options):
    expected = with_frames(glretrace(trace, *options))
    got = with_frames(as_glretrace(ours(trace, *options)))
    assert [t[NO] for _, t in got] == [t[NO] for _, t in expected]
    # -1 exactly for the calls that are not draws
    assert [t[PIXELS] == "-1" for _, t in got] == [t[PIXELS] == "-1" for _, t in expected]
    draws = 0
    for (frame, mine), (_, theirs) in zip(got, expected, strict=True):
        if theirs[PIXELS] == "-1":
            continue
        draws += 1
        if trace == GEARS and frame == 0:
            # glretrace draws glxgears' first frame before its window has a size
            assert theirs[PIXELS] == "0"
            assert int(mine[PIXELS]) >= 0
        else:
            assert mine[PIXELS] == theirs[PIXELS], mine
    assert draws > 0
    assert any(int(t[PIXELS]) > 0 for _, t in got)


def test_glxgears_first_frame_draws_for_real():
    """retrace sizes the drawable from the trace, so frame 0 counts real pixels."""
    first = [t for frame, t in with_frames(ours(GEARS, "--ppd")) if frame == 0]
    assert sum(int(t[PIXELS]) for t in first if t[PIXELS] != "-1") > 0


@pytest.mark.parametrize("trace", SAMPLES, ids=lambda p: p.stem)
def test_min_cpu_time(glretrace, trace):
    full = structure(glretrace(trace, *FULL["--pcpu --ppd"]))
    kept = as_glretrace(ours(trace, "--pcpu", "--ppd"))  # glretrace's default: 1000 ns
    lines = calls(kept)
    assert lines and all(int(t[CPU_DURA]) >= 1000 for t in lines)
    # a subsequence of the full set, with every frame_end still there
    rest = iter(full)
    assert all(item in rest for item in structure(kept))
    assert structure(kept).count(("frame_end",)) == full.count(("frame_end",))
    # a threshold above every duration drops every call line, never a frame_end
    none = ours(trace, "--pcpu", "--min-cpu-time=1000000000000")
    assert calls(none) == []
    assert none.count("frame_end") == full.count(("frame_end",))
    # and 0 keeps every call
    assert structure(as_glretrace(ours(trace, "--pcpu", "--min-cpu-time=0"))) == full


@pytest.mark.parametrize("trace", SAMPLES, ids=lambda p: p.stem)
def test_calls_after_the_last_swap(glretrace, trace):
    """glretrace loses them (a bug); retrace prints them, with no frame_end after them."""
    dump = apitrace_dump(trace).decode().splitlines()
    numbered = [line.split(" ", 1) for line in dump if line[:1].isdigit()]
    last_swap = max(i for i, (_, call) in enumerate(numbered) if "SwapBuffers" in call)
    after = [(no, call.split("(", 1)[0]) for no, call in numbered[last_swap + 1 :]]
    after = [(no, name) for no, name in after if not name.startswith(("glX", "egl"))]
    got = ours(trace, "--ppd")
    last = len(got) - 1 - got[::-1].index("frame_end")
    assert [(t[NO], t[NAME]) for t in calls(got[last:])] == after
    expected = glretrace(trace, "--ppd")
    assert expected[-2:-1] == ["frame_end"]  # nothing between its last frame_end and Rendered
    assert len(structure(got)) == len(structure(expected)) + len(after)
    if trace == GLMARK:  # the sample that has calls after its last swap
        assert [no for no, _ in after] == ["2544", "2545", "2546", "2547"]


def test_cpu_columns():
    lines = calls(ours(GLMARK, "--pcpu", "--min-cpu-time=0"))
    starts = [int(t[CPU_START]) for t in lines]
    assert all(int(t[CPU_DURA]) > 0 for t in lines)
    assert starts[0] >= 0 and starts == sorted(starts) and len(set(starts)) == len(starts)
    for t in lines:
        assert all(t[i] == "0" for i in GPU + MEMORY + (PIXELS,)), t
    # a call starts after the one before it ended
    for before, after in zip(lines[:-1], lines[1:], strict=True):
        assert int(before[CPU_START]) + int(before[CPU_DURA]) <= int(after[CPU_START])


@pytest.mark.parametrize("trace", SAMPLES, ids=lambda p: p.stem)
def test_gpu_columns(glretrace, trace):
    expected = calls(glretrace(trace, "--ppd"))  # which calls are draws, per glretrace
    lines = calls(as_glretrace(ours(trace, "--pgpu")))
    assert len(lines) == len(expected)
    durations = []
    for mine, theirs in zip(lines, expected, strict=True):
        assert all(mine[i] == "0" for i in CPU + MEMORY + (PIXELS,)), mine
        if theirs[PIXELS] == "-1":  # GPU times are for draws only
            assert mine[GPU_START] == mine[GPU_DURA] == "0", mine
        else:
            assert int(mine[GPU_START]) >= 0 and int(mine[GPU_DURA]) >= 0, mine
            durations.append(int(mine[GPU_DURA]))
    assert durations and all(d > 0 for d in durations)


@pytest.mark.parametrize("trace", SAMPLES, ids=lambda p: p.stem)
def test_memory_columns(trace):
    lines = calls(ours(trace, "--pmem"))
    for t in lines:
        assert int(t[VSIZE_START]) > 0 and int(t[RSS_START]) > 0, t
        assert all(t[i] == "0" for i in GPU + CPU + (PIXELS,)), t


def test_all_options_together(glretrace):
    options = ("--pcpu", "--pgpu", "--ppd", "--pmem", "--min-cpu-time=0")
    expected = glretrace(GLMARK, *options)
    got = as_glretrace(ours(GLMARK, *options))
    assert structure(got) == structure(expected)
    for mine, theirs in zip(calls(got), calls(expected), strict=True):
        assert len(mine) == 13
        assert mine[PIXELS] == theirs[PIXELS]
        assert int(mine[CPU_DURA]) > 0 and int(mine[VSIZE_START]) > 0
        if theirs[PIXELS] == "-1":
            assert mine[GPU_START] == mine[GPU_DURA] == "0"


def test_frame_times(glretrace):
    expected = glretrace(GEARS, "--pframe-times")
    before = time.monotonic_ns()
    got = ours(GEARS, "--pframe-times")
    after = time.monotonic_ns()

    def others(lines):  # the non-call lines, numbers dropped
        return [line.rsplit(" ", 1)[0] for line in lines[1:-1] if not line.startswith("call ")]

    assert others(got) == others(expected)
    assert others(got).count("rendering_finished") == 5
    # each follows its frame_end
    for i, line in enumerate(got):
        if line == "frame_end":
            assert got[i + 1].startswith("rendering_finished ")
    stamps = [int(line.split(" ")[1]) for line in got if line.startswith("rendering_finished")]
    assert before < stamps[0] and stamps == sorted(stamps) and stamps[-1] < after
    # with only --pframe-times, call lines as glretrace's: every value 0
    assert calls(as_glretrace(got)) == calls(expected)
    assert all(t[GPU_START : PIXELS + 1] == ["0"] * 9 for t in calls(got))


def test_small_blocks_same_lines(monkeypatch):
    """Block boundaries (draw matching, frame ends) do not change the output."""
    options = ("--ppd", "--pframe-times")

    def stable(lines):
        return [
            line.split(" ")[:1] if line.startswith("rendering_finished") else line
            for line in lines[:-1]
        ]

    whole = ours(GLMARK, *options)
    for rows in (1, 3, 7):
        monkeypatch.setattr(legacy, "BLOCK_ROWS", rows)
        assert stable(ours(GLMARK, *options)) == stable(whole)


def test_selections():
    assert legacy_selections(cpu=True, gpu=False, pixels=False, memory=False) == {
        Boundary.CALL: "opengl: CPU Start, CPU Duration"
    }
    assert legacy_selections(cpu=False, gpu=True, pixels=True, memory=True) == {
        Boundary.CALL: "opengl: VSIZE Start, VSIZE Duration, RSS Start, RSS Duration",
        Boundary.DRAWCALL: "opengl: GPU Start, GPU Duration, Pixels Drawn",
    }
    # no call option: CPU Duration carries the call rows (printed as 0)
    assert legacy_selections(cpu=False, gpu=False, pixels=True, memory=False) == {
        Boundary.CALL: "opengl: CPU Duration",
        Boundary.DRAWCALL: "opengl: Pixels Drawn",
    }


def test_draws_matched_by_walking_the_call_numbers():
    nos = np.array([3, 5, 8, 9, 12])
    assert legacy._draw_mask(nos, np.array([5, 9, 20])).tolist() == [0, 1, 0, 1, 0]
    assert legacy._draw_mask(nos, np.array([], np.int64)).tolist() == [0] * 5
    # repeated numbers (not in real traces): the walk pairs them in order
    assert legacy._draw_mask(np.array([5, 5, 6]), np.array([5, 6])).tolist() == [1, 0, 1]


def test_writing_keeps_memory_bounded(tmp_path, monkeypatch):
    """Lines are written from the store a block at a time: Python memory stays at one block."""
    from test_profile import big_trace

    trace = tmp_path / "100k.trace"
    big_trace(trace, 100_000)
    profiler = Profiler(
        str(trace),
        ProfileOptions(legacy_selections(cpu=True, gpu=False, pixels=True, memory=True)),
        store_dir=str(tmp_path),
    )
    try:
        profiler.run()
        monkeypatch.setattr(legacy, "BLOCK_ROWS", 2000)
        with open(os.devnull, "w") as sink:
            writer = LegacyWriter(sink, cpu=True, pixels=True, memory=True, min_cpu_time=0)
            tracemalloc.start()
            try:
                write_legacy(profiler, writer)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    finally:
        profiler.close()
    # per-call lists of the whole trace would take 30 MB and more (measured: 33 MB
    # with one 100k-row block, 1 MB with 2000-row blocks)
    assert peak < 4_000_000, f"peak {peak} bytes"
