"""Traces captured on Windows (WGL) and macOS (CGL), replayed here through EGL.

No such traces exist in this repository, so tests/unit/test_ws_wgl_cgl.py
writes them with `tracegen`, call for call as apitrace records a small program on those
systems: the argument names and value kinds follow apitrace's specs
(specs/wglapi.py, specs/cglapi.py). Handles are opaque pointers; a
PIXELFORMATDESCRIPTOR is a pointer to one struct (an array of one); attribute
lists are arrays of enum keys with their values and the 0 terminator, where
CGL's boolean attributes have no value; outputs (piFormats, CGL's pix and ctx)
are recorded when the call returns. After the first MakeCurrent, apitrace adds
a fake glViewport and glScissor of the window's size.

Each replay runs the real CLI against the real driver (Mesa's llvmpipe) and
checks the frames: their number, their size and their pixels.
"""

from __future__ import annotations

import hashlib
import struct

from conftest import run_retrace
from PIL import Image
from unit.test_ws_wgl_cgl import (
    CLEARS,
    GL_ARRAY_BUFFER,
    GL_ENUMS,
    GL_FLOAT,
    GL_STATIC_DRAW,
    GL_TRIANGLES,
    HDC,
    HDC_DUMMY,
    HGLRC,
    HGLRC_DUMMY,
    TRIANGLE,
    WINDOW_FORMAT,
    H,
    Program,
    W,
    arb_wgl_trace,
    cgl_trace,
    compiled,
    legacy_wgl_trace,
)

GLBOOLEAN = (("GL_FALSE", 0), ("GL_TRUE", 1))
GL_FRAGMENT_SHADER, GL_VERTEX_SHADER = 0x8B30, 0x8B31
HPBUFFER, HDC_PBUFFER, HGLRC_PBUFFER = 0x1, 0x7B0120F3, 0x30000


# --- checking frames ---------------------------------------------------------------------


def pixel(rgb: tuple[float, ...]) -> tuple[int, ...]:
    return tuple(round(c * 255) for c in rgb)


def close(got: tuple[int, ...] | float | None, want: tuple[int, ...]) -> bool:
    assert isinstance(got, tuple), got  # a pixel of an RGB image
    return all(abs(a - b) <= 1 for a, b in zip(got, want, strict=True))


def replay_md5s(trace: str) -> list[str]:
    r = run_retrace("replay", "-s", "-", "--snapshot-format=MD5", trace)
    assert r.returncode == 0, r.stderr
    assert not r.stderr, r.stderr  # nothing skipped, nothing unsupported
    return r.stdout.decode().split()


def replay_pngs(trace: str, tmp_path, *options: str) -> list[Image.Image]:
    r = run_retrace("replay", *options, "-s", str(tmp_path / "frame"), trace)
    assert r.returncode == 0, r.stderr
    return [Image.open(p).convert("RGB") for p in sorted(tmp_path.glob("frame*.png"))]


