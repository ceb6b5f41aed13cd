"""Trace containers: the compressed wrapping around apitrace's event stream.

apitrace writes the event stream through one of several compressors and never
records which one in a separate field, so the container is recognised by its
first bytes, as apitrace itself does: ``at`` for its own snappy framing (chunks
of a little-endian uint32 length followed by one raw snappy block), the gzip
magic, the zstd frame magic (a seekable zstd file is a series of zstd frames
followed by a skippable seek-table frame), and brotli, which has no magic, for
anything else.

Every container is read incrementally and yields decompressed chunks of about a
megabyte, so memory stays bounded whatever the size of the trace.
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable, Iterator

from retrace.errors import TraceError

SNAPPY_MAGIC = b"at"
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_SEEKABLE_MAGIC = b"\xb1\xea\x92\x8f"  # last 4 bytes of a seekable zstd file


def load_libraries() -> None:
    """In the replaying child, before its display opens in a thread of its own
    (`driver_process.open_ahead`): load the shared libraries the child imports while the
    display opens (the reader's and the replay's) that the command line has not loaded
    already. That thread holds the dynamic loader's lock while the driver loads, and an
    extension module imported meanwhile would wait for it (15-35 ms measured) instead of
    importing alongside; tests/unit/test_startup.py checks that nothing the replay
    imports loads one after these. Looking a C function up (dlsym) takes that lock too, so
    the C library's function the replay calls (mallopt) is called here first
    (tests/gl/test_startup.py checks that the replay looks none up meanwhile)."""
    # (only the libraries: where a module is Python around one, as bisect, heapq, pickle and
    # queue are, its Python imports later, alongside the driver's loading)
    import _bisect  # noqa: F401  (the call sets')
    import _heapq  # noqa: F401  (the read-ahead's queue)
    import _json  # noqa: F401  (a profile's store: its manifest)
    import _pickle  # noqa: F401  (the work handed to a child forked first: `contain.spare_child`)
    import _queue  # noqa: F401  (the read-ahead's)
    import array  # noqa: F401  (the call records')
    import fcntl  # noqa: F401  (a profile's store lock)
    import math  # noqa: F401  (the replay's values)

    import cramjam  # noqa: F401  (snappy, which apitrace writes; zlib comes with it)

    from retrace.libc import map_large_blocks
    from retrace.trace import _scanner  # noqa: F401

    map_large_blocks()  # (the replay's malloc setting, whose lookup takes that lock too)


# How apitrace's `info` names each container.
CONTAINER_NAMES = {
    "snappy": "Snappy",
    "gzip": "ZLib",
    "brotli": "Brotli",
    "zstd": "Zstandard",
    "zstd-seekable": "Zstandard (seekable)",
}

_READ_SIZE = 1 << 20  # compressed bytes read per step
_OUT_LIMIT = 4 << 20  # decompressed bytes produced per step by the streaming codecs
# A snappy block grows at most 64/3-fold (a 3-byte copy of 64 bytes): a block whose header
# claims more is corrupt, and decoding it would first allocate the claimed size (up to 4 GiB).
_SNAPPY_MAX_GROWTH = 22
_CUT = "file ends inside the compressed stream"


def detect_container(head: bytes, tail: bytes = b"") -> str:
    """Name the container from the first (and, for zstd, the last) bytes of a file."""
    if head.startswith(SNAPPY_MAGIC):
        return "snappy"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd-seekable" if tail == ZSTD_SEEKABLE_MAGIC else "zstd"
    return "brotli"


class TraceStream:
    """The decompressed event stream of one trace file.

    Iterating yields ``bytes`` chunks in order (`views` lets them share a buffer). A
    damaged container raises `TraceError` only after every chunk decoded before the damage
    was yielded, so callers can deliver all intact calls first.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            self.file_size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                head = f.read(4)
                f.seek(max(self.file_size - 4, 0))
                tail = f.read(4)
        except OSError as e:
            raise TraceError(self.path, None, f"cannot open: {e.strerror or e}") from None
        if not head:
            raise TraceError(self.path, 0, "empty file, not a trace")
        self.container = detect_container(head, tail)
        self.compressed_offset = 0  # file offset reached so far, for progress and errors

    def __iter__(self) -> Iterator[bytes | memoryview]:
        return self._chunks(reuse=False)

    def views(self) -> Iterator[bytes | memoryview]:
        """The chunks, where one may be a view of a buffer that the next one overwrites: for
        a reader done with each chunk before it takes the next (the scanner copies what it
        keeps). A snappy trace's chunks then decompress into one buffer, not each into
        fresh pages copied once more."""
        return self._chunks(reuse=True)

    def _chunks(self, reuse: bool) -> Iterator[bytes | memoryview]:
        reader: Callable[[io.BufferedReader], Iterator[bytes | memoryview]] = {
            "snappy": lambda f: self._snappy(f, reuse),  # (the others make new chunks anyway)
            "gzip": self._gzip,
            "zstd": self._zstd,
            "zstd-seekable": self._zstd,  # its seek table is a skippable frame
            "brotli": self._brotli,
        }[self.container]
        with open(self.path, "rb") as f:
            yield from reader(f)

    def _error(self, problem: str) -> TraceError:
        return TraceError(
            self.path, self.compressed_offset, f"{self.container} container: {problem}"
        )

    def _snappy(self, f: io.BufferedReader, reuse: bool) -> Iterator[bytes | memoryview]:
        import cramjam

        # Each block is read into `block`, and decompressed into `out`: buffers grown to
        # the largest block and chunk, not fresh pages for every one of them.
        block, out = bytearray(), bytearray()
        f.seek(len(SNAPPY_MAGIC))
        self.compressed_offset = len(SNAPPY_MAGIC)
        while True:
            prefix = f.read(4)
            if not prefix:
                return
            if len(prefix) < 4:
                raise self._error("file ends inside a chunk length")
            length = int.from_bytes(prefix, "little")
            left = self.file_size - f.tell()
            if length > left:  # checked first: reading would allocate `length` bytes
                rest = f.read(left)
                claimed = _snappy_length(rest)
                # (a length no block of the size it claims can have is damage, not a cut)
                if claimed is not None and length <= _snappy_bound(claimed):
                    yield snappy_prefix(rest)  # the calls in it before the cut are intact
                raise self._error(f"file ends inside a chunk ({left} of {length} bytes)")
            if length > len(block):
                block = bytearray(length)
            compressed = memoryview(block)[:length]
            if f.readinto(compressed) != length:
                raise self._error("file ends inside a chunk (it shrank while read)")
            claimed = _snappy_length(compressed)
            if claimed is None or claimed > _SNAPPY_MAX_GROWTH * length:
                what = "no length" if claimed is None else f"a length of {claimed} bytes"
                raise self._error(f"corrupt snappy chunk ({length} bytes with {what})")
            if claimed > len(out):
                out = bytearray(claimed)  # (a new one: views of the last may live on)
            try:
                chunk = memoryview(out)[: cramjam.snappy.decompress_raw_into(compressed, out)]
            except Exception as e:  # cramjam reports corruption with its own error types
                raise self._error(f"corrupt snappy chunk ({e})") from None
            self.compressed_offset += 4 + length
            yield chunk if reuse else bytes(chunk)

    def _gzip(self, f: io.BufferedReader) -> Iterator[bytes]:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = b""
        while True:
            if not pending:
                pending = f.read(_READ_SIZE)
                if not pending:
                    break
                self.compressed_offset += len(pending)
            try:
                out = d.decompress(pending, _OUT_LIMIT)
            except zlib.error as e:
                raise self._error(f"corrupt gzip data ({e})") from None
            pending = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                # gzip files may hold several members back to back
                pending = d.unused_data + pending
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                if not pending:
                    pending = f.read(_READ_SIZE)
                    self.compressed_offset += len(pending)
                    if not pending:
                        return
        if not d.eof:
            raise self._error(_CUT)

    def _zstd(self, f: io.BufferedReader) -> Iterator[bytes]:
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
        while True:
            try:
                out = reader.read(_OUT_LIMIT)
            except zstandard.ZstdError as e:
                self.compressed_offset = f.tell()
                raise self._error(f"corrupt zstd data ({e})") from None
            self.compressed_offset = f.tell()
            if not out:
                return
            yield out

    def _brotli(self, f: io.BufferedReader) -> Iterator[bytes]:
        """Brotli has no magic: a file that never decodes to a byte (text decodes for a
        few bytes, then fails or ends) is no trace, not a damaged brotli one."""
        import brotli

        d = brotli.Decompressor()
        decoded = False
        while True:
            data = f.read(_READ_SIZE)
            if not data:
                break
            try:
                out = d.process(data)
            except brotli.error:
                error = self._error("corrupt brotli data") if decoded else self._not_a_trace()
                raise error from None
            self.compressed_offset += len(data)
            if out:
                decoded = True
                yield out
        if not d.is_finished():
            raise self._not_a_trace() if not decoded else self._error(_CUT)

    def _not_a_trace(self) -> TraceError:
        return TraceError(self.path, 0, "not a trace file (no snappy, gzip, zstd or brotli stream)")


