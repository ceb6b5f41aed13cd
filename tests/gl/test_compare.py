"""`retrace diff`, `retrace compare` and `retrace summary` on real profiles under two Mesa drivers.

The two "builds" are Mesa's llvmpipe (LLVM-compiled shaders, threaded
rasterizer) and softpipe (the reference rasterizer, interpreted), chosen with
GALLIUM_DRIVER. softpipe is many times slower on glmark2's desktop scene, so a
diff must find a regression one way and an improvement the other way, while
llvmpipe against other llvmpipe runs (A/A) must find nothing, rows included
(`--fail-on rows`). Pixels Drawn must not change: both rasterize the same
samples.

These are the calibration tests of the verdicts, the only tests here that
depend on timing. Runs follow docs/compare.md's recipe (separate runs per side,
`--warmup 1 --stats`), and they alternate between the drivers in blocks
balanced for order (compare_runs.py), so a drift of this shared machine, or
what a softpipe run leaves behind, hits both llvmpipe sides alike. Run-to-run
noise here reaches +-30% of a total, and with both cores busy elsewhere a run
can take 2 to 10 times another's, so the driver comparisons use a 50%
threshold and the A/A one 25% with --alpha 0.001: at the default 0.05, noise
alone made 4% of A/A diffs of 5 runs a side say something other than "same"
(51 of 1200 splits of real runs made beside two busy loops), as alpha allows,
which in CI is a flaky test. softpipe costs 10 to 70 times as much, far beyond
all that.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pty
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from compare_runs import (
    RUNS,
    TRACE,
    diff_json,
    entry,
    retrace,
)
from conftest import TRACES

from retrace.compare.load import load_comparison
from retrace.compare.stats import EXACT_LIMIT, mann_whitney
from retrace.vocabulary import TABLE_TITLES, Boundary
from retrace.writer.tsv_reader import read_tables

THRESHOLD = ["--threshold", "0.5"]
A_A_OPTIONS = ["--threshold", "0.25", "--alpha", "0.001"]


def test_softpipe_is_a_regression(runs):
    code, report = diff_json(runs["llvmpipe"], runs["softpipe"], *THRESHOLD)
    assert code == 1 and report["verdict"] == "regression" and report["exit_code"] == 1
    assert report["test"] == "mann-whitney"
    for table, metric in [("frames", "CPU Duration"), ("frames", "GPU Duration"),
                          ("calls", "CPU Duration"), ("draw calls", "GPU Duration")]:  # fmt: skip
        found = entry(report, table, metric)
        assert found["verdict"] == "regression", found
        assert found["new_total"] > 2 * found["base_total"]
        assert found["change"] > 0 and found["relative"] > 1
        assert found["p"] <= 0.05
        # 4 or more runs per side bound a 95% interval of the ratio; softpipe is far beyond 2x
        assert 1 < found["ci_low"] <= found["relative"] <= found["ci_high"] < math.inf
    frames = entry(report, "frames", "CPU Duration")
    assert frames["counts"]["regression"] >= 4  # the whole frames, the partial last one aside
    assert frames["counts"]["improvement"] == 0
    assert all(r["change"] > 0 and r["new"] > r["base"] for r in frames["regressions"])
    # Pixels Drawn has no direction, and both rasterizers draw the same samples.
    pixels = entry(report, "draw calls", "Pixels Drawn")
    assert pixels["direction"] == "no direction" and pixels["verdict"] == "same"
    assert pixels["counts"]["same"] == pixels["rows"] - pixels["startup"]["rows"]
    assert pixels["change"] == 0
    # CPU Start is a position in time: no cost.
    assert "frames: CPU Start" in report["skipped"]


def test_stats_columns_are_not_compared(tmp_path):
    """--stats columns are a spread, not a cost: diff skips them."""
    sides = [tmp_path / "base.tsv", tmp_path / "new.tsv"]
    for out in sides:
        done = retrace(
            "--pframes", "opengl: CPU Duration", "--repeat", "2", "--stats", "--quiet",
            "-o", out, TRACES / "es2tri.trace",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        shutil.rmtree(f"{out}.runs")  # else diff reads the runs, which have no such columns
    _, report = diff_json(sides[0], "--", sides[1])
    compared = {f"{m['table']}: {m['metric']}" for m in report["metrics"]}
    derived = {f"frames: CPU Duration {suffix}" for suffix in ("min", "p95", "stddev")}
    assert "frames: CPU Duration" in compared
    assert derived <= set(report["skipped"]) and not derived & compared


def test_softpipe_text_output(runs):
    done = retrace("diff", *THRESHOLD, runs["llvmpipe"], "--", runs["softpipe"])
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert f"{RUNS} runs" in lines[0] and f"{RUNS} runs" in lines[1]
    header = next(line for line in lines if line.startswith("table"))
    for column in ["base total", "new total", "change %", "95% interval", "p", "verdict"]:
        assert column in header
    frames = next(line for line in lines if line.split()[:3] == ["frames", "CPU", "Duration"])
    assert frames.split()[-4] == "regression" and "+" in frames
    assert "frames, CPU Duration [ns]: regressions" in done.stdout  # units from the metadata
    assert "calls, CPU Duration [ns]: regressions" in done.stdout
    assert lines[-1].startswith("verdict: regression (frames CPU Duration +")


def test_llvmpipe_is_an_improvement(runs):
    code, report = diff_json(runs["softpipe"], runs["llvmpipe"], *THRESHOLD)
    assert code == 0 and report["verdict"] == "improvement"
    frames = entry(report, "frames", "CPU Duration")
    assert frames["verdict"] == "improvement" and frames["change"] < 0
    assert frames["new_total"] * 2 < frames["base_total"]
    assert frames["regressions"] == []
    assert all(r["change"] < 0 for r in frames["improvements"])


def test_row_regressions_can_gate(runs):
    """llvmpipe is faster overall but clears slower: rows regress while the totals improve."""
    args = [runs["softpipe"], runs["llvmpipe"], *THRESHOLD]
    code, report = diff_json(*args)
    draws = entry(report, "draw calls", "GPU Duration")
    assert code == 0 and draws["verdict"] == "improvement"
    assert draws["counts"]["regression"] > 0
    assert {r["name"] for r in draws["regressions"]} == {"glClear"}
    code, report = diff_json(*args, "--fail-on", "rows")
    assert code == 1 and report["verdict"] == "regression"


def test_same_driver_says_same(runs):
    """A/A: hundreds of rows tested at once find nothing once adjusted for their number
    (at alpha 0.001, which 8 runs per side reach: the test is made, not skipped)."""
    args = [runs["llvmpipe"], runs["llvmpipe-again"], *A_A_OPTIONS, "--fail-on", "rows"]
    code, report = diff_json(*args)
    assert report["test"] == "mann-whitney"
    assert code == 0 and report["verdict"] == "same", report
    for found in report["metrics"]:
        assert found["verdict"] == "same" and found["counts"]["regression"] == 0, found


def test_startup_is_reported_apart(runs):
    """Frame 0 (driver start, first compiles) is neither in the totals nor in row verdicts."""
    code, report = diff_json(runs["llvmpipe"], runs["softpipe"], *THRESHOLD)
    frames, calls = entry(report, "frames", "CPU Duration"), entry(report, "calls", "CPU Duration")
    assert frames["startup"]["rows"] == 1 and calls["startup"]["rows"] > 1
    assert frames["startup"]["new"] > frames["startup"]["base"] > 0
    for found in report["metrics"]:
        listed = found["regressions"] + found["improvements"] + found["changes"]
        assert all(r["frame"] > 0 for r in listed)
    done = retrace("diff", runs["llvmpipe"], runs["softpipe"], *THRESHOLD)
    assert "start-up (frame 0), not judged" in done.stdout
    code, report = diff_json(runs["llvmpipe"], runs["softpipe"], "--startup-frames", "0")
    assert all(m["startup"] is None for m in report["metrics"])
    assert any(r["frame"] == 0 for r in entry(report, "frames", "CPU Duration")["regressions"])


def test_a_build_against_itself_shows_nothing(runs):
    code, report = diff_json(runs["llvmpipe"], runs["llvmpipe"])
    assert code == 0 and report["verdict"] == "same"
    for found in report["metrics"]:
        assert found["verdict"] == "same" and found["change"] == 0
        assert found["counts"]["same"] == found["rows"] - found["startup"]["rows"]


def test_one_run_per_side_uses_the_threshold(runs):
    code, report = diff_json(runs["llvmpipe"] / "run0.tsv", runs["softpipe"] / "run0.tsv")
    assert code == 1 and report["test"] == "threshold"
    assert entry(report, "frames", "CPU Duration")["p"] is None
    assert entry(report, "frames", "CPU Duration")["verdict"] == "regression"


def test_different_traces_are_refused(runs):
    done = retrace("diff", runs["llvmpipe"] / "run0.tsv", runs["other"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("retrace: error: the two sides come from different traces")
    assert "(first difference in the calls table: call " in done.stderr
    assert len(done.stderr.splitlines()) == 1
    # runs of one side must agree too
    run0 = runs["llvmpipe"] / "run0.tsv"
    done = retrace("diff", run0, runs["other"], "--", runs["softpipe"])
    assert done.returncode == 2
    assert f"{run0} and {runs['other']} come from different traces" in done.stderr


def test_frames_only_runs_are_told_apart_by_metadata(runs, tmp_path):
    """Two traces with as many frames: only metadata beside the TSVs can tell them apart."""
    base, new = tmp_path / "base.tsv", tmp_path / "new.tsv"
    base.write_bytes(runs["frames"].read_bytes())
    new.write_bytes(runs["frames-other"].read_bytes())
    code, report = diff_json(base, new)
    assert any("only the frame counts say" in note for note in report["notes"])
    Path(f"{base}.json").write_text(json.dumps({"trace_sha256": "a" * 64, "renderer": "one"}))
    Path(f"{new}.json").write_text(json.dumps({"trace": {"sha256": "b" * 64}}))
    done = retrace("diff", base, new)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert "profile different traces (SHA-256 aaaaaaaaaaaa... and bbbbbbbbbbbb...); " in done.stderr
    assert done.stderr.rstrip().endswith("compare them anyway with --force")
    Path(f"{new}.json").write_text(json.dumps({"trace_sha256": "a" * 64, "renderer": "two"}))
    code, report = diff_json(base, new)
    assert "the sides ran on different renderers: base one; new two" in report["notes"]
    Path(f"{new}.json").write_text("{not json")
    done = retrace("diff", base, new)
    assert done.returncode == 2 and "new.tsv.json: not readable JSON metadata" in done.stderr


def test_compare_finds_softpipe(tmp_path):
    """Alternating runs of the two drivers: the report is diff's on the kept runs."""
    keep = tmp_path / "keep"
    args = ["--base", "GALLIUM_DRIVER=llvmpipe", "--new", "GALLIUM_DRIVER=softpipe",
            "--min-runs", "4", "--max-runs", "4", *THRESHOLD, "--keep", keep]  # fmt: skip
    done = retrace("compare", TRACE, *args, "--format", "json")
    assert done.returncode == 1 and done.stderr == "", done.stderr  # no progress: not a terminal
    report = json.loads(done.stdout)
    assert report["verdict"] == "regression" and report["test"] == "mann-whitney"
    assert entry(report, "frames", "CPU Duration")["verdict"] == "regression"
    runs = [f"{side}-{i}.tsv" for side in ("base", "new") for i in (1, 2, 3, 4)]
    runs += ["warmup-base-0.tsv", "warmup-new-0.tsv"]
    expected = runs + [f"{r}.json" for r in runs]  # every profile writes its metadata
    assert sorted(p.name for p in keep.iterdir()) == sorted(expected)
    base = [keep / f"base-{i}.tsv" for i in (1, 2, 3, 4)]
    new = [keep / f"new-{i}.tsv" for i in (1, 2, 3, 4)]
    code, again = diff_json(*base, "--", *new, *THRESHOLD)
    assert code == 1 and again == report


