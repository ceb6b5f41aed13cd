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
from tracegen import TraceWriter, glx_context

from retrace.errors import RetraceError
from retrace.trace.reader import TraceReader
from retrace.trim import command
from retrace.trim.data import Cuts, Uploads
from retrace.trim.outline import outline
from retrace.trim.verify import snapshots
from retrace.trim.write import choose, write, write_trim

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
    checks = facts["trim"]["checks"]
    assert re.fullmatch(
        rf"trim: \w+ [\d-]+: {len(checks)}/{len(checks)} equal to the original, "
        r"(\d+ groups? added back to the first guess, )?[\d.]+ [kM]B \([\d.]+% of [\d.]+ [kM]B\)\n",
        line,
    ), line
    assert all(c["equal"] for c in checks) and checks
    assert out.stat().st_size == facts["size"] <= facts["trace_size"]
    assert facts["trim"]["calls"] == sum(
        1 for b in TraceReader(out).batches() for _ in range(len(b))
    )


def test_frames_drawn_over_the_previous_frame_get_the_draws_they_need(tmp_path):
    """egl-two-threads' frames draw over the previous image: the check sees that the state
    alone is not enough, and the trim adds back the draws of one frame before, not every
    call before the part."""
    line, facts = trim("egl-two-threads.trace", tmp_path / "t.trace", "--frames", "3")
    tried = facts["tries"]
    assert tried[0]["equal"] == 0 and tried[0]["groups_added"] == 0
    assert len(facts["trim"]["added"]) == 1 and facts["trim"]["added"][0].endswith("'s draws")
    assert facts["trim"]["equal"] == 1 and ", 1 group added back to the first guess" in line
    everything = max(t["calls"] for t in tried)  # (the search tried every group back)
    assert facts["trim"]["calls"] < everything


def setup_of(facts: dict) -> dict:
    return facts["trim"]


@pytest.mark.parametrize("name", ["es2gears.trace", "glxgears.trace"])
def test_settings_made_again_before_the_part_are_left_out(name, tmp_path):
    """Programs that set their state anew for every frame (bindings, uniforms, matrices
    with glPush/PopMatrix): a trim of the last frame needs no more setup than the second
    frame's, the state the frames between set being set again before the part reads it."""
    _, early = trim(name, tmp_path / "a.trace", "--frames", "1")
    _, late = trim(name, tmp_path / "b.trace", "--frames", "4")
    assert setup_of(late)["added"] == setup_of(early)["added"] == [] == early["tries"][1:]
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


def test_a_part_that_reads_earlier_offscreen_draws_keeps_them_at_once(tmp_path):
    """glmark2's desktop scene draws with a texture an offscreen draw before the part drew:
    the guess keeps those draws, and is right at once; without them it would differ."""
    name, frame = "glmark2-desktop-fbo.trace", 2
    _, facts = trim(name, tmp_path / "t.trace", "--frames", str(frame))
    assert facts["offscreen_draws_kept"] and len(facts["tries"]) == 1
    assert facts["trim"]["equal"] == 1 and facts["trim"]["added"] == []
    trace = str(TRACES / name)
    part = outline(trace, frame, frame, None)
    out = str(tmp_path / "first.trace")
    without = choose(trace, part, False)
    assert without.unseen.reads_earlier_draws
    written = write(trace, part, without, out)
    original = snapshots(trace, [no for _, no in part.checks], frame, str(tmp_path), False)
    got = snapshots(out, written.checks, 1 << 62, str(tmp_path), False)
    assert not all(command.compare(part, written, original, got, 0))


def test_a_trim_profiles_like_any_trace(tmp_path):
    out = tmp_path / "t.trace"
    _, facts = trim("glmark2-desktop-fbo.trace", out, "--frames", "2-3")
    got = run_retrace("--pframes", "opengl: GPU Duration", str(out))
    assert got.returncode == 0, got.stderr
    rows = [r for r in got.stdout.decode().splitlines() if r.startswith("frame\t")]
    assert len(rows) >= facts["trim"]["frames_in_trim"] >= 3  # the setup's, and 2-3


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
    written = write_trim(trace, part, out, cuts)
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
    """Every candidate written without the calls before the part: exit status 1, the
    first differing frame named, the trim and its facts kept."""

    def without_setup(chosen, added):
        start = len(chosen.why)
        return bytearray(start) + chosen.kept[start:]

    monkeypatch.setattr(command, "widened", without_setup)
    out = tmp_path / "t.trace"
    with pytest.raises(RetraceError, match=r"frame 3 \(call \d+\) differs .*\(0/2 equal") as e:
        command.run_trim(str(TRACES / "es2gears.trace"), "3-4", None, str(out), True, 0)
    assert e.value.exit_code == 1
    facts = json.loads(Path(f"{out}.json").read_text())
    tried = facts["tries"]
    assert tried[-1]["groups_added"] == facts["groups_left_out"] > 0 and out.exists()
    assert all(t["equal"] == 0 for t in tried)


