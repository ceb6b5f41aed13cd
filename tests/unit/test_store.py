"""The mmap-backed result store: growth, persistence, missing values, RSS, disk errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrace.errors import RetraceError
from retrace.writer.store import MANIFEST, Store, missing_mask, missing_value

PAGE = 4096


@pytest.mark.parametrize(
    ("chunk_bytes", "sizes"),
    [
        # chunk = one page: +4 KiB every time.
        (PAGE, [PAGE * n for n in range(1, 21)]),
        # doubling 4 KiB -> 16 KiB, then +16 KiB chunks.
        (4 * PAGE, [PAGE, 2 * PAGE, 4 * PAGE, 8 * PAGE, 12 * PAGE, 16 * PAGE, 20 * PAGE]),
    ],
)
def test_growth_past_several_chunks(tmp_path: Path, chunk_bytes: int, sizes: list[int]) -> None:
    with Store(str(tmp_path), chunk_bytes=chunk_bytes, release_bytes=PAGE) as store:
        col = store.column("opengl/GPU Duration@CALL", np.int64)
        seen: list[int] = []
        for i in range(10_000):  # 80,000 bytes: 20 pages
            col.append(i * 3)
            size = os.path.getsize(col.path)
            if not seen or seen[-1] != size:
                seen.append(size)
        assert seen == sizes
        assert len(col) == 10_000
        assert np.array_equal(col.view(), np.arange(10_000) * 3)
        col.extend(np.arange(5_000))  # extend across chunks too
        assert len(col) == 15_000
        assert np.array_equal(col.view()[10_000:], np.arange(5_000))
        assert col.view()[9_999] == 29_997


def test_set_grows_and_fills_gaps_with_missing(tmp_path: Path) -> None:
    with Store(str(tmp_path), chunk_bytes=PAGE) as store:
        col = store.column("x", np.float32)
        col.set(3, 1.5)
        col.append(2.0)
        col.set(0, 0.5)
        col.set(20_000, 9.0)
        view = col.view()
        assert len(col) == len(view) == 20_001
        assert view[0] == 0.5 and view[3] == 1.5 and view[4] == 2.0 and view[20_000] == 9.0
        assert np.isnan(view[1]) and np.isnan(view[2]) and np.isnan(view[5:20_000]).all()
        with pytest.raises(IndexError):
            col.set(-1, 1.0)


def test_view_is_read_only_and_read_copies(tmp_path: Path) -> None:
    with Store(str(tmp_path)) as store:
        col = store.column("x", np.int32)
        col.extend([1, 2, 3, 4])
        view = col.view()
        with pytest.raises(ValueError):
            view[0] = 7
        block = col.read(1, 10)
        assert block.tolist() == [2, 3, 4]
        block[0] = 99
        assert col.view()[1] == 2


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.int64, np.iinfo(np.int64).min),
        (np.int32, np.iinfo(np.int32).min),
        (np.int8, -128),
        (np.uint32, np.iinfo(np.uint32).max),
        (np.uint64, np.iinfo(np.uint64).max),
    ],
)
def test_integer_missing_sentinels(tmp_path: Path, dtype: type, expected: int) -> None:
    assert missing_value(dtype) == expected
    with Store(str(tmp_path)) as store:
        col = store.column("c", dtype)
        assert col.missing == expected
        col.set(2, 5)
        assert col.view().tolist() == [expected, expected, 5]
        assert missing_mask(col.view()).tolist() == [True, True, False]


def test_float_missing_is_nan_and_bad_dtypes_rejected(tmp_path: Path) -> None:
    assert np.isnan(missing_value(np.float64)) and np.isnan(missing_value(np.float32))
    with Store(str(tmp_path)) as store:
        with pytest.raises(ValueError):
            store.column("b", np.bool_)
        col = store.column("f", np.float64)
        assert store.column("f", np.float64) is col
        with pytest.raises(ValueError):
            store.column("f", np.int64)


def test_keys_sanitised_without_collisions(tmp_path: Path) -> None:
    with Store(str(tmp_path)) as store:
        a = store.column("opengl/GPU Duration@FRAME", np.int64)
        b = store.column("opengl:GPU Duration@FRAME", np.int64)
        assert a.path != b.path
        assert os.path.dirname(a.path) == store.path
        assert all(c.isalnum() or c in "._-~" for c in os.path.basename(a.path))


def test_removed_on_close_without_keep(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    assert os.path.basename(store.path).startswith("retrace-store-")
    store.column("x", np.int64).append(1)
    store.close()
    assert not os.path.exists(store.path)
    store.close()  # idempotent
    with Store(str(tmp_path)) as other:
        path = other.path
    assert not os.path.exists(path)
    assert list(tmp_path.iterdir()) == []


def test_a_store_is_private_in_tmpdir_and_removed_with_what_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made in $TMPDIR (elsewhere, as tempfile finds, where that cannot hold it), readable
    by its owner only; removed whole, a folder put into it included."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    store = Store()
    assert os.path.dirname(store.path) == str(tmp_path)
    assert os.stat(store.path).st_mode & 0o777 == 0o700
    os.mkdir(os.path.join(store.path, "more"))
    store.close()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("TMPDIR", str(tmp_path / "nope"))
    with Store() as elsewhere:
        assert os.path.isdir(elsewhere.path) and not (tmp_path / "nope").exists()


def test_kept_store_reloads(tmp_path: Path) -> None:
    with Store(str(tmp_path), keep=True) as store:
        ints = store.column("calls/no", np.int64)
        ints.extend(np.arange(100_000))
        floats = store.column("frames/busy", np.float64)
        floats.set(2, 0.25)
        path = store.path
    manifest = json.loads((Path(path) / MANIFEST).read_text())
    assert {c["key"]: c["length"] for c in manifest["columns"]} == {
        "calls/no": 100_000,
        "frames/busy": 3,
    }
    loaded = Store.load(path)
    assert list(loaded) == ["calls/no", "frames/busy"]
    assert loaded["calls/no"].dtype == np.int64
    assert np.array_equal(loaded["calls/no"].view(), np.arange(100_000))
    busy = loaded["frames/busy"].view()
    assert np.isnan(busy[:2]).all() and busy[2] == 0.25
    loaded["calls/no"].append(-1)  # still growable
    assert loaded.manifest()["columns"][0]["length"] == 100_001
    loaded.close()
    assert Store.load(path)["calls/no"].view()[-1] == -1
    Store.load(path, keep=False).close()
    assert not os.path.exists(path)


def test_load_of_a_non_store_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(RetraceError, match="cannot read store manifest"):
        Store.load(str(tmp_path))
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(RetraceError, match="not a retrace store manifest"):
        Store.load(str(tmp_path))


def test_missing_directory_is_one_line_error(tmp_path: Path) -> None:
    where = tmp_path / "nope"
    with pytest.raises(RetraceError) as info:
        Store(str(where))
    message = str(info.value)
    assert "\n" not in message and str(where) in message and "No such file" in message


def test_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    col = store.column("x", np.int64)
    store.close()
    with pytest.raises(ValueError, match="closed"):
        col.append(1)
    with pytest.raises(ValueError, match="closed"):
        store.column("y", np.int64)


RSS_PROBE = textwrap.dedent(
    """
    import sys
    import numpy as np
    from retrace.writer.store import Store

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    with Store(sys.argv[1]) as store:
        col = store.column("big", np.int64)
        col.append(0)
        before = rss_kib()
        append = col.append
        for i in range(1, 20_000_000):
            append(i)
        after = rss_kib()
        view = col.view()
        assert len(view) == 20_000_000 and view[-1] == 19_999_999 and view[12_345_678] == 12_345_678
        print(before, after)
    """
)


def test_rss_bounded_for_20_million_rows(tmp_path: Path) -> None:
    # 20 M int64 = 160 MB of data; resident pages are released every 1 MiB.
    result = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    before, after = map(int, result.stdout.split())
    assert after - before < 16 * 1024, f"VmRSS grew by {after - before} KiB"


def test_disk_full_is_one_line_retrace_error(tiny_tmpfs: Path) -> None:
    with Store(str(tiny_tmpfs)) as store:
        col = store.column("calls/cpu", np.int64)
        written = 0
        with pytest.raises(RetraceError) as info:
            for i in range(1_000_000):  # 8 MB into a 1 MiB filesystem
                col.append(i)
                written += 1
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(col.path + ": cannot grow store column")
        assert "No space left on device" in message
        assert len(col) == written > 0
        assert np.array_equal(col.view(), np.arange(written))  # what fitted is intact


def test_load_refuses_truncated_column(tmp_path: Path) -> None:
    with Store(str(tmp_path), keep=True) as store:
        col = store.column("x", np.int64)
        col.extend(np.arange(10_000))
        path, file = store.path, col.path
    os.truncate(file, 8)
    with pytest.raises(RetraceError, match="shorter than its manifest"):
        Store.load(path)


def test_keep_decided_late(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    store.column("x", np.int64).append(5)
    store.keep = True  # e.g. a later pass failed: keep what the earlier ones measured
    store.close()
    assert Store.load(store.path)["x"].view().tolist() == [5]
    probe = (
        "import sys; from retrace.writer.store import Store\n"
        "kept = Store(sys.argv[1], keep=True); dropped = Store(sys.argv[1])\n"
        "print(kept.path, dropped.path)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True
    )
    kept, dropped = out.stdout.split()
    assert os.path.isdir(kept) and not os.path.exists(dropped)  # never closed: exit decides


def test_a_flush_writes_only_the_columns_whose_rows_changed(tmp_path: Path) -> None:
    """An msync waits for the disk: a column that is empty, or that no row was added to or
    rewritten in since the last flush, is not written again."""

    class Counted:  # the column's mapping, its msyncs counted
        def __init__(self, mm: object) -> None:
            self.mm, self.flushes = mm, 0

        def flush(self) -> None:
            self.flushes += 1

    with Store(str(tmp_path)) as store:
        col = store.column("a", np.int64)
        col.append(1)  # (mapped now)
        col._mm = counted = Counted(col._mm)  # type: ignore[assignment]
        col.flush()
        col.flush()
        assert counted.flushes == 1
        col.set(0, 7)  # a row rewritten
        col.flush()
        col.extend([2, 3])
        col.set(2, 4)  # a row added since the last flush, rewritten: written once
        col.flush()
        col.flush()
        assert counted.flushes == 3
        col._mm = counted.mm  # type: ignore[assignment]
        assert col.view().tolist() == [7, 2, 4]
        assert store.column("empty", np.int64)._mm is None


def test_a_flush_is_a_checkpoint_a_later_writer_cannot_spoil(tmp_path: Path) -> None:
    """What the profiler's resume relies on: `meta` and the lengths of the last flush come
    back; rows and columns a writer added after it (then died) are not part of the store,
    and `recover` takes such rows back only when asked (after a crash)."""
    store = Store(str(tmp_path), keep=True)
    store.meta["progress"] = {"pass": 1}
    store.column("a", np.int64).extend([1, 2, 3])
    store.flush()
    store.column("a", np.int64).extend([4, 5])  # the pass that was cut short
    store.column("b", np.float64).extend([0.5])
    store.close(flush=False)
    resumed = Store.load(store.path)
    assert resumed.meta == {"progress": {"pass": 1}} and list(resumed) == ["a"]
    assert resumed.lengths() == [3]
    b = resumed.column("b", np.float64)  # replaces the file left behind
    assert len(b) == 0 and os.path.getsize(b.path) == 0
    resumed["a"].recover(5)
    assert resumed["a"].view().tolist() == [1, 2, 3, 4, 5]
    resumed["a"].recover(10**9)  # beyond what the file holds: ignored
    assert len(resumed["a"]) == 5
    resumed.close(flush=False)
    assert Store.load(store.path).lengths() == [3]  # close(flush=False) kept the checkpoint
