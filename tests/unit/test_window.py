"""The frame viewer's one-line errors where it cannot open: no display, no X server, no glfw."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT

from retrace.errors import RetraceError
from retrace.replay.ws.viewer import FrameWindow


def test_no_server_on_the_display_is_one_line(
    glfw: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    unused = next(
        n
        for n in range(200, 300)
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists()
    )
    monkeypatch.setenv("DISPLAY", f":{unused}")
    with pytest.raises(RetraceError, match=r"^cannot open a window: .*; replay without --window$"):
        FrameWindow()


def _error_line(env: dict[str, str], preamble: str = "") -> str:
    """The RetraceError FrameWindow() raises in a fresh interpreter, which must be one line."""
    script = preamble + textwrap.dedent(
        """
        import sys
        from retrace.errors import RetraceError
        from retrace.replay.ws.viewer import FrameWindow
        try:
            FrameWindow()
        except RetraceError as exc:
            print(exc)
            sys.exit(3)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env=env, cwd=ROOT, timeout=60
    )
    assert out.returncode == 3, out.stderr.decode()
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 1
    return lines[0]


def test_no_display_is_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    assert _error_line(env) == (
        "cannot open a window: no display (neither DISPLAY nor WAYLAND_DISPLAY is set); "
        "replay without --window"
    )


def test_without_glfw_is_one_line() -> None:
    env = {**os.environ, "DISPLAY": ":0"}
    line = _error_line(env, preamble="import sys; sys.modules['glfw'] = None\n")
    assert line.startswith("cannot open a window: GLFW is not available (")
    assert line.endswith("); pip install glfw, or replay without --window")
