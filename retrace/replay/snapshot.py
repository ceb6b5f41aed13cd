"""Frame snapshots: the pixels of the current drawable, as glretrace captures them.

glretrace hashes (``--snapshot-format=MD5``) or writes the raw pixels of the
drawable, rows top to bottom: RGB for a desktop-GL window, RGBA for GLES
contexts. A snapshot must not disturb the replay, so every piece of pack and
read state it changes is restored afterwards.
"""

from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass
from pathlib import Path

from retrace.replay.dispatch import Dispatch

GL_READ_FRAMEBUFFER_BINDING = 0x8CAA
GL_READ_FRAMEBUFFER = 0x8CA8
GL_READ_BUFFER = 0x0C02
GL_BACK = 0x0405
GL_PIXEL_PACK_BUFFER = 0x88EB
GL_PIXEL_PACK_BUFFER_BINDING = 0x88ED
GL_PACK_STATE = (0x0D05, 0x0D02, 0x0D03, 0x0D04)  # alignment, row length, skip rows, skip pixels
GL_RGB, GL_RGBA, GL_UNSIGNED_BYTE = 0x1907, 0x1908, 0x1401


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

    def get_integer(self, pname: int) -> int:
        value = ctypes.c_int(0)
        self.GetIntegerv(pname, ctypes.byref(value))
        return value.value


@dataclass
class Image:
    width: int
    height: int
    channels: int
    pixels: bytes  # rows top to bottom

    def md5(self) -> str:
        return hashlib.md5(self.pixels).hexdigest().upper()

    def save_png(self, path: Path) -> None:
        from PIL import Image as PILImage

        mode = "RGBA" if self.channels == 4 else "RGB"
        PILImage.frombytes(mode, (self.width, self.height), self.pixels).save(path)


def read_drawable(gl: OwnGL, width: int, height: int, gles: bool) -> Image:
    """Read the current drawable's back buffer without changing any state the trace set."""
    saved_fbo = gl.get_integer(GL_READ_FRAMEBUFFER_BINDING)
    saved_pbo = gl.get_integer(GL_PIXEL_PACK_BUFFER_BINDING)
    saved_read = gl.get_integer(GL_READ_BUFFER)
    saved_pack = [gl.get_integer(p) for p in GL_PACK_STATE]
    gl.BindFramebuffer(GL_READ_FRAMEBUFFER, 0)
    gl.BindBuffer(GL_PIXEL_PACK_BUFFER, 0)
    gl.ReadBuffer(GL_BACK)
    for pname in GL_PACK_STATE:
        gl.PixelStorei(pname, 1 if pname == 0x0D05 else 0)
    channels = 4 if gles else 3
    row = width * channels
    buffer = ctypes.create_string_buffer(row * height)
    gl.ReadPixels(0, 0, width, height, GL_RGBA if gles else GL_RGB, GL_UNSIGNED_BYTE, buffer)
    for pname, value in zip(GL_PACK_STATE, saved_pack, strict=True):
        gl.PixelStorei(pname, value)
    gl.ReadBuffer(saved_read)
    gl.BindBuffer(GL_PIXEL_PACK_BUFFER, saved_pbo)
    gl.BindFramebuffer(GL_READ_FRAMEBUFFER, saved_fbo)
    raw = buffer.raw
    flipped = b"".join(raw[y * row : (y + 1) * row] for y in range(height - 1, -1, -1))
    return Image(width, height, channels, flipped)
