"""Driver crashes, interruptions and kills lose nothing measured (issue 11, items 3 and 4).

The crash is real: a trace whose client vertex array points nowhere makes
llvmpipe read an unmapped address in glDrawArrays (glretrace dies of SIGSEGV on
the same file). Interruptions are real signals sent to the real CLI once its
stderr says pass 1 is complete; no timing is asserted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pty
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TRACES, run_retrace
from tracegen import TraceWriter, glx_context

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

SELECTION = (
    "--pframes", "opengl: Pixels Drawn",
    "--pcalls", "opengl: CPU Duration",
    "--pdrawcalls", "opengl: Pixels Drawn",
)  # fmt: skip
RUNS = 8  # per pass: pass 2 is still running when the test sees pass 1 end
TRACE = TRACES / "glmark2-desktop-fbo.trace"


def crashing_trace(path: Path) -> int:
    """Four frames with a triangle each, then a draw from a client array at an address the
    tracer did not capture; returns that draw's call number."""
    w = TraceWriter()
    glx_context(w)
    w.call(
        "glViewport",
        ("x", "y", "width", "height"),
        {i: w.int(v) for i, v in enumerate((0, 0, 64, 64))},
    )
    for _ in range(4):
        w.call("glClear", ("mask",), {0: w.int(0x4000)})
        w.call("glBegin", ("mode",), {0: w.int(4)})
        for x, y in ((-1, -1), (1, -1), (-1, 1)):
            w.call("glVertex2f", ("x", "y"), {0: w.float(x), 1: w.float(y)})
        w.call("glEnd")
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    w.call("glEnableClientState", ("array",), {0: w.int(0x8074)})  # GL_VERTEX_ARRAY
    w.call(
        "glVertexPointer",
        ("size", "type", "stride", "pointer"),
        {0: w.int(3), 1: w.int(0x1406), 2: w.int(0), 3: w.opaque(0x7F0000000)},
    )
    crash = w.call(
        "glDrawArrays", ("mode", "first", "count"), {0: w.int(4), 1: w.int(0), 2: w.int(3_000_000)}
    )
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return crash


def one_error_line(r: subprocess.CompletedProcess[bytes]) -> str:
    lines = [x for x in r.stderr.decode().splitlines() if x.startswith("retrace: error")]
    assert "Traceback" not in r.stderr.decode() and len(lines) == 1, r.stderr.decode()
    return lines[0]


def test_a_driver_crash_names_the_call_and_keeps_the_frames_before_it(tmp_path):
    trace = tmp_path / "crash.trace"
    call = crashing_trace(trace)
    r = run_retrace(
        "--pframes", "opengl: Pixels Drawn", "--pcalls", "opengl: CPU Duration", "--quiet",
        "--store-dir", str(tmp_path), str(trace),
    )  # fmt: skip
    assert r.returncode == 1
    assert one_error_line(r) == (
        f"retrace: error: driver crashed (SIGSEGV) at call {call} "
        "glDrawArrays(mode = 4, first = 0, count = 3000000)"
    )
    tables = read_tables(r.stdout.decode().splitlines())
    # frames are read a frame late: the three before the last one that ended have values
    pixels = list(tables[Boundary.FRAME].column("Pixels Drawn"))
    assert len(pixels) == 4 and all(p > 0 for p in pixels[:3]), pixels
    # call rows are kept up to the last time the first pass stored their metadata (at
    # frame ends, at most 0.1 s apart): here at least the first frame's
    calls = tables[Boundary.CALL]
    assert calls.names[:3] == ["glViewport", "glClear", "glBegin"] and calls.frames[2] == 0
    assert not math.isnan(calls.column("CPU Duration")[0])
    assert not list(tmp_path.glob("retrace-store-*"))  # replaying again would crash again


def test_plain_replay_names_the_crashing_call(tmp_path):
    trace = tmp_path / "crash.trace"
    call = crashing_trace(trace)
    r = run_retrace("replay", str(trace))
    assert r.returncode == 1
    assert f"driver crashed (SIGSEGV) at call {call} glDrawArrays(" in one_error_line(r)


