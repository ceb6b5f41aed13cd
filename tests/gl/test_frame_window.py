"""`--frames A-B` on a profile: only those frames are measured and tabled; the replay
before and after them runs unmeasured, so the state they start from is the trace's."""

from __future__ import annotations

import io

import pytest
from compare_runs import retrace
from conftest import TRACES

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

TRACE = TRACES / "glmark2-desktop-fbo.trace"  # 5 SwapBuffers: frames 0-4 and a partial 5
PIXELS = ["--pframes", "opengl: Pixels Drawn", "--pdrawcalls", "opengl: Pixels Drawn"]


def profile(*args: str) -> dict:
    done = retrace(*args, "--quiet", str(TRACE))
    assert done.returncode == 0, done.stderr
    return read_tables(io.StringIO(done.stdout))


@pytest.fixture(scope="module")
def whole() -> dict:
    return profile(*PIXELS)


@pytest.mark.parametrize(("spec", "first", "last"), [("2-3", 2, 3), ("4-", 4, 5), ("1", 1, 1)])
def test_a_window_holds_the_whole_profiles_rows_of_its_frames(whole, spec, first, last):
    window = profile(*PIXELS, "--frames", spec)
    frames, all_frames = window[Boundary.FRAME], whole[Boundary.FRAME]
    assert list(frames.column("Pixels Drawn")) == list(
        all_frames.column("Pixels Drawn")[first : last + 1]
    )
    draws, all_draws = window[Boundary.DRAWCALL], whole[Boundary.DRAWCALL]
    inside = [r for r in all_draws.rows() if first <= r.frame <= last]
    assert len(inside) > 0
    assert [(r.call_no, r.name, r.program, r.frame + first, r.values) for r in draws.rows()] == [
        (r.call_no, r.name, r.program, r.frame, r.values) for r in inside
    ]
    ended = min(last + 1, all_draws.frames_ended) - first
    assert draws.frames_ended == ended


def test_callback_backends_measure_only_the_window():
    window = profile("--pcalls", "cpu: Wall Duration", "--frames", "1-2")
    calls = window[Boundary.CALL]
    assert {r.frame for r in calls.rows()} == {0, 1}  # frames 1 and 2, counted from 1
    assert all(v > 0 for v in calls.column("Wall Duration"))


def test_a_bad_range_is_a_usage_error():
    done = retrace("--pframes", "opengl: Pixels Drawn", "--frames", "3-1", str(TRACE))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["retrace: error: --frames: 3-1 is an empty range"]
