"""Writing a trimmed trace: the calls a `SetupFilter` keeps before the part, then the part.

At the levels that cut, the settings set again before anything reads them are left
out too (`state.Liveness`).

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
from retrace.trim.keep import CUT_LEVELS, OFFSCREEN, Call, SetupFilter
from retrace.trim.outline import Part
from retrace.trim.state import Liveness


class Written(NamedTuple):
    """What one trimmed trace holds."""

    calls: int
    setup_calls: int  # of them, before the part
    frames: int  # frames that end in it
    checks: list[int]  # the call numbers in it of the part's checks, in order
    size: int  # bytes of the file
    stream_bytes: dict[str, Any]  # decompressed bytes: where they went
    reads_earlier_draws: bool  # the part reads what draws left out of it drew (`data.Unseen`)


def write_trim(path: str, part: Part, level: int, out: str, cuts: Cuts | None = None) -> Written:
    """Write `out`: the calls before `part` that `level` keeps, less the uploads no frame
    of the part can see (`data.Uploads`, at the levels that cut; or `cuts` where given:
    uploads to drop, or to keep with null data), then the part whole. A first level whose
    part draws with what the draws it leaves out drew (`data.Unseen`) is not written."""
    kept, enums, unseen = _choose(path, part, level, cuts)
    if level < OFFSCREEN and unseen.reads_earlier_draws:  # it cannot be right: not written
        return Written(0, 0, 0, [], 0, {}, True)
    cuts = unseen.cuts
    reader = TraceReader(path)
    writer = TraceWriter(reader.version, reader.properties, reader.semantic_version)
    writer.enum_values = enums
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
                if kept[position + i]:
                    before = writer.tell()
                    number = writer.copy_call(batch, values, i, sigs, cuts.blank(position + i))
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
    early = unseen.reads_earlier_draws
    return Written(writer.calls, setup_calls, frames, found, size, stream_bytes, early)


def _choose(
    path: str, part: Part, level: int, cuts: Cuts | None
) -> tuple[bytearray, dict[int, set[int]], Unseen]:
    """One pass over the trace up to the part's end: which calls the trim keeps (1 by
    position), per enum signature the values they use (the trim defines each enum with
    those alone: GLenum lists some 4,000 names, 100 kB in every trace), and the uploads
    cut (`data.Unseen`)."""
    reader = TraceReader(path)
    keep = SetupFilter(level, part.start, part.frame_ends)
    uploads = Uploads(part, level) if cuts is None and level < CUT_LEVELS else None
    live = Liveness() if level < CUT_LEVELS else None
    kept = bytearray(part.end + 1)
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
                    continue
                if live is not None:
                    live.add(call)
            elif live is not None:
                live.part(call)
            kept[position + i] = 1
            start, count = record[5], record[6]
            for j in range(start, start + count):
                if tags[j] == Tag.ENUM:
                    enums[values.aux[j]].add(values.signed(j))
        position += len(batch)
        if position > part.end:
            break
    unseen = uploads.finish() if uploads is not None else Unseen(cuts or Cuts(0), False)
    for p in unseen.cuts.dropped():
        kept[p] = 0
    for p in live.dead() if live is not None else ():
        kept[p] = 0
    return kept, enums, unseen
