"""eglretrace under the model of NVIDIA's EGL driver gives the frames it gives on Mesa alone.

eglretrace does what NVIDIA's driver takes: it initialises the display in the process that
replays and makes every context current with a drawable first, as apitrace always does
(measured on NVIDIA: its frames were right there). So the model must change none of its
frames: where retrace's frames differ under the model (tests/gl/test_nvidia_model.py), the
departure is retrace's, not the model's. glretrace replays through GLX, which the model does
not serve, so the EGL traces are the ones compared, desktop GL among them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from conftest import is_egl, reference_tool
from gl.test_nvidia_model import ALL_TRACES, SNAPSHOTS


def eglretrace(trace: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [reference_tool("eglretrace"), *SNAPSHOTS, str(trace)],
        env={**env, "WAFFLE_PLATFORM": "surfaceless_egl"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def eglretrace_replays(trace: Path) -> bool:
    """An EGL trace eglretrace replays: not in zstd containers (retrace's own), nor the tile
    readback it dies or hangs on (tests/reference/test_readbacks.py)."""
    return is_egl(trace) and ".zstd" not in trace.name and trace.name != "readback-pixels.trace"


def test_eglretrace_gives_the_same_frames_under_the_model(nvidia_model):
    compared, differing = [], []
    for trace in filter(eglretrace_replays, ALL_TRACES):
        on_mesa, under_model = eglretrace(trace, os.environ), eglretrace(trace, nvidia_model)
        assert (on_mesa.returncode, under_model.returncode) == (0, 0), under_model.stderr
        compared.append(trace.name)
        if under_model.stdout.split() != on_mesa.stdout.split():
            differing.append(trace.name)
    assert differing == []
    assert {"mpv-gpu.trace", "persistent-map.trace", "es2gears.trace"} <= set(compared)
