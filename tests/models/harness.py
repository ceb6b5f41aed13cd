"""The real profiler with a model in the driver's place, and what the vendor backend tests share.

`install` swaps the `Session`'s dispatch of a `Profiler` for one built on the
model's proc-address function (which falls back to the real driver's), so the
backends see the extension on llvmpipe and call the model through `Dispatch.raw`
as they would call a driver; the replay itself still goes straight to the
driver. `profile` runs every pass and reads the TSV back, as a user would see it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tracegen import TraceWriter, glx_context

from models.driver import DELETED, RESULT, ExtensionModel
from retrace.backends.base import MetricBackend
from retrace.errors import UsageError
from retrace.profile.driver import Profiler
from retrace.profile.options import ProfileOptions
from retrace.replay.dispatch import Dispatch
from retrace.vocabulary import Boundary
from retrace.writer.tsv import MetricWriter
from retrace.writer.tsv_reader import ParsedTable, read_tables

TRACES = Path(__file__).resolve().parents[2] / "traces"
MULTI_CONTEXT = "piglit-glx-multithread.trace"  # three contexts, switched within a frame
SECOND_CONTEXT = 0x7F74F8000B70  # the trace's handle of the context of its first glDrawArrays


def install(profiler: Profiler, model: ExtensionModel) -> None:
    """Put `model` in the driver's place for the profiler's backends."""
    display = profiler.replayer.display

    def current() -> object | None:
        bound = display.current
        return bound[0] if bound is not None else None

    model.current = current
    resolve = model.resolver(display.get_proc_address)
    profiler.view.dispatch = Dispatch(resolve, profiler.replayer.dispatch.registry)


def traced_context(profiler: Profiler, real: object) -> int:
    """The handle the trace gave the context that is now `real` (the same in every pass)."""
    return next(h for h, c in profiler.replayer.state.contexts.items() if c.real is real)


def expose_except(profiler: Profiler, model: ExtensionModel, traced: int) -> None:
    """The model's extension is missing on the trace's context `traced`."""
    model.exposed = lambda real: traced_context(profiler, real) != traced


@dataclass
class Run:
    tables: dict[Boundary, ParsedTable]
    passes: list[str]  # each pass's description, in the order run


def profile(
    trace: Path | str,
    model: ExtensionModel,
    frames: str | None = None,
    draws: str | None = None,
    prepare: Callable[[Profiler], None] = lambda profiler: None,
) -> Run:
    """Profile `trace` with `model` installed; the tables as written, and the pass plan."""
    selections = {b: s for b, s in ((Boundary.FRAME, frames), (Boundary.DRAWCALL, draws)) if s}
    profiler = Profiler(str(TRACES / trace), ProfileOptions(selections))
    try:
        install(profiler, model)
        prepare(profiler)
        profiler.run()
        out = io.StringIO()
        MetricWriter(out).write_all(profiler.tables())
        passes = [p.describe(number) for number, p in enumerate(profiler.plan, 1)]
    finally:
        profiler.close()
    assert model.failures == []
    return Run(read_tables(io.StringIO(out.getvalue())), passes)


def at_first_context(
    trace: Path | str, model: ExtensionModel, action: Callable[[Mapping[str, MetricBackend]], Any]
) -> Any:
    """`action(backends)` on the trace's first context, the model installed (listing metrics)."""
    profiler = Profiler(str(TRACES / trace), ProfileOptions())
    result: list[Any] = []
    try:
        install(profiler, model)
        profiler.until_first_context(lambda: result.append(action(profiler.backends_now())))
    finally:
        profiler.close()
    assert model.failures == []
    return result[0]


def on_this_driver(name: str) -> tuple[tuple[bool, str], list]:
    """A backend's support and metrics on the real driver (no model), at glxgears' first context."""
    profiler = Profiler(str(TRACES / "glxgears.trace"), ProfileOptions())
    found: list = []
    try:
        profiler.until_first_context(
            lambda: found.append(
                (
                    profiler.backends_now()[name].support(),
                    list(profiler.backends_now()[name].metrics()),
                )
            )
        )
    finally:
        profiler.close()
    return found[0]


def rect_trace(path: Path, frames: int, draws: int) -> Path:
    """A GLX trace of `frames` frames of `draws` glRectf each, eight widths in turn."""
    w = TraceWriter()

    glx_context(w)
    for _ in range(frames):
        for i in range(draws):
            right = -1 + (i % 8 + 1) / 4
            corners = (-1.0, -1.0, right, 1.0)
            w.call(
                "glRectf", ("x1", "y1", "x2", "y2"), {k: w.float(v) for k, v in enumerate(corners)}
            )
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return path


def most_in_flight(calls: list[tuple[str, tuple]], end: str) -> int:
    """The most sessions ended (by calls of `end`) and neither read nor deleted, at any time."""
    pending: set[int | None] = set()
    most = 0
    for name, args in calls:
        if name == end:
            pending.add(args[0])
            most = max(most, len(pending))
        elif name in (RESULT, DELETED):
            pending.discard(args[0])
    return most


def check_rejected(model: ExtensionModel, boundary: Boundary, selection: str, message: str) -> None:
    """The selection is refused with a usage error matching `message`."""
    profiler = Profiler(str(TRACES / "glxgears.trace"), ProfileOptions({boundary: selection}))
    try:
        install(profiler, model)
        with pytest.raises(UsageError, match=message):
            profiler.run()
    finally:
        profiler.close()


def check_second_context_reads_dash(model: ExtensionModel, backend: str, err: Callable[[], str]):
    """With the extension missing on the multi-context trace's second context, the
    events that ran there read '-' (a frame partly there too) and one warning says why;
    `err` returns what was printed on stderr."""
    run = profile(
        MULTI_CONTEXT,
        model,
        frames=f"{backend}: Samples Passed",
        draws=f"{backend}: Samples Passed; opengl: Pixels Drawn",
        prepare=lambda profiler: expose_except(profiler, model, SECOND_CONTEXT),
    )
    frame = run.tables[Boundary.FRAME].column("Samples Passed")
    assert math.isnan(frame[0]) and frame[1] == 0  # part of frame 0 ran where it is missing
    draws = run.tables[Boundary.DRAWCALL].column("Samples Passed")
    assert draws[0] == 0 and math.isnan(draws[1]) and draws[2] == 100
    assert err().count(f"warning: {backend} is not exposed by llvmpipe") == 1
