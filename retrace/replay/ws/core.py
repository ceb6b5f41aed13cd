"""What every window system shares: the replay-time operations its calls become.

`WindowSystem` owns the trace's contexts and drawables at replay time:
creating a traced context (for real, on the headless EGL display), making a
context and drawable current on a thread, switching threads, growing a
window's stand-in with its viewports, and ending frames (a swap, or
glFrameTerminatorGREMEDY). Observers join through its hooks: `before_switch`
and `after_switch` around every change of the current context (the profiler
pauses its queries there), `on_frame_end` at every frame end.

Each system's reader (`glx`, `egl`, `wgl`, `cgl`) turns its calls into entries
``(operation, args)`` on these operations, using the helpers here for what
their attribute lists share: name/value pairs, a pixel format raised to
glretrace's own visual, the legacy context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrace.errors import RetraceError
from retrace.replay import _vm
from retrace.replay.fidelity import GlErrors, UndrawnFrames
from retrace.replay.program import Entry
from retrace.replay.state import DrawableKey, ReplayState, TracedContext
from retrace.replay.values import integer
from retrace.replay.ws.driver_process import inherited_hint
from retrace.replay.ws.egl_api import EGL_GL_RENDERBUFFER
from retrace.replay.ws.headless import (
    GL_DRAW_BUFFER,
    GL_DRAW_FRAMEBUFFER_BINDING,
    GL_NONE,
    ContextRequest,
    Drawable,
    EglError,
    PixelFormat,
)

# How a reader compiles one call: (arguments, result, thread) -> its entry, or None when
# the call needs no replay.
Handler = Callable[[list[Any], Any, int], Entry | None]

# What a context made without attributes (glXCreateContext, wglCreateContext, CGL's legacy
# profile) asks for: whatever compatibility version the driver has.
LEGACY_CONTEXT = ContextRequest(api="gl", major=1, minor=0, profile="compat")


def is_window_system_call(name: str) -> bool:
    """glX*, egl*, wgl*, CGL*: calls that never reach the GL driver as recorded."""
    return name.startswith(("glX", "egl", "wgl", "CGL"))


def attrib_pairs(attribs: Any, terminator: int = 0) -> dict[int, int]:
    """An attribute list {name, value, ..., terminator} as a dict."""
    out: dict[int, int] = {}
    if not isinstance(attribs, list):
        return out
    for i in range(0, len(attribs) - 1, 2):
        if attribs[i] == terminator:
            break
        out[integer(attribs[i])] = integer(attribs[i + 1])
    return out


def output_handle(value: Any) -> int:
    """The handle an output pointer recorded (an array of one), or a plain handle."""
    if isinstance(value, list):
        value = value[0] if value else None
    return integer(value)


def channel_bits(color_bits: int) -> int:
    """Bits per colour channel of a total colour depth (cColorBits, WGL_COLOR_BITS_ARB, ...).

    The total is meant to leave alpha out, but programs write 24 and 32 alike
    for 8 bits a channel; 30 is the one deeper format drivers offer (10 bits).
    Other totals (float formats' 64 or 128, which EGL configs here cannot give)
    stay at 8, the depth glretrace renders at whatever the program asked.
    """
    return 10 if color_bits == 30 else 8


def glretrace_format(wanted: dict[str, int]) -> PixelFormat:
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


class WindowSystem:
    """Runtime half: the operations compiled window-system entries perform."""

    def __init__(self, state: ReplayState, gl: Any) -> None:
        self.state = state
        self.gl = gl  # the replayer's own GL functions (GetIntegerv, Scissor)
        self.on_frame_end: Callable[[Drawable | None], None] = lambda drawable: None
        # once the frame's end is done (a swap's buffers swapped and its wait waited)
        self.after_frame_end: Callable[[], None] = lambda: None
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
        # frames that ended with no draw buffer; the trace chooses draw buffers itself
        # (told by the compiler), so that GL_NONE may be its own choice
        self.undrawn = UndrawnFrames()
        self.trace_chooses_draw_buffers = False
        # the (real context, surface) seen with a draw buffer at a frame end since the last
        # binding (`check_drawn`)
        self._drawing: tuple[Any, Any] | None = None

    def create_context(
        self, traced: int, request: ContextRequest, fmt: PixelFormat, share: int
    ) -> None:
        st = self.state
        if self.force_core and request.api == "gl":
            version = max((request.major, request.minor), (3, 2))
            request = request._replace(major=version[0], minor=version[1], profile="core")
        if self.samples is not None:
            fmt = fmt._replace(samples=self.samples)
        shared = st.contexts.get(share) if share else None
        context = TracedContext(request=request, fmt=fmt, share=shared)
        real_share = shared.real if shared is not None else None
        try:
            context.real = st.display.create_context(request, fmt, real_share)
        except EglError as e:
            raise EglError(f"{e}{inherited_hint()}") from None
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
        self._drawing = None
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
        st.bind(context, drawable)
        if switching:
            st.program_changed()
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
        # No eglSwapBuffers: the replay's surfaces are pbuffers, on which EGL says it has no
        # effect (1.25 us a frame through glvnd and Mesa for nothing: glmark2-scenes' 47,390
        # frames, 59 ms); what a window's swap does besides showing the frame is the throttle's
        if st.current is not None:
            self._throttle(st.current)
        self.after_frame_end()

    def _throttle(self, context: TracedContext) -> None:
        """What a window's swap does besides showing the frame: submit it, and wait while
        the previous one is still being drawn. A pbuffer's swap does neither; without
        the submission llvmpipe queues frame after frame without bound, and without the
        wait it keeps more frames' worth of binned work (about 20 MB on glxgears) than a
        windowed replay. The frame is fenced, and the wait for the previous frame's fence
        flushes (GL_SYNC_FLUSH_COMMANDS_BIT) where that frame is not done yet, which
        submits this frame too: while the GPU is behind, every frame is submitted at its
        end, as with a glFlush; where the previous frame is done, a driver that defers a
        fence's flush (llvmpipe does not) may hold this frame until the next frame end's
        wait submits it, so at most two frames wait unsubmitted or in flight. A glFlush
        at every frame end was instead a round trip to the driver's thread where a flush
        is synchronous (Mesa's threaded context without asynchronous flushes: the noop
        driver's), the loop's largest cost per frame there. Without a fence to wait for
        (a context's first frame, a failed fence) it flushes; contexts without fences
        (OpenGL < 3.2, ES < 3.0) only flush. The GL calls are one C call
        (`_vm.frame_fence`): through ctypes they were 2 us of a frame's 8."""
        real = context.real
        if real is None or (
            (real.major, real.minor) < (3, 2) if real.api == "gl" else real.major < 3
        ):
            self.gl.Flush()
            return
        previous = context.frame_fence  # (none, or of a replaced context: a flush)
        waited = previous[1] if previous is not None and previous[0] is real else 0
        fence = _vm.frame_fence(self.gl.frame_functions, waited)
        context.frame_fence = (real, fence) if fence else None

    def check_drawn(self, frame: int) -> None:
        """At the end of frame `frame`: count it in `undrawn` if the current desktop
        context's window has GL_NONE as its draw buffer, unless the trace chooses draw
        buffers itself. A window's draw buffer changes only by those calls, or (a driver's
        doing) when a context is bound: once a context was seen drawing to its window's
        surface, it is not asked again until the next binding (two glGetIntegerv a frame
        were 3.6 us under Mesa's noop driver)."""
        st = self.state
        real = st.current.real if st.current is not None else None
        drawable = st.current_drawable
        if real is None or real.api != "gl" or drawable is None or self.trace_chooses_draw_buffers:
            return
        surface = drawable.surface
        seen = self._drawing
        if seen is not None and seen[0] is real and seen[1] is surface:
            return
        gl = self.gl
        if gl.get_integer(GL_DRAW_FRAMEBUFFER_BINDING) != 0:
            return  # an FBO is bound: the window's draw buffer is not what this reads
        if gl.get_integer(GL_DRAW_BUFFER) == GL_NONE:
            self.undrawn.add(frame)
            return
        self._drawing = (real, surface)

    def frame_terminator(self) -> None:
        self._count_errors()
        self.on_frame_end(self.state.current_drawable)
        self.after_frame_end()

    def _count_errors(self) -> None:
        """The program's GL errors of the frame, before the replayer's own calls at its end."""
        if self.gl_errors is not None:
            if self.state.current is not None:
                self.gl_errors.settle()
            self.gl_errors.frames += 1
