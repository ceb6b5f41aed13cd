"""Replay speed of retrace against glretrace -b, measured in the same run.

    python benchmarks/replay.py [TRACE ...]     (default: every frame-based trace in traces/)

For each trace: glretrace's own `Rendered N frames in S secs` (its replay loop,
parsing included) and the wall time of the whole glretrace command; retrace's
first pass (parse + compile + replay) and a later pass (compiled entries
only), with calls/s and the ratios to glretrace. glretrace needs an X display:
the script starts Xvfb (EGL traces use eglretrace, headless). Best of --repeat
runs. Run by hand; timing is not a test.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from reference import private_display, reference_replayer
from tabulate import tabulate

from retrace.replay.replayer import Replayer

ROOT = Path(__file__).resolve().parent.parent
RENDERED = re.compile(rb"Rendered (\d+) frames in ([0-9.e+-]+) secs")


def reference(trace: Path, env: dict[str, str]) -> tuple[float, float]:
    """(glretrace's reported replay seconds, wall seconds of the command)."""
    exe = reference_replayer(trace)
    start = time.perf_counter()
    out = subprocess.run([exe, "-b", str(trace)], capture_output=True, env=env).stdout
    wall = time.perf_counter() - start
    match = RENDERED.search(out)
    if match is None:
        sys.exit(f"benchmarks/replay.py: {exe} failed on {trace}")
    return float(match.group(2)), wall


def ours(trace: Path, passes: int = 3) -> tuple[float, float, int]:
    """(first pass seconds, best later pass seconds, calls in the trace)."""
    with Replayer(str(trace)) as replayer:
        first = replayer.run_pass().seconds
        later = min(replayer.run_pass().seconds for _ in range(passes - 1))
        return first, later, replayer.reader.calls_read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    traces = args.traces or sorted(
        p for p in (ROOT / "traces").glob("*.trace") if "piglit" not in p.name
    )
    if shutil.which("glretrace") is None:
        sys.exit("benchmarks/replay.py: needs glretrace (apt-get install apitrace)")
    rows = []
    with private_display() as env:
        for trace in traces:
            ref_loop, ref_wall = (
                min(x)
                for x in zip(*(reference(trace, env) for _ in range(args.repeat)), strict=True)
            )
            first, later, calls = (
                min(x) for x in zip(*(ours(trace) for _ in range(args.repeat)), strict=True)
            )
            rows.append(
                [
                    trace.name,
                    calls,
                    f"{calls / ref_loop / 1e3:.0f}",
                    f"{calls / first / 1e3:.0f}",
                    f"{calls / later / 1e3:.0f}",
                    f"{ref_loop / first:.2f}",
                    f"{ref_loop / later:.2f}",
                    f"{first / ref_wall:.2f}",
                ]
            )
    print(
        tabulate(
            rows,
            headers=[
                "trace",
                "calls",
                "glretrace kcalls/s",
                "first pass kcalls/s",
                "later pass kcalls/s",
                "first/glretrace speed",
                "later/glretrace speed",
                "first pass time / glretrace wall",
            ],
        )
    )


if __name__ == "__main__":
    main()
