"""The `pipeline` backend (pipeline statistics queries) on llvmpipe, against counts known
from the traces themselves.

Every test runs the real CLI on a real trace. The expected counts come from the
calls: a glDrawArrays* submits `count` (times `instancecount`) vertices, which
make a number of primitives fixed by the mode; a glDispatchComputeIndirect runs
the work groups its indirect buffer holds (a blob in the trace) times the local
size in the compute shader's source (also in the trace).

What llvmpipe (Mesa 22.3) reports, asserted here:
- it runs the vertex shader once per submitted vertex of these non-indexed draws
  (glxgears' immediate-mode quad strips, replayed from display lists, reuse some:
  990 invocations for 1076 vertices a frame, as the extension allows), and every
  primitive reaches clipping, culled ones included;
- it counts fragment shader invocations per 4x4 block the shader ran on, 16 at a
  time, so Fragment Shader Invocations is a multiple of 16, never below Pixels
  Drawn (single-sampled, no discard), and above it by the partly covered blocks
  along the edges of each primitive;
- its clipper outputs triangles, so a quad or polygon that is not clipped at all
  still gives more Clipping Output than Clipping Input Primitives.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES, recorded_calls, run_retrace
from tracegen import TraceWriter, glx_context
from unit.test_pipeline_backend import ALL

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import ParsedTable, read_tables

SHADER_STAGES = [
    "Tess Control Shader Patches",
    "Tess Evaluation Shader Invocations",
    "Geometry Shader Invocations",
    "Geometry Shader Primitives Emitted",
]
# Primitives made of `count` vertices, per mode (a polygon is one primitive).
PRIMITIVES = {
    "GL_TRIANGLES": lambda n: n // 3,
    "GL_TRIANGLE_STRIP": lambda n: max(n - 2, 0),
    "GL_QUADS": lambda n: n // 4,
    "GL_POLYGON": lambda n: int(n >= 3),
}
DRAW = re.compile(
    r"^(\d+) (glDrawArrays(?:Instanced)?)\(mode = (\w+), first = \d+, count = (\d+)"
    r"(?:, instancecount = (\d+))?\)",
    re.M,
)
GL_DISPATCH_INDIRECT_BUFFER = 0x90EE


def spec(*metrics: str) -> str:
    return "pipeline: " + ", ".join(metrics)


def profile(
    trace: Path, *args: str, calls_are: Boundary = Boundary.DRAWCALL
) -> tuple[dict[Boundary, ParsedTable], str]:
    """The CLI's tables, keyed by boundary; `calls_are` says what a lone call table is."""
    r = run_retrace(*args, "--quiet", str(trace))
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr
    return read_tables(io.StringIO(r.stdout.decode()), call_table=calls_are), r.stderr.decode()


def cell(table: ParsedTable, metric: str, row: int) -> float:
    return table.column(metric)[row]


def dumped_draws(trace: Path) -> dict[int, tuple[str, int, int]]:
    """call no -> (mode, count, instances) of each glDrawArrays* in `retrace dump`."""
    text = run_retrace("dump", str(trace), check=True).stdout.decode()
    return {int(m[1]): (m[3], int(m[4]), int(m[5] or 1)) for m in DRAW.finditer(text)}


@pytest.mark.parametrize(
    "name",
    [
        "glmark2-build-clientarrays.trace",
        "glmark2-buffer-map.trace",
        "glmark2-desktop-fbo.trace",
        "glmark2-texture-mipmap.trace",
        "piglit-client-arrays.trace",
        "piglit-fbo-blit.trace",
        "piglit-glx-multithread.trace",
        "piglit-instanced-arrays.trace",
        "piglit-ubo-rendering.trace",
        "piglit-xfb-draw-auto.trace",
    ],
)
def test_draw_counts_equal_the_dumped_draw_arguments(name):
    trace = TRACES / name
    draws = dumped_draws(trace)
    assert draws
    tables, _ = profile(trace, "--pdrawcalls", spec(*ALL))
    table = tables[Boundary.DRAWCALL]
    checked = 0
    for row, call_no in enumerate(table.call_nos):
        if call_no not in draws:
            continue
        mode, count, instances = draws[call_no]
        vertices = count * instances
        primitives = PRIMITIVES[mode](count) * instances
        assert cell(table, "Vertices Submitted", row) == vertices, call_no
        assert cell(table, "Primitives Submitted", row) == primitives, call_no
        assert cell(table, "Vertex Shader Invocations", row) == vertices, call_no
        assert cell(table, "Clipping Input Primitives", row) == primitives, call_no
        clipped = cell(table, "Clipping Output Primitives", row)
        if mode in ("GL_QUADS", "GL_POLYGON"):
            assert clipped >= 2 * primitives, call_no  # split into triangles
        assert cell(table, "Compute Shader Invocations", row) == 0
        assert all(cell(table, m, row) == 0 for m in SHADER_STAGES)
        assert cell(table, "Fragment Shader Invocations", row) > 0
        checked += 1
    assert checked == len(draws)


