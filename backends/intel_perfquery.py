"""The ``GL_INTEL_performance_query`` backend: Intel's query kinds, per frame or draw call.

The extension (Mesa's iris, crocus and older i965 drivers on Intel GPUs, and
Intel's Windows driver) offers *queries*: fixed sets of counters measured
together, with non-zero ids walked with glGetFirstPerfQueryIdINTEL and
glGetNextPerfQueryIdINTEL. A query's result is one structure of `dataSize`
bytes; each counter (numbered from 1) has a name, a description, a byte
offset and size in it, a type (event, duration, throughput, raw, timestamp)
and a data type (uint32, uint64, float, double, bool32).

Metrics are ``[query id, counter id]``, as glretrace numbers them. Since all
counters of a query come together, each pass measures one query at one
boundary -- all its selected counters at once -- frames first, then draw calls
(as glretrace); the CALL boundary is not offered. A query is usable if an
instance of it can be created and begun: Mesa cannot begin its OA-based
queries when the kernel's i915 perf interface is closed to the process.

Results are read as in the ``GL_AMD_performance_monitor`` backend, whose
`CounterSessionBackend` this reuses: each event gets its own query handle from
a per-context pool, ended handles are read oldest first with
GL_PERFQUERY_DONOT_FLUSH_INTEL after a glFlush (the spec's first way of
reading without blocking), and GL_PERFQUERY_WAIT_INTEL is used only when
`WINDOW` results are outstanding, when the driver will create no more
handles, or before the context changes -- never right after each event, as
glretrace does. An event that spans a context switch gets one segment per
context: counts and raw durations add up, normalised durations and
throughputs are averaged (weighted by the time spent on each context),
booleans (such as a frequency change flag) are or-ed, and a timestamp is the
first segment's.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from retrace.backends.counter_sessions import (
    GL_NO_ERROR,
    CounterSessionBackend,
    Merge,
    SessionPool,
    Values,
    any_true,
    clear_errors,
    error_name,
    first,
    total,
    weighted_mean,
)
from retrace.vocabulary import Kind, Metric, NumType

if TYPE_CHECKING:
    from retrace.replay.view import ReplayView

NAME = "GL_INTEL_performance_query"

GL_PERFQUERY_DONOT_FLUSH_INTEL = 0x83F9
GL_PERFQUERY_WAIT_INTEL = 0x83FB
GL_PERFQUERY_COUNTER_EVENT_INTEL = 0x94F0
GL_PERFQUERY_COUNTER_DURATION_NORM_INTEL = 0x94F1
GL_PERFQUERY_COUNTER_DURATION_RAW_INTEL = 0x94F2
GL_PERFQUERY_COUNTER_THROUGHPUT_INTEL = 0x94F3
GL_PERFQUERY_COUNTER_RAW_INTEL = 0x94F4
GL_PERFQUERY_COUNTER_TIMESTAMP_INTEL = 0x94F5
GL_PERFQUERY_COUNTER_DATA_UINT32_INTEL = 0x94F8
GL_PERFQUERY_COUNTER_DATA_UINT64_INTEL = 0x94F9
GL_PERFQUERY_COUNTER_DATA_FLOAT_INTEL = 0x94FA
GL_PERFQUERY_COUNTER_DATA_DOUBLE_INTEL = 0x94FB
GL_PERFQUERY_COUNTER_DATA_BOOL32_INTEL = 0x94FC
GL_PERFQUERY_QUERY_NAME_LENGTH_MAX_INTEL = 0x94FD
GL_PERFQUERY_COUNTER_NAME_LENGTH_MAX_INTEL = 0x94FE
GL_PERFQUERY_COUNTER_DESC_LENGTH_MAX_INTEL = 0x94FF

# the spec's implementation-dependent minimums, where glGetIntegerv does not answer
NAME_LENGTH, DESCRIPTION_LENGTH = 256, 1024

_DATA_TYPES = {  # counter data type -> numeric type (whose `code` is the data's format)
    GL_PERFQUERY_COUNTER_DATA_UINT32_INTEL: NumType.UINT,
    GL_PERFQUERY_COUNTER_DATA_UINT64_INTEL: NumType.UINT64,
    GL_PERFQUERY_COUNTER_DATA_FLOAT_INTEL: NumType.FLOAT,
    GL_PERFQUERY_COUNTER_DATA_DOUBLE_INTEL: NumType.DOUBLE,
    GL_PERFQUERY_COUNTER_DATA_BOOL32_INTEL: NumType.BOOL,
}
_KINDS = {  # counter type -> kind, as glretrace maps them
    GL_PERFQUERY_COUNTER_EVENT_INTEL: Kind.NUM,
    GL_PERFQUERY_COUNTER_DURATION_NORM_INTEL: Kind.DURATION,
    GL_PERFQUERY_COUNTER_DURATION_RAW_INTEL: Kind.DURATION,
    GL_PERFQUERY_COUNTER_THROUGHPUT_INTEL: Kind.GENERIC,
    GL_PERFQUERY_COUNTER_RAW_INTEL: Kind.GENERIC,
    GL_PERFQUERY_COUNTER_TIMESTAMP_INTEL: Kind.TIMESTAMP,
}
_AVERAGED = (GL_PERFQUERY_COUNTER_DURATION_NORM_INTEL, GL_PERFQUERY_COUNTER_THROUGHPUT_INTEL)


class _IntelGL:
    """The extension's entry points, typed as in the Khronos registry (gl.xml)."""

    def __init__(self, dispatch) -> None:
        u, i, p, s = ctypes.c_uint, ctypes.c_int, ctypes.POINTER, ctypes.c_char_p
        raw = dispatch.raw
        self.GetFirstPerfQueryIdINTEL = raw("glGetFirstPerfQueryIdINTEL", None, p(u))
        self.GetNextPerfQueryIdINTEL = raw("glGetNextPerfQueryIdINTEL", None, u, p(u))
        self.GetPerfQueryInfoINTEL = raw(
            "glGetPerfQueryInfoINTEL", None, u, u, s, p(u), p(u), p(u), p(u)
        )
        self.GetPerfCounterInfoINTEL = raw(
            "glGetPerfCounterInfoINTEL",
            None,
            *(u, u, u, s, u, s, p(u), p(u), p(u), p(u), p(ctypes.c_uint64)),
        )
        self.CreatePerfQueryINTEL = raw("glCreatePerfQueryINTEL", None, u, p(u))
        self.DeletePerfQueryINTEL = raw("glDeletePerfQueryINTEL", None, u)
        self.BeginPerfQueryINTEL = raw("glBeginPerfQueryINTEL", None, u)
        self.EndPerfQueryINTEL = raw("glEndPerfQueryINTEL", None, u)
        self.GetPerfQueryDataINTEL = raw(
            "glGetPerfQueryDataINTEL", None, u, u, i, ctypes.c_void_p, p(u)
        )
        self.GetIntegerv = raw("glGetIntegerv", None, u, p(i))
        self.GetError = raw("glGetError", u)
        self.Flush = raw("glFlush", None)

    def limit(self, pname: int, default: int) -> int:
        """A maximum string length (with its NUL), or the spec's value if the driver has none."""
        value = ctypes.c_int(0)
        self.GetIntegerv(pname, ctypes.byref(value))
        return value.value if value.value > 0 else default

    def create(self, query: int) -> int:
        """A new handle of `query`, 0 when the driver refuses (the spec then writes 0)."""
        handle = ctypes.c_uint(0)
        self.CreatePerfQueryINTEL(query, ctypes.byref(handle))
        return handle.value


