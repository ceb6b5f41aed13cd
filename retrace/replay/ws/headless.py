"""Headless OpenGL and OpenGL ES contexts through EGL, bound with ctypes.

A replay needs real driver contexts without a window system: CI machines and
render servers have no X display. EGL gives us that in three ways, tried in
this order by `EglDisplay.open`:

``device``
    EGL_EXT_platform_device on a device from EGL_EXT_device_enumeration. This
    is the path that works on NVIDIA's proprietary driver; Mesa offers it too
    (its software device carries EGL_MESA_device_software). Hardware devices
    are tried before software ones.
``surfaceless``
    EGL_MESA_platform_surfaceless: Mesa's headless platform.
``default``
    ``eglGetDisplay(EGL_DEFAULT_DISPLAY)``: whatever the implementation picks,
    the last resort for old stacks without client extensions.

The platform that won is recorded in `EglDisplay.platform`.

Rendering goes to a pbuffer surface of the trace's window size (a `Drawable`
stands in for each of the trace's windows and pbuffers) or, when the
chosen config cannot back a pbuffer, to no surface at all: the context is made
current surfaceless (EGL_KHR_surfaceless_context) and the caller renders into
a framebuffer object of its own.

This module only uses ctypes and the standard library, so importing it costs
nothing and never touches the driver; libEGL is loaded by `EglDisplay.open`.
Everything a display creates is tracked and released by `EglDisplay.terminate`
(also run when the display is used as a context manager), because a replay
runs once per trace and profiling runs many in one process.

EGL keeps the current context per thread; this module assumes that one thread
drives one display, as a replay does.

A context is first made current on a pbuffer (to identify it), never without a surface
where its config has pbuffers: a context's default draw and read buffers are set at its
first binding (GL 4.6, 17.4.1), so one first bound surfacelessly keeps GL_NONE on
NVIDIA's driver, and its window's frames are drawn into nothing (Mesa sets them again at
every binding). What else that first binding sets, the viewport and scissor box, the
display sets again at the context's first binding to another surface.

The EGL bindings are `egl_api`; which process may open a display, `driver_process`.
"""

from __future__ import annotations

import ctypes
import re
import threading
from _ctypes import dlsym
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from retrace.debian import DRIVER_HINT
from retrace.replay.ws.egl_api import (
    EGL_ALPHA_SIZE,
    EGL_BLUE_SIZE,
    EGL_CLIENT_APIS,
    EGL_COLOR_BUFFER_TYPE,
    EGL_CONFIG_CAVEAT,
    EGL_CONFIG_ID,
    EGL_CONTEXT_FLAGS_KHR,
    EGL_CONTEXT_MAJOR_VERSION,
    EGL_CONTEXT_MINOR_VERSION,
    EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT,
    EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
    EGL_CONTEXT_OPENGL_DEBUG,
    EGL_CONTEXT_OPENGL_DEBUG_BIT_KHR,
    EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE,
    EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE_BIT_KHR,
    EGL_CONTEXT_OPENGL_PROFILE_MASK,
    EGL_CONTEXT_OPENGL_ROBUST_ACCESS,
    EGL_CONTEXT_OPENGL_ROBUST_ACCESS_BIT_KHR,
    EGL_DEPTH_SIZE,
    EGL_DONT_CARE,
    EGL_DRM_DEVICE_FILE_EXT,
    EGL_ERRORS,
    EGL_EXTENSIONS,
    EGL_GREEN_SIZE,
    EGL_HEIGHT,
    EGL_NONE,
    EGL_OPENGL_BIT,
    EGL_OPENGL_ES2_BIT,
    EGL_OPENGL_ES3_BIT,
    EGL_OPENGL_ES_BIT,
    EGL_PBUFFER_BIT,
    EGL_PLATFORM_DEVICE_EXT,
    EGL_PLATFORM_SURFACELESS_MESA,
    EGL_RED_SIZE,
    EGL_RENDERABLE_TYPE,
    EGL_RGB_BUFFER,
    EGL_SAMPLE_BUFFERS,
    EGL_SAMPLES,
    EGL_STENCIL_SIZE,
    EGL_SURFACE_TYPE,
    EGL_VENDOR,
    EGL_VERSION,
    EGL_WIDTH,
    GL_LIBRARIES,
    INT,
    INTP,
    NO_DRIVER,
    VP,
    CreateImageKHR,
    DestroyImageKHR,
    EglError,
    GetPlatformDisplayEXT,
    QueryDevicesEXT,
    QueryDeviceStringEXT,
    api_enum,
    attrib_list,
    gl_library,
    load_egl,
)

if TYPE_CHECKING:  # (the registry behind dispatch is not needed to open a display)
    from retrace.replay.dispatch import CFunction

__all__ = [
    "Context",
    "ContextRequest",
    "Drawable",
    "EglDisplay",
    "EglError",
    "PixelFormat",
    "Surface",
]

# --- the few GL constants needed to identify a context and set up its window ---------------

