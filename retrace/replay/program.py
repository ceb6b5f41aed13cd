"""A compiled trace: the ops one replay pass runs, and what each one is.

`Program` wraps the C code object (`_vm.Code`): its ops are direct calls of
the driver's functions or Python entries ``(function, args)``, with per-op
metadata (trace call number, function, profiling `OpKind`, whether glGetError
may follow) in flat arrays. `compiler.py` fills it; the replayer runs it; the
profiler brackets its ops or has the loop measure events itself.

Memory: the bytes the ops pass to the driver (uploads, strings, arrays, fake
memcpy data) are most of a trace, and every pass needs them again. They live
in the data pool, an unlinked temporary file mapped into the process, whose
pages leave the process once the loop has run past them (`_vm.c` says how
and why): the page cache holds them for the next pass, so the compiled trace
is reused by every pass (nothing is parsed or compiled twice) while resident
memory stays flat in the trace's length. The ops themselves (about 30 bytes
each) move to the same file once their arrays outgrow 16 MiB, and leave the
process behind the loop likewise. A program run one pass only (`once`: a replay
without --loop, a profile of one run of one pass) drops its ops and their
arguments behind the loop from the heap too, and a replay their per-op metadata
as well; what still grows with the trace is a profile's per-op metadata (about 15
bytes an op, which its tables read) and a few hundred bytes per Python entry.

What the C side and this side must agree on (row and mark numbers, the event
record, what an event measures, the query functions) is defined in `_vm.c`
and read from the module here.
"""

from __future__ import annotations

import enum
import os
from array import array
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrace.replay import _vm

if TYPE_CHECKING:  # (a profile's: a replay never imports the vocabulary of measurement)
    from retrace.vocabulary import NativeEvents

Entry = tuple[Callable[..., Any], tuple[Any, ...]]


class OpKind(enum.IntEnum):
    """What an entry is to the profiler (glretrace's rules for the calls and draw-calls tables)."""

    NONE = _vm.ROW_NONE  # window-system calls, memcpy, the replayer's own work, calls in lists
    CALL = _vm.ROW_CALL  # a call row
    DRAW = _vm.ROW_DRAW  # a call row that is also a draw-call row
    BEGIN = _vm.ROW_BEGIN  # glBegin: opens a draw row that glEnd closes
    END = _vm.ROW_END  # glEnd
    LIST_END = _vm.ROW_LIST_END  # glEndList: a call row, run while GL still compiles its list


class Marks(enum.IntEnum):
    """Which per-op flag selects the ops a pass brackets with callbacks (`Program.bracket`)."""

    NONE = _vm.MARK_NONE
    ROWS = _vm.MARK_ROWS  # profiling rows: the mark is the op's OpKind
    CHECKABLE = _vm.MARK_CHECKABLE  # GL calls glGetError may follow: the mark is 1


class EventRecords:
    """Events the loop measured (`Program.take_events`), as `_vm.c` lays them out: int64
    fields `FIELDS` (ns since the pass began on the CPU clock and the GPU's, samples
    passed, the GPU-disjoint flag, bytes, GPU busy and idle ns; `NOT_MEASURED` where
    nothing was), one record
    per event in order. Read in C, so that measuring imports no numpy."""

    __slots__ = ("records",)
    FIELDS: tuple[str, ...] = _vm.EVENT_FIELDS
    _INDEX = {name: i for i, name in enumerate(FIELDS)}

    def __init__(self, records: bytes) -> None:
        self.records = records

    def __len__(self) -> int:
        return len(self.records) // _vm.EVENT_SIZE

    def values(self, end: str, start: str | None, missing: float) -> bytes:
        """One value per event: field `end`, less field `start` if given; `missing` where a
        field used was not measured. As int64 bytes, or doubles when `missing` is a float
        (the missing value of a store column of doubles)."""
        index = self._INDEX
        first = -1 if start is None else index[start]
        return _vm.event_values(self.records, index[end], first, missing)


RING_HEAD: int = _vm.RING_HEAD  # bytes of an event ring before its records (their counts)
EVENT_SIZE: int = _vm.EVENT_SIZE  # bytes of one record
NOT_MEASURED: int = _vm.MISSING  # in a field of `EventRecords` that was not measured
# (GL name, OpenGL ES name) of each function the loop measures events with, in the order
# `Program.enter_context` takes their addresses
QUERY_FUNCTIONS: tuple[tuple[str, str], ...] = _vm.QUERY_FUNCTIONS
GL_SAMPLES_PASSED: int = _vm.GL_SAMPLES_PASSED  # the query target Pixels Drawn uses


def _measure(native: NativeEvents | None) -> int:
    """The loop's bits for what to measure around one kind of event (0: not measured)."""
    if native is None:
        return 0
    return (
        _vm.MEASURE_CLOCK
        | (_vm.MEASURE_GPU_TIMES if native.gpu_times else 0)
        | (_vm.MEASURE_PIXELS if native.pixels else 0)
        | (_vm.MEASURE_MEMORY if native.memory else 0)
        | (_vm.MEASURE_DISJOINT if native.disjoint else 0)
        | (_vm.MEASURE_BUSY if native.busy else 0)
    )


