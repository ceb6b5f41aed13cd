"""The gates a CI job runs unattended (issue 32): `retrace batch` (a manifest, a Mesa traces
description file) and `retrace compare` must never call a failing build good, and must
work from wherever a CI script runs them. Each test is one way they did not: the real CLI
on real traces on llvmpipe, results read back from what it writes.
"""

from __future__ import annotations

import bz2
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("ruamel.yaml")

DEVICE = "gl-vmware-llvmpipe"
ES2GEARS = "35e6c4afa9784bd1099ce6c8699994e3"  # its last frame on llvmpipe, as piglit sums it
WRONG = "0123456789abcdef0123456789abcdef"
# the installed program, as a user starts it (not `python -m`, which imports from the cwd)
RETRACE = str(Path(sys.executable).with_name("retrace"))


def retrace(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None):
    done = subprocess.run(
        [RETRACE, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def ci(tmp_path) -> Path:
    """A folder holding a traces folder (es2gears) and its description file."""
    (tmp_path / "db" / "demo").mkdir(parents=True)
    shutil.copy(TRACES / "es2gears.trace", tmp_path / "db" / "demo")
    return tmp_path


@pytest.fixture
def clone(ci) -> Path:
    """The folder a clone of retrace sits in: `retrace/`, with no __init__.py on top."""
    (ci / "retrace" / "retrace").mkdir(parents=True)
    return ci


def describe(folder: Path, checksum: str, device: str = DEVICE) -> Path:
    path = folder / "traces.yml"
    path.write_text(
        f"%YAML 1.2\n---\ntraces:\n  demo/es2gears.trace:\n    {device}:\n"
        f"      checksum: {checksum}\n"
    )
    return path


def mesa(folder: Path, *args: object, env: dict[str, str] | None = None):
    """`retrace batch traces.yml --device DEVICE` in `folder`, its results there."""
    return retrace("batch", "traces.yml", "--device", DEVICE, "--db-path", "db", "--db",
                   "c.duckdb", "--junit", "j.xml", *args, cwd=folder, env=env)  # fmt: skip


def piglit_result(folder: Path) -> str:
    tests = json.loads(bz2.decompress((folder / "results" / "results.json.bz2").read_bytes()))
    return tests["tests"][f"trace@{DEVICE}@demo@es2gears.trace"]["result"]


def test_a_rerun_after_a_mismatch_fails_again(ci):
    describe(ci, WRONG)
    first = mesa(ci)
    assert first.returncode == 1 and piglit_result(ci) == "fail", first.stderr
    again = mesa(ci)
    assert again.returncode == 1, again.stdout
    assert "1 jobs: 1 already done (1 mismatch), ran 0 (none)" in again.stdout
    assert f"mismatch (recorded earlier, reused): checksum {ES2GEARS}" in again.stderr
    assert piglit_result(ci) == "fail" and 'failures="1"' in (ci / "j.xml").read_text()
    with duckdb.connect(str(ci / "c.duckdb"), read_only=True) as con:
        failed = con.execute("SELECT failed FROM batches ORDER BY finished").fetchall()
    assert failed == [(1,), (1,)]


def test_a_changed_driver_is_measured_again(ci):
    """The driver as the environment selects it (GALLIUM_DRIVER) and as the files it is (a
    rebuilt driver in place: the same path, another modification time)."""
    dri = ci / "dri"
    dri.mkdir()
    shutil.copy("/usr/lib/x86_64-linux-gnu/dri/swrast_dri.so", dri)
    env = {"LIBGL_DRIVERS_PATH": str(dri)}
    describe(ci, ES2GEARS)
    assert mesa(ci, env=env).returncode == 0
    same = mesa(ci, env=env)
    assert same.returncode == 0 and "1 already done (1 ok), ran 0" in same.stdout
    os.utime(dri / "swrast_dri.so")  # rebuilt
    rebuilt = mesa(ci, env=env)
    assert "measured again: the driver changed (swrast_dri.so)" in rebuilt.stderr
    assert rebuilt.returncode == 0 and "0 already done, ran 1 (1 ok)" in rebuilt.stdout
    assert piglit_result(ci) == "pass"
    softpipe = mesa(ci, env={**env, "GALLIUM_DRIVER": "softpipe"})
    assert "measured again: the driver changed (GALLIUM_DRIVER, GL_RENDERER" in softpipe.stderr
    assert softpipe.returncode == 1 and "ran 1 (1 mismatch)" in softpipe.stdout
    assert piglit_result(ci) == "fail"


@pytest.mark.parametrize("warm", ["--warm", "--no-warm"])
def test_batch_runs_from_a_folder_holding_a_clone(clone, warm):
    ci = clone
    describe(ci, ES2GEARS)
    done = mesa(ci, warm)
    assert done.returncode == 0 and "ran 1 (1 ok)" in done.stdout, done.stderr
    manifest = ci / "m.toml"
    manifest.write_text(
        '[defaults]\npframes = "opengl: Pixels Drawn"\n[[trace]]\npath = "db/demo/es2gears.trace"\n'
    )
    done = retrace("batch", manifest, "--db", "m.duckdb", warm, cwd=ci)
    assert done.returncode == 0 and "ran 1 (1 ok)" in done.stdout, done.stderr


@pytest.mark.parametrize("warm", ["--warm", "--no-warm"])
def test_compare_runs_from_a_folder_holding_a_clone(clone, warm):
    runs = ["--warmup", "0", "--min-runs", "4", "--max-runs", "4"]
    trace, counts = "db/demo/es2gears.trace", ["--pframes", "opengl: Pixels Drawn"]
    done = retrace("compare", trace, *runs, *counts, warm, cwd=clone)
    assert done.returncode == 0 and done.stdout.startswith("base: 4 runs"), done.stderr


def test_a_device_no_trace_lists_is_an_error(ci):
    describe(ci, ES2GEARS, device="gl-zink-anv-tgl")
    (ci / "traces.yml").write_text(
        (ci / "traces.yml").read_text()
        + f"  demo/other.trace:\n    {DEVICE}:\n      label: [skip]\n"
    )
    done = retrace("batch", "traces.yml", "--device", "gl-vmware-llvmpip", cwd=ci)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "retrace: error: traces.yml: no trace lists the device 'gl-vmware-llvmpip'; did you mean "
        f"'{DEVICE}'? the file's devices: gl-vmware-llvmpipe, gl-zink-anv-tgl\n"
    )
    assert not (ci / "results").exists()


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=900, env={**os.environ, **who})  # fmt: skip


