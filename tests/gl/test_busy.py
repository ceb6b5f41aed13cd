"""`opengl: GPU Busy` and `GPU Idle`: the GPU time of the GPU work in an event, each call
that makes the GPU work timed on its own, and the rest of the event's GPU span."""

from __future__ import annotations

import io
import json
import statistics
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLE_TRACES, run_retrace
from tracegen import TraceWriter, same_work_more_waiting

from retrace.gl.work import makes_gpu_work
from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import ParsedTable, read_tables

SPAN_BUSY_IDLE = "opengl: GPU Duration, GPU Busy, GPU Idle"
CORPUS = sorted((ROOT / "traces" / "corpus").glob("*.trace"))


def profile(trace: Path, *selection: str) -> dict[Boundary, ParsedTable]:
    done = run_retrace(*selection, "--quiet", str(trace))
    assert done.returncode == 0, done.stderr
    return read_tables(io.StringIO(done.stdout.decode()))


def measured(values: list[float]) -> list[float]:
    return [v for v in values if v == v]  # not NaN: "-"


# Frames: a warm-up (the first draw compiles llvmpipe's shaders), then LIGHT and HEAVY
# frames of the same GPU work with 0 and 32,000 glColor4f calls after each rectangle.
FRAMES, LIGHT, HEAVY = 4, 0, 32_000


@pytest.fixture(scope="module")
def waiting(tmp_path_factory) -> dict[Boundary, ParsedTable]:
    w = TraceWriter()
    same_work_more_waiting(w, (LIGHT,) + (LIGHT,) * FRAMES + (HEAVY,) * FRAMES)
    path = tmp_path_factory.mktemp("busy") / "waiting.trace"
    path.write_bytes(w.snappy())
    return profile(path, "--pframes", SPAN_BUSY_IDLE)


def test_the_span_grows_with_the_cpu_work_and_busy_does_not(waiting):
    """Measured on llvmpipe (2 cores under a load average near 10; 6 runs with 16,000 calls
    after each rectangle, 6 with 32,000): from the frames with none to the heaviest, the
    median frame span grew 1.8 to 17 times (by 10 to 90 ms) while the median busy time
    moved by at most 8 us (it was 0.9 to 9 us a frame; 1.0 to 1.6 us at 32,000). So the
    span must grow by half, and busy may move by 1% of the span's growth (100 us or more,
    12 times the largest move seen)."""
    frames = waiting[Boundary.FRAME]
    span, busy = frames.column("GPU Duration"), frames.column("GPU Busy")
    light, heavy = slice(1, 1 + FRAMES), slice(1 + FRAMES, 1 + 2 * FRAMES)
    light_span, heavy_span = statistics.median(span[light]), statistics.median(span[heavy])
    assert heavy_span > 1.5 * light_span
    moved = abs(statistics.median(busy[heavy]) - statistics.median(busy[light]))
    assert moved <= 0.01 * (heavy_span - light_span)
    assert all(b > 0 for b in busy[: 1 + 2 * FRAMES])


def test_idle_is_the_span_less_busy(waiting):
    frames = waiting[Boundary.FRAME]
    columns = map(frames.column, ("GPU Duration", "GPU Busy", "GPU Idle"))
    for span, busy, idle in zip(*columns, strict=True):
        if span == span:
            assert idle == span - busy and 0 <= busy <= span


@pytest.mark.parametrize("trace", SAMPLE_TRACES + CORPUS, ids=lambda p: p.name)
def test_busy_is_within_the_span_on_every_frame(trace):
    """Every frame with a span has a busy time within it. (A one-frame piglit trace's
    frame has no span: its context is gone at its end.)"""
    frames = profile(trace, "--pframes", SPAN_BUSY_IDLE)[Boundary.FRAME]
    spans, busy = frames.column("GPU Duration"), frames.column("GPU Busy")
    pairs = [(s, b) for s, b in zip(spans, busy, strict=True) if s == s]
    assert len(pairs) >= len(spans) - 1 and (pairs or len(spans) == 1)
    assert all(0 <= b <= s for s, b in pairs), pairs