class Program:
    """A compiled trace: the ops a replay pass runs, and what each one is.

    Per-op metadata (call number, function, OpKind, checkable) lives in the C
    code object as flat arrays; only ops that are Python entries cost a Python
    object.
    """

    def __init__(self) -> None:
        fd, where = _data_file()
        try:
            self.code = _vm.Code(fd, f"{where} (the compiled trace's data)")
        finally:
            os.close(fd)
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

    def keep(self, data: bytes) -> int:
        """The address of a copy of `data` (NUL-terminated) in the data pool, valid as long
        as the program, for the Python entry added next to pass or copy."""
        return self.code.keep(data)

    def add(
        self,
        entry: Entry,
        call_no: int,
        name_id: int,
        row: int = 0,
        checkable: bool = False,
        work: bool = False,
    ) -> None:
        """Append an op that calls a Python entry (`work`: it makes the GPU work)."""
        self.code.add_py(len(self.entries), call_no, name_id, row, checkable, work)
        self.entries.append(entry)

    def run(self, start: int, end: int | None = None) -> int:
        """Run ops [start, end); returns where it stopped."""
        return self.code.run(start, len(self.code) if end is None else end, self.entries)

    def once(self, *, metadata: bool) -> None:
        """This program runs one pass (a replay without --loop): ops and their arguments
        leave memory as soon as they have run, from the heap too, so that peak memory grows
        only by the per-op metadata (about 15 bytes an op, against 40-50 with them), and not
        by that either without `metadata` (what a replay keeps: only a profile's tables read
        the metadata of ops that have run); running them, or reading what left, again raises
        RuntimeError."""
        self.code.once(metadata)

    def share_gil(self, on: bool) -> None:
        """Whether `run` lets other threads run (a reader: `trace/ahead.py`) while it runs
        direct calls, which need no Python object."""
        self.code.share_gil(on)

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
        calls: NativeEvents | None,
        draws: NativeEvents | None,
        frames: NativeEvents | None,
        on_full: Callable[[], None],
        ring: memoryview | None = None,
    ) -> None:
        """From the next op on, have the loop measure every call and draw-call event, and
        the frames `frame` delimits, itself (in C: no Python per event): the clock, and what
        each kind's `NativeEvents` asks (None: that kind is not measured). The pass's
        clocks start now; GL queries wait for `enter_context`. `on_full` is called when
        many calls and draws have ended since the last `take_events` (`READ_EVERY` in
        `_vm.c`); with a `ring` (`RING_HEAD`, then records: "the ring" in `_vm.c`), the
        loop takes the events into it itself, at frame ends and every `READ_EVERY` events,
        and `on_full` is called when the ring is full, to empty it."""
        self.code.events(_measure(calls), _measure(draws), _measure(frames), on_full, ring)

    def enter_context(self, functions: tuple[int, ...]) -> None:
        """A context is current: the addresses of its `QUERY_FUNCTIONS` (0 for those it
        lacks: their measurements read `NOT_MEASURED`)."""
        self.code.enter_context(functions)

    def leave_context(self) -> None:
        """The current context is about to change or go: read and delete the queries made
        in it; events still open keep what they measured there."""
        self.code.leave_context()

    def frame(self, begin: bool = True) -> None:
        """End the open frame event, if any, and with `begin` begin the next one."""
        self.code.frame(begin)

    def stop_events(self) -> None:
        """Stop measuring events (what was not taken is dropped)."""
        self.code.events(None)

    def take_events(self, all: bool = False) -> tuple[EventRecords, EventRecords, EventRecords]:
        """(calls, draws, frames) measured, in event order: those that had ended at the
        previous take, which the GPU is done with by now, or with `all` every one. Reads
        their queries in the context they ran in, which must be current (`leave_context`
        read the others), and frees them for reuse."""
        calls, draws, frames = map(EventRecords, self.code.take_events(all))
        return calls, draws, frames

    def where(self, i: int) -> str:
        """'CALL_NO: FUNCTION' of op i, for messages."""
        call_no, name_id, _, _ = self.code.meta(i)
        return f"{call_no}: {self.names[name_id]}"

    def column(self, name: str, start: int = 0, stop: int | None = None) -> memoryview:
        """A copy of ops [start, stop) of one per-op array (call_nos, name_ids, rows,
        checkable or work), typed as `_vm.c` keeps it (int64, uint32, uint8)."""
        stop = len(self.code) if stop is None else stop
        return self.code.column(name, start, stop)

    def event_rows(
        self,
        start: int,
        stop: int,
        rows: tuple[int, ...],
        frame_ends: list[int],
        first_frame: int,
        changes: tuple[list[tuple[int, int]], ...],
    ) -> tuple[bytes, ...]:
        """Per event among ops [start, stop) (the ops whose OpKind is among `rows`), as
        int64 bytes: call number, function name id, frame (`first_frame` + the number of
        `frame_ends`, sorted op indices, below its op), then for each log of `changes`
        ((op, value), sorted) the value of the last change in an op before it (0 before
        the first)."""
        kinds = sum(1 << row for row in set(rows))
        ends = array("q", frame_ends)
        logs = tuple(array("q", [x for pair in log for x in pair]) for log in changes)
        return self.code.event_rows(start, stop, kinds, ends, first_frame, logs)


def _data_file() -> tuple[int, str]:
    """An unlinked temporary file for the data pool, and its directory: made with O_TMPFILE
    in $TMPDIR (else /tmp), or where that fails by tempfile (whose import, 5 ms, the
    replay's start-up is spared)."""
    where = os.environ.get("TMPDIR") or "/tmp"
    try:
        return os.open(where, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600), where
    except (OSError, AttributeError):  # no O_TMPFILE here (kernel, file system, platform)
        import tempfile

        with tempfile.TemporaryFile() as file:
            return os.dup(file.fileno()), tempfile.gettempdir()
