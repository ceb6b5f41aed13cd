"""`retrace batch` (issue 15): real traces profiled on llvmpipe by the real CLI, results read
back from the DuckDB database it writes.

Equality between two batches (shards merged against one batch, Ray against
local) is asserted on what a replay makes deterministic: the jobs, their
statuses, every row's keys, and Pixels Drawn, which counts samples and not
time. No timing is asserted, except that softpipe is a regression against
llvmpipe at a 50% threshold, on one run of each, on two glmark2 scenes where
softpipe costs 4 to 110 times as much (GPU Duration of the frames, both cores
busy elsewhere), each frame the median of 3 replays: a stall of the machine
during one replay of a few milliseconds of llvmpipe's does not make it
softpipe's equal. (With glxgears, 1 to 27 times, and single replays, one run
in 20 beside two busy loops said "same".)
"""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import TRACES, run_retrace

from gl.test_crash_resume import crashing_trace

duckdb = pytest.importorskip("duckdb")

DETERMINISTIC = """
[defaults]
pframes = "opengl: Pixels Drawn"
pdrawcalls = "opengl: Pixels Drawn"
timeout = 120
retries = 0
"""
SAMPLES = ("glmark2-desktop-fbo.trace", "glxgears.trace", "glmark2-build-clientarrays.trace")


def manifest(tmp_path: Path, head: str, *entries: str, name: str = "m.toml") -> Path:
    path = tmp_path / name
    path.write_text(head + "".join(f"\n[[trace]]\n{e}\n" for e in entries))
    return path


def samples(tmp_path: Path, extra: str = "") -> Path:
    entries = [f'path = "{TRACES / t}"' for t in SAMPLES]
    return manifest(tmp_path, DETERMINISTIC + extra, *entries)


