"""Compiling a trace into replay ops.

Every call of the trace becomes, once, an op of a `Program`. GL calls whose
arguments are numbers, object names, uniform locations, buffer offsets or data
held in the trace compile in C straight from the reader's flat records into
direct calls of the driver's function (`_vm.c` says how). Every other
call becomes a Python entry ``(function, args)`` that its op calls as
``function(*args)``: a ctypes function typed from the registry with its
arguments already converted (arrays as ctypes arrays; blobs and strings, as
C's own, kept in the program's data pool: `program.py`). What cannot be fixed
at compile time -- the driver's names for the trace's objects, uniform
locations, where a mapped buffer lives -- is looked up when the entry runs,
through tables in `ReplayState` that every pass refills.

Window-system calls go to `ws.reader.WsCompiler`. Calls without side effects
(glGet*, glIs*, glGetError, the program's own query readbacks) compile to
nothing, as glretrace skips them. A call that cannot be issued (a function the
driver lacks, an argument that cannot be marshalled) is skipped and counted
per function name, so the replay can say what it left out.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import re
from array import array
from collections.abc import Callable, Iterable
from typing import Any

from retrace.errors import TraceError
from retrace.gl.registry import Command, CType, Param, ctypes_type
from retrace.gl.work import makes_gpu_work
from retrace.replay import _guard, _vm
from retrace.replay.dispatch import Dispatch
from retrace.replay.effects import QUERY_RESULTS, has_side_effects
from retrace.replay.program import Entry, OpKind, Program
from retrace.replay.readback import LAYOUTS as READBACKS
from retrace.replay.readback import Readbacks
from retrace.replay.sizes import MOST_OUTPUT_VALUES, element_bytes, output_count
from retrace.replay.state import CONTAINER_CLASSES, DrawableKey, ReplayState
from retrace.replay.values import BadValue, integer, integers, number
from retrace.replay.ws.core import is_window_system_call
from retrace.replay.ws.reader import WsCompiler
from retrace.trace._scanner import calls_of
from retrace.trace.callset import CallSet
from retrace.trace.flags import CallFlag, is_profiled_draw
from retrace.trace.model import CALLS, NODES, CallBatch, FunctionSig, NodeLists, Pointer, Signatures

_MAP_BUFFER = re.compile(r"glMap(Named)?Buffer(Range)?(ARB|OES|EXT)?$")
_UNMAP_BUFFER = re.compile(r"glUnmap(Named)?Buffer(ARB|OES|EXT)?$")
# Calls whose result the replay needs, though they have no side effects.
_LOCATION_QUERIES = {
    "glGetUniformLocation",
    "glGetUniformLocationARB",
    "glGetProgramResourceLocation",
}
_VIEWPORTS = {"glViewport"}
# the calls that choose a framebuffer's draw buffers (`WindowSystem.check_drawn`)
_DRAW_BUFFERS = re.compile(r"gl(Named)?(Framebuffer)?DrawBuffers?(ARB|EXT|NV|ATI)?$")
_BIND_FRAMEBUFFER = re.compile(r"glBindFramebuffer(EXT|OES)?$")
_MAKE_CURRENT = re.compile(r"(glX|egl|wgl)Make(Context)?Current(ARB)?$")
GL_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER = 0x8D40, 0x8CA9
_BLITS = {"glBlitFramebuffer", "glBlitFramebufferEXT"}
_USE_PROGRAM = {"glUseProgram", "glUseProgramObjectARB"}
_BIND_PIPELINE = {"glBindProgramPipeline", "glBindProgramPipelineEXT"}
_ACTIVE_PROGRAM = {"glActiveShaderProgram", "glActiveShaderProgramEXT"}
# Object names whose class another argument gives: function -> (name index, kind index,
# class when the kind is none of _OBJECT_KINDS)
_NAMES_BY_KIND: dict[str, tuple[tuple[int, int, str | None], ...]] = {
    **dict.fromkeys(
        ("glCopyImageSubData", "glCopyImageSubDataEXT", "glCopyImageSubDataOES"),
        ((0, 1, "texture"), (6, 7, "texture")),  # a texture target or GL_RENDERBUFFER
    ),
    **dict.fromkeys(("glObjectLabel", "glObjectLabelKHR", "glLabelObjectEXT"), ((1, 0, None),)),
}
# identifiers of glObjectLabel (and glLabelObjectEXT's *_OBJECT_EXT) -> name class
_OBJECT_KINDS = {
    **dict.fromkeys((0x82E0, 0x9151), "buffer"),
    **dict.fromkeys((0x82E1, 0x8B48), "shader"),
    **dict.fromkeys((0x82E2, 0x8B40), "program"),
    **dict.fromkeys((0x8074, 0x9154), "vertex array"),
    **dict.fromkeys((0x82E3, 0x9153), "query"),
    **dict.fromkeys((0x82E4, 0x8A4F), "program pipeline"),
    0x8E22: "transform feedback",
    0x82E6: "sampler",
    0x1702: "texture",
    0x8D41: "renderbuffer",
    0x8D40: "framebuffer",
}
# the program's own queries, and conditional rendering on their results (`AppQueries`)
_APP_QUERY = re.compile(r"gl(Begin|End)Query(Indexed)?(ARB|EXT)?$")
_CONDITIONAL_RENDER = re.compile(r"gl(Begin|End)ConditionalRender(NV|NVX)?$")
_UNIFORM_PREFIXES = ("glUniform", "glProgramUniform")
_HANDLE_TYPES = {"GLhandleARB", "GLsync"}
# handles into the traced process's window system: passing them on would crash the driver
_FOREIGN_HANDLES = {"GLeglImageOES", "GLeglClientBufferEXT", "GLvdpauSurfaceNV"}
# (target, image): EGLImages made from GL objects are made again (`WindowSystem.create_image`)
_IMAGE_TARGETS = re.compile(r"glEGLImageTarget(Texture2D|RenderbufferStorage)OES$")
# GL functions whose calls need work beside the driver's (`_gl_call`): never direct in C
_SPECIAL = (
    _VIEWPORTS
    | _BLITS
    | READBACKS.keys()
    | _BIND_PIPELINE
    | _ACTIVE_PROGRAM
    | _NAMES_BY_KIND.keys()
    | {"glGenLists"}
)
_SPECIAL_PATTERNS = (_MAP_BUFFER, _UNMAP_BUFFER, _APP_QUERY, _CONDITIONAL_RENDER)
_END_FRAME, _NO_SIDE_EFFECTS = int(CallFlag.END_FRAME), int(CallFlag.NO_SIDE_EFFECTS)
_FAKE = int(CallFlag.FAKE)
# what the read-ahead of window sizes does with a call: a make-current is always read, a
# viewport or framebuffer binding only while a window is looked for, a frame end stops looking
_BINDS, _SCANNED, _FRAME_END = 3, 1, 2
# How many calls past a window's first make-current the read-ahead looks for its first
# viewport if no frame ends before (Qt's comes 1867 calls later): the replay holds back at
# most these calls and their data (resident until they run) where a window never gets one.
SIZING_REACH = 1 << 16
GL_BUFFER_SIZE = 0x8764
GL_BUFFER_MAP_POINTER = 0x88BD
GL_SYNC_STATUS, GL_SIGNALED = 0x9114, 0x9119
GL_QUERY_RESULT_AVAILABLE = 0x8867
# Buffer offsets stay far below this; user-space addresses on 64-bit systems are above it.
_NOT_AN_OFFSET = 1 << 40


class Unsupported(Exception):
    """This call cannot be issued; the message says why (one per function name)."""


# plain ints for the per-call path (enum comparisons are slow)
_NONE, _BEGIN, _END = int(OpKind.NONE), int(OpKind.BEGIN), int(OpKind.END)
# calls that change how the calls after them are classified: compiled in Python (C keeps
# glBegin..glEnd blocks itself, `_vm.Code.in_begin`)
_ROW_STATE = {"glNewList", "glEndList"}
# calls compiled in Python while a display list compiles, checked there for display lists
# that would call themselves (`_follow_lists`); direct in C otherwise
_LIST_CALLS = {"glCallList"}
# direct-call parameter types of integers by size: (unsigned, signed)
_INTEGER_ARGS = {
    1: (_vm.ARG_U8, _vm.ARG_I8),
    2: (_vm.ARG_U16, _vm.ARG_I16),
    4: (_vm.ARG_U32, _vm.ARG_I32),
    8: (_vm.ARG_U64, _vm.ARG_I64),
}
_CHARS = frozenset({"GLchar", "GLcharARB"})
_UNTYPED = frozenset({"void", "GLvoid"}) | _CHARS  # strings, blobs, offsets
_INTEGER_CODES = frozenset("bBhHiIlLqQ")  # ctypes' `_type_` codes of integer types
_FEW_CALLS = 32  # calls of a batch compiled here before its values are converted at once
_NO_THREAD = 0xFFFFFFFF  # matches no traced thread: the first call goes through Python
assert CALLS.size == _vm.CALL_SIZE and NODES.size == _vm.NODE_SIZE


# what the replay records of a call's result (`Compiler._kept_result`), and how a call's entry
# is wrapped given its arguments (`Compiler._guard`)
_Kept = tuple[Callable[[int, int, int], None], int]
_Guard = Callable[[list[Any], Entry], Entry]


def _compile_nothing(args: list[Any], ret: Any, thread: int) -> Entry | None:
    return None


class _Plan:
    """What all calls of one signature share (a plain class: a dataclass costs the replay's
    start-up the dataclasses module and its class's making)."""

    __slots__ = (
        "name",
        "flags",
        "ends_frame",
        "row",
        "work",
        "route",
        "lists",
        "memo",
        "name_id",
        "compile",
    )

    def __init__(self, name: str, flags: int, ends_frame: bool, name_id: int = 0) -> None:
        self.name = name
        self.flags = flags
        self.ends_frame = ends_frame
        self.row: int = OpKind.NONE
        self.work = False  # its calls make the GPU work (`retrace.gl.work`): GPU Busy times them
        # how C compiles the calls: into direct calls of a prototype (`Code.add_proto`), to
        # nothing (SIG_SKIP), or by handing them to `_add_call` for `compile` (SIG_SLOW)
        self.route: int = _vm.SIG_SLOW
        self.lists = False  # compiled here, not in C, while a display list compiles
        # its entries depend on the call's values alone, and compiling one changes nothing
        # else: calls with the values of one compiled before reuse its entry (`_vm.Code.memo`)
        self.memo = False
        self.name_id = name_id  # the name's index in Program.names
        self.compile: Callable[[list[Any], Any, int], Entry | None] = _compile_nothing


def _unsupported(reason: str) -> Callable[[list[Any], Any, int], Entry]:
    def compile_(args: list[Any], ret: Any, thread: int) -> Entry:
        raise Unsupported(reason)

    return compile_


class _Call:
    """A GL call that needs replay-time work before or after the driver runs it."""

    __slots__ = ("fn", "template", "before", "after")

    def __init__(self, fn, template, before, after) -> None:
        self.fn = fn
        self.template = template
        self.before = before
        self.after = after

    def __call__(self) -> None:
        args = list(self.template)
        for index, convert in self.before:
            args[index] = convert(args[index])
        result = self.fn(*args)
        for finish in self.after:
            finish(args, result)


class _Scratch:
    """The scratch memory an output of unknown size gets when its call runs (`_guard.c`):
    one per call, as every call's scratch is the same arena."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def __call__(self, traced: Any) -> int:
        return _guard.scratch(self.nbytes)


def _flatten(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, list):
            out.extend(_flatten(v))
        else:
            out.append(v)
    return out


def _array(param: Param, values: list[Any]) -> ctypes.Array:
    """An input array of numbers or strings as a ctypes array of the parameter's type."""
    flat = _flatten(values)
    strings = all(isinstance(v, bytes) or v is None for v in flat)
    if param.pointer_depth >= 2 or (flat and strings):
        if not strings:  # ctypes would take an integer for an address
            raise BadValue("an array of other values where strings belong")
        return (ctypes.c_char_p * len(flat))(*flat)
    ctype = _element_type(param, flat)
    return (ctype * len(flat))(*map(_scalar(ctype), flat))


def _element_type(param: Param, flat: list[Any]) -> CType:
    """The ctypes type of an input array's numbers: the parameter's, or where it has none
    (void, char) what the values are."""
    ctype = ctypes_type(param.base) if param.base != "void" else None
    if ctype is None or ctype is ctypes.c_void_p or ctype is ctypes.c_char:
        return ctypes.c_float if any(isinstance(v, float) for v in flat) else ctypes.c_uint32
    return ctype


def _scalar(ctype: CType | None) -> Callable[[Any], int | float]:
    """How a traced value becomes a number of this ctypes type (ctypes refuses a float
    for an integer type)."""
    return number if ctype in (ctypes.c_float, ctypes.c_double) else integer


class Compiler:
    """Turns calls into entries; one per trace, reused by every pass."""

    def __init__(
        self, dispatch: Dispatch, state: ReplayState, ws: WsCompiler, path: str = "trace"
    ) -> None:
        self.dispatch = dispatch
        self.path = path  # the trace file, for damage found in its values
        self.state = state
        self.ws = ws
        self.program = Program()
        self._readbacks = Readbacks(dispatch, state)
        self._thread: int | None = None
        self._plans: dict[int, _Plan] = {}
        self._only: CallSet | None = None
        self._single_buffer = False
        self._in_list = False  # between glNewList and glEndList
        self._compiling: int | None = None  # the display list being compiled
        self._list_calls: dict[int, set[int]] = {}  # display list -> lists it calls
        self._hook_calls: CallSet | None = None
        self._call_no = 0  # the call being compiled
        self._image_shared_at = -2  # the last glEGLImageTarget*OES call made to share an image
        self._after_image_target = False  # the last batch ended with one
        self._unbound_threads: set[int] = set()  # traced threads left with no context current
        # per traced thread, as read ahead: (current drawable, whether it draws to it)
        self._window_scan: dict[int, tuple[Any, bool]] = {}
        # windows whose first viewport is being read ahead for (`_scan_window_sizes`), each
        # to the call (counted in delivery order) where looking ends; every drawable ever
        # looked for; pbuffers; the calls of the batches before
        self._sizing: dict[DrawableKey, int] = {}
        self._looked_for: set[DrawableKey] = set()
        self._fixed: set[DrawableKey] = set()
        self._delivered = 0
        self._query_handling, self._query_tolerance = "skip", 0
        self._hook: Callable[[int], None] = lambda call_no: None
        self._lookups: dict[str, Callable[[int], int]] = {}
        # by signature id: for the read-ahead, _BINDS, _SCANNED or _FRAME_END; for `_stops`, 1
        self._read_ahead, self._image_targets = bytearray(), bytearray()
        self._watched = 0  # how many signatures they cover

    def handle_queries(self, how: str, tolerance: int = 0) -> None:
        """glretrace's --query-handling: the program's glGetQueryObject* calls are left out
        ("skip"), run ("run": a result the program saw available is waited for) or run and
        their results compared with the trace's ("check", within `tolerance`). Set before the
        first pass: how their calls compile is decided at the first of them."""
        self._query_handling, self._query_tolerance = how, tolerance

    def limit(self, calls: CallSet | None, single_buffer: bool) -> None:
        """Replay only `calls` (window-system calls always run, so contexts exist); with
        `single_buffer`, glFlush and glFinish end frames too, as glretrace --sb does."""
        self._only = calls
        self._single_buffer = single_buffer

    def hook(self, calls: CallSet, hook: Callable[[int], None]) -> None:
        """Run `hook(call_no)` at these calls: before a frame-ending call, after any other."""
        self._hook_calls = calls
        self._hook = hook

    # --- driving ----------------------------------------------------------------------------

    def add_batch(self, batch: CallBatch, sigs: Signatures) -> None:
        """Compile a batch: runs of direct calls in C, every other call here."""
        code = self.program.code
        calls, slots, nodes = batch.calls, batch.slots, batch.nodes
        self._watch(sigs)
        stops = self._stops(batch, sigs)
        self._scan_window_sizes(batch, sigs)
        values = None  # the batch's values as Python objects, once enough calls need them
        visited = 0  # calls compiled here so far
        i, count = 0, len(batch)
        while i < count:
            # (with no context current, every call comes here, to be left out)
            unbound = self._thread in self._unbound_threads
            thread = _NO_THREAD if self._thread is None or unbound else self._thread
            i = code.compile(
                calls,
                slots,
                nodes,
                batch.pool,
                i,
                thread,
                self._in_list,
                stops,
                self._compiling is not None,
            )
            if i == count:
                break
            call = batch.call(i)
            no, offset, sig_id, thread, call_flags = call[:5]
            node_start, nodes_n, slot_start, nargs, ret = call[5:10]
            plan = self._plans.get(sig_id)
            if plan is None:
                plan = self._plans[sig_id] = self._plan(sigs.functions[sig_id])
                code.set_sig(sig_id, plan.route, plan.name_id, plan.row, plan.work, plan.lists)
                if plan.route != _vm.SIG_SLOW:
                    continue  # C compiles (or skips) it now that it knows how, or hands it back
            i += 1
            if plan.route == _vm.SIG_SKIP:
                continue
            visited += 1
            if values is None and visited > _FEW_CALLS:
                values = NodeLists(batch)
            call_values, base = (
                (values, node_start)
                if values is not None
                else (NodeLists.of_call(batch, node_start, nodes_n), 0)
            )
            program = self.program
            ops, entries = len(program), len(program.entries)
            nothing = self._add_call(
                plan,
                bool(call_flags & _FAKE),
                no,
                offset,
                thread,
                base,
                batch.arguments(slot_start, nargs),
                ret,
                call_values,
                sigs,
            )
            # no op at all (the call compiled to none), or one op of a new entry, and nothing
            # else (no thread switch, no hook; a hooked call is never compiled in C): later
            # calls with the same values compile to the same in C
            if not plan.memo:
                continue
            if nothing:
                if len(program) == ops:
                    code.memo(calls, slots, nodes, i - 1, _vm.NO_ENTRY, None)
            elif len(program) == ops + 1 and len(program.entries) == entries + 1:
                frame_ends = program.frame_ends if plan.ends_frame else None
                code.memo(calls, slots, nodes, i - 1, entries, frame_ends)

    def _watch(self, sigs: Signatures) -> None:
        """Mark the functions `_scan_window_sizes` and `_stops` look for, as the trace
        defines them."""
        if len(sigs.functions) <= self._watched:
            return
        # (only those defined since: a trace's signatures are added in order, never changed)
        added = list(itertools.islice(sigs.functions.items(), self._watched, None))
        self._watched = len(sigs.functions)
        grow = max(sig_id for sig_id, _ in added) + 1 - len(self._read_ahead)
        if grow > 0:
            self._read_ahead.extend(bytes(grow))
            self._image_targets.extend(bytes(grow))
        for sig_id, sig in added:
            name = sig.name
            if _MAKE_CURRENT.match(name):
                self._read_ahead[sig_id] = _BINDS
            elif name in _VIEWPORTS or _BIND_FRAMEBUFFER.match(name):
                self._read_ahead[sig_id] = _SCANNED
            elif self._ends_frame(name, int(sig.flags)):
                self._read_ahead[sig_id] = _FRAME_END
            self._image_targets[sig_id] = bool(_IMAGE_TARGETS.match(name))

    @property
    def sizing_windows(self) -> bool:
        """Whether the read-ahead is still looking for a window's first viewport: until it
        is found, or it stops looking, the ops compiled so far must not run (the window's
        make-current among them would make its stand-in before its size is known), so the
        replay is the same however the trace was cut into batches."""
        return any(drawable not in self._fixed for drawable in self._sizing)

    def _scan_window_sizes(self, batch: CallBatch, sigs: Signatures) -> None:
        """Read ahead for each window's first viewport on its default framebuffer: a program
        may clear its window before it sets the viewport (Qt does), and a stand-in that grew
        only then would have lost the clear. A window is looked for from its first make-
        current to the next frame end (past its first frame, its stand-in grows with its
        viewports) or `SIZING_REACH` calls later, across batches (`sizing_windows`). Runs
        over the batch's few make-current, bind-framebuffer, viewport and frame-ending
        calls; what it learns is the window system's `size_hints`."""
        first = self._delivered
        self._delivered += len(batch)
        kinds, read_ahead = batch.column("sig"), self._read_ahead
        for i in calls_of(batch.calls, read_ahead):
            kind = read_ahead[kinds[i]]
            if kind != _BINDS and not self._sizing:
                continue  # (what a window's viewports and bindings say matters while sizing)
            self._stop_sizing(first + i)
            if kind == _FRAME_END:
                self._sizing.clear()
                continue
            _, _, sig_id, thread, _, node_start, nodes_n, slot_start, nargs, ret, _, _ = batch.call(
                i
            )
            name = sigs.functions[sig_id].name
            values = NodeLists.of_call(batch, node_start, nodes_n)
            slots = batch.arguments(slot_start, nargs)
            args, result = _arguments(values, 0, slots, ret, sigs)
            self._scan_call(name, args, result, thread, first + i)
        self._stop_sizing(self._delivered)

    def _stop_sizing(self, call: int) -> None:
        """Stop looking for the windows whose reach ends before `call` (delivery order)."""
        if self._sizing:
            self._sizing = {d: end for d, end in self._sizing.items() if end >= call}

    def _scan_call(self, name: str, args: list[Any], result: Any, thread: int, at: int) -> None:
        """What one make-current, bind-framebuffer or viewport call (the `at`th delivered)
        tells the read-ahead."""
        seen = self._window_scan
        drawable, on_window = seen.get(thread, (0, True))
        if _MAKE_CURRENT.match(name):
            try:
                entry = self.ws.compile(name, args, result, thread)
            except BadValue:
                return  # damage: reported when the call itself compiles, in order
            if entry is not None and entry[0] == self.ws.ws.make_current:
                drawable = entry[1][1]
                seen[thread] = (drawable, True)
                if drawable and drawable not in self._looked_for:
                    self._looked_for.add(drawable)
                    self._sizing[drawable] = at + SIZING_REACH
        elif _BIND_FRAMEBUFFER.match(name):
            if len(args) == 2 and args[0] in (GL_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER):
                seen[thread] = (drawable, not args[1])
        elif len(args) == 4 and on_window and drawable in self._sizing:
            x, y, w, h = (v if isinstance(v, int) else 0 for v in args)
            if w > 0 and h > 0:
                self.ws.ws.size_hints[drawable] = (x + w, y + h)
                del self._sizing[drawable]

    def _stops(self, batch: CallBatch, sigs: Signatures) -> bytes | None:
        """Per call of the batch, whether it must come here rather than compile in C: a
        call the hooks want, one outside the call subset (which may be dropped), or a fake
        call right after a glEGLImageTarget*OES (which may be left out)."""
        count = len(batch)
        targets = [i + 1 for i in calls_of(batch.calls, self._image_targets)]
        if self._after_image_target:
            targets.insert(0, 0)
        self._after_image_target = bool(targets) and targets[-1] == count
        if self._only is None and self._hook_calls is None and not targets:
            return None
        stops = bytearray(count)
        flags = batch.column("flags")
        for i in targets:
            if i < count and flags[i] & _FAKE:
                stops[i] = 1
        if self._only is None and self._hook_calls is None:
            return bytes(stops)
        # every call is asked (--calls, snapshots), in C: its number, its signature's flags
        by_sig = array("Q", [0]) * len(self._read_ahead)
        for sig_id, sig in sigs.functions.items():
            by_sig[sig_id] = int(sig.flags)
        nos, kinds = batch.column("no").tobytes(), batch.column("sig").tobytes()
        if self._hook_calls is not None:
            self._hook_calls.mark(stops, nos, by_sig, kinds)
        if self._only is not None:
            self._only.mark(stops, nos, by_sig, kinds, invert=True)
        return bytes(stops)

    def _add_call(
        self,
        plan: _Plan,
        fake: bool,
        no: int,
        offset: int,
        thread: int,
        node_start: int,
        arg_slots: list[int],
        ret: int,
        values: NodeLists,
        sigs: Signatures,
    ) -> bool:
        """Compile one call into a Python entry (with its thread switch, hooks and frame end);
        whether its handler compiled it to nothing (the caller's memo of it)."""
        program = self.program
        if self._left_out(plan, fake, no, thread):
            return False
        if thread != self._thread:
            if self._thread is not None:
                program.add((self.ws.ws.switch_thread, (thread,)), no, plan.name_id)
            self._thread = thread
        args, result = _arguments(values, node_start, arg_slots, ret, sigs)
        self._call_no = no
        try:
            self._follow_lists(plan.name, args)
            entry = plan.compile(args, result, thread)
        except Unsupported as e:
            program.skipped[plan.name] += 1
            program.reasons.setdefault(plan.name, str(e))
            return False
        except BadValue as e:  # the calls before it still run (see Replayer)
            raise TraceError.in_stream(self.path, offset, f"call {no} {plan.name}: {e}") from None
        self._emit(plan, no, entry)
        return entry is None

    def _left_out(self, plan: _Plan, fake: bool, no: int, thread: int) -> bool:
        """Calls that compile to nothing here: GL calls outside the call subset or made with
        no context current (the driver would ignore them), and apitrace's copy of a shared
        image's pixels (see `_image_target`)."""
        if plan.row != _NONE:
            if self._only is not None and not self._only.contains(no, plan.flags):
                return True
            if thread in self._unbound_threads and plan.name.startswith("gl"):
                return True
        return fake and no == self._image_shared_at + 1

    def _emit(self, plan: _Plan, no: int, entry: Entry | None) -> None:
        """Add a call's entry to the program, with the hook's entry and the frame end."""
        program = self.program
        # no hook while a display list compiles or inside glBegin/glEnd: draws there draw
        # nothing yet, and the hook's own GL calls (a snapshot's glReadPixels) are errors
        hooked = self._hook_calls is not None and self._hook_calls.contains(no, plan.flags)
        drawing = not (self._in_list or self._in_begin)
        # a SwapBuffers ends its frame itself, the snapshot coming before it; a GL call
        # ending a frame (glFlush/glFinish with --sb) runs first, then the frame ends
        swap = plan.ends_frame and plan.row == _NONE
        if hooked and drawing and (swap or entry is None):
            program.add((self._hook, (no,)), no, plan.name_id)
        if entry is None:
            return
        if swap:
            program.frame_ends.append(len(program))
        row = self._row(plan)
        checkable = plan.row != _NONE and row != _BEGIN and not self._in_begin
        program.add(entry, no, plan.name_id, row, checkable, plan.work and row != _NONE)
        drawing = not (self._in_list or self._in_begin)  # after this call
        if hooked and drawing and not swap:
            program.add((self._hook, (no,)), no, plan.name_id)
        if plan.ends_frame and not swap:
            program.frame_ends.append(len(program))
            program.add((self.ws.ws.frame_terminator, ()), no, plan.name_id)

    def _follow_lists(self, name: str, args: list[Any]) -> None:
        """Refuse a glCallList that would make a display list call itself: GL runs such a
        list 64 levels deep, each level as many times as the list calls itself (3^64 calls
        for a list that calls itself three times), so the driver would never return."""
        if name == "glNewList":
            self._compiling = integer(args[0])
            self._list_calls[self._compiling] = set()
        elif name == "glEndList":
            self._compiling = None
        elif name == "glCallList" and self._compiling is not None:
            called, reached, todo = integer(args[0]), set(), [integer(args[0])]
            while todo:
                n = todo.pop()
                if n not in reached:
                    reached.add(n)
                    todo.extend(self._list_calls.get(n, ()))
            if self._compiling in reached:
                raise Unsupported("it would make a display list call itself")
            self._list_calls[self._compiling].add(called)

    def _row(self, plan: _Plan) -> int:
        """Profiling rows as glretrace makes them: GL calls outside display-list compilation
        and glBegin/glEnd blocks, a glBegin..glEnd block being one draw."""
        row = plan.row
        if plan.name == "glNewList":
            self._in_list = True
        elif plan.name == "glEndList":
            self._in_list = False
        if self._in_list or row == _NONE:
            return _NONE
        if row == _BEGIN:
            self._in_begin = True
        elif row == _END:
            self._in_begin = False
        elif self._in_begin:
            return _NONE
        return row

    @property
    def _in_begin(self) -> bool:
        """Between glBegin and glEnd (kept by the code: `compile` opens and closes it too)."""
        return self.program.code.in_begin

    @_in_begin.setter
    def _in_begin(self, on: bool) -> None:
        self.program.code.in_begin = on

    def _ends_frame(self, name: str, flags: int) -> bool:
        """Whether a call of this function ends a frame (with --sb, glFlush and glFinish)."""
        return bool(flags & _END_FRAME) or (self._single_buffer and name in ("glFlush", "glFinish"))

    def _plan(self, sig: FunctionSig) -> _Plan:
        """How every call of one signature compiles; decided once per trace."""
        name = sig.name
        flags = int(sig.flags)
        plan = _Plan(name, flags, self._ends_frame(name, flags), name_id=self.program.name_id(name))
        if name == "glGetError":  # where the program asked, the trace says which error it got
            plan.compile = lambda args, ret, thread: self._get_error(ret)
        elif QUERY_RESULTS.match(name):
            plan.compile = lambda args, ret, thread: self._query_result(name, args)
            plan.row = OpKind.CALL
            # (checked, a result's entry names its call; skipped, most compile to nothing:
            # a program polling a query's availability makes thousands of them)
            plan.memo = self._query_handling == "skip"
        elif self._without_side_effects(name, flags):
            # (the app's query readbacks too: glretrace's --query-handling=skip)
            plan.route = _vm.SIG_SKIP
        elif is_window_system_call(name) or name == "glFrameTerminatorGREMEDY":
            if not self.ws.handles(name):  # its calls would all compile to nothing
                plan.route = _vm.SIG_SKIP
            plan.memo = self.ws.pure(name)
            plan.compile = lambda args, ret, thread: self._window_system(name, args, ret, thread)
        elif name == "memcpy":
            plan.compile = lambda args, ret, thread: self._memcpy(args)
        elif name.startswith("gl"):
            plan.row = _gl_row(name)
            plan.work = makes_gpu_work(name)
            self._gl_plan(plan, len(sig.arg_names))
            if _DRAW_BUFFERS.match(name):
                self.ws.ws.trace_chooses_draw_buffers = True
        else:
            plan.compile = _unsupported(f"{name} is not an OpenGL function")
        return plan

    def _without_side_effects(self, name: str, flags: int) -> bool:
        """Calls glretrace skips: GL calls by their name and prototype, others by apitrace's
        flags."""
        if name.startswith("gl") and not is_window_system_call(name):
            return not has_side_effects(name, self.dispatch.command(name))
        return bool(flags & _NO_SIDE_EFFECTS)

    def _gl_plan(self, plan: _Plan, nargs: int) -> None:
        """How a GL function's calls compile: the Python entry they make when they come to
        `_add_call`, and whether C calls the driver directly instead (`_direct_params`)."""
        name = plan.name
        if name == "glGetSynciv":
            plan.compile = self._get_synciv
            return
        command = self.dispatch.command(name)
        address = self.dispatch.address(name) if command is not None else 0
        image_target = _IMAGE_TARGETS.match(name) is not None
        problem = _why_not_issued(command, address, nargs, image_target)
        if problem is not None:
            plan.compile = _unsupported(problem)
            return
        assert command is not None
        # (typed by ctypes only when a call first needs a Python entry: most functions'
        # calls are all direct, and typing one costs more than the rest of its plan)
        function = self.dispatch.function
        if image_target:
            plan.compile = lambda args, ret, thread: self._image_target(function(name), args)
            return
        kept = self._kept_result(command)
        direct = self._direct_params(command, kept)
        if direct is not None and all(
            code < _vm.ARG_PTR and table is None for code, table in direct
        ):
            plan.compile = _numbers_only(command, function)
        else:
            guard = self._guard(name)
            plan.compile = lambda args, ret, thread: self._gl_call(
                command, function(name), args, ret, kept, guard
            )
        # calls that end frames or change how the calls after them are rows stay in Python
        if direct is not None and not (plan.ends_frame or name in _ROW_STATE):
            plan.lists = name in _LIST_CALLS
            types = bytes(code for code, _ in direct)
            tables = tuple(table for _, table in direct)
            effect, result = kept or (None, 0)
            plan.route = self.program.code.add_proto(address, types, tables, effect, result)
        # (the entries `_gl_call` and `_numbers_only` make depend on the call's values alone;
        # glNewList and glEndList change how the calls after them compile)
        plan.memo = plan.route == _vm.SIG_SLOW and name not in _ROW_STATE

    def _direct_params(self, command: Command, kept: _Kept | None) -> list[tuple[int, Any]] | None:
        """The rule for whether a GL function's calls need nothing but the driver call (and
        what C records of its result, `kept`: `_kept_result`): how each parameter is passed
        (`_direct_param`), or None when Python must do more -- a result to keep that C does
        not, work before or after the call (`_SPECIAL`, `_SPECIAL_PATTERNS`) or a parameter
        only Python can pass."""
        name = command.name
        keeps = (
            command.return_class is not None
            or command.return_ctype in _HANDLE_TYPES
            or name in _LOCATION_QUERIES
        )
        if (
            (keeps and kept is None)
            or name in _SPECIAL
            or any(p.match(name) for p in _SPECIAL_PATTERNS)
        ):
            return None
        direct = [self._direct_param(command, p) for p in command.params]
        return None if None in direct else direct  # type: ignore[return-value]

    def _names_param(self, command: Command, p: Param) -> tuple[int, Any] | None:
        """An array of object names: glDeleteTextures' (remapped as `_pointer` does), or
        glGenTextures' (written by the driver, as many as the first argument says, and
        recorded as `_output` does), passed by C (`_vm.c`'s "name arrays"); None for
        others."""
        cls, st, count = p.object_class, self.state, command.params[0]
        try:
            names = ctypes_type(p.base) is ctypes.c_uint
        except ValueError:  # (a type ctypes has no mapping for: a struct)
            names = False
        if cls is None or not names:
            return None
        container = cls in CONTAINER_CLASSES
        if p.const:
            return _vm.ARG_NAMES_IN, self._lookup(cls) if container else st.name_table(cls)
        if not p.output or p is count or count.pointer_depth or p.length != count.name:
            return None
        table = functools.partial(st.container_table, cls) if container else st.name_table(cls)
        return _vm.ARG_NAMES_OUT, table

    def _kept_result(self, command: Command) -> _Kept | None:
        """What the replay records of a call's result, where that is all it does beside the
        driver's call, and the result's `_vm` type: effect(the first traced argument, the
        traced result, the driver's) -- a uniform's location, by program (glGetUniformLocation);
        the driver's name for an object it made (glCreateShader, glFenceSync). C calls it
        after a direct call (`_vm.c`'s "effects"), `_result_mapping` after a Python entry."""
        name, cls = command.name, _returned_class(command)
        location = name in _LOCATION_QUERIES
        result = _result_type(command) if location or cls is not None else None
        if result is None:
            return None
        if location:
            return self.state.record_location, result
        if cls is None or name == "glGenLists":
            return None
        table = self.state.name_table(cls)
        return (lambda first, traced, real: table.__setitem__(traced, real or 0)), result

    def _direct_param(self, command: Command, p: Param) -> tuple[int, Any] | None:
        """How a direct call passes one parameter: its `_vm` type code and how the traced
        value is remapped (None, a name table, or a function); None when only Python can
        pass it."""
        function = command.name
        if p.pointer_depth == 1 and p.object_class is not None:
            return self._names_param(command, p)
        if p.pointer_depth == 0:
            # (a GLhandleARB's class is Python's: `_gl_arguments`)
            code = _base_type(p.base) if p.base != "GLhandleARB" else None
            if code is None:
                return None
            if p.name == "location" and function.startswith(_UNIFORM_PREFIXES):
                if function.startswith("glProgramUniform"):
                    return None  # the program is another argument of the call
                return code, self.state.uniform_locations
            if p.object_class is None:
                return code, None
            if function in _USE_PROGRAM:
                return code, self.state.program_in_use
            if p.object_class in CONTAINER_CLASSES:
                return code, self._lookup(p.object_class)  # through the current context
            return code, self.state.name_table(p.object_class)
        if p.pointer_depth == 2 and p.const and p.base in _CHARS:
            return _vm.ARG_STRINGS, None  # (glShaderSource's strings)
        if p.pointer_depth != 1 or p.output or p.object_class is not None:
            return None
        if p.base in _UNTYPED:
            return _vm.ARG_PTR, None
        try:
            elem = _arg_type(ctypes_type(p.base))
        except ValueError:  # a type ctypes has no mapping for (a struct)
            return None
        return (_vm.ARG_PTR_OF + elem, None) if elem is not None else None

    # --- GL calls ---------------------------------------------------------------------------

    def _gl_call(
        self, command: Command, fn: Any, args: list[Any], ret: Any, kept: _Kept | None,
        guard: _Guard | None,
    ) -> Entry:  # fmt: skip
        """The entry of a GL call that needs Python when it runs (`_direct_params` says which):
        lookups before the driver's call, records after it (`kept`: `_kept_result`), and a
        wrapper where the replay may leave the call out (`guard`: `_guard`)."""
        before: list[tuple[int, Callable[[Any], Any]]] = []
        after: list[Callable[[list[Any], Any], None]] = []
        template = self._gl_arguments(command, args, before, after)
        self._result_mapping(command, args, ret, kept, after)
        effect = self._after_effect(command, args, ret)
        if effect is not None:
            after.append(effect)
        if command.name in READBACKS:  # its destination is chosen when it runs
            fn = self._readbacks.wrap(command.name, fn)
        entry: Entry = (
            (fn, template)
            if not before and not after
            else (_Call(fn, template, tuple(before), tuple(after)), ())
        )
        return entry if guard is None else guard(args, entry)

    def _gl_arguments(
        self,
        command: Command,
        args: list[Any],
        before: list[tuple[int, Callable[[Any], Any]]],
        after: list[Callable[[list[Any], Any], None]],
    ) -> tuple[Any, ...]:
        """The call's arguments as the driver takes them, with the conversions they need when
        the call runs (`before`) and the records after it (`after`)."""
        name = command.name
        template: list[Any] = []
        readback = READBACKS.get(name)
        classes = {
            index: _OBJECT_KINDS.get(integer(args[kind]), default)
            for index, kind, default in _NAMES_BY_KIND.get(name, ())
        }
        for index, (param, value) in enumerate(zip(command.params, args, strict=True)):
            cls = classes.get(index) or param.object_class
            cls = cls or ("handle" if param.base == "GLhandleARB" else None)
            if param.pointer_depth == 0 or param.base == "GLsync":
                template.append(self._gl_number(name, args, param, value, cls, index, before))
            elif readback is not None and index == readback.pointer:
                # an offset into a pack buffer, else replaced by scratch memory when it runs
                # (`readback.Readback`): whatever the trace recorded there
                template.append(integer(value) if isinstance(value, int) else 0)
            elif param.output:
                template.append(self._output(command, args, index, cls, before, after))
            else:
                template.append(self._pointer(param, value, cls, index, before))
        return tuple(template)

    def _gl_number(
        self,
        name: str,
        args: list[Any],
        param: Param,
        value: Any,
        cls: str | None,
        index: int,
        before: list[tuple[int, Callable[[Any], Any]]],
    ) -> int | float:
        """A number argument; an object name or a uniform location is looked up when the
        call runs."""
        if cls is not None:
            before.append((index, self._lookup(cls)))
            return integer(value)
        if param.name == "location" and name.startswith(_UNIFORM_PREFIXES):
            program_index = 0 if name.startswith("glProgramUniform") else None
            before.append((index, self._location(args, program_index)))
            return integer(value)
        return _scalar(ctypes_type(param))(value)

    def _after_effect(
        self, command: Command, args: list[Any], ret: Any
    ) -> Callable[[list[Any], Any], None] | None:
        """What the replay records after a call besides the driver's state: a uniform's
        location, the program or pipeline in use, the window's size, a buffer's mapping."""
        name, st = command.name, self.state
        if name in _USE_PROGRAM:
            traced_program = integer(args[0])
            return lambda a, r: st.use_program(traced_program)
        if name in _BIND_PIPELINE:
            pipeline = integer(args[0])
            return lambda a, r: st.bind_pipeline(pipeline)
        if name in _ACTIVE_PROGRAM:
            pipeline, program = integer(args[0]), integer(args[1])
            return lambda a, r: st.set_active_program(pipeline, program)
        if name in _VIEWPORTS:
            x, y, w, h = (integer(v) for v in args)
            right, top = x + w, y + h
            return lambda a, r: self.ws.ws.update_drawable(right, top)
        if name in _BLITS:
            w, h = max(integer(args[4]), integer(args[6])), max(integer(args[5]), integer(args[7]))
            return lambda a, r: self.ws.ws.update_drawable(w, h)
        if _MAP_BUFFER.match(name):
            return self._map_buffer(command, args, ret)
        return None

    def _guard(self, name: str) -> _Guard | None:
        """How the entries of a function's calls are wrapped, given the call's arguments,
        where the replay follows them up (an unmap ends its mapping's region) or may leave
        them out (the program's own queries and conditional renders, `AppQueries`); decided
        once per function."""
        unmap = _UNMAP_BUFFER.match(name)
        if unmap:
            return lambda args, entry: (
                self._unmap_buffer,
                (self._map_pointer(unmap, integer(args[0])), entry),
            )
        query = _APP_QUERY.match(name)
        if query:
            begin = query[1] == "Begin"
            return lambda args, entry: (
                self._app_query,
                (begin, integer(args[0]), integer(args[-1]) if begin else 0, entry),
            )
        conditional = _CONDITIONAL_RENDER.match(name)
        if conditional:
            begin = conditional[1] == "Begin"
            return lambda args, entry: (
                self._conditional_render,
                (begin, integer(args[0]) if begin else 0, entry),
            )
        return None

    def _table(self, cls: str) -> dict[int, int] | Callable[[int], int]:
        """A class's name table; for per-context classes, a lookup through the current context."""
        if cls in CONTAINER_CLASSES:
            st = self.state
            return lambda v: st.container_table(cls).get(v, v)
        return self.state.name_table(cls)

    def _lookup(self, cls: str) -> Callable[[int], int]:
        """Traced name -> driver name for a class (one function per class, shared)."""
        lookup = self._lookups.get(cls)
        if lookup is None:
            table = self._table(cls)
            lookup = self._lookups[cls] = table if callable(table) else _lookup(table)
        return lookup

    def _location(self, args: list[Any], program_index: int | None) -> Callable[[int], int]:
        st = self.state
        if program_index is not None:
            traced_program = integer(args[program_index])
            return lambda v: st.location(traced_program, v)
        return st.uniform_locations

    def _pointer(self, param, value, cls, index, before) -> Any:
        """Convert an input pointer argument; registers replay-time work for object names."""
        if value is None:
            return None
        if isinstance(value, Pointer):
            if value >= _NOT_AN_OFFSET:
                # an address in the traced process whose memory the tracer did not capture:
                # the driver would read from a random address here
                raise Unsupported(f"'{param.name}' points to memory the trace did not capture")
            return integer(value)  # an offset into a bound buffer object
        if isinstance(value, bytes):
            return self.program.keep(value)  # in the data pool, not the heap
        if not isinstance(value, list):
            raise Unsupported(f"cannot marshal '{param.name}' ({type(value).__name__})")
        if cls is not None:
            traced = [integer(v) for v in _flatten(value)]
            lookup = self._lookup(cls)
            before.append(
                (
                    index,
                    lambda _, traced=traced: (ctypes.c_uint * len(traced))(*map(lookup, traced)),
                )
            )
            return None
        return _array(param, value)

    def _output(
        self,
        command: Command,
        args: list[Any],
        index: int,
        cls: str | None,
        before: list[tuple[int, Callable[[Any], Any]]],
        after: list[Callable[[list[Any], Any], None]],
    ) -> Any:
        """Memory for the driver to write an output into, sized by the specification
        (`sizes.output_count`), never by what the trace recorded there; where the registry
        gives no size, the recorded size in scratch memory ending at a guard (`_guard.c`).
        Object names the driver writes (glGenTextures) are recorded after the call."""
        param, value = command.params[index], args[index]
        if value is None:
            return None
        if isinstance(value, Pointer):
            raise Unsupported(f"output '{param.name}' points into the traced process")
        if not isinstance(value, (list, bytes)):
            raise Unsupported(f"cannot marshal '{param.name}' ({type(value).__name__})")
        recorded = _flatten(value) if isinstance(value, list) else []
        element = element_bytes(param)
        count = output_count(command, param, args)
        guarded = count is None
        if count is None:
            count = len(recorded) if isinstance(value, list) else len(value) // element
        if count > MOST_OUTPUT_VALUES:
            raise Unsupported(f"'{param.name}' would take {count} values")
        out: Any
        if guarded:
            if any(isinstance(convert, _Scratch) for _, convert in before):
                raise Unsupported("two outputs of unknown size would share the scratch")
            before.append((index, _Scratch(count * element)))
            out = None
        else:
            out = ctypes.create_string_buffer(max(count * element, 1))
        if cls is not None:
            traced = [integer(v) for v in recorded]
            st = self.state

            def record(a: list[Any], r: Any) -> None:
                container = cls in CONTAINER_CLASSES
                names = st.container_table(cls) if container else st.name_table(cls)
                where = a[index] if guarded else ctypes.addressof(a[index])
                written = (ctypes.c_uint * count).from_address(where)
                for t, real in zip(traced, written, strict=False):  # the driver's may be more
                    names[t] = real

            after.append(record)
        return out

    def _result_mapping(
        self, command: Command, args: list[Any], ret: Any, kept: _Kept | None, after: list
    ) -> None:
        """Record what the driver returns (`kept`: `_kept_result`; glGenLists' range of
        lists)."""
        name = command.name
        if ret is None or (name in _LOCATION_QUERIES and not isinstance(ret, int)):
            return
        if kept is not None:
            effect, _ = kept
            first = integer(args[0]) if name in _LOCATION_QUERIES else 0  # (the program)
            traced = integer(ret)
            after.append(lambda a, r: effect(first, traced, r))
        elif name == "glGenLists" and (cls := _returned_class(command)) is not None:
            traced, table = integer(ret), self.state.name_table(cls)

            def record_lists(a, r):
                for i in range(a[0] if r else 0):  # 0: the driver made none (a range too big)
                    table[traced + i] = r + i

            after.append(record_lists)

    def _map_buffer(
        self, command: Command, args: list[Any], ret: Any
    ) -> Callable[[list, Any], None]:
        """After a map: the region from the traced address to the driver's pointer."""
        args, ret = integers(args), integer(ret)  # all numbers: a damaged trace has others
        mapped = self.state.mapped
        named = "Named" in command.name
        length_index = next((i for i, p in enumerate(command.params) if p.name == "length"), None)
        size = int(args[length_index]) if length_index is not None else None
        get_size = self.dispatch.raw(
            "glGetNamedBufferParameteri64v" if named else "glGetBufferParameteri64v",
            None,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.POINTER(ctypes.c_int64),
        )
        traced = int(ret or 0)

        def record(a, real):
            n = size
            if n is None:  # glMapBuffer maps the whole buffer
                value = ctypes.c_int64()
                get_size(a[0], GL_BUFFER_SIZE, ctypes.byref(value))
                n = value.value
            mapped.map(traced, n, real or 0)

        return record

    def _map_pointer(self, unmap: re.Match[str], traced: int) -> Callable[[], int]:
        """Where the buffer an unmap call names is mapped now (its GL_BUFFER_MAP_POINTER):
        the buffer bound to the target, or the named buffer; 0 when the driver cannot say."""
        named, suffix = unmap[1] or "", unmap[2] or ""
        try:
            get = self.dispatch.raw(
                f"glGet{named}BufferPointerv{suffix}",
                None,
                ctypes.c_uint,
                ctypes.c_uint,
                ctypes.POINTER(ctypes.c_void_p),
            )
        except LookupError:
            return lambda: 0
        lookup = self._lookup("buffer") if named else None

        def pointer() -> int:
            value = ctypes.c_void_p()
            get(lookup(traced) if lookup else traced, GL_BUFFER_MAP_POINTER, ctypes.byref(value))
            return value.value or 0

        return pointer

    def _unmap_buffer(self, pointer: Callable[[], int], entry: Entry) -> None:
        """Unmap a buffer, and end the region of the mapping it had."""
        real = pointer()
        fn, args = entry
        fn(*args)
        if real:
            self.state.mapped.unmap(real)

    def _window_system(self, name: str, args: list[Any], ret: Any, thread: int) -> Entry | None:
        """A window-system call's entry; notes the threads it leaves with no context
        current, whose GL calls glretrace does not issue (nor time) and neither do we."""
        entry = self.ws.compile(name, args, ret, thread)
        ws = self.ws.ws
        if entry is not None and entry[0] == ws.make_current:
            _, _, context = entry[1]
            if context:
                self._unbound_threads.discard(thread)
            else:
                self._unbound_threads.add(thread)
        elif entry is not None and entry[0] == ws.create_drawable and entry[1][3]:
            self._fixed.add(entry[1][0])  # a pbuffer: its size is the trace's, no hint's
        elif entry is not None and entry[0] == ws.alias_drawable and entry[1][1] in self._fixed:
            self._fixed.add(entry[1][0])
        return entry

    def _image_target(self, fn: Any, args: list[Any]) -> Entry:
        """glEGLImageTarget*OES with an image the replay made again from a GL object. apitrace
        follows the call with a fake upload of the image's pixels at that moment, which
        would end the sharing here: `_add_call` leaves it out."""
        target, traced = integer(args[0]), args[1]
        if not isinstance(traced, int) or traced not in self.ws.gl_images:
            raise Unsupported(
                "takes an EGL image of the traced process (a dma-buf or pixmap), which the "
                "replay cannot recreate; apitrace's copy of its pixels is used instead"
            )
        images = self.state.images
        self._image_shared_at = self._call_no
        return (_Call(fn, (target, int(traced)), ((1, lambda t: images.get(t, 0)),), ()), ())

    def _get_error(self, traced: Any) -> Entry:
        errors = self.ws.ws.gl_errors
        if errors is None:
            raise Unsupported("no GL error accounting")
        return (errors.check, (traced if isinstance(traced, int) else 0, self._call_no))

    def _app_query(self, begin: bool, target: int, traced_id: int, entry: Entry) -> None:
        """The program's glBeginQuery/glEndQuery: left out while the profiler's own queries
        use the target (`AppQueries`)."""
        queries = self.state.app_queries
        if target in queries.reserved:
            if begin:
                queries.left_out[target] += 1
                queries.left_out_ids.add(traced_id)
            return
        fn, args = entry
        fn(*args)

    def _conditional_render(self, begin: bool, traced_id: int, entry: Entry) -> None:
        """Conditional rendering on a query left out this pass cannot be reproduced: its
        draws run unconditionally (a departure the fidelity report counts)."""
        queries = self.state.app_queries
        if begin and traced_id in queries.left_out_ids:
            queries.unconditional = True
            queries.unconditional_renders += 1
            return
        if not begin and queries.unconditional:
            queries.unconditional = False
            return
        fn, args = entry
        fn(*args)

    def _query_result(self, name: str, args: list[Any]) -> Entry | None:
        """A glGetQueryObject* call (see `handle_queries`); into a bound query buffer (an
        offset, not an address) it changes GL state and always runs."""
        command, fn = self.dispatch.command(name), self.dispatch.function(name)
        if command is None or fn is None:
            raise Unsupported("the driver does not provide it")
        traced_id, pname, params = integer(args[0]), integer(args[1]), args[2]
        lookup = self._lookup("query")
        if isinstance(params, Pointer) and params < _NOT_AN_OFFSET:
            return (_Call(fn, (traced_id, pname, int(params)), ((0, lookup),), ()), ())
        if self._query_handling == "skip":
            return None
        values = _flatten(params) if isinstance(params, list) else []
        expected = int(values[0]) if values and isinstance(values[0], (int, float)) else None
        ctype = ctypes_type(command.params[2].base) or ctypes.c_int64
        read = (fn, lookup, traced_id, pname, ctype, expected, self._call_no)
        return (self._read_query, read)

    def _read_query(
        self, fn: Any, lookup: Callable[[int], int], traced_id: int, pname: int,
        ctype: Any, expected: int | None, call_no: int,
    ) -> None:  # fmt: skip
        result = ctype()
        query = lookup(traced_id)
        fn(query, pname, ctypes.byref(result))
        if pname == GL_QUERY_RESULT_AVAILABLE:
            while expected and not result.value:  # the program saw it available: wait
                fn(query, pname, ctypes.byref(result))
            return
        queries = self.state.app_queries
        if (
            self._query_handling == "check"
            and expected is not None
            and abs(result.value - expected) > self._query_tolerance
        ):
            queries.mismatches += 1
            if queries.first_mismatch is None:
                queries.first_mismatch = (call_no, result.value, expected)

    def _get_synciv(self, args: list[Any], ret: Any, thread: int) -> Entry:
        """glretrace's rule: where the program saw its fence signalled, wait for the fence
        there; the query itself changes nothing."""
        values = _flatten(args[4]) if isinstance(args[4], list) else [args[4]]
        wait = self.dispatch.function("glClientWaitSync")
        if args[1] != GL_SYNC_STATUS or values[:1] != [GL_SIGNALED] or wait is None:
            return (_nothing, ())
        sync = integer(args[0])
        return (self._block_on_fence, (wait, self._lookup("sync"), sync))

    @staticmethod
    def _block_on_fence(wait: Any, lookup: Callable[[int], int], sync: int) -> None:
        wait(lookup(sync), _vm.GL_SYNC_FLUSH_COMMANDS_BIT, _vm.GL_TIMEOUT_IGNORED)

    def _memcpy(self, args: list[Any]) -> Entry:
        dest, data = args[0], args[1]
        if not isinstance(dest, int) or not isinstance(data, bytes):
            raise BadValue("memcpy without a destination address and data")
        # the bytes go to the data pool, which keeps memory flat in the trace's length
        return (self.state.mapped.write, (int(dest), self.program.keep(data), len(data)))


def _why_not_issued(
    command: Command | None, address: int, nargs: int, image_target: bool
) -> str | None:
    """Why a GL function's calls cannot be issued, if they cannot (`address`: the driver's
    entry point, 0 for none; `image_target`: a glEGLImageTarget*OES, `_image_target`)."""
    if command is None:
        return "not in the Khronos registry"
    if not address:
        return "the driver does not provide it"
    if nargs != len(command.params):
        return f"the trace gives {nargs} arguments, the registry {len(command.params)}"
    if not image_target and any(p.base in _FOREIGN_HANDLES for p in command.params):
        return (
            "takes an EGL image or VDPAU surface of the traced process, which the replay "
            "cannot recreate"
        )
    return None


def _numbers_only(
    command: Command, function: Callable[[str], Any]
) -> Callable[[list[Any], Any, int], Entry]:
    """How calls whose arguments are all plain numbers compile: converted once, nothing
    to look up at replay time."""
    scalars = [_scalar(ctypes_type(p)) for p in command.params]
    name = command.name

    def compile_(args: list[Any], ret: Any, thread: int) -> Entry:
        fn = function(name)
        return (fn, tuple(convert(v) for convert, v in zip(scalars, args, strict=True)))

    return compile_


def _gl_row(name: str) -> OpKind:
    """What a GL function's calls are in the profile's tables (`Compiler._row` says where
    display lists and glBegin/glEnd blocks change that)."""
    if name == "glBegin":
        return OpKind.BEGIN
    if name == "glEnd":
        return OpKind.END
    if name == "glEndList":
        return OpKind.LIST_END
    return OpKind.DRAW if is_profiled_draw(name) else OpKind.CALL


def _arguments(
    values: NodeLists, base: int, arg_slots: list[int], ret: int, sigs: Signatures
) -> tuple[list[Any], Any]:
    """A call's arguments and result as Python values (None where the trace has none)."""
    value = values.value
    args = [value(base + s, sigs) if s >= 0 else None for s in arg_slots]
    return args, (value(base + ret, sigs) if ret >= 0 else None)


def _nothing() -> None:
    """The op of a call that is a row of the profile but needs nothing done."""


def _arg_type(ctype: CType | None) -> int | None:
    """A numeric parameter's type as `_vm.Code.add_proto` numbers it; None for others."""
    if ctype is ctypes.c_float:
        return _vm.ARG_F32
    if ctype is ctypes.c_double:
        return _vm.ARG_F64
    code = getattr(ctype, "_type_", None)
    if ctype is None or code not in _INTEGER_CODES:
        return None
    return _INTEGER_ARGS[ctypes.sizeof(ctype)][code.islower()]


def _returned_class(command: Command) -> str | None:
    """The object class of the name a command returns (GLhandleARB: a handle), if any."""
    return command.return_class or ("handle" if command.return_ctype == "GLhandleARB" else None)


def _value_type(ctype: CType | None) -> int | None:
    """A number's type as `_vm.Code.add_proto` numbers it, a handle's (GLsync: a pointer the
    driver made) as 64 bits; None for others."""
    return _vm.ARG_U64 if ctype is ctypes.c_void_p else _arg_type(ctype)


@functools.cache
def _base_type(base: str) -> int | None:
    """`_value_type` of a value parameter's GL type (asked of every parameter planned)."""
    return _value_type(ctypes_type(base))


def _result_type(command: Command) -> int | None:
    """A command's integer result or handle as `_vm.Code.add_proto` types it."""
    return _value_type(ctypes_type(command.return_ctype))


def _lookup(table: dict[int, int]) -> Callable[[int], int]:
    """Traced name -> driver name; names the program invented itself pass through."""
    get = table.get
    return lambda v: get(v, v)
