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


# --- --calls CALLSET -------------------------------------------------------------------------

CALLS = [*PIXELS, "--pcalls", "pipeline: Vertices Submitted"]  # measured with callbacks


@pytest.fixture(scope="module")
def whole_calls() -> dict:
    return profile(*CALLS)


@pytest.mark.parametrize(
    ("calls", "frames"),
    [("2700-2800", None), ("2760-3000/3,3100", None), ("*/draw", "2-3"), ("2000-", "4-")],
)
def test_calls_keep_the_whole_profiles_rows_of_those_calls(whole_calls, calls, frames):
    """Call and draw-call rows are those of a whole profile whose call numbers (and kinds) the
    set selects; the frames table holds the frames from the first that holds one to the last,
    counted from the first."""
    from retrace.trace.callset import CallSet, frame_range
    from retrace.trace.flags import CallFlag, call_flags

    chosen = CallSet.parse(calls)
    first, last = frame_range(frames)
    last = 99 if last is None else last

    def picked(row) -> bool:
        flags = int(call_flags(row.name)) & int(CallFlag.RENDER | CallFlag.END_FRAME)
        return chosen.contains(row.call_no, flags) and first <= row.frame <= last

    window = profile(*CALLS, "--calls", calls, *(["--frames", frames] if frames else []))
    all_calls = [r for r in whole_calls[Boundary.CALL].rows() if picked(r)]
    assert all_calls, "the set selects calls of the trace"
    span = (all_calls[0].frame, all_calls[-1].frame)
    for boundary in (Boundary.CALL, Boundary.DRAWCALL):
        expected = [r for r in whole_calls[boundary].rows() if picked(r)]
        got = window[boundary]
        assert [(r.call_no, r.name, r.program, r.frame + span[0], _v(r)) for r in got.rows()] == [
            (r.call_no, r.name, r.program, r.frame, _v(r)) for r in expected
        ]
        assert got.frames_ended == min(span[1] + 1, whole_calls[boundary].frames_ended) - span[0]
    frames_column = whole_calls[Boundary.FRAME].column("Pixels Drawn")
    assert list(window[Boundary.FRAME].column("Pixels Drawn")) == list(
        frames_column[span[0] : span[1] + 1]
    )


def _v(row) -> tuple:
    """A row's values, '-' (NaN) as None so that rows compare equal."""
    return tuple(None if v != v else v for v in row.values)


def test_calls_in_the_api_and_the_metadata(tmp_path, whole_calls):
    import json

    from retrace.api import open_trace

    result = open_trace(TRACE).profile(
        drawcalls="opengl: Pixels Drawn", call_range="2700-2800", frame_range="0-3"
    )
    draws = result.drawcalls
    expected = [r for r in whole_calls[Boundary.DRAWCALL].rows() if 2700 <= r.call_no <= 2800]
    assert list(draws["call_no"]) == [r.call_no for r in expected]
    assert list(draws["Pixels Drawn"]) == [r.values[0] for r in expected]
    out = tmp_path / "out.tsv"
    done = retrace(*PIXELS, "--calls", "2700-2800", "--quiet", "-o", str(out), str(TRACE))
    assert done.returncode == 0, done.stderr
    metadata = json.loads((tmp_path / "out.tsv.json").read_text())
    assert (metadata["calls"], metadata["frame_range"]) == ("2700-2800", [0, None])
    assert metadata["measured_frames"] == [0, 0]  # the frame that holds those calls


AFTER = "it has 5 frames (0-4) and 29 calls after the last one (frame 5)"  # as info says


@pytest.mark.parametrize(
    ("args", "lines"),
    [
        (["--frames", "4-9"],
         [f"retrace: warning: --frames 4-9 reaches past the trace's end: {AFTER}"]),
        (["--calls", "3000-5000"], [
            "retrace: warning: --calls 3000-5000 reaches past the trace's end: it has 3368 "
            "calls (0-3367)"
        ]),
    ],
)  # fmt: skip
def test_a_part_past_the_end_is_one_warning(args, lines):
    done = retrace(*PIXELS, "--quiet", *args, str(TRACE))
    assert done.returncode == 0
    assert done.stderr.strip().splitlines() == lines
    assert done.stdout.startswith("#\tPixels Drawn\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--frames", "7-"], f"retrace: error: --frames 7-: the trace {AFTER.replace('it ', '')}"),
        (["--frames", "6"], f"retrace: error: --frames 6: the trace {AFTER.replace('it ', '')}"),
        (["--calls", "9000-", "--frames", "1-2"],
         "retrace: error: --calls 9000-: the trace has 3368 calls (0-3367)"),
    ],
)  # fmt: skip
def test_a_part_outside_the_trace_is_refused_before_the_replay(args, line):
    """The frame count agrees with `retrace info` and `Rendered N frames`."""
    done = retrace(*PIXELS, "--quiet", *args, str(TRACE))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [line]
