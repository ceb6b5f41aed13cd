"""The sample traces in traces/ -- real programs traced with Debian's apitrace --
dumped and summarised exactly as apitrace does."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import SAMPLE_TRACES, apitrace_dump, reference_tool, run_retrace

# apitrace 11.1 cannot read zstd; those variants must dump like the trace they were made from.
SOURCE_OF = {p: p.with_name(p.name.split(".")[0] + ".trace") for p in SAMPLE_TRACES}


@pytest.mark.parametrize("trace", SAMPLE_TRACES, ids=lambda p: p.name)
def test_dump_is_identical_to_apitrace(trace):
    got = run_retrace("dump", str(trace))
    expected = apitrace_dump(SOURCE_OF[trace])
    assert expected.count(b"\n") > 20
    assert got.returncode == 0, got.stderr
    assert got.stdout == expected
    if "interrupted" in trace.name:  # killed inside SwapBuffers: the call never returned
        assert got.stdout.endswith(b" // incomplete\n\n")


@pytest.mark.parametrize(
    "trace",
    [p for p in SAMPLE_TRACES if "thread" in p.name or "gears" in p.name],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("options", [["-v"], ["--calls", "10-40,100/frame"], ["--calls", "*/draw"]])
def test_dump_options_are_identical_to_apitrace(trace, options):
    assert run_retrace("dump", *options, str(trace)).stdout == apitrace_dump(trace, *options)


@pytest.mark.parametrize(
    "trace", [p for p in SAMPLE_TRACES if SOURCE_OF[p] == p], ids=lambda p: p.name
)
def test_info_has_apitrace_fields_and_values(trace):
    exe = reference_tool("apitrace")
    expected = json.loads(
        subprocess.run([exe, "info", str(trace)], capture_output=True, check=True).stdout
    )
    got = json.loads(run_retrace("info", str(trace)).stdout)
    assert {k: got[k] for k in expected} == expected
    assert got["CallCount"] > 0 and got["ThreadCount"] >= 1


def test_info_counts_threads_calls_and_functions():
    trace = next(p for p in SAMPLE_TRACES if p.name == "egl-two-threads.trace")
    info = json.loads(run_retrace("info", str(trace)).stdout)
    dump = apitrace_dump(trace, "-v")
    calls = [line for line in dump.decode().splitlines() if line[:1].isdigit()]
    assert info["CallCount"] == len(calls)
    assert info["ThreadCount"] == 2
    top = info["TopFunctions"][0]
    assert top["Calls"] == max(
        sum(1 for c in calls if c.split(" ", 1)[1].startswith(name + "("))
        for name in {c.split(" ", 1)[1].split("(")[0] for c in calls}
    )


@pytest.mark.parametrize(
    "name", ["glxgears.trace", "egl-two-threads.trace", "glmark2-desktop-fbo.trace"]
)
def test_info_frames_match_apitrace(name):
    """Per-frame call ranges as `apitrace info --dump-frames`; sizes are measured exactly here
    (apitrace rounds them to its read buffers), so they only have to add up."""
    trace = next(p for p in SAMPLE_TRACES if p.name == name)
    exe = reference_tool("apitrace")
    expected = json.loads(
        subprocess.run(
            [exe, "info", "--dump-frames", str(trace)], capture_output=True, check=True
        ).stdout
    )["Frames"]
    got = json.loads(run_retrace("info", "--dump-frames", str(trace)).stdout)
    keys = ("FirstCallId", "LastCallId", "TotalCalls")
    assert [{k: f[k] for k in keys} for f in got["Frames"]] == [
        {k: f[k] for k in keys} for f in expected
    ]
    assert sum(f["SizeInBytes"] for f in got["Frames"]) <= got["ActualDataSize"]
