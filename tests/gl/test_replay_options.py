"""glretrace's replay options on real traces: frame ranges, loops, call sets, GL error reports."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from functools import partial

from conftest import TRACES, run_retrace
from tracegen import TraceWriter, glx_context, occlusion_query
from unit.test_replay_options import GEARS


def rendered(r) -> int:
    line = r.stdout.decode().strip().splitlines()[-1]
    assert line.startswith("Rendered "), line
    return int(line.split()[1])


def test_frames_range_limits_the_replay_and_its_count():
    assert rendered(run_retrace("replay", "-b", "--frames", "1-3", GEARS)) == 3
    assert rendered(run_retrace("replay", "-b", "--frames", "2", GEARS)) == 1
    md5 = run_retrace("replay", "-s", "-", "--snapshot-format=MD5", "--frames", "2-3", GEARS)
    every = run_retrace("replay", "-s", "-", "--snapshot-format=MD5", GEARS)
    assert md5.stdout.split() == every.stdout.split()[2:4]


def test_loop_replays_the_last_frame_and_counts_as_glretrace():
    """Rendered N frames counts the trace's frames and the loops', as glretrace does
    (tests/reference/test_replay.py compares them); with --frames A-B, frames A-B and the
    loops of frame B."""
    for form in (["--loop", "7"], ["--loop=7"]):
        r = run_retrace("replay", "-b", *form, GEARS)
        assert r.returncode == 0 and rendered(r) == 5 + 7
        assert b"--loop" in r.stderr  # the warning glretrace also gives
    assert rendered(run_retrace("replay", "-b", "--frames", "1-2", "--loop=3", GEARS)) == 2 + 3
    r = run_retrace("replay", "-b", "--loop=0", GEARS)  # glretrace's --loop=0: no loop
    assert rendered(r) == 5 and b"--loop" not in r.stderr


def test_a_bare_loop_or_a_negative_one_loops_until_interrupted():
    """glretrace's `--loop` and `--loop=-1` (N < 0: continuously), and click's `--loop -1`."""
    import os
    import signal

    for form in (["--loop"], ["--loop=-1"], ["--loop", "-1"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrace", "replay", "-b", *form, GEARS],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # said once the trace has replayed, as the loops begin
                if b"--loop replays the calls since the last frame end again" in line:
                    break
            else:
                raise AssertionError(f"ended without looping: {proc.wait(timeout=60)}")
            assert proc.poll() is None, proc.communicate()  # still looping
            os.killpg(proc.pid, signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 128 + signal.SIGINT, stderr


def test_calls_limit_what_is_replayed():
    # calls up to 1360 hold the display lists and the first frame's clear, not its draws
    every = run_retrace("replay", "-s", "-", "--snapshot-format=MD5", GEARS).stdout.split()
    some = run_retrace("replay", "-s", "-", "--snapshot-format=MD5", "--calls", "0-1360", GEARS)
    assert some.returncode == 0
    assert some.stdout.split() != every  # frames without their draws differ
    assert len(some.stdout.split()) == len(every)  # window-system calls still end the frames


def test_verbose_reports_gl_errors_per_call():
    # the piglit test calls glEnd where it is invalid, on purpose
    r = run_retrace("replay", "-v", str(TRACES / "piglit-dlist-beginend.trace"))
    assert r.returncode == 0
    errors = [line for line in r.stderr.decode().splitlines() if line[:1].isdigit()]
    assert errors and all(": glEnd: GL_INVALID_OPERATION" in e for e in errors)
    assert not run_retrace("replay", "-v", GEARS).stderr  # a clean trace reports nothing


def test_handles_into_the_traced_process_are_never_passed_on(tmp_path):
    """A debug callback or an EGLImage of the traced process would crash the driver if replayed."""
    w = TraceWriter()
    glx_context(w)
    w.call(
        "glDebugMessageCallback",
        ("callback", "userParam"),
        {0: w.opaque(0x7F1234567890), 1: w.opaque(0x55AA00001000)},
    )
    w.call(
        "glEGLImageTargetTexture2DOES",
        ("target", "image"),
        {0: w.int(0x0DE1), 1: w.opaque(0x55AA00002000)},
    )
    w.call(
        "glVertexPointer",
        ("size", "type", "stride", "pointer"),
        {0: w.int(3), 1: w.int(0x1406), 2: w.int(0), 3: w.opaque(0x7FFD00001000)},
    )
    w.call("glClear", ("mask",), {0: w.int(0x4000)})
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path = tmp_path / "foreign.trace"
    path.write_bytes(w.snappy())
    r = run_retrace("replay", "-b", str(path))
    assert r.returncode == 0 and rendered(r) == 1
    err = r.stderr.decode()
    assert "glEGLImageTargetTexture2DOES" in err and "glVertexPointer" in err
    assert "glDebugMessageCallback" not in err  # simply not replayed, like glretrace


def test_snapshot_folders_are_created(tmp_path):
    """`-s out/frame` creates out/ as glretrace does (docs/replay.md's command, fresh clone)."""
    r = run_retrace(
        "replay", "-s", str(tmp_path / "out" / "sub" / "f"), str(TRACES / "es2tri.trace")
    )
    assert r.returncode == 0 and [p.name for p in (tmp_path / "out" / "sub").iterdir()]


def test_unwritable_outputs_are_one_line_errors(tmp_path):
    (tmp_path / "file").write_text("")
    for args, message in (
        (["-s", str(tmp_path / "file" / "f")], f"{tmp_path}/file: File exists"),
        (["-s", "-", "--snapshot-format=MD5"], "No space left on device"),  # stdout is /dev/full
    ):
        with open("/dev/full", "wb") as full:
            r = subprocess.run(
                [sys.executable, "-m", "retrace", "replay", *args, str(TRACES / "es2tri.trace")],
                stdout=full,
                stderr=subprocess.PIPE,
                timeout=300,
            )
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and message in err, err


def test_draw_snapshots_skip_display_list_compilation_and_begin_end(tmp_path):
    """A draw compiled into a display list draws nothing, and a snapshot inside glBegin/glEnd
    would be a GL error: -S draw snapshots neither (glretrace snapshots glxgears' compiled
    glEnds, 18 identical black images)."""
    r = run_retrace("replay", "-s", str(tmp_path / "g"), "-S", "*/draw", GEARS)
    assert r.returncode == 0 and not r.stderr, r.stderr
    snapped = sorted(int(p.stem[1:]) for p in tmp_path.glob("g*.png"))
    dump = run_retrace("dump", GEARS).stdout.decode().splitlines()
    lists = [
        int(line.split()[0]) for line in dump if " glNewList(" in line or " glEndList(" in line
    ]
    assert len(snapped) == 20  # per frame: glClear and the 3 glCallLists
    assert all(n > max(lists) for n in snapped)
    # piglit's display-list test draws inside lists and begin/end blocks: no snapshot error
    r = run_retrace(
        "replay", "-s", "-", "--snapshot-format=MD5", "-S", "*/draw", "--strict",
        str(TRACES / "piglit-dlist-beginend.trace"),
    )  # fmt: skip
    assert r.returncode == 0 and not r.stderr and len(r.stdout.split()) == 12


def _counted(seen: list[str], compile_: Callable[..., object], name: str, args: list) -> object:
    seen.append(name)
    return compile_(name, args)


def test_a_programs_polls_of_its_query_compile_once_where_they_are_skipped(tmp_path):
    """A program polling its query's availability makes thousands of glGetQueryObject
    calls with the same values: skipped (the default), Python compiles the first and C
    the others, to nothing; run, each is an op of its own."""
    from retrace.replay.replayer import Replayer

    w = TraceWriter()
    glx_context(w)
    occlusion_query(w, 4)
    # (another thread's call first: the first poll compiles after a thread switch, an op
    # that is not the poll's)
    w.call(
        "glXMakeCurrent",
        ("dpy", "drawable", "ctx"),
        {1: w.int(0), 2: w.opaque(0)},
        ret=w.true,
        thread=1,
    )
    for available in [0] * 500 + [1]:  # GL_QUERY_RESULT_AVAILABLE: not yet, ..., yes
        w.call(
            "glGetQueryObjectiv",
            ("id", "pname", "params"),
            {0: w.int(4), 1: w.int(0x8867), 2: w.array(w.int(available))},
        )
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path = tmp_path / "polls.trace"
    path.write_bytes(w.snappy())
    # (the thread switch is an op of the first poll's: the only one, skipped)
    for how, compiled, ops in (("skip", 3, 1), ("run", 501, 502)):
        with Replayer(str(path)) as replayer:
            replayer.compiler.handle_queries(how)
            seen: list[str] = []
            replayer.compiler._query_result = partial(
                _counted, seen, replayer.compiler._query_result
            )
            assert replayer.run_pass().frames == 1
            program = replayer.program
            names = [program.names[i] for i in program.column("name_ids").tolist()]
        assert (len(seen), names.count("glGetQueryObjectiv")) == (compiled, ops), how


def test_query_handling_runs_and_checks_the_programs_own_results(tmp_path):
    occlusion = str(TRACES / "piglit-occlusion-query.trace")
    for how in ("run", "check"):  # the replay's results equal the trace's: 400, 0, 2600...
        r = run_retrace("replay", "-b", "--strict", "--query-handling", how, occlusion)
        assert r.returncode == 0 and not r.stderr, r.stderr
    w = TraceWriter()
    glx_context(w)
    occlusion_query(w, 4)
    w.call(  # GL_QUERY_RESULT: a count this replay cannot give (its window is 32x32)
        "glGetQueryObjectuiv",
        ("id", "pname", "params"),
        {0: w.int(4), 1: w.int(0x8866), 2: w.array(w.int(123456))},
    )
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path = tmp_path / "query.trace"
    path.write_bytes(w.snappy())
    assert run_retrace("replay", "-b", "--strict", str(path)).returncode == 0  # skip
    r = run_retrace("replay", "-b", "--strict", "--query-handling", "check", str(path))
    assert r.returncode == 3
    assert "1 query result(s) differ from the trace's (the first at call 7: " in r.stderr.decode()
    tolerant = ["--query-handling", "check", "--query-tolerance", "1000000", str(path)]
    assert run_retrace("replay", "-b", "--strict", *tolerant).returncode == 0
