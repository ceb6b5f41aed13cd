"""Window-system translation: the trace's glX*/egl*/wgl*/CGL* calls become EGL operations.

The traced program talked to X11, to a display's EGL, to Windows (WGL) or to
macOS (CGL); none of its handles mean anything here. At compile time each
window-system call is read for what it tells (the pixel format a visual or
config stands for, the version and profile a context asked for, a pbuffer's
size) and becomes an entry that, at replay time, creates or binds the
corresponding headless EGL object. Windows become pbuffers that start at
glretrace's 32x32 and grow with the viewports the program sets on them, since
window sizes are not traced.

Calls that only query the window system need no replay and compile to nothing.

GLX and EGL are read here; WGL and CGL, whose handle models differ (a Windows
device context is the drawable, a macOS context owns its drawable), are read by
`ws_wgl` and `ws_cgl` into the same `WindowSystem` operations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from retrace.errors import RetraceError
from retrace.replay.egl import ContextRequest, PixelFormat
from retrace.replay.fidelity import GlErrors
from retrace.replay.state import DEFAULT_SIZE, Drawable, ReplayState, TracedContext
from retrace.replay.values import BadValue, handle, integer

Entry = tuple[Callable[..., Any], tuple[Any, ...]]
# A drawable's key in the replay state: the handle the trace used for it, or (kind, handle)
# where a window system's drawables have several handle namespaces (WGL pbuffers, CGL).
DrawableKey = int | tuple[str, int]

# GLX attributes (GL/glx.h): booleans in glXChooseVisual lists take no value.
GLX_BOOLEANS = {1, 4, 5, 6}  # GLX_USE_GL, GLX_RGBA, GLX_DOUBLEBUFFER, GLX_STEREO
GLX_FORMAT = {
    5: "double_buffer",
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

EGL_FORMAT = {
    0x3024: "red",
    0x3023: "green",
    0x3022: "blue",
    0x3021: "alpha",
    0x3025: "depth",
    0x3026: "stencil",
    0x3031: "samples",
}
EGL_NONE, EGL_WIDTH, EGL_HEIGHT = 0x3038, 0x3057, 0x3056
EGL_RENDERABLE_TYPE = 0x3040
EGL_OPENGL_ES_API, EGL_OPENGL_API = 0x30A0, 0x30A2
EGL_CONTEXT_MAJOR, EGL_CONTEXT_MINOR = 0x3098, 0x30FB
EGL_CONTEXT_PROFILE_MASK, EGL_CONTEXT_FLAGS = 0x30FD, 0x30FC
EGL_CONTEXT_OPENGL_DEBUG, EGL_CONTEXT_FORWARD, EGL_CONTEXT_ROBUST = 0x31B0, 0x31B1, 0x31B2

GL_DRAW_FRAMEBUFFER_BINDING = 0x8CA6


# EGL_GL_TEXTURE_2D, _3D, the six cube-map faces, EGL_GL_RENDERBUFFER (EGL_KHR_gl_image)
EGL_GL_RENDERBUFFER = 0x30B9
EGL_GL_IMAGE_TARGETS = frozenset(range(0x30B1, EGL_GL_RENDERBUFFER + 1))


def _pairs(attribs: Any, terminator: int = 0) -> dict[int, int]:
    """An attribute list {name, value, ..., terminator} as a dict."""
    out: dict[int, int] = {}
    if not isinstance(attribs, list):
        return out
    for i in range(0, len(attribs) - 1, 2):
        if attribs[i] == terminator:
            break
        out[integer(attribs[i])] = integer(attribs[i + 1])
    return out


def glx_visual_format(attribs: Any) -> PixelFormat:
    """Pixel format of a glXChooseVisual list, where boolean attributes take no value."""
    wanted: dict[str, int] = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 0}
    values = attribs if isinstance(attribs, list) else []
    i = 0
    while i < len(values) and values[i] != 0:
        name = integer(values[i])
        if name in GLX_BOOLEANS:
            if name == 5:
                wanted["double_buffer"] = 1
            i += 1
            continue
        if i + 1 < len(values) and name in GLX_FORMAT:
            wanted[GLX_FORMAT[name]] = integer(values[i + 1])
        i += 2
    return _format(wanted)


def glx_config_format(attribs: Any) -> PixelFormat:
    """Pixel format of a glXChooseFBConfig list (all attributes take a value)."""
    wanted = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 1}
    for name, value in _pairs(attribs).items():
        if name in GLX_FORMAT:
            wanted[GLX_FORMAT[name]] = value
    return _format(wanted)


def egl_config_format(attribs: Any) -> tuple[PixelFormat, int]:
    """Pixel format and EGL_RENDERABLE_TYPE of an eglChooseConfig list."""
    pairs = _pairs(attribs, EGL_NONE)
    wanted = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 1}
    for name, value in pairs.items():
        if name in EGL_FORMAT and value >= 0:  # EGL_DONT_CARE is -1
            wanted[EGL_FORMAT[name]] = value
    return _format(wanted), pairs.get(EGL_RENDERABLE_TYPE, 0)


def _format(wanted: dict[str, int]) -> PixelFormat:
    """The traced request, raised to glretrace's own visual (RGBA8, depth 24, stencil 8).

    glretrace renders every window with alpha, depth and stencil whatever the
    program asked for (and honours its sample count); frames only match
    glretrace's when the stand-in has at least those, so a request for more
    (deeper colour or depth, multisampling) is honoured and one for less is not.
    """
    return PixelFormat(
        red=max(8, wanted.get("red", 8)),
        green=max(8, wanted.get("green", 8)),
        blue=max(8, wanted.get("blue", 8)),
        alpha=max(8, wanted["alpha"]),
        depth=max(24, wanted["depth"]),
        stencil=max(8, wanted["stencil"]),
        samples=wanted.get("samples", 0),
        double_buffer=bool(wanted["double_buffer"]),
    )


def glx_context_request(attribs: Any) -> ContextRequest:
    """The context a GLX/WGL *CreateContextAttribsARB list asks for, read as glretrace reads it."""
    pairs = _pairs(attribs)
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


def egl_context_request(attribs: Any, api: int) -> ContextRequest:
    pairs = _pairs(attribs, EGL_NONE)
    major = pairs.get(EGL_CONTEXT_MAJOR, 1)
    minor = pairs.get(EGL_CONTEXT_MINOR, 0)
    flags = pairs.get(EGL_CONTEXT_FLAGS, 0)
    debug = bool(flags & 1 or pairs.get(EGL_CONTEXT_OPENGL_DEBUG))
    if api != EGL_OPENGL_API:
        return ContextRequest(api="gles", major=major, minor=minor, debug=debug)
    mask = pairs.get(EGL_CONTEXT_PROFILE_MASK, 1)
    core = bool(mask & 1) and (major, minor) >= (3, 2)
    return ContextRequest(
        api="gl",
        major=major,
        minor=minor,
        profile="core" if core else "compat",
        debug=debug,
        forward_compatible=bool(flags & 2 or pairs.get(EGL_CONTEXT_FORWARD)),
        robust=bool(flags & 4 or pairs.get(EGL_CONTEXT_ROBUST)),
    )


GL_SYNC_GPU_COMMANDS_COMPLETE = 0x9117
GL_TIMEOUT_IGNORED = (1 << 64) - 1  # glClientWaitSync: wait for as long as it takes


class WindowSystem:
    """Runtime half: the operations compiled window-system entries perform."""

    def __init__(self, state: ReplayState, gl: Any) -> None:
        self.state = state
        self.gl = gl  # the replayer's own GL functions (GetIntegerv, Scissor)
        self.on_frame_end: Callable[[Drawable | None], None] = lambda drawable: None
        self.gl_errors: GlErrors | None = None  # counted at every frame end when set
        # a window's first viewport on its default framebuffer, read ahead in the trace
        # (`compiler.Compiler._scan_window_sizes`): its stand-in starts that big
        self.size_hints: dict[DrawableKey, tuple[int, int]] = {}
        # around every change of the current context (the profiler pauses its queries)
        self.before_switch: Callable[[], None] = lambda: None
        self.after_switch: Callable[[], None] = lambda: None
        # glretrace's --core and --samples: override what the trace asked for
        self.force_core = False
        self.samples: int | None = None

    def create_context(
        self, traced: int, request: ContextRequest, fmt: PixelFormat, share: int
    ) -> None:
        st = self.state
        if self.force_core and request.api == "gl":
            version = max((request.major, request.minor), (3, 2))
            request = replace(request, major=version[0], minor=version[1], profile="core")
        if self.samples is not None:
            fmt = replace(fmt, samples=self.samples)
        shared = st.contexts.get(share) if share else None
        context = TracedContext(request=request, fmt=fmt, share=shared)
        real_share = shared.real if shared is not None else None
        context.real = st.display.create_context(request, fmt, real_share)
        st.contexts[traced] = context

    def share_lists(self, share: int, traced: int) -> None:
        """Make a created context share `share`'s objects (wglShareLists), as far as EGL can.

        EGL shares only at creation, so the context is created again, sharing,
        and its first real context destroyed. This loses nothing on traces that
        succeeded: wglShareLists fails once the target has objects of its own.
        State set on it before (it may even be current) is lost, and a context
        that already shares keeps its group.
        """
        st = self.state
        source, context = st.contexts.get(share), st.contexts.get(traced)
        if source is None or context is None or context.real is None or context.share is not None:
            return
        current = st.current is context
        if current:
            self.before_switch()
        old = context.real
        context.share = source
        context.real = st.display.create_context(context.request, context.fmt, source.real)
        if current:  # bind the replacement where the old one was bound
            drawable = st.current_drawable
            if drawable is not None and (
                drawable.surface is None or drawable.surface.config != context.real.config
            ):
                self._new_surface(drawable, context)
            st.display.make_current(context.real, drawable.surface if drawable else None)
        st.display.destroy_context(old)
        if current:
            self.after_switch()

    def create_drawable(self, traced: DrawableKey, width: int, height: int, fixed: bool) -> None:
        self.state.drawables[traced] = Drawable(max(width, 1), max(height, 1), fixed)

    def alias_drawable(self, alias: DrawableKey, traced: DrawableKey) -> None:
        """A second handle for a drawable: a WGL pbuffer and the DC that renders to it."""
        drawables = self.state.drawables
        drawable = drawables.get(traced)
        if drawable is None:
            drawable = drawables[traced] = Drawable()
        drawables[alias] = drawable

    def make_current(self, thread: int, draw: DrawableKey, context: int) -> None:
        st = self.state
        traced_context = st.contexts.get(context) if context else None
        if context and traced_context is None:
            raise RetraceError(
                f"the trace makes current context {context:#x}, which it never created"
            )
        drawable = None
        if traced_context is not None and draw:
            drawable = st.drawables.get(draw)
            if drawable is None:  # a window the trace never showed us being created
                drawable = st.drawables[draw] = Drawable()
            hint = self.size_hints.get(draw)
            if hint is not None and drawable.surface is None and not drawable.fixed:
                drawable.width, drawable.height = map(max, (drawable.width, drawable.height), hint)
        st.thread_current[thread] = (traced_context, drawable)
        self._bind(traced_context, drawable)

    def switch_thread(self, thread: int) -> None:
        """Calls of another traced thread follow: bind what that thread had current."""
        self.state.thread = thread
        self._bind(*self.state.thread_current.get(thread, (None, None)))

    def _bind(self, context: TracedContext | None, drawable: Drawable | None) -> None:
        st = self.state
        if context is st.current and drawable is st.current_drawable:
            return
        if context is not st.current and st.current is not None:
            if self.gl_errors is not None:
                self.gl_errors.settle()  # the errors of the context being left
            self.before_switch()
        switching = context is not st.current
        if context is None or context.real is None:
            st.display.make_current(None, None)
        else:
            if drawable is not None and (
                drawable.surface is None or drawable.surface.config != context.real.config
            ):
                self._new_surface(drawable, context)
            st.display.make_current(context.real, drawable.surface if drawable else None)
        st.current, st.current_drawable = context, drawable
        if switching:
            st.on_program_change()
        if switching and context is not None:
            self.after_switch()

    def _new_surface(self, drawable: Drawable, context: TracedContext) -> None:
        display = self.state.display
        if drawable.surface is not None:
            display.destroy_surface(drawable.surface)
        assert context.real is not None
        drawable.surface = display.create_surface(
            context.real.config, drawable.width, drawable.height
        )

    def create_image(
        self, traced: int, context: int, target: int, buffer: int, attribs: list[int]
    ) -> None:
        """An EGLImage of one of the trace's GL textures or renderbuffers, made again from
        the replay's object (`EGL_GL_IMAGE_TARGETS`)."""
        st = self.state
        owner = st.contexts.get(context)
        if owner is None or owner.real is None:
            return
        kind = "renderbuffer" if target == EGL_GL_RENDERBUFFER else "texture"
        real_buffer = st.name_table(kind).get(buffer, buffer)
        image = st.display.create_image(owner.real, target, real_buffer, attribs)
        if image:
            st.images[traced] = image

    def destroy_image(self, traced: int) -> None:
        image = self.state.images.pop(traced, 0)
        if image:
            self.state.display.destroy_image(image)

    def destroy_context(self, traced: int) -> None:
        st = self.state
        context = st.contexts.get(traced)
        if context is None or context is st.current:
            return  # GL defers destroying a current context; so does the replay
        if context.real is not None:
            st.display.destroy_context(context.real)
            context.real = None

    def update_drawable(self, width: int, height: int) -> None:
        """Grow the current window to what a viewport or blit on it needs, as glretrace does."""
        st = self.state
        drawable, context = st.current_drawable, st.current
        if drawable is None or context is None or drawable.fixed or width <= 0 or height <= 0:
            return
        if width <= drawable.width and height <= drawable.height:
            return
        if self.gl.get_integer(GL_DRAW_FRAMEBUFFER_BINDING) != 0:
            return  # the viewport is for an FBO, not the window
        drawable.width, drawable.height = max(width, drawable.width), max(height, drawable.height)
        self._new_surface(drawable, context)
        assert context.real is not None
        st.display.make_current(context.real, drawable.surface)
        self.gl.Scissor(0, 0, drawable.width, drawable.height)

    def swap(self, draw: DrawableKey) -> None:
        st = self.state
        drawable = st.drawables.get(draw, st.current_drawable) if draw else st.current_drawable
        self._count_errors()
        self.on_frame_end(drawable)
        # EGL swaps only the current context's surface (EGL_BAD_SURFACE otherwise), and a
        # pbuffer's swap shows nothing: a trace swapping another drawable, or with no
        # context current, ends its frame and skips the swap
        if drawable is not None and drawable is st.current_drawable and drawable.surface:
            st.display.swap_buffers(drawable.surface)
        if st.current is not None:
            self._throttle(st.current)

    def _throttle(self, context: TracedContext) -> None:
        """What a window's swap does besides showing the frame: submit it, and wait while
        the previous one is still being drawn. A pbuffer's swap does neither; without
        the flush llvmpipe queues frame after frame without bound, and without the wait
        it keeps more frames' worth of binned work (about 20 MB on glxgears) than a
        windowed replay. Contexts without fences (OpenGL < 3.2, ES < 3.0) only flush."""
        real = context.real
        fences = real is not None and (
            (real.major, real.minor) >= (3, 2) if real.api == "gl" else real.major >= 3
        )
        if not fences:
            self.gl.Flush()
            return
        fence = self.gl.FenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
        self.gl.Flush()
        previous = context.frame_fence
        context.frame_fence = (real, fence) if fence else None
        if previous is not None and previous[0] is real:  # (not of a replaced context)
            self.gl.ClientWaitSync(previous[1], 0, GL_TIMEOUT_IGNORED)
            self.gl.DeleteSync(previous[1])

    def frame_terminator(self) -> None:
        self._count_errors()
        self.on_frame_end(self.state.current_drawable)

    def _count_errors(self) -> None:
        """The program's GL errors of the frame, before the replayer's own calls at its end."""
        if self.gl_errors is not None:
            if self.state.current is not None:
                self.gl_errors.settle()
            self.gl_errors.frames += 1


