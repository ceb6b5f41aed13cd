"""CGL: the window-system calls of traces captured on macOS.

A CGL context owns its drawable: CGLSetCurrentContext(ctx) names only the
context, and the drawable is whatever was last attached to it (a window
surface by CGLSetSurface, an offscreen buffer by CGLSetOffScreen, a pbuffer
by CGLSetPBuffer). Cocoa programs attach windows through calls apitrace does
not see, so a context that never had one renders to a window of its own:
one growing stand-in per context, as glretrace does. CGLFlushDrawable(ctx)
ends a frame on the context's drawable.

The version a context gets comes from its pixel format
(kCGLPFAOpenGLProfile), not from the context call. Contexts the trace uses
but never created (a context made inside a framework where apitrace does
not look) are created at first use, as glretrace does.

Calls that apitrace records but that need no replay compile to nothing.
"""

from __future__ import annotations

from typing import Any

from retrace.replay.state import DrawableKey
from retrace.replay.values import integer
from retrace.replay.ws.core import (
    LEGACY_CONTEXT,
    Entry,
    Handler,
    WindowSystem,
    channel_bits,
    glretrace_format,
    output_handle,
)
from retrace.replay.ws.headless import ContextRequest, PixelFormat

# CGLPixelFormatAttribute (CGLTypes.h). Booleans are recorded without a value; every
# other attribute, known or not, with one (apitrace writes unknown keys with a value).
kCGLPFATripleBuffer, kCGLPFADoubleBuffer = 3, 5
kCGLPFAColorSize, kCGLPFAAlphaSize, kCGLPFADepthSize, kCGLPFAStencilSize = 8, 11, 12, 13
kCGLPFASampleBuffers, kCGLPFASamples = 55, 56
kCGLPFAOpenGLProfile = 99
CGL_BOOLEANS = frozenset(
    {
        1,  # kCGLPFAAllRenderers
        kCGLPFATripleBuffer,
        kCGLPFADoubleBuffer,
        6,  # kCGLPFAStereo
        51,  # kCGLPFAMinimumPolicy
        52,  # kCGLPFAMaximumPolicy
        53,  # kCGLPFAOffScreen
        54,  # kCGLPFAFullScreen
        57,  # kCGLPFAAuxDepthStencil
        58,  # kCGLPFAColorFloat
        59,  # kCGLPFAMultisample
        60,  # kCGLPFASupersample
        61,  # kCGLPFASampleAlpha
        71,  # kCGLPFASingleRenderer
        72,  # kCGLPFANoRecovery
        73,  # kCGLPFAAccelerated
        74,  # kCGLPFAClosestPolicy
        75,  # kCGLPFARobust
        76,  # kCGLPFABackingStore
        77,  # kCGLPFABackingVolatile
        78,  # kCGLPFAMPSafe
        80,  # kCGLPFAWindow
        81,  # kCGLPFAMultiScreen
        83,  # kCGLPFACompliant
        90,  # kCGLPFAPBuffer
        91,  # kCGLPFARemotePBuffer
        96,  # kCGLPFAAllowOfflineRenderers
        97,  # kCGLPFAAcceleratedCompute
        101,  # kCGLPFASupportsAutomaticGraphicsSwitching
        1262,  # undocumented; apitrace records it as a boolean
    }
)
CGL_FORMAT = {kCGLPFAAlphaSize: "alpha", kCGLPFADepthSize: "depth", kCGLPFAStencilSize: "stencil"}

# CGLOpenGLProfile: the version in its top bytes (0x3200 is 3.2, 0x4100 is 4.1).
kCGLOGLPVersion_Legacy = 0x1000
kCGLNoError = 0


