"""Repeated runs of a pass: where each run writes, and how the runs become one table.

With `--repeat N --warmup W` every pass is replayed W + N times, each run into
columns of its own; once the pass is complete, the median of the N measured
runs goes in the table (min, p95 and stddev beside it with `--stats`). Only the
columns a pass wrote are combined: a backend may spread its metrics over
several passes. The runs themselves are kept too (`Profile.runs`), so that a
comparison has every sample, not only the median.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from retrace.profile.results import Profile, column_key
from retrace.vocabulary import Boundary, Metric, NumType
from retrace.writer.store import FLOAT64, INT64, Column, Store, missing_mask

if TYPE_CHECKING:
    pass

Key = tuple[Metric, Boundary]
# (metric, boundary, suffix) -> its column in the store
ColumnOf = Callable[[Metric, Boundary, str], Column]


def run_suffix(pass_index: int, run: int) -> str:
    """The store suffix of one run's columns."""
    return f".pass{pass_index}.run{run}"


def store_column(store: Store, metric: Metric, boundary: Boundary, suffix: str = "") -> Column:
    """A column of the profile in `store`: a run's or a statistic's (`suffix`) holds floats
    (medians and spreads need them), the table's the metric's type."""
    dtype = FLOAT64 if metric.num_type.is_float or suffix else INT64
    return store.column(column_key(metric, boundary, suffix), dtype)


def combine_runs_done(
    profile: Profile, store: Store, state: dict, repeat: int, warmup: int, stats: bool
) -> int:
    """After an interruption, in the parent: the median (and `stats`) of the runs the
    interrupted pass completed (`state`: the checkpoint) into the profile's columns, as if
    the pass had had only those; returns how many (0: none to combine). The columns made
    are not in the store's manifest, so a `--resume` measures and combines the pass anew."""
    pass_index, done = state["pass"], state["run"] - warmup
    repeats = Repeats(repeat, warmup, stats, partial(store_column, store))
    if done <= 0 or not repeats.repeated or pass_index >= state["passes"]:
        return 0
    first = run_suffix(pass_index, warmup)
    keys = [
        (m, b)
        for b, metrics in profile.metrics.items()
        for m in metrics
        if column_key(m, b, first) in store and (m, b) not in profile.columns
    ]
    repeats.combine(keys, profile, pass_index, warmup + done)
    return done


class Repeats:
    """The runs of every pass, and their combination into the profile's columns."""

    def __init__(self, repeat: int, warmup: int, stats: bool, column: ColumnOf) -> None:
        self.repeat, self.warmup, self.stats = repeat, warmup, stats
        self._column = column

    @property
    def runs(self) -> int:
        """Replays per pass."""
        return self.warmup + self.repeat

    @property
    def repeated(self) -> bool:
        return self.runs > 1

    def columns(self, keys: list[Key], profile: Profile, pass_index: int, run: int) -> dict:
        """Where run `run` of a pass writes: the profile's own columns, or with repeats one
        set per run."""
        if self.repeated:
            suffix = run_suffix(pass_index, run)
            return {(m, b): self._column(m, b, suffix) for m, b in keys}
        for m, b in keys:
            if (m, b) not in profile.columns:
                profile.columns[m, b] = self._column(m, b, "")
        return {key: profile.columns[key] for key in keys}

    def label(self, run: int) -> str:
        """' (run k of N)' for progress lines, '' without repeats."""
        if not self.repeated:
            return ""
        if run < self.warmup:
            return f" (warm-up {run + 1} of {self.warmup})"
        return f" (run {run - self.warmup + 1} of {self.repeat})"

    def combine(
        self, keys: list[Key], profile: Profile, pass_index: int, done: int | None = None
    ) -> None:
        """The median of the measured runs of a complete pass into the profile's columns;
        with `stats`, min, p95 and stddev as derived columns beside them. (numpy is
        imported here: a pass of a repeated profile is complete.)"""
        import numpy as np

        for metric, boundary in keys:
            measured = [
                self._column(metric, boundary, run_suffix(pass_index, r))
                for r in range(self.warmup, done or self.runs)  # (`done`: runs complete)
            ]
            runs = [column.view() for column in measured]
            length = max(len(r) for r in runs)
            if length == 0 or (metric, boundary) in profile.columns:
                continue  # measured in another pass
            profile.runs[metric, boundary] = measured
            stack = np.full((len(runs), length), np.nan)
            for i, values in enumerate(runs):
                stack[i, : len(values)] = np.where(missing_mask(values), np.nan, values)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows stay NaN
                median = np.nanmedian(stack, axis=0)
                extra = {
                    "min": np.nanmin(stack, axis=0),
                    "p95": np.nanpercentile(stack, 95, axis=0),
                    "stddev": np.nanstd(stack, axis=0),
                }
            final = self._column(metric, boundary, "")
            if metric.num_type.is_float:
                final.extend(median)
            else:
                final.extend(
                    np.where(np.isnan(median), final.missing, np.rint(median)).astype(np.int64)
                )
            profile.columns[metric, boundary] = final
            if self.stats:
                for name, values in extra.items():
                    column = self._column(metric, boundary, f".{name}")
                    column.extend(values)
                    derived = metric.replace(name=f"{metric.name} {name}", num_type=NumType.DOUBLE)
                    profile.stats.setdefault((metric, boundary), []).append((derived, column))
