"""Where a profile's results go besides glretrace's TSV: other table formats, the metadata
beside them and a Perfetto timeline.

The choice is made when the profile starts and kept in the store's manifest
(`save`), so that `--resume` and the tables written after a crash or an
interruption produce the same files as an uninterrupted run. The writers of the
other formats, the loops' statistics and the metadata are imported where they
write: a profile imports this module before its replay forks, which they would
only delay.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, NamedTuple

from retrace.errors import UsageError
from retrace.profile.selection import parse_selection
from retrace.vocabulary import Boundary
from retrace.writer.tsv import MetricWriter, runs_folder

if TYPE_CHECKING:
    from retrace.profile.checkpoint import Job
    from retrace.profile.results import Profile
    from retrace.writer.store import Store

# What --perfetto measures when no --pframes/--pcalls/--pdrawcalls is given: the
# timeline's slices on both tracks and on the GPU busy one, one pass.
PERFETTO_SELECTION = dict.fromkeys(
    (Boundary.FRAME, Boundary.DRAWCALL),
    "opengl: CPU Start, CPU Duration, GPU Start, GPU Duration, GPU Busy",
)
TIMELINE_METRICS = ("CPU Start", "CPU Duration")  # opengl's, which place the slices


class Outputs(NamedTuple):
    """`format`: of the tables (tsv, csv, json); `metadata`: where the metadata goes (None:
    beside the tables when they go to a file); `perfetto`: a timeline file, or None;
    `started`: when the profile began (seconds since the epoch)."""

    format: str = "tsv"
    metadata: str | None = None
    perfetto: str | None = None
    started: float = 0.0

    @classmethod
    def chosen(cls, fmt: str, metadata: str | None, perfetto: str | None) -> Outputs:
        where, timeline = (os.path.abspath(p) if p else None for p in (metadata, perfetto))
        return cls(fmt, where, timeline, started=time.time())

    def metadata_path(self, tables: str | None) -> str | None:
        return self.metadata or (f"{tables}.json" if tables and has_beside(tables) else None)


def has_beside(tables: str) -> bool:
    """Whether the files that go beside the tables (`OUT.json`, `OUT.runs/`) do: beside a
    regular file (or a link to one) only. Tables written to a device (`-o /dev/null`), a
    FIFO or a process substitution's pipe get none, as standard output gets none: their
    folder (/dev, /proc) is no place for them, and `/dev/null.json` no one's file."""
    return os.path.isfile(tables)


def timeline_selection(chosen: dict[Boundary, str]) -> dict[Boundary, str]:
    """The selection a --perfetto profile measures: `chosen`, or the default when empty.
    Where no table of `chosen` has the CPU Start and CPU Duration that place its slices on
    the timeline, the frames table measures them too (said on stderr).

    Raises `RetraceError` without the perfetto package: before measuring, not after.
    """
    from retrace.writer.perfetto import protos

    protos()
    if not chosen:
        return dict(PERFETTO_SELECTION)
    wanted = {m.casefold() for m in TIMELINE_METRICS}
    frames: set[str] = set()
    for boundary, spec in chosen.items():
        for backend, refs in parse_selection(spec, f"--p{boundary.name.lower()}s"):
            if backend.casefold() != "opengl":
                continue
            names = {(r.name or "").casefold() for r in refs}
            if names.issuperset(wanted):
                return chosen
            if boundary == Boundary.FRAME:
                frames |= names
    added = "opengl: " + ", ".join(m for m in TIMELINE_METRICS if m.casefold() not in frames)
    print(
        f'retrace: warning: --perfetto places slices by "opengl: {", ".join(TIMELINE_METRICS)}":'
        f' the frames measure "{added}" too',
        file=sys.stderr,
    )
    given = chosen.get(Boundary.FRAME)
    return {**chosen, Boundary.FRAME: f"{given}; {added}" if given else added}


