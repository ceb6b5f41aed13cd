"""Replay of real traces through Mesa (llvmpipe): benchmark lines, snapshots, a cut
trace, frames in flight, shared EGL images (the frame-by-frame comparisons with
glretrace are in tests/reference/test_replay.py).
"""

from __future__ import annotations

import ctypes

import pytest
from conftest import TRACES, run_retrace
from tracegen import TraceWriter, glx_context, wrap_snappy

from retrace.trace.container import TraceStream
from retrace.trace.reader import TraceReader

GEARS = str(TRACES / "glxgears.trace")


def test_benchmark_line_and_frame_count():
    r = run_retrace("replay", "-b", GEARS)
    assert r.returncode == 0
    line = r.stdout.decode().strip().splitlines()[-1]
    assert line.startswith("Rendered 5 frames in ") and line.endswith(" fps")


def test_loop_replays_the_last_frame_of_a_frame_range():
    def md5s(*args: str) -> list[str]:
        r = run_retrace("replay", *args, "--snapshot-format=MD5", "-s", "-", GEARS)
        assert r.returncode == 0, r.stderr
        return r.stdout.decode().split()

    whole = md5s()
    assert len(set(whole)) == 5  # the gears turn: every frame differs
    # frames 0-1, then frame 1 again (not the trace's last frame, which never ran)
    assert md5s("--frames", "0-1", "--loop=2") == whole[:2] + [whole[1]] * 2


def test_a_window_cleared_before_its_first_viewport_keeps_the_clear():
    """Qt clears its window (colour, depth 1.0) before its first glViewport, a batch later
    in the trace: the stand-in must have the window's size from its make-current on, or
    the clear is lost with the 32x32 stand-in and every draw of frame 0 fails the depth
    test (a black frame). The scene moves only from frame 1 on, so frame 0 is frame 1."""
    r = run_retrace(
        "replay", "--no-cache", "-s", "-", "--snapshot-format=MD5",
        str(TRACES / "corpus" / "qt6-qml.trace"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    frames = r.stdout.decode().split()
    assert len(frames) == 3 and frames[0] == frames[1]


@pytest.mark.parametrize("case", ["window-frames", "window", "pbuffer"])
def test_reading_ahead_for_a_window_size_holds_the_replay_back_a_bounded_way(tmp_path, case):
    """The read-ahead for a window's first viewport (`Compiler.sizing_windows`) holds the
    compiled calls back to the window's first frame end, or `SIZING_REACH` calls where no
    frame ends, and not at all for a pbuffer: on traces that never set a viewport, the
    first call after the make-current runs before the rest of the trace is read."""
    from retrace.replay.compiler import SIZING_REACH
    from retrace.replay.replayer import Replayer
    from retrace.trace import cache
    from retrace.trace.callset import CallSet

    w = TraceWriter()
    if case == "pbuffer":
        attribs = w.array(*map(w.int, (0x8041, 64, 0x8040, 64, 0)))  # GLX_PBUFFER_WIDTH/HEIGHT
        w.call("glXCreatePbuffer", ("dpy", "config", "attribList"), {2: attribs}, ret=w.int(9))
    glx_context(w, 9 if case == "pbuffer" else 7)
    first = w.call("glClear", ("mask",), {0: w.int(0x4000)})
    if case == "window-frames":
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    for _ in range(2 * SIZING_REACH):  # 2 MB of events: several batches
        w.call("glDisable", ("cap",), {0: w.int(0x0BE2)})
    trace = tmp_path / "sizing.trace"
    trace.write_bytes(w.snappy())

    with cache.used(False), Replayer(str(trace)) as replayer:
        read_when_run: list[int] = []
        replayer.compiler.hook(
            CallSet.parse(str(first)), lambda no: read_when_run.append(replayer.reader.calls_read)
        )
        replayer.run_pass()
        total = replayer.reader.calls_read
    assert len(read_when_run) == 1 and read_when_run[0] < total
    # held back as far as the reach only where nothing else ends the looking
    assert (read_when_run[0] > SIZING_REACH) == (case == "window")


def test_png_snapshots(tmp_path):
    r = run_retrace("replay", "-s", str(tmp_path / "f"), str(TRACES / "es2gears.trace"))
    assert r.returncode == 0, r.stderr
    pngs = sorted(tmp_path.glob("f*.png"))
    assert len(pngs) == 5
    from PIL import Image

    image = Image.open(pngs[-1])
    assert image.size == (300, 300)
    assert (
        len(set(image.convert("RGB").tobytes()[i : i + 3] for i in range(0, 270000, 3))) > 10
    )  # the gears, not a blank frame


def test_truncated_trace_replays_up_to_the_cut(tmp_path):
    source = TRACES / "glxgears.trace"
    reader = TraceReader(source)
    swaps = [
        offset
        for batch in reader.batches()
        for sig, offset in zip(
            batch.column("sig").tolist(), batch.column("offset").tolist(), strict=True
        )
        if reader.signatures.functions[sig].name == "glXSwapBuffers"
    ]
    stream = b"".join(TraceStream(source))
    cut = tmp_path / "cut.trace"
    cut.write_bytes(wrap_snappy(stream[: swaps[3] + 3]))  # inside the fourth SwapBuffers
    r = run_retrace("replay", "-b", str(cut))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err and "cut.trace" in err
    assert r.stdout.startswith(b"Rendered 3 frames")


@pytest.mark.parametrize("name", ["glxgears.trace", "es2gears.trace"])
def test_swaps_keep_one_frame_in_flight(name):
    """A pbuffer swap does what a window's does: each frame end fences the frame and
    waits for the one before, whose fence is then deleted (llvmpipe would otherwise
    queue frames, and memory, without bound)."""
    from retrace.replay.replayer import Replayer

    with Replayer(str(TRACES / name)) as replayer:
        seen: list[tuple[object, int]] = []
        ws = replayer.ws
        frame_end = ws.on_frame_end

        def record(drawable) -> None:  # called before the swap fences the frame
            context = replayer.state.current
            if context is not None and context.frame_fence is not None:
                seen.append(context.frame_fence)
            frame_end(drawable)

        ws.on_frame_end = record
        result = replayer.run_pass()
        last = replayer.state.current.frame_fence
        is_sync = replayer.dispatch.raw("glIsSync", ctypes.c_ubyte, ctypes.c_void_p)
        assert result.frames == 5 and len(seen) == 4 and last is not None
        # (a deleted fence's handle may come back as a later fence's)
        assert [is_sync(fence) for _, fence in seen] == [fence == last[1] for _, fence in seen]
        assert is_sync(last[1]) == 1


def test_egl_images_of_gl_textures_share_the_replays_texture(tmp_path):
    """egl_image.c draws a texture that shares an EGLImage with a source texture it rewrites
    every frame (colours and checker phase from the frame number). retrace makes the image
    again from its own texture; glretrace uses apitrace's copy of the pixels taken when
    the image was bound, so it draws frame 0 three times."""
    from PIL import Image as Pil

    trace = TRACES / "egl-image.trace"
    r = run_retrace("replay", "--strict", "-s", str(tmp_path / "f"), str(trace))
    assert r.returncode == 0 and not r.stderr, r.stderr
    frames = sorted(tmp_path.glob("f*.png"))
    assert len(frames) == 3
    for frame, png in enumerate(frames):
        on, off = (255, 80 * frame, 30), (60 * frame, 40, 200)
        colours = Pil.open(png).convert("RGB").crop((16, 16, 48, 48)).getcolors()
        assert sorted(c for _, c in colours) == sorted([on, off]), (frame, colours)
