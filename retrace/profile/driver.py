"""The pass driver: replays a compiled trace once per pass and brackets its events.

At the first context the trace makes current (metrics depend on it, as in
glretrace) the selections are resolved against the backends, every backend
splits its metrics into passes, and pass 1 starts. Each pass replays the whole
trace with one backend's pass active: frames are bracketed at SwapBuffers; calls
and draw calls are measured by the replay loop itself where the backend allows
it (clocks and GL queries), else by Python callbacks around their ops (only in
passes that measure them, so other passes run the bare C loop). A glBegin..glEnd block is one draw,
calls compiled into display lists are not events, as glretrace classifies them.

Event metadata (call number, function, frame) comes from the compiled program;
the program in use is logged at each change in the first pass. Every pass must
see the same number of events at each boundary, or the run stops rather than
print a shifted table. Values live in the mmap
store, so a failure in pass k leaves passes 1..k-1 on disk.

Given a `Live` (a profile run in a child process, `commands.run_profile`), the
store's manifest is rewritten after every complete run of a pass, and at every
frame end the child publishes its progress to the parent; see `checkpoint.py`.
`resume` starts from such a checkpoint.
"""

from __future__ import annotations

import bisect
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, Any

import numpy as np

from retrace.backends.base import MetricBackend
from retrace.backends.registry import load_backends
from retrace.errors import RetraceError, UsageError
from retrace.profile.checkpoint import Live
from retrace.profile.metadata import context_facts, run_facts
from retrace.profile.results import META_FIELDS, Profile, column_key, meta_key
from retrace.profile.selection import closest, parse_selection
from retrace.profile.session import Session
from retrace.replay.program import Marks, Row
from retrace.replay.replayer import Replayer, rendered
from retrace.vocabulary import Boundary, Metric, MetricError, NativeEvents, NumType
from retrace.writer.store import Column, Store, missing_mask
from retrace.writer.tsv import Table

CALL, DRAWCALL = Boundary.CALL, Boundary.DRAWCALL
# the ops that start an event of each boundary (a glBegin..glEnd block is one draw,
# counted at glBegin)
EVENT_ROWS = {
    CALL: (Row.CALL, Row.LIST_END, Row.DRAW, Row.BEGIN),
    DRAWCALL: (Row.DRAW, Row.BEGIN),
}
OPTION = {Boundary.FRAME: "--pframes", Boundary.CALL: "--pcalls", Boundary.DRAWCALL: "--pdrawcalls"}


class ProfileError(RetraceError):
    """The profile cannot be trusted (passes disagree); names where."""


class _Stop(Exception):
    """Raised from a hook to end the replay early (--gen-passes, --list-metrics)."""


@dataclass
class PassPlan:
    backend: MetricBackend
    index: int  # the backend's own pass number
    boundaries: frozenset[Boundary]