def profile(*args: str) -> list[str]:
    return [sys.executable, "-m", "retrace", *SELECTION, "--repeat", str(RUNS), *args, str(TRACE)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("full") / "full.tsv"
    r = subprocess.run(profile("--quiet", "-o", str(out)), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out.read_text()


def interrupt_after_pass_1(tmp_path: Path, kill: Callable[[subprocess.Popen], None]):
    """Start a profile, wait for stderr to say pass 1 is complete, `kill` it; (exit status,
    stderr, the one store left in tmp_path/stores)."""
    stores = tmp_path / "stores"
    stores.mkdir()
    err = tmp_path / "stderr"
    with err.open("wb") as err_file:
        proc = subprocess.Popen(
            profile("--store-dir", str(stores), "-o", str(tmp_path / "partial.tsv")),
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            start_new_session=True,
        )
        try:
            done = f"pass 1 of 2 (run {RUNS} of {RUNS}) done"
            while done not in err.read_text():
                assert proc.poll() is None, err.read_text()
                time.sleep(0.02)
            kill(proc)
            status = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    (store,) = stores.iterdir()
    return status, err.read_text(), store


def shape(text: str) -> list[str]:
    """The tables without measured values: headers, row tags, call numbers, programs, names."""
    keep = {"call": 4, "frame": 1}
    return [
        "\t".join(line.split("\t")[: keep.get(line.split("\t")[0])])
        for line in text.splitlines()
        if not line.startswith("Rendered")
    ]


def pixels(text: str, boundary: Boundary) -> list[float | None]:
    values = read_tables(text.splitlines())[boundary].column("Pixels Drawn")
    return [None if math.isnan(v) else v for v in values]


def assert_resumes_to(uninterrupted: str, store: Path, tmp_path: Path, *options: str) -> None:
    out = tmp_path / "resumed.tsv"
    r = run_retrace("profile", "--resume", str(store), "--quiet", "-o", str(out), *options)
    assert r.returncode == 0, r.stderr
    resumed = out.read_text()
    assert shape(resumed) == shape(uninterrupted)
    for boundary in (Boundary.FRAME, Boundary.DRAWCALL):
        assert pixels(resumed, boundary) == pixels(uninterrupted, boundary)
    assert not store.exists()  # the tables are written: the store has done its job


@pytest.mark.parametrize(
    "number, to_group",
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_profile_keeps_pass_1_and_resumes(uninterrupted, tmp_path, number, to_group):
    def kill(proc: subprocess.Popen) -> None:
        (os.killpg if to_group else os.kill)(proc.pid, number)  # a terminal's Ctrl-C: the group

    status, err, store = interrupt_after_pass_1(tmp_path, kill)
    assert status == 128 + number and "Traceback" not in err, err
    last = err.splitlines()[-1]
    name = signal.Signals(number).name
    assert last == (
        f"retrace: interrupted by {name}: pass 1 of 2 complete; the cells of the rest read '-'; "
        f"resume with: retrace profile --resume {store}"
    )
    partial = (tmp_path / "partial.tsv").read_text()
    assert shape(partial) == shape(uninterrupted)
    assert pixels(partial, Boundary.FRAME) == pixels(uninterrupted, Boundary.FRAME)
    assert set(pixels(partial, Boundary.DRAWCALL)) == {None}  # pass 2's
    assert_resumes_to(uninterrupted, store, tmp_path)


def test_a_killed_profile_resumes(uninterrupted, tmp_path):
    def stop_then_kill(proc: subprocess.Popen) -> None:
        os.killpg(proc.pid, signal.SIGSTOP)  # still running, frozen: its store is in use
        (store,) = (tmp_path / "stores").iterdir()
        busy = run_retrace("profile", "--resume", str(store))
        assert busy.returncode == 1
        assert one_error_line(busy).endswith(" is in use by another retrace still running")
        os.killpg(proc.pid, signal.SIGKILL)

    status, _, store = interrupt_after_pass_1(tmp_path, stop_then_kill)
    assert status == -signal.SIGKILL
    assert_resumes_to(uninterrupted, store, tmp_path)


def test_an_interrupted_replay_says_so(tmp_path):
    err = tmp_path / "stderr"
    with err.open("wb") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrace", "replay", "--loop", "1000000000", str(TRACE)],
            stdout=subprocess.DEVNULL,
            stderr=err_file,
        )
        try:
            while "warning: --loop" not in err.read_text():  # the child is replaying
                assert proc.poll() is None, err.read_text()
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=120) == 130
        finally:
            proc.kill()
    assert err.read_text().splitlines()[-1] == "retrace: interrupted by SIGINT"


def test_resume_refuses_a_changed_trace_and_finishes_a_finished_store(tmp_path):
    trace = tmp_path / "gears.trace"
    shutil.copy(TRACES / "glxgears.trace", trace)
    first = run_retrace(
        "--pframes",
        "opengl: Pixels Drawn",
        "--quiet",
        "--keep-store",
        "--store-dir",
        str(tmp_path),
        str(trace),
    )
    assert first.returncode == 0, first.stderr
    (store,) = tmp_path.glob("retrace-store-*")
    again = run_retrace("profile", "--resume", str(store), "--keep-store")
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
    os.utime(trace, ns=(0, 0))
    refused = run_retrace("profile", "--resume", str(store))
    assert refused.returncode == 1
    assert one_error_line(refused).endswith(
        "(size or modification time differ): its passes would not line up; start a new profile"
    )
    usage = run_retrace("profile", "--resume", str(store), "--repeat", "2")
    assert usage.returncode == 2 and b"drop --repeat" in usage.stderr
    named = run_retrace("profile", "--resume", str(store), "--calls", "1-2", "--format", "csv")
    assert named.returncode == 2  # the flags as typed, not the parameters they fill
    assert one_error_line(named).endswith("drop --format, --calls")
    missing = run_retrace("profile", "--resume", str(tmp_path / "nothing"))  # usage: 2
    assert missing.returncode == 2 and "does not exist" in one_error_line(missing)
    (tmp_path / "empty").mkdir()
    empty = run_retrace("profile", "--resume", str(tmp_path / "empty"))  # no store in it: 1
    assert empty.returncode == 1 and "cannot read store manifest" in one_error_line(empty)


def test_an_interrupted_first_pass_keeps_its_ended_frames(tmp_path):
    """Ctrl-C in the first pass: the tables hold every frame that had ended (rows and
    values), as a crash there keeps them; the rest of the trace is missing, not '-'."""
    from gl.test_profile import big_trace

    trace = tmp_path / "big.trace"
    big_trace(trace, 400_000)  # 40 frames; per-call Python brackets make it take seconds
    out = tmp_path / "partial.tsv"
    selection = ["--pframes", "cpu: Wall Duration", "--pcalls", "cpu: Wall Duration"]
    master, slave = pty.openpty()  # the live progress line says when frames have ended
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrace", *selection, "-o", str(out), str(trace)],
        stdout=subprocess.DEVNULL, stderr=slave, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    try:
        while seen.count(b": frame ") < 2:  # drawn at the first frame end, then 0.2 s later
            seen += os.read(master, 4096)
        os.killpg(proc.pid, signal.SIGINT)
        status = proc.wait(timeout=120)
        with contextlib.suppress(OSError):
            while chunk := os.read(master, 4096):
                seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert status == 128 + signal.SIGINT
    (last,) = [line for line in seen.decode().splitlines() if "interrupted by" in line]
    assert last.startswith("\x1b[Kretrace: interrupted by SIGINT: the first pass had not")
    frames = int(last.split("hold its first ")[1].split()[0])
    assert 1 <= frames < 40, last
    tables = read_tables(out.read_text().splitlines())
    calls = tables[Boundary.CALL]
    assert len(tables[Boundary.FRAME]) == frames  # the frame in progress is not a row
    assert calls.frames_ended == frames and len(calls) >= frames * 10_000
    assert all(v > 0 for v in calls.column("Wall Duration")[: frames * 10_000])


GEARS = TRACES / "glxgears.trace"
REPEAT = 40  # runs: the profile is interrupted well before their end


CALL_METRICS = "opengl: CPU Start, CPU Duration, GPU Start, GPU Duration, VSIZE Start, RSS Start"


def interrupted_repeat(tmp_path: Path, *extra: str, to_file: bool = True) -> tuple[str, Path]:
    """A --repeat profile of glxgears' Pixels Drawn (and `extra` selections; its tables to
    out.tsv, or to stdout) interrupted (SIGINT to its group) once its checkpoint says 3
    runs are done; returns (stderr, its store)."""
    import json

    stores, err = tmp_path / "stores", tmp_path / "stderr"
    stores.mkdir()
    args = ["--pframes", "opengl: Pixels Drawn", *extra, "--repeat", str(REPEAT), "--stats"]
    out: list[str | Path] = ["-o", tmp_path / "out.tsv"] if to_file else []

    def runs_done() -> int:
        for manifest in stores.glob("*/manifest.json"):
            with contextlib.suppress(ValueError, OSError, KeyError):  # (not yet written)
                return json.loads(manifest.read_text())["meta"]["progress"]["run"]
        return 0

    with err.open("w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrace", *args, "--store-dir", stores, *out, GEARS],
            stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True,
        )  # fmt: skip
        try:
            while runs_done() < 3:
                assert proc.poll() is None, err.read_text()
                time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    text = err.read_text()
    assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in text, text
    (store,) = stores.iterdir()
    return text, store


