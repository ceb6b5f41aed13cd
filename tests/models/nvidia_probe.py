"""Small EGL programs that show each behaviour of the NVIDIA model, as measured on NVIDIA.

Run as a script in a process of its own (the EGL vendor is chosen when libEGL loads):
`python nvidia_probe.py CASE` prints what CASE saw as one JSON object. Only ctypes and
libglvnd's libraries, so that what they show does not depend on retrace's own code, and
so that they run as they are on an NVIDIA GPU (through an EGL device there), where what
they print is what the model must print.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

EGL_SUCCESS = 0x3000
EGL_BAD_ALLOC = 0x3003
EGL_SURFACE_TYPE = 0x3033
EGL_NONE = 0x3038
EGL_RENDERABLE_TYPE = 0x3040
EGL_HEIGHT = 0x3056
EGL_WIDTH = 0x3057
EGL_OPENGL_ES_API = 0x30A0
EGL_OPENGL_API = 0x30A2
EGL_CONTEXT_MAJOR_VERSION = 0x3098
EGL_PBUFFER_BIT = 0x0001
EGL_OPENGL_ES2_BIT = 0x0004
EGL_OPENGL_BIT = 0x0008
EGL_EXTENSIONS = 0x3055
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_PLATFORM_SURFACELESS_MESA = 0x31DD

GL_NONE = 0
GL_FRONT = 0x0404
GL_BACK = 0x0405
GL_NO_ERROR = 0
GL_INVALID_OPERATION = 0x0502
GL_DRAW_BUFFER = 0x0C01
GL_READ_BUFFER = 0x0C02
GL_FRAMEBUFFER = 0x8D40
GL_DRAW_FRAMEBUFFER_BINDING = 0x8CA6
GL_COLOR_BUFFER_BIT = 0x4000
GL_RGBA = 0x1908
GL_UNSIGNED_BYTE = 0x1401

VP, INT, UINT = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32
LIBRARIES: dict[
    str, dict[str, tuple[Any, list[Any]]]
] = {  # glvnd's, with the prototypes of the functions used here
    "libEGL.so.1": {
        "eglQueryString": (ctypes.c_char_p, [VP, INT]),
        "eglGetProcAddress": (VP, [ctypes.c_char_p]),
        "eglGetPlatformDisplay": (VP, [UINT, VP, VP]),
        "eglInitialize": (UINT, [VP, VP, VP]),
        "eglBindAPI": (UINT, [UINT]),
        "eglChooseConfig": (UINT, [VP, ctypes.POINTER(INT), ctypes.POINTER(VP), INT, VP]),
        "eglCreateContext": (VP, [VP, VP, VP, ctypes.POINTER(INT)]),
        "eglCreatePbufferSurface": (VP, [VP, VP, ctypes.POINTER(INT)]),
        "eglMakeCurrent": (UINT, [VP, VP, VP, VP]),
        "eglReleaseThread": (UINT, []),
        "eglGetError": (INT, []),
    },
    "libOpenGL.so.0": {
        "glGetIntegerv": (None, [UINT, ctypes.POINTER(INT)]),
        "glGetError": (UINT, []),
        "glDrawBuffer": (None, [UINT]),
        "glReadBuffer": (None, [UINT]),
        "glGenFramebuffers": (None, [INT, ctypes.POINTER(UINT)]),
        "glBindFramebuffer": (None, [UINT, UINT]),
        "glClearColor": (None, [ctypes.c_float] * 4),
        "glClear": (None, [UINT]),
        "glReadPixels": (None, [INT, INT, INT, INT, UINT, UINT, VP]),
    },
}


@functools.cache
def library(name: str) -> Any:
    """Loaded when a probe runs: the EGL vendor is chosen when libEGL loads."""
    lib = ctypes.CDLL(name)
    for function, (restype, argtypes) in LIBRARIES[name].items():
        getattr(lib, function).restype = restype
        getattr(lib, function).argtypes = argtypes
    return lib


def egl() -> Any:
    return library("libEGL.so.1")


def gl() -> Any:
    return library("libOpenGL.so.0")


def attribs(*pairs: int) -> Any:
    return (INT * (len(pairs) + 1))(*pairs, EGL_NONE)


def display() -> int:
    """Mesa's surfaceless platform, or the first EGL device where there is none (NVIDIA)."""
    offered = (egl().eglQueryString(None, EGL_EXTENSIONS) or b"").split()
    if b"EGL_MESA_platform_surfaceless" in offered:
        dpy = egl().eglGetPlatformDisplay(EGL_PLATFORM_SURFACELESS_MESA, None, None)
    else:
        query_devices = ctypes.CFUNCTYPE(UINT, INT, ctypes.POINTER(VP), ctypes.POINTER(INT))(
            egl().eglGetProcAddress(b"eglQueryDevicesEXT")
        )
        device, count = VP(), INT()
        assert query_devices(1, ctypes.byref(device), ctypes.byref(count)) and count.value
        dpy = egl().eglGetPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, device, None)
    assert dpy and egl().eglInitialize(dpy, None, None), egl().eglGetError()
    return dpy