def test_compare_shows_progress_on_a_terminal():
    leader, follower = pty.openpty()
    with os.fdopen(leader, "rb", buffering=0) as terminal:
        done = subprocess.run(
            [sys.executable, "-m", "retrace", "compare", str(TRACES / "es2tri.trace"),
             "--warmup", "0", "--min-runs", "4", "--max-runs", "4",
             "--pframes", "opengl: Pixels Drawn"],  # (a count: an A/A verdict is "same")
            stdout=subprocess.PIPE, stderr=follower, timeout=300, check=False,
        )  # fmt: skip
        os.close(follower)
        shown = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
            while chunk := terminal.read(4096):
                shown += chunk
    assert done.returncode == 0
    # the runs are deleted on exit: the report names none of their files
    assert done.stdout.decode().splitlines()[:2] == [
        "base: 4 runs (not kept: --keep DIR keeps them)",
        "new:  4 runs (not kept: --keep DIR keeps them)",
    ]
    lines = shown.decode().splitlines()
    assert lines[0].startswith("retrace compare: base-1.tsv: ")
    assert "retrace compare: new-4.tsv: " in shown.decode()
    assert lines[-1].startswith("retrace compare: 4 runs per side: widest interval +-")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "GALLIUM_DRIVER"], "--base: expected KEY=VALUE, got 'GALLIUM_DRIVER'"),
        (["--min-runs", "5", "--max-runs", "4"], "--max-runs must be at least --min-runs"),
        (["--pframes", "opengl: Bogus", "--warmup", "0"], "base run failed (exit 2): retrace: "),
    ],
)  # fmt: skip
def test_compare_bad_usage_exits_2(args, message):
    done = retrace("compare", TRACES / "es2tri.trace", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--new-cmd", "/nonexistent/wrapper"], "new run: cannot start /nonexistent/wrapper"),
        (
            ["--no-warm", "--new-cmd", "/nonexistent/wrapper"],
            "new run: cannot start /nonexistent/wrapper",
        ),
        (["--new", "GALLIUM_DRIVER=nosuchdriver"], "new run failed (exit 1): retrace: error: "),
    ],
)
def test_compare_run_that_cannot_be_made_exits_125(args, message):
    """git bisect run's convention: a build that cannot run is skipped, not judged."""
    done = retrace("compare", TRACES / "es2tri.trace", "--warmup", "0", *args)
    assert done.returncode == 125 and done.stdout == ""
    assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.tsv", "other.tsv"], "missing.tsv: no such file or directory"),
        (["a.tsv"], "give two paths (BASE NEW)"),
        (["--metric", "Cycles", "A", "B"], "no table has a metric 'Cycles'"),
        (["--lower-is-better", "Pixels Drawn", "--higher-is-better", "pixels drawn", "A", "B"],
         "is both --lower-is-better and --higher-is-better"),
        (["A", "--", "--", "B"], "more than one --"),
    ],
)  # fmt: skip
def test_bad_usage_exits_2(runs, args, message):
    real = {"A": runs["llvmpipe"], "B": runs["softpipe"], "a.tsv": runs["other"]}
    done = retrace("diff", *(real.get(a, a) for a in args))
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.splitlines()) == 1


