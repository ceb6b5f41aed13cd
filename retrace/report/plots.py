"""The report's plots, drawn by matplotlib (`pip install 'retrace-gl[report]'`) into data URIs.

Static images keep the page self-contained and light: no script library, no
network, nothing to break in a browser years later. Line plots and histograms
are SVG (sharp at any zoom); the heat map, one cell per call, is PNG.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

from retrace.errors import RetraceError, pip_install

MAX_HEAT_COLUMNS = 1500  # wider frames are binned: a screen has no more pixels
COLORS = ("#1f77b4", "#d62728")  # base, new


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise RetraceError(f"retrace report needs matplotlib: {pip_install('report')}") from None
    matplotlib.use("Agg")  # no display: the figures only become images
    import matplotlib.pyplot as plt

    return plt


def _uri(figure: Any, fmt: str) -> str:
    plt = _pyplot()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, bbox_inches="tight", dpi=110)
    plt.close(figure)
    mime = "image/svg+xml" if fmt == "svg" else "image/png"
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode()}"


def spikes(values: np.ndarray) -> np.ndarray:
    """Indexes of frames that took more than twice the median: a stutter a player sees.
    (A percentile would name a share of the frames spikes however smooth the run was.)"""
    ok = values[~np.isnan(values)]
    if not ok.size:
        return np.empty(0, np.int64)
    limit = 2 * float(np.median(ok))
    return np.flatnonzero(np.nan_to_num(values, nan=-np.inf) > limit)


def frame_times(series: list[tuple[str, np.ndarray]], metric: str) -> str:
    """Frame times over the trace (ms), one line per side, with p50/p95/p99 of the last
    side and its spikes marked."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(10, 3.6))
    for (label, values), color in zip(series, COLORS, strict=False):
        ms = values / 1e6
        axes.plot(np.arange(len(ms)), ms, color=color, lw=1, label=label, marker=".", ms=3)
    label, values = series[-1]
    ms = values / 1e6
    ok = ms[~np.isnan(ms)]
    if ok.size:
        for q, style in ((50, ":"), (95, "--"), (99, "-.")):
            level = float(np.percentile(ok, q))
            name = f"{label} p{q}" if len(series) > 1 else f"p{q}"
            axes.axhline(level, color="grey", ls=style, lw=1, label=f"{name} {level:.2f} ms")
        where = spikes(ms)
        if where.size:
            axes.scatter(where, ms[where], color="black", marker="x", zorder=3,
                         label=f"spikes ({where.size})")  # fmt: skip
    axes.set_xlabel("frame")
    axes.set_ylabel(f"{metric} (ms)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper right")
    return _uri(figure, "svg")


def busy_idle(busy: np.ndarray, idle: np.ndarray, cpu_bound: np.ndarray) -> str:
    """Per frame, the GPU span (ms) as its busy time with the idle time stacked on it, the
    frames that idled more than half of it (`cpu_bound`, indexes) marked."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(10, 3.6))
    frames = np.arange(len(busy))
    busy_ms, idle_ms = np.nan_to_num(busy) / 1e6, np.nan_to_num(idle) / 1e6
    axes.bar(frames, busy_ms, width=1.0, color=COLORS[0], label="GPU Busy")
    axes.bar(frames, idle_ms, width=1.0, bottom=busy_ms, color="#cccccc", label="GPU Idle")
    if cpu_bound.size:
        axes.scatter(cpu_bound, (busy_ms + idle_ms)[cpu_bound], color="black", marker="v",
                     zorder=3, label=f"idle > half: CPU-bound ({cpu_bound.size})")  # fmt: skip
    axes.set_xlabel("frame")
    axes.set_ylabel("GPU span (ms)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper right")
    return _uri(figure, "svg")


def histogram(series: list[tuple[str, np.ndarray]], metric: str) -> str:
    """The distribution of frame times (ms), one outline per side."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(10, 3))
    finite = [v[~np.isnan(v)] / 1e6 for _, v in series]
    everything = np.concatenate(finite) if finite else np.empty(0)
    bins = np.histogram_bin_edges(everything, bins=min(60, max(5, everything.size // 2)))
    for (label, _), values, color in zip(series, finite, COLORS, strict=False):
        axes.hist(values, bins=bins, histtype="step", lw=1.5, color=color, label=label)
    axes.set_xlabel(f"{metric} (ms)")
    axes.set_ylabel("frames")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return _uri(figure, "svg")


def heat_map(frames: np.ndarray, values: np.ndarray, metric: str, unit: str) -> str:
    """Frames (rows) by calls in order within the frame (columns), coloured by `values`
    on a log scale: qapitrace's view of where in each frame the time goes."""
    plt = _pyplot()
    from matplotlib.colors import LogNorm

    count = int(frames.max()) + 1 if frames.size else 0
    starts = np.searchsorted(frames, np.arange(count))
    position = np.arange(len(frames)) - starts[frames]
    width = int(position.max()) + 1 if position.size else 1
    step = -(-width // MAX_HEAT_COLUMNS)  # calls per column
    grid = np.zeros((count, -(-width // step)))
    seen = np.zeros_like(grid, dtype=bool)
    ok = ~np.isnan(values)
    np.add.at(grid, (frames[ok], position[ok] // step), values[ok])
    seen[frames[ok], position[ok] // step] = True
    grid = np.where(seen & (grid > 0), grid, np.nan)
    figure, axes = plt.subplots(figsize=(10, max(2.5, min(8, count * 0.12))))
    positive = grid[~np.isnan(grid)]
    norm = LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size else None
    image = axes.imshow(grid, aspect="auto", interpolation="nearest", cmap="inferno", norm=norm)
    axes.set_xlabel("call in frame" + (f" (bins of {step})" if step > 1 else ""))
    axes.set_ylabel("frame")
    bar = figure.colorbar(image, ax=axes)
    bar.set_label(f"{metric} ({unit})" if unit else metric)
    return _uri(figure, "png")
