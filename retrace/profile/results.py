"""What a profile measured, and how it becomes tables, from the profiler or from its store.

The profiler replays in a child process (`retrace.replay.contain`), so the tables are
written by a parent that never saw the `Profiler`: everything the tables need
besides the values (which metrics, in which column, function names, frame
counts) goes into the store's manifest as JSON (`Profile.to_json`) and comes
back with `Profile.from_json`. The same `tables` serves both sides.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

from retrace.vocabulary import Boundary, Kind, Metric, NumType
from retrace.writer.store import INT64, Column, Store, missing_value
from retrace.writer.tsv import Table, Values, read_rows

if TYPE_CHECKING:  # (imported where tables are made: the replaying child makes none)
    import numpy as np

META_FIELDS = ("call_no", "name", "program", "frame")  # per-event metadata of call tables
CONTEXT = "context"  # per event too: its context's number in `Profile.contexts` (not in the TSV)


def column_key(metric: Metric, boundary: Boundary, suffix: str = "") -> str:
    """The store key of a metric's values at a boundary (`suffix`: one run, one statistic)."""
    return f"{metric.backend}.{metric.group}.{metric.id}.{boundary.name}{suffix}"


def meta_key(boundary: Boundary, what: str) -> str:
    """The store key of per-event metadata (call_no, name, program, frame) of a boundary."""
    return f"events.{boundary.name}.{what}"


def meta_column(store: Store, boundary: Boundary, what: str) -> Column:
    """The store column of one per-event metadata field (`META_FIELDS`, `CONTEXT`)."""
    return store.column(meta_key(boundary, what), INT64)