GL_RENDERER = 0x1F01
GL_VERSION = 0x1F02
GL_CONTEXT_PROFILE_MASK = 0x9126
GL_CONTEXT_CORE_PROFILE_BIT = 0x1
GL_NONE = 0
GL_BACK = 0x0405
GL_DRAW_BUFFER = 0x0C01
GL_READ_BUFFER = 0x0C02
GL_DRAW_FRAMEBUFFER_BINDING = 0x8CA6
GL_READ_FRAMEBUFFER = 0x8CA8
GL_DRAW_FRAMEBUFFER = 0x8CA9
GL_READ_FRAMEBUFFER_BINDING = 0x8CAA
_BINDING = {
    GL_DRAW_FRAMEBUFFER: GL_DRAW_FRAMEBUFFER_BINDING,
    GL_READ_FRAMEBUFFER: GL_READ_FRAMEBUFFER_BINDING,
}


class PixelFormat(NamedTuple):
    """The framebuffer a trace asked for, in bits per channel.

    Sizes are minimums, as in EGL; `EglDisplay.choose_config` picks the
    config closest to them. `double_buffer` does not select configs: pbuffers
    are single-buffered by definition (eglSwapBuffers on one is a no-op), so
    front/back emulation is the caller's business.
    """

    red: int = 8
    green: int = 8
    blue: int = 8
    alpha: int = 8
    depth: int = 24
    stencil: int = 8
    samples: int = 0
    double_buffer: bool = True


class ContextRequest(NamedTuple):
    """The context a trace created: API, version, profile and flags."""

    api: str = "gl"  # "gl" (desktop) or "gles"
    major: int = 1
    minor: int = 0
    profile: str = "compat"  # "core" | "compat"; desktop only
    debug: bool = False
    forward_compatible: bool = False
    robust: bool = False

    def describe(self) -> str:
        """'OpenGL 4.6 core', 'OpenGL 2.1 compat', 'OpenGL ES 3.0': for messages."""
        if self.api == "gles":
            return f"OpenGL ES {self.major}.{self.minor}"
        return f"OpenGL {self.major}.{self.minor} {self.profile}"


class Context:
    """An EGL context and what the driver really gave for it.

    `version` and `renderer` are glGetString(GL_VERSION / GL_RENDERER), read
    right after creation; `major`, `minor` and `profile` ("core", "compat" or
    "es") come from them and GL_CONTEXT_PROFILE_MASK. Below 3.2, where
    profiles do not exist, desktop contexts count as "compat". They are empty
    only when the context could not be made current to ask (a config without
    pbuffers on a display without surfaceless contexts).
    """

    __slots__ = (
        "handle",
        "config",
        "request",
        "api",
        "version",
        "renderer",
        "major",
        "minor",
        "profile",
        "on_surface",
        "surfaceless",
    )

    def __init__(self, handle: int, config: int, request: ContextRequest, api: str) -> None:
        self.handle = handle
        self.config = config
        self.request = request
        self.api = api  # "gl" or "gles"
        self.version = ""
        self.renderer = ""
        self.major = 0
        self.minor = 0
        self.profile = ""
        self.on_surface = False  # bound to a surface other than the one that identified it
        self.surfaceless = False  # bound without a surface by `make_current`'s caller

    @property
    def proc_api(self) -> str:
        """Which GL library serves this context: "gl", "gles1" or "gles2"."""
        return _proc_api(self.api, self.request.major)


class Surface:
    """A pbuffer surface: the replay's stand-in for the trace's window."""

    __slots__ = ("handle", "config", "width", "height")

    def __init__(self, handle: int, config: int, width: int, height: int) -> None:
        self.handle = handle
        self.config = config
        self.width = width
        self.height = height


# glretrace's stand-in size for a window whose size the trace has not revealed yet.
DEFAULT_SIZE = 32


class Drawable:
    """The stand-in for one window, pixmap or pbuffer of the traced program: its size, and
    the pbuffer surface behind it once a context has been bound to it."""

    __slots__ = ("width", "height", "fixed", "surface")

    def __init__(
        self, width: int = DEFAULT_SIZE, height: int = DEFAULT_SIZE, fixed: bool = False
    ) -> None:
        self.width = width
        self.height = height
        self.fixed = fixed  # a pbuffer: its size came from the trace and never grows
        self.surface: Surface | None = None


# EGL display handles are per process, not per eglGetDisplay call: two EglDisplay objects
# on the same platform share one handle, so eglTerminate waits for the last of them.
_display_refs: dict[int, int] = {}
_refs_lock = threading.Lock()

# GL entry points used to identify a context and set up its window.
_GetString = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_uint32)
_GetIntegerv = ctypes.CFUNCTYPE(None, ctypes.c_uint32, INTP)
_SetBox = ctypes.CFUNCTYPE(None, INT, INT, INT, INT)  # glViewport, glScissor
_SetBuffer = ctypes.CFUNCTYPE(None, ctypes.c_uint32)  # glDrawBuffer, glReadBuffer
_BindFramebuffer = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)


def _proc_api(api: str, major: int) -> str:
    if api == "gl":
        return "gl"
    return "gles1" if major < 2 else "gles2"


def _parse_version(text: str) -> tuple[int, int]:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _short_renderer(renderer: str) -> str:
    """'llvmpipe (LLVM 15.0.6, 256 bits)' -> 'llvmpipe'."""
    return renderer.split(" (", 1)[0].strip() or "unknown"


_PLATFORMS = ("device", "surfaceless", "default")  # those `EglDisplay.open` tries, in order