def cgl_context_request(profile: int) -> ContextRequest:
    """The context a kCGLPFAOpenGLProfile value stands for.

    Legacy is whatever compatibility version the driver has (macOS gives 2.1);
    3.2 and later are core, forward-compatible contexts, the only kind macOS has.
    """
    major, minor = profile >> 12, (profile >> 8) & 0xF
    if (major, minor) < (3, 2):
        return LEGACY_CONTEXT
    return ContextRequest(
        api="gl", major=major, minor=minor, profile="core", forward_compatible=True
    )


def cgl_pixel_format(attribs: Any) -> tuple[PixelFormat, ContextRequest]:
    """Pixel format and context of a CGLChoosePixelFormat attribute list."""
    wanted = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 0}
    values = [integer(v) for v in attribs] if isinstance(attribs, list) else []
    sample_buffers = samples = 0
    profile = kCGLOGLPVersion_Legacy
    i = 0
    while i < len(values) and values[i] != 0:
        name = values[i]
        if name in CGL_BOOLEANS:
            if name in (kCGLPFADoubleBuffer, kCGLPFATripleBuffer):
                wanted["double_buffer"] = 1
            i += 1
            continue
        value = values[i + 1] if i + 1 < len(values) else 0
        i += 2
        if name in CGL_FORMAT:
            wanted[CGL_FORMAT[name]] = value
        elif name == kCGLPFAColorSize:
            wanted["red"] = wanted["green"] = wanted["blue"] = channel_bits(value)
        elif name == kCGLPFASampleBuffers:
            sample_buffers = value
        elif name == kCGLPFASamples:
            samples = value
        elif name == kCGLPFAOpenGLProfile:
            profile = value
    if sample_buffers > 0:
        wanted["samples"] = samples
    return glretrace_format(wanted), cgl_context_request(profile)


def failed(ret: Any) -> bool:
    """A recorded CGLError other than kCGLNoError (None: the result was not recorded)."""
    return ret is not None and ret != kCGLNoError


def _run(entries: tuple[Entry, ...]) -> None:
    for fn, args in entries:
        fn(*args)


