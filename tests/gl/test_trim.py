"""`retrace trim` on real traces: the trim's frames equal the original's, by its own check.

The check itself is tested too: trims with setups broken on purpose (uploads or
programs left out) are found to differ, and a trim that never matches ends in
exit 1 naming the first differing frame.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_retrace

from retrace.errors import RetraceError
from retrace.trace.reader import TraceReader
from retrace.trim import command
from retrace.trim.data import Cuts
from retrace.trim.outline import outline
from retrace.trim.verify import snapshots
from retrace.trim.write import write_trim

TRACES = Path(__file__).parents[2] / "traces"

# trace: the part to trim (what each stands for in the list)
CASES = {
    "persistent-map.trace": ("--frames", "2"),  # persistent mapped buffers
    "egl-two-threads.trace": ("--frames", "3"),  # two threads, two contexts; draws over frame 2
    "piglit-glx-multithread.trace": ("--frames", "0"),  # GLX contexts on two threads
    "glxgears.trace": ("--frames", "2-3"),  # display lists
    "piglit-dlist-beginend.trace": ("--calls", "480-497"),  # lists compiled and run, no frames
    "es2gears.trace": ("--frames", "2"),  # GLES 2 through EGL
    "glmark2-desktop-fbo.trace": ("--frames", "2"),  # frames drawn through framebuffer objects
}


def trim(name: str, out: Path, *how: str) -> tuple[str, dict]:
    got = run_retrace("trim", str(TRACES / name), *how, "-o", str(out))
    assert got.returncode == 0, got.stderr
    return got.stdout.decode(), json.loads(Path(f"{out}.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_trims_of_real_traces_equal_the_original(name, tmp_path):
    out = tmp_path / "trim.trace"
    line, facts = trim(name, out, *CASES[name])
    checks = facts["levels"][-1]["checks"]
    assert re.fullmatch(
        rf"trim: \w+ [\d-]+: {len(checks)}/{len(checks)} equal to the original, "
        r"[\d.]+ [kM]B \([\d.]+% of [\d.]+ [kM]B\)\n",
        line,
    ), line
    assert all(c["equal"] for c in checks) and checks
    assert out.stat().st_size == facts["size"] <= facts["trace_size"]
    assert facts["levels"][-1]["calls"] == sum(
        1 for b in TraceReader(out).batches() for _ in range(len(b))
    )


def test_frames_drawn_over_the_previous_frame_need_more_than_state(tmp_path):
    """egl-two-threads' frames draw over the previous image: the check sees that the state
    alone is not enough, and the trim keeps the frames before."""
    _, facts = trim("egl-two-threads.trace", tmp_path / "t.trace", "--frames", "3")
    tried = facts["levels"]
    assert [t["equal"] for t in tried[:-1]] == [0] * (len(tried) - 1) and len(tried) > 1
    assert tried[-1]["equal"] == 1


def setup_of(facts: dict) -> dict:
    return facts["levels"][-1]


@pytest.mark.parametrize("name", ["es2gears.trace", "glxgears.trace"])
def test_settings_made_again_before_the_part_are_left_out(name, tmp_path):
    """Programs that set their state anew for every frame (bindings, uniforms, matrices
    with glPush/PopMatrix): a trim of the last frame needs no more setup than the second
    frame's, the state the frames between set being set again before the part reads it."""
    _, early = trim(name, tmp_path / "a.trace", "--frames", "1")
    _, late = trim(name, tmp_path / "b.trace", "--frames", "4")
    assert setup_of(late)["level"] == setup_of(early)["level"] == 0
    assert setup_of(late)["setup_calls"] == setup_of(early)["setup_calls"]


def test_uploads_replaced_before_the_part_are_left_out(tmp_path):
    """mpv uploads every video frame's planes through pixel-unpack buffers into the same
    textures: a trim of frame 3 keeps the planes of one frame, as a trim of frame 1 does,
    and counts them as data the part uses."""
    trace = "corpus/mpv-gpu.trace"
    _, early = trim(trace, tmp_path / "a.trace", "--frames", "1")
    _, late = trim(trace, tmp_path / "b.trace", "--frames", "3")
    planes = 320 * 240 * 3 // 2  # 4:2:0, a byte per sample
    data = [setup_of(f)["stream_bytes"]["setup_by_kind"]["buffer data"] for f in (early, late)]
    assert planes <= data[0] < 2 * planes and planes <= data[1] < 2 * planes  # not 4 frames
    assert setup_of(late)["stream_bytes"]["setup_data_the_part_uses"] >= planes


def test_a_part_that_reads_earlier_offscreen_draws_skips_the_first_level(tmp_path):
    """glmark2's desktop scene draws with a texture an offscreen draw before the part drew:
    the first level (no draws before the part) is not written, and it would indeed
    differ; the second, which keeps those draws, is right."""
    name, frame = "glmark2-desktop-fbo.trace", 2
    _, facts = trim(name, tmp_path / "t.trace", "--frames", str(frame))
    first, second = facts["levels"]
    assert first["level"] == 0 and first["error"].startswith("not written") and not first["equal"]
    assert second["level"] == 1 and second["equal"] == 1
    trace = str(TRACES / name)
    part = outline(trace, frame, frame, None)
    out = str(tmp_path / "first.trace")
    assert write_trim(trace, part, 0, out).reads_earlier_draws
    written = write_trim(trace, part, 0, out, Cuts(part.start))  # (written all the same, no cut)
    original = snapshots(trace, [no for _, no in part.checks], frame, str(tmp_path), False)
    got = snapshots(out, written.checks, 1 << 62, str(tmp_path), False)
    assert not all(command.compare(part, written, original, got, 0))


