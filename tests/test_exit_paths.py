"""How retrace ends when its output goes away or an option is out of bounds.

A reader that stops reading (`| head`) ends the run quietly with 141, the
status of a Unix tool killed by SIGPIPE; a stdout closed from the start and a
count that can only be a typo are one `retrace: error:` line.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import TRACES, run_retrace
from tracegen import TraceWriter, glx_context

GEARS = str(TRACES / "glxgears.trace")


def retrace(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "retrace", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> str:
    """A trace whose dump and calls table are far bigger than a pipe holds (64 KiB)."""
    w = TraceWriter()
    glx_context(w)
    for i in range(10_000):
        w.call("glClearColor", ("r", "g", "b", "a"), {k: w.float(i / 10_000) for k in range(4)})
    path = tmp_path_factory.mktemp("long") / "long.trace"
    path.write_bytes(w.snappy())
    return str(path)


def test_a_reader_that_goes_away_ends_the_run_quietly(long_trace):
    proc = retrace("dump", long_trace)
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err == b""


def test_a_profile_whose_reader_goes_away_ends_quietly(long_trace):
    proc = retrace("--pcalls", "opengl: CPU Duration", "--quiet", long_trace)
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"#\tcall no")
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141 and err == b""


def test_closed_stdout_is_one_line():
    r = subprocess.run(
        [sys.executable, "-m", "retrace", "dump", GEARS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
        preexec_fn=lambda: __import__("os").close(1),
    )
    assert r.returncode == 1 and r.stderr == b"retrace: error: standard output is closed\n"


@pytest.mark.parametrize(
    ("args", "limit"),
    [
        (("--pframes", "opengl: GPU Duration", "--repeat", "9" * 23, GEARS), "1<=x<=10000"),
        (("--pframes", "opengl: GPU Duration", "--warmup", "10001", GEARS), "0<=x<=10000"),
        (("info", "--top", "10001", GEARS), "0<=x<=10000"),
        (("replay", "--loop", "1000000001", GEARS), "x<=1000000000"),
        (("--pframes", "opengl: GPU Duration, GPU time", GEARS), "selected twice"),
        (
            ("--pcalls", "cpu: Wall Duration; opengl: CPU Duration; cpu: wall duration", GEARS),
            "cpu",
        ),
    ],
)
def test_typos_are_one_line_and_exit_2(args, limit):
    r = run_retrace(*args)
    err = r.stderr.decode()
    assert r.returncode == 2 and r.stdout == b"", err
    assert err.count("\n") == 1 and err.startswith("retrace: error: ") and limit in err, err
