"""Traces captured on Windows (WGL) and macOS (CGL): tracegen recordings of small programs,
and what they compile to and how their attributes are read, without a replay (the replays
are in tests/gl/test_ws_wgl_cgl.py, which uses the recordings made here).
"""

from __future__ import annotations

from typing import cast

import pytest
from conftest import recorded_calls
from tracegen import TraceWriter

from retrace.replay.ws.cgl import cgl_pixel_format
from retrace.replay.ws.reader import WsCompiler
from retrace.replay.ws.wgl import pfd_format, wgl_attrib_format

W, H = 160, 120
# Clear colours per frame and the triangle's, as floats and as the 8-bit pixels they give.
CLEARS = [(0.0, 0.0, 1.0), (0.0, 0.5, 0.0), (0.25, 0.25, 0.25)]
TRIANGLE = (1.0, 1.0, 0.0)

BOOL = (("FALSE", 0), ("TRUE", 1))
GL_ENUMS = (
    ("GL_TRIANGLES", 0x0004),
    ("GL_FLOAT", 0x1406),
    ("GL_ARRAY_BUFFER", 0x8892),
    ("GL_STATIC_DRAW", 0x88E4),
    ("GL_FRAGMENT_SHADER", 0x8B30),
    ("GL_VERTEX_SHADER", 0x8B31),
)
GL_TRIANGLES, GL_FLOAT, GL_ARRAY_BUFFER, GL_STATIC_DRAW = 0x4, 0x1406, 0x8892, 0x88E4
CLEAR_BITS = (("GL_DEPTH_BUFFER_BIT", 0x100), ("GL_COLOR_BUFFER_BIT", 0x4000))
GL_COLOR_BUFFER_BIT = 0x4000

# --- WGL, as specs/wglapi.py describes it --------------------------------------------------

PFD_MEMBERS = (
    "nSize", "nVersion", "dwFlags", "iPixelType", "cColorBits", "cRedBits", "cRedShift",
    "cGreenBits", "cGreenShift", "cBlueBits", "cBlueShift", "cAlphaBits", "cAlphaShift",
    "cAccumBits", "cAccumRedBits", "cAccumGreenBits", "cAccumBlueBits", "cAccumAlphaBits",
    "cDepthBits", "cStencilBits", "cAuxBuffers", "iLayerType", "bReserved", "dwLayerMask",
    "dwVisibleMask", "dwDamageMask",
)  # fmt: skip
PFD_FLAGS = (
    ("PFD_DOUBLEBUFFER", 0x1),
    ("PFD_STEREO", 0x2),
    ("PFD_DRAW_TO_WINDOW", 0x4),
    ("PFD_SUPPORT_OPENGL", 0x20),
)
PFD_DOUBLEBUFFER, PFD_DRAW_TO_WINDOW, PFD_SUPPORT_OPENGL = 0x1, 0x4, 0x20
WGL_ENUMS = (
    ("WGL_DRAW_TO_WINDOW_ARB", 0x2001),
    ("WGL_ACCELERATION_ARB", 0x2003),
    ("WGL_SUPPORT_OPENGL_ARB", 0x2010),
    ("WGL_DOUBLE_BUFFER_ARB", 0x2011),
    ("WGL_PIXEL_TYPE_ARB", 0x2013),
    ("WGL_COLOR_BITS_ARB", 0x2014),
    ("WGL_ALPHA_BITS_ARB", 0x201B),
    ("WGL_DEPTH_BITS_ARB", 0x2022),
    ("WGL_STENCIL_BITS_ARB", 0x2023),
    ("WGL_FULL_ACCELERATION_ARB", 0x2027),
    ("WGL_TYPE_RGBA_ARB", 0x202B),
    ("WGL_DRAW_TO_PBUFFER_ARB", 0x202D),
    ("WGL_SAMPLE_BUFFERS_ARB", 0x2041),
    ("WGL_SAMPLES_ARB", 0x2042),
    ("WGL_CONTEXT_MAJOR_VERSION_ARB", 0x2091),
    ("WGL_CONTEXT_MINOR_VERSION_ARB", 0x2092),
    ("WGL_CONTEXT_FLAGS_ARB", 0x2094),
    ("WGL_CONTEXT_PROFILE_MASK_ARB", 0x9126),
)
WGL = dict(WGL_ENUMS)
WGL_BOOL_KEYS = {"WGL_DRAW_TO_WINDOW_ARB", "WGL_SUPPORT_OPENGL_ARB", "WGL_DOUBLE_BUFFER_ARB",
                 "WGL_DRAW_TO_PBUFFER_ARB"}  # fmt: skip
