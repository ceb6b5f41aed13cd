"""Writing a trimmed trace: the calls its guess keeps before the part, then the part.

The guess (`choose`) keeps what a `SetupFilter` keeps, less the uploads no frame
of the part can see (`data.Uploads`) and the settings set again before
anything reads them (`state.Liveness`); it notes why each call it leaves out was
left out, for `widen.py` to add back what the frames turn out to need.

Calls are copied from the scanner's records (`TraceWriter.copy_call`), in the
order they are delivered, with the original's header, properties, thread ids and
FAKE flags; the trace ends after the part's last call.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any, NamedTuple

from retrace.trace.model import NodeLists, Tag
from retrace.trace.reader import TraceReader
from retrace.trace.writer import SnappyFile, TraceWriter
from retrace.trim.data import Cuts, Unseen, Uploads, byte_kind
from retrace.trim.keep import Call, SetupFilter
from retrace.trim.outline import Part
from retrace.trim.state import Liveness

# why the guess left a call before the part out (`Guess.why`; 0: kept)
FILTERED, CUT, DEAD = 1, 2, 3  # it only draws (`keep.py`), an upload (`data.py`), `state.py`
# `Guess.kept` by position: left out, kept (an upload perhaps with null data), kept whole
LEFT_OUT, KEPT, WHOLE = 0, 1, 2


class Written(NamedTuple):
    """What one trimmed trace holds."""

    calls: int
    setup_calls: int  # of them, before the part
    frames: int  # frames that end in it
    checks: list[int]  # the call numbers in it of the part's checks, in order
    size: int  # bytes of the file
    stream_bytes: dict[str, Any]  # decompressed bytes: where they went


class Guess(NamedTuple):
    """A trim's first guess at what its part needs: what it keeps and leaves out."""

    kept: bytearray  # by position up to the part's end: LEFT_OUT, KEPT
    why: bytearray  # by position before the part: why it was left out (FILTERED, CUT, DEAD)
    enums: dict[int, set[int]]  # per enum signature, the values the calls kept use
    unseen: Unseen
    offscreen: bool  # it keeps the offscreen draws before the part (`keep.SetupFilter`)


def guess(path: str, part: Part, cuts: Cuts | None = None) -> Guess:
    """The smallest setup the analysis takes to be enough: with no draw before the part,
    unless the part draws with what offscreen draws before it drew (`data.Unseen`)."""
    first = choose(path, part, False, cuts)
    return choose(path, part, True, cuts) if first.unseen.reads_earlier_draws else first


def write_trim(path: str, part: Part, out: str, cuts: Cuts | None = None) -> Written:
    """Write `out` as `guess` chooses (with `cuts`: those uploads dropped, or kept with
    null data, in place of `data.Uploads`' choice)."""
    return write(path, part, guess(path, part, cuts), out)


def write(path: str, part: Part, chosen: Guess, out: str, kept: bytearray | None = None) -> Written:
    """Write `out`: the calls `kept` marks (by default the guess'), uploads marked KEPT
    with the null data the guess gave them, then the part whole."""
    kept = chosen.kept if kept is None else kept
    cuts = chosen.unseen.cuts
    reader = TraceReader(path)
    writer = TraceWriter(reader.version, reader.properties, reader.semantic_version)
    writer.enum_values = chosen.enums
    frame_ends = set(part.frame_ends)
    checks = {p for p, _ in part.checks}
    found: list[int] = []
    per_function: Counter[str] = Counter()
    per_kind: dict[str, Counter[str]] = {"setup": Counter(), "part": Counter()}
    kinds: dict[int, str] = {}
    setup_calls = frames = setup_bytes = referenced_bytes = 0
    position = 0
    sigs = reader.signatures
    with open(out, "wb") as f:
        sink = SnappyFile(f)
        sink.write(writer.take())
        for batch in reader.batches():
            values = NodeLists(batch)
            for i in range(min(len(batch), part.end + 1 - position)):
                mark = kept[position + i]
                if mark:
                    blank = cuts.blank(position + i) if mark == KEPT else None
                    before = writer.tell()
                    number = writer.copy_call(batch, values, i, sigs, blank)
                    size = writer.tell() - before
                    sid = batch.call(i)[2]
                    kind = kinds.get(sid) or kinds.setdefault(sid, byte_kind(sigs.functions[sid]))
                    per_function[sigs.functions[sid].name] += size
                    setup = position + i < part.start
                    per_kind["setup" if setup else "part"][kind] += size
                    if setup:
                        setup_calls += 1
                        setup_bytes += size
                        referenced_bytes += size if cuts.used(position + i) else 0
                    frames += position + i in frame_ends
                    if position + i in checks:
                        found.append(number)
            position += len(batch)
            sink.write(writer.take())
            if position > part.end:
                break
        sink.close()
    stream_bytes: dict[str, Any] = {
        "setup": setup_bytes,
        "part": sink.stream_bytes - setup_bytes,
        "setup_by_kind": dict(per_kind["setup"].most_common()),
        "part_by_kind": dict(per_kind["part"].most_common()),
        "setup_data_the_part_uses": referenced_bytes,
        "functions": dict(per_function.most_common(8)),
    }
    size = os.path.getsize(out)
    return Written(writer.calls, setup_calls, frames, found, size, stream_bytes)


def choose(path: str, part: Part, offscreen: bool, cuts: Cuts | None = None) -> Guess:
    """One pass over the trace up to the part's end: which calls the guess keeps and why
    it leaves the others out, per enum signature the values the calls kept use (the trim
    defines each enum with those alone: GLenum lists some 4,000 names, 100 kB in every
    trace), and the uploads cut (`data.Unseen`; with `cuts`, those)."""
    reader = TraceReader(path)
    keep = SetupFilter(offscreen, part.start, part.frame_ends)
    uploads = Uploads(part, offscreen) if cuts is None else None
    live = Liveness()
    kept = bytearray(part.end + 1)
    why = bytearray(part.start)
    enums: dict[int, set[int]] = defaultdict(set)
    position = 0
    sigs = reader.signatures
    for batch in reader.batches():
        values = NodeLists(batch)
        tags = values.tags
        for i, record in zip(range(part.end + 1 - position), batch.records(), strict=False):
            call = Call(batch, values, record, position + i, sigs)
            if uploads is not None:
                uploads.step(call)
            if position + i < part.start:
                if not keep.keep(call):
                    why[position + i] = FILTERED
                    continue
                live.add(call)
            else:
                live.part(call)
            kept[position + i] = KEPT
            start, count = record[5], record[6]
            for j in range(start, start + count):
                if tags[j] == Tag.ENUM:
                    enums[values.aux[j]].add(values.signed(j))
        position += len(batch)
        if position > part.end:
            break
    unseen = uploads.finish() if uploads is not None else Unseen(cuts or Cuts(0), False, {})
    for p in unseen.cuts.dropped():
        kept[p], why[p] = LEFT_OUT, CUT
    for p in live.dead():
        kept[p], why[p] = LEFT_OUT, DEAD
    return Guess(kept, why, enums, unseen, offscreen)
