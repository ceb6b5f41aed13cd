"""EGL bound with ctypes: the constants, function prototypes and libraries that
`headless` (the display) and `viewer` (the --window viewer) call.

Only ctypes and the standard library: importing this costs nothing and never touches the
driver; libEGL is loaded by the first `load_egl()`. The values come from the Khronos
headers (EGL/egl.h, EGL/eglext.h).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence

from retrace.debian import DRIVER_HINT
from retrace.errors import RetraceError

# --- EGL constants (values from the Khronos headers, EGL/egl.h and EGL/eglext.h) -----------

EGL_SUCCESS = 0x3000
EGL_ALPHA_SIZE = 0x3021
EGL_BLUE_SIZE = 0x3022
EGL_GREEN_SIZE = 0x3023
EGL_RED_SIZE = 0x3024
EGL_DEPTH_SIZE = 0x3025
EGL_STENCIL_SIZE = 0x3026
EGL_CONFIG_CAVEAT = 0x3027
EGL_CONFIG_ID = 0x3028
EGL_SAMPLES = 0x3031
EGL_SAMPLE_BUFFERS = 0x3032
EGL_SURFACE_TYPE = 0x3033
EGL_NONE = 0x3038
EGL_COLOR_BUFFER_TYPE = 0x303F
EGL_RENDERABLE_TYPE = 0x3040
EGL_VENDOR = 0x3053
EGL_VERSION = 0x3054
EGL_EXTENSIONS = 0x3055
EGL_HEIGHT = 0x3056
EGL_WIDTH = 0x3057
EGL_DRAW = 0x3059
EGL_READ = 0x305A
EGL_CLIENT_APIS = 0x308D
EGL_RGB_BUFFER = 0x308E
EGL_OPENGL_ES_API = 0x30A0
EGL_OPENGL_API = 0x30A2
EGL_DONT_CARE = -1

EGL_PBUFFER_BIT = 0x0001
EGL_OPENGL_ES_BIT = 0x0001
EGL_OPENGL_ES2_BIT = 0x0004
EGL_OPENGL_BIT = 0x0008
EGL_OPENGL_ES3_BIT = 0x0040

# EGL 1.5 / EGL_KHR_create_context
EGL_CONTEXT_MAJOR_VERSION = 0x3098  # the same value as EGL_CONTEXT_CLIENT_VERSION
EGL_CONTEXT_MINOR_VERSION = 0x30FB
EGL_CONTEXT_FLAGS_KHR = 0x30FC
EGL_CONTEXT_OPENGL_PROFILE_MASK = 0x30FD
EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT = 0x1
EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT = 0x2
EGL_CONTEXT_OPENGL_DEBUG_BIT_KHR = 0x1
EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE_BIT_KHR = 0x2
EGL_CONTEXT_OPENGL_ROBUST_ACCESS_BIT_KHR = 0x4
EGL_CONTEXT_OPENGL_DEBUG = 0x31B0
EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE = 0x31B1
EGL_CONTEXT_OPENGL_ROBUST_ACCESS = 0x31B2

# EGL_GL_TEXTURE_2D, _3D, the six cube-map faces, EGL_GL_RENDERBUFFER (EGL_KHR_gl_image)
EGL_GL_RENDERBUFFER = 0x30B9
EGL_GL_IMAGE_TARGETS = frozenset(range(0x30B1, EGL_GL_RENDERBUFFER + 1))

# Platforms and devices
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
EGL_DRM_DEVICE_FILE_EXT = 0x3233

EGL_ERRORS = {
    0x3000: "EGL_SUCCESS",
    0x3001: "EGL_NOT_INITIALIZED",
    0x3002: "EGL_BAD_ACCESS",
    0x3003: "EGL_BAD_ALLOC",
    0x3004: "EGL_BAD_ATTRIBUTE",
    0x3005: "EGL_BAD_CONFIG",
    0x3006: "EGL_BAD_CONTEXT",
    0x3007: "EGL_BAD_CURRENT_SURFACE",
    0x3008: "EGL_BAD_DISPLAY",
    0x3009: "EGL_BAD_MATCH",
    0x300A: "EGL_BAD_NATIVE_PIXMAP",
    0x300B: "EGL_BAD_NATIVE_WINDOW",
    0x300C: "EGL_BAD_PARAMETER",
    0x300D: "EGL_BAD_SURFACE",
    0x300E: "EGL_CONTEXT_LOST",
    0x322B: "EGL_BAD_DEVICE_EXT",
}

# Libraries that export GL entry points, by client API. With glvnd, libOpenGL.so.0
# is desktop GL without GLX; libGL.so.1 is the fallback for stacks without glvnd.
GL_LIBRARIES = {
    "gl": ("libOpenGL.so.0", "libGL.so.1"),
    "gles1": ("libGLESv1_CM.so.1",),
    "gles2": ("libGLESv2.so.2",),
}

EGL_LIBRARY = "libEGL.so.1"
NO_DRIVER = "no EGL driver found"


class EglError(RetraceError):
    """EGL could not give what the replay needs; the message is one line."""


# --- libEGL, loaded once per process ----------------------------------------------------------

_lock = threading.Lock()
_egl: ctypes.CDLL | None = None
_gl_libraries: dict[str, ctypes.CDLL | None] = {}
VP = ctypes.c_void_p
INT = ctypes.c_int32
INTP = ctypes.POINTER(ctypes.c_int32)
BOOL = ctypes.c_uint32
ENUM = ctypes.c_uint32

_PROTOTYPES: dict[str, tuple[object, list[object]]] = {
    "eglGetError": (INT, []),
    "eglGetDisplay": (VP, [VP]),
    "eglInitialize": (BOOL, [VP, INTP, INTP]),
    "eglTerminate": (BOOL, [VP]),
    "eglReleaseThread": (BOOL, []),
    "eglQueryString": (ctypes.c_char_p, [VP, INT]),
    "eglChooseConfig": (BOOL, [VP, INTP, ctypes.POINTER(VP), INT, INTP]),
    "eglGetConfigAttrib": (BOOL, [VP, VP, INT, INTP]),
    "eglBindAPI": (BOOL, [ENUM]),
    "eglCreateContext": (VP, [VP, VP, VP, INTP]),
    "eglDestroyContext": (BOOL, [VP, VP]),
    "eglCreatePbufferSurface": (VP, [VP, VP, INTP]),
    "eglDestroySurface": (BOOL, [VP, VP]),
    "eglMakeCurrent": (BOOL, [VP, VP, VP, VP]),
    "eglGetProcAddress": (VP, [ctypes.c_char_p]),
    # what is current on the thread (the --window viewer puts the replay's binding back)
    "eglQueryAPI": (ENUM, []),
    "eglGetCurrentDisplay": (VP, []),
    "eglGetCurrentContext": (VP, []),
    "eglGetCurrentSurface": (VP, [INT]),
}

# Extension entry points, resolved through eglGetProcAddress.
QueryDevicesEXT = ctypes.CFUNCTYPE(BOOL, INT, ctypes.POINTER(VP), INTP)
QueryDeviceStringEXT = ctypes.CFUNCTYPE(ctypes.c_char_p, VP, INT)
GetPlatformDisplayEXT = ctypes.CFUNCTYPE(VP, ENUM, VP, INTP)
CreateImageKHR = ctypes.CFUNCTYPE(VP, VP, VP, ENUM, VP, INTP)
DestroyImageKHR = ctypes.CFUNCTYPE(BOOL, VP, VP)


def load_egl() -> ctypes.CDLL:
    """libEGL with the prototypes of the functions retrace calls, loaded once."""
    global _egl
    with _lock:
        if _egl is None:
            try:
                lib = ctypes.CDLL(EGL_LIBRARY)
                for name, (restype, argtypes) in _PROTOTYPES.items():
                    fn = getattr(lib, name)
                    fn.restype = restype
                    fn.argtypes = argtypes
            except (OSError, AttributeError) as exc:
                raise EglError(
                    f"{NO_DRIVER}: cannot load {EGL_LIBRARY} ({exc}); {DRIVER_HINT}"
                ) from None
            _egl = lib
        return _egl


def gl_library(name: str) -> ctypes.CDLL | None:
    """The GL library `name`, loaded once, or None where it is missing."""
    with _lock:
        if name not in _gl_libraries:
            try:
                _gl_libraries[name] = ctypes.CDLL(name)
            except OSError:
                _gl_libraries[name] = None
        return _gl_libraries[name]


def api_enum(api: str) -> int:
    """EGL's name for the client API "gl" or "gles" (eglBindAPI)."""
    return EGL_OPENGL_API if api == "gl" else EGL_OPENGL_ES_API


def attrib_list(pairs: Sequence[int]) -> ctypes.Array:
    """An EGL attribute list: `pairs`, then EGL_NONE."""
    return (INT * (len(pairs) + 1))(*pairs, EGL_NONE)
