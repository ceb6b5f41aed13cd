"""The self-check: replay a trace to some calls and keep the images there.

Each replay runs in a child process, so a driver crash in a trimmed trace is a
failed check, not the end of retrace, and the original's replay runs while the
trim is being written. The
images are snapshotted as `retrace replay -S` takes them (before a frame-ending
call, after any other) and compared by MD5, or pixel by pixel within a
tolerance.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from retrace.errors import RetraceError
from retrace.exits import run_reporting
from retrace.replay.contain import signal_name
from retrace.replay.replayer import Replayer  # (imported once, before the children fork)
from retrace.replay.snapshot import Image
from retrace.trace.callset import CallSet


class Shot(NamedTuple):
    md5: str
    size: tuple[int, int, int]  # width, height, channels
    pixels: str | None  # a file of the raw pixels, kept where a tolerance needs them


class Snapshots:
    """A replay of `trace` up to the end of frame `last_frame`, snapshotting `calls`, in a
    child process started at once: the original's replay runs while the trim is written.
    `keep`: keep the pixels in files under `folder`, for a tolerance."""

    def __init__(
        self, trace: str, calls: list[int], last_frame: int, folder: str, keep: bool
    ) -> None:
        self.trace = trace
        self.out = os.path.join(folder, f"shots-{len(os.listdir(folder))}.json")
        self.errors = self.out + ".err"
        body = partial(_replay, trace, calls, last_frame, self.out, keep)
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the child: its errors as the CLI's lines, into a file
            code = 70
            try:
                with open(self.errors, "w") as errors, contextlib.redirect_stderr(errors):
                    code = _exit_status(body)
            finally:
                os._exit(code)

    def __enter__(self) -> Snapshots:
        return self

    def __exit__(self, *exc: object) -> None:
        """A replay not waited for (the trim failed first, an interruption) is ended."""
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)

    def result(self) -> dict[int, Shot]:
        """The snapshots by call number; RetraceError if the replay failed or crashed."""
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if os.WIFSIGNALED(status):
            raise RetraceError(
                f"replaying {self.trace}: the driver crashed ({signal_name(os.WTERMSIG(status))})"
            )
        if os.waitstatus_to_exitcode(status):
            with open(self.errors) as f:
                lines = [line for line in f.read().splitlines() if line.startswith("retrace:")]
            why = lines[-1].removeprefix("retrace: ").removeprefix("error: ") if lines else ""
            raise RetraceError(f"replaying {self.trace} failed: {why or 'no reason given'}")
        with open(self.out) as f:
            done = json.load(f)
        return {int(k): Shot(v[0], (v[1][0], v[1][1], v[1][2]), v[2]) for k, v in done.items()}


def snapshots(
    trace: str, calls: list[int], last_frame: int, folder: str, keep: bool
) -> dict[int, Shot]:
    """`Snapshots` of a replay, waited for."""
    return Snapshots(trace, calls, last_frame, folder, keep).result()


def _exit_status(body: Callable[[], None]) -> int:
    try:
        run_reporting(body)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return 0


def _replay(trace: str, calls: list[int], last_frame: int, out: str, keep: bool) -> None:
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