def config(dpy: int, renderable: int) -> int:
    found, count = VP(), INT()
    wanted = attribs(EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, renderable)
    assert egl().eglChooseConfig(dpy, wanted, ctypes.byref(found), 1, ctypes.byref(count))
    assert count.value == 1
    return found.value or 0


def create_es2(dpy: int, cfg: int) -> tuple[bool, int]:
    """(a context was made, eglGetError after it)."""
    egl().eglBindAPI(EGL_OPENGL_ES_API)
    made = egl().eglCreateContext(dpy, cfg, None, attribs(EGL_CONTEXT_MAJOR_VERSION, 2))
    return bool(made), egl().eglGetError()


def integer(pname: int) -> int:
    value = INT()
    gl().glGetIntegerv(pname, ctypes.byref(value))
    return value.value


# --- the cases ------------------------------------------------------------------------------


def fork_create() -> dict[str, Any]:
    """A context made by the initialising process, one of its threads, and a forked child."""
    dpy = display()
    cfg = config(dpy, EGL_OPENGL_ES2_BIT)
    seen: dict[str, Any] = {"process": create_es2(dpy, cfg)}
    thread = threading.Thread(target=lambda: seen.update(thread=create_es2(dpy, cfg)))
    thread.start()
    thread.join()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports through the pipe and leaves at once
        os.write(write, json.dumps(create_es2(dpy, cfg)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    seen["child"] = tuple(json.loads(os.read(read, 4096)))
    return seen


def desktop_context() -> tuple[int, int, Callable[[], int]]:
    """A display, a desktop GL context on it, and a function making 8x8 pbuffers."""
    dpy = display()
    cfg = config(dpy, EGL_OPENGL_BIT)
    egl().eglBindAPI(EGL_OPENGL_API)
    ctx = egl().eglCreateContext(dpy, cfg, None, attribs())
    assert ctx, egl().eglGetError()

    def pbuffer() -> int:
        surface = egl().eglCreatePbufferSurface(dpy, cfg, attribs(EGL_WIDTH, 8, EGL_HEIGHT, 8))
        assert surface, egl().eglGetError()
        return surface

    return dpy, ctx, pbuffer


def bind(dpy: int, ctx: int | None, surface: int | None) -> None:
    assert egl().eglMakeCurrent(dpy, surface, surface, ctx), egl().eglGetError()


def buffers() -> list[int]:
    return [integer(GL_DRAW_BUFFER), integer(GL_READ_BUFFER)]


def cleared_red() -> int:
    """Clear the window to red and read its first pixel's red back (0 where nothing drew)."""
    gl().glClearColor(1.0, 0.0, 0.0, 1.0)
    gl().glClear(GL_COLOR_BUFFER_BIT)
    pixel = (ctypes.c_ubyte * 4)()
    gl().glReadPixels(0, 0, 1, 1, GL_RGBA, GL_UNSIGNED_BYTE, pixel)
    return pixel[0]


def surfaceless_first() -> dict[str, Any]:
    """A desktop context made current without a surface first, then bound to a pbuffer."""
    dpy, ctx, pbuffer = desktop_context()
    bind(dpy, ctx, None)
    bind(dpy, ctx, pbuffer())
    return {"buffers": buffers(), "red": cleared_red()}


def surface_first() -> dict[str, Any]:
    """A desktop context bound to a pbuffer first: GL_BACK; what it sets follows it to the
    next pbuffer, whether released by eglMakeCurrent or eglReleaseThread; a framebuffer
    object it has bound stays bound."""
    dpy, ctx, pbuffer = desktop_context()
    bind(dpy, ctx, pbuffer())
    seen: dict[str, Any] = {"first": buffers()}
    gl().glDrawBuffer(GL_NONE)
    fbo = UINT()
    gl().glGenFramebuffers(1, ctypes.byref(fbo))
    gl().glBindFramebuffer(GL_FRAMEBUFFER, fbo)
    bind(dpy, None, None)
    bind(dpy, ctx, pbuffer())
    seen["fbo kept"] = integer(GL_DRAW_FRAMEBUFFER_BINDING) == fbo.value
    gl().glBindFramebuffer(GL_FRAMEBUFFER, 0)
    seen["rebound"] = buffers()
    gl().glDrawBuffer(GL_BACK)
    gl().glReadBuffer(GL_NONE)
    assert egl().eglReleaseThread()
    bind(dpy, ctx, pbuffer())
    seen["after eglReleaseThread"] = buffers()
    seen["error"] = gl().glGetError()
    return seen


def front_of_pbuffer() -> dict[str, Any]:
    """glDrawBuffer(GL_FRONT) on a pbuffer: the error, and the draw buffer after it."""
    dpy, ctx, pbuffer = desktop_context()
    bind(dpy, ctx, pbuffer())
    gl().glDrawBuffer(GL_FRONT)
    error = gl().glGetError()
    return {"error": error, "after": integer(GL_DRAW_BUFFER), "then": gl().glGetError()}


CASES = {f.__name__: f for f in (fork_create, surfaceless_first, surface_first, front_of_pbuffer)}

if __name__ == "__main__":
    print(json.dumps(CASES[sys.argv[1]]()))  # (on a GPU: each case, to compare with the model)
