"""GLX: the window-system calls of traces captured on X11.

A visual (glXChooseVisual) or framebuffer config (glXChooseFBConfig) stands for
a pixel format; contexts are created for one, with glXCreateContextAttribsARB's
list giving version, profile and flags; windows and pbuffers are drawables,
bound with a context by glXMake(Context)Current and ended by glXSwapBuffers.
Windows start at glretrace's 32x32 and grow with their viewports (their size is
not traced); a pbuffer has the size it was created with.

Calls that only query the window system need no replay and compile to nothing.
"""

from __future__ import annotations

from typing import Any

from retrace.replay.values import handle, integer
from retrace.replay.ws.core import (
    LEGACY_CONTEXT,
    Entry,
    Handler,
    WindowSystem,
    attrib_pairs,
    glretrace_format,
)
from retrace.replay.ws.headless import DEFAULT_SIZE, ContextRequest, PixelFormat

# GLX attributes (GL/glx.h): booleans in glXChooseVisual lists take no value.
GLX_DOUBLEBUFFER = 5
GLX_BOOLEANS = {1, 4, GLX_DOUBLEBUFFER, 6}  # GLX_USE_GL, GLX_RGBA, GLX_STEREO
GLX_FORMAT = {
    GLX_DOUBLEBUFFER: "double_buffer",
    8: "red",
    9: "green",
    10: "blue",
    11: "alpha",
    12: "depth",
    13: "stencil",
    100001: "samples",
}  # GLX_SAMPLES = 100001
GLX_PBUFFER_WIDTH, GLX_PBUFFER_HEIGHT = 0x8041, 0x8040
# GLX_CONTEXT_* (GLX_ARB_create_context), WGL uses the same values.
CTX_MAJOR, CTX_MINOR, CTX_FLAGS, CTX_PROFILE = 0x2091, 0x2092, 0x2094, 0x9126
CTX_CORE_BIT, CTX_ES_BIT = 0x1, 0x4
CTX_DEBUG_BIT, CTX_FORWARD_BIT, CTX_ROBUST_BIT = 0x1, 0x2, 0x4


def glx_visual_format(attribs: Any) -> PixelFormat:
    """Pixel format of a glXChooseVisual list, where boolean attributes take no value."""
    wanted: dict[str, int] = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 0}
    values = attribs if isinstance(attribs, list) else []
    i = 0
    while i < len(values) and values[i] != 0:
        name = integer(values[i])
        if name in GLX_BOOLEANS:
            if name == GLX_DOUBLEBUFFER:
                wanted["double_buffer"] = 1
            i += 1
            continue
        if i + 1 < len(values) and name in GLX_FORMAT:
            wanted[GLX_FORMAT[name]] = integer(values[i + 1])
        i += 2
    return glretrace_format(wanted)


def glx_config_format(attribs: Any) -> PixelFormat:
    """Pixel format of a glXChooseFBConfig list (all attributes take a value)."""
    wanted = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 1}
    for name, value in attrib_pairs(attribs).items():
        if name in GLX_FORMAT:
            wanted[GLX_FORMAT[name]] = value
    return glretrace_format(wanted)


def glx_context_request(attribs: Any) -> ContextRequest:
    """The context a GLX/WGL *CreateContextAttribsARB list asks for, read as glretrace reads it."""
    pairs = attrib_pairs(attribs)
    major, minor = pairs.get(CTX_MAJOR, 1), pairs.get(CTX_MINOR, 0)
    mask = pairs.get(CTX_PROFILE, CTX_CORE_BIT)
    flags = pairs.get(CTX_FLAGS, 0)
    if mask & CTX_ES_BIT:
        return ContextRequest(api="gles", major=major, minor=minor)
    core = bool(mask & CTX_CORE_BIT) and (major, minor) >= (3, 2)
    return ContextRequest(
        api="gl",
        major=major,
        minor=minor,
        profile="core" if core else "compat",
        debug=bool(flags & CTX_DEBUG_BIT),
        forward_compatible=bool(flags & CTX_FORWARD_BIT) and major >= 3,
        robust=bool(flags & CTX_ROBUST_BIT),
    )