class CglReader:
    """Reads CGL calls at compile time: formats, which drawable each context has, what is
    current on each thread (attaching a drawable to the current context rebinds it)."""

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.formats: dict[int, tuple[PixelFormat, ContextRequest]] = {}  # CGLPixelFormatObj
        self.contexts: set[int] = set()  # created so far (in replay order)
        self.adopted = 0  # the first context created at first use: later ones share it
        self.drawables: dict[int, DrawableKey] = {}  # context -> its attached drawable
        self.current: dict[int, int] = {}  # thread -> context

    def handlers(self) -> dict[str, Handler]:
        return {
            "CGLChoosePixelFormat": self._choose_pixel_format,
            "CGLCreateContext": self._create_context,
            "CGLDestroyContext": self._destroy_context,
            "CGLSetCurrentContext": self._set_current_context,
            "CGLFlushDrawable": self._flush_drawable,
            "CGLSetSurface": self._set_surface,
            "CGLClearDrawable": self._clear_drawable,
            "CGLSetOffScreen": self._set_off_screen,
            "CGLCreatePBuffer": self._create_pbuffer,
            "CGLSetPBuffer": self._set_pbuffer,
        }

    def _drawable(self, ctx: int) -> DrawableKey:
        """The context's drawable: the one attached last, else a window of its own."""
        return self.drawables.get(ctx, ("context", ctx))

    def _attach(self, ctx: int, key: DrawableKey, thread: int, *before: Entry) -> Entry | None:
        """Attach a drawable to a context; the current one renders to it from now on."""
        self.drawables[ctx] = key
        entries = list(before)
        if ctx and self.current.get(thread) == ctx:
            entries.append((self.ws.make_current, (thread, key, ctx)))
        if not entries:
            return None
        return entries[0] if len(entries) == 1 else (_run, (tuple(entries),))

    # --- pixel formats and contexts ---------------------------------------------------------

    def _choose_pixel_format(self, args, ret, thread) -> None:
        """CGLChoosePixelFormat(attribs, pix, npix): pix stands for the format and version."""
        pix = output_handle(args[1])
        if not failed(ret) and pix:
            self.formats[pix] = cgl_pixel_format(args[0])

    def _create_context(self, args, ret, thread) -> Entry | None:
        """CGLCreateContext(pix, share, ctx): the version comes with the pixel format."""
        ctx = output_handle(args[2])
        if failed(ret) or not ctx:
            return None
        fmt, request = self.formats.get(integer(args[0]), (PixelFormat(), LEGACY_CONTEXT))
        self.contexts.add(ctx)
        return (self.ws.create_context, (ctx, request, fmt, integer(args[1])))

    def _destroy_context(self, args, ret, thread) -> Entry | None:
        """CGLDestroyContext(ctx): unlike GLX and WGL, CGL first releases a current context."""
        ctx = integer(args[0])
        if failed(ret) or not ctx:
            return None
        destroy = (self.ws.destroy_context, (ctx,))
        if self.current.get(thread) != ctx:
            return destroy
        self.current[thread] = 0
        return (_run, (((self.ws.make_current, (thread, 0, 0)), destroy),))

    # --- binding and frames -----------------------------------------------------------------

    def _set_current_context(self, args, ret, thread) -> Entry | None:
        """CGLSetCurrentContext(ctx): ctx with its drawable; NULL releases."""
        if failed(ret):
            return None
        ctx = integer(args[0])
        self.current[thread] = ctx
        if not ctx:
            return (self.ws.make_current, (thread, 0, 0))
        bind = (self.ws.make_current, (thread, self._drawable(ctx), ctx))
        if ctx in self.contexts:
            return bind
        self.contexts.add(ctx)
        self.adopted = self.adopted or ctx
        share = self.adopted if self.adopted != ctx else 0
        create = (self.ws.create_context, (ctx, LEGACY_CONTEXT, PixelFormat(), share))
        return (_run, ((create, bind),))

    def _flush_drawable(self, args, ret, thread) -> Entry | None:
        """CGLFlushDrawable(ctx): the frame ends on ctx's drawable."""
        if failed(ret):
            return None
        return (self.ws.swap, (self._drawable(integer(args[0])),))

    def _set_surface(self, args, ret, thread) -> Entry | None:
        """CGLSetSurface(ctx, cid, wid, sid): a window surface, known by its surface id."""
        if failed(ret):
            return None
        return self._attach(integer(args[0]), ("surface", integer(args[3])), thread)

    def _clear_drawable(self, args, ret, thread) -> None:
        """CGLClearDrawable(ctx): detached; next time current, ctx has its own window again."""
        if not failed(ret):
            self.drawables.pop(integer(args[0]), None)

    def _set_off_screen(self, args, ret, thread) -> Entry | None:
        """CGLSetOffScreen(ctx, width, height, rowbytes, baseaddr): a fixed-size buffer. The
        program reads its pixels from baseaddr, which the replay does not fill."""
        if failed(ret):
            return None
        ctx = integer(args[0])
        key = ("offscreen", ctx)
        size = (integer(args[1]), integer(args[2]))
        return self._attach(ctx, key, thread, (self.ws.create_drawable, (key, *size, True)))

    def _create_pbuffer(self, args, ret, thread) -> Entry | None:
        """CGLCreatePBuffer(width, height, target, internalFormat, max_level, pbuffer)."""
        pbuffer = output_handle(args[5])
        if failed(ret) or not pbuffer:
            return None
        size = (integer(args[0]), integer(args[1]))
        return (self.ws.create_drawable, (("pbuffer", pbuffer), *size, True))

    def _set_pbuffer(self, args, ret, thread) -> Entry | None:
        """CGLSetPBuffer(ctx, pbuffer, face, level, screen): the context renders to the
        pbuffer (as a whole: faces and levels are for texturing from it, not replayed)."""
        if failed(ret):
            return None
        return self._attach(integer(args[0]), ("pbuffer", integer(args[1])), thread)
