"""Damaged traces: cut off, corrupt, or not traces at all.

The contract: every intact call before the damage is delivered, calls that had
entered but not returned come out marked incomplete, then one `TraceError`
names the file, the offset and the problem. The CLI turns that into one stderr
line and a non-zero exit, with the intact calls already printed.
"""

from __future__ import annotations

import contextlib
import gzip
import random
import struct
import subprocess
import sys

import brotli
import pytest
import zstandard
from conftest import run_retrace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracegen import TraceWriter, every_value_kind, threads_and_leftovers, wrap_snappy

from retrace.errors import TraceError
from retrace.trace.dump import dump_calls
from retrace.trace.flags import CallFlag
from retrace.trace.model import NodeLists, Tag
from retrace.trace.reader import TraceReader


def sample(version: int = 6) -> TraceWriter:
    w = TraceWriter(version=version)
    every_value_kind(w)
    threads_and_leftovers(w)
    return w


def read_all(path) -> tuple[list[tuple[int, int]], TraceError | None]:
    """(call number, flags) of every call delivered, and the error that ended reading."""
    reader = TraceReader(path)
    calls: list[tuple[int, int]] = []
    try:
        for batch in reader.batches():
            calls.extend(
                zip(batch.column("no").tolist(), batch.column("flags").tolist(), strict=True)
            )
    except TraceError as e:
        return calls, e
    return calls, None


def examples(count: int) -> settings:
    """`count` examples sharing one tmp_path (each writes its file over the last's); the
    profile's other settings (tests/conftest.py) kept."""
    ignored = [*settings().suppress_health_check, HealthCheck.function_scoped_fixture]
    return settings(max_examples=count, suppress_health_check=ignored)


def dump_text(path) -> tuple[str, TraceError | None]:
    reader = TraceReader(path)
    parts: list[str] = []
    try:
        for text in dump_calls(reader):
            parts.append(text)
    except TraceError as e:
        return "".join(parts), e
    return "".join(parts), None


@examples(60)
@given(chunk=st.integers(min_value=1, max_value=400))
def test_chunk_boundaries_do_not_change_the_result(tmp_path, chunk):
    """Events split across container chunks at every position parse as if whole."""
    w = sample()
    whole, split = tmp_path / "whole.trace", tmp_path / f"split{chunk}.trace"
    whole.write_bytes(w.snappy())
    split.write_bytes(w.snappy(chunk_size=chunk))
    assert dump_text(split) == dump_text(whole)


@pytest.mark.parametrize("version", [3, 6])
def test_cut_at_every_offset_delivers_every_intact_call(tmp_path, version):
    w = sample(version)
    stream = w.stream
    header = len(TraceWriter(version=version).stream)
    path = tmp_path / "cut.trace"
    for cut in range(header, len(stream)):
        path.write_bytes(wrap_snappy(stream[:cut], chunk_size=64))
        calls, error = read_all(path)
        done = [e for e in w.events if e[0] <= cut]
        left = {no for end, kind, no in done if kind == "leave"}
        entered = [no for end, kind, no in done if kind == "enter"]
        complete = {no for no, flags in calls if not flags & CallFlag.INCOMPLETE}
        incomplete = [no for no, flags in calls if flags & CallFlag.INCOMPLETE]
        assert complete == left & set(entered), cut
        # calls that entered and had not left are delivered too, in the order they entered
        assert incomplete == [no for no in entered if no not in left], cut
        at_boundary = cut in {header} | {end for end, _, _ in w.events}
        if at_boundary:
            assert error is None, cut
        else:
            assert error is not None and "cut off" in error.problem, cut
            assert error.offset is not None and header <= error.offset <= cut, cut


def test_cut_trace_through_the_cli_prints_calls_then_one_error_line(tmp_path):
    w = sample()
    cut = w.events[40][0] + 1  # inside the next event
    path = tmp_path / "crashed.trace"
    path.write_bytes(wrap_snappy(w.stream[:cut]))
    r = run_retrace("dump", str(path))
    assert r.returncode == 1
    assert r.stdout.startswith(b"0 glFlush()\n")
    assert r.stdout.endswith(b" // incomplete\n")  # the call whose leave was cut off
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and "cut off" in err and f"byte {w.events[40][0]}" in err


