"""The trace cache: what reading a trace produced, kept so that the next read skips it.

Reading a trace -- decompressing its container, then scanning the event stream into
flat call records (`_scanner.c`) -- costs every run about 7 ms per MB of trace
(wz2100.trace, 12 MB: 86 ms, where its whole glretrace replay takes 238), and profiling
the same trace again is the normal case: comparing builds, repeats, other selections.
So a read keeps what the scanner's `take()` gave, batch by batch, in one file per trace,
and the next read of the same trace maps that file (mmap) and hands its batches out as
slices of it: no decompressing, no scanning, no copy.

Key. A trace is named by its content, the SHA-256 of its file, remembered by the file's
device, inode, size, mtime and ctime (`digest.remembered_digest`), so that an unchanged
multi-GB trace is not hashed again every run. Beside it: retrace's version, the
scanner's `RECORD_LAYOUT`, this file's `FORMAT` and marshal's; a file made by any other
build is never read.

File. A prefix (magic, format, checksum, place and length of the index), then each batch's
five buffers (calls, slots, nodes, pool, backtraces), 8-aligned, then the index (marshal):
the key, what the header gave, per batch the place, length and checksum of each buffer,
the definitions it brought and the stream position it reached, and how reading ended (a
damaged trace's `TraceError`: it replays to the same call with the same line). It is
written beside a normal read into a temporary file, renamed into place once reading
ends (a read stopped early keeps nothing). Loading checks the prefix and the index; a
file wanting there in any way is ignored, and the read that follows replaces it. Each
batch's checksums are checked as the batch is handed out (`Kept.batches`): where one fails,
the reader reads the trace itself from its start, hands out what follows the batches
already handed out (a scan takes the same batches), and keeps the file anew.

Where and how much. $RETRACE_CACHE_DIR, else $XDG_CACHE_HOME/retrace, else
~/.cache/retrace; at most $RETRACE_CACHE_SIZE bytes (a number, or with K, M, G; 0 turns
the cache off), 2 GiB unless set, the least recently used files removed first. Traces
smaller than `MIN_TRACE_SIZE` are read directly. A cache that cannot be written (a full
disk, a read-only folder) costs one warning on stderr, never the run.
"""

from __future__ import annotations

import contextlib
import marshal
import mmap
import os
import re
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from retrace import __version__
from retrace.cachedir import user_cache_dir
from retrace.errors import TraceError, UsageError
from retrace.trace._scanner import RECORD_LAYOUT
from retrace.trace.ahead import overlap_pays
from retrace.trace.digest import file_digest, recalled_digest, remembered_digest

if TYPE_CHECKING:
    # What `Scanner.take()` returns: calls, slots, nodes, pool, backtraces, definitions
    # (from the cache, the buffers are slices of its mapped file).
    Taken = tuple[
        bytes | memoryview,
        bytes | memoryview,
        bytes | memoryview,
        bytes | memoryview,
        bytes | memoryview,
        list[Any],
    ]
    Header = tuple[int, int, dict[str, str], int]  # version, semantic version, properties, size
    # per batch: (place, length, checksum) of its five buffers, its definitions, stream position
    Index = list[tuple[tuple[tuple[int, int, int], ...], list[Any], int]]

FORMAT = 2  # of the cache file; raise it with any change to its layout
DEFAULT_SIZE = 2 << 30
# Below this, reading costs at most 4 ms and its scan saves 0.1 to 1.3 ms (measured on 11
# traces of 62 to 359 KB: the definitions are decoded either way) for 1.5 to 10 ms of
# hashing and writing the first time; from 2.7 MB on it saves 15 to 80 ms.
MIN_TRACE_SIZE = 1 << 20
_MAGIC = b"RTRSCAN\n"
_PREFIX = struct.Struct("<8sI4xQQQ")  # magic, format, index checksum, index offset, length
_ALIGN = 8
_SUFFIX = ".scan"
_DIGESTS = "digests"  # folder of remembered trace digests
_KEEP_DIGESTS = 1000  # remembered digests beyond this are forgotten, oldest first
_STALE = 24 * 3600  # seconds after which a temporary file is a killed writer's leftover
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)  # (Linux and the BSDs)

_switched_off = False  # --no-cache
_noted = False  # the note that a trace is too large for the cache was printed
# a scan's size is foreseen from the share of the trace it came from once it is this large
_FORESEEN = 64 << 20


