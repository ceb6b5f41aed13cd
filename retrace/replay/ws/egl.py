"""EGL: the window-system calls of traces captured through a display's EGL.

The traced program's EGL calls are read as the replay's own EGL would take
them, but onto the headless display (`headless`): a config stands for the
pixel format eglChooseConfig asked for, eglBindAPI picks the API the next
contexts are for, window surfaces become growing stand-ins and pbuffer
surfaces keep their size. EGLImages of the program's GL textures and
renderbuffers are made again from the replay's objects; other images (dma-bufs,
pixmaps) belong to the traced process, and the calls that use them are
skipped (`compiler.Compiler._image_target`).

Calls that only query the window system need no replay and compile to nothing.
"""

from __future__ import annotations

from typing import Any

from retrace.replay.values import handle, integer
from retrace.replay.ws.core import Entry, Handler, WindowSystem, attrib_pairs, glretrace_format
from retrace.replay.ws.egl_api import (
    EGL_ALPHA_SIZE,
    EGL_BLUE_SIZE,
    EGL_CONTEXT_FLAGS_KHR,
    EGL_CONTEXT_MAJOR_VERSION,
    EGL_CONTEXT_MINOR_VERSION,
    EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
    EGL_CONTEXT_OPENGL_DEBUG,
    EGL_CONTEXT_OPENGL_DEBUG_BIT_KHR,
    EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE,
    EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE_BIT_KHR,
    EGL_CONTEXT_OPENGL_PROFILE_MASK,
    EGL_CONTEXT_OPENGL_ROBUST_ACCESS,
    EGL_CONTEXT_OPENGL_ROBUST_ACCESS_BIT_KHR,
    EGL_DEPTH_SIZE,
    EGL_GL_IMAGE_TARGETS,
    EGL_GREEN_SIZE,
    EGL_HEIGHT,
    EGL_NONE,
    EGL_OPENGL_API,
    EGL_OPENGL_ES_API,
    EGL_RED_SIZE,
    EGL_RENDERABLE_TYPE,
    EGL_SAMPLES,
    EGL_STENCIL_SIZE,
    EGL_WIDTH,
)
from retrace.replay.ws.headless import DEFAULT_SIZE, ContextRequest, PixelFormat

EGL_FORMAT = {
    EGL_RED_SIZE: "red",
    EGL_GREEN_SIZE: "green",
    EGL_BLUE_SIZE: "blue",
    EGL_ALPHA_SIZE: "alpha",
    EGL_DEPTH_SIZE: "depth",
    EGL_STENCIL_SIZE: "stencil",
    EGL_SAMPLES: "samples",
}


