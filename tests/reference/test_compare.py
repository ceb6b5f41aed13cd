"""`retrace diff` and `retrace summary` accept glretrace's profiles (the runs are those of
compare_runs.py).
"""

from __future__ import annotations

import os
import subprocess

from compare_runs import SELECTION, TRACE, diff_json, entry, retrace
from conftest import reference_tool


def test_glretrace_profiles_are_accepted(runs, tmp_path, x_display):
    glretrace = reference_tool("glretrace")
    env = {**os.environ, "DISPLAY": x_display}
    done = subprocess.run(
        [glretrace, *SELECTION, str(TRACE)], env=env, capture_output=True, check=True, timeout=300
    )
    reference = tmp_path / "glretrace.tsv"
    reference.write_bytes(done.stdout)
    code, report = diff_json(reference, runs["llvmpipe"] / "run0.tsv")
    tables = {(m["table"], m["metric"]) for m in report["metrics"]}
    assert tables == {("frames", "CPU Duration"), ("frames", "GPU Duration"),
                      ("calls", "CPU Duration"), ("draw calls", "GPU Duration"),
                      ("draw calls", "Pixels Drawn")}  # fmt: skip
    # glretrace's window gets its size after the first frame, so frame 0 may differ there
    pixels = entry(report, "draw calls", "Pixels Drawn")
    assert pixels["rows"] == entry(report, "draw calls", "GPU Duration")["rows"] > 0
    done = retrace("summary", reference)
    assert done.returncode == 0 and "calls, CPU Duration per function" in done.stdout
