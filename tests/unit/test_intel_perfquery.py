"""The model of the GL_INTEL_performance_query spec on its own: the stand-in the backend
tests (tests/gl/test_intel_perfquery.py) put in the driver's place.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterator

import pytest
from models.driver import (
    GL_INVALID_OPERATION,
    GL_INVALID_VALUE,
    GL_NO_ERROR,
    GL_OUT_OF_MEMORY,
    InjectedWork,
)
from models.intel_perfquery import (
    DOUBLE,
    DURATION_NORM,
    GL_PERFQUERY_DONOT_FLUSH_INTEL,
    GL_PERFQUERY_FLUSH_INTEL,
    GL_PERFQUERY_WAIT_INTEL,
    IntelPerfQueryModel,
)

from retrace.backends.intel_perfquery import _IntelGL
from retrace.replay.dispatch import Dispatch

# --- the model follows the spec ----------------------------------------------------------------


@pytest.fixture
def unit() -> Iterator[tuple[IntelPerfQueryModel, _IntelGL, InjectedWork]]:
    """The model on a pretend context, its work counted by the test, called as the backend does."""
    work = InjectedWork()
    model = IntelPerfQueryModel(max_instances=2, latency=2, work=lambda: work)
    model.current = lambda: "context"
    gl = _IntelGL(Dispatch(model.resolver(lambda name: 0)))
    yield model, gl, work
    assert model.failures == []


def read(gl: _IntelGL, handle: int, flags: int, size: int = 40) -> bytes:
    buffer, written = ctypes.create_string_buffer(size), ctypes.c_uint(99)
    gl.GetPerfQueryDataINTEL(handle, flags, size, buffer, ctypes.byref(written))
    return buffer.raw[: written.value]


def test_model_walks_queries_and_describes_counters(unit):
    model, gl, _ = unit
    query = ctypes.c_uint(0)
    gl.GetFirstPerfQueryIdINTEL(ctypes.byref(query))
    ids = []
    while query.value:
        ids.append(query.value)
        gl.GetNextPerfQueryIdINTEL(query.value, ctypes.byref(query))
    assert ids == [1, 3]
    gl.GetNextPerfQueryIdINTEL(2, ctypes.byref(query))
    assert (gl.GetError(), query.value) == (GL_INVALID_VALUE, 0)
    gl.GetFirstPerfQueryIdINTEL(None)
    assert gl.GetError() == GL_INVALID_VALUE
    by_name = Dispatch(model.resolver(lambda name: 0)).raw(
        "glGetPerfQueryIdByNameINTEL", None, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint)
    )
    by_name(b"Model Timing", ctypes.byref(query))
    assert query.value == 3
    by_name(b"Nothing", ctypes.byref(query))
    assert gl.GetError() == GL_INVALID_VALUE
    name = ctypes.create_string_buffer(8)
    size, counters, instances, caps = (ctypes.c_uint(9) for _ in range(4))
    info = (ctypes.byref(size), ctypes.byref(counters), ctypes.byref(instances), ctypes.byref(caps))
    gl.GetPerfQueryInfoINTEL(1, 8, name, *info)
    assert (name.value, size.value, counters.value, instances.value, caps.value) == (
        b"Model P",  # clipped to the length given, with its NUL
        40,
        6,
        0,
        0,  # GL_PERFQUERY_SINGLE_CONTEXT_INTEL
    )
    gl.GetPerfQueryInfoINTEL(2, 8, name, *info)
    assert gl.GetError() == GL_INVALID_VALUE
    text, desc = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    fields = [ctypes.c_uint(0) for _ in range(4)]
    raw_max = ctypes.c_uint64(0)
    out = (*(ctypes.byref(f) for f in fields), ctypes.byref(raw_max))
    gl.GetPerfCounterInfoINTEL(1, 4, 64, text, 64, desc, *out)
    assert (text.value, [f.value for f in fields]) == (
        b"Sample Share",
        [16, 8, DURATION_NORM, DOUBLE],
    )
    gl.GetPerfCounterInfoINTEL(3, 2, 64, text, 64, desc, *out)
    assert raw_max.value == 1_000_000
    for counter in (0, 7):  # ids start at 1; query 1 has 6
        gl.GetPerfCounterInfoINTEL(1, counter, 64, text, 64, desc, *out)
        assert gl.GetError() == GL_INVALID_VALUE
    empty = IntelPerfQueryModel(work=InjectedWork, queries=())
    empty.current = lambda: "context"
    gl = _IntelGL(Dispatch(empty.resolver(lambda name: 0)))
    gl.GetFirstPerfQueryIdINTEL(ctypes.byref(query))
    assert (gl.GetError(), query.value) == (GL_INVALID_OPERATION, 0)


def test_model_instances_state_machine_and_errors(unit):
    model, gl, _ = unit
    first, second = gl.create(1), gl.create(1)
    assert (first, second) == (1, 2)
    assert gl.create(1) == 0 and gl.GetError() == GL_OUT_OF_MEMORY  # max_instances is 2
    timing = gl.create(3)
    gl.create(5)
    assert gl.GetError() == GL_INVALID_VALUE
    gl.EndPerfQueryINTEL(first)  # not started
    assert gl.GetError() == GL_INVALID_OPERATION
    assert read(gl, first, GL_PERFQUERY_WAIT_INTEL) == b"" and gl.GetError() == GL_INVALID_OPERATION
    gl.BeginPerfQueryINTEL(first)
    gl.BeginPerfQueryINTEL(first)
    assert gl.GetError() == GL_INVALID_OPERATION  # already active
    gl.BeginPerfQueryINTEL(timing)  # another kind cannot be nested
    assert gl.GetError() == GL_INVALID_OPERATION
    gl.BeginPerfQueryINTEL(second)  # the same kind can
    assert gl.GetError() == GL_NO_ERROR
    assert read(gl, first, GL_PERFQUERY_WAIT_INTEL) == b"" and gl.GetError() == GL_INVALID_OPERATION
    gl.EndPerfQueryINTEL(first)
    gl.EndPerfQueryINTEL(second)
    gl.GetPerfQueryDataINTEL(first, GL_PERFQUERY_WAIT_INTEL, 40, None, None)
    assert gl.GetError() == GL_INVALID_VALUE
    gl.DeletePerfQueryINTEL(first)
    gl.DeletePerfQueryINTEL(first)
    assert gl.GetError() == GL_INVALID_VALUE
    gl.BeginPerfQueryINTEL(first)
    assert gl.GetError() == GL_INVALID_VALUE


def test_model_read_flags_and_result_layout(unit):
    model, gl, work = unit
    outer, inner = gl.create(1), gl.create(1)
    gl.BeginPerfQueryINTEL(outer)
    work.samples += 100
    gl.BeginPerfQueryINTEL(inner)
    work.samples += 300
    work.primitives += 100
    gl.EndPerfQueryINTEL(inner)
    gl.EndPerfQueryINTEL(outer)
    for _ in range(5):  # without a flush the GPU never gets the work
        assert read(gl, inner, GL_PERFQUERY_DONOT_FLUSH_INTEL) == b""
    assert read(gl, inner, GL_PERFQUERY_FLUSH_INTEL) == b""  # submitted, not done yet
    gl.GetError()
    data = read(gl, inner, GL_PERFQUERY_DONOT_FLUSH_INTEL)
    assert data == struct.pack("<QIfdIxxxxQ", 300, 100, 3.0, 0.75, 0, 1)
    outer_data = read(gl, outer, GL_PERFQUERY_DONOT_FLUSH_INTEL, size=28)  # truncated
    assert outer_data == struct.pack("<QIfdI", 400, 100, 4.0, 0.8, 1)  # "Split Occurred"
    assert gl.create(1) == 0 and gl.GetError() == GL_OUT_OF_MEMORY  # two of a kind at most
    gl.DeletePerfQueryINTEL(outer)
    assert gl.create(1) != 0
    timing = gl.create(3)
    gl.BeginPerfQueryINTEL(timing)
    gl.EndPerfQueryINTEL(timing)
    assert len(read(gl, timing, GL_PERFQUERY_WAIT_INTEL)) == 16  # WAIT: ready at once
