"""`retrace diff` between two batches: a verdict per trace, one for the corpus.

Each side is a batch database, ``DB`` (holding one build) or ``DB:BUILD``.
Traces are matched by their name in the manifest; each trace's finished runs
on the two sides are compared by `retrace.compare.diff` itself, so a trace's
verdict means exactly what `retrace diff` of its TSV files would say (with 4
or more runs per side, a Mann-Whitney test adjusted over rows and totals).
Runs of different traces (their SHA-256s differ) are refused for that trace.

A trace's ``expect.allowed_regression`` (from the new side's manifest) raises
its threshold: a total may grow by that much before it counts. A trace whose
every run failed on the new side and not on the base is a regression (the
new build crashes or hangs on it); one with no run on a side is "n/a".

The corpus verdict is the worst of the traces' (regression, then
improvement, changed, same), and sets the exit status as `retrace diff` does.
The top regressions are the totals that regressed, largest relative change
first.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

from retrace.batch import database
from retrace.compare.diff import (
    CHANGED,
    IMPROVEMENT,
    NO_DATA,
    REGRESSION,
    SAME,
    DiffOptions,
    DiffResult,
    MetricDiff,
    diff,
)
from retrace.compare.junit import Case, write_junit
from retrace.compare.load import align_runs
from retrace.errors import UsageError

FAILED = "failed"


@dataclass
class TraceVerdict:
    """One trace: its verdict, the diff behind it (None if none was possible), and why."""

    trace: str
    verdict: str
    runs: tuple[int, int]
    result: DiffResult | None = None
    reason: str = ""


@dataclass
class CorpusResult:
    base: str
    new: str
    traces: list[TraceVerdict]
    top: list[tuple[str, MetricDiff]]
    verdict: str
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == REGRESSION else 0


def corpus_diff(base_spec: str, new_spec: str, options: DiffOptions) -> CorpusResult:
    """Compare every trace of two batches (see the module docstring)."""
    base_name, base, base_failed = _side(base_spec)
    new_name, new, new_failed = _side(new_spec)
    verdicts = []
    for trace in sorted(set(base) | set(new) | set(new_failed)):
        b, n = base.get(trace), new.get(trace)
        counts = (len(b.runs) if b else 0, len(n.runs) if n else 0)
        if b and not n and trace in new_failed:
            verdicts.append(TraceVerdict(trace, FAILED, counts, reason=new_failed[trace]))
        elif not b or not n:
            side = "base" if not b else "new"
            verdicts.append(
                TraceVerdict(trace, NO_DATA, counts, reason=f"no finished run in {side}")
            )
        else:
            allowed = n.allowed_regression or 0.0
            own = dataclasses.replace(options, threshold=max(options.threshold, allowed))
            try:
                result = diff(align_runs(b.runs, n.runs, options.metrics), own)
            except UsageError as exc:
                verdicts.append(TraceVerdict(trace, NO_DATA, counts, reason=str(exc)))
                continue
            verdicts.append(TraceVerdict(trace, result.verdict, counts, result))
    if not verdicts:
        raise UsageError(f"{base_spec} and {new_spec}: no trace has a finished run")
    regressed = [
        (v.trace, m)
        for v in verdicts
        if v.result is not None
        for m in v.result.metrics
        if m.verdict == REGRESSION
    ]
    regressed.sort(key=lambda tm: -tm[1].relative)
    found = {v.verdict for v in verdicts}
    if found & {REGRESSION, FAILED}:
        verdict = REGRESSION
    else:
        verdict = next((v for v in (IMPROVEMENT, CHANGED) if v in found), SAME)
    notes = []
    if NO_DATA in found:
        notes.append(f"{sum(v.verdict == NO_DATA for v in verdicts)} trace(s) not compared")
    return CorpusResult(base_name, new_name, verdicts, regressed[: options.top], verdict, notes)


def _side(spec: str) -> tuple[str, dict[str, database.TraceRuns], dict[str, str]]:
    """The side's name, its traces' finished runs, and the reason of traces that only failed."""
    path, build = database.split_spec(spec)
    with database.connect(path, read_only=True) as con:
        known = database.builds(con)
        if build is None:
            if len(known) != 1:
                listed = ", ".join(known) or "none"
                raise UsageError(f"{path} holds builds {listed}: name one as {path}:BUILD")
            build = known[0]
        elif build not in known:
            raise UsageError(f"{path} has no build {build!r} (it has: {', '.join(known)})")
        traces = database.load_build(con, path, build)
        failed = database.only_failed(con, build)
    return f"{path}:{build}", traces, failed


def render_corpus(result: CorpusResult, fmt: str) -> str:
    """The corpus verdict as text, markdown or json (tsv: the per-trace table)."""
    if fmt == "json":
        return json.dumps(_json(result), indent=2) + "\n"
    headers = ["trace", "verdict", "runs", "changes of the totals", "why"]
    rows = [
        [v.trace, v.verdict, f"{v.runs[0]}/{v.runs[1]}", _changes(v), v.reason]
        for v in result.traces
    ]
    if fmt == "tsv":
        return "\n".join("\t".join(r) for r in [headers, *rows]) + "\n\n"
    markdown = fmt == "markdown"
    style = "github" if markdown else "simple"
    out = [f"{'## ' if markdown else ''}retrace diff: {result.verdict}"]
    out.append(f"base: {result.base}\nnew:  {result.new}")
    out.append(tabulate(rows, headers, tablefmt=style, disable_numparse=True))
    if result.top:
        out.append(f"{'### ' if markdown else ''}top regressions")
        top = [
            [trace, m.table, m.metric, _number(m.base_total), _number(m.new_total),
             f"{m.relative:+.1%}", _interval(m)]
            for trace, m in result.top
        ]  # fmt: skip
        heads = ["trace", "table", "metric", "base total", "new total", "change", "interval"]
        out.append(tabulate(top, heads, tablefmt=style, disable_numparse=True))
    out.extend(f"note: {note}" for note in result.notes)
    counts = {v: sum(t.verdict == v for t in result.traces) for v in _ORDER}
    said = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    out.append(f"verdict: {result.verdict} ({len(result.traces)} traces: {said})")
    return "\n\n".join(out) + "\n"


_ORDER = (REGRESSION, FAILED, IMPROVEMENT, CHANGED, SAME, NO_DATA)


def _changes(v: TraceVerdict) -> str:
    if v.result is None:
        return "-"
    return "; ".join(
        f"{m.table} {m.metric} {m.relative:+.1%}" for m in v.result.metrics if m.verdict != NO_DATA
    )


def _number(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.0f}"


def _interval(m: MetricDiff) -> str:
    if math.isnan(m.ci_low):
        return "-"
    return f"{m.ci_low:+.1%} .. {m.ci_high:+.1%}"


def _json(result: CorpusResult) -> dict[str, Any]:
    from retrace.compare.render import render_diff

    return {
        "base": result.base,
        "new": result.new,
        "verdict": result.verdict,
        "traces": [
            {
                "trace": v.trace,
                "verdict": v.verdict,
                "runs": list(v.runs),
                "reason": v.reason,
                "diff": json.loads(render_diff(v.result, "json")) if v.result else None,
            }
            for v in result.traces
        ],
        "top_regressions": [
            {
                "trace": trace,
                "table": m.table,
                "metric": m.metric,
                "relative": m.relative if math.isfinite(m.relative) else None,
            }
            for trace, m in result.top
        ],
        "notes": result.notes,
    }


def write_corpus_junit(path: str, result: CorpusResult) -> None:
    """One test case per trace; a regression or a failed trace is a failure."""
    cases = []
    for v in result.traces:
        failure = None
        if v.verdict in (REGRESSION, FAILED):
            failure = f"{v.verdict}: {v.reason or _changes(v)}"
        cases.append(Case("retrace diff", v.trace, failure=failure, kind=v.verdict))
    write_junit(path, f"retrace diff {result.base} {result.new}", cases)