def test_a_trim_profiles_like_any_trace(tmp_path):
    out = tmp_path / "t.trace"
    _, facts = trim("glmark2-desktop-fbo.trace", out, "--frames", "2-3")
    got = run_retrace("--pframes", "opengl: GPU Duration", str(out))
    assert got.returncode == 0, got.stderr
    rows = [r for r in got.stdout.decode().splitlines() if r.startswith("frame\t")]
    assert len(rows) >= facts["levels"][-1]["frames_in_trim"] >= 3  # the setup's, and 2-3


def broken(name: str, spec: str, tmp_path: Path, drop: re.Pattern[str]) -> bool:
    """Trim with every call before the part whose name matches `drop` left out; whether the
    self-check's comparison finds every frame equal."""
    trace = str(TRACES / name)
    part = outline(trace, int(spec), int(spec), None)
    reader = TraceReader(trace)
    cuts, position = Cuts(part.start), 0
    for batch in reader.batches():
        for i in range(len(batch)):
            if position < part.start and drop.match(
                reader.signatures.functions[batch.call(i)[2]].name
            ):
                cuts.drop(position)
            position += 1
    out = str(tmp_path / "broken.trace")
    written = write_trim(trace, part, 0, out, cuts)
    original = snapshots(trace, [no for _, no in part.checks], part.frames[1], str(tmp_path), False)
    got = snapshots(out, written.checks, 1 << 62, str(tmp_path), False)
    return all(command.compare(part, written, original, got, 0))


@pytest.mark.parametrize(
    "name, frame, drop",
    [
        ("glmark2-texture-mipmap.trace", "2", r"glTexImage2D$"),  # textures left empty
        ("es2gears.trace", "2", r"glBufferData$"),  # vertex buffers left empty
        ("es2gears.trace", "2", r"glLinkProgram$"),  # programs never linked
    ],
)
def test_the_check_never_calls_a_broken_trim_equal(name, frame, drop, tmp_path):
    assert not broken(name, frame, tmp_path, re.compile(drop))
    assert broken(name, frame, tmp_path, re.compile(r"$^"))  # (the same trim, unbroken)


def test_a_trim_that_never_matches_fails_naming_the_frame(tmp_path, monkeypatch):
    """Every level written broken: exit status 1, the first differing frame named, the trim
    and its facts kept."""
    real = command.write_trim

    def without_programs(trace, part, level, out):
        cuts = Cuts(part.start)
        for p in range(part.start):
            cuts.drop(p)
        return real(trace, part, 0, out, cuts)

    monkeypatch.setattr(command, "write_trim", without_programs)
    out = tmp_path / "t.trace"
    with pytest.raises(RetraceError, match=r"frame 3 \(call \d+\) differs .*\(0/2 equal") as e:
        command.run_trim(str(TRACES / "es2gears.trace"), "3-4", None, str(out), True, 0)
    assert e.value.exit_code == 1
    facts = json.loads(Path(f"{out}.json").read_text())
    assert len(facts["levels"]) == len(command.LEVELS) and out.exists()


def test_a_tolerance_compares_pixels(tmp_path):
    out = tmp_path / "t.trace"
    line, facts = trim("es2gears.trace", out, "--frames", "1-2", "--tolerance", "1")
    assert facts["tolerance"] == 1 and line.startswith("trim: frames 1-2: 2/2 equal")


def test_no_verify_writes_the_smallest_setup_unchecked(tmp_path):
    out = tmp_path / "t.trace"
    line, facts = trim("es2gears.trace", out, "--frames", "2", "--no-verify")
    assert "not verified (--no-verify)" in line
    assert [t["level"] for t in facts["levels"]] == [0]
    assert facts["levels"][0]["checks"][0]["equal"] is None


def test_no_verify_of_a_part_that_reads_earlier_offscreen_draws_keeps_them(tmp_path):
    """Level 0 writes no trim of such a part: --no-verify writes the offscreen level's, the
    one the check settles on (it ended in "No such file or directory")."""
    unchecked, checked = tmp_path / "u.trace", tmp_path / "c.trace"
    _, facts = trim("corpus/mpv-gpu.trace", unchecked, "--calls", "1800-2050", "--no-verify")
    assert [t["level"] for t in facts["levels"]] == [1]
    _, verified = trim("corpus/mpv-gpu.trace", checked, "--calls", "1800-2050")
    assert (
        verified["levels"][-1]["level"] == 1 and verified["verdict"] == "2/2 equal to the original"
    )
    assert unchecked.read_bytes() == checked.read_bytes()


def test_header_properties_that_are_not_utf8_are_written_back_as_read(tmp_path):
    """A program's name in another encoding (Latin-1 here) is bytes, not text: the trim's
    header holds the same bytes (it ended in a UnicodeEncodeError)."""
    from retrace.trace.container import TraceStream
    from retrace.trace.writer import wrap_snappy

    stream = b"".join(TraceStream(TRACES / "es2tri.trace"))
    named = stream.replace(b"/usr/bin/es2tri", b"/usr/bin/es2tr\xe9", 1)
    assert named != stream
    latin = tmp_path / "latin.trace"
    latin.write_bytes(wrap_snappy(named))
    out = tmp_path / "trim.trace"
    done = run_retrace("trim", "--frames", "0-", "-o", str(out), str(latin))
    assert done.returncode == 0, done.stderr
    assert TraceReader(out).properties == TraceReader(latin).properties
    assert b"/usr/bin/es2tr\xe9" in b"".join(TraceStream(out))