def test_a_guess_missing_data_gets_back_the_objects_the_frame_uses(tmp_path, monkeypatch):
    """A guess taking every texture and buffer to be unused (their uploads cut) draws an
    empty frame: the trim adds back the uploads of the objects the frame draws with, and
    only those, to the size of the right guess."""
    trace, frame = str(TRACES / "glmark2-texture-mipmap.trace"), "2"
    right = tmp_path / "right.trace"
    command.run_trim(trace, frame, None, str(right), True, 0)
    real = Uploads._unused

    def nothing_used(self):
        self.used.clear()
        return real(self)

    monkeypatch.setattr(Uploads, "_unused", nothing_used)
    out = tmp_path / "t.trace"
    command.run_trim(trace, frame, None, str(out), True, 0)
    facts = json.loads(Path(f"{out}.json").read_text())
    assert facts["tries"][0]["equal"] == 0 and facts["trim"]["equal"] == 1
    added = facts["trim"]["added"]
    assert added and all(re.fullmatch(r"(texture|buffer) \d+'s uploads", a) for a in added)
    assert len(added) < facts["groups_left_out"]
    assert out.stat().st_size <= 1.1 * right.stat().st_size


def test_a_tolerance_compares_pixels(tmp_path):
    out = tmp_path / "t.trace"
    line, facts = trim("es2gears.trace", out, "--frames", "1-2", "--tolerance", "1")
    assert facts["tolerance"] == 1 and line.startswith("trim: frames 1-2: 2/2 equal")


def test_no_verify_writes_the_smallest_setup_unchecked(tmp_path):
    out = tmp_path / "t.trace"
    line, facts = trim("es2gears.trace", out, "--frames", "2", "--no-verify")
    assert "not verified (--no-verify)" in line
    assert facts["tries"] == [] and facts["trim"]["checks"][0]["equal"] is None


def test_no_verify_of_a_part_that_reads_earlier_offscreen_draws_keeps_them(tmp_path):
    """--no-verify of such a part writes the trim the check settles on, with the offscreen
    draws (it ended in "No such file or directory")."""
    unchecked, checked = tmp_path / "u.trace", tmp_path / "c.trace"
    _, facts = trim("corpus/mpv-gpu.trace", unchecked, "--calls", "1800-2050", "--no-verify")
    assert facts["tries"] == []
    _, verified = trim("corpus/mpv-gpu.trace", checked, "--calls", "1800-2050")
    assert verified["verdict"] == "2/2 equal to the original"
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


def legacy_frames(path: Path) -> None:
    """Frames drawn as legacy GL programs draw them: glBegin/glEnd blocks setting the
    current color as they go, client arrays set within glPush/PopClientAttrib; the last
    frame draws with the color the block before it left current."""
    w = TraceWriter()
    glx_context(w)
    for frame in range(4):
        w.call("glClear", ("mask",), {0: w.int(0x4000)})  # GL_COLOR_BUFFER_BIT
        w.call("glPushClientAttrib", ("mask",), {0: w.int(0x2)})  # the client arrays
        w.call("glEnableClientState", ("array",), {0: w.int(0x8076)})  # GL_COLOR_ARRAY
        w.call("glPopClientAttrib")
        w.call("glBegin", ("mode",), {0: w.int(4)})  # GL_TRIANGLES
        for x, y in ((-1, -1), (1, -1), (0, 1)):
            if frame < 3:
                rgb = (0.25 * frame, 1.0 - 0.25 * frame, 0.5)
                w.call(
                    "glColor3f",
                    ("red", "green", "blue"),
                    {i: w.float(v) for i, v in enumerate(rgb)},
                )
            w.call("glVertex2f", ("x", "y"), {0: w.float(x), 1: w.float(y)})
        w.call("glEnd")
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())


