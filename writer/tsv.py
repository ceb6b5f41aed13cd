"""glretrace's two profile output formats, written byte for byte.

Existing scripts parse glretrace's output, so retrace prints the same text:

* `MetricWriter`: the TSV tables of ``--pframes/--pcalls/--pdrawcalls``
  (apitrace ``retrace/metric_writer.cpp``): frames, then calls, then draw calls;
  each a header line, its rows, and an empty line.
* `LegacyWriter`: the space-separated lines of ``--pcpu/--pgpu/--ppd/--pmem``
  that apitrace's ``profileshader.py`` and qapitrace read.

Value cells follow the metric's `NumType`, as glretrace's ``std::ostream <<``
does: integer types (UINT, UINT64, INT64, BOOL) print as integers (BOOL as
``0``/``1``; an integer metric kept in a float column is truncated); FLOAT and
DOUBLE print like C++'s default stream formatting, which is
``printf("%g")``: 6 significant digits, trailing zeros dropped,
exponent form below 1e-4 and from 1e6 (``1.23457e+06``). That loses digits a
shortest round-trip ``repr`` would keep, but it is what glretrace prints and
what a diff against its output needs. Missing data (the store's sentinel: NaN,
or the integer dtype's sentinel) prints ``-``; a non-zero error code prints
``#ERR<n>``.

Tables are streamed in blocks of rows (`MetricWriter.block_rows`): each block is
copied out of the store's mapping, formatted column by column, and written, so
a table of 10 M rows needs memory for one block only (measured: 10 M call rows
with 2 metrics from store columns, 8 s, VmRSS +6 MB). Unlike glretrace's
``int16_t`` name table, any number of distinct function names works.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TextIO, TypeAlias

from retrace.vocabulary import Boundary, Metric
from retrace.writer.store import Column, missing_value

if TYPE_CHECKING:  # numpy is imported where tables are written, not where they are defined
    import numpy as np

Values: TypeAlias = "Column | np.ndarray | array[int]"  # (an `array`: an empty column)

TABLE_ORDER = (Boundary.FRAME, Boundary.CALL, Boundary.DRAWCALL)
CALL_HEADER = "#\tcall no\tprogram\tname"
LEGACY_HEADER = (
    "# call no gpu_start gpu_dura cpu_start cpu_dura vsize_start vsize_dura "
    "rss_start rss_dura pixels program name"
)
_G = "%g".__mod__
_D = "%d".__mod__


def runs_folder(tables: str) -> str:
    """Where the tables of every measured run of a repeated profile go, beside the file
    of their medians (`OUT.tsv` -> `OUT.tsv.runs/run1.tsv`...): `retrace diff` reads them
    as that side's samples, while OUT.tsv stays what glretrace would print."""
    return tables + ".runs"


def _length(values: Values | None) -> int:
    return 0 if values is None else len(values)


def _row_list(values: Values, start: int, stop: int) -> tuple[list, bool, object]:
    """Rows [start, stop) of a column or array as a list, whether they are floats, and the
    value that stands for a missing one (NaN: compared as such). Without numpy for store
    columns: the TSV tables are written without importing it."""
    if isinstance(values, Column):
        return values.read_list(start, stop), values.format in "fd", values.missing
    if isinstance(values, array):
        return values[start:stop].tolist(), values.typecode in "fd", None
    block = values[start:stop]
    kind = block.dtype.kind
    if kind == "b":
        return [int(v) for v in block.tolist()], False, None
    rows: list = block.tolist()
    return rows, kind == "f", missing_value(block.dtype) if kind in "iuf" else None


