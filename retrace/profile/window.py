"""The part of a trace a profile measures: `--frames A-B`, `--calls CALLSET`, and what the
user is told when they select nothing.

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


def nothing_selected(
    options: ProfileOptions, program: Program | None = None, rows: tuple[int, ...] = ()
) -> str:
    """Why a profile measured nothing, in words; with the compiled `program` (and `rows`, the
    ops that are call events), why the calls --calls names are not measured as calls."""
    first, last = options.frames
    frames = f"frames {first}-{'' if last is None else last}"
    if options.call_range is None:
        return f"the trace has no {frames}"
    within = f" in {frames}" if options.frames != (0, None) else ""
    count, reasons = 0, list[str]()
    if program is not None and options.calls is not None:
        count, reasons = unmeasured_calls(program, options.calls, rows, options.frames)
    if not count:
        return f"--calls {options.call_range} selects no call of the trace{within}"
    return (
        f"--calls {options.call_range} selects no call measured as a call{within}: of the "
        f"trace's calls it selects ({count}), {'; '.join(reasons)}"
    )


# what the calls a --calls set selects are where none is measured as a call, by priority:
# glretrace's rules for the calls table (`Compiler._row`)
_WHY = {
    "frames": "{n} measured, outside {frames}",
    "list": "{n} compiled into a display list (glNewList at call {at}), measured within the "
    "glCallList that runs the list, not one by one, as in glretrace",
    "begin": "{n} inside glBegin/glEnd, whose block is measured as one call at its glBegin "
    "(call {at}), as in glretrace",
    "query": "{n} without side effects (state queries, glGetError), not measured, as in glretrace",
    "other": "{n} window-system or apitrace's own (glX*, egl*, memcpy), not measured as "
    "calls, as in glretrace",
}


def _is_gl(name: str) -> bool:
    return name.startswith("gl") and not name.startswith("glX")


def unmeasured_calls(
    program: Program, calls: CallSet, rows_measured: tuple[int, ...], frames: Frames
) -> tuple[int, list[str]]:
    """How many existing calls `calls` selects, and why they are not measured as calls,
    where none is: inside a display list or glBegin/glEnd, window-system calls, outside
    `frames`, or not replayed at all (calls without side effects, made with no context
    current). `rows_measured`: the ops that are call events."""
    import numpy as np  # (in the child that replays: the parent's profile path has none)

    from retrace.replay.program import OpKind  # (the parent imports none of the replay)

    call_nos, name_ids, rows = (
        np.asarray(program.column(c)) for c in ("call_nos", "name_ids", "rows")
    )
    order = np.arange(len(rows))
    new_list = np.isin(name_ids, [i for i, n in enumerate(program.names) if n == "glNewList"])
    begin, end = rows == OpKind.BEGIN, rows == OpKind.END
    # the op of the glNewList (glBegin) that opened the list (block) each op is in, or -1
    list_at = np.maximum.accumulate(np.where(new_list, order, -1))
    begin_at = np.maximum.accumulate(np.where(begin, order, -1))
    in_list = np.cumsum(new_list) > np.cumsum(rows == OpKind.LIST_END)
    in_begin = np.cumsum(begin) > np.cumsum(end) - end  # glEnd included
    event = np.isin(rows, rows_measured)
    chosen = selected(calls, call_nos, name_ids, program.names)
    kinds = {
        "frames": (chosen & event, None),
        "list": (chosen & ~event & in_list, list_at),
        "begin": (chosen & ~event & ~in_list & in_begin, begin_at),
    }
    other = chosen & ~np.isin(call_nos, call_nos[chosen & event]) & ~in_list & ~in_begin
    gl = np.isin(name_ids, [i for i, n in enumerate(program.names) if _is_gl(n)])
    kinds["query"], kinds["other"] = (other & gl, None), (other & ~gl, None)
    first, last = frames
    span = f"frames {first}-{'' if last is None else last}"
    reasons, replayed = [], np.unique(call_nos[chosen])
    for kind, (ops, opened_at) in kinds.items():
        if ops.any():
            at = opened_at[np.argmax(ops)] if opened_at is not None else 0
            n = len(np.unique(call_nos[ops]))
            reasons.append(_WHY[kind].format(n=n, at=int(call_nos[at]), frames=span))
    numbers = np.arange(int(call_nos.max()) + 1 if len(call_nos) else 0)
    numbers = numbers[calls.contains_many(numbers, np.zeros(len(numbers), np.uint64))]
    if skipped := len(np.setdiff1d(numbers, call_nos)):
        reasons.append(
            f"{skipped} not replayed (made with no context current, or without side effects: "
            "state queries), as glretrace skips them"
        )
    return len(replayed) + skipped, reasons
