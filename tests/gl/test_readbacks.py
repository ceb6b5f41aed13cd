"""Readbacks replayed as the program made them, and outputs the trace cannot make overflow.

traces/readback-pixels.trace and readback-textures.trace are recorded from
traces/src/readbacks.c: glReadPixels under every pack pixel-store state (a 64 x 64 float
tile into a 4096-pixel-wide image, skips, alignment, push/pop of client state, a pack
buffer), texture readbacks of every dimensionality and compressed, glGet of many values;
readback-plain.trace is the same program drawing the same frames without them. The sizes
themselves are checked against the driver: Mesa refuses a glReadn*/glGetn* whose bufSize
is one byte short of what it would write, so the size retrace computes must be exact.
"""

from __future__ import annotations

import ctypes

import pytest
from conftest import TRACES, run_retrace
from tracegen import TraceWriter, glx_context

from retrace.replay.dispatch import Dispatch
from retrace.replay.sizes import PACK_PNAMES, PackState, image_bytes
from retrace.replay.ws.headless import ContextRequest, EglDisplay, PixelFormat

GL_RGB, GL_RGBA, GL_UNSIGNED_BYTE, GL_FLOAT = 0x1907, 0x1908, 0x1401, 0x1406
GL_TEXTURE_3D, GL_RGBA8 = 0x806F, 0x8058
GL_INVALID_OPERATION = 0x0502


def md5s(trace: str) -> list[str]:
    r = run_retrace("replay", "--strict", "--snapshot-format", "md5", "-s", "-", trace)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return [line for line in r.stdout.decode().split() if len(line) == 32]


@pytest.mark.parametrize("name", ["readback-pixels.trace", "readback-textures.trace"])
def test_readbacks_replay_and_draw_the_frames_of_the_program_without_them(name):
    frames = md5s(str(TRACES / name))
    assert len(frames) == 3
    assert frames == md5s(str(TRACES / "readback-plain.trace"))


@pytest.fixture(scope="module")
def gl():
    """A GL 4.5 compatibility context of its own, and its functions."""
    with EglDisplay.open() as display:
        context = display.create_context(ContextRequest("gl", 4, 5, "compat"), PixelFormat())
        surface = display.create_surface(context.config, 64, 64)
        display.make_current(context, surface)
        yield Dispatch(display.get_proc_address)


def function(gl: Dispatch, name: str):
    fn = gl.function(name)
    assert fn is not None, f"the driver lacks {name}"
    return fn


PACK_STATES = [
    PackState(),
    PackState(row_length=4096),
    PackState(row_length=100, skip_rows=3, skip_pixels=7),
    PackState(alignment=8),
    PackState(alignment=1, skip_pixels=1),
    PackState(alignment=2, row_length=5),
]


def set_pack(gl: Dispatch, pack: PackState) -> None:
    for pname, value in zip(PACK_PNAMES, pack, strict=True):
        function(gl, "glPixelStorei")(pname, value)


def refused_below(gl: Dispatch, read, size: int) -> tuple[int, int]:
    """The GL errors of `read(bufSize)` with the size, and with one byte less."""
    errors = []
    for buf_size in (size, size - 1):
        scratch = ctypes.create_string_buffer(size)
        read(buf_size, scratch)
        errors.append(function(gl, "glGetError")())
    return errors[0], errors[1]


@pytest.mark.parametrize("pack", PACK_STATES)
@pytest.mark.parametrize(("format", "type"), [(GL_RGBA, GL_FLOAT), (GL_RGB, GL_UNSIGNED_BYTE)])
def test_a_readback_takes_exactly_the_bytes_the_driver_writes(gl, pack, format, type):
    set_pack(gl, pack)
    size = image_bytes(format, type, 13, 7, 1, pack)
    read_n = function(gl, "glReadnPixels")
    errors = refused_below(gl, lambda n, dest: read_n(0, 0, 13, 7, format, type, n, dest), size)
    set_pack(gl, PackState())
    assert errors == (0, GL_INVALID_OPERATION)


def test_a_3d_texture_readback_takes_exactly_the_bytes_the_driver_writes(gl):
    textures = (ctypes.c_uint * 1)()
    function(gl, "glGenTextures")(1, textures)
    function(gl, "glBindTexture")(GL_TEXTURE_3D, textures[0])
    pixels = ctypes.create_string_buffer(5 * 3 * 4 * 4)
    function(gl, "glTexImage3D")(GL_TEXTURE_3D, 0, GL_RGBA8, 5, 3, 4, 0, GL_RGBA, 0x1401, pixels)
    pack = PackState(image_height=6, skip_images=2, skip_rows=1, alignment=8)
    set_pack(gl, pack)
    size = image_bytes(GL_RGBA, GL_UNSIGNED_BYTE, 5, 3, 4, pack, volume=True)
    get_n = function(gl, "glGetnTexImageARB")  # (Mesa 22.3's glGetnTexImage does nothing)
    errors = refused_below(
        gl, lambda n, dest: get_n(GL_TEXTURE_3D, 0, GL_RGBA, GL_UNSIGNED_BYTE, n, dest), size
    )
    set_pack(gl, PackState())
    assert errors == (0, GL_INVALID_OPERATION)


def test_a_trace_that_records_less_than_the_driver_writes_cannot_overflow(tmp_path):
    """A hand-made trace: glGenTextures of 4096 names recording one, glReadPixels into a
    recorded array of one value and into the program's memory under a row length of 4096,
    glReadnPixels claiming a bufSize bigger than any scratch."""
    w = TraceWriter()
    glx_context(w)
    no = w.enter("glGenTextures", ("n", "textures"), {0: w.int(4096)})
    w.leave(no, {1: w.array(w.int(1))})
    w.call("glBindTexture", ("target", "texture"), {0: w.int(0x0DE1), 1: w.int(1)})
    read = ("x", "y", "width", "height", "format", "type", "pixels")
    rect = {0: w.int(0), 1: w.int(0), 2: w.int(64), 3: w.int(64)}
    into = {4: w.int(GL_RGBA), 5: w.int(GL_FLOAT)}
    w.call("glReadPixels", read, {**rect, **into, 6: w.array(w.int(0))})
    w.call("glPixelStorei", ("pname", "param"), {0: w.int(0x0D02), 1: w.int(4096)})
    w.call("glReadPixels", read, {**rect, **into, 6: w.opaque(0x7FFF0000)})
    read_n = ("x", "y", "width", "height", "format", "type", "bufSize", "data")
    w.call("glReadnPixels", read_n, {**rect, **into, 6: w.int(1 << 30), 7: w.opaque(0x7F00)})
    w.call("glXSwapBuffers", ("dpy", "drawable"), {0: w.opaque(1), 1: w.int(7)})
    path = tmp_path / "short.trace"
    path.write_bytes(w.snappy())
    r = run_retrace("replay", "-b", "--strict", str(path))
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert r.stdout.startswith(b"Rendered 1 frames")
