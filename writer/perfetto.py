"""A profile as a Perfetto timeline (`--perfetto FILE`, `retrace export --perfetto`).

The file is a native Perfetto trace: TracePackets of TrackEvents, built with the
protobuf classes the `perfetto` package ships (`pip install 'retrace-gl[perfetto]'`)
and streamed one packet at a time, so it opens in ui.perfetto.dev and in
trace_processor. Its tracks, under one process named after the trace:

* ``replay (CPU)``, a thread track: a slice per frame (``frame N``) from the
  frames table's CPU Start/Duration, and nested in it a slice per call (the
  calls table) or per draw call (the draw-calls table, when no calls table has
  CPU times), named after the function. Args: ``call_no``, ``program``, and
  every metric of the row, from the calls and draw-calls tables alike.
* ``GPU``: the same for GPU Start/Duration (frames, and draw calls or calls
  nested): the GPU timeline, as render-stage tracks show it. GPU times are
  relative to the first GPU timestamp the replay read, CPU times to the start
  of the pass, so the two tracks share their origin, not their clock.
* ``GPU busy``, where a calls or draw-calls table has GPU Start and GPU Busy: a
  slice per call that made the GPU work, from its GPU Start and as long as its
  busy time; the gaps between them are the GPU waiting (for the replayer, mostly),
  each slice's ``idle before`` arg the gap before it.
* a counter track per frame metric but the CPU and GPU Start timestamps (CPU/GPU
  Duration, GPU Busy/Idle, Pixels Drawn, VSIZE/RSS, pipeline and vendor counters),
  one value per frame at its start, named ``<metric> (<unit>)``.

The replay runs every context of the trace on one thread; the metadata says which
context each row of the call tables ran in (`contexts`; the TSV has no column
for it). When the calls nested ran
in more than one context, each context has a CPU and a GPU track of its own
(``context 1 (GL 4.5 core) CPU``, ``... GPU``) with its calls, nested in a slice
per frame that spans them, and ``replay (CPU)`` and ``GPU`` keep the frames
table's frame slices. Without that metadata (a TSV of glretrace's) there is one
CPU and one GPU track.

A slice must lie within its parent and end before its sibling starts, or the
importer cuts it. Times measured in one pass do nest; medians of repeated runs
(`--repeat`) and metrics measured in different passes need not, so frames are
widened to cover their calls and a call that starts before the one before it
ended starts where that one ended. The args keep the measured values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from retrace.errors import RetraceError, pip_install
from retrace.vocabulary import Boundary
from retrace.writer.arrays import TABLE_NAMES
from retrace.writer.atomic import replaced
from retrace.writer.events import Events, row_contexts

SEQUENCE = 1  # every packet comes from one writer
PROCESS, CPU_TRACK, GPU_TRACK, BUSY_TRACK = 1, 2, 3, 4
COUNTER_TRACKS = 100  # the first counter track's uuid
CONTEXT_TRACKS = 1_000_000  # context n's CPU track is this + 2n, its GPU track the next
PID, TID = 1, 1
SLICE_BEGIN, SLICE_END, COUNTER = 1, 2, 4  # TrackEvent.Type


def protos() -> Any:
    """The trace format's protobuf module; raises `RetraceError` naming the extra to install."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:
        raise RetraceError(
            f"--perfetto needs the perfetto package: {pip_install('perfetto')}"
        ) from None
    return perfetto_trace_pb2


def write_perfetto(path: str, tables: Iterable[Any], metadata: dict[str, Any]) -> None:
    """Write the timeline of `tables` (`Table`s or `Events`) to `path`; `metadata` (the
    profile's, `retrace.profile.metadata`) names the process, tracks and units."""
    pb = protos()
    events = {
        t.boundary: t if isinstance(t, Events) else Events.from_table(t)
        for t in tables
        if (t.metrics if not isinstance(t, Events) else t.metrics)
    }
    timeline = Timeline(events, _columns(metadata), metadata.get("contexts") or {})
    with replaced(path, "wb") as stream:
        for packet in timeline.packets(pb, metadata):
            _write(stream, pb, packet)


def _write(stream: IO[bytes], pb: Any, packet: Any) -> None:
    """One packet, framed as field 1 of a `Trace` message (what a trace file is)."""
    trace = pb.Trace()
    trace.packet.append(packet)
    stream.write(trace.SerializeToString())


