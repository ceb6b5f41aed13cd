"""--sandbox on real traces: code run in the confined replay child (the probe, standing in
for an exploited flaw) cannot write outside the outputs, open a network socket or execute
a program; frames, profiles and batches are the same as unconfined; a kernel without
Landlock (simulated by a seccomp filter that fails its calls, as container runtimes do)
is refused in one line, or with best-effort warned about once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLE_TRACES, TRACES

from gl.test_crash_resume import (
    assert_resumes_to,
    interrupt_after_pass_1,
    uninterrupted,  # noqa: F401 - a fixture
)
from gl.test_window import display, x_server  # noqa: F401 - fixtures
from retrace.replay.sandbox import PROBE, landlock, seccomp

CORPUS_TRACES = sorted((TRACES / "corpus").glob("*.trace"))
GEARS = str(TRACES / "glxgears.trace")


@pytest.fixture(autouse=True, scope="module")
def kernel_sandbox() -> None:
    missing = seccomp.available()
    if missing is not None:
        pytest.skip(missing)
    try:
        landlock.abi()
    except OSError as e:
        pytest.skip(f"no Landlock here: {e.strerror}")


def retrace(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return python("-m", "retrace", *args, env=env)


def python(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """This Python, run with `args`; its stderr never holds a traceback."""
    done = subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def probed(stderr: str) -> dict[str, str]:
    """What the probe tried, and how it ended ("done", "refused (EACCES)")."""
    lines = [line for line in stderr.splitlines() if line.startswith("retrace: sandbox probe: ")]
    return dict(line.removeprefix("retrace: sandbox probe: ").split(": ", 1) for line in lines)


def test_the_confined_child_writes_its_outputs_and_nothing_else(tmp_path):
    outside = tmp_path / "outside.txt"
    shots = tmp_path / "shots"  # made by the replay, as glretrace makes it
    done = retrace("replay", "--sandbox", "-s", f"{shots}/frame", GEARS, env={PROBE: str(outside)})
    assert done.returncode == 0, done.stderr
    assert probed(done.stderr) == {
        f"write {outside}": "refused (EACCES)",
        "socket AF_INET": "refused (EPERM)",
        "execute /bin/true": "refused (EPERM)",
    }
    assert not outside.exists()
    assert len(list(shots.glob("frame*.png"))) == 5  # what it may write, it wrote


@pytest.mark.usefixtures("display")
def test_a_window_on_an_x_server_is_shown_confined(tmp_path):
    """--window needs AF_UNIX sockets (the X server's); still nothing else."""
    outside = tmp_path / "outside.txt"
    done = retrace("replay", "--window", "--sandbox", "-b", GEARS, env={PROBE: str(outside)})
    assert done.returncode == 0 and done.stdout.startswith("Rendered 5 frames"), done.stderr
    assert set(probed(done.stderr).values()) == {"refused (EACCES)", "refused (EPERM)"}
    assert len(probed(done.stderr)) == 3 and not outside.exists()


def test_without_sandbox_the_probe_does_not_run(tmp_path):
    done = retrace("replay", "-b", GEARS, env={PROBE: str(tmp_path / "x")})
    assert done.returncode == 0 and probed(done.stderr) == {}


def md5s(trace: Path, *options: str) -> tuple[int, str]:
    """The MD5 of every frame and of the framebuffer after every draw (piglit tests swap
    no frame)."""
    shots = ["-s", "-", "--snapshot-format=MD5", "-S", "*/frame,*/draw"]
    done = retrace("replay", *options, *shots, trace)
    return done.returncode, done.stdout


@pytest.mark.parametrize(
    "trace", SAMPLE_TRACES + CORPUS_TRACES, ids=lambda p: p.relative_to(TRACES).as_posix()
)
def test_frames_are_the_same_confined(trace):
    assert md5s(trace, "--sandbox") == md5s(trace)


def test_a_profile_writes_its_store_and_tables_confined(tmp_path):
    selection = ["--pframes", "opengl: Pixels Drawn", "--pdrawcalls", "opengl: Pixels Drawn"]
    store = tmp_path / "stores"
    store.mkdir()
    confined = retrace("--sandbox", *selection, "--store-dir", store, "--keep-store",
                       "-o", tmp_path / "confined.tsv", GEARS)  # fmt: skip
    assert confined.returncode == 0, confined.stderr
    plain = retrace(*selection, "-o", tmp_path / "plain.tsv", GEARS)
    assert plain.returncode == 0, plain.stderr
    assert (tmp_path / "confined.tsv").read_text() == (tmp_path / "plain.tsv").read_text()
    assert (tmp_path / "confined.tsv.json").exists()
    (kept,) = store.iterdir()
    assert (kept / "manifest.json").exists() and len(list(kept.glob("*.bin"))) > 2


def test_an_interrupted_profile_resumes_confined(uninterrupted, tmp_path):  # noqa: F811
    status, _, store = interrupt_after_pass_1(tmp_path, lambda p: p.send_signal(signal.SIGTERM))
    assert status == 128 + signal.SIGTERM
    assert_resumes_to(uninterrupted, store, tmp_path, "--sandbox")


def test_legacy_profile_writes_its_output_file_confined(tmp_path):
    confined = retrace("profile", "--sandbox", "--ppd", "-o", tmp_path / "c.txt", GEARS)
    assert confined.returncode == 0, confined.stderr
    plain = retrace("profile", "--ppd", "-o", tmp_path / "p.txt", GEARS)
    assert plain.returncode == 0, plain.stderr
    # the pixels of every draw call (not the closing line's frame rate)
    lines = [(tmp_path / n).read_text().splitlines()[:-1] for n in ("c.txt", "p.txt")]
    assert lines[0] == lines[1] and any(line.startswith("call ") for line in lines[0])


def test_list_metrics_and_gen_passes_confined():
    done = retrace("profile", "--sandbox", "--gen-passes", "--pframes", "opengl: GPU Duration",
                   GEARS)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    metrics = retrace("profile", "--sandbox", "--list-metrics", "--json", GEARS)
    assert metrics.returncode == 0 and "GPU Duration" in metrics.stdout


def test_a_batch_job_is_confined(tmp_path):
    pytest.importorskip("duckdb")
    outside = tmp_path / "outside.txt"
    gears_md5 = retrace("replay", "-s", "-", "--snapshot-format=MD5", GEARS).stdout.split()
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        f'[defaults]\npframes = "opengl: Pixels Drawn"\nsandbox = true\nretries = 0\n'
        f'env = {{ {PROBE} = "{outside}" }}\n\n'
        f'[[trace]]\npath = "{GEARS}"\nexpect = {{ md5 = {gears_md5!r} }}\n'.replace("'", '"')
    )
    cache = tmp_path / "cache"
    done = retrace("batch", manifest, "--db", tmp_path / "b.duckdb",
                   env={"RETRACE_CACHE_DIR": str(cache)})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 jobs: 0 already done, ran 1 (1 ok)" in done.stdout
    assert not outside.exists()
    assert (cache / "sandbox" / "mesa_shader_cache").is_dir()  # the children's own caches