def test_not_a_profile_exits_2(tmp_path, runs):
    empty = tmp_path / "empty.tsv"
    empty.write_text("Rendered 5 frames in 0.1 secs\n")
    done = retrace("diff", empty, runs["other"])
    assert done.returncode == 2 and "no profile tables in it" in done.stderr


def test_summary_statistics(runs):
    path = runs["llvmpipe"] / "run0.tsv"
    done = retrace("summary", "--format", "json", path)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    with path.open() as stream:
        parsed = read_tables(stream)
    tables = {t["table"]: t for t in run["tables"]}
    assert set(tables) == {"frames", "calls", "draw calls"}
    for boundary, table in parsed.items():
        summary = tables[TABLE_TITLES[boundary]]
        assert summary["rows"] == len(table)
        for metric in summary["metrics"]:
            values = [v for v in table.column(metric["metric"]) if not math.isnan(v)]
            expected = {
                "count": len(values),
                "sum": math.fsum(values),
                "min": min(values),
                "max": max(values),
                "mean": statistics.fmean(values),
                "median": statistics.median(values),
                "p95": statistics.quantiles(values, n=20, method="inclusive")[18],
                "stddev": statistics.stdev(values),
            }
            assert metric["stats"] == pytest.approx(expected, rel=1e-9)
            if boundary == Boundary.FRAME:
                assert metric["by_function"] == metric["by_program"] == []
                continue
            for groups in (metric["by_function"], metric["by_program"]):
                assert sum(g["count"] for g in groups) == len(values)
                assert math.fsum(g["sum"] for g in groups) == pytest.approx(math.fsum(values))
                assert math.fsum(g["share"] for g in groups) == pytest.approx(100)
                sums = [g["sum"] for g in groups]
                assert sums == sorted(sums, reverse=True)
            names = table.names
            draws = [v for n, v in zip(names, table.column(metric["metric"]), strict=True)
                     if n == "glDrawArrays"]  # fmt: skip
            (arrays,) = [g for g in metric["by_function"] if g["key"] == "glDrawArrays"]
            assert arrays["count"] == len(draws)
            assert arrays["median"] == pytest.approx(statistics.median(draws))
            assert arrays["max"] == max(draws)