def check_frames(trace: str, tmp_path) -> None:
    md5s = replay_md5s(trace)
    assert len(md5s) == len(CLEARS) and len(set(md5s)) == len(CLEARS)
    images = replay_pngs(trace, tmp_path)
    assert len(images) == len(CLEARS)
    for image, rgb, md5 in zip(images, CLEARS, md5s, strict=True):
        assert image.size == (W, H)
        for corner in ((0, 0), (W - 1, 0), (0, H - 1), (W - 1, H - 1)):
            assert close(image.getpixel(corner), pixel(rgb)), (corner, rgb)
        assert close(image.getpixel((W // 2, H // 2)), pixel(TRIANGLE))
        # the MD5 snapshot hashes the same RGB rows, top to bottom
        assert hashlib.md5(image.tobytes()).hexdigest() == md5.lower()


def test_wgl_legacy_pixel_format_and_context(tmp_path):
    check_frames(legacy_wgl_trace(tmp_path / "wgl-legacy.trace"), tmp_path)


def test_wgl_arb_pixel_format_and_context(tmp_path):
    check_frames(arb_wgl_trace(tmp_path / "wgl-arb.trace"), tmp_path)


def test_cgl_program(tmp_path):
    check_frames(cgl_trace(tmp_path / "cgl.trace"), tmp_path)


def test_wgl_pbuffer_renders_at_its_own_size(tmp_path):
    """A pbuffer's DC is the pbuffer: 64x48 whatever viewport is set on it."""
    p = Program()
    w = p.w
    p.dummy_context()
    pairs = [("WGL_DRAW_TO_PBUFFER_ARB", 1), ("WGL_SUPPORT_OPENGL_ARB", 1),
             ("WGL_COLOR_BITS_ARB", 32), ("WGL_DEPTH_BITS_ARB", 24)]  # fmt: skip
    p.choose_pixel_format_arb(HDC_DUMMY, pairs, 21, set_it=False)
    names = ("hDC", "iPixelFormat", "iWidth", "iHeight", "piAttribList")
    args = {0: w.opaque(HDC_DUMMY), 1: w.int(21), 2: w.int(64), 3: w.int(48), 4: w.array(w.int(0))}
    p.call("wglCreatePbufferARB", names, args, w.opaque(HPBUFFER))
    args = {0: w.opaque(HPBUFFER)}
    p.call("wglGetPbufferDCARB", ("hPbuffer",), args, w.opaque(HDC_PBUFFER))
    p.create_context(HDC_PBUFFER, HGLRC_PBUFFER)
    p.make_current(HDC_PBUFFER, HGLRC_PBUFFER)
    p.viewport(0, 0, 32, 24)  # the program draws into a corner of it
    p.clear(CLEARS[0])
    p.triangle()
    finish = p.call("glFinish")
    p.make_current(HDC_DUMMY, HGLRC_DUMMY)
    p.call("wglReleasePbufferDCARB", ("hPbuffer", "hDC"), {0: w.opaque(HPBUFFER),
           1: w.opaque(HDC_PBUFFER)}, w.int(1))  # fmt: skip
    p.call("wglDestroyPbufferARB", ("hPbuffer",), {0: w.opaque(HPBUFFER)}, p.true())
    trace = p.save(tmp_path / "wgl-pbuffer.trace")

    (image,) = replay_pngs(trace, tmp_path, "-S", str(finish))
    assert image.size == (64, 48)
    assert close(image.getpixel((63, 0)), pixel(CLEARS[0]))  # outside the viewport: cleared
    assert close(image.getpixel((16, 47 - 12)), pixel(TRIANGLE))  # the viewport's centre


VERTEX_SHADER = b"""#version 450 core
layout(location = 0) in vec2 position;
void main() { gl_Position = vec4(position, 0.0, 1.0); }
"""
FRAGMENT_SHADER = b"""#version 450 core
out vec4 color;
void main() { color = vec4(1.0, 1.0, 0.0, 1.0); }
"""


def core_wgl_trace(path, major: int, minor: int) -> str:
    """A core-profile program: ARB context, VAO, VBO, shaders, glDrawArrays."""
    p = Program()
    w = p.w
    p.dummy_context()
    p.choose_pixel_format_arb(HDC, WINDOW_FORMAT, 12)
    pairs = [
        ("WGL_CONTEXT_MAJOR_VERSION_ARB", major),
        ("WGL_CONTEXT_MINOR_VERSION_ARB", minor),
        ("WGL_CONTEXT_PROFILE_MASK_ARB", 1),  # WGL_CONTEXT_CORE_PROFILE_BIT_ARB
    ]
    p.create_context_attribs(HDC, HGLRC, pairs)
    p.make_current(HDC, HGLRC)
    p.viewport(0, 0, W, H, fake=True)

    def gen(name: str, array_name: str) -> None:
        no = w.enter(name, ("n", array_name), {0: w.int(1)})
        w.leave(no, {1: w.array(w.int(1))})

    gen("glGenVertexArrays", "arrays")
    p.call("glBindVertexArray", ("array",), {0: w.int(1)})
    gen("glGenBuffers", "buffers")
    p.call(
        "glBindBuffer", ("target", "buffer"), {0: w.enum(GL_ENUMS, GL_ARRAY_BUFFER), 1: w.int(1)}
    )
    data = struct.pack("<6f", -0.5, -0.5, 0.5, -0.5, 0.0, 0.5)
    args = {0: w.enum(GL_ENUMS, GL_ARRAY_BUFFER), 1: w.int(len(data)), 2: w.blob(data),
            3: w.enum(GL_ENUMS, GL_STATIC_DRAW)}  # fmt: skip
    p.call("glBufferData", ("target", "size", "data", "usage"), args)
    for shader, (kind, source) in enumerate(
        ((GL_VERTEX_SHADER, VERTEX_SHADER), (GL_FRAGMENT_SHADER, FRAGMENT_SHADER)), 1
    ):
        p.call("glCreateShader", ("type",), {0: w.enum(GL_ENUMS, kind)}, w.int(shader))
        args = {0: w.int(shader), 1: w.int(1), 2: w.array(w.string(source)), 3: w.null}
        p.call("glShaderSource", ("shader", "count", "string", "length"), args)
        p.call("glCompileShader", ("shader",), {0: w.int(shader)})
    p.call("glCreateProgram", (), {}, w.int(3))
    for shader in (1, 2):
        p.call("glAttachShader", ("program", "shader"), {0: w.int(3), 1: w.int(shader)})
    p.call("glLinkProgram", ("program",), {0: w.int(3)})
    p.call("glUseProgram", ("program",), {0: w.int(3)})
    names = ("index", "size", "type", "normalized", "stride", "pointer")
    args = {0: w.int(0), 1: w.int(2), 2: w.enum(GL_ENUMS, GL_FLOAT), 3: w.enum(GLBOOLEAN, 0),
            4: w.int(0), 5: w.null}  # fmt: skip
    p.call("glVertexAttribPointer", names, args)
    p.call("glEnableVertexAttribArray", ("index",), {0: w.int(0)})
    for rgb in CLEARS:
        p.clear(rgb)
        args = {0: w.enum(GL_ENUMS, GL_TRIANGLES), 1: w.int(0), 2: w.int(3)}
        p.call("glDrawArrays", ("mode", "first", "count"), args)
        p.swap(HDC)
    return p.save(path)


def test_wgl_core_profile_context(tmp_path):
    trace = core_wgl_trace(tmp_path / "wgl-core.trace", 4, 5)
    _, request, _, _ = [args for op, args in compiled(trace) if op == "create_context"][-1]
    assert (request.major, request.minor, request.profile) == (4, 5, "core")
    check_frames(trace, tmp_path)


def test_wgl_share_lists(tmp_path):
    """wglShareLists before use: a display list compiled in one context draws in the other."""
    p = Program()
    w = p.w
    p.choose_pixel_format(HDC, 9)
    p.create_context(HDC, HGLRC)
    p.create_context(HDC, HGLRC_DUMMY)
    args = {0: w.opaque(HGLRC), 1: w.opaque(HGLRC_DUMMY)}
    p.call("wglShareLists", ("hglrc1", "hglrc2"), args, p.true())
    p.make_current(HDC, HGLRC)
    p.viewport(0, 0, W, H, fake=True)
    p.call("glGenLists", ("range",), {0: w.int(1)}, w.int(1))
    p.call(
        "glNewList", ("list", "mode"), {0: w.int(1), 1: w.enum((("GL_COMPILE", 0x1300),), 0x1300)}
    )
    p.triangle()
    p.call("glEndList")
    p.make_current(HDC, HGLRC_DUMMY)  # the other context, same window
    p.clear(CLEARS[0])
    p.call("glCallList", ("list",), {0: w.int(1)})
    p.swap(HDC)
    (image,) = replay_pngs(p.save(tmp_path / "wgl-share.trace"), tmp_path)
    assert image.size == (W, H)
    assert close(image.getpixel((0, 0)), pixel(CLEARS[0]))
    assert close(image.getpixel((W // 2, H // 2)), pixel(TRIANGLE))


def test_wgl_impossible_context_fails_in_one_line(tmp_path):
    trace = core_wgl_trace(tmp_path / "wgl-9.9.trace", 9, 9)
    r = run_retrace("replay", "-b", trace)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "OpenGL 9.9 core" in err