def save(store: Store, outputs: Outputs) -> None:
    store.meta["outputs"] = outputs._asdict()


def of(store: Store) -> Outputs:
    """The outputs a profile in `store` was started with (a store from before they existed:
    TSV only)."""
    return Outputs(**store.meta.get("outputs", {}))


def write(profile: Profile, store: Store, job: Job) -> None:
    """The tables (to `job.output` or standard output) in the chosen format, with every
    measured run of a repeated profile beside them (`runs_folder`), then the metadata and
    the timeline. Raises OSError where a file cannot be written."""
    outputs = of(store)
    tables = profile.tables(store)
    with ExitStack() as stack:
        stream = stack.enter_context(open(job.output, "w")) if job.output else sys.stdout  # noqa: SIM115
        if outputs.format == "tsv":
            MetricWriter(stream).write_all(tables)
        else:
            from retrace.writer.records import write_records

            write_records(stream, tables, outputs.format)
    repeated = job.options.repeat > 1 and profile.repeats
    if job.output and has_beside(job.output) and outputs.format == "tsv" and repeated:
        _write_runs(profile, store, runs_folder(job.output))
    how = job.options.to_json()
    if profile.loops:
        from retrace.profile.loops import loop_lines, loop_statistics

        how["loops"] = loops = loop_statistics(
            tables, profile.loops, profile.window, job.options.warmup
        )
        for line in loop_lines(loops):
            print(line, file=sys.stderr)
    where = outputs.metadata_path(job.output)
    if where is None and outputs.perfetto is None:
        return
    from retrace.profile.metadata import describe, trace_identity, write_metadata

    selections = how.pop("selections")
    how["frame_range"] = how.pop("frames")  # ("frames" there: how many frames ended)
    document = describe(
        trace_identity(job.trace, store.meta.get("trace_counts")),
        selections,
        profile,
        tables,
        store.meta.get("facts"),
        how,
        {
            "tables": job.output,
            "format": outputs.format,
            "metadata": where,
            "perfetto": outputs.perfetto,
        },
        outputs.started or time.time(),
        time.time(),
        complete="finish" in store.meta,
    )
    if where is not None:
        write_metadata(where, document)
    if outputs.perfetto is not None:
        from retrace.writer.perfetto import write_perfetto

        write_perfetto(outputs.perfetto, tables, document)


def _write_runs(profile: Profile, store: Store, folder: str) -> None:
    import shutil  # (only here: its import costs a profile's start-up 1-2 ms)

    shutil.rmtree(folder, ignore_errors=True)  # the runs of an earlier profile
    os.makedirs(folder)
    for run in range(profile.repeats):
        with open(os.path.join(folder, f"run{run + 1}.tsv"), "w") as stream:
            MetricWriter(stream).write_all(profile.tables(store, run))


def summary_stream(outputs: Outputs, job: Job) -> Any:
    """Where glretrace's `Rendered ...` line goes: standard output, unless CSV or JSON
    records go there (a reader would choke on it)."""
    return sys.stderr if job.output is None and outputs.format != "tsv" else sys.stdout


def export_perfetto(tables_path: str, timeline: str) -> None:
    """The Perfetto timeline of a profile kept as a TSV (with its metadata beside it, for
    the names and units): the same file `--perfetto` would have written."""
    from retrace.profile.metadata import read_metadata
    from retrace.writer.events import Events
    from retrace.writer.perfetto import write_perfetto
    from retrace.writer.tsv_reader import read_tables

    try:
        with open(tables_path, encoding="utf-8", errors="replace") as stream:
            tables = read_tables(stream, source=tables_path)
    except OSError as e:
        raise UsageError(f"{tables_path}: {e.strerror or e}") from None
    if not tables:
        raise UsageError(f"{tables_path}: no profile tables in it")
    events = [Events.from_parsed(t) for t in tables.values()]
    write_perfetto(timeline, events, read_metadata(tables_path))