def test_cube_draws_of_build_clientarrays():
    """The example of the issue: 36 vertices of GL_TRIANGLES, a cube inside the view."""
    trace = TRACES / "glmark2-build-clientarrays.trace"
    draws = dumped_draws(trace)
    assert set(draws.values()) == {("GL_TRIANGLES", 36, 1)}
    tables, _ = profile(trace, "--pdrawcalls", spec(*ALL))
    table = tables[Boundary.DRAWCALL]
    rows = [r for r, no in enumerate(table.call_nos) if no in draws]
    assert len(rows) == 5  # one per frame
    for row in rows:
        assert cell(table, "Vertices Submitted", row) == 36
        assert cell(table, "Primitives Submitted", row) == 12
        # nothing crosses the view volume, so clipping passes the 12 triangles through
        assert cell(table, "Clipping Input Primitives", row) == 12
        assert cell(table, "Clipping Output Primitives", row) == 12
    others = [r for r in range(len(table)) if r not in rows]
    assert {table.names[r] for r in others} == {"glClear"}
    assert all(cell(table, m, r) == 0 for m in ALL for r in others)  # clears use no shaders


@pytest.mark.parametrize(
    "name",
    [
        "glmark2-build-clientarrays.trace",
        "glmark2-desktop-fbo.trace",
        "glmark2-texture-mipmap.trace",
        "piglit-client-arrays.trace",
        "piglit-fbo-blit.trace",
        "glxgears.trace",
    ],
)
def test_fragment_invocations_against_pixels_drawn(name):
    """llvmpipe counts whole 4x4 blocks: a multiple of 16, at least Pixels Drawn, and for
    the large cube of glmark2's build scene within 10 % of it (edge blocks only)."""
    tables, _ = profile(
        TRACES / name,
        "--pdrawcalls",
        "opengl: Pixels Drawn; " + spec("Fragment Shader Invocations"),
    )
    table = tables[Boundary.DRAWCALL]
    pixels = table.column("Pixels Drawn")
    invocations = table.column("Fragment Shader Invocations")
    assert len(pixels) and any(invocations)
    for p, f in zip(pixels, invocations, strict=True):
        assert f % 16 == 0 and f >= p
        assert (f == 0) == (p == 0)
    if name == "glmark2-build-clientarrays.trace":
        cube = [(p, f) for p, f in zip(pixels, invocations, strict=True) if p]
        assert len(cube) == 5
        assert all(p < f < 1.1 * p for p, f in cube)


@pytest.mark.parametrize(
    "name",
    [
        "glmark2-build-clientarrays.trace",
        "glmark2-desktop-fbo.trace",
        "glxgears.trace",
        # its one frame spans three contexts: the frame's counts are added up across them
        "piglit-glx-multithread.trace",
    ],
)
def test_frame_counts_are_the_sums_of_their_draws(name):
    tables, _ = profile(TRACES / name, "--pframes", spec(*ALL), "--pdrawcalls", spec(*ALL))
    frames, draws = tables[Boundary.FRAME], tables[Boundary.DRAWCALL]
    assert len(frames) >= 2  # the ended frames and the partial one after them
    for metric in ALL:
        sums = [0.0] * len(frames)
        for frame, value in zip(draws.frames, draws.column(metric), strict=True):
            assert not math.isnan(value)
            sums[frame] += value
        assert list(frames.column(metric)) == sums, metric
    assert any(frames.column("Vertices Submitted"))


