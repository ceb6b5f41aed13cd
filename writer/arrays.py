"""A measured table as a numpy structured array: one record per event, for programs.

The TSV's own layout is glretrace's; this is the same data for code. Records
are the table's rows without the bare ``frame_end`` lines: frames have
``frame``; calls and draw calls have ``call_no``, ``program``, ``name`` and
``frame`` (the 0-based frame the event belongs to, which the TSV conveys with
its ``frame_end`` lines). Every metric is a float64 field named as its TSV
column (``backend: name`` where two backends share a name), NaN where the TSV
prints ``-`` or an error code, so that numpy and pandas treat gaps alike.
"""

from __future__ import annotations

import numpy as np

from retrace.vocabulary import TABLE_NAMES, Boundary
from retrace.writer.store import missing_mask
from retrace.writer.tsv import Table, Values, read_rows

__all__ = ["TABLE_NAMES", "table_array"]


def metric_fields(table: Table) -> list[str]:
    """The field names of the table's metrics: their names, made unique."""
    names = [m.name for m in table.metrics]
    return [f"{m.backend}: {m.name}" if names.count(m.name) > 1 else m.name for m in table.metrics]


def table_array(table: Table) -> np.ndarray:
    """All rows of `table` as one structured array (see the module's docstring)."""
    rows = table.rows or 0
    fields: list[tuple[str, np.ndarray]] = []
    if table.boundary == Boundary.FRAME:
        fields.append(("frame", np.arange(rows, dtype=np.int64)))
    else:
        assert table.call_nos is not None and table.programs is not None
        assert table.names is not None and table.frame_of_event is not None
        name_table = np.asarray(list(table.name_table) or [""])
        fields += [
            ("call_no", _ints(table.call_nos, rows)),
            ("program", _ints(table.programs, rows)),
            ("name", name_table[_ints(table.names, rows)]),
            ("frame", _ints(table.frame_of_event, rows)),
        ]
    for i, (name, values) in enumerate(zip(metric_fields(table), table.values, strict=True)):
        errors = table.errors[i] if table.errors is not None else None
        fields.append((name, _floats(values, errors, rows)))
    out = np.empty(rows, np.dtype([(name, values.dtype) for name, values in fields]))
    for name, values in fields:
        out[name] = values
    return out


def _ints(values: Values, rows: int) -> np.ndarray:
    return read_rows(values, 0, rows).astype(np.int64)


def _floats(values: Values, errors: Values | None, rows: int) -> np.ndarray:
    """`rows` values as float64, NaN where missing, errored or beyond what was measured."""
    block = read_rows(values, 0, rows)
    out = np.full(rows, np.nan)
    out[: len(block)] = np.where(missing_mask(block), np.nan, block.astype(np.float64))
    if errors is not None:
        codes = read_rows(errors, 0, rows)
        failed = (codes != 0) & ~missing_mask(codes)
        out[: len(codes)][failed] = np.nan
    return out