def test_summary_text_and_other_formats(runs):
    done = retrace("summary", "--top", "3", runs["llvmpipe"])
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.count("run0.tsv") == 1 and "run2.tsv" in text
    header = next(line for line in text.splitlines() if line.startswith("metric"))
    assert header.split() == ["metric", "count", "sum", "min", "max", "mean", "median", "p95",
                              "stddev"]  # fmt: skip
    assert "calls, CPU Duration per function" in text
    assert "draw calls, GPU Duration per program" in text
    done = retrace("summary", "--format", "tsv", runs["llvmpipe"] / "run0.tsv")
    blocks = done.stdout.split("\n\n")
    assert blocks[0].splitlines()[0].split("\t")[:4] == ["source", "table", "metric", "count"]
    assert len(blocks[0].splitlines()) == 1 + 6  # header, six table/metric pairs
    done = retrace("summary", "--format", "markdown", runs["llvmpipe"] / "run0.tsv")
    assert "| metric " in done.stdout and "### frames (6 rows)" in done.stdout


def test_diff_markdown_and_tsv(runs):
    done = retrace("diff", "--format", "markdown", "--top", "2", *THRESHOLD,
                   runs["llvmpipe"], runs["softpipe"])  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.startswith("## retrace diff: regression\n")
    assert "| frames " in done.stdout
    assert "### frames, CPU Duration [ns]: regressions" in done.stdout
    done = retrace("diff", "--format", "tsv", *THRESHOLD, runs["llvmpipe"], runs["softpipe"])
    totals, rows = done.stdout.split("\n\n")[:2]
    header, *lines = totals.splitlines()
    assert header.split("\t")[:4] == ["table", "metric", "direction", "rows"]
    frames = next(line.split("\t") for line in lines if line.startswith("frames\tCPU Duration"))
    assert frames[12] == "regression" and float(frames[6]) > 0 and float(frames[8]) > 0
    assert rows.splitlines()[0].startswith("table\tmetric\tlist\tcall_no")


