"""A model of GL_INTEL_performance_query (Khronos extension #443), for the backend's tests.

Implemented as the spec says:
* query kinds walked with GetFirstPerfQueryIdINTEL/GetNextPerfQueryIdINTEL (ids
  are not contiguous here: the spec promises only non-zero ids and a 0 after
  the last), found by name with GetPerfQueryIdByNameINTEL, described by
  GetPerfQueryInfoINTEL (name, result size, counter count, instances, caps:
  GL_PERFQUERY_SINGLE_CONTEXT_INTEL);
* counters numbered from 1, described by GetPerfCounterInfoINTEL: name,
  description, byte offset and size in the result, type (event, normalised and
  raw duration, throughput, raw, timestamp), data type (uint32, uint64, float,
  double, bool32) and raw maximum; every type and data type appears;
* instances: CreatePerfQueryINTEL fails with GL_OUT_OF_MEMORY and a 0 handle
  beyond `max_instances` per query kind; begin/end; several instances of one
  kind may be active together (spec issue 4), but beginning an instance while
  one of another kind is active is GL_INVALID_OPERATION;
* GetPerfQueryDataINTEL: with GL_PERFQUERY_DONOT_FLUSH_INTEL it only checks,
  with GL_PERFQUERY_FLUSH_INTEL it also submits the pending work, with
  GL_PERFQUERY_WAIT_INTEL it submits and waits (see `driver.Timeline`); data
  not ready means bytesWritten 0; ready data is the query's structure, written
  up to dataSize bytes;
* the errors the spec names: GL_INVALID_VALUE for NULL pointers, unknown query
  ids, counters, names and handles, GL_INVALID_OPERATION for GetFirst on a
  platform without queries, nesting kinds, and ending a query not started.

Where the spec is silent the model does what Mesa does: GL_INVALID_VALUE for a
NULL handle pointer to Create and for unknown handles to End and
GetPerfQueryDataINTEL; GL_INVALID_OPERATION for beginning an active handle and
for reading one that is active or was never begun; GetPerfQueryInfoINTEL's
noInstances is the number of instances created (the spec's text contradicts
itself); deleting an active handle ends it; bytesWritten is zeroed first.
Unknown read flags behave as GL_PERFQUERY_DONOT_FLUSH_INTEL.

Not modelled: global-context queries, and the meaning of real counters; the
model's are computed from the work bracketed (`driver.Measured`).
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from models.driver import (
    GL_INVALID_OPERATION,
    GL_INVALID_VALUE,
    GL_OUT_OF_MEMORY,
    ContextState,
    ExtensionModel,
    Measured,
    Session,
    Work,
    write_string,
)

GL_PERFQUERY_SINGLE_CONTEXT_INTEL = 0x0000
GL_PERFQUERY_DONOT_FLUSH_INTEL = 0x83F9
GL_PERFQUERY_FLUSH_INTEL = 0x83FA
GL_PERFQUERY_WAIT_INTEL = 0x83FB
EVENT, DURATION_NORM, DURATION_RAW, THROUGHPUT, RAW, TIMESTAMP = range(0x94F0, 0x94F6)
UINT32, UINT64, FLOAT, DOUBLE, BOOL32 = range(0x94F8, 0x94FD)
GL_PERFQUERY_QUERY_NAME_LENGTH_MAX_INTEL = 0x94FD
GL_PERFQUERY_COUNTER_NAME_LENGTH_MAX_INTEL = 0x94FE
GL_PERFQUERY_COUNTER_DESC_LENGTH_MAX_INTEL = 0x94FF

FORMATS = {UINT32: "I", UINT64: "Q", FLOAT: "f", DOUBLE: "d", BOOL32: "I"}


def per_primitive(m: Measured) -> float:
    return m.samples / m.primitives if m.primitives else 0.0


def sample_share(m: Measured) -> float:
    total = m.samples + m.primitives
    return m.samples / total if total else 0.0


@dataclass(frozen=True)
class Counter:
    name: str
    description: str
    offset: int
    data_type: int
    type: int
    raw_max: int
    measure: Callable[[Measured], float | int]

    @property
    def size(self) -> int:
        return struct.calcsize(FORMATS[self.data_type])


@dataclass(frozen=True)
class Query:
    id: int
    name: str
    size: int
    counters: tuple[Counter, ...]

    def layout(self, measured: Measured) -> bytes:
        data = bytearray(self.size)
        for counter in self.counters:
            fmt = "<" + FORMATS[counter.data_type]
            struct.pack_into(fmt, data, counter.offset, counter.measure(measured))
        return bytes(data)


QUERIES = (
    Query(
        1,
        "Model Pipeline Statistics",
        40,
        (
            Counter(
                "Samples Passed",
                "Samples that passed the depth and stencil tests",
                0, UINT64, EVENT, 0, lambda m: m.samples,
            ),
            Counter(
                "Primitives Generated",
                "Primitives that reached the rasterizer",
                8, UINT32, EVENT, 0, lambda m: m.primitives,
            ),
            Counter(
                "Fragments Per Primitive",
                "Samples passed per primitive generated",
                12, FLOAT, THROUGHPUT, 0, per_primitive,
            ),
            Counter(
                "Sample Share",
                "Samples over samples and primitives, from 0 to 1",
                16, DOUBLE, DURATION_NORM, 0, sample_share,
            ),
            Counter(
                "Split Occurred",
                "Another query began or ended while this one ran",
                24, BOOL32, RAW, 0, lambda m: int(m.intervals > 1),
            ),
            Counter(
                "Query Serial",
                "Which query of its context this was, counting ends from 1",
                32, UINT64, RAW, 0, lambda m: m.serial,
            ),
        ),
    ),
    Query(
        3,
        "Model Timing",
        16,
        (
            Counter(
                "Begin Tick",
                "The model's clock (calls into it) at glBeginPerfQueryINTEL",
                0, UINT64, TIMESTAMP, 0, lambda m: m.begin_tick,
            ),
            Counter(
                "Session Ticks",
                "Calls into the model between begin and end",
                8, UINT64, DURATION_RAW, 1_000_000, lambda m: m.end_tick - m.begin_tick,
            ),
        ),
    ),
)  # fmt: skip


@dataclass(eq=False)
class Handle:
    query: Query
    session: Session | None = None  # the last one begun: its data once it ended
    active: bool = False


class IntelState(ContextState):
    def __init__(self, work: Work, latency: int) -> None:
        super().__init__(work, latency)
        self.handles: dict[int, Handle] = {}
        self.next_handle = 1


PU, UI, SI, VP = ctypes.POINTER(ctypes.c_uint), ctypes.c_uint, ctypes.c_int, ctypes.c_void_p
F = ctypes.CFUNCTYPE


class IntelPerfQueryModel(ExtensionModel):
    """GL_INTEL_performance_query as the spec describes it, counting the work it brackets."""

    extension = "GL_INTEL_performance_query"
    PROTOTYPES = {
        "glGetFirstPerfQueryIdINTEL": F(None, PU),
        "glGetNextPerfQueryIdINTEL": F(None, UI, PU),
        "glGetPerfQueryIdByNameINTEL": F(None, ctypes.c_char_p, PU),
        "glGetPerfQueryInfoINTEL": F(None, UI, UI, VP, PU, PU, PU, PU),
        "glGetPerfCounterInfoINTEL": F(
            None, UI, UI, UI, VP, UI, VP, PU, PU, PU, PU, ctypes.POINTER(ctypes.c_uint64)
        ),
        "glCreatePerfQueryINTEL": F(None, UI, PU),
        "glDeletePerfQueryINTEL": F(None, UI),
        "glBeginPerfQueryINTEL": F(None, UI),
        "glEndPerfQueryINTEL": F(None, UI),
        "glGetPerfQueryDataINTEL": F(None, UI, UI, SI, VP, PU),
    }
    INTEGERS = {  # the spec's table of implementation-dependent state
        GL_PERFQUERY_QUERY_NAME_LENGTH_MAX_INTEL: 256,
        GL_PERFQUERY_COUNTER_NAME_LENGTH_MAX_INTEL: 256,
        GL_PERFQUERY_COUNTER_DESC_LENGTH_MAX_INTEL: 1024,
    }

    def __init__(
        self,
        max_instances: int = 64,
        latency: int = 2,
        work: Callable[[], Work] | None = None,
        queries: tuple[Query, ...] = QUERIES,
    ) -> None:
        super().__init__(latency, work, IntelState)
        self.max_instances = max_instances
        self.queries = queries

    def _query(self, query_id: int) -> Query | None:
        self.state()
        return self.named(next((q for q in self.queries if q.id == query_id), None))

    def _handle(self, handle: int) -> Handle | None:
        return self.named(self.state().handles.get(handle))

    # --- the entry points ------------------------------------------------------------------------

    def glGetFirstPerfQueryIdINTEL(self, query_id: Any) -> None:
        self.state()
        if not query_id:
            self.error(GL_INVALID_VALUE)
            return
        query_id[0] = self.queries[0].id if self.queries else 0
        if not self.queries:
            self.error(GL_INVALID_OPERATION)

    def glGetNextPerfQueryIdINTEL(self, query_id: int, next_id: Any) -> None:
        self.state()
        if not next_id:
            self.error(GL_INVALID_VALUE)
            return
        ids = [q.id for q in self.queries]
        if query_id not in ids:
            next_id[0] = 0
            self.error(GL_INVALID_VALUE)
            return
        index = ids.index(query_id) + 1
        next_id[0] = ids[index] if index < len(ids) else 0

    def glGetPerfQueryIdByNameINTEL(self, name: bytes | None, query_id: Any) -> None:
        self.state()
        found = next((q for q in self.queries if name and q.name.encode() == name), None)
        if found is None or not query_id:
            self.error(GL_INVALID_VALUE)
            return
        query_id[0] = found.id

    def glGetPerfQueryInfoINTEL(
        self,
        query_id: int,
        name_length: int,
        name: int | None,
        data_size: Any,
        counters: Any,
        instances: Any,
        caps: Any,
    ) -> None:
        query = self._query(query_id)
        if query is None:
            return
        write_string(query.name, name_length, None, name)
        if data_size:
            data_size[0] = query.size
        if counters:
            counters[0] = len(query.counters)
        if instances:
            instances[0] = sum(h.query is query for h in self.state().handles.values())
        if caps:
            caps[0] = GL_PERFQUERY_SINGLE_CONTEXT_INTEL

    def glGetPerfCounterInfoINTEL(
        self,
        query_id: int,
        counter_id: int,
        name_length: int,
        name: int | None,
        desc_length: int,
        desc: int | None,
        offset: Any,
        data_size: Any,
        type_enum: Any,
        data_type_enum: Any,
        raw_max: Any,
    ) -> None:
        query = self._query(query_id)
        if query is None:
            return
        if not 1 <= counter_id <= len(query.counters):  # "counter id 0 is reserved"
            self.error(GL_INVALID_VALUE)
            return
        counter = query.counters[counter_id - 1]
        write_string(counter.name, name_length, None, name)
        write_string(counter.description, desc_length, None, desc)
        for out, value in (
            (offset, counter.offset),
            (data_size, counter.size),
            (type_enum, counter.type),
            (data_type_enum, counter.data_type),
            (raw_max, counter.raw_max),
        ):
            if out:
                out[0] = value

    def glCreatePerfQueryINTEL(self, query_id: int, handle: Any) -> None:
        state: IntelState = self.state()
        query = self._query(query_id)
        if query is None:
            return
        if not handle:
            self.error(GL_INVALID_VALUE)
            return
        if sum(h.query is query for h in state.handles.values()) >= self.max_instances:
            handle[0] = 0  # "the location pointed by queryHandle returns NULL"
            self.error(GL_OUT_OF_MEMORY)
            return
        state.handles[state.next_handle] = Handle(query)
        handle[0] = state.next_handle
        state.next_handle += 1

    def glDeletePerfQueryINTEL(self, handle: int) -> None:
        state: IntelState = self.state()
        found = self._handle(handle)
        if found is None:
            return
        if found.active:
            assert found.session is not None
            state.end(found.session)
        del state.handles[handle]
        self.deleted(handle)

    def glBeginPerfQueryINTEL(self, handle: int) -> None:
        state: IntelState = self.state()
        found = self._handle(handle)
        if found is None:
            return
        others = [h for h in state.handles.values() if h.active]
        if found.active or any(h.query is not found.query for h in others):
            self.error(GL_INVALID_OPERATION)
            return
        found.session = Session(state.timeline.tick)
        found.active = True
        state.begin(found.session)

    def glEndPerfQueryINTEL(self, handle: int) -> None:
        state: IntelState = self.state()
        found = self._handle(handle)
        if found is None:
            return
        if not found.active:  # "If a performance query is not currently started"
            self.error(GL_INVALID_OPERATION)
            return
        assert found.session is not None
        state.end(found.session)
        found.active = False

    def glGetPerfQueryDataINTEL(
        self, handle: int, flags: int, size: int, data: int | None, written: Any
    ) -> None:
        state: IntelState = self.state()
        found = self._handle(handle)
        if found is None:
            return
        if not data or not written:
            self.error(GL_INVALID_VALUE)
            return
        written[0] = 0
        session = found.session
        if session is None or found.active:
            self.error(GL_INVALID_OPERATION)
            return
        timeline = state.timeline
        if not timeline.complete(session):
            if flags == GL_PERFQUERY_FLUSH_INTEL:
                timeline.flush()
            elif flags == GL_PERFQUERY_WAIT_INTEL:
                timeline.wait(session.serial)
        if timeline.complete(session):
            out = found.query.layout(state.sweep.measure(session))[: max(size, 0)]
            ctypes.memmove(data, out, len(out))
            written[0] = len(out)
            self.delivered(handle)