def switch_off() -> None:
    """No trace read from now on (in this process and the replay child it forks) uses the
    cache: --no-cache."""
    global _switched_off
    _switched_off = True


@contextlib.contextmanager
def used(on: bool) -> Iterator[None]:
    """Within the block, reads use the cache only if `on` (the API's `cache=` argument)."""
    global _switched_off
    before = _switched_off
    _switched_off = before or not on
    try:
        yield
    finally:
        _switched_off = before


def directory() -> str:
    """Where the cache lives: $RETRACE_CACHE_DIR, else the user's cache folder's retrace/."""
    return os.environ.get("RETRACE_CACHE_DIR") or user_cache_dir()


def size_limit() -> int:
    """The most bytes the cache may hold: $RETRACE_CACHE_SIZE, else `DEFAULT_SIZE`."""
    raw = os.environ.get("RETRACE_CACHE_SIZE", "").strip()
    if not raw:
        return DEFAULT_SIZE
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", raw, re.IGNORECASE)
    if match is None:
        raise UsageError(  # configuration, as an option's value is: exit 2
            f"RETRACE_CACHE_SIZE={raw!r} is not a size: give bytes, or a number with K, M or G"
        )
    return int(float(match[1]) * _UNITS[match[2].upper()])


def entry_for(path: str, file_size: int) -> Entry | None:
    """The cache entry of the trace at `path`, or None where the cache is off, the trace
    too small for it to pay or too large for the cache to hold (a note says so: its scan
    is larger than the file), or the trace's digest cannot be had."""
    if _switched_off:
        return None
    limit = size_limit()  # (a bad $RETRACE_CACHE_SIZE is an error whatever the trace)
    if limit <= 0 or file_size < MIN_TRACE_SIZE:
        return None
    if file_size > limit:
        _too_large(path, file_size, limit)
        return None
    folder = directory()
    try:
        ahead = _hashing.pop(path, None)
        digest = ahead() if ahead else remembered_digest(path, os.path.join(folder, _DIGESTS))
    except OSError:
        return None  # the reader will say what is wrong with the trace
    return Entry(folder, digest, limit)


# per trace path: waits for the digest being hashed on a thread (`digest_ahead`)
_hashing: dict[str, Callable[[], str]] = {}


def digest_ahead(path: str) -> None:
    """Where reading the trace at `path` will hash it (the cache on, the trace within its
    bounds, the digest of this version of the file not remembered: a first read), start
    hashing it on a thread now, for `entry_for` to take. The replaying child calls this
    first thing: hashing (2 ms per MB, 30 ms for 15 MB) then overlaps the child's imports
    and its display's opening instead of delaying the first call. A read on one core
    gains nothing by it; anything wrong is left for `entry_for` to find. (The thread
    imports hashlib, whose library may wait for the dynamic loader's lock while the
    display's driver loads: the thread waits, not the caller.)"""
    if _switched_off or path in _hashing or not overlap_pays():
        return
    memo = os.path.join(directory(), _DIGESTS)
    try:
        limit, size = size_limit(), os.stat(path).st_size
        if not MIN_TRACE_SIZE <= size <= limit or recalled_digest(path, memo) is not None:
            return
    except (OSError, UsageError):
        return
    done: list[str | OSError] = []

    def digest() -> None:
        try:
            done.append(remembered_digest(path, memo))
        except OSError as e:  # raised where the digest is taken
            done.append(e)

    thread = threading.Thread(target=digest, name="retrace-digest", daemon=True)
    thread.start()

    def taken() -> str:
        thread.join()
        (found,) = done
        if isinstance(found, OSError):
            raise found
        return found

    _hashing[path] = taken


def content_digest(path: str) -> str:
    """The SHA-256 of the trace at `path`, as the cache knows it: remembered per version of
    the file in the cache's folder (`digest.remembered_digest`), hashed anew where the
    cache is off. Raises OSError if the trace cannot be read."""
    if _switched_off or size_limit() <= 0:
        return file_digest(path)[1]
    return remembered_digest(path, os.path.join(directory(), _DIGESTS))


class Damaged(ValueError):
    """A kept batch failed its checksum: the file is damaged from there on."""


