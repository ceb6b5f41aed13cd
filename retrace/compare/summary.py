"""`retrace summary`: a profile condensed into statistics per table and metric.

Nobody reads a table of thousands of calls row by row. The summary gives each
metric's distribution across frames, calls or draw calls: count, sum, min, max,
mean, median, p95 (linear interpolation between the closest ranks) and the
sample standard deviation. For call and draw-call tables it also shows where
the total goes, per function name and per program. glretrace's
profileshader.py does that per program only.

Per frame, as LLTrace's period statistics: the frames table's metrics are
per-frame values already; a call table's are summed per frame (the calls of
frame f), and min/max/mean/p95/stddev describe those sums, so a spike in one
frame shows where a mean over thousands of calls hides it. Values sampled at a
point in time rather than accumulated (VSIZE Start, RSS Start: levels, not
costs) are not summed: their time-weighted mean (each row's value weighted by
its CPU Duration, or GPU Duration) says what the level was while the work ran.
Units come from the metadata beside the TSV where there is one.

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

from retrace.compare.load import Columns, Run, Vocabulary, columns, is_derived
from retrace.vocabulary import TABLE_TITLES, Boundary
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
    longest_call: int  # the call number of the row holding `max`


@dataclass
class MetricSummary:
    metric: str
    stats: Stats
    by_function: list[Group] = field(default_factory=list)
    by_program: list[Group] = field(default_factory=list)
    unit: str = ""
    per_frame: Stats | None = None  # call tables: the statistics of per-frame sums
    weighted_mean: float | None = None  # levels (VSIZE/RSS Start): weighted by duration


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
            summary = MetricSummary(
                metric, _stats(values), unit=run.units.get((boundary, metric), "")
            )
            if is_level(metric):
                summary.weighted_mean = _weighted_mean(values, cols)
            elif boundary != Boundary.FRAME and not is_timestamp(metric):
                summary.per_frame = _stats(_per_frame(cols.frames, values))
            if boundary != Boundary.FRAME:
                total = summary.stats.sum
                names = vocabulary.names
                summary.by_function = [
                    Group(names[key], *shares)
                    for key, shares in _groups(cols.names, values, cols.call_nos, total, top)
                ]
                summary.by_program = [
                    Group(str(key), *shares)
                    for key, shares in _groups(cols.programs, values, cols.call_nos, total, top)
                ]
            metrics.append(summary)
        tables.append(TableSummary(TABLE_TITLES[boundary], len(cols), metrics))
    return RunSummary(run.source, tables)


def is_timestamp(metric: str) -> bool:
    """CPU Start, GPU Start: positions in time, which no sum or mean describes."""
    return metric.casefold() in ("cpu start", "gpu start")


def is_level(metric: str) -> bool:
    """A value sampled at the event's start (VSIZE Start, RSS Start): a level, not a cost."""
    return metric.casefold().endswith(" start") and not is_timestamp(metric)


def _per_frame(frames: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The sum of each frame's values (NaN for a frame with none)."""
    ok = ~np.isnan(values)
    if not ok.any():
        return np.empty(0)
    count = int(frames.max()) + 1
    sums = np.bincount(frames[ok], weights=values[ok], minlength=count)
    seen = np.bincount(frames[ok], minlength=count) > 0
    return np.where(seen, sums, np.nan)


def _weighted_mean(values: np.ndarray, cols: Columns) -> float:
    """The mean of `values` weighted by the rows' CPU (else GPU) Duration; NaN without one."""
    weights = next(
        (v for m, v in cols.values.items() if m.casefold() in ("cpu duration", "gpu duration")),
        None,
    )
    if weights is None:
        return math.nan
    ok = ~np.isnan(values) & ~np.isnan(weights) & (weights > 0)
    total = float(weights[ok].sum())
    return float((values[ok] * weights[ok]).sum() / total) if total else math.nan


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
    keys: np.ndarray, values: np.ndarray, call_nos: np.ndarray, total: float, top: int | None
) -> list[tuple[int, tuple[int, float, float, float, float, float, int]]]:
    """(key, (count, sum, share %, mean, median, max, call no of the max)) per key, the
    largest sum first."""
    ok = ~np.isnan(values)
    keys, values, call_nos = keys[ok], values[ok], call_nos[ok]
    if not keys.size:
        return []
    order = np.lexsort((values, keys))
    keys, values, call_nos = keys[order], values[order], call_nos[order]
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
                int(call_nos[starts[g] + counts[g] - 1]),
            ),
        )
        for g in ranked.tolist()
    ]
