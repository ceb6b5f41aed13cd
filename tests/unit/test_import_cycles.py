"""tools/import_cycles.py finds the cycles it should, and the window systems are in none."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

TOOL = ROOT / "tools" / "import_cycles.py"


def cycles_report(root) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), str(root)], capture_output=True, text=True, timeout=60
    )


def test_lazy_and_typing_imports_close_cycles(tmp_path):
    """A cycle hidden by a lazy import, one through a TYPE_CHECKING import, and the
    package cycle they make, each edge saying how it imports."""
    replay, ws = tmp_path / "retrace" / "replay", tmp_path / "retrace" / "ws"
    for folder in (replay, ws, tmp_path / "backends", tmp_path / "writer"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (tmp_path / "retrace" / "__init__.py").write_text("")
    (replay / "a.py").write_text("from retrace.ws import b\n")
    (ws / "b.py").write_text("def f():\n    from retrace.replay.a import g\n")
    (ws / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n"
    )
    (ws / "d.py").write_text("from .c import x\n")
    result = cycles_report(tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "modules: 2 cycles"
    assert "    retrace.ws.b -> retrace.replay.a (lazy)" in lines
    assert "    retrace.ws.c -> retrace.ws.d (typing)" in lines
    assert "    retrace.ws.d -> retrace.ws.c" in lines
    packages = lines[lines.index("packages: 1 cycle") :]
    assert packages[1:] == [
        "  retrace.replay, retrace.ws",
        "    retrace.replay -> retrace.ws",
        "    retrace.ws -> retrace.replay (lazy)",
    ]


def test_retrace_has_no_import_cycle():
    """Between modules or packages, lazy and typing imports counted (issue 12)."""
    result = cycles_report(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["modules: 0 cycles", "packages: 0 cycles"]
