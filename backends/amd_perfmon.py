"""The ``GL_AMD_performance_monitor`` backend: the driver's own counters, per frame or draw call.

The extension (exposed by AMD's own drivers, and by the Mesa Gallium drivers
that publish driver-query groups -- radeonsi, r600, nouveau, iris, crocus,
freedreno, panfrost, vc4 among them -- but not by llvmpipe) lists groups of
counters, each an unsigned int, unsigned int64, float or percentage. A
*monitor* object gets a selection of counters and brackets work with
glBeginPerfMonitorAMD/glEndPerfMonitorAMD; its result is a buffer of (GLuint
group, GLuint counter, value) records, in any order, the value as wide as the
counter's type.

Metrics are the driver's counters, ``[group, counter]`` as glretrace numbers
them. A counter is usable when a monitor selecting it alone can begin (the
spec's only way to say a selection cannot be sampled is GL_INVALID_OPERATION
from glBeginPerfMonitorAMD). Monitors cannot nest, so each pass measures one
boundary, frames first, then draw calls (as glretrace); the CALL boundary is
not offered. Passes are packed first-fit: each counter goes into the first
pass of its boundary whose monitor still begins with it added, so a pass holds
as many counters as the driver accepts together.

Reading results is where this differs from glretrace, which reads each draw's
monitor right away with glFlush and a busy loop on
GL_PERFMON_RESULT_AVAILABLE_AMD: a full CPU-GPU synchronisation per draw.
Here every event gets its own monitor from a per-context pool; ended monitors
wait in a FIFO and are read oldest first, without blocking, after a glFlush at
every frame end and every `FLUSH_EVERY` events; only when `WINDOW` results are
outstanding, or before the context changes, does one glFinish make all of them
available. A monitor goes back to the pool once read. The whole mechanism
(`counter_sessions.CounterSessionBackend`) is shared with the
``GL_INTEL_performance_query`` backend, whose query handles work the same way.

Monitors belong to a context, so before a context switch the in-flight event's
monitor is ended and everything outstanding is read. The event stays open: on
the next context a new monitor measures the rest, and its row gets the
segments combined, so no row is dropped as glretrace drops it. Counts add up;
percentages are averaged, weighted by the wall-clock time the event spent on
each context (the one clock all contexts share: a context that only swapped
buffers weighs little). On a context without the extension the rest of the
event cannot be measured and its cells read '-' (with one warning).
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from retrace.backends.counter_sessions import (
    GL_NO_ERROR,
    CounterSessionBackend,
    Merge,
    SessionPool,
    Values,
    clear_errors,
    error_name,
    total,
    weighted_mean,
)
from retrace.vocabulary import Kind, Metric, NumType

if TYPE_CHECKING:
    from retrace.replay.view import ReplayView

NAME = "GL_AMD_performance_monitor"

GL_UNSIGNED_INT = 0x1405
GL_FLOAT = 0x1406
GL_COUNTER_TYPE_AMD = 0x8BC0
GL_COUNTER_RANGE_AMD = 0x8BC1
GL_UNSIGNED_INT64_AMD = 0x8BC2
GL_PERCENTAGE_AMD = 0x8BC3
GL_PERFMON_RESULT_AVAILABLE_AMD = 0x8BC4
GL_PERFMON_RESULT_AMD = 0x8BC6

_TYPES = {  # GL type -> (numeric type, kind, unit, name)
    GL_UNSIGNED_INT: (NumType.UINT, Kind.GENERIC, "", "unsigned int"),
    GL_UNSIGNED_INT64_AMD: (NumType.UINT64, Kind.GENERIC, "", "unsigned int64"),
    GL_FLOAT: (NumType.FLOAT, Kind.GENERIC, "", "float"),
    GL_PERCENTAGE_AMD: (NumType.FLOAT, Kind.PERCENT, "%", "percentage"),
}
_PAIR = struct.Struct("<II")
_MONITOR_BATCH = 16


class _AmdGL:
    """The extension's entry points, typed as in the Khronos registry (gl.xml)."""

    def __init__(self, dispatch) -> None:
        u, i, p = ctypes.c_uint, ctypes.c_int, ctypes.POINTER
        raw = dispatch.raw
        self.GetPerfMonitorGroupsAMD = raw("glGetPerfMonitorGroupsAMD", None, p(i), i, p(u))
        self.GetPerfMonitorCountersAMD = raw(
            "glGetPerfMonitorCountersAMD", None, u, p(i), p(i), i, p(u)
        )
        self.GetPerfMonitorGroupStringAMD = raw(
            "glGetPerfMonitorGroupStringAMD", None, u, i, p(i), ctypes.c_char_p
        )
        self.GetPerfMonitorCounterStringAMD = raw(
            "glGetPerfMonitorCounterStringAMD", None, u, u, i, p(i), ctypes.c_char_p
        )
        self.GetPerfMonitorCounterInfoAMD = raw(
            "glGetPerfMonitorCounterInfoAMD", None, u, u, u, ctypes.c_void_p
        )
        self.GenPerfMonitorsAMD = raw("glGenPerfMonitorsAMD", None, i, p(u))
        self.DeletePerfMonitorsAMD = raw("glDeletePerfMonitorsAMD", None, i, p(u))
        self.SelectPerfMonitorCountersAMD = raw(
            "glSelectPerfMonitorCountersAMD", None, u, ctypes.c_ubyte, u, i, p(u)
        )
        self.BeginPerfMonitorAMD = raw("glBeginPerfMonitorAMD", None, u)
        self.EndPerfMonitorAMD = raw("glEndPerfMonitorAMD", None, u)
        self.GetPerfMonitorCounterDataAMD = raw(
            "glGetPerfMonitorCounterDataAMD", None, u, u, i, ctypes.c_void_p, p(i)
        )
        self.GetError = raw("glGetError", u)
        self.Flush = raw("glFlush", None)
        self.Finish = raw("glFinish", None)

    def string(self, get: Callable[..., None], *ids: int) -> str:
        """A group or counter name: ask its length, then fetch it."""
        length = ctypes.c_int(0)
        get(*ids, 0, ctypes.byref(length), None)
        buffer = ctypes.create_string_buffer(length.value + 1)
        get(*ids, len(buffer), None, buffer)
        return buffer.value.decode(errors="replace")

    def select(self, monitor: int, metrics: Iterable[Metric]) -> None:
        groups: dict[int, list[int]] = {}
        for metric in metrics:
            groups.setdefault(metric.group, []).append(metric.id)
        for group, ids in groups.items():
            self.SelectPerfMonitorCountersAMD(
                monitor, 1, group, len(ids), (ctypes.c_uint * len(ids))(*ids)
            )

    def trial(self, metrics: Sequence[Metric]) -> tuple[str, int]:
        """Select `metrics` on a scratch monitor and begin it: (the call that failed, its error)."""
        clear_errors(self.GetError)
        monitor = ctypes.c_uint(0)
        self.GenPerfMonitorsAMD(1, ctypes.byref(monitor))
        self.select(monitor.value, metrics)
        failed, error = "glSelectPerfMonitorCountersAMD", self.GetError()
        if error == GL_NO_ERROR:
            self.BeginPerfMonitorAMD(monitor.value)
            failed, error = "glBeginPerfMonitorAMD", self.GetError()
            if error == GL_NO_ERROR:
                self.EndPerfMonitorAMD(monitor.value)
        self.DeletePerfMonitorsAMD(1, ctypes.byref(monitor))
        clear_errors(self.GetError)
        return failed, error


