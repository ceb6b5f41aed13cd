"""The Python API (`retrace.open`): the same measurements as the command line, as arrays.

Each test profiles or replays a real trace on the real driver through the API and
checks it against what the CLI prints for the same trace and selection, run in the
same test: the rows (call numbers, functions, programs, frames) exactly, and the
values that are deterministic on llvmpipe (pixel counts) exactly.
"""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest
from compare_runs import retrace as retrace_cli
from conftest import TRACES

import retrace
from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables


@pytest.mark.parametrize("name", ["glxgears.trace", "piglit-glx-multithread.trace"])
def test_profile_arrays_hold_what_the_cli_prints(name):
    trace = str(TRACES / name)
    frames, calls, draws = "opengl: CPU Duration", "opengl: CPU Duration", "opengl: Pixels Drawn"
    result = retrace.open(trace).profile(frames=frames, calls=calls, drawcalls=draws)
    printed = retrace_cli(
        "--pframes", frames, "--pcalls", calls, "--pdrawcalls", draws, "--quiet", trace
    )
    assert printed.returncode == 0, printed.stderr
    expected = read_tables(io.StringIO(printed.stdout))

    assert set(result.tables) == {"frames", "calls", "drawcalls"}
    assert len(result.frames) == len(expected[Boundary.FRAME])
    assert list(result.frames["frame"]) == list(expected[Boundary.FRAME].frames)
    for name_, boundary in (("calls", Boundary.CALL), ("drawcalls", Boundary.DRAWCALL)):
        got, want = result.tables[name_], expected[boundary]
        assert list(got["call_no"]) == list(want.call_nos)
        assert list(got["name"]) == want.names
        assert list(got["program"]) == list(want.programs)
        assert list(got["frame"]) == list(want.frames)
    pixels = result.drawcalls["Pixels Drawn"]
    assert pixels.dtype == np.float64
    assert list(pixels) == pytest.approx(list(expected[Boundary.DRAWCALL].column("Pixels Drawn")))
    assert (result.calls["CPU Duration"] > 0).all()
    assert result.rendered.startswith(f"Rendered {len(result.frames) - 1} frames")
    assert result.metadata["columns"]["drawcalls"] == [
        {"backend": "opengl", "name": "Pixels Drawn", "kind": "generic", "unit": "samples"}
    ]


def test_replay_md5s_are_the_cli_snapshots():
    trace = str(TRACES / "glxgears.trace")
    result = retrace.open(trace).replay(snapshots="*/frame")
    printed = retrace_cli("replay", "-s", "-", "-S", "*/frame", "--snapshot-format", "MD5", trace)
    assert printed.returncode == 0, printed.stderr
    assert list(result.md5s.values()) == printed.stdout.split()
    assert result.frames == len(result.md5s) == 5
    assert result.fidelity["faithful"] is True


def test_errors_are_retrace_errors_with_the_cli_line(tmp_path):
    trace = retrace.open(TRACES / "glxgears.trace")
    with pytest.raises(retrace.RetraceError, match='backend "opengl" has no metric "Nope"') as e:
        trace.profile(frames="opengl: Nope")
    assert e.value.exit_code == 2
    with pytest.raises(retrace.RetraceError, match="no such trace file"):
        retrace.open(tmp_path / "missing.trace")
    cut = tmp_path / "cut.trace"
    cut.write_bytes((TRACES / "glxgears.trace").read_bytes()[:3000])
    with pytest.raises(retrace.RetraceError, match="cut.trace"):
        retrace.open(cut).replay()


def test_dataframe():
    pandas = pytest.importorskip("pandas")
    result = retrace.open(TRACES / "glxgears.trace").profile(drawcalls="opengl: Pixels Drawn")
    frame = result.dataframe("drawcalls")
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == ["call_no", "program", "name", "frame", "Pixels Drawn"]
    assert len(frame) == len(result.drawcalls)
    with pytest.raises(retrace.RetraceError, match="no frames table"):
        result.dataframe("frames")


def test_importing_retrace_loads_no_api():
    """The CLI imports the package first: the API (and numpy) load only when used."""
    code = "import sys, retrace; print('retrace.api' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
