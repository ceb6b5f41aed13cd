"""EGL set-up refusals that need no driver: an unknown platform, a missing libEGL."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

from retrace.replay.ws.headless import EglDisplay, EglError


def test_unknown_platform_is_refused():
    with pytest.raises(EglError, match="unknown EGL platform 'wayland'"):
        EglDisplay.open(["wayland"])


def run_child(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter: libEGL state is per process."""
    import os

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=120,
    )


OPEN_AND_REPORT = """
    from retrace.replay.ws.headless import EglDisplay, EglError
    try:
        EglDisplay.open()
    except EglError as exc:
        print(exc)
    else:
        print("opened")
"""


def test_missing_libegl_is_an_error_not_a_crash():
    code = "import retrace.replay.ws.egl_api as egl\negl.EGL_LIBRARY = 'libEGL-missing.so.1'\n"
    child = run_child(code + textwrap.dedent(OPEN_AND_REPORT))
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("no EGL driver found: cannot load libEGL-missing.so.1")
