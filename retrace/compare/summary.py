"""`retrace summary`: a profile condensed into statistics per table and metric.

Nobody reads a table of thousands of calls row by row. The summary gives each
metric's distribution across frames, calls or draw calls: count, sum, min, max,
mean, median, p95 (linear interpolation between the closest ranks) and the
sample standard deviation. For call and draw-call tables it also shows where
the total goes, per function name and per program. glretrace's
profileshader.py does that per program only.

The ``min``, ``p95`` and ``stddev`` columns of ``--stats`` are left out: they
describe the spread of one row's repeats, and summing them means nothing.
Missing cells (``-``, ``#ERR``) are left out of every statistic, and `count`
says how many cells are left. Grouping sorts the values once (numpy lexsort),
so a table of millions of calls needs no Python object per row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from retrace.compare.load import TABLE_NAMES, Run, Vocabulary, columns, is_derived
from retrace.vocabulary import Boundary
from retrace.writer.tsv import TABLE_ORDER


@dataclass
class Stats:
    count: int
    sum: float
    min: float
    max: float
    mean: float
    median: float
    p95: float
    stddev: float


@dataclass
class Group:
    """One function or program: its share of a metric's total."""

    key: str
    count: int
    sum: float
    share: float
    mean: float
    median: float
    max: float


@dataclass
class MetricSummary:
    metric: str
    stats: Stats
    by_function: list[Group] = field(default_factory=list)
    by_program: list[Group] = field(default_factory=list)


@dataclass
class TableSummary:
    table: str
    rows: int
    metrics: list[MetricSummary]


@dataclass
class RunSummary:
    source: str
    tables: list[TableSummary]


def summarize(run: Run, top: int | None = None) -> RunSummary:
    """Statistics of every table of `run`; `top` limits each group list (None: all)."""
    vocabulary = Vocabulary()
    tables = []
    for boundary in TABLE_ORDER:
        parsed = run.tables.get(boundary)
        if parsed is None:
            continue
        cols = columns(parsed, parsed.metrics, vocabulary)
        metrics = []
        for metric in parsed.metrics:
            if is_derived(metric, parsed.metrics):
                continue  # --stats columns: a spread of repeats, which no sum describes
            values = cols.values[metric]
            summary = MetricSummary(metric, _stats(values))
            if boundary != Boundary.FRAME:
                total = summary.stats.sum
                names = vocabulary.names
                summary.by_function = [
                    Group(names[key], *shares)
                    for key, shares in _groups(cols.names, values, total, top)
                ]
                summary.by_program = [
                    Group(str(key), *shares)
                    for key, shares in _groups(cols.programs, values, total, top)
                ]
            metrics.append(summary)
        tables.append(TableSummary(TABLE_NAMES[boundary], len(cols), metrics))
    return RunSummary(run.source, tables)


def _stats(values: np.ndarray) -> Stats:
    v = values[~np.isnan(values)]
    if not v.size:
        return Stats(0, 0.0, *(math.nan,) * 6)
    return Stats(
        int(v.size),
        float(v.sum()),
        float(v.min()),
        float(v.max()),
        float(v.mean()),
        float(np.median(v)),
        float(np.percentile(v, 95)),
        float(v.std(ddof=1)) if v.size > 1 else math.nan,
    )


def _groups(
    keys: np.ndarray, values: np.ndarray, total: float, top: int | None
) -> list[tuple[int, tuple[int, float, float, float, float, float]]]:
    """(key, (count, sum, share %, mean, median, max)) per key, the largest sum first."""
    ok = ~np.isnan(values)
    keys, values = keys[ok], values[ok]
    if not keys.size:
        return []
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    counts = np.diff(np.r_[starts, keys.size])
    sums = np.add.reduceat(values, starts)
    medians = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2
    maxima = values[starts + counts - 1]
    ranked = np.argsort(-sums, kind="stable")[:top]
    share = sums * 100 / total if total else np.full(sums.shape, math.nan)
    return [
        (
            int(keys[starts[g]]),
            (
                int(counts[g]),
                float(sums[g]),
                float(share[g]),
                float(sums[g] / counts[g]),
                float(medians[g]),
                float(maxima[g]),
            ),
        )
        for g in ranked.tolist()
    ]
