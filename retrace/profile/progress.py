"""A live progress line while a pass replays: frames done, of how many, rate and ETA.

Shown only on a terminal (a log file or a pipe gets the one line per complete run
the profiler prints anyway); drawn at the first frame end, then at most five times
a second, so that it costs nothing next to the replay. The first pass does not know the frame count
yet (the trace is read as it replays); later passes do.
"""

from __future__ import annotations

import time
from typing import IO

from retrace.replay.replayer import ReplayListener

REDRAW_SECONDS = 0.2
CLEAR_LINE = "\r\x1b[K"  # back to the line's start, erase it


class PassProgress(ReplayListener):
    """Redraws one stderr line at frame ends, and clears it when the pass is over."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.label = ""
        self.total: int | None = None
        self._started = self._drawn = 0.0
        self._shown = False

    def start(self, label: str, total: int | None) -> None:
        """A pass begins: `label` says which, `total` is its frame count when known."""
        self.label, self.total = label, total
        self._started = time.perf_counter()
        self._drawn = 0.0  # the first frame end draws at once

    def frame_end(self, frame: int) -> None:
        now = time.perf_counter()
        if now - self._drawn < REDRAW_SECONDS:
            return
        self._drawn = now
        rate = frame / (now - self._started)
        line = f"{self.label}: frame {frame}"
        if self.total:
            line += f" of {self.total}"
        line += f" ({rate:.1f} frames/s"
        if self.total and rate > 0:
            line += f", about {max(self.total - frame, 0) / rate:.0f} s left"
        self.stream.write(f"{CLEAR_LINE}{line})")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        """Clear the line (the profiler prints the pass's summary in its place)."""
        if self._shown:
            self.stream.write(CLEAR_LINE)
            self.stream.flush()
            self._shown = False
