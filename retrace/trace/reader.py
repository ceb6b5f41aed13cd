"""Reading a trace: header, then the event stream as batches of flat call records.

The header (format version, semantic version, properties) is parsed here; the
events go to the C scanner chunk by chunk, so a trace of any size is read in
bounded memory. Damage -- a corrupt container, an unknown event, a file cut off
mid-call -- never loses what came before it: every intact call is yielded
first, calls that had entered but not returned are delivered marked
INCOMPLETE, and only then is a `TraceError` raised naming the file, the offset
and the problem.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from typing import NamedTuple

from retrace.errors import TraceError
from retrace.trace import cache
from retrace.trace._scanner import Scanner, calls_of
from retrace.trace.ahead import ReadAhead
from retrace.trace.container import TraceStream
from retrace.trace.model import CallBatch, Signatures

MAX_VERSION = 6
# The scanner is fed a quarter of a container chunk at a time, and what each feed completes
# is a batch: small batches start the replay sooner where the trace is read ahead
# (`ahead.py`: the first batch is read before anything runs), and cost little each.
_FEED = 256 << 10

_API_BY_PREFIX = (("glX", "GL"), ("wgl", "GL"), ("CGL", "GL"), ("egl", "EGL"))


class TraceCounts(NamedTuple):
    """How many calls a trace holds and how many of them end a frame (END_FRAME), counted
    as it is read, the one count `retrace info`, a profile's checks of `--frames` and
    `--calls` and its metadata share: frames 0 to `frames` - 1 end with such a call,
    and frame `frames` holds the `after_last_frame` calls after the last. A damaged
    trace's are those before the damage."""

    calls: int
    frames: int
    after_last_frame: int


def read_counts(path: str) -> tuple[TraceCounts, TraceError | None]:
    """The calls and frames of the trace at `path`, read for nothing else (through the
    trace cache, which fills, so that a replay after it reads no file), and the damage
    that ended reading, if any. Raises TraceError where not even the header can be read,
    OSError where the file cannot."""
    reader = TraceReader(path)
    damage = None
    try:
        for _batch in reader.batches():
            pass
    except TraceError as e:
        damage = e
    assert reader.counts is not None  # (read to the end or to the damage)
    return reader.counts, damage


class _Truncated(Exception):
    """The header ran past the data read so far."""


def _uint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _Truncated
        c = buf[pos]
        pos += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, pos


def _string(buf: bytes | bytearray, pos: int) -> tuple[bytes, int]:
    n, pos = _uint(buf, pos)
    if pos + n > len(buf):
        raise _Truncated
    return bytes(buf[pos : pos + n]), pos + n


