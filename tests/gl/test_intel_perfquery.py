"""The GL_INTEL_performance_query backend, on the real replay, against the spec's model.

As for GL_AMD_performance_monitor (see test_amd_perfmon.py): llvmpipe lacks the
extension, so the model of the spec (tests/models/intel_perfquery.py) takes the
driver's place for the backends while the real `Profiler` replays real traces.
Its "Samples Passed" counts real GL_SAMPLES_PASSED work, so it must equal the
opengl backend's Pixels Drawn for every event. The model is checked against
the spec in tests/unit/test_intel_perfquery.py; the last test is about this
machine's own driver.
"""

from __future__ import annotations

import math

import pytest
from conftest import TRACES, run_retrace
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
from models.intel_perfquery import (
    GL_PERFQUERY_DONOT_FLUSH_INTEL,
    GL_PERFQUERY_WAIT_INTEL,
    IntelPerfQueryModel,
)

from retrace.backends.counter_sessions import CounterSessionBackend
from retrace.backends.intel_perfquery import IntelPerfQueryBackend
from retrace.vocabulary import Boundary, Kind, NumType

INTEL = "GL_INTEL_performance_query"


# --- listing and selecting ---------------------------------------------------------------------


def test_lists_queries_and_counters_with_types_and_descriptions():
    def listing(backends):
        backend = backends[INTEL]
        assert isinstance(backend, IntelPerfQueryBackend)
        assert backend.support() == (True, "")
        return [
            (m.group, m.id, m.name, m.group_name, m.num_type, m.kind, m.description)
            for m in backend.metrics()
        ]

    found = at_first_context("glxgears.trace", IntelPerfQueryModel(), listing)
    pipeline, timing = "Model Pipeline Statistics", "Model Timing"
    assert [row[:6] for row in found] == [
        (1, 1, "Samples Passed", pipeline, NumType.UINT64, Kind.NUM),
        (1, 2, "Primitives Generated", pipeline, NumType.UINT, Kind.NUM),
        (1, 3, "Fragments Per Primitive", pipeline, NumType.FLOAT, Kind.GENERIC),
        (1, 4, "Sample Share", pipeline, NumType.DOUBLE, Kind.DURATION),
        (1, 5, "Split Occurred", pipeline, NumType.BOOL, Kind.GENERIC),
        (1, 6, "Query Serial", pipeline, NumType.UINT64, Kind.GENERIC),
        (3, 1, "Begin Tick", timing, NumType.UINT64, Kind.TIMESTAMP),
        (3, 2, "Session Ticks", timing, NumType.UINT64, Kind.DURATION),
    ]
    assert found[0][6] == "Samples that passed the depth and stencil tests"
    assert found[7][6] == "Calls into the model between begin and end (at most 1000000 per second)"


def test_one_pass_per_query_per_boundary_and_exact_values():
    selection = f"{INTEL}: [1, 1], Query Serial, [3, 2]; opengl: Pixels Drawn"
    run = profile("glxgears.trace", IntelPerfQueryModel(), frames=selection, draws=selection)
    assert run.passes[:4] == [
        f'pass 1: {INTEL} per frame: query "Model Pipeline Statistics": Samples Passed, '
        "Query Serial",
        f'pass 2: {INTEL} per frame: query "Model Timing": Session Ticks',
        f'pass 3: {INTEL} per draw call: query "Model Pipeline Statistics": Samples Passed, '
        "Query Serial",
        f'pass 4: {INTEL} per draw call: query "Model Timing": Session Ticks',
    ]
    for table in run.tables.values():
        assert table.metrics == ["Samples Passed", "Query Serial", "Session Ticks", "Pixels Drawn"]
        assert list(table.column("Samples Passed")) == list(table.column("Pixels Drawn"))
        serials = list(table.column("Query Serial"))  # each row its own handle's data, in order
        assert serials == list(range(int(serials[0]), int(serials[0]) + len(table)))
        assert set(table.column("Session Ticks")) == {1.0}  # begin and end, nothing between


@pytest.mark.parametrize(
    ("boundary", "selection", "message"),
    [
        (Boundary.FRAME, f"{INTEL}: [1, 0]", r'has no metric "\[1, 0\]"'),  # ids start at 1
        (Boundary.FRAME, f"{INTEL}: [2, 1]", r'has no metric "\[2, 1\]"'),
        (Boundary.DRAWCALL, f"{INTEL}: Sample Shares", "did you mean: Sample Share"),
        (Boundary.CALL, f"{INTEL}: Samples Passed", "cannot be measured per call"),
    ],
)
def test_invalid_selections_are_rejected_with_a_clear_message(boundary, selection, message):
    check_rejected(IntelPerfQueryModel(), boundary, selection, message)


def test_a_query_the_driver_cannot_create_reads_dash_with_the_reason(capsys):
    run = profile("glxgears.trace", IntelPerfQueryModel(max_instances=0), frames=f"{INTEL}: [1, 1]")
    assert all(math.isnan(v) for v in run.tables[Boundary.FRAME].column("Samples Passed"))
    err = capsys.readouterr().err
    assert 'glCreatePerfQueryINTEL gives no "Model Pipeline Statistics" query' in err
    assert "(GL_OUT_OF_MEMORY)" in err


# --- reading late ------------------------------------------------------------------------------


def waits_in_bursts(calls: list[tuple[str, tuple]]) -> list[int]:
    """Blocking reads, grouped into runs with no query begun in between."""
    bursts: list[int] = []
    waiting = False
    for name, args in calls:
        if name == "glBeginPerfQueryINTEL":
            waiting = False
        elif name == "glGetPerfQueryDataINTEL" and args[1] == GL_PERFQUERY_WAIT_INTEL:
            if not waiting:
                bursts.append(0)
            bursts[-1] += 1
            waiting = True
    return bursts