WGL_FLAG_KEYS = {
    "WGL_CONTEXT_FLAGS_ARB": (
        ("WGL_CONTEXT_DEBUG_BIT_ARB", 0x1),
        ("WGL_CONTEXT_FORWARD_COMPATIBLE_BIT_ARB", 0x2),
    ),
    "WGL_CONTEXT_PROFILE_MASK_ARB": (
        ("WGL_CONTEXT_CORE_PROFILE_BIT_ARB", 0x1),
        ("WGL_CONTEXT_COMPATIBILITY_PROFILE_BIT_ARB", 0x2),
    ),
}
WINDOW_FORMAT = [
    ("WGL_DRAW_TO_WINDOW_ARB", 1),
    ("WGL_SUPPORT_OPENGL_ARB", 1),
    ("WGL_DOUBLE_BUFFER_ARB", 1),
    ("WGL_PIXEL_TYPE_ARB", "WGL_TYPE_RGBA_ARB"),
    ("WGL_COLOR_BITS_ARB", 32),
    ("WGL_ALPHA_BITS_ARB", 8),
    ("WGL_DEPTH_BITS_ARB", 24),
    ("WGL_STENCIL_BITS_ARB", 8),
]

HDC, HDC_DUMMY, HGLRC, HGLRC_DUMMY = 0x5A011F2D, 0x3C01204A, 0x10000, 0x20000