class GlxReader:
    """Reads GLX calls at compile time: the pixel format each visual or config stands for."""

    # handlers whose entries depend on the call's arguments and result alone and that
    # change nothing: the swaps (`WsCompiler.pure`)
    PURE = frozenset({"glXSwapBuffers"})

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.formats: dict[int | tuple[str, int], PixelFormat] = {}  # visual or config -> format

    def handlers(self) -> dict[str, Handler]:
        return {
            "glXChooseVisual": self._choose_visual,
            "glXChooseFBConfig": self._choose_fbconfig,
            "glXChooseFBConfigSGIX": self._choose_fbconfig,
            "glXGetVisualFromFBConfig": self._visual_from_config,
            "glXCreateContext": self._create_context,
            "glXCreateNewContext": self._create_new_context,
            "glXCreateContextAttribsARB": self._create_context_attribs,
            "glXCreateWindow": self._create_window,
            "glXCreatePbuffer": self._create_pbuffer,
            "glXMakeCurrent": self._make_current,
            "glXMakeContextCurrent": self._make_context_current,
            "glXSwapBuffers": self._swap,
            "glXDestroyContext": self._destroy_context,
        }

    def _format_of(self, key: Any) -> PixelFormat:
        return self.formats.get(handle(key), PixelFormat())

    def _choose_visual(self, args, ret, thread) -> None:
        if ret is not None:
            self.formats[handle(ret)] = glx_visual_format(args[2])

    def _choose_fbconfig(self, args, ret, thread) -> None:
        fmt = glx_config_format(args[2])
        for config in ret if isinstance(ret, list) else []:
            self.formats[handle(config)] = fmt

    def _visual_from_config(self, args, ret, thread) -> None:
        if ret is not None:
            self.formats[handle(ret)] = self._format_of(args[1])

    def _create_context(self, args, ret, thread) -> Entry:
        """glXCreateContext(dpy, vis, shareList, direct)."""
        fmt = self._format_of(args[1])
        return (self.ws.create_context, (integer(ret), LEGACY_CONTEXT, fmt, integer(args[2])))

    def _create_new_context(self, args, ret, thread) -> Entry:
        """glXCreateNewContext(dpy, config, renderType, shareList, direct)."""
        fmt = self._format_of(args[1])
        return (self.ws.create_context, (integer(ret), LEGACY_CONTEXT, fmt, integer(args[3])))

    def _create_context_attribs(self, args, ret, thread) -> Entry:
        """glXCreateContextAttribsARB(dpy, config, share_context, direct, attrib_list)."""
        request = glx_context_request(args[4])
        fmt = self._format_of(args[1])
        return (self.ws.create_context, (integer(ret), request, fmt, integer(args[2])))

    def _create_window(self, args, ret, thread) -> Entry:
        return (self.ws.create_drawable, (integer(ret), DEFAULT_SIZE, DEFAULT_SIZE, False))

    def _create_pbuffer(self, args, ret, thread) -> Entry:
        pairs = attrib_pairs(args[2])
        size = (pairs.get(GLX_PBUFFER_WIDTH, 0), pairs.get(GLX_PBUFFER_HEIGHT, 0))
        return (self.ws.create_drawable, (integer(ret), *size, True))

    def _make_current(self, args, ret, thread) -> Entry:
        """glXMakeCurrent(dpy, drawable, ctx)."""
        return (self.ws.make_current, (thread, integer(args[1]), integer(args[2])))

    def _make_context_current(self, args, ret, thread) -> Entry:
        """glXMakeContextCurrent(dpy, draw, read, ctx)."""
        return (self.ws.make_current, (thread, integer(args[1]), integer(args[3])))

    def _swap(self, args, ret, thread) -> Entry:
        return (self.ws.swap, (integer(args[1]),))

    def _destroy_context(self, args, ret, thread) -> Entry:
        return (self.ws.destroy_context, (integer(args[1]),))