def test_an_interrupted_repeat_writes_the_runs_it_finished(tmp_path):
    """Not a table of '-': the median and statistics of the runs done, every one of them in
    the .runs folder, a line saying how many; the store stays for --resume, which writes the
    whole repeat's tables."""
    err, store = interrupted_repeat(tmp_path)
    last = err.splitlines()[-1]
    done = int(last.split("pass 1 has ")[1].split()[0])
    assert done >= 3 and last == (
        f"retrace: interrupted by SIGINT: no pass of 1 complete, pass 1 has {done} of its "
        f"{REPEAT} replays (its columns hold the median of the {done} measured); the cells of "
        f"the rest read '-'; resume with: retrace profile --resume {store}"
    )
    once = run_retrace("--pframes", "opengl: Pixels Drawn", "--quiet", str(GEARS), check=True)
    expected = read_tables(once.stdout.decode().splitlines())[Boundary.FRAME]
    tables = read_tables((tmp_path / "out.tsv").read_text().splitlines())[Boundary.FRAME]
    assert tables.metrics == [f"Pixels Drawn{s}" for s in ("", " min", " p95", " stddev")]
    assert list(tables.column("Pixels Drawn")) == list(expected.column("Pixels Drawn"))
    assert list(tables.column("Pixels Drawn stddev")) == [0.0] * len(expected)
    runs = sorted((tmp_path / "out.tsv.runs").iterdir())
    assert len(runs) == done
    for run in runs:
        table = read_tables(run.read_text().splitlines())[Boundary.FRAME]
        assert list(table.column("Pixels Drawn")) == list(expected.column("Pixels Drawn"))
    resumed = tmp_path / "resumed.tsv"
    r = run_retrace("profile", "--resume", str(store), "--quiet", "-o", str(resumed))
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "resumed.tsv.runs").iterdir())) == REPEAT
    assert read_tables(resumed.read_text().splitlines())[Boundary.FRAME].column(
        "Pixels Drawn"
    ) == expected.column("Pixels Drawn")
    assert not store.exists()