class TraceReader:
    """One trace file, read from the start.

    After construction `version`, `semantic_version`, `properties` and
    `container` are known; `batches()` then streams the calls, filling
    `signatures` as definitions appear.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.stream = TraceStream(self.path)
        self.container = self.stream.container
        self.signatures = Signatures()
        self.calls_read = 0
        self.frames_read = 0  # frame-ending calls among them
        self._after_frame = 0  # calls read since the last frame-ending one
        self.counts: TraceCounts | None = None  # once the trace was read to its end or damage
        self.read_ahead: ReadAhead[cache.Taken] | None = None  # the last one, for its timing
        self.stream_bytes = 0  # decompressed bytes read so far
        self._entry = cache.entry_for(self.path, self.stream.file_size)
        self._kept = self._entry.load() if self._entry is not None else None
        self.from_cache = self._kept is not None  # read before: batches() reads no file
        if self._kept is not None:  # the header's facts are kept too
            self.version, self.semantic_version, self.properties, self.header_size = (
                self._kept.header
            )
            return
        self._chunks = self._counted(self.stream.views())
        self._rest = self._read_header()

    def _counted(self, chunks: Iterator[bytes | memoryview]) -> Iterator[bytes | memoryview]:
        for chunk in chunks:
            self.stream_bytes += len(chunk)
            yield chunk

    def _read_header(self) -> bytes:
        head = bytearray()
        while True:
            try:
                return self._parse_header(head)
            except _Truncated:
                chunk = next(self._chunks, None)
                if chunk is None:
                    what = "empty trace" if not head else "trace ends inside its header"
                    raise TraceError(self.path, len(head), what) from None
                head += chunk

    def _parse_header(self, head: bytearray) -> bytes:
        self.version, pos = _uint(head, 0)
        if self.version > MAX_VERSION:
            raise TraceError(
                self.path,
                0,
                f"unsupported trace format version {self.version} "
                f"(retrace reads versions 0 to {MAX_VERSION}); not an apitrace trace?",
            )
        self.semantic_version = self.version
        self.properties = {}
        if self.version >= 6:
            self.semantic_version, pos = _uint(head, pos)
            while True:
                name, pos = _string(head, pos)
                if not name:
                    break
                value, pos = _string(head, pos)
                self.properties[name.decode("utf-8", "surrogateescape")] = value.decode(
                    "utf-8", "surrogateescape"
                )
        self.header_size = pos
        return bytes(head[pos:])

    @property
    def api(self) -> str:
        """The window-system API the trace was captured through, guessed as apitrace does."""
        for sig in self.signatures.functions.values():
            for prefix, api in _API_BY_PREFIX:
                if (
                    sig.name.startswith(prefix)
                    and sig.name[len(prefix) : len(prefix) + 1].isupper()
                ):
                    return api
        return "unknown"

    def batches(self, ahead: bool = False) -> Generator[CallBatch, None, None]:
        """Yield every call of the trace, in delivery order, in batches: from the cache
        where this trace was read before, else from the file (keeping them for next time).
        With `ahead`, the file is read a batch ahead on another thread (`ahead.py`); the
        cache's batches are handed out here either way (`cache.Kept.batches` says why).
        Close the iterator to stop early."""
        if self._kept is not None:
            return self._batches(self._kept_batches(self._kept))
        if ahead:
            self.read_ahead = ReadAhead(self._scanned_batches())
            return self._batches(self.read_ahead)
        return self._batches(self._scanned_batches())

    def _batches(
        self, taken: Generator[cache.Taken, None, None] | ReadAhead[cache.Taken]
    ) -> Generator[CallBatch, None, None]:
        """The batches as the scanner took them (here, on the reading thread, or from the
        cache), made `CallBatch`es on the caller's thread, which alone adds signatures;
        closing them stops the reading (and drops the cache file being written)."""
        try:
            for one in taken:
                yield self._batch(one)
        except TraceError:
            self._ended()
            raise
        else:
            self._ended()
        finally:
            taken.close()
            if self._kept is not None:
                self._kept.release()

    def _ended(self) -> None:
        self.counts = TraceCounts(self.calls_read, self.frames_read, self._after_frame)

    def _kept_batches(self, kept: cache.Kept) -> Generator[cache.Taken, None, None]:
        handed = 0  # the scanner's takes handed out (kept empty ones included)
        try:
            for taken, self.stream_bytes in kept.batches():
                handed += 1
                if len(taken[0]):
                    yield taken
        except cache.Damaged:  # read the rest from the trace, and keep its scan anew
            yield from self._rescanned(handed)
            return
        self.stream_bytes = kept.stream_bytes
        damage = kept.error(self.path)
        if damage is not None:
            raise damage

    def _rescanned(self, handed: int) -> Generator[cache.Taken, None, None]:
        """After a kept batch failed its check: the trace read from its start, and every
        take after the first `handed` (those the cache handed out); no longer from the
        cache. The scanner takes the same batches from the same trace, in the same order."""
        self._kept = None
        self.from_cache = False
        self.stream_bytes = 0
        self._chunks = self._counted(self.stream.views())
        self._rest = self._read_header()
        yield from self._scanned_batches(skip=handed)

    def _scanned_batches(self, skip: int = 0) -> Generator[cache.Taken, None, None]:
        header = (self.version, self.semantic_version, self.properties, self.header_size)
        keep = None
        if self._entry is not None:
            keep = self._entry.writer(header, self.path, self.stream.file_size)
        try:
            for taken in self._scan(keep):
                if skip:
                    skip -= 1
                else:
                    yield taken
        finally:
            if keep is not None:
                keep.abandon()  # (nothing left to drop once finished)

    def _scan(self, keep: cache.Writer | None) -> Generator[cache.Taken, None, None]:
        scanner = Scanner(self.version, self.header_size)
        damage: TraceError | None = None
        data: bytes | memoryview | None = self._rest
        self._rest = b""
        while True:
            view = memoryview(data or b"")
            for at in range(0, len(view), _FEED):
                if scanner.feed(view[at : at + _FEED]):
                    yield self._take(scanner, keep)
                if scanner.error is not None:
                    break
            if scanner.error is not None:
                offset, problem = scanner.error
                damage = TraceError.in_stream(self.path, offset, problem)
                break
            try:
                data = next(self._chunks, None)
            except TraceError as e:
                damage = e
                break
            if data is None:
                break
        if damage is None and scanner.buffered:
            damage = TraceError.in_stream(
                self.path, scanner.offset, "trace cut off in the middle of a call"
            )
        scanner.finish()
        final = self._take(scanner, keep)
        if keep is not None:
            keep.finish(damage, self.stream_bytes)
        if len(final[0]):
            yield final
        if damage is not None:
            raise damage

    def _take(self, scanner: Scanner, keep: cache.Writer | None) -> cache.Taken:
        taken = scanner.take()
        if keep is not None:
            keep.add(taken, self.stream_bytes, self.stream.compressed_offset)
        return taken

    def _batch(self, taken: cache.Taken) -> CallBatch:
        """One batch as the scanner took it (now, or from the cache) as a `CallBatch`."""
        calls, slots, nodes, pool, backtraces, definitions = taken
        self.signatures.add(definitions)
        ends = calls_of(calls, self.signatures.frame_ending)
        batch = CallBatch(calls, slots, nodes, pool, backtraces, ends)
        self.calls_read += len(batch)
        self.frames_read += len(ends)
        self._after_frame = len(batch) - 1 - ends[-1] if ends else self._after_frame + len(batch)
        return batch
