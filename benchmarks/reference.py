"""What the benchmark scripts share: a private X server for glretrace, and which
reference replayer a trace needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retrace.trace import cache
from retrace.trace.reader import TraceReader


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
