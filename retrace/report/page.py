"""The report page: one HTML file with every plot and table inside it.

What a developer asks of a profile, in the order the page answers: what ran
(trace, driver, host, from the metadata beside the tables); how the frame
times went (over the trace, with p50/p95/p99 and spikes marked, and as a
histogram); how much of the GPU's time was work and how much waiting (GPU
Busy and Idle), flagging the frames where the replayer kept the GPU waiting;
for two sides, the before/after overlays and `retrace diff`'s verdict; where
the time goes (the top draw calls, functions and shader programs by GPU and
CPU time, each program's shader sources a click away); and the frames x calls
heat map. Nothing is loaded from elsewhere: the images
are data URIs and the style sheet is inline, so the page opens offline and
can be mailed or attached to a CI run.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrace.compare.load import Run, Vocabulary, columns
from retrace.compare.summary import Group, summarize
from retrace.report import plots
from retrace.vocabulary import TABLE_TITLES, Boundary

TIME_METRICS = ("GPU Busy", "GPU Duration", "CPU Duration")  # in order of preference
CPU_BOUND = 0.5  # a frame whose GPU idled more than this share of its span
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
td, th { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: right; }
td.l, th.l { text-align: left; } th { background: #f4f4f4; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
.verdict { font-size: 1.3em; font-weight: bold; padding: 0.4em 0.8em; display: inline-block; }
.regression { background: #fdd; } .improvement { background: #dfd; }
.same, .changed, .undecided { background: #eee; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 12px; }
details pre { max-height: 30em; } .note { color: #a40; }
"""


@dataclass
class Side:
    """The runs of one side: the profile(s) before (base) or after (new) a change."""

    label: str
    runs: list[Run]
    notes: list[str] = field(default_factory=list)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.runs[0].document

    def frame_series(self, metric: str) -> np.ndarray | None:
        """The frames table's `metric` per frame, the median of the runs."""
        found = [r.tables[Boundary.FRAME] for r in self.runs if Boundary.FRAME in r.tables]
        if not found or metric not in found[0].metrics:
            return None
        length = len(found[0])
        stack = [np.frombuffer(t.column(metric), np.float64) for t in found if len(t) == length]
        return np.nanmedian(np.vstack(stack), axis=0) if len(stack) > 1 else stack[0]


def render(sides: list[Side], verdict: tuple[str, str] | None, sources: dict) -> str:
    """The page for one side, or two (base then new) with `verdict` (word, diff's text);
    `sources`: traced program -> [(stage, source)]."""
    last = sides[-1]
    parts = [f"<h1>retrace report: {_e(_trace_name(last))}</h1>", _facts(sides)]
    if verdict is not None:
        word, text = verdict
        parts.append("<h2>Verdict</h2>")
        parts.append(f'<div class="verdict {_e(word)}">{_e(word)}</div>')
        parts.append(f"<pre>{_e(text)}</pre>")
    parts.append(_frame_section(sides))
    parts.append(_busy_section(sides))
    parts.append(_costs_section(last, sources))
    parts.append(_heat_section(last))
    title = f"retrace report: {_trace_name(last)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(p for p in parts if p)
        + "\n</body></html>\n"
    )


def _e(text: object) -> str:
    return html.escape(str(text))


def _trace_name(side: Side) -> str:
    path = (side.metadata.get("trace") or {}).get("path")
    return os.path.basename(path) if path else side.runs[0].source


def _duration(ns: float) -> str:
    if ns is None or math.isnan(ns):
        return "-"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:,.1f} µs"
    return f"{ns:,.0f} ns"


