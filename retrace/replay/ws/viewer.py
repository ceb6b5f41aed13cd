"""A GLFW window that shows the replay's frames: the viewer behind ``retrace replay --window``.

The replay itself stays headless whether or not a window is shown: it renders
into EGL pbuffers exactly as without ``--window``, and each finished frame is
read back as an `Image` and handed to `FrameWindow.show`, which draws it in a
window of its own. A replay backed by a GLFW window instead would need a
second path through context creation and frame ends, give results that
depend on the window system (a window's pixel format, its size limits, pixel
ownership of covered areas), and break traces that create several contexts or
render from several threads. A viewer has none of that: one code path, the
same frames with or without a window.

The window has its own GL context, owned by GLFW, so the replay's GL state is
never touched. The catch is the thread's current context, which both share:
GLFW must make its context current to draw, and the replay's must be current
again afterwards. GLFW is told to create its context through EGL, like the
replay's, so that switching is a plain eglMakeCurrent either way. A GLX
context would not do: with glvnd, glXMakeCurrent fails (an X BadAccess error,
fatal by default) while an EGL context is current on the thread. Every GLFW
call that may change the current context (window creation, drawing) is
therefore bracketed by `_EglBinding.current()` and `_EglBinding.restore()`,
which save and rebind the replay's context, surfaces and bound client API.

The frame is uploaded to a texture and blitted (glBlitFramebuffer, GL 3.0)
onto the window, flipped because `Image` rows run top to bottom, and scaled
to fit when the window is not the frame's size (a window manager may refuse a
size). The swap interval is 0, so showing frames never throttles the replay
to the display's refresh rate.

GLFW wants windows made and events polled on one thread; create the window
and call `show` from the thread whose EGL context is to be kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import NamedTuple

from retrace.errors import RetraceError
from retrace.replay.dispatch import CFunction
from retrace.replay.snapshot import Image
from retrace.replay.ws.egl_api import EGL_DRAW, EGL_OPENGL_API, EGL_READ, EglError, load_egl

__all__ = ["FrameWindow"]

_HINT = "replay without --window"

GL_TEXTURE_2D = 0x0DE1
GL_UNPACK_ALIGNMENT = 0x0CF5
GL_UNSIGNED_BYTE = 0x1401
GL_RGB = 0x1907
GL_RGBA = 0x1908
GL_RGBA8 = 0x8058
GL_NEAREST = 0x2600
GL_LINEAR = 0x2601
GL_COLOR_BUFFER_BIT = 0x4000
GL_READ_FRAMEBUFFER = 0x8CA8
GL_COLOR_ATTACHMENT0 = 0x8CE0

_VP = ctypes.c_void_p
_UINT = ctypes.c_uint
_INT = ctypes.c_int

# glfwTerminate destroys every window, so GLFW ends with the last FrameWindow.
_open_windows = 0


def _load_egl() -> ctypes.CDLL:
    try:
        return load_egl()
    except EglError as exc:
        raise RetraceError(f"cannot open a window: {exc}; {_HINT}") from None


class _EglBinding(NamedTuple):
    """What EGL has current on this thread: the replay's binding to put back."""

    api: int
    display: int | None
    draw: int | None
    read: int | None
    context: int | None

    @classmethod
    def current(cls, egl: ctypes.CDLL) -> _EglBinding:
        return cls(
            egl.eglQueryAPI(),
            egl.eglGetCurrentDisplay(),
            egl.eglGetCurrentSurface(EGL_DRAW),
            egl.eglGetCurrentSurface(EGL_READ),
            egl.eglGetCurrentContext(),
        )

    def restore(self, egl: ctypes.CDLL) -> None:
        egl.eglBindAPI(self.api)
        if self.context is None:
            return  # nothing was current, and GLFW has released its context
        if not egl.eglMakeCurrent(self.display, self.draw, self.read, self.context):
            raise RetraceError(
                "cannot make the replay's EGL context current again after drawing the window "
                f"(EGL error {egl.eglGetError():#x})"
            )


class _ViewerGL:
    """The GL functions the window's own context needs, resolved through GLFW."""

    def __init__(self, glfw: ModuleType) -> None:
        def resolve(name: str, *argtypes: type[ctypes._CData]) -> CFunction:
            address = glfw.get_proc_address(name)
            if not address:
                raise RetraceError(f"cannot open a window: its GL context lacks {name}; {_HINT}")
            return ctypes.CFUNCTYPE(None, *argtypes)(address)

        uint_p = ctypes.POINTER(_UINT)
        self.GenTextures = resolve("glGenTextures", _INT, uint_p)
        self.BindTexture = resolve("glBindTexture", _UINT, _UINT)
        self.TexImage2D = resolve(
            "glTexImage2D", _UINT, _INT, _INT, _INT, _INT, _INT, _UINT, _UINT, _VP
        )
        self.PixelStorei = resolve("glPixelStorei", _UINT, _INT)
        self.GenFramebuffers = resolve("glGenFramebuffers", _INT, uint_p)
        self.BindFramebuffer = resolve("glBindFramebuffer", _UINT, _UINT)
        self.FramebufferTexture2D = resolve(
            "glFramebufferTexture2D", _UINT, _UINT, _UINT, _UINT, _INT
        )
        self.BlitFramebuffer = resolve(
            "glBlitFramebuffer", _INT, _INT, _INT, _INT, _INT, _INT, _INT, _INT, _UINT, _UINT
        )
        self.Clear = resolve("glClear", _UINT)


