"""The part of a trace a profile measures: `--frames A-B`, `--calls CALLSET`, and what the
user is told when they reach past the trace's end.

`--frames A-B` measures frames A..B; the replay before and after them runs
bare. `--calls CALLSET` keeps the call and draw-call rows of the calls the set
selects, and measures the frames that hold them (from the first such frame to
the last, within `--frames`): the frames table has those frames, whole, so a
frame row still means what it means without `--calls`. Where those frames lie
is known once the first pass has compiled the trace: that pass measures from
frame A up to the frame holding the set's last call number (to the end for an
open set such as `*/draw`), later passes only the frames that hold selected
calls. A call matches by its number and the flags apitrace derives from its
function's name (`/draw`, `/frame`, `/fbo`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from retrace.trace.callset import UNBOUNDED, CallSet
from retrace.trace.flags import call_flags

if TYPE_CHECKING:  # (the parent, which writes the tables, imports none of the replay)
    import numpy as np

    from retrace.profile.options import ProfileOptions
    from retrace.replay.program import Program

Frames = tuple[int, int | None]  # first, last (None: to the end), 0-based


def selected(
    calls: CallSet, call_nos: np.ndarray, name_ids: np.ndarray, names: Sequence[str]
) -> np.ndarray:
    """Which of these events (call numbers, indexes into `names`) `calls` selects."""
    import numpy as np

    flags = np.fromiter((int(call_flags(n)) for n in names), np.uint64, len(names))
    ids = np.asarray(name_ids, np.int64)
    return calls.contains_many(
        call_nos, flags[ids] if len(flags) else np.zeros(len(ids), np.uint64)
    )


def last_call(calls: CallSet | None) -> int | None:
    """The highest call number `calls` can select (None: no bound)."""
    return None if calls is None or calls.last == UNBOUNDED else calls.last


def calls_span(
    program: Program, calls: CallSet, rows: tuple[int, ...], frames: Frames
) -> Frames | None:
    """The frames (first, last) from the first that holds an event `calls` selects to the
    last, within `frames`; None when no event in `frames` is selected. `rows`: the ops that
    are call events."""
    import numpy as np

    kinds = np.asarray(program.column("rows"))
    ops = np.flatnonzero(np.isin(kinds, rows))
    call_nos, name_ids = (np.asarray(program.column(c))[ops] for c in ("call_nos", "name_ids"))
    chosen = selected(calls, call_nos, name_ids, program.names)
    in_frame = np.searchsorted(np.asarray(program.frame_ends, np.int64), ops[chosen], "left")
    first, last = frames
    in_frame = in_frame[(in_frame >= first) & ((in_frame <= last) if last is not None else True)]
    if not len(in_frame):
        return None
    return int(in_frame[0]), int(in_frame[-1])


def past_the_end(options: ProfileOptions, frame_count: int, call_count: int) -> list[str]:
    """Warnings for a `--frames` or `--calls` that reaches past the trace's end (`frame_count`
    frames, the partial last one included; `call_count` calls)."""
    lines = []
    first, last = options.frames
    if (last if last is not None else first) >= frame_count:
        spec = f"{first}-{last}" if last is not None else f"{first}-"
        lines.append(
            f"retrace: warning: --frames {spec} reaches past the trace's end: it has "
            f"{frame_count} frames (0-{frame_count - 1})"
        )
    calls = options.calls
    if calls is not None and max(calls.first, last_call(calls) or 0) >= call_count:
        lines.append(
            f"retrace: warning: --calls {options.call_range} reaches past the trace's end: it "
            f"has {call_count} calls (0-{call_count - 1})"
        )
    return lines


def nothing_selected(options: ProfileOptions) -> str:
    """Why a profile measured nothing, in words."""
    first, last = options.frames
    frames = f"frames {first}-{'' if last is None else last}"
    if options.call_range is None:
        return f"the trace has no {frames}"
    within = f" in {frames}" if options.frames != (0, None) else ""
    return f"--calls {options.call_range} selects no call of the trace{within}"
