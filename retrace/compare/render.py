"""Printing diff and summary results for people, CI comments and scripts.

* text: tables aligned by tabulate, numbers with thousands separators;
* markdown: the same tables as GitHub pipe tables, for CI comments;
* json: every number raw; NaN and infinity become null, because JSON has neither;
* tsv: flat tab-separated tables with a header line each, one empty line
  after each, ``-`` for no value (as in glretrace's tables).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from tabulate import tabulate

from retrace.compare.diff import (
    CHANGED,
    IMPROVEMENT,
    MANN_WHITNEY,
    NO_DATA,
    REGRESSION,
    SAME,
    DiffResult,
    MetricDiff,
    RowChange,
)
from retrace.compare.summary import Group, RunSummary, Stats

FORMATS = ("text", "markdown", "json", "tsv")

Cells = Sequence[str]


def render_diff(result: DiffResult, fmt: str) -> str:
    """`result` in one of `FORMATS`: totals per table and metric, then the top lists."""
    if fmt == "json":
        return json.dumps(_clean(_diff_json(result)), indent=2) + "\n"
    if fmt == "tsv":
        return _diff_tsv(result)
    markdown = fmt == "markdown"
    out = [_heading(f"retrace diff: {result.verdict}", markdown, 2)] if markdown else []
    out.append(_describe(result))
    ranked = result.test == MANN_WHITNEY
    out.append(_table(*_without_p(*_totals_table(result), ranked), markdown))
    startup = _startup_table(result)
    if startup[1]:
        frames = result.options.startup_frames
        first = "frame 0" if frames == 1 else f"frames 0-{frames - 1}"
        title = f"start-up ({first}), not judged"
        out.append(_heading(title, markdown, 3))
        out.append(_table(*startup, markdown))
    for metric in result.metrics:
        for label, rows in (
            ("regressions", metric.regressions),
            ("improvements", metric.improvements),
            ("changes", metric.changes),
        ):
            if rows:
                count = metric.counts[_LIST_VERDICT[label]]
                shown = f"{count} rows, top {len(rows)}" if count > len(rows) else f"{count} rows"
                named = with_unit(metric.metric, metric.unit)
                title = f"{metric.table}, {named}: {label} ({shown})"
                out.append(_heading(title, markdown, 3))
                out.append(_table(*_without_p(*_rows_table(metric, rows), ranked), markdown))
    out.extend(f"note: {note}" for note in result.notes)
    out.append(f"verdict: {result.verdict}{_reasons(result)}")
    return "\n\n".join(out) + "\n"


# The verdict of the rows in each top list.
_LIST_VERDICT = {"regressions": REGRESSION, "improvements": IMPROVEMENT, "changes": CHANGED}


def render_summary(summaries: Sequence[RunSummary], fmt: str) -> str:
    """Each run's statistics in one of `FORMATS`, run after run."""
    if fmt == "json":
        return json.dumps(_clean({"runs": [asdict(s) for s in summaries]}), indent=2) + "\n"
    if fmt == "tsv":
        return _summary_tsv(summaries)
    markdown = fmt == "markdown"
    out = []
    for run in summaries:
        out.append(_heading(run.source, markdown, 2))
        for table in run.tables:
            headers = ["metric", "count", "sum", "min", "max", "mean", "median", "p95", "stddev"]
            rows = [
                [with_unit(m.metric, m.unit), *map(_number, _stats_values(m.stats))]
                for m in table.metrics
            ]
            out.append(_heading(f"{table.table} ({table.rows} rows)", markdown, 3))
            out.append(_table(headers, rows, markdown))
            per_frame = [
                [with_unit(m.metric, m.unit), *map(_number, _stats_values(m.per_frame))]
                for m in table.metrics
                if m.per_frame is not None
            ]
            if per_frame:
                title = f"{table.table} per frame (each frame's sum)"
                out.append(_heading(title, markdown, 3))
                out.append(_table(["metric", "frames", *headers[2:]], per_frame, markdown))
            levels = [
                [with_unit(m.metric, m.unit), _number(m.weighted_mean)]
                for m in table.metrics
                if m.weighted_mean is not None
            ]
            if levels:
                out.append(_heading(f"{table.table}, levels", markdown, 3))
                out.append(_table(["metric", "time-weighted mean"], levels, markdown))
            for metric in table.metrics:
                for label, groups in (
                    ("function", metric.by_function),
                    ("program", metric.by_program),
                ):
                    if groups:
                        title = f"{table.table}, {metric.metric} per {label}"
                        out.append(_heading(title, markdown, 4))
                        out.append(_table(*_groups_table(label, groups), markdown))
    return "\n\n".join(out) + "\n"


