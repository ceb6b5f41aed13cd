"""The GL_AMD_performance_monitor backend, on the real replay, against the spec's model.

llvmpipe does not expose the extension, so most tests put the model of the
spec (tests/models/amd_perfmon.py) in the driver's place for the backends and
run the real `Profiler` on real traces: the backend's calls are the ones it
makes on hardware. The model counts real GL_SAMPLES_PASSED and
GL_PRIMITIVES_GENERATED work between begin and end, so its "Samples Passed"
must equal the opengl backend's Pixels Drawn for every frame and draw call.
What this machine's own driver does is checked as well (the last tests); the
model itself is checked against the spec in tests/unit/test_amd_perfmon.py.
"""

from __future__ import annotations

import math

import pytest
from conftest import TRACES, run_retrace
from models.amd_perfmon import (
    GL_PERFMON_RESULT_AVAILABLE_AMD,
    AmdPerfMonitorModel,
)
from models.driver import (
    GL_INVALID_OPERATION,
    GL_NO_ERROR,
    RESULT,
)
from models.harness import (
    MULTI_CONTEXT,
    at_first_context,
    check_rejected,
    check_second_context_reads_dash,
    most_in_flight,
    on_this_driver,
    profile,
    rect_trace,
)

from retrace.backends.amd_perfmon import AmdPerfMonitorBackend
from retrace.backends.counter_sessions import CounterSessionBackend
from retrace.vocabulary import Boundary, Kind, NumType

AMD = "GL_AMD_performance_monitor"
ALL = "Samples Passed, Primitives Generated, Fragments Per Primitive, Session Serial, Sample Share"


def share(samples: float, primitives: float) -> float:
    return 100 * samples / (samples + primitives) if samples + primitives else 0.0


# --- listing and selecting -----------------------------------------------------------------------


def test_lists_the_drivers_counters_with_their_types():
    def listing(backends):
        backend = backends[AMD]
        assert isinstance(backend, AmdPerfMonitorBackend)
        assert backend.support() == (True, "")
        return [
            (m.group, m.id, m.name, m.group_name, m.num_type, m.kind, m.unit, m.description)
            for m in backend.metrics()
        ] + [sorted(backend.boundaries(backend.metrics()[0]))]

    found = at_first_context("glxgears.trace", AmdPerfMonitorModel(), listing)
    assert [row[:7] for row in found[:-1]] == [
        (1, 0, "Samples Passed", "Pipeline", NumType.UINT64, Kind.GENERIC, ""),
        (1, 1, "Primitives Generated", "Pipeline", NumType.UINT, Kind.GENERIC, ""),
        (1, 2, "Fragments Per Primitive", "Pipeline", NumType.FLOAT, Kind.GENERIC, ""),
        (4, 10, "Session Serial", "Model", NumType.UINT, Kind.GENERIC, ""),
        (4, 11, "Sample Share", "Model", NumType.FLOAT, Kind.PERCENT, "%"),
    ]
    assert found[4][7] == (
        "Model counter, percentage from 0 to 100 (at most 3 of the group in one monitor)"
    )
    assert found[-1] == [Boundary.DRAWCALL, Boundary.FRAME]  # no CALL, as glretrace


def test_selects_by_name_and_by_id_and_measures_every_draw_exactly():
    run = profile(
        "glxgears.trace",
        AmdPerfMonitorModel(),
        frames=f"{AMD}: [1, 0]; opengl: Pixels Drawn",
        draws=f"{AMD}: Primitives Generated, [1, 0]; opengl: Pixels Drawn",
    )
    frames, draws = run.tables[Boundary.FRAME], run.tables[Boundary.DRAWCALL]
    assert draws.metrics == ["Samples Passed", "Primitives Generated", "Pixels Drawn"]
    assert list(frames.column("Samples Passed")) == list(frames.column("Pixels Drawn"))
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    assert len(draws) == 20 and all(v > 0 for v in draws.column("Pixels Drawn")[1:4])
    primitives = list(draws.column("Primitives Generated"))
    for frame in range(5):  # glClear draws no primitive; the three gears the same each frame
        assert primitives[4 * frame] == 0
        assert primitives[4 * frame + 1 : 4 * frame + 4] == primitives[1:4]


@pytest.mark.parametrize(
    ("boundary", "selection", "message"),
    [
        (Boundary.DRAWCALL, f"{AMD}: [1, 7]", f'backend "{AMD}" has no metric "\\[1, 7\\]"'),
        (Boundary.DRAWCALL, f"{AMD}: Sampels Passed", "did you mean: Samples Passed"),
        (Boundary.CALL, f"{AMD}: Samples Passed", "cannot be measured per call"),
    ],
)
def test_invalid_selections_are_rejected_with_a_clear_message(boundary, selection, message):
    check_rejected(AmdPerfMonitorModel(), boundary, selection, message)


