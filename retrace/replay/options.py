"""How `retrace replay` replays: glretrace's replay options, built once by the command line
and handed whole to the replaying child (`run.run_replay`), as `ProfileOptions` is to a
profile's. Here, not beside it in `retrace.profile`: the replay needs nothing of the
profiler."""

from __future__ import annotations

from typing import NamedTuple


class ReplayOptions(NamedTuple):
    """The options of `retrace replay` (the command line's defaults are its). A NamedTuple,
    not a frozen dataclass: the command builds it before the replaying child forks, where
    importing dataclasses and generating its methods would cost 2-3 ms of start-up (the
    child imports dataclasses later, while the driver loads on another core)."""

    benchmark: bool  # -b: print glretrace's `Rendered ...` line
    snapshot_prefix: str | None  # -s: PNGs named PREFIX<call>.png; '-': to standard output
    snapshot_spec: str  # -S: the call set to snapshot
    snapshot_format: str  # with -s -: PNM, RGB or MD5
    snapshot_interval: int  # snapshot only every Nth frame (0: every frame)
    calls_spec: str | None  # --calls: replay only these GL calls
    frames_spec: str | None  # --frames A-B: up to the end of frame B; counted from A
    loop: int | None  # --loop N: the calls since the last frame end N more times (< 0: forever)
    single_buffer: bool  # --sb: glFlush/glFinish end frames
    core: bool  # desktop contexts as core profile
    samples: int | None  # multisample the stand-in framebuffers
    verbose: bool  # report GL errors after every call
    window: bool  # also show the frames in a window
    strict: bool  # a replay that departed from its trace fails (exit 3)
    query_handling: str  # the program's own query readbacks: skip, run or check
    query_tolerance: int  # with check: how far a result may be from the trace's
