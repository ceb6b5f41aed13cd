"""How many bytes the driver writes through an output pointer, by the GL specification.

A trace records what the program read back, not how much room the driver needs: a
damaged or hand-made trace records fewer values than the driver writes, and a valid one
says nothing of the pixel-store state that spreads a readback's rows apart
(``glPixelStorei(GL_PACK_ROW_LENGTH, 4096)`` before a 64 x 64 glReadPixels writes 64 rows
4096 pixels apart). So the replay sizes every destination from the specification alone:

* images (glReadPixels, glGetTexImage and their variants): `image_bytes`, the rule of
  the OpenGL 4.6 core specification, sections 8.4.4.1 and 18.2 (pixel storage modes:
  row length, skips, alignment, image height), and `compressed_bytes` for compressed
  images read with the GL_PACK_COMPRESSED_BLOCK_* state (section 8.4.5);
* every other output: the registry's ``len`` attribute (`output_count`), a number or
  another parameter of the call.

GL_PACK_SWAP_BYTES and GL_PACK_LSB_FIRST reorder bytes or bits within what is written;
they never change how many bytes.
"""

from __future__ import annotations

import ctypes
from typing import Any, NamedTuple

from retrace.gl.registry import Command, Param, ctypes_type
from retrace.replay import _vm

# the pack pixel-store state that moves or spreads what a readback writes
GL_PACK_ROW_LENGTH, GL_PACK_SKIP_ROWS, GL_PACK_SKIP_PIXELS = 0x0D02, 0x0D03, 0x0D04
GL_PACK_ALIGNMENT, GL_PACK_SKIP_IMAGES, GL_PACK_IMAGE_HEIGHT = 0x0D05, 0x806B, 0x806C
GL_PACK_COMPRESSED_BLOCK = (0x912B, 0x912C, 0x912D, 0x912E)  # width, height, depth, size

GL_BITMAP = 0x1A00
# components per pixel of each format
_COMPONENTS = {
    **dict.fromkeys((0x1900, 0x1901, 0x1902, 0x1903, 0x1904, 0x1905, 0x1906, 0x1909), 1),
    **dict.fromkeys((0x8D94, 0x8D95, 0x8D96, 0x8D97, 0x8D9C), 1),  # *_INTEGER
    **dict.fromkeys((0x190A, 0x8227, 0x8228, 0x84F9, 0x8D9D, 0x8757), 2),  # LA, RG, DEPTH_STENCIL
    **dict.fromkeys((0x1907, 0x80E0, 0x8D98, 0x8D9A), 3),  # RGB, BGR
    **dict.fromkeys((0x1908, 0x80E1, 0x8000, 0x8D99, 0x8D9B), 4),  # RGBA, BGRA, ABGR
}
# bytes per component of each type
_COMPONENT_BYTES = {
    **dict.fromkeys((0x1400, 0x1401), 1),  # BYTE, UNSIGNED_BYTE
    **dict.fromkeys((0x1402, 0x1403, 0x140B, 0x8D61), 2),  # SHORT, UNSIGNED_SHORT, HALF_FLOAT
    **dict.fromkeys((0x1404, 0x1405, 0x1406), 4),  # INT, UNSIGNED_INT, FLOAT
}
# bytes per pixel of the packed types, whatever the format
_PACKED_BYTES = {
    **dict.fromkeys((0x8032, 0x8362), 1),  # 3_3_2
    **dict.fromkeys((0x8363, 0x8364, 0x8033, 0x8365, 0x8034, 0x8366, 0x85BA, 0x85BB), 2),
    **dict.fromkeys((0x8035, 0x8367, 0x8036, 0x8368, 0x84FA, 0x8C3B, 0x8C3E), 4),
    0x8DAD: 8,  # FLOAT_32_UNSIGNED_INT_24_8_REV
}
# what a format or type the tables do not know may take: the most any does
_MOST_COMPONENTS, _MOST_COMPONENT_BYTES = 4, 8
# bigger readbacks and outputs of more values are refused: no real program asks for them
# (the compiler in C hands name arrays of more names to Python, `_vm.c`)
MOST_READBACK_BYTES = 1 << 30
MOST_OUTPUT_VALUES: int = _vm.MOST_OUTPUT_VALUES


class PackState(NamedTuple):
    """The pack pixel-store state a readback runs under (the GL defaults)."""

    row_length: int = 0
    skip_rows: int = 0
    skip_pixels: int = 0
    alignment: int = 4
    image_height: int = 0
    skip_images: int = 0


PACK_PNAMES = PackState(
    GL_PACK_ROW_LENGTH,
    GL_PACK_SKIP_ROWS,
    GL_PACK_SKIP_PIXELS,
    GL_PACK_ALIGNMENT,
    GL_PACK_IMAGE_HEIGHT,
    GL_PACK_SKIP_IMAGES,
)


