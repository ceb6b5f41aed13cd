"""Traces built in memory for tests, with retrace's own writer (`retrace.trace.writer`).

Real programs traced with Debian's apitrace only produce format version 6, so
the tests build traces of every version (0-6) and every value kind; they hand
them to both `apitrace dump` and `retrace dump` and compare.
"""

from __future__ import annotations

import math

from retrace.trace.writer import TraceWriter, string, uint, wrap_snappy

__all__ = ["TraceWriter", "string", "uint", "wrap_snappy"]  # for the tests, from one place


def glx_context(w: TraceWriter, drawable: int = 7) -> None:
    """What a GLX program records before its first GL call: a visual, a context, MakeCurrent
    (`drawable`, a window unless the trace made it a pbuffer; context 0xC0)."""

    def visual() -> bytes:  # a signature is written at its first use only: encode afresh
        return w.array(w.struct("XVisualInfo", ("visual", "visualid"), w.opaque(1), w.int(33)))

    w.call(
        "glXChooseVisual",
        ("dpy", "screen", "attribList"),
        {2: w.array(w.int(4), w.int(0))},
        ret=visual(),
    )
    w.call(
        "glXCreateContext",
        ("dpy", "vis", "shareList", "direct"),
        {1: visual(), 2: w.null},
        ret=w.opaque(0xC0),
    )
    w.call(
        "glXMakeCurrent",
        ("dpy", "drawable", "ctx"),
        {1: w.int(drawable), 2: w.opaque(0xC0)},
        ret=w.true,
    )


def occlusion_query(w: TraceWriter, query: int, rect: tuple[float, ...] = (0, 0, 1, 1)) -> None:
    """The program's own GL_SAMPLES_PASSED query `query` around a glRectf."""
    w.call("glGenQueries", ("n", "ids"), {0: w.int(1), 1: w.array(w.int(query))})
    w.call("glBeginQuery", ("target", "id"), {0: w.int(0x8914), 1: w.int(query)})
    w.call("glRectf", ("x1", "y1", "x2", "y2"), {i: w.float(v) for i, v in enumerate(rect)})
    w.call("glEndQuery", ("target",), {0: w.int(0x8914)})


# -- scenarios shared by the tests

GL_ENUMS = (("GL_POINTS", 0), ("GL_LINES", 1), ("GL_TRIANGLES", 4), ("GL_ALIAS", 4))
CLEAR_BITS = (("GL_NONE", 0), ("GL_DEPTH_BUFFER_BIT", 0x100), ("GL_COLOR_BUFFER_BIT", 0x4000))


