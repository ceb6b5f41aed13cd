"""What GPU Busy costs: a one-pass `--pframes "opengl: GPU Busy"` against a `GPU Duration`
pass on the same trace, same run.

    python benchmarks/busy.py [--repeat N] [--loop N] [TRACE ...]
        (default: every trace of traces/ and traces/corpus/)

GPU Busy brackets every call that makes the GPU work with two timestamp queries of its
own, where GPU Duration issues two per frame; both read their queries late, in batches.
For each trace the two selections run alternately (the first of each round alternating
too), and the pass time retrace reports ("pass 1 of 1 done in X s", the replay alone,
not the start-up) is compared: the median of the Busy runs over the median of the
Duration runs. `--loop N` measures N more replays of the last frame instead (the frames
in the tables are those loops). Run by hand; timing is not a test.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
SELECTIONS = {"duration": "opengl: GPU Duration", "busy": "opengl: GPU Busy"}
PASS = re.compile(r"pass 1 of 1 done in ([0-9.]+) s")


def pass_seconds(trace: Path, selection: str, extra: list[str]) -> float | None:
    """The pass's time; None where --loop finds no complete frame to loop over."""
    argv = [sys.executable, "-m", "retrace", "--pframes", selection, *extra, str(trace)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if "no complete frame to loop over" in done.stderr:
        return None
    found = PASS.search(done.stderr)
    if done.returncode != 0 or found is None:
        sys.exit(f"benchmarks/busy.py: {' '.join(argv)} failed:\n{done.stderr}")
    return float(found[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loop", type=int, default=0)
    args = parser.parse_args()
    traces = args.traces or sorted((ROOT / "traces").glob("*.trace")) + sorted(
        (ROOT / "traces" / "corpus").glob("*.trace")
    )
    extra = [f"--loop={args.loop}"] if args.loop else []
    rows, ratios = [], []
    for trace in traces:
        times: dict[str, list[float]] = {name: [] for name in SELECTIONS}
        for round_ in range(args.repeat):
            order = list(SELECTIONS.items())
            for name, selection in order[:: 1 if round_ % 2 == 0 else -1]:
                seconds = pass_seconds(trace, selection, extra)
                if seconds is not None:
                    times[name].append(seconds)
        if not times["busy"]:
            rows.append([trace.name, "", "", "(no complete frame to loop)"])
            continue
        duration, busy = (statistics.median(times[n]) for n in SELECTIONS)
        ratio = busy / duration
        ratios.append(ratio)
        rows.append([trace.name, f"{duration:.3f}", f"{busy:.3f}", f"{ratio:.2f}"])
        print("\t".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    rows.append(["geometric mean", "", "", f"{geomean:.2f}"])
    rows.append(["largest", "", "", f"{max(ratios):.2f}"])
    headers = ["trace", "GPU Duration pass s", "GPU Busy pass s", "Busy / Duration"]
    print(tabulate(rows, headers=headers))


if __name__ == "__main__":
    main()
