"""`retrace diff`: what changed between two builds, table by table and row by row.

Directions. A profile does not say whether more of a metric is better, so the
name decides:

* a name ending in "Start" (CPU Start, GPU Start, VSIZE Start...) is where the
  event began, or a level at that moment, not what it cost: it is left out
  unless named with ``--metric``, and then it has no direction;
* a name containing "Duration" is a cost: larger is worse (a regression);
* anything else (Pixels Drawn, perf counters, GPU Disjoint) has no direction:
  a significant change is reported as "changed" and never fails the diff.
  ``--lower-is-better NAME`` and ``--higher-is-better NAME`` set a direction.

A row or total counts as changed only if the change of the median (the value
itself with one run per side) exceeds `threshold` relative to the base, and,
for Duration metrics, `min_abs` in absolute terms. With several runs per side
the change must also be significant by a one-sided Mann-Whitney test at
`alpha` (`stats`); where the run counts cannot reach `alpha` at all, the
threshold alone decides and a note says so.

Totals are per-run sums over the rows that have values in every run. The
exit status follows the totals: 1 if any table/metric total regressed. Rows
are many and each has its own noise, so row verdicts only say where to look,
unless `fail_on` is "rows".
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retrace.backends.base import Boundary
from retrace.compare import stats
from retrace.compare.load import AlignedTable, Comparison
from retrace.errors import UsageError

REGRESSION = "regression"
IMPROVEMENT = "improvement"
CHANGED = "changed"
SAME = "same"
NO_DATA = "n/a"
VERDICTS = (REGRESSION, IMPROVEMENT, CHANGED, SAME, NO_DATA)

MANN_WHITNEY = "mann-whitney"
THRESHOLD = "threshold"

# Comparing p-values with alpha: 3 runs per side give exactly 1/20, which must pass 0.05.
_P_SLACK = 1 + 1e-9

# Per-row codes before a direction turns them into verdicts.
_SAME, _UP, _DOWN, _NO_DATA = range(4)


class Direction(enum.Enum):
    """Which way a metric gets worse."""

    LOWER_IS_BETTER = "lower is better"
    HIGHER_IS_BETTER = "higher is better"
    NONE = "no direction"


@dataclass(frozen=True)
class DiffOptions:
    """The command's options; `metrics`, `lower_is_better`, `higher_is_better` are names."""

    threshold: float = 0.05
    min_abs: float = 1000.0
    alpha: float = 0.05
    top: int = 10
    metrics: tuple[str, ...] = ()
    lower_is_better: tuple[str, ...] = ()
    higher_is_better: tuple[str, ...] = ()
    fail_on: str = "totals"


@dataclass
class RowChange:
    """One row of a top list; `call_no` and `name` are None in the frames table."""

    call_no: int | None
    name: str | None
    frame: int
    base: float
    new: float
    change: float
    relative: float
    p: float | None


@dataclass
class MetricDiff:
    """One metric of one table: its totals, verdict counts per row, and top lists."""

    table: str
    metric: str
    direction: Direction
    rows: int
    base_total: float
    new_total: float
    change: float
    relative: float
    p: float | None
    verdict: str
    counts: dict[str, int]
    regressions: list[RowChange] = field(default_factory=list)
    improvements: list[RowChange] = field(default_factory=list)
    changes: list[RowChange] = field(default_factory=list)


@dataclass
class DiffResult:
    """Everything a diff prints: `test` is MANN_WHITNEY or THRESHOLD, `skipped` the metrics
    left out ("table: metric"), `verdict` the overall one, which sets the exit status."""

    base_sources: list[str]
    new_sources: list[str]
    test: str
    options: DiffOptions
    metrics: list[MetricDiff]
    skipped: list[str]
    notes: list[str]
    verdict: str

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == REGRESSION else 0