class Program:
    """A traced program: TraceWriter plus the calls these tests make, recorded as apitrace does."""

    def __init__(self) -> None:
        self.w = TraceWriter()

    # -- GL

    def call(self, name, arg_names=(), args=None, ret=None, **options) -> int:
        return self.w.call(name, arg_names, args, ret, **options)

    def viewport(self, x: int, y: int, width: int, height: int, fake: bool = False) -> None:
        values = {i: self.w.int(v) for i, v in enumerate((x, y, width, height))}
        names = ("x", "y", "width", "height")
        self.call("glViewport", names, values, fake=fake)
        if fake:
            self.call("glScissor", names, values, fake=True)

    def clear(self, rgb: tuple[float, float, float]) -> None:
        w = self.w
        args = {i: w.float(v) for i, v in enumerate((*rgb, 1.0))}
        self.call("glClearColor", ("red", "green", "blue", "alpha"), args)
        self.call("glClear", ("mask",), {0: w.bitmask(CLEAR_BITS, GL_COLOR_BUFFER_BIT)})

    def triangle(self) -> int:
        """glBegin/glEnd immediate mode; returns glEnd's call number."""
        w = self.w
        self.call("glBegin", ("mode",), {0: w.enum(GL_ENUMS, GL_TRIANGLES)})
        args = {i: w.float(v) for i, v in enumerate(TRIANGLE)}
        self.call("glColor3f", ("red", "green", "blue"), args)
        for x, y in ((-0.5, -0.5), (0.5, -0.5), (0.0, 0.5)):
            self.call("glVertex2f", ("x", "y"), {0: w.float(x), 1: w.float(y)})
        return self.call("glEnd")

    def save(self, path) -> str:
        path.write_bytes(self.w.snappy())
        return str(path)

    # -- WGL

    def true(self) -> bytes:
        return self.w.enum(BOOL, 1)

    def pfd(self, flags: int, color: int, alpha: int, depth: int, stencil: int) -> bytes:
        w = self.w
        members = dict.fromkeys(PFD_MEMBERS, 0)
        members.update(nSize=40, nVersion=1, cColorBits=color, cAlphaBits=alpha)
        members.update(cDepthBits=depth, cStencilBits=stencil)
        values = []
        for name, value in members.items():
            if name == "dwFlags":
                values.append(w.bitmask(PFD_FLAGS, flags))
            elif name == "iPixelType":
                values.append(w.enum((("PFD_TYPE_RGBA", 0),), 0))
            elif name == "iLayerType":
                values.append(w.enum((("PFD_MAIN_PLANE", 0),), 0))
            else:
                values.append(w.int(value))
        return w.array(w.struct("PIXELFORMATDESCRIPTOR", PFD_MEMBERS, *values))

    def wgl_attribs(self, pairs) -> bytes:
        """An AttribArray of WGLenum keys and the terminator; values typed as the spec types
        them (BOOL, enum, a Flags bitmask for the context flags and profile mask, or int)."""
        w = self.w
        items = []
        for key, value in pairs:
            items.append(w.enum(WGL_ENUMS, WGL[key]))
            if isinstance(value, str):
                items.append(w.enum(WGL_ENUMS, WGL[value]))
            elif key in WGL_BOOL_KEYS:
                items.append(w.enum(BOOL, value))
            elif key in WGL_FLAG_KEYS:
                items.append(w.bitmask(WGL_FLAG_KEYS[key], value))
            else:
                items.append(w.int(value))
        return w.array(*items, w.enum(WGL_ENUMS, 0))

    def choose_pixel_format(self, hdc: int, index: int, flags=None) -> None:
        flags = (
            PFD_DOUBLEBUFFER | PFD_DRAW_TO_WINDOW | PFD_SUPPORT_OPENGL if flags is None else flags
        )
        w = self.w
        ppfd = self.pfd(flags, 32, 8, 24, 8)
        self.call(
            "wglChoosePixelFormat", ("hdc", "ppfd"), {0: w.opaque(hdc), 1: ppfd}, w.int(index)
        )
        args = {0: w.opaque(hdc), 1: w.int(index), 2: self.pfd(flags, 32, 8, 24, 8)}
        self.call("wglSetPixelFormat", ("hdc", "iPixelFormat", "ppfd"), args, self.true())

    def choose_pixel_format_arb(self, hdc: int, pairs, index: int, set_it: bool = True) -> None:
        w = self.w
        names = ("hdc", "piAttribIList", "pfAttribFList", "nMaxFormats", "piFormats", "nNumFormats")
        args = {0: w.opaque(hdc), 1: self.wgl_attribs(pairs), 2: w.array(w.float(0)), 3: w.int(1)}
        no = w.enter("wglChoosePixelFormatARB", names, args)
        w.leave(no, {4: w.array(w.int(index)), 5: w.array(w.int(1))}, ret=self.true())
        if set_it:
            args = {0: w.opaque(hdc), 1: w.int(index), 2: w.null}
            self.call("wglSetPixelFormat", ("hdc", "iPixelFormat", "ppfd"), args, self.true())

    def create_context(self, hdc: int, hglrc: int) -> None:
        w = self.w
        self.call("wglCreateContext", ("hdc",), {0: w.opaque(hdc)}, w.opaque(hglrc))

    def create_context_attribs(self, hdc: int, hglrc: int, pairs) -> None:
        w = self.w
        args = {0: w.opaque(hdc), 1: w.null, 2: self.wgl_attribs(pairs)}
        names = ("hDC", "hShareContext", "attribList")
        self.call("wglCreateContextAttribsARB", names, args, w.opaque(hglrc))

    def make_current(self, hdc: int, hglrc: int) -> None:
        w = self.w
        args = {0: w.opaque(hdc) if hdc else w.null, 1: w.opaque(hglrc) if hglrc else w.null}
        self.call("wglMakeCurrent", ("hdc", "hglrc"), args, self.true())

    def wgl_extensions(self, hdc: int) -> None:
        """What a program does to reach the ARB entry points (all compile to nothing)."""
        w = self.w
        for name in ("wglChoosePixelFormatARB", "wglCreateContextAttribsARB"):
            self.call("wglGetProcAddress", ("lpszProc",), {0: w.string(name)}, w.opaque(0x7FF10))
        ext = w.string("WGL_ARB_pixel_format WGL_ARB_create_context WGL_ARB_pbuffer")
        self.call("wglGetExtensionsStringARB", ("hdc",), {0: w.opaque(hdc)}, ext)

    def swap(self, hdc: int) -> None:
        self.call("wglSwapBuffers", ("hdc",), {0: self.w.opaque(hdc)}, self.true())

    def dummy_context(self) -> None:
        """The throwaway window and context WGL programs need before any ARB call."""
        self.choose_pixel_format(HDC_DUMMY, 7)
        self.create_context(HDC_DUMMY, HGLRC_DUMMY)
        self.make_current(HDC_DUMMY, HGLRC_DUMMY)
        self.wgl_extensions(HDC_DUMMY)


def wgl_frames(p: Program) -> None:
    """Three frames of the clear-and-triangle program on HDC, then teardown."""
    p.make_current(HDC, HGLRC)
    p.viewport(0, 0, W, H, fake=True)
    for rgb in CLEARS:
        p.clear(rgb)
        p.triangle()
        p.swap(HDC)
    p.make_current(0, 0)
    p.call("wglDeleteContext", ("hglrc",), {0: p.w.opaque(HGLRC)}, p.true())


