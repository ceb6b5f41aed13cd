"""File-backed columns for per-event profiling results.

A profile of a long trace has one row per call per metric per pass: millions of
rows. Keeping them in Python lists (or growing numpy arrays) would make the
replayer's own memory grow with the trace, and glretrace's RSS/VSIZE metrics
measure the replayer itself. So, like glretrace's ``MmapAllocator``, every
column lives in a file of its own that is mapped into memory (``MAP_SHARED``):
the kernel can write the pages back and drop them instead of needing RAM or
swap.

Design choices (each measured or forced by a failure mode):

* Growth: a column's file starts at one page and doubles until it reaches
  ``chunk_bytes`` (64 MiB by default, glretrace's chunk size), then grows by
  ``chunk_bytes`` at a time. Small columns stay small on disk; large ones pay a
  re-map only every 64 MiB. Each growth maps the whole file again (address
  space is cheap), so ``view()`` is always one contiguous array.
* Space is reserved rather than left to a bare ``ftruncate``: a sparse file
  only runs out of space when a page is first written through the mapping,
  which is a SIGBUS that kills the process. Reserving turns a full disk into
  ``ENOSPC`` at growth time, reported as a one-line `RetraceError` naming the
  file. (Copy-on-write filesystems such as btrfs can still fail at write-back;
  nothing short of writing without mmap avoids that.) A growth of up to
  ``_WRITTEN_RESERVE`` is reserved by writing zeros, larger ones with
  ``posix_fallocate``: a file system reserves space for a write at once but
  allocates blocks only at write-back, so the small stores of most profiles,
  removed seconds later, never had blocks to free, where fallocated blocks
  cost their removal 25-35 ms for 9 MiB on ext4 mounted with ``discard``
  (measured here; each profile removes its temporary store).
* Resident pages: pages written through a shared mapping stay in the process's
  RSS (as RssFile) until unmapped, so appending 160 MB would add 160 MB of RSS.
  Every ``release_bytes`` (1 MiB by default) of new rows, the column tells the
  kernel with ``madvise(MADV_DONTNEED)`` that the mapping no longer needs the
  pages already written; the data stays in the page cache (dirty pages are
  written back as usual) and is faulted in again if read; `Column.read` does the
  same for blocks read back. Measured (tests/test_store.py, ext4): 20 M int64
  appends (160 MB) raise VmRSS by 764 KiB; without the periodic release (only
  at growth) by 25 MB, with no release at all it would be the full 160 MB.
  The data only leaves RAM if the store directory is on a disk: on a tmpfs the
  page cache *is* memory, just not counted in this process's RSS.
* Missing rows: a column reads unset rows as its ``missing`` sentinel: NaN for
  float dtypes, the minimum value for signed integer dtypes, and the *maximum*
  value for unsigned ones (their minimum, 0, is a common real value). Writers
  print a missing cell as ``-``. Only integer and float dtypes are accepted.
* Persistence: ``flush()``/``close()`` write ``manifest.json`` (keys, files,
  dtypes, lengths, and the caller's `Store.meta`) atomically; a store created
  with ``keep=True`` can be reopened with `Store.load`. The lengths are the
  truth: rows written after the last flush are not part of a reloaded column,
  so a flush is a checkpoint (the profiler flushes after every complete pass,
  and a resumed run rewrites what came after).
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import re
import weakref
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from retrace.errors import RetraceError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DEFAULT_CHUNK_BYTES = 64 << 20
DEFAULT_RELEASE_BYTES = 1 << 20
MANIFEST = "manifest.json"
_PAGE = mmap.PAGESIZE
_WRITTEN_RESERVE = 4 << 20  # the largest growth reserved by writing zeros (see above)
_MANIFEST_VERSION = 1

# The column types, by numpy's type string (what the manifest records, and what readers
# get as `Column.dtype`) -> the item code of `array`/`memoryview`/`struct`, through which
# the replaying process writes them without importing numpy (little-endian machines).
FORMATS = {
    "|i1": "b", "|u1": "B", "<i2": "h", "<u2": "H", "<i4": "i", "<u4": "I",
    "<i8": "q", "<u8": "Q", "<f4": "f", "<f8": "d",
}  # fmt: skip
INT64, FLOAT64 = "<i8", "<f8"  # the types the profiler's columns hold


def typestr(dtype: str | npt.DTypeLike) -> str:
    """numpy's type string of a column type given as one (`INT64`) or as anything numpy
    takes for a dtype (then numpy is imported already); ValueError for other types."""
    if isinstance(dtype, str) and dtype in FORMATS:
        return dtype
    import numpy as np

    found = np.dtype(dtype).str
    if found not in FORMATS:
        raise ValueError(f"store columns hold integers or floats, not {np.dtype(dtype)}")
    return found


def missing_value(dtype: str | npt.DTypeLike) -> Any:
    """The sentinel that stands for "no data" in a column of `dtype`."""
    found = typestr(dtype)
    kind, bits = found[1], int(found[2:]) * 8
    if kind == "f":
        return float("nan")
    if kind == "i":
        return -(1 << (bits - 1))
    return (1 << bits) - 1


def missing_mask(values: np.ndarray) -> np.ndarray:
    """Boolean array: which entries of `values` are the missing sentinel of its dtype."""
    import numpy as np

    if values.dtype.kind in "iuf":
        missing = missing_value(values.dtype)
        return np.isnan(values) if values.dtype.kind == "f" else values == missing
    return np.zeros(values.shape, dtype=bool)


def _disk_error(path: str, action: str, exc: OSError) -> RetraceError:
    reason = exc.strerror or os.strerror(exc.errno or errno.EIO)
    return RetraceError(f"{path}: {action}: {reason} (errno {exc.errno})")


def _page_floor(nbytes: int) -> int:
    return nbytes - nbytes % _PAGE


def _page_ceil(nbytes: int) -> int:
    return -(-nbytes // _PAGE) * _PAGE


class Column:
    """A growable 1-D array in a file of the store; see the module docstring for the policy.

    `append` and `set` are meant to be called once per profiled event: their fast
    path is one comparison against `_limit` (the row where the next growth or
    page release is due) and one item assignment through a typed memoryview of
    the mapping (no numpy: the replay writes columns without importing it).
    Readers get numpy arrays (`view`, `read`).
    """

    __slots__ = (
        "key",
        "path",
        "typestr",
        "format",
        "missing",
        "_itemsize",
        "_chunk_bytes",
        "_release_rows",
        "_fd",
        "_mm",
        "_items",
        "_bytes",
        "_cap",
        "_len",
        "_closed",
        "_next_release",
        "_limit",
        "_synced",
    )

    def __init__(
        self,
        key: str,
        path: str,
        dtype: str | npt.DTypeLike,
        *,
        length: int = 0,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        release_bytes: int = DEFAULT_RELEASE_BYTES,
        create: bool = True,
    ) -> None:
        self.key = key
        self.path = path
        self.typestr = typestr(dtype)
        self.format = FORMATS[self.typestr]  # the item code of `array` and `memoryview`
        self.missing = missing_value(self.typestr)
        self._itemsize = array(self.format).itemsize
        self._chunk_bytes = max(_page_ceil(chunk_bytes), _PAGE)
        self._release_rows = max(release_bytes // self._itemsize, 1)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            self._fd = os.open(path, flags, 0o644)  # not inherited (PEP 446)
        except OSError as exc:
            raise _disk_error(path, "cannot open store column", exc) from None
        self._mm: mmap.mmap | None = None
        self._items = memoryview(array(self.format))  # the mapping, typed
        self._bytes = memoryview(b"")  # the mapping, as bytes
        self._cap = 0
        self._len = length
        self._synced = length  # rows as the last flush left them (-1: one was rewritten since)
        self._closed = False
        size = os.fstat(self._fd).st_size
        if size < length * self._itemsize:
            self.close()
            raise RetraceError(f"{path}: store column is shorter than its manifest says")
        if size:
            self._map(size)
        self._next_release = length + self._release_rows
        self._limit = min(self._cap, self._next_release)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The column's numpy dtype (for readers: numpy is imported here)."""
        import numpy as np

        return np.dtype(self.typestr)

    # --- writing -------------------------------------------------------------------------

    def append(self, value: Any) -> None:
        """Add one row at the end."""
        n = self._len
        if n >= self._limit:
            self._make_room(n)
        try:
            self._items[n] = value
        except TypeError:
            self._items[n] = self._convert(value)
        self._len = n + 1

    def set(self, index: int, value: Any) -> None:
        """Write row `index`, growing the column; rows skipped over read as `missing`."""
        n = self._len
        if index >= n:
            if index >= self._limit:
                self._make_room(index)
            if index > n:
                self._fill(n, index)
            self._len = index + 1
        elif index < 0:
            raise IndexError(f"column {self.key!r}: negative row {index}")
        elif index < self._synced:
            self._synced = -1
        try:
            self._items[index] = value
        except TypeError:
            self._items[index] = self._convert(value)

    def extend(self, values: Any) -> None:
        """Append many rows, copied in release-sized slices so RSS stays bounded. `values`:
        a buffer of the column's item type (bytes from the replay loop, an `array`), a
        numpy array (converted) or a sequence of numbers."""
        self._check_open()
        data = self._as_bytes(values)
        count = len(data) // self._itemsize
        if self._len + count > self._cap:
            self._grow((self._len + count) * self._itemsize)
        step = self._release_rows * self._itemsize
        for start in range(0, len(data), step):
            piece = data[start : start + step]
            at = self._len * self._itemsize
            self._bytes[at : at + len(piece)] = piece
            self._len += len(piece) // self._itemsize
            if self._len >= self._next_release:
                self._release()
        self._limit = min(self._cap, self._next_release)

    def _as_bytes(self, values: Any) -> memoryview:
        """`values` as the bytes of rows of this column's type."""
        if hasattr(values, "dtype"):  # a numpy array: numpy is imported already
            import numpy as np

            values = np.ascontiguousarray(values, dtype=self.typestr).reshape(-1)
        elif not isinstance(values, (bytes, bytearray, memoryview, array)):
            try:
                values = array(self.format, values)
            except TypeError:
                values = array(self.format, map(self._convert, values))
        data = memoryview(values).cast("B")
        if len(data) % self._itemsize:
            raise ValueError(f"column {self.key!r}: {len(data)} bytes are not whole rows")
        return data

    def _convert(self, value: Any) -> Any:
        """A value the typed view refuses (a float in an integer column, a numpy scalar) as
        numpy would store it: truncated toward zero; NaN as the missing sentinel."""
        if self.format in "fd":
            return float(value)
        number = float(value) if not isinstance(value, int) else value
        if number != number:
            return self.missing
        return int(number)

    def _fill(self, start: int, stop: int) -> None:
        """Rows [start, stop) read as missing."""
        self._bytes[start * self._itemsize : stop * self._itemsize] = array(
            self.format, [self.missing]
        ).tobytes() * (stop - start)

    # --- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def view(self) -> np.ndarray:
        """The filled rows as a read-only numpy array on the mapping (no copy)."""
        import numpy as np

        self._check_open()
        if self._mm is None:
            return np.empty(0, self.typestr)
        out = np.frombuffer(self._mm, dtype=self.typestr, count=self._len)
        out.flags.writeable = False
        return out

    def read_list(self, start: int, stop: int) -> list[Any]:
        """Rows [start, stop) (clipped to the length) as a list, their pages then dropped
        from RSS as `read` does (no numpy: for writers of text)."""
        self._check_open()
        stop = min(stop, self._len)
        start = min(max(start, 0), stop)
        rows: list[Any] = self._items[start:stop].tolist()
        self._drop(start, stop)
        return rows

    def read(self, start: int, stop: int) -> np.ndarray:
        """A copy of rows [start, stop) (clipped to the length), then drops their pages from RSS.

        Meant for streaming a whole column in blocks: resident memory stays at
        about one block however long the column is.
        """
        import numpy as np

        self._check_open()
        stop = min(stop, self._len)
        start = min(max(start, 0), stop)
        size = self._itemsize
        out = np.frombuffer(self._bytes[start * size : stop * size], self.typestr).copy()
        self._drop(start, stop)
        return out

    def _drop(self, start: int, stop: int) -> None:
        """Drop the whole pages of rows [start, stop) from RSS (the page cache keeps them)."""
        lo = _page_ceil(start * self._itemsize)
        hi = _page_floor(stop * self._itemsize)
        if self._mm is not None and hi > lo:
            self._mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    def recover(self, length: int) -> None:
        """Count as written the rows up to `length` that a writer which died wrote after the
        last flush (they are in the file; the manifest did not say so yet)."""
        if self._len < length <= self._cap:
            self._len = length

    def flush(self) -> None:
        """Write the column's dirty pages to its file (msync), if a row was written since the
        last flush: an msync waits for the disk (3-8 ms here), and a profile flushes at
        every checkpoint, its new columns empty at the first and unchanged at the last."""
        self._check_open()
        if self._mm is not None and self._synced != self._len:
            try:
                self._mm.flush()
            except OSError as exc:
                raise _disk_error(self.path, "cannot write store column", exc) from None
            self._synced = self._len

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):  # a store dropped without close()
            os.close(self._fd)

    def close(self) -> None:
        """Unmap and close the file; views handed out stay valid until dropped."""
        if self._closed:
            return
        self._closed = True
        self._limit = -1  # every write now takes the slow path, which refuses
        self._unmap()
        os.close(self._fd)

    # --- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"column {self.key!r} of a closed store")

    def _make_room(self, index: int) -> None:
        """Slow path before writing row `index` (>= `_limit`): grow if needed, release pages."""
        self._check_open()
        if index >= self._cap:
            self._grow((index + 1) * self._itemsize)
        self._release()

    def _release(self) -> None:
        """Drop the pages of the rows written so far from RSS (the page cache keeps them)."""
        written = _page_floor(self._len * self._itemsize)
        if self._mm is not None and written:
            self._mm.madvise(mmap.MADV_DONTNEED, 0, written)
        self._next_release = self._len + self._release_rows
        self._limit = min(self._cap, self._next_release)

    def _grow(self, needed: int) -> None:
        old = self._cap * self._itemsize
        new = max(old, _PAGE)
        while new < needed:
            new = new * 2 if new < self._chunk_bytes else new + self._chunk_bytes
        size = os.fstat(self._fd).st_size
        try:
            if new > size:
                _reserve(self._fd, size, new - size)
        except OSError as exc:
            raise _disk_error(self.path, f"cannot grow store column to {new} bytes", exc) from None
        self._map(new)

    def _map(self, nbytes: int) -> None:
        self._unmap()
        try:
            self._mm = mmap.mmap(self._fd, nbytes)
        except OSError as exc:
            raise _disk_error(self.path, "cannot map store column", exc) from None
        self._cap = nbytes // self._itemsize
        self._bytes = memoryview(self._mm)[: self._cap * self._itemsize]
        self._items = self._bytes.cast(self.format)  # type: ignore[call-overload]

    def _unmap(self) -> None:
        self._items.release()
        self._bytes.release()
        self._items = memoryview(array(self.format))
        self._bytes = memoryview(b"")
        self._cap = 0
        if self._mm is not None:
            # BufferError: a view() is still alive; the mapping goes when it does.
            with contextlib.suppress(BufferError):
                self._mm.close()
            self._mm = None


