"""Types of the replay loop (`_vm.c`): the module's `Code`, `publish` and constants."""

from collections.abc import Callable
from typing import Any, TypeAlias, final, overload

import numpy as np
from _typeshed import FileDescriptorLike
from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

# Anything with the buffer protocol; numpy's stubs give ndarray __buffer__ from Python 3.12 only.
_Bytes: TypeAlias = Buffer | np.ndarray[Any, Any]

# How one parameter's traced object names become the driver's: a dict every pass refills,
# or a function of the traced value; None where the parameter names no object.
_NameTable: TypeAlias = dict[int, int] | Callable[[int], int] | None
# A Python entry the loop calls: (function, its arguments).
_Entry: TypeAlias = tuple[Callable[..., object], tuple[Any, ...]]
# An op's index and its mark (1: a profiling row, 2: checkable).
_Bracket: TypeAlias = Callable[[int, int], object] | None

NATIVE_CALLS: int
"""1 where direct calls work on this ABI (x86-64 System V, AArch64), else 0."""
CALL_SIZE: int
"""Bytes per call record (`CallRec` in records.h), as the scanner writes them."""
NODE_SIZE: int
"""Bytes per value node (`Node` in records.h)."""
SIG_SKIP: int
"""`Code.set_sig` proto of a signature whose calls compile to nothing."""
SIG_SLOW: int
"""`Code.set_sig` proto of a signature whose calls compile in Python."""
NO_ENTRY: int
"""`Code.memo` entry of a call that compiled to no op."""
PROGRESS_CALL: int
"""Which int64 of the published buffer holds the call number running or last run."""
PROGRESS_RUNNING: int
"""Which int64 of it is 1 while a loop runs."""
PROGRESS_WORDS: int
"""How many int64 `publish` writes."""
ROW_NONE: int
"""Profiling rows of ops (`retrace.replay.program.Row`): none, call, draw, glBegin, glEnd,
glEndList."""
ROW_CALL: int
ROW_DRAW: int
ROW_BEGIN: int
ROW_END: int
ROW_LIST_END: int
MARK_NONE: int
"""Which per-op flag `Code.bracket` selects: none, the profiling row, checkable."""
MARK_ROWS: int
MARK_CHECKABLE: int
MEASURE_CLOCK: int
"""Bits of what `Code.events` measures around one kind of event: MEASURE_CLOCK marks the kind
as measured (the clock is always read); GL timestamps, samples passed, memory, GPU disjoint."""
MEASURE_GPU_TIMES: int
MEASURE_PIXELS: int
MEASURE_MEMORY: int
MEASURE_DISJOINT: int
MEASURE_BUSY: int
EVENT_FIELDS: tuple[str, ...]
"""The int64 fields of an event record, in order (`Code.take_events`)."""
EVENT_SIZE: int
RING_HEAD: int
"""Bytes before the records of an event ring (`Code.events`): an int64 count per kind."""
"""Bytes per event record."""
OP_ARRAYS_AT: int
"""Where in the data pool's file the op arrays' regions begin (the pool's bytes are below)."""
MISSING: int
"""An event record's value where nothing was measured (INT64_MIN)."""
QUERY_FUNCTIONS: tuple[tuple[str, str], ...]
"""(OpenGL name, OpenGL ES name) of each function events use, in `Code.enter_context`'s
order."""
GL_SAMPLES_PASSED: int
"""The query target of the samples events count."""
ARG_I8: int
"""`Code.add_proto` parameter types: numbers (signed and unsigned integers of 8 to 64 bits,
floats of 32 and 64), all below ARG_PTR; an input pointer to anything (ARG_PTR), or to
numbers of one type (ARG_PTR_OF + that number's type); an array of object names remapped
through its table (ARG_NAMES_IN), or one the driver writes as many names into as the first
argument says, recorded in its table, a dict or a function giving one (ARG_NAMES_OUT); an
array of strings, passed as an array of pointers to them (ARG_STRINGS)."""
ARG_U8: int
ARG_I16: int
ARG_U16: int
ARG_I32: int
ARG_U32: int
ARG_I64: int
ARG_U64: int
ARG_F32: int
ARG_F64: int
ARG_PTR: int
ARG_PTR_OF: int
ARG_NAMES_IN: int
ARG_NAMES_OUT: int
ARG_STRINGS: int
MOST_OUTPUT_VALUES: int
"""The most values an output, and names a name array, may have: `compile` hands name arrays
of more to Python, which refuses outputs of more (`retrace.replay.sizes`)."""

