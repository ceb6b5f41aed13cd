"""Adding back to a trim what its frames turn out to need, and that alone.

The guess (`write.choose`) leaves calls out before the part for three reasons,
and they are grouped by what they are: per frame before the part, the draws
(and the other calls that only draw or read pixels) it left out; per texture
or buffer, the uploads it dropped or kept with null data; per frame, the
settings it took to be set again before anything reads them. When the self-check
finds a frame of the trim that differs, `search` looks for a few groups whose
return makes every frame equal, replaying candidate trims: the groups in the
order of their bytes, the smallest first, the shortest run of the first ones
that is enough is found by bisection, its last group is needed, and the search
goes on among the groups before it until the guess with the groups found is
right. Each group needed costs about log2(groups) replays; a trim that is
wrong even with every group back (every call before the part) cannot be made
right. Adding calls back is taken never to make a right trim wrong; where that
does not hold, the search may keep more than it needs, but what it returns was
checked.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from retrace.trace.model import NODES, Tag
from retrace.trace.reader import TraceReader
from retrace.trim.outline import Part
from retrace.trim.write import CUT, DEAD, FILTERED, WHOLE, Guess

_GROUPED_BY_FRAME = {FILTERED: "draws", DEAD: "settings set again later"}


class Group(NamedTuple):
    """Calls the guess left out, added back together."""

    label: str  # "frame 12's draws", "texture 7's uploads"
    cost: int  # their bytes in the original's stream
    why: int  # FILTERED, DEAD: the calls in [lo, hi) left out for that; CUT: `positions`
    lo: int
    hi: int
    positions: array[int] | None


def groups(path: str, part: Part, chosen: Guess) -> tuple[list[Group], dict[int, set[int]]]:
    """The groups of calls `chosen` left out, the smallest first; and the guess' enums with
    those of every call before the part (the calls added back use theirs)."""
    bounds = [0, *(end + 1 for end in part.frame_ends if end < part.start), part.start]
    frames = len(bounds) - 1
    cut = chosen.unseen.cuts
    objects = [
        (key, positions)
        for key, positions in chosen.unseen.uploads.items()
        if any(cut.cut(p) for p in positions)
    ]
    object_of = np.full(part.start, -1, np.int32) if objects else None
    for k, (_, positions) in enumerate(objects):
        assert object_of is not None
        chosen_positions = np.frombuffer(positions, np.int64)
        object_of[chosen_positions[chosen_positions < part.start]] = k
    costs = {FILTERED: np.zeros(frames, np.int64), DEAD: np.zeros(frames, np.int64)}
    object_costs = np.zeros(len(objects), np.int64)
    why = np.frombuffer(chosen.why, np.uint8)
    enums = {sid: set(values) for sid, values in chosen.enums.items()}
    position = 0
    for batch in TraceReader(path).batches():
        count = min(len(batch), part.start - position)
        if count <= 0:
            break
        offsets = np.asarray(batch.column("offset"), np.int64)
        sizes = np.diff(offsets, append=offsets[-1])[:count]  # (a batch's last call: 0)
        here = why[position : position + count]
        frame = np.searchsorted(bounds, np.arange(position, position + count), "right") - 1
        for code, per_frame in costs.items():
            chosen_calls = here == code
            per_frame += np.bincount(frame[chosen_calls], sizes[chosen_calls], frames).astype(
                np.int64
            )
        if object_of is not None:
            owner = object_of[position : position + count]
            mine = owner >= 0
            object_costs += np.bincount(owner[mine], sizes[mine], len(objects)).astype(np.int64)
        _add_enums(enums, batch.nodes, int(batch.call(count - 1)[5] + batch.call(count - 1)[6]))
        position += count
    found = [
        Group(
            f"frame {f}'s {_GROUPED_BY_FRAME[code]}",
            int(cost),
            code,
            bounds[f],
            bounds[f + 1],
            None,
        )
        for code, per_frame in costs.items()
        for f, cost in enumerate(per_frame.tolist())
        if cost or _any(chosen.why, code, bounds[f], bounds[f + 1])
    ]
    for k, (key, positions) in enumerate(objects):
        dropped = array("q", (p for p in positions if p < part.start and cut.cut(p)))
        label = f"{key[0]} {key[1]}'s uploads"
        found.append(Group(label, int(object_costs[k]), CUT, 0, 0, dropped))
    found.sort(key=lambda g: (g.cost, -g.hi))
    return found, enums


def _any(why: bytearray, code: int, lo: int, hi: int) -> bool:
    return why.find(code, lo, hi) >= 0


def _add_enums(enums: dict[int, set[int]], nodes: bytes | memoryview, end: int) -> None:
    """The enum values of a batch's first `end` nodes, per enum signature."""
    tags = np.asarray(NODES.column(nodes, "tag"))[:end]
    which = np.flatnonzero(tags == Tag.ENUM)
    if not len(which):
        return
    signatures = np.asarray(NODES.column(nodes, "aux"))[which]
    values = np.asarray(NODES.column(nodes, "v", "q"))[which]
    for sid, value in set(zip(signatures.tolist(), values.tolist(), strict=True)):
        enums.setdefault(sid, set()).add(value)


def widened(chosen: Guess, added: list[Group]) -> bytearray:
    """The guess' marks (`Guess.kept`) with the groups `added` back."""
    kept = bytearray(chosen.kept)
    for group in added:
        if group.positions is not None:
            for p in group.positions:
                kept[p] = WHOLE
            continue
        lo, hi = group.lo, group.hi
        picked = chosen.why[lo:hi].translate(_PICK[group.why])
        merged = int.from_bytes(kept[lo:hi], "little") | int.from_bytes(picked, "little")
        kept[lo:hi] = merged.to_bytes(hi - lo, "little")
    return kept


# per reason: a table that maps it to 1 (KEPT) and every other byte to 0
_PICK = {code: bytes(1 if b == code else 0 for b in range(256)) for code in _GROUPED_BY_FRAME}


def search(right: Callable[[list[int]], bool], count: int) -> list[int] | None:
    """Indices of groups (of `count`, in order) that `right` (given indices, whether the
    guess with those groups back is right) accepts, where the guess alone is wrong; None
    where not even all of them are enough."""
    tried: dict[frozenset[int], bool] = {}

    def right_with(indices: list[int]) -> bool:
        key = frozenset(indices)
        if key not in tried:
            tried[key] = right(sorted(key))
        return tried[key]

    needed: list[int] = []
    top = count  # the groups needed lie among the first `top`
    while True:
        lo, hi = 0, top  # the first `lo` are not enough (with `needed`); the first `hi` are
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if right_with(needed + list(range(mid))):
                hi = mid
            else:
                lo = mid
        if hi == 0 or (hi == top and not right_with(needed + list(range(top)))):
            return None
        needed.append(hi - 1)
        if right_with(needed):
            return sorted(needed)
        top = hi - 1
