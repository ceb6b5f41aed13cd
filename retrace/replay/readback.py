"""Readbacks (glReadPixels, glGetTexImage and their variants) into memory retrace sizes.

A readback writes into a bound pixel-pack buffer (its pointer is then an offset: it
runs as traced) or into the program's memory, which the trace does not have: there the
replay passes scratch memory of the size the specification gives (`sizes`), computed
when the call runs from what the driver says -- the current context's pack pixel-store
state (so push/pop of client attributes and per-context state need no tracking of our
own), the texture level's size, the compressed image's size. The scratch ends where a
guard of inaccessible address space begins (`_guard.c`), so a size that was still wrong
faults at once and is blamed on retrace, never overwrites memory. Where a variant takes
the destination's size (bufSize), it gets the program's, never more than the scratch's;
the scratch has the whole size all the same, as a driver may not check bufSize (Mesa
22.3's glGetnTexImage does nothing at all, its ARB twin checks).

Readbacks into the program's memory change no GL state, and glretrace runs only those
into a pack buffer; retrace runs both, so a profile times what the program did.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, NamedTuple

from retrace.errors import RetraceError
from retrace.replay import _guard
from retrace.replay.dispatch import Dispatch
from retrace.replay.sizes import (
    GL_PACK_COMPRESSED_BLOCK,
    MOST_READBACK_BYTES,
    PACK_PNAMES,
    PackState,
    compressed_bytes,
    image_bytes,
)
from retrace.replay.state import ReplayState
from retrace.replay.view import ContextInfo

GL_PIXEL_PACK_BUFFER_BINDING = 0x88ED
GL_TEXTURE_WIDTH, GL_TEXTURE_HEIGHT, GL_TEXTURE_DEPTH = 0x1000, 0x1001, 0x8071
GL_TEXTURE_COMPRESSED_IMAGE_SIZE = 0x86A0
GL_TEXTURE_COMPRESSED = 0x86A1
_LEVEL_PNAMES = (GL_TEXTURE_WIDTH, GL_TEXTURE_HEIGHT, GL_TEXTURE_DEPTH)
GL_TEXTURE_CUBE_MAP, GL_TEXTURE_CUBE_MAP_POSITIVE_X = 0x8513, 0x8515
_CUBE_FACES = 6
# 3D images, which the image height and image skips apply to: 3D, 2D array, cube map array
_VOLUMES = frozenset({0x806F, 0x8C1A, 0x9009})
# the targets glGetTexImage reads: 1D, 2D, 1D array, rectangle, cube faces, and the volumes
_TARGETS = _VOLUMES | {0x0DE0, 0x0DE1, 0x8C18, 0x84F5, *range(0x8515, 0x851B)}


class _Layout(NamedTuple):
    """Where a readback's arguments are: what sizes it, and where it writes."""

    size: str  # the function of `Readbacks` that sizes it
    pointer: int  # the index of the destination
    buf_size: int | None  # the index of its bufSize, in the n variants


_READ = _Layout("_pixels", 6, None)
_READ_N = _Layout("_pixels", 7, 6)
LAYOUTS: dict[str, _Layout] = {
    "glReadPixels": _READ,
    **dict.fromkeys(("glReadnPixels", "glReadnPixelsARB", "glReadnPixelsEXT"), _READ_N),
    "glReadnPixelsKHR": _READ_N,
    "glGetTexImage": _Layout("_tex_image", 4, None),
    **dict.fromkeys(("glGetnTexImage", "glGetnTexImageARB"), _Layout("_tex_image", 5, 4)),
    "glGetTextureImage": _Layout("_texture_image", 5, 4),
    "glGetTextureSubImage": _Layout("_texture_sub_image", 11, 10),
    **dict.fromkeys(
        ("glGetCompressedTexImage", "glGetCompressedTexImageARB"),
        _Layout("_compressed_tex_image", 2, None),
    ),
    **dict.fromkeys(
        ("glGetnCompressedTexImage", "glGetnCompressedTexImageARB"),
        _Layout("_compressed_tex_image", 3, 2),
    ),
    "glGetCompressedTextureImage": _Layout("_compressed_texture_image", 3, 2),
    "glGetCompressedTextureSubImage": _Layout("_compressed_texture_sub_image", 9, 8),
}