def every_value_kind(w: TraceWriter) -> None:
    """Calls whose arguments cover each value kind and apitrace's formatting corner cases."""
    w.call("glFlush")
    w.call(
        "glScalars",
        ("a", "b", "c", "d", "e", "f"),
        {
            0: w.null,
            1: w.false,
            2: w.true,
            3: w.int(-5),
            4: w.int(2**64 - 1),
            5: w.int(-(2**63)),
        },
    )
    floats = [
        0.0,
        -0.0,
        1.0,
        0.1,
        1 / 3,
        1e-7,
        123456789.0,
        3.4e38,
        1e-45,
        math.inf,
        -math.inf,
        math.nan,
    ]
    for x in floats:
        w.call("glFloats", ("f", "d"), {0: w.float(x), 1: w.double(x)})
    w.call("glDouble", ("d",), {0: w.double(2.0**70)})
    for s in [
        b"",
        b"plain",
        b'quote " and \\ back',
        b"tab\tnew\nline\rcr",
        b"ctl \x01\x07\x1f\x7f",
        b"high \x80\xc3\xa9\xff",
        b"nul\x00hidden",
    ]:
        w.call("glShaderSource", ("string",), {0: w.string(s)})
    w.call("glWide", ("s",), {0: w.wstring('wide \u00e9\u4e2d\t\n"q" \x01')})
    w.call("glBlobs", ("empty", "data"), {0: w.blob(b""), 1: w.blob(bytes(range(256)))})
    for v in (0, 1, 4, 7, -1):
        w.call("glBegin", ("mode",), {0: w.enum(GL_ENUMS, v)})
    for v in (0, 0x100, 0x4100, 0x4101, 0x1):
        w.call("glClear", ("mask",), {0: w.bitmask(CLEAR_BITS, v)})
    w.call(
        "glArrays",
        ("none", "one", "many", "nested"),
        {
            0: w.array(),
            1: w.array(w.int(7)),
            2: w.array(w.int(1), w.float(2.5), w.null),
            3: w.array(w.array(w.int(1), w.int(2)), w.array(w.int(3))),
        },
    )

    def inner() -> bytes:  # the first use carries the signature, later ones only its id
        return w.struct("Inner", ("x", "y"), w.int(1), w.int(2))

    w.call(
        "glStructs",
        ("s", "anon"),
        {
            0: w.struct("Outer", ("first", "inner", "last"), w.int(0), inner(), w.string("z")),
            1: w.struct("Holder", ("", "", "named"), inner(), w.int(99), w.true),
        },
    )
    w.call("glPointers", ("p", "zero"), {0: w.opaque(0xDEADBEEF), 1: w.opaque(0)})
    w.call("glRepr", ("r",), {0: w.repr(w.enum(GL_ENUMS, 1), w.int(1))})
    w.call("glMissing", ("given", "absent", "given2"), {0: w.int(1), 2: w.int(3)})
    w.call("glReturns", (), ret=w.int(42))
    w.call("glGetError", (), ret=w.enum((("GL_NO_ERROR", 0),), 0))  # hidden: verbose
    w.call("glGetError", (), ret=w.enum((("GL_INVALID_ENUM", 0x500),), 0x500))
    w.call("glGetString", ("name",), {0: w.int(0x1F00)}, ret=w.string("Mesa"))  # verbose
    w.call(
        "glViewport",
        ("x", "y", "w", "h"),
        {i: w.int(v) for i, v in enumerate((0, 0, 300, 200))},
        fake=True,
    )
    w.call("glXSwapBuffers", ("dpy", "drawable"), {0: w.opaque(0x1), 1: w.int(2)})
    w.call("glFrameTerminatorGREMEDY")


def threads_and_leftovers(w: TraceWriter) -> None:
    """Calls overtaken by another thread, a leave without enter, and calls that never return."""
    a = w.enter("glFinish", (), {})
    b = w.enter("glFlush", (), {}, thread=1 if w.version >= 4 else 0)
    w.leave(b)
    w.leave(a, ret=w.int(1))
    w.leave(10_000)  # stranded leave: skipped
    w.call(
        "glBacktraced",
        ("x",),
        {0: w.int(1)},
        backtrace=[
            (0, {1: "libapp.so", 2: "draw", 3: "app.c", 4: 42, 5: 0x1F0}),
            (1, {1: "libc.so.6"}),
            (2, {}),
        ],
    ) if w.version >= 5 else None
    w.enter("glCrashes", ("x",), {0: w.int(5)})
    w.enter("glAlsoPending", (), {})


def same_work_more_waiting(
    w: TraceWriter, steps: tuple[int, ...], draws: int = 4, size: int = 512
) -> None:
    """One frame per step, each the same GPU work (a clear and `draws` blended `size`
    squared rectangles, each sent off with glFlush) with `step` cheap CPU-side calls
    (glColor4f, state the next rectangle overrides) after each rectangle: the GPU waits
    for them, so a frame's GPU span grows with the step while its GPU work does not."""
    glx_context(w)
    w.call(
        "glViewport", ("x", "y", "width", "height"), {2: w.int(size), 3: w.int(size), 0: w.int(0)}
    )
    w.call("glEnable", ("cap",), {0: w.int(0x0BE2)})  # GL_BLEND
    w.call("glBlendFunc", ("sfactor", "dfactor"), {0: w.int(0x0302), 1: w.int(0x0303)})
    rect = {k: w.float(v) for k, v in enumerate((-1, -1, 1, 1))}
    for step in steps:
        w.call("glClear", ("mask",), {0: w.int(0x4000)})
        for i in range(draws):
            for k in range(step + 1):  # the last one sets the rectangle's colour
                rgba = (i / draws, k / (step + 1), 0.5, 0.3)
                w.call(
                    "glColor4f",
                    ("red", "green", "blue", "alpha"),
                    {c: w.float(v) for c, v in enumerate(rgba)},
                )
            w.call("glRectf", ("x1", "y1", "x2", "y2"), rect)
            w.call("glFlush")
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