class _Monitors:
    """Monitors of one context, all selecting one pass's counters."""

    def __init__(
        self,
        gl: _AmdGL,
        metrics: tuple[Metric, ...],
        parse: Callable[[ctypes.Array, int], Values],
        size: int,
    ) -> None:
        self.gl = gl
        self.metrics = metrics
        self.parse = parse
        self.size = size
        self.buffer = ctypes.create_string_buffer(size)
        self.every: list[int] = []
        self.free: list[int] = []

    def take(self) -> int:
        if not self.free:
            # selecting resets a monitor's results, so it is done once, when it is made
            names = (ctypes.c_uint * _MONITOR_BATCH)()
            self.gl.GenPerfMonitorsAMD(_MONITOR_BATCH, names)
            for monitor in names:
                self.gl.select(monitor, self.metrics)
            self.every += names
            self.free += reversed(names)
        return self.free.pop()

    def begin(self, monitor: int) -> None:
        self.gl.BeginPerfMonitorAMD(monitor)

    def end(self, monitor: int) -> None:
        self.gl.EndPerfMonitorAMD(monitor)

    def submit(self, wait: bool) -> None:
        # the spec has no blocking read: only glFinish guarantees the results are there
        (self.gl.Finish if wait else self.gl.Flush)()

    def result(self, monitor: int, wait: bool) -> Values | None:
        available, written = ctypes.c_uint(0), ctypes.c_int(0)
        read = self.gl.GetPerfMonitorCounterDataAMD
        read(monitor, GL_PERFMON_RESULT_AVAILABLE_AMD, 4, ctypes.byref(available), None)
        if not available.value:
            return None
        read(monitor, GL_PERFMON_RESULT_AMD, self.size, self.buffer, ctypes.byref(written))
        return self.parse(self.buffer, written.value)

    def recycle(self, monitor: int) -> None:
        self.free.append(monitor)

    def delete(self) -> None:
        if self.every:
            count = len(self.every)
            self.gl.DeletePerfMonitorsAMD(count, (ctypes.c_uint * count)(*self.every))


