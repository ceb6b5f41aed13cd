"""The cpu backend against the real clocks and the real kernel: no GL, no mocked system calls.

Whether perf counters open depends on the machine (a PMU, kernel.perf_event_paranoid,
privileges); each counter test checks the branch the kernel here takes: real values
where it allows the counter, a MetricError naming perf_event_open where it does not.
"""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from retrace.backends.base import MetricBackend
from retrace.backends.cpu import CpuBackend
from retrace.vocabulary import Boundary, Kind, Metric, MetricError, NumType
from retrace.writer.store import Column, Store

MS = 1_000_000
COUNTER_NAMES = ["Cycles", "Instructions", "Cache Misses", "Page Faults", "Context Switches"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """The store the driver would hand columns of to begin_pass."""
    with Store(str(tmp_path)) as store:
        yield store


def metric(backend: CpuBackend, name: str) -> Metric:
    found = backend.metric_by_name(name)
    assert found is not None, name
    return found


def enable(
    backend: CpuBackend, store: Store, names: Iterable[str], boundaries: Iterable[Boundary]
) -> dict[tuple[Metric, Boundary], Column]:
    """Enable metrics at boundaries; the columns a driver would hand to begin_pass."""
    columns = {}
    for name in names:
        for boundary in boundaries:
            m = metric(backend, name)
            backend.enable(m, boundary)
            columns[(m, boundary)] = store.column(f"{name}@{boundary.name}", np.int64)
    return columns


@contextmanager
def query(backend: CpuBackend, boundary: Boundary, event: int) -> Iterator[None]:
    backend.begin_query(boundary, event)
    yield
    backend.end_query(boundary, event)


def value(columns: dict[tuple[Metric, Boundary], Column], name: str, b: Boundary, e: int) -> int:
    return int(next(c for (m, bb), c in columns.items() if m.name == name and bb == b).view()[e])


def busy(ns: int) -> None:
    """Spend `ns` of this thread's CPU time (not of wall time: on a loaded machine the
    thread gets less CPU than the wall clock shows)."""
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass


def touch_new_pages(size: int = 8 << 20) -> None:
    """First writes to freshly mapped memory: page faults in user mode."""
    buffer = bytearray(size)
    for offset in range(0, size, 4096):
        buffer[offset] = 1


# --- what it offers -------------------------------------------------------------------------------


def test_registered_and_always_supported() -> None:
    assert MetricBackend.registry["cpu"] is CpuBackend
    assert CpuBackend(None).support() == (True, "")


def test_metrics_listed_with_units() -> None:
    backend = CpuBackend(None)
    listed = {m.name: m for m in backend.metrics()}
    assert list(listed) == [
        "Wall Duration", "Wall Start", "Thread CPU Duration", "Process CPU Duration",
        *COUNTER_NAMES,
    ]  # fmt: skip
    assert {m.name: m.unit for m in listed.values()} == {
        "Wall Duration": "ns", "Wall Start": "ns", "Thread CPU Duration": "ns",
        "Process CPU Duration": "ns", "Cycles": "cycles", "Instructions": "instructions",
        "Cache Misses": "misses", "Page Faults": "faults", "Context Switches": "switches",
    }  # fmt: skip
    assert listed["Wall Duration"].kind is Kind.DURATION
    assert listed["Wall Start"].kind is Kind.TIMESTAMP
    assert listed["Instructions"].kind is Kind.NUM
    assert len({(m.group, m.id) for m in listed.values()}) == len(listed)
    for m in listed.values():
        assert m.backend == "cpu" and m.num_type is NumType.INT64 and m.description
        assert m.group_name == ("Clocks" if m.group == 0 else "Kernel counters")
        assert backend.boundaries(m) == frozenset(Boundary)


def test_lookup_by_name_and_id() -> None:
    backend = CpuBackend(None)
    assert backend.metric_by_name("nope") is None
    assert metric(backend, "wall duration").name == "Wall Duration"
    assert metric(backend, "  THREAD cpu DURATION ").name == "Thread CPU Duration"
    assert backend.metric_by_id(1, 3) == metric(backend, "Page Faults")
    assert backend.metric_by_id(7, 0) is None


def test_clocks_always_available() -> None:
    backend = CpuBackend(None)
    for m in backend.metrics()[:4]:
        assert backend.available(m) == (True, "")


def test_foreign_metric_refused() -> None:
    backend = CpuBackend(None)
    other = Metric("opengl", 0, 0, "GPU Duration", "", NumType.INT64, Kind.DURATION, "ns")
    assert backend.available(other)[0] is False
    with pytest.raises(MetricError, match="not a metric of the cpu backend"):
        backend.enable(other, Boundary.CALL)


# --- enabling and passes --------------------------------------------------------------------------


def test_nothing_enabled_needs_no_pass() -> None:
    backend = CpuBackend(None)
    assert backend.generate_passes() == 0
    assert backend.describe_passes() == []
    with pytest.raises(ValueError, match="no pass 0"):
        backend.begin_pass(0, {})


@pytest.mark.parametrize("boundary", list(Boundary), ids=lambda b: b.name)
def test_enable_at_each_boundary(boundary: Boundary, store: Store) -> None:
    backend = CpuBackend(None)
    columns = enable(backend, store, ["Wall Duration", "Process CPU Duration"], [boundary])
    assert backend.generate_passes() == 1
    assert backend.pass_boundaries(0) == {boundary}
    (line,) = backend.describe_passes()
    assert f"Wall Duration at {boundary.name.lower()}" in line
    with pytest.raises(ValueError, match="no pass 1"):
        backend.begin_pass(1, columns)
    backend.begin_pass(0, columns)
    for event in range(3):
        with query(backend, boundary, event):
            busy(MS // 10)
    backend.end_pass()
    for column in columns.values():  # (a row not written would read as missing, < 0)
        assert len(column) == 3 and all(v > 0 for v in column.view())


def test_all_metrics_in_one_pass() -> None:
    backend = CpuBackend(None)
    for m in backend.metrics():
        if backend.available(m)[0]:
            for boundary in Boundary:
                backend.enable(m, boundary)
    assert backend.generate_passes() == 1
    assert len(backend.describe_passes()) == 1
    assert backend.pass_boundaries(0) == frozenset(Boundary)


def test_missing_column_is_an_error(store: Store) -> None:
    backend = CpuBackend(None)
    columns = enable(backend, store, ["Wall Duration", "Wall Start"], [Boundary.FRAME])
    del columns[(metric(backend, "Wall Start"), Boundary.FRAME)]
    with pytest.raises(ValueError, match="no column for Wall Start at FRAME"):
        backend.begin_pass(0, columns)


def test_end_without_matching_begin_is_an_error(store: Store) -> None:
    backend = CpuBackend(None)
    columns = enable(backend, store, ["Wall Duration"], [Boundary.CALL])
    backend.begin_pass(0, columns)
    backend.begin_query(Boundary.CALL, 4)
    with pytest.raises(RuntimeError, match="end_query"):
        backend.end_query(Boundary.CALL, 5)
    backend.end_pass()


# --- values ---------------------------------------------------------------------------------------


def test_busy_loop_against_sleep(store: Store) -> None:
    backend = CpuBackend(None)
    names = ["Wall Duration", "Wall Start", "Thread CPU Duration", "Process CPU Duration"]
    columns = enable(backend, store, names, [Boundary.CALL])
    backend.begin_pass(0, columns)
    with query(backend, Boundary.CALL, 0):
        busy(20 * MS)
    with query(backend, Boundary.CALL, 1):
        time.sleep(0.020)
    backend.end_pass()

    def get(name: str, event: int) -> int:
        return value(columns, name, Boundary.CALL, event)

    # the bounds are what each measure means, not how fast this machine is: wall time
    # holds the CPU time spent, sleeping spends none
    assert 20 * MS <= get("Wall Duration", 0) <= 60_000 * MS
    assert get("Thread CPU Duration", 0) >= 20 * MS
    assert get("Process CPU Duration", 0) >= get("Thread CPU Duration", 0)
    assert 20 * MS <= get("Wall Duration", 1) <= 60_000 * MS
    assert get("Thread CPU Duration", 1) < 5 * MS
    assert 0 <= get("Wall Start", 0) < get("Wall Start", 1)
    assert get("Wall Start", 1) >= get("Wall Start", 0) + get("Wall Duration", 0)


def test_frame_holds_its_calls(store: Store) -> None:
    backend = CpuBackend(None)
    names = ["Wall Duration", "Wall Start", "Thread CPU Duration"]
    columns = enable(backend, store, names, [Boundary.FRAME, Boundary.CALL])
    backend.begin_pass(0, columns)
    with query(backend, Boundary.FRAME, 0):
        with query(backend, Boundary.CALL, 0):
            busy(2 * MS)
        backend.pause_pass()  # a context switch between the calls changes nothing here
        backend.continue_pass()
        with query(backend, Boundary.CALL, 1):
            time.sleep(0.002)
    backend.end_pass()
    frame, call = Boundary.FRAME, Boundary.CALL
    for name in ("Wall Duration", "Thread CPU Duration"):
        calls = value(columns, name, call, 0) + value(columns, name, call, 1)
        assert value(columns, name, frame, 0) >= calls
    assert value(columns, "Wall Start", frame, 0) <= value(columns, "Wall Start", call, 0)


def test_draw_call_is_also_a_call(store: Store) -> None:
    backend = CpuBackend(None)
    columns = enable(backend, store, ["Wall Duration"], [Boundary.CALL, Boundary.DRAWCALL])
    backend.begin_pass(0, columns)
    with query(backend, Boundary.CALL, 0):
        busy(MS // 10)
    with query(backend, Boundary.CALL, 1), query(backend, Boundary.DRAWCALL, 0):
        busy(MS)
    backend.end_pass()
    draw = value(columns, "Wall Duration", Boundary.DRAWCALL, 0)
    assert MS <= draw <= value(columns, "Wall Duration", Boundary.CALL, 1)
    assert len(columns[(metric(backend, "Wall Duration"), Boundary.CALL)]) == 2


# --- perf counters, as this kernel allows them ----------------------------------------------------


@pytest.mark.parametrize("name", COUNTER_NAMES)
def test_perf_counter_real_or_refused(name: str, store: Store) -> None:
    backend = CpuBackend(None)
    counter = metric(backend, name)
    ok, reason = backend.available(counter)
    if not ok:  # the reason names the real cause: a counter missing, or not permitted
        missing = reason.startswith("no such hardware counter on this machine (perf_event_open: ")
        denied = reason.startswith("not permitted: kernel.perf_event_paranoid=")
        assert missing or denied, reason
        assert ("paranoid" in reason) == denied
        with pytest.raises(MetricError, match="perf_event_open") as refused:
            backend.enable(counter, Boundary.CALL)
        assert name in str(refused.value) and reason in str(refused.value)
        assert backend.generate_passes() == 0
        return
    assert reason == ""
    columns = enable(backend, store, [name, "Wall Duration"], [Boundary.CALL])
    backend.begin_pass(0, columns)
    with query(backend, Boundary.CALL, 0):
        busy(20 * MS)
        touch_new_pages()
    with query(backend, Boundary.CALL, 1):
        time.sleep(0.020)
    backend.end_pass()
    busy_value = value(columns, name, Boundary.CALL, 0)
    sleep_value = value(columns, name, Boundary.CALL, 1)
    assert busy_value >= 0 and sleep_value >= 0
    if name in ("Cycles", "Instructions"):
        assert busy_value > 1e6
    elif name == "Page Faults":
        assert busy_value > 0  # new pages were written
    elif name == "Context Switches":
        assert sleep_value >= 1  # sleeping gives the CPU away


def test_perf_fds_closed_at_end_of_pass(store: Store) -> None:
    backend = CpuBackend(None)
    counters = [n for n in COUNTER_NAMES if backend.available(metric(backend, n))[0]]
    if not counters:
        pytest.skip("this kernel opens no perf counter")
    columns = enable(backend, store, counters, list(Boundary))
    fds = set(os.listdir("/proc/self/fd"))
    backend.begin_pass(0, columns)
    assert len(set(os.listdir("/proc/self/fd")) - fds) == len(counters)
    backend.end_pass()
    assert set(os.listdir("/proc/self/fd")) == fds


def test_unprivileged_thread_refused_kernel_counting() -> None:
    """Counting in kernel mode needs paranoid <= 1 or CAP_PERFMON: dropped to nobody, refused."""
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if os.geteuid() != 0 or paranoid < 2:
        pytest.skip("needs root to drop privileges and kernel.perf_event_paranoid >= 2")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no privileges, then the real kernel's answers
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            backend = CpuBackend(None)
            found = [backend.available(metric(backend, n)) for n in COUNTER_NAMES]
            os.write(write_end, repr(found).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    answers = dict(zip(COUNTER_NAMES, ast.literal_eval(text), strict=True))
    ok, reason = answers["Context Switches"]
    assert not ok
    assert reason == (
        f"not permitted: kernel.perf_event_paranoid={paranoid} (perf_event_open: Permission "
        "denied; needs CAP_PERFMON or a lower setting)"
    )
    # Counting in user mode stays open to it wherever the kernel has the counter at all.
    root = CpuBackend(None)
    assert answers["Page Faults"] == root.available(metric(root, "Page Faults"))
