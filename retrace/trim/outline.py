"""Where a trim's part lies in its trace: the frame ends, and the calls to keep whole.

A first, cheap pass over the trace (from the trace cache when it was read
before): the calls are counted in the order they are delivered, which is the
order replay runs them and the order a trim writes them, and the frame-ending
calls are those the reader finds (`CallBatch.frame_ends`), as replay counts
frames. Reading stops once the part has been read.
"""

from __future__ import annotations

from typing import NamedTuple

from retrace.errors import RetraceError
from retrace.trace.callset import CallSet
from retrace.trace.reader import TraceReader


class Part(NamedTuple):
    """The calls a trim keeps whole, by position in delivery order ([start, end]), and the
    calls its frames are compared at: (position, call number) of each frame end in the part
    and of its last call where that ends no frame."""

    start: int
    end: int
    frames: tuple[int, int]  # the part's first and last frame (0-based), of the original
    frame_ends: list[int]  # positions of every frame end up to the part's end
    checks: list[tuple[int, int]]
    label: str  # "frames 120-122", "calls 5000-6000"


def outline(path: str, first: int, last: int | None, calls: CallSet | None) -> Part:
    """Find frames first..last (`last` None: to the trace's end) or, with `calls`, the calls
    from its lowest number to its highest; raises RetraceError naming what the trace lacks."""
    reader = TraceReader(path)
    ends: list[tuple[int, int]] = []  # (position, call number) of each frame end
    inside: list[tuple[int, int]] = []  # with --calls: the first and last call in its range
    position = 0
    for batch in reader.batches():
        numbers = batch.column("no")
        ends += [(position + i, numbers[i]) for i in batch.frame_ends]
        if calls is not None:
            for i, no in enumerate(numbers.tolist()):
                if calls.first <= no <= calls.last:
                    inside[1:] = [(position + i, no)]
                    if len(inside) == 1:
                        inside.append(inside[0])
        position += len(batch)
        if calls is None and last is not None and len(ends) > last:
            break
        if calls is not None and min(numbers.tolist(), default=0) > calls.last:
            break
    if calls is not None:
        return _calls_part(calls, inside, ends)
    return _frames_part(first, last, ends)


def _frames_part(first: int, last: int | None, ends: list[tuple[int, int]]) -> Part:
    if last is None:
        last = len(ends) - 1
    if first >= len(ends) or last >= len(ends):
        has = f"{len(ends)} complete frames (0-{len(ends) - 1})" if ends else "no complete frame"
        raise RetraceError(f"--frames {first}-{last}: the trace has {has}; --calls takes calls")
    start = ends[first - 1][0] + 1 if first else 0
    positions = [p for p, _ in ends[: last + 1]]
    label = f"frames {first}-{last}" if last > first else f"frame {first}"
    return Part(start, positions[-1], (first, last), positions, ends[first : last + 1], label)


def _calls_part(calls: CallSet, inside: list[tuple[int, int]], ends: list[tuple[int, int]]) -> Part:
    if not inside:
        raise RetraceError(f"--calls {calls.first}-{calls.last}: the trace has no such calls")
    (start, first_no), (end, last_no) = inside[0], inside[-1]
    checks = [(p, no) for p, no in ends if start <= p <= end]
    if not checks or checks[-1][0] != end:
        checks.append((end, last_no))
    first = sum(1 for p, _ in ends if p < start)
    last = sum(1 for p, _ in ends if p < end)
    positions = [p for p, _ in ends if p <= end]
    return Part(start, end, (first, last), positions, checks, f"calls {first_no}-{last_no}")
