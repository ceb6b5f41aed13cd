"""The fidelity guard: a replay that departs from its trace says so, and --strict fails it."""

from __future__ import annotations

import ctypes
from pathlib import Path

from conftest import TRACES, run_retrace
from tracegen import TraceWriter, glx_context, occlusion_query

from retrace.errors import RetraceError
from retrace.replay.fidelity import Fidelity, FidelityError
from retrace.replay.replayer import Replayer, ReplayListener
from retrace.trace import cache

GL_INVALID_ENUM = 0x0500
SUMMARY = "retrace: warning: the replay departed from the trace: "


def errors_trace(path: Path, traced_error: int) -> str:
    """glEnable of no capability (GL_INVALID_ENUM), then the program's glGetError."""
    w = TraceWriter()
    glx_context(w)
    w.call("glEnable", ("cap",), {0: w.int(0xDEAD)})
    w.call("glGetError", (), {}, ret=w.int(traced_error))
    w.call("glClear", ("mask",), {0: w.int(0x4000)})
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return str(path)


def lost_write_trace(path: Path) -> str:
    """A fake memcpy into an address no mapping of the trace covers."""
    w = TraceWriter()
    glx_context(w)
    w.call(
        "memcpy",
        ("dest", "src", "n"),
        {0: w.opaque(0x7F0000001000), 1: w.blob(b"abcd"), 2: w.int(4)},
        fake=True,
    )
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return str(path)


def stderr_lines(r) -> list[str]:
    return r.stderr.decode().splitlines()


def test_faithful_replays_say_nothing_even_under_strict():
    for name in ("persistent-map.trace", "glmark2-buffer-map.trace", "es2gears.trace"):
        r = run_retrace("replay", "-b", "--strict", str(TRACES / name))
        assert r.returncode == 0 and not r.stderr, (name, r.stderr)


def test_errors_the_program_got_too_are_no_departure():
    # the piglit test provokes GL_INVALID_OPERATION on purpose and checks for it with glGetError
    r = run_retrace("replay", "-b", "--strict", str(TRACES / "piglit-dlist-beginend.trace"))
    assert r.returncode == 0 and not r.stderr, r.stderr


def test_an_error_the_program_did_not_get_is_a_departure(tmp_path):
    trace = errors_trace(tmp_path / "e.trace", 0)
    r = run_retrace("replay", "-b", trace)
    assert r.returncode == 0
    warning, summary = stderr_lines(r)
    assert "GL errors the traced program did not get (1 GL_INVALID_ENUM)" in warning
    assert "before call 4" in warning  # the program's glGetError said GL_NO_ERROR there
    assert summary == SUMMARY + (
        "1 GL error(s) the program did not get (--strict makes this an error)"
    )
    strict = run_retrace("replay", "-b", "--strict", trace)
    assert strict.returncode == 3
    assert stderr_lines(strict)[-1] == (
        "retrace: error: the replay departed from the trace: 1 GL error(s) the program did not get"
    )
    # the same error where the trace shows the program got it is faithful
    same = errors_trace(tmp_path / "same.trace", GL_INVALID_ENUM)
    assert run_retrace("replay", "-b", "--strict", same).returncode == 0


def test_a_lost_mapped_buffer_write_is_a_departure_for_replay_and_profile(tmp_path):
    trace = lost_write_trace(tmp_path / "lost.trace")
    r = run_retrace("replay", "-b", trace)
    assert r.returncode == 0
    warning, summary = stderr_lines(r)
    assert warning.startswith("retrace: warning: 1 memcpy(s) into mapped buffers landed in no live")
    assert "0x7f0000001000" in warning
    assert summary.startswith(SUMMARY + "1 mapped-buffer write(s) lost")
    profile = run_retrace("--pframes", "opengl: CPU Duration", "--quiet", "--strict", trace)
    assert profile.returncode == 3
    assert profile.stdout.decode().startswith("#\t")  # the tables come first, then the verdict
    assert stderr_lines(profile)[-1].startswith("retrace: error: the replay departed")


