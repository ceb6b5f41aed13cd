"""`retrace trim`'s errors before any replay, and how its check compares images."""

from __future__ import annotations

from pathlib import Path

from conftest import run_retrace

from retrace.trim.verify import Shot, differs

TRACES = Path(__file__).parents[2] / "traces"


def test_a_part_is_required(tmp_path):
    got = run_retrace("trim", str(TRACES / "glxgears.trace"), "-o", str(tmp_path / "t.trace"))
    assert got.returncode == 2
    assert got.stderr.decode().splitlines() == [
        "retrace: error: give --frames A-B or --calls CALLSET"
    ]


def test_frames_past_the_end_are_named(tmp_path):
    got = run_retrace(
        "trim", str(TRACES / "glxgears.trace"), "--frames", "4-9", "-o", str(tmp_path / "t.trace")
    )
    assert got.returncode == 1
    assert got.stderr.decode() == (
        "retrace: error: --frames 4-9: the trace has 5 complete frames (0-4); --calls takes calls\n"
    )
    assert not (tmp_path / "t.trace").exists()


def test_a_trim_never_overwrites_its_trace(tmp_path):
    trace = tmp_path / "a.trace"
    trace.write_bytes((TRACES / "glxgears.trace").read_bytes())
    got = run_retrace("trim", str(trace), "--frames", "1", "-o", str(trace))
    assert got.returncode == 1 and b"would overwrite its own trace" in got.stderr
    assert trace.read_bytes() == (TRACES / "glxgears.trace").read_bytes()


def shot(tmp_path: Path, name: str, pixels: bytes, md5: str) -> Shot:
    path = tmp_path / name
    path.write_bytes(pixels)
    return Shot(md5, (2, 1, 3), str(path))


def test_images_differ_by_md5_or_beyond_the_tolerance(tmp_path):
    a = shot(tmp_path, "a", bytes([10, 20, 30, 40, 50, 60]), "A")
    b = shot(tmp_path, "b", bytes([12, 20, 30, 40, 50, 59]), "B")
    assert not differs(a, a, 0)
    assert differs(a, b, 0)  # by MD5
    assert not differs(a, b, 2)  # no channel more than 2 apart
    assert differs(a, b, 1)
    assert differs(a, b._replace(size=(1, 2, 3)), 255)  # another size always differs