def batch(*args: object, env: dict[str, str] | None = None, cwd: Path | None = None):
    """`retrace batch ARGS` as a user runs it; stderr never holds a traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "retrace", "batch", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def contents(db: Path) -> tuple[list[tuple], list[tuple]]:
    """The deterministic part of a batch: runs with their status, and every value."""
    runs = query(db, "SELECT build, trace, run, sha256, settings, status FROM runs ORDER BY ALL")
    values = query(
        db,
        "SELECT trace, run, tbl, row, call_no, name, frame, metric, value FROM measurements "
        "ORDER BY ALL",
    )
    return runs, values


def test_a_batch_of_real_traces_is_stored_and_resumes(tmp_path):
    db = tmp_path / "b.duckdb"
    first = batch(samples(tmp_path), "--db", db, "--junit", tmp_path / "jobs.xml")
    assert first.returncode == 0, first.stderr
    assert "3 jobs: 0 already done, ran 3 (3 ok)" in first.stdout
    assert first.stderr == ""  # no progress bar where stderr is no terminal
    runs, values = contents(db)
    assert [r[1] for r in runs] == sorted(str(TRACES / t) for t in SAMPLES)
    # the stored tables are the ones retrace writes for the same trace and selection
    alone = run_retrace("--pframes", "opengl: Pixels Drawn", "--pdrawcalls",
                        "opengl: Pixels Drawn", str(TRACES / SAMPLES[1]), check=True)  # fmt: skip
    lines = alone.stdout.decode().splitlines()
    frames = [float(x.split("\t")[1]) for x in lines if x.startswith("frame\t")]
    stored = query(db, f"SELECT value FROM measurements WHERE trace = '{TRACES / SAMPLES[1]}' "
                       "AND tbl = 'frames' ORDER BY row")  # fmt: skip
    assert [v for (v,) in stored] == frames
    cases = ET.parse(tmp_path / "jobs.xml").getroot().iter("testcase")
    assert sum(1 for _ in cases) == 3

    again = batch(samples(tmp_path), "--db", db)
    assert "3 jobs: 3 already done (3 ok), ran 0" in again.stdout
    assert contents(db) == (runs, values)

    # a run that went missing is the only one run again
    with duckdb.connect(str(db)) as con:
        con.execute(f"DELETE FROM runs WHERE trace = '{TRACES / SAMPLES[0]}'")
        before = con.execute("SELECT trace, started FROM runs ORDER BY 1").fetchall()
    resumed = batch(samples(tmp_path), "--db", db)
    assert "3 jobs: 2 already done (2 ok), ran 1 (1 ok)" in resumed.stdout
    assert query(db, "SELECT trace, started FROM runs WHERE trace <> "
                     f"'{TRACES / SAMPLES[0]}' ORDER BY 1") == before  # fmt: skip
    assert contents(db) == (runs, values)
    # changed settings are a different measurement: run again
    changed = batch(samples(tmp_path), "--db", db, "--env", "MESA_NO_ERROR=1")
    assert "3 jobs: 0 already done, ran 3 (3 ok)" in changed.stdout


def test_a_manifests_call_set_keeps_the_calls_it_names_by_kind(tmp_path):
    m = manifest(tmp_path, DETERMINISTIC.replace("pframes", "pcalls"),
                 f'path = "{TRACES / SAMPLES[0]}"\ncalls = "*/draw"')  # fmt: skip
    db = tmp_path / "b.duckdb"
    assert batch(m, "--db", db).returncode == 0
    kept = query(db, "SELECT DISTINCT call_no, name FROM measurements ORDER BY 1")
    alone = run_retrace("--pdrawcalls", "opengl: Pixels Drawn", str(TRACES / SAMPLES[0]))
    draws = [line.split("\t") for line in alone.stdout.decode().splitlines()]
    expected = [(int(d[1]), d[3]) for d in draws if d[0] == "call"]
    assert kept == expected and len(expected) > 10  # draws only, every one of them


def test_a_crashing_replay_fails_its_job_only(tmp_path):
    crash = tmp_path / "crash.trace"
    call = crashing_trace(crash)
    db = tmp_path / "b.duckdb"
    m = manifest(
        tmp_path,
        DETERMINISTIC.replace("retries = 0", "retries = 1"),
        f'path = "{crash}"',
        f'path = "{TRACES / "glxgears.trace"}"',
    )
    done = batch(m, "--db", db, "--junit", tmp_path / "jobs.xml")
    assert done.returncode == 1
    rows = query(db, "SELECT trace, status, reason, attempts, exit_code FROM runs ORDER BY 2")
    (crashed, gears) = rows
    assert crashed[:2] == ("crash.trace", "failed")  # named relative to the manifest
    assert crashed[2].startswith(f"driver crashed (SIGSEGV) at call {call} glDrawArrays(")
    assert crashed[3] == 2 and crashed[4] == 1  # retried once
    assert gears[1] == "ok" and gears[3] == 1
    # the frames measured before the crash are kept (read a frame late: 3 of the 4 ended)
    [(kept,)] = query(db, "SELECT count(value) FROM measurements WHERE trace = 'crash.trace' "
                          "AND tbl = 'frames' AND value > 0")  # fmt: skip
    assert kept == 3
    assert f"run 0: failed: driver crashed (SIGSEGV) at call {call}" in done.stderr
    failures = [f.get("message") for f in ET.parse(tmp_path / "jobs.xml").getroot().iter("failure")]
    assert len(failures) == 1 and "driver crashed" in failures[0]
    # a failed job is not finished: a resumed batch tries it again
    again = batch(m, "--db", db)
    assert "2 jobs: 1 already done (1 ok), ran 1 (1 failed)" in again.stdout


def wait_for_a_job(pid: int, timeout: float = 120) -> None:
    """Wait until the batch `pid` runs a profile: a child process of any of its threads."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):  # a thread that has just ended
                if (task / "children").read_text().split():
                    return
        time.sleep(0.05)
    raise AssertionError(f"the batch ran no job in {timeout} s")


