"""The `opengl` backend: glretrace's metrics, from GL queries, clocks and /proc.

GPU times come from pairs of glQueryCounter(GL_TIMESTAMP) queries, which nest,
so frames, calls and draw calls are timed in one pass; GL_SAMPLES_PASSED
occlusion queries, which do not nest, give Pixels Drawn, and asking for it at
frames and at calls or draws takes a second pass (frames first), as in
glretrace. Query objects come from per-context pools and are read in batches
one frame late, so the CPU never waits for the GPU to finish the frame it just
submitted; everything left is read at the end of the pass or when the context
changes. An event open across a context switch keeps its start timestamp and
adds up its pixel counts from each context, so no row is dropped.

CPU Start/Duration use CLOCK_MONOTONIC; VSIZE/RSS read /proc/self/statm and
are reported in bytes (glretrace prints zeros without procps, and RSS in pages).
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retrace.backends.base import MetricBackend, nesting_plan
from retrace.replay.program import NOT_MEASURED
from retrace.vocabulary import Boundary, Kind, Metric, MetricError, NativeEvents, NumType

GL_TIMESTAMP = 0x8E28
GL_SAMPLES_PASSED = 0x8914
# GL_SAMPLES_PASSED, GL_ANY_SAMPLES_PASSED(_CONSERVATIVE): one active query among them
OCCLUSION_TARGETS = (GL_SAMPLES_PASSED, 0x8C2F, 0x8D6A)
GL_QUERY_RESULT = 0x8866
GL_QUERY_RESULT_AVAILABLE = 0x8867
GL_GPU_DISJOINT_EXT = 0x8FBB

NAME = "opengl"


def _m(group: int, mid: int, name: str, desc: str, num: NumType, kind: Kind, unit: str) -> Metric:
    return Metric(NAME, group, mid, name, desc, num, kind, unit, ("CPU", "GPU")[group])


# The backend's own order, which is the column order of every table (as in glretrace).
CPU_START = _m(
    0,
    0,
    "CPU Start",
    "CPU time at the start of the event, from the pass start",
    NumType.INT64,
    Kind.TIMESTAMP,
    "ns",
)
CPU_DURATION = _m(
    0,
    1,
    "CPU Duration",
    "CPU (wall-clock) time the event took on the CPU",
    NumType.INT64,
    Kind.DURATION,
    "ns",
)
GPU_START = _m(
    1,
    0,
    "GPU Start",
    "GPU timestamp at the start of the event, from the pass start",
    NumType.INT64,
    Kind.TIMESTAMP,
    "ns",
)
GPU_DURATION = _m(
    1,
    1,
    "GPU Duration",
    "GPU time between the event's start and end timestamps",
    NumType.INT64,
    Kind.DURATION,
    "ns",
)
GPU_DISJOINT = _m(
    1,
    2,
    "GPU Disjoint",
    "GPU timer disjoint during the event (EXT_disjoint_timer_query)",
    NumType.BOOL,
    Kind.GENERIC,
    "",
)
PIXELS = _m(
    1,
    3,
    "Pixels Drawn",
    "Samples that passed the depth and stencil tests (GL_SAMPLES_PASSED)",
    NumType.INT64,
    Kind.GENERIC,
    "samples",
)
VSIZE_START = _m(
    0,
    2,
    "VSIZE Start",
    "Virtual memory size of the replay at the start of the event",
    NumType.INT64,
    Kind.GENERIC,
    "bytes",
)
VSIZE_DURATION = _m(
    0,
    3,
    "VSIZE Duration",
    "Change of virtual memory size during the event",
    NumType.INT64,
    Kind.GENERIC,
    "bytes",
)
RSS_START = _m(
    0,
    4,
    "RSS Start",
    "Resident memory of the replay at the start of the event",
    NumType.INT64,
    Kind.GENERIC,
    "bytes",
)
RSS_DURATION = _m(
    0,
    5,
    "RSS Duration",
    "Change of resident memory during the event",
    NumType.INT64,
    Kind.GENERIC,
    "bytes",
)
# what the replay loop can measure itself (native_events)
NATIVE = frozenset({CPU_START, CPU_DURATION, GPU_START, GPU_DURATION, PIXELS})
METRICS = (
    CPU_START,
    CPU_DURATION,
    GPU_START,
    GPU_DURATION,
    GPU_DISJOINT,
    PIXELS,
    VSIZE_START,
    VSIZE_DURATION,
    RSS_START,
    RSS_DURATION,
)
GPU_TIMES = (GPU_START, GPU_DURATION, GPU_DISJOINT)
MEMORY = (VSIZE_START, VSIZE_DURATION, RSS_START, RSS_DURATION)
PAGE = os.sysconf("SC_PAGE_SIZE")
POOL_GROWTH = 512
READ_EVERY = 1024  # events: read results this late when frames are not measured


class _GL:
    """The query functions, core or EXT-suffixed (GLES), resolved once per context API."""

    def __init__(self, dispatch, suffix: str) -> None:
        u, p = ctypes.c_uint, ctypes.POINTER(ctypes.c_uint)
        self.GenQueries = dispatch.raw("glGenQueries" + suffix, None, ctypes.c_int, p)
        self.DeleteQueries = dispatch.raw("glDeleteQueries" + suffix, None, ctypes.c_int, p)
        self.QueryCounter = dispatch.raw("glQueryCounter" + suffix, None, u, u)
        self.BeginQuery = dispatch.raw("glBeginQuery" + suffix, None, u, u)
        self.EndQuery = dispatch.raw("glEndQuery" + suffix, None, u)
        self.GetQueryObjectui64v = dispatch.raw(
            "glGetQueryObjectui64v" + suffix, None, u, u, ctypes.POINTER(ctypes.c_uint64)
        )
        self._result = ctypes.c_uint64()  # one result at a time, read into the same place
        self._result_ref = ctypes.byref(self._result)
        self.GetIntegerv = dispatch.raw("glGetIntegerv", None, u, ctypes.POINTER(ctypes.c_int))
        self.GetInteger64v = dispatch.raw(
            "glGetInteger64v" + ("" if suffix == "" else "EXT"),
            None,
            u,
            ctypes.POINTER(ctypes.c_int64),
        )

    def result(self, query: int) -> int:
        self.GetQueryObjectui64v(query, GL_QUERY_RESULT, self._result_ref)
        return self._result.value

    def available(self, query: int) -> bool:
        value = ctypes.c_uint64()
        self.GetQueryObjectui64v(query, GL_QUERY_RESULT_AVAILABLE, ctypes.byref(value))
        return bool(value.value)

    def get_integer(self, pname: int) -> int:
        value = ctypes.c_int()
        self.GetIntegerv(pname, ctypes.byref(value))
        return value.value

    def disjoint(self) -> int:
        return self.get_integer(GL_GPU_DISJOINT_EXT)

    def timestamp(self) -> int:
        value = ctypes.c_int64()
        self.GetInteger64v(GL_TIMESTAMP, ctypes.byref(value))
        return value.value


@dataclass
class _Pool:
    """Query objects of one context: one per event, read back in batches a frame late and
    then free again, so a pass holds about two frames' worth however long the trace.

    A query object keeps the target it was first used with (using it with another is
    GL_INVALID_OPERATION), so timestamp and samples-passed queries are recycled apart.
    """

    gl: _GL
    timestamps: list[int] = field(default_factory=list)  # free, by target
    samples: list[int] = field(default_factory=list)
    every: list[int] = field(default_factory=list)  # ever made (deleted with the pool)

    def take(self, free: list[int]) -> int:
        """A query from `free` (`timestamps` or `samples`), made if there is none."""
        if not free:
            ids = (ctypes.c_uint * POOL_GROWTH)()
            self.gl.GenQueries(POOL_GROWTH, ids)
            self.every.extend(ids)
            free.extend(reversed(ids))
        return free.pop()

    def delete(self) -> None:
        if self.every:
            self.gl.DeleteQueries(len(self.every), (ctypes.c_uint * len(self.every))(*self.every))
        self.timestamps.clear()
        self.samples.clear()
        self.every.clear()


@dataclass(slots=True)
class _Open:
    """An event between begin_query and end_query."""

    event: int
    cpu: int = 0
    vsize: int = 0
    rss: int = 0
    gpu_start: int | None = None  # a query id, then its value once read
    gpu_start_read: bool = False
    pixel_query: int | None = None
    pixels: int = 0  # counts from contexts left while the event was open


class OpenGLBackend(MetricBackend):
    """GL queries, CPU clocks and memory, per frame, call and draw call."""

    name = NAME

    def __init__(self, session) -> None:
        super().__init__(session)
        self.enabled: dict[Boundary, set[Metric]] = {b: set() for b in Boundary}
        self.plan: list[dict[Boundary, set[Metric]]] = []
        self._pass: dict[Boundary, set[Metric]] = {}
        self._set: dict[Boundary, dict] = {}
        self._open: dict[Boundary, _Open] = {}
        self._current: _Pool | None = None  # the current context's (pause_pass ends it)
        self._pending: list[tuple] = []  # queries of finished events, not read yet
        self._older: list[tuple] = []  # ...of events finished before the last frame end
        self._statm = None

    # --- what it offers ---------------------------------------------------------------------

    def support(self) -> tuple[bool, str]:
        return True, ""

    def metrics(self) -> Sequence[Metric]:
        return METRICS

    def available(self, metric: Metric) -> tuple[bool, str]:
        if metric not in GPU_TIMES and metric is not PIXELS:
            return True, ""
        context = self.session.context
        if context is None:
            return False, "no current context"
        extensions = context.extensions
        if metric is PIXELS:
            if context.api == "gles":
                return False, "OpenGL ES has no GL_SAMPLES_PASSED queries"
            return (context.version_at_least(1, 5), "needs OpenGL 1.5 occlusion queries")
        if metric is GPU_DISJOINT:
            ok = "GL_EXT_disjoint_timer_query" in extensions
            return ok, "needs GL_EXT_disjoint_timer_query"
        if context.api == "gles":
            ok = "GL_EXT_disjoint_timer_query" in extensions
            return ok, "needs GL_EXT_disjoint_timer_query on OpenGL ES"
        ok = context.version_at_least(3, 3) or "GL_ARB_timer_query" in extensions
        return ok, "needs OpenGL 3.3 or GL_ARB_timer_query timestamps"

    # --- passes -----------------------------------------------------------------------------

    def enable(self, metric: Metric, boundary: Boundary) -> None:
        ok, why = self.available(metric)
        if not ok:
            raise MetricError(f'opengl metric "{metric.name}" is not available here: {why}')
        self.enabled[boundary].add(metric)

    def _effective(self) -> dict[Boundary, set[Metric]]:
        """glretrace's rules: a metric at CALL covers draw calls; Disjoint only with Duration."""
        out = {b: set(ms) for b, ms in self.enabled.items()}
        out[Boundary.DRAWCALL] -= out[Boundary.CALL]
        for metrics in out.values():
            if GPU_DISJOINT in metrics and GPU_DURATION not in metrics:
                metrics.discard(GPU_DISJOINT)
        return out

    def generate_passes(self) -> int:
        wanted = self._effective()
        inner_pixels = PIXELS in wanted[Boundary.CALL] | wanted[Boundary.DRAWCALL]
        # GL_SAMPLES_PASSED cannot nest; timestamps can
        self.plan = nesting_plan(
            wanted, nests=not (PIXELS in wanted[Boundary.FRAME] and inner_pixels)
        )
        return len(self.plan)

    def describe_passes(self) -> list[str]:
        lines = []
        for i, boundaries in enumerate(self.plan):
            what = "; ".join(
                f"{b.name.lower()}: {', '.join(m.name for m in METRICS if m in ms)}"
                for b, ms in boundaries.items()
                if ms
            )
            why = " (Pixels Drawn queries cannot nest)" if len(self.plan) > 1 else ""
            lines.append(f"pass {i + 1}: opengl {what}{why}")
        return lines

    def pass_boundaries(self, index: int) -> frozenset[Boundary]:
        return frozenset(b for b, ms in self.plan[index].items() if ms)

    def begin_pass(self, index: int, columns: dict) -> None:
        self._pass = {b: ms for b, ms in self.plan[index].items() if ms}
        # per boundary: metric -> the column's setter, looked up once per pass
        self._set = {b: {m: columns[m, b].set for m in ms} for b, ms in self._pass.items()}
        self._columns = columns
        self._open.clear()
        self._pending.clear()
        self._older.clear()
        self._needs_gpu = any(
            m in GPU_TIMES or m is PIXELS for ms in self._pass.values() for m in ms
        )
        self._needs_memory = any(m in MEMORY for ms in self._pass.values() for m in ms)
        pixels = any(PIXELS in ms for ms in self._pass.values())
        self.session.reserve_queries(OCCLUSION_TARGETS if pixels else ())
        self._cpu_base = time.perf_counter_ns()
        self._gpu_base: int | None = None
        if self._needs_memory:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
        self.continue_pass()

    def native_events(self, boundary: Boundary) -> NativeEvents | None:
        metrics = self._pass.get(boundary)
        if not metrics or not metrics <= NATIVE:
            return None
        gpu_times = bool(metrics & {GPU_START, GPU_DURATION})
        if gpu_times:  # GPU times count from the first query, as in begin_query
            pool = self._pool(create=True)
            if pool is None:
                return None
            self._base(pool)
        return NativeEvents(gpu_times=gpu_times, pixels=PIXELS in metrics)

    def native_results(self, boundary: Boundary, first_event: int, events: np.ndarray) -> None:
        cpu_start, cpu_end = events["cpu_start"], events["cpu_end"]
        gpu_start, gpu_end, pixels = events["gpu_start"], events["gpu_end"], events["pixels"]
        base = self._gpu_base or 0
        for metric, values, missing in (
            (CPU_START, cpu_start - self._cpu_base, None),
            (CPU_DURATION, cpu_end - cpu_start, None),
            (GPU_START, gpu_start - base, gpu_start == NOT_MEASURED),
            (GPU_DURATION, gpu_end - gpu_start, gpu_start == NOT_MEASURED),
            (PIXELS, pixels, pixels == NOT_MEASURED),
        ):
            if metric not in self._pass[boundary]:
                continue
            column = self._columns[metric, boundary]
            if missing is not None:
                values = np.where(missing, column.missing, values)
            if first_event > len(column):  # events before the pass began: not measured
                column.set(first_event - 1, column.missing)
            column.extend(values)

    def end_pass(self) -> None:
        self.pause_pass()
        if self._statm is not None:
            os.close(self._statm)
            self._statm = None

    def pause_pass(self) -> None:
        """Before a context switch: read everything of this context, keep open events going."""
        pool = self._pool()
        if pool is None:
            return
        for open_ in self._open.values():
            if open_.gpu_start is not None and not open_.gpu_start_read:
                open_.gpu_start = pool.gl.result(open_.gpu_start) - self._base(pool)
                open_.gpu_start_read = True
            if open_.pixel_query is not None:
                pool.gl.EndQuery(GL_SAMPLES_PASSED)
                open_.pixels += pool.gl.result(open_.pixel_query)
                open_.pixel_query = None
        self._read(self._older + self._pending, pool)
        self._older.clear()
        self._pending.clear()
        pool.delete()
        self._current = None

    def continue_pass(self) -> None:
        if not self._needs_gpu or self.session.context is None:
            return
        pool = self._pool(create=True)
        for boundary, open_ in self._open.items():
            if PIXELS in self._pass.get(boundary, ()):
                open_.pixel_query = pool.take(pool.samples)
                pool.gl.BeginQuery(GL_SAMPLES_PASSED, open_.pixel_query)

    def _pool(self, create: bool = False) -> _Pool | None:
        """The current context's query pool. There is one at a time: the driver pauses the
        pass before every context switch, and pause_pass reads and deletes the pool."""
        if self._current is None and create and self.session.context_key:
            context = self.session.context
            suffix = "EXT" if context is not None and context.api == "gles" else ""
            self._current = _Pool(_GL(self.session.dispatch, suffix))
        return self._current

    def _base(self, pool: _Pool) -> int:
        if self._gpu_base is None:
            self._gpu_base = pool.gl.timestamp()
        return self._gpu_base

    # --- events -----------------------------------------------------------------------------

    def _memory(self) -> tuple[int, int]:
        os.lseek(self._statm, 0, os.SEEK_SET)
        size, resident = os.read(self._statm, 128).split()[:2]
        return int(size) * PAGE, int(resident) * PAGE

    def begin_query(self, boundary: Boundary, event: int) -> None:
        metrics = self._pass.get(boundary)
        if not metrics:
            return
        open_ = self._open[boundary] = _Open(event)
        if self._needs_gpu:
            pool = self._pool(create=True)
            # (frames never begin inside a list; of calls, only glEndList can)
            if pool is not None and not (boundary != Boundary.FRAME and self.session.closing_list):
                if GPU_START in metrics or GPU_DURATION in metrics:
                    self._base(pool)
                    open_.gpu_start = pool.take(pool.timestamps)
                    pool.gl.QueryCounter(open_.gpu_start, GL_TIMESTAMP)
                if PIXELS in metrics:
                    open_.pixel_query = pool.take(pool.samples)
                    pool.gl.BeginQuery(GL_SAMPLES_PASSED, open_.pixel_query)
        if self._needs_memory:
            open_.vsize, open_.rss = self._memory()
        open_.cpu = time.perf_counter_ns()

    def end_query(self, boundary: Boundary, event: int) -> None:
        setters = self._set.get(boundary)
        if not setters:
            return
        now = time.perf_counter_ns()
        open_ = self._open.pop(boundary)
        if CPU_START in setters:
            setters[CPU_START](event, open_.cpu - self._cpu_base)
        if CPU_DURATION in setters:
            setters[CPU_DURATION](event, now - open_.cpu)
        if self._needs_memory:
            vsize, rss = self._memory()
            for metric, value in (
                (VSIZE_START, open_.vsize),
                (VSIZE_DURATION, vsize - open_.vsize),
                (RSS_START, open_.rss),
                (RSS_DURATION, rss - open_.rss),
            ):
                if metric in setters:
                    setters[metric](event, value)
        pool = self._pool()
        if pool is None:
            return
        end_query = None
        if open_.gpu_start is not None:
            end_query = pool.take(pool.timestamps)
            pool.gl.QueryCounter(end_query, GL_TIMESTAMP)
        if GPU_DISJOINT in setters:  # the flag covers everything since it was last read
            setters[GPU_DISJOINT](event, pool.gl.disjoint())
        if open_.pixel_query is not None:
            pool.gl.EndQuery(GL_SAMPLES_PASSED)
        if end_query is not None or open_.pixel_query is not None or open_.pixels:
            self._pending.append((boundary, event, open_, end_query))
        if boundary == Boundary.FRAME or len(self._pending) >= READ_EVERY:
            # read what finished before the previous frame end (or batch of events, for
            # passes that measure no frames): the GPU is done with it by now
            self._read(self._older, pool)
            self._older, self._pending = self._pending, []

    def _read(self, finished: list[tuple], pool: _Pool) -> None:
        """Write the results of finished events; their queries go back to the pool."""
        result, timestamp_done, samples_done = (
            pool.gl.result,
            pool.timestamps.append,
            pool.samples.append,
        )
        for boundary, event, open_, end_query in finished:
            setters = self._set[boundary]
            if end_query is not None:
                base = self._base(pool)
                start = open_.gpu_start
                if not open_.gpu_start_read:
                    start = result(open_.gpu_start) - base
                    timestamp_done(open_.gpu_start)
                end = result(end_query) - base
                timestamp_done(end_query)
                if GPU_START in setters:
                    setters[GPU_START](event, start)
                if GPU_DURATION in setters:
                    setters[GPU_DURATION](event, end - start)
            if PIXELS in setters:
                pixels = open_.pixels
                if open_.pixel_query is not None:
                    pixels += result(open_.pixel_query)
                    samples_done(open_.pixel_query)
                setters[PIXELS](event, pixels)