class _Level(NamedTuple):
    """A texture level as the driver describes it."""

    w: int
    h: int
    d: int  # layers and cube faces included
    volume: bool  # a 3D image: the image height and image skips apply
    faces: int  # 6 for a whole cube map, else 1
    ask: Callable[[int], int]  # the level's (first face's) GL_TEXTURE_* parameter


class _Limits(NamedTuple):
    """Which pack state a context has, by its API and version (a query of a name it lacks
    would be a GL error the program never had)."""

    pnames: PackState  # 0 where the context has no such state
    compressed_blocks: bool
    pack_buffers: bool


_NO_LEVEL = _Level(0, 0, 0, False, 1, lambda pname: 0)


class Readback:
    """The replay op of one readback call: its destination chosen when it runs."""

    __slots__ = ("name", "fn", "size", "pointer", "buf_size", "readbacks")

    def __init__(self, name: str, fn: Any, layout: _Layout, readbacks: Readbacks) -> None:
        self.name = name
        self.fn = fn
        self.size: Callable[[tuple[Any, ...]], int] = getattr(readbacks, layout.size)
        self.pointer, self.buf_size = layout.pointer, layout.buf_size
        self.readbacks = readbacks

    def __call__(self, *args: Any) -> None:
        if self.readbacks.into_pack_buffer():  # the pointer is an offset in it: as traced
            self.fn(*args)
            return
        values = list(args)
        size = self.size(args)
        if size > MOST_READBACK_BYTES:  # no memory to give it: the replay cannot go on
            raise RetraceError(
                f"{self.name} would write {size} bytes into the program's memory, more than "
                f"retrace gives a readback ({MOST_READBACK_BYTES >> 20} MiB): a damaged trace"
            )
        values[self.pointer] = _guard.scratch(size)
        if self.buf_size is not None:  # what the program allowed, and never more than that
            values[self.buf_size] = max(min(size, values[self.buf_size]), 0)
        self.fn(*values)


