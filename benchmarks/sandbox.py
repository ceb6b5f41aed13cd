"""What --sandbox costs: `retrace replay -b TRACE` with and without it, interleaved.

    python benchmarks/sandbox.py [--rounds 7] [TRACE ...]

Default traces: real-program traces of /work/corpus/traces (not in the repository)
and one sample trace. One round first warms both sides' caches (the sandbox has a
trace cache and shader caches of its own); then each round runs every trace plain
and confined, in alternating order, so that drift and load hit both sides alike.
Reports per trace the median wall time and the median CPU time (user + system, of
the retrace process and its replay child: less disturbed by other work on a shared
machine than wall time) of each side, and their ratios. Run by hand; nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path("/work/corpus/traces")
TRACES = [CORPUS / f"{name}.trace" for name in (
    "qt6-qml", "love", "neverball", "glmark2-terrain", "mpv-gpu", "gtk4-widget-factory",
)] + [ROOT / "traces" / "glmark2-desktop-fbo.trace"]  # fmt: skip
SIDES = {"plain": [], "sandbox": ["--sandbox"]}


def run(trace: Path, options: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `retrace replay -b` (the process tree's CPU)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "retrace", "replay", "-b", *options, str(trace)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("traces", nargs="*", type=Path, default=TRACES)
    args = parser.parse_args()
    times: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    for round_no in range(args.rounds + 1):
        for i, trace in enumerate(args.traces):
            order = list(SIDES) if (round_no + i) % 2 == 0 else list(reversed(SIDES))
            for side in order:
                measured = run(trace, SIDES[side])
                if round_no:  # round 0 warms the caches
                    times.setdefault((trace, side), []).append(measured)
    rows = []
    ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
    for trace in args.traces:
        medians = {
            side: [statistics.median(t[k] for t in times[trace, side]) for k in (0, 1)]
            for side in SIDES
        }
        (pw, pc), (sw, sc) = medians["plain"], medians["sandbox"]
        ratios["wall"].append(sw / pw)
        ratios["cpu"].append(sc / pc)
        rows.append([trace.name, f"{pw:.3f}", f"{sw:.3f}", f"{sw / pw - 1:+.1%}",
                     f"{pc:.3f}", f"{sc:.3f}", f"{sc / pc - 1:+.1%}"])  # fmt: skip
    rows.append(["geometric mean", "", "", f"{statistics.geometric_mean(ratios['wall']) - 1:+.1%}",
                 "", "", f"{statistics.geometric_mean(ratios['cpu']) - 1:+.1%}"])  # fmt: skip
    headers = ["trace", "wall plain s", "wall sandbox s", "wall", "CPU plain s",
               "CPU sandbox s", "CPU"]  # fmt: skip
    print(tabulate(rows, headers=headers))
    print(f"{args.rounds} rounds, medians; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