def test_sigterm_keeps_the_finished_jobs_and_the_same_command_resumes(tmp_path):
    m = samples(tmp_path, "runs = 3\n")  # 9 jobs of about a second
    db = tmp_path / "b.duckdb"
    command = [sys.executable, "-m", "retrace", "batch", str(m), "--db", str(db)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_a_job(child.pid)  # (the batch's handlers are in place once it runs jobs)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 143 and "Traceback" not in err
    [line] = err.splitlines()
    recorded = len(query(db, "SELECT * FROM runs WHERE status = 'ok'"))
    assert line == (f"retrace: interrupted by SIGTERM: {recorded} of 9 jobs recorded in {db}; "
                    "run the same command again to resume")  # fmt: skip
    resumed = batch(m, "--db", db)
    reused = f" ({recorded} ok)" if recorded else ""  # (SIGTERM may come before any job ends)
    assert f"9 jobs: {recorded} already done{reused}, ran {9 - recorded} ({9 - recorded} ok)" in (
        resumed.stdout
    )


def test_a_job_past_its_timeout_fails_with_the_reason(tmp_path):
    # (10 ms: a job forked from a warm worker has no start-up to spend its time on)
    loop = manifest(tmp_path, DETERMINISTIC.replace("timeout = 120", "timeout = 0.01"),
                    f'path = "{TRACES / "glmark2-desktop-fbo.trace"}"')  # fmt: skip
    done = batch(loop, "--db", tmp_path / "b.duckdb")
    assert done.returncode == 1
    assert query(tmp_path / "b.duckdb", "SELECT status, reason FROM runs") == [
        ("timeout", "timed out after 0.01 s")
    ]


def test_shards_merged_equal_the_whole_batch(tmp_path):
    m = samples(tmp_path)
    whole = tmp_path / "whole.duckdb"
    assert batch(m, "--db", whole).returncode == 0
    parts = []
    ci = {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "2"}
    slurm = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}
    for i, env in enumerate((ci, slurm)):
        done = batch(m, env=env, cwd=tmp_path)  # the default database's name says the shard
        assert done.returncode == 0, done.stderr
        parts.append(tmp_path / f"{m.stem}.shard{i + 1}of2.duckdb")
    assert [len(query(p, "SELECT * FROM runs")) for p in parts] == [2, 1]
    merged = tmp_path / "merged.duckdb"
    done = batch("merge", merged, *parts)
    assert done.returncode == 0 and "merged 3 runs" in done.stdout
    assert contents(merged) == contents(whole)


def test_progress_is_drawn_on_a_terminal(tmp_path):
    m = manifest(tmp_path, DETERMINISTIC, f'path = "{TRACES / "glxgears.trace"}"')
    command = [sys.executable, "-m", "retrace", "batch", str(m), "--db", str(tmp_path / "b.db")]
    terminal, side = pty.openpty()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=side)
    os.close(side)
    shown = b""
    with contextlib.suppress(OSError):  # EIO once the child has closed its side
        while chunk := os.read(terminal, 4096):
            shown += chunk
    os.close(terminal)
    assert child.wait(timeout=600) == 0
    text = shown.decode()
    assert "retrace batch" in text and "100%" in text, text


def test_the_manifest_is_checked_before_anything_runs(tmp_path):
    gears = f'path = "{TRACES / "glxgears.trace"}"'
    cases = {
        f'{gears}\npframe = "opengl: Pixels Drawn"': "unknown key 'pframe' "
        "(did you mean 'pframes'?)",
        'path = "nothing-*.trace"': "no trace matches 'nothing-*.trace'",
        f"{gears}\nrepeat = 0": "repeat must be a whole number of at least 1",
        f'{gears}\npcalls = "opengl"': "pcalls: expected",
        f'{gears}\nexpect = {{ md5 = ["x"] }}': "expect.md5 must be a list",
    }
    for entry, message in cases.items():
        done = batch(manifest(tmp_path, DETERMINISTIC, entry), "--db", tmp_path / "x.duckdb")
        errors = done.stderr.splitlines()
        assert done.returncode == 2 and len(errors) == 1, done.stderr
        assert errors[0].startswith("retrace: error: ") and message in errors[0], errors[0]
    assert not (tmp_path / "x.duckdb").exists()


