"""Real profiles under two Mesa drivers, which the tests of `retrace diff`, `compare` and
`summary` read (tests/gl/test_compare.py, tests/reference/test_compare.py): made once per
session by the `runs` fixture of conftest.py, as they take a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES

TRACE = TRACES / "glmark2-desktop-fbo.trace"
OTHER_TRACE = TRACES / "glmark2-texture-mipmap.trace"
SAME_FRAMES_TRACE = TRACES / "glmark2-es2-pulsar.trace"  # 6 frames, as TRACE
SELECTION = [
    "--pframes", "opengl: CPU Start, CPU Duration, GPU Duration",
    "--pcalls", "opengl: CPU Duration",
    "--pdrawcalls", "opengl: GPU Duration, Pixels Drawn",
]  # fmt: skip
RECIPE = ["--warmup", "1"]
# Runs per side, made in blocks of the three sides whose order alternates between these
# two, so that each llvmpipe side comes first, last and after softpipe equally often and
# a drift of the machine hits both alike. 8 and 8 runs reach p = 0.00016, so the A/A test
# can ask for --alpha 0.001: at the default 0.05, noise alone makes a diff of two sets of
# llvmpipe runs say "regression" or "improvement" now and then, by design (in CI, a flaky
# test).
RUNS = 8
ORDERS = (("llvmpipe", "softpipe", "llvmpipe-again"), ("llvmpipe-again", "softpipe", "llvmpipe"))


def profile(trace: Path, out: Path, driver: str, selection: list[str] = SELECTION) -> Path:
    env = {**os.environ, "GALLIUM_DRIVER": driver}
    args = [*selection, *RECIPE, "--quiet", "-o", str(out), str(trace)]
    subprocess.run(
        [sys.executable, "-m", "retrace", *args],
        env=env,
        capture_output=True,
        check=True,
        timeout=300,
    )
    return out


def retrace(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrace", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def diff_json(*args: str | Path) -> tuple[int, dict]:
    done = retrace("diff", *args, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def entry(report: dict, table: str, metric: str) -> dict:
    (found,) = [m for m in report["metrics"] if m["table"] == table and m["metric"] == metric]
    return found


def profile_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Directories llvmpipe/, softpipe/ and llvmpipe-again/ of RUNS runs each; other.tsv of
    another trace; frames-only runs of two traces with as many frames."""
    root = tmp_path_factory.mktemp("profiles")
    for side in ORDERS[0]:
        (root / side).mkdir()
    for i in range(RUNS):
        for side in ORDERS[i % 2]:
            profile(TRACE, root / side / f"run{i}.tsv", side.removesuffix("-again"))
    dirs = {side: root / side for side in ORDERS[0]}
    dirs["other"] = profile(OTHER_TRACE, root / "other.tsv", "llvmpipe")
    frames_only = ["--pframes", "opengl: CPU Duration"]
    for name, trace in (("frames", TRACE), ("frames-other", SAME_FRAMES_TRACE)):
        dirs[name] = profile(trace, root / f"{name}.tsv", "llvmpipe", frames_only)
    return dirs