# --- text and markdown --------------------------------------------------------------------------


def with_unit(metric: str, unit: str) -> str:
    """A column header with its unit: "GPU Duration [ns]"."""
    return f"{metric} [{unit}]" if unit else metric


def _heading(title: str, markdown: bool, level: int) -> str:
    return f"{'#' * level} {title}" if markdown else title


def _table(headers: list[str], rows: Sequence[Cells], markdown: bool) -> str:
    left = ("table", "metric", "name", "verdict", "function", "program")
    align = ["left" if h in left else "right" for h in headers]
    return tabulate(
        rows,
        headers,
        tablefmt="github" if markdown else "simple",
        disable_numparse=True,
        colalign=align,
    )


def _describe(result: DiffResult) -> str:
    o = result.options
    lines = [
        f"base: {_runs(result.base_sources)}",
        f"new:  {_runs(result.new_sources)}",
    ]
    rule = f"a change beyond {o.threshold:.0%} (and {o.min_abs:,g} ns for Durations)"
    if len(result.base_sources) > 1 or len(result.new_sources) > 1:
        rule += " of the median over runs (of every row, and of the runs' totals)"
    if result.test == MANN_WHITNEY:
        rule += (
            ", significant by a two-sided Mann-Whitney U test: q (p adjusted by "
            f"Benjamini-Hochberg over the rows, or over the totals) at most {o.alpha:g}"
        )
    if o.startup_frames:
        first = "frame 0" if o.startup_frames == 1 else f"frames 0-{o.startup_frames - 1}"
        rule += f"; {first} (start-up) reported apart"
    lines.append(f"test: {rule}; the verdict follows the {o.fail_on}")
    return "\n".join(lines)


def _without_p(
    headers: list[str], rows: Sequence[Cells], ranked: bool
) -> tuple[list[str], Sequence[Cells]]:
    """The table without its p, q and interval columns when no test made them."""
    if ranked:
        return headers, rows
    keep = [i for i, h in enumerate(headers) if h not in ("p", "q") and not h.endswith("interval")]
    return [headers[i] for i in keep], [[r[i] for i in keep] for r in rows]


def _runs(sources: list[str]) -> str:
    if len(sources) == 1:
        return sources[0]
    files = list(dict.fromkeys(sources))  # the runs --repeat kept share their file's name
    shown = ", ".join(files[:4]) + (", ..." if len(files) > 4 else "")
    return f"{len(sources)} runs ({shown})"


def _totals_table(result: DiffResult) -> tuple[list[str], Sequence[Cells]]:
    interval = f"{1 - result.options.alpha:.0%} interval"
    headers = ["table", "metric", "rows", "base total", "new total", "change", "change %",
               interval, "p", "q", "verdict", "rows worse", "rows better",
               "rows changed"]  # fmt: skip
    rows = [
        [
            m.table,
            with_unit(m.metric, m.unit),
            f"{m.rows:,}",
            _number(m.base_total),
            _number(m.new_total),
            _number(m.change, signed=True),
            _percent(m.relative),
            _interval(m.ci_low, m.ci_high),
            _p(m.p),
            _p(m.q),
            m.verdict,
            f"{m.counts[REGRESSION]:,}",
            f"{m.counts[IMPROVEMENT]:,}",
            f"{m.counts[CHANGED]:,}",
        ]
        for m in result.metrics
    ]
    return headers, rows


def _startup_table(result: DiffResult) -> tuple[list[str], Sequence[Cells]]:
    headers = ["table", "metric", "rows", "base", "new", "change %"]
    rows = [
        [m.table, m.metric, f"{s.rows:,}", _number(s.base), _number(s.new), _percent(s.relative)]
        for m in result.metrics
        if (s := m.startup) is not None
    ]
    return headers, rows


def _rows_table(metric: MetricDiff, rows: list[RowChange]) -> tuple[list[str], Sequence[Cells]]:
    calls = metric.table != "frames"
    headers = (["call no", "name"] if calls else []) + [
        "frame", "base", "new", "change", "change %", "p", "q"]  # fmt: skip
    out = []
    for r in rows:
        keys = [f"{r.call_no}", f"{r.name}"] if calls else []
        out.append(
            keys
            + [
                str(r.frame),
                _number(r.base),
                _number(r.new),
                _number(r.change, signed=True),
                _percent(r.relative),
                _p(r.p),
                _p(r.q),
            ]
        )
    return headers, out