class EglDisplay:
    """One EGL display for the whole replay.

    Open it with `EglDisplay.open()`; it owns every context and surface made
    through it, and `terminate()` (or leaving a ``with`` block) releases them
    all. Handles (configs, contexts, surfaces) are plain ints, as EGL's
    opaque pointers.
    """

    handle: int
    platform: str  # "device", "surfaceless" or "default"
    device: str  # for "device": "software", a DRM node, or "device N"; else ""
    egl_version: tuple[int, int]
    vendor: str
    version: str
    client_apis: str
    extensions: frozenset[str]
    client_extensions: frozenset[str]

    def __init__(
        self,
        egl: ctypes.CDLL,
        handle: int,
        platform: str,
        device: str,
        egl_version: tuple[int, int],
        client_extensions: frozenset[str],
    ) -> None:
        """Wrap an initialised display; use `open` rather than this."""
        self._egl = egl
        self.handle = handle
        self.platform = platform
        self.device = device
        self.egl_version = egl_version
        self.client_extensions = client_extensions
        self.vendor = self._query(EGL_VENDOR)
        self.version = self._query(EGL_VERSION)
        self.client_apis = self._query(EGL_CLIENT_APIS)
        self.extensions = frozenset(self._query(EGL_EXTENSIONS).split())
        self._contexts: dict[int, Context] = {}
        self._surfaces: dict[int, Surface] = {}
        self._current: tuple[Context, Surface | None] | None = None
        self._images: set[int] = set()
        self._configs: dict[tuple[PixelFormat, str], int] = {}
        self._procs: dict[tuple[str, str], int] = {}
        self._gl_funcs: dict[tuple[str, str], CFunction | None] = {}
        self._terminated = False

    # --- opening and closing ------------------------------------------------------------

    @classmethod
    def open(cls, platforms: Sequence[str] | None = None) -> EglDisplay:
        """Open and initialise the first display that works.

        `platforms` restricts and orders the candidates (default: device,
        surfaceless, default). Raises EglError "no EGL driver found: ..." with
        what each platform said when none initialises, or libEGL is missing.
        """
        egl = load_egl()
        order = tuple(platforms or _PLATFORMS)
        unknown = [p for p in order if p not in _PLATFORMS]
        if unknown:
            raise EglError(f"unknown EGL platform {unknown[0]!r}")
        raw = egl.eglQueryString(None, EGL_EXTENSIONS)
        if raw is None:  # EGL 1.4 without EGL_EXT_client_extensions
            egl.eglGetError()
        client_ext = frozenset((raw or b"").decode("ascii", "replace").split())
        problems: list[str] = []
        for platform in order:
            for device, handle, problem in cls._candidates(egl, platform, client_ext):
                if not handle:
                    problems.append(f"{platform}: {problem}")
                    continue
                major, minor = INT(), INT()
                if not egl.eglInitialize(handle, ctypes.byref(major), ctypes.byref(minor)):
                    err = EGL_ERRORS.get(egl.eglGetError(), "unknown error")
                    where = f" ({device})" if device else ""
                    problems.append(f"{platform}{where}: eglInitialize failed ({err})")
                    continue
                with _refs_lock:
                    _display_refs[handle] = _display_refs.get(handle, 0) + 1
                try:
                    return cls(
                        egl, handle, platform, device, (major.value, minor.value), client_ext
                    )
                except BaseException:
                    cls._unref(egl, handle)
                    raise
        raise EglError(
            f"{NO_DRIVER}: " + "; ".join([*(problems or ["no platform to try"]), DRIVER_HINT])
        )

    @staticmethod
    def _candidates(
        egl: ctypes.CDLL, platform: str, client_ext: frozenset[str]
    ) -> Iterator[tuple[str, int, str]]:
        """(device label, display handle or 0, problem) for each display to try."""
        get_platform_display = None
        if "EGL_EXT_platform_base" in client_ext:
            address = egl.eglGetProcAddress(b"eglGetPlatformDisplayEXT")
            if address:
                get_platform_display = GetPlatformDisplayEXT(address)
        if platform == "default":
            handle = egl.eglGetDisplay(None) or 0
            if not handle:
                egl.eglGetError()
            yield "", handle, "eglGetDisplay(EGL_DEFAULT_DISPLAY) gave no display"
            return
        if platform == "surfaceless":
            if get_platform_display is None or "EGL_MESA_platform_surfaceless" not in client_ext:
                yield "", 0, "EGL_MESA_platform_surfaceless not offered"
                return
            handle = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, None, None) or 0
            err = EGL_ERRORS.get(egl.eglGetError(), "unknown error")
            yield "", handle, f"eglGetPlatformDisplay failed ({err})"
            return
        yield from EglDisplay._devices(egl, client_ext, get_platform_display)

    @staticmethod
    def _devices(
        egl: ctypes.CDLL, client_ext: frozenset[str], get_platform_display: Any
    ) -> Iterator[tuple[str, int, str]]:
        """The device platform's candidates: one display per device, hardware first."""
        wanted = ("EGL_EXT_device_enumeration", "EGL_EXT_platform_device")
        missing = [ext for ext in wanted if ext not in client_ext]
        query_devices = egl.eglGetProcAddress(b"eglQueryDevicesEXT")
        query_string = egl.eglGetProcAddress(b"eglQueryDeviceStringEXT")
        if get_platform_display is None or missing or not query_devices:
            yield "", 0, f"{(missing or ['EGL_EXT_platform_base'])[0]} not offered"
            return
        count = INT()
        devices = (VP * 0)()
        ok = QueryDevicesEXT(query_devices)(0, None, ctypes.byref(count))
        if ok and count.value > 0:
            devices = (VP * count.value)()
            ok = QueryDevicesEXT(query_devices)(count.value, devices, ctypes.byref(count))
        if not ok:
            err = EGL_ERRORS.get(egl.eglGetError(), "unknown error")
            yield "", 0, f"eglQueryDevicesEXT failed ({err})"
            return
        if count.value == 0:
            yield "", 0, "no EGL devices"
            return
        labelled = []
        for index in range(count.value):
            labelled.append(
                (*_describe_device(query_string, devices[index], index), devices[index])
            )
        # Hardware before software: on a machine with a GPU, Mesa's software device
        # is listed too, and a replay must not silently land on it.
        labelled.sort(key=lambda item: item[0])
        for _software, label, device in labelled:
            handle = get_platform_display(EGL_PLATFORM_DEVICE_EXT, device, None) or 0
            err = EGL_ERRORS.get(egl.eglGetError(), "unknown error")
            yield label, handle, f"eglGetPlatformDisplay({label}) failed ({err})"

    def terminate(self) -> None:
        """Release the current context, destroy all contexts and surfaces, end EGL.

        Idempotent, and never raises: it runs on error paths.
        """
        if self._terminated:
            return
        self._terminated = True
        egl = self._egl
        if self._current is not None:
            # Only when ours is current: another EglDisplay may share this EGL display.
            egl.eglBindAPI(api_enum(self._current[0].api))
            egl.eglMakeCurrent(self.handle, None, None, None)
            self._current = None
        for image in list(self._images):
            self.destroy_image(image)
        for surface in list(self._surfaces.values()):
            egl.eglDestroySurface(self.handle, surface.handle)
        for context in list(self._contexts.values()):
            egl.eglDestroyContext(self.handle, context.handle)
        self._surfaces.clear()
        self._contexts.clear()
        egl.eglGetError()
        self._unref(egl, self.handle)

    @staticmethod
    def _unref(egl: ctypes.CDLL, handle: int) -> None:
        with _refs_lock:
            refs = _display_refs.get(handle, 1) - 1
            if refs > 0:
                _display_refs[handle] = refs
                return
            _display_refs.pop(handle, None)
            last = not _display_refs
        egl.eglTerminate(handle)
        if last:
            # Frees this thread's EGL state (bound API, last error) once no display is open.
            egl.eglReleaseThread()

    def __enter__(self) -> EglDisplay:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.terminate()

    def __repr__(self) -> str:
        where = f" {self.device}" if self.device else ""
        return f"<EglDisplay {self.platform}{where}: {self.vendor} EGL {self.version}>"

    # --- configs --------------------------------------------------------------------------

    def choose_config(self, fmt: PixelFormat, api: str) -> int:
        """The config closest to `fmt` that renders `api`.

        `api` is "gl", "gles" (ES 2), or "gles1"/"gles2"/"gles3" for the exact
        renderable-type bit. Every size is at least the requested one (EGL's
        matching rule); among the matches the one with the fewest channels off
        and then the least excess wins, so alpha 0 / depth 0 / stencil 0 get
        configs without those buffers when the driver has any. EGL's own sort
        is not used: it ranks deeper colour first, which would pick 10-bit
        configs for an 8-bit request. Pbuffer-capable configs are preferred;
        without one the config is still returned and `create_surface` gives None.
        """
        self._check_open()
        cached = self._configs.get((fmt, api))
        if cached is not None:
            return cached
        bit = {
            "gl": EGL_OPENGL_BIT,
            "gles": EGL_OPENGL_ES2_BIT,
            "gles1": EGL_OPENGL_ES_BIT,
            "gles2": EGL_OPENGL_ES2_BIT,
            "gles3": EGL_OPENGL_ES3_BIT,
        }.get(api)
        if bit is None:
            raise EglError(f"unknown client API {api!r} (expected gl, gles, gles1, gles2, gles3)")
        wanted = {
            EGL_RED_SIZE: fmt.red,
            EGL_GREEN_SIZE: fmt.green,
            EGL_BLUE_SIZE: fmt.blue,
            EGL_ALPHA_SIZE: fmt.alpha,
            EGL_DEPTH_SIZE: fmt.depth,
            EGL_STENCIL_SIZE: fmt.stencil,
            EGL_SAMPLES: fmt.samples,
        }
        base = [attr for pair in wanted.items() for attr in pair]
        base += [EGL_RENDERABLE_TYPE, bit, EGL_COLOR_BUFFER_TYPE, EGL_RGB_BUFFER]
        if fmt.samples > 0:
            base += [EGL_SAMPLE_BUFFERS, 1]
        for surface_type in (EGL_PBUFFER_BIT, EGL_DONT_CARE):
            configs = self._choose(base + [EGL_SURFACE_TYPE, surface_type])
            if configs:
                best = min(configs, key=lambda config: self._distance(config, wanted))
                self._configs[(fmt, api)] = best
                return best
        raise EglError(
            f"no EGL config for {api} with {_describe_format(fmt)} on {self.vendor} "
            f"({self.platform} platform)"
        )

    def _choose(self, attribs: list[int]) -> list[int]:
        egl = self._egl
        attribs_array = attrib_list(attribs)
        count = INT()
        if not egl.eglChooseConfig(self.handle, attribs_array, None, 0, ctypes.byref(count)):
            raise EglError(f"eglChooseConfig failed: {self._error()}")
        if count.value == 0:
            return []
        configs = (VP * count.value)()
        egl.eglChooseConfig(self.handle, attribs_array, configs, count.value, ctypes.byref(count))
        return [c for c in configs[: count.value] if c]

    def _distance(self, config: int, wanted: dict[int, int]) -> tuple[int, int, int, int]:
        excess = [self._attrib(config, attr) - size for attr, size in wanted.items()]
        caveat = int(self._attrib(config, EGL_CONFIG_CAVEAT) != EGL_NONE)  # slow or non-conformant
        off = sum(1 for e in excess if e)
        return caveat, off, sum(excess), self._attrib(config, EGL_CONFIG_ID)

    def _attrib(self, config: int, attribute: int) -> int:
        value = INT()
        if not self._egl.eglGetConfigAttrib(self.handle, config, attribute, ctypes.byref(value)):
            raise EglError(f"eglGetConfigAttrib({attribute:#x}) failed: {self._error()}")
        return value.value

    def config_attribs(self, config: int) -> dict[str, int]:
        """What a config really has: channel sizes, samples, surface and renderable bits."""
        names = {
            "red": EGL_RED_SIZE,
            "green": EGL_GREEN_SIZE,
            "blue": EGL_BLUE_SIZE,
            "alpha": EGL_ALPHA_SIZE,
            "depth": EGL_DEPTH_SIZE,
            "stencil": EGL_STENCIL_SIZE,
            "samples": EGL_SAMPLES,
            "surface_type": EGL_SURFACE_TYPE,
            "renderable_type": EGL_RENDERABLE_TYPE,
            "config_id": EGL_CONFIG_ID,
        }
        return {name: self._attrib(config, attr) for name, attr in names.items()}

    # --- contexts -------------------------------------------------------------------------

    def create_context(
        self, request: ContextRequest, fmt: PixelFormat, share: Context | None = None
    ) -> Context:
        """Create a context as the trace asked, falling back as glretrace would.

        The exact request goes first (EGL 1.5 or EGL_KHR_create_context
        attributes; a profile mask only from desktop 3.2 on, where profiles
        exist). Then, while the result fails or falls short: a request with
        debug/robust flags is retried without them (they change no rendering);
        a compatibility request is retried with no version at all, where
        drivers give their highest compatibility version (so "1.0 compat",
        what traces of legacy apps carry, gets 4.5 compat on llvmpipe); a
        GLES x.y request is retried as x.0, where drivers give their highest
        x.*. A core request has no fallback.

        A context older than requested is refused. A compatibility request
        answered with a core context (Mesa turns a plain 3.1 request into 4.5
        core) is kept only if no fallback gives compatibility. Failure is one
        EglError naming the request, the EGL error and what the driver offers.
        """
        self._check_request(request, share)
        proc_api = _proc_api(request.api, request.major)
        config_api = "gles3" if request.api == "gles" and request.major >= 3 else proc_api
        config = self.choose_config(fmt, config_api)
        share_handle = share.handle if share is not None else None

        first_error = ""
        offer = ""
        wrong_profile: Context | None = None
        for attribs in self._context_attempts(request):
            self._bind(request.api)
            handle = self._egl.eglCreateContext(
                self.handle, config, share_handle, attrib_list(attribs)
            )
            if not handle:
                first_error = first_error or self._error()
                continue
            context = self._identified(handle, config, request, wrong_profile)
            if not context.version:  # could not be asked: trust EGL
                return context
            if (context.major, context.minor) < (request.major, request.minor):
                # Fallbacks ask for the driver's highest version, so this is its offer.
                renderer = _short_renderer(context.renderer)
                offer = f"driver {renderer} offers up to {context.major}.{context.minor}"
                self.destroy_context(context)
                continue
            if request.api == "gl" and context.profile != request.profile:
                if wrong_profile is None:
                    wrong_profile = context
                else:
                    self.destroy_context(context)
                continue
            if wrong_profile is not None:
                self.destroy_context(wrong_profile)
            return context
        if wrong_profile is not None:
            return wrong_profile
        if not offer:
            offer = self._offer(request, config)
        why = " ".join(part for part in (first_error, f"({offer})" if offer else "") if part)
        raise EglError(f"cannot create an {request.describe()} context: {why}")

    def _check_request(self, request: ContextRequest, share: Context | None) -> None:
        """Refuse, with one line, a request or share context this display cannot take."""
        self._check_open()
        if request.api not in ("gl", "gles"):
            raise EglError(f"unknown client API {request.api!r} (expected gl or gles)")
        if request.api == "gl" and request.profile not in ("core", "compat"):
            raise EglError(f"unknown OpenGL profile {request.profile!r} (expected core or compat)")
        if share is not None and self._contexts.get(share.handle) is not share:
            raise EglError("cannot share with a context of another display or a destroyed one")

    def _identified(
        self, handle: int, config: int, request: ContextRequest, wrong_profile: Context | None
    ) -> Context:
        """A context EGL just made, kept and asked what it is; if asking fails, it is
        destroyed with the one kept in reserve (`wrong_profile`)."""
        context = Context(handle=handle, config=config, request=request, api=request.api)
        self._contexts[handle] = context
        try:
            self._identify(context)
        except BaseException:
            self.destroy_context(context)
            if wrong_profile is not None:
                self.destroy_context(wrong_profile)
            raise
        return context

    def _has_create_context(self) -> bool:
        return self.egl_version >= (1, 5) or "EGL_KHR_create_context" in self.extensions

    def _context_attempts(self, request: ContextRequest) -> list[list[int]]:
        """Attribute lists to try in order for `request`."""
        major, minor = request.major, request.minor
        if not self._has_create_context():
            # EGL 1.4 without KHR_create_context: only the ES major version can be asked.
            return [[EGL_CONTEXT_MAJOR_VERSION, major]] if request.api == "gles" else [[]]
        desktop = request.api == "gl"
        version = [EGL_CONTEXT_MAJOR_VERSION, major, EGL_CONTEXT_MINOR_VERSION, minor]
        if desktop and (major, minor) >= (3, 2):
            bit = (
                EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT
                if request.profile == "core"
                else EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT
            )
            version += [EGL_CONTEXT_OPENGL_PROFILE_MASK, bit]
        elif desktop and (major, minor) == (1, 0):
            version = []  # no version: the driver's highest compatible one
        # Forward-compatible means "no deprecated features" and exists from GL 3.0 only.
        forward = desktop and request.forward_compatible and major >= 3
        attempts = [version + self._flags(request.debug, forward, request.robust)]
        if request.debug or request.robust:
            attempts.append(version + self._flags(False, forward, False))
        if desktop and request.profile == "compat" and version:
            attempts.append([])
        if not desktop and minor > 0:
            attempts.append([EGL_CONTEXT_MAJOR_VERSION, major])
        return attempts

    def _flags(self, debug: bool, forward: bool, robust: bool) -> list[int]:
        if self.egl_version >= (1, 5):
            return (
                [EGL_CONTEXT_OPENGL_DEBUG, 1] * debug
                + [EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE, 1] * forward
                + [EGL_CONTEXT_OPENGL_ROBUST_ACCESS, 1] * robust
            )
        bits = (
            EGL_CONTEXT_OPENGL_DEBUG_BIT_KHR * debug
            | EGL_CONTEXT_OPENGL_FORWARD_COMPATIBLE_BIT_KHR * forward
            | EGL_CONTEXT_OPENGL_ROBUST_ACCESS_BIT_KHR * robust
        )
        return [EGL_CONTEXT_FLAGS_KHR, bits] if bits else []

    def _offer(self, request: ContextRequest, config: int) -> str:
        """'driver llvmpipe offers up to 4.5' for a failed request, or '' if unknown.

        Found by creating the context drivers answer with their highest version
        (core 3.2, no-version compat, ES 3 or 2) and asking it.
        """
        if request.api == "gles":
            probes = [[EGL_CONTEXT_MAJOR_VERSION, 3], [EGL_CONTEXT_MAJOR_VERSION, 2]]
        elif request.profile == "core" and self._has_create_context():
            probes = [
                [
                    EGL_CONTEXT_MAJOR_VERSION,
                    3,
                    EGL_CONTEXT_MINOR_VERSION,
                    2,
                    EGL_CONTEXT_OPENGL_PROFILE_MASK,
                    EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                ]
            ]
        else:
            probes = [[]]
        egl = self._egl
        for attribs in probes:
            self._bind(request.api)
            handle = egl.eglCreateContext(self.handle, config, None, attrib_list(attribs)) or 0
            if not handle:
                egl.eglGetError()
                continue
            probe = Context(handle=handle, config=config, request=request, api=request.api)
            self._contexts[handle] = probe
            try:
                self._identify(probe)
            except EglError:
                pass
            finally:
                self.destroy_context(probe)
            if probe.version:
                renderer = _short_renderer(probe.renderer)
                return f"driver {renderer} offers up to {probe.major}.{probe.minor}"
        return ""

    def _identify(self, context: Context) -> None:
        """Fill in the context's real version, renderer and profile.

        The context is made current for the query on a 1x1 pbuffer, and the previous
        binding restored. Not without a surface: its first binding sets its default
        draw and read buffers for good, and a surfaceless one leaves them GL_NONE
        (see the module's docstring). Only a config that cannot back pbuffers, whose
        contexts are never bound to one, is asked surfacelessly.
        """
        scratch = self.create_surface(context.config, 1, 1)
        if scratch is None and "EGL_KHR_surfaceless_context" not in self.extensions:
            return
        previous = self._current
        try:
            self._make_current(context, scratch)
            api = context.proc_api
            get_string = self._gl_function(api, "glGetString", _GetString)
            if get_string is None:
                return
            context.version = (get_string(GL_VERSION) or b"").decode("utf-8", "replace")
            context.renderer = (get_string(GL_RENDERER) or b"").decode("utf-8", "replace")
            context.major, context.minor = _parse_version(context.version)
            if context.api == "gles":
                context.profile = "es"
            elif (context.major, context.minor) >= (3, 2):
                mask = INT()
                get_integer = self._gl_function(api, "glGetIntegerv", _GetIntegerv)
                if get_integer is not None:
                    get_integer(GL_CONTEXT_PROFILE_MASK, ctypes.byref(mask))
                core = mask.value & GL_CONTEXT_CORE_PROFILE_BIT
                context.profile = "core" if core else "compat"
            else:
                context.profile = "compat"
        finally:
            if previous is not None:
                self.make_current(*previous)
            else:
                self.make_current(None, None)
            if scratch is not None:
                self.destroy_surface(scratch)

    def _gl_function(self, api: str, name: str, prototype: type[CFunction]) -> CFunction | None:
        key = (api, name)
        if key not in self._gl_funcs:
            address = self.get_proc_address(name, api)
            self._gl_funcs[key] = prototype(address) if address else None
        return self._gl_funcs[key]

    def destroy_context(self, context: Context) -> None:
        """Destroy a context (released first if current). Unknown ones are ignored."""
        if self._terminated or self._contexts.pop(context.handle, None) is None:
            return
        if self._current is not None and self._current[0] is context:
            self.make_current(None, None)
        if not self._egl.eglDestroyContext(self.handle, context.handle):
            raise EglError(f"eglDestroyContext failed: {self._error()}")

    # --- surfaces -------------------------------------------------------------------------

    def create_surface(self, config: int, width: int, height: int) -> Surface | None:
        """A pbuffer of `width` x `height`, or None when `config` cannot back pbuffers.

        With None the caller makes its context current without a surface and
        renders into a framebuffer object of that size instead.
        """
        self._check_open()
        if not self._attrib(config, EGL_SURFACE_TYPE) & EGL_PBUFFER_BIT:
            return None
        width, height = max(1, width), max(1, height)
        attribs = attrib_list([EGL_WIDTH, width, EGL_HEIGHT, height])
        handle = self._egl.eglCreatePbufferSurface(self.handle, config, attribs) or 0
        if not handle:
            raise EglError(f"cannot create a {width}x{height} pbuffer: {self._error()}")
        surface = Surface(handle=handle, config=config, width=width, height=height)
        self._surfaces[handle] = surface
        return surface

    def destroy_surface(self, surface: Surface) -> None:
        """Destroy a surface (released first if current). Unknown ones are ignored."""
        if self._terminated or self._surfaces.pop(surface.handle, None) is None:
            return
        if self._current is not None and self._current[1] is surface:
            self.make_current(None, None)
        if not self._egl.eglDestroySurface(self.handle, surface.handle):
            raise EglError(f"eglDestroySurface failed: {self._error()}")

    # --- images ---------------------------------------------------------------------------

    def create_image(
        self, context: Context, target: int, buffer: int, attribs: Sequence[int]
    ) -> int:
        """An EGLImage of a GL texture or renderbuffer of `context` (EGL_KHR_gl_image), or 0
        when EGL cannot make one."""
        address = self._egl.eglGetProcAddress(b"eglCreateImageKHR")
        if not address or "EGL_KHR_image_base" not in self.extensions:
            return 0
        create = CreateImageKHR(address)
        image = create(self.handle, context.handle, target, buffer, attrib_list(attribs)) or 0
        if image:
            self._images.add(image)
        return image

    def destroy_image(self, image: int) -> None:
        """Destroy an image made by `create_image`; others are ignored."""
        if image not in self._images:
            return
        self._images.discard(image)
        address = self._egl.eglGetProcAddress(b"eglDestroyImageKHR")
        if address:
            DestroyImageKHR(address)(self.handle, image)

    @property
    def current(self) -> tuple[Context, Surface | None] | None:
        """The (context, surface) this display last made current, or None when released."""
        return self._current

    # --- per-call operations --------------------------------------------------------------

    def make_current(self, context: Context | None, surface: Surface | None) -> None:
        """Bind `context` and `surface` to this thread; (None, None) releases.

        A context with no surface is bound surfacelessly
        (EGL_KHR_surfaceless_context): rendering then needs an FBO. At a context's first
        binding to a surface, its viewport and scissor box are set to the surface's size,
        as the GL does at a context's first binding (4.6, 14.6.1 and 14.9.2): its real
        first one was to the 1x1 pbuffer that identified it.
        """
        self._make_current(context, surface)
        if context is None:
            return
        if surface is None:
            context.surfaceless = True
        elif not context.on_surface:
            context.on_surface = True
            for name in ("glViewport", "glScissor"):
                set_box = self._gl_function(context.proc_api, name, _SetBox)
                if set_box is not None:
                    set_box(0, 0, surface.width, surface.height)
            if context.surfaceless and context.api == "gl":
                self._back_buffers(context)

    def _back_buffers(self, context: Context) -> None:
        """A desktop context the caller bound without a surface before is now bound to one
        for the first time: give its default framebuffer the back buffer to draw and read
        where it has GL_NONE, as Mesa, where traces are mostly recorded, does at every
        binding, and NVIDIA's driver not after a surfaceless first one (GL 4.6, 17.4.1)."""
        api = context.proc_api
        get = self._gl_function(api, "glGetIntegerv", _GetIntegerv)
        bind = self._gl_function(api, "glBindFramebuffer", _BindFramebuffer)
        draw = self._gl_function(api, "glDrawBuffer", _SetBuffer)
        read = self._gl_function(api, "glReadBuffer", _SetBuffer)
        if get is None or bind is None or draw is None or read is None:
            return
        bound = {GL_DRAW_FRAMEBUFFER: INT(), GL_READ_FRAMEBUFFER: INT()}
        if context.major >= 3:  # (framebuffer objects: the default one must be bound)
            for target, name in bound.items():
                get(_BINDING[target], ctypes.byref(name))
                bind(target, 0)
        for query, set_buffer in ((GL_DRAW_BUFFER, draw), (GL_READ_BUFFER, read)):
            value = INT()
            get(query, ctypes.byref(value))
            if value.value == GL_NONE:
                set_buffer(GL_BACK)
        for target, name in bound.items():
            if name.value:
                bind(target, name.value)

    def _make_current(self, context: Context | None, surface: Surface | None) -> None:
        self._check_open()
        egl = self._egl
        if context is None:
            if surface is not None:
                raise EglError("cannot make a surface current without a context")
            if self._current is not None:
                # Releasing acts on the bound API's context, so bind the current one's API.
                self._bind(self._current[0].api)
            if not egl.eglMakeCurrent(self.handle, None, None, None):
                raise EglError(f"cannot release the current context: {self._error()}")
            self._current = None
            return
        if self._contexts.get(context.handle) is not context:
            raise EglError("cannot make current a context of another display or a destroyed one")
        if surface is not None and self._surfaces.get(surface.handle) is not surface:
            raise EglError("cannot make current a surface of another display or a destroyed one")
        self._bind(context.api)
        draw = surface.handle if surface is not None else None
        if not egl.eglMakeCurrent(self.handle, draw, draw, context.handle):
            error = self._error()
            hint = ""
            if surface is None and "EGL_KHR_surfaceless_context" not in self.extensions:
                hint = " (the display lacks EGL_KHR_surfaceless_context)"
            where = "on its surface" if surface is not None else "without a surface"
            raise EglError(
                f"cannot make the {context.request.describe()} context current "
                f"{where}: {error}{hint}"
            )
        self._current = (context, surface)

    def get_proc_address(self, name: str, api: str | None = None) -> int:
        """Address of GL entry point `name`, or 0.

        `api` ("gl", "gles1", "gles2"; default: the current context's, else
        "gl") picks the library searched first with dlsym: libOpenGL.so.0 (or
        libGL.so.1) for desktop GL, libGLESv2.so.2 or libGLESv1_CM.so.1 for ES.
        Those export the core entry points, which dispatch to the current
        context. Extensions come from eglGetProcAddress. Note that glvnd's
        eglGetProcAddress returns a dispatch stub for any gl* name, so a
        non-zero address does not prove the driver has the function: check
        the version or extension string before calling one.
        """
        if api is None:
            api = self._current[0].proc_api if self._current is not None else "gl"
        elif api in ("gles3", "gles"):
            api = "gles2"
        key = (api, name)
        address = self._procs.get(key)
        if address is None:
            address = 0
            for library in GL_LIBRARIES.get(api, ()):
                lib = gl_library(library)
                if lib is None:
                    continue
                try:  # (dlsym itself: `lib[name]` makes a function object to cast)
                    address = dlsym(lib._handle, name) or 0
                except OSError:  # not in this library
                    continue
                break
            if not address:
                address = self._egl.eglGetProcAddress(name.encode("ascii")) or 0
            self._procs[key] = address
        return address

    # --- helpers --------------------------------------------------------------------------

    def _query(self, name: int) -> str:
        raw = self._egl.eglQueryString(self.handle, name)
        return (raw or b"").decode("utf-8", "replace")

    def _bind(self, api: str) -> None:
        # The bound API is per thread, not per display, so it is set every time rather
        # than cached: another display on this thread may have changed it.
        if not self._egl.eglBindAPI(api_enum(api)):
            name = "OpenGL" if api == "gl" else "OpenGL ES"
            raise EglError(f"this EGL ({self.vendor}) cannot bind the {name} API: {self._error()}")

    def _error(self) -> str:
        code = self._egl.eglGetError()
        return EGL_ERRORS.get(code, f"EGL error {code:#x}")

    def _check_open(self) -> None:
        if self._terminated:
            raise EglError("the EGL display was terminated")


def _describe_device(query_string: int, device: int | None, index: int) -> tuple[bool, str]:
    """(is software, label) for an EGL device: 'software', its DRM node, or 'device N'."""
    if not query_string:
        return False, f"device {index}"
    query = QueryDeviceStringEXT(query_string)
    extensions = (query(device, EGL_EXTENSIONS) or b"").decode("ascii", "replace").split()
    if "EGL_MESA_device_software" in extensions:
        return True, "software"
    if "EGL_EXT_device_drm" in extensions:
        node = query(device, EGL_DRM_DEVICE_FILE_EXT)
        if node:
            return False, node.decode("utf-8", "replace")
    return False, f"device {index}"


def _describe_format(fmt: PixelFormat) -> str:
    text = (
        f"RGBA {fmt.red}/{fmt.green}/{fmt.blue}/{fmt.alpha}, depth {fmt.depth}, "
        f"stencil {fmt.stencil}"
    )
    return text + (f", {fmt.samples}x MSAA" if fmt.samples else "")
