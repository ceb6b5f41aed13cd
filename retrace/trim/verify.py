"""The self-check: replay a trace to some calls and keep the images there.

Each replay runs in a child process (`replay/contain.py`), so a driver crash in
a trimmed trace is a failed check naming the call, not the end of retrace. The
images are snapshotted as `retrace replay -S` takes them (before a frame-ending
call, after any other) and compared by MD5, or pixel by pixel within a
tolerance.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import partial
from typing import NamedTuple

from retrace.errors import RetraceError


class Shot(NamedTuple):
    md5: str
    size: tuple[int, int, int]  # width, height, channels
    pixels: str | None  # a file of the raw pixels, kept where a tolerance needs them


def snapshots(
    trace: str, calls: list[int], last_frame: int, folder: str, keep: bool
) -> dict[int, Shot]:
    """Replay `trace` up to the end of frame `last_frame` and snapshot `calls`; `keep`: keep
    their pixels in files under `folder`. A replay that fails raises RetraceError."""
    import retrace.replay.contain as contain

    out = os.path.join(folder, f"shots-{len(os.listdir(folder))}.json")
    with tempfile.NamedTemporaryFile("r", dir=folder, suffix=".err") as errors:
        body = partial(_replay, trace, calls, last_frame, out, keep)
        ending = contain.supervise(body, errors.name)
        try:
            contain.check(ending, trace)
        except SystemExit:
            lines = [line for line in errors.read().splitlines() if line.startswith("retrace:")]
            why = lines[-1].removeprefix("retrace: ").removeprefix("error: ") if lines else ""
            raise RetraceError(
                f"replaying {trace} failed: {why or f'exit status {ending.code}'}"
            ) from None
    with open(out) as f:
        done = json.load(f)
    return {int(k): Shot(v[0], tuple(v[1]), v[2]) for k, v in done.items()}  # type: ignore[misc]


def _replay(trace: str, calls: list[int], last_frame: int, out: str, keep: bool) -> None:
    from retrace.replay.replayer import Replayer
    from retrace.replay.snapshot import Image
    from retrace.trace.callset import CallSet

    shots: dict[int, tuple[str, tuple[int, int, int], str | None]] = {}

    def shot(call_no: int, image: Image) -> None:
        path = None
        if keep:
            path = f"{out}.{call_no}.raw"
            with open(path, "wb") as f:
                f.write(image.pixels)
        shots[call_no] = (image.md5(), (image.width, image.height, image.channels), path)

    spec = ",".join(map(str, calls))
    with Replayer(trace, snapshots=CallSet.parse(spec)) as replayer:
        replayer.on_snapshot = shot
        replayer.last_frame = last_frame
        replayer.run_pass()
        if replayer.stop_error is not None:
            raise replayer.stop_error
    with open(out, "w") as f:
        json.dump(shots, f)


def differs(a: Shot, b: Shot, tolerance: int) -> bool:
    """Whether two images differ: by MD5, or with a tolerance by more than it in any channel
    of any pixel (different sizes always differ)."""
    if a.md5 == b.md5:
        return False
    if tolerance <= 0 or a.size != b.size or a.pixels is None or b.pixels is None:
        return True
    with open(a.pixels, "rb") as fa, open(b.pixels, "rb") as fb:
        x, y = fa.read(), fb.read()
    import numpy as np

    diff = np.abs(np.frombuffer(x, np.uint8).astype(np.int16) - np.frombuffer(y, np.uint8))
    return bool(diff.max(initial=0) > tolerance)
