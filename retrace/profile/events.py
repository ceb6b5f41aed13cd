"""The events of one pass: counted at every boundary, and measured where the pass asks.

Frames are bracketed at SwapBuffers. Calls and draw calls are measured by the
replay loop itself where the pass's backend allows it (`NativeEvents`: clocks
and GL queries in C, no Python per event), else by Python callbacks around
their ops, only in passes that measure them, so other passes run the bare C
loop. A glBegin..glEnd block is one draw, counted at glBegin; calls compiled
into display lists are not events, as glretrace classifies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrace.backends.base import MetricBackend
from retrace.errors import RetraceError
from retrace.profile.session import Session
from retrace.replay.program import Marks, Program, Row
from retrace.vocabulary import Boundary, NativeEvents

CALL, DRAWCALL, FRAME = Boundary.CALL, Boundary.DRAWCALL, Boundary.FRAME
# the ops that start an event of each boundary
EVENT_ROWS = {
    CALL: (Row.CALL, Row.LIST_END, Row.DRAW, Row.BEGIN),
    DRAWCALL: (Row.DRAW, Row.BEGIN),
}


class ProfileError(RetraceError):
    """The profile cannot be trusted (passes disagree); names where."""


@dataclass
class PassPlan:
    """One replay: which backend's pass it runs and the boundaries that pass measures."""

    backend: MetricBackend
    index: int  # the backend's own pass number
    boundaries: frozenset[Boundary]


def event_counts(program: Program, end: int | None = None) -> tuple[int, int]:
    """(call events, draw events) among the ops before `end` (all when None)."""
    rows = program.column("rows", 0, end)
    counts = np.bincount(rows, minlength=len(Row))
    calls, draws = (int(counts[list(EVENT_ROWS[b])].sum()) for b in (CALL, DRAWCALL))
    return calls, draws