class Readbacks:
    """Sizes readbacks from the current context's state, asked of the driver."""

    def __init__(self, dispatch: Dispatch, state: ReplayState) -> None:
        self.dispatch = dispatch
        self.state = state
        self._limits: dict[int, _Limits] = {}
        i, u, ip = ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ctypes.c_int)
        self._get_integer = dispatch.raw("glGetIntegerv", None, u, ip)
        self._level = self._optional("glGetTexLevelParameteriv", u, i, u, ip)
        self._texture_level = self._optional("glGetTextureLevelParameteriv", u, i, u, ip)

    def _optional(self, name: str, *argtypes: Any) -> Any:
        try:
            return self.dispatch.raw(name, None, *argtypes)
        except LookupError:
            return None

    def wrap(self, name: str, fn: Any) -> Readback:
        return Readback(name, fn, LAYOUTS[name], self)

    # --- the driver's state -------------------------------------------------------------

    def _integer(self, fn: Any, *args: int) -> int:
        value = ctypes.c_int(0)
        fn(*args, ctypes.byref(value))
        return value.value

    def limits(self) -> _Limits:
        """The current context's pack state, as far as it has any."""
        current = self.state.current
        real = current.real if current is not None else None
        key = real.handle if real is not None else 0
        limits = self._limits.get(key)
        if limits is None:
            limits = self._limits[key] = self._context_limits()
        return limits

    def _context_limits(self) -> _Limits:
        current = self.state.current
        if current is None or current.real is None:
            return _Limits(PackState(0, 0, 0, 0, 0, 0), False, False)
        info = ContextInfo(current, self.dispatch)
        if info.api == "gl":
            blocks = info.version_at_least(4, 2) or (
                "GL_ARB_compressed_texture_pixel_storage" in info.extensions
            )
            return _Limits(PACK_PNAMES, blocks, True)
        rows = info.major >= 3 or "GL_NV_pack_subimage" in info.extensions
        pbo = info.major >= 3 or "GL_NV_pixel_buffer_object" in info.extensions
        pnames = PACK_PNAMES if rows else PackState(0, 0, 0, PACK_PNAMES.alignment, 0, 0)
        return _Limits(pnames._replace(image_height=0, skip_images=0), False, pbo)

    def into_pack_buffer(self) -> bool:
        return self.limits().pack_buffers and bool(
            self._integer(self._get_integer, GL_PIXEL_PACK_BUFFER_BINDING)
        )

    def pack(self) -> PackState:
        """The pack pixel-store state now (the defaults where the context has none)."""
        defaults = PackState()
        return PackState(
            *(
                self._integer(self._get_integer, pname) if pname else default
                for pname, default in zip(self.limits().pnames, defaults, strict=True)
            )
        )

    def _blocks(self) -> tuple[int, int, int, int]:
        if not self.limits().compressed_blocks:
            return (0, 0, 0, 0)
        w, h, d, size = (self._integer(self._get_integer, p) for p in GL_PACK_COMPRESSED_BLOCK)
        return w, h, d, size

    def _level_size(self, target: int, level: int) -> _Level:
        """The size of a level of the texture bound to `target`; 0 for a target glGetTexImage
        does not take (the driver refuses the call)."""
        faces = 1
        if target == GL_TEXTURE_CUBE_MAP:
            target, faces = GL_TEXTURE_CUBE_MAP_POSITIVE_X, _CUBE_FACES
        if target not in _TARGETS or self._level is None:
            return _NO_LEVEL
        get = self._level

        def ask(pname: int) -> int:
            return self._integer(get, target, level, pname)

        w, h, d = map(ask, _LEVEL_PNAMES)
        return _Level(w, h, d * faces, target in _VOLUMES or faces > 1, faces, ask)

    def _texture_size(self, texture: int, level: int) -> _Level:
        """The same of a texture by name (DSA), where a cube map's six faces make a 3D
        image. Its target cannot be asked everywhere (Mesa answers GL_TEXTURE_TARGET in core
        contexts only), so a square level of one image counts as a cube map's face: six of
        them, more, never less."""
        if self._texture_level is None:
            return _NO_LEVEL
        get = self._texture_level

        def ask(pname: int) -> int:
            return self._integer(get, texture, level, pname)

        w, h, d = map(ask, _LEVEL_PNAMES)
        faces = _CUBE_FACES if d == 1 and w == h else 1
        return _Level(w, h, d * faces, d * faces > 1, faces, ask)

    # --- the sizes, by layout (`LAYOUTS`) -----------------------------------------------

    def _pixels(self, a: tuple[Any, ...]) -> int:
        return image_bytes(a[4], a[5], a[2], a[3], 1, self.pack())

    def _image(self, level: _Level, format: int, type: int) -> int:
        return image_bytes(format, type, level.w, level.h, level.d, self.pack(), level.volume)

    def _tex_image(self, a: tuple[Any, ...]) -> int:
        return self._image(self._level_size(a[0], a[1]), a[2], a[3])

    def _texture_image(self, a: tuple[Any, ...]) -> int:
        return self._image(self._texture_size(a[0], a[1]), a[2], a[3])

    def _texture_sub_image(self, a: tuple[Any, ...]) -> int:
        # the texture's kind is not asked: image skips counted always (more, never less)
        return image_bytes(a[8], a[9], a[5], a[6], a[7], self.pack(), True)

    def _compressed(self, level: _Level, w: int, h: int, d: int) -> int:
        """A compressed image: the driver's size of the level (of each face: every face
        counted, more, never less), or its blocks laid out by the pack state; nothing for
        a level that is not compressed (the driver refuses the call)."""
        if not level.w or not level.ask(GL_TEXTURE_COMPRESSED):
            return 0
        whole = level.ask(GL_TEXTURE_COMPRESSED_IMAGE_SIZE) * level.faces
        return compressed_bytes(whole, w, h, d, self._blocks(), self.pack(), level.volume)

    def _compressed_tex_image(self, a: tuple[Any, ...]) -> int:
        level = self._level_size(a[0], a[1])
        return self._compressed(level, level.w, level.h, level.d)

    def _compressed_texture_image(self, a: tuple[Any, ...]) -> int:
        level = self._texture_size(a[0], a[1])
        return self._compressed(level, level.w, level.h, level.d)

    def _compressed_texture_sub_image(self, a: tuple[Any, ...]) -> int:
        # a part of a level is never bigger than the whole level
        return self._compressed(self._texture_size(a[0], a[1]), a[5], a[6], a[7])