def read_rows(values: Values, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of a column or array, clipped to what it holds."""
    if isinstance(values, Column):
        return values.read(start, stop)
    import numpy as np

    return np.asarray(values[start:stop])


class Table:
    """One profiled boundary's results, as `MetricWriter` needs them.

    Every per-event sequence is a store `Column` or a 1-D numpy array, indexed by
    event number (the n-th call, draw call or frame of the pass).

    - `metrics`, `values`: the columns, in the order they are printed (backend
      order), and one value sequence per metric. A value sequence shorter than
      the table prints ``-`` for the rows it lacks.
    - `errors`: optional, one sequence per metric (or None): a non-zero entry
      prints ``#ERR<n>`` instead of the value.
    - CALL and DRAWCALL tables also need, per event: `call_nos`, `programs`
      (the current program, 0 if none), `names` (indexes into `name_table`),
      and `frame_of_event` (the 0-based frame the event belongs to, non-decreasing);
      `frames_ended` is how many frames ended with a SwapBuffers. A bare
      ``frame_end`` row follows the last event of every ended frame (several in a
      row for ended frames without events), none after the partial last frame.
    - `rows`: number of events. Default: ``len(call_nos)`` for CALL/DRAWCALL, the
      longest value sequence for FRAME (glretrace prints N+1 frame rows for N
      SwapBuffers: the partial last frame counts).
    - `contexts`: optional, per event of a call table the number of the replay
      context it ran in (from 1; 0 or missing: unknown). Not printed: glretrace's
      layout has no such column (the metadata keeps it, for the timeline).

    (A plain class: a dataclass costs a millisecond to define, in every profile's start-up.)
    """

    def __init__(
        self,
        boundary: Boundary,
        metrics: Sequence[Metric],
        values: Sequence[Values],
        call_nos: Values | None = None,
        programs: Values | None = None,
        names: Values | None = None,
        name_table: Sequence[str] = (),
        frame_of_event: Values | None = None,
        frames_ended: int = 0,
        rows: int | None = None,
        errors: Sequence[Values | None] | None = None,
        contexts: Values | None = None,
    ) -> None:
        self.boundary, self.metrics, self.values = boundary, metrics, values
        self.call_nos, self.programs, self.names = call_nos, programs, names
        self.name_table, self.frame_of_event = name_table, frame_of_event
        self.frames_ended, self.rows = frames_ended, rows
        self.errors, self.contexts = errors, contexts
        if len(self.values) != len(self.metrics):
            raise ValueError(f"{len(self.metrics)} metrics but {len(self.values)} value columns")
        if self.errors is not None and len(self.errors) != len(self.metrics):
            raise ValueError(f"{len(self.metrics)} metrics but {len(self.errors)} error columns")
        if self.boundary == Boundary.FRAME:
            if self.rows is None:
                self.rows = max(map(len, self.values), default=0)
            return
        meta = (self.call_nos, self.programs, self.names, self.frame_of_event)
        if any(m is None for m in meta):
            raise ValueError("call tables need call_nos, programs, names and frame_of_event")
        if self.rows is None:
            self.rows = _length(self.call_nos)
        if any(_length(m) < self.rows for m in meta):
            raise ValueError(f"call metadata shorter than the table's {self.rows} rows")


def context_runs(table: Table) -> list[list[int]]:
    """The replay context of each row of a call table, run-length encoded for the metadata:
    [[first row, context number], ...] at every change (empty when the table does not say;
    0 for a row whose context is unknown). Without numpy, as the tables are written."""
    rows = table.rows or 0
    if table.contexts is None or not rows:
        return []
    known, _floats, missing = _row_list(table.contexts, 0, rows)
    runs: list[list[int]] = []
    row = 0
    for value, same in itertools.groupby(known):
        number = 0 if value == missing or value < 0 else int(value)
        if not runs or runs[-1][1] != number:
            runs.append([row, number])
        row += len(list(same))
    if row < rows and (not runs or runs[-1][1] != 0):  # rows the column does not reach
        runs.append([row, 0])
    return runs


class MetricWriter:
    """Writes `Table`s to a text stream in glretrace's MetricWriter layout."""

    def __init__(self, stream: TextIO, block_rows: int = 1 << 16) -> None:
        self.stream = stream
        self.block_rows = block_rows

    def write_all(self, tables: Iterable[Table]) -> None:
        """Frames, calls, draw calls, whatever order they come in.

        A table without metrics prints nothing at all, not even its header or
        blank line (glretrace on a context where no requested metric works).
        """
        by_boundary = {t.boundary: t for t in tables}
        for boundary in TABLE_ORDER:
            table = by_boundary.get(boundary)
            if table is not None and table.metrics:
                self.write_table(table)

    def write_table(self, table: Table) -> None:
        """Header, rows (with ``frame_end`` rows for call tables), one empty line."""
        names = "".join("\t" + m.name for m in table.metrics)
        is_frames = table.boundary == Boundary.FRAME
        self.stream.write(("#" if is_frames else CALL_HEADER) + names + "\n")
        rows = table.rows or 0
        if not is_frames:
            assert table.frame_of_event is not None  # call tables have it (__post_init__)
            first = int(_row_list(table.frame_of_event, 0, 1)[0][0]) if rows else table.frames_ended
            self.stream.write("frame_end\n" * first)
        for start in range(0, rows, self.block_rows):
            stop = min(start + self.block_rows, rows)
            write_lines = self._frame_lines if is_frames else self._call_lines
            lines = write_lines(table, start, stop)
            self.stream.write("\n".join(lines))
            self.stream.write("\n")
        self.stream.write("\n")

    def _cells(self, table: Table, start: int, stop: int) -> list[list[str]]:
        """The value cells of rows [start, stop), one list of strings per metric."""
        out = []
        for i, (metric, values) in enumerate(zip(table.metrics, table.values, strict=True)):
            block, floats, missing = _row_list(values, start, stop)
            if floats:  # missing: NaN, the one value unequal to itself
                gone = [j for j, v in enumerate(block) if v != v]
            elif missing is not None and missing in block:  # (the scan in C first: usually none)
                gone = [j for j, v in enumerate(block) if v == missing]
            else:
                gone = []
            if metric.num_type.is_float:
                cells = list(map(_G, block))
            elif floats:
                for j in gone:
                    block[j] = 0
                cells = list(map(_D, block))
            else:
                cells = list(map(str, block))
            for j in gone:
                cells[j] = "-"
            cells.extend(["-"] * (stop - start - len(cells)))
            errors = table.errors[i] if table.errors is not None else None
            if errors is not None:
                codes, _, no_code = _row_list(errors, start, stop)
                for j, code in enumerate(codes):
                    if code and code != no_code:
                        cells[j] = f"#ERR{int(code)}"
            out.append(cells)
        return out

    def _frame_lines(self, table: Table, start: int, stop: int) -> list[str]:
        tags = ["frame"] * (stop - start)
        return list(map("\t".join, zip(tags, *self._cells(table, start, stop), strict=True)))

    def _call_lines(self, table: Table, start: int, stop: int) -> list[str]:
        assert table.call_nos is not None and table.programs is not None
        assert table.names is not None and table.frame_of_event is not None
        count = stop - start
        nos = map(str, _row_list(table.call_nos, start, stop)[0])
        programs = map(str, _row_list(table.programs, start, stop)[0])
        names = map(table.name_table.__getitem__, _row_list(table.names, start, stop)[0])
        cells = self._cells(table, start, stop)
        tags = ["call"] * count
        lines = list(map("\t".join, zip(tags, nos, programs, names, *cells, strict=True)))
        # frame_end rows: after event i, one per frame that ends before event i+1.
        if stop < (table.rows or 0):
            frames = _row_list(table.frame_of_event, start, stop + 1)[0]
        else:  # the table's last block: the frames that end after the last event
            frames = [*_row_list(table.frame_of_event, start, stop)[0], table.frames_ended]
        for j, (frame, after) in enumerate(zip(frames, frames[1:], strict=False)):
            if after != frame:
                if after < frame:
                    raise ValueError(
                        "frame_of_event must be non-decreasing and within frames_ended"
                    )
                lines[j] += "\nframe_end" * int(after - frame)
        return lines


class LegacyWriter:
    """glretrace's legacy profiler lines (``--pcpu --pgpu --ppd --pmem``).

    Columns of a measurement that is off print ``0``. `pixels` is None for a call
    that is not a draw: ``-1`` with ``--ppd`` on, else ``0``. With ``--pcpu`` on,
    calls whose CPU duration is below `min_cpu_time` ns (glretrace's default
    1000) are dropped, as glretrace does. Times are printed as given: the caller
    makes them relative to its base time.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        gpu: bool = False,
        cpu: bool = False,
        pixels: bool = False,
        memory: bool = False,
        min_cpu_time: int = 1000,
    ) -> None:
        self.stream = stream
        self.gpu = gpu
        self.cpu = cpu
        self.pixels = pixels
        self.memory = memory
        self.min_cpu_time = min_cpu_time

    def write_header(self) -> None:
        self.stream.write(LEGACY_HEADER + "\n")

    def write_call(
        self,
        no: int,
        program: int,
        name: str,
        *,
        gpu_start: int = 0,
        gpu_duration: int = 0,
        cpu_start: int = 0,
        cpu_duration: int = 0,
        vsize_start: int = 0,
        vsize_duration: int = 0,
        rss_start: int = 0,
        rss_duration: int = 0,
        pixels: int | None = None,
    ) -> bool:
        """One ``call`` line; returns False when `min_cpu_time` dropped it."""
        if self.cpu and cpu_duration < self.min_cpu_time:
            return False
        gpu = (gpu_start, gpu_duration) if self.gpu else (0, 0)
        cpu = (cpu_start, cpu_duration) if self.cpu else (0, 0)
        mem = (vsize_start, vsize_duration, rss_start, rss_duration) if self.memory else (0,) * 4
        if not self.pixels:
            pixels = 0
        elif pixels is None:
            pixels = -1
        fields = ("call", no, *gpu, *cpu, *mem, pixels, program, name)
        self.stream.write(" ".join(map(str, fields)) + "\n")
        return True

    def write_frame_end(self) -> None:
        self.stream.write("frame_end\n")
