"""The C extensions' `.pyi` stubs name what the built modules export, no more, no less."""

from __future__ import annotations

import subprocess
import sys

import pytest

EXTENSIONS = ["retrace.trace._scanner", "retrace.replay._vm"]


def test_stubs_match_the_built_extensions() -> None:
    pytest.importorskip("mypy", reason="mypy (the test extra) runs stubtest")
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", *EXTENSIONS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