class _Handles:
    """Handles of one query on one context, with the layout of the counters a pass reads."""

    def __init__(
        self, gl: _IntelGL, query: int, size: int, layout: list[tuple[Metric, int, struct.Struct]]
    ) -> None:
        self.gl = gl
        self.query = query
        self.size = size
        self.layout = [(m, offset, fmt, offset + fmt.size) for m, offset, fmt in layout]
        self.buffer = ctypes.create_string_buffer(size)
        self.every: list[int] = []
        self.free: list[int] = []

    def take(self) -> int | None:
        if self.free:
            return self.free.pop()
        handle = self.gl.create(self.query)
        if not handle:  # GL_OUT_OF_MEMORY: no more instances
            clear_errors(self.gl.GetError)
            return None
        self.every.append(handle)
        return handle

    def begin(self, handle: int) -> None:
        self.gl.BeginPerfQueryINTEL(handle)

    def end(self, handle: int) -> None:
        self.gl.EndPerfQueryINTEL(handle)

    def submit(self, wait: bool) -> None:
        if not wait:  # GL_PERFQUERY_WAIT_INTEL submits the work itself
            self.gl.Flush()

    def result(self, handle: int, wait: bool) -> Values | None:
        written = ctypes.c_uint(0)
        flags = GL_PERFQUERY_WAIT_INTEL if wait else GL_PERFQUERY_DONOT_FLUSH_INTEL
        self.gl.GetPerfQueryDataINTEL(handle, flags, self.size, self.buffer, ctypes.byref(written))
        if not written.value:
            return None
        buffer, size = self.buffer, written.value
        return {m: fmt.unpack_from(buffer, at)[0] for m, at, fmt, end in self.layout if end <= size}

    def recycle(self, handle: int) -> None:
        self.free.append(handle)

    def delete(self) -> None:
        for handle in self.every:
            self.gl.DeletePerfQueryINTEL(handle)


