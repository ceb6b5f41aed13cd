"""The tables as plain records, for pandas, DuckDB or a spreadsheet (`--format csv|json`).

glretrace's TSV holds several tables, each with its own header, separated by
blank lines, with bare ``frame_end`` rows between calls: no general reader
takes that as it is. These formats hold every table in one rectangular
record set instead, one record per event:

    event,frame,call_no,program,name,<every metric of every table...>

`event` is ``frame``, ``call`` or ``drawcall`` (the table the row belongs
to), `frame` the 0-based frame, and the metric columns are the union of the
tables' columns in table order (frames, calls, draw calls); a cell a table does
not have, and a missing value (``-`` in the TSV), is empty in CSV and ``null``
in JSON. `call_no`, `program` and `name` are empty in frame rows. JSON is JSON
Lines: one object per line, the keys as above. So::

    pandas.read_csv("out.csv").query("event == 'call'")
    pandas.read_json("out.json", lines=True)
    SELECT name, sum("GPU Duration") FROM 'out.csv' WHERE event = 'drawcall' GROUP BY name

Integer metrics print as integers and floating-point ones with every digit
(shortest round trip), not glretrace's 6 significant digits. Units are in the
metadata beside the file (`retrace.profile.metadata`). Rows are streamed in
blocks from the store, as `MetricWriter` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from retrace.vocabulary import Boundary
from retrace.writer.store import missing_mask
from retrace.writer.tsv import TABLE_ORDER, Table, read_rows

FORMATS = ("tsv", "csv", "json")
EVENT_NAMES = {Boundary.FRAME: "frame", Boundary.CALL: "call", Boundary.DRAWCALL: "drawcall"}
KEY_FIELDS = ("event", "frame", "call_no", "program", "name")


def metric_columns(tables: Iterable[Table]) -> list[str]:
    """The union of the tables' metric names, in table order then column order."""
    names: dict[str, None] = {}
    for table in sorted(tables, key=lambda t: TABLE_ORDER.index(t.boundary)):
        names.update(dict.fromkeys(m.name for m in table.metrics))
    return list(names)


def records(table: Table, columns: list[str], block_rows: int = 1 << 16) -> Iterator[list[Any]]:
    """One list per event: `KEY_FIELDS`, then a value (or None) per name in `columns`."""
    rows = table.rows or 0
    event = EVENT_NAMES[table.boundary]
    where = {m.name: i for i, m in enumerate(table.metrics)}
    for start in range(0, rows, block_rows):
        stop = min(start + block_rows, rows)
        count = stop - start
        if table.boundary == Boundary.FRAME:
            keys = [range(start, stop), [None] * count, [None] * count, [None] * count]
        else:
            assert table.call_nos is not None and table.programs is not None
            assert table.names is not None and table.frame_of_event is not None
            names = read_rows(table.names, start, stop).tolist()
            keys = [
                read_rows(table.frame_of_event, start, stop).tolist(),
                read_rows(table.call_nos, start, stop).tolist(),
                read_rows(table.programs, start, stop).tolist(),
                [table.name_table[n] for n in names],
            ]
        cells = []
        for name in columns:
            i = where.get(name)
            if i is None:
                cells.append([None] * count)
                continue
            cells.append(_values(table, i, start, stop))
        yield from ([event, *row] for row in zip(*keys, *cells, strict=True))


def _values(table: Table, index: int, start: int, stop: int) -> list[Any]:
    """A metric's cells of rows [start, stop): ints or floats as its type says, None where
    missing (or an error code)."""
    import numpy as np

    metric = table.metrics[index]
    block = read_rows(table.values[index], start, stop)
    missing = missing_mask(block)
    errors = table.errors[index] if table.errors is not None else None
    if errors is not None:
        codes = read_rows(errors, start, stop)
        missing |= np.where(missing_mask(codes), 0, codes) != 0
    if metric.num_type.is_float:
        values = block.astype(np.float64).tolist()
    else:
        values = np.where(missing, 0, block).astype(np.int64).tolist()
    out: list[Any] = values + [None] * (stop - start - len(values))
    for j in np.flatnonzero(missing).tolist():
        out[j] = None
    return out


def write_records(stream: TextIO, tables: Iterable[Table], fmt: str) -> None:
    """Every table with metrics, as CSV (with a header) or JSON Lines."""
    chosen = [t for t in tables if t.metrics]
    chosen.sort(key=lambda t: TABLE_ORDER.index(t.boundary))
    columns = metric_columns(chosen)
    header = [*KEY_FIELDS, *columns]
    if fmt == "csv":
        import csv  # (only --format csv needs it)

        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(header)
        for table in chosen:
            writer.writerows(records(table, columns))
        return
    dumps = json.JSONEncoder(allow_nan=False).encode
    for table in chosen:
        for row in records(table, columns):
            clean = [None if isinstance(v, float) and not math.isfinite(v) else v for v in row]
            stream.write(dumps(dict(zip(header, clean, strict=True))))
            stream.write("\n")