GL_SYNC_FLUSH_COMMANDS_BIT: int
GL_TIMEOUT_IGNORED: int
"""glClientWaitSync's flag and timeout, as `frame_fence` waits."""

def publish(buffer: Buffer, /) -> None:
    """From now on the loop writes (call number running, loop running) as two int64 there."""

def gl_errors(get_error: int, most: int, /) -> tuple[int, ...]:
    """The codes glGetError at `get_error` answers until GL_NO_ERROR, at most `most` of
    them, in order (most often none)."""

def frame_fence(functions: tuple[int, int, int, int], previous: int, /) -> int:
    """Fence the frame, then wait for `previous` (the frame before's fence; flushing) and
    delete it, or flush where it is 0: glFenceSync, glClientWaitSync, glDeleteSync and
    glFlush at `functions`. The new fence, 0 where none was made."""

def event_values(records: Buffer, end: int, start: int, missing: float, /) -> bytes:
    """One metric of event records (`Code.take_events`): field `end` less field `start`
    (-1: none), `missing` where not measured; int64, or doubles when `missing` is a float."""

@final
class Code:
    """A compiled trace: ops, their arguments, the data pool they point into and per-op
    metadata."""

    def __new__(cls, file: FileDescriptorLike, where: str, in_heap: int = ...) -> Code:
        """`file` (read-write, empty) holds the data pool, and the op arrays larger than
        `in_heap` bytes (16 MiB unless given); `where` names it in messages."""
    @property
    def position(self) -> int:
        """The op running now."""
    in_begin: bool
    """Compiling: a glBegin block is open (`compile` opens and closes it too)."""
    def __len__(self) -> int: ...
    def add_proto(
        self,
        address: int,
        types: Buffer,
        tables: tuple[_NameTable, ...],
        effect: Callable[[int, int, int], object] | None = None,
        result: int = 0,
        /,
    ) -> int:
        """A direct-call prototype's id, or -1 when it cannot be called directly here;
        `effect(first traced argument, traced result, the driver's)` is called after each
        call, its results typed `result` (an integer ARG_*)."""
    def set_sig(
        self,
        sig: int,
        proto: int,
        name_id: int,
        row: int,
        work: bool = ...,
        lists: bool = ...,
        /,
    ) -> None:
        """How calls of a trace signature compile (a proto id, SIG_SKIP or SIG_SLOW),
        whether they make the GPU work, and whether Python compiles them while a display
        list compiles (`compile`'s `compiling`)."""
    def compile(
        self,
        calls: _Bytes,
        slots: _Bytes,
        nodes: _Bytes,
        pool: _Bytes,
        start: int,
        thread: int,
        in_list: bool,
        stops: _Bytes | None = None,
        compiling: bool = False,
        /,
    ) -> int:
        """Compile calls from `start` on to direct ops; the index of the first left to Python
        (`stops`: non-zero where Python must decide; `compiling`: a display list compiles,
        so signatures set with `lists` go to Python). glBegin and glEnd open and close
        `in_begin`."""
    def memo(
        self,
        calls: _Bytes,
        slots: _Bytes,
        nodes: _Bytes,
        index: int,
        entry: int,
        frame_ends: list[int] | None,
        /,
    ) -> bool:
        """Call `index` of the batch compiled to Python entry `entry` and nothing else (or to
        nothing: NO_ENTRY): later calls of its signature with the same values compile to ops
        of that entry, their op indices appended to `frame_ends` unless None (or to nothing);
        False where it cannot be keyed."""
    def keep(self, data: Buffer, /) -> int:
        """The address of a NUL-terminated copy of `data` in the data pool, for the next op."""
    def add_py(
        self,
        entry_index: int,
        call_no: int,
        name_id: int,
        row: int,
        checkable: bool,
        work: bool = ...,
        /,
    ) -> None:
        """Add an op that calls the Python entry `entry_index`."""
    def run(self, start: int, end: int, entries: list[_Entry], /) -> int:
        """Run ops [start, end); returns end."""
    def bracket(self, marks: int, before: _Bracket, after: _Bracket, /) -> None:
        """Call before(i, mark) and after(i, mark) around every op whose mark is not zero."""
    @overload
    def events(self, off: None, /) -> None:
        """Stop measuring events; what was not taken is dropped."""
    @overload
    def events(
        self,
        calls: int,
        draws: int,
        frames: int,
        on_full: Callable[[], object] | None,
        ring: Buffer | None = None,
        /,
    ) -> None:
        """Measure calls, draws and frames from the next op on: MEASURE_* bits per kind; with
        a `ring` (RING_HEAD bytes of counts, then records of each kind), take them into it."""
    def enter_context(self, functions: tuple[int, ...], /) -> None:
        """A context is current: the addresses of its QUERY_FUNCTIONS (0 where missing)."""
    def leave_context(self) -> None:
        """Read and delete the current context's queries before it changes or goes."""
    def frame(self, begin: bool, /) -> None:
        """End the open frame event, and with `begin` begin the next."""
    def take_events(self, all: bool, /) -> tuple[bytes, bytes, bytes]:
        """(calls, draws, frames): the events measured, as records of EVENT_FIELDS."""
    def column(self, name: str, start: int, stop: int, /) -> memoryview:
        """A copy of ops [start, stop) of one per-op array (call_nos, name_ids, rows, checkable),
        in the array's item type (int64, uint32, uint8, uint8)."""
    def event_rows(
        self,
        start: int,
        stop: int,
        kinds: int,
        frame_ends: Buffer,
        first_frame: int,
        changes: tuple[Buffer, ...],
        /,
    ) -> tuple[bytes, ...]:
        """Per event among ops [start, stop) whose row is in `kinds` (a bit per ROW_*), int64
        bytes: call number, name id, frame, and the value in use of each of `changes`."""
    def row_counts(self, start: int, stop: int, /) -> tuple[int, ...]:
        """How many of ops [start, stop) have each row kind (ROW_NONE to ROW_LIST_END)."""
    def meta(self, i: int, /) -> tuple[int, int, int, int]:
        """(call_no, name_id, row, checkable) of op i."""
    def is_direct(self, i: int, /) -> bool:
        """Whether op i is a direct call."""
    def once(self, metadata: bool = True, /) -> None:
        """Ops leave memory, from the heap too, once they have run, and without `metadata`
        their per-op metadata too; running them (or reading that metadata) again is an
        error."""
    def share_gil(self, on: bool, /) -> None:
        """Whether `run` lets other threads run during runs of direct calls."""

