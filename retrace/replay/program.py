"""A compiled trace: the ops one replay pass runs, and what each one is.

`Program` wraps the C code object (`_vm.Code`): its ops are direct calls of
the driver's functions or Python entries ``(function, args)``, with per-op
metadata (trace call number, function, profiling `Row`, whether glGetError
may follow) in flat arrays. `compiler.py` fills it; the replayer runs it; the
profiler brackets its ops or has the loop measure events itself.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from retrace.replay import _vm

Entry = tuple[Callable[..., Any], tuple[Any, ...]]


class Row(enum.IntEnum):
    """What an entry is to the profiler (glretrace's rules for the calls and draw-calls tables)."""

    NONE = 0  # window-system calls, memcpy, the replayer's own work, calls inside display lists
    CALL = 1  # a call row
    DRAW = 2  # a call row that is also a draw-call row
    BEGIN = 3  # glBegin: opens a draw row that glEnd closes
    END = 4  # glEnd
    LIST_END = 5  # glEndList: a call row, run while GL still compiles the list it closes


# an event the loop measured (`Program.take_events`): ns of perf_counter_ns's clock,
# GL timestamps, samples passed
EVENT_DTYPE = np.dtype(
    [(f, "<i8") for f in ("cpu_start", "cpu_end", "gpu_start", "gpu_end", "pixels")]
)
NOT_MEASURED = np.iinfo(np.int64).min


class Marks(enum.IntEnum):
    """Which per-op flag selects the ops a pass brackets with callbacks (`Program.bracket`)."""

    NONE = 0
    ROWS = 1  # profiling rows: the mark is the op's Row
    CHECKABLE = 2  # GL calls glGetError may follow: the mark is 1


class Program:
    """A compiled trace: the ops a replay pass runs, and what each one is.

    Per-op metadata (call number, function, Row, checkable) lives in the C
    code object as flat arrays; only ops that are Python entries cost a Python
    object.
    """

    def __init__(self) -> None:
        self.code = _vm.Code()
        self.entries: list[Entry] = []  # the Python entries of ops that are not direct calls
        self.names: list[str] = []  # function names
        self.frame_ends: list[int] = []  # op indices that end a frame
        self.skipped: Counter[str] = Counter()  # function -> calls not issued
        self.reasons: dict[str, str] = {}  # function -> why
        self._name_index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.code)

    def name_id(self, name: str) -> int:
        """The index of a function name in `names` (added on first use)."""
        index = self._name_index.get(name)
        if index is None:
            index = self._name_index[name] = len(self.names)
            self.names.append(name)
        return index

    def add(
        self, entry: Entry, call_no: int, name_id: int, row: int = 0, checkable: bool = False
    ) -> None:
        """Append an op that calls a Python entry."""
        self.code.add_py(len(self.entries), call_no, name_id, row, checkable)
        self.entries.append(entry)

    def run(self, start: int, end: int | None = None) -> int:
        """Run ops [start, end); returns where it stopped."""
        return self.code.run(start, len(self.code) if end is None else end, self.entries)

    def bracket(
        self,
        marks: Marks = Marks.NONE,
        before: Callable[[int, int], None] | None = None,
        after: Callable[[int, int], None] | None = None,
    ) -> None:
        """From the next op on, call `before(i, mark)` and `after(i, mark)` around every op
        whose mark is not zero (`Marks.NONE`: no callbacks)."""
        self.code.bracket(int(marks), before, after)

    def measure_events(
        self,
        calls: tuple[bool, bool],
        draws: tuple[bool, bool],
        queries: tuple[int, ...] | None,
        on_full: Callable[[], None],
    ) -> None:
        """From the next op on, have the loop measure every call and draw-call event itself
        (in C: no Python per event): the clock always, and per kind (gpu times, pixels) GL
        timestamp and samples-passed queries made with `queries`, the addresses of the
        current context's glGenQueries, glDeleteQueries, glQueryCounter, glBeginQuery,
        glEndQuery and glGetQueryObjectui64v. `on_full` is called when 1,024 events have
        ended since the last `take_events`. Called again after a context switch, with that context's
        functions."""
        self.code.events(*calls, *draws, queries, on_full)

    def stop_events(self) -> None:
        """Stop measuring events (what was not taken is dropped)."""
        self.code.events(None)

    def take_events(self, all: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(calls, draws) measured, in event order, as `EVENT_DTYPE` rows (`NOT_MEASURED`
        where nothing was): those that had ended at the previous take, which the GPU is done
        with by now, or with `all` every one. Reads their queries in the context they ran
        in, which must be current, and frees them for reuse."""
        calls, draws = self.code.take_events(all)
        return np.frombuffer(calls, EVENT_DTYPE), np.frombuffer(draws, EVENT_DTYPE)

    def forget_queries(self) -> None:
        """Delete the query objects made for events; the context they belong to must be
        current (before it changes or goes away; `take_events` first)."""
        self.code.forget_queries()

    def where(self, i: int) -> str:
        """'CALL_NO: FUNCTION' of op i, for messages."""
        call_no, name_id, _, _ = self.code.meta(i)
        return f"{call_no}: {self.names[name_id]}"

    def column(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """A copy of ops [start, stop) of one per-op array: call_nos (int64), name_ids
        (uint32), rows or checkable (uint8)."""
        dtype = {"call_nos": np.int64, "name_ids": np.uint32}.get(name, np.uint8)
        stop = len(self.code) if stop is None else stop
        return np.frombuffer(self.code.column(name, start, stop), dtype)
