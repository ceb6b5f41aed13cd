"""What the vendor counter backends share: counter sessions in flight, read late.

A *session* is one measurement object of a vendor extension -- a
GL_AMD_performance_monitor monitor, a GL_INTEL_performance_query handle. Both
extensions bracket work the same way and both let a result be read later, so
`CounterSessionBackend` gives every event its own session from a per-context
pool, queues ended sessions and reads them oldest first without blocking
(after a glFlush at every frame end and every few events), waits only when too
many are outstanding, before a context switch or at the end of the pass, and
combines the pieces of an event that spans contexts (counts added, ratios
averaged by time). A vendor backend supplies its metrics, its pass plan and a
`SessionPool` for its extension's entry points.
"""

from __future__ import annotations

import ctypes
import sys
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from time import monotonic_ns
from typing import TYPE_CHECKING, ClassVar, Protocol

from retrace.backends.base import MetricBackend
from retrace.vocabulary import Boundary, Kind, Metric, MetricError, NumType

if TYPE_CHECKING:
    from retrace.replay.view import ReplayView
    from retrace.writer.store import Column


GL_NO_ERROR = 0
GL_RENDERER = 0x1F01

GL_ERRORS = {
    0x0500: "GL_INVALID_ENUM",
    0x0501: "GL_INVALID_VALUE",
    0x0502: "GL_INVALID_OPERATION",
    0x0505: "GL_OUT_OF_MEMORY",
}

Value = float | int
Values = dict[Metric, Value]


def error_name(code: int) -> str:
    return GL_ERRORS.get(code, f"GL error {code:#x}")


def clear_errors(get_error: Callable[[], int]) -> None:
    """Reset GL's error flags (there is one per kind, so a few calls at most)."""
    for _ in range(8):
        if get_error() == GL_NO_ERROR:
            return


Merge = Callable[[list[Value], list[int]], Value]  # segment values, their durations -> value


def total(values: list[Value], durations: list[int]) -> Value:
    return sum(values)


def weighted_mean(values: list[Value], durations: list[int]) -> Value:
    spent = sum(durations)
    if spent <= 0:
        return sum(values) / len(values)
    return sum(v * d for v, d in zip(values, durations, strict=True)) / spent


def first(values: list[Value], durations: list[int]) -> Value:
    return values[0]


def any_true(values: list[Value], durations: list[int]) -> Value:
    return max(values)


# --- what both vendor backends share: sessions in flight, read late -------------------------------


class SessionPool(Protocol):
    """Counter sessions (monitors, query handles) of one context, for one pass's counters."""

    def take(self) -> int | None:
        """A session ready to begin, or None when the driver gives no more."""

    def begin(self, session: int) -> None: ...

    def end(self, session: int) -> None: ...

    def submit(self, wait: bool) -> None:
        """Before results are read: make the GPU start (or, with `wait`, finish) the work."""

    def result(self, session: int, wait: bool) -> Values | None:
        """The ended session's values; None while not available (with `wait`: a driver fault)."""

    def recycle(self, session: int) -> None: ...

    def delete(self) -> None: ...


@dataclass
class _Event:
    """An event between begin_query and end_query, measured in one segment per context."""

    event: int
    session: int | None = None  # measuring the current segment
    segments: list[Values] = field(default_factory=list)
    durations: list[int] = field(default_factory=list)  # of the segments, once there are two
    started: int = 0  # when the current segment began (monotonic ns)
    unmeasured: bool = False  # part of it ran where it could not be measured


@dataclass
class _Ended:
    """A session that has ended and whose result has not been read."""

    event: _Event
    session: int
    last: bool  # the event's final segment: its row is written once this is read


