"""The MetricBackend contract: what a source of measurements offers the pass driver.

A backend (the ``opengl`` queries, the ``cpu`` clocks, vendor counter
extensions...) describes its metrics, says whether it works on the current
context and why not, accepts metrics per boundary (frames, calls, draw calls),
splits them into passes when they cannot all be measured in one replay, and
has every event of a pass measured in one of two ways
(`retrace.profile.events` drives both):

- natively: `native_events` says what the replay loop measures around every
  event of each boundary of the pass (clock, GL queries, memory: in C,
  `retrace/replay/_vm.c`), and `native_results` turns the loop's records into
  column values, a batch at a time. No Python runs per event.
- with callbacks: `begin_query`/`end_query` around every event, and
  `pause_pass`/`continue_pass` around context switches, for backends that
  measure in Python.

Values go straight into the `Store` columns the driver hands the backend, one
row per event, so nothing per-event stays in Python lists.

Backends are plug-ins: a module in this package that defines a subclass with a
`name` registers itself through `__init_subclass__` when `backends.registry`
imports it, so a new backend is one new file and its line in `registry.MODULES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from retrace.vocabulary import Boundary, Metric, NativeEvents

if TYPE_CHECKING:
    from retrace.replay.program import EventRecords
    from retrace.replay.view import ReplayView
    from retrace.writer.store import Column


def nesting_plan(
    wanted: dict[Boundary, set[Metric]], nests: bool
) -> list[dict[Boundary, set[Metric]]]:
    """One pass for everything wanted, or, when a query cannot run inside one of its own
    kind (`nests` False), frames first and calls and draw calls in a second pass."""
    if not nests:
        inner = {b: wanted[b] for b in (Boundary.CALL, Boundary.DRAWCALL)}
        return [{Boundary.FRAME: wanted[Boundary.FRAME]}, inner]
    return [wanted] if any(wanted.values()) else []


class MetricBackend(ABC):
    """Base class of every backend; subclasses with a `name` register themselves."""

    name: ClassVar[str] = ""
    registry: ClassVar[dict[str, type[MetricBackend]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            MetricBackend.registry[cls.name] = cls

    def __init__(self, view: ReplayView | None) -> None:
        self._view = view

    @property
    def view(self) -> ReplayView:
        """The replay as this backend may see it: GL access and the current context. A
        backend that needs neither (cpu) may be made with no replay (None), as its tests do."""
        if self._view is None:
            raise RuntimeError(f"the {self.name} backend was made without a replay")
        return self._view

    # --- what it offers ---------------------------------------------------------------------

    @abstractmethod
    def support(self) -> tuple[bool, str]:
        """(usable on the current context, reason when not)."""

    @abstractmethod
    def metrics(self) -> Sequence[Metric]:
        """Every metric, supported or not, in the backend's own order (the column order)."""

    def available(self, metric: Metric) -> tuple[bool, str]:
        """Whether this metric works on the current context, and why not."""
        return self.support()

    def boundaries(self, metric: Metric) -> frozenset[Boundary]:
        """The boundaries a metric can be measured at."""
        return frozenset(Boundary)

    def metric_by_name(self, name: str) -> Metric | None:
        folded = name.strip().casefold()
        return next((m for m in self.metrics() if m.name.casefold() == folded), None)

    def metric_by_id(self, group: int, metric_id: int) -> Metric | None:
        return next((m for m in self.metrics() if (m.group, m.id) == (group, metric_id)), None)

    # --- a profiling run ---------------------------------------------------------------------

    @abstractmethod
    def enable(self, metric: Metric, boundary: Boundary) -> None:
        """Ask for a metric at a boundary; raises MetricError when it cannot be."""

    @abstractmethod
    def generate_passes(self) -> int:
        """Split the enabled metrics into passes; returns how many replays this backend needs."""

    def describe_passes(self) -> list[str]:
        """One line per pass: which metrics at which boundaries, and why it is separate."""
        return [f"pass {i + 1}" for i in range(self.generate_passes())]

    @abstractmethod
    def begin_pass(self, index: int, columns: dict[tuple[Metric, Boundary], Column]) -> None:
        """Start pass `index` (0-based); `columns` get this pass's values, one row per event."""

    @abstractmethod
    def end_pass(self) -> None:
        """Finish the pass: every value measured in it is in its column afterwards."""

    def pause_pass(self) -> None:  # noqa: B027 - optional hook: most backends need nothing
        """(callbacks) The current context is about to change: finish or set aside what is
        in flight."""

    def continue_pass(self) -> None:  # noqa: B027 - optional hook
        """(callbacks) A context is current again (maybe another one): carry on measuring."""

    # --- events: natively, or with callbacks ------------------------------------------------

    def native_events(self, boundary: Boundary) -> NativeEvents | None:
        """What the replay loop measures itself around every event at `boundary` in the
        current pass (`native_results` gets it), or None when this backend measures with
        callbacks. A backend answers alike for every boundary of a pass."""
        return None

    def native_columns(self, boundary: Boundary) -> list[tuple[Column, str, str | None]]:
        """(natively) Where `native_results` puts each value of an event at `boundary` in
        the current pass: the column, and the record's field (`EventRecords.FIELDS`), less a
        second field or None; so that a driver crash keeps the values read but not moved
        yet (`retrace.profile.checkpoint.EventRing`). [] if the backend cannot say."""
        return []

    def native_results(self, boundary: Boundary, first_event: int, events: EventRecords) -> None:
        """What the loop measured for events `first_event`.. at `boundary`, in order: the
        loop's records (`retrace.replay.program.EventRecords`: ns since the pass began,
        samples, bytes; `NOT_MEASURED` where nothing was)."""
        raise NotImplementedError(f"{self.name} measures its events with callbacks")

    def begin_query(self, boundary: Boundary, event: int) -> None:
        """(callbacks) Event number `event` at `boundary` starts (numbered from 0 in each
        pass)."""
        raise NotImplementedError(f"{self.name} measures its events natively")

    def end_query(self, boundary: Boundary, event: int) -> None:
        """(callbacks) Event number `event` at `boundary` ends."""
        raise NotImplementedError(f"{self.name} measures its events natively")

    def pass_boundaries(self, index: int) -> frozenset[Boundary]:
        """The boundaries pass `index` measures (the driver brackets only those)."""
        return frozenset(Boundary)
