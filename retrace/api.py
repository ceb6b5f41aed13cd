"""retrace as a library: open a trace, replay it, profile it, get the tables as arrays.

    import retrace

    trace = retrace.open("app.trace")
    result = trace.profile(frames="opengl: GPU Duration", calls="opengl: CPU Duration")
    result.frames["GPU Duration"]        # numpy: one record per frame
    result.dataframe("calls")            # pandas, when it is installed
    trace.replay(snapshots="*/frame").md5s

The command line is a thin layer over the same code: a profile here measures
exactly what ``retrace --pframes ... TRACE`` prints, in a child process as
there, so a crash of the GL driver raises `RetraceError` naming the call
instead of killing the caller. Selections use glretrace's grammar
(``"backend: metric, [group, id]; backend2: ..."``).
"""

from __future__ import annotations

import builtins
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from retrace.errors import RetraceError
from retrace.profile.options import ProfileOptions

if TYPE_CHECKING:
    import pandas

__all__ = ["ProfileResult", "ReplayResult", "Trace", "open_trace", "profile"]


@dataclass(frozen=True)
class ReplayResult:
    """What one replay did."""

    frames: int  # frames that ended (SwapBuffers)
    seconds: float  # the replay's wall time
    fidelity: dict[str, Any]  # how the replay departed from the trace (`Fidelity.as_dict`)
    warnings: list[str]  # the lines the CLI prints on stderr about it
    md5s: dict[int, str] = field(default_factory=dict)  # call number -> MD5 of its snapshot


@dataclass(frozen=True)
class ProfileResult:
    """The tables of a profile, as numpy structured arrays (see `retrace.writer.arrays`)."""

    tables: Mapping[str, np.ndarray]  # "frames", "calls", "drawcalls": those measured
    rendered: str  # glretrace's `Rendered N frames in S secs...` line
    warnings: list[str]
    metadata: dict[str, Any]  # the options, the trace, the columns' metrics

    @property
    def frames(self) -> np.ndarray:
        return self._table("frames")

    @property
    def calls(self) -> np.ndarray:
        return self._table("calls")

    @property
    def drawcalls(self) -> np.ndarray:
        return self._table("drawcalls")

    def _table(self, name: str) -> np.ndarray:
        try:
            return self.tables[name]
        except KeyError:
            raise RetraceError(
                f"the profile has no {name} table (nothing selected there)"
            ) from None

    def dataframe(self, name: str) -> pandas.DataFrame:
        """A table as a pandas DataFrame (pandas is not a dependency of retrace)."""
        try:
            import pandas
        except ImportError:
            raise RetraceError("dataframe() needs pandas: pip install pandas") from None
        return pandas.DataFrame(self._table(name))


class Trace:
    """An apitrace trace file, ready to replay or profile. With `cache` (the default)
    reading it goes through the trace cache, as the CLI's does unless `--no-cache`."""

    def __init__(self, path: str | os.PathLike[str], cache: bool = True) -> None:
        self.path = os.fspath(path)
        self.cache = cache
        if not os.path.isfile(self.path):
            raise RetraceError(f"{self.path}: no such trace file")

    def __repr__(self) -> str:
        return f"retrace.Trace({self.path!r})"

    def info(self) -> dict[str, Any]:
        """`retrace info`'s facts (calls, frames, functions...); raises on a damaged trace."""
        from retrace.trace.info import trace_info

        with self._reading():
            facts, error = trace_info(self.path)
        if error is not None:
            raise error
        return facts

    def replay(self, snapshots: str | None = None, strict: bool = False) -> ReplayResult:
        """Replay the whole trace once, headless; `snapshots`: a call set (``"*/frame"``,
        ``"10,20-30"``) whose images' MD5s are returned. With `strict` a replay that
        departs from its trace raises `FidelityError`."""
        import retrace.replay.contain as contain

        with _child_errors() as errors, tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "replay.json")
            body = partial(_replay, self.path, snapshots, strict, out)
            with self._reading():
                contain.check(contain.supervise(body, errors), self.path)
            with builtins.open(out) as f:
                done = json.load(f)
        _raise(done.pop("error"))
        return ReplayResult(md5s={int(k): v for k, v in done.pop("md5s").items()}, **done)

    def profile(
        self,
        frames: str | None = None,
        calls: str | None = None,
        drawcalls: str | None = None,
        *,
        repeat: int = 1,
        warmup: int = 0,
        stats: bool = False,
        strict: bool = False,
        frame_range: str | None = None,
        call_range: str | None = None,
        loop: int | None = None,
        store_dir: str | None = None,
    ) -> ProfileResult:
        """Profile with glretrace's selections per table (`--pframes`, `--pcalls`,
        `--pdrawcalls`); each pass is replayed `warmup + repeat` times and the tables
        hold the median of the `repeat` measured runs. `frame_range` ("A-B", "A-", "N"):
        measure only those frames, as `--frames` does; `call_range` (a call set, "10-20",
        "*/draw"): only those calls, as `--calls` does; `loop`: then replay those frames
        (or the last one) `loop` more times after `warmup` loops, and measure the loops
        only, as `--loop=N` does (`metadata["loops"]` has the per-loop statistics)."""
        options = ProfileOptions.select(
            frames,
            calls,
            drawcalls,
            frames=frame_range,
            calls=call_range,
            loop=loop,
            repeat=repeat,
            warmup=warmup,
            stats=stats,
            strict=strict,
        )
        with self._reading():
            return profile(self.path, options, store_dir)

    def _reading(self) -> AbstractContextManager[None]:
        """Reads of the trace within use the trace cache only if this trace does."""
        from retrace.trace import cache

        return cache.used(self.cache)