def reader_gone(args: list, lines: int, stderr: int | None = None) -> int:
    """Run the CLI with stdout (and `stderr`) into a pipe whose reader reads `lines` lines
    and goes away, as `| head -N` does; returns the exit status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrace", *map(str, args)],
        stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for _ in range(lines):
            proc.stdout.readline()
        proc.stdout.close()
        return proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_closed_pipe_removes_a_temporary_store(tmp_path):
    """`retrace --pcalls ... TRACE | head -1`: the reader went away, as an interrupt; the
    store made for the run goes (tables of 300 KB: the pipe cannot hold them)."""
    stores = tmp_path / "stores"
    stores.mkdir()
    status = reader_gone(["--pcalls", CALL_METRICS, "--store-dir", stores, TRACE], 1)
    assert status == 128 + signal.SIGPIPE
    assert not list(stores.iterdir())


def test_a_resumed_store_stays_until_its_tables_are_written(tmp_path):
    """`retrace profile --resume STORE -o x.tsv 2>&1 | head -2`: the messages' reader went
    away, the tables still go to x.tsv, and only then the store; with the tables on a pipe
    closed before they come, the store the user named stays. (Closed before, not after a
    line: glxgears' tables are 30 KB, which a pipe holds whole, so a reader of one line may
    leave after they are written, and only the Rendered line meets the closed pipe.)"""
    _, store = interrupted_repeat(tmp_path, "--pcalls", CALL_METRICS, to_file=False)
    status = reader_gone(["profile", "--resume", store], 0)
    assert status == 128 + signal.SIGPIPE and store.exists()
    # (a store interrupted again: this one has measured everything, only its tables missing)
    shutil.rmtree(tmp_path / "stores")
    _, store = interrupted_repeat(tmp_path, "--pcalls", CALL_METRICS, to_file=False)
    out = tmp_path / "x.tsv"
    status = reader_gone(["profile", "--resume", store, "-o", out], 2, subprocess.STDOUT)
    assert status in (0, 128 + signal.SIGPIPE)  # (the Rendered line meets the closed pipe)
    tables = read_tables(out.read_text().splitlines())[Boundary.FRAME]
    assert len(tables) >= 5 and all(v == v for v in tables.column("Pixels Drawn"))
    assert len(list((tmp_path / "x.tsv.runs").iterdir())) == REPEAT
    assert not store.exists()


@pytest.mark.parametrize("command", [["replay", "-b"], ["--pframes", "opengl: GPU Duration"]])
def test_a_driver_crash_while_it_loads_is_one_line(tmp_path, command):
    """The driver loads in the replaying child alone (`driver_process`): an EGL vendor
    library that crashes when loaded ends retrace with one line and exit 1, not the shell's
    "Segmentation fault", and leaves no store behind."""
    source = tmp_path / "crash.c"
    source.write_text(
        "#include <signal.h>\n"
        "int __egl_Main(unsigned version, const void *exports, void *vendor, void *imports)\n"
        "{ raise(SIGSEGV); return 0; }\n"
    )
    library = tmp_path / "libEGL_crash.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    vendor = tmp_path / "crash.json"
    vendor.write_text(
        json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": str(library)}})
    )
    r = subprocess.run(
        [sys.executable, "-m", "retrace", *command, str(TRACE)],
        env={**os.environ, "__EGL_VENDOR_LIBRARY_FILENAMES": str(vendor)},
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert r.stderr.decode() == ("retrace: error: driver crashed (SIGSEGV) before the first call\n")
    assert not list(tmp_path.glob("retrace-store-*"))
