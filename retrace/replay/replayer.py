"""The replay loop: compile a trace once, then run it pass after pass.

The first pass parses, compiles and runs the trace batch by batch; later
passes run the compiled ops only. Memory stays flat in the trace's length all
the same: a batch is released before the next is read, and the data the ops
pass to the driver (uploads, strings, arrays) lives in the program's data pool,
a file whose pages leave the process once the loop has run past them
(`program.py`). glretrace instead reads and parses the trace again in every
pass; compiling once saves a multi-pass profile that work in every pass after
the first, at the cost of the data pool's disk space (as much as the trace's
uncompressed data). The loop itself is C (`_vm.c`): everything
per call was decided when the op was compiled, and Python runs only for ops
that are Python entries and for the callbacks a pass brackets ops with
(`Program.bracket`: -v's error checks, per-call metrics the loop cannot
measure itself). Frame ends
call the frame hook (snapshots, profiling) before the swap, as glretrace does.
"""

from __future__ import annotations

import bisect
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from retrace.errors import RetraceError, TraceError
from retrace.gl.registry import load_registry
from retrace.libc import map_large_blocks
from retrace.replay.compiler import Compiler
from retrace.replay.dispatch import Dispatch
from retrace.replay.fidelity import Fidelity, FidelityError, GlErrors, enum_name
from retrace.replay.program import Marks, Program
from retrace.replay.snapshot import Image, OwnGL, read_current
from retrace.replay.state import ReplayState
from retrace.replay.ws.core import WindowSystem
from retrace.replay.ws.driver_process import open_display
from retrace.replay.ws.headless import Drawable, EglDisplay
from retrace.replay.ws.reader import WsCompiler
from retrace.trace.ahead import wanted as read_ahead_wanted
from retrace.trace.callset import CallSet
from retrace.trace.reader import TraceReader


def rendered(frames: int, seconds: float) -> str:
    """glretrace's closing line, which scripts parse."""
    fps = frames / seconds if seconds else 0.0
    return f"Rendered {frames} frames in {seconds:g} secs, average of {fps:g} fps"


# what --loop (replay and profile alike) warns of: a loop replays recorded calls in a state
# that has moved on since they were recorded (objects deleted, buffers rewritten)
LOOP_CAVEAT = (
    "state the frames expect from their own start may differ, so frames can render wrongly"
)


class StopReplay(Exception):
    """Raised by a hook to end the pass early (--frames, a closed window)."""


class ReplayListener:
    """An observer of a replay pass (`Replayer.listen`): the profiler, --pframe-times, ...

    Every method is a no-op here; an observer overrides those it needs. They are called
    in the order observers joined, from inside the replay loop.
    """

    def frame_end(self, frame: int) -> None:
        """Frame `frame` (1-based: the count so far) has ended, before its swap."""

    def before_switch(self) -> None:
        """The current context is about to change (or go away)."""

    def after_switch(self) -> None:
        """A context is current again, maybe another one."""


class PassResult(NamedTuple):
    frames: int
    seconds: float
    calls: int


