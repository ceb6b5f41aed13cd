"""Per-loop statistics of a `--loop N` profile: glretrace's benchmarking loop, measured.

A loop is one replay of the frames looped (the last frame, or `--frames A-B`);
its cost in a duration metric is the sum of that metric over the loop's rows
(its frames, or its calls or draw calls). Across the N loops: min, median,
mean, p95 and stddev, printed on stderr and kept, with every loop's value, in
the metadata (`loops`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrace.profile.metadata import TABLE_KEYS
from retrace.vocabulary import Boundary, Kind
from retrace.writer.store import missing_mask
from retrace.writer.tsv import Table, read_rows

STATISTICS = ("min", "median", "mean", "p95", "stddev")


def loop_statistics(
    tables: list[Table], loops: int, frames: tuple[int, int | None], warmup: int
) -> dict[str, Any]:
    """Every duration column's per-loop sums and their statistics, per table; `frames`:
    the frames looped (first, last)."""
    first, last = frames
    per_frame = 1 if last is None else last - first + 1
    per_loop: dict[str, dict[str, list[float]]] = {}
    statistics: dict[str, dict[str, dict[str, Any]]] = {}
    for table in tables:
        rows = table.rows or 0
        if table.boundary == Boundary.FRAME:
            loop_of = np.arange(rows) // per_frame
        else:
            assert table.frame_of_event is not None
            loop_of = read_rows(table.frame_of_event, 0, rows) // per_frame
        key = TABLE_KEYS[table.boundary]
        for metric, values in zip(table.metrics, table.values, strict=True):
            if metric.kind != Kind.DURATION:
                continue
            cells = read_rows(values, 0, rows)
            cells = np.where(missing_mask(cells), 0, cells).astype(np.float64)
            cells = np.append(cells, np.zeros(len(loop_of) - len(cells)))  # '-' past the end
            sums = np.bincount(loop_of, weights=cells, minlength=loops)[:loops]
            per_loop.setdefault(key, {})[metric.name] = sums.tolist()
            statistics.setdefault(key, {})[metric.name] = {
                "unit": metric.unit,
                "min": float(sums.min()),
                "median": float(np.median(sums)),
                "mean": float(sums.mean()),
                "p95": float(np.percentile(sums, 95)),
                "stddev": float(sums.std()),
            }
    return {
        "count": loops,
        "warmup": warmup,
        "frames": [first, last],
        "statistics": statistics,
        "per_loop": per_loop,
    }


def loop_lines(facts: dict[str, Any]) -> list[str]:
    """One stderr line per table and duration column: its per-loop statistics."""
    first, last = facts["frames"]
    looped = f"frame {first}" if first == last else f"frames {first}-{last}"
    lines = []
    for table, columns in facts["statistics"].items():
        for name, stats in columns.items():
            scale, unit = (1e-6, "ms") if stats["unit"] == "ns" else (1.0, stats["unit"])
            values = ", ".join(f"{s} {stats[s] * scale:.6g}" for s in STATISTICS)
            lines.append(
                f"retrace: {facts['count']} loops of {looped}: {table} {name} per loop: "
                f"{values} {unit}".rstrip()
            )
    return lines
