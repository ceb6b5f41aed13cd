"""A small writer of apitrace's binary format, for tests.

Real programs traced with Debian's apitrace only produce format version 6, so
this writer builds traces of every version (0-6) and every value kind from the
grammar in apitrace's docs/FORMAT.markdown. Tests hand its output to both
`apitrace dump` and `retrace dump` and compare.
"""

from __future__ import annotations

import builtins  # int and float: TraceWriter has methods of those names
import math
import struct
from dataclasses import dataclass, field

import cramjam


def uint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def string(s: bytes | str) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return uint(len(raw)) + raw


@dataclass
class TraceWriter:
    """Builds the decompressed event stream; `snappy()` wraps it as apitrace does."""

    version: int = 6
    properties: dict[str, str] = field(default_factory=dict)
    _out: bytearray = field(default_factory=bytearray)
    _defined: set[tuple[str, int]] = field(default_factory=set)
    _next_call: int = 0
    _ids: dict[tuple[str, object], int] = field(default_factory=dict)
    # (stream offset where the event ends, "enter" or "leave", call number)
    events: list[tuple[int, str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._out += uint(self.version)
        if self.version >= 6:
            self._out += uint(self.version)
            for k, v in self.properties.items():
                self._out += string(k) + string(v)
            self._out += string(b"")

    # -- signatures: an id per distinct definition, the definition written once

    def _sig(self, kind: str, key: object, definition: bytes) -> bytes:
        sid = self._ids.setdefault((kind, key), len([k for k in self._ids if k[0] == kind]))
        if (kind, sid) in self._defined:
            return uint(sid)
        self._defined.add((kind, sid))
        return uint(sid) + definition

    # -- values

    null = b"\x00"
    false = b"\x01"
    true = b"\x02"

    @staticmethod
    def int(n: int) -> bytes:
        return b"\x03" + uint(-n) if n < 0 else b"\x04" + uint(n)

    @staticmethod
    def float(x: float) -> bytes:
        return b"\x05" + struct.pack("<f", x)

    @staticmethod
    def double(x: builtins.float) -> bytes:
        return b"\x06" + struct.pack("<d", x)

    @staticmethod
    def string(s: bytes | str) -> bytes:
        return b"\x07" + string(s)

    @staticmethod
    def blob(data: bytes) -> bytes:
        return b"\x08" + string(data)

    def enum(self, values: tuple[tuple[str, builtins.int], ...], value: builtins.int) -> bytes:
        if self.version >= 3:
            definition = uint(len(values)) + b"".join(string(n) + self.int(v) for n, v in values)
            return b"\x09" + self._sig("enum", values, definition) + self.int(value)
        # before version 3 an enum signature is a single name and value
        name = dict((v, n) for n, v in reversed(values)).get(value, str(value))
        return b"\x09" + self._sig("enum", (name, value), string(name) + self.int(value))

    def bitmask(self, flags: tuple[tuple[str, builtins.int], ...], value: builtins.int) -> bytes:
        definition = uint(len(flags)) + b"".join(string(n) + uint(v) for n, v in flags)
        return b"\x0a" + self._sig("bitmask", flags, definition) + uint(value)

    @staticmethod
    def array(*values: bytes) -> bytes:
        return b"\x0b" + uint(len(values)) + b"".join(values)

    def struct(self, name: str, members: tuple[str, ...], *values: bytes) -> bytes:
        definition = string(name) + uint(len(members)) + b"".join(string(m) for m in members)
        return b"\x0c" + self._sig("struct", (name, members), definition) + b"".join(values)

    @staticmethod
    def opaque(address: builtins.int) -> bytes:
        return b"\x0d" + uint(address)

    @staticmethod
    def repr(human: bytes, machine: bytes) -> bytes:
        return b"\x0e" + human + machine

    @staticmethod
    def wstring(text: str) -> bytes:
        return b"\x0f" + uint(len(text)) + b"".join(uint(ord(c)) for c in text)

    # -- events

    def enter(
        self,
        name: str,
        arg_names: tuple[str, ...],
        args: dict[builtins.int, bytes],
        thread: builtins.int = 0,
        fake: bool = False,
        backtrace: list[tuple[builtins.int, dict[builtins.int, bytes | builtins.int]]]
        | None = None,
    ) -> builtins.int:
        """Write an enter event; returns the call number apitrace assigns."""
        out = self._out
        out += b"\x00"
        if self.version >= 4:
            out += uint(thread)
        definition = string(name) + uint(len(arg_names)) + b"".join(string(a) for a in arg_names)
        out += self._sig("call", (name, arg_names), definition)
        for index, value in args.items():
            out += b"\x01" + uint(index) + value
        if fake:
            out += b"\x05" + uint(1)
        if backtrace is not None:
            out += b"\x04" + uint(len(backtrace))
            for frame_id, details in backtrace:
                out += uint(frame_id)
                if ("frame", frame_id) not in self._defined:
                    self._defined.add(("frame", frame_id))
                    for kind, detail in details.items():
                        out += bytes([kind]) + (
                            uint(detail) if isinstance(detail, builtins.int) else string(detail)
                        )
                    out += b"\x00"
        out += b"\x00"
        self._next_call += 1
        self.events.append((len(out), "enter", self._next_call - 1))
        return self._next_call - 1

    def leave(
        self,
        call_no: builtins.int,
        args: dict[builtins.int, bytes] | None = None,
        ret: bytes | None = None,
    ) -> None:
        out = self._out
        out += b"\x01" + uint(call_no)
        for index, value in (args or {}).items():
            out += b"\x01" + uint(index) + value
        if ret is not None:
            out += b"\x02" + ret
        out += b"\x00"
        self.events.append((len(out), "leave", call_no))

    def call(
        self,
        name: str,
        arg_names: tuple[str, ...] = (),
        args: dict[builtins.int, bytes] | None = None,
        ret: bytes | None = None,
        **enter_options,
    ) -> builtins.int:
        no = self.enter(name, arg_names, args or {}, **enter_options)
        self.leave(no, ret=ret)
        return no

    @property
    def stream(self) -> bytes:
        return bytes(self._out)

    def snappy(self, chunk_size: builtins.int = 1 << 20) -> bytes:
        return wrap_snappy(self.stream, chunk_size)


def glx_context(w: TraceWriter) -> None:
    """What a GLX program records before its first GL call: a visual, a context, MakeCurrent
    (drawable 7, context 0xC0)."""

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
        "glXMakeCurrent", ("dpy", "drawable", "ctx"), {1: w.int(7), 2: w.opaque(0xC0)}, ret=w.true
    )


def occlusion_query(w: TraceWriter, query: int, rect: tuple[float, ...] = (0, 0, 1, 1)) -> None:
    """The program's own GL_SAMPLES_PASSED query `query` around a glRectf."""
    w.call("glGenQueries", ("n", "ids"), {0: w.int(1), 1: w.array(w.int(query))})
    w.call("glBeginQuery", ("target", "id"), {0: w.int(0x8914), 1: w.int(query)})
    w.call("glRectf", ("x1", "y1", "x2", "y2"), {i: w.float(v) for i, v in enumerate(rect)})
    w.call("glEndQuery", ("target",), {0: w.int(0x8914)})


def wrap_snappy(stream: bytes, chunk_size: int = 1 << 20) -> bytes:
    """apitrace's snappy container around a decompressed stream."""
    out = bytearray(b"at")
    for i in range(0, len(stream), chunk_size):
        block = bytes(cramjam.snappy.compress_raw(stream[i : i + chunk_size]))
        out += struct.pack("<I", len(block)) + block
    return bytes(out)


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
