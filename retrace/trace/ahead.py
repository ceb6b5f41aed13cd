"""Reading ahead: a trace's next batch is decompressed and scanned on a thread of its own
while the caller compiles and replays the one before.

A first replay pass costs reading plus compiling plus the driver's work when they take
turns; with the reading on another core it costs about compiling plus the larger of
reading and the driver. It needs the GIL only briefly: the scanner lets it go while it
scans (`_scanner.c`), and the replay loop while it runs direct calls (`_vm.c`,
`Code.share_gil`). Compiling stays on the caller's thread: it makes Python objects over
the replay's live state, and on another thread it would contend for the GIL with the
loop's own Python work at every call that needs it.

One batch is read ahead, not more: peak memory grows by a batch or two. On a machine (or
an affinity mask) of one core reading ahead only adds thread switches, so there it is off.
`RETRACE_READ_AHEAD=0` turns it off anywhere, `=1` on anywhere; replays are identical
either way (the same batches, compiled and run in the same order).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Generator, Iterator
from typing import Generic, TypeVar, cast

from retrace import cores

T = TypeVar("T")

_END = object()  # after the source's last item


def wanted() -> bool:
    """Whether to read ahead: `RETRACE_READ_AHEAD` 0 or 1 says, else where it can pay (more
    than one core to run on)."""
    switch = os.environ.get("RETRACE_READ_AHEAD", "").strip()
    if switch in ("0", "1"):
        return switch == "1"
    return overlap_pays()


def overlap_pays() -> bool:
    """Whether this process has more than one core to run on, so that work on a thread
    of its own can overlap the caller's (reading ahead; the driver's loading ahead)."""
    return cores.usable() > 1


class ReadAhead(Generic[T]):
    """Iterates `source` on a thread of its own, one item ahead of the caller; what
    `source` raises is raised to the caller after the items before it. `close()` stops
    the thread early (closing `source` there)."""

    def __init__(self, source: Generator[T, None, None]) -> None:
        self._queue: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(1)
        self._stopping = False
        self.waited = 0.0  # seconds the caller waited for an item
        self.stalled = 0.0  # seconds the thread waited for the caller to take one
        self.busy = 0.0  # CPU seconds of the thread
        self._thread = threading.Thread(
            target=self._produce, args=(source,), name="retrace-read-ahead", daemon=True
        )
        self._thread.start()

    def _produce(self, source: Generator[T, None, None]) -> None:
        start = time.thread_time()
        end: tuple[object, BaseException | None] = (_END, None)
        try:
            for item in source:
                self._put((item, None))
                if self._stopping:
                    return
        except BaseException as e:  # handed to the caller, which raises it
            end = (_END, e)
        finally:
            source.close()
            self.busy = time.thread_time() - start
        if not self._stopping:
            self._put(end)

    def _put(self, item: tuple[object, BaseException | None]) -> None:
        start = time.perf_counter()
        self._queue.put(item)
        self.stalled += time.perf_counter() - start

    def __iter__(self) -> Iterator[T]:
        while True:
            start = time.perf_counter()
            item, error = self._queue.get()
            self.waited += time.perf_counter() - start
            if error is not None:
                self._thread.join()
                raise error
            if item is _END:
                self._thread.join()
                return
            yield cast(T, item)  # (every item before _END is the source's)

    def close(self) -> None:
        """Stop reading: the thread ends after the item it is reading."""
        self._stopping = True
        with contextlib.suppress(queue.Empty):  # room for its last item, if it waits
            self._queue.get_nowait()
        self._thread.join()
