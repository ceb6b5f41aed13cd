"""Metric ids equal glretrace's: scripts select metrics by `[group, id]`, so every opengl
metric glretrace (11.1) has carries glretrace's id, on an OpenGL and an OpenGL ES context
alike, and retrace's own metrics take ids after them. glretrace lists only the metrics
available on the context (on OpenGL ES, eglretrace 11.1 has no GPU metric at all); retrace
lists them all, unavailable ones with why, in id order."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from conftest import TRACES, reference_tool, run_retrace


def reference(tool: str, args: list[str], trace: str, display: str) -> str:
    env = dict(os.environ, DISPLAY=display)
    return subprocess.run(
        [reference_tool(tool), *args, str(TRACES / trace)],
        capture_output=True, env=env, timeout=300, check=True, text=True,
    ).stdout  # fmt: skip


def glretrace_ids(tool: str, trace: str, display: str) -> dict[str, tuple[int, int]]:
    """The opengl backend's metrics in `tool --list-metrics`: name -> (group, id)."""
    out = reference(tool, ["--list-metrics"], trace, display)
    ids: dict[str, tuple[int, int]] = {}
    backend, group = None, -1
    for line in out.splitlines():
        if m := re.match(r"Backend (\S+):", line):
            backend = m.group(1)
        elif m := re.match(r"\s+Group #(\d+):", line):
            group = int(m.group(1))
        elif (m := re.match(r"\s+Metric #(\d+): (.+?) \(type:", line)) and backend == "opengl":
            ids[m.group(2)] = (group, int(m.group(1)))
    return ids


def retrace_rows(trace: str) -> list[dict]:
    done = run_retrace("--list-metrics", "--json", str(TRACES / trace))
    assert done.returncode == 0, done.stderr
    return [r for r in json.loads(done.stdout) if r["backend"] == "opengl"]


@pytest.mark.parametrize(
    ("tool", "trace", "expected"),
    [("glretrace", "glxgears.trace", 9), ("eglretrace", "es2gears.trace", 6)],
)
def test_opengl_metric_ids_equal_glretraces(x_display, tool, trace, expected):
    theirs = glretrace_ids(tool, trace, x_display)
    assert len(theirs) == expected  # (eglretrace 11.1 lists no GPU metric on OpenGL ES)
    rows = retrace_rows(trace)
    ours = {r["name"]: (r["group"], r["id"]) for r in rows}
    assert {name: ours[name] for name in theirs} == theirs
    # every metric of glretrace's, on either context, keeps its id on both
    everywhere = glretrace_ids("glretrace", "glxgears.trace", x_display)
    assert {name: ours[name] for name in everywhere} == everywhere
    for name, (group, metric_id) in ours.items():  # retrace's own come after them
        if name not in everywhere:
            assert all(metric_id > i for g, i in everywhere.values() if g == group), name
    listed = [(r["group"], r["id"]) for r in rows]
    assert listed == sorted(listed) and len(set(listed)) == len(listed)


def test_a_selection_by_id_measures_glretraces_metric(x_display):
    """`opengl: [1, 2]` is Pixels Drawn, as in glretrace: the same column, the same values
    (but frame 0's, where glretrace stops counting at glmark2's first context switch)."""
    from gl.test_profile import retrace, tables

    args, trace = ["--pframes=opengl: [1, 2]"], "glmark2-desktop-fbo.trace"
    theirs = list(tables(reference("glretrace", args, trace, x_display)).values())[0]
    ours = list(tables(retrace(args, TRACES / trace)).values())[0]
    assert ours.metrics == theirs.metrics == ["Pixels Drawn"]
    assert list(ours.column("Pixels Drawn"))[1:] == list(theirs.column("Pixels Drawn"))[1:]