def open_trace(path: str | os.PathLike[str], cache: bool = True) -> Trace:
    """The trace at `path` (`retrace.open`); `cache=False` reads it without the trace cache."""
    return Trace(path, cache)


def profile(trace: str, options: ProfileOptions, store_dir: str | None = None) -> ProfileResult:
    """Measure `options` on `trace` as the CLI does, and read the tables into arrays."""
    from retrace.profile.checkpoint import Job
    from retrace.profile.checks import check_options
    from retrace.profile.commands import check_part_meanwhile, measure
    from retrace.writer.arrays import TABLE_NAMES, table_array
    from retrace.writer.store import Store

    if not options.selections:
        raise RetraceError("nothing to profile: select metrics for frames, calls or drawcalls")
    check_options(options)
    check_part_meanwhile(trace, options)
    job = Job.start(trace, options, None)
    store = Store(os.path.abspath(store_dir) if store_dir else None, keep=True)
    store.meta["job"] = job.to_json()
    store.close()
    tables: dict[str, np.ndarray] = {}
    columns: dict[str, list[dict[str, Any]]] = {}

    loops: dict[str, Any] = {}

    def deliver(measured: Any, kept: Store) -> None:
        measured_tables = measured.tables(kept)
        if measured.loops:
            from retrace.profile.loops import loop_statistics

            loops["loops"] = loop_statistics(
                measured_tables, measured.loops, measured.window, options.warmup
            )
        for table in measured_tables:
            name = TABLE_NAMES[table.boundary]
            tables[name] = table_array(table)
            columns[name] = [
                {"backend": m.backend, "name": m.name, "kind": m.kind.value, "unit": m.unit}
                for m in table.metrics
            ]

    with _child_errors() as errors:
        finish = measure(job, store.path, False, None, deliver, errors)
    metadata = {"trace": job.trace, "options": options.to_json(), "columns": columns, **loops}
    _raise(finish["error"])
    return ProfileResult(tables, finish["summary"], list(finish["warnings"]), metadata)


@contextmanager
def _child_errors() -> Iterator[str]:
    """A file for the child's error line; its exit status (SystemExit, which a library must
    not raise) becomes a RetraceError with that line."""
    with tempfile.TemporaryDirectory(prefix="retrace-") as folder:
        path = os.path.join(folder, "errors")
        try:
            yield path
        except SystemExit as e:
            lines = []
            if os.path.exists(path):
                with builtins.open(path) as f:
                    lines = [line for line in f.read().splitlines() if line.startswith("retrace:")]
            message = lines[-1] if lines else f"retrace: error: failed (exit status {e.code})"
            error = RetraceError(message.removeprefix("retrace: ").removeprefix("error: "))
            error.exit_code = e.code if isinstance(e.code, int) else 1
            raise error from None


def _raise(error: list[Any] | None) -> None:
    """Raise the error a child recorded as [message, exit status], if any."""
    if error is not None:
        raised = RetraceError(error[0])
        raised.exit_code = error[1]
        raise raised


def _replay(trace: str, snapshots: str | None, strict: bool, out: str) -> None:
    """The child's part of `Trace.replay`: replay, then write what happened to `out`."""
    from retrace.replay.replayer import Replayer
    from retrace.trace.callset import CallSet

    md5s: dict[int, str] = {}
    with Replayer(trace, snapshots=CallSet.parse(snapshots) if snapshots else None) as replayer:
        replayer.on_snapshot = lambda call_no, image: md5s.__setitem__(call_no, image.md5())
        result = replayer.run_pass()
        lines, error = replayer.ending(strict)
        done = {
            "frames": result.frames,
            "seconds": result.seconds,
            "fidelity": replayer.fidelity().as_dict(),
            "warnings": lines,
            "md5s": md5s,
            "error": None if error is None else [str(error), error.exit_code],
        }
    with builtins.open(out, "w") as f:
        json.dump(done, f)
