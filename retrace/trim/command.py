"""`retrace trim TRACE --frames A-B -o OUT`: write the trim, then prove it.

The trim is first written as the analysis guesses (`write.guess`: the state,
objects and data the part needs, no draws before it), then checked: the
original's frames of the part and the trim's are replayed and compared image by
image. Where a frame differs, what the guess left out is added back a group at
a time, and only the groups the frames turn out to need (`widen.py`), each
candidate checked the same way, until the trim is right or even every call
before the part is not enough. What happened is printed in one line and kept
in OUT.json beside the trim; a trim that never matched exits 1 naming the
first frame that differs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any

import click

from retrace import __version__
from retrace.errors import RetraceError
from retrace.trace.callset import CallSet, frame_range
from retrace.trim.outline import Part, outline
from retrace.trim.verify import Shot, Snapshots, differs, snapshots
from retrace.trim.widen import Group, groups, search, widened
from retrace.trim.write import Guess, Written, guess, write, write_trim


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
        "tries": [],
    }
    if not verify:
        facts["trim"] = _record(part, write_trim(trace, part, output), [], None)
        _finish(facts, output, start, "not verified (--no-verify)")
        return
    with tempfile.TemporaryDirectory(prefix="retrace-trim-") as folder:
        want = [no for _, no in part.checks]
        with Snapshots(trace, want, part.frames[1], folder, keep=tolerance > 0) as replaying:
            tries = _Tries(trace, part, output, folder, replaying, tolerance)
            chosen = guess(trace, part)
            facts["offscreen_draws_kept"] = chosen.offscreen
            facts["tries"] = tries.done
            if not tries.right(chosen, []):
                found, enums = groups(trace, part, chosen)
                wide = chosen._replace(enums=enums)
                facts["groups_left_out"] = len(found)
                needed = search(lambda ks: tries.right(wide, [found[k] for k in ks]), len(found))
                if needed is not None:
                    tries.keep(wide, [found[k] for k in needed])
    tried = tries.final
    facts["trim"] = tried
    counted = f"{tried['equal']}/{len(part.checks)} equal to the original"
    added = len(tried["added"])
    if tried["equal"] == len(part.checks) and added:
        counted += f", {added} group{'s' * (added != 1)} added back to the first guess"
    _finish(facts, output, start, counted)
    if tried["equal"] != len(part.checks):
        differing = tried.get("first_differing") or "a replay of the trim failed"
        raise TrimFailed(
            f"trim: {part.label}: {differing} even with every call before it kept "
            f"({counted}); the trim is kept in {output}"
        )


class _Tries:
    """Candidate trims, each written and checked against the original's frames; the
    right one kept last is in the output, else the last one tried."""

    def __init__(
        self, trace: str, part: Part, output: str, folder: str, replaying: Snapshots, tolerance: int
    ) -> None:
        self.trace, self.part, self.output, self.folder = trace, part, output, folder
        self.replaying, self.tolerance = replaying, tolerance
        self.original: dict[int, Shot] | None = None
        self.done: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {}
        self._in_output: tuple[str, ...] | None = None  # the labels added to the output's

    def right(self, chosen: Guess, added: list[Group]) -> bool:
        """Write the guess with `added` back, check it; whether every frame is equal."""
        candidate = os.path.join(self.folder, "candidate.trace")
        written = write(self.trace, self.part, chosen, candidate, widened(chosen, added))
        try:
            got = snapshots(candidate, written.checks, 1 << 62, self.folder, self.tolerance > 0)
        except RetraceError as e:
            tried = _record(self.part, written, added, None, str(e))
        else:
            if self.original is None:  # (a failure here is the original's own: raised)
                self.original = self.replaying.result()
            equal = compare(self.part, written, self.original, got, self.tolerance)
            tried = _record(self.part, written, added, equal)
        brief = {k: v for k, v in tried.items() if k not in ("added", "checks", "stream_bytes")}
        self.done.append({"groups_added": len(added), **brief})
        right = tried["equal"] == len(self.part.checks)
        if right or not self.final or self.final["equal"] != len(self.part.checks):
            shutil.move(candidate, self.output)
            self._in_output = tuple(tried["added"])
            self.final = tried
        return right

    def keep(self, chosen: Guess, added: list[Group]) -> None:
        """Make the output the guess with `added` back, a trim found right."""
        if self._in_output != tuple(g.label for g in added):
            self.right(chosen, added)


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
    part: Part,
    written: Written,
    added: list[Group],
    equal: list[bool] | None,
    error: str | None = None,
) -> dict[str, Any]:
    """What one candidate trim holds, and how its check went."""
    tried: dict[str, Any] = {
        "added": [g.label for g in added],
        "size": written.size,
        "calls": written.calls,
        "setup_calls": written.setup_calls,
        "frames_in_trim": written.frames,
        "equal": sum(equal) if equal else 0,
        "checks": [
            {"original_call": no, "trim_call": mine, "equal": None if equal is None else equal[k]}
            for k, ((_, no), mine) in enumerate(zip(part.checks, written.checks, strict=True))
        ],
        "stream_bytes": written.stream_bytes,
    }
    if error is not None:
        tried["error"] = error
        tried["first_differing"] = error
    elif equal is not None and not all(equal):
        k = equal.index(False)
        tried["first_differing"] = _name_check(part, k) + " differs"
    return tried


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
