"""glretrace's legacy profiler: ``--pcpu --pgpu --ppd --pmem`` and ``--pframe-times``.

The legacy options print one space-separated ``call`` line per profiled call
(13 tokens: ``call no gpu_start gpu_dura cpu_start cpu_dura vsize_start
vsize_dura rss_start rss_dura pixels program name``), a ``frame_end`` line after
every SwapBuffers, and the header line first; apitrace's ``profileshader.py``
and qapitrace read that text. Here the measuring is done by the pass driver
(`Profiler`) with the ``opengl`` backend, and the lines are written afterwards
from its result store, block by block, so memory does not grow with the trace:

=================  ==========================================================
option             what is measured
=================  ==========================================================
``--pcpu``         CPU Start, CPU Duration per call (CALL boundary)
``--pmem``         VSIZE/RSS Start and Duration per call (CALL boundary)
``--pgpu``         GPU Start, GPU Duration per draw call (DRAWCALL boundary)
``--ppd``          Pixels Drawn per draw call (DRAWCALL boundary)
=================  ==========================================================

Which lines glretrace prints, read from its source (``glretrace.py``,
``glretrace_main.cpp``, ``trace_profiler.cpp``) and checked against Debian's
glretrace 11.1: *every* call it profiles gets a line whichever legacy option is
on, even with only ``--pgpu``, ``--ppd``, ``--pmem`` or ``--pframe-times`` (the
columns of options that are off print ``0``). Draw calls carry GPU and pixel
values; the other calls print ``0 0`` for the GPU columns and, with ``--ppd``,
``-1`` pixels (``0`` without it). Only ``--pcpu`` filters: a call whose CPU
duration is below ``--min-cpu-time`` ns (default 1000) gets no line.
``frame_end`` lines are printed whatever was filtered. The calls profiled are
the driver's call events, the same set glretrace profiles (no window-system
calls, nothing compiled into a display list, a glBegin..glEnd block as one
``glBegin`` draw). When no call-boundary option is on, CPU Duration is still
measured per call (it carries the call rows through the driver) and printed as
``0``; glretrace likewise brackets every call with queries in that case.

``--pframe-times`` adds ``rendering_finished <ns>`` after each ``frame_end``:
at every SwapBuffers the frame hook calls glFinish and reads the clock. The
replay renders into pbuffers, whose swap is a no-op (EGL), so finishing in the
frame hook (which runs just before the swap) is finishing the frame.

Deliberate differences from glretrace:

* ``--min-cpu-time`` only sets the threshold. glretrace's option switch lacks a
  ``break`` there, so its value is also merged into ``--ignore-calls`` (with
  ``--min-cpu-time=0`` it skips call 0); retrace does not skip any call.
* The calls after the last SwapBuffers get their lines. glretrace measures them
  but loses them: it prints pending calls only at frame ends and context
  switches, and its end of replay (``finishRendering``) does not flush them
  (e.g. calls 2544-2547 of glmark2-build-clientarrays.trace). No ``frame_end``
  follows them, as in the ``--pcalls`` table.
* Lines are written after the replay, not streamed while it runs; the text is
  the same.
* CPU times always come from the CPU clock (CLOCK_MONOTONIC). glretrace reads
  ``GL_TIMESTAMP`` instead when ``--pgpu`` is on, which puts CPU and GPU starts
  in one domain at the price of a GL round trip per call. Start times are
  relative to the pass start (CPU) and to the first GPU timestamp (GPU);
  glretrace uses one base for both, taken at the first context.
* ``rendering_finished`` is the raw CLOCK_MONOTONIC value in ns (glretrace's
  ``os::getTime()``), also with ``--pgpu``, where glretrace prints a
  ``GL_TIMESTAMP``. It is printed at every frame end, including frames ended by
  glFrameTerminatorGREMEDY (glretrace only prints it for SwapBuffers).
* Memory columns are bytes for VSIZE and RSS (glretrace: RSS in pages; Debian's
  build has no procps and prints zeros). Start values are absolute, as in
  glretrace.
* A cell with no data (a metric the context cannot measure, e.g. GPU times on
  OpenGL ES; the driver warns on stderr) prints ``0``: the legacy format has no
  ``-`` cell.
* Pixels of glxgears-like frame 0: glretrace draws it before its X window has
  a size (0 pixels); retrace sizes drawables from the trace first and counts
  the real pixels.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

import numpy as np

from retrace.backends.opengl import (
    CPU_DURATION,
    CPU_START,
    GPU_DURATION,
    GPU_START,
    PIXELS,
    RSS_DURATION,
    RSS_START,
    VSIZE_DURATION,
    VSIZE_START,
)
from retrace.profile.driver import ProfileError, Profiler
from retrace.profile.options import LegacyOptions, ProfileOptions
from retrace.replay.replayer import Replayer, ReplayListener
from retrace.vocabulary import Boundary, Metric
from retrace.writer.store import Column, Store, missing_mask
from retrace.writer.tsv import LegacyWriter, Table

# Rows read from the store at a time when writing the lines.
BLOCK_ROWS = 1 << 14

_CPU = (CPU_START, CPU_DURATION)
_MEMORY = (VSIZE_START, VSIZE_DURATION, RSS_START, RSS_DURATION)
_GPU = (GPU_START, GPU_DURATION)
_STAMPS = "legacy.rendering_finished"


def legacy_selections(*, cpu: bool, gpu: bool, pixels: bool, memory: bool) -> dict[Boundary, str]:
    """The opengl metrics `Profiler` measures for a combination of legacy options.

    The call boundary is always selected: its table carries the call rows.
    """
    calls = [m for on, group in ((cpu, _CPU), (memory, _MEMORY)) if on for m in group]
    draws = [m for on, group in ((gpu, _GPU), (pixels, (PIXELS,))) if on for m in group]
    chosen = {Boundary.CALL: _spec(calls or [CPU_DURATION])}
    if draws:
        chosen[Boundary.DRAWCALL] = _spec(draws)
    return chosen


def _spec(metrics: list[Metric]) -> str:
    return "opengl: " + ", ".join(m.name for m in metrics)


def run_legacy(
    trace: str,
    legacy: LegacyOptions,
    *,
    out: TextIO = sys.stdout,
    progress: TextIO | None = None,
    store_dir: str | None = None,
    keep_store: bool = False,
    strict: bool = False,
    store: Store | None = None,
) -> None:
    """Profile `trace` and print glretrace's legacy lines to `out`.

    Header, then per call event a ``call`` line (see the module docstring),
    ``frame_end`` after each ended frame (followed by ``rendering_finished`` with
    `legacy.frame_times`), and last ``Rendered N frames in X secs, average of Y fps``,
    as glretrace prints when profiling. `progress` gets the driver's pass lines.
    Values go to `store`, else to a new store in `store_dir`.
    Raises `RetraceError` (the store is kept and named when a pass failed after
    others finished); damage found in the trace is raised after the output.
    """
    profiler = Profiler(
        trace,
        ProfileOptions(
            legacy_selections(
                cpu=legacy.cpu, gpu=legacy.gpu, pixels=legacy.pixels, memory=legacy.memory
            )
        ),
        store_dir=store_dir,
        keep_store=keep_store,
        progress=progress,
        store=store,
    )
    try:
        stamps = _time_frames(profiler) if legacy.frame_times else None
        profiler.run()
        writer = LegacyWriter(
            out,
            gpu=legacy.gpu,
            cpu=legacy.cpu,
            pixels=legacy.pixels,
            memory=legacy.memory,
            min_cpu_time=legacy.min_cpu_time,
        )
        write_legacy(profiler, writer, stamps)
        out.write(profiler.summary() + "\n")
        out.flush()
        profiler.replayer.finish(strict, profiler.fidelity)
    finally:
        profiler.close()


def _time_frames(profiler: Profiler) -> Column:
    """Have every frame finished and the clock stored at its end (one row per frame), after
    the profiler has ended the frame's queries."""
    replayer = profiler.replayer
    replayer.listen(_FrameTimes(replayer, stamps := profiler.store.column(_STAMPS, np.int64)))
    return stamps


