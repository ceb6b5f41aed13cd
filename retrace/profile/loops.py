"""Per-loop statistics of a `--loop N` profile: glretrace's benchmarking loop, measured.

A loop is one replay of the frames looped (the last frame, or `--frames A-B`);
its cost in a duration metric is the sum of that metric over the loop's rows
(its frames, or its calls or draw calls). Across the N loops (those measured, if
the profile was interrupted): min, median, mean, p95 and stddev, printed on
stderr and kept, with every loop's value (null where not measured), in the
metadata (`loops`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrace.profile.metadata import TABLE_KEYS
from retrace.vocabulary import Boundary, Kind
from retrace.writer.store import missing_mask
from retrace.writer.tsv import Table, read_rows

if TYPE_CHECKING:  # (imported where the statistics are made: the tables are written)
    import numpy as np

STATISTICS = ("min", "median", "mean", "p95", "stddev")


def loop_statistics(
    tables: list[Table], loops: int, frames: tuple[int, int | None], warmup: int
) -> dict[str, Any]:
    """Every duration column's per-loop sums and their statistics, per table; `frames`:
    the frames looped (first, last)."""
    import numpy as np

    first, last = frames
    per_frame = 1 if last is None else last - first + 1
    per_loop: dict[str, dict[str, list[float | None]]] = {}
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
            known = np.zeros(len(loop_of), bool)  # '-' past the end too
            known[: len(cells)] = ~missing_mask(cells)
            weights = np.zeros(len(loop_of))
            weights[: len(cells)] = np.where(known[: len(cells)], cells, 0)
            sums = np.bincount(loop_of, weights=weights, minlength=loops)[:loops]
            measured = np.bincount(loop_of, weights=known, minlength=loops)[:loops] > 0
            # a loop with no value at all (an interrupted profile's last ones) is left out
            per_loop.setdefault(key, {})[metric.name] = [
                float(v) if m else None for v, m in zip(sums.tolist(), measured, strict=True)
            ]
            if measured.any():
                statistics.setdefault(key, {})[metric.name] = _statistics(
                    sums[measured], metric.unit
                )
    return {
        "count": loops,
        "warmup": warmup,
        "frames": [first, last],
        "statistics": statistics,
        "per_loop": per_loop,
    }


def _statistics(sums: np.ndarray, unit: str) -> dict[str, Any]:
    import numpy as np

    return {
        "unit": unit,
        "loops": len(sums),
        "min": float(sums.min()),
        "median": float(np.median(sums)),
        "mean": float(sums.mean()),
        "p95": float(np.percentile(sums, 95)),
        "stddev": float(sums.std()),
    }


def looped_frames(first: int, last: int | None) -> str:
    """The frames looped, in words: `frame 4`, `frames 2-3`."""
    return f"frame {first}" if first == last else f"frames {first}-{last}"


def loop_lines(facts: dict[str, Any]) -> list[str]:
    """One stderr line per table and duration column: its per-loop statistics."""
    looped = looped_frames(*facts["frames"])
    lines = []
    for table, columns in facts["statistics"].items():
        for name, stats in columns.items():
            scale, unit = (1e-6, "ms") if stats["unit"] == "ns" else (1.0, stats["unit"])
            values = ", ".join(f"{s} {stats[s] * scale:.6g}" for s in STATISTICS)
            lines.append(
                f"retrace: {stats['loops']} loops of {looped}: {table} {name} per loop: "
                f"{values} {unit}".rstrip()
            )
    return lines
