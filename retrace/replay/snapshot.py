"""Frame snapshots: the pixels of the current drawable, as glretrace captures them.

glretrace hashes (``--snapshot-format=MD5``) or writes the raw pixels of the
drawable, rows top to bottom: RGB for a desktop-GL window, RGBA for GLES
contexts. A snapshot must not disturb the replay, so every piece of pack and
read state it changes is restored afterwards.
"""

from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

from retrace.replay.dispatch import Dispatch
from retrace.replay.ws.headless import (  # (the display needs them too)
    GL_BACK,
    GL_DRAW_FRAMEBUFFER,
    GL_DRAW_FRAMEBUFFER_BINDING,
    GL_READ_BUFFER,
    GL_READ_FRAMEBUFFER,
    GL_READ_FRAMEBUFFER_BINDING,
)

GL_PIXEL_PACK_BUFFER = 0x88EB
GL_PIXEL_PACK_BUFFER_BINDING = 0x88ED
GL_PACK_STATE = (0x0D05, 0x0D02, 0x0D03, 0x0D04)  # alignment, row length, skip rows, skip pixels
GL_RGB, GL_RGBA, GL_UNSIGNED_BYTE = 0x1907, 0x1908, 0x1401
GL_DRAW_BUFFER0 = 0x8825
GL_VIEWPORT = 0x0BA2
GL_ATTACHMENT_TYPE, GL_ATTACHMENT_NAME, GL_ATTACHMENT_LEVEL = 0x8CD0, 0x8CD1, 0x8CD2
GL_TEXTURE, GL_RENDERBUFFER = 0x1702, 0x8D41
GL_TEXTURE_WIDTH, GL_TEXTURE_HEIGHT = 0x1000, 0x1001
GL_RENDERBUFFER_WIDTH, GL_RENDERBUFFER_HEIGHT = 0x8D42, 0x8D43


class OwnGL:
    """The few GL functions the replayer calls on its own behalf."""

    def __init__(self, dispatch: Dispatch) -> None:
        u, i, p = ctypes.c_uint, ctypes.c_int, ctypes.c_void_p
        self.GetIntegerv = dispatch.raw("glGetIntegerv", None, u, ctypes.POINTER(ctypes.c_int))
        self.Scissor = dispatch.raw("glScissor", None, i, i, i, i)
        self.ReadPixels = dispatch.raw("glReadPixels", None, i, i, i, i, u, u, p)
        self.PixelStorei = dispatch.raw("glPixelStorei", None, u, i)
        self.BindFramebuffer = dispatch.raw("glBindFramebuffer", None, u, u)
        self.BindBuffer = dispatch.raw("glBindBuffer", None, u, u)
        self.ReadBuffer = dispatch.raw("glReadBuffer", None, u)
        self.Finish = dispatch.raw("glFinish", None)
        self.get_error_address = dispatch.raw_address("glGetError")  # (`_vm.gl_errors`)
        self.Flush = dispatch.raw("glFlush", None)
        # a frame end's fence, wait and flush, called in C (`_vm.frame_fence`)
        self.frame_functions = tuple(
            dispatch.raw_address(name)
            for name in ("glFenceSync", "glClientWaitSync", "glDeleteSync", "glFlush")
        )
        ip = ctypes.POINTER(ctypes.c_int)
        self.GetFramebufferAttachmentParameteriv = dispatch.raw(
            "glGetFramebufferAttachmentParameteriv", None, u, u, u, ip
        )
        self.GetTextureLevelParameteriv = dispatch.raw(
            "glGetTextureLevelParameteriv", None, u, i, u, ip
        )
        self.GetNamedRenderbufferParameteriv = dispatch.raw(
            "glGetNamedRenderbufferParameteriv", None, u, u, ip
        )

    def get_integer(self, pname: int) -> int:
        value = ctypes.c_int(0)
        self.GetIntegerv(pname, ctypes.byref(value))
        return value.value

    def _query(self, fn, *args: int) -> int:
        value = ctypes.c_int(0)
        fn(*args, ctypes.byref(value))
        return value.value

    def attachment_size(self, attachment: int, gles: bool) -> tuple[int, int]:
        """Size of the draw framebuffer's attachment; the viewport's where DSA is missing (GLES)."""
        kind = self._query(
            self.GetFramebufferAttachmentParameteriv,
            GL_DRAW_FRAMEBUFFER,
            attachment,
            GL_ATTACHMENT_TYPE,
        )
        name = self._query(
            self.GetFramebufferAttachmentParameteriv,
            GL_DRAW_FRAMEBUFFER,
            attachment,
            GL_ATTACHMENT_NAME,
        )
        if not gles and kind == GL_TEXTURE:
            level = self._query(
                self.GetFramebufferAttachmentParameteriv,
                GL_DRAW_FRAMEBUFFER,
                attachment,
                GL_ATTACHMENT_LEVEL,
            )
            fn = self.GetTextureLevelParameteriv
            return (
                self._query(fn, name, level, GL_TEXTURE_WIDTH),
                self._query(fn, name, level, GL_TEXTURE_HEIGHT),
            )
        if not gles and kind == GL_RENDERBUFFER:
            fn = self.GetNamedRenderbufferParameteriv
            return (
                self._query(fn, name, GL_RENDERBUFFER_WIDTH),
                self._query(fn, name, GL_RENDERBUFFER_HEIGHT),
            )
        viewport = (ctypes.c_int * 4)()
        self.GetIntegerv(GL_VIEWPORT, viewport)
        return viewport[0] + viewport[2], viewport[1] + viewport[3]