def _columns(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Metric name -> its column facts (unit, kind...), over every table of the metadata."""
    found: dict[str, dict[str, Any]] = {}
    for columns in (metadata.get("tables") or {}).values():
        for column in columns:
            found.setdefault(column["name"], column)
    return found


class Timeline:
    """The slices and counters of one profile, placed and nested."""

    def __init__(
        self,
        events: dict[Boundary, Events],
        columns: dict[str, dict[str, Any]],
        contexts: dict[str, Any],
    ) -> None:
        """`contexts`: the metadata's (`names`, and per call table the `rows` each context
        ran, `context_runs`)."""
        self.events = events
        self.columns = columns
        runs = contexts.get("rows") or {}
        self._contexts = {
            b: row_contexts(runs.get(TABLE_NAMES[b], []), len(t)) for b, t in events.items()
        }
        names: list[str] = list(contexts.get("names") or [])
        nested = [t for t in (self._nested("CPU"), self._nested("GPU")) if t is not None]
        used = sorted({int(n) for t in nested for n in np.unique(self._context_of(t))} - {0})
        # (name, CPU layout, GPU layout) per context, when the calls ran in several
        self.contexts: list[tuple[str, Layout | None, Layout | None]] = []
        if len(used) > 1:
            for n in used:
                name = names[n - 1] if n <= len(names) else f"context {n}"
                cpu, gpu = (self._layout(c, n, frames=False) for c in ("CPU", "GPU"))
                self.contexts.append((name, cpu, gpu))
        calls = not self.contexts  # the calls go on the context tracks, if any
        self.cpu = self._layout("CPU", calls=calls)
        self.gpu = self._layout("GPU", calls=calls)
        if self.cpu is None and not any(cpu is not None for _, cpu, _ in self.contexts):
            raise RetraceError(
                'no table has "CPU Start" and "CPU Duration": nothing to place on a timeline'
            )

    def _timed(self, boundary: Boundary, clock: str) -> Events | None:
        table = self.events.get(boundary)
        if table is None or table.get(f"{clock} Start") is None:
            return None
        return table if table.get(f"{clock} Duration") is not None else None

    def _nested(self, clock: str) -> Events | None:
        """The table whose slices nest in the frames on `clock`: the calls', else the draw
        calls'."""
        return self._timed(Boundary.CALL, clock) or self._timed(Boundary.DRAWCALL, clock)

    def _layout(
        self, clock: str, context: int = 0, frames: bool = True, calls: bool = True
    ) -> Layout | None:
        """Frames and the calls nested in them on one clock ("CPU" or "GPU"): the calls
        table's (else the draw calls') slices made to follow one another, each frame
        widened to cover its calls and starting where the frame before it ended. None
        when no table has that clock's Start and Duration. `context`: only the calls
        that ran in it (0: all); `frames`: whether the frames table places frames (else
        each spans its calls); `calls`: whether calls are nested."""
        frames_table = self._timed(Boundary.FRAME, clock) if frames else None
        nested = self._nested(clock) if calls else None
        if nested is not None and context:
            nested = nested.take(np.flatnonzero(self._context_of(nested) == context))
        return self._placed(clock, frames_table, nested)

    def _context_of(self, calls: Events) -> np.ndarray:
        """The context number each row of a call table ran in (0: the metadata does not
        say)."""
        return self._contexts[calls.boundary]

    def _placed(self, clock: str, frames: Events | None, calls: Events | None) -> Layout | None:
        if frames is None and calls is None:
            return None
        count = len(self.events[Boundary.FRAME]) if Boundary.FRAME in self.events else 0
        if calls is not None and len(calls):
            count = max(count, int(calls.frames[-1]) + 1)
        spans = np.full((count, 2), np.nan)
        if frames is not None:
            start = frames.column(f"{clock} Start")
            spans[: len(frames), 0] = start
            spans[: len(frames), 1] = start + np.nan_to_num(frames.column(f"{clock} Duration"))
        begin = end = np.empty(0)
        by_frame = np.zeros(count + 1, np.int64)
        if calls is not None:
            begin = calls.column(f"{clock} Start").copy()
            end = begin + np.maximum(np.nan_to_num(calls.column(f"{clock} Duration")), 0.0)
            by_frame = np.searchsorted(calls.frames, np.arange(count + 1))
        cursor = -np.inf
        for f in range(count):
            lo, hi = int(by_frame[f]), int(by_frame[f + 1])
            ok = lo + np.flatnonzero(~np.isnan(begin[lo:hi]))
            first, last = spans[f]
            if ok.size:
                first = np.fmin(first, begin[ok[0]])
            if np.isnan(first):
                continue  # neither the frame nor any of its calls has a time
            first = max(first, cursor)
            if ok.size:
                b = np.maximum(begin[ok], first)
                e = np.maximum(end[ok], b)
                previous = np.maximum.accumulate(np.r_[first, e[:-1]])
                b = np.maximum(b, previous)
                e = np.maximum.accumulate(np.maximum(e, b))
                begin[ok], end[ok] = b, e
                last = np.fmax(last, e[-1])
            last = first if np.isnan(last) else max(last, first)
            spans[f] = first, last
            cursor = last
        return Layout(spans, calls, begin, end, by_frame)

    # --- packets -----------------------------------------------------------------------------

    def packets(self, pb: Any, metadata: dict[str, Any]) -> Iterator[Any]:
        """Track descriptors, then the slices of each track, then the counters."""
        trace = os.path.basename((metadata.get("trace") or {}).get("path", "")) or "trace"
        renderer = (metadata.get("gl") or {}).get("renderer", "")
        first = pb.TracePacket()
        first.trusted_packet_sequence_id = SEQUENCE
        first.sequence_flags = 1  # SEQ_INCREMENTAL_STATE_CLEARED
        first.track_descriptor.uuid = PROCESS
        first.track_descriptor.process.pid = PID
        first.track_descriptor.process.process_name = f"retrace {trace}"
        yield first
        if self.cpu is not None:
            yield self._descriptor(pb, CPU_TRACK, thread="replay (CPU)")
        if self.gpu is not None:
            yield self._descriptor(pb, GPU_TRACK, name=f"GPU {renderer}".strip())
        busy = self._busy()
        if busy is not None:
            yield self._descriptor(pb, BUSY_TRACK, name="GPU busy")
        tracks = [(CPU_TRACK, self.cpu), (GPU_TRACK, self.gpu)]
        for i, (name, cpu, gpu) in enumerate(self.contexts):
            for uuid, layout, clock in ((2 * i, cpu, "CPU"), (2 * i + 1, gpu, "GPU")):
                if layout is not None:
                    yield self._descriptor(pb, CONTEXT_TRACKS + uuid, name=f"{name} {clock}")
                    tracks.append((CONTEXT_TRACKS + uuid, layout))
        counters = self._counters()
        for i, (name, _values) in enumerate(counters):
            yield self._descriptor(pb, COUNTER_TRACKS + i, name=name, counter=True)
        for uuid, layout in tracks:
            if layout is not None:
                yield from self._slices(pb, uuid, layout)
        if busy is not None:
            yield from self._busy_slices(pb, *busy)
        if self.cpu is None:
            return  # (no frames table: no counters)
        starts = self.cpu.frames[:, 0]
        for i, (_name, values) in enumerate(counters):
            yield from self._counter_values(pb, COUNTER_TRACKS + i, starts, values)

    def _busy(self) -> tuple[Events, np.ndarray, np.ndarray, np.ndarray] | None:
        """The GPU work of the calls table (else the draw calls'): the rows that made the GPU
        work, each placed from its GPU Start for its GPU Busy time and made to follow the
        one before (medians and passes need not nest); None without those columns."""
        for boundary in (Boundary.CALL, Boundary.DRAWCALL):
            table = self.events.get(boundary)
            start = table.get("GPU Start") if table is not None else None
            busy = table.get("GPU Busy") if table is not None else None
            if table is None or start is None or busy is None:
                continue
            rows = np.flatnonzero((np.nan_to_num(busy) > 0) & ~np.isnan(start))
            begin, end = start[rows], start[rows] + busy[rows]
            if rows.size:
                begin = np.maximum(begin, np.r_[-np.inf, np.maximum.accumulate(end)[:-1]])
                end = np.maximum.accumulate(np.maximum(end, begin))
            return table, rows, begin, end
        return None

    def _busy_slices(
        self, pb: Any, table: Events, rows: np.ndarray, begin: np.ndarray, end: np.ndarray
    ) -> Iterator[Any]:
        busy = table.column("GPU Busy")
        gaps = begin - np.r_[begin[:1], end[:-1]]
        for i, row in enumerate(rows.tolist()):
            packet = self._event(pb, BUSY_TRACK, begin[i], SLICE_BEGIN, table.names[row])
            for key, value in (
                ("call_no", int(table.call_nos[row])),
                ("GPU Busy", int(busy[row])),
                ("idle before", int(gaps[i])),
            ):
                annotation = packet.track_event.debug_annotations.add()
                annotation.name, annotation.int_value = key, value
            yield packet
            yield self._event(pb, BUSY_TRACK, end[i], SLICE_END)

    def _descriptor(
        self, pb: Any, uuid: int, name: str = "", thread: str = "", counter: bool = False
    ) -> Any:
        packet = pb.TracePacket()
        packet.trusted_packet_sequence_id = SEQUENCE
        track = packet.track_descriptor
        track.uuid = uuid
        if thread:
            track.thread.pid, track.thread.tid, track.thread.thread_name = PID, TID, thread
        else:
            track.parent_uuid = PROCESS
            track.name = name
        if counter:
            track.counter.SetInParent()
        return packet

    def _counters(self) -> list[tuple[str, np.ndarray]]:
        """(track name, value per frame) of every frame metric but timestamps."""
        frames = self.events.get(Boundary.FRAME)
        if frames is None:
            return []
        out = []
        for metric in frames.metrics:
            facts = self.columns.get(metric, {})
            if facts.get("kind") == "timestamp" or metric in ("CPU Start", "GPU Start"):
                continue  # a position in time, which the slices show
            unit = facts.get("unit", "")
            out.append((f"{metric} ({unit})" if unit else metric, frames.values[metric]))
        return out

    @staticmethod
    def _event(pb: Any, track: int, ts: float, kind: int, name: str = "") -> Any:
        packet = pb.TracePacket()
        packet.trusted_packet_sequence_id = SEQUENCE
        packet.timestamp = int(ts)
        event = packet.track_event
        event.type = kind
        event.track_uuid = track
        if name:
            event.name = name
        return packet

    def _slices(self, pb: Any, track: int, layout: Layout) -> Iterator[Any]:
        """Frame slices with their calls nested, in time order."""
        calls = layout.calls
        args = self._call_args(calls) if calls is not None else []
        for f, (first, last) in enumerate(layout.frames.tolist()):
            if np.isnan(first):
                continue
            yield self._event(pb, track, first, SLICE_BEGIN, f"frame {f}")
            if calls is not None:
                lo, hi = int(layout.by_frame[f]), int(layout.by_frame[f + 1])
                for i in range(lo, hi):
                    if np.isnan(layout.begin[i]):
                        continue
                    begin = self._event(pb, track, layout.begin[i], SLICE_BEGIN, calls.names[i])
                    for key, value in args[i]:
                        annotation = begin.track_event.debug_annotations.add()
                        annotation.name = key
                        if value.is_integer():
                            annotation.int_value = int(value)
                        else:
                            annotation.double_value = value
                    yield begin
                    yield self._event(pb, track, layout.end[i], SLICE_END)
            yield self._event(pb, track, last, SLICE_END)

    def _call_args(self, calls: Events) -> list[list[tuple[str, float]]]:
        """Per row of `calls`: call number, program, then every metric measured for that
        call in the calls and the draw-calls tables (missing ones left out; a draw-calls
        column beside a calls table is prefixed "draw ")."""
        columns: list[tuple[str, np.ndarray]] = [
            ("call_no", calls.call_nos.astype(np.float64)),
            ("program", calls.programs.astype(np.float64)),
        ]
        for boundary in (Boundary.CALL, Boundary.DRAWCALL):
            table = self.events.get(boundary)
            if table is None:
                continue
            if table is calls:
                columns += list(table.values.items())
                continue
            # the other table's rows, matched by call number (both are in call order)
            where = np.searchsorted(table.call_nos, calls.call_nos)
            where = np.minimum(where, len(table.call_nos) - 1) if len(table.call_nos) else where
            found = np.zeros(len(calls), bool)
            if len(table.call_nos):
                found = table.call_nos[where] == calls.call_nos
            for metric, values in table.values.items():
                picked = values[where] if len(values) else np.full(len(calls), np.nan)
                columns.append((f"draw {metric}", np.where(found, picked, np.nan)))
        rows: list[list[tuple[str, float]]] = [[] for _ in range(len(calls))]
        for key, values in columns:
            for i, value in zip(
                np.flatnonzero(~np.isnan(values)).tolist(),
                values[~np.isnan(values)].tolist(),
                strict=True,
            ):
                rows[i].append((key, value))
        return rows

    def _counter_values(
        self, pb: Any, track: int, starts: np.ndarray, values: np.ndarray
    ) -> Iterator[Any]:
        for ts, value in zip(starts.tolist(), values.tolist(), strict=False):
            if np.isnan(ts) or np.isnan(value):
                continue
            packet = self._event(pb, track, ts, COUNTER)
            if value.is_integer():
                packet.track_event.counter_value = int(value)
            else:
                packet.track_event.double_counter_value = value
            yield packet


@dataclass
class Layout:
    """One clock's slices: `frames` (frames, 2) start and end, NaN where unknown;
    `calls` the table nested in them with each row's `begin` and `end`; the rows of
    frame f are `by_frame[f]:by_frame[f + 1]`."""

    frames: np.ndarray
    calls: Events | None
    begin: np.ndarray
    end: np.ndarray
    by_frame: np.ndarray
