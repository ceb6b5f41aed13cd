"""Replay of real traces through Mesa (llvmpipe): benchmark lines, snapshots, a cut
trace, frames in flight, shared EGL images (the frame-by-frame comparisons with
glretrace are in tests/reference/test_replay.py).
"""

from __future__ import annotations

import ctypes

import pytest
from conftest import TRACES, run_retrace
from tracegen import wrap_snappy

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
