"""Whole-process cost of retrace against glretrace on traces of real programs, same run.

    python benchmarks/corpus.py [TRACE ...] [--repeat N]
        (default: every *.trace in $RETRACE_CORPUS, else /work/corpus/rerecord)

Needs: apitrace's `glretrace` and `eglretrace` (apt-get install apitrace), `Xvfb`
(apt-get install xvfb: glretrace needs an X server even to replay), Mesa's EGL
and llvmpipe (what the tests use), and the corpus of real-program traces, which
`traces/corpus/record.sh` records (not kept in the repository).

For each trace, each command runs as retrace and as the reference replayer
(glretrace, or eglretrace for an EGL program) --repeat times, interleaved (the
order alternating) so that the machine's drift hits both alike:

  replay -b     `retrace replay -b`                 vs `glretrace -b`
  1 pass        --pframes "opengl: CPU Duration, GPU Duration" (one pass in both)
  2 passes      --pframes and --pcalls "opengl: Pixels Drawn"  (two passes in both)
  --pcalls      --pcalls "opengl: CPU Duration, GPU Duration"

and prints, per trace and as medians over the traces, retrace's median wall
time as a ratio of the reference's (lower is better), for a first run (a trace
cache of its own, empty, for every run: the trace is hashed, read and its scan
written) and a cached run (the trace's scan kept by an earlier run; traces under
1 MiB are never cached), and peak RSS (the largest over the commands and both
kinds of run) of both and its ratio. A command that fails is shown as "fail"
and left out of the medians. Run by hand; timing is not a test.

retrace runs as the `retrace` program of the Python that runs this script: run it
with a regular install's Python (`pip install .` into a venv of its own) to measure
what users run; an editable install (`pip install -e .`) adds its import finder's
10-13 ms to every command.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reference import private_display, reference_replayer
from tabulate import tabulate

DEFAULT_CORPUS = Path("/work/corpus/rerecord")
# the `retrace` program installed beside this Python: what a user runs (`python -m retrace`
# pays for runpy, and from the repository's root imports the source tree instead)
RETRACE = Path(sys.executable).with_name("retrace")
SPLIT = (
    "Where replay -b's time goes (first runs, medians): the wall time outside the replay "
    "loop (start-up, the driver's loading, exit) of each, and the loop's time (the "
    "Rendered line) of retrace as a ratio of the reference's."
)
RENDERED = re.compile(rb"Rendered \d+ frames in ([0-9.]+) secs")
COMMANDS = {
    "replay -b": (["replay", "-b"], ["-b"]),
    "1 pass": (["--pframes=opengl: CPU Duration, GPU Duration"],) * 2,
    "2 passes": (["--pframes=opengl: Pixels Drawn", "--pcalls=opengl: Pixels Drawn"],) * 2,
    "--pcalls": (["--pcalls=opengl: CPU Duration, GPU Duration"],) * 2,
}


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, int, float] | None:
    """(wall seconds, peak RSS in KiB, seconds of the replay loop by the "Rendered" line it
    prints, NaN without one) of one command, None when it fails."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert child.stdout is not None
    with child.stdout:
        rendered = RENDERED.findall(child.stdout.read())
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    loop = float(rendered[-1]) if rendered else math.nan
    return (seconds, usage.ru_maxrss, loop) if status == 0 else None


def corpus(given: list[Path]) -> list[Path]:
    if given:
        return given
    folder = Path(os.environ.get("RETRACE_CORPUS", DEFAULT_CORPUS))
    traces = sorted(folder.glob("*.trace"))
    if not traces:
        sys.exit(
            f"benchmarks/corpus.py: no traces in {folder}: record them with "
            "traces/corpus/record.sh, then set RETRACE_CORPUS or name them"
        )
    return traces