def test_handles_stay_in_flight_and_are_never_waited_for_after_each_event(tmp_path):
    trace = rect_trace(tmp_path / "rects.trace", frames=2, draws=100)
    model = IntelPerfQueryModel()
    run = profile(trace, model, draws=f"{INTEL}: Samples Passed; opengl: Pixels Drawn")
    draws = run.tables[Boundary.DRAWCALL]
    assert len(draws) == 200
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    pass_calls = model.calls[
        max(i for i, c in enumerate(model.calls) if c[0] == "glGetPerfCounterInfoINTEL") :
    ]
    assert most_in_flight(pass_calls, "glEndPerfQueryINTEL") >= CounterSessionBackend.FLUSH_EVERY
    # WAIT only once, for what is left when the pass ends; the rest is read without blocking
    bursts = waits_in_bursts(pass_calls)
    assert len(bursts) == 1 and bursts[0] <= CounterSessionBackend.FLUSH_EVERY
    reads = model.calls_of("glGetPerfQueryDataINTEL")
    assert sum(flags == GL_PERFQUERY_DONOT_FLUSH_INTEL for _, flags, *_ in reads) >= 200 - bursts[0]
    names = [name for name, _ in pass_calls]
    last_begin = max(i for i, name in enumerate(names) if name == "glBeginPerfQueryINTEL")
    assert all(
        i > last_begin
        for i, (name, args) in enumerate(pass_calls)
        if name == "glGetPerfQueryDataINTEL" and args[1] == GL_PERFQUERY_WAIT_INTEL
    )


def test_a_slow_gpu_costs_one_wait_per_window(tmp_path):
    trace = rect_trace(tmp_path / "rects.trace", frames=2, draws=100)
    model = IntelPerfQueryModel(latency=10**9)
    run = profile(trace, model, draws=f"{INTEL}: Samples Passed; opengl: Pixels Drawn")
    draws = run.tables[Boundary.DRAWCALL]
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    window = CounterSessionBackend.WINDOW
    assert waits_in_bursts(model.calls)[-4:] == [window] * 3 + [200 - 3 * window]


def test_the_drivers_instance_limit_bounds_the_handles_in_flight(tmp_path, capsys):
    trace = rect_trace(tmp_path / "rects.trace", frames=1, draws=50)
    model = IntelPerfQueryModel(max_instances=4)
    run = profile(trace, model, draws=f"{INTEL}: Samples Passed; opengl: Pixels Drawn")
    draws = run.tables[Boundary.DRAWCALL]
    assert list(draws.column("Samples Passed")) == list(draws.column("Pixels Drawn"))
    assert most_in_flight(model.calls, "glEndPerfQueryINTEL") == 4
    assert "no more" not in capsys.readouterr().err


# --- contexts ----------------------------------------------------------------------------------


def test_a_context_switch_mid_frame_keeps_the_row():
    """glretrace drops such a frame; here its segments on three contexts are combined."""
    selection = f"{INTEL}: Samples Passed, Sample Share, Split Occurred; opengl: Pixels Drawn"
    run = profile(MULTI_CONTEXT, IntelPerfQueryModel(), frames=selection, draws=selection)
    frames, draws = run.tables[Boundary.FRAME], run.tables[Boundary.DRAWCALL]
    assert list(frames.column("Samples Passed")) == list(frames.column("Pixels Drawn")) == [200, 0]
    assert list(frames.column("Split Occurred")) == [0, 0]
    clear, draw, other_draw = draws.column("Sample Share")  # a normalised duration: averaged
    assert clear == 0 and draw == other_draw == pytest.approx(100 / 102, rel=1e-5)
    assert 0 < frames.column("Sample Share")[0] < draw


def test_a_context_without_the_extension_reads_dash(capsys):
    check_second_context_reads_dash(IntelPerfQueryModel(), INTEL, lambda: capsys.readouterr().err)


def test_without_the_extension_on_the_first_context_selections_read_dash(capsys):
    model = IntelPerfQueryModel()
    model.exposed = lambda context: False
    run = profile("glxgears.trace", model, draws=f"{INTEL}: [1, 1]")
    draws = run.tables[Boundary.DRAWCALL]
    assert draws.metrics == ["[1, 1]"] and all(math.isnan(v) for v in draws.column("[1, 1]"))
    assert f"{INTEL} not exposed by llvmpipe" in capsys.readouterr().err
    assert model.calls_of("glCreatePerfQueryINTEL") == []


# --- this machine's driver ---------------------------------------------------------------------


def test_this_machines_driver():
    """Where the driver has the extension, profile with it for real; else it says why not."""
    (ok, why), metrics = on_this_driver(INTEL)
    if not ok:
        assert why.startswith(f"{INTEL} not exposed by ")
        r = run_retrace("--pdrawcalls", f"{INTEL}: [1, 1]", str(TRACES / "glxgears.trace"))
        assert r.returncode == 0, r.stderr
        assert b"not available here" in r.stderr
        rows = [line for line in r.stdout.decode().splitlines() if line.startswith("call")]
        assert len(rows) == 20 and all(row.endswith("\t-") for row in rows)
        return
    first = metrics[0]
    r = run_retrace(
        "--pframes", f"{INTEL}: [{first.group}, {first.id}]", str(TRACES / "glxgears.trace")
    )
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.decode().splitlines() if line.startswith("frame")]
    assert len(rows) == 6 and all(row[1] != "-" for row in rows)
