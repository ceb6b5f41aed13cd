"""The snappy container's chunks, read as views of one reused buffer (`TraceStream.views`,
what the reader scans) or as bytes of their own (iterating): the same stream either way,
chunk by chunk, with chunks that shrink and grow (each view as long as its own chunk)."""

from __future__ import annotations

from itertools import cycle

from conftest import SAMPLE_TRACES
from tracegen import wrap_snappy

from retrace.trace.container import TraceStream
from retrace.trace.reader import read_counts


def test_views_of_a_reused_buffer_read_the_same_chunks_as_bytes(tmp_path):
    source = min(SAMPLE_TRACES, key=lambda p: p.stat().st_size)
    stream = b"".join(TraceStream(str(source)))
    sizes = cycle([4096, 100, 9000, 1, 7000, 64])  # smaller after larger, and larger
    path = tmp_path / "chunks.trace"
    with path.open("wb") as f:
        f.write(b"at")
        at = 0
        while at < len(stream):
            size = next(sizes)
            f.write(wrap_snappy(stream[at : at + size])[2:])  # one block, without the magic
            at += size
    views = [bytes(view) for view in TraceStream(str(path)).views()]  # each before the next
    assert views == [bytes(chunk) for chunk in TraceStream(str(path))]
    assert b"".join(views) == stream and len(views) > 10
    assert read_counts(str(path)) == read_counts(str(source))