def _import_glfw() -> ModuleType:
    try:
        import glfw
    except ImportError as exc:
        raise RetraceError(
            f"cannot open a window: GLFW is not available ({exc}); pip install glfw, or {_HINT}"
        ) from None
    return glfw


def _glfw_problem(glfw: ModuleType) -> str:
    """GLFW's last error on this thread, as one line."""
    _code, description = glfw.get_error()
    text = description.decode("utf-8", "replace") if description else "unknown GLFW error"
    return " ".join(text.split())


class FrameWindow:
    """A GLFW window that shows the replay's frames as they finish."""

    def __init__(self, title: str = "retrace") -> None:
        """Open the window (hidden until the first frame).

        Raises RetraceError with one line when there is no display or GLFW
        cannot open a window on it. The EGL context current on this thread,
        if any, is current again when this returns.
        """
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            no_display = "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
            raise RetraceError(f"cannot open a window: {no_display}; {_HINT}")
        global _open_windows
        self._glfw = glfw = _import_glfw()
        self._egl = _load_egl()
        self._open = False
        self._window = None
        self._size: tuple[int, int] | None = None
        saved = _EglBinding.current(self._egl)
        # pyGLFW reports errors as warnings by default; here they become RetraceErrors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", glfw.GLFWError)
            if not glfw.init():
                raise RetraceError(f"cannot open a window: {_glfw_problem(glfw)}; {_HINT}")
            self._open = True
            _open_windows += 1
            try:
                glfw.default_window_hints()
                glfw.window_hint(glfw.CONTEXT_CREATION_API, glfw.EGL_CONTEXT_API)
                glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, 3)
                glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, 0)
                glfw.window_hint(glfw.VISIBLE, glfw.FALSE)
                # Creating the window makes its context current for a moment.
                self._window = glfw.create_window(64, 64, title, None, None) or None
                if self._window is None:
                    raise RetraceError(f"cannot open a window: {_glfw_problem(glfw)}; {_HINT}")
                with self._drawing(saved):
                    glfw.swap_interval(0)
                    self._gl = gl = _ViewerGL(glfw)
                    texture, framebuffer = _UINT(), _UINT()
                    gl.GenTextures(1, ctypes.byref(texture))
                    gl.GenFramebuffers(1, ctypes.byref(framebuffer))
                    gl.BindTexture(GL_TEXTURE_2D, texture.value)
                    gl.BindFramebuffer(GL_READ_FRAMEBUFFER, framebuffer.value)
                    gl.FramebufferTexture2D(
                        GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, texture.value, 0
                    )
                    gl.PixelStorei(GL_UNPACK_ALIGNMENT, 1)
                    # Mesa's software rasteriser reads the window's size again only after
                    # a swap: without this one, the first frame would draw at 64x64.
                    glfw.swap_buffers(self._window)
            except BaseException:
                self.close()
                saved.restore(self._egl)
                raise

    @contextlib.contextmanager
    def _drawing(self, saved: _EglBinding) -> Iterator[None]:
        """Make the window's context current, then give the thread back to `saved`."""
        self._egl.eglBindAPI(EGL_OPENGL_API)
        self._glfw.make_context_current(self._window)
        try:
            yield
        finally:
            self._glfw.make_context_current(None)
            saved.restore(self._egl)

    def show(self, image: Image) -> bool:
        """Draw `image` in the window; False once the user has closed it.

        The window takes the image's size on the first frame and whenever the
        size changes. The EGL context current on this thread before the call
        is current after it.
        """
        glfw = self._glfw
        if self._window is None or glfw.window_should_close(self._window):
            return False
        size = (image.width, image.height)
        # Resized before its context is made current, which is when drivers size its buffers.
        if size != self._size:
            glfw.set_window_size(self._window, *size)
            if self._size is None:
                glfw.show_window(self._window)
            self._size = size
        with self._drawing(_EglBinding.current(self._egl)):
            self._draw(image)
            glfw.swap_buffers(self._window)
        glfw.poll_events()
        return not glfw.window_should_close(self._window)

    def _draw(self, image: Image) -> None:
        gl = self._gl
        width, height = image.width, image.height
        fmt = GL_RGBA if image.channels == 4 else GL_RGB
        gl.TexImage2D(
            GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, fmt, GL_UNSIGNED_BYTE, image.pixels
        )
        # Fit the frame into the window, keeping its aspect; rows go top to bottom.
        win_w, win_h = self._glfw.get_framebuffer_size(self._window)
        scale = min(win_w / width, win_h / height)
        out_w, out_h = round(width * scale), round(height * scale)
        x0, y0 = (win_w - out_w) // 2, (win_h - out_h) // 2
        gl.Clear(GL_COLOR_BUFFER_BIT)
        exact = (out_w, out_h) == (width, height)
        gl.BlitFramebuffer(
            *(0, 0, width, height),
            *(x0, y0 + out_h, x0 + out_w, y0),
            GL_COLOR_BUFFER_BIT,
            GL_NEAREST if exact else GL_LINEAR,
        )

    def close(self) -> None:
        """Destroy the window (and end GLFW with the last one). Idempotent."""
        global _open_windows
        if not self._open:
            return
        self._open = False
        if self._window is not None:
            self._glfw.destroy_window(self._window)
            self._window = None
        _open_windows -= 1
        if _open_windows == 0:
            self._glfw.terminate()

    def __enter__(self) -> FrameWindow:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
