"""A model of GL_AMD_performance_monitor (Khronos extension #360), for the backend's tests.

Implemented as the spec says:
* groups and counters with ids that are neither contiguous nor from 0 (the
  spec only says they are unique unsigned ints), names, the four counter types
  and COUNTER_RANGE_AMD in the type's format; a per-group maxActiveCounters;
* GL's string queries (length without the NUL, bufSize with it, the needed
  length for bufSize 0);
* monitors created with every counter disabled; selecting counters invalidates
  a monitor's results; begin/end cannot nest; begin fails with
  GL_INVALID_OPERATION when the selection cannot be sampled: more counters of a
  group than its maxActiveCounters, or more in all than `max_active`, this
  model's own limit (what makes passes necessary);
* results: PERFMON_RESULT_AVAILABLE_AMD becomes 1 only when the GPU model has
  completed the session (see `driver.Timeline`); PERFMON_RESULT_AMD is
  (GLuint group, GLuint counter, value) records with 4-byte values for
  UNSIGNED_INT, FLOAT and PERCENTAGE_AMD and 8-byte ones for UNSIGNED_INT64_AMD,
  written up to dataSize bytes, with bytesWritten; the records come in
  descending (group, counter) order, which the spec allows, so that a reader
  assuming its selection order fails;
* the errors of the spec's Errors section, GL_INVALID_OPERATION for a NULL
  data pointer, and GL_INVALID_ENUM for an unknown pname.

Where the spec is silent this model does what Mesa does: GL_INVALID_VALUE for
a counter id that is not in the group passed to SelectPerfMonitorCountersAMD
and for an unknown monitor passed to Begin/End/GetPerfMonitorCounterDataAMD;
PERFMON_RESULT_SIZE_AMD and the result read 0 until the result is available
(Mesa notes AMD's driver does the same); deleting an active monitor ends it.
Reading a result that is not available yet is counted in `premature_reads`:
a backend that does it would get zeros on real drivers.

Not modelled: the spec's remarks on sampling frequency distorting results,
and the counters' meaning, which is the model's own: computed from the work
bracketed (`driver.Measured`), so tests can know every value exactly.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models.driver import (
    GL_INVALID_ENUM,
    GL_INVALID_OPERATION,
    GL_INVALID_VALUE,
    ContextState,
    ExtensionModel,
    Measured,
    Session,
    Work,
    write_string,
)

GL_UNSIGNED_INT = 0x1405
GL_FLOAT = 0x1406
GL_COUNTER_TYPE_AMD = 0x8BC0
GL_COUNTER_RANGE_AMD = 0x8BC1
GL_UNSIGNED_INT64_AMD = 0x8BC2
GL_PERCENTAGE_AMD = 0x8BC3
GL_PERFMON_RESULT_AVAILABLE_AMD = 0x8BC4
GL_PERFMON_RESULT_SIZE_AMD = 0x8BC5
GL_PERFMON_RESULT_AMD = 0x8BC6

FLT_MAX = 3.4028234663852886e38
FORMATS = {GL_UNSIGNED_INT: "I", GL_FLOAT: "f", GL_UNSIGNED_INT64_AMD: "Q", GL_PERCENTAGE_AMD: "f"}
RANGES = {
    GL_UNSIGNED_INT: (0, 2**32 - 1),
    GL_FLOAT: (0.0, FLT_MAX),
    GL_UNSIGNED_INT64_AMD: (0, 2**64 - 1),
    GL_PERCENTAGE_AMD: (0.0, 100.0),
}


def per_primitive(m: Measured) -> float:
    return m.samples / m.primitives if m.primitives else 0.0


def sample_share(m: Measured) -> float:
    total = m.samples + m.primitives
    return 100.0 * m.samples / total if total else 0.0


@dataclass(frozen=True)
class Counter:
    id: int
    name: str
    type: int
    measure: Callable[[Measured], float | int]


@dataclass(frozen=True)
class Group:
    id: int
    name: str
    max_active: int
    counters: tuple[Counter, ...]

    def counter(self, counter_id: int) -> Counter | None:
        return next((c for c in self.counters if c.id == counter_id), None)


GROUPS = (
    Group(
        1,
        "Pipeline",
        2,
        (
            Counter(0, "Samples Passed", GL_UNSIGNED_INT64_AMD, lambda m: m.samples),
            Counter(1, "Primitives Generated", GL_UNSIGNED_INT, lambda m: m.primitives),
            Counter(2, "Fragments Per Primitive", GL_FLOAT, per_primitive),
        ),
    ),
    Group(
        4,
        "Model",
        3,
        (
            Counter(10, "Session Serial", GL_UNSIGNED_INT, lambda m: m.serial),
            Counter(11, "Sample Share", GL_PERCENTAGE_AMD, sample_share),
        ),
    ),
)


@dataclass(eq=False)
class Monitor:
    selected: dict[int, set[int]] = field(default_factory=dict)  # group -> counter ids
    session: Session | None = None  # the last one begun: its result once it ended
    sampled: tuple[tuple[int, int], ...] = ()  # what that session samples


class AmdState(ContextState):
    def __init__(self, work: Work, latency: int) -> None:
        super().__init__(work, latency)
        self.monitors: dict[int, Monitor] = {}
        self.next_name = 1
        self.active: Monitor | None = None


P, UI, SI = ctypes.POINTER, ctypes.c_uint, ctypes.c_int
F = ctypes.CFUNCTYPE


class AmdPerfMonitorModel(ExtensionModel):
    """GL_AMD_performance_monitor as the spec describes it, counting the work it brackets."""

    extension = "GL_AMD_performance_monitor"
    PROTOTYPES = {
        "glGetPerfMonitorGroupsAMD": F(None, P(SI), SI, P(UI)),
        "glGetPerfMonitorCountersAMD": F(None, UI, P(SI), P(SI), SI, P(UI)),
        "glGetPerfMonitorGroupStringAMD": F(None, UI, SI, P(SI), ctypes.c_void_p),
        "glGetPerfMonitorCounterStringAMD": F(None, UI, UI, SI, P(SI), ctypes.c_void_p),
        "glGetPerfMonitorCounterInfoAMD": F(None, UI, UI, UI, ctypes.c_void_p),
        "glGenPerfMonitorsAMD": F(None, SI, P(UI)),
        "glDeletePerfMonitorsAMD": F(None, SI, P(UI)),
        "glSelectPerfMonitorCountersAMD": F(None, UI, ctypes.c_ubyte, UI, SI, P(UI)),
        "glBeginPerfMonitorAMD": F(None, UI),
        "glEndPerfMonitorAMD": F(None, UI),
        "glGetPerfMonitorCounterDataAMD": F(None, UI, UI, SI, P(UI), P(SI)),
    }

    def __init__(
        self, max_active: int = 8, latency: int = 2, work: Callable[[], Work] | None = None
    ) -> None:
        super().__init__(latency, work, AmdState)
        self.max_active = max_active
        self.premature_reads = 0

    # --- helpers -------------------------------------------------------------------------------

    def _group(self, group: int) -> Group | None:
        return self.named(next((g for g in GROUPS if g.id == group), None))

    def _counter(self, group: int, counter: int) -> Counter | None:
        found = self._group(group)
        if found is None:
            return None
        return self.named(found.counter(counter))

    def _monitor(self, name: int) -> Monitor | None:
        return self.named(self.state().monitors.get(name))

    def _result(self, monitor: Monitor) -> bytes:
        state: AmdState = self.state()
        assert monitor.session is not None
        measured = state.sweep.measure(monitor.session)
        records = b""
        for group_id, counter_id in sorted(monitor.sampled, reverse=True):
            group = next(g for g in GROUPS if g.id == group_id)
            counter = group.counter(counter_id)
            assert counter is not None
            value = counter.measure(measured)
            if counter.type == GL_UNSIGNED_INT:
                value %= 2**32
            records += struct.pack("<II" + FORMATS[counter.type], group_id, counter_id, value)
        return records

    # --- the entry points ------------------------------------------------------------------------

    def glGetPerfMonitorGroupsAMD(self, num_groups: Any, size: int, groups: Any) -> None:
        self.state()
        if num_groups:
            num_groups[0] = len(GROUPS)
        if size > 0 and groups:
            for i, group in enumerate(GROUPS[:size]):
                groups[i] = group.id

    def glGetPerfMonitorCountersAMD(
        self, group: int, num_counters: Any, max_active: Any, size: int, counters: Any
    ) -> None:
        found = self._group(group)
        if found is None:
            return
        if num_counters:
            num_counters[0] = len(found.counters)
        if max_active:
            max_active[0] = found.max_active
        if size > 0 and counters:
            for i, counter in enumerate(found.counters[:size]):
                counters[i] = counter.id

    def glGetPerfMonitorGroupStringAMD(
        self, group: int, size: int, length: Any, out: int | None
    ) -> None:
        found = self._group(group)
        if found is not None:
            write_string(found.name, size, length, out)

    def glGetPerfMonitorCounterStringAMD(
        self, group: int, counter: int, size: int, length: Any, out: int | None
    ) -> None:
        found = self._counter(group, counter)
        if found is not None:
            write_string(found.name, size, length, out)

    def glGetPerfMonitorCounterInfoAMD(
        self, group: int, counter: int, pname: int, data: int | None
    ) -> None:
        found = self._counter(group, counter)
        if found is None:
            return
        if pname == GL_COUNTER_TYPE_AMD:
            packed = struct.pack("<I", found.type)
        elif pname == GL_COUNTER_RANGE_AMD:
            packed = struct.pack("<2" + FORMATS[found.type], *RANGES[found.type])
        else:
            self.error(GL_INVALID_ENUM)
            return
        ctypes.memmove(ctypes.c_void_p(data), packed, len(packed))

    def glGenPerfMonitorsAMD(self, n: int, monitors: Any) -> None:
        state: AmdState = self.state()
        if n < 0:
            self.error(GL_INVALID_VALUE)
            return
        for i in range(n):
            state.monitors[state.next_name] = Monitor()
            monitors[i] = state.next_name
            state.next_name += 1

    def glDeletePerfMonitorsAMD(self, n: int, monitors: Any) -> None:
        state: AmdState = self.state()
        if n < 0:
            self.error(GL_INVALID_VALUE)
            return
        for i in range(n):
            monitor = state.monitors.pop(monitors[i], None)
            if monitor is None:
                self.error(GL_INVALID_VALUE)
                continue
            self.deleted(monitors[i])
            if monitor is state.active:
                assert monitor.session is not None
                state.end(monitor.session)
                state.active = None

    def glSelectPerfMonitorCountersAMD(
        self, name: int, enable: int, group: int, n: int, counters: Any
    ) -> None:
        monitor = self._monitor(name)
        found = self._group(group) if monitor is not None else None
        if monitor is None or found is None:
            return
        if n < 0:
            self.error(GL_INVALID_VALUE)
            return
        ids = {counters[i] for i in range(n)}
        if any(found.counter(c) is None for c in ids):
            self.error(GL_INVALID_VALUE)
            return
        monitor.session = None  # "any outstanding results ... become invalidated"
        chosen = monitor.selected.setdefault(group, set())
        if enable:
            chosen |= ids
        else:
            chosen -= ids

    def glBeginPerfMonitorAMD(self, name: int) -> None:
        state: AmdState = self.state()
        monitor = self._monitor(name)
        if monitor is None:
            return
        if state.active is not None:  # "BeginPerfMonitor calls cannot be nested"
            self.error(GL_INVALID_OPERATION)
            return
        groups = {g.id: g for g in GROUPS}
        sampled = tuple((g, c) for g, chosen in monitor.selected.items() for c in sorted(chosen))
        too_many = any(len(c) > groups[g].max_active for g, c in monitor.selected.items())
        if too_many or len(sampled) > self.max_active:  # "unable to begin monitoring"
            self.error(GL_INVALID_OPERATION)
            return
        monitor.session = Session(state.timeline.tick)
        monitor.sampled = sampled
        state.active = monitor
        state.begin(monitor.session)

    def glEndPerfMonitorAMD(self, name: int) -> None:
        state: AmdState = self.state()
        monitor = self._monitor(name)
        if monitor is None:
            return
        if state.active is not monitor:
            self.error(GL_INVALID_OPERATION)
            return
        assert monitor.session is not None
        state.end(monitor.session)
        state.active = None

    def glGetPerfMonitorCounterDataAMD(
        self, name: int, pname: int, size: int, data: Any, written: Any
    ) -> None:
        state: AmdState = self.state()
        monitor = self._monitor(name)
        if monitor is None:
            return
        if not data:
            self.error(GL_INVALID_OPERATION)
            return
        session = monitor.session
        ready = session is not None and state.timeline.complete(session)
        if pname == GL_PERFMON_RESULT_AVAILABLE_AMD:
            out = struct.pack("<I", int(ready))
        elif pname == GL_PERFMON_RESULT_SIZE_AMD:
            out = struct.pack("<I", len(self._result(monitor)) if ready else 0)
        elif pname == GL_PERFMON_RESULT_AMD:
            if not ready:
                self.premature_reads += 1
            out = self._result(monitor) if ready else b""
            if ready:
                self.delivered(name)
        else:
            self.error(GL_INVALID_ENUM)
            return
        out = out[: max(size, 0)]
        ctypes.memmove(ctypes.cast(data, ctypes.c_void_p), out, len(out))
        if written:
            written[0] = len(out)