class CounterSessionBackend(MetricBackend):
    """A vendor counter extension: one session per event, many in flight, read late.

    Subclasses say which extension they need, enumerate its counters, check and
    pack them into passes, and make the per-context `SessionPool`.
    """

    extension: ClassVar[str] = ""
    session_kind: ClassVar[str] = "session"  # what the extension calls a session, for messages
    FLUSH_EVERY: ClassVar[int] = 16  # events between non-blocking reads
    WINDOW: ClassVar[int] = 64  # unread results that make the backend wait for the GPU

    def __init__(self, view: ReplayView) -> None:
        super().__init__(view)
        self._counters: tuple[Metric, ...] | None = None
        self._placeholders: list[Metric] = []
        self._checked: dict[Metric, tuple[bool, str]] = {}
        self._enabled: dict[Boundary, list[Metric]] = {Boundary.FRAME: [], Boundary.DRAWCALL: []}
        self.plan: list[tuple[Boundary, tuple[Metric, ...]]] = []
        self._renderers: dict[int, str] = {}
        self._warned: set[str] = set()
        self._boundary: Boundary | None = None
        self._metrics: tuple[Metric, ...] = ()
        self._setters: dict[Metric, Callable[[int, Value], None]] = {}
        self._pool: SessionPool | None = None
        self._open: _Event | None = None
        self._ended: deque[_Ended] = deque()
        self._since_flush = 0

    # --- hooks -------------------------------------------------------------------------------

    @abstractmethod
    def _enumerate(self) -> Iterable[Metric]:
        """The driver's counters, in its order (the column order)."""

    @abstractmethod
    def _check(self, metric: Metric) -> tuple[bool, str]:
        """Whether the driver can measure this counter at all, and why not."""

    @abstractmethod
    def _pack(self, metrics: list[Metric]) -> list[tuple[Metric, ...]]:
        """Split one boundary's counters into passes."""

    @abstractmethod
    def _new_pool(self, metrics: tuple[Metric, ...]) -> SessionPool:
        """Sessions on the current context measuring `metrics`."""

    @abstractmethod
    def _merge(self, metric: Metric) -> Merge:
        """How an event's segments on several contexts make one value."""

    def _describe(self, metrics: tuple[Metric, ...]) -> str:
        return ", ".join(m.name for m in metrics)

    # --- what it offers ----------------------------------------------------------------------

    def support(self) -> tuple[bool, str]:
        context = self.view.context
        if context is None:
            return False, "no current context"
        if self.extension not in context.extensions:
            return False, f"{self.extension} not exposed by {self._renderer()}"
        return True, ""

    def _renderer(self) -> str:
        key = self.view.context_key
        if key not in self._renderers:
            get_string = self.view.dispatch.raw("glGetString", ctypes.c_char_p, ctypes.c_uint)
            self._renderers[key] = (get_string(GL_RENDERER) or b"?").decode(errors="replace")
        return self._renderers[key]

    def metrics(self) -> Sequence[Metric]:
        if self._counters is None and self.support()[0]:
            self._counters = tuple(self._enumerate())
        return (self._counters or ()) + tuple(self._placeholders)

    def metric_by_name(self, name: str) -> Metric | None:
        return super().metric_by_name(name) or self._placeholder(name.strip(), -1, None)

    def metric_by_id(self, group: int, metric_id: int) -> Metric | None:
        found = super().metric_by_id(group, metric_id)
        return found or self._placeholder(f"[{group}, {metric_id}]", group, metric_id)

    def _placeholder(self, name: str, group: int, metric_id: int | None) -> Metric | None:
        """Where the extension is missing, a selection names a column of '-' (not an error)."""
        if self.support()[0]:
            return None  # the driver's list is complete: the name is wrong
        metric = Metric(
            self.name,
            group,
            -1 - len(self._placeholders) if metric_id is None else metric_id,
            name,
            f"not measurable: {self.support()[1]}",
            NumType.UINT64,
            Kind.GENERIC,
            "",
        )
        self._placeholders.append(metric)
        return metric

    def available(self, metric: Metric) -> tuple[bool, str]:
        ok, why = self.support()
        if not ok:
            return ok, why
        if metric in self._placeholders:
            return False, "not among the driver's counters"
        if metric not in self._checked:
            self._checked[metric] = self._check(metric)
        return self._checked[metric]

    def boundaries(self, metric: Metric) -> frozenset[Boundary]:
        return frozenset((Boundary.FRAME, Boundary.DRAWCALL))

    # --- passes ------------------------------------------------------------------------------

    def enable(self, metric: Metric, boundary: Boundary) -> None:
        ok, why = self.available(metric)
        if not ok:
            raise MetricError(f'{self.name} metric "{metric.name}" is not available here: {why}')
        if metric not in self._enabled[boundary]:
            self._enabled[boundary].append(metric)

    def generate_passes(self) -> int:
        order = {m: i for i, m in enumerate(self.metrics())}
        self.plan = [
            (boundary, metrics)
            for boundary in (Boundary.FRAME, Boundary.DRAWCALL)  # frames first, as glretrace
            for metrics in self._pack(sorted(self._enabled[boundary], key=order.__getitem__))
        ]
        return len(self.plan)

    def describe_passes(self) -> list[str]:
        per = {Boundary.FRAME: "frame", Boundary.DRAWCALL: "draw call"}
        return [
            f"pass {i + 1}: {self.name} per {per[boundary]}: {self._describe(metrics)}"
            for i, (boundary, metrics) in enumerate(self.plan)
        ]

    def pass_boundaries(self, index: int) -> frozenset[Boundary]:
        return frozenset((self.plan[index][0],))

    def begin_pass(self, index: int, columns: dict[tuple[Metric, Boundary], Column]) -> None:
        self._boundary, self._metrics = self.plan[index]
        self._setters = {m: columns[m, self._boundary].set for m in self._metrics}
        self._open = None
        self._ended.clear()
        self._since_flush = 0
        self.continue_pass()

    def end_pass(self) -> None:
        self.pause_pass()
        self._boundary = None
        self._setters = {}

    def pause_pass(self) -> None:
        """Before a context switch: end the open segment, read everything, drop the pool."""
        pool = self._pool
        if pool is None:
            return
        open_ = self._open
        if open_ is not None and open_.session is not None:
            pool.end(open_.session)
            open_.durations.append(monotonic_ns() - open_.started)
            self._ended.append(_Ended(open_, open_.session, last=False))
            open_.session = None
        self._collect(wait=True)
        pool.delete()
        self._pool = None

    def continue_pass(self) -> None:
        """A context is current: measure the open event's next segment there, if it can."""
        context = self.view.context
        if context is None:
            return
        if self.extension not in context.extensions:
            self._warn(
                f"{self.extension} is not exposed by {self._renderer()} on a context of this "
                "trace: the events there read '-'"
            )
            if self._open is not None:
                self._open.unmeasured = True
            return
        self._pool = self._new_pool(self._metrics)
        if self._open is not None and not self._open.unmeasured:
            self._start(self._open)

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            print(f"retrace: warning: {message}", file=sys.stderr)

    # --- events ------------------------------------------------------------------------------

    def begin_query(self, boundary: Boundary, event: int) -> None:
        if boundary is not self._boundary:
            return
        self._open = open_ = _Event(event)
        if self._pool is None:  # the extension is missing here
            open_.unmeasured = True
        else:
            self._start(open_)

    def _start(self, open_: _Event) -> None:
        pool = self._pool
        assert pool is not None
        session = pool.take()
        if session is None and self._ended:  # the driver's limit: free what is done, or wait
            self._collect(wait=False)
            session = pool.take()
            if session is None:
                self._collect(wait=True)
                session = pool.take()
        if session is None:
            self._warn(
                f"{self.extension}: the driver gives no more {self.session_kind}s; events read '-'"
            )
            open_.unmeasured = True
            return
        pool.begin(session)
        open_.session = session
        open_.started = monotonic_ns()

    def end_query(self, boundary: Boundary, event: int) -> None:
        if boundary is not self._boundary:
            return
        open_, self._open = self._open, None
        assert open_ is not None
        if open_.session is None:  # no segment running: its values are in already, if any
            self._write(open_)
            return
        pool = self._pool
        assert pool is not None
        pool.end(open_.session)
        if open_.durations:  # only an event with several segments needs their weights
            open_.durations.append(monotonic_ns() - open_.started)
        self._ended.append(_Ended(open_, open_.session, last=True))
        open_.session = None
        self._since_flush += 1
        if boundary is Boundary.FRAME or self._since_flush >= self.FLUSH_EVERY:
            self._collect(wait=False)
        if len(self._ended) >= self.WINDOW:
            self._collect(wait=True)

    def _collect(self, wait: bool) -> None:
        """Read ended sessions oldest first: those done, or (with `wait`) all of them."""
        if not self._ended:
            return
        pool = self._pool
        assert pool is not None
        pool.submit(wait)
        self._since_flush = 0
        while self._ended:
            ended = self._ended[0]
            values = pool.result(ended.session, wait)
            if values is None:
                if not wait:
                    break  # later ones finish later: try again at the next flush
                self._warn(
                    f"{self.extension}: the driver kept a finished {self.session_kind}'s result "
                    "unavailable; its event reads '-'"
                )
                ended.event.unmeasured = True
            else:
                ended.event.segments.append(values)
            self._ended.popleft()
            pool.recycle(ended.session)
            if ended.last:
                self._write(ended.event)

    def _write(self, open_: _Event) -> None:
        segments, durations = open_.segments, open_.durations
        if open_.unmeasured or not segments:
            return
        for metric, set_value in self._setters.items():
            values = [s[metric] for s in segments if metric in s]
            if len(values) == len(segments):  # a counter missing from a result reads '-'
                merged = values[0] if len(values) == 1 else self._merge(metric)(values, durations)
                set_value(open_.event, merged)


# --- GL_AMD_performance_monitor -------------------------------------------------------------------