def test_a_counter_the_driver_refuses_reads_dash_with_the_reason(capsys):
    run = profile("glxgears.trace", AmdPerfMonitorModel(max_active=0), frames=f"{AMD}: [1, 0]")
    assert all(math.isnan(v) for v in run.tables[Boundary.FRAME].column("Samples Passed"))
    assert "glBeginPerfMonitorAMD refuses it on its own (GL_INVALID_OPERATION)" in (
        capsys.readouterr().err
    )


# --- passes --------------------------------------------------------------------------------------


def test_passes_hold_as_many_counters_as_one_monitor_takes():
    model = AmdPerfMonitorModel(max_active=2)
    run = profile(
        "glxgears.trace",
        model,
        frames=f"{AMD}: {ALL}",
        draws=f"{AMD}: {ALL}; opengl: Pixels Drawn",
    )
    per_pass = [line.split(": ", 2)[2] for line in run.passes]
    groups = [
        "Samples Passed, Primitives Generated",
        "Fragments Per Primitive, Session Serial",
        "Sample Share",
    ]
    suffix = " (what one monitor takes together)"
    assert per_pass[:6] == [g + suffix for g in groups * 2]  # 5 counters, 2 a pass: 3 passes
    assert [line.split(":")[1] for line in run.passes[:6]] == [
        f" {AMD} per frame",
    ] * 3 + [f" {AMD} per draw call"] * 3
    for table in run.tables.values():  # passes line up row by row
        samples, primitives = table.column("Samples Passed"), table.column("Primitives Generated")
        for s, p, f, pct in zip(
            samples,
            primitives,
            table.column("Fragments Per Primitive"),
            table.column("Sample Share"),
            strict=True,
        ):
            assert f == pytest.approx(s / p if p else 0, rel=1e-5)  # printed with 6 digits
            assert pct == pytest.approx(share(s, p), rel=1e-5)
    draws = run.tables[Boundary.DRAWCALL]
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    serials = list(draws.column("Session Serial"))  # each row its own monitor, in order
    assert serials == list(range(int(serials[0]), int(serials[0]) + 20))


def test_first_fit_packing_is_maximal():
    """No counter of a later pass would fit into an earlier pass of its boundary."""
    model = AmdPerfMonitorModel(max_active=3)

    def plan(backends):
        backend = backends[AMD]
        for name in ALL.split(", "):
            backend.enable(backend.metric_by_name(name), Boundary.DRAWCALL)
        backend.generate_passes()
        gl = backend._functions()
        later = [m for _, metrics in backend.plan for m in metrics]
        for _, metrics in backend.plan:
            later = later[len(metrics) :]
            assert gl.trial(metrics)[1] == GL_NO_ERROR
            assert all(gl.trial([*metrics, m])[1] == GL_INVALID_OPERATION for m in later)
        return [[m.name for m in metrics] for _, metrics in backend.plan]

    assert at_first_context("glxgears.trace", model, plan) == [
        ["Samples Passed", "Primitives Generated", "Session Serial"],
        ["Fragments Per Primitive", "Sample Share"],
    ]


# --- reading late --------------------------------------------------------------------------------


def test_monitors_stay_in_flight_and_are_read_without_busy_waiting(tmp_path):
    trace = rect_trace(tmp_path / "rects.trace", frames=2, draws=100)
    model = AmdPerfMonitorModel()
    run = profile(trace, model, draws=f"{AMD}: Samples Passed; opengl: Pixels Drawn")
    draws = run.tables[Boundary.DRAWCALL]
    assert len(draws) == 200
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    assert model.premature_reads == 0
    calls = [c for c in model.calls if c[0] != "glGetStringi"]
    assert most_in_flight(calls, "glEndPerfMonitorAMD") >= CounterSessionBackend.FLUSH_EVERY
    # one glFinish, to read what is left at the end of the pass; none per draw
    names = [name for name, _ in calls]
    last_begin = max(i for i, name in enumerate(names) if name == "glBeginPerfMonitorAMD")
    finishes = [i for i, name in enumerate(names) if name == "glFinish"]
    assert len(finishes) == 1 and finishes[0] > last_begin
    # no polling loop: a monitor found unavailable is asked again only after more draws began
    asked: dict[int, int] = {}
    for i, (name, args) in enumerate(calls):
        if name == "glGetPerfMonitorCounterDataAMD" and args[1] == GL_PERFMON_RESULT_AVAILABLE_AMD:
            if args[0] in asked:
                assert "glBeginPerfMonitorAMD" in names[asked[args[0]] : i]
            asked[args[0]] = i
        elif name == RESULT:
            asked.pop(args[0], None)


