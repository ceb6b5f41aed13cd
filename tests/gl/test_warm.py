"""Runs forked from a warm worker (`retrace.forkserver`, `retrace.warm`) do what cold runs
do: the same tables, snapshots, errors and exit statuses, under the worker's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES

from retrace.warm import WarmWorker

# counts the replay decides alone (no timing): identical in every run that replays alike
PIXELS = ["--pframes", "opengl: Pixels Drawn", "--pdrawcalls", "opengl: Pixels Drawn", "--quiet"]
SNAPSHOTS = ["replay", "--snapshot-format", "md5", "-s", "-", "-S", "*/draw"]


def untimed(text: str) -> str:
    """Output but the closing `Rendered N frames in S secs` line, a timing."""
    return "".join(line for line in text.splitlines(True) if not line.startswith("Rendered "))


def cold(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "retrace", *args], capture_output=True, text=True, env=env
    )
    return done.returncode, untimed(done.stdout), done.stderr


@pytest.fixture(scope="module")
def worker():
    started = WarmWorker(dict(os.environ))
    yield started
    started.close()


@pytest.mark.parametrize(
    "trace", ["glxgears-interrupted.trace", "glmark2-desktop-fbo.trace", "egl-two-threads.trace"]
)
def test_tables_and_snapshots_are_those_of_cold_runs(worker, trace):
    path = str(TRACES / trace)
    for args in ([*PIXELS, path], [*SNAPSHOTS, path]):
        run = worker.start(args)
        out, err = run.communicate()
        assert (run.returncode, untimed(out), err) == cold(args, dict(os.environ))


def test_errors_and_exit_statuses_are_those_of_cold_runs(worker, tmp_path):
    """A usage error, a bad metric, a missing trace: one line and the status, as cold."""
    trace = str(TRACES / "es2tri.trace")
    for args in (["--pframes", "opengl: Bogus", trace], ["replay", "--frames", "x", trace],
                 ["replay", str(tmp_path / "missing.trace")]):  # fmt: skip
        status, stderr = worker.run(args)
        code, _, expected = cold(args, dict(os.environ))
        assert status == code != 0 and stderr == expected


def test_runs_start_in_the_callers_directory_under_the_workers_environment(tmp_path):
    """The worker of a side runs under that side's environment (here: softpipe)."""
    env = {**os.environ, "GALLIUM_DRIVER": "softpipe"}
    worker = WarmWorker(env)
    try:
        os.chdir(tmp_path)
        args = [
            "--pframes",
            "opengl: GPU Duration",
            "-o",
            "relative.tsv",
            str(TRACES / "es2tri.trace"),
        ]
        status, _ = worker.run(args)
        assert status == 0
        assert '"renderer": "softpipe' in Path("relative.tsv.json").read_text()
    finally:
        worker.close()