# A kernel without Landlock, as a container runtime's seccomp profile makes one: its calls
# fail with ENOSYS, which is what a kernel built without it answers.
NO_LANDLOCK = """
import errno, os, sys
from retrace.replay.sandbox.seccomp import Rule, install
install([Rule(name, errno.ENOSYS) for name in sys.argv[1].split(",")])
os.execv(sys.executable, [sys.executable, "-m", "retrace", *sys.argv[2:]])
"""


def without(calls: str, *args: object, env: dict[str, str] | None = None):
    """`retrace ARGS` on a kernel whose `calls` fail with ENOSYS."""
    return python("-c", NO_LANDLOCK, calls, *args, env=env)


def test_a_kernel_without_landlock_is_refused():
    done = without("landlock_create_ruleset", "replay", "--sandbox", "-b", GEARS)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "retrace: error: --sandbox: this kernel has no Landlock (landlock_create_ruleset: "
        "Function not implemented); --sandbox=best-effort replays without Landlock"
    ]
    both = without("landlock_create_ruleset,seccomp", "--sandbox", "--pframes",
                   "opengl: GPU Duration", GEARS)  # fmt: skip
    assert both.returncode == 1 and len(both.stderr.splitlines()) == 1
    assert "no seccomp filters" in both.stderr and "without Landlock and seccomp" in both.stderr


def test_best_effort_warns_once_and_confines_with_what_there_is(tmp_path):
    outside = tmp_path / "outside.txt"
    done = without("landlock_create_ruleset", "replay", "--sandbox=best-effort", "-b", GEARS,
                   env={PROBE: str(outside)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Rendered 5 frames")
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "retrace: warning: --sandbox=best-effort: this kernel has no Landlock "
        "(landlock_create_ruleset: Function not implemented): the replay runs without Landlock"
    ]
    assert probed(done.stderr) == {
        f"write {outside}": "done",  # nothing confines the file system here
        "socket AF_INET": "refused (EPERM)",
        "execute /bin/true": "refused (EPERM)",
    }
