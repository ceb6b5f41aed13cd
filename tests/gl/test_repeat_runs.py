"""--repeat keeps every measured run beside the table of medians, and diff tests them.

The table in OUT.tsv stays glretrace's (one value per cell: the median of the runs);
OUT.tsv.runs/runK.tsv hold each run, so that `retrace diff` has samples to test
rather than a threshold on two medians.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from compare_runs import retrace
from conftest import TRACES

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

TRACE = TRACES / "glmark2-desktop-fbo.trace"
SELECTION = ["--pframes", "opengl: CPU Duration", "--pdrawcalls", "opengl: Pixels Drawn"]


def tables(path: Path) -> dict:
    return read_tables(io.StringIO(path.read_text()))


def test_runs_are_kept_and_the_table_is_their_median(tmp_path):
    out = tmp_path / "base.tsv"
    done = retrace(*SELECTION, "--repeat", "3", "--warmup", "1", "--quiet", "-o", out, TRACE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # --quiet -o: nothing on stdout
    runs = sorted((tmp_path / "base.tsv.runs").iterdir())
    assert [p.name for p in runs] == ["run1.tsv", "run2.tsv", "run3.tsv"]
    median, each = tables(out), [tables(p) for p in runs]
    for boundary in (Boundary.FRAME, Boundary.DRAWCALL):
        assert all(len(t[boundary]) == len(median[boundary]) for t in each)
    cpu = np.array([list(t[Boundary.FRAME].column("CPU Duration")) for t in each])
    assert list(median[Boundary.FRAME].column("CPU Duration")) == list(
        np.rint(np.median(cpu, axis=0))
    )
    assert len({tuple(row) for row in cpu.tolist()}) > 1  # three measurements, not one copy
    pixels = [list(t[Boundary.DRAWCALL].column("Pixels Drawn")) for t in each]
    assert (
        pixels[0]
        == pixels[1]
        == pixels[2]
        == list(median[Boundary.DRAWCALL].column("Pixels Drawn"))
    )


def test_diff_tests_the_kept_runs(tmp_path):
    for side in ("base", "new"):
        out = tmp_path / f"{side}.tsv"
        done = retrace(*SELECTION, "--repeat", "4", "--quiet", "-o", out, TRACE)
        assert done.returncode == 0, done.stderr
    done = retrace("diff", tmp_path / "base.tsv", tmp_path / "new.tsv", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["test"] == "mann-whitney"  # samples, not the fallback threshold on medians
    assert report["base"] == [str(tmp_path / "base.tsv")] * 4  # 4 runs: p can reach 0.05
