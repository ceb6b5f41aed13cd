"""Profiling cost of retrace against eglretrace --headless on the same trace and selection,
same run.

    python benchmarks/profile.py [TRACE ...] [--noop]
        (default: the glmark2 and glxgears traces)

For each trace, whole-command wall time of
  - one pass:  --pframes "opengl: CPU Duration"
  - two passes: --pframes "opengl: Pixels Drawn" --pcalls "opengl: Pixels Drawn"
and peak RSS with --pcalls "opengl: CPU Duration", as retrace/peer ratios (lower is
better for retrace). The peer is eglretrace at its best (`--headless` on waffle's
surfaceless EGL, no X server: `reference.PEER`); --noop runs both on Mesa's
GALLIUM_NOOP=1 (a driver that renders nothing). Best of --repeat runs. Run by hand;
timing is not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reference import PEER, measure, need_peer, peer_environment
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
SELECTIONS = {
    "one pass": ["--pframes=opengl: CPU Duration"],
    "two passes": ["--pframes=opengl: Pixels Drawn", "--pcalls=opengl: Pixels Drawn"],
}
MEMORY = ["--pcalls=opengl: CPU Duration"]


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one command; a failure ends the benchmark."""
    run = measure(argv, env)
    if run is None:
        sys.exit(f"benchmarks/profile.py: {' '.join(argv)} failed")
    return run.wall, run.rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--noop", action="store_true", help="GALLIUM_NOOP=1 on both sides")
    args = parser.parse_args()
    need_peer("benchmarks/profile.py")
    traces = args.traces or sorted((ROOT / "traces").glob("glmark2-[bdt]*.trace")) + [
        ROOT / "traces" / "glxgears.trace"
    ]
    ours = [sys.executable, "-m", "retrace", "--quiet"]
    rows = []
    env = peer_environment(args.noop)
    for trace in traces:
        row = [trace.name]
        for selection in SELECTIONS.values():
            a = min(measured([*ours, *selection, str(trace)], env)[0] for _ in range(args.repeat))
            b = min(measured([*PEER, *selection, str(trace)], env)[0] for _ in range(args.repeat))
            row += [f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}"]
        a = measured([*ours, *MEMORY, str(trace)], env)[1]
        b = measured([*PEER, *MEMORY, str(trace)], env)[1]
        row += [a // 1024, b // 1024, f"{a / b:.2f}"]
        rows.append(row)
    print(
        tabulate(
            rows,
            headers=[
                "trace",
                "1 pass s",
                "peer s",
                "ratio",
                "2 passes s",
                "peer s",
                "ratio",
                "--pcalls MiB",
                "peer MiB",
                "RSS ratio",
            ],
        )
    )


if __name__ == "__main__":
    main()