class IntelPerfQueryBackend(CounterSessionBackend):
    """GL_INTEL_performance_query counters per frame and per draw call."""

    name = NAME
    extension = NAME
    session_kind = "query handle"

    def __init__(self, view: ReplayView) -> None:
        super().__init__(view)
        self._gl: _IntelGL | None = None
        self._sizes: dict[int, int] = {}  # query id -> result size in bytes
        self._counters_at: dict[Metric, tuple[int, struct.Struct, int]] = {}  # offset, format, type
        self._usable: dict[int, tuple[bool, str]] = {}  # per query id

    def _functions(self) -> _IntelGL:
        if self._gl is None:
            self._gl = _IntelGL(self.view.dispatch)
        return self._gl

    def _enumerate(self) -> Iterable[Metric]:
        gl = self._functions()
        name_length = gl.limit(GL_PERFQUERY_QUERY_NAME_LENGTH_MAX_INTEL, NAME_LENGTH)
        counter_length = gl.limit(GL_PERFQUERY_COUNTER_NAME_LENGTH_MAX_INTEL, NAME_LENGTH)
        desc_length = gl.limit(GL_PERFQUERY_COUNTER_DESC_LENGTH_MAX_INTEL, DESCRIPTION_LENGTH)
        clear_errors(gl.GetError)  # limits the driver does not know; no queries at all
        query = ctypes.c_uint(0)
        gl.GetFirstPerfQueryIdINTEL(ctypes.byref(query))
        while query.value:
            query_id = query.value
            name = ctypes.create_string_buffer(name_length)
            size, n_counters, instances, caps = (ctypes.c_uint(0) for _ in range(4))
            gl.GetPerfQueryInfoINTEL(
                query_id,
                name_length,
                name,
                ctypes.byref(size),
                ctypes.byref(n_counters),
                ctypes.byref(instances),
                ctypes.byref(caps),
            )
            query_name = name.value.decode(errors="replace")
            self._sizes[query_id] = size.value
            for counter in range(1, n_counters.value + 1):  # counter ids start at 1
                counter_name = ctypes.create_string_buffer(counter_length)
                desc = ctypes.create_string_buffer(desc_length)
                offset, data_size, kind, data_type = (ctypes.c_uint(0) for _ in range(4))
                raw_max = ctypes.c_uint64(0)
                gl.GetPerfCounterInfoINTEL(
                    query_id,
                    counter,
                    counter_length,
                    counter_name,
                    desc_length,
                    desc,
                    ctypes.byref(offset),
                    ctypes.byref(data_size),
                    ctypes.byref(kind),
                    ctypes.byref(data_type),
                    ctypes.byref(raw_max),
                )
                num = _DATA_TYPES.get(data_type.value, NumType.UINT)
                fmt = num.code
                description = desc.value.decode(errors="replace")
                if raw_max.value:
                    description += f" (at most {raw_max.value} per second)"
                metric = Metric(
                    NAME,
                    query_id,
                    counter,
                    counter_name.value.decode(errors="replace"),
                    description,
                    num,
                    _KINDS.get(kind.value, Kind.OTHER),
                    "",
                    query_name,
                )
                self._counters_at[metric] = (offset.value, struct.Struct("<" + fmt), kind.value)
                yield metric
            gl.GetNextPerfQueryIdINTEL(query_id, ctypes.byref(query))

    def _check(self, metric: Metric) -> tuple[bool, str]:
        """Every counter of a query is usable if an instance of the query begins."""
        query = metric.group
        if query not in self._usable:
            self._usable[query] = self._try_query(query, metric.group_name)
        return self._usable[query]

    def _try_query(self, query: int, query_name: str) -> tuple[bool, str]:
        gl = self._functions()
        clear_errors(gl.GetError)
        handle = gl.create(query)
        if not handle:
            error = error_name(gl.GetError())
            return False, f'glCreatePerfQueryINTEL gives no "{query_name}" query ({error})'
        gl.BeginPerfQueryINTEL(handle)
        error = gl.GetError()
        if error == GL_NO_ERROR:
            gl.EndPerfQueryINTEL(handle)
        gl.DeletePerfQueryINTEL(handle)
        clear_errors(gl.GetError)
        if error == GL_NO_ERROR:
            return True, ""
        return False, (
            f'glBeginPerfQueryINTEL fails for "{query_name}" ({error_name(error)}); on Linux '
            "the kernel's i915 perf interface may need sysctl dev.i915.perf_stream_paranoid=0"
        )

    def _pack(self, metrics: list[Metric]) -> list[tuple[Metric, ...]]:
        """One pass per query: its counters are measured together or not at all."""
        per_query: dict[int, list[Metric]] = {}
        for metric in metrics:
            per_query.setdefault(metric.group, []).append(metric)
        return [tuple(chosen) for chosen in per_query.values()]

    def _describe(self, metrics: tuple[Metric, ...]) -> str:
        return f'query "{metrics[0].group_name}": {super()._describe(metrics)}'

    def _new_pool(self, metrics: tuple[Metric, ...]) -> SessionPool:
        query = metrics[0].group
        layout = [(m, *self._counters_at[m][:2]) for m in metrics]
        return _Handles(self._functions(), query, self._sizes[query], layout)

    def _merge(self, metric: Metric) -> Merge:
        kind = self._counters_at[metric][2]
        if kind == GL_PERFQUERY_COUNTER_TIMESTAMP_INTEL:
            return first
        if metric.num_type is NumType.BOOL:
            return any_true
        return weighted_mean if kind in _AVERAGED else total
