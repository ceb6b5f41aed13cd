"""`--perfetto FILE`: the timeline, parsed back with the perfetto package's own protobuf
classes and checked against the tables of the same run (tracks, nesting, timestamps,
args, counters). A real profile on llvmpipe."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import TRACES, run_retrace

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

TRACE = TRACES / "glxgears.trace"  # one context (glmark2 traces have a probe context too)
SELECTION = [
    "--pframes", "opengl: CPU Start, CPU Duration, GPU Start, GPU Duration, RSS Start",
    "--pcalls", "opengl: CPU Start, CPU Duration",
    "--pdrawcalls", "opengl: GPU Start, GPU Duration, Pixels Drawn",
]  # fmt: skip
BEGIN, END, COUNTER = 1, 2, 4


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict, list, dict]:
    folder = tmp_path_factory.mktemp("perfetto")
    out, timeline = folder / "run.tsv", folder / "run.pftrace"
    done = run_retrace(*SELECTION, "--quiet", "-o", str(out), "--perfetto", str(timeline),
                       str(TRACE))  # fmt: skip
    assert done.returncode == 0, done.stderr
    with out.open() as stream:
        tables = read_tables(stream)
    packets = list(pb.Trace.FromString(timeline.read_bytes()).packet)
    return tables, packets, json.loads(Path(f"{out}.json").read_text())


def slices(packets: list, track: int) -> list[dict]:
    """The track's slices with their depth, checking that every end closes an open slice
    and that children lie within their parents."""
    out: list[dict] = []
    stack: list[dict] = []
    last = -1
    for p in packets:
        if not p.HasField("track_event") or p.track_event.track_uuid != track:
            continue
        assert p.timestamp >= last, "time goes backwards on a track"
        last = p.timestamp
        event = p.track_event
        if event.type == BEGIN:
            args = {a.name: a.int_value if a.HasField("int_value") else a.double_value
                    for a in event.debug_annotations}  # fmt: skip
            entry = {"name": event.name, "begin": p.timestamp, "depth": len(stack), "args": args}
            stack.append(entry)
            out.append(entry)
        elif event.type == END:
            assert stack, "an end without a begin"
            entry = stack.pop()
            entry["end"] = p.timestamp
            if stack:
                assert stack[-1]["begin"] <= entry["begin"] <= entry["end"]
    assert not stack, "slices left open"
    for entry in out:  # children within their parents' ends too
        assert entry["end"] >= entry["begin"]
    return out


def test_tracks(run):
    _, packets, meta = run
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in packets
              if p.HasField("track_descriptor")}  # fmt: skip
    processes = [t for t in tracks.values() if t.HasField("process")]
    assert [p.process.process_name for p in processes] == [f"retrace {TRACE.name}"]
    threads = [t for t in tracks.values() if t.HasField("thread")]
    assert [t.thread.thread_name for t in threads] == ["replay (CPU)"]
    named = {t.name: t for t in tracks.values() if t.name}
    assert f"GPU {meta['gl']['renderer']}" in named
    counters = sorted(t.name for t in tracks.values() if t.HasField("counter"))
    assert counters == ["CPU Duration (ns)", "GPU Duration (ns)", "RSS Start (bytes)"]
    assert packets[0].HasField("track_descriptor")  # descriptors before events
    first_event = next(i for i, p in enumerate(packets) if p.HasField("track_event"))
    assert all(not p.HasField("track_descriptor") for p in packets[first_event:])


def test_cpu_track_nests_calls_in_frames(run):
    tables, packets, _ = run
    cpu = slices(packets, 2)
    frames = [s for s in cpu if s["depth"] == 0]
    calls = [s for s in cpu if s["depth"] == 1]
    assert all(s["depth"] <= 1 for s in cpu)
    table = tables[Boundary.CALL]
    assert [f["name"] for f in frames] == [f"frame {i}" for i in range(len(frames))]
    assert len(frames) == len(tables[Boundary.FRAME]) and len(calls) == len(table)
    assert [c["name"] for c in calls] == table.names
    assert [c["args"]["call_no"] for c in calls] == list(table.call_nos)
    assert [c["args"]["program"] for c in calls] == list(table.programs)
    starts = np.frombuffer(table.column("CPU Start"), np.float64)
    durations = np.frombuffer(table.column("CPU Duration"), np.float64)
    assert [c["args"]["CPU Duration"] for c in calls] == durations.tolist()
    # one pass measured them all: the slices are where the table says
    assert [c["begin"] for c in calls] == starts.astype(np.int64).tolist()
    assert [c["end"] - c["begin"] for c in calls] == durations.astype(np.int64).tolist()
    # draw calls' values ride on their call's slice
    draws = tables[Boundary.DRAWCALL]
    pixels = dict(zip(draws.call_nos, draws.column("Pixels Drawn"), strict=True))
    with_draws = [c for c in calls if "draw Pixels Drawn" in c["args"]]
    assert len(with_draws) == len(draws)
    assert all(c["args"]["draw Pixels Drawn"] == pixels[c["args"]["call_no"]] for c in with_draws)
    # each frame holds the calls of its frame
    frame_of = np.frombuffer(table.frames, np.int64)
    for frame, begin_end in enumerate(frames):
        inside = [c for c, f in zip(calls, frame_of, strict=True) if f == frame]
        assert all(begin_end["begin"] <= c["begin"] and c["end"] <= begin_end["end"]
                   for c in inside)  # fmt: skip


def test_gpu_track_and_counters(run):
    tables, packets, meta = run
    tracks = {p.track_descriptor.name: p.track_descriptor.uuid for p in packets
              if p.HasField("track_descriptor")}  # fmt: skip
    gpu = slices(packets, tracks[f"GPU {meta['gl']['renderer']}"])
    draws = tables[Boundary.DRAWCALL]
    on_gpu = [s for s in gpu if s["depth"] == 1]
    assert [s["name"] for s in on_gpu] == draws.names
    starts = np.frombuffer(draws.column("GPU Start"), np.float64).astype(np.int64)
    assert [s["args"]["GPU Duration"] for s in on_gpu] == list(draws.column("GPU Duration"))
    moved = sum(s["begin"] != t for s, t in zip(on_gpu, starts.tolist(), strict=True))
    assert moved == 0, f"{moved} GPU slices moved to nest"
    frames = tables[Boundary.FRAME]
    frame_starts = [s["begin"] for s in slices(packets, 2) if s["depth"] == 0]
    for name, metric in (("GPU Duration (ns)", "GPU Duration"), ("RSS Start (bytes)", "RSS Start")):
        values = [(p.timestamp, p.track_event.counter_value) for p in packets
                  if p.HasField("track_event") and p.track_event.type == COUNTER
                  and p.track_event.track_uuid == tracks[name]]  # fmt: skip
        assert [v for _, v in values] == list(frames.column(metric))
        assert [t for t, _ in values] == frame_starts


def test_default_selection_and_a_selection_without_the_timeline(tmp_path):
    timeline = tmp_path / "t.pftrace"
    done = run_retrace("--quiet", "--perfetto", str(timeline), str(TRACE))
    assert done.returncode == 0, done.stderr
    tables = read_tables(done.stdout.decode().splitlines(keepends=True))
    assert sorted(tables) == [Boundary.DRAWCALL, Boundary.FRAME]
    packets = list(pb.Trace.FromString(timeline.read_bytes()).packet)
    per_track = defaultdict(int)
    for p in packets:
        if p.HasField("track_event") and p.track_event.type == BEGIN:
            per_track[p.track_event.track_uuid] += 1
    frames = len(tables[Boundary.FRAME])
    assert per_track[2] == per_track[3] == frames + len(tables[Boundary.DRAWCALL])
    worked = sum(b > 0 for b in tables[Boundary.DRAWCALL].column("GPU Busy"))
    assert per_track[4] == worked > 0  # the GPU busy track
    # a selection without CPU Start: measured, with what the timeline needs (it was refused)
    for pframes, added in (("opengl: GPU Duration", "CPU Start, CPU Duration"),
                           ("opengl: CPU Duration", "CPU Start")):  # fmt: skip
        done = run_retrace("--quiet", "--pframes", pframes, "--pcalls", "opengl: GPU Duration",
                           "--perfetto", str(timeline), str(TRACE))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stderr.decode() == (
            'retrace: warning: --perfetto places slices by "opengl: CPU Start, CPU Duration": '
            f'the frames measure "opengl: {added}" too\n'
        )
        tables = read_tables(done.stdout.decode().splitlines(keepends=True))
        assert set(tables[Boundary.FRAME].metrics) == {"CPU Start", "CPU Duration"} | {
            pframes.removeprefix("opengl: ")
        }
        packets = list(pb.Trace.FromString(timeline.read_bytes()).packet)
        slices = [p for p in packets if p.HasField("track_event") and p.track_event.type == BEGIN]
        assert len(slices) >= len(tables[Boundary.FRAME])


def test_export_from_a_kept_profile(run, tmp_path):
    """`retrace export` from the TSV and its metadata writes what --perfetto wrote."""
    _tables, packets, meta = run
    again = tmp_path / "again.pftrace"
    done = run_retrace("export", meta["outputs"]["tables"], "--perfetto", str(again))
    assert done.returncode == 0, done.stderr
    assert again.read_bytes() == Path(meta["outputs"]["perfetto"]).read_bytes()
    done = run_retrace("export", str(tmp_path / "none.tsv"), "--perfetto", str(again))
    assert done.returncode == 2 and done.stderr.startswith(b"retrace: error: ")
    assert len(done.stderr.splitlines()) == 1


def test_without_the_package_one_line_before_measuring(tmp_path):
    """The extra not installed (its import fails): one line naming it, nothing measured."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['perfetto'] = None; from retrace.main import main; "
            "sys.argv = ['retrace', *sys.argv[1:]]; main()")  # fmt: skip
    timeline = tmp_path / "t.pftrace"
    done = subprocess.run([sys.executable, "-c", code, "--perfetto", str(timeline), str(TRACE)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1 and done.stdout == "" and not timeline.exists()
    assert done.stderr == (
        "retrace: error: --perfetto needs the perfetto package: "
        "pip install 'retrace-gl[perfetto]'\n"
    )


def test_a_cpu_and_a_gpu_track_per_context(tmp_path):
    """egl-two-threads: two threads, each with its own context, take turns frame by frame.
    Each context's tracks hold the calls apitrace's own dump says ran on its thread (after
    its eglMakeCurrent), nested in frame slices; the calls table is unchanged."""
    import re

    trace = TRACES / "egl-two-threads.trace"
    out, timeline = tmp_path / "two.tsv", tmp_path / "two.pftrace"
    cpu_gpu = "opengl: CPU Start, CPU Duration, GPU Start, GPU Duration"
    done = run_retrace("--pframes", cpu_gpu, "--pcalls", cpu_gpu, "--quiet", "-o", str(out),
                       "--perfetto", str(timeline), str(trace))  # fmt: skip
    assert done.returncode == 0, done.stderr
    tables = read_tables(out.read_text().splitlines(keepends=True))
    calls = tables[Boundary.CALL]
    # the oracle: apitrace's dump with thread ids; a thread's calls run in the context its
    # last eglMakeCurrent made current, numbered in the order contexts were first current
    context_of_thread: dict[str, str] = {}
    numbers: dict[str, int] = {}
    ran_in: dict[int, int] = {}
    dump = (TRACES / "expected" / "egl-two-threads.verbose-threads.dump").read_text()
    for line in dump.splitlines():
        call = re.match(r"(\d+) @(\d+) (\w+)\((.*)", line)
        if not call:
            continue
        no, thread, name, args = int(call[1]), call[2], call[3], call[4]
        if name == "eglMakeCurrent":
            context = re.search(r"ctx = (\w+)", args)[1]
            context_of_thread.pop(thread, None)
            if context != "NULL":
                context_of_thread[thread] = context
                numbers.setdefault(context, len(numbers) + 1)
        elif thread in context_of_thread:
            ran_in[no] = numbers[context_of_thread[thread]]
    assert sorted(set(ran_in.values())) == [1, 2]
    packets = list(pb.Trace.FromString(timeline.read_bytes()).packet)
    tracks = {p.track_descriptor.name: p.track_descriptor.uuid for p in packets
              if p.HasField("track_descriptor") and p.track_descriptor.name}  # fmt: skip
    metadata = json.loads(Path(f"{out}.json").read_text())
    assert metadata["contexts"]["names"] == ["context 1 (GLES 3.2)", "context 2 (GLES 3.2)"]
    table_rows = list(zip(calls.call_nos, calls.names, strict=True))
    seen = []
    for n in (1, 2):
        for clock in ("CPU", "GPU"):
            on_track = slices(packets, tracks[f"context {n} (GLES 3.2) {clock}"])
            frames = [s for s in on_track if s["depth"] == 0]
            nested = [s for s in on_track if s["depth"] == 1]
            assert frames and all(f["name"].startswith("frame ") for f in frames)
            expected = [(no, name) for no, name in table_rows if ran_in.get(no) == n]
            assert [(s["args"]["call_no"], s["name"]) for s in nested] == expected
            seen += [s["args"]["call_no"] for s in nested if clock == "CPU"]
    assert sorted(seen) == sorted(calls.call_nos)  # every call on one context's track
    frame_track = slices(packets, 2)  # the frames table's frames, with no calls in them
    assert [s["depth"] for s in frame_track] == [0] * len(
        read_tables(out.read_text().splitlines(keepends=True))[Boundary.FRAME]
    )
    again = tmp_path / "again.pftrace"  # export from the TSV and its metadata: the same file
    assert run_retrace("export", str(out), "--perfetto", str(again)).returncode == 0
    assert again.read_bytes() == timeline.read_bytes()


def test_gpu_busy_track_shows_the_work_and_the_gaps(tmp_path):
    out, timeline = tmp_path / "busy.tsv", tmp_path / "busy.pftrace"
    done = run_retrace(
        "--pframes", "opengl: CPU Start, CPU Duration, GPU Busy, GPU Idle",
        "--pcalls", "opengl: GPU Start, GPU Busy",
        "--quiet", "-o", str(out), "--perfetto", str(timeline), str(TRACE),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with out.open() as stream:
        calls = read_tables(stream)[Boundary.CALL]
    packets = list(pb.Trace.FromString(timeline.read_bytes()).packet)
    tracks = {p.track_descriptor.name: p.track_descriptor.uuid for p in packets
              if p.HasField("track_descriptor")}  # fmt: skip
    assert {"GPU Busy (ns)", "GPU Idle (ns)"} <= set(tracks)
    work = slices(packets, tracks["GPU busy"])
    busy = dict(zip(calls.call_nos, calls.column("GPU Busy"), strict=True))
    worked = [n for n, b in zip(calls.names, calls.column("GPU Busy"), strict=True) if b > 0]
    assert worked and [s["name"] for s in work] == worked  # glClear, glDrawArrays...
    assert all(s["depth"] == 0 for s in work)  # one after the other, the gaps between
    assert all(s["args"]["GPU Busy"] == busy[s["args"]["call_no"]] for s in work)
    pairs = zip(work, work[1:], strict=False)
    assert all(b["begin"] - a["end"] == b["args"]["idle before"] for a, b in pairs)
    assert sum(s["end"] - s["begin"] for s in work) == sum(busy.values())
