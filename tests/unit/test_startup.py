"""The replay's modules import without numpy (50 ms and 15 MB to import): it is imported
where tables are built (dump, info, measured events, the writers), not to replay."""

from __future__ import annotations

import subprocess
import sys

REPLAY_MODULES = (
    "retrace.cli",
    "retrace.replay.run",
    "retrace.replay.contain",
    "retrace.replay.replayer",
)


def test_replay_modules_import_no_numpy():
    check = (
        f"import sys, {', '.join(REPLAY_MODULES)}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))"
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