def run_trace(
    trace: Path, repeat: int, env: dict[str, str], caches: Path
) -> tuple[dict[str, tuple[float, float]], int, int, tuple[float, float, float]]:
    """Ratios per command, first run and cached run (NaN where a side failed), the peak
    RSS of retrace and of the reference, and where `replay -b`'s time goes (`SPLIT`)."""
    ours = [str(RETRACE)]
    ref = [reference_replayer(trace)]
    warm = {**env, "RETRACE_CACHE_DIR": str(caches / "warm")}

    def cold() -> dict[str, str]:
        """A first run's environment: an empty trace cache."""
        shutil.rmtree(caches / "cold", ignore_errors=True)
        return {**env, "RETRACE_CACHE_DIR": str(caches / "cold")}

    # per command: wall times of the reference, of retrace's first runs, of its cached runs
    times: dict[str, tuple[list[float], ...]] = {c: ([], [], []) for c in COMMANDS}
    loops: tuple[list[float], ...] = ([], [], [])  # replay -b: the Rendered line's seconds
    failed: set[tuple[str, int]] = set()
    peaks = [0, 0]
    for r in range(repeat + 1):  # the first round warms caches and is not counted
        for name, (retrace_args, ref_args) in COMMANDS.items():
            ours_argv = [*ours, *retrace_args, str(trace)]
            # the reference, retrace's first run (env made afresh), its cached run
            sides = [([*ref, *ref_args, str(trace)], env), (ours_argv, None), (ours_argv, warm)]
            for side in (r % 3, (r + 1) % 3, (r + 2) % 3):
                argv, side_env = sides[side]
                result = measure(argv, side_env or cold())
                if result is None:
                    failed.add((name, side))
                    continue
                who = 0 if side else 1  # peaks: retrace's (either run), the reference's
                peaks[who] = max(peaks[who], result[1])
                if r:
                    times[name][side].append(result[0])
                    if name == "replay -b":
                        loops[side].append(result[2])
    ratios = {}
    for name in COMMANDS:
        ref_time = statistics.median(times[name][0]) if (name, 0) not in failed else math.nan
        ratios[name] = tuple(
            math.nan if (name, side) in failed else statistics.median(times[name][side]) / ref_time
            for side in (1, 2)
        )
    ref_loop, ours_loop = (statistics.median(loops[side] or [math.nan]) for side in (0, 1))
    walls = [statistics.median(times["replay -b"][side] or [math.nan]) for side in (0, 1)]
    split = (walls[0] - ref_loop, walls[1] - ours_loop, ours_loop / ref_loop)
    return ratios, peaks[0], peaks[1], split


def cell(ratio: float) -> str:
    return "fail" if ratio != ratio else f"{ratio:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    traces = corpus(args.traces)
    rows, splits = [], []
    # a first-run and a cached-run column per command (headed "cached")
    keys = [key for name in COMMANDS for key in (name, f"{name} cached")]
    columns: dict[str, list[float]] = {key: [] for key in [*keys, "RSS"]}
    with private_display() as env, tempfile.TemporaryDirectory(prefix="corpus-cache-") as caches:
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # start-up as users have it: bytecode cached
        for trace in traces:
            ratios, ours_kib, ref_kib, split = run_trace(trace, args.repeat, env, Path(caches))
            splits.append([trace.name, *split])
            cells = [ratio for pair in ratios.values() for ratio in pair]
            for column, ratio in zip(keys, cells, strict=True):
                if ratio == ratio:
                    columns[column].append(ratio)
            columns["RSS"].append(ours_kib / ref_kib)
            rows.append(
                [trace.name, *map(cell, cells)]
                + [ours_kib // 1024, ref_kib // 1024, f"{ours_kib / ref_kib:.2f}"]
            )
            print(tabulate(rows[-1:], tablefmt="plain"), file=sys.stderr, flush=True)
    medians = [statistics.median(v) if v else math.nan for v in columns.values()]
    rows.append(["median", *map(cell, medians[:-1]), "", "", cell(medians[-1])])
    headers = [key if key in COMMANDS else "cached" for key in keys]
    print(tabulate(rows, headers=["trace", *headers, "MiB", "reference MiB", "RSS ratio"]))
    print(f"\n{SPLIT}")
    known = [row for row in splits if all(v == v for v in row[1:])]
    columns_of_known = zip(*(row[1:] for row in known), strict=True)
    splits.append(["median", *(statistics.median(v) for v in columns_of_known)])
    print(
        tabulate(
            [[n, f"{a * 1000:.0f}", f"{b * 1000:.0f}", f"{c:.2f}"] for n, a, b, c in splits],
            headers=["trace", "reference outside ms", "retrace outside ms", "loop ratio"],
        )
    )


if __name__ == "__main__":
    main()