def _value(x: float, unit: str) -> str:
    if unit == "ns":
        return _duration(x)
    if x is None or math.isnan(x):
        return "-"
    text = f"{x:,.0f}" if x == round(x) else f"{x:,.3g}"
    return f"{text} {unit}".strip()


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """An HTML table; the first `left` columns are text (left-aligned)."""

    def cells(tag: str, row: list[str]) -> str:
        return "".join(
            f'<{tag} class="{"l" if i < left else ""}">{c}</{tag}>' for i, c in enumerate(row)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    return f"<table><tr>{cells('th', headers)}</tr>{body}</table>"


def _facts(sides: list[Side]) -> str:
    """What ran: per side, the trace, GL, EGL, host, selection, passes, fidelity."""
    rows = []
    for side in sides:
        meta = side.metadata
        trace, gl, egl, host = (meta.get(k) or {} for k in ("trace", "gl", "egl", "host"))
        fidelity = meta.get("fidelity") or {}
        facts = [
            ("runs", ", ".join(_e(r.source) for r in side.runs)),
            (
                "trace",
                _e(
                    f"{trace.get('path', '?')} ({trace.get('calls', '?')} calls, "
                    f"{trace.get('frames', '?')} frames, sha256 "
                    f"{str(trace.get('sha256', '?'))[:16]}…)"
                ),
            ),  # fmt: skip
            ("GL", _e(f"{gl.get('renderer', '?')} — {gl.get('version', '?')}")),
            (
                "EGL",
                _e(
                    f"{egl.get('platform', '?')} {egl.get('device', '')} "
                    f"({egl.get('vendor', '?')} {egl.get('version', '')})"
                ),
            ),  # fmt: skip
            (
                "host",
                _e(f"{host.get('cpu', '?')}, {host.get('kernel', '?')}, {host.get('host', '?')}"),
            ),  # fmt: skip
            (
                "retrace",
                _e(
                    f"{meta.get('retrace', '?')}, started {meta.get('started', '?')}, "
                    f"{meta.get('duration_s', '?')} s, repeat {meta.get('repeat', '?')}"
                    f", warm-up {meta.get('warmup', '?')}"
                ),
            ),  # fmt: skip
            ("passes", _e("; ".join(p.get("what", "") for p in meta.get("passes", [])) or "?")),
            ("faithful", _e(fidelity.get("faithful", "?"))),
        ]
        if not meta:
            facts = facts[:1] + [("metadata", "none beside the tables (a glretrace TSV?)")]
        rows += [[_e(side.label) if i == 0 else "", k, v] for i, (k, v) in enumerate(facts)]
    notes = [n for s in sides for n in s.notes]
    return _table(["side", "what", ""], rows, left=3) + "".join(
        f'<p class="note">note: {_e(n)}</p>' for n in notes
    )


def _frame_section(sides: list[Side]) -> str:
    out = ["<h2>Frame times</h2>"]
    shown = False
    for metric in TIME_METRICS:
        series = [(s.label, v) for s in sides if (v := s.frame_series(metric)) is not None]
        if not series or np.isnan(series[-1][1]).all():
            continue
        shown = True
        out.append(f"<h3>{_e(metric)}</h3>")
        out.append(f'<img alt="{_e(metric)} per frame" src="{plots.frame_times(series, metric)}">')
        out.append(f'<img alt="{_e(metric)} histogram" src="{plots.histogram(series, metric)}">')
        rows = []
        for label, values in series:
            ok = values[~np.isnan(values)]
            where = plots.spikes(values)
            rows.append(
                [_e(label), f"{ok.size:,}"]
                + [_duration(float(np.percentile(ok, q))) for q in (50, 95, 99)]
                + [_duration(float(ok.mean())), _duration(float(ok.max()))]
                + [", ".join(map(str, where[:20].tolist())) + (" …" if where.size > 20 else "")]
            )
        headers = ["side", "frames", "p50", "p95", "p99", "mean", "max", "spike frames"]
        out.append(_table(headers, rows))
    if not shown:
        out.append("<p>The frames table has no CPU or GPU Duration.</p>")
    return "\n".join(out)


def _busy_section(sides: list[Side]) -> str:
    """GPU Busy and Idle per frame (idle: the span less busy where the table has no Idle
    column), and the frames CPU-bound in the replayer: with GPU work, and idle more than
    half the span."""
    out = ["<h2>GPU busy and idle</h2>"]
    rows, flagged = [], []
    for side in sides:
        busy = side.frame_series("GPU Busy")
        idle = side.frame_series("GPU Idle")
        if (
            idle is None
            and busy is not None
            and (span := side.frame_series("GPU Duration")) is not None
        ):
            idle = span - busy
        if busy is None or idle is None or np.isnan(busy).all():
            continue
        share = idle / (busy + idle)
        ok = ~np.isnan(share)
        # (a frame with no GPU work, the trailing partial one, has nothing to wait for)
        bound = np.flatnonzero((np.nan_to_num(share) > CPU_BOUND) & (np.nan_to_num(busy) > 0))
        rows.append(
            [_e(side.label), f"{int(ok.sum()):,}", _duration(float(np.nanmedian(busy))),
             _duration(float(np.nanmedian(idle))), f"{np.nanmedian(share) * 100:.1f}",
             f"{bound.size:,}"]
        )  # fmt: skip
        flagged.append((side.label, bound, int(ok.sum())))
        if side is sides[-1]:
            alt = "GPU busy and idle per frame"
            out.append(f'<img alt="{alt}" src="{plots.busy_idle(busy, idle, bound)}">')
    if not rows:
        return ""
    headers = ["side", "frames", "busy p50", "idle p50", "idle share p50 %", "CPU-bound frames"]
    out.append(_table(headers, rows))
    for label, bound, count in flagged:
        if not bound.size:
            continue
        listed = ", ".join(map(str, bound[:20].tolist())) + (" …" if bound.size > 20 else "")
        out.append(
            f'<p class="note">{_e(label)}: {bound.size:,} of {count:,} frames CPU-bound in the '
            f"replayer (frames {_e(listed)}): the GPU idled more than half of their GPU span, "
            "waiting for the replay to send it work, so their GPU Duration measures the "
            "replayer more than the GPU. Compare their GPU Busy, or profile them with "
            "<code>--loop</code> (the frames replayed again, their data already loaded).</p>"
        )
    return "\n".join(out)


def _costs_section(side: Side, sources: dict) -> str:
    """Top draw calls, functions and programs by GPU and CPU time, of the first run."""
    run = side.runs[0]
    summary = {t.table: t for t in summarize(run).tables}
    out = ["<h2>Where the time goes</h2>"]
    for boundary in (Boundary.DRAWCALL, Boundary.CALL):
        title = TABLE_TITLES[boundary]
        table = run.tables.get(boundary)
        if table is None:
            continue
        cols = columns(table, table.metrics, vocabulary := Vocabulary())
        for metric in TIME_METRICS:
            if metric not in table.metrics:
                continue
            values = cols.values[metric]
            if np.isnan(values).all():
                continue  # a column of '-': nothing measured to rank
            total = float(np.nansum(values))
            top = np.argsort(-np.nan_to_num(values, nan=-np.inf), kind="stable")[:20]
            rows = [
                [
                    str(cols.call_nos[i]),
                    _e(vocabulary.names[cols.names[i]]),
                    str(cols.frames[i]),
                    str(cols.programs[i]),
                    _duration(values[i]),
                    f"{values[i] * 100 / total:.1f}" if total else "-",
                ]
                for i in top.tolist()
                if not np.isnan(values[i])
            ]
            out.append(f"<h3>Top {title} by {_e(metric)}</h3>")
            headers = ["call", "function", "frame", "program", metric, "share %"]
            out.append(_table(headers, rows, left=2))
            stats = next(m for m in summary[title].metrics if m.metric == metric)
            out.append(f"<h3>{title.capitalize()}: functions by {_e(metric)}</h3>")
            out.append(_groups(stats.by_function[:20], "function"))
            if boundary == Boundary.DRAWCALL or Boundary.DRAWCALL not in run.tables:
                out.append(f"<h3>Shader programs by {_e(metric)} (profileshader.py's table)</h3>")
                out.append(_groups(stats.by_program[:30], "program", sources))
    if len(out) == 1:
        out.append("<p>No calls or draw-calls table with CPU or GPU times.</p>")
    return "\n".join(out)


def _groups(groups: list[Group], label: str, sources: dict | None = None) -> str:
    """Count, total, mean, share and longest call per function or program; a program's
    shader sources in a <details> under its name."""
    rows = []
    for g in groups:
        name = _e(g.key)
        if sources is not None:
            shaders = sources.get(int(g.key)) if g.key.lstrip("-").isdigit() else None
            if shaders:
                body = "".join(
                    f"<p>{_e(stage)} shader</p><pre>{_e(text)}</pre>" for stage, text in shaders
                )
                name = f"<details><summary>{name}</summary>{body}</details>"
        rows.append(
            [
                name,
                f"{g.count:,}",
                _duration(g.sum),
                _duration(g.mean),
                "-" if math.isnan(g.share) else f"{g.share:.1f}",
                _duration(g.max),
                str(g.longest_call),
            ]
        )
    headers = [label, "count" if label == "function" else "draws", "total", "mean",
               "share %", "longest", "longest call"]  # fmt: skip
    return _table(headers, rows)


def _heat_section(side: Side) -> str:
    """The frames x calls heat map of the largest call table, by GPU (else CPU) time."""
    run = side.runs[0]
    for boundary in (Boundary.CALL, Boundary.DRAWCALL):
        table = run.tables.get(boundary)
        if table is None:
            continue
        for metric in TIME_METRICS:
            if metric in table.metrics:
                frames = np.frombuffer(table.frames, np.int64)
                values = np.frombuffer(table.column(metric), np.float64)
                unit = run.units.get((boundary, metric), "ns")
                image = plots.heat_map(frames, values, metric, unit)
                title = f"Heat map: {TABLE_TITLES[boundary]} by {metric}"
                return f'<h2>{_e(title)}</h2>\n<img alt="{_e(title)}" src="{image}">'
    return ""