def conditional_render_trace(path: Path) -> str:
    """A draw inside the program's own occlusion query, then one rendered on its result."""
    w = TraceWriter()
    glx_context(w)
    occlusion_query(w, 1)
    w.call("glBeginConditionalRender", ("id", "mode"), {0: w.int(1), 1: w.int(0x8E13)})
    w.call(
        "glRectf", ("x1", "y1", "x2", "y2"), {i: w.float(v) for i, v in enumerate((-1, -1, 0, 0))}
    )
    w.call("glEndConditionalRender")
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return str(path)


def test_conditional_rendering_on_a_query_left_out_is_a_departure(tmp_path):
    trace = conditional_render_trace(tmp_path / "cond.trace")
    assert run_retrace("replay", "-b", "--strict", trace).returncode == 0  # nothing left out
    r = run_retrace("--pdrawcalls", "opengl: Pixels Drawn", "--quiet", trace)
    assert r.returncode == 0
    note, warning, summary = stderr_lines(r)
    assert note.startswith(
        "retrace: warning: left out the program's own queries (1 GL_SAMPLES_PASSED)"
    )
    assert warning.startswith(
        "retrace: warning: 1 conditional render(s) on the program's own queries"
    )
    assert summary.startswith(SUMMARY + "1 conditional render(s) drawn always")


GL_NONE, GL_BACK, GL_COLOR_BUFFER_BIT = 0, 0x0405, 0x4000


def window_frames_trace(path: Path, frames: int, draw_buffer: int | None = None) -> Path:
    """A GLX window cleared and swapped `frames` times; with `draw_buffer` the program
    chooses its draw buffer first (glDrawBuffer)."""
    w = TraceWriter()
    glx_context(w)
    if draw_buffer is not None:
        w.call("glDrawBuffer", ("buf",), {0: w.int(draw_buffer)})
    for _ in range(frames):
        w.call("glClear", ("mask",), {0: w.int(GL_COLOR_BUFFER_BIT)})
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return path


class NoBufferDriver(ReplayListener):
    """What a driver does that gives a context's window no draw buffer (NVIDIA's, to a
    context first made current without a surface): GL_NONE whenever the context is bound."""

    def __init__(self, replayer: Replayer) -> None:
        self.draw_buffer = replayer.dispatch.raw("glDrawBuffer", None, ctypes.c_uint)

    def after_switch(self) -> None:
        self.draw_buffer(GL_NONE)


def replayed(trace: Path, meddle: bool) -> tuple[Fidelity, list[str], RetraceError | None]:
    with cache.used(False), Replayer(str(trace)) as replayer:
        if meddle:
            replayer.listen(NoBufferDriver(replayer))
        replayer.run_pass()
        lines, error = replayer.ending(strict=True)
        return replayer.fidelity(), lines, error


def test_frames_drawn_into_no_buffer_are_a_departure(tmp_path):
    trace = window_frames_trace(tmp_path / "w.trace", 3)
    fidelity, lines, error = replayed(trace, meddle=True)
    assert (fidelity.undrawn_frames, fidelity.first_undrawn) == (3, 1)
    assert isinstance(error, FidelityError) and "3 frame(s) drawn into no buffer" in str(error)
    assert any("GL_NONE as their window's draw buffer" in line for line in lines), lines
    # the same replay where the driver gave the window its buffer: faithful
    fidelity, lines, error = replayed(trace, meddle=False)
    assert fidelity.faithful and not lines and error is None


def test_no_draw_buffer_the_program_chose_is_no_departure(tmp_path):
    """A program that chooses draw buffers may choose GL_NONE: the guard stands aside."""
    for chosen in (GL_NONE, GL_BACK):
        fidelity, _, error = replayed(window_frames_trace(tmp_path / "w.trace", 2, chosen), True)
        assert fidelity.undrawn_frames == 0 and error is None, chosen