def legacy_wgl_trace(path) -> str:
    p = Program()
    p.choose_pixel_format(HDC, 9)
    p.create_context(HDC, HGLRC)
    wgl_frames(p)
    return p.save(path)


def arb_wgl_trace(path) -> str:
    p = Program()
    p.dummy_context()
    p.choose_pixel_format_arb(HDC, WINDOW_FORMAT, 12)
    pairs = [("WGL_CONTEXT_MAJOR_VERSION_ARB", 2), ("WGL_CONTEXT_MINOR_VERSION_ARB", 1)]
    p.create_context_attribs(HDC, HGLRC, pairs)
    p.make_current(0, 0)
    p.call("wglDeleteContext", ("hglrc",), {0: p.w.opaque(HGLRC_DUMMY)}, p.true())
    wgl_frames(p)
    return p.save(path)


# --- CGL, as specs/cglapi.py describes it --------------------------------------------------

CGL_ATTRIBUTES = (
    ("kCGLPFADoubleBuffer", 5),
    ("kCGLPFAColorSize", 8),
    ("kCGLPFAAlphaSize", 11),
    ("kCGLPFADepthSize", 12),
    ("kCGLPFAStencilSize", 13),
    ("kCGLPFAAccelerated", 73),
    ("kCGLPFAOpenGLProfile", 99),
)
CGL_PROFILES = (
    ("kCGLOGLPVersion_Legacy", 0x1000),
    ("kCGLOGLPVersion_3_2_Core", 0x3200),
    ("kCGLOGLPVersion_GL4_Core", 0x4100),
)
CGL_ERRORS = (("kCGLNoError", 0), ("kCGLBadAttribute", 10000))
PIX, CTX = 0x600000C0A0E0, 0x7FA4D9008200


def cgl_trace(path) -> str:
    p = Program()
    w = p.w

    def no_error() -> bytes:  # a fresh value each time: only the first carries the signature
        return w.enum(CGL_ERRORS, 0)

    def key(value: int) -> bytes:
        return w.enum(CGL_ATTRIBUTES, value)

    attribs = w.array(
        key(5),  # kCGLPFADoubleBuffer: a boolean, no value
        key(73),  # kCGLPFAAccelerated: a boolean
        key(8), w.int(24),  # kCGLPFAColorSize
        key(11), w.int(8),  # kCGLPFAAlphaSize
        key(12), w.int(24),  # kCGLPFADepthSize
        key(99), w.enum(CGL_PROFILES, 0x1000),  # kCGLPFAOpenGLProfile: legacy
        key(0),
    )  # fmt: skip
    no = w.enter("CGLChoosePixelFormat", ("attribs", "pix", "npix"), {0: attribs})
    w.leave(no, {1: w.array(w.opaque(PIX)), 2: w.array(w.int(1))}, ret=no_error())
    no = w.enter("CGLCreateContext", ("pix", "share", "ctx"), {0: w.opaque(PIX), 1: w.null})
    w.leave(no, {2: w.array(w.opaque(CTX))}, ret=no_error())
    p.call("CGLDestroyPixelFormat", ("pix",), {0: w.opaque(PIX)}, no_error())
    p.call("CGLSetCurrentContext", ("ctx",), {0: w.opaque(CTX)}, no_error())
    p.viewport(0, 0, W, H, fake=True)
    for rgb in CLEARS:
        p.clear(rgb)
        p.triangle()
        p.call("CGLFlushDrawable", ("ctx",), {0: w.opaque(CTX)}, no_error())
    p.call("CGLSetCurrentContext", ("ctx",), {0: w.null}, no_error())
    p.call("CGLDestroyContext", ("ctx",), {0: w.opaque(CTX)}, no_error())
    return p.save(path)


# --- what the readers make of recorded attribute lists (no driver needed) ------------------


class RecordingWs:
    """Stands in for WindowSystem: each operation's name, for entries to name."""

    def __getattr__(self, name: str):
        return name


def compiled(path: str) -> list[tuple[str, tuple]]:
    """The window-system entries of a trace, as (operation, arguments)."""
    compiler = WsCompiler(RecordingWs())  # type: ignore[arg-type]
    entries = []
    for _, name, args, ret in recorded_calls(path):
        entry = compiler.compile(name, args, ret, 0)
        if entry is not None:
            entries.append(entry)
    return cast("list[tuple[str, tuple]]", entries)  # RecordingWs: operations by name


