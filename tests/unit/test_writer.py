"""The trace writer: a trace copied call by call reads back as the same calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracegen import TraceWriter, every_value_kind

from retrace.trace.dump import dump_calls
from retrace.trace.model import NodeLists
from retrace.trace.reader import TraceReader
from retrace.trace.writer import SnappyFile

TRACES = Path(__file__).parents[2] / "traces"


def copy(src: Path, dst: Path) -> None:
    reader = TraceReader(src)
    writer = TraceWriter(reader.version, reader.properties, reader.semantic_version)
    with open(dst, "wb") as f:
        out = SnappyFile(f)
        for batch in reader.batches():
            values = NodeLists(batch)
            for i in range(len(batch)):
                writer.copy_call(batch, values, i, reader.signatures)
            out.write(writer.take())
        out.write(writer.take())
        out.close()


def dumped(path: Path) -> str:
    return "".join(dump_calls(TraceReader(path)))


@pytest.mark.parametrize("name", ["glxgears.trace", "persistent-map.trace", "es2gears.trace"])
def test_a_copied_trace_dumps_the_same(name, tmp_path):
    copy(TRACES / name, tmp_path / "copy.trace")
    assert dumped(tmp_path / "copy.trace") == dumped(TRACES / name)


@pytest.mark.parametrize("version", range(7))
def test_every_value_kind_copies_in_every_version(version, tmp_path):
    """Enums, bitmasks and structs get their definitions again at their first use."""
    w = TraceWriter(version=version, properties={"process.name": "app"})
    every_value_kind(w)
    (tmp_path / "src.trace").write_bytes(w.snappy())
    copy(tmp_path / "src.trace", tmp_path / "copy.trace")
    original = dumped(tmp_path / "src.trace")
    assert "glStructs" in original
    assert dumped(tmp_path / "copy.trace") == original


def test_big_streams_are_written_in_blocks(tmp_path):
    """A stream over a block's size spans several snappy blocks and reads back whole."""
    w = TraceWriter()
    for _ in range(3):
        w.call("glBufferData", ("target", "size", "data"), {2: w.blob(bytes(700_000))})
    with open(tmp_path / "big.trace", "wb") as f:
        out = SnappyFile(f)
        out.write(w.take())
        out.close()
    assert dumped(tmp_path / "big.trace").count("glBufferData") == 3