def direction_of(metric: str, options: DiffOptions) -> Direction | None:
    """The metric's direction, or None when it is left out (a "Start" metric not asked for)."""
    folded = metric.casefold()
    if folded in {m.casefold() for m in options.lower_is_better}:
        return Direction.LOWER_IS_BETTER
    if folded in {m.casefold() for m in options.higher_is_better}:
        return Direction.HIGHER_IS_BETTER
    if folded.split()[-1:] == ["start"] and folded not in {m.casefold() for m in options.metrics}:
        return None
    if "duration" in folded:
        return Direction.LOWER_IS_BETTER
    return Direction.NONE


def check_options(comparison: Comparison, options: DiffOptions) -> None:
    """Refuse direction flags that contradict each other or name no metric compared."""
    both = {m.casefold() for m in options.lower_is_better} & {
        m.casefold() for m in options.higher_is_better
    }
    if both:
        raise UsageError(f"{sorted(both)[0]!r} is both --lower-is-better and --higher-is-better")
    known = {m.casefold() for t in comparison.tables for m in t.metrics}
    for name in (*options.lower_is_better, *options.higher_is_better):
        if name.casefold() not in known:
            raise UsageError(f"no table compared has a metric {name!r}")


def diff(comparison: Comparison, options: DiffOptions) -> DiffResult:
    """Compare every table and metric of `comparison` (see the module docstring)."""
    check_options(comparison, options)
    m = len(comparison.base_sources)
    n = len(comparison.new_sources)
    notes = []
    test = THRESHOLD
    if m > 1 and n > 1:
        if stats.smallest_p(m, n) <= options.alpha * _P_SLACK:
            test = MANN_WHITNEY
        else:
            notes.append(
                f"{m} and {n} runs cannot reach alpha {options.alpha:g} (the smallest "
                f"possible p is {stats.smallest_p(m, n):.3g}): the threshold alone decides; "
                "use 3 or more runs per side"
            )
    elif m > 1 or n > 1:
        notes.append("one run on a side: medians are compared with the threshold alone")
    results = []
    skipped = []
    for table in comparison.tables:
        for metric in table.metrics:
            direction = direction_of(metric, options)
            if direction is None:
                skipped.append(f"{table.title}: {metric}")
                continue
            results.append(
                _diff_metric(comparison, table, metric, direction, test == MANN_WHITNEY, options)
            )
    notes += [
        f"{r.table}, {r.metric}: rows without a value in every run are left out "
        f"({r.counts[NO_DATA]:,})"
        for r in results
        if r.counts[NO_DATA]
    ]
    if skipped:
        notes.append(
            "not compared (a position in time or a level, not a cost; name it with --metric "
            "to compare it): " + ", ".join(skipped)
        )
    return DiffResult(
        comparison.base_sources,
        comparison.new_sources,
        test,
        options,
        results,
        skipped,
        notes,
        _overall(results, options),
    )


def _overall(results: Sequence[MetricDiff], options: DiffOptions) -> str:
    verdicts = {r.verdict for r in results}
    if REGRESSION in verdicts or (
        options.fail_on == "rows" and any(r.counts[REGRESSION] for r in results)
    ):
        return REGRESSION
    for verdict in (IMPROVEMENT, CHANGED):
        if verdict in verdicts:
            return verdict
    return SAME


