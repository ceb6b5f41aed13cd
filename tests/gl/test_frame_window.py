"""`--frames A-B` on a profile: only those frames are measured and tabled; the replay
before and after them runs unmeasured, so the state they start from is the trace's."""

from __future__ import annotations

import io

import pytest
from compare_runs import retrace
from conftest import TRACES
from tracegen import TraceWriter, glx_context

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


def immediate_trace(path) -> dict[str, int]:
    """Two frames of a glBegin/glEnd triangle, a glGetError (a checkpoint of the replay)
    and a glGetIntegerv (not replayed); returns the first frame's call numbers by name."""
    w = TraceWriter()
    glx_context(w)
    nos: dict[str, int] = {}
    for _ in range(2):
        nos.setdefault("glClear", w.call("glClear", ("mask",), {0: w.int(0x4000)}))
        nos.setdefault("glBegin", w.call("glBegin", ("mode",), {0: w.int(4)}))
        for x, y in ((-1, -1), (1, -1), (-1, 1)):
            nos.setdefault(
                "glVertex2f", w.call("glVertex2f", ("x", "y"), {0: w.float(x), 1: w.float(y)})
            )
        nos.setdefault("glEnd", w.call("glEnd"))
        nos.setdefault("glGetError", w.call("glGetError", (), {}, ret=w.int(0)))
        viewport = w.array(*(w.int(v) for v in (0, 0, 64, 64)))
        nos.setdefault(
            "glGetIntegerv",
            w.call("glGetIntegerv", ("pname", "params"), {0: w.int(0x0BA2), 1: viewport}),
        )
        nos.setdefault(
            "glXSwapBuffers", w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
        )
    path.write_bytes(w.snappy())
    return nos


def test_calls_that_exist_but_are_not_measured_as_calls_say_why(tmp_path):
    """A --calls set that selects calls of the trace, none of which is a row of the calls
    table, says what those calls are instead of that the trace has none."""
    trace = tmp_path / "immediate.trace"
    nos = immediate_trace(trace)
    vertex, begin = nos["glVertex2f"], nos["glBegin"]
    cases = {
        f"{vertex}-{vertex + 2}": f"of the trace's calls it selects (3), 3 inside glBegin/glEnd, "
        f"whose block is measured as one call at its glBegin (call {begin}), as in glretrace",
        str(nos["glXSwapBuffers"]): "of the trace's calls it selects (1), 1 window-system or "
        "apitrace's own (glX*, egl*, memcpy), not measured as calls, as in glretrace",
        str(nos["glGetError"]): "of the trace's calls it selects (1), 1 without side effects "
        "(state queries, glGetError), not measured, as in glretrace",
        str(nos["glGetIntegerv"]): "of the trace's calls it selects (1), 1 not replayed (made "
        "with no context current, or without side effects: state queries), as glretrace "
        "skips them",
        f"{vertex}-{nos['glGetError']}": "of the trace's calls it selects (5), 4 inside "
        "glBegin/glEnd, whose block is measured as one call at its glBegin (call "
        f"{begin}), as in glretrace; 1 without side effects",
    }
    for spec, why in cases.items():
        done = retrace("--pcalls", "opengl: CPU Duration", "--calls", spec, "--quiet", trace)
        assert done.returncode == 1
        (line,) = [x for x in done.stderr.splitlines() if "error" in x]
        assert line.startswith(
            f"retrace: error: nothing measured: --calls {spec} selects no call measured as a "
            f"call: {why}"
        ), line
    # glxgears: calls 500-600 are compiled into its first display list
    done = retrace(
        "--pcalls", "opengl: CPU Duration", "--calls", "500-600", TRACES / "glxgears.trace"
    )
    assert done.stderr.strip().splitlines()[-1] == (
        "retrace: error: nothing measured: --calls 500-600 selects no call measured as a call: "
        "of the trace's calls it selects (101), 101 compiled into a display list (glNewList at "
        "call 15), measured within the glCallList that runs the list, not one by one, as in "
        "glretrace"
    )
    # in part measured, outside --frames
    done = retrace(
        "--pcalls", "opengl: CPU Duration", "--calls", str(nos["glClear"]), "--frames", "1", trace
    )
    assert "of the trace's calls it selects (1), 1 measured, outside frames 1-1" in done.stderr
