"""What a replay imports before it runs: numpy (50 ms and 15 MB to import) only where
tables are built, so that `replay -b` starts as soon as glretrace does."""

from __future__ import annotations

import subprocess
import sys

from conftest import TRACES

TRACE = str(TRACES / "es2tri.trace")


def imported(*args: str) -> set[str]:
    """Every module the command imports, in the parent and in the child that replays
    (`python -X importtime` reports both on stderr)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "retrace", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    lines = [line for line in r.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip() for line in lines}


def numpy_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] == "numpy"}


def test_a_replay_imports_no_numpy():
    modules = imported("replay", "-b", TRACE)
    assert "retrace.replay.compiler" in modules  # the replaying child's imports are seen
    assert not numpy_modules(modules)


def test_a_profile_imports_numpy_to_measure():
    assert numpy_modules(imported("--pframes", "opengl: GPU Duration", TRACE))
