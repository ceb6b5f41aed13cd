"""The profiler: replays a compiled trace once per run of every pass, and keeps what
each run measured.

It reads top-down: at the first context the trace makes current (metrics depend
on it, as in glretrace) `planner.plan` turns the selection into tables and
passes; every run of a pass replays the whole trace with `events.EventMeter`
counting and measuring its events; `repeats.Repeats` says where each run writes
and combines the runs of a complete pass; `rows.EventRows` stores the
call and draw-call rows during the first run. Every pass must see the same
number of events at each boundary, or the run stops rather than print a shifted
table. Values live in the mmap store, so a failure in pass k leaves passes
1..k-1 on disk.

Given a `Live` (a profile run in a child process, `commands.run_profile`), the
store's manifest is rewritten after every complete run of a pass, and at every
frame end the child publishes its progress to the parent; see `checkpoint.py`.
`resume` starts from such a checkpoint.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Callable
from typing import IO, Any

import retrace.replay.contain as contain
from retrace.backends.base import MetricBackend
from retrace.backends.registry import Backends
from retrace.errors import RetraceError, UsageError
from retrace.profile import planner
from retrace.profile.checkpoint import Live
from retrace.profile.events import EVENT_ROWS, NOT_YET, EventMeter, PassPlan, ProfileError
from retrace.profile.metadata import context_facts, context_name, run_facts
from retrace.profile.options import ProfileOptions
from retrace.profile.progress import PassProgress
from retrace.profile.repeats import Key, Repeats, store_column
from retrace.profile.results import Profile
from retrace.profile.rows import EventRows
from retrace.profile.window import calls_span, last_call, nothing_selected
from retrace.replay.fidelity import Fidelity
from retrace.replay.replayer import LOOP_CAVEAT, Replayer, ReplayListener, rendered
from retrace.replay.view import ReplayView
from retrace.vocabulary import Boundary, Metric
from retrace.writer.store import Column, Store
from retrace.writer.tsv import Table

__all__ = ["PassPlan", "ProfileError", "Profiler"]

REPORT_SECONDS = 1.0  # a complete run's progress line at most this often (a pass's last: always)


class _Stop(Exception):
    """Raised from a hook to end the replay early (--gen-passes, --list-metrics)."""


class Profiler(ReplayListener):
    """One profiling run of one trace."""

    def __init__(
        self,
        trace: str,
        options: ProfileOptions,
        store_dir: str | None = None,
        keep_store: bool = False,
        progress: IO[str] | None = None,
        store: Store | None = None,
        live: Live | None = None,
    ) -> None:
        """`store`: an open store to measure into (else a new one in `store_dir`); `live`:
        publish progress there at frame ends, and checkpoint the store after every run."""
        self.options = options
        self.replayer = Replayer(trace)
        self.view = ReplayView(self.replayer.state, self.replayer.dispatch)
        ring = live.ring if live is not None else None  # (a crash keeps what it holds)
        if options.loop is None:
            self.meter = EventMeter(
                self.replayer.program, self.view, options.frames, last_call(options.calls), ring
            )
        else:  # the loops only are measured, the replay before them runs bare
            self.meter = EventMeter(self.replayer.program, self.view, (NOT_YET, None), ring=ring)
            self.replayer.compile_all = True  # stopped after frame B, every pass runs it all
        if live is not None:
            self.meter.column_index = lambda key: list(self.store).index(key)
            self.meter.on_moved = lambda: live.publish_lengths(self.store.lengths())
        self.repeats = Repeats(options.repeat, options.warmup_runs, options.stats, self._column)
        self._store = store
        self._store_dir, self._keep_store = store_dir, keep_store
        self.live, self.progress = live, progress
        self.backends: Backends[MetricBackend] = Backends(lambda backend: backend(self.view))
        self.plan: list[PassPlan] = []
        self._planned = False  # `plan` is made (at the first context)
        self.profile = Profile(window=options.frames, calls=options.call_range)
        self._rows = EventRows()
        self._pass = 0  # index into `plan`
        self._run = 0  # which run of the current pass
        self._first_run = 0  # where the first pass starts: 0, or a resumed run
        self._saved: dict[str, Any] | None = None  # a resumed profile's description
        self._expected: dict[Boundary, int] | None = None  # events per boundary in pass 1
        self._ready = False  # the pass's first context has been current
        self._on_ready: Callable[[], None] = lambda: None
        self.context_facts: dict[str, Any] = {}  # the first context's, for the metadata
        self._last_seconds = 0.0
        self._reported = -REPORT_SECONDS  # when the last run's line was printed (monotonic)
        self._looping = False  # replaying the --loop frames (not the trace's own)
        self._contexts: dict[int, int] = {}  # id() of a traced context -> its number
        self.fidelity: Fidelity | None = None  # how every pass so far departed from the trace
        self.replayer.listen(self)
        self._live_line: PassProgress | None = None
        if progress is not None and progress.isatty():
            self._live_line = PassProgress(progress)
            self.replayer.listen(self._live_line)

    @property
    def store(self) -> Store:
        """Where values go; made at first use, so that --list-metrics and --gen-passes,
        which measure nothing, leave no store behind whatever happens to them."""
        if self._store is None:
            self._store = Store(self._store_dir, keep=self._keep_store)
        return self._store

    def close(self, driver: bool = True) -> None:
        """Close the store, and the replay's contexts and display unless `driver` is False:
        in a child that ends once measured (`contain`'s os._exit) the kernel frees the
        driver's all at once, and destroying them first cost 2-4 ms of the driver's work."""
        if driver:
            self.replayer.close()
        if self._store is not None:
            # with checkpoints, the last one stays what the manifest says (not a partial pass)
            self._store.close(flush=self.live is None)

    def summary(self) -> str:
        """glretrace's closing `Rendered ...` line for the last pass."""
        return rendered(self.replayer.frame, self._last_seconds)

    def backends_now(self) -> Backends[MetricBackend]:
        """Every backend, each made on the current context when first looked up (those a
        selection names, at the first context)."""
        return self.backends

    def tables(self) -> list[Table]:
        """The measured tables, ready for `MetricWriter`."""
        return self.profile.tables(self.store)

    # --- the replay's events (ReplayListener) --------------------------------------------------

    def after_switch(self) -> None:
        if self._pass == 0 and self._run == 0 and not self._looping:
            self._rows.context_changed(self.replayer.program.code.position, self._context())
        if not self._ready:
            self._ready = True
            self.context_facts = self.context_facts or context_facts(self.replayer)
            self._on_ready()
            self._start_pass()
        else:
            self.meter.after_switch()

    def _context(self) -> int:
        """The current context's number in `profile.contexts` (from 1, in the order they were
        first current; 0: none), named there after it and its GL version."""
        current = self.replayer.state.current
        if current is None or current.real is None:
            return 0
        number = self._contexts.setdefault(id(current), len(self._contexts) + 1)
        if number > len(self.profile.contexts):
            self.profile.contexts.append(context_name(number, current.real))
        return number

    def before_switch(self) -> None:
        self.meter.before_switch()

    def frame_end(self, frame: int) -> None:
        writing = self.meter.frame_end()
        first = self._expected is None and not self._looping  # (the first run's frames)
        if first:
            self.profile.frames += 1
        live = self.live
        if live is None:
            return
        if not (writing or (first and self._rows.tables) or contain.stop_requested()):
            # the usual frame end, kept short (a microsecond a frame was 5% of a replay of
            # short frames): the frames ended, the columns unchanged
            live.publish(self._pass, frame)
            return
        self._publish(first)

    # --- planning and passes -------------------------------------------------------------------

    def _resolve(self) -> None:
        """At the first context: the tables' metrics and the passes."""
        planned = planner.plan(self.options.selections, self.backends_now())
        self._planned = True
        self.profile.metrics, self.plan = planned.metrics, planned.passes
        loop = self.options.loop
        if loop is not None and loop < 0 and len(self.plan) > 1:
            raise UsageError(
                f"--loop without a count loops until interrupted, but the selection takes "
                f"{len(self.plan)} passes: the later ones would never run (give --loop=N)"
            )
        self._rows.plan(list(self.profile.metrics))
        if len(self.plan) <= 1 and self.repeats.runs == 1 and loop is None:
            self.replayer.program.once(metadata=True)  # (one run of one pass; the tables)
        if self._saved is not None:
            self._restore_columns(self._saved)

    def _keys(self, plan: PassPlan) -> list[Key]:
        """The columns a pass measures."""
        return [
            (metric, boundary)
            for boundary, metrics in self.profile.metrics.items()
            for metric in metrics
            if metric.backend == plan.backend.name
        ]

    def _column(self, metric: Metric, boundary: Boundary, suffix: str = "") -> Column:
        return store_column(self.store, metric, boundary, suffix)

    def _start_pass(self) -> None:
        """At the pass's first current context: begin its backend's pass and measure."""
        if self._live_line is not None:  # the passes are planned now: 'pass k of N'
            self._live_line.label = self._pass_label()
        if self._pass >= len(self.plan):
            self.meter.start(None)
            return
        plan = self.plan[self._pass]
        columns = self.repeats.columns(self._keys(plan), self.profile, self._pass, self._run)
        plan.backend.begin_pass(plan.index, columns)
        if self._expected is None:  # rows are stored in pass 1
            self._rows.create(self.store)
        self._checkpoint(self._pass, self._run)  # the columns of this run exist, still empty
        self.meter.start(plan)

    def _publish(self, first: bool) -> None:
        """At a frame end, for the parent to keep what was measured if the driver crashes:
        the frames ended, the lengths of the columns and, in the first run, the event rows
        so far and the names of their functions (`frame_end` publishes the frames alone
        where nothing else changes); `first`: the first run's frame end."""
        live, program, meter, rows = self.live, self.replayer.program, self.meter, self._rows
        assert live is not None
        stopping = contain.stop_requested()  # Ctrl-C: keep everything up to this frame end
        stored = rows.done
        tables = first and bool(rows.tables)  # (calls, draws)
        if tables:
            store_rows = rows.store_until if stopping else rows.store_soon
            store_rows(self.store, program, program.code.position + 1)
        # the lengths, where columns changed: the loop's events reach the store only when
        # its ring empties (which publishes them), the rows now and then; callbacks write
        # at every event
        changed = stored != rows.done or meter.writing
        live.publish(
            self._pass,
            self.replayer.frame,
            self.store.lengths() if changed else None,
            program.names if tables else None,
        )
        if stopping:
            contain.stop_here()

    def _run_pass(self) -> float:
        """Replay once with the current pass; returns the seconds it took."""
        self.meter.reset()
        self.view.forget_contexts()
        self._ready = False
        if self._live_line is not None:
            total = self._expected[Boundary.FRAME] - 1 if self._expected else None
            self._live_line.start(self._pass_label(), total)
        started = time.perf_counter()
        self.replayer.last_frame = self._loop_stop() if self.options.loop else None
        if self._pass == 0 and self._run == 0:  # (the first run's: `EventRows`)
            self.replayer.state.log_programs(self.replayer.program.code, self._rows.programs)
        try:
            self._last_seconds = self.replayer.run_pass().seconds
            loops = self._loop() if self.options.loop else None
            counts = self.meter.end(loops)
        finally:
            self.replayer.state.log_programs(None, None)
            self._looping = False
            self.meter.finish()
            if self._live_line is not None:
                self._live_line.done()
        self._check_events(counts)
        this = self.replayer.fidelity()
        self.fidelity = this if self.fidelity is None else self.fidelity.worst(this)
        return time.perf_counter() - started

    def _loop_stop(self) -> int | None:
        """The frame a --loop pass stops after: the last of --frames, else the trace's last
        complete frame where calls follow it (the program's clean-up: run first, it would
        leave the loops no context, nothing to draw, only '-' to measure)."""
        last = self.options.frames[1]
        if last is not None:
            return last
        from retrace.trace.reader import read_counts  # (through the trace cache: read once)

        counts, _ = read_counts(self.replayer.reader.path)
        return counts.frames - 1 if counts.after_last_frame and counts.frames else None

    def _loop(self) -> tuple[int, int, int]:
        """--loop N: after the replay up to the last frame of --frames (or the whole trace),
        replay those frames (or the last one) --warmup times unmeasured, then N times
        measured; returns (N, first op, end op) of the loops."""
        first, last = self.options.frames
        loops = self.options.loop
        assert loops is not None
        if not self._ready:
            return loops, 0, 0  # (no context: the run fails after the pass)
        program, replayer = self.replayer.program, self.replayer
        whole = (first, last) == (0, None)  # no --frames: the last frame, as glretrace loops
        start, stop = replayer.frame_ops(None if whole else first, last)
        ends = program.frame_ends  # the frames looped: those of ops [start, stop)
        self.profile.window = bisect.bisect_left(ends, start), bisect.bisect_left(ends, stop - 1)
        self.profile.loops = loops
        if self._expected is None:
            # the first run: the rows the loops repeat stored, and the loops checkpointed, so
            # that a crash or Ctrl-C in the loops still writes the loops measured so far
            self._rows.store_until(self.store, program, stop)
            self._checkpoint(self._pass, self._run)
        replayer.last_frame = None
        replayer.state.log_programs(None, None)  # (the trace's changes only)
        self._looping = True
        began = time.perf_counter()
        meter, per_loop = self.meter, self.profile.frames_per_loop
        try:
            # the loops are measured from the frame end before the first of them, the last
            # unmeasured loop's (one runs without --warmup): the pass's last frame end may be
            # followed by other calls (the trace's clean-up, or this first run's checkpoint)
            unmeasured = max(self.options.warmup, 1)
            for i in range(unmeasured):
                if i == unmeasured - 1:
                    meter.loops_from(meter.counts[Boundary.FRAME] + per_loop - 1)
                program.run(start, stop)
            for _ in range(loops) if loops >= 0 else itertools.count():  # (< 0: until stopped)
                program.run(start, stop)
        finally:
            program.bracket()  # (callbacks the loops were measured with)
        if replayer.state.current is not None:
            replayer.gl.Finish()
        self._last_seconds += time.perf_counter() - began
        return loops, start, stop

    def _check_events(self, counts: dict[Boundary, int]) -> None:
        if self._expected is None:
            self._expected = dict(counts)
            self.profile.frame_events = counts[Boundary.FRAME]
            self.profile.names = list(self.replayer.program.names)
            self._rows.store_until(self.store, self.replayer.program, len(self.replayer.program))
            self._narrow_to_calls()
            return
        for boundary, count in self._expected.items():
            if counts[boundary] != count:
                raise ProfileError(
                    f"pass {self._pass + 1} saw {counts[boundary]} {boundary.name.lower()} "
                    f"events where pass 1 saw {count}: the replay is not deterministic; results in "
                    f"{self.store.path}"
                )

    def _narrow_to_calls(self) -> None:
        """After the first pass, with --calls: the frames that hold the selected calls are
        known; the tables keep those and later passes measure only those."""
        calls = self.options.calls
        if calls is None or self.options.loop is not None:  # (loops: the frames looped)
            return
        program, frames = self.replayer.program, self.options.frames
        span = calls_span(program, calls, EVENT_ROWS[Boundary.CALL], frames)
        if span is None:  # nothing selected: an empty window after the trace's frames
            span = (self.profile.frame_events, self.profile.frame_events - 1)
        self.profile.window = span
        self.meter.first, self.meter.last = span
        self.meter.last_call = None

    def ending(self) -> tuple[list[str], RetraceError | None]:
        """After the passes: the replay's warnings and error (`Replayer.ending`); an error
        when --frames or --calls left nothing to measure (their reach past the trace's end
        was told before the replay: `checks.check_part`)."""
        lines, error = self.replayer.ending(self.options.strict, self.fidelity)
        if self.options.loop is not None:
            from retrace.profile.loops import looped_frames

            looped = looped_frames(*self.profile.window)
            lines.insert(0, f"retrace: warning: --loop replayed {looped} again; {LOOP_CAVEAT}")
        if error is None and self.profile.measured_nothing():
            why = nothing_selected(self.options, self.replayer.program, EVENT_ROWS[Boundary.CALL])
            error = RetraceError(f"nothing measured: {why}")
        return lines, error

    def _report(self, seconds: float, last_of_pass: bool) -> None:
        """The progress line of a run, once it is complete (checkpointed): that of the
        pass's last run, and of others at most once a second (`--repeat 500` of a fast
        trace would print 500 lines)."""
        now = time.monotonic()
        if self.progress is not None and (last_of_pass or now - self._reported >= REPORT_SECONDS):
            self._reported = now
            rate = self.replayer.frame / seconds if seconds else 0.0
            print(
                f"{self._pass_label()} done in {seconds:.2f} s ({rate:.1f} frames/s)",
                file=self.progress,
                flush=True,
            )

    def _pass_label(self) -> str:
        """'retrace: pass k of N (run r of R)'; 'of N' once the passes are planned (at the
        first context)."""
        of = f" of {max(len(self.plan), 1)}" if self._planned else ""  # (0: one bare replay)
        return f"retrace: pass {self._pass + 1}{of}{self.repeats.label(self._run)}"

    def run(self) -> Profile:
        """Every pass (each `warmup + repeat` times); returns what was measured.

        A failure after the first pass keeps the store, and its message says where.
        """
        self._on_ready = self._resolve
        runs = self.repeats.runs
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
                        if self._pass < len(self.plan) and self.repeats.repeated:
                            keys = self._keys(self.plan[self._pass])
                            self.repeats.combine(keys, self.profile, self._pass)
                        last = self._pass + 1 >= max(len(self.plan), 1)
                        self._checkpoint(self._pass + 1, 0, finished=last)
                    self._report(seconds, run + 1 == runs)
                    if self.live is not None and contain.stop_requested():
                        contain.stop_here()  # between runs: the checkpoint has it all
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

    def _checkpoint(self, next_pass: int, next_run: int, finished: bool = False) -> None:
        """With `live`: record in the store that every run before (next_pass, next_run) is
        complete, with the column lengths and what the tables need (one atomic manifest);
        `finished`: the last run's, with how the profile ended (`finish`) in the same
        manifest (one write of it less)."""
        if self.live is None:
            return
        if "progress" not in self.store.meta and self.progress is not None:
            print(f"retrace: measuring into {self.store.path}", file=self.progress, flush=True)
        expected = self._expected
        fidelity = self.fidelity or self.replayer.fidelity()
        self.store.meta["facts"] = run_facts(self.context_facts, self.plan, fidelity)
        counts = self.replayer.reader.counts  # (known once the first replay read it all)
        if counts is not None:  # for the metadata: the parent need not read the trace again
            self.store.meta["trace_counts"] = counts._asdict()
        self.store.meta["progress"] = {
            "pass": next_pass,
            "run": next_run,
            "passes": max(len(self.plan), 1),
            "expected": None if expected is None else {b.name: n for b, n in expected.items()},
            "profile": self.profile.to_json(),
        }
        if finished:
            self.store.meta["finish"] = self._finish()
        self.store.flush()

    def _finish(self) -> dict[str, Any]:
        """How the profile ended, for the parent that prints it: the `Rendered` line, the
        replay's warnings and its error (message, exit status) or None (`ending`)."""
        lines, error = self.ending()
        return {
            "summary": self.summary(),
            "warnings": lines,
            "error": None if error is None else [str(error), error.exit_code],
        }

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
        self.profile.contexts = list(saved.get("contexts", ()))
        if "window" in saved and self.options.loop is None:  # (narrowed by --calls)
            first, last = saved["window"]
            self.profile.window = self.meter.first, self.meter.last = first, last
            self.meter.last_call = None

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
        self.until_first_context(self._resolve)
        return max(len(self.plan), 1)