def test_the_example_manifest_runs(tmp_path):
    done = batch(TRACES / "batch.toml", "--db", tmp_path / "ex.duckdb", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    md5 = query(tmp_path / "ex.duckdb", "SELECT count(*) FROM frame_md5 WHERE md5 = expected")
    assert md5 == [(5,)]
    export = batch("export", tmp_path / "ex.duckdb", tmp_path / "pq")
    assert export.returncode == 0
    with duckdb.connect() as con:
        (n,) = con.execute(f"SELECT count(*) FROM '{tmp_path / 'pq' / 'runs.parquet'}'").fetchone()
    assert n == 8


def test_corpus_diff_of_two_drivers(tmp_path):
    db = tmp_path / "c.duckdb"
    traces = [TRACES / "glmark2-desktop-fbo.trace", TRACES / "glmark2-es2-effect2d.trace"]
    m = manifest(tmp_path, '[defaults]\npframes = "opengl: GPU Duration"\nruns = 1\nrepeat = 3\n',
                 *(f'path = "{t}"' for t in traces))  # fmt: skip
    assert batch(m, "--db", db, "--build", "llvmpipe").returncode == 0
    softpipe = batch(m, "--db", db, "--build", "softpipe", "--env", "GALLIUM_DRIVER=softpipe")
    assert softpipe.returncode == 0, softpipe.stderr
    junit = tmp_path / "diff.xml"
    done = run_retrace("diff", f"{db}:llvmpipe", f"{db}:softpipe", "--threshold", "0.5",
                       "--junit", str(junit))  # fmt: skip
    report = done.stdout.decode()
    assert done.returncode == 1, done.stderr
    assert "verdict: regression (2 traces: 2 regression)" in report
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {str(t) for t in traces}
    assert all(c.find("failure") is not None for c in cases.values())
    # a build against itself, and a database of one build named alone
    same = run_retrace("diff", f"{db}:llvmpipe", f"{db}:llvmpipe", "--format", "json")
    assert same.returncode == 0
    # a database with two builds needs one named
    bad = run_retrace("diff", str(db), f"{db}:softpipe")
    assert bad.returncode == 2
    assert b"holds builds llvmpipe, softpipe: name one" in bad.stderr


def test_ray_cluster_gives_the_local_results(tmp_path, monkeypatch):
    """Two Ray nodes on this machine, each with one unit of a custom resource standing for a
    GPU (CI has none): the batch runs as Ray tasks and stores what a local batch stores."""
    # Ray on loopback only (its address for other nodes would be this machine's network
    # address), and no usage report sent out; both read by Ray at import, and by the CLI's
    # Ray in the child, which inherits them
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    m = samples(tmp_path, "resources = { fakegpu = 1 }\n")
    local = tmp_path / "local.duckdb"
    assert batch(m, "--db", local).returncode == 0
    node = {"num_cpus": 1, "resources": {"fakegpu": 1}, "object_store_memory": 80 << 20}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        remote = tmp_path / "ray.duckdb"
        done = batch(m, "--db", remote, "--ray", cluster.address)
        assert done.returncode == 0, done.stderr
        # a resource no node has fails the jobs at once instead of waiting forever
        other = samples(tmp_path, "resources = { radeonsi = 1 }\n")
        refused = batch(other, "--db", tmp_path / "none.duckdb", "--ray", cluster.address)
    finally:
        cluster.shutdown()
    assert contents(remote) == contents(local)
    assert refused.returncode == 1
    reasons = query(tmp_path / "none.duckdb", "SELECT DISTINCT reason FROM runs")
    assert reasons == [("no node of the Ray cluster has 1 radeonsi",)]
