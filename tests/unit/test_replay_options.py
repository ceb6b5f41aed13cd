"""glretrace's replay options: a bad frame range is a usage error, before any replay."""

from __future__ import annotations

from conftest import TRACES, run_retrace

GEARS = str(TRACES / "glxgears.trace")


def test_bad_frame_range_is_a_usage_error():
    r = run_retrace("replay", "--frames", "5-2", GEARS)
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"--frames" in r.stderr


def test_loop_forms_are_glretraces():
    from retrace.commands.options import loop_forms

    assert loop_forms(["replay", "--loop", "T"]) == ["replay", "--loop=-1", "T"]
    assert loop_forms(["--pframes", "x", "--loop"]) == ["--pframes", "x", "--loop=-1"]
    assert loop_forms(["replay", "--loop", "-b", "T"]) == ["replay", "--loop=-1", "-b", "T"]
    for kept in (["--loop", "4", "T"], ["--loop", "-1", "T"], ["--loop=-1", "T"], ["--", "--loop"]):
        assert loop_forms(kept) == kept