def _remove_unless_kept(path: str, keep: list[bool]) -> None:
    """Remove the store's folder unless kept: its files, which are all it holds, one by one
    (shutil's rmtree where something else is in it: shutil's import, with its compression
    modules', cost a profile's start-up a millisecond or two)."""
    if keep[0]:
        return
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                os.unlink(entry.path)
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def _made_folder(directory: str | None) -> str:
    """A new private folder ``retrace-store-XXXXXXXX`` in `directory`, else in $TMPDIR
    (else /tmp) or, where that fails, wherever tempfile's mkdtemp finds room (tempfile's
    import, with random's and shutil's, costs a profile's start-up 2-3 ms)."""
    parent = directory or os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(parent, f"retrace-store-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            if directory:
                raise _disk_error(directory, "cannot create store directory", exc) from None
            break
    import tempfile

    try:
        return tempfile.mkdtemp(prefix="retrace-store-")
    except OSError as exc:
        raise _disk_error(tempfile.gettempdir(), "cannot create store directory", exc) from None


class Store:
    """A directory of `Column` files, removed on `close()` unless `keep`.

    ``Store(directory=None, keep=False)`` makes ``retrace-store-XXXX`` under
    `directory` (default: the system temporary directory, i.e. $TMPDIR).
    `keep` may be changed until `close()` (e.g. to keep the passes done before
    a failure); a store never closed is removed at exit unless kept, but only
    `close()` or `flush()` writes the manifest that `load` needs.
    `chunk_bytes` and `release_bytes` tune every column (see the module docstring).
    """

    def __init__(
        self,
        directory: str | None = None,
        keep: bool = False,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        release_bytes: int = DEFAULT_RELEASE_BYTES,
        _path: str | None = None,
    ) -> None:
        self._keep = [keep]  # shared with the exit-time finalizer
        self.chunk_bytes = chunk_bytes
        self.release_bytes = release_bytes
        self._columns: dict[str, Column] = {}
        self._files: set[str] = set()
        self.meta: dict[str, Any] = {}  # the caller's JSON data, saved with the manifest
        self._closed = False
        self.path = _made_folder(directory) if _path is None else _path
        self._cleanup = weakref.finalize(self, _remove_unless_kept, self.path, self._keep)

    @property
    def keep(self) -> bool:
        return self._keep[0]

    @keep.setter
    def keep(self, keep: bool) -> None:
        self._keep[0] = keep

    @classmethod
    def load(cls, path: str, keep: bool = True) -> Store:
        """Reopen a kept store from its manifest; columns come back with their lengths."""
        manifest_path = os.path.join(path, MANIFEST)
        try:
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
            if manifest["version"] != _MANIFEST_VERSION:
                raise ValueError(manifest["version"])
            entries = [
                (str(c["key"]), str(c["file"]), typestr(str(c["dtype"])), int(c["length"]))
                for c in manifest["columns"]
            ]
            chunk_bytes = int(manifest["chunk_bytes"])
            release_bytes = int(manifest["release_bytes"])
            meta = dict(manifest.get("meta", {}))
        except OSError as exc:
            raise _disk_error(manifest_path, "cannot read store manifest", exc) from None
        except (ValueError, KeyError, TypeError):
            raise RetraceError(f"{manifest_path}: not a retrace store manifest") from None
        # Kept while opening, so that a failure never deletes what was asked for.
        store = cls(keep=True, chunk_bytes=chunk_bytes, release_bytes=release_bytes, _path=path)
        for key, file, dtype, length in entries:
            store._open(key, file, dtype, length, False)
        store.meta = meta
        store.keep = keep
        return store

    def column(self, key: str, dtype: str | npt.DTypeLike) -> Column:
        """The column named `key`, created empty on first use; `dtype`: `INT64`, `FLOAT64`
        (or another of `FORMATS`), or a numpy dtype."""
        self._check_open()
        col = self._columns.get(key)
        wanted = typestr(dtype)  # (rejects unsupported dtypes before creating a file)
        if col is not None:
            if col.typestr != wanted:
                raise ValueError(f"column {key!r} holds {col.typestr}, not {wanted}")
            return col
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:100] or "_"
        name, n = f"{base}.bin", 1
        while name in self._files:
            n += 1
            name = f"{base}~{n}.bin"
        with contextlib.suppress(FileNotFoundError):  # a writer's that died after the last flush
            os.unlink(os.path.join(self.path, name))
        return self._open(key, name, wanted, 0, True)

    def lengths(self) -> list[int]:
        """Every column's length, in the order of the manifest (creation)."""
        return [len(col) for col in self._columns.values()]

    def __getitem__(self, key: str) -> Column:
        return self._columns[key]

    def __contains__(self, key: object) -> bool:
        return key in self._columns

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def manifest(self) -> dict[str, Any]:
        """What `load` needs: every column's key, file name, dtype and length, and `meta`."""
        return {
            "version": _MANIFEST_VERSION,
            "chunk_bytes": self.chunk_bytes,
            "release_bytes": self.release_bytes,
            "columns": [
                {
                    "key": key,
                    "file": os.path.basename(col.path),
                    "dtype": col.typestr,
                    "length": len(col),
                }
                for key, col in self._columns.items()
            ],
            "meta": self.meta,
        }

    def flush(self) -> None:
        """msync every column and (re)write manifest.json atomically."""
        self._check_open()
        for col in self._columns.values():
            col.flush()
        self.write_manifest()

    def write_manifest(self) -> None:
        """(Re)write manifest.json atomically (a new file renamed over the old one)."""
        target = os.path.join(self.path, MANIFEST)
        tmp = target + ".tmp"
        try:
            # one line: json.dumps without indent is the C encoder (20x faster than dump's
            # chunks; a profile writes the manifest at every checkpoint)
            text = json.dumps(self.manifest(), separators=(",", ":"))
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            os.replace(tmp, target)
        except OSError as exc:
            raise _disk_error(target, "cannot write store manifest", exc) from None

    def close(self, flush: bool = True) -> None:
        """Flush (unless told not to: the last flush stays the checkpoint) and keep, or
        delete the directory; a second call does nothing."""
        if self._closed:
            return
        try:
            if self.keep and flush:
                self.flush()
        finally:
            self._closed = True
            for col in self._columns.values():
                col.close()
            self._cleanup()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"store {self.path} is closed")

    def _open(self, key: str, name: str, dtype: str, length: int, create: bool) -> Column:
        col = Column(
            key,
            os.path.join(self.path, name),
            dtype,
            length=length,
            chunk_bytes=self.chunk_bytes,
            release_bytes=self.release_bytes,
            create=create,
        )
        self._columns[key] = col
        self._files.add(name)
        return col


def _reserve(fd: int, offset: int, length: int) -> None:
    """Reserve `length` bytes of the file at `offset` on disk (ENOSPC now, not SIGBUS
    later): by writing zeros up to `_WRITTEN_RESERVE`, else with `posix_fallocate`."""
    if length > _WRITTEN_RESERVE:
        os.posix_fallocate(fd, offset, length)
        return
    zeros = memoryview(bytes(length))
    while zeros:
        written = os.pwrite(fd, zeros, offset)
        zeros, offset = zeros[written:], offset + written