@pytest.fixture
def history(tmp_path) -> tuple[Path, list[str]]:
    """A repository whose "build" is the driver its file `driver` names: llvmpipe in its
    first two commits, softpipe (many times slower) from the third on."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commits = []
    for driver in ("llvmpipe", "llvmpipe", "softpipe", "softpipe"):
        (repo / "driver").write_text(driver + "\n")
        git(repo, "add", "driver")
        git(repo, "commit", "-q", "--allow-empty", "-m", driver)
        commits.append(git(repo, "rev-parse", "HEAD").stdout.strip())
    return repo, commits


def bisect(repo: Path, commits: list[str], *options: str) -> subprocess.CompletedProcess[str]:
    """`git bisect run` of `retrace compare` between the first and last commits."""
    script = repo.parent / "check.sh"
    script.write_text(
        f"#!/bin/sh\nexec {RETRACE} compare {TRACES / 'glmark2-desktop-fbo.trace'} "
        '--base GALLIUM_DRIVER=llvmpipe --new GALLIUM_DRIVER="$(cat driver)" --warmup 0 '
        f"--min-runs 4 --max-runs 4 {' '.join(options)}\n"
    )
    script.chmod(0o755)
    git(repo, "bisect", "start", commits[-1], commits[0])
    return git(repo, "bisect", "run", str(script))


def test_git_bisect_run_finds_the_first_slow_commit(history):
    repo, commits = history
    done = bisect(repo, commits, "--threshold", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{commits[2]} is the first bad commit" in done.stdout


def test_git_bisect_run_stops_on_a_typo_in_the_script(history):
    repo, commits = history
    done = bisect(repo, commits, "--threshhold", "0.5")
    assert done.returncode != 0 and "is the first bad commit" not in done.stdout
    assert "bisect run failed" in done.stdout + done.stderr
    assert "exit code 128" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "Cycles"], "no table has a metric 'Cycles'"),
        (["--keep", "/etc/hostname/keep"], "/etc/hostname/keep: Not a directory"),
        (["--bogus"], "No such option '--bogus'"),
    ],
)
def test_a_mistake_stops_a_bisection(args, message):
    """Not a regression (1), not an untestable build (125): exit 128, git's "stop" (a misspelt
    profile metric: tests/gl/test_compare.py)."""
    done = retrace("compare", TRACES / "es2tri.trace", "--warmup", "0", "--min-runs", "4",
                   "--max-runs", "4", *args)  # fmt: skip
    assert done.returncode == 128 and done.stdout == ""
    *progress, error = done.stderr.splitlines()  # (--metric is judged once both sides ran)
    assert error.startswith("retrace: error: ") and message in error, done.stderr
    assert all(line.startswith("retrace compare: ") for line in progress)


def test_a_damaged_or_cut_trace_stops_a_bisection(tmp_path):
    whole = (TRACES / "glmark2-desktop-fbo.trace").read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(whole[: len(whole) * 4 // 5])
    done = retrace("compare", cut)
    assert done.returncode == 128 and done.stdout == ""
    assert done.stderr.startswith(f"retrace: error: {cut} at byte ") and "ends inside" in (
        done.stderr
    )


def test_update_checksums_adds_a_trace_the_way_mesa_documents(ci):
    """A new trace's device with no fields, and a checksum of zeros: both measured, the
    zeros shown as written (not as the number 0), the file updated, the rerun green."""
    shutil.copy(TRACES / "es2gears.trace", ci / "db" / "demo" / "zeros.trace")
    path = describe(ci, "")
    text = f"{path.read_text()}  demo/zeros.trace:\n    {DEVICE}:\n      checksum: {'0' * 32}\n"
    path.write_text(text.replace("      checksum: \n", ""))
    done = mesa(ci, "--update-checksums")
    assert done.returncode == 1, done.stderr  # (it failed before the update)
    assert f"checksum {ES2GEARS}, expected none given" in done.stderr
    assert f"checksum {ES2GEARS}, expected {'0' * 32}" in done.stderr
    assert f"2 checksum(s) of {DEVICE} updated" in done.stderr
    tests = json.loads(bz2.decompress((ci / "results" / "results.json.bz2").read_bytes()))
    zeros = tests["tests"][f"trace@{DEVICE}@demo@zeros.trace"]["images"][0]
    assert zeros["image_ref"] == f"{'0' * 32}.png"
    assert path.read_text().count(f'checksum: "{ES2GEARS}"') == 2
    again = mesa(ci)
    assert again.returncode == 0 and "ran 2 (2 ok)" in again.stdout, again.stderr


def test_a_warm_worker_that_cannot_start_fails_the_jobs_not_the_batch(tmp_path):
    """A job environment Python cannot start in: the jobs fail, the batch says so and exits
    1 (it ended in a broken pipe, 141, with no summary)."""
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        f'[[trace]]\npath = "{TRACES / "es2tri.trace"}"\npframes = "opengl: GPU Duration"\n'
    )
    done = retrace("batch", manifest, "--db", tmp_path / "m.duckdb", "--env",
                   "PYTHONHOME=/nonexistent")  # fmt: skip
    assert done.returncode == 1 and "1 jobs: 0 already done, ran 1 (1 failed)" in done.stdout


def test_a_bug_in_compare_stops_a_bisection(monkeypatch):
    """A bug in retrace is no build's fault: 128, not the 70 of other commands' bugs, which
    `git bisect run` would read as "bad"; the one line names it a bug."""
    from retrace.compare import alternate
    from retrace.compare.command import compare_main
    from retrace.errors import RetraceError
    from retrace.exits import DEBUG

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.delenv(DEBUG, raising=False)
    monkeypatch.setattr(alternate, "alternate", broken)
    with pytest.raises(RetraceError) as raised:
        compare_main([str(TRACES / "es2tri.trace")])
    assert raised.value.exit_code == 128
    assert f"{raised.value.prefix}{raised.value}".startswith(
        "internal error: ZeroDivisionError: division by zero (a bug in retrace"
    )
