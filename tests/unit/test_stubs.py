"""The C extensions' `.pyi` stubs name what the built modules export, no more, no less."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

EXTENSIONS = [
    "retrace.trace._scanner",
    "retrace.trace._dump",
    "retrace.replay._vm",
    "retrace.replay._guard",
    "retrace.writer._tsv",
]


def test_stubs_match_the_built_extensions() -> None:
    pytest.importorskip("mypy", reason="mypy (the test extra) runs stubtest")
    done = subprocess.run(  # in the tree .ci/mypy lays out as the package installs
        ["bash", str(ROOT / ".ci" / "mypy"), *EXTENSIONS],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MYPY_TOOL": "mypy.stubtest", "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stdout + done.stderr
