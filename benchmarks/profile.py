"""Profiling cost of retrace against glretrace on the same trace and selection, same run.

    python benchmarks/profile.py [TRACE ...]     (default: the glmark2 and glxgears traces)

For each trace, whole-command wall time of
  - one pass:  --pframes "opengl: CPU Duration"
  - two passes: --pframes "opengl: Pixels Drawn" --pcalls "opengl: Pixels Drawn"
and peak RSS with --pcalls "opengl: CPU Duration", as retrace/glretrace ratios
(lower is better for retrace). glretrace runs under a private Xvfb; EGL traces
use eglretrace. Best of --repeat runs. Run by hand; timing is not a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from reference import private_display, reference_replayer
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
SELECTIONS = {
    "one pass": ["--pframes=opengl: CPU Duration"],
    "two passes": ["--pframes=opengl: Pixels Drawn", "--pcalls=opengl: Pixels Drawn"],
}
MEMORY = ["--pcalls=opengl: CPU Duration"]


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one command."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"benchmarks/profile.py: {' '.join(argv)} failed")
    return seconds, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    traces = args.traces or sorted((ROOT / "traces").glob("glmark2-[bdt]*.trace")) + [
        ROOT / "traces" / "glxgears.trace"
    ]
    ours = [sys.executable, "-m", "retrace", "--quiet"]
    rows = []
    with private_display() as env:
        for trace in traces:
            ref = [reference_replayer(trace)]
            row = [trace.name]
            for selection in SELECTIONS.values():
                a = min(
                    measure([*ours, *selection, str(trace)], env)[0] for _ in range(args.repeat)
                )
                b = min(measure([*ref, *selection, str(trace)], env)[0] for _ in range(args.repeat))
                row += [f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}"]
            a = measure([*ours, *MEMORY, str(trace)], env)[1]
            b = measure([*ref, *MEMORY, str(trace)], env)[1]
            row += [a // 1024, b // 1024, f"{a / b:.2f}"]
            rows.append(row)
    print(
        tabulate(
            rows,
            headers=[
                "trace",
                "1 pass s",
                "glretrace s",
                "ratio",
                "2 passes s",
                "glretrace s",
                "ratio",
                "--pcalls MiB",
                "glretrace MiB",
                "RSS ratio",
            ],
        )
    )


if __name__ == "__main__":
    main()