class Image(NamedTuple):
    width: int
    height: int
    channels: int
    pixels: bytes  # rows top to bottom

    def md5(self) -> str:
        import hashlib  # only here: it loads OpenSSL (3 MB) that no other path needs

        return hashlib.md5(self.pixels).hexdigest().upper()

    def rgb(self) -> bytes:
        """The pixels without their alpha channel, if they have one."""
        if self.channels == 3:
            return self.pixels
        out = bytearray(self.width * self.height * 3)
        for c in range(3):
            out[c::3] = self.pixels[c :: self.channels]
        return bytes(out)

    def on_stdout(self, fmt: str, call_no: int) -> bytes:
        """What glretrace writes to standard output for `-s -`: with `fmt` PNM, a binary
        PPM (alpha dropped) whose comment is the call number, so that a stream of frames
        pipes into ffmpeg or ImageMagick; RGB, the raw pixels as read; MD5, their hash."""
        if fmt == "MD5":
            return f"{self.md5()}\n".encode()
        if fmt == "RGB":
            return self.pixels
        return b"P6\n#%d\n%d %d\n255\n" % (call_no, self.width, self.height) + self.rgb()

    def save_png(self, path: os.PathLike[str] | str) -> None:
        """Write a PNG, creating missing folders of `path` first, as glretrace does."""
        from PIL import Image as PILImage

        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        mode = "RGBA" if self.channels == 4 else "RGB"
        PILImage.frombytes(mode, (self.width, self.height), self.pixels).save(path)


def read_current(gl: OwnGL, window_size: tuple[int, int], gles: bool) -> Image:
    """What glretrace snapshots: the bound draw framebuffer's first draw buffer (RGBA), or
    the window's back buffer (RGB on desktop GL, RGBA on GLES)."""
    fbo = gl.get_integer(GL_DRAW_FRAMEBUFFER_BINDING)
    if fbo == 0:
        return _read(gl, 0, GL_BACK, *window_size, channels=4 if gles else 3)
    attachment = gl.get_integer(GL_DRAW_BUFFER0)
    width, height = gl.attachment_size(attachment, gles)
    return _read(gl, fbo, attachment, width, height, channels=4)


def _read(gl: OwnGL, fbo: int, buffer: int, width: int, height: int, channels: int) -> Image:
    """Read pixels without changing any state the trace set."""
    saved_fbo = gl.get_integer(GL_READ_FRAMEBUFFER_BINDING)
    saved_pbo = gl.get_integer(GL_PIXEL_PACK_BUFFER_BINDING)
    saved_read = gl.get_integer(GL_READ_BUFFER)
    saved_pack = [gl.get_integer(p) for p in GL_PACK_STATE]
    gl.BindFramebuffer(GL_READ_FRAMEBUFFER, fbo)
    gl.BindBuffer(GL_PIXEL_PACK_BUFFER, 0)
    gl.ReadBuffer(buffer)
    for pname in GL_PACK_STATE:
        gl.PixelStorei(pname, 1 if pname == 0x0D05 else 0)
    row = width * channels
    pixels = ctypes.create_string_buffer(row * height)
    gl.ReadPixels(
        0, 0, width, height, GL_RGBA if channels == 4 else GL_RGB, GL_UNSIGNED_BYTE, pixels
    )
    for pname, value in zip(GL_PACK_STATE, saved_pack, strict=True):
        gl.PixelStorei(pname, value)
    gl.ReadBuffer(saved_read)
    gl.BindBuffer(GL_PIXEL_PACK_BUFFER, saved_pbo)
    gl.BindFramebuffer(GL_READ_FRAMEBUFFER, saved_fbo)
    raw = pixels.raw
    flipped = b"".join(raw[y * row : (y + 1) * row] for y in range(height - 1, -1, -1))
    return Image(width, height, channels, flipped)
