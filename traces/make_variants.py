#!/usr/bin/env python3
"""Write Zstandard-container variants of an apitrace trace (called by record.sh).

apitrace 11.1 (Debian 12) writes Snappy traces and can repack them to gzip and
Brotli, but not to Zstandard.  Newer apitrace (`apitrace repack --zstd`) writes
the zstd "seekable format"; this script produces the same container layout
from a Snappy trace, using the `cramjam` and `zstandard` Python packages:

1. Unwrap the Snappy container: 2 bytes "at", then chunks of
   <uint32 little-endian compressed length><raw Snappy block>, each block
   holding up to 1 MiB of the raw trace stream.
2. Cut the raw stream into pieces of at most MAX_FRAME bytes (newer apitrace:
   2 MiB) and compress each piece as one independent zstd frame, level 3, the
   way libzstd's streaming API does it in apitrace: no content size in the
   frame header, no content checksum.
3. Append the seek table, a zstd skippable frame:
     uint32 0x184D2A5E                     skippable-frame magic (LE)
     uint32 8 * n + 9                      size of what follows
     n * (uint32 compressed size, uint32 decompressed size)
     uint32 n, uint8 descriptor = 0 (no checksums), uint32 0x8F92EAB1

Outputs, for --input X.trace and --output-prefix P:
  P.zstd.trace               seekable zstd, 2 MiB frames (as `repack --zstd`)
  P.zstd-32k-frames.trace    seekable zstd, 32 KiB frames: several frames and
                             seek-table entries even for a small trace
  P.zstd-noseektable.trace   the same 32 KiB frames without the seek table
                             (newer apitrace reads such a file with its
                             non-seekable fallback reader)

Every output is read back and compared with the raw stream before the script
exits; it exits non-zero on any mismatch.
"""

import argparse
import struct
import sys

import cramjam
import zstandard

SNAPPY_SIGNATURE = b"at"
SKIPPABLE_SEEK_TABLE_MAGIC = 0x184D2A5E
SEEKABLE_MAGIC = 0x8F92EAB1
SEEK_TABLE_FOOTER_SIZE = 9
APITRACE_FRAME_SIZE = 2 * 1024 * 1024  # ZSTD_FRAME_SIZE in trace_ostream_zstd.cpp
APITRACE_LEVEL = 3  # default of `apitrace repack --zstd`
REPACK_WRITE_SIZE = 8192  # repack copies the raw stream in 8 KiB writes


def snappy_container_to_raw(data: bytes) -> bytes:
    """Return the raw trace stream held in an apitrace Snappy container."""
    if data[:2] != SNAPPY_SIGNATURE:
        raise ValueError("not an apitrace Snappy container (no 'at' signature)")
    pos = 2
    pieces = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"truncated chunk length at offset {pos}")
        (length,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + length > len(data):
            raise ValueError(f"truncated chunk at offset {pos}")
        pieces.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(pieces)


def compress_frame(piece: bytes, level: int) -> bytes:
    """One zstd frame, produced through the streaming API with unknown size."""
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=False, write_content_size=False)
    cobj = cctx.compressobj()
    out = [
        cobj.compress(piece[i : i + REPACK_WRITE_SIZE])
        for i in range(0, len(piece), REPACK_WRITE_SIZE)
    ]
    out.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
    return b"".join(out)


def zstd_frames(raw: bytes, max_frame: int, level: int):
    """List of (compressed frame, decompressed size)."""
    frames = []
    for start in range(0, len(raw), max_frame):
        piece = raw[start : start + max_frame]
        frames.append((compress_frame(piece, level), len(piece)))
    return frames


def seek_table(frames) -> bytes:
    entries = b"".join(struct.pack("<II", len(c), d) for c, d in frames)
    footer = struct.pack("<IBI", len(frames), 0, SEEKABLE_MAGIC)
    body = entries + footer
    return struct.pack("<II", SKIPPABLE_SEEK_TABLE_MAGIC, len(body)) + body


def parse_seek_table(data: bytes):
    """Return [(compressed size, decompressed size)] from a seekable file."""
    n, descriptor, magic = struct.unpack_from("<IBI", data, len(data) - SEEK_TABLE_FOOTER_SIZE)
    if magic != SEEKABLE_MAGIC:
        raise ValueError("no seekable-format footer")
    if descriptor & 0x7C:
        raise ValueError("reserved seek table descriptor bits set")
    entry_size = 12 if descriptor & 0x80 else 8
    table_size = 8 + n * entry_size + SEEK_TABLE_FOOTER_SIZE
    start = len(data) - table_size
    skip_magic, frame_size = struct.unpack_from("<II", data, start)
    if skip_magic != SKIPPABLE_SEEK_TABLE_MAGIC or frame_size != table_size - 8:
        raise ValueError("bad seek table skippable-frame header")
    entries = [struct.unpack_from("<II", data, start + 8 + i * entry_size) for i in range(n)]
    if sum(c for c, _ in entries) != start:
        raise ValueError("seek table compressed sizes do not add up to the data size")
    return entries


def read_back(data: bytes, seekable: bool) -> bytes:
    """Decompress our own output, independently of how it was written."""
    dctx = zstandard.ZstdDecompressor()
    if seekable:
        out, pos = [], 0
        for csize, dsize in parse_seek_table(data):
            piece = dctx.decompressobj().decompress(data[pos : pos + csize])
            if len(piece) != dsize:
                raise ValueError("frame decompressed size differs from seek table")
            out.append(piece)
            pos += csize
        return b"".join(out)
    # No seek table: walk the concatenated frames.
    out, rest = [], data
    while rest:
        dobj = dctx.decompressobj()
        out.append(dobj.decompress(rest))
        rest = dobj.unused_data
    return b"".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="Snappy trace written by apitrace")
    parser.add_argument(
        "--output-prefix", required=True, help="path prefix of the outputs, e.g. traces/es2tri"
    )
    args = parser.parse_args(argv)

    with open(args.input, "rb") as f:
        raw = snappy_container_to_raw(f.read())

    variants = [
        ("zstd", APITRACE_FRAME_SIZE, True),
        ("zstd-32k-frames", 32 * 1024, True),
        ("zstd-noseektable", 32 * 1024, False),
    ]
    for suffix, max_frame, with_table in variants:
        frames = zstd_frames(raw, max_frame, APITRACE_LEVEL)
        data = b"".join(c for c, _ in frames)
        if with_table:
            data += seek_table(frames)
        if read_back(data, with_table) != raw:
            print(f"make_variants: {suffix}: read-back mismatch", file=sys.stderr)
            return 1
        path = f"{args.output_prefix}.{suffix}.trace"
        with open(path, "wb") as f:
            f.write(data)
        print(
            f"make_variants: wrote {path}: {len(frames)} zstd frame(s), "
            f"{len(raw)} raw bytes -> {len(data)} bytes"
        )

    return 0


if __name__ == "__main__":
    sys.exit(main())
