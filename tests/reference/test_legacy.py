"""The legacy profiler (--pcpu --pgpu --ppd --pmem --pframe-times) against Debian's glretrace.

Both replay the sample traces for real (retrace on headless EGL, glretrace on a
private Xvfb); the expected lines, call sets and pixel counts are glretrace's
own output, read in the test, never written down from retrace's.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import apitrace_dump, reference_tool
from gl.test_legacy import (
    CPU,
    CPU_DURA,
    GEARS,
    GLMARK,
    GPU_DURA,
    GPU_START,
    MEMORY,
    NAME,
    NO,
    PIXELS,
    PROGRAM,
    SAMPLES,
    VSIZE_START,
    calls,
    ours,
    with_frames,
)

HEADER = (
    "# call no gpu_start gpu_dura cpu_start cpu_dura vsize_start vsize_dura "
    "rss_start rss_dura pixels program name"
)


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


def structure(lines: list[str]) -> list[tuple[str, ...]]:
    """Call lines as (no, program, name), and the frame_end lines, in order."""
    out: list[tuple[str, ...]] = []
    for line in lines:
        if line.startswith("call "):
            tokens = line.split(" ")
            out.append((tokens[NO], tokens[PROGRAM], tokens[NAME]))
        elif line == "frame_end":
            out.append(("frame_end",))
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
