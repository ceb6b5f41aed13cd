"""The sizes of what the driver writes, by the specification (`retrace.replay.sizes`),
against values worked out by hand from the OpenGL 4.6 core specification's pixel-storage
rule (section 8.4.4.1: rows of row-length pixels, padded to the alignment when an element
is smaller than it; images of image-height rows; the skips before the first)."""

from __future__ import annotations

from retrace.gl.registry import load_registry
from retrace.replay.sizes import PackState, compressed_bytes, image_bytes, output_count

GL_RGB, GL_RGBA, GL_RED, GL_BGRA = 0x1907, 0x1908, 0x1903, 0x80E1
GL_UNSIGNED_BYTE, GL_FLOAT, GL_HALF_FLOAT = 0x1401, 0x1406, 0x140B
GL_UNSIGNED_INT_8_8_8_8_REV, GL_UNSIGNED_SHORT_5_6_5 = 0x8367, 0x8363
GL_BITMAP, GL_STENCIL_INDEX = 0x1A00, 0x1901
DEFAULT = PackState()


def test_tightly_packed_images_are_width_times_height_pixels():
    assert image_bytes(GL_RGBA, GL_UNSIGNED_BYTE, 64, 64, 1, DEFAULT) == 64 * 64 * 4
    assert image_bytes(GL_RGBA, GL_FLOAT, 3, 5, 1, DEFAULT) == 3 * 5 * 16
    assert image_bytes(GL_RGB, GL_UNSIGNED_SHORT_5_6_5, 2, 2, 1, DEFAULT) == 8
    assert image_bytes(GL_RGBA, GL_UNSIGNED_BYTE, 0, 64, 1, DEFAULT) == 0  # nothing written


def test_a_tile_of_a_wider_image_spans_its_rows():
    # the case: a 64 x 64 float tile copied into an image 4096 pixels wide
    tile = PackState(row_length=4096)
    assert image_bytes(GL_RGBA, GL_FLOAT, 64, 64, 1, tile) == (63 * 4096 + 64) * 16


def test_skipped_rows_and_pixels_come_before_the_first_pixel():
    pack = PackState(row_length=4096, skip_rows=3, skip_pixels=100)
    start = (3 * 4096 + 100) * 4
    assert image_bytes(GL_RGBA, GL_UNSIGNED_BYTE, 32, 16, 1, pack) == start + (15 * 4096 + 32) * 4


def test_rows_are_padded_to_the_alignment_only_when_an_element_is_smaller():
    eight = PackState(alignment=8)
    assert image_bytes(GL_RGB, GL_UNSIGNED_BYTE, 13, 7, 1, eight) == 6 * 40 + 39  # rows of 40
    assert image_bytes(GL_RGB, GL_UNSIGNED_BYTE, 13, 7, 1, PackState(alignment=1)) == 13 * 3 * 7
    assert image_bytes(GL_RGB, GL_FLOAT, 3, 2, 1, eight) == 40 + 36  # 4-byte floats < 8
    # a packed pixel of 4 bytes is one element, not smaller than an alignment of 2
    two = PackState(alignment=2)
    assert image_bytes(GL_BGRA, GL_UNSIGNED_INT_8_8_8_8_REV, 3, 2, 1, two) == 24


def test_image_height_and_image_skips_apply_to_3d_images_only():
    pack = PackState(image_height=12, skip_images=2)
    row, image = 8 * 4, 12 * 8 * 4
    volume = image_bytes(GL_RGBA, GL_UNSIGNED_BYTE, 8, 8, 4, pack, volume=True)
    assert volume == 2 * image + 3 * image + 7 * row + row
    assert image_bytes(GL_RGBA, GL_UNSIGNED_BYTE, 8, 8, 1, pack) == 8 * 8 * 4


def test_bitmaps_are_bits_in_rows_padded_to_the_alignment():
    # 10 pixels: 2 bytes, padded to 4; the last row ends at its second byte
    assert image_bytes(GL_STENCIL_INDEX, GL_BITMAP, 10, 3, 1, DEFAULT) == 2 * 4 + 2


def test_unknown_formats_and_types_count_as_the_largest():
    assert image_bytes(0xDEAD, GL_UNSIGNED_BYTE, 2, 2, 1, DEFAULT) == 2 * 2 * 4
    assert image_bytes(GL_RED, 0xBEEF, 2, 2, 1, DEFAULT) == 2 * 2 * 8
    assert image_bytes(GL_RGBA, GL_HALF_FLOAT, 2, 2, 1, DEFAULT) == 2 * 2 * 8


def test_compressed_images_are_the_drivers_size_or_their_blocks_laid_out():
    assert compressed_bytes(32, 8, 8, 1, (0, 0, 0, 0), DEFAULT, False) == 32
    # RGTC1 (4 x 4 blocks of 8 bytes) in rows of 64 pixels: 16 blocks of 8 bytes a row
    blocks = compressed_bytes(32, 8, 8, 1, (4, 4, 0, 8), PackState(row_length=64), False)
    assert blocks == 16 * 8 + 2 * 8
    assert compressed_bytes(32, 8, 8, 1, (4, 4, 0, 8), DEFAULT, False) == 32  # never less


def test_outputs_are_counted_by_the_registry_never_by_the_trace():
    commands = load_registry("gl").commands

    def count(name: str, param: int, args: list) -> int | None:
        command = commands[name]
        return output_count(command, command.params[param], args)

    assert count("glGenTextures", 1, [4096, [1]]) == 4096  # n, not the one name recorded
    assert count("glCullParameterfvEXT", 1, [0x81AA, [0.0]]) == 4  # len="4"
    assert count("glGetSynciv", 4, [1, 0x9112, 64, None, [0]]) == 64  # len="count"
    assert count("glGenTextures", 1, [-5, []]) == 0
    assert count("glReadPixels", 6, [0] * 7) is None  # COMPSIZE: sized elsewhere (readback)
