"""The replay's and the profiler's modules import without numpy (50 ms and 15 MB to
import): it is imported where tables are built (dump, info, the writers, once a profile's
replay is over), not to replay or measure."""

from __future__ import annotations

import subprocess
import sys

REPLAY_MODULES = (
    "retrace.cli",
    "retrace.replay.run",
    "retrace.replay.contain",
    "retrace.replay.replayer",
    "retrace.profile.commands",
    "retrace.profile.driver",
    "retrace.backends.opengl",
)


def test_replay_modules_import_no_numpy():
    check = (
        f"import sys, {', '.join(REPLAY_MODULES)}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))"
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
