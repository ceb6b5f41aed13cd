"""`retrace batch traces-*.yml --device NAME` (issue 22): Mesa's trace CI run by retrace on
llvmpipe, the real CLI on real traces, results read back from what it writes (piglit's
results.json.bz2, the images, the DuckDB database). The checksums are compared with
piglit's own replayer in tests/reference/test_mesa_ci.py.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES

from gl.test_crash_resume import crashing_trace

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("ruamel.yaml")

DEVICE = "gl-vmware-llvmpipe"
SAMPLE = TRACES / "traces-llvmpipe.yml"
ES2GEARS = "35e6c4afa9784bd1099ce6c8699994e3"  # its last frame (call 225), as piglit sums it


def batch(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrace", "batch", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def results(folder: Path) -> dict[str, dict]:
    return json.loads(bz2.decompress((folder / "results.json.bz2").read_bytes()))["tests"]


def piglit_checksum(png: Path) -> str:
    from PIL import Image

    with Image.open(png) as image:
        return hashlib.md5(image.tobytes()).hexdigest()


def test_the_sample_file_passes_on_llvmpipe(tmp_path):
    """traces/traces-llvmpipe.yml holds the real llvmpipe checksums of the sample and corpus
    traces: every trace with a frame passes, those without are skipped by their label."""
    out = tmp_path / "results"
    done = batch(SAMPLE, "--device", DEVICE, "--db-path", TRACES, "-o", out,
                 "--db", tmp_path / "r.duckdb", "--jobs", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    tests = results(out)
    outcomes = {name: t["result"] for name, t in tests.items()}
    assert set(outcomes.values()) == {"pass"} and len(outcomes) == 24
    assert outcomes[f"trace@{DEVICE}@corpus@qt6-qml.trace"] == "pass"
    es2gears = tests[f"trace@{DEVICE}@es2gears.trace"]["images"][0]
    assert es2gears["checksum_render"] == ES2GEARS and es2gears["image_ref"] == f"{ES2GEARS}.png"
    assert not list(out.rglob("*.png"))  # images are kept only where a trace fails
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        frames = con.execute(
            "SELECT count(*) FROM measurements WHERE trace = 'es2gears.trace' AND tbl = 'frames' "
            "AND metric = 'GPU Duration'"
        ).fetchone()[0]
        assert frames == 6  # its frame times are kept (5 frames and the calls after the last)
        assert con.execute(
            "SELECT call_no, checksum, expected FROM last_frame WHERE trace = 'es2gears.trace'"
        ).fetchall() == [(225, ES2GEARS, ES2GEARS)]
        # traces a label skips are no tests in piglit's results, but skipped jobs here
        assert con.execute(
            "SELECT status, reason FROM runs WHERE trace = 'piglit-sync-api.trace'"
        ).fetchall() == [("skip", "label skip: no frame-ending call, so no last frame to check "
                          "(piglit replays none)")]  # fmt: skip


@pytest.fixture
def db(tmp_path) -> Path:
    """A traces folder (piglit's --db-path) with two traces in a subfolder."""
    folder = tmp_path / "replayer-db"
    (folder / "demo").mkdir(parents=True)
    for name in ("es2gears.trace", "glxgears.trace"):
        shutil.copy(TRACES / name, folder / "demo" / name)
    return folder


def description(tmp_path: Path, es2gears: str, url: str = "") -> Path:
    head = f'traces-db:\n  download-url: "{url}"\n' if url else ""
    path = tmp_path / "traces.yml"
    path.write_text(
        f"%YAML 1.2\n---\n{head}traces:\n"
        f"  demo/es2gears.trace:\n    {DEVICE}:\n      checksum: {es2gears}  # frame 4\n"
        f"  demo/glxgears.trace:\n    {DEVICE}:\n      label: [skip, slow]\n"
        f"  demo/other.rdc:\n    {DEVICE}:\n      checksum: 0\n"
    )
    return path


def test_a_failing_trace_keeps_its_image_and_a_difference(tmp_path, db):
    out = tmp_path / "results"
    images = out / "trace" / DEVICE / "demo"
    wrong = "0123456789abcdef0123456789abcdef"
    # an image of the expected checksum at hand (as `--keep-image` leaves one)
    images.mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (300, 300), (255, 0, 0)).save(images / f"{wrong}.png")
    done = batch(description(tmp_path, wrong), "--device", DEVICE, "--db-path", db, "-o", out,
                 "--db", tmp_path / "r.duckdb", "--junit", tmp_path / "j.xml")  # fmt: skip
    assert done.returncode == 1
    assert f"demo/es2gears.trace run 0: mismatch: checksum {ES2GEARS}, expected {wrong}" in (
        done.stderr
    )
    kept = images / f"es2gears.trace-0000000225-{ES2GEARS}.png"
    assert piglit_checksum(kept) == ES2GEARS  # the file is what the checksum is of
    difference = images / "es2gears.trace-0000000225-diff.png"
    assert difference.is_file()
    tests = results(out)
    es2gears = tests[f"trace@{DEVICE}@demo@es2gears.trace"]
    assert es2gears["result"] == "fail"
    assert es2gears["images"][0]["image_render"] == str(kept)
    assert f"trace@{DEVICE}@demo@glxgears.trace" not in tests  # skipped by its label
    assert tests[f"trace@{DEVICE}@demo@other.rdc"]["result"] == "skip"
    assert "not an apitrace trace (RenderDoc)" in tests[f"trace@{DEVICE}@demo@other.rdc"]["err"]
    junit = (tmp_path / "j.xml").read_text()
    assert 'failures="1"' in junit and 'skipped="2"' in junit