def _reasons(result: DiffResult) -> str:
    """Which totals (and with --fail-on rows, which rows) made the overall verdict."""
    if result.verdict == SAME:
        return ""
    parts = [
        f"{m.table} {m.metric} {_percent(m.relative)}"
        for m in result.metrics
        if m.verdict == result.verdict
    ]
    if result.verdict == REGRESSION and result.options.fail_on == "rows":
        parts += [
            f"{m.counts[REGRESSION]:,} rows of {m.table} {m.metric}"
            for m in result.metrics
            if m.counts[REGRESSION] and m.verdict != REGRESSION
        ]
    return " (" + "; ".join(parts) + ")"


def _groups_table(label: str, groups: list[Group]) -> tuple[list[str], Sequence[Cells]]:
    headers = [label, "count", "sum", "share %", "mean", "median", "max", "longest call"]
    rows = [
        [
            g.key,
            f"{g.count:,}",
            _number(g.sum),
            "-" if math.isnan(g.share) else f"{g.share:.1f}",
            _number(g.mean),
            _number(g.median),
            _number(g.max),
            str(g.longest_call),
        ]
        for g in groups
    ]
    return headers, rows


def _number(x: float | None, signed: bool = False) -> str:
    if x is None or math.isnan(x):
        return "-"
    sign = "+" if signed else ""
    if math.isinf(x) or x == round(x) or abs(x) >= 100:
        return f"{x:{sign},.0f}"
    return f"{x:{sign}.3g}"


def _percent(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:+.1f}%"


def _interval(low: float, high: float) -> str:
    if math.isnan(low):
        return "-"
    if math.isinf(low) or math.isinf(high):
        return "unbounded"
    return f"{_percent(low)} to {_percent(high)}"


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"


def _stats_values(stats: Stats) -> list[float]:
    return list(asdict(stats).values())


# --- json and tsv ------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """`value` with NaN and infinities as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _diff_json(result: DiffResult) -> dict[str, Any]:
    return {
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "test": result.test,
        "options": asdict(result.options),
        "base": result.base_sources,
        "new": result.new_sources,
        "metrics": [asdict(m) | {"direction": m.direction.value} for m in result.metrics],
        "skipped": result.skipped,
        "notes": result.notes,
    }


def _cell(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and x == round(x) and math.isfinite(x):
        return str(int(x))
    return str(x)


def _tsv(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["\t".join(headers)] + ["\t".join(map(_cell, r)) for r in rows]
    return "\n".join(lines) + "\n\n"


def _diff_tsv(result: DiffResult) -> str:
    totals = [
        [m.table, m.metric, m.direction.value, m.rows, m.base_total, m.new_total, m.change,
         m.relative * 100, m.ci_low * 100, m.ci_high * 100, m.p, m.q, m.verdict,
         *(m.counts[v] for v in
         (REGRESSION, IMPROVEMENT, CHANGED, SAME, NO_DATA))]
        for m in result.metrics
    ]  # fmt: skip
    rows = []
    for m in result.metrics:
        for label, changes in (
            (REGRESSION, m.regressions),
            (IMPROVEMENT, m.improvements),
            (CHANGED, m.changes),
        ):
            rows += [
                [m.table, m.metric, label, r.call_no, r.name, r.frame, r.base, r.new, r.change,
                 r.relative * 100, r.p, r.q]
                for r in changes
            ]  # fmt: skip
    return _tsv(
        ["table", "metric", "direction", "rows", "base_total", "new_total", "change",
         "change_pct", "ci_low_pct", "ci_high_pct", "p", "q", "verdict", "regressed", "improved",
         "changed", "same", "n/a"],
        totals,
    ) + _tsv(
        ["table", "metric", "list", "call_no", "name", "frame", "base", "new", "change",
         "change_pct", "p", "q"],
        rows,
    )  # fmt: skip


def _summary_tsv(summaries: Sequence[RunSummary]) -> str:
    stats = []
    groups = []
    for run in summaries:
        for table in run.tables:
            for m in table.metrics:
                stats.append([run.source, table.table, m.metric, *_stats_values(m.stats)])
                for label, entries in (("function", m.by_function), ("program", m.by_program)):
                    groups += [
                        [run.source, table.table, m.metric, label, g.key, g.count, g.sum,
                         g.share, g.mean, g.median, g.max, g.longest_call]
                        for g in entries
                    ]  # fmt: skip
    return _tsv(
        ["source", "table", "metric", "count", "sum", "min", "max", "mean", "median", "p95",
         "stddev"],
        stats,
    ) + _tsv(
        ["source", "table", "metric", "group", "key", "count", "sum", "share_pct", "mean",
         "median", "max", "longest_call"],
        groups,
    )  # fmt: skip