class Profile:
    """What a run measured: columns per boundary, in output order, plus event metadata.
    (A plain class: a dataclass costs a millisecond to define, in every profile's start-up.)"""

    def __init__(
        self,
        *,
        names: list[str] | None = None,
        frames: int = 0,
        frame_events: int = 0,
        window: tuple[int, int | None] = (0, None),
        calls: str | None = None,
        loops: int = 0,
        contexts: list[str] | None = None,
    ) -> None:
        self.metrics: dict[Boundary, list[Metric]] = {}
        self.columns: dict[tuple[Metric, Boundary], Column] = {}
        self.names = names if names is not None else []
        self.frames = frames  # frames that ended with a SwapBuffers
        self.frame_events = frame_events  # rows of the frames table: those and the partial one
        # with --stats: per measured column, (derived metric, column) for min, p95 and stddev
        self.stats: dict[tuple[Metric, Boundary], list[tuple[Metric, Column]]] = {}
        # with --repeat/--warmup: per measured column, the columns of its measured runs
        self.runs: dict[tuple[Metric, Boundary], list[Column]] = {}
        self.window = window  # --frames: the frames measured (0-based)
        self.calls = calls  # --calls: the call set whose rows the call tables keep
        self.loops = loops  # --loop: the tables hold this many loops of the window's frames
        self.contexts = contexts if contexts is not None else []  # context n's: contexts[n - 1]

    def measured_nothing(self) -> bool:
        """Whether the window holds no frame of the trace (--frames or --calls past its end)."""
        first, last = self.window
        if self.loops:
            return False
        return first >= self.frame_events or (last is not None and last < first)

    def loops_measured(self, store: Store) -> int:
        """--loop: the loops whose every event a column holds: `loops`, unless the profile
        was interrupted in them (or loops until interrupted)."""
        import numpy as np

        first, last = self.window
        counts = []
        for (_, boundary), column in self.columns.items():
            if boundary == Boundary.FRAME:
                per_loop = self.frames_per_loop
            else:  # the rows stored once, of the frames looped
                frames = store.column(meta_key(boundary, "frame"), INT64).view()
                per_loop = int(np.count_nonzero((frames >= first) & (frames <= (last or 0))))
            if per_loop:
                counts.append(len(column) // per_loop)
        return min(max(counts, default=0), self.loops) if self.loops > 0 else max(counts, default=0)

    @property
    def frames_per_loop(self) -> int:
        first, last = self.window
        return 0 if last is None else last - first + 1

    @property
    def repeats(self) -> int:
        """Measured runs kept per column (0 without --repeat or --warmup)."""
        return max(map(len, self.runs.values()), default=0)

    def tables(self, store: Store, run: int | None = None) -> list[Table]:
        """The measured tables, ready for `MetricWriter`; columns not measured read '-'.
        With `run`: the values of that measured run (0-based) instead of their median.
        (numpy is imported only for a part of the tables: a TSV of them all needs none.)"""
        tables = []
        nothing = array("q")
        for boundary, chosen in self.metrics.items():
            metrics: list[Metric] = []
            values: list[Values] = []
            for m in chosen:
                metrics.append(m)
                if run is None:
                    values.append(self.columns.get((m, boundary), nothing))
                    for derived, column in self.stats.get((m, boundary), ()):
                        metrics.append(derived)
                        values.append(column)
                else:
                    runs = self.runs.get((m, boundary), [])
                    values.append(runs[run] if run < len(runs) else nothing)
            tables.append(self._table(store, boundary, metrics, values))
        return tables

    def _table(
        self, store: Store, boundary: Boundary, metrics: list[Metric], values: list[Values]
    ) -> Table:
        """One table, of the frames measured (`window`) only: their rows, frames counted
        from the first of them."""
        first, last = self.window
        if boundary == Boundary.FRAME:
            if self.loops:  # the loops' frames, one after the other, numbered from 0
                return Table(boundary, metrics, values, rows=self.loops * self.frames_per_loop)
            stop = self.frame_events if last is None else min(last + 1, self.frame_events)
            window = [_cut(v, first, stop) for v in values]
            return Table(boundary, metrics, window, rows=max(stop - first, 0))
        meta = {w: meta_column(store, boundary, w) for w in META_FIELDS}
        start, stop = 0, min(len(meta[w]) for w in META_FIELDS)
        meta[CONTEXT] = meta_column(store, boundary, CONTEXT)
        if (first, last) != (0, None):  # the events of frames first..last: a run of rows
            import numpy as np

            frames = meta["frame"].view()[:stop]
            if last is not None:
                stop = int(np.searchsorted(frames, last + 1, "left"))
            start = min(int(np.searchsorted(frames, first, "left")), stop)
        ended = max((self.frames if last is None else min(last + 1, self.frames)) - first, 0)
        if self.calls is not None or self.loops:  # rows picked, or repeated: copies
            return self._picked(boundary, metrics, values, meta, start, stop, ended)
        cut = {w: _cut(meta[w], start, stop) for w in META_FIELDS}
        return Table(
            boundary,
            metrics,
            [_cut(v, start, stop) for v in values],
            call_nos=cut["call_no"],
            programs=cut["program"],
            names=cut["name"],
            name_table=self.names,
            frame_of_event=read_rows(meta["frame"], start, stop) - first if first else cut["frame"],
            frames_ended=ended,
            rows=stop - start,
            contexts=_cut(meta[CONTEXT], start, stop),
        )

    def _picked(
        self,
        boundary: Boundary,
        metrics: list[Metric],
        values: list[Values],
        meta: dict[str, Column],
        start: int,
        stop: int,
        ended: int,
    ) -> Table:
        """The table of the rows among [start, stop) whose calls `calls` selects (all without
        it); with `loops`, those rows once per loop, whose values were numbered from the
        first loop's first event on (so many events a loop)."""
        import numpy as np

        from retrace.profile.window import selected
        from retrace.trace.callset import CallSet

        rows = np.arange(start, stop)
        if self.calls is not None:
            nos, ids = (read_rows(meta[w], start, stop) for w in ("call_no", "name"))
            rows = rows[selected(CallSet.parse(self.calls), nos, ids, self.names)]
        frames = _take(meta["frame"], rows) - self.window[0]
        contexts = _take(meta[CONTEXT], rows)
        at = rows
        if self.loops:
            loop = np.repeat(np.arange(self.loops), len(rows))
            at = np.tile(rows - start, self.loops) + (stop - start) * loop
            frames = np.tile(frames, self.loops) + self.frames_per_loop * loop
            contexts = np.tile(contexts, self.loops)
            rows = np.tile(rows, self.loops)
            ended = self.loops * self.frames_per_loop
        return Table(
            boundary,
            metrics,
            [_take(v, at) for v in values],
            call_nos=_take(meta["call_no"], rows),
            programs=_take(meta["program"], rows),
            names=_take(meta["name"], rows),
            name_table=self.names,
            frame_of_event=frames,
            frames_ended=ended,
            rows=len(rows),
            contexts=contexts,
        )

    def to_json(self) -> dict[str, Any]:
        """The description the parent needs to write the tables from the store."""
        return {
            "tables": [
                {
                    "boundary": boundary.name,
                    "metrics": [self._metric_json(m, boundary) for m in chosen],
                }
                for boundary, chosen in self.metrics.items()
            ],
            "names": list(self.names),
            "frames": self.frames,
            "frame_events": self.frame_events,
            "window": list(self.window),
            "calls": self.calls,
            "loops": self.loops,
            "contexts": list(self.contexts),
        }

    def _metric_json(self, metric: Metric, boundary: Boundary) -> dict[str, Any]:
        column = self.columns.get((metric, boundary))
        return {
            "metric": {
                **metric.fields(),
                "num_type": metric.num_type.value,
                "kind": metric.kind.value,
            },
            "column": column.key if column is not None else None,
            "stats": [
                {"name": derived.name, "column": c.key}
                for derived, c in self.stats.get((metric, boundary), ())
            ],
            "runs": [c.key for c in self.runs.get((metric, boundary), ())],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], store: Store) -> Profile:
        """A profile whose metrics are rebuilt from their description (for writing only)."""
        first, last = data.get("window", (0, None))
        profile = cls(
            names=list(data["names"]),
            frames=data["frames"],
            frame_events=data["frame_events"],
            window=(first, last),
            calls=data.get("calls"),
            loops=data.get("loops", 0),
            contexts=list(data.get("contexts", ())),
        )
        for table in data["tables"]:
            boundary = Boundary[table["boundary"]]
            chosen = profile.metrics.setdefault(boundary, [])
            for entry in table["metrics"]:
                fields = dict(entry["metric"])
                fields["num_type"] = NumType(fields["num_type"])
                fields["kind"] = Kind(fields["kind"])
                metric = Metric(**fields)
                chosen.append(metric)
                profile.restore(metric, boundary, entry, store)
        return profile

    def restore(
        self, metric: Metric, boundary: Boundary, entry: dict[str, Any], store: Store
    ) -> None:
        """Take back the columns `entry` (from `to_json`) names for `metric`, if stored."""
        if entry["column"] is not None and entry["column"] in store:
            self.columns[metric, boundary] = store[entry["column"]]
        stats = [
            (metric.replace(name=s["name"], num_type=NumType.DOUBLE), store[s["column"]])
            for s in entry["stats"]
            if s["column"] in store
        ]
        if stats:
            self.stats[metric, boundary] = stats
        runs = [store[key] for key in entry.get("runs", ()) if key in store]
        if runs:
            self.runs[metric, boundary] = runs


def _cut(values: Values, start: int, stop: int) -> Values:
    """Rows from `start` on of a column or array (up to `stop`, as far as it holds them); the
    column itself from row 0, which the writer reads a block at a time up to the table's
    rows, so a whole table is never copied."""
    return values if start == 0 else read_rows(values, start, max(start, stop))


def _take(values: Values, rows: np.ndarray) -> np.ndarray:
    """These rows of a column or array; those it does not hold read missing."""
    import numpy as np

    data = values.view() if isinstance(values, Column) else np.asarray(values)
    inside = rows < len(data)
    if inside.all():
        return data[rows]
    taken = np.full(len(rows), missing_value(data.dtype), data.dtype)
    taken[inside] = data[rows[inside]]
    return taken
