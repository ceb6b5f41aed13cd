"""One table as whole numpy arrays, whichever way it came: from the store just measured
(`Table`) or read back from a TSV file (`ParsedTable`).

The timeline and the report need every row of a table at once (to nest slices,
to plot), not streamed blocks as the text writers do; this is their one input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrace.vocabulary import Boundary
from retrace.writer.store import missing_mask
from retrace.writer.tsv import Table, read_rows
from retrace.writer.tsv_reader import ParsedTable


@dataclass
class Events:
    """`values[name]`: float64 per row, NaN where missing; `frames`: each row's 0-based
    frame; `call_nos`, `programs`, `names`: per row of a call table (empty for frames)."""

    boundary: Boundary
    metrics: list[str]
    values: dict[str, np.ndarray]
    frames: np.ndarray
    call_nos: np.ndarray
    programs: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.frames)

    def take(self, rows: np.ndarray) -> Events:
        """These rows (of a call table) only."""
        return Events(
            self.boundary,
            self.metrics,
            {m: v[rows] for m, v in self.values.items()},
            self.frames[rows],
            self.call_nos[rows],
            self.programs[rows],
            [self.names[i] for i in rows.tolist()],
        )

    def get(self, metric: str) -> np.ndarray | None:
        """The column named `metric` (any case), or None."""
        folded = metric.casefold()
        return next((v for m, v in self.values.items() if m.casefold() == folded), None)

    def column(self, metric: str) -> np.ndarray:
        """The column named `metric` (any case), which the caller knows is there."""
        found = self.get(metric)
        if found is None:
            raise KeyError(metric)
        return found

    @classmethod
    def from_table(cls, table: Table) -> Events:
        rows = table.rows or 0
        values = {}
        for metric, column in zip(table.metrics, table.values, strict=True):
            raw = read_rows(column, 0, rows)
            full = np.full(rows, np.nan)
            full[: len(raw)] = np.where(missing_mask(raw), np.nan, raw.astype(np.float64))
            values[metric.name] = full
        if table.boundary == Boundary.FRAME:
            empty = np.empty(0, np.int64)
            return cls(table.boundary, list(values), values, np.arange(rows), empty, empty, [])
        assert table.names is not None and table.frame_of_event is not None
        assert table.call_nos is not None and table.programs is not None
        names = read_rows(table.names, 0, rows).tolist()
        return cls(
            table.boundary,
            list(values),
            values,
            read_rows(table.frame_of_event, 0, rows).astype(np.int64),
            read_rows(table.call_nos, 0, rows).astype(np.int64),
            read_rows(table.programs, 0, rows).astype(np.int64),
            [table.name_table[n] for n in names],
        )

    @classmethod
    def from_parsed(cls, table: ParsedTable) -> Events:
        values = {m: np.frombuffer(table.column(m), np.float64) for m in table.metrics}
        return cls(
            table.boundary,
            list(table.metrics),
            values,
            np.frombuffer(table.frames, np.int64),
            np.frombuffer(table.call_nos, np.int64),
            np.frombuffer(table.programs, np.int64),
            list(table.names),
        )


def row_contexts(runs: list[list[int]], rows: int) -> np.ndarray:
    """`context_runs` decoded: the context number of each of `rows` rows (0: unknown)."""
    contexts = np.zeros(rows, np.int64)
    for (row, number), (end, _) in zip(runs, [*runs[1:], [rows, 0]], strict=False):
        contexts[row:end] = number
    return contexts