def test_legacy_blocks_leave_their_current_color_and_nothing_else(tmp_path):
    """The blocks before the part are left out but for the color they leave current (the
    last one alone: the others are set again), and the client arrays a
    glPopClientAttrib restores are left out with its glPushClientAttrib; the first guess
    is right."""
    trace, out = tmp_path / "legacy.trace", tmp_path / "t.trace"
    legacy_frames(trace)
    _, facts = trim(str(trace), out, "--frames", "3")
    assert len(facts["tries"]) == 1 and facts["trim"]["equal"] == 1
    reader = TraceReader(out)
    names = [
        reader.signatures.functions[b.call(i)[2]].name
        for b in reader.batches()
        for i in range(len(b))
    ]
    setup = names[: facts["trim"]["setup_calls"]]
    assert setup.count("glColor3f") == 1
    assert not {"glVertex2f", "glBegin", "glPushClientAttrib", "glEnableClientState"} & set(setup)


def font_frames(path: Path) -> None:
    """Frames as armagetronad and Chromium B.S.U. make them: a viewport past the window
    for a moment, a display list compiled twice before it is first called, a buffer
    mapped for reading before each new glBufferData."""
    w = TraceWriter()
    glx_context(w)
    w.call("glGenBuffers", ("n", "buffers"), {0: w.int(1), 1: w.array(w.int(1))})
    w.call("glBindBuffer", ("target", "buffer"), {0: w.int(GL_ARRAY_BUFFER), 1: w.int(1)})
    for frame in range(4):
        for width, height in ((64, 48), (63, 63), (64, 48)):
            w.call(
                "glViewport",
                ("x", "y", "width", "height"),
                {0: w.int(0), 1: w.int(0), 2: w.int(width), 3: w.int(height)},
            )
        w.call(
            "glBufferData",
            ("target", "size", "data", "usage"),
            {
                0: w.int(GL_ARRAY_BUFFER),
                1: w.int(64),
                2: w.blob(bytes([frame]) * 64),
                3: w.int(0x88E4),
            },
        )
        w.call(
            "glMapBuffer",
            ("target", "access"),
            {0: w.int(GL_ARRAY_BUFFER), 1: w.int(0x88B8)},
            ret=w.opaque(0x1000),
        )
        w.call("glUnmapBuffer", ("target",), {0: w.int(GL_ARRAY_BUFFER)}, ret=w.true)
        if frame < 2:
            w.call("glNewList", ("list", "mode"), {0: w.int(1), 1: w.int(0x1300)})  # GL_COMPILE
            w.call("glBegin", ("mode",), {0: w.int(4)})
            for x, y in ((-1, -1), (1, -1), (0, 1)):
                w.call(
                    "glColor3f",
                    ("red", "green", "blue"),
                    {0: w.float(0.5 * frame), 1: w.float(1.0), 2: w.float(0)},
                )
                w.call("glVertex2f", ("x", "y"), {0: w.float(x), 1: w.float(y)})
            w.call("glEnd")
            w.call("glEndList")
        w.call("glClear", ("mask",), {0: w.int(0x4000)})
        if frame >= 2:
            w.call("glCallList", ("list",), {0: w.int(1)})
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())


GL_ARRAY_BUFFER = 0x8892


def test_what_glretrace_needs_and_lists_compiled_again(tmp_path):
    """The trim keeps the viewport that grew the window (glretrace sizes its window by them
    as they come) and, before each map, the store it maps (with null data, as nothing
    reads it but the last, whose buffer the part uses); of the list compiled twice, the
    second definition alone."""
    trace, out = tmp_path / "font.trace", tmp_path / "t.trace"
    font_frames(trace)
    _, facts = trim(str(trace), out, "--frames", "3")
    assert len(facts["tries"]) == 1 and facts["trim"]["equal"] == 1
    dumped = run_retrace("dump", str(out)).stdout.decode().splitlines()
    setup = [
        line.split(" ", 1)[1] for line in dumped[: facts["trim"]["setup_calls"]] if " gl" in line
    ]
    viewports = [s for s in setup if s.startswith("glViewport")]
    assert [v.split("width = ")[1].split(")")[0] for v in viewports[:2]] == [
        "64, height = 48",
        "63, height = 63",
    ]
    buffers = [s.split("(")[0] for s in setup if s.startswith(("glBufferData", "glMapBuffer"))]
    assert buffers == ["glBufferData", "glMapBuffer"] * 3
    assert ["data = NULL" in s for s in setup if s.startswith("glBufferData")] == [1, 1, 0]
    assert sum(s.startswith("glNewList") for s in setup) == 1
    assert any("red = 0.5" in s for s in setup)  # (frame 1's definition)