def test_piglit_environment_and_update_checksums(tmp_path, db):
    path = description(tmp_path, "0123456789abcdef0123456789abcdef")
    before = path.read_text()
    env = {
        "PIGLIT_REPLAY_DESCRIPTION_FILE": str(path),
        "PIGLIT_REPLAY_DEVICE_NAME": DEVICE,
        "PIGLIT_REPLAY_EXTRA_ARGS": f"--db-path {db} --keep-image",
    }
    done = batch("--update-checksums", "-o", tmp_path / "out", "--db", tmp_path / "r.duckdb",
                 env=env)  # fmt: skip
    assert done.returncode == 1, done.stderr  # it failed before the update
    after = path.read_text()
    assert after == before.replace("0123456789abcdef0123456789abcdef", ES2GEARS)
    assert f"1 checksum(s) of {DEVICE} updated in {path}" in done.stderr
    again = batch("-o", tmp_path / "out2", "--db", tmp_path / "r2.duckdb", env=env)
    assert again.returncode == 0, again.stderr
    # --keep-image (from the extra args) keeps a passing image too
    assert list((tmp_path / "out2").rglob(f"es2gears.trace-0000000225-{ES2GEARS}.png"))


def test_download_from_the_files_url(tmp_path, db):
    target = tmp_path / "fetched"
    path = description(tmp_path, ES2GEARS, url=f"file://{db}/")
    done = batch(path, "--device", DEVICE, "--db-path", target, "--download", "-o", tmp_path / "o",
                 "--db", tmp_path / "r.duckdb")  # fmt: skip
    assert done.returncode == 0, done.stderr
    fetched = (target / "demo" / "es2gears.trace").read_bytes()
    assert fetched == (TRACES / "es2gears.trace").read_bytes()
    assert not (target / "demo" / "glxgears.trace").exists()  # skipped: not fetched


def test_an_unreachable_url_is_one_line_per_trace_and_the_rest_runs(tmp_path, db):
    path = tmp_path / "traces.yml"
    path.write_text(
        'traces-db:\n  download-url: "file:///nonexistent/traces/"\ntraces:\n'
        f"  - path: demo/es2gears.trace\n    expectations:\n"
        f"      - device: {DEVICE}\n        checksum: {ES2GEARS}\n"
        f"  - path: demo/missing.trace\n    expectations:\n"
        f"      - device: {DEVICE}\n        checksum: {ES2GEARS}\n"
    )
    done = batch(path, "--device", DEVICE, "--db-path", db, "--download", "-o", tmp_path / "o",
                 "--db", tmp_path / "r.duckdb")  # fmt: skip
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "missing.trace" in line]
    assert lines == [
        "retrace batch: demo/missing.trace run 0: failed: cannot download "
        "file:///nonexistent/traces/demo/missing.trace: [Errno 2] No such file or directory: "
        "'/nonexistent/traces/demo/missing.trace'"
    ]
    tests = results(tmp_path / "o")
    assert tests[f"trace@{DEVICE}@demo@es2gears.trace"]["result"] == "pass"
    assert tests[f"trace@{DEVICE}@demo@missing.trace"]["result"] == "crash"


