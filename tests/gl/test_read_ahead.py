"""A first pass that reads the trace ahead on another thread (`retrace/trace/ahead.py`)
replays exactly what one that reads in turn does.

The real CLI replays and profiles, with the trace cache off (a first run reads the
trace), with reading ahead forced on and off (`RETRACE_READ_AHEAD`): real programs'
traces (the committed corpus cuts), a render-to-texture sample and a copy cut off mid-call,
and a generated trace of uploads through the data pool and fake memcpys, all read in
several batches. Compared: the snapshots' MD5s, tables whose values are deterministic on
llvmpipe (pixel counts, in two passes), stderr and the exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES
from tracegen import wrap_snappy

from gl.test_memory import uploads_trace
from retrace.replay.replayer import Replayer
from retrace.trace import cache
from retrace.trace.container import TraceStream

FBO = TRACES / "glmark2-desktop-fbo.trace"  # render to texture, 2.7 MB of events
SAMPLES = [*sorted((TRACES / "corpus").glob("*.trace")), FBO]


@pytest.fixture(scope="module")
def uploads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ahead") / "uploads.trace"
    uploads_trace(path, 6)
    return path


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FBO cut off in a call of its last frame: an error line after the frames before."""
    path = tmp_path_factory.mktemp("ahead") / "cut.trace"
    path.write_bytes(wrap_snappy(b"".join(TraceStream(str(FBO)))[:-1500]))
    return path


def retrace(ahead: str, *args: str | Path) -> tuple[int, str, str]:
    """The CLI, reading ahead or not: (exit status, stdout less timing, stderr)."""
    env = {**os.environ, "RETRACE_READ_AHEAD": ahead}
    done = subprocess.run(
        [sys.executable, "-m", "retrace", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    out = "".join(
        line for line in done.stdout.splitlines(keepends=True) if not line.startswith("Rendered")
    )
    return done.returncode, out, done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("replay", "-b", "-s", "-", "-S", "*/frame", "--snapshot-format", "MD5"),
        ("profile", "--quiet", "--pframes", "opengl: Pixels Drawn", "--pdrawcalls",
         "opengl: Pixels Drawn; pipeline: Fragment Shader Invocations"),
    ],
    ids=["replay", "profile"],
)  # fmt: skip
@pytest.mark.parametrize(
    "sample", [*SAMPLES, "uploads", "cut"], ids=lambda p: getattr(p, "stem", p)
)
def test_the_same_read_ahead_or_not(
    command: tuple[str, ...], sample: Path | str, request: pytest.FixtureRequest
) -> None:
    trace = request.getfixturevalue(sample) if isinstance(sample, str) else sample
    ahead = retrace("1", *command, "--no-cache", trace)
    assert ahead == retrace("0", *command, "--no-cache", trace)
    status, out, err = ahead
    if sample == "cut":
        assert status == 1 and out
        assert err.strip().splitlines()[-1].startswith(f"retrace: error: {trace} at byte ")
    else:
        assert status == 0 and len(out.splitlines()) >= 2, err


def first_pass(trace: Path, last_frame: int | None = None) -> Replayer:
    with cache.used(False), Replayer(str(trace)) as replayer:
        replayer.last_frame = last_frame
        replayer.run_pass()
        return replayer


def test_compiles_the_same_program_and_stops_reading_when_the_replay_stops(
    uploads: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same ops, in the same order, from batches read on another thread; a replay
    stopped early (--frames) stops that thread."""
    monkeypatch.setenv("RETRACE_READ_AHEAD", "0")
    alone = first_pass(uploads)
    monkeypatch.setenv("RETRACE_READ_AHEAD", "1")
    ahead = first_pass(uploads)
    read = ahead.reader.read_ahead
    assert read is not None and alone.reader.read_ahead is None
    assert read.busy > 0 and not read._thread.is_alive()
    assert ahead.frame == alone.frame == 6
    for column in ("call_nos", "name_ids", "rows", "checkable", "work"):
        assert ahead.program.column(column).tolist() == alone.program.column(column).tolist()
    assert ahead.program.names == alone.program.names

    stopped = first_pass(uploads, last_frame=1)
    assert stopped.frame == 2
    read = stopped.reader.read_ahead
    assert read is not None and not read._thread.is_alive()
    assert stopped.reader.calls_read < ahead.reader.calls_read


def test_a_later_pass_reads_nothing(uploads: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Multi-pass profiles compile once: the passes after the first run the program."""
    monkeypatch.setenv("RETRACE_READ_AHEAD", "1")
    with cache.used(False), Replayer(str(uploads)) as replayer:
        first = replayer.run_pass()
        read, calls, ops = (
            replayer.reader.read_ahead,
            replayer.reader.calls_read,
            len(replayer.program),
        )
        second = replayer.run_pass()
        assert replayer.reader.read_ahead is read and replayer.reader.calls_read == calls
        assert len(replayer.program) == ops
    assert first.frames == second.frames == 6
