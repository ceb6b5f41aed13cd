"""The `opengl` backend: glretrace's metrics, from GL queries, the clock and /proc.

GPU times come from pairs of glQueryCounter(GL_TIMESTAMP) queries, which nest,
so frames, calls and draw calls are timed in one pass (consecutive frames share one:
the timestamp that ends a frame starts the next, where glretrace takes two back to
back); GL_SAMPLES_PASSED occlusion queries, which do not nest, give Pixels Drawn,
and asking for it at frames and at calls or draws takes a second pass (frames
first), as in glretrace. CPU Start/Duration read CLOCK_MONOTONIC; VSIZE/RSS read
/proc/self/statm and are reported in bytes (glretrace prints zeros without
procps, and RSS in pages); GPU Disjoint reads GL_GPU_DISJOINT_EXT.

GPU Busy and GPU Idle are retrace's own. A frame's GPU Duration, glretrace's span from
the timestamp before its first command to the one after its last, counts the time the
GPU waited for the replayer to send it work: the slower the CPU side, the larger the
"GPU" time. GPU Busy is the sum of the GPU times of the event's GPU work (draws,
dispatches, clears, blits, copies...: `retrace.gl.work` decides which calls), each call
between two timestamp queries of its own, issued in the same pass; GPU Idle is the span
less that. A call's busy time is its own GPU time (0 for a call that makes no GPU work).
Where the work cannot be timed (a context without timer queries, a disjoint GPU timer
on OpenGL ES, read at the event's end) the value is missing, never a guess; the
metric's description, in --list-metrics and in the metadata beside the tables, says so.

This file describes the metrics, says where they are available, plans the
passes and turns what was measured into column values. The replay loop
measures every one of them at every boundary, in C (`retrace/replay/_vm.c`,
"events": its per-context query pools, read one frame late, and events that
span a context switch are explained there), so no Python runs per event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from retrace.backends.base import MetricBackend, nesting_plan
from retrace.replay._vm import GL_SAMPLES_PASSED  # (the loop's: a check needs no program)
from retrace.vocabulary import Boundary, Kind, Metric, MetricError, NativeEvents, NumType

if TYPE_CHECKING:
    from retrace.replay.program import EventRecords
    from retrace.replay.view import ReplayView
    from retrace.writer.store import Column

# GL_SAMPLES_PASSED, GL_ANY_SAMPLES_PASSED(_CONSERVATIVE): one active query among them
OCCLUSION_TARGETS = (GL_SAMPLES_PASSED, 0x8C2F, 0x8D6A)

NAME = "opengl"


def _m(group: int, mid: int, name: str, desc: str, num: NumType, kind: Kind, unit: str) -> Metric:
    return Metric(NAME, group, mid, name, desc, num, kind, unit, ("CPU", "GPU")[group])


# The ids of glretrace 11.1's metrics are its ids ([1, 2] is Pixels Drawn; apitrace 13
# numbers a GPU Disjoint it added [1, 2] and moves Pixels Drawn to [1, 3]); GPU Disjoint,
# retrace's own, comes after them, then GPU Busy and GPU Idle. METRICS is the backend's own
# order, which is the column order of every table, as in glretrace (not the ids' order,
# which listings use).
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
    3,
    "GPU Disjoint",
    "GPU timer disjoint during the event (EXT_disjoint_timer_query)",
    NumType.BOOL,
    Kind.GENERIC,
    "",
)
GPU_BUSY = _m(
    1,
    4,
    "GPU Busy",
    "GPU time of the event's draws, dispatches, clears, blits and copies, each timed on its"
    " own (- where they cannot be: no timer queries, a disjoint timer)",
    NumType.INT64,
    Kind.DURATION,
    "ns",
)
GPU_IDLE = _m(
    1,
    5,
    "GPU Idle",
    "GPU Duration less GPU Busy: the GPU waiting, mostly for the replayer",
    NumType.INT64,
    Kind.DURATION,
    "ns",
)
PIXELS = _m(
    1,
    2,
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
METRICS = (
    CPU_START,
    CPU_DURATION,
    GPU_START,
    GPU_DURATION,
    GPU_DISJOINT,
    GPU_BUSY,
    GPU_IDLE,
    PIXELS,
    VSIZE_START,
    VSIZE_DURATION,
    RSS_START,
    RSS_DURATION,
)
GPU_TIMES = (GPU_START, GPU_DURATION, GPU_DISJOINT, GPU_BUSY, GPU_IDLE)
BUSY = (GPU_BUSY, GPU_IDLE)  # what brackets the GPU work
MEMORY = (VSIZE_START, VSIZE_DURATION, RSS_START, RSS_DURATION)
# where a metric's value is in the loop's event record (`EventRecords`): a field, or for a
# change during the event, the field at its end and the field at its start
FIELDS: dict[Metric, tuple[str, str | None]] = {
    CPU_START: ("cpu_start", None),
    CPU_DURATION: ("cpu_end", "cpu_start"),
    GPU_START: ("gpu_start", None),
    GPU_DURATION: ("gpu_end", "gpu_start"),
    GPU_DISJOINT: ("disjoint", None),
    GPU_BUSY: ("busy", None),
    GPU_IDLE: ("idle", None),
    PIXELS: ("pixels", None),
    VSIZE_START: ("vsize_start", None),
    VSIZE_DURATION: ("vsize_end", "vsize_start"),
    RSS_START: ("rss_start", None),
    RSS_DURATION: ("rss_end", "rss_start"),
}


class OpenGLBackend(MetricBackend):
    """GL queries, CPU clocks and memory, per frame, call and draw call."""

    name = NAME

    def __init__(self, view: ReplayView) -> None:
        super().__init__(view)
        self.enabled: dict[Boundary, set[Metric]] = {b: set() for b in Boundary}
        self.plan: list[dict[Boundary, set[Metric]]] = []
        self._pass: dict[Boundary, set[Metric]] = {}  # the current pass's metrics
        self._columns: dict[tuple[Metric, Boundary], Column] = {}

    # --- what it offers ---------------------------------------------------------------------

    def support(self) -> tuple[bool, str]:
        return True, ""

    def metrics(self) -> Sequence[Metric]:
        return METRICS

    def available(self, metric: Metric) -> tuple[bool, str]:
        if metric not in GPU_TIMES and metric is not PIXELS:
            return True, ""
        context = self.view.context
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

    def begin_pass(self, index: int, columns: dict[tuple[Metric, Boundary], Column]) -> None:
        self._pass = {b: ms for b, ms in self.plan[index].items() if ms}
        self._columns = columns
        pixels = any(PIXELS in ms for ms in self._pass.values())
        self.view.reserve_queries(OCCLUSION_TARGETS if pixels else ())

    def end_pass(self) -> None:
        """Nothing is left: the last events' records came before (`native_results`)."""

    # --- events, measured by the replay loop ------------------------------------------------

    def native_events(self, boundary: Boundary) -> NativeEvents:
        metrics = self._pass.get(boundary, set())
        busy = any(m in metrics for m in BUSY)
        return NativeEvents(
            gpu_times=GPU_START in metrics or GPU_DURATION in metrics or GPU_IDLE in metrics,
            pixels=PIXELS in metrics,
            memory=any(m in metrics for m in MEMORY),
            # a disjoint timer makes busy times missing, where the context can tell
            disjoint=GPU_DISJOINT in metrics or (busy and self.available(GPU_DISJOINT)[0]),
            busy=busy,
        )

    def native_columns(self, boundary: Boundary) -> list[tuple[Column, str, str | None]]:
        return [(self._columns[m, boundary], *FIELDS[m]) for m in self._pass.get(boundary, ())]

    def native_results(self, boundary: Boundary, first_event: int, events: EventRecords) -> None:
        for column, end, start in self.native_columns(boundary):
            if first_event > len(column):  # events before the pass began: not measured
                column.set(first_event - 1, column.missing)
            column.extend(events.values(end, start, column.missing))