class Replayer:
    """One trace bound to one EGL display."""

    def __init__(
        self, path: str, display: EglDisplay | None = None, snapshots: CallSet | None = None
    ) -> None:
        map_large_blocks()  # (done already where the child prepared: `load_libraries`)
        self.reader = TraceReader(path)
        registry = load_registry()  # (before waiting for a display still opening ahead)
        self.display = display or open_display()
        self.state = ReplayState(self.display)
        self.dispatch = Dispatch(self.display.get_proc_address, registry)
        self.gl = OwnGL(self.dispatch)
        self.ws = WindowSystem(self.state, self.gl)
        self.gl_errors = GlErrors(self.gl.get_error_address, self.dispatch.registry)
        self.ws.gl_errors = self.gl_errors
        self.listeners: list[ReplayListener] = []
        self.ws.on_frame_end = self._frame_end
        self.ws.after_frame_end = self._stop_after_last
        self.ws.before_switch = self._before_switch
        self.ws.after_switch = self._after_switch
        self.compiler = Compiler(self.dispatch, self.state, WsCompiler(self.ws), self.reader.path)
        if snapshots is not None:
            self.compiler.hook(snapshots, self._snapshot)
        # why compiling stopped before the trace's end (damage, no room left for the program's
        # data): the replay stops there, then the replay or profile ends with this error
        self.stop_error: RetraceError | None = None
        self._compiled = False
        self.on_snapshot: Callable[[int, Image], None] | None = None
        self.frame = 0  # frames ended in this pass (the replayer's count is the only one)
        self.last_frame: int | None = None  # stop once this frame (0-based) has ended
        # whether a first pass stopped by `last_frame` or a hook still compiles the rest of the
        # trace, for passes after it (a profile's --loop after --frames A-B)
        self.compile_all = False

    @property
    def program(self) -> Program:
        return self.compiler.program

    def close(self) -> None:
        self.state.reset()
        self.display.terminate()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def listen(self, listener: ReplayListener) -> None:
        """Have `listener` observe every pass from now on, after those already listening."""
        self.listeners.append(listener)

    def _frame_end(self, drawable: Drawable | None) -> None:
        self.frame += 1
        self.ws.check_drawn(self.frame)
        for listener in self.listeners:
            listener.frame_end(self.frame)

    def _stop_after_last(self) -> None:
        """After a frame's end is done (a swap's included, which a --loop's first frame
        holds as every other frame does): stop once `last_frame` has ended."""
        if self.last_frame is not None and self.frame > self.last_frame:
            raise StopReplay

    def _before_switch(self) -> None:
        for listener in self.listeners:
            listener.before_switch()

    def _after_switch(self) -> None:
        for listener in self.listeners:
            listener.after_switch()

    def _snapshot(self, call_no: int) -> None:
        st = self.state
        if st.current is None or self.on_snapshot is None:
            return
        drawable = st.current_drawable
        size = (drawable.width, drawable.height) if drawable is not None else (0, 0)
        self.on_snapshot(call_no, read_current(self.gl, size, st.current.request.api == "gles"))

    def run_pass(self) -> PassResult:
        """Replay the whole trace once, compiling it first if this is the first pass.

        Callbacks set with `program.bracket` run around their ops; they are
        cleared when the pass ends. Events measured with `program.measure_events` are
        the caller's to take and stop.
        """
        self.state.reset()
        self.gl_errors.clear()
        self.ws.undrawn.clear()
        self.frame = 0
        start = time.perf_counter()
        try:
            if self._compiled:
                self.program.run(0)
            else:
                self._compile_and_run()
        except StopReplay:
            pass  # (a first pass stopped early has compiled only what it ran)
        finally:
            self.program.bracket()
        if self.state.current is not None:
            self.gl_errors.settle()
            self.gl.Finish()
        seconds = time.perf_counter() - start
        return PassResult(self.frame, seconds, len(self.program))

    def _compile_and_run(self) -> None:
        done = 0
        running = True  # until a hook stops the replay (with `compile_all`, compiling goes on)
        # the next batch is read on another core while this one compiles and replays (a
        # cached scan is handed out on this thread: the loop then keeps the GIL)
        ahead = read_ahead_wanted() and not self.reader.from_cache
        batches = self.reader.batches(ahead)
        self.program.share_gil(ahead)
        try:
            for batch in batches:
                self.compiler.add_batch(batch, self.reader.signatures)
                del batch  # its data is compiled: not kept while the next batch is read
                # (while a window's size is read ahead for, what was compiled waits)
                if running and not self.compiler.sizing_windows:
                    done = self._run_compiled(done)
                    running = done >= 0
        except TraceError as e:
            self.stop_error = e
        except OSError as e:  # a full disk under the data pool (`program.py`), a read error
            where = f"{e.filename}: " if e.filename else ""
            self.stop_error = RetraceError(f"{where}{e.strerror or e}")
        finally:
            batches.close()  # (a hook stopped the replay: reading stops)
            self.program.share_gil(False)
        if running:  # what is compiled and has not run yet (what came before an error too)
            running = self._run_compiled(done) >= 0
        self._compiled = True
        if not running:
            raise StopReplay

    def _run_compiled(self, start: int) -> int:
        """Run the ops compiled from `start` on; -1 where a hook stopped the replay and the
        rest of the trace is to be compiled all the same (`compile_all`)."""
        try:
            return self.program.run(start)
        except StopReplay:
            if not self.compile_all:
                raise
            return -1

    def frame_ops(self, first: int | None = None, last: int | None = None) -> tuple[int, int]:
        """Ops [start, end) of the complete frames first..last (0-based; last None or past
        the trace's complete frames: the last of them; first None: last); raises
        RetraceError when there is no such frame."""
        ends = self.program.frame_ends
        if not ends:
            raise RetraceError("--loop: the trace has no complete frame to loop over")
        last = len(ends) - 1 if last is None else min(last, len(ends) - 1)
        first = last if first is None else first
        if first > last:
            raise RetraceError(
                f"--loop: the trace has no complete frame {first} to loop over (its last "
                f"complete frame is {len(ends) - 1})"
            )
        return (ends[first - 1] + 1 if first else 0), ends[last] + 1

    def last_calls(self) -> tuple[int, int]:
        """Ops [start, end) of the calls since the last frame end the pass replayed, which
        glretrace's --loop repeats: frame `last_frame` where the pass stopped after it, else
        the calls after the trace's last frame end (its program's clean-up, often) or, where
        it ends with a frame end, its last frame (the whole trace if it has none)."""
        ends = self.program.frame_ends
        last = self.last_frame
        end = ends[last] + 1 if last is not None and self.frame > last else len(self.program)
        before = bisect.bisect_left(ends, end - 1)  # frame ends before the last op
        return (ends[before - 1] + 1 if before else 0), end

    def loop_last_frame(self, times: int) -> PassResult:
        """Replay the calls since the last frame end (`last_calls`) again `times` times
        (forever if negative), as glretrace --loop does; state those calls expect from
        their own start may differ, as there. Returns the frames the loops ended."""
        first, end = self.last_calls()
        start, count = time.perf_counter(), 0
        self.frame = 0
        last_frame, self.last_frame = self.last_frame, None  # (it ends passes, not loops)
        try:
            while times < 0 or count < times:
                self.program.run(first, end)
                count += 1
        finally:
            self.last_frame = last_frame
        if self.state.current is not None:
            self.gl.Finish()
        return PassResult(self.frame, time.perf_counter() - start, (end - first) * count)

    def check_errors(self) -> None:
        """For the next pass: report GL errors after every call where glGetError is allowed."""
        program, errors = self.program, self.gl_errors

        def check(i: int, mark: int) -> None:
            for name in errors.drain():
                print(f"{program.where(i)}: {name}", file=sys.stderr)

        program.bracket(Marks.CHECKABLE, after=check)

    def fidelity(self) -> Fidelity:
        """How the last pass departed from the trace."""
        program, mapped, errors = self.program, self.state.mapped, self.gl_errors
        queries, registry = self.state.app_queries, self.dispatch.registry
        return Fidelity(
            {
                name: (count, program.reasons.get(name, ""))
                for name, count in program.skipped.items()
            },
            mapped.misses,
            mapped.first_miss,
            Counter(errors.unexpected),
            errors.first_unexpected,
            Counter(errors.counts),
            errors.first_frame,
            Counter({enum_name(t, registry.enum_names): n for t, n in queries.left_out.items()}),
            queries.unconditional_renders,
            queries.mismatches,
            queries.first_mismatch,
            self.ws.undrawn.count,
            self.ws.undrawn.first_frame,
        )

    def finish(self, strict: bool = False, fidelity: Fidelity | None = None) -> None:
        """After the output: say how the replay departed from the trace (`fidelity`, or
        the last pass's), then raise what stopped compiling (damage, a full disk) if
        anything did, or with `strict` the departure."""
        lines, error = self.ending(strict, fidelity)
        for line in lines:
            print(line, file=sys.stderr)
        if error is not None:
            raise error

    def ending(
        self, strict: bool = False, fidelity: Fidelity | None = None
    ) -> tuple[list[str], RetraceError | None]:
        """What `finish` prints and raises (a profiling child hands them to its parent)."""
        fidelity = fidelity or self.fidelity()
        lines = fidelity.warnings()
        if not fidelity.faithful:
            advice = "" if strict else " (--strict makes this an error)"
            lines.append(f"retrace: warning: {fidelity.summary()}{advice}")
        if self.stop_error is not None:
            return lines, self.stop_error
        if strict and not fidelity.faithful:
            return lines, FidelityError(fidelity.summary())
        return lines, None