def pixel_layout(format: int, type: int) -> tuple[int, int]:
    """(bytes per pixel, bytes per element) of a format and type: an element is a component,
    or a whole pixel of a packed type. Unknown ones count as the largest there are."""
    packed = _PACKED_BYTES.get(type)
    if packed is not None:
        return packed, packed
    element = _COMPONENT_BYTES.get(type, _MOST_COMPONENT_BYTES)
    return _COMPONENTS.get(format, _MOST_COMPONENTS) * element, element


def image_bytes(
    format: int,
    type: int,
    width: int,
    height: int,
    depth: int,
    pack: PackState,
    volume: bool = False,
) -> int:
    """Bytes from the destination pointer to the end of the last pixel written when a
    width x height (x depth) image is packed; `volume`: a 3D image, which the image height
    and image skips apply to."""
    if width <= 0 or height <= 0 or depth <= 0:
        return 0
    if type == GL_BITMAP:  # one bit per pixel, rows padded to the alignment
        row = pack.alignment * -(-(pack.row_length or width) // (8 * pack.alignment))
        last = -(-(pack.skip_pixels + width) // 8)
        return (pack.skip_rows + height - 1) * row + last
    pixel, element = pixel_layout(format, type)
    return _layout_bytes(width, height, depth, pixel, element, pack, volume)


def _layout_bytes(
    width: int, height: int, depth: int, pixel: int, element: int, pack: PackState, volume: bool
) -> int:
    """The specification's rule: rows of row-length pixels, padded to the alignment when an
    element is smaller than it; images of image-height rows; the skips before the first."""
    row = (pack.row_length or width) * pixel
    if element < pack.alignment:
        row = -(-row // pack.alignment) * pack.alignment
    image = row * ((pack.image_height or height) if volume else height)
    start = pack.skip_pixels * pixel + pack.skip_rows * row
    if volume:
        start += pack.skip_images * image
    return start + (depth - 1) * image + (height - 1) * row + width * pixel


def compressed_bytes(
    driver_size: int,
    width: int,
    height: int,
    depth: int,
    block: tuple[int, int, int, int],
    pack: PackState,
    volume: bool,
) -> int:
    """What glGetCompressedTexImage writes: the level's compressed size as the driver gives
    it (GL_TEXTURE_COMPRESSED_IMAGE_SIZE) or, where the GL_PACK_COMPRESSED_BLOCK_* state
    (width, height, depth, size) is set, its blocks laid out by the pixel-store state, in
    whole blocks and without alignment; the larger of the two."""
    block_width, block_height, block_depth, block_size = block
    if not (block_width and block_size) or width <= 0 or height <= 0 or depth <= 0:
        return max(driver_size, 0)
    bh, bd = block_height or 1, block_depth or 1
    in_blocks = PackState(
        row_length=-(-pack.row_length // block_width),
        skip_rows=pack.skip_rows // bh,
        skip_pixels=pack.skip_pixels // block_width,
        alignment=1,
        image_height=-(-pack.image_height // bh),
        skip_images=pack.skip_images // bd,
    )
    blocks = (-(-width // block_width), -(-height // bh), -(-depth // bd))
    laid_out = _layout_bytes(*blocks, block_size, block_size, in_blocks, volume)
    return max(driver_size, laid_out)


def output_count(command: Command, param: Param, args: list[Any]) -> int | None:
    """How many values the driver writes through an output parameter, from the registry's
    ``len``: a number ("4"), another parameter ("n", "bufSize", "count") or a multiple of
    one ("count*2"); None where the registry leaves it to the values of other parameters
    (``COMPSIZE(pname)``) or says nothing."""
    length = param.length
    if length is None:
        return None
    name, _, factor = length.partition("*")
    if name.isdigit():
        count = int(name)
    else:
        index = next((i for i, p in enumerate(command.params) if p.name == name), None)
        if index is None or command.params[index].pointer_depth:
            return None
        value = args[index]
        count = value if isinstance(value, int) else 0
    if factor:
        if not factor.isdigit():
            return None
        count *= int(factor)
    return max(count, 0)


def element_bytes(param: Param) -> int:
    """Bytes per value of an output parameter: its type's, a pointer's, one for void (bytes)."""
    if param.pointer_depth > 1:
        return ctypes.sizeof(ctypes.c_void_p)
    if param.base in ("void", "GLvoid"):
        return 1
    try:
        ctype = ctypes_type(param.base)
    except ValueError:  # a struct: the registry's lengths count bytes there
        return 1
    return ctypes.sizeof(ctype) if ctype is not None else 1