CONTAINERS = {
    "snappy": wrap_snappy,
    "gzip": gzip.compress,
    "brotli": brotli.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.mark.parametrize("container", CONTAINERS)
def test_containers_read_alike(tmp_path, container):
    w = sample()
    path = tmp_path / f"t.{container}"
    path.write_bytes(CONTAINERS[container](w.stream))
    reference = tmp_path / "ref.trace"
    reference.write_bytes(w.snappy())
    assert TraceReader(path).container == container
    assert dump_text(path) == dump_text(reference)


@pytest.mark.parametrize("container", CONTAINERS)
def test_cut_container_keeps_what_came_before(tmp_path, container):
    w = TraceWriter()
    for i in range(3000):
        w.call("glVertex3f", ("x", "y", "z"), {0: w.float(i), 1: w.float(-i), 2: w.float(0.5)})
    data = CONTAINERS[container](w.stream)
    path = tmp_path / "cut.bin"
    for fraction in (0.35, 0.7, 0.97):
        path.write_bytes(data[: int(len(data) * fraction)])
        try:
            calls, error = read_all(path)
        except TraceError as e:  # cut inside the header: nothing to deliver
            calls, error = [], e
        assert error is not None, (container, fraction)
        assert str(path) in str(error)
        assert [no for no, _ in calls] == list(range(len(calls)))  # an intact prefix, in order


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9])
def test_a_trace_cut_inside_its_last_snappy_chunk_keeps_the_calls_before_the_cut(
    tmp_path, fraction
):
    """The intact calls of a chunk the file ends in are delivered too (they were all lost:
    a cut snappy block does not decode), in about the share of the chunk that is there."""
    w = TraceWriter()
    for i in range(20000):
        w.call("glVertex3f", ("x", "y", "z"), {0: w.float(i), 1: w.float(-i), 2: w.float(0.5)})
    data = wrap_snappy(w.stream, chunk_size=len(w.stream))  # one chunk
    path = tmp_path / "cut.trace"
    path.write_bytes(data[: int(len(data) * fraction)])
    calls, error = read_all(path)
    assert error is not None and "file ends inside a chunk" in str(error)
    assert [no for no, _ in calls] == list(range(len(calls)))
    assert fraction - 0.1 < len(calls) / 20000 < fraction


mutations = st.lists(
    st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
    min_size=1,
    max_size=8,
)


@examples(300)
@given(mutations=mutations, version=st.sampled_from([2, 4, 6]))
def test_fuzzed_streams_fail_cleanly(tmp_path, mutations, version):
    """Corrupt bytes anywhere: either a valid (different) trace or a TraceError, never a crash."""
    stream = bytearray(sample(version).stream)
    for position, value in mutations:
        stream[position % len(stream)] = value
    path = tmp_path / "fuzz.trace"
    path.write_bytes(wrap_snappy(bytes(stream), chunk_size=50))
    with contextlib.suppress(TraceError):  # damage before the first call fails cleanly too
        dump_text(path)


