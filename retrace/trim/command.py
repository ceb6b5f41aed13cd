"""`retrace trim TRACE --frames A-B -o OUT`: write the trim, then prove it.

The trim is written at the first level of `keep.LEVELS` (the smallest), then
checked: the original's frames of the part and the trim's are replayed and
compared image by image. A trim whose frames differ is written again at the
next level, which keeps more, until one is equal or every call before the part
was kept. What happened is printed in one line and kept in OUT.json beside the
trim; a trim that never matched exits 1 naming the first frame that differs.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

import click

from retrace import __version__
from retrace.errors import RetraceError
from retrace.trace.callset import CallSet, frame_range
from retrace.trim.keep import LEVELS, OFFSCREEN
from retrace.trim.outline import Part, outline
from retrace.trim.verify import Shot, Snapshots, differs, snapshots
from retrace.trim.write import Written, write_trim

_NEEDS_EARLIER_DRAWS = (
    "not written: the part draws with what offscreen draws before it drew, which it leaves out"
)


class TrimFailed(RetraceError):
    """The trim's frames never matched the original's: the trim is kept, for a look."""


def run_trim(
    trace: str,
    frames_spec: str | None,
    calls_spec: str | None,
    output: str,
    verify: bool,
    tolerance: int,
) -> None:
    start = time.perf_counter()
    if os.path.abspath(output) == os.path.abspath(trace):
        raise RetraceError(f"{output}: the trim would overwrite its own trace")
    first, last = frame_range(frames_spec)
    calls = CallSet.parse(calls_spec) if calls_spec else None
    part = outline(trace, first, last, calls)
    facts: dict[str, Any] = {
        "retrace": __version__,
        "trace": os.path.abspath(trace),
        "trace_size": os.path.getsize(trace),
        "part": part.label,
        "frames": list(part.frames),
        "tolerance": tolerance,
        "levels": [],
    }
    if not verify:  # the smallest level that writes the part: OFFSCREEN where it reads
        level = 0  # draws made offscreen before it (level 0 writes nothing then)
        written = write_trim(trace, part, level, output)
        if written.reads_earlier_draws:
            level = OFFSCREEN
            written = write_trim(trace, part, level, output)
        _record(facts, part, written, level, None)
        _finish(facts, output, start, "not verified (--no-verify)")
        return
    with tempfile.TemporaryDirectory(prefix="retrace-trim-") as folder:
        want = [no for _, no in part.checks]
        with Snapshots(trace, want, part.frames[1], folder, keep=tolerance > 0) as replaying:
            original: dict[int, Shot] | None = None
            for level in range(len(LEVELS)):
                written = write_trim(trace, part, level, output)
                if level < OFFSCREEN and written.reads_earlier_draws:
                    _record(facts, part, written, level, None, _NEEDS_EARLIER_DRAWS)
                    continue
                try:
                    got = snapshots(output, written.checks, 1 << 62, folder, keep=tolerance > 0)
                except RetraceError as e:
                    _record(facts, part, written, level, None, str(e))
                    continue
                if original is None:  # (a failure here is the original's own: raised)
                    original = replaying.result()
                equal = compare(part, written, original, got, tolerance)
                _record(facts, part, written, level, equal)
                if all(equal):
                    break
    tried = facts["levels"][-1]
    counted = f"{tried['equal']}/{len(part.checks)} equal to the original"
    _finish(facts, output, start, counted)
    if tried["equal"] != len(part.checks):
        differing = tried.get("first_differing") or "a replay of the trim failed"
        raise TrimFailed(
            f"trim: {part.label}: {differing} even with every call before it kept "
            f"({counted}); the trim is kept in {output}"
        )


def compare(
    part: Part, written: Written, original: dict[int, Shot], got: dict[int, Shot], tolerance: int
) -> list[bool]:
    """Per check of the part, whether the trim's image equals the original's (no image on
    either side: equal only if neither has one)."""
    equal = []
    for (_, no), mine in zip(part.checks, written.checks, strict=True):
        a, b = original.get(no), got.get(mine)
        equal.append(
            a is None
            and b is None
            or (a is not None and b is not None and not differs(a, b, tolerance))
        )
    return equal


def _record(
    facts: dict[str, Any],
    part: Part,
    written: Written,
    level: int,
    equal: list[bool] | None,
    error: str | None = None,
) -> None:
    """Keep what one level wrote and how its check went."""
    mines: list[int | None] = [*written.checks] or [None] * len(part.checks)  # (not written)
    tried: dict[str, Any] = {
        "level": level,
        "keeps": LEVELS[level],
        "size": written.size,
        "calls": written.calls,
        "setup_calls": written.setup_calls,
        "frames_in_trim": written.frames,
        "equal": sum(equal) if equal else 0,
        "checks": [
            {"original_call": no, "trim_call": mine, "equal": None if equal is None else equal[k]}
            for k, ((_, no), mine) in enumerate(zip(part.checks, mines, strict=True))
        ],
        "stream_bytes": written.stream_bytes,
    }
    if error is not None:
        tried["error"] = error
        tried["first_differing"] = error
    elif equal is not None and not all(equal):
        k = equal.index(False)
        tried["first_differing"] = _name_check(part, k) + " differs"
    facts["levels"].append(tried)


def _name_check(part: Part, k: int) -> str:
    frame = part.frames[0] + k
    position, no = part.checks[k]
    return f"frame {frame} (call {no})" if k < part.frames[1] - part.frames[0] + 1 else f"call {no}"


def _finish(facts: dict[str, Any], output: str, start: float, verdict: str) -> None:
    """Print the one line and write OUT.json."""
    size, whole = os.path.getsize(output), facts["trace_size"]
    facts.update(output=os.path.abspath(output), size=size, ratio=size / whole if whole else None)
    facts["seconds"] = round(time.perf_counter() - start, 3)
    facts["verdict"] = verdict
    share = f"{100 * size / max(whole, 1):.1f}% of {_mb(whole)}"
    line = f"trim: {facts['part']}: {verdict}, {_mb(size)} ({share})"
    with open(output + ".json", "w") as f:
        json.dump(facts, f, indent=2)
        f.write("\n")
    click.echo(line)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"
