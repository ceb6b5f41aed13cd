"""The events of one pass: counted at every boundary, and measured where the pass asks.

A pass's backend measures its events in one of two ways (`MetricBackend`):

- natively (`native_events`; the `opengl` backend): the replay loop measures
  every call and draw call itself, and the frames this layer delimits at frame
  ends, in C with no Python per event, reads the records at frame ends and every
  `READ_EVERY` events (one take late: the GPU is done with them) into an
  `EventRing`, and this layer hands them over (`native_results`) when the ring is
  full and at the end: no Python per frame either (`_vm.c`, "the ring");
- with callbacks (`begin_query`/`end_query`; backends that measure in Python):
  around every frame, and around the ops of calls and draw calls only in
  passes that measure them, so other passes run the bare C loop.

A glBegin..glEnd block is one draw, counted at glBegin; calls compiled into
display lists are not events, as glretrace classifies them.

`--frames A-B` and `--calls` measure a window of frames; `--loop` measures nothing
before the loops, and numbers the loops' events from 0 (the tables hold the loops
only). A frame event runs from one frame end to the next, so it holds the swap (and
its wait) of the frame before; the first loop's first frame is no exception: it
begins at the frame end before it (`loops_from`), not at the loop's first op.
"""

from __future__ import annotations

from collections.abc import Callable

from retrace.backends.base import MetricBackend
from retrace.errors import RetraceError
from retrace.profile.checkpoint import EventRing
from retrace.replay.program import EventRecords, Marks, OpKind, Program
from retrace.replay.view import ReplayView
from retrace.vocabulary import Boundary, NativeEvents

CALL, DRAWCALL, FRAME = Boundary.CALL, Boundary.DRAWCALL, Boundary.FRAME
KINDS = (CALL, DRAWCALL, FRAME)  # the loop's kinds of event, in its order
# the ops that start an event of each boundary
EVENT_ROWS = {
    CALL: (OpKind.CALL, OpKind.LIST_END, OpKind.DRAW, OpKind.BEGIN),
    DRAWCALL: (OpKind.DRAW, OpKind.BEGIN),
}


NOT_YET = -1  # EventMeter(frames=(NOT_YET, None)): nothing measured until `loops_from`


class ProfileError(RetraceError):
    """The profile cannot be trusted (passes disagree); names where."""


class PassPlan:
    """One replay: which backend's pass it runs and the boundaries that pass measures. (A
    plain class: a dataclass costs a millisecond to define, and a NamedTuple's `index`
    would be tuple.index.)"""

    __slots__ = ("backend", "index", "boundaries")

    def __init__(self, backend: MetricBackend, index: int, boundaries: frozenset[Boundary]) -> None:
        self.backend = backend
        self.index = index  # the backend's own pass number
        self.boundaries = boundaries

    def describe(self, number: int) -> str:
        """The backend's line for this pass, as replay `number` (1-based) of the profile:
        each backend numbers only its own passes ("pass 1" for each of two backends)."""
        lines = self.backend.describe_passes()
        line = lines[self.index] if self.index < len(lines) else ""
        # "pass N..." -> "pass {number}..." (no regular expression: one costs the replay
        # child ~0.1 ms to compile)
        head, sep, rest = line.partition(" ")
        after = rest.lstrip("0123456789")
        return f"pass {number}{after}" if head == "pass" and sep and after != rest else line


def event_counts(program: Program, end: int | None = None, start: int = 0) -> tuple[int, int]:
    """(call events, draw events) among the ops [start, end) (to the last when None)."""
    counts = program.code.row_counts(start, len(program) if end is None else end)
    calls, draws = (sum(counts[k] for k in EVENT_ROWS[b]) for b in (CALL, DRAWCALL))
    return calls, draws


