"""What a profiling run keeps so that an interruption, a kill or a driver crash loses nothing.

Two records, for two kinds of ending:

* The checkpoint, in the store's manifest (`Store.meta`, written atomically with
  the column lengths): the `Job` (trace, its size and mtime, the selection and
  options) from the start, then after every complete run of a pass the next
  (pass, run) to do and the `Profile` description. The column lengths there
  are those of complete passes only, so `retrace profile --resume STORE`
  re-measures exactly what is missing, and a SIGKILL of everything loses at
  most the pass in progress.
* `Live`: what the replay child publishes at every frame end in memory shared
  with its parent (no syscall): frames ended, every column's length, the
  function names compiled so far. When the child crashes, the parent adds what
  it measured before the crash to the checkpoint's tables.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrace.errors import RetraceError
from retrace.profile.options import ProfileOptions


@dataclass(frozen=True)
class Job:
    """The options a profile was started with, the trace it measures and where its tables go."""

    trace: str  # absolute
    size: int
    mtime_ns: int
    output: str | None  # absolute, or None for standard output
    options: ProfileOptions

    @classmethod
    def start(cls, trace: str, options: ProfileOptions, output: str | None) -> Job:
        trace = os.path.abspath(trace)
        size, mtime_ns = _identity(trace)
        return cls(trace, size, mtime_ns, os.path.abspath(output) if output else None, options)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "output": self.output,
            **self.options.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> Job:
        try:
            options = ProfileOptions.from_json(data)
            return cls(data["trace"], data["size"], data["mtime_ns"], data["output"], options)
        except (KeyError, TypeError, AttributeError):
            raise RetraceError(f"{where}: not a profile this retrace can resume") from None

    def check_trace(self, store: str) -> None:
        """Refuse to resume on a trace that changed since the run began."""
        if _identity(self.trace) != (self.size, self.mtime_ns):
            raise RetraceError(
                f"{self.trace} changed since the profile in {store} began (size or modification "
                "time differ): its passes would not line up; start a new profile"
            )


def _identity(trace: str) -> tuple[int, int]:
    try:
        st = os.stat(trace)
    except OSError as e:
        raise RetraceError(f"{trace}: cannot open: {e.strerror}") from None
    return st.st_size, st.st_mtime_ns


class Live:
    """Frame-boundary progress shared by a profiling child with its parent (anonymous
    MAP_SHARED memory made before fork): written by plain stores, read after the child died."""

    _HEAD = 2  # words: pass, frames ended in it
    _COLUMNS = 4096  # lengths of the first columns of the store, in creation order
    _NAMES = 1 << 18  # bytes: the function names, newline-separated

    def __init__(self) -> None:
        words = self._HEAD + self._COLUMNS + 1
        self._mm = mmap.mmap(-1, words * 8 + self._NAMES)
        self._words = memoryview(self._mm)[: words * 8].cast("q")  # native int64
        self._words[:] = array("q", [-1]) * words
        self._names_at = words * 8
        self._names = 0

    def publish(
        self, pass_index: int, frames: int, lengths: Sequence[int], names: list[str]
    ) -> None:
        """At a frame end: which pass, how many frames ended, every column's length."""
        w = self._words
        w[0], w[1] = pass_index, frames
        count = min(len(lengths), self._COLUMNS)
        w[self._HEAD : self._HEAD + count] = array("q", lengths[:count])
        if len(names) != self._names:  # new functions compiled (rare): rewrite the table
            data = "\n".join(names).encode()
            if len(data) <= self._NAMES:  # else the last table that fitted stays
                self._mm[self._names_at : self._names_at + len(data)] = data
                w[-1] = len(data)
            self._names = len(names)

    @property
    def pass_index(self) -> int:
        """The pass the child was in at its last frame end; -1 if it never ended one."""
        return int(self._words[0])

    @property
    def frames(self) -> int:
        return int(self._words[1])

    def length(self, column: int) -> int:
        return int(self._words[self._HEAD + column]) if column < self._COLUMNS else -1

    @property
    def names(self) -> list[str]:
        size = int(self._words[-1])
        if size < 0:
            return []
        return self._mm[self._names_at : self._names_at + size].decode().split("\n")
