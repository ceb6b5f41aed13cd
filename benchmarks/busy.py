"""What GPU Busy costs: a one-pass `--pframes "opengl: GPU Busy"` against a `GPU Duration`
pass on the same trace, same run.

    python benchmarks/busy.py [--repeat N] [--loop N] [TRACE ...]
        (default: every trace of traces/ and traces/corpus/)

GPU Busy brackets every call that makes the GPU work with two timestamp queries of its
own, where GPU Duration issues two per frame; both read their queries late, in batches.
For each trace the two selections run alternately (the first of each round alternating
too), and two figures are compared, each the median of the Busy runs over the median of
the Duration runs: the pass time retrace reports ("pass 1 of 1 done in X s": the replay
alone, not the start-up), and the CPU time of the whole command and its children (user
and system, the driver's threads included), which a machine shared with other work
disturbs less than wall time. `--loop N` measures N more replays of the last frame
(the frames in the tables are those loops), so that the steady state outweighs the
start-up. Run by hand; timing is not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
SELECTIONS = {"duration": "opengl: GPU Duration", "busy": "opengl: GPU Busy"}
PASS = re.compile(r"pass 1 of 1 done in ([0-9.]+) s")


def run(trace: Path, selection: str, extra: list[str]) -> tuple[float, float] | None:
    """(pass seconds, CPU seconds) of one profile; None where --loop finds no complete
    frame to loop over."""
    argv = [sys.executable, "-m", "retrace", "--pframes", selection, *extra, str(trace)]
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if "no complete frame to loop over" in stderr:
        return None
    found = PASS.search(stderr)
    if status != 0 or found is None:
        sys.exit(f"benchmarks/busy.py: {' '.join(argv)} failed:\n{stderr}")
    return float(found[1]), usage.ru_utime + usage.ru_stime


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
    rows, ratios = [], {"pass": [], "cpu": []}
    for trace in traces:
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in SELECTIONS}
        for round_ in range(args.repeat):
            order = list(SELECTIONS.items())
            for name, selection in order[:: 1 if round_ % 2 == 0 else -1]:
                measured = run(trace, selection, extra)
                if measured is not None:
                    times[name].append(measured)
        if not times["busy"]:
            rows.append([trace.name, "(no complete frame to loop)"])
            continue
        row: list[object] = [trace.name]
        for k, figure in enumerate(ratios):
            duration, busy = (statistics.median(t[k] for t in times[n]) for n in SELECTIONS)
            ratios[figure].append(busy / duration)
            row += [f"{duration:.2f}", f"{busy:.2f}", f"{busy / duration:.2f}"]
        rows.append(row)
        print("\t".join(map(str, row)), file=sys.stderr, flush=True)
    for what, pick in (("geometric mean", geometric_mean), ("largest", max)):
        rows.append(
            [what, "", "", f"{pick(ratios['pass']):.2f}", "", "", f"{pick(ratios['cpu']):.2f}"]
        )
    headers = ["trace", "Duration pass s", "Busy pass s", "ratio",
               "Duration CPU s", "Busy CPU s", "ratio"]  # fmt: skip
    print(tabulate(rows, headers=headers))


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


if __name__ == "__main__":
    main()