class WsCompiler:
    """Compile-time half: reads window-system calls and emits runtime entries."""

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.formats: dict[Any, tuple[PixelFormat, int]] = {}
        self.egl_api = EGL_OPENGL_ES_API
        self.gl_images: set[int] = set()  # traced EGLImages the replay makes again
        self.handlers: dict[str, Callable[[list[Any], Any, int], Entry | None]] = {
            "glXChooseVisual": self._glx_choose_visual,
            "glXChooseFBConfig": self._glx_choose_fbconfig,
            "glXChooseFBConfigSGIX": self._glx_choose_fbconfig,
            "glXGetVisualFromFBConfig": self._glx_visual_from_config,
            "glXCreateContext": self._glx_create_context,
            "glXCreateNewContext": self._glx_create_new_context,
            "glXCreateContextAttribsARB": self._glx_create_context_attribs,
            "glXCreateWindow": self._glx_create_window,
            "glXCreatePbuffer": self._glx_create_pbuffer,
            "glXMakeCurrent": self._glx_make_current,
            "glXMakeContextCurrent": self._glx_make_context_current,
            "glXSwapBuffers": self._swap_first_drawable(1),
            "glXDestroyContext": self._destroy_context(1),
            "eglBindAPI": self._egl_bind_api,
            "eglChooseConfig": self._egl_choose_config,
            "eglCreateContext": self._egl_create_context,
            "eglCreateWindowSurface": self._egl_create_window,
            "eglCreatePlatformWindowSurface": self._egl_create_window,
            "eglCreatePlatformWindowSurfaceEXT": self._egl_create_window,
            "eglCreatePbufferSurface": self._egl_create_pbuffer,
            "eglMakeCurrent": self._egl_make_current,
            "eglSwapBuffers": self._swap_first_drawable(1),
            "eglSwapBuffersWithDamageKHR": self._swap_first_drawable(1),
            "eglSwapBuffersWithDamageEXT": self._swap_first_drawable(1),
            "eglDestroyContext": self._destroy_context(1),
            "eglCreateImage": self._egl_create_image,
            "eglCreateImageKHR": self._egl_create_image,
            "eglDestroyImage": self._egl_destroy_image,
            "eglDestroyImageKHR": self._egl_destroy_image,
            "glFrameTerminatorGREMEDY": lambda args, ret, thread: (self.ws.frame_terminator, ()),
        }
        # Imported here: the WGL and CGL readers build on this module's helpers.
        from retrace.replay.ws_cgl import CglReader
        from retrace.replay.ws_wgl import WglReader

        self.handlers.update(WglReader(ws).handlers())
        self.handlers.update(CglReader(ws).handlers())

    def compile(self, name: str, args: list[Any], ret: Any, thread: int) -> Entry | None:
        """The entry for a window-system call, or None when it needs no replay."""
        handler = self.handlers.get(name)
        if handler is None:
            return None
        try:
            return handler(args, ret, thread)
        except IndexError:  # handlers index only into the call's arguments and their values
            raise BadValue("fewer arguments or members than the call takes") from None

    def _format_of(self, key: Any) -> PixelFormat:
        return self.formats.get(handle(key), (PixelFormat(), 0))[0]

    # --- GLX ------------------------------------------------------------------------------

    def _glx_choose_visual(self, args, ret, thread) -> None:
        if ret is not None:
            self.formats[handle(ret)] = (glx_visual_format(args[2]), 0)

    def _glx_choose_fbconfig(self, args, ret, thread) -> None:
        fmt = glx_config_format(args[2])
        for config in ret if isinstance(ret, list) else []:
            self.formats[handle(config)] = (fmt, 0)

    def _glx_visual_from_config(self, args, ret, thread) -> None:
        if ret is not None:
            self.formats[handle(ret)] = self.formats.get(handle(args[1]), (PixelFormat(), 0))

    def _glx_create_context(self, args, ret, thread) -> Entry:
        request = ContextRequest(api="gl", major=1, minor=0, profile="compat")
        return (
            self.ws.create_context,
            (integer(ret), request, self._format_of(args[1]), integer(args[2])),
        )

    def _glx_create_new_context(self, args, ret, thread) -> Entry:
        request = ContextRequest(api="gl", major=1, minor=0, profile="compat")
        return (
            self.ws.create_context,
            (integer(ret), request, self._format_of(args[1]), integer(args[3])),
        )

    def _glx_create_context_attribs(self, args, ret, thread) -> Entry:
        request = glx_context_request(args[4])
        return (
            self.ws.create_context,
            (integer(ret), request, self._format_of(args[1]), integer(args[2])),
        )

    def _glx_create_window(self, args, ret, thread) -> Entry:
        return (self.ws.create_drawable, (integer(ret), DEFAULT_SIZE, DEFAULT_SIZE, False))

    def _glx_create_pbuffer(self, args, ret, thread) -> Entry:
        pairs = _pairs(args[2])
        size = (pairs.get(GLX_PBUFFER_WIDTH, 0), pairs.get(GLX_PBUFFER_HEIGHT, 0))
        return (self.ws.create_drawable, (integer(ret), *size, True))

    def _glx_make_current(self, args, ret, thread) -> Entry:
        return (self.ws.make_current, (thread, integer(args[1]), integer(args[2])))

    def _glx_make_context_current(self, args, ret, thread) -> Entry:
        return (self.ws.make_current, (thread, integer(args[1]), integer(args[3])))

    def _swap_first_drawable(self, index: int) -> Callable[[list[Any], Any, int], Entry]:
        return lambda args, ret, thread: (self.ws.swap, (integer(args[index]),))

    def _destroy_context(self, index: int) -> Callable[[list[Any], Any, int], Entry]:
        return lambda args, ret, thread: (self.ws.destroy_context, (integer(args[index]),))

    # --- EGL ------------------------------------------------------------------------------

    def _egl_bind_api(self, args, ret, thread) -> None:
        self.egl_api = integer(args[0])

    def _egl_choose_config(self, args, ret, thread) -> None:
        fmt = egl_config_format(args[1])
        for config in args[2] if isinstance(args[2], list) else []:
            self.formats[handle(config)] = fmt

    def _egl_create_context(self, args, ret, thread) -> Entry:
        request = egl_context_request(args[3], self.egl_api)
        return (
            self.ws.create_context,
            (integer(ret), request, self._format_of(args[1]), integer(args[2])),
        )

    def _egl_create_image(self, args, ret, thread) -> Entry | None:
        """Images of GL textures and renderbuffers are made again from the replay's objects;
        others (dma-bufs, pixmaps) belong to the traced process, and the calls that use
        them are skipped (`compiler.Compiler._image_target`)."""
        target, traced = integer(args[2]), integer(ret)
        if target not in EGL_GL_IMAGE_TARGETS or not traced:
            return None
        self.gl_images.add(traced)
        pairs = [v for kv in _pairs(args[4], EGL_NONE).items() for v in kv]
        context, buffer = integer(args[1]), integer(args[3])
        return (self.ws.create_image, (traced, context, target, buffer, pairs))

    def _egl_destroy_image(self, args, ret, thread) -> Entry:
        return (self.ws.destroy_image, (integer(args[1]),))

    def _egl_create_window(self, args, ret, thread) -> Entry:
        return (self.ws.create_drawable, (integer(ret), DEFAULT_SIZE, DEFAULT_SIZE, False))

    def _egl_create_pbuffer(self, args, ret, thread) -> Entry:
        pairs = _pairs(args[2], EGL_NONE)
        size = (pairs.get(EGL_WIDTH, 0), pairs.get(EGL_HEIGHT, 0))
        return (self.ws.create_drawable, (integer(ret), *size, True))

    def _egl_make_current(self, args, ret, thread) -> Entry:
        return (self.ws.make_current, (thread, integer(args[1]), integer(args[3])))


def is_window_system_call(name: str) -> bool:
    """glX*, egl*, wgl*, CGL*: calls that never reach the GL driver as recorded."""
    return name.startswith(("glX", "egl", "wgl", "CGL"))