def test_equal_entries_are_one_object(tmp_path):
    """The compiled trace keeps its entries to its end: a swap a frame is one entry."""
    swaps = [e for e in compiled(legacy_wgl_trace(tmp_path / "legacy.trace")) if e[0] == "swap"]
    assert len(swaps) == 3 and all(swap is swaps[0] for swap in swaps)


def test_recorded_wgl_calls_compile(tmp_path):
    legacy = compiled(legacy_wgl_trace(tmp_path / "legacy.trace"))
    ops = [op for op, _ in legacy]
    assert ops == ["create_context", "make_current"] + ["swap"] * 3 + [
        "make_current",
        "destroy_context",
    ]
    _, (ctx, request, fmt, share) = legacy[0]
    assert (ctx, request.major, request.profile, share) == (HGLRC, 1, "compat", 0)
    assert (fmt.alpha, fmt.depth, fmt.stencil, fmt.double_buffer) == (8, 24, 8, True)
    assert legacy[1] == ("make_current", (0, HDC, HGLRC))
    assert legacy[2] == ("swap", (HDC,))

    arb = compiled(arb_wgl_trace(tmp_path / "arb.trace"))
    creates = [args for op, args in arb if op == "create_context"]
    assert [c[0] for c in creates] == [HGLRC_DUMMY, HGLRC]
    _, request, fmt, _ = creates[1]
    assert (request.major, request.minor, request.profile) == (2, 1, "compat")
    assert (fmt.depth, fmt.double_buffer) == (24, True)


def test_recorded_cgl_calls_compile(tmp_path):
    entries = compiled(cgl_trace(tmp_path / "cgl.trace"))
    assert [op for op, _ in entries] == ["create_context", "make_current"] + ["swap"] * 3 + [
        "make_current",
        "destroy_context",
    ]
    _, (ctx, request, fmt, share) = entries[0]
    assert (ctx, request.major, request.profile, share) == (CTX, 1, "compat", 0)
    assert (fmt.alpha, fmt.depth, fmt.double_buffer) == (8, 24, True)
    assert entries[1] == ("make_current", (0, ("context", CTX), CTX))
    assert entries[2] == ("swap", (("context", CTX),))


def test_pfd_members_by_position():
    pfd = [0] * len(PFD_MEMBERS)
    for name, value in (("dwFlags", 1), ("cAlphaBits", 8), ("cDepthBits", 32)):
        pfd[PFD_MEMBERS.index(name)] = value
    fmt = pfd_format([tuple(pfd)])
    assert (fmt.alpha, fmt.depth, fmt.stencil, fmt.double_buffer) == (8, 32, 8, True)


@pytest.mark.parametrize(
    "attribs, samples, double",
    [
        ([0x2011, 1, 0x2022, 24, 0x2041, 1, 0x2042, 4, 0], 4, True),
        ([0x2011, 0, 0x2042, 4, 0], 0, False),  # samples without sample buffers: none
    ],
)
def test_wgl_arb_attributes(attribs, samples, double):
    fmt = wgl_attrib_format(attribs, [0.0])
    assert (fmt.samples, fmt.double_buffer, fmt.depth) == (samples, double, 24)


@pytest.mark.parametrize(
    "profile, version, core",
    [(None, (1, 0), "compat"), (0x1000, (1, 0), "compat"), (0x3200, (3, 2), "core"),
     (0x4100, (4, 1), "core")],
)  # fmt: skip
def test_cgl_profiles(profile, version, core):
    attribs = [5, 8, 24, 12, 16, 73] + ([99, profile] if profile is not None else []) + [0]
    fmt, request = cgl_pixel_format(attribs)
    assert (request.major, request.minor, request.profile) == (*version, core)
    assert request.forward_compatible == (core == "core")
    assert fmt.double_buffer and fmt.depth == 24  # raised to glretrace's 24


def test_cgl_booleans_take_no_value():
    # kCGLPFAAccelerated (73) and kCGLPFANoRecovery (72) are booleans: 12 is DepthSize, 32 its value
    fmt, _ = cgl_pixel_format([73, 72, 12, 32, 13, 8, 0])
    assert (fmt.depth, fmt.stencil, fmt.double_buffer) == (32, 8, False)
