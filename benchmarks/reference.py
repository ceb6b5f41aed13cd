"""What the benchmark scripts share: the peer to time retrace against, at its best, and one
measured run of a command; a private X server and the reference replayer of a trace for
the scripts that check frames against glretrace."""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from retrace.trace import cache
from retrace.trace.reader import TraceReader

# The peer at its best: apitrace's eglretrace with no window and no X server (waffle's
# surfaceless EGL platform, `peer_environment`), which replays GLX and EGL traces alike and
# is faster than glretrace under Xvfb.
PEER = ("eglretrace", "--headless")
# glretrace's closing line, which retrace prints too: the replay loop's frames and seconds
RENDERED = re.compile(rb"Rendered (\d+) frames in ([0-9.e+-]+) secs")


def peer_environment(noop: bool = False) -> dict[str, str]:
    """The environment both replayers are timed in: no display server (retrace is headless,
    the peer surfaceless); with `noop`, Mesa's GALLIUM_NOOP=1, a driver that accepts every
    call and renders nothing (an infinitely fast GPU), so that the replayer's own cost is
    what the timing shows."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["WAFFLE_PLATFORM"] = "surfaceless_egl"
    env.pop("GALLIUM_NOOP", None)
    if noop:
        env["GALLIUM_NOOP"] = "1"
    return env


def need_peer(script: str) -> None:
    """Exit with a clear line where the peer is not installed."""
    if shutil.which(PEER[0]) is None:
        sys.exit(f"{script}: needs {PEER[0]} (apt-get install apitrace)")


@dataclass(frozen=True)
class Run:
    """One command, measured: wall seconds from its start until it was reaped, peak RSS in
    KiB and CPU seconds (user and system; of the process and all its descendants, those
    it reaped, as wait4 reports them, and those that outlived it: retrace's replaying
    child ends after the command, `_orphans`), the seconds of its last "Rendered" line
    (NaN without one), and when that line came (seconds since the start; NaN without
    one). CPU time is what a loaded machine's drift disturbs least, but counts none of the
    overlap."""

    wall: float
    rss: int
    cpu: float
    loop: float
    said: float

    @property
    def outside(self) -> float:
        """Seconds outside the replay loop: start-up, the driver's loading, exit."""
        return self.wall - self.loop

    @property
    def before(self) -> float:
        """Seconds from the start to the loop's: the "Rendered" line came `loop` after it."""
        return self.said - self.loop

    @property
    def after(self) -> float:
        """Seconds from the loop's end (its "Rendered" line) until the command was reaped."""
        return self.wall - self.said


def measure(argv: list[str], env: dict[str, str], timeout: float = 600) -> Run | None:
    """Run `argv` to its end, its output read as it comes and dropped but for the "Rendered"
    line; None when it fails, or runs past `timeout` seconds and is killed (eglretrace's
    profiles poll for query results that GALLIUM_NOOP never makes available: forever)."""
    _become_subreaper()
    earlier = _children()
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert child.stdout is not None
    watchdog = threading.Timer(timeout, child.kill)
    watchdog.start()
    loop = said = math.nan
    with child.stdout:
        for line in child.stdout:
            if match := RENDERED.match(line):
                loop, said = float(match.group(2)), time.perf_counter() - start
    _, status, usage = os.wait4(child.pid, 0)
    watchdog.cancel()
    wall = time.perf_counter() - start
    cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    for orphan in _orphans(earlier):
        cpu, rss = cpu + orphan.ru_utime + orphan.ru_stime, max(rss, orphan.ru_maxrss)
    return Run(wall, rss, cpu, loop, said) if status == 0 else None


def _become_subreaper() -> None:
    """Have the descendants that outlive their parent become this process's children
    (Linux's PR_SET_CHILD_SUBREAPER), so that `_orphans` can count them."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _children() -> set[int]:
    """This process's children (of all its threads)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # (a thread that has just ended)
            found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def _orphans(earlier: set[int]) -> list[os.struct_rusage]:
    """The resource use of the descendants of a command just reaped that outlived it (the
    kernel reparents them here before the command's own wait ends), each waited for."""
    return [os.wait4(pid, 0)[2] for pid in sorted(_children() - earlier)]


@contextmanager
def private_display() -> Iterator[dict[str, str]]:
    """An environment whose DISPLAY is a private Xvfb (glretrace needs an X server even
    to replay; retrace and eglretrace run headless)."""
    if shutil.which("Xvfb") is None:
        sys.exit("benchmarks: needs Xvfb (apt-get install xvfb)")
    number = next(n for n in range(70, 100) if not Path(f"/tmp/.X{n}-lock").exists())
    xvfb = subprocess.Popen(
        ["Xvfb", f":{number}", "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield dict(os.environ, DISPLAY=f":{number}", WAFFLE_PLATFORM="surfaceless_egl")
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=10)


def reference_replayer(trace: Path) -> str:
    """glretrace, or eglretrace for a trace of an EGL program."""
    with cache.used(False):  # (a glance at the first batches: nothing worth keeping)
        reader = TraceReader(str(trace))
        for _ in reader.batches():
            if any(sig.name.startswith("egl") for sig in reader.signatures.functions.values()):
                return "eglretrace"
    return "glretrace"