@pytest.mark.parametrize(
    "name",
    [
        "glmark2-build-clientarrays.trace",  # a probe context first, then the real one
        "glmark2-desktop-fbo.trace",
        "glxgears.trace",  # display lists
        "piglit-glx-multithread.trace",  # three contexts in one frame
        "piglit-compute-indirect.trace",
    ],
)
def test_queries_raise_no_gl_errors(name):
    """Mesa names each GL error with MESA_DEBUG: none may come from the backend's queries
    (the traces raise none of their own), whatever boundaries and passes are measured."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrace",
            "--pframes",
            spec(*ALL),
            "--pcalls",
            spec(*ALL[:4]),
            "--pdrawcalls",
            spec(*ALL),
            "--quiet",
            str(TRACES / name),
        ],
        capture_output=True,
        env=dict(os.environ, MESA_DEBUG="1"),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr.decode()
    assert b"Mesa: User error" not in r.stderr, r.stderr.decode()


def test_glendlist_is_left_unmeasured():
    """glEndList starts while its list is compiled, where Mesa would compile glBeginQuery
    into the list: its cells read '-', and the glCallList draws that run the lists count."""
    tables, _ = profile(TRACES / "glxgears.trace", "--pcalls", spec(*ALL), calls_are=Boundary.CALL)
    calls = tables[Boundary.CALL]
    for row, name in enumerate(calls.names):
        values = [cell(calls, m, row) for m in ALL]
        if name == "glEndList":
            assert all(math.isnan(v) for v in values)
        else:
            assert not any(math.isnan(v) for v in values), name
    assert calls.names.count("glEndList") == 3  # the three gears
    lists = [r for r, n in enumerate(calls.names) if n == "glCallList"]
    assert lists and all(cell(calls, "Vertices Submitted", r) > 0 for r in lists)


def test_gen_passes_split_only_where_a_target_would_nest():
    trace = str(TRACES / "glmark2-build-clientarrays.trace")

    def passes(*selection: str) -> tuple[int, str]:
        r = run_retrace("--gen-passes", "-v", *selection, trace)
        assert r.returncode == 0, r.stderr
        return int(r.stdout), r.stderr.decode()

    vertices = spec("Vertices Submitted")
    count, why = passes("--pframes", vertices, "--pdrawcalls", vertices)
    assert count == 2 and "cannot nest" in why
    assert passes("--pframes", vertices, "--pcalls", vertices)[0] == 2
    assert passes("--pdrawcalls", spec("Vertices Submitted", "Fragment Shader Invocations"))[0] == 1
    assert passes("--pdrawcalls", spec(*ALL))[0] == 1
    assert (
        passes("--pframes", spec("Fragment Shader Invocations"), "--pdrawcalls", vertices)[0] == 1
    )
    assert passes("--pcalls", vertices, "--pdrawcalls", vertices)[0] == 1


def test_a_metric_at_calls_covers_the_draws():
    trace = TRACES / "glmark2-build-clientarrays.trace"
    tables, _ = profile(
        trace,
        "--pcalls",
        spec("Vertices Submitted"),
        "--pdrawcalls",
        spec("Vertices Submitted", "Primitives Submitted"),
    )
    calls, draws = tables[Boundary.CALL], tables[Boundary.DRAWCALL]
    assert sum(calls.column("Vertices Submitted")) == 5 * 36
    assert all(math.isnan(v) for v in draws.column("Vertices Submitted"))  # as in glretrace
    assert sum(draws.column("Primitives Submitted")) == 5 * 12


def expected_compute_invocations(path: Path) -> dict[int, int]:
    """call no -> work groups (from the indirect buffer) times the local size (from the
    shader source), for each glDispatchCompute* of the trace."""
    local_size: dict[int, int] = {}  # shader, then program -> invocations per work group
    program_of_shader: dict[int, int] = {}
    buffers: dict[int, bytes] = {}
    bound = used = 0
    out = {}
    for no, name, args, _ in recorded_calls(path):
        if name == "glShaderSource":
            source = b"".join(args[2]).decode()
            size = 1
            for axis in "xyz":
                found = re.search(rf"local_size_{axis}\s*=\s*(\d+)", source)
                size *= int(found[1]) if found else 1
            local_size[args[0]] = size
        elif name == "glAttachShader":
            program_of_shader[args[1]] = args[0]
        elif name == "glBindBuffer" and args[0] == GL_DISPATCH_INDIRECT_BUFFER:
            bound = args[1]
        elif name == "glBufferData" and args[0] == GL_DISPATCH_INDIRECT_BUFFER:
            buffers[bound] = bytes(args[2])
        elif name == "glUseProgram":
            used = args[0]
        elif name == "glDispatchComputeIndirect":
            groups = struct.unpack_from("<3I", buffers[bound], args[0])
            per_group = next(s for sh, s in local_size.items() if program_of_shader[sh] == used)
            out[no] = math.prod(groups) * per_group
        elif name == "glDispatchCompute":
            per_group = next(s for sh, s in local_size.items() if program_of_shader[sh] == used)
            out[no] = math.prod(args[:3]) * per_group
    return out


def test_compute_invocations_are_work_groups_times_local_size():
    trace = TRACES / "piglit-compute-indirect.trace"
    expected = expected_compute_invocations(trace)
    assert len(expected) == 6 and all(expected.values())
    metric = "Compute Shader Invocations"
    tables, _ = profile(trace, "--pframes", spec(metric), "--pdrawcalls", spec(metric, *ALL[:2]))
    draws = tables[Boundary.DRAWCALL]
    got = {no: v for no, v in zip(draws.call_nos, draws.column(metric), strict=True)}
    assert got == expected
    assert not any(draws.column("Vertices Submitted"))  # dispatches submit no vertices
    # no frame ends in this trace: its one (partial) frame holds every dispatch
    assert list(tables[Boundary.FRAME].column(metric)) == [sum(expected.values())]


def test_unavailable_on_opengl_es_warns_and_prints_dashes():
    tables, err = profile(
        TRACES / "es2gears.trace",
        "--pdrawcalls",
        spec("Vertices Submitted", "Compute Shader Invocations"),
    )
    assert "not available" in err and "OpenGL ES" in err
    table = tables[Boundary.DRAWCALL]
    assert len(table) and all(math.isnan(v) for col in table.values for v in col)


def test_list_metrics_shows_the_backend():
    r = run_retrace("--list-metrics", "--json", str(TRACES / "glmark2-build-clientarrays.trace"))
    rows = [m for m in json.loads(r.stdout) if m["backend"] == "pipeline"]
    assert [m["name"] for m in rows] == ALL
    assert all(m["available"] and m["supported"] for m in rows)
    assert all(m["num_type"] == "uint64" and m["unit"] and m["description"] for m in rows)
    r = run_retrace("--list-metrics", "--json", str(TRACES / "es2gears.trace"))
    rows = [m for m in json.loads(r.stdout) if m["backend"] == "pipeline"]
    assert rows and not any(m["available"] for m in rows)
    assert all("OpenGL ES" in m["reason"] for m in rows)


def immediate_triangles(path: Path, triangles: int, frames: int = 0) -> None:
    """A GLX trace of `triangles` glBegin(GL_TRIANGLES)..glEnd draws and no frame end, or
    `frames` frames of them, each ended by a glXSwapBuffers."""
    w = TraceWriter()

    glx_context(w)
    for _ in range(max(frames, 1)):
        for _ in range(triangles):
            w.call("glBegin", ("mode",), {0: w.enum((("GL_TRIANGLES", 4),), 4)})
            for x, y in ((-0.5, -0.5), (0.5, -0.5), (0.0, 0.5)):
                w.call("glVertex2f", ("x", "y"), {0: w.float(x), 1: w.float(y)})
            w.call("glEnd")
        if frames:
            w.call("glXSwapBuffers", ("dpy", "drawable"), {0: w.opaque(0x1), 1: w.int(2)})
    path.write_bytes(w.snappy())


def test_many_draws_without_frame_ends(tmp_path):
    """No SwapBuffers: results are read in runs as they become available, none is lost."""
    trace = tmp_path / "triangles.trace"
    immediate_triangles(trace, 3000)
    tables, _ = profile(
        trace,
        "--pframes",
        spec("Vertices Submitted"),
        "--pdrawcalls",
        spec("Vertices Submitted", "Primitives Submitted", "Clipping Input Primitives"),
    )
    draws = tables[Boundary.DRAWCALL]
    assert len(draws) == 3000 and set(draws.names) == {"glBegin"}
    assert set(draws.column("Vertices Submitted")) == {3}
    assert set(draws.column("Primitives Submitted")) == {1}
    assert set(draws.column("Clipping Input Primitives")) == {1}
    assert list(tables[Boundary.FRAME].column("Vertices Submitted")) == [9000]


def test_queries_in_flight_stay_bounded_in_long_frames(tmp_path, monkeypatch):
    """Results are read a collection late at frame ends and every READ_EVERY events, as the
    replay loop reads the opengl backend's: the queries waiting to be read stay about twice
    that many per metric, not one per event of two frames (each costs the driver kilobytes:
    llvmpipe's about 6 KB, measured on neverball's 4,000-call frames)."""
    from retrace.backends import pipeline
    from retrace.profile.driver import Profiler
    from retrace.profile.options import ProfileOptions

    trace = tmp_path / "triangles.trace"
    immediate_triangles(trace, 3000, frames=3)
    metrics = ("Vertices Submitted", "Primitives Submitted", "Clipping Input Primitives")
    outstanding, most = [0], [0]
    take, give = pipeline._Pool.take, pipeline._Pool.give

    def counted_take(pool: pipeline._Pool, target: int) -> int:
        outstanding[0] += 1
        most[0] = max(most[0], outstanding[0])
        return take(pool, target)

    def counted_give(pool: pipeline._Pool, target: int, query: int) -> None:
        outstanding[0] -= 1
        give(pool, target, query)

    monkeypatch.setattr(pipeline._Pool, "take", counted_take)
    monkeypatch.setattr(pipeline._Pool, "give", counted_give)
    options = ProfileOptions({Boundary.DRAWCALL: spec(*metrics)})
    profiler = Profiler(str(trace), options, store_dir=str(tmp_path))
    try:
        profile_ = profiler.run()
        draws = profile_.tables(profiler.store)[0]
        assert draws.boundary == Boundary.DRAWCALL and draws.rows == 9000
        assert set(draws.values[0].read_list(0, 9000)) == {3}  # none lost
    finally:
        profiler.close()
    assert 0 < most[0] <= len(metrics) * (2 * pipeline.READ_EVERY + 1)