class Profiler:
    """One profiling run of one trace."""

    def __init__(
        self,
        trace: str,
        selections: dict[Boundary, str],
        store_dir: str | None = None,
        keep_store: bool = False,
        progress: IO[str] | None = None,
        repeat: int = 1,
        warmup: int = 0,
        stats: bool = False,
        store: Store | None = None,
        live: Live | None = None,
    ) -> None:
        """`store`: an open store to measure into (else a new one in `store_dir`); `live`:
        publish progress there at frame ends, and checkpoint the store after every run."""
        if repeat < 1 or warmup < 0:
            raise UsageError("--repeat must be at least 1 and --warmup at least 0")
        self.selections = selections
        self.repeat, self.warmup, self.stats = repeat, warmup, stats
        self._run = 0  # which repetition of the current pass
        self._counting_calls = False  # whether this run brackets (and so counts) calls
        self.replayer = Replayer(trace)
        self.session = Session(self.replayer.state, self.replayer.dispatch)
        self._store = store
        self._store_dir, self._keep_store = store_dir, keep_store
        self.live = live
        self._first_run = 0  # where the first pass starts: 0, or a resumed run
        self._saved: dict[str, Any] | None = None  # a resumed profile's description
        self._meta_done = 0  # ops whose event metadata is stored (first pass)
        self._meta_time = 0.0  # when it was stored last (perf_counter)
        self.progress = progress
        self.backends: dict[str, MetricBackend] = {}
        self.plan: list[PassPlan] = []
        self.profile = Profile()
        self._ready = False
        self._on_ready: Callable[[], None] = lambda: None
        self.context_facts: dict[str, Any] = {}  # the first context's, for the metadata
        self._pass = 0
        self._active: PassPlan | None = None
        self._events = [0, 0, 0]  # per Boundary value: events seen so far this pass
        self._expected: dict[Boundary, int] | None = None
        self._last_seconds = 0.0
        self._brackets: list = [None, False, False]
        # passes the loop measures itself: what per boundary, and the number of the next
        # event whose measurement goes to the backend
        self._native: dict[Boundary, NativeEvents | None] = {}
        self._next_event: dict[Boundary, int] = {}
        # (op, traced program) at every change of the program in use, logged in the first run
        self._program_log: list[tuple[int, int]] = []
        self.replayer.state.on_program_change = self._log_program
        ws = self.replayer.ws
        ws.after_switch = self._after_switch
        ws.before_switch = self._before_switch
        ws.on_frame_end = self._frame_end

    @property
    def store(self) -> Store:
        """Where values go; made at first use, so that --list-metrics and --gen-passes,
        which measure nothing, leave no store behind whatever happens to them."""
        if self._store is None:
            self._store = Store(self._store_dir, keep=self._keep_store)
        return self._store

    def close(self) -> None:
        self.replayer.close()
        if self._store is not None:
            # with checkpoints, the last one stays what the manifest says (not a partial pass)
            self._store.close(flush=self.live is None)

    # --- planning (at the first current context) ---------------------------------------------

    def _after_switch(self) -> None:
        if not self._ready:
            self._ready = True
            self.context_facts = self.context_facts or context_facts(self.replayer)
            self._on_ready()
            self._start_pass()
        elif self._active is not None:
            self._active.backend.continue_pass()
            if self._native and not self._configure_events():  # the new context's functions
                raise ProfileError(
                    "the trace switches to a context without GL query objects: its calls "
                    "cannot be measured"
                )

    def _before_switch(self) -> None:
        if self._active is not None:
            if self._native:  # read and delete the loop's queries while their context is current
                self._collect_events(everything=True)
                self.replayer.program.forget_queries()
            self._active.backend.pause_pass()

    def summary(self) -> str:
        """glretrace's closing `Rendered ...` line for the last pass."""
        return rendered(self.replayer.frame, self._last_seconds)

    def backends_now(self) -> dict[str, MetricBackend]:
        """Every backend, created on the current context."""
        return self._instantiate()

    def _instantiate(self) -> dict[str, MetricBackend]:
        if not self.backends:
            self.backends = {name: cls(self.session) for name, cls in load_backends().items()}
        return self.backends

    def _resolve(self) -> None:
        """Enable the selected metrics and plan the passes; errors name the closest names."""
        backends = self._instantiate()
        order: list[str] = []
        wanted: dict[Boundary, dict[str, list[Metric]]] = {}
        for boundary, spec in self.selections.items():
            for backend_name, refs in parse_selection(spec, OPTION[boundary]):
                backend = backends.get(backend_name) or next(
                    (b for n, b in backends.items() if n.casefold() == backend_name.casefold()),
                    None,
                )
                if backend is None:
                    hint = closest(backend_name, list(backends))
                    raise UsageError(f'{OPTION[boundary]}: no backend "{backend_name}"{hint}')
                if backend.name not in order:
                    order.append(backend.name)
                for ref in refs:
                    metric = (
                        backend.metric_by_name(ref.name)
                        if ref.name is not None
                        else backend.metric_by_id(ref.group, ref.id)
                    )
                    if metric is None:
                        hint = closest(ref.name or ref.text, [m.name for m in backend.metrics()])
                        raise UsageError(
                            f'{OPTION[boundary]}: backend "{backend.name}" has no metric '
                            f'"{ref.text}"{hint}'
                        )
                    if boundary not in backend.boundaries(metric):
                        raise UsageError(
                            f'{OPTION[boundary]}: "{metric.name}" of {backend.name} cannot be '
                            f"measured per {boundary.name.lower()}"
                        )
                    chosen = wanted.setdefault(boundary, {}).setdefault(backend.name, [])
                    if metric in chosen:
                        raise UsageError(
                            f'{OPTION[boundary]}: "{metric.name}" of {backend.name} is selected '
                            "twice"
                        )
                    try:
                        backend.enable(metric, boundary)
                    except MetricError as e:
                        print(f"warning: {e}; its cells will read '-'", file=sys.stderr)
                    chosen.append(metric)
        for boundary, per_backend in wanted.items():
            columns = []
            for name in order:  # backends in order of first mention, metrics in backend order
                chosen = set(per_backend.get(name, ()))
                columns += [m for m in backends[name].metrics() if m in chosen]
            self.profile.metrics[boundary] = columns
        if self._saved is not None:
            self._restore_columns(self._saved)
        for name in order:
            backend = backends[name]
            for index in range(backend.generate_passes()):
                self.plan.append(PassPlan(backend, index, backend.pass_boundaries(index)))

    # --- passes --------------------------------------------------------------------------------

    def _keys(self, plan: PassPlan) -> list[tuple[Metric, Boundary]]:
        return [
            (metric, boundary)
            for boundary, metrics in self.profile.metrics.items()
            for metric in metrics
            if metric.backend == plan.backend.name
        ]

    def _column(self, metric: Metric, boundary: Boundary, suffix: str = "") -> Column:
        dtype = np.float64 if metric.num_type.is_float or suffix else np.int64
        return self.store.column(column_key(metric, boundary, suffix), dtype)

    def _columns_for(self, plan: PassPlan) -> dict[tuple[Metric, Boundary], Column]:
        """Where this run of the pass writes: the final columns, or one set per repetition."""
        repeated = self.repeat > 1 or self.warmup > 0
        columns = {}
        for metric, boundary in self._keys(plan):
            if repeated:
                label = f".pass{self._pass}.run{self._run}"
                columns[metric, boundary] = self._column(metric, boundary, label)
            else:
                if (metric, boundary) not in self.profile.columns:
                    self.profile.columns[metric, boundary] = self._column(metric, boundary)
                columns[metric, boundary] = self.profile.columns[metric, boundary]
        return columns

    def _combine_runs(self, plan: PassPlan) -> None:
        """The median of the measured runs goes in the table; min, p95 and stddev beside it.

        Only the columns this pass wrote are combined (a backend may spread its metrics
        over several passes).
        """
        for metric, boundary in self._keys(plan):
            runs = [
                self._column(metric, boundary, f".pass{self._pass}.run{r}").view()
                for r in range(self.warmup, self.warmup + self.repeat)
            ]
            length = max(len(r) for r in runs)
            if length == 0 or (metric, boundary) in self.profile.columns:
                continue  # measured in another pass
            stack = np.full((len(runs), length), np.nan)
            for i, values in enumerate(runs):
                stack[i, : len(values)] = np.where(missing_mask(values), np.nan, values)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows stay NaN
                median = np.nanmedian(stack, axis=0)
                extra = {
                    "min": np.nanmin(stack, axis=0),
                    "p95": np.nanpercentile(stack, 95, axis=0),
                    "stddev": np.nanstd(stack, axis=0),
                }
            final = self._column(metric, boundary)
            if metric.num_type.is_float:
                final.extend(median)
            else:
                final.extend(
                    np.where(np.isnan(median), final.missing, np.rint(median)).astype(np.int64)
                )
            self.profile.columns[metric, boundary] = final
            if self.stats:
                for name, values in extra.items():
                    column = self._column(metric, boundary, f".{name}")
                    column.extend(values)
                    derived = replace(metric, name=f"{metric.name} {name}", num_type=NumType.DOUBLE)
                    self.profile.stats.setdefault((metric, boundary), []).append((derived, column))

    def _start_pass(self) -> None:
        """At the pass's first current context: start the backend's pass and, if it measures
        calls or draws, measure them from here on: in the replay loop where the backend
        allows it (`native_events`), else with Python callbacks."""
        self._brackets[:] = [None, False, False]
        if self._pass >= len(self.plan):
            self._active = None
            return
        self._active = plan = self.plan[self._pass]
        self._brackets[:] = [
            plan.backend,
            Boundary.CALL in plan.boundaries,
            Boundary.DRAWCALL in plan.boundaries,
        ]
        plan.backend.begin_pass(plan.index, self._columns_for(plan))
        if self._expected is None:  # metadata is stored as the first pass goes
            for boundary in self._event_tables():
                for what in META_FIELDS:
                    self._meta(boundary, what)
        self._checkpoint(self._pass, self._run)  # the columns of this run exist, still empty
        if Boundary.FRAME in plan.boundaries:
            plan.backend.begin_query(Boundary.FRAME, 0)
        measured = [b for b in (Boundary.CALL, Boundary.DRAWCALL) if b in plan.boundaries]
        native = {b: plan.backend.native_events(b) for b in measured}
        if measured and None not in native.values():
            self._measure_natively(native)
        elif measured:
            self._bracket_calls()

    def _frame_end(self, drawable) -> None:
        self.replayer.frame += 1
        self._collect_events()
        self._record_frame_end()
        plan = self._active
        if plan is not None and Boundary.FRAME in plan.boundaries:
            event = self._events[Boundary.FRAME]
            plan.backend.end_query(Boundary.FRAME, event)
            plan.backend.begin_query(Boundary.FRAME, event + 1)
        self._events[Boundary.FRAME] += 1
        if self.live is not None:
            self._publish()

    def _publish(self) -> None:
        """At a frame end, for the parent to keep what was measured if the driver crashes:
        the lengths of the columns and the first pass's event metadata so far."""
        if self._expected is None and self._ready:
            end = self.replayer.program.code.position + 1
            now = time.perf_counter()
            # as a crash may come at any frame: as many ops waiting as stored, or 0.1 s
            # since the last time (which keeps this at O(log n) + 10/s calls)
            if end - self._meta_done >= self._meta_done or now - self._meta_time >= 0.1:
                self._meta_time = now
                self._store_metadata(end)
        self.live.publish(self._pass, self.replayer.frame, self.store.lengths(), self.profile.names)

    def _record_frame_end(self) -> None:
        if self._expected is None:  # the first run counts
            self.profile.frames += 1

    def _meta(self, boundary: Boundary, what: str) -> Column:
        """Per-event metadata of the calls and draw-calls tables, recorded in pass 1."""
        return self.store.column(meta_key(boundary, what), np.int64)

    def _event_tables(self) -> list[Boundary]:
        return [b for b in (Boundary.CALL, Boundary.DRAWCALL) if b in self.profile.metrics]

    def _log_program(self) -> None:
        if self._pass == 0 and self._run == 0:
            st = self.replayer.state
            program = st.current.program if st.current is not None else 0
            self._program_log.append((self.replayer.program.code.position, program))

    def _event_counts(self, end: int | None = None) -> tuple[int, int]:
        """(call events, draw events) among the ops before `end` (all when None)."""
        rows = self.replayer.program.column("rows", 0, end)
        counts = np.bincount(rows, minlength=len(Row))
        calls, draws = (int(counts[list(EVENT_ROWS[b])].sum()) for b in (CALL, DRAWCALL))
        return calls, draws

    def _measure_natively(self, native: dict[Boundary, NativeEvents | None]) -> None:
        """Have the replay loop measure calls and draws itself from the op running now on
        (no Python per event); `_collect_events` hands what it measured to the backend."""
        program = self.replayer.program
        calls, draws = self._event_counts(program.code.position)
        self._next_event = {Boundary.CALL: calls, Boundary.DRAWCALL: draws}
        self._native = native
        if not self._configure_events():
            self._native = {}
            self._bracket_calls()

    def _configure_events(self) -> bool:
        """Tell the loop what to measure, with the current context's query functions;
        False when the context lacks one (the caller brackets in Python instead)."""
        none = NativeEvents()
        call = self._native.get(Boundary.CALL) or none
        draw = self._native.get(Boundary.DRAWCALL) or none
        queries = None
        if call != none or draw != none:
            queries = self.session.query_functions()
            if not all(queries):
                return False
        self.replayer.program.measure_events(
            (call.gpu_times, call.pixels),
            (draw.gpu_times, draw.pixels),
            queries,
            self._collect_events,
        )
        return True

    def _collect_events(self, everything: bool = False) -> None:
        """Pass what the loop measured to the backend: the events that had ended at the
        last collection (a frame or 1,024 events ago: reading them does not stall the
        GPU), or `everything`."""
        if not self._native or self._active is None:
            return
        calls, draws = self.replayer.program.take_events(everything)
        for boundary, events in ((Boundary.CALL, calls), (Boundary.DRAWCALL, draws)):
            if boundary in self._native and len(events):
                self._active.backend.native_results(boundary, self._next_event[boundary], events)
            self._next_event[boundary] += len(events)

    def _end_native(self) -> None:
        """At the end of a pass: collect, and delete the loop's queries in their context."""
        if self._native:
            self._collect_events(everything=True)
            self.replayer.program.forget_queries()
            self.replayer.program.stop_events()
            self._native = {}

    def _bracket_calls(self) -> None:
        """Bracket the calls and draws from the op running now on with the backend's
        queries; those before it (none, unless GL calls came before any context) are
        counted as events without queries."""
        program = self.replayer.program
        events = self._events
        events[Boundary.CALL], events[Boundary.DRAWCALL] = self._event_counts(program.code.position)
        self._counting_calls = True
        active = self._brackets  # [backend, calls measured, draws measured]
        call_b, draw_b = Boundary.CALL, Boundary.DRAWCALL
        session = self.session
        begin_row, end_row = int(Row.BEGIN), int(Row.END)
        draw_rows = (int(Row.DRAW), begin_row, end_row)
        list_end_row = int(Row.LIST_END)

        def before(i: int, row: int) -> None:
            if row == end_row:  # glEnd closes the draw glBegin opened
                return
            session.closing_list = row == list_end_row
            backend, calls, draws = active
            if calls:
                backend.begin_query(call_b, events[call_b])
            if draws and row in draw_rows:
                backend.begin_query(draw_b, events[draw_b])

        def after(i: int, row: int) -> None:
            if row == begin_row:
                return
            backend, calls, draws = active
            draw = row in draw_rows
            if draws and draw:
                backend.end_query(draw_b, events[draw_b])
            if calls:
                backend.end_query(call_b, events[call_b])
            events[call_b] += 1
            if draw:
                events[draw_b] += 1

        program.bracket(Marks.ROWS, before, after)

    def _store_metadata(self, end: int, chunk: int = 1 << 16) -> None:
        """Call number, function and frame of every call and draw-call event of the ops
        not stored yet before `end`, from the compiled program (the same in every pass);
        the program in use, from the changes logged in the first run. Only for the tables
        asked for, a chunk of ops at a time (so memory stays flat on long traces). Called
        at frame ends of the first pass too, so a crash keeps the rows before it."""
        program = self.replayer.program
        self.profile.names = list(program.names)
        wanted = self._event_tables()
        first, self._meta_done = self._meta_done, end
        if not wanted or first >= end:
            return
        # only the frame ends and program changes that matter to ops [first, end): called
        # at every frame end, this must not cost more as the trace goes on
        ends = program.frame_ends
        before = bisect.bisect_left(ends, first)  # frames that ended before op `first`
        frame_ends = np.asarray(ends[before : bisect.bisect_left(ends, end)], np.int64)
        changes = self._program_log
        since = max(bisect.bisect_left(changes, (first,)) - 1, 0)
        log = changes[since : bisect.bisect_left(changes, (end,))] or [(-1, 0)]
        log = np.asarray(log, np.int64).reshape(-1, 2)
        for start in range(first, end, chunk):
            stop = min(start + chunk, end)
            ops = np.arange(start, stop)
            rows = program.column("rows", start, stop)
            call_nos = program.column("call_nos", start, stop)
            name_ids = program.column("name_ids", start, stop)
            # an event's program is the one in use when it started: the last change in an
            # op before it (a glUseProgram's own row shows the program it replaces)
            last = np.searchsorted(log[:, 0], ops, side="left") - 1
            programs = np.where(last >= 0, log[np.maximum(last, 0), 1], 0)
            frames = before + np.searchsorted(frame_ends, ops, side="left")
            for boundary in wanted:
                mask = np.isin(rows, EVENT_ROWS[boundary])
                self._meta(boundary, "call_no").extend(call_nos[mask])
                self._meta(boundary, "name").extend(name_ids[mask])
                self._meta(boundary, "program").extend(programs[mask])
                self._meta(boundary, "frame").extend(frames[mask])

    def _run_pass(self) -> float:
        """Replay once with the current pass; returns the seconds it took."""
        self._events[:] = [0, 0, 0]
        self._brackets[:] = [None, False, False]
        self.session.forget_contexts()
        self._ready = False
        self._counting_calls = False
        started = time.perf_counter()
        try:
            self._last_seconds = self.replayer.run_pass().seconds
            self._end_native()
        finally:
            self._native = {}
            self.replayer.program.stop_events()
        if not self._counting_calls:
            self._events[Boundary.CALL], self._events[Boundary.DRAWCALL] = self._event_counts()
        if self._active is not None:
            if Boundary.FRAME in self._active.boundaries:
                self._active.backend.end_query(Boundary.FRAME, self._events[Boundary.FRAME])
            self._active.backend.end_pass()
        self._events[Boundary.FRAME] += 1  # the trailing, partial frame
        self._check_events()
        return time.perf_counter() - started

    def _report(self, seconds: float) -> None:
        """The progress line of a run, once it is complete (checkpointed)."""
        if self.progress is not None:
            rate = self.replayer.frame / seconds if seconds else 0.0
            print(
                f"retrace: pass {self._pass + 1} of {max(len(self.plan), 1)}{self._run_label()} "
                f"done in {seconds:.2f} s ({rate:.1f} frames/s)",
                file=self.progress,
                flush=True,
            )

    def _run_label(self) -> str:
        if self.repeat == 1 and self.warmup == 0:
            return ""
        if self._run < self.warmup:
            return f" (warm-up {self._run + 1} of {self.warmup})"
        return f" (run {self._run - self.warmup + 1} of {self.repeat})"

    def _check_events(self) -> None:
        if self._expected is None:
            self._expected = {b: self._events[b] for b in Boundary}
            self.profile.frame_events = self._expected[Boundary.FRAME]
            self._store_metadata(len(self.replayer.program))
            return
        for boundary, count in self._expected.items():
            if self._events[boundary] != count:
                raise ProfileError(
                    f"pass {self._pass + 1} saw {self._events[boundary]} {boundary.name.lower()} "
                    f"events where pass 1 saw {count}: the replay is not deterministic; results in "
                    f"{self.store.path}"
                )

    # --- entry points --------------------------------------------------------------------------

    def tables(self) -> list[Table]:
        """The measured tables, ready for `MetricWriter`."""
        return self.profile.tables(self.store)

    def run(self) -> Profile:
        """Every pass (each `warmup + repeat` times); returns what was measured.

        A failure after the first pass keeps the store, and its message says where.
        """
        self._on_ready = self._resolve
        runs = self.warmup + self.repeat
        while True:
            try:
                for run in range(self._first_run, runs):
                    self._run = run
                    seconds = self._run_pass()
                    if not self._ready:
                        raise RetraceError(
                            "the trace never makes a GL context current: nothing to measure"
                        )
                    self._on_ready = lambda: None
                    if run + 1 < runs:
                        self._checkpoint(self._pass, run + 1)
                    else:  # the pass is complete
                        if self._pass < len(self.plan) and (self.repeat > 1 or self.warmup > 0):
                            self._combine_runs(self.plan[self._pass])
                        self._checkpoint(self._pass + 1, 0)
                    self._report(seconds)
                self._first_run = 0
            except RetraceError as e:
                if self._pass == 0:
                    raise
                self.store.keep = True
                where = f"passes 1-{self._pass} are kept in {self.store.path}"
                raise RetraceError(f"{e} ({where})") from None
            self._pass += 1
            if self._pass >= len(self.plan):
                break
        self.profile.frame_events = self._expected[Boundary.FRAME] if self._expected else 1
        return self.profile

    # --- checkpoints ---------------------------------------------------------------------------

    def _checkpoint(self, next_pass: int, next_run: int) -> None:
        """With `live`: record in the store that every run before (next_pass, next_run) is
        complete, with the column lengths and what the tables need (one atomic manifest)."""
        if self.live is None:
            return
        if "progress" not in self.store.meta and self.progress is not None:
            print(f"retrace: measuring into {self.store.path}", file=self.progress, flush=True)
        expected = self._expected
        self.store.meta["facts"] = run_facts(self)  # where it ran, for the metadata
        self.store.meta["progress"] = {
            "pass": next_pass,
            "run": next_run,
            "passes": max(len(self.plan), 1),
            "expected": None if expected is None else {b.name: n for b, n in expected.items()},
            "profile": self.profile.to_json(),
        }
        self.store.flush()

    def resume(self, progress: dict[str, Any]) -> None:
        """Start at the first run a checkpoint (`_checkpoint`'s record) lacks; what came
        before is in the store. Passes are planned again at the first context, as the
        first time, and take back their stored columns."""
        expected = progress["expected"]
        if expected is None:  # the first pass never completed: start afresh
            return
        self._pass, self._first_run = progress["pass"], progress["run"]
        self._expected = {Boundary[name]: n for name, n in expected.items()}
        self._saved = saved = progress["profile"]
        self.profile.frames, self.profile.frame_events = saved["frames"], saved["frame_events"]
        self.profile.names = list(saved["names"])

    def _restore_columns(self, saved: dict[str, Any]) -> None:
        """Give the planned metrics back the columns and statistics a checkpoint recorded."""
        planned = {
            (boundary.name, m.backend, m.group, m.id): (m, boundary)
            for boundary, metrics in self.profile.metrics.items()
            for m in metrics
        }
        for table in saved["tables"]:
            for entry in table["metrics"]:
                m = entry["metric"]
                found = planned.get((table["boundary"], m["backend"], m["group"], m["id"]))
                if found is not None:
                    self.profile.restore(*found, entry, self.store)

    def until_first_context(self, action: Callable[[], None]) -> None:
        """Replay until the first context is current, run `action` there, stop."""

        def ready() -> None:
            action()
            raise _Stop

        self._on_ready = ready
        try:
            self.replayer.run_pass()
        except _Stop:
            return
        raise RetraceError("the trace never makes a GL context current: nothing to measure")

    def count_passes(self) -> int:
        """How many replays a profile runs: one even when no selected metric can be measured
        here, since the tables' rows still come from a replay."""
        result: list[int] = []
        self.until_first_context(lambda: (self._resolve(), result.append(len(self.plan))))
        return max(result[0], 1)
