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

import numpy as np

from retrace.profile.events import EVENT_ROWS
from retrace.profile.results import META_FIELDS, meta_key
from retrace.replay.program import Program
from retrace.vocabulary import Boundary
from retrace.writer.store import Column, Store


class EventRows:
    """Per-event metadata of the tables asked for, stored as the first run goes."""

    def __init__(self) -> None:
        self.tables: list[Boundary] = []  # the event tables asked for (known once planned)
        self.done = 0  # ops whose rows are stored
        self._stored_at = 0.0  # when they were stored last (perf_counter)
        # (op, traced program) at every change of the program in use, in the first run
        self._programs: list[tuple[int, int]] = []

    def plan(self, tables: list[Boundary]) -> None:
        self.tables = [b for b in (Boundary.CALL, Boundary.DRAWCALL) if b in tables]

    def create(self, store: Store) -> None:
        """Make the (empty) columns, so that a checkpoint lists them from the start."""
        for boundary in self.tables:
            for what in META_FIELDS:
                _column(store, boundary, what)

    def program_changed(self, op: int, program: int) -> None:
        self._programs.append((op, program))

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
        if not self.tables:  # nothing to store (yet): ops stay waiting
            return
        first, self.done = self.done, end
        if first >= end:
            return
        # only the frame ends and program changes that matter to ops [first, end): called
        # at every frame end, this must not cost more as the trace goes on
        ends = program.frame_ends
        before = bisect.bisect_left(ends, first)  # frames that ended before op `first`
        frame_ends = np.asarray(ends[before : bisect.bisect_left(ends, end)], np.int64)
        changes = self._programs
        since = max(bisect.bisect_left(changes, (first,)) - 1, 0)
        log = changes[since : bisect.bisect_left(changes, (end,))] or [(-1, 0)]
        log_ops = np.asarray(log, np.int64).reshape(-1, 2)
        for start in range(first, end, chunk):
            stop = min(start + chunk, end)
            ops = np.arange(start, stop)
            rows = program.column("rows", start, stop)
            call_nos = program.column("call_nos", start, stop)
            name_ids = program.column("name_ids", start, stop)
            # an event's program is the one in use when it started: the last change in an
            # op before it (a glUseProgram's own row shows the program it replaces)
            last = np.searchsorted(log_ops[:, 0], ops, side="left") - 1
            programs = np.where(last >= 0, log_ops[np.maximum(last, 0), 1], 0)
            frames = before + np.searchsorted(frame_ends, ops, side="left")
            for boundary in self.tables:
                mask = np.isin(rows, EVENT_ROWS[boundary])
                for what, values in (
                    ("call_no", call_nos),
                    ("name", name_ids),
                    ("program", programs),
                    ("frame", frames),
                ):
                    _column(store, boundary, what).extend(values[mask])


def _column(store: Store, boundary: Boundary, what: str) -> Column:
    return store.column(meta_key(boundary, what), np.int64)
