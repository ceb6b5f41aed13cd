"""Read MetricWriter TSV tables back, from retrace or from glretrace itself.

The ``diff`` and ``summary`` commands compare and condense profiles, and a
profile may come from either program, so they read the text, not the store.
Anything outside a table (the legacy profiler's lines, ``Rendered N frames``,
``rendering_finished``, warnings) is skipped. Results are `array.array`
columns, so a table of millions of rows stays compact. The rows are parsed in C
(`_tsv`, 0.1 s for a million rows where this module's own loop took 2.5 s);
`_add_row` here is the reference, and reads any row the C scanner leaves to it
(a malformed one, whose error names its line).

A calls table and a draw-calls table look the same. With both present the
first is the calls table (glretrace's order). A lone one is what `call_table`
says; by default it is taken for the draw-calls table when every row is a
function glretrace profiles as a draw, else for the calls table.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from retrace.errors import RetraceError
from retrace.trace.flags import is_profiled_draw
from retrace.vocabulary import Boundary
from retrace.writer import _tsv

_CALL_FIELDS = ["call no", "program", "name"]


class EventRow(NamedTuple):
    """One event; `call_no`, `program` and `name` are None in the frames table."""

    call_no: int | None
    program: int | None
    name: str | None
    frame: int
    values: tuple[float, ...]


@dataclass
class ParsedTable:
    """One table, column-wise: `values[m][r]` is metric `m` of row `r` (NaN for ``-``).

    `frames[r]` is the 0-based frame of row `r` (the row index in the frames
    table; the number of ``frame_end`` rows before it in call tables).
    `errors` maps (row, metric index) to the code of an ``#ERR<n>`` cell.
    """

    boundary: Boundary
    metrics: list[str]
    call_nos: array = field(default_factory=lambda: array("q"))
    programs: array = field(default_factory=lambda: array("q"))
    names: list[str] = field(default_factory=list)
    frames: array = field(default_factory=lambda: array("q"))
    values: list[array] = field(default_factory=list)
    errors: dict[tuple[int, int], int] = field(default_factory=dict)
    frames_ended: int = 0

    def __post_init__(self) -> None:
        if not self.values:
            self.values = [array("d") for _ in self.metrics]

    def __len__(self) -> int:
        return len(self.frames)

    def column(self, metric: str) -> array:
        """The values of the metric named `metric`."""
        return self.values[self.metrics.index(metric)]

    def rows(self) -> Iterator[EventRow]:
        is_call = self.boundary != Boundary.FRAME
        for r, frame in enumerate(self.frames):
            values = tuple(col[r] for col in self.values)
            if is_call:
                yield EventRow(self.call_nos[r], self.programs[r], self.names[r], frame, values)
            else:
                yield EventRow(None, None, None, frame, values)


def read_tables(
    stream: Iterable[str], source: str = "<stream>", call_table: Boundary | None = None
) -> dict[Boundary, ParsedTable]:
    """Every MetricWriter table in `stream` (lines of text), keyed by boundary.

    `source` names the input in error messages; `call_table` (CALL or DRAWCALL)
    says what a lone call-style table is (see the module docstring).
    """
    frames: ParsedTable | None = None
    call_tables: list[ParsedTable] = []
    names: dict[str, str] = {}  # interning: one string object per function name
    text = _whole(stream)
    pos, lineno = 0, 0  # a UTF-8 byte offset into text; the number of the line before it
    while True:
        header, pos, lines = _tsv.next_header(text, pos)
        lineno += lines
        if header is None:
            break
        table = _start_table(header.split("\t")[1:])
        if table.boundary == Boundary.FRAME:
            if frames is not None:
                raise RetraceError(f"{source}:{lineno}: a second frames table")
            frames = table
        else:
            call_tables.append(table)
        pos, lineno = _read_rows(table, text, pos, lineno, names, source)
    if len(call_tables) > 2:
        raise RetraceError(f"{source}: more than two call tables")
    out: dict[Boundary, ParsedTable] = {}
    if frames is not None:
        out[Boundary.FRAME] = frames
    if len(call_tables) == 1:
        only = call_tables[0]
        if call_table is None:
            # the names seen are this table's own: only call tables have them
            draws = len(only) > 0 and all(map(is_profiled_draw, names))
            call_table = Boundary.DRAWCALL if draws else Boundary.CALL
        only.boundary = call_table
        out[call_table] = only
    elif call_tables:
        call_tables[1].boundary = Boundary.DRAWCALL
        out[Boundary.CALL], out[Boundary.DRAWCALL] = call_tables
    return out


def _whole(stream: Iterable[str]) -> str:
    """All of `stream`: a file's text, or the lines of any other iterable joined."""
    read = getattr(stream, "read", None)
    return read() if read is not None else "\n".join(line.rstrip("\r\n") for line in stream)


def _read_rows(
    table: ParsedTable, text: str, pos: int, lineno: int, names: dict[str, str], source: str
) -> tuple[int, int]:
    """Add the rows from `pos` to the blank line (or the end) that ends the table; where the
    next line starts and the number of the last line read."""
    calls = table.boundary != Boundary.FRAME
    while True:
        counter = table.frames_ended if calls else len(table)
        pos, lines, counter, call_nos, programs, frames, values, errors, left = _tsv.parse_rows(
            text, pos, calls, len(table.metrics), counter, table.names, names
        )
        first = len(table)
        table.call_nos.frombytes(call_nos)
        table.programs.frombytes(programs)
        table.frames.frombytes(frames)
        for column, cells in zip(table.values, values, strict=True):
            column.frombytes(cells)
        triples = array("q", errors)
        for row, metric, code in zip(triples[0::3], triples[1::3], triples[2::3], strict=True):
            table.errors[(first + row, metric)] = code
        if calls:
            table.frames_ended = counter
        lineno += lines
        if left is None:
            return pos, lineno
        try:  # a row the C scanner leaves to the reference reader
            _add_row(table, left.split("\t"), names)
        except ValueError as exc:
            raise RetraceError(f"{source}:{lineno}: {exc}") from None


def _start_table(fields: list[str]) -> ParsedTable:
    if fields[:3] == _CALL_FIELDS:
        return ParsedTable(Boundary.CALL, fields[3:])
    return ParsedTable(Boundary.FRAME, fields)


def _add_row(table: ParsedTable, fields: list[str], names: dict[str, str]) -> None:
    tag = fields[0]
    if table.boundary == Boundary.FRAME:
        if tag != "frame":
            raise ValueError(f"expected a frame row, not {tag!r}")
        cells = fields[1:]
        frame = len(table.frames)
    elif tag == "frame_end" and len(fields) == 1:
        table.frames_ended += 1
        return
    elif tag == "call" and len(fields) >= 4:
        table.call_nos.append(int(fields[1]))
        table.programs.append(int(fields[2]))
        table.names.append(names.setdefault(fields[3], fields[3]))
        cells = fields[4:]
        frame = table.frames_ended
    else:
        raise ValueError(f"expected a call or frame_end row, not {tag!r}")
    if len(cells) != len(table.metrics):
        raise ValueError(f"{len(cells)} values for {len(table.metrics)} metrics")
    row = len(table.frames)
    for m, cell in enumerate(cells):
        if cell == "-":
            value = math.nan
        elif cell.startswith("#ERR"):
            table.errors[(row, m)] = int(cell[4:])
            value = math.nan
        else:
            value = float(cell)
        table.values[m].append(value)
    table.frames.append(frame)