class _FrameTimes(ReplayListener):
    def __init__(self, replayer: Replayer, stamps: Column) -> None:
        self.state, self.finish, self.stamps = replayer.state, replayer.gl.Finish, stamps

    def frame_end(self, frame: int) -> None:
        if self.state.current is not None:
            self.finish()
        self.stamps.set(frame - 1, time.monotonic_ns())  # a later pass overwrites: the last counts


def _block(values, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) as int64, missing cells as 0."""
    if isinstance(values, Column):
        block = values.read(start, stop)
    else:
        block = np.asarray(values[start:stop])
    if len(block) < stop - start:  # a column that stopped early: the rest has no data
        block = np.concatenate([block, np.zeros(stop - start - len(block), block.dtype)])
    return np.where(missing_mask(block), 0, block).astype(np.int64)


def _columns(table: Table | None, wanted: tuple[Metric, ...]) -> dict[Metric, object]:
    if table is None:
        return {}
    by_metric = dict(zip(table.metrics, table.values, strict=True))
    return {m: by_metric[m] for m in wanted if m in by_metric}


def _draw_mask(nos: np.ndarray, draw_nos: np.ndarray) -> np.ndarray:
    """Which of the calls `nos` are the draws `draw_nos` (a prefix of them, in order).

    Draws are the subsequence of calls with their call numbers: walk both. Call
    numbers are unique in a trace, so a membership test finds the same rows in
    one numpy operation; the walk is the fallback if they were not.
    """
    mask = np.isin(nos, draw_nos)
    k = int(mask.sum())
    if k <= len(draw_nos) and np.array_equal(nos[mask], draw_nos[:k]):
        return mask
    mask[:] = False
    j, candidates = 0, draw_nos.tolist()
    for i, no in enumerate(nos.tolist()):
        if j < len(candidates) and no == candidates[j]:
            mask[i] = True
            j += 1
    return mask


def write_legacy(profiler: Profiler, writer: LegacyWriter, stamps: Column | None = None) -> None:
    """Write the header, the call lines and the frame ends of a finished run.

    `stamps`: one ``rendering_finished`` clock value per ended frame, or None.
    """
    tables = {t.boundary: t for t in profiler.tables()}
    calls, draws = tables.get(Boundary.CALL), tables.get(Boundary.DRAWCALL)
    out = writer.stream
    stamp_view = stamps.view() if stamps is not None else None

    def frame_ends(first: int, count: int) -> None:
        for frame in range(first, first + count):
            writer.write_frame_end()
            if stamp_view is not None:
                value = int(stamp_view[frame]) if frame < len(stamp_view) else 0
                out.write(f"rendering_finished {value}\n")

    writer.write_header()
    rows = (calls.rows or 0) if calls is not None else 0
    ended = calls.frames_ended if calls is not None else profiler.profile.frames
    if calls is None or rows == 0:
        frame_ends(0, ended)
        return
    call_values = _columns(calls, _CPU + _MEMORY)
    draw_values = _columns(draws, _GPU + (PIXELS,))
    draw_rows = (draws.rows or 0) if draws is not None else 0
    names = calls.name_table
    frame = int(_block(calls.frame_of_event, 0, 1)[0])
    frame_ends(0, frame)
    drawn = 0  # draw events matched so far
    for start in range(0, rows, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, rows)
        n = stop - start
        nos = _block(calls.call_nos, start, stop)
        programs = _block(calls.programs, start, stop).tolist()
        name_ids = _block(calls.names, start, stop).tolist()
        # the frame of each event and of the one after it: frame_end lines go in between
        frames = _block(calls.frame_of_event, start, stop)
        following = _block(calls.frame_of_event, stop, stop + 1) if stop < rows else [ended]
        frames = np.append(frames, following).tolist()
        values = {m: _block(v, start, stop) for m, v in call_values.items()}
        is_draw = np.zeros(n, bool)
        if draws is not None:
            is_draw = _draw_mask(nos, _block(draws.call_nos, drawn, min(drawn + n, draw_rows)))
            k = int(is_draw.sum())
            for metric, column in draw_values.items():
                full = np.zeros(n, np.int64)
                full[is_draw] = _block(column, drawn, drawn + k)
                values[metric] = full
            drawn += k
        zeros = [0] * n
        cols = {m: values[m].tolist() if m in values else zeros for m in _CPU + _MEMORY + _GPU}
        pixel_values = values[PIXELS].tolist() if PIXELS in values else zeros
        pixels = [p if d else None for p, d in zip(pixel_values, is_draw.tolist(), strict=True)]
        for j, (no, program, name_id, px, cs, cd, vs, vd, rs, rd, gs, gd) in enumerate(
            zip(
                nos.tolist(),
                programs,
                name_ids,
                pixels,
                *(cols[m] for m in _CPU + _MEMORY + _GPU),
                strict=True,
            )
        ):
            writer.write_call(
                no,
                program,
                names[name_id],
                gpu_start=gs,
                gpu_duration=gd,
                cpu_start=cs,
                cpu_duration=cd,
                vsize_start=vs,
                vsize_duration=vd,
                rss_start=rs,
                rss_duration=rd,
                pixels=px,
            )
            if frames[j + 1] != frames[j]:
                frame_ends(frames[j], frames[j + 1] - frames[j])
    if drawn != draw_rows:
        raise ProfileError(
            f"{draw_rows} draw-call events but only {drawn} of them among the call events"
        )
