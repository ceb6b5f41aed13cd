"""The ``cpu`` backend ("CPU clocks"): what the replaying CPU spends on each frame, call, draw call.

GPU queries say how long the GPU worked, not how long the replayer, the GL
driver's CPU side and the kernel took to issue that work. This backend brackets
every event with clocks that every Linux process has -- wall time
(CLOCK_MONOTONIC), the replay thread's and the whole process's CPU time
(CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID) -- and, where the kernel
allows it, with perf_event counters of the replay thread (cycles, instructions,
cache misses, page faults, context switches). The counters are opened with the
perf_event_open system call through ctypes, so nothing beyond the kernel is
needed, and a counter the kernel refuses (no PMU in a virtual machine,
kernel.perf_event_paranoid, a container's seccomp filter) is reported as
unavailable with the kernel's reason, never filled with a made-up value.

Nothing here touches GL, so the backend needs nothing from the replay view and all
its metrics fit in one pass. begin_query/end_query run around every profiled
call, so they do little: a few clock reads and one read() of the whole perf
counter group (PERF_FORMAT_GROUP). Readings are kept per boundary -- a frame
holds calls, and a draw call is also a call, so one call is bracketed at two
boundaries at once -- and only end - start goes into the columns.

The counters count the thread that opens them, which is the thread that calls
begin_pass; the driver must issue the queries of a pass from that same thread
(the replay thread), as it does for GL.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import read as _read
from pathlib import Path
from time import monotonic_ns, process_time_ns, thread_time_ns
from typing import TYPE_CHECKING

from retrace.backends.base import MetricBackend
from retrace.vocabulary import Boundary, Kind, Metric, MetricError, NumType

if TYPE_CHECKING:
    from retrace.replay.view import ReplayView
    from retrace.writer.store import Column

NAME = "cpu"
CLOCKS = "Clocks"
COUNTERS = "Kernel counters"


def _metric(
    group: int, metric_id: int, name: str, description: str, kind: Kind, unit: str
) -> Metric:
    group_name = CLOCKS if group == 0 else COUNTERS
    return Metric(NAME, group, metric_id, name, description, NumType.INT64, kind, unit, group_name)


WALL_DURATION = _metric(
    0, 0, "Wall Duration",
    "Elapsed real time (CLOCK_MONOTONIC) between the start and the end of the event",
    Kind.DURATION, "ns",
)  # fmt: skip
WALL_START = _metric(
    0, 1, "Wall Start",
    "When the event started (CLOCK_MONOTONIC), counted from the start of the pass",
    Kind.TIMESTAMP, "ns",
)  # fmt: skip
THREAD_CPU = _metric(
    0, 2, "Thread CPU Duration",
    "CPU time of the replay thread during the event, user and system (CLOCK_THREAD_CPUTIME_ID)",
    Kind.DURATION, "ns",
)  # fmt: skip
PROCESS_CPU = _metric(
    0, 3, "Process CPU Duration",
    "CPU time of all threads of the process during the event, the GL driver's included "
    "(CLOCK_PROCESS_CPUTIME_ID)",
    Kind.DURATION, "ns",
)  # fmt: skip
CYCLES = _metric(
    1, 0, "Cycles",
    "CPU cycles spent in user mode by the replay thread (perf_event PERF_COUNT_HW_CPU_CYCLES)",
    Kind.NUM, "cycles",
)  # fmt: skip
INSTRUCTIONS = _metric(
    1, 1, "Instructions",
    "Instructions retired in user mode by the replay thread (PERF_COUNT_HW_INSTRUCTIONS)",
    Kind.NUM, "instructions",
)  # fmt: skip
CACHE_MISSES = _metric(
    1, 2, "Cache Misses",
    "Last-level cache misses of the replay thread in user mode (PERF_COUNT_HW_CACHE_MISSES)",
    Kind.NUM, "misses",
)  # fmt: skip
PAGE_FAULTS = _metric(
    1, 3, "Page Faults",
    "Page faults raised by the replay thread's user-mode code, e.g. first touches of new "
    "buffers (PERF_COUNT_SW_PAGE_FAULTS)",
    Kind.NUM, "faults",
)  # fmt: skip
CONTEXT_SWITCHES = _metric(
    1, 4, "Context Switches",
    "Times the replay thread left the CPU, waiting or preempted (PERF_COUNT_SW_CONTEXT_SWITCHES; "
    "counted in the kernel, so it needs kernel.perf_event_paranoid <= 1 or CAP_PERFMON)",
    Kind.NUM, "switches",
)  # fmt: skip

METRICS: tuple[Metric, ...] = (
    WALL_DURATION, WALL_START, THREAD_CPU, PROCESS_CPU,
    CYCLES, INSTRUCTIONS, CACHE_MISSES, PAGE_FAULTS, CONTEXT_SWITCHES,
)  # fmt: skip

# --- perf_event_open, from <linux/perf_event.h> ---------------------------------------------------

_PERF_TYPE_HARDWARE = 0
_PERF_TYPE_SOFTWARE = 1
_PERF_FORMAT_GROUP = 1 << 3
_PERF_FLAG_FD_CLOEXEC = 1 << 3
_SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


class _PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to sig_data (PERF_ATTR_SIZE_VER7); unions by their first name."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("disabled", ctypes.c_uint64, 1),
        ("inherit", ctypes.c_uint64, 1),
        ("pinned", ctypes.c_uint64, 1),
        ("exclusive", ctypes.c_uint64, 1),
        ("exclude_user", ctypes.c_uint64, 1),
        ("exclude_kernel", ctypes.c_uint64, 1),
        ("exclude_hv", ctypes.c_uint64, 1),
        ("other_flags", ctypes.c_uint64, 57),  # exclude_idle ... __reserved_1, all 0 here
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64),
    ]


@dataclass(frozen=True)
class _Counter:
    """What perf_event_open is asked for to count one metric."""

    type: int
    config: int
    # The kernel counts context switches in kernel mode: counted in user mode only, they read 0.
    count_kernel: bool = False


_COUNTERS: dict[Metric, _Counter] = {
    CYCLES: _Counter(_PERF_TYPE_HARDWARE, 0),  # PERF_COUNT_HW_CPU_CYCLES
    INSTRUCTIONS: _Counter(_PERF_TYPE_HARDWARE, 1),  # PERF_COUNT_HW_INSTRUCTIONS
    CACHE_MISSES: _Counter(_PERF_TYPE_HARDWARE, 3),  # PERF_COUNT_HW_CACHE_MISSES
    PAGE_FAULTS: _Counter(_PERF_TYPE_SOFTWARE, 2),  # PERF_COUNT_SW_PAGE_FAULTS
    CONTEXT_SWITCHES: _Counter(_PERF_TYPE_SOFTWARE, 3, count_kernel=True),  # ..._CONTEXT_SWITCHES
}


@functools.cache
def _syscall() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall


def _perf_event_open(counter: _Counter, group_fd: int) -> int:
    """A counter of the calling thread on any CPU, counting from now; raises OSError."""
    number = _SYS_PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"no system call number known for {platform.machine()}")
    attr = _PerfEventAttr(type=counter.type, size=ctypes.sizeof(_PerfEventAttr))
    attr.config = counter.config
    attr.read_format = _PERF_FORMAT_GROUP
    # A pinned group stays on the PMU or stops counting (reads then come back empty):
    # never multiplexed, so its counts are never scaled estimates.
    attr.pinned = group_fd == -1
    attr.exclude_kernel = not counter.count_kernel
    attr.exclude_hv = 1
    fd = _syscall()(
        ctypes.c_long(number),
        ctypes.byref(attr),
        ctypes.c_int(0),  # pid: the calling thread
        ctypes.c_int(-1),  # cpu: any
        ctypes.c_int(group_fd),
        ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return fd


def _refusal(error: OSError) -> str:
    """Why perf_event_open refused, by its real cause: the kernel's errno says whether the
    counter is missing (a VM or CPU without it) or not permitted."""
    if error.errno in (errno.ENOENT, errno.ENODEV, errno.EOPNOTSUPP):
        return f"no such hardware counter on this machine (perf_event_open: {error.strerror})"
    if error.errno in (errno.EACCES, errno.EPERM):
        try:
            paranoid = _PARANOID.read_text().strip()
        except OSError:
            paranoid = "unknown"
        return (
            f"not permitted: kernel.perf_event_paranoid={paranoid} (perf_event_open: "
            f"{error.strerror}; needs CAP_PERFMON or a lower setting)"
        )
    return f"perf_event_open: {error.strerror}"


# --- the backend --------------------------------------------------------------------------------


class _Probe:
    """One boundary during a pass: its columns and the readings taken when its event began.

    Events of one boundary never nest (no frame inside a frame, no call inside a call),
    so one set of start readings per boundary is enough.
    """

    __slots__ = (
        "event", "wall", "wall_duration", "wall_start", "thread_cpu", "process_cpu", "counters",
        "wall0", "thread0", "process0", "perf0",
    )  # fmt: skip

    def __init__(self, columns: dict[Metric, Column], counter_index: dict[Metric, int]) -> None:
        self.event = -1
        self.wall_duration = columns.get(WALL_DURATION)
        self.wall_start = columns.get(WALL_START)
        self.wall = self.wall_duration is not None or self.wall_start is not None
        self.thread_cpu = columns.get(THREAD_CPU)
        self.process_cpu = columns.get(PROCESS_CPU)
        # (position in the group read, column), for the counters measured at this boundary.
        self.counters = [(counter_index[m], c) for m, c in columns.items() if m in counter_index]
        self.wall0 = self.thread0 = self.process0 = 0
        self.perf0 = b""


class CpuBackend(MetricBackend):
    """CPU clocks and the kernel's perf_event counters of the replay thread, in one pass."""

    name = NAME

    def __init__(self, view: ReplayView | None = None) -> None:
        super().__init__(view)  # nothing here needs GL, so no replay is needed either
        self._enabled: dict[Metric, set[Boundary]] = {}
        self._refusals: dict[Metric, str] = {}  # perf_event_open's answer, asked once per metric
        self._probes: list[_Probe | None] = [None] * len(Boundary)
        self._group: list[int] = []  # the pass's perf fds, the group leader first
        self._group_size = 0
        self._unpack: Callable[[bytes], tuple[int, ...]] = struct.Struct("=Q").unpack
        self._t0 = 0

    # --- what it offers ---------------------------------------------------------------------

    def support(self) -> tuple[bool, str]:
        return True, ""  # the clocks always work

    def metrics(self) -> Sequence[Metric]:
        return METRICS

    def available(self, metric: Metric) -> tuple[bool, str]:
        if metric not in METRICS:
            return False, f"{metric.name} is not a metric of the {self.name} backend"
        counter = _COUNTERS.get(metric)
        if counter is None:
            return True, ""
        if metric not in self._refusals:
            try:
                os.close(_perf_event_open(counter, -1))
                self._refusals[metric] = ""
            except OSError as error:
                self._refusals[metric] = _refusal(error)
        reason = self._refusals[metric]
        return not reason, reason

    # --- a profiling run ---------------------------------------------------------------------

    def enable(self, metric: Metric, boundary: Boundary) -> None:
        ok, reason = self.available(metric)
        if not ok:
            raise MetricError(f"{metric.name}: {reason}")
        self._enabled.setdefault(metric, set()).add(Boundary(boundary))

    def generate_passes(self) -> int:
        return 1 if self._enabled else 0

    def describe_passes(self) -> list[str]:
        if not self._enabled:
            return []
        measured = "; ".join(
            f"{m.name} at {', '.join(b.name.lower() for b in sorted(self._enabled[m]))}"
            for m in METRICS
            if m in self._enabled
        )
        return [
            f"pass 1: {measured} (clocks and perf counters are read together around each "
            "event: none needs a replay of its own)"
        ]

    def pass_boundaries(self, index: int) -> frozenset[Boundary]:
        return frozenset().union(*self._enabled.values())

    def begin_pass(self, index: int, columns: dict[tuple[Metric, Boundary], Column]) -> None:
        if not 0 <= index < self.generate_passes():
            raise ValueError(f"the {self.name} backend has no pass {index}")
        self.end_pass()
        counters = [m for m in METRICS if m in self._enabled and m in _COUNTERS]
        for metric in counters:
            try:
                self._group.append(
                    _perf_event_open(_COUNTERS[metric], self._group[0] if self._group else -1)
                )
            except OSError as error:
                self.end_pass()
                raise MetricError(f"{metric.name}: {_refusal(error)}") from error
        # A PERF_FORMAT_GROUP read: the number of counters, then each value in opening order.
        self._group_size = 8 * (1 + len(counters))
        self._unpack = struct.Struct(f"={1 + len(counters)}Q").unpack
        counter_index = {m: 1 + i for i, m in enumerate(counters)}
        for boundary in Boundary:
            wanted = [m for m in METRICS if boundary in self._enabled.get(m, ())]
            if not wanted:
                continue
            missing = [m.name for m in wanted if (m, boundary) not in columns]
            if missing:
                self.end_pass()
                raise ValueError(f"no column for {', '.join(missing)} at {boundary.name}")
            chosen = {m: columns[(m, boundary)] for m in wanted}
            self._probes[boundary] = _Probe(chosen, counter_index)
        self._t0 = monotonic_ns()

    def end_pass(self) -> None:
        for fd in self._group:
            os.close(fd)
        self._group.clear()
        self._probes = [None] * len(Boundary)

    def pause_pass(self) -> None:
        """Nothing to do: clocks and perf counters follow the thread, not a GL context."""

    def continue_pass(self) -> None:
        """Nothing to do: see pause_pass."""

    def begin_query(self, boundary: Boundary, event: int) -> None:
        probe = self._probes[boundary]
        if probe is None:
            return
        probe.event = event
        # The cheapest, most precise readings last, next to the event.
        if probe.counters:
            probe.perf0 = _read(self._group[0], self._group_size)
        if probe.process_cpu is not None:
            probe.process0 = process_time_ns()
        if probe.thread_cpu is not None:
            probe.thread0 = thread_time_ns()
        if probe.wall:
            probe.wall0 = monotonic_ns()

    def end_query(self, boundary: Boundary, event: int) -> None:
        probe = self._probes[boundary]
        if probe is None:
            return
        wall = monotonic_ns() if probe.wall else 0
        thread = thread_time_ns() if probe.thread_cpu is not None else 0
        process = process_time_ns() if probe.process_cpu is not None else 0
        perf = _read(self._group[0], self._group_size) if probe.counters else b""
        if event != probe.event:
            raise RuntimeError(
                f"end_query({Boundary(boundary).name}, {event}) without its begin_query"
            )
        probe.event = -1
        if probe.wall_duration is not None:
            probe.wall_duration.set(event, wall - probe.wall0)
        if probe.wall_start is not None:
            probe.wall_start.set(event, probe.wall0 - self._t0)
        if probe.thread_cpu is not None:
            probe.thread_cpu.set(event, thread - probe.thread0)
        if probe.process_cpu is not None:
            probe.process_cpu.set(event, process - probe.process0)
        if probe.counters:
            try:
                now, then = self._unpack(perf), self._unpack(probe.perf0)
            except struct.error:
                raise MetricError(
                    "perf counters stopped counting: their pinned group lost the PMU "
                    "to another pinned user"
                ) from None
            for position, column in probe.counters:
                column.set(event, now[position] - then[position])