def _diff_metric(
    comparison: Comparison,
    table: AlignedTable,
    metric: str,
    direction: Direction,
    ranked: bool,
    options: DiffOptions,
) -> MetricDiff:
    base = table.base[metric]
    new = table.new[metric]
    valid = ~(np.isnan(base).any(axis=0) | np.isnan(new).any(axis=0))
    floor = options.min_abs if "duration" in metric.casefold() else 0.0

    base_totals = base[:, valid].sum(axis=1)
    new_totals = new[:, valid].sum(axis=1)
    total = _classify(base_totals[:, None], new_totals[:, None], ranked, floor, options)

    rows = _classify(base, new, ranked, floor, options)
    up = int(np.count_nonzero(rows.codes == _UP))
    down = int(np.count_nonzero(rows.codes == _DOWN))
    if direction == Direction.NONE:
        counts = {REGRESSION: 0, IMPROVEMENT: 0, CHANGED: up + down}
    elif direction == Direction.LOWER_IS_BETTER:
        counts = {REGRESSION: up, IMPROVEMENT: down, CHANGED: 0}
    else:
        counts = {REGRESSION: down, IMPROVEMENT: up, CHANGED: 0}
    counts[SAME] = int(np.count_nonzero(rows.codes == _SAME))
    counts[NO_DATA] = int(np.count_nonzero(rows.codes == _NO_DATA))
    result = MetricDiff(
        table.title,
        metric,
        direction,
        table.rows,
        float(total.base[0]),
        float(total.new[0]),
        float(total.change[0]),
        float(total.relative[0]),
        None if total.p is None else float(total.p[0]),
        _verdict(int(total.codes[0]), direction),
        counts,
    )
    up_rows = _top(np.flatnonzero(rows.codes == _UP), rows, comparison, table, options.top)
    down_rows = _top(np.flatnonzero(rows.codes == _DOWN), rows, comparison, table, options.top)
    if direction == Direction.LOWER_IS_BETTER:
        result.regressions, result.improvements = up_rows, down_rows
    elif direction == Direction.HIGHER_IS_BETTER:
        result.regressions, result.improvements = down_rows, up_rows
    else:
        changed = np.flatnonzero((rows.codes == _UP) | (rows.codes == _DOWN))
        result.changes = _top(changed, rows, comparison, table, options.top)
    return result


def _verdict(code: int, direction: Direction) -> str:
    if code == _NO_DATA:
        return NO_DATA
    if code == _SAME:
        return SAME
    if direction == Direction.NONE:
        return CHANGED
    worse = _UP if direction == Direction.LOWER_IS_BETTER else _DOWN
    return REGRESSION if code == worse else IMPROVEMENT


@dataclass
class _Rows:
    """Per-row medians, changes, p-values and codes (_SAME, _UP, _DOWN) of one metric."""

    base: np.ndarray
    new: np.ndarray
    change: np.ndarray
    relative: np.ndarray
    p: np.ndarray | None
    codes: np.ndarray


def _classify(
    base: np.ndarray, new: np.ndarray, ranked: bool, floor: float, options: DiffOptions
) -> _Rows:
    """Classify every column of the (runs, rows) matrices `base` and `new`.

    `ranked`: also require significance by the Mann-Whitney test; `floor`: the
    smallest absolute change that counts.
    """
    base_median = np.median(base, axis=0)
    new_median = np.median(new, axis=0)
    change = new_median - base_median
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(change == 0, 0.0, change / np.abs(base_median))
    large = (np.abs(relative) > options.threshold) & (np.abs(change) > floor)
    up = large & (change > 0)
    down = large & (change < 0)
    p = None
    if ranked:
        p_up, p_down = stats.mann_whitney(base, new)
        limit = options.alpha * _P_SLACK
        up &= p_up <= limit
        down &= p_down <= limit
        p = np.where(change >= 0, p_up, p_down)
    codes = np.full(change.shape, _SAME, dtype=np.int8)
    codes[up] = _UP
    codes[down] = _DOWN
    codes[np.isnan(change)] = _NO_DATA
    return _Rows(base_median, new_median, change, relative, p, codes)


def _top(
    indexes: np.ndarray, rows: _Rows, comparison: Comparison, table: AlignedTable, top: int
) -> list[RowChange]:
    """The `top` rows among `indexes` with the largest absolute change, largest first."""
    if top <= 0 or not indexes.size:
        return []
    magnitude = np.abs(rows.change[indexes])
    if indexes.size > top:
        keep = np.argpartition(-magnitude, top - 1)[:top]
        indexes, magnitude = indexes[keep], magnitude[keep]
    indexes = indexes[np.argsort(-magnitude, kind="stable")]
    is_call = table.boundary != Boundary.FRAME
    names = comparison.vocabulary.names
    return [
        RowChange(
            int(table.call_nos[i]) if is_call else None,
            names[table.names[i]] if is_call else None,
            int(table.frames[i]),
            float(rows.base[i]),
            float(rows.new[i]),
            float(rows.change[i]),
            float(rows.relative[i]),
            None if rows.p is None else float(rows.p[i]),
        )
        for i in indexes.tolist()
    ]