def test_each_frame_is_read_at_a_later_frame_end():
    model = AmdPerfMonitorModel()
    profile("glxgears.trace", model, frames=f"{AMD}: Samples Passed")
    calls = [c for c in model.calls if c[0] in ("glBeginPerfMonitorAMD", RESULT)]
    pass_calls = calls[-12:]  # the pass's 6 frames (the scratch monitors come first)
    order = [name for name, _ in pass_calls]
    assert order[:3] == ["glBeginPerfMonitorAMD", "glBeginPerfMonitorAMD", RESULT]


def test_a_slow_gpu_costs_one_wait_per_window(tmp_path):
    trace = rect_trace(tmp_path / "rects.trace", frames=2, draws=100)
    model = AmdPerfMonitorModel(latency=10**9)  # nothing completes before a glFinish
    run = profile(trace, model, draws=f"{AMD}: Samples Passed; opengl: Pixels Drawn")
    draws = run.tables[Boundary.DRAWCALL]
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    window = CounterSessionBackend.WINDOW
    assert model.calls_of("glFinish") == [()] * (200 // window + 1)  # and one for the rest


# --- contexts ------------------------------------------------------------------------------------


def test_a_context_switch_mid_frame_keeps_the_row():
    """glretrace drops such a frame; here it adds the samples of all three contexts."""
    run = profile(
        MULTI_CONTEXT,
        AmdPerfMonitorModel(),
        frames=f"{AMD}: Samples Passed, Sample Share; opengl: Pixels Drawn",
        draws=f"{AMD}: Samples Passed, Sample Share; opengl: Pixels Drawn",
    )
    frames, draws = run.tables[Boundary.FRAME], run.tables[Boundary.DRAWCALL]
    assert list(frames.column("Samples Passed")) == list(frames.column("Pixels Drawn")) == [200, 0]
    # a percentage is the contexts' segments' mean, weighted by the time spent on each: the
    # clear (0 %), a draw on each of the two other contexts, the swap back on the first (0 %)
    assert list(draws.names) == ["glClear", "glDrawArrays", "glDrawArrays"]
    clear, draw, other_draw = draws.column("Sample Share")
    assert clear == 0 and draw == other_draw == pytest.approx(share(100, 2), rel=1e-5)
    assert 0 < frames.column("Sample Share")[0] < draw


def test_a_context_without_the_extension_reads_dash(capsys):
    check_second_context_reads_dash(AmdPerfMonitorModel(), AMD, lambda: capsys.readouterr().err)


def test_without_the_extension_on_the_first_context_selections_read_dash(capsys):
    model = AmdPerfMonitorModel()
    model.exposed = lambda context: False

    def support(backends):
        return backends[AMD].support(), list(backends[AMD].metrics())

    (ok, why), metrics = at_first_context("glxgears.trace", model, support)
    assert not ok and why.startswith(f"{AMD} not exposed by llvmpipe")
    assert metrics == []
    model = AmdPerfMonitorModel()
    model.exposed = lambda context: False
    run = profile("glxgears.trace", model, frames=f"{AMD}: [1, 0], Samples Passed")
    frames = run.tables[Boundary.FRAME]
    assert frames.metrics == ["[1, 0]", "Samples Passed"]
    assert all(math.isnan(v) for v in frames.column("[1, 0]"))
    assert f'"[1, 0]" is not available here: {AMD} not exposed by llvmpipe' in (
        capsys.readouterr().err
    )
    assert model.calls_of("glBeginPerfMonitorAMD") == []


# --- this machine's driver -----------------------------------------------------------------------


def test_this_machines_driver():
    """Where the driver has the extension, profile with it for real; else it says why not."""
    (ok, why), metrics = on_this_driver(AMD)
    if not ok:
        assert why.startswith(f"{AMD} not exposed by ")
        r = run_retrace("--pframes", f"{AMD}: [0, 0]", str(TRACES / "glxgears.trace"))
        assert r.returncode == 0, r.stderr
        assert b"not available here" in r.stderr
        assert r.stdout.decode().splitlines()[:2] == ["#\t[0, 0]", "frame\t-"]
        return
    first = metrics[0]
    r = run_retrace(
        "--pdrawcalls", f"{AMD}: [{first.group}, {first.id}]", str(TRACES / "glxgears.trace")
    )
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.decode().splitlines() if line.startswith("call")]
    assert len(rows) == 20 and all(row[4] != "-" for row in rows)