@examples(200)
@given(data=st.binary(min_size=1, max_size=2000))
def test_random_bytes_fail_cleanly(tmp_path, data):
    path = tmp_path / "random.trace"
    for candidate in (data, wrap_snappy(data), wrap_snappy(b"\x06\x06\x00" + data)):
        path.write_bytes(candidate)
        with contextlib.suppress(TraceError):
            dump_text(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"hello, this is a text file and not a trace\n" * 20, "not a trace"),
        # text that brotli (no magic) decodes for a few bytes before it ends or fails
        (b"hello\n", "at byte 0: not a trace file"),
        (b"#!/bin/sh\nexec true\n", "at byte 0: not a trace file"),
        (b"GL trace\n", "at byte 0: not a trace file"),
        (wrap_snappy(b"\x07\x07\x00"), "unsupported trace format version 7"),
        (wrap_snappy(b""), "empty trace"),
        (wrap_snappy(b"\x06\x06\x00\x00\x00\x00\x09"), "cut off"),
        (wrap_snappy(b"\x06\x06\x00\x07"), "unknown event type 0x07"),
        (b"at\xff\xff\x00\x00abc", "snappy container"),
    ],
)
def test_bad_files_give_one_clear_line(tmp_path, content, message):
    path = tmp_path / "bad.trace"
    path.write_bytes(content)
    for command in ("dump", "info"):
        r = run_retrace(command, str(path))
        err = r.stderr.decode()
        assert r.returncode == 1, (command, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("retrace: error: ") and str(path) in err and message in err, err


def test_missing_file(tmp_path):
    r = run_retrace("dump", str(tmp_path / "nope.trace"))
    assert r.returncode != 0 and b"Traceback" not in r.stderr and b"nope.trace" in r.stderr


def test_random_chunking_of_a_big_blob(tmp_path):
    """A blob far larger than a chunk waits for its bytes instead of rescanning forever."""
    w = TraceWriter()
    payload = random.Random(1).randbytes(3 << 20)
    w.call(
        "glBufferData",
        ("target", "size", "data"),
        {0: w.int(0x8892), 1: w.int(len(payload)), 2: w.blob(payload)},
    )
    w.call("glFlush")
    path = tmp_path / "blob.trace"
    path.write_bytes(w.snappy(chunk_size=4096))
    text, error = dump_text(path)
    assert error is None
    assert f"data = blob({len(payload)})" in text and "1 glFlush()" in text


@pytest.mark.parametrize("chunk_size", [4096, 1 << 20])
def test_blobs_of_megabytes_read_back_exactly(tmp_path, chunk_size):
    """The scanner hands a batch's pool of megabytes over without copying it (a texture
    alone in its batch) or appends it after the calls before it: either way every blob and
    string reads back as written, in batches of any cut."""
    rng = random.Random(2)
    w = TraceWriter()
    written: list[bytes] = []
    for size in (5 << 20, 100, 6 << 20, 7 << 20, 3, 9 << 20):
        written.append(rng.randbytes(size))
        w.call(
            "glBufferData",
            ("target", "size", "data", "label"),
            {0: w.int(0x8892), 1: w.int(size), 2: w.blob(written[-1]), 3: w.string("x" * 9)},
        )
    w.call("glFlush")
    path = tmp_path / "blobs.trace"
    path.write_bytes(w.snappy(chunk_size=chunk_size))
    read: list[bytes] = []
    strings: list[bytes] = []
    for batch in TraceReader(path).batches():
        values = NodeLists(batch)
        for i, tag in enumerate(values.tags):
            (read if tag == Tag.BLOB else strings if tag == Tag.STRING else []).append(
                values.bytes(i)
            )
    assert read == written
    assert strings == [b"x" * 9] * len(written)


def _limit_memory() -> None:
    """Run under 1.5 GiB of address space: a claimed 4 GiB allocation fails there."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (struct.pack("<I", 0xFFFFFFFF) + b"x" * 20, "file ends inside a chunk (20 of 4294967295"),
        (struct.pack("<I", 6) + b"\xff\xff\xff\xff\x0f\x00", "6 bytes with a length of 4294967295"),
        (struct.pack("<I", 6) + b"\xff" * 6, "6 bytes with no length"),
    ],
    ids=["chunk length", "block header", "unterminated block header"],
)
def test_snappy_lengths_are_checked_before_allocating(tmp_path, damage, message):
    """A corrupt chunk length or block header claiming gigabytes is an error, not an
    allocation (cramjam aborts the process when one fails)."""
    w = TraceWriter()
    w.call("glFlush")
    path = tmp_path / "claims.trace"
    path.write_bytes(w.snappy() + damage)
    r = subprocess.run(
        [sys.executable, "-m", "retrace", "dump", str(path)],
        capture_output=True,
        timeout=60,
        preexec_fn=_limit_memory,
    )
    assert r.returncode == 1 and r.stdout == b"0 glFlush()\n"
    err = r.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("retrace: error: ") and message in err, err
