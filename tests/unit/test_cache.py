"""The trace cache: a read from it delivers exactly what reading the trace delivers.

Every test reads real traces (the samples, and damaged copies of one) three ways -- with
the cache off, cold (reading the trace and keeping its scan) and warm (from the kept
scan) -- and compares everything a reader hands out. The samples are smaller than
`MIN_TRACE_SIZE`, below which the cache is not used, so most tests lower it.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLE_TRACES, TRACES, run_retrace
from tracegen import TraceWriter, glx_context

from retrace.errors import TraceError
from retrace.trace import cache
from retrace.trace.reader import TraceReader

BIG = TRACES / "glmark2-desktop-fbo.trace"  # 280 KB, 9 frames


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of its own, used for traces of any size."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("RETRACE_CACHE_DIR", str(folder))
    monkeypatch.delenv("RETRACE_CACHE_SIZE", raising=False)
    monkeypatch.setattr(cache, "MIN_TRACE_SIZE", 0)
    return folder


def read(path: Path | str, ahead: bool = False) -> tuple[dict[str, Any], bool]:
    """Everything a reader delivers (reading `ahead` on a thread or not), and whether it
    came from the cache."""
    reader = TraceReader(path)
    batches = []
    error = None
    try:
        for batch in reader.batches(ahead):
            arrays = (batch.calls, batch.slots, batch.nodes, batch.backtraces)
            batches.append((*(bytes(a) for a in arrays), bytes(batch.pool)))
    except TraceError as e:
        error = str(e)
    sigs = reader.signatures
    facts = {
        "batches": batches,
        "error": error,
        "header": (reader.version, reader.semantic_version, reader.properties),
        "header_size": reader.header_size,
        "container": reader.container,
        "stream_bytes": reader.stream_bytes,
        "calls_read": reader.calls_read,
        "api": reader.api,
        "signatures": (sigs.functions, sigs.structs, sigs.enums, sigs.bitmasks, sigs.frames),
    }
    return facts, reader.from_cache


def read_uncached(path: Path | str) -> dict[str, Any]:
    with cache.used(False):
        facts, from_cache = read(path)
    assert not from_cache
    return facts


def scans(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.scan"))


def damaged(tmp_path: Path) -> dict[str, Path]:
    """Copies of a real trace cut off in a call, and with a snappy chunk corrupted."""
    data = BIG.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[: len(data) * 2 // 3])
    corrupt = tmp_path / "corrupt.trace"
    second_chunk = 2 + 4 + int.from_bytes(data[2:6], "little")  # magic, length, block
    corrupt.write_bytes(data[: second_chunk + 4 + 9] + b"\xff" * 7 + data[second_chunk + 20 :])
    return {"cut": cut, "corrupt": corrupt}


@pytest.mark.parametrize("trace", SAMPLE_TRACES, ids=lambda p: p.name)
def test_cold_and_warm_reads_deliver_what_the_trace_does(trace: Path, cache_dir: Path) -> None:
    expected = read_uncached(trace)
    cold, from_cache = read(trace)
    assert not from_cache and len(scans(cache_dir)) == 1
    warm, from_cache = read(trace)
    assert from_cache
    assert cold == expected
    assert warm == expected
    assert read(trace, ahead=True) == (expected, True)
    reader = TraceReader(trace)
    for _batch in reader.batches(ahead=True):
        pass
    assert reader.read_ahead is None  # (a cached scan is handed out on the caller's thread)


@pytest.mark.parametrize("damage", ["cut", "corrupt"])
def test_a_damaged_trace_ends_at_the_same_call_with_the_same_error(
    damage: str, tmp_path: Path, cache_dir: Path
) -> None:
    trace = damaged(tmp_path)[damage]
    expected = read_uncached(trace)
    assert expected["error"] is not None and expected["batches"]
    read(trace)
    warm, from_cache = read(trace)
    assert from_cache
    assert warm == expected


@pytest.mark.parametrize(
    "damage",
    [
        "index byte", "batch byte", "first batch byte", "last batch byte", "prefix byte",
        "truncated", "empty", "another build's key",
    ],
)  # fmt: skip
@pytest.mark.parametrize("ahead", [False, True], ids=["here", "ahead"])
def test_a_damaged_cache_file_is_rebuilt_never_trusted(
    damage: str, ahead: bool, cache_dir: Path
) -> None:
    """Batches are checked as they are handed out: where one fails, what follows the
    batches handed out already comes from the trace itself (read ahead on a thread, or
    not), and the file is kept anew."""
    expected = read_uncached(BIG)
    read(BIG)
    (scan,) = scans(cache_dir)
    data = bytearray(scan.read_bytes())
    prefix = cache._PREFIX.unpack_from(data)
    index_at = prefix[3]
    if damage == "index byte":
        data[index_at + 40] ^= 0x55
    elif damage == "batch byte":
        data[index_at // 2] ^= 0x01  # somewhere in the batches' buffers
    elif damage in ("first batch byte", "last batch byte"):
        import marshal

        kept = [b for b in marshal.loads(bytes(data[index_at:]))["batches"] if b[0][0][1]]
        assert len(kept) > 2  # (so that the last is handed out after others)
        calls_at = kept[0 if damage == "first batch byte" else -1][0][0][0]
        data[calls_at + 5] ^= 0x10  # in its call records
    elif damage == "prefix byte":
        data[8] ^= 0x01  # the format
    elif damage == "truncated":
        del data[index_at - 100 :]
    elif damage == "empty":
        data.clear()
    else:  # an index made by another version of retrace, with its own (valid) checksum
        import marshal

        facts = marshal.loads(bytes(data[index_at:]))
        facts["key"] = (facts["key"][0], "0.0.0", *facts["key"][2:])
        index = marshal.dumps(facts)
        data[index_at:] = index
        magic, version, _, at, _ = cache._PREFIX.unpack_from(data)
        cache._PREFIX.pack_into(data, 0, magic, version, cache.checksum(index), at, len(index))
    scan.write_bytes(bytes(data))
    again, from_cache = read(BIG, ahead)
    assert not from_cache  # read from the trace, and kept again
    assert again == expected
    rebuilt, from_cache = read(BIG)
    assert from_cache
    assert rebuilt == expected


def test_a_trace_changed_in_place_is_read_again(tmp_path: Path, cache_dir: Path) -> None:
    trace = tmp_path / "t.trace"
    shutil.copy(BIG, trace)
    read(trace)
    before = trace.stat()
    shutil.copy(damaged(tmp_path)["corrupt"], trace)  # the same size, other bytes
    os.utime(trace, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old mtime
    assert trace.stat().st_size == before.st_size and trace.stat().st_ino == before.st_ino
    facts, from_cache = read(trace)
    assert not from_cache
    assert facts == read_uncached(trace)


def test_a_read_stopped_early_keeps_nothing(cache_dir: Path) -> None:
    reader = TraceReader(BIG)
    batches = reader.batches()
    next(batches)
    assert isinstance(batches, Generator)
    batches.close()  # as a replay stopped by --frames drops it
    assert not scans(cache_dir)
    assert not [p for p in cache_dir.iterdir() if p.name.endswith(".part")]
    _facts, from_cache = read(BIG)
    assert not from_cache


def resident_kib(path: Path) -> int:
    """This process's resident KiB of its mappings of the file at `path` (Linux)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's first line
                inside = len(fields) > 5 and fields[5] == str(path)
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux's /proc")
def test_a_warm_read_leaves_none_of_the_scan_resident(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch read leaves the resident set at the next, and so does what reading it
    mapped again of the batches before (Linux maps the cached pages around a fault too):
    at the end of a read nothing of the file is resident, whatever the number of batches
    (the scan of 1 MB batches kept about 40 KB of each to the end)."""
    from retrace.trace import reader as reading

    monkeypatch.setattr(reading, "_FEED", 4 << 10)  # small batches: many, each a few pages
    read(BIG)
    (scan,) = scans(cache_dir)
    reader = TraceReader(BIG)
    assert reader.from_cache
    count = 0
    for batch in reader.batches():
        for part in (batch.calls, batch.slots, batch.nodes, batch.pool):
            bytes(part)  # read every page, as compiling does
        count += 1
    assert count > 20, count
    assert resident_kib(scan) <= 8, (resident_kib(scan), scan.stat().st_size // 1024)


def test_least_recently_used_scans_go_first(cache_dir: Path) -> None:
    names = ["glmark2-desktop-fbo", "glmark2-buffer-map", "glmark2-texture-mipmap"]
    sizes: dict[Path, int] = {}
    for name in names:
        read(TRACES / f"{name}.trace")
        (new,) = set(scans(cache_dir)) - set(sizes)
        sizes[new] = new.stat().st_size
    fbo, buffer_map, mipmap = sizes
    read(TRACES / "glmark2-desktop-fbo.trace")  # used again: now the most recent
    cache.evict(str(cache_dir), sizes[fbo] + sizes[mipmap])
    assert scans(cache_dir) == sorted([fbo, mipmap])


@pytest.mark.parametrize(
    ("bound", "foreseen", "note"),
    [
        ("100K", None, r"it \(280 KiB; its scan is larger\)"),  # the file alone is larger
        ("1M", None, r"its scan \(about [1-9] MiB\)"),  # its scan outgrows the bound
        ("1M", 0, r"its scan \(about [1-9] MiB\)"),  # foreseen from the first batch on
    ],
)
def test_a_scan_bigger_than_the_bound_is_not_kept(
    bound: str,
    foreseen: int | None,
    note: str,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Read without the cache, one note said (a multi-GB trace would otherwise write up to
    the whole bound in every run, to drop it)."""
    monkeypatch.setenv("RETRACE_CACHE_SIZE", bound)
    monkeypatch.setattr(cache, "_noted", False)
    if foreseen is not None:
        monkeypatch.setattr(cache, "_FORESEEN", foreseen)
    assert read(BIG)[0] == read(BIG)[0] == read_uncached(BIG)
    assert not scans(cache_dir)
    assert not [p for p in cache_dir.glob("*") if p.name.endswith(".part")]
    (line,) = capfd.readouterr().err.splitlines()
    limit = bound.replace("K", " KiB").replace("M", " MiB")
    assert re.fullmatch(
        f"retrace: note: {re.escape(str(BIG))} is read without the trace cache: {note} would "
        f"not fit in the cache's {limit} \\(RETRACE_CACHE_SIZE\\)",
        line,
    )


def test_a_cache_that_cannot_be_written_costs_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RETRACE_CACHE_DIR", str(blocker / "cache"))  # under a file
    monkeypatch.setattr(cache, "MIN_TRACE_SIZE", 0)
    facts, from_cache = read(BIG)
    assert not from_cache and facts == read_uncached(BIG)
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("retrace: warning: the trace cache in ")
    assert "Not a directory" in lines[0]


@pytest.mark.parametrize(
    ("given", "size"), [("", cache.DEFAULT_SIZE), ("0", 0), ("123", 123), ("1.5G", 3 << 29)]
)
def test_cache_size(given: str, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRACE_CACHE_SIZE", given)
    assert cache.size_limit() == size


def test_a_bad_cache_size_is_one_clear_error(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRACE_CACHE_SIZE", "lots")
    done = run_retrace("info", str(BIG))
    assert done.returncode != 0
    assert done.stderr.decode() == (
        "retrace: error: RETRACE_CACHE_SIZE='lots' is not a size: give bytes, or a number "
        "with K, M or G\n"
    )


def test_size_zero_turns_the_cache_off(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRACE_CACHE_SIZE", "0")
    read(BIG)
    assert not cache_dir.exists()


def test_small_traces_are_read_directly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RETRACE_CACHE_DIR", str(tmp_path / "cache"))
    assert BIG.stat().st_size < cache.MIN_TRACE_SIZE
    read(BIG)
    assert not (tmp_path / "cache").exists()


def big_trace(path: Path) -> Path:
    """A synthetic trace above MIN_TRACE_SIZE (the CLI runs with the real threshold)."""
    w = TraceWriter()
    glx_context(w)
    noise = random.Random(13)  # (snappy cannot shrink it)
    for _ in range(300):
        data = noise.randbytes(4096)
        w.call("glBufferData", ("target", "size", "data", "usage"), {2: w.blob(data)})
    path.write_bytes(w.snappy())
    assert path.stat().st_size > cache.MIN_TRACE_SIZE
    return path


def test_cli_no_cache_and_cache_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = big_trace(tmp_path / "big.trace")
    folder = tmp_path / "cache"
    monkeypatch.setenv("RETRACE_CACHE_DIR", str(folder))
    plain = run_retrace("info", "--no-cache", str(trace))
    assert plain.returncode == 0 and not folder.exists()
    cold = run_retrace("info", str(trace))
    warm = run_retrace("info", str(trace))
    assert cold.stdout == warm.stdout == plain.stdout
    assert len(scans(folder)) == 1
    dump = run_retrace("dump", str(trace)).stdout
    assert dump == run_retrace("dump", "--no-cache", str(trace)).stdout
    assert b'"traces": 1' in run_retrace("cache", "info").stdout
    cleared = run_retrace("cache", "clear")
    assert cleared.stdout.startswith(b"removed 1 cached traces")
    assert not scans(folder)


def test_a_first_read_hashes_the_trace_once_on_a_thread_ahead(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`digest_ahead` (the replaying child's first step) hashes a trace whose digest is not
    remembered on a thread; the read takes that digest instead of hashing again."""
    from retrace.trace import digest

    hashed: list[str] = []
    real = digest.file_digest

    def counting(path: str) -> tuple[int, str]:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(digest, "file_digest", counting)
    monkeypatch.setattr(cache, "overlap_pays", lambda: True)
    cache.digest_ahead(str(BIG))
    assert str(BIG) in cache._hashing
    expected = read_uncached(BIG)
    cold, from_cache = read(BIG)
    assert not from_cache and cold == expected and hashed == [str(BIG)]
    assert not cache._hashing  # taken
    cache.digest_ahead(str(BIG))  # remembered now: nothing to hash ahead
    assert not cache._hashing
    warm, from_cache = read(BIG)
    assert from_cache and warm == expected and hashed == [str(BIG)]
