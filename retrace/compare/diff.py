"""`retrace diff`: what changed between two builds, table by table and row by row.

Directions. A profile does not say whether more of a metric is better, so the
name decides:

* a name ending in "Start" (CPU Start, GPU Start, VSIZE Start...) is where the
  event began, or a level at that moment, not what it cost: it is left out
  unless named with ``--metric``, and then it has no direction;
* ``<metric> min``, ``<metric> p95`` and ``<metric> stddev`` beside ``<metric>``
  are what ``--stats`` derives from the repeats of a run: a spread, not a cost,
  so they are left out too (summing standard deviations means nothing);
* a name containing "Duration", and GPU Busy and GPU Idle (the GPU time of an
  event's GPU work and of its waits), is a time cost: larger is worse (a
  regression);
* anything else (Pixels Drawn, perf counters, GPU Disjoint) has no direction:
  a significant change is reported as "changed" and never fails the diff.
  ``--lower-is-better NAME`` and ``--higher-is-better NAME`` set a direction.

Start-up. The first `startup_frames` frames (default 1) hold the driver's
start, the first shader compiles and uploads: the first GL call alone can cost
milliseconds. They are reported apart, per table and metric, and left out of
the totals and of row verdicts; with no frame after them, nothing is left out.

A row or total counts as changed only if the change of the median (the value
itself with one run per side) exceeds `threshold` relative to the base, and,
for Duration metrics, `min_abs` in absolute terms, and, with several runs per
side, the change is significant: its two-sided Mann-Whitney p-value (`stats`),
adjusted by Benjamini-Hochberg for the number of tests asked at once, is at
most `alpha`. A table has hundreds of rows, and at 5% noise alone would flag
one in twenty, so a row's p is adjusted over the rows of its table and
metric; a total's over the totals, since the overall verdict asks whether
any of them changed. Where the run counts cannot reach `alpha` at all, the
threshold alone decides and a note says so. Each total's change comes with a 1 - alpha confidence
interval for the ratio of new to base (`stats.shift_interval` on the logs).

Totals are per-run sums over the rows that have values in every run. The
exit status follows the totals: 1 if any table/metric total regressed. Rows
are many and each has its own noise, so row verdicts only say where to look,
unless `fail_on` is "rows".
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retrace.compare import stats
from retrace.compare.load import AlignedTable, Comparison
from retrace.errors import UsageError
from retrace.vocabulary import Boundary

REGRESSION = "regression"
IMPROVEMENT = "improvement"
CHANGED = "changed"
SAME = "same"
NO_DATA = "n/a"
VERDICTS = (REGRESSION, IMPROVEMENT, CHANGED, SAME, NO_DATA)

MANN_WHITNEY = "mann-whitney"
THRESHOLD = "threshold"

# Per-row codes before a direction turns them into verdicts; _STARTUP rows are not judged.
_SAME, _UP, _DOWN, _NO_DATA, _STARTUP = range(5)


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
    startup_frames: int = 1
    force: bool = False  # compare runs whose metadata name different traces, with a warning


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
    q: float | None


@dataclass
class Startup:
    """The start-up frames of one table and metric: medians of the runs' sums, not judged."""

    rows: int
    base: float
    new: float
    relative: float


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
    ci_low: float
    ci_high: float
    p: float | None
    q: float | None
    verdict: str
    counts: dict[str, int]
    startup: Startup | None
    regressions: list[RowChange] = field(default_factory=list)
    improvements: list[RowChange] = field(default_factory=list)
    changes: list[RowChange] = field(default_factory=list)
    unit: str = ""  # from the runs' metadata; "" when none says


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
    if is_time_cost(metric):
        return Direction.LOWER_IS_BETTER
    return Direction.NONE


def is_time_cost(metric: str) -> bool:
    """A time the event cost (ns): the Durations, GPU Busy and GPU Idle."""
    folded = metric.casefold()
    return "duration" in folded or folded in ("gpu busy", "gpu idle")


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
    notes = list(comparison.notes)
    test = THRESHOLD
    if m > 1 and n > 1:
        if stats.smallest_p(m, n) <= options.alpha * stats.P_SLACK:
            test = MANN_WHITNEY
        else:
            notes.append(
                f"{m} and {n} runs cannot reach alpha {options.alpha:g} (the smallest "
                f"possible p is {stats.smallest_p(m, n):.3g}): the threshold alone decides; "
                "use 4 or more runs per side"
            )
    else:
        notes.append(
            "one run on a side: no significance test, the threshold alone decides "
            "(use 4 or more runs per side, or retrace compare)"
        )
    results = []
    skipped = []
    derived = []
    for table in comparison.tables:
        startup = _startup_rows(table, options, notes)
        for metric in table.metrics:
            direction = direction_of(metric, options)
            if metric in table.derived:
                if not _named(metric, options.metrics):
                    derived.append(f"{table.title}: {metric}")
                    continue
                if not _named(metric, options.lower_is_better + options.higher_is_better):
                    direction = Direction.NONE  # a spread asked for: reported, never a cost
            if direction is None:
                skipped.append(f"{table.title}: {metric}")
            else:
                ranked = test == MANN_WHITNEY
                results.append(
                    _diff_metric(comparison, table, metric, direction, ranked, startup, options)
                )
    if test == MANN_WHITNEY:
        _judge_totals(results, options)
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
    if derived:
        notes.append(
            "not compared (--stats columns: the spread of a run's repeats, not costs): "
            + ", ".join(derived)
        )
    return DiffResult(
        comparison.base_sources,
        comparison.new_sources,
        test,
        options,
        results,
        skipped + derived,
        notes,
        _overall(results, options),
    )