@final
class Locations:
    """The uniform locations of the program glUniform* sets now, for direct calls: `set` keeps
    it current; a negative location, or any with no table, passes unchanged, one the table
    lacks is asked of `fallback`."""

    def __new__(cls, fallback: Callable[[int], int], /) -> Locations: ...
    def set(self, table: dict[int, int] | None, /) -> None:
        """The traced -> real table of the program in use, or None where it has none."""
    def __call__(self, traced: int, /) -> int:
        """One location, as a direct call maps it."""

@final
class ProgramInUse:
    """A direct glUseProgram's remapping: records the traced program as `current`'s program
    (and in the list `log` gives), points `uniforms` at its table in `tables`, and gives the
    driver's name from `names` (unchanged where absent); where `current` is None, or for
    program 0, `use(traced)` records it instead."""

    current: Any  # the TracedContext whose program it records in C, or None

    def __new__(
        cls,
        names: dict[int, int],
        uniforms: Locations,
        tables: dict[int, dict[int, int]],
        use: Callable[[int], None],
        /,
    ) -> ProgramInUse: ...
    def __call__(self, traced: int, /) -> int:
        """glUseProgram(traced)'s bookkeeping, as a direct call does it: the driver's name."""
    def log(self, code: Code | None, changes: list[tuple[int, int]] | None, /) -> None:
        """Append (`code`'s running op, the program) to `changes` at every program it
        records from now on (None, None: no more)."""
    def changed(self, program: int, /) -> None:
        """The program in use changed in Python's way (a context switch, program 0): logged
        as those it records are, where it logs."""
