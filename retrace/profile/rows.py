"""The rows of the calls and draw-calls tables: call number, function, program and frame
of every event, stored during the first run.

They come from the compiled program (the same in every pass), except the program
in use, which is logged at each change in the first run. They are stored a
chunk of ops at a time, at frame ends too, so memory stays flat on long traces
and a crash keeps the rows before it.
"""

from __future__ import annotations

import bisect
import time

from retrace.profile.events import EVENT_ROWS
from retrace.profile.results import CONTEXT, META_FIELDS, meta_column
from retrace.replay.program import Program
from retrace.vocabulary import Boundary
from retrace.writer.store import Store


class EventRows:
    """Per-event metadata of the tables asked for, stored as the first run goes."""

    def __init__(self) -> None:
        self.tables: list[Boundary] = []  # the event tables asked for (known once planned)
        self.done = 0  # ops whose rows are stored
        self._stored_at = 0.0  # when they were stored last (perf_counter)
        # (op, value) at every change of the program in use and of the context current (its
        # number in `Profile.contexts`), in the first run
        self._logs: dict[str, list[tuple[int, int]]] = {"program": [], CONTEXT: []}

    def plan(self, tables: list[Boundary]) -> None:
        self.tables = [b for b in (Boundary.CALL, Boundary.DRAWCALL) if b in tables]

    def create(self, store: Store) -> None:
        """Make the (empty) columns, so that a checkpoint lists them from the start."""
        for boundary in self.tables:
            for what in (*META_FIELDS, CONTEXT):
                meta_column(store, boundary, what)

    @property
    def programs(self) -> list[tuple[int, int]]:
        """(op, traced program) from which on the calls run with that program in use: what
        the replay logs in the first pass (`ReplayState.log_programs`)."""
        return self._logs["program"]

    def context_changed(self, op: int, context: int) -> None:
        """From op `op` on, the calls run in context number `context`."""
        self._logs[CONTEXT].append((op, context))

    def store_soon(self, store: Store, program: Program, end: int) -> None:
        """At a frame end: store the rows of ops before `end` if as many wait as are
        stored, or 0.1 s has passed (O(log n) + 10/s stores, as a crash may come at any
        frame)."""
        now = time.perf_counter()
        if end - self.done >= self.done or now - self._stored_at >= 0.1:
            self._stored_at = now
            self.store_until(store, program, end)

    def store_until(self, store: Store, program: Program, end: int, chunk: int = 1 << 16) -> None:
        """Store the rows of the events among ops [done, end)."""
        if not self.tables or end <= self.done:  # nothing to store (yet): ops stay waiting
            return
        first, self.done = self.done, end
        # only the frame ends and program changes that matter to ops [first, end): called
        # at every frame end, this must not cost more as the trace goes on
        ends = program.frame_ends
        before = bisect.bisect_left(ends, first)  # frames that ended before op `first`
        frame_ends = ends[before : bisect.bisect_left(ends, end)]
        logs = tuple(_changes(log, first, end) for log in self._logs.values())
        names = ("call_no", "name", "frame", *self._logs)
        for start in range(first, end, chunk):
            stop = min(start + chunk, end)
            for boundary in self.tables:
                columns = program.event_rows(
                    start, stop, EVENT_ROWS[boundary], frame_ends, before, logs
                )
                for what, values in zip(names, columns, strict=True):
                    meta_column(store, boundary, what).extend(values)


def _changes(log: list[tuple[int, int]], first: int, end: int) -> list[tuple[int, int]]:
    """The (op, value) changes of `log` that matter to ops [first, end) (only those: called
    at every frame end, this must not cost more as the trace goes on). The value in use at
    an op is that of the last change in an op before it (a glUseProgram's own row shows the
    program it replaces; a context switch happens in an op that is no event), 0 before the
    first."""
    since = max(bisect.bisect_left(log, (first,)) - 1, 0)
    return log[since : bisect.bisect_left(log, (end,))]