@pytest.mark.parametrize(
    "trace",
    [
        "glmark2-desktop-fbo.trace",  # clears, draws into a framebuffer object
        "piglit-dlist-beginend.trace",  # glBegin..glEnd blocks and display lists
        "piglit-fbo-blit.trace",  # glBlitFramebuffer
        "piglit-compute-indirect.trace",  # glDispatchComputeIndirect
    ],
)
def test_a_frames_busy_time_is_its_calls_and_only_gpu_work_has_any(trace):
    """Frames and calls measured in one pass share the brackets: a frame's busy time is the
    sum of its calls', and a call that makes no GPU work has none."""
    tables = profile(
        ROOT / "traces" / trace, "--pframes", "opengl: GPU Busy", "--pcalls", SPAN_BUSY_IDLE
    )
    frames, calls = tables[Boundary.FRAME], tables[Boundary.CALL]
    per_frame: dict[int, float] = {}
    work = 0
    for row in calls.rows():
        span, busy, _ = row.values
        assert row.name is not None
        if not makes_gpu_work(row.name):
            assert busy == 0, row
        elif span == span:
            work += 1
            assert 0 <= busy <= span, row
        per_frame[row.frame] = per_frame.get(row.frame, 0) + busy
    assert work
    busy = frames.column("GPU Busy")
    expected = [per_frame.get(f, 0) for f in range(len(busy))]
    assert measured(expected) == measured(list(busy))
    assert [b == b for b in busy] == [b == b for b in expected]


def test_frames_of_more_brackets_than_are_read_at_a_time(tmp_path):
    """1,500 rectangles a frame: the loop hands over what it measured every 1,024 calls
    or brackets, in the middle of frames, and a frame's total still spans them all."""
    w = TraceWriter()
    same_work_more_waiting(w, (0, 0, 0), draws=1500, size=16)
    path = tmp_path / "many.trace"
    path.write_bytes(w.snappy())
    tables = profile(path, "--pframes", "opengl: GPU Busy", "--pcalls", "opengl: GPU Busy")
    per_frame = [0.0] * len(tables[Boundary.FRAME])
    for row in tables[Boundary.CALL].rows():
        per_frame[row.frame] += row.values[0]
    assert list(tables[Boundary.FRAME].column("GPU Busy")) == per_frame
    alone = profile(path, "--pframes", "opengl: GPU Busy")[Boundary.FRAME].column("GPU Busy")
    assert len(alone) == len(per_frame) and all(b > 0 for b in alone[:3])


def test_gpu_busy_at_draw_calls_is_each_draws_own_time():
    trace = ROOT / "traces" / "glmark2-desktop-fbo.trace"
    draws = profile(trace, "--pdrawcalls", SPAN_BUSY_IDLE)[Boundary.DRAWCALL]
    rows = list(draws.rows())
    assert rows and all(makes_gpu_work(r.name or "") for r in rows)
    for r in rows:
        span, busy, idle = r.values
        assert 0 <= busy <= span and idle == span - busy, r
    assert sum(r.values[1] for r in rows) > 0


@pytest.mark.parametrize("trace", ["piglit-dlist-beginend.trace", "glmark2-desktop-fbo.trace"])
def test_the_program_marks_the_gpu_work_outside_lists_and_blocks(trace):
    """Each op that makes the GPU work and is a profiling row is marked (glBegin and glEnd
    of a block, not what is between them; nothing compiled into a display list)."""
    from retrace.replay.program import OpKind
    from retrace.replay.replayer import Replayer

    with Replayer(str(ROOT / "traces" / trace)) as replayer:
        replayer.run_pass()
        program = replayer.program
        names = [program.names[n] for n in program.column("name_ids").tolist()]
        rows, work = program.column("rows").tolist(), program.column("work").tolist()
    expected = [
        int(r != OpKind.NONE and makes_gpu_work(n)) for n, r in zip(names, rows, strict=True)
    ]
    assert work == expected and sum(work) > 0
    if trace == "piglit-dlist-beginend.trace":  # a glEnd compiled into a list: not marked
        assert any(r == OpKind.NONE and n == "glEnd" for n, r in zip(names, rows, strict=True))


def test_listed_after_glretraces_ids_with_unit_and_description():
    done = run_retrace("--list-metrics", "--json", str(ROOT / "traces" / "glxgears.trace"))
    assert done.returncode == 0, done.stderr
    rows = {(r["backend"], r["name"]): r for r in json.loads(done.stdout)}
    for name, metric_id in (("GPU Busy", 4), ("GPU Idle", 5)):
        row = rows["opengl", name]
        assert (row["group"], row["id"], row["unit"], row["type"]) == (
            1,
            metric_id,
            "ns",
            "duration",
        )
        assert row["available"] and "GPU" in row["description"]
    assert (rows["opengl", "GPU Duration"]["id"], rows["opengl", "GPU Disjoint"]["id"]) == (1, 3)