def _named(metric: str, names: Sequence[str]) -> bool:
    return metric.casefold() in {name.casefold() for name in names}


def _startup_rows(table: AlignedTable, options: DiffOptions, notes: list[str]) -> np.ndarray:
    """The rows of the start-up frames, to be reported apart; none if nothing else is left."""
    startup = table.frames < options.startup_frames
    if startup.all() and table.rows:
        notes.append(
            f"{table.title}: no frame after the {options.startup_frames} start-up frame(s); "
            "they are compared with the rest"
        )
        return np.zeros_like(startup)
    return startup


def _judge_totals(results: Sequence[MetricDiff], options: DiffOptions) -> None:
    """Gate the totals' verdicts on their p-values adjusted together: the overall verdict
    asks whether any total changed, one question asked of every total at once."""
    q = stats.false_discovery(np.array([r.p for r in results], dtype=np.float64))
    for result, adjusted in zip(results, q.tolist(), strict=True):
        result.q = adjusted
        if adjusted > options.alpha * stats.P_SLACK and result.verdict != NO_DATA:
            result.verdict = SAME


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
    startup: np.ndarray,
    options: DiffOptions,
) -> MetricDiff:
    """One metric of one table: its total (with `ranked`, to be gated by `_judge_totals`),
    its rows, its start-up rows apart."""
    base = table.base[metric]
    new = table.new[metric]
    valid = ~(np.isnan(base).any(axis=0) | np.isnan(new).any(axis=0))
    floor = options.min_abs if is_time_cost(metric) else 0.0

    judged = valid & ~startup
    base_totals = base[:, judged].sum(axis=1)
    new_totals = new[:, judged].sum(axis=1)
    total = _classify(base_totals[:, None], new_totals[:, None], ranked, floor, options)
    low, high = _ratio_interval(base_totals, new_totals, 1 - options.alpha)

    rows = _classify(base, new, ranked, floor, options)
    if rows.p is not None:  # ranked
        rows.q = q = np.full(rows.change.shape, np.nan)
        q[judged] = stats.false_discovery(rows.p[judged])
        rows.codes[~(q <= options.alpha * stats.P_SLACK) & valid] = _SAME
    rows.codes[startup] = _STARTUP
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
        low,
        high,
        None if total.p is None else float(total.p[0]),
        None,
        _verdict(int(total.codes[0]), direction),
        counts,
        _startup(base, new, startup & valid),
    )
    result.unit = table.units.get(metric, "")
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


def _ratio_interval(base: np.ndarray, new: np.ndarray, confidence: float) -> tuple[float, float]:
    """The interval of the relative change new / base - 1 of the runs' totals.

    From the shift of the logs where every total is positive (a ratio is what a
    slowdown is); otherwise from the shift of the values, relative to the base
    median. NaN with one run on a side, infinite where the run counts are too
    few for `confidence`.
    """
    if base.size < 2 or new.size < 2:
        return math.nan, math.nan
    if (base > 0).all() and (new > 0).all():
        low, high = stats.shift_interval(np.log(base), np.log(new), confidence)
        return math.expm1(low), math.expm1(high)
    low, high = stats.shift_interval(base, new, confidence)
    scale = abs(float(np.median(base)))
    if scale == 0:
        return (0.0, 0.0) if low == high == 0 else (-math.inf, math.inf)
    return low / scale, high / scale


def _startup(base: np.ndarray, new: np.ndarray, rows: np.ndarray) -> Startup | None:
    if not rows.any():
        return None
    before = float(np.median(base[:, rows].sum(axis=1)))
    after = float(np.median(new[:, rows].sum(axis=1)))
    relative = 0.0 if after == before else (after - before) / abs(before) if before else math.inf
    return Startup(int(rows.sum()), before, after, relative)


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
    """Per-row medians, changes, p-values (and q, adjusted), codes (_SAME, _UP...)."""

    base: np.ndarray
    new: np.ndarray
    change: np.ndarray
    relative: np.ndarray
    p: np.ndarray | None
    codes: np.ndarray
    q: np.ndarray | None = None


def _classify(
    base: np.ndarray, new: np.ndarray, ranked: bool, floor: float, options: DiffOptions
) -> _Rows:
    """Classify every column of the (runs, rows) matrices `base` and `new` by the size of
    the change; with `ranked`, also give each its two-sided Mann-Whitney p-value (to be
    gated by the caller, after adjustment).

    `floor`: the smallest absolute change that counts.
    """
    base_median = np.median(base, axis=0)
    new_median = np.median(new, axis=0)
    change = new_median - base_median
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(change == 0, 0.0, change / np.abs(base_median))
    large = (np.abs(relative) > options.threshold) & (np.abs(change) > floor)
    p = None
    if ranked:
        p = stats.two_sided(base, new)
    codes = np.full(change.shape, _SAME, dtype=np.int8)
    codes[large & (change > 0)] = _UP
    codes[large & (change < 0)] = _DOWN
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
            None if rows.q is None else float(rows.q[i]),
        )
        for i in indexes.tolist()
    ]