def test_mann_whitney_matches_scipy(runs):
    """Our p-values equal scipy's on the real runs, where no value ties.

    Exact: per call, 3 llvmpipe runs against 3 softpipe runs. Normal
    approximation: the calls of one llvmpipe run against those of one softpipe
    run, as two samples of hundreds of values.
    """
    scipy_stats = pytest.importorskip("scipy.stats")
    comparison = load_comparison([str(runs["llvmpipe"])], [str(runs["softpipe"])])
    (calls,) = [t for t in comparison.tables if t.title == "calls"]
    base, new = calls.base["CPU Duration"], calls.new["CPU Duration"]
    both = np.vstack([base, new])
    untied = (np.diff(np.sort(both, axis=0), axis=0) != 0).all(axis=0)
    samples = [(base[:, untied], new[:, untied], "exact")]
    first = np.unique(base[0])
    second = np.setdiff1d(np.unique(new[0]), first)
    assert first.size * second.size > EXACT_LIMIT
    samples.append((first[:, None], second[:, None], "asymptotic"))
    for b, n, method in samples:
        p_up, p_down = mann_whitney(b, n)
        for alternative, ours in (("greater", p_up), ("less", p_down)):
            theirs = scipy_stats.mannwhitneyu(n, b, alternative=alternative, method=method)
            np.testing.assert_allclose(ours, theirs.pvalue, rtol=1e-9)
