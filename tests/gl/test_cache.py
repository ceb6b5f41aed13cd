"""Replays and profiles are the same with the trace cache cold, warm, damaged, and off,
and whatever batches the cache file was cut into.

The real CLI runs on real sample traces and on a copy cut off mid-call; the samples are
smaller than `cache.MIN_TRACE_SIZE`, so the CLI runs with that threshold lowered to 0
(and nothing else changed). Compared: the snapshots' MD5s, the tables of a profile whose
values are deterministic on llvmpipe (pixel counts), stderr and the exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES
from tracegen import wrap_snappy

from retrace.trace.container import TraceStream

TRACE = TRACES / "glmark2-desktop-fbo.trace"  # 5 frames, render to texture
CUTS = sorted((TRACES / "corpus").glob("*.trace"))  # real programs' frames (Qt, LOVE, mpv)
_CLI = (
    "from retrace.trace import cache; cache.MIN_TRACE_SIZE = 0; "
    "from retrace.main import main; main()"
)


def retrace(*args: str | Path) -> tuple[int, str, str]:
    """The CLI with every trace cached: (exit status, stdout less the timing line, stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", _CLI, *map(str, args)], capture_output=True, text=True, timeout=300
    )
    out = "".join(
        line for line in done.stdout.splitlines(keepends=True) if not line.startswith("Rendered")
    )
    return done.returncode, out, done.stderr


@pytest.fixture(params=["whole", "cut"])
def trace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "whole":
        return TRACE
    stream = b"".join(TraceStream(str(TRACE)))
    cut = tmp_path / "cut.trace"
    cut.write_bytes(wrap_snappy(stream[:-1500]))  # in a call of the last frame
    return cut


@pytest.mark.parametrize(
    "command",
    [
        ("replay", "-s", "-", "-S", "*/frame", "--snapshot-format", "MD5"),
        ("profile", "--quiet", "--pcalls", "opengl: Pixels Drawn", "--pdrawcalls",
         "opengl: Pixels Drawn; pipeline: Fragment Shader Invocations"),
    ],
    ids=["replay", "profile"],
)  # fmt: skip
def test_the_same_cold_warm_and_without_cache(
    command: tuple[str, ...], trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRACE_CACHE_DIR", str(tmp_path / "cache"))
    uncached = retrace(*command, "--no-cache", trace)
    assert not (tmp_path / "cache").exists()
    cold = retrace(*command, trace)
    (scan,) = (tmp_path / "cache").glob("*.scan")
    os.utime(scan, ns=(0, 0))
    warm = retrace(*command, trace)
    assert scan.stat().st_mtime_ns > 0  # read from the cache (which marks it used)
    data = bytearray(scan.read_bytes())
    data[len(data) // 2] ^= 0x40  # in a batch's records
    scan.write_bytes(data)
    damaged = retrace(*command, trace)
    assert scan.read_bytes() != data  # not trusted: the trace was read and kept again
    assert uncached == cold == warm == damaged
    status, out, err = warm
    if trace == TRACE:
        assert status == 0 and len(out.splitlines()) >= 5, err
    else:
        assert status != 0 and out
        assert err.strip().splitlines()[-1].startswith(f"retrace: error: {trace} at byte ")


# A cache file filled by a read that fed the scanner `argv[2]` bytes at a time: its batches
# are cut elsewhere than a read of this build cuts them (retrace fed whole container chunks
# before 256 KiB feeds, under the same cache key).
_FILL = (
    "import sys; from retrace.trace import cache, reader; cache.MIN_TRACE_SIZE = 0; "
    "reader._FEED = int(sys.argv[2]); trace = reader.TraceReader(sys.argv[1]); "
    "assert not trace.from_cache; [None for batch in trace.batches()]"
)


@pytest.mark.parametrize("feed", [1 << 40, 4 << 10], ids=["whole-chunks", "4KiB"])
@pytest.mark.parametrize("trace", CUTS, ids=lambda p: p.stem)
def test_the_same_from_a_cache_cut_into_other_batches(
    trace: Path, feed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every frame's MD5 from a cache file of other batches equals an uncached run's: the
    replay does not depend on where batches end (qt6-qml clears its window before its first
    glViewport, which came a batch later in a read of this build, and earlier in the cache
    file of an older one: frame 0 was black on a first run and the scene on a cached one)."""
    monkeypatch.setenv("RETRACE_CACHE_DIR", str(tmp_path))
    command = ("replay", "-s", "-", "--snapshot-format", "MD5")
    uncached = retrace(*command, "--no-cache", trace)
    subprocess.run([sys.executable, "-c", _FILL, str(trace), str(feed)], check=True, timeout=300)
    (scan,) = tmp_path.glob("*.scan")
    os.utime(scan, ns=(0, 0))
    cached = retrace(*command, trace)
    assert scan.stat().st_mtime_ns > 0  # read from that cache file
    assert cached == uncached
    status, out, err = cached
    assert status == 0 and len(out.split()) >= 3, err