class EventMeter:
    """Counts one pass's events per boundary and has its backend measure them."""

    def __init__(self, program: Program, session: Session) -> None:
        self.program, self.session = program, session
        self.counts = dict.fromkeys(Boundary, 0)  # events seen so far this pass
        self.plan: PassPlan | None = None
        self._bracketed = False  # whether callbacks count the calls as they run
        # measured by the loop: what per boundary, and the number of the next event
        # whose measurement goes to the backend
        self._native: dict[Boundary, NativeEvents] = {}
        self._next_event: dict[Boundary, int] = {}

    def reset(self) -> None:
        """Before a pass replays: nothing counted, nothing measured yet."""
        self.counts = dict.fromkeys(Boundary, 0)
        self.plan = None
        self._bracketed = False
        self._native = {}

    def start(self, plan: PassPlan | None) -> None:
        """At the pass's first current context (its backend's pass begun): measure from
        here on, in the replay loop where the backend allows it, else with callbacks."""
        self.plan = plan
        if plan is None:
            return
        if FRAME in plan.boundaries:
            plan.backend.begin_query(FRAME, 0)
        measured = [b for b in (CALL, DRAWCALL) if b in plan.boundaries]
        native = {b: plan.backend.native_events(b) for b in measured}
        if measured and all(n is not None for n in native.values()):
            self._measure_natively({b: n for b, n in native.items() if n is not None})
        elif measured:
            self._bracket_calls(plan)

    def frame_end(self) -> None:
        self._collect()
        plan = self.plan
        if plan is not None and FRAME in plan.boundaries:
            event = self.counts[FRAME]
            plan.backend.end_query(FRAME, event)
            plan.backend.begin_query(FRAME, event + 1)
        self.counts[FRAME] += 1

    def before_switch(self) -> None:
        if self.plan is not None:
            if self._native:  # read and delete the loop's queries while their context is current
                self._collect(everything=True)
                self.program.forget_queries()
            self.plan.backend.pause_pass()

    def after_switch(self) -> None:
        if self.plan is not None:
            self.plan.backend.continue_pass()
            if self._native and not self._configure():  # the new context's functions
                raise ProfileError(
                    "the trace switches to a context without GL query objects: its calls "
                    "cannot be measured"
                )

    def finish(self) -> None:
        """After the replay (also one that failed): the loop stops measuring."""
        self._native = {}
        self.program.stop_events()

    def end(self) -> dict[Boundary, int]:
        """After a complete replay: the last events measured and counted, the backend's
        pass ended; returns the events seen per boundary (the trailing, partial frame
        included)."""
        if self._native:
            self._collect(everything=True)
            self.program.forget_queries()
        self.finish()
        if not self._bracketed:
            self.counts[CALL], self.counts[DRAWCALL] = event_counts(self.program)
        if self.plan is not None:
            if FRAME in self.plan.boundaries:
                self.plan.backend.end_query(FRAME, self.counts[FRAME])
            self.plan.backend.end_pass()
        self.counts[FRAME] += 1  # the trailing, partial frame
        return self.counts

    # --- calls and draws measured by the loop --------------------------------------------------

    def _measure_natively(self, native: dict[Boundary, NativeEvents]) -> None:
        """Have the loop measure calls and draws from the op running now on; `_collect`
        hands what it measured to the backend."""
        calls, draws = event_counts(self.program, self.program.code.position)
        self._next_event = {CALL: calls, DRAWCALL: draws}
        self._native = native
        if not self._configure():
            self._native = {}
            assert self.plan is not None
            self._bracket_calls(self.plan)

    def _configure(self) -> bool:
        """Tell the loop what to measure, with the current context's query functions;
        False when the context lacks one (the caller brackets in Python instead)."""
        none = NativeEvents()
        call = self._native.get(CALL) or none
        draw = self._native.get(DRAWCALL) or none
        queries = None
        if call != none or draw != none:
            queries = self.session.query_functions()
            if not all(queries):
                return False
        self.program.measure_events(
            (call.gpu_times, call.pixels), (draw.gpu_times, draw.pixels), queries, self._collect
        )
        return True

    def _collect(self, everything: bool = False) -> None:
        """Pass what the loop measured to the backend: the events that had ended at the
        last collection (a frame or 1,024 events ago: reading them does not stall the
        GPU), or `everything`."""
        if not self._native or self.plan is None:
            return
        calls, draws = self.program.take_events(everything)
        for boundary, events in ((CALL, calls), (DRAWCALL, draws)):
            if boundary in self._native and len(events):
                self.plan.backend.native_results(boundary, self._next_event[boundary], events)
            self._next_event[boundary] += len(events)

    # --- calls and draws measured by callbacks -------------------------------------------------

    def _bracket_calls(self, plan: PassPlan) -> None:
        """Bracket the calls and draws from the op running now on with the backend's
        queries; those before it (none, unless GL calls came before any context) are
        counted as events without queries."""
        counts = self.counts
        counts[CALL], counts[DRAWCALL] = event_counts(self.program, self.program.code.position)
        self._bracketed = True
        backend, session = plan.backend, self.session
        calls, draws = CALL in plan.boundaries, DRAWCALL in plan.boundaries
        begin_row, end_row, list_end_row = int(Row.BEGIN), int(Row.END), int(Row.LIST_END)
        draw_rows = (int(Row.DRAW), begin_row, end_row)

        def before(i: int, row: int) -> None:
            if row == end_row:  # glEnd closes the draw glBegin opened
                return
            session.closing_list = row == list_end_row
            if calls:
                backend.begin_query(CALL, counts[CALL])
            if draws and row in draw_rows:
                backend.begin_query(DRAWCALL, counts[DRAWCALL])

        def after(i: int, row: int) -> None:
            if row == begin_row:
                return
            draw = row in draw_rows
            if draws and draw:
                backend.end_query(DRAWCALL, counts[DRAWCALL])
            if calls:
                backend.end_query(CALL, counts[CALL])
            counts[CALL] += 1
            if draw:
                counts[DRAWCALL] += 1

        self.program.bracket(Marks.ROWS, before, after)