def checksum(data: bytes | memoryview) -> int:
    """The check of a part of a cache file: XXH3's 64 bits (the `xxhash` package), 4 times
    as fast as zlib's CRC-32 here (15 against 3.7 GB/s), whose crc32_z was 10% of a long
    cached replay's CPU (perf, neverball-40s). Imported only where the cache is used (1 ms)."""
    from xxhash import xxh3_64_intdigest

    return xxh3_64_intdigest(data)


class Kept:
    """A trace's scan, loaded from the cache: its index checked, each batch's buffers
    checked as the batch is handed out (`batches`)."""

    __slots__ = ("header", "index", "end", "stream_bytes", "mapped")

    def __init__(
        self,
        header: Header,
        index: Index,
        end: tuple[int | None, str, str] | None,
        stream_bytes: int,
        mapped: mmap.mmap,
    ) -> None:
        self.header = header
        self.index = index
        self.end = end  # a damaged trace's TraceError: offset, problem, where
        self.stream_bytes = stream_bytes  # decompressed bytes the read went through
        self.mapped = mapped  # the whole file

    def batches(self) -> Iterator[tuple[Taken, int]]:
        """Each batch as `Scanner.take()` gave it, and the stream position it reached,
        every buffer's checksum checked first: `Damaged` where one fails, the batches before
        it handed out already (the reader reads the rest from the trace itself).

        Checking a batch as it is handed out, rather than the whole file before the first,
        starts the replay sooner (126 ms for a 341 MiB scan), and touches each page once:
        checked, then used while it is in the CPU's caches. A batch's pages leave the
        process's resident set (they stay in the page cache, and come back if touched
        again) once the next is asked for: the caller is done with it then, and the rest
        once it is done with all (`release`). Peak RSS is then what reading the trace
        costs, not the whole file's size (`_released`).

        On the caller's thread, not a thread of its own (`ReadAhead`): with XXH3 the
        checks cost less than the handing over (GIL switches: 7600 futex calls on a
        cached neverball-40s). corpus.py --noop, 5 interleaved runs, cached, on a
        thread against here: glmark2-scenes 377 against 340 ms (CPU 431 against 400),
        neverball-40s 875 against 834 (996, 917), gtk4-widget-factory-25s 1187 against
        1095 (1377, 1203); traces of 3-7 MB within noise (15 runs, 0.96-1.03).
        """
        view = memoryview(self.mapped)
        handed: tuple[tuple[int, int, int], ...] | None = None  # not released yet
        for sections, definitions, stream_bytes in self.index:
            if handed is not None:
                _released(self.mapped, handed)
            parts = [view[at : at + n] for at, n, _sum in sections]
            for part, (_at, _n, expected) in zip(parts, sections, strict=True):
                if checksum(part) != expected:
                    raise Damaged("batch damaged")
            calls, slots, nodes, pool, backtraces = parts
            yield (calls, slots, nodes, pool, backtraces, definitions), stream_bytes
            handed = sections

    def release(self) -> None:
        """Take the whole file out of the resident set: the caller is done with every batch."""
        _release(self.mapped, 0, len(self.mapped))

    def error(self, path: str) -> TraceError | None:
        """The damage the read ended at, as it was raised then."""
        if self.end is None:
            return None
        offset, problem, where = self.end
        return TraceError(path, offset, problem, where)


