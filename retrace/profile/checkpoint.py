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
  function names compiled so far, and the events the replay loop measured and
  read but the profiler has not moved into the store yet (`EventRing`). When the
  child crashes, the parent adds what it measured before the crash to the
  checkpoint's tables.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

import retrace.replay.contain as contain
from retrace.errors import RetraceError
from retrace.profile.options import ProfileOptions


class Job(NamedTuple):
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


class EventRing:
    """Where the replay loop puts the events it measured and read (`_vm.c`, "the ring") until
    the profiler moves them into the store's columns, which it does when the ring is full
    and at the end of the pass, not at every frame end (that cost a profile of short
    frames more Python than the replay itself). In `Live`'s memory, which the parent
    shares: after a driver crash the parent writes what the ring holds into the columns
    (`recover`), so a crash keeps every event read, as when they were moved at every
    frame end.

    Layout: `_WORDS` int64 words of the profiler's own (per kind of event: the event
    number of the ring's first record, how many columns take its records, and those
    columns: their index in the store, the record fields of their value), then the loop's
    part: `RING_HEAD` bytes of counts, then `capacity` records per kind."""

    KINDS = 3  # calls, draws, frames: `_vm.c`'s order
    COLUMNS = 16  # per kind at most (a backend's metrics)
    _WORDS = 256
    _BASE, _COUNT, _SPECS = 0, KINDS, 2 * KINDS  # word offsets: base, columns, (index, end, start)
    CAPACITY = 2048  # records of each kind
    _LOOP_HEAD, _RECORD = 64, 96  # RING_HEAD and EVENT_SIZE (checked against `_vm` in the child)
    BYTES = _WORDS * 8 + _LOOP_HEAD + KINDS * CAPACITY * _RECORD

    def __init__(self, memory: memoryview | None = None) -> None:
        """`memory`: BYTES of `Live`'s (None: private memory, for a profile with no parent)."""
        if memory is None:
            memory = memoryview(mmap.mmap(-1, self.BYTES))
        self.shared = memory
        self._words = memory[: self._WORDS * 8].cast("q")
        self.loop_part = memory[self._WORDS * 8 :]  # what `Program.measure_events` takes
        self._counts = self.loop_part[: self._LOOP_HEAD].cast("q")

    def start(
        self, columns: Sequence[Sequence[tuple[int, int, int]]], bases: Sequence[int]
    ) -> None:
        """A pass measures natively from here: per kind, the first record's event number and
        the (store index, end field, start field or -1) of the columns its records go to."""
        from retrace.replay.program import EVENT_SIZE, RING_HEAD

        assert (RING_HEAD, EVENT_SIZE) == (self._LOOP_HEAD, self._RECORD)
        w = self._words
        for k in range(self.KINDS):
            specs = list(columns[k])[: self.COLUMNS]
            for i, spec in enumerate(specs):
                at = self._SPECS + 3 * (k * self.COLUMNS + i)
                w[at : at + 3] = array("q", spec)
            w[self._BASE + k], w[self._COUNT + k] = bases[k], len(specs)

    def stop(self) -> None:
        """The pass measures no more: nothing here is for its columns."""
        self._words[self._COUNT : self._COUNT + self.KINDS] = array("q", [0] * self.KINDS)
        self._counts[: self.KINDS] = array("q", [0] * self.KINDS)

    def take(self, kind: int) -> bytes:
        """The records of `kind` held, in event order (`moved` once they are in the store)."""
        n = self._counts[kind]
        at = self._LOOP_HEAD + kind * self.CAPACITY * self._RECORD
        return bytes(self.loop_part[at : at + n * self._RECORD])

    def moved(self, kind: int, count: int) -> None:
        """The `count` records `take` gave are in the store (and its lengths published)."""
        self._words[self._BASE + kind] += count
        self._counts[kind] = 0

    def recover(self, store: Any) -> None:
        """(the parent, after the child died) Write the records the ring holds into the
        store's columns, at their events' rows."""
        from retrace.replay._vm import event_values

        keys = list(store)
        w = self._words
        for k in range(self.KINDS):
            records = self.take(k)
            base = w[self._BASE + k]
            for i in range(w[self._COUNT + k]):
                at = self._SPECS + 3 * (k * self.COLUMNS + i)
                index, end, start = w[at : at + 3]
                if not records or index >= len(keys):
                    continue
                column = store[keys[index]]
                values = memoryview(event_values(records, end, start, column.missing))
                for row, value in enumerate(values.cast(column.format), base):
                    column.set(row, value)


class Live:
    """Frame-boundary progress shared by a profiling child with its parent (memory shared
    with the child, `contain.SharedMemory`): written by plain stores, read after the child
    died. It pickles as that memory, for a child handed it (`contain.spare_child`)."""

    _HEAD = 2  # words: pass, frames ended in it
    _COLUMNS = 4096  # lengths of the first columns of the store, in creation order
    _NAMES = 1 << 18  # bytes: the function names, newline-separated

    def __init__(self, memory: contain.SharedMemory | None = None) -> None:
        words = self._HEAD + self._COLUMNS + 1
        if memory is None:  # (else the parent's, unpickled in the child: as it made it)
            memory = contain.SharedMemory(words * 8 + self._NAMES + EventRing.BYTES)
            memory.view[: words * 8].cast("q")[:] = array("q", [-1]) * words
        self._memory = memory
        self._mm = memory.view
        self._words = self._mm[: words * 8].cast("q")  # native int64
        self._names_at = words * 8
        self._names = 0
        self.ring = EventRing(self._mm[words * 8 + self._NAMES :])

    def __reduce__(self) -> tuple[object, ...]:
        return (Live, (self._memory,))

    def publish(
        self,
        pass_index: int,
        frames: int,
        lengths: Sequence[int] | None = None,
        names: list[str] | None = None,
    ) -> None:
        """At a frame end: which pass, how many frames ended, every column's length and the
        names of the functions of the event rows (None: unchanged since published)."""
        w = self._words
        w[0], w[1] = pass_index, frames
        if lengths is not None:
            self.publish_lengths(lengths)
        if names is not None and len(names) != self._names:  # new functions (rare): rewrite
            data = "\n".join(names).encode()
            if len(data) <= self._NAMES:  # else the last table that fitted stays
                self._mm[self._names_at : self._names_at + len(data)] = data
                w[-1] = len(data)
            self._names = len(names)

    def publish_lengths(self, lengths: Sequence[int]) -> None:
        """Every column's length."""
        count = min(len(lengths), self._COLUMNS)
        self._words[self._HEAD : self._HEAD + count] = array("q", lengths[:count])

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
        return bytes(self._mm[self._names_at : self._names_at + size]).decode().split("\n")
