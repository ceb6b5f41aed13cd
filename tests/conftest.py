"""Shared fixtures: the sample traces, and apitrace as the reference to compare with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
SAMPLE_TRACES = sorted(TRACES.glob("*.trace"))


def reference_tool(name: str) -> str:
    """Path of a reference tool (apitrace); skip where absent unless CI requires it."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("RETRACE_REQUIRE_REFERENCE"):
            pytest.fail(f"{name} is required by RETRACE_REQUIRE_REFERENCE but not installed")
        pytest.skip(f"{name} not installed (the reference tests need Debian's apitrace)")
    return path


def run_retrace(*args: str, check: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run the real CLI as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "retrace", *args], capture_output=True, check=check, timeout=600
    )


def apitrace_dump(path: Path | str, *args: str) -> bytes:
    exe = reference_tool("apitrace")
    return subprocess.run(
        [exe, "dump", "--color=never", *args, str(path)],
        capture_output=True,
        check=True,
        timeout=600,
    ).stdout


@pytest.fixture(scope="session")
def apitrace() -> str:
    return reference_tool("apitrace")


@pytest.fixture(scope="session")
def x_display():
    """A private Xvfb for glretrace (retrace itself needs none)."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        reference_tool("Xvfb")  # skips, or fails under RETRACE_REQUIRE_REFERENCE
    for number in range(91, 120):
        if not Path(f"/tmp/.X{number}-lock").exists():
            break
    proc = subprocess.Popen(
        [xvfb, f":{number}", "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f":{number}"
    proc.terminate()
    proc.wait(timeout=10)


def recorded_calls(path) -> Iterator[tuple[int, str, list, object]]:
    """(call no, name, args, return value) of every call, decoded as the replay compiler does."""
    from retrace.trace.model import NodeLists
    from retrace.trace.reader import TraceReader

    reader = TraceReader(path)
    sigs = reader.signatures
    for batch in reader.batches():
        nodes = NodeLists(batch)
        slots = batch.slots.tolist()
        for call in batch.calls.tolist():
            no, _, sig, _, _, start, _, first, nargs, ret, _, _ = call
            args = [
                nodes.value(start + s, sigs) if s >= 0 else None
                for s in slots[first : first + nargs]
            ]
            value = nodes.value(start + ret, sigs) if ret >= 0 else None
            yield no, sigs.functions[sig].name, args, value
