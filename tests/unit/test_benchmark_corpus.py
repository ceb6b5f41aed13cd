"""benchmarks/corpus.py times retrace against the peer: its plumbing must run each side as
it says (the peer headless and surfaceless, --noop on both sides, a first run's trace cache
empty and a cached run's kept, the order rotating) and read each side's "Rendered" line
into the loop's figures. Programs standing in for both replayers record how they were run
and print the line as retrace does; no time is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from retrace.replay.replayer import rendered

ROOT = Path(__file__).resolve().parents[2]
# (a program that records its arguments, environment and trace cache, then prints `line`)
STAND_IN = """#!{python}
import json, os, sys
cache = os.environ.get("RETRACE_CACHE_DIR")
cached = bool(cache) and os.path.exists(os.path.join(cache, "scan"))
if cache:
    os.makedirs(cache, exist_ok=True)
    open(os.path.join(cache, "scan"), "w").close()
keys = ("WAFFLE_PLATFORM", "GALLIUM_NOOP", "DISPLAY", "WAYLAND_DISPLAY")
record = {{"name": {name!r}, "argv": sys.argv[1:], "cached": cached,
          "env": {{k: os.environ.get(k) for k in keys}}}}
with open({log!r}, "a") as log:
    log.write(json.dumps(record) + "\\n")
print({line!r})
"""


def stand_in(folder: Path, name: str, log: Path, line: str) -> Path:
    path = folder / name
    path.write_text(STAND_IN.format(python=sys.executable, name=name, log=str(log), line=line))
    path.chmod(0o755)
    return path


def test_corpus_runs_each_side_as_it_says_and_reads_the_loops(tmp_path):
    log = tmp_path / "runs.jsonl"
    stand_in(tmp_path, "eglretrace", log, rendered(3, 0.2))
    retrace = stand_in(tmp_path, "retrace", log, rendered(3, 0.05))
    trace = ROOT / "traces" / "es2tri.trace"
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", "DISPLAY": ":9"}
    argv = [sys.executable, str(ROOT / "benchmarks" / "corpus.py"), "--noop", "--repeat", "2",
            "--commands", "replay -b,1 pass", "--retrace", str(retrace),
            "--json", str(tmp_path / "out.json"), str(trace)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(runs) == 3 * 2 * 3  # (a round not counted, then 2) x 2 commands x 3 sides
    for run in runs:  # both sides: no display server, the surfaceless platform, the no-op driver
        assert run["env"] == {
            "WAFFLE_PLATFORM": "surfaceless_egl",
            "GALLIUM_NOOP": "1",
            "DISPLAY": None,
            "WAYLAND_DISPLAY": None,
        }
    peer = [run["argv"] for run in runs if run["name"] == "eglretrace"]
    ours = [run for run in runs if run["name"] == "retrace"]
    assert sorted(map(tuple, peer)) == sorted(
        [
            ("--headless", "-b", str(trace)),
            ("--headless", "--pframes=opengl: GPU Duration", str(trace)),
        ]
        * 3
    )
    assert {tuple(run["argv"]) for run in ours} == {
        ("replay", "-b", str(trace)),
        ("--pframes=opengl: GPU Duration", str(trace)),
    }
    # per command and round, one run of each side; retrace's first run found its cache empty,
    # its cached run (after the round that warms it) found the scan kept
    sides = [
        "peer" if run["name"] == "eglretrace" else "cached" if run["cached"] else "first"
        for run in runs
    ]
    rounds = [sides[i : i + 3] for i in range(0, len(sides), 3)]
    assert all(sorted(r) == ["cached", "first", "peer"] for r in rounds[1:])
    assert sorted(rounds[0]) == ["first", "first", "peer"]  # (the warm cache was still empty)
    assert len({r[0] for r in rounds[::2]}) == 3  # the side that goes first rotates by round

    figures = json.loads((tmp_path / "out.json").read_text())
    assert figures["mode"] == "GALLIUM_NOOP=1"
    counted = figures["runs"][trace.stem]
    for command in ("replay -b", "1 pass"):
        for side, loop in (("peer", 0.2), ("first", 0.05), ("cached", 0.05)):
            assert [run["loop"] for run in counted[command][side]] == [loop, loop]
            # the line came while the command ran; its peak RSS is the process's
            assert all(
                0 < run["said"] < run["wall"] and run["rss"] > 0 for run in counted[command][side]
            )
    # the tables: retrace's loop a quarter of the peer's, first run and cached, both commands
    loop_rows = [line.split() for line in done.stdout.splitlines() if line.startswith("es2tri ")]
    assert [row[3] for row in loop_rows[1::3]] == ["0.25", "0.25"]
    assert [row[5] for row in loop_rows[1::3]] == ["0.25", "0.25"]


def test_corpus_interleaves_builds_each_with_its_own_trace_cache(tmp_path):
    log = tmp_path / "runs.jsonl"
    stand_in(tmp_path, "eglretrace", log, rendered(1, 0.2))
    main = stand_in(tmp_path, "main", log, rendered(1, 0.1))
    branch = stand_in(tmp_path, "branch", log, rendered(1, 0.05))
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    trace = ROOT / "traces" / "es2tri.trace"
    argv = [sys.executable, str(ROOT / "benchmarks" / "corpus.py"), "--repeat", "1",
            "--commands", "replay -b", "--retrace", f"main={main}", "--retrace", f"branch={branch}",
            "--json", str(tmp_path / "out.json"), str(trace)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    runs = [json.loads(line) for line in log.read_text().splitlines()]
    # per round the peer and each build's first and cached run; a build's first run of the
    # counted round found its cache empty, though the other build had filled its own
    assert sorted(run["name"] for run in runs[5:]) == ["branch"] * 2 + ["eglretrace"] + ["main"] * 2
    assert sorted((r["name"], r["cached"]) for r in runs[5:] if r["name"] != "eglretrace") == [
        ("branch", False),
        ("branch", True),
        ("main", False),
        ("main", True),
    ]
    counted = json.loads((tmp_path / "out.json").read_text())["runs"]["es2tri"]["replay -b"]
    loops = {side: [run["loop"] for run in counted[side]] for side in counted}
    assert loops == {"peer": [0.2], "main first": [0.1], "main cached": [0.1],
                     "branch first": [0.05], "branch cached": [0.05]}  # fmt: skip
    assert "replay -b (main)" in done.stdout and "replay -b (branch)" in done.stdout


def test_corpus_kills_a_run_past_its_timeout_and_counts_it_failed(tmp_path):
    """(eglretrace's profiles wait forever for query results under GALLIUM_NOOP)"""
    log = tmp_path / "runs.jsonl"
    peer = stand_in(tmp_path, "eglretrace", log, rendered(1, 0.2))
    peer.write_text(peer.read_text().replace("print(", "import time; time.sleep(600); print("))
    retrace = stand_in(tmp_path, "retrace", log, rendered(1, 0.1))
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    trace = ROOT / "traces" / "es2tri.trace"
    argv = [sys.executable, str(ROOT / "benchmarks" / "corpus.py"), "--repeat", "1",
            "--commands", "1 pass", "--retrace", str(retrace), "--timeout", "1",
            "--json", str(tmp_path / "out.json"), str(trace)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    counted = json.loads((tmp_path / "out.json").read_text())["runs"]["es2tri"]["1 pass"]
    assert counted["peer"] == [None] and counted["first"][0]["loop"] == 0.1
    whole = next(line.split() for line in done.stdout.splitlines() if line.startswith("es2tri "))
    assert whole[1] == "fail" and whole[2] != "fail"  # the peer's wall time, retrace's
