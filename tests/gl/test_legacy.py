"""The legacy profiler (--pcpu --pgpu --ppd --pmem --pframe-times) on the real driver, where
no glretrace output is needed to check it (the comparisons with glretrace are in
tests/reference/test_legacy.py, which shares these helpers).
"""

from __future__ import annotations

import io
import os
import tracemalloc
from typing import Any

import pytest
from conftest import TRACES

from retrace.profile import legacy
from retrace.profile.driver import Profiler
from retrace.profile.legacy import legacy_selections, run_legacy, write_legacy
from retrace.profile.options import LegacyOptions, ProfileOptions
from retrace.writer.tsv import LegacyWriter

GEARS = TRACES / "glxgears.trace"
GLMARK = TRACES / "glmark2-build-clientarrays.trace"
SAMPLES = [GEARS, GLMARK]
# token positions in a call line
NO, GPU_START, GPU_DURA, CPU_START, CPU_DURA = 1, 2, 3, 4, 5
VSIZE_START, VSIZE_DURA, RSS_START, RSS_DURA, PIXELS, PROGRAM, NAME = 6, 7, 8, 9, 10, 11, 12
GPU = (GPU_START, GPU_DURA)
CPU = (CPU_START, CPU_DURA)
MEMORY = (VSIZE_START, VSIZE_DURA, RSS_START, RSS_DURA)

# option name -> LegacyOptions field
FLAGS = {"--pcpu": "cpu", "--pgpu": "gpu", "--ppd": "pixels", "--pmem": "memory"}


def ours(trace, *options: str, **kwargs) -> list[str]:
    """retrace's lines for glretrace-style options."""
    flags: dict[str, Any] = {name: False for name in FLAGS.values()}
    min_cpu_time = 1000
    for option in options:
        if option.startswith("--min-cpu-time="):
            min_cpu_time = int(option.split("=", 1)[1])
        elif option != "--pframe-times":
            flags[FLAGS[option]] = True
    out = io.StringIO()
    chosen = LegacyOptions(
        **flags, frame_times="--pframe-times" in options, min_cpu_time=min_cpu_time
    )
    run_legacy(str(trace), chosen, out=out, **kwargs)
    return out.getvalue().splitlines()


def calls(lines: list[str]) -> list[list[str]]:
    return [line.split(" ") for line in lines if line.startswith("call ")]


def with_frames(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(frame number, tokens) of every call line."""
    frame, out = 0, []
    for line in lines:
        if line == "frame_end":
            frame += 1
        elif line.startswith("call "):
            out.append((frame, line.split(" ")))
    return out


def test_glxgears_first_frame_draws_for_real():
    """retrace sizes the drawable from the trace, so frame 0 counts real pixels."""
    first = [t for frame, t in with_frames(ours(GEARS, "--ppd")) if frame == 0]
    assert sum(int(t[PIXELS]) for t in first if t[PIXELS] != "-1") > 0


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
def test_memory_columns(trace):
    lines = calls(ours(trace, "--pmem"))
    for t in lines:
        assert int(t[VSIZE_START]) > 0 and int(t[RSS_START]) > 0, t
        assert all(t[i] == "0" for i in GPU + CPU + (PIXELS,)), t


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


def test_writing_keeps_memory_bounded(tmp_path, monkeypatch):
    """Lines are written from the store a block at a time: Python memory stays at one block."""
    from gl.test_profile import big_trace

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