class Entry:
    """One trace's place in the cache: loaded when valid, else written by the read."""

    def __init__(self, folder: str, digest: str, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        self.key = (digest, __version__, RECORD_LAYOUT, FORMAT, marshal.version)
        build = checksum(repr(self.key[1:]).encode())
        self.path = os.path.join(folder, f"{digest}-{build:016x}{_SUFFIX}")

    def load(self) -> Kept | None:
        """The kept scan, or None if there is none or it is wanting in any way."""
        try:
            with open(self.path, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            kept = _verified(mapped, self.key)
        except (OSError, ValueError, EOFError, TypeError, IndexError, KeyError, struct.error):
            return None
        with contextlib.suppress(OSError):
            os.utime(self.path)  # recently used: evicted last
        return kept

    def writer(self, header: Header, trace: str, trace_size: int) -> Writer | None:
        """A writer of the scan of `trace` (of `trace_size` bytes), or None (and a warning)
        where none can be made."""
        try:
            os.makedirs(self.folder, exist_ok=True)
            temporary = os.path.join(self.folder, f".{os.getpid()}-{time.monotonic_ns()}.part")
            return Writer(self, header, temporary, open(temporary, "xb"), trace, trace_size)
        except OSError as e:
            _warn(self.folder, e)
            return None


class Writer:
    """Writes a scan while the trace is read: buffers as they are taken, the index at the
    end. Any failure drops the file; the read goes on."""

    def __init__(
        self,
        entry: Entry,
        header: Header,
        temporary: str,
        file: BinaryIO,
        trace: str,
        trace_size: int,
    ) -> None:
        self.entry = entry
        self.trace = trace  # the trace's path, for the note when it cannot be kept
        self.trace_size = trace_size  # its file's bytes
        self.header = header
        self.temporary = temporary
        self.file: BinaryIO | None = file
        self.at = _PREFIX.size
        self.index: Index = []
        file.write(bytes(_PREFIX.size))

    def add(self, taken: Taken, stream_bytes: int, file_offset: int) -> None:
        """Keep one batch as `Scanner.take()` gave it, read up to `file_offset` of the
        trace's file. Once its scan is known to outgrow the cache, from its size so far
        in the share of the file read, the rest is not written (and a note says so)."""
        if self.file is None:
            return
        try:
            sections = tuple(self._section(memoryview(part)) for part in taken[:5])
        except OSError as e:
            self.abandon(e)
            return
        self.index.append((sections, taken[5], stream_bytes))
        expected = self.at * self.trace_size // max(file_offset, 1)
        if self.at > self.entry.limit or (self.at > _FORESEEN and expected > self.entry.limit):
            self.abandon()
            _too_large(self.trace, self.trace_size, self.entry.limit, max(expected, self.at))

    def _section(self, data: memoryview) -> tuple[int, int, int]:
        assert self.file is not None
        at, n = self.at, data.nbytes
        self.file.write(data)
        padding = -n % _ALIGN
        self.file.write(bytes(padding))
        self.at += n + padding
        return at, n, checksum(data)

    def finish(self, damage: TraceError | None, stream_bytes: int) -> None:
        """Reading ended (at `damage`, if any): write the index and put the file in place."""
        if self.file is None:
            return
        end = None if damage is None else (damage.offset, damage.problem, damage.where)
        index = marshal.dumps(
            {
                "key": self.entry.key,
                "header": self.header,
                "batches": self.index,
                "end": end,
                "stream_bytes": stream_bytes,
            }
        )
        try:
            self.file.write(index)
            self.file.seek(0)
            self.file.write(_PREFIX.pack(_MAGIC, FORMAT, checksum(index), self.at, len(index)))
            self.file.close()
            self.file = None
            os.replace(self.temporary, self.entry.path)
        except OSError as e:
            self.abandon(e)
            return
        evict(self.entry.folder, self.entry.limit)

    def abandon(self, error: OSError | None = None) -> None:
        """Drop the file (a read stopped early, a write failed: `error`, warned about)."""
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None
        with contextlib.suppress(OSError):
            os.unlink(self.temporary)
        if error is not None:
            _warn(self.entry.folder, error)


def _verified(mapped: mmap.mmap, key: tuple[Any, ...]) -> Kept:
    """The scan in `mapped`, its prefix and index checked (the batches' buffers are checked
    as they are handed out: `Kept.batches`); ValueError (or the like) if any fails."""
    view = memoryview(mapped)
    magic, version, expected, index_at, index_n = _PREFIX.unpack_from(view)
    if magic != _MAGIC or version != FORMAT:
        raise ValueError("not a trace cache file of this format")
    index = view[index_at : index_at + index_n]
    if len(index) != index_n or checksum(index) != expected:
        raise ValueError("index damaged")
    facts = marshal.loads(index)
    if facts["key"] != key:
        raise ValueError("another trace's or another build's")
    size = len(mapped)
    for sections, _definitions, _stream_bytes in facts["batches"]:
        for at, n, _sum in sections:
            if at < 0 or n < 0 or at + n > size:
                raise ValueError("batch past the end of the file")
    # the index, read into Python objects: out of RSS for good
    _release(mapped, max(index_at - _FAULT_AROUND, 0), index_at + index_n)
    return Kept(facts["header"], facts["batches"], facts["end"], facts["stream_bytes"], mapped)


# How far before a batch its release reaches. A page fault in a file mapping maps, besides
# its page, those of its aligned window (Linux's fault_around_bytes: 64 KiB unless set, at
# most the 2 MiB of one page table) that the page cache holds, so reading a batch's first
# pages maps again the last pages of those before it, released already. Released from its
# own start only, a batch left about 40 KB resident to the end of a replay: 4.3 MiB at the
# peak of neverball-40s's cached replay (109 batches of about 1 MB); about 4% of a scan.
_FAULT_AROUND = 2 << 20


def _released(mapped: mmap.mmap, sections: tuple[tuple[int, int, int], ...]) -> None:
    """Take a batch of the file (its `sections`) out of the resident set, and what reading
    it mapped again of the file before it (`_FAULT_AROUND`)."""
    (start, _, _), (at, n, _) = sections[0], sections[-1]
    _release(mapped, max(start - _FAULT_AROUND, 0), at + n)


def _release(mapped: mmap.mmap, start: int, end: int) -> None:
    """Take bytes `start` to `end` of a read-only file mapping out of the resident set (whole
    pages; the data stays in the file and the page cache)."""
    if _DONTNEED is not None and end > start:
        start -= start % mmap.PAGESIZE
        mapped.madvise(_DONTNEED, start, end - start)


def _too_large(trace: str, size: int, limit: int, scan: int | None = None) -> None:
    """The note, once per process, that a trace is read without the cache: the cache
    cannot hold its scan (`scan` bytes, about; the file's `size` at least)."""
    global _noted
    if _noted:
        return
    _noted = True
    what = f"its scan (about {_size(scan)})" if scan else f"it ({_size(size)}; its scan is larger)"
    print(
        f"retrace: note: {trace} is read without the trace cache: {what} would not fit in "
        f"the cache's {_size(limit)} (RETRACE_CACHE_SIZE)",
        file=sys.stderr,
    )


def _size(n: int) -> str:
    """Bytes, readably: 3.2 GiB, 280 MiB, 96 KiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.{1 if shift == 30 else 0}f} {unit}"
    return f"{n / 1024:.0f} KiB"


def _warn(folder: str, error: OSError) -> None:
    reason = error.strerror or str(error)
    print(
        f"retrace: warning: the trace cache in {folder} cannot be written ({reason}); "
        "reading goes on without it (--no-cache, RETRACE_CACHE_DIR)",
        file=sys.stderr,
    )


def _files(folder: str) -> list[tuple[int, int, str]]:
    """(mtime, size, path) of every scan in the cache, oldest use first."""
    found = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for e in entries:
            if e.name.endswith(_SUFFIX):
                with contextlib.suppress(OSError):
                    st = e.stat()
                    found.append((st.st_mtime_ns, st.st_size, e.path))
    return sorted(found)


def evict(folder: str, limit: int) -> None:
    """Remove the least recently used scans until the cache holds at most `limit` bytes,
    the leftovers of killed writers, and the oldest remembered digests beyond
    `_KEEP_DIGESTS`."""
    scans = _files(folder)
    total = sum(size for _mtime, size, _path in scans)
    for _mtime, size, path in scans:
        if total <= limit:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= size
    now = time.time()
    for sub in (folder, os.path.join(folder, _DIGESTS)):
        with contextlib.suppress(OSError), os.scandir(sub) as entries:
            for e in entries:
                if e.name.startswith(".") and now - e.stat().st_mtime > _STALE:
                    with contextlib.suppress(OSError):
                        os.unlink(e.path)
    digests = os.path.join(folder, _DIGESTS)
    with contextlib.suppress(OSError):
        names = os.listdir(digests)
        if len(names) > _KEEP_DIGESTS:
            paths = sorted((os.path.join(digests, name) for name in names), key=os.path.getmtime)
            for path in paths[: len(paths) - _KEEP_DIGESTS]:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def summary() -> dict[str, Any]:
    """`retrace cache info`: where the cache is, what it holds, what it may hold."""
    folder = directory()
    scans = _files(folder)
    return {
        "directory": folder,
        "traces": len(scans),
        "bytes": sum(size for _mtime, size, _path in scans),
        "limit": size_limit(),
    }


def clear() -> int:
    """`retrace cache clear`: remove every scan and remembered digest; the scans removed."""
    folder = directory()
    scans = _files(folder)
    for _mtime, _size, path in scans:
        with contextlib.suppress(OSError):
            os.unlink(path)
    digests = os.path.join(folder, _DIGESTS)
    with contextlib.suppress(OSError):
        for name in os.listdir(digests):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(digests, name))
    return len(scans)