def egl_config_format(attribs: Any) -> tuple[PixelFormat, int]:
    """Pixel format and EGL_RENDERABLE_TYPE of an eglChooseConfig list."""
    pairs = attrib_pairs(attribs, EGL_NONE)
    wanted = {"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 1}
    for name, value in pairs.items():
        if name in EGL_FORMAT and value >= 0:  # EGL_DONT_CARE is -1
            wanted[EGL_FORMAT[name]] = value
    return glretrace_format(wanted), pairs.get(EGL_RENDERABLE_TYPE, 0)


def egl_context_request(attribs: Any, api: int) -> ContextRequest:
    """The context an eglCreateContext list asks for, for the API bound (eglBindAPI)."""
    pairs = attrib_pairs(attribs, EGL_NONE)
    major = pairs.get(EGL_CONTEXT_MAJOR_VERSION, 1)
    minor = pairs.get(EGL_CONTEXT_MINOR_VERSION, 0)
    flags = pairs.get(EGL_CONTEXT_FLAGS_KHR, 0)
    debug = bool(flags & EGL_CONTEXT_OPENGL_DEBUG_BIT_KHR or pairs.get(EGL_CONTEXT_OPENGL_DEBUG))
    if api != EGL_OPENGL_API:
        return ContextRequest(api="gles", major=major, minor=minor, debug=debug)
    mask = pairs.get(EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT)
    core = bool(mask & EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT) and (major, minor) >= (3, 2)
    return ContextRequest(
        api="gl",
        major=major,
        minor=minor,
        profile="core" if core else "compat",
        debug=debug,
        forward_compatible=bool(
            flags & EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE_BIT_KHR
            or pairs.get(EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE)
        ),
        robust=bool(
            flags & EGL_CONTEXT_OPENGL_ROBUST_ACCESS_BIT_KHR
            or pairs.get(EGL_CONTEXT_OPENGL_ROBUST_ACCESS)
        ),
    )


class EglReader:
    """Reads EGL calls at compile time: config formats, the bound API, images made again."""

    # handlers whose entries depend on the call's arguments and result alone and that
    # change nothing: the swaps (`WsCompiler.pure`)
    PURE = frozenset(
        {"eglSwapBuffers", "eglSwapBuffersWithDamageKHR", "eglSwapBuffersWithDamageEXT"}
    )

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.formats: dict[int | tuple[str, int], PixelFormat] = {}  # traced config -> format
        self.api = EGL_OPENGL_ES_API
        self.gl_images: set[int] = set()  # traced EGLImages the replay makes again

    def handlers(self) -> dict[str, Handler]:
        return {
            "eglBindAPI": self._bind_api,
            "eglChooseConfig": self._choose_config,
            "eglCreateContext": self._create_context,
            "eglCreateWindowSurface": self._create_window,
            "eglCreatePlatformWindowSurface": self._create_window,
            "eglCreatePlatformWindowSurfaceEXT": self._create_window,
            "eglCreatePbufferSurface": self._create_pbuffer,
            "eglMakeCurrent": self._make_current,
            "eglSwapBuffers": self._swap,
            "eglSwapBuffersWithDamageKHR": self._swap,
            "eglSwapBuffersWithDamageEXT": self._swap,
            "eglDestroyContext": self._destroy_context,
            "eglCreateImage": self._create_image,
            "eglCreateImageKHR": self._create_image,
            "eglDestroyImage": self._destroy_image,
            "eglDestroyImageKHR": self._destroy_image,
        }

    def _bind_api(self, args, ret, thread) -> None:
        self.api = integer(args[0])

    def _choose_config(self, args, ret, thread) -> None:
        """eglChooseConfig(dpy, attrib_list, configs, config_size, num_config)."""
        fmt, _renderable = egl_config_format(args[1])
        for config in args[2] if isinstance(args[2], list) else []:
            self.formats[handle(config)] = fmt

    def _create_context(self, args, ret, thread) -> Entry:
        """eglCreateContext(dpy, config, share_context, attrib_list)."""
        request = egl_context_request(args[3], self.api)
        fmt = self.formats.get(handle(args[1]), PixelFormat())
        return (self.ws.create_context, (integer(ret), request, fmt, integer(args[2])))

    def _create_window(self, args, ret, thread) -> Entry:
        return (self.ws.create_drawable, (integer(ret), DEFAULT_SIZE, DEFAULT_SIZE, False))

    def _create_pbuffer(self, args, ret, thread) -> Entry:
        pairs = attrib_pairs(args[2], EGL_NONE)
        size = (pairs.get(EGL_WIDTH, 0), pairs.get(EGL_HEIGHT, 0))
        return (self.ws.create_drawable, (integer(ret), *size, True))

    def _make_current(self, args, ret, thread) -> Entry:
        """eglMakeCurrent(dpy, draw, read, ctx)."""
        return (self.ws.make_current, (thread, integer(args[1]), integer(args[3])))

    def _swap(self, args, ret, thread) -> Entry:
        return (self.ws.swap, (integer(args[1]),))

    def _destroy_context(self, args, ret, thread) -> Entry:
        return (self.ws.destroy_context, (integer(args[1]),))

    def _create_image(self, args, ret, thread) -> Entry | None:
        """eglCreateImage(dpy, ctx, target, buffer, attrib_list): made again from the replay's
        object when it is one of the program's GL textures or renderbuffers."""
        target, traced = integer(args[2]), integer(ret)
        if target not in EGL_GL_IMAGE_TARGETS or not traced:
            return None
        self.gl_images.add(traced)
        pairs = [v for kv in attrib_pairs(args[4], EGL_NONE).items() for v in kv]
        context, buffer = integer(args[1]), integer(args[3])
        return (self.ws.create_image, (traced, context, target, buffer, pairs))

    def _destroy_image(self, args, ret, thread) -> Entry:
        return (self.ws.destroy_image, (integer(args[1]),))