def snappy_prefix(block: bytes) -> bytes:
    """What the start of a raw snappy block cut short decodes to, as far as it goes: a
    trace cut inside its last chunk keeps the calls that chunk holds before the cut.
    (cramjam decodes whole blocks only.) The format: a varint of the length, then
    literals (tag 0) and copies of earlier output (tags 1-3)."""
    out = bytearray()
    pos = 0
    while pos < len(block) and block[pos] & 0x80:  # the length, not needed
        pos += 1
    pos += 1
    while pos < len(block):
        tag = block[pos]
        kind, high = tag & 3, tag >> 2
        pos += 1
        if kind == 0:
            size = high + 1
            if high >= 60:  # the length - 1 in the next 1-4 bytes
                extra = high - 59
                size = int.from_bytes(block[pos : pos + extra], "little") + 1
                pos += extra
            out += block[pos : pos + size]  # (cut short too where the block ends)
            pos += size
            continue
        if kind == 1:
            size, extra = 4 + (high & 7), 1
            offset = (high >> 3) << 8
        else:
            size, extra, offset = high + 1, 2 if kind == 2 else 4, 0
        if pos + extra > len(block):
            break
        offset |= int.from_bytes(block[pos : pos + extra], "little")
        pos += extra
        if not 0 < offset <= len(out):
            break  # (corrupt: the whole chunks before it stand)
        start = len(out) - offset
        if offset >= size:
            out += out[start : start + size]
        else:  # the copy overlaps what it makes: a run repeating the last `offset` bytes
            for i in range(size):
                out.append(out[start + i])
    return bytes(out)


def _snappy_bound(size: int) -> int:
    """The most bytes snappy compresses `size` bytes into (its MaxCompressedLength)."""
    return 32 + size + size // 6


def _snappy_length(block: bytes | memoryview) -> int | None:
    """The decompressed length a raw snappy block declares (a varint of at most 5 bytes)."""
    value = 0
    for i, byte in enumerate(block[:5]):
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value
    return None
