"""Replay speed of retrace against `eglretrace --headless -b`, measured in the same run.

    python benchmarks/replay.py [TRACE ...] [--noop]
        (default: every frame-based trace in traces/)

For each trace: the peer's own `Rendered N frames in S secs` (its replay loop, parsing
included) and the wall time of the whole command, the peer at its best (`eglretrace
--headless` on waffle's surfaceless EGL, no X server: `reference.PEER`); retrace's first
pass (parse + compile + replay) and a later pass (compiled entries only), in this
process, with calls/s and the ratios to the peer. --noop runs both on Mesa's
GALLIUM_NOOP=1 (a driver that renders nothing): the replayers' own speed. Best of
--repeat runs. Run by hand; timing is not a test.

    python benchmarks/replay.py --read-ahead [TRACE ...]

shows how reading ahead (`retrace/trace/ahead.py`) works instead, no glretrace
needed: first passes (trace cache off) with it on and off, interleaved, medians
of --repeat: wall time, CPU of the whole process (llvmpipe's threads too), of the
loop's thread and of the reader's, how long the loop waited for a batch and the
reader for room to put one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from reference import PEER, RENDERED, need_peer, peer_environment
from tabulate import tabulate

from retrace.replay.replayer import Replayer
from retrace.trace import cache

ROOT = Path(__file__).resolve().parent.parent


def reference(trace: Path, env: dict[str, str]) -> tuple[float, float]:
    """(the peer's reported replay seconds, wall seconds of the command)."""
    start = time.perf_counter()
    out = subprocess.run([*PEER, "-b", str(trace)], capture_output=True, env=env).stdout
    wall = time.perf_counter() - start
    match = RENDERED.search(out)
    if match is None:
        sys.exit(f"benchmarks/replay.py: {' '.join(PEER)} failed on {trace}")
    return float(match.group(2)), wall


def ours(trace: Path, passes: int = 3) -> tuple[float, float, int]:
    """(first pass seconds, best later pass seconds, calls in the trace)."""
    with Replayer(str(trace)) as replayer:
        first = replayer.run_pass().seconds
        later = min(replayer.run_pass().seconds for _ in range(passes - 1))
        return first, later, replayer.reader.calls_read


def first_pass(trace: Path, ahead: bool) -> list[float]:
    """A first pass, read ahead or not: wall, process CPU, loop thread CPU, and the
    reader's CPU, the loop's wait and the reader's (0 when not read ahead), in ms."""
    os.environ["RETRACE_READ_AHEAD"] = "1" if ahead else "0"
    with cache.used(False), Replayer(str(trace)) as replayer:
        cpu, loop, wall = time.process_time(), time.thread_time(), time.perf_counter()
        replayer.run_pass()
        cpu, loop, wall = (
            time.process_time() - cpu,
            time.thread_time() - loop,
            time.perf_counter() - wall,
        )
        read = replayer.reader.read_ahead
        timing = (read.busy, read.waited, read.stalled) if read else (0.0, 0.0, 0.0)
    return [1e3 * x for x in (wall, cpu, loop, *timing)]


def read_ahead_table(traces: list[Path], repeat: int) -> None:
    rows = []
    for trace in traces:
        runs: dict[bool, list[list[float]]] = {True: [], False: []}
        for i in range(repeat):
            for ahead in (i % 2 == 0, i % 2 != 0):
                runs[ahead].append(first_pass(trace, ahead))
        for ahead in (True, False):
            medians = [statistics.median(x) for x in zip(*runs[ahead], strict=True)]
            shown = medians if ahead else medians[:3]
            rows.append([trace.name, "on" if ahead else "off", *(f"{x:.0f}" for x in shown)])
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        tabulate(
            rows,
            headers=["trace", "read ahead", "wall ms", "CPU ms", "loop CPU", "reader CPU"]
            + ["loop waited", "reader waited"],
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--read-ahead", action="store_true", help="the table above instead")
    parser.add_argument("--noop", action="store_true", help="GALLIUM_NOOP=1 on both sides")
    args = parser.parse_args()
    traces = args.traces or sorted(
        p for p in (ROOT / "traces").glob("*.trace") if "piglit" not in p.name
    )
    env = peer_environment(args.noop)
    os.environ.clear()  # (retrace replays in this process: in the same environment)
    os.environ.update(env)
    if args.read_ahead:
        read_ahead_table(traces, args.repeat)
        return
    need_peer("benchmarks/replay.py")
    rows = []
    for trace in traces:
        ref_loop, ref_wall = (
            min(x) for x in zip(*(reference(trace, env) for _ in range(args.repeat)), strict=True)
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
                "peer kcalls/s",
                "first pass kcalls/s",
                "later pass kcalls/s",
                "first/peer speed",
                "later/peer speed",
                "first pass time / peer wall",
            ],
        )
    )


if __name__ == "__main__":
    main()