class AmdPerfMonitorBackend(CounterSessionBackend):
    """GL_AMD_performance_monitor counters per frame and per draw call."""

    name = NAME
    extension = NAME
    session_kind = "monitor"

    def __init__(self, view: ReplayView) -> None:
        super().__init__(view)
        self._gl: _AmdGL | None = None
        self._types: dict[tuple[int, int], tuple[Metric, struct.Struct]] = {}

    def _functions(self) -> _AmdGL:
        if self._gl is None:
            self._gl = _AmdGL(self.view.dispatch)
        return self._gl

    def _enumerate(self) -> Iterable[Metric]:
        gl = self._functions()
        n_groups = ctypes.c_int(0)
        gl.GetPerfMonitorGroupsAMD(ctypes.byref(n_groups), 0, None)
        groups = (ctypes.c_uint * n_groups.value)()
        gl.GetPerfMonitorGroupsAMD(None, n_groups.value, groups)
        for group in groups:
            group_name = gl.string(gl.GetPerfMonitorGroupStringAMD, group)
            n_counters, most = ctypes.c_int(0), ctypes.c_int(0)
            gl.GetPerfMonitorCountersAMD(
                group, ctypes.byref(n_counters), ctypes.byref(most), 0, None
            )
            counters = (ctypes.c_uint * n_counters.value)()
            gl.GetPerfMonitorCountersAMD(group, None, None, n_counters.value, counters)
            for counter in counters:
                gl_type = ctypes.c_uint(0)
                gl.GetPerfMonitorCounterInfoAMD(
                    group, counter, GL_COUNTER_TYPE_AMD, ctypes.byref(gl_type)
                )
                num, kind, unit, type_name = _TYPES.get(gl_type.value, _TYPES[GL_UNSIGNED_INT])
                fmt = num.code
                bounds = ctypes.create_string_buffer(16)
                gl.GetPerfMonitorCounterInfoAMD(group, counter, GL_COUNTER_RANGE_AMD, bounds)
                low, high = struct.unpack_from(f"<2{fmt}", bounds)
                metric = Metric(
                    NAME,
                    group,
                    counter,
                    gl.string(gl.GetPerfMonitorCounterStringAMD, group, counter),
                    f"{group_name} counter, {type_name} from {low:g} to {high:g} "
                    f"(at most {most.value} of the group in one monitor)",
                    num,
                    kind,
                    unit,
                    group_name,
                )
                self._types[group, counter] = (metric, struct.Struct("<" + fmt))
                yield metric

    def _check(self, metric: Metric) -> tuple[bool, str]:
        failed, error = self._functions().trial([metric])
        if error == GL_NO_ERROR:
            return True, ""
        return False, f"{failed} refuses it on its own ({error_name(error)})"

    def _pack(self, metrics: list[Metric]) -> list[tuple[Metric, ...]]:
        """First fit: each counter joins the first pass whose monitor still begins with it."""
        gl = self._functions()
        passes: list[list[Metric]] = []
        for metric in metrics:
            for chosen in passes:
                if gl.trial([*chosen, metric])[1] == GL_NO_ERROR:
                    chosen.append(metric)
                    break
            else:
                passes.append([metric])  # alone it begins: enable() checked
        return [tuple(p) for p in passes]

    def _describe(self, metrics: tuple[Metric, ...]) -> str:
        return f"{super()._describe(metrics)} (what one monitor takes together)"

    def _new_pool(self, metrics: tuple[Metric, ...]) -> SessionPool:
        size = sum(_PAIR.size + self._types[m.group, m.id][1].size for m in metrics)
        return _Monitors(self._functions(), metrics, self._parse, size)

    def _parse(self, buffer: ctypes.Array, size: int) -> Values:
        """(group, counter, value) records, in whatever order the driver writes them."""
        values: Values = {}
        offset = 0
        while offset + _PAIR.size <= size:
            known = self._types.get(_PAIR.unpack_from(buffer, offset))
            if known is None:
                break  # a counter this backend never listed: its width, so the rest, is unknown
            metric, fmt = known
            offset += _PAIR.size
            if offset + fmt.size > size:
                break
            values[metric] = fmt.unpack_from(buffer, offset)[0]
            offset += fmt.size
        return values

    def _merge(self, metric: Metric) -> Merge:
        return weighted_mean if metric.kind is Kind.PERCENT else total