def test_a_performance_run_loops_the_last_frame(tmp_path, db):
    """As Mesa's performance jobs ask piglit for one: PIGLIT_REPLAY_SUBCOMMAND=profile."""
    path = description(tmp_path, ES2GEARS)
    out = tmp_path / "o"
    env = {"PIGLIT_REPLAY_SUBCOMMAND": "profile", "PIGLIT_REPLAY_LOOP_TIMES": "4"}
    done = batch(path, "--device", DEVICE, "--db-path", db, "--warmup", 1, "-o", out,
                 "--db", tmp_path / "r.duckdb", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    image = results(out)[f"trace@{DEVICE}@demo@es2gears.trace"]["images"][0]
    times, busy = image["frame_times"], image["frame_busy_times"]
    assert len(times) == 4 and all(isinstance(t, int) and t > 0 for t in times)
    assert len(busy) == 4 and all(
        isinstance(b, int) and 0 < b <= t for b, t in zip(busy, times, strict=True)
    )
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM last_frame").fetchone()[0] == 0
        settings = con.execute(
            "SELECT settings FROM runs WHERE trace = 'demo/es2gears.trace'"
        ).fetchone()[0]
    assert '"--loop", "4"' in settings and '"--warmup", "1"' in settings


def test_options_of_a_description_file_are_refused_for_a_toml_manifest(tmp_path):
    done = batch(TRACES / "batch.toml", "--device", DEVICE, "--db", tmp_path / "r.duckdb")
    assert done.returncode == 2
    assert done.stderr == (
        f"retrace: error: --device is for a traces description file (.yml), not "
        f"{TRACES / 'batch.toml'}\n"
    )


def test_performance_runs_of_two_builds_get_a_verdict_per_trace(tmp_path):
    """Two performance runs into one database, llvmpipe and softpipe (10 to 20 times slower
    on glmark2's frames, hence the one timing assertion: a regression at a 50% threshold),
    then `retrace diff`."""
    path = tmp_path / "perf.yml"
    path.write_text(f"traces:\n  glmark2-desktop-fbo.trace:\n    {DEVICE}:\n      checksum: x\n")
    database = tmp_path / "perf.duckdb"
    for build in ("llvmpipe", "softpipe"):
        done = batch(path, "--device", DEVICE, "--db-path", TRACES, "--loop", 5, "--runs", 4,
                     "--build", build, "--env", f"GALLIUM_DRIVER={build}", "-o", tmp_path / build,
                     "--db", database)  # fmt: skip
        assert done.returncode == 0, done.stderr
    diff = subprocess.run(
        [sys.executable, "-m", "retrace", "diff", f"{database}:llvmpipe", f"{database}:softpipe",
         "--threshold", "0.5", "--startup-frames", "0", "--format", "json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert diff.returncode == 1, diff.stdout
    report = json.loads(diff.stdout)
    verdicts = {t["trace"]: t["verdict"] for t in report["traces"]}
    assert verdicts == {"glmark2-desktop-fbo.trace": "regression"}
    assert report["traces"][0]["diff"]["test"] == "mann-whitney"  # 4 runs a side: calibrated


def test_a_driver_crash_fails_its_trace_alone_naming_the_call(tmp_path, db):
    call = crashing_trace(db / "demo" / "crash.trace")
    path = tmp_path / "traces.yml"
    path.write_text(
        f"traces:\n  demo/crash.trace:\n    {DEVICE}:\n      checksum: {ES2GEARS}\n"
        f"  demo/es2gears.trace:\n    {DEVICE}:\n      checksum: {ES2GEARS}\n"
    )
    out = tmp_path / "o"
    done = batch(path, "--device", DEVICE, "--db-path", db, "-o", out, "--db", tmp_path / "db")
    assert done.returncode == 1
    tests = results(out)
    crashed = tests[f"trace@{DEVICE}@demo@crash.trace"]
    assert crashed["result"] == "crash"
    assert f"driver crashed (SIGSEGV) at call {call} glDrawArrays" in crashed["err"]
    assert crashed["images"][0]["checksum_render"] == "error"  # as piglit marks a crash
    assert tests[f"trace@{DEVICE}@demo@es2gears.trace"]["result"] == "pass"
