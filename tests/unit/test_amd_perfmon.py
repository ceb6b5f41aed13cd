"""The model of the GL_AMD_performance_monitor spec on its own: the stand-in the backend
tests (tests/gl/test_amd_perfmon.py) put in the driver's place.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterator

import pytest
from models.amd_perfmon import (
    GL_COUNTER_RANGE_AMD,
    GL_PERFMON_RESULT_AMD,
    GL_PERFMON_RESULT_AVAILABLE_AMD,
    GL_PERFMON_RESULT_SIZE_AMD,
    AmdPerfMonitorModel,
)
from models.driver import (
    GL_INVALID_ENUM,
    GL_INVALID_OPERATION,
    GL_INVALID_VALUE,
    GL_NO_ERROR,
    InjectedWork,
)

from retrace.backends.amd_perfmon import _AmdGL
from retrace.replay.dispatch import Dispatch

# --- the model follows the spec ------------------------------------------------------------------


@pytest.fixture
def unit() -> Iterator[tuple[AmdPerfMonitorModel, _AmdGL, InjectedWork]]:
    """The model on a pretend context, its work counted by the test, called as the backend does."""
    work = InjectedWork()
    model = AmdPerfMonitorModel(max_active=3, latency=2, work=lambda: work)
    model.current = lambda: "context"
    gl = _AmdGL(Dispatch(model.resolver(lambda name: 0)))
    yield model, gl, work
    assert model.failures == []


def monitor(gl: _AmdGL, *counters: tuple[int, int]) -> int:
    name = ctypes.c_uint(0)
    gl.GenPerfMonitorsAMD(1, ctypes.byref(name))
    for group, counter in counters:
        gl.SelectPerfMonitorCountersAMD(name, 1, group, 1, (ctypes.c_uint * 1)(counter))
    return name.value


def data(gl: _AmdGL, name: int, pname: int, size: int = 64) -> bytes:
    buffer, written = ctypes.create_string_buffer(size), ctypes.c_int(-1)
    gl.GetPerfMonitorCounterDataAMD(name, pname, size, buffer, ctypes.byref(written))
    return buffer.raw[: written.value]


def test_model_enumerates_groups_counters_and_strings(unit):
    model, gl, _ = unit
    n = ctypes.c_int(0)
    gl.GetPerfMonitorGroupsAMD(ctypes.byref(n), 0, None)
    groups = (ctypes.c_uint * n.value)()
    gl.GetPerfMonitorGroupsAMD(None, n.value, groups)
    assert list(groups) == [1, 4]
    length = ctypes.c_int(0)
    gl.GetPerfMonitorCounterStringAMD(1, 2, 0, ctypes.byref(length), None)
    assert length.value == len("Fragments Per Primitive")  # without the NUL
    small = ctypes.create_string_buffer(6)
    gl.GetPerfMonitorCounterStringAMD(1, 2, 6, ctypes.byref(length), small)
    assert (small.value, length.value) == (b"Fragm", 5)  # bufSize counts the NUL
    bounds = ctypes.create_string_buffer(8)
    gl.GetPerfMonitorCounterInfoAMD(4, 11, GL_COUNTER_RANGE_AMD, bounds)
    assert struct.unpack("<2f", bounds.raw) == (0.0, 100.0)
    assert gl.GetError() == GL_NO_ERROR
    for call in (
        lambda: gl.GetPerfMonitorCountersAMD(2, ctypes.byref(n), None, 0, None),
        lambda: gl.GetPerfMonitorCounterStringAMD(1, 3, 0, ctypes.byref(length), None),
        lambda: gl.GetPerfMonitorGroupStringAMD(9, 0, ctypes.byref(length), None),
    ):
        call()
        assert gl.GetError() == GL_INVALID_VALUE
    gl.GetPerfMonitorCounterInfoAMD(1, 0, 0x1234, bounds)
    assert gl.GetError() == GL_INVALID_ENUM


def test_model_state_machine_and_errors(unit):
    model, gl, _ = unit
    first, second = monitor(gl, (1, 0)), monitor(gl, (1, 1))
    gl.SelectPerfMonitorCountersAMD(first, 1, 7, 1, (ctypes.c_uint * 1)(0))  # no group 7
    assert gl.GetError() == GL_INVALID_VALUE
    gl.SelectPerfMonitorCountersAMD(first, 1, 1, 1, (ctypes.c_uint * 1)(10))  # not in group 1
    assert gl.GetError() == GL_INVALID_VALUE
    gl.SelectPerfMonitorCountersAMD(99, 1, 1, 1, (ctypes.c_uint * 1)(0))
    assert gl.GetError() == GL_INVALID_VALUE
    gl.SelectPerfMonitorCountersAMD(first, 1, 1, -1, None)
    assert gl.GetError() == GL_INVALID_VALUE
    gl.EndPerfMonitorAMD(first)  # not started
    assert gl.GetError() == GL_INVALID_OPERATION
    gl.BeginPerfMonitorAMD(first)
    gl.BeginPerfMonitorAMD(second)  # cannot nest
    assert gl.GetError() == GL_INVALID_OPERATION
    gl.EndPerfMonitorAMD(first)
    assert gl.GetError() == GL_NO_ERROR
    gl.GetPerfMonitorCounterDataAMD(first, GL_PERFMON_RESULT_AMD, 4, None, None)
    assert gl.GetError() == GL_INVALID_OPERATION  # NULL data
    gl.DeletePerfMonitorsAMD(1, ctypes.byref(ctypes.c_uint(99)))
    assert gl.GetError() == GL_INVALID_VALUE
    # more counters of a group than its maxActiveCounters (2), or than the model takes (3)
    crowded = monitor(gl, (1, 0), (1, 1), (1, 2))
    gl.BeginPerfMonitorAMD(crowded)
    assert gl.GetError() == GL_INVALID_OPERATION
    too_many = monitor(gl, (1, 0), (1, 1), (4, 10), (4, 11))
    gl.BeginPerfMonitorAMD(too_many)
    assert gl.GetError() == GL_INVALID_OPERATION


def test_model_results_wait_for_the_gpu_and_follow_the_layout(unit):
    model, gl, work = unit
    name = monitor(gl, (1, 1), (1, 0), (4, 11))
    gl.BeginPerfMonitorAMD(name)
    work.samples += 300
    work.primitives += 100
    gl.EndPerfMonitorAMD(name)
    assert data(gl, name, GL_PERFMON_RESULT_AVAILABLE_AMD) == struct.pack("<I", 0)
    assert data(gl, name, GL_PERFMON_RESULT_SIZE_AMD) == struct.pack("<I", 0)
    assert data(gl, name, GL_PERFMON_RESULT_AMD) == b""
    assert model.premature_reads == 1
    model.advance()  # nothing was submitted: the GPU has nothing to finish
    assert data(gl, name, GL_PERFMON_RESULT_AVAILABLE_AMD) == struct.pack("<I", 0)
    gl.Flush()
    assert data(gl, name, GL_PERFMON_RESULT_AVAILABLE_AMD) == struct.pack("<I", 0)
    gl.GetError()  # a second call into the model: the latency of two ticks has passed
    assert data(gl, name, GL_PERFMON_RESULT_AVAILABLE_AMD) == struct.pack("<I", 1)
    records = struct.pack("<IIf", 4, 11, 75.0) + struct.pack("<III", 1, 1, 100)
    records += struct.pack("<IIQ", 1, 0, 300)  # descending (group, counter); 8 bytes for int64
    assert data(gl, name, GL_PERFMON_RESULT_SIZE_AMD) == struct.pack("<I", len(records))
    assert data(gl, name, GL_PERFMON_RESULT_AMD) == records
    assert data(gl, name, GL_PERFMON_RESULT_AMD, size=10) == records[:10]
    gl.SelectPerfMonitorCountersAMD(name, 0, 4, 1, (ctypes.c_uint * 1)(11))  # invalidates
    assert data(gl, name, GL_PERFMON_RESULT_AVAILABLE_AMD) == struct.pack("<I", 0)


def test_model_finish_completes_everything_ended(unit):
    _, gl, _ = unit
    names = [monitor(gl, (4, 10)) for _ in range(3)]
    for name in names:
        gl.BeginPerfMonitorAMD(name)
        gl.EndPerfMonitorAMD(name)
    gl.Finish()
    serials = [struct.unpack("<III", data(gl, n, GL_PERFMON_RESULT_AMD))[2] for n in names]
    assert serials == [1, 2, 3]
