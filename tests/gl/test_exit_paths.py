"""How a profile ends when its output goes away or an option is out of bounds: the
cases that replay (the rest, with the long trace, are in tests/unit/test_exit_paths.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_retrace
from unit.test_exit_paths import GEARS, retrace


def test_a_profile_whose_reader_goes_away_ends_quietly(long_trace):
    proc = retrace("--pcalls", "opengl: CPU Duration", "--quiet", long_trace)
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"#\tcall no")
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141 and err == b""


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


@pytest.mark.parametrize("after", [0.0, 0.005, 0.02, 0.05])
@pytest.mark.parametrize("spare", ["1", "0"], ids=["forked-first", "forked-at-supervise"])
@pytest.mark.parametrize("command", [["replay", "-b"], ["--pframes", "opengl: GPU Duration"]])
def test_ctrl_c_while_starting_is_one_line(command, spare, after):
    """Ctrl-C (SIGINT to the group) `after` s once the replay child has forked (before the
    command line is parsed, where it forks first: it loads the driver meanwhile): one line
    and 130, or done; never a traceback. At the fork itself it is never lost (the child
    once inherited the parent's handler, which swallowed it, and the replay went on)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrace", *command, GEARS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "RETRACE_SPARE_CHILD": spare},
    )
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    while proc.poll() is None and not children.read_text().split():
        time.sleep(0.0005)
    time.sleep(after)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    text = err.decode()
    assert "Traceback" not in text, text
    if proc.returncode != 0 or not after:  # (else done before the signal came)
        assert proc.returncode == 128 + signal.SIGINT, text
        assert text.splitlines()[-1].startswith("retrace: interrupted"), text


# A preloaded library that handles SIGTERM before Python starts, as apitrace's tracer does
# (it flushes its trace at a stop): Python records the handler as None.
_PRELOAD_SOURCE = """
#include <signal.h>
static void flush_and_die(int number) { signal(number, SIG_DFL); raise(number); }
__attribute__((constructor)) static void install(void) { signal(SIGTERM, flush_and_die); }
"""


def test_a_replay_under_a_tracer_that_handles_stops_ends_well(tmp_path):
    """retrace put back the handlers it had replaced as Python reported them, and a handler
    installed before Python started (reported as None) raised TypeError once the replay had
    succeeded: an internal error, exit 70, under `apitrace trace retrace ...`."""
    source, library = tmp_path / "preload.c", tmp_path / "preload.so"
    source.write_text(_PRELOAD_SOURCE)
    compiler = os.environ.get("CC", "cc")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", library, source], check=True)
    for command in (["replay", "-b"], ["--pframes", "opengl: GPU Duration"]):
        r = subprocess.run(
            [sys.executable, "-m", "retrace", *command, GEARS],
            capture_output=True,
            env={**os.environ, "LD_PRELOAD": str(library)},
            timeout=300,
        )
        assert r.returncode == 0 and b"error" not in r.stderr, r.stderr.decode()
        assert b"Rendered " in r.stdout, r.stdout.decode()  # (a profile's summary too)