class EventMeter:
    """Counts one pass's events per boundary and has them measured."""

    def __init__(
        self,
        program: Program,
        view: ReplayView,
        frames: tuple[int, int | None] = (0, None),
        last_call: int | None = None,
        ring: EventRing | None = None,
    ) -> None:
        """`frames`: measure only frames first..last (0-based; last None: to the end); the
        replay before and after them runs unmeasured, the events still counted.
        `last_call`: also stop after the frame that holds this call number. `ring`: where
        the loop keeps the events it read until they are handed over (`Live.ring`, which a
        crash keeps; None: private memory)."""
        self.program, self.view = program, view
        self.first, self.last = frames
        self.last_call = last_call
        self.counts = dict.fromkeys(Boundary, 0)  # events seen so far this pass
        self.plan: PassPlan | None = None
        self._measuring = False  # within the frames measured
        self._native = False  # the loop measures the pass's events
        self._bracketed = False  # callbacks count the calls as they run
        self._next_event: dict[Boundary, int] = {}  # (native) the next record's event number
        self._lead: int | None = None  # --loop: the loops are measured from this frame's end
        self._frame: Callable[[bool], None] = program.code.frame  # (natively: the loop's)
        self.ring = ring or EventRing()
        # with a shared ring: the store index of a column (the ring names its columns so),
        # and what publishes the store's lengths once records moved there (before the ring
        # forgets them)
        self.column_index: Callable[[str], int] | None = None
        self.on_moved: Callable[[], None] = lambda: None

    @property
    def writing(self) -> bool:
        """Callbacks measure the events: their columns change at every event (where the
        loop measures them, the store changes only when the ring empties)."""
        return self._measuring and not self._native

    def reset(self) -> None:
        """Before a pass replays: nothing counted, nothing measured yet."""
        self.counts = dict.fromkeys(Boundary, 0)
        self.plan = None
        self._native = self._bracketed = self._measuring = False
        self._lead = None

    def start(self, plan: PassPlan | None) -> None:
        """At the pass's first current context (its backend's pass begun): measure from
        here on, or from the first frame measured."""
        self.plan = plan
        if plan is not None and self.counts[FRAME] == self.first:
            self._begin()

    def _begin(self, counted: tuple[int, int] | None = None) -> None:
        """Measure from here on: in the replay loop where the backend measures natively,
        else with callbacks. `counted`: the (call, draw) events before here (None: those
        of the ops before the one running now)."""
        plan = self.plan
        assert plan is not None
        self._measuring = True
        if counted is None:
            counted = event_counts(self.program, self.program.code.position)
        native = {b: plan.backend.native_events(b) for b in plan.boundaries}
        measured = {b: n for b, n in native.items() if n is not None}
        if len(measured) == len(native):
            self._measure_natively(measured, counted)
            return
        if FRAME in plan.boundaries:
            plan.backend.begin_query(FRAME, self.counts[FRAME])
        if CALL in plan.boundaries or DRAWCALL in plan.boundaries:
            self._bracket_calls(plan, counted)

    def loops_from(self, frame: int) -> None:
        """--loop: measure from the end of the pass's frame `frame` on (counting every frame
        end of the pass, the loops' included), numbering events from 0 there: the last
        frame of the loop before the first measured one, so that the loop's first frame
        begins as every other does, before the swap that ends the frame before it."""
        self._lead = frame

    def frame_end(self) -> bool:
        """Count the frame's end (and measure it); returns `writing` after it."""
        counts = self.counts
        if (
            self._native  # (measuring, the plan known: the usual case, first, in fewer steps)
            and counts[FRAME] != self.last
            and self.last_call is None
            and self._lead is None
        ):
            self._frame(True)  # (which takes the events read into the ring)
            counts[FRAME] += 1
            return False
        plan = self.plan
        if self._measuring and (self.counts[FRAME] == self.last or self._past_last_call()):
            self._stop()
        elif self._native:
            self.program.frame()  # (which takes the events read into the ring)
        elif self._measuring and plan is not None and FRAME in plan.boundaries:
            event = self.counts[FRAME]
            plan.backend.end_query(FRAME, event)
            plan.backend.begin_query(FRAME, event + 1)
        self.counts[FRAME] += 1
        if self._lead == self.counts[FRAME] - 1:
            self._lead = None
            self.counts = dict.fromkeys(Boundary, 0)
            if plan is not None:
                self._begin((0, 0))
        elif plan is not None and not self._measuring and self.counts[FRAME] == self.first:
            self._begin()
        return self.writing

    def _past_last_call(self) -> bool:
        """Whether the frame ending now holds `last_call` or a later call."""
        if self.last_call is None:
            return False
        at = self.program.code.position
        return int(self.program.column("call_nos", at, at + 1)[0]) >= self.last_call

    def _stop(self) -> None:
        """After the last frame measured: everything measured handed over; the rest of the
        replay runs bare (its events counted at the end)."""
        plan = self.plan
        assert plan is not None
        if self._native:
            self._end_native()
        elif FRAME in plan.boundaries:
            plan.backend.end_query(FRAME, self.counts[FRAME])
        if self._bracketed:
            self.program.bracket()
            self._bracketed = False
        self._measuring = False

    def _end_native(self) -> None:
        self.program.frame(begin=False)
        self.program.leave_context()
        self._drain()
        self._collect_the_rest()
        self.finish()

    def before_switch(self) -> None:
        if self._native:
            self.program.leave_context()
        elif self.plan is not None:
            self.plan.backend.pause_pass()

    def after_switch(self) -> None:
        if self._native:
            self.program.enter_context(self.view.query_functions())
        elif self.plan is not None:
            self.plan.backend.continue_pass()

    def finish(self) -> None:
        """After the replay (also one that failed): the loop stops measuring."""
        self._native = False
        self.program.stop_events()
        self.ring.stop()

    def end(self, loops: tuple[int, int, int] | None = None) -> dict[Boundary, int]:
        """After a complete replay: the last events measured and counted, the backend's
        pass ended; returns the events seen per boundary (the trailing, partial frame
        included). `loops`: (count, first op, end op) of the loops measured, whose events
        are the ones counted."""
        plan = self.plan
        if self._native:
            self._end_native()
        elif self._measuring and plan is not None and FRAME in plan.boundaries:
            plan.backend.end_query(FRAME, self.counts[FRAME])
        self.finish()
        if self._bracketed:
            pass  # the callbacks counted them
        elif loops is None:
            self.counts[CALL], self.counts[DRAWCALL] = event_counts(self.program)
        else:
            count, start, stop = loops
            calls, draws = event_counts(self.program, stop, start)
            self.counts[CALL], self.counts[DRAWCALL] = calls * count, draws * count
        if plan is not None:
            plan.backend.end_pass()
        self.counts[FRAME] += 1  # the trailing, partial frame
        return self.counts

    # --- events measured by the loop -----------------------------------------------------------

    def _measure_natively(
        self, native: dict[Boundary, NativeEvents], counted: tuple[int, int]
    ) -> None:
        """Have the loop measure from the op running now on (the `counted` events before it
        are not measured) and begin the first frame; `_drain` hands the records to the
        backend."""
        calls, draws = counted
        self._next_event = {CALL: calls, DRAWCALL: draws, FRAME: self.counts[FRAME]}
        self._native = True
        program, ring, index = self.program, self.ring, self.column_index
        self._frame = program.code.frame
        assert self.plan is not None
        backend, fields = self.plan.backend, EventRecords.FIELDS
        columns = [
            [
                (index(column.key), fields.index(end), -1 if start is None else fields.index(start))
                for column, end, start in backend.native_columns(b)
            ]
            if b in native and index is not None
            else []
            for b in KINDS
        ]
        ring.start(columns, [self._next_event[b] for b in KINDS])
        program.measure_events(
            native.get(CALL), native.get(DRAWCALL), native.get(FRAME), self._drain, ring.loop_part
        )
        program.enter_context(self.view.query_functions())
        if FRAME in native:
            program.frame()

    def _drain(self) -> None:
        """Hand the events in the ring to the backend (the ring is full, or the pass ends)."""
        assert self.plan is not None
        backend, ring, moved = self.plan.backend, self.ring, []
        for kind, boundary in enumerate(KINDS):
            events = EventRecords(ring.take(kind))
            if len(events):
                backend.native_results(boundary, self._next_event[boundary], events)
                self._next_event[boundary] += len(events)
                moved.append((kind, len(events)))
        if moved:
            self.on_moved()
            for kind, count in moved:
                ring.moved(kind, count)

    def _collect_the_rest(self) -> None:
        """At the pass's end, after the ring's (`_drain`): hand every other event the loop
        measured to the backend (their queries read now)."""
        assert self.plan is not None
        backend = self.plan.backend
        taken = self.program.take_events(True)
        for boundary, events in zip(KINDS, taken, strict=True):
            if len(events):
                backend.native_results(boundary, self._next_event[boundary], events)
                self._next_event[boundary] += len(events)

    # --- calls and draws measured with callbacks -----------------------------------------------

    def _bracket_calls(self, plan: PassPlan, counted: tuple[int, int]) -> None:
        """Bracket the calls and draws from the op running now on with the backend's
        queries; the `counted` events before it are not measured."""
        counts = self.counts
        counts[CALL], counts[DRAWCALL] = counted
        self._bracketed = True
        backend, view = plan.backend, self.view
        calls, draws = CALL in plan.boundaries, DRAWCALL in plan.boundaries
        begin_row, end_row, list_end_row = int(OpKind.BEGIN), int(OpKind.END), int(OpKind.LIST_END)
        draw_rows = (int(OpKind.DRAW), begin_row, end_row)

        def before(i: int, row: int) -> None:
            if row == end_row:  # glEnd closes the draw glBegin opened
                return
            view.closing_list = row == list_end_row
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
