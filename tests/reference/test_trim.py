"""Trimmed traces in apitrace's own tools: `apitrace dump` reads them, and glretrace's
(eglretrace's) images of a trim's frames are its images of the original's frames."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import apitrace_dump, run_retrace
from test_replay import reference_md5s

TRACES = Path(__file__).parents[2] / "traces"

CASES = {  # the gl tests' cases (tests/gl/test_trim.py) but piglit-glx-multithread, whose
    # frame glretrace draws wrong (test_mesa_ci.py), and more
    "persistent-map.trace": ("--frames", "2"),
    "egl-two-threads.trace": ("--frames", "3"),
    "glxgears.trace": ("--frames", "2-3"),
    "piglit-dlist-beginend.trace": ("--calls", "480-497"),
    "es2gears.trace": ("--frames", "2"),
    "glmark2-desktop-fbo.trace": ("--frames", "2"),
    "glmark2-texture-mipmap.trace": ("--frames", "1-2"),
    "corpus/mpv-gpu.trace": ("--frames", "3"),  # uploads through pixel-unpack buffers
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_glretrace_draws_the_trim_as_the_original(name, tmp_path, x_display):
    out = tmp_path / "trim.trace"
    got = run_retrace("trim", str(TRACES / name), *CASES[name], "-o", str(out))
    assert got.returncode == 0, got.stderr
    checks = json.loads(Path(f"{out}.json").read_text())["trim"]["checks"]
    calls = apitrace_dump(out).decode().count("\n")
    assert calls > 0
    original = reference_md5s(
        TRACES / name, ",".join(str(c["original_call"]) for c in checks), x_display
    )
    trimmed = reference_md5s(out, ",".join(str(c["trim_call"]) for c in checks), x_display)
    assert len(original) == len(checks) and trimmed == original
