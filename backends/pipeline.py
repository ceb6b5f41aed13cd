"""The `pipeline` backend: what the GL pipeline processed, from pipeline statistics queries.

Times and pixel counts say how long a draw took and what it covered; they do
not say why. ARB_pipeline_statistics_query (core in OpenGL 4.6) counts the
work at each stage -- vertices and primitives submitted, shader invocations
per stage, primitives into and out of clipping -- so a slow draw can be told
apart as vertex-bound, fragment-bound or mostly clipped away. Every metric is
one query target, counted by the driver with the latitude the extension
allows: vertex shader invocations may be fewer than vertices when transformed
vertices are reused, fragment shader invocations may include helper
invocations and exclude fragments that early tests killed (llvmpipe counts
whole 4x4 blocks, 16 at a time), and clipping may output more primitives than
it takes in (llvmpipe splits quads and polygons into triangles).

Passes. Queries of different targets may be active at the same time, one per
target, so all metrics of a boundary share one pass, and so do different
metrics at different boundaries. A target cannot be begun again while it is
active, so the same metric at frames and at calls or draw calls takes two
passes (frames first), as the `opengl` backend does for Pixels Drawn; a metric
at calls covers draw calls (a draw call is a call), and its draw-call column
stays empty, as in glretrace.

Reading. Query objects come from a pool of the current context and go back to
it once read. As the replay loop reads the `opengl` backend's queries
(`_vm.c`, "events"), results are read a collection late: at every frame end,
and after every `READ_EVERY` events ended without one, the events that ended
before the previous collection are read, the GPU long done with them. So at
most about twice `READ_EVERY` events hold queries whatever a frame's length.
Each query waiting costs the driver about 6 KB on llvmpipe: asking whether
results were available, as this backend once did between frame ends, found
none before the frame's end on neverball, whose 4,000-call frames kept 9,000
queries per metric waiting (peak RSS 183 MB for one metric at calls, 140 MB
now; 285 against 175 MB for three). Everything left is read at the end of the pass, or when
the context is about to change: then the queries of events still open are
ended, their partial counts are kept, and fresh queries continue them on the
next context, so an event spanning a switch reports the sum and no row is
lost.

Where queries cannot go. The driver never brackets events inside glBegin/glEnd
(a glBegin..glEnd block is one draw, bracketed outside it), where
glBeginQuery/glEndQuery are errors, nor calls compiled into display lists. But
it does bracket glEndList, which starts while the list is still being
compiled, and there Mesa compiles glBeginQuery into the list instead of running
it (a stray query in every later glCallList). So the driver flags glEndList
events (`ReplayView.closing_list`), for frames and context switches outside core
profiles the backend asks GL_LIST_INDEX, and an event that starts during
compilation is left unmeasured: its cells read '-'. A trace running
pipeline statistics queries of its own would collide with these (one active
query per target); none of the sample traces does.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrace.backends.base import MetricBackend, nesting_plan
from retrace.vocabulary import Boundary, Kind, Metric, MetricError, NumType

if TYPE_CHECKING:
    from retrace.replay.dispatch import Dispatch
    from retrace.replay.view import ContextInfo, ReplayView
    from retrace.writer.store import Column

NAME = "pipeline"
EXTENSION = "GL_ARB_pipeline_statistics_query"
GL_QUERY_RESULT = 0x8866
GL_LIST_INDEX = 0x0B33
POOL_GROWTH = 256
# Events ended between two collections of their results, when no frame end comes first.
READ_EVERY = 1024

_UINT, _UINTS = ctypes.c_uint, ctypes.POINTER(ctypes.c_uint)


def _metric(mid: int, name: str, description: str, unit: str) -> Metric:
    return Metric(
        NAME, 0, mid, name, description, NumType.UINT64, Kind.NUM, unit, "Pipeline statistics"
    )


# The backend's own order (the column order): the extension's order of query targets.
VERTICES = _metric(
    0, "Vertices Submitted",
    "Vertices submitted to primitive assembly by draws (GL_VERTICES_SUBMITTED)",
    "vertices",
)  # fmt: skip
PRIMITIVES = _metric(
    1, "Primitives Submitted",
    "Primitives assembled from the submitted vertices (GL_PRIMITIVES_SUBMITTED)",
    "primitives",
)  # fmt: skip
VS = _metric(
    2, "Vertex Shader Invocations",
    "Times the vertex shader ran; may be below Vertices Submitted when transformed vertices "
    "are reused (GL_VERTEX_SHADER_INVOCATIONS)",
    "invocations",
)  # fmt: skip
TCS = _metric(
    3, "Tess Control Shader Patches",
    "Patches processed by the tessellation control shader (GL_TESS_CONTROL_SHADER_PATCHES)",
    "patches",
)  # fmt: skip
TES = _metric(
    4, "Tess Evaluation Shader Invocations",
    "Times the tessellation evaluation shader ran (GL_TESS_EVALUATION_SHADER_INVOCATIONS)",
    "invocations",
)  # fmt: skip
GS = _metric(
    5, "Geometry Shader Invocations",
    "Times the geometry shader ran, instances included (GL_GEOMETRY_SHADER_INVOCATIONS)",
    "invocations",
)  # fmt: skip
GS_EMITTED = _metric(
    6, "Geometry Shader Primitives Emitted",
    "Primitives the geometry shader emitted (GL_GEOMETRY_SHADER_PRIMITIVES_EMITTED)",
    "primitives",
)  # fmt: skip
FS = _metric(
    7, "Fragment Shader Invocations",
    "Times the fragment shader ran; fragments killed by early tests may not count, helper "
    "invocations may (GL_FRAGMENT_SHADER_INVOCATIONS)",
    "invocations",
)  # fmt: skip
CS = _metric(
    8, "Compute Shader Invocations",
    "Times the compute shader ran: work groups times the local size "
    "(GL_COMPUTE_SHADER_INVOCATIONS)",
    "invocations",
)  # fmt: skip
CLIP_IN = _metric(
    9, "Clipping Input Primitives",
    "Primitives that reached the clipping stage (GL_CLIPPING_INPUT_PRIMITIVES)",
    "primitives",
)  # fmt: skip
CLIP_OUT = _metric(
    10, "Clipping Output Primitives",
    "Primitives that left the clipping stage, for rasterization (GL_CLIPPING_OUTPUT_PRIMITIVES)",
    "primitives",
)  # fmt: skip
METRICS: tuple[Metric, ...] = (
    VERTICES, PRIMITIVES, VS, TCS, TES, GS, GS_EMITTED, FS, CS, CLIP_IN, CLIP_OUT,
)  # fmt: skip

# Query targets, from the extension (and gl.xml): GL_*_ARB, GL_GEOMETRY_SHADER_INVOCATIONS.
TARGETS: dict[Metric, int] = {
    VERTICES: 0x82EE,
    PRIMITIVES: 0x82EF,
    VS: 0x82F0,
    TCS: 0x82F1,
    TES: 0x82F2,
    GS: 0x887F,
    GS_EMITTED: 0x82F3,
    FS: 0x82F4,
    CS: 0x82F5,
    CLIP_IN: 0x82F6,
    CLIP_OUT: 0x82F7,
}

# The extension leaves out the targets of stages the context lacks: (version, extension, stage).
_STAGES: dict[Metric, tuple[tuple[int, int], str, str]] = {
    TCS: ((4, 0), "GL_ARB_tessellation_shader", "tessellation shaders"),
    TES: ((4, 0), "GL_ARB_tessellation_shader", "tessellation shaders"),
    GS: ((3, 2), "GL_ARB_geometry_shader4", "geometry shaders"),
    GS_EMITTED: ((3, 2), "GL_ARB_geometry_shader4", "geometry shaders"),
    CS: ((4, 3), "GL_ARB_compute_shader", "compute shaders"),
}


def _context_support(context: ContextInfo | None) -> tuple[bool, str]:
    if context is None:
        return False, "no current context"
    if context.api == "gles":
        return False, f"OpenGL ES has no pipeline statistics queries ({EXTENSION} is desktop GL)"
    if not (context.version_at_least(4, 6) or EXTENSION in context.extensions):
        return False, f"needs OpenGL 4.6 or {EXTENSION}"
    if not (context.version_at_least(3, 3) or "GL_ARB_timer_query" in context.extensions):
        return False, "needs OpenGL 3.3 or GL_ARB_timer_query for 64-bit query results"
    return True, ""


def _metric_support(context: ContextInfo | None, metric: Metric) -> tuple[bool, str]:
    stage = _STAGES.get(metric)
    if stage is None:
        return True, ""
    if context is None:
        return False, "no current context"
    (major, minor), extension, what = stage
    ok = context.version_at_least(major, minor) or extension in context.extensions
    return ok, f"needs {what}: OpenGL {major}.{minor} or {extension}"


class _GL:
    """The query functions of one context."""

    def __init__(self, dispatch: Dispatch) -> None:
        self.GenQueries = dispatch.raw("glGenQueries", None, ctypes.c_int, _UINTS)
        self.DeleteQueries = dispatch.raw("glDeleteQueries", None, ctypes.c_int, _UINTS)
        self.BeginQuery = dispatch.raw("glBeginQuery", None, _UINT, _UINT)
        self.EndQuery = dispatch.raw("glEndQuery", None, _UINT)
        self.GetQueryObjectui64v = dispatch.raw(
            "glGetQueryObjectui64v", None, _UINT, _UINT, ctypes.POINTER(ctypes.c_uint64)
        )
        self.GetIntegerv = dispatch.raw("glGetIntegerv", None, _UINT, ctypes.POINTER(ctypes.c_int))
        self._value = ctypes.c_uint64()
        self._int = ctypes.c_int()

    def result(self, query: int) -> int:
        self.GetQueryObjectui64v(query, GL_QUERY_RESULT, ctypes.byref(self._value))
        return self._value.value

    def compiling_list(self) -> bool:
        self.GetIntegerv(GL_LIST_INDEX, ctypes.byref(self._int))
        return self._int.value != 0


@dataclass
class _Pool:
    """Query objects of the current context: taken per event, given back once read.

    A query object takes the target of its first glBeginQuery for good, so the free
    objects are kept per target.
    """

    gl: _GL
    # per boundary of the pass: (metric, query target) of what this context can measure
    targets: dict[Boundary, tuple[tuple[Metric, int], ...]]
    has_lists: bool  # not a core profile context: display lists can be compiled
    free: dict[int, list[int]] = field(default_factory=dict)  # target -> query objects
    made: list[int] = field(default_factory=list)

    def take(self, target: int) -> int:
        free = self.free.setdefault(target, [])
        if not free:
            ids = (ctypes.c_uint * POOL_GROWTH)()
            self.gl.GenQueries(POOL_GROWTH, ids)
            self.made.extend(ids)
            free.extend(reversed(ids))
        return free.pop()

    def give(self, target: int, query: int) -> None:
        self.free[target].append(query)

    def delete(self) -> None:
        if self.made:
            self.gl.DeleteQueries(len(self.made), (ctypes.c_uint * len(self.made))(*self.made))
        self.free.clear()
        self.made.clear()


@dataclass(slots=True)
class _Open:
    """An event between begin_query and end_query (and, once ended, until it is read)."""

    boundary: Boundary
    event: int
    # (metric, target, query object) running in the current context
    queries: list[tuple[Metric, int, int]] = field(default_factory=list)
    counts: dict[Metric, int] = field(default_factory=dict)  # from contexts left while open


class PipelineBackend(MetricBackend):
    """Pipeline statistics queries per frame, call and draw call."""

    name = NAME

    def __init__(self, view: ReplayView) -> None:
        super().__init__(view)
        self.enabled: dict[Boundary, set[Metric]] = {b: set() for b in Boundary}
        self.plan: list[dict[Boundary, set[Metric]]] = []
        self._metrics: dict[Boundary, tuple[Metric, ...]] = {}  # this pass's, in METRICS order
        self._set: dict[Boundary, dict[Metric, Callable[[int, int], None]]] = {}
        self._open: dict[Boundary, _Open] = {}
        self._pool: _Pool | None = None
        self._pending: list[_Open] = []  # ended events, not read yet
        self._older: list[_Open] = []  # ...ended before the last collection

    # --- what it offers ---------------------------------------------------------------------

    def support(self) -> tuple[bool, str]:
        return _context_support(self.view.context)

    def metrics(self) -> Sequence[Metric]:
        return METRICS

    def available(self, metric: Metric) -> tuple[bool, str]:
        ok, why = self.support()
        if not ok:
            return ok, why
        return _metric_support(self.view.context, metric)

    # --- passes -----------------------------------------------------------------------------

    def enable(self, metric: Metric, boundary: Boundary) -> None:
        ok, why = self.available(metric)
        if not ok:
            raise MetricError(f'{NAME} metric "{metric.name}" is not available here: {why}')
        self.enabled[boundary].add(metric)

    def generate_passes(self) -> int:
        wanted = {b: set(ms) for b, ms in self.enabled.items()}
        wanted[Boundary.DRAWCALL] -= wanted[Boundary.CALL]  # draw calls are calls
        inner = wanted[Boundary.CALL] | wanted[Boundary.DRAWCALL]
        # a target cannot be begun inside itself: frames first, then calls and draw calls
        self.plan = nesting_plan(wanted, nests=not wanted[Boundary.FRAME] & inner)
        return len(self.plan)

    def describe_passes(self) -> list[str]:
        def names(metrics: set[Metric]) -> str:
            return ", ".join(m.name for m in METRICS if m in metrics)

        split = []
        if len(self.plan) > 1:
            inner = self.plan[1][Boundary.CALL] | self.plan[1][Boundary.DRAWCALL]
            clash = names(self.plan[0][Boundary.FRAME] & inner)
            split.append(f"{clash} at frames and inside them: a query target cannot nest in itself")
        covered = self.enabled[Boundary.CALL] & self.enabled[Boundary.DRAWCALL]
        lines = []
        for i, boundaries in enumerate(self.plan):
            what = "; ".join(f"{b.name.lower()}: {names(ms)}" for b, ms in boundaries.items() if ms)
            notes = list(split)
            if covered and boundaries.get(Boundary.CALL):
                notes.append(f"{names(covered)} per call covers the draw calls, which are calls")
            lines.append(
                f"pass {i + 1}: {NAME} {what}" + (f" ({'; '.join(notes)})" if notes else "")
            )
        return lines

    def pass_boundaries(self, index: int) -> frozenset[Boundary]:
        return frozenset(b for b, ms in self.plan[index].items() if ms)

    def begin_pass(self, index: int, columns: dict[tuple[Metric, Boundary], Column]) -> None:
        chosen = {b: ms for b, ms in self.plan[index].items() if ms}
        self._metrics = {b: tuple(m for m in METRICS if m in ms) for b, ms in chosen.items()}
        self.view.reserve_queries({TARGETS[m] for ms in self._metrics.values() for m in ms})
        # per boundary: metric -> the column's setter, looked up once per pass
        self._set = {b: {m: columns[m, b].set for m in ms} for b, ms in self._metrics.items()}
        self._open.clear()
        self._pending.clear()
        self._older.clear()
        self.continue_pass()

    def end_pass(self) -> None:
        self.pause_pass()
        self._open.clear()

    def pause_pass(self) -> None:
        """Before a context switch: end and read what runs here; open events keep their counts."""
        pool = self._pool
        if pool is None:
            return
        self._pool = None
        for open_ in self._open.values():
            for _, target, _ in open_.queries:
                pool.gl.EndQuery(target)
            self._collect(open_, pool)
        self._read(self._older, pool)
        self._read(self._pending, pool)
        self._older, self._pending = [], []
        pool.delete()

    def continue_pass(self) -> None:
        """A context is current: open events carry on in it, if it can measure."""
        context = self.view.context
        if not self._metrics or context is None or not _context_support(context)[0]:
            return
        targets = {
            b: tuple((m, TARGETS[m]) for m in ms if _metric_support(context, m)[0])
            for b, ms in self._metrics.items()
        }
        self._pool = pool = _Pool(_GL(self.view.dispatch), targets, context.profile != "core")
        for open_ in self._open.values():
            self._start(open_, pool)

    # --- events -----------------------------------------------------------------------------

    def _start(self, open_: _Open, pool: _Pool) -> None:
        # glBeginQuery would be compiled into the list, not run. Draw calls are never events
        # while a list is compiled; glEndList (a call) and a frame or a context switch may be.
        if open_.boundary == Boundary.CALL and self.view.closing_list:
            return
        if open_.boundary == Boundary.FRAME and pool.has_lists and pool.gl.compiling_list():
            return
        queries, take, begin = open_.queries, pool.take, pool.gl.BeginQuery
        for metric, target in pool.targets[open_.boundary]:
            query = take(target)
            begin(target, query)
            queries.append((metric, target, query))

    def begin_query(self, boundary: Boundary, event: int) -> None:
        if boundary not in self._metrics:
            return
        open_ = self._open[boundary] = _Open(boundary, event)
        if self._pool is not None:
            self._start(open_, self._pool)

    def end_query(self, boundary: Boundary, event: int) -> None:
        if boundary not in self._metrics:
            return
        open_ = self._open.pop(boundary)
        if not open_.queries:  # nothing runs now: what earlier contexts counted is all there is
            self._write(open_)
            return
        assert self._pool is not None  # events with queries began in the current context
        end = self._pool.gl.EndQuery
        for _, target, _ in open_.queries:
            end(target)
        self._pending.append(open_)
        if boundary == Boundary.FRAME or len(self._pending) >= READ_EVERY:
            # the GPU is done with what ended before the previous collection: read it now
            self._read(self._older, self._pool)
            self._older, self._pending = self._pending, []

    def _collect(self, open_: _Open, pool: _Pool) -> None:
        """Add the results of the event's queries to its counts and give the queries back."""
        counts, result, give = open_.counts, pool.gl.result, pool.give
        for metric, target, query in open_.queries:
            counts[metric] = counts.get(metric, 0) + result(query)
            give(target, query)
        open_.queries = []

    def _read(self, finished: list[_Open], pool: _Pool) -> None:
        for open_ in finished:
            self._collect(open_, pool)
            self._write(open_)

    def _write(self, open_: _Open) -> None:
        """Into the columns; a metric no context could measure stays missing ('-')."""
        setters = self._set[open_.boundary]
        for metric, value in open_.counts.items():
            setters[metric](open_.event, value)
