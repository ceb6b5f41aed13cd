"""EGL contexts against the real driver (Mesa's llvmpipe in CI): no mocks.

Every test opens its own display and terminates it, so each one also checks
that terminate() leaves nothing behind for the next.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
from unit.test_egl import OPEN_AND_REPORT, run_child

from retrace.debian import DRIVER_HINT
from retrace.errors import RetraceError
from retrace.replay.ws.headless import (
    Context,
    ContextRequest,
    EglDisplay,
    EglError,
    PixelFormat,
)

GL_POINTS = 0x0000
GL_INVALID_OPERATION = 0x0502
GL_VIEWPORT = 0x0BA2
GL_ALPHA_BITS = 0x0D55
GL_DEPTH_BITS = 0x0D56
GL_STENCIL_BITS = 0x0D57
GL_TEXTURE_2D = 0x0DE1
GL_UNSIGNED_BYTE = 0x1401
GL_RGBA = 0x1908
GL_VERSION = 0x1F02
GL_COLOR_BUFFER_BIT = 0x4000
GL_RGBA8 = 0x8058
GL_CONTEXT_FLAGS = 0x821E
GL_CONTEXT_FLAG_DEBUG_BIT = 0x2
GL_FRAMEBUFFER_COMPLETE = 0x8CD5
GL_COLOR_ATTACHMENT0 = 0x8CE0
GL_FRAMEBUFFER = 0x8D40
GL_RENDERBUFFER = 0x8D41
GL_CONTEXT_PROFILE_MASK = 0x9126
GL_CONTEXT_CORE_PROFILE_BIT = 0x1
GL_CONTEXT_COMPATIBILITY_PROFILE_BIT = 0x2

UINT = ctypes.c_uint
INT = ctypes.c_int
FLOAT = ctypes.c_float
PTR = ctypes.c_void_p

# name -> (restype, argtypes), enough to draw and read back without PyOpenGL.
PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "glGetString": (ctypes.c_char_p, [UINT]),
    "glGetError": (UINT, []),
    "glGetIntegerv": (None, [UINT, ctypes.POINTER(INT)]),
    "glClearColor": (None, [FLOAT, FLOAT, FLOAT, FLOAT]),
    "glClear": (None, [UINT]),
    "glReadPixels": (None, [INT, INT, INT, INT, UINT, UINT, PTR]),
    "glFinish": (None, []),
    "glBegin": (None, [UINT]),
    "glEnd": (None, []),
    "glGenTextures": (None, [INT, ctypes.POINTER(UINT)]),
    "glBindTexture": (None, [UINT, UINT]),
    "glIsTexture": (ctypes.c_ubyte, [UINT]),
    "glGenFramebuffers": (None, [INT, ctypes.POINTER(UINT)]),
    "glBindFramebuffer": (None, [UINT, UINT]),
    "glGenRenderbuffers": (None, [INT, ctypes.POINTER(UINT)]),
    "glBindRenderbuffer": (None, [UINT, UINT]),
    "glRenderbufferStorage": (None, [UINT, UINT, INT, INT]),
    "glFramebufferRenderbuffer": (None, [UINT, UINT, UINT, UINT]),
    "glCheckFramebufferStatus": (UINT, [UINT]),
}


class GL:
    """GL entry points of the current context, resolved through the display."""

    def __init__(self, display: EglDisplay) -> None:
        self._display = display

    def __getattr__(self, name: str):
        restype, argtypes = PROTOTYPES[name]
        address = self._display.get_proc_address(name)
        assert address, f"{name} did not resolve"
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)

    def integer(self, pname: int, count: int = 1) -> list[int]:
        values = (INT * count)()
        self.glGetIntegerv(pname, values)
        return list(values)

    def version(self) -> str:
        return self.glGetString(GL_VERSION).decode()

    def clear_and_read(self, rgba: tuple[int, int, int, int], x: int = 0, y: int = 0) -> bytes:
        """Clear to an exactly representable colour and read one pixel back."""
        self.glClearColor(*(c / 255 for c in rgba))
        self.glClear(GL_COLOR_BUFFER_BIT)
        pixel = (ctypes.c_ubyte * 4)()
        self.glReadPixels(x, y, 1, 1, GL_RGBA, GL_UNSIGNED_BYTE, pixel)
        assert self.glGetError() == 0
        return bytes(pixel)


COLOUR = (51, 102, 153, 204)


@pytest.fixture
def display():
    with EglDisplay.open() as egl:
        yield egl


def current(
    display: EglDisplay,
    request: ContextRequest,
    fmt: PixelFormat | None = None,
    size: tuple[int, int] = (64, 48),
) -> tuple[Context, GL]:
    """Create a context on a pbuffer of `size` and make both current."""
    fmt = fmt or PixelFormat()
    context = display.create_context(request, fmt)
    surface = display.create_surface(context.config, *size)
    assert surface is not None, "llvmpipe configs all support pbuffers"
    display.make_current(context, surface)
    return context, GL(display)


def test_open_records_the_platform(display):
    assert display.platform in ("device", "surfaceless", "default")
    assert display.handle
    assert display.egl_version >= (1, 4)
    assert display.vendor
    assert "OpenGL" in display.client_apis.split()
    assert isinstance(display.extensions, frozenset)
    # With both offered, the device platform wins (what NVIDIA machines need).
    if {"EGL_EXT_device_enumeration", "EGL_EXT_platform_device"} <= display.client_extensions:
        assert display.platform == "device"
        assert display.device


def test_surfaceless_platform_when_offered():
    try:
        egl = EglDisplay.open(["surfaceless"])
    except EglError as exc:
        pytest.skip(f"no surfaceless platform here: {exc}")
    with egl:
        assert egl.platform == "surfaceless"
        context, gl = current(egl, ContextRequest("gl", 3, 3, "core"))
        assert gl.clear_and_read(COLOUR) == bytes(COLOUR)


def test_core_45_clear_and_read_back(display):
    context, gl = current(display, ContextRequest("gl", 4, 5, "core"))
    assert "4.5" in gl.version()
    assert context.version == gl.version()
    assert (context.major, context.minor) == (4, 5)
    assert context.profile == "core"
    assert context.renderer
    assert gl.integer(GL_CONTEXT_PROFILE_MASK)[0] & GL_CONTEXT_CORE_PROFILE_BIT
    assert gl.integer(GL_VIEWPORT, 4) == [0, 0, 64, 48]
    assert gl.clear_and_read(COLOUR) == bytes(COLOUR)
    assert gl.clear_and_read(COLOUR, 63, 47) == bytes(COLOUR)
    # Legacy immediate mode is gone from core: glBegin resolves (glvnd stubs anything) but fails.
    gl.glBegin(GL_POINTS)
    assert gl.glGetError() == GL_INVALID_OPERATION


def test_compat_request_gets_a_compatibility_profile(display):
    context, gl = current(display, ContextRequest("gl", 1, 0, "compat"))
    assert context.profile == "compat"
    assert context.api == "gl"
    if (context.major, context.minor) >= (3, 2):
        mask = gl.integer(GL_CONTEXT_PROFILE_MASK)[0]
        assert mask & GL_CONTEXT_COMPATIBILITY_PROFILE_BIT
    gl.glBegin(GL_POINTS)
    gl.glEnd()
    assert gl.glGetError() == 0
    assert gl.clear_and_read(COLOUR) == bytes(COLOUR)


@pytest.mark.parametrize(
    "request_",
    [
        ContextRequest("gl", 2, 1, "compat"),
        # Mesa answers a plain 3.0/3.1 request with 4.5 core; compat must still be compat.
        ContextRequest("gl", 3, 0, "compat"),
        ContextRequest("gl", 3, 1, "compat"),
        ContextRequest("gl", 3, 1, "core"),
        ContextRequest("gl", 3, 3, "compat"),
        ContextRequest("gl", 3, 2, "core"),
        ContextRequest("gl", 3, 3, "core", forward_compatible=True),
    ],
    ids=lambda r: r.describe(),
)
def test_version_at_least_the_requested_one(display, request_):
    context, gl = current(display, request_)
    assert (context.major, context.minor) >= (request_.major, request_.minor)
    assert context.profile == request_.profile
    assert gl.version() == context.version


def test_debug_and_robust_flags(display):
    request = ContextRequest("gl", 4, 5, "core", debug=True, robust=True)
    context, gl = current(display, request)
    assert gl.integer(GL_CONTEXT_FLAGS)[0] & GL_CONTEXT_FLAG_DEBUG_BIT


@pytest.mark.parametrize("major", [2, 3])
def test_gles_contexts(display, major):
    context, gl = current(display, ContextRequest("gles", major, 0))
    assert gl.version().startswith("OpenGL ES")
    assert context.api == "gles"
    assert context.profile == "es"
    assert context.major >= major
    assert context.proc_api == "gles2"
    assert gl.clear_and_read(COLOUR) == bytes(COLOUR)


def test_shared_contexts_see_each_others_textures(display):
    fmt = PixelFormat()
    request = ContextRequest("gl", 3, 3, "core")
    first = display.create_context(request, fmt)
    second = display.create_context(request, fmt, share=first)
    stranger = display.create_context(request, fmt)
    display.make_current(first, None)
    gl = GL(display)
    texture = UINT()
    gl.glGenTextures(1, ctypes.byref(texture))
    gl.glBindTexture(GL_TEXTURE_2D, texture)  # a name becomes a texture on first bind
    gl.glFinish()
    assert gl.glIsTexture(texture.value)
    display.make_current(second, None)
    assert gl.glIsTexture(texture.value)
    display.make_current(stranger, None)
    assert not gl.glIsTexture(texture.value)


@pytest.mark.parametrize(
    "fmt",
    [
        PixelFormat(alpha=0),
        PixelFormat(depth=0, stencil=0),
        PixelFormat(alpha=0, depth=0, stencil=0),
        PixelFormat(depth=16, stencil=0),
        PixelFormat(red=5, green=6, blue=5, alpha=0, depth=16, stencil=0),
    ],
    ids=repr,
)
def test_config_honours_the_pixel_format(display, fmt):
    config = display.choose_config(fmt, "gl")
    got = display.config_attribs(config)
    wanted = {
        "red": fmt.red,
        "green": fmt.green,
        "blue": fmt.blue,
        "alpha": fmt.alpha,
        "depth": fmt.depth,
        "stencil": fmt.stencil,
        "samples": fmt.samples,
    }
    for name, size in wanted.items():
        assert got[name] >= size, name
    # llvmpipe has a config for each of these exactly (EGL's own sort would pick 10-bit colour).
    assert {name: got[name] for name in wanted} == wanted
    assert got["surface_type"] & 0x1  # EGL_PBUFFER_BIT
    # And the framebuffer the context really renders to agrees.
    context, gl = current(display, ContextRequest("gl", 2, 1), fmt)
    assert context.config == config
    bits = [gl.integer(p)[0] for p in (GL_ALPHA_BITS, GL_DEPTH_BITS, GL_STENCIL_BITS)]
    assert bits == [fmt.alpha, fmt.depth, fmt.stencil]


def test_config_per_api_renderable_type(display):
    for api, bit in (("gl", 0x8), ("gles", 0x4), ("gles2", 0x4), ("gles3", 0x40)):
        config = display.choose_config(PixelFormat(), api)
        assert display.config_attribs(config)["renderable_type"] & bit
    with pytest.raises(EglError, match="unknown client API"):
        display.choose_config(PixelFormat(), "vulkan")


def test_impossible_pixel_format_is_one_line(display):
    with pytest.raises(EglError) as info:
        display.choose_config(PixelFormat(stencil=64), "gl")
    assert "\n" not in str(info.value)
    assert "stencil 64" in str(info.value)


def test_surfaceless_make_current_draws_into_an_fbo(display):
    if "EGL_KHR_surfaceless_context" not in display.extensions:
        pytest.skip("no EGL_KHR_surfaceless_context on this display")
    context = display.create_context(ContextRequest("gl", 4, 5, "core"), PixelFormat())
    display.make_current(context, None)
    gl = GL(display)
    fbo, rbo = UINT(), UINT()
    gl.glGenFramebuffers(1, ctypes.byref(fbo))
    gl.glBindFramebuffer(GL_FRAMEBUFFER, fbo)
    gl.glGenRenderbuffers(1, ctypes.byref(rbo))
    gl.glBindRenderbuffer(GL_RENDERBUFFER, rbo)
    gl.glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, 32, 16)
    gl.glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, rbo)
    assert gl.glCheckFramebufferStatus(GL_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE
    assert gl.clear_and_read(COLOUR, 31, 15) == bytes(COLOUR)


@pytest.mark.parametrize(
    "request_",
    [
        ContextRequest("gl", 9, 9, "core"),
        ContextRequest("gl", 9, 9, "compat"),
        ContextRequest("gles", 9, 0),
        ContextRequest("gles", 3, 9),
    ],
    ids=lambda r: r.describe(),
)
def test_impossible_request_is_one_clear_error(display, request_):
    with pytest.raises(EglError) as info:
        display.create_context(request_, PixelFormat())
    message = str(info.value)
    assert isinstance(info.value, RetraceError)
    assert "\n" not in message
    assert message.startswith(f"cannot create an {request_.describe()} context: EGL_")
    assert "offers up to" in message
    # Nothing was left behind by the attempts or by the probe that found the offer.
    assert not display._contexts
    assert display.current is None


def test_invalid_requests_are_refused(display):
    with pytest.raises(EglError, match="unknown OpenGL profile"):
        display.create_context(ContextRequest("gl", 3, 3, "es"), PixelFormat())
    with pytest.raises(EglError, match="unknown client API"):
        display.create_context(ContextRequest("vk", 1, 0), PixelFormat())


def test_get_proc_address(display):
    assert display.get_proc_address("glClear", "gl")
    assert display.get_proc_address("glClear", "gles2")
    assert display.get_proc_address("glDrawArraysInstancedBaseInstance", "gl")
    assert display.get_proc_address("not_a_gl_function") == 0


def test_destroying_and_terminating_releases_everything():
    egl = EglDisplay.open()
    context, gl = current(egl, ContextRequest("gl", 3, 3, "core"))
    surface = egl.current[1]
    egl.destroy_surface(surface)
    assert egl.current is None  # the surface was current, so it was released first
    egl.make_current(context, None)
    egl.destroy_context(context)
    assert egl.current is None
    egl.destroy_context(context)  # already gone: ignored
    with pytest.raises(EglError, match="destroyed"):
        egl.make_current(context, None)
    current(egl, ContextRequest("gles", 3, 0))
    egl.terminate()
    egl.terminate()  # idempotent
    assert not egl._contexts and not egl._surfaces
    with pytest.raises(EglError, match="terminated"):
        egl.create_context(ContextRequest(), PixelFormat())


def test_two_displays_share_one_egl_display():
    # eglGetPlatformDisplay gives the same handle twice; closing one must not end the other.
    with EglDisplay.open() as first:
        with EglDisplay.open() as second:
            assert second.handle == first.handle
            current(second, ContextRequest("gl", 3, 3, "core"))
        context, gl = current(first, ContextRequest("gl", 3, 3, "core"))
        assert gl.clear_and_read(COLOUR) == bytes(COLOUR)


def test_no_vendor_driver_is_an_error_not_a_crash():
    child = run_child(OPEN_AND_REPORT, __EGL_VENDOR_LIBRARY_FILENAMES="/nonexistent.json")
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("no EGL driver found: ")
    assert lines[0].endswith(f"; {DRIVER_HINT}")  # what installs one


def test_gl_errors_drains_the_driver_s_errors_in_c(display):
    """`_vm.gl_errors`, which settles a frame's GL errors: the codes glGetError answers
    until GL_NO_ERROR, none asked with `most` 0."""
    from retrace.replay import _vm

    _context, gl = current(display, ContextRequest("gl", 4, 5, "core"))
    get_error = display.get_proc_address("glGetError")
    assert _vm.gl_errors(get_error, 32) == ()
    gl.glBegin(GL_POINTS)  # (gone from core: GL_INVALID_OPERATION)
    assert _vm.gl_errors(get_error, 0) == ()  # (not asked: still pending)
    assert _vm.gl_errors(get_error, 32) == (GL_INVALID_OPERATION,)
    assert _vm.gl_errors(get_error, 32) == ()
