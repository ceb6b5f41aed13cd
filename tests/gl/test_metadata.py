"""Self-describing results: the metadata beside a profile's tables, and what diff and summary
do with it (units, refusals, per-frame statistics). Real profiles on llvmpipe."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import TRACES, run_retrace

from retrace.errors import RetraceError
from retrace.profile.metadata import trace_identity
from retrace.trace.reader import read_counts
from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

TRACE = TRACES / "glmark2-desktop-fbo.trace"
SAME_FRAMES_TRACE = TRACES / "glmark2-es2-pulsar.trace"  # as many frames as TRACE
SELECTION = [
    "--pframes", "opengl: CPU Duration, GPU Duration, Pixels Drawn",
    "--pcalls", "opengl: CPU Duration, RSS Start",
    "--pdrawcalls", "opengl: GPU Duration, Pixels Drawn",
]  # fmt: skip


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("metadata") / "run.tsv"
    done = run_retrace(*SELECTION, "--quiet", "-o", str(out), str(TRACE))
    assert done.returncode == 0, done.stderr
    return out


def test_trace_identity():
    identity = trace_identity(str(TRACE))
    assert identity.sha256 == hashlib.sha256(TRACE.read_bytes()).hexdigest()
    assert identity.size == TRACE.stat().st_size and identity.path == str(TRACE)
    info = json.loads(run_retrace("info", str(TRACE), check=True).stdout)
    assert (identity.calls, identity.frames) == (info["CallCount"], info["FramesCount"])
    with pytest.raises(RetraceError, match="cannot read"):
        trace_identity(str(TRACE.with_suffix(".missing")))


def test_the_trace_is_counted_where_it_is_replayed(tmp_path):
    """The replay counts the trace's calls and frames as it reads it and keeps them in the
    store, where the metadata takes them: no second read of the trace for them."""
    stores = tmp_path / "stores"
    stores.mkdir()
    out = tmp_path / "run.tsv"
    done = run_retrace(*SELECTION[:2], "--quiet", "--store-dir", str(stores), "--keep-store",
                       "-o", str(out), str(TRACE))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (manifest,) = stores.glob("*/manifest.json")
    kept = json.loads(manifest.read_text())["meta"]["trace_counts"]
    counts, damage = read_counts(str(TRACE))
    assert damage is None and kept == counts._asdict()
    info = json.loads(run_retrace("info", str(TRACE), check=True).stdout)
    assert counts == (info["CallCount"], info["FramesCount"], info["CallsAfterLastFrame"])
    meta = json.loads(Path(f"{out}.json").read_text())
    assert (meta["trace"]["calls"], meta["trace"]["frames"]) == (counts.calls, counts.frames)


def test_profile_writes_metadata_beside_its_tables(profiled):
    meta = json.loads(Path(f"{profiled}.json").read_text())
    assert meta["format"] == "retrace-profile-metadata" and meta["complete"] is True
    assert meta["trace"]["sha256"] == hashlib.sha256(TRACE.read_bytes()).hexdigest()
    assert meta["trace"]["frames"] == trace_identity(str(TRACE)).frames
    assert "llvmpipe" in meta["gl"]["renderer"] and meta["gl"]["version"].startswith("4.5")
    assert meta["gl"]["vendor"] and meta["gl"]["profile"] in ("compat", "core")
    assert meta["egl"]["platform"] in ("device", "surfaceless", "default")
    assert meta["host"]["kernel"].startswith("Linux") and meta["host"]["cpu"]
    assert meta["selection"]["given"]["frames"] == SELECTION[1]
    assert meta["selection"]["resolved"]["calls"] == ["opengl: CPU Duration", "opengl: RSS Start"]
    gen = run_retrace("--gen-passes", *SELECTION, str(TRACE), check=True)
    assert len(meta["passes"]) == int(gen.stdout)  # Pixels Drawn at two boundaries: 2
    assert all(p["backend"] == "opengl" and p["what"] for p in meta["passes"])
    units = {(t, c["name"]): c["unit"] for t, cs in meta["tables"].items() for c in cs}
    assert units[("frames", "GPU Duration")] == "ns"
    assert units[("drawcalls", "Pixels Drawn")] == "samples"
    assert units[("calls", "RSS Start")] == "bytes"
    column = meta["tables"]["calls"][0]
    assert column == {"name": "CPU Duration", "backend": "opengl", "group": 0, "id": 1,
                      "boundary": "call", "kind": "duration", "unit": "ns",
                      "num_type": "int64",
                      "description": "CPU (wall-clock) time the event took on the CPU"}  # fmt: skip
    assert (meta["repeat"], meta["warmup"]) == (1, 0) and meta["duration_s"] > 0
    assert meta["fidelity"]["faithful"] is True
    assert meta["outputs"]["tables"] == str(profiled)


def test_tables_keep_glretraces_layout(profiled):
    """The file beside the metadata is the same TSV as on standard output."""
    done = run_retrace(*SELECTION, "--quiet", str(TRACE), check=True)
    to_stdout = read_tables(done.stdout.decode().splitlines(keepends=True))
    with profiled.open() as stream:
        to_file = read_tables(stream)
    assert to_stdout.keys() == to_file.keys()
    for boundary, table in to_file.items():
        assert table.metrics == to_stdout[boundary].metrics
        assert table.call_nos == to_stdout[boundary].call_nos
        if "Pixels Drawn" in table.metrics:  # deterministic
            assert table.column("Pixels Drawn") == to_stdout[boundary].column("Pixels Drawn")
    assert profiled.read_text().startswith("#\tCPU Duration\tGPU Duration\tPixels Drawn\n")


def test_metadata_option_with_tables_on_stdout(tmp_path):
    meta = tmp_path / "where.json"
    done = run_retrace("--pframes", "opengl: GPU Duration", "--quiet", "--metadata", str(meta),
                       str(TRACE))  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith(b"#\tGPU Duration\n")
    document = json.loads(meta.read_text())
    assert document["outputs"]["tables"] is None and document["trace"]["calls"] > 0


def test_tables_to_a_special_file_get_nothing_beside_them(tmp_path):
    """-o names a device (here a link to /dev/null) or a FIFO: the tables go there as to
    standard output, and no OUT.json or OUT.runs/ is made beside it (/dev/null.json);
    --metadata still writes the metadata where it says."""
    null = tmp_path / "null"
    null.symlink_to(os.devnull)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()))
    reader.start()
    try:
        for out in (null, fifo):
            done = run_retrace("--pframes", "opengl: GPU Duration", "--repeat", "2", "--quiet",
                               "-o", str(out), str(TRACE))  # fmt: skip
            assert done.returncode == 0, done.stderr
    finally:
        with contextlib.suppress(OSError):  # (a failed run never opened it: let it end)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    assert read[0].startswith(b"#\tGPU Duration\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "null"]
    meta = tmp_path / "meta.json"
    done = run_retrace("--pframes", "opengl: GPU Duration", "--quiet", "-o", str(null),
                       "--metadata", str(meta), str(TRACE))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(meta.read_text())["outputs"]["tables"] == str(null)


def diff(*args) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "retrace", "diff", *map(str, args)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_diff_states_units_and_refuses_other_traces(profiled, tmp_path):
    done = diff(profiled, profiled)
    assert done.returncode == 0, done.stderr
    assert "CPU Duration [ns]" in done.stdout and "Pixels Drawn [samples]" in done.stdout
    report = json.loads(diff(profiled, profiled, "--format", "json").stdout)
    assert {m["unit"] for m in report["metrics"]} >= {"ns", "samples"}
    # two traces with as many frames: only their metadata tells them apart
    frames = ["--pframes", "opengl: GPU Duration", "--quiet"]
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    run_retrace(*frames, "-o", str(a), str(TRACE), check=True)
    run_retrace(*frames, "-o", str(b), str(SAME_FRAMES_TRACE), check=True)
    done = diff(a, b)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert f"profile different traces ({TRACE} and {SAME_FRAMES_TRACE})" in done.stderr
    assert "compare them anyway with --force" in done.stderr
    done = diff(a, b, "--force")
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr.startswith("retrace: warning: ") and "WARNING" not in done.stderr
    assert "compared anyway (--force)" in done.stdout


def test_diff_notes_different_units(profiled, tmp_path):
    """glretrace's RSS is in pages, retrace's in bytes: a note says so."""
    other = tmp_path / "other.tsv"
    other.write_bytes(profiled.read_bytes())
    meta = json.loads(Path(f"{profiled}.json").read_text())
    for column in meta["tables"]["calls"]:
        if column["name"] == "RSS Start":
            column["unit"] = "pages"
    Path(f"{other}.json").write_text(json.dumps(meta))
    report = json.loads(diff(profiled, other, "--format", "json", "--metric", "RSS Start").stdout)
    assert any("RSS Start: the sides' units differ (base bytes; new pages)" in n
               for n in report["notes"])  # fmt: skip


def test_summary_units_per_frame_statistics_and_levels(profiled):
    done = run_retrace("summary", str(profiled), "--format", "json", check=True)
    runs = json.loads(done.stdout)["runs"][0]["tables"]
    tables = {t["table"]: {m["metric"]: m for m in t["metrics"]} for t in runs}
    with profiled.open() as stream:
        parsed = read_tables(stream)
    calls = parsed[Boundary.CALL]
    frames = np.frombuffer(calls.frames, np.int64)
    cpu = np.frombuffer(calls.column("CPU Duration"), np.float64)
    sums = np.bincount(frames, weights=cpu)
    per_frame = tables["calls"]["CPU Duration"]["per_frame"]
    assert tables["calls"]["CPU Duration"]["unit"] == "ns"
    assert per_frame["count"] == len(sums)
    assert per_frame["max"] == pytest.approx(sums.max()) and per_frame["min"] == sums.min()
    assert per_frame["stddev"] == pytest.approx(sums.std(ddof=1))
    rss = np.frombuffer(calls.column("RSS Start"), np.float64)
    expected = float((rss * cpu).sum() / cpu.sum())
    level = tables["calls"]["RSS Start"]
    assert level["per_frame"] is None and level["weighted_mean"] == pytest.approx(expected)
    assert rss.min() <= level["weighted_mean"] <= rss.max()
    text = run_retrace("summary", str(profiled), check=True).stdout.decode()
    assert "calls per frame (each frame's sum)" in text and "GPU Duration [ns]" in text
    assert "time-weighted mean" in text
    assert not math.isnan(tables["frames"]["GPU Duration"]["stats"]["p95"])


def test_interrupted_and_resumed_profiles_describe_themselves(tmp_path):
    """Ctrl-C after pass 1: the metadata of what was kept says it is incomplete, and names
    the driver; the resumed profile's says it is complete."""
    import os
    import signal

    from gl.test_crash_resume import interrupt_after_pass_1

    status, _err, store = interrupt_after_pass_1(
        tmp_path, lambda proc: os.killpg(proc.pid, signal.SIGINT)
    )
    assert status == 128 + signal.SIGINT
    kept = json.loads((tmp_path / "partial.tsv.json").read_text())
    assert kept["complete"] is False and "llvmpipe" in kept["gl"]["renderer"]
    assert len(kept["passes"]) == 2
    out = tmp_path / "resumed.tsv"
    done = run_retrace("profile", "--resume", str(store), "--quiet", "-o", str(out))
    assert done.returncode == 0, done.stderr
    resumed = json.loads(Path(f"{out}.json").read_text())
    assert resumed["complete"] is True and resumed["trace"] == kept["trace"]
    assert resumed["outputs"]["tables"] == str(out)
