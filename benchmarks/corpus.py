"""Whole-process cost of retrace against eglretrace --headless on traces of real programs,
same run.

    python benchmarks/corpus.py [TRACE ...] [--noop] [--repeat N] [--commands A,B] [--json OUT]
        (default: every *.trace in $RETRACE_CORPUS, else /work/corpus/traces, and the
        long recordings in $RETRACE_LONG_CORPUS, else /work/corpus/long, if any)

Needs: apitrace's `eglretrace` (apt-get install apitrace), Mesa's EGL and llvmpipe (what
the tests use), and the corpus of real-program traces that `traces/corpus/record.sh` and
`record_long.sh` record (not kept in the repository).

The peer is eglretrace at its best: `eglretrace --headless` on waffle's surfaceless EGL
(no X server; it replays GLX and EGL traces alike, faster than glretrace under Xvfb).
With --noop both sides run on Mesa's GALLIUM_NOOP=1, a driver that accepts every call and
renders nothing: what is left is each replayer's own cost, as on a fast GPU.

For each trace, each command runs as the peer, as a first run of retrace (its trace
cache emptied before every run: the trace is hashed, read and its scan written) and as
a cached run (the scan kept by an earlier run; traces under 1 MiB are never cached, so
for them both runs are alike), --repeat times, interleaved (the order rotating) so that
the machine's drift hits all three alike, after a round that is not counted:

  replay -b     `retrace replay -b`                vs `eglretrace --headless -b`
  1 pass        --pframes "opengl: GPU Duration"  (one pass in both)
  2 passes      --pframes and --pcalls "opengl: Pixels Drawn"  (two passes in both)
  --pcalls      --pcalls "opengl: CPU Duration, GPU Duration"

Per command it prints, per trace and as medians over the traces, the medians of the
runs: the whole process's wall time, the loop (each side's "Rendered N frames in S
secs"), the time outside the loop (start-up, the driver's loading, exit), split at the
loop (before: from the start to the loop's, the moment the "Rendered" line came less the
loop's seconds; after: from that line until the process was reaped; a profile prints the
line once its tables are written, in both replayers, so there "before" includes writing
them) and peak RSS
and CPU time (the largest, and the sum, of the process and its reaped children, as
wait4 reports them: CPU time is what the machine's load disturbs least), with
retrace's ratios to the peer (×, lower is better) and its extra time outside the loop;
then a summary of the medians. A command that fails is shown as "fail" and left out of
the medians. The load of the machine is printed at the start and the end. Run by hand;
timing is not a test.

retrace runs as the `retrace` program beside the Python that runs this script, or as
--retrace names it; several --retrace builds (LABEL=PATH) are timed interleaved in the
same run, each against the same peer runs, to compare builds. Time a regular install
(`pip install .` into a venv of its own) to measure what users run; an editable install
(`pip install -e .`) adds its import finder's 10-13 ms to every command.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from reference import PEER, Run, measure, need_peer, peer_environment
from tabulate import tabulate

# Seconds a run may take before it is killed and shown as "fail". Under GALLIUM_NOOP the
# corpus's longest replay takes about 2 s, and eglretrace's profiles can wait forever for
# query results: there a hung peer costs a minute a run, not ten.
TIMEOUT, NOOP_TIMEOUT = 600.0, 60.0
DEFAULT_CORPUS = Path("/work/corpus/traces")
DEFAULT_LONG = Path("/work/corpus/long")
COMMANDS = {
    "replay -b": (["replay", "-b"], ["-b"]),
    "1 pass": (["--pframes=opengl: GPU Duration"],) * 2,
    "2 passes": (["--pframes=opengl: Pixels Drawn", "--pcalls=opengl: Pixels Drawn"],) * 2,
    "--pcalls": (["--pcalls=opengl: CPU Duration, GPU Duration"],) * 2,
}
# per side (PEER_SIDE, or a build's label and "first" or "cached": `side`), the runs of one
# command on one trace (None: the run failed)
Runs = dict[str, list[Run | None]]
PEER_SIDE = "peer"
KINDS = ("first", "cached")


def side(label: str, kind: str) -> str:
    """The side of a build of retrace, run first or cached."""
    return f"{label} {kind}".strip()


def builds(given: list[str]) -> dict[str, Path]:
    """The retrace programs to time, by label: `[LABEL=]PATH` each (the label defaults to
    PATH; a single program goes unlabelled), else the one beside this Python."""
    if not given:
        return {"": Path(sys.executable).with_name("retrace")}
    pairs = [g.partition("=")[::2] if "=" in g else (g, g) for g in given]
    return {label if len(pairs) > 1 else "": Path(path) for label, path in pairs}


def corpus(given: list[Path]) -> list[Path]:
    if given:
        return given
    folder = Path(os.environ.get("RETRACE_CORPUS", DEFAULT_CORPUS))
    long = Path(os.environ.get("RETRACE_LONG_CORPUS", DEFAULT_LONG))
    traces = sorted(folder.glob("*.trace")) + sorted(long.glob("*.trace"))
    if not traces:
        sys.exit(
            f"benchmarks/corpus.py: no traces in {folder} or {long}: record them with "
            "traces/corpus/record.sh and record_long.sh, then set RETRACE_CORPUS and "
            "RETRACE_LONG_CORPUS or name them"
        )
    return traces


def run_trace(
    trace: Path,
    commands: Sequence[str],
    repeat: int,
    programs: dict[str, Path],
    noop: bool,
    caches: Path,
    timeout: float,
) -> dict[str, Runs]:
    """Every command's runs on `trace`, per side, interleaved."""
    env = peer_environment(noop)

    def cached(folder: Path) -> Callable[[], dict[str, str]]:
        return lambda: {**env, "RETRACE_CACHE_DIR": str(folder)}

    def cold(folder: Path) -> Callable[[], dict[str, str]]:
        """A first run's environment: an empty trace cache."""

        def emptied() -> dict[str, str]:
            shutil.rmtree(folder, ignore_errors=True)
            return {**env, "RETRACE_CACHE_DIR": str(folder)}

        return emptied

    sides = [PEER_SIDE, *(side(label, kind) for label in programs for kind in KINDS)]
    runs: dict[str, Runs] = {name: {s: [] for s in sides} for name in commands}
    for r in range(repeat + 1):  # the first round warms caches and is not counted
        for name in commands:
            retrace_args, peer_args = COMMANDS[name]
            argvs = {PEER_SIDE: ([*PEER, *peer_args, str(trace)], lambda: env)}
            for number, (label, program) in enumerate(programs.items()):
                ours = [str(program), *retrace_args, str(trace)]
                folder = caches / str(number)
                argvs[side(label, "first")] = (ours, cold(folder / "cold"))
                argvs[side(label, "cached")] = (ours, cached(folder / "warm"))
            for k in range(len(sides)):
                argv, environment = argvs[sides[(r + k) % len(sides)]]
                run = measure(argv, environment(), timeout)
                if r:
                    runs[name][sides[(r + k) % len(sides)]].append(run)
    return runs


def median(values: Sequence[float]) -> float:
    """The median of the values that are numbers; NaN when none is."""
    known = [v for v in values if v == v]
    return statistics.median(known) if known else math.nan


def side_medians(runs: list[Run | None]) -> dict[str, float]:
    """Medians of one side's runs: wall, loop, outside, before and after seconds (`Run`);
    its peak RSS in MiB (the largest); all NaN when any run failed."""
    times = ("wall", "cpu", "loop", "outside", "before", "after")
    if not runs or any(run is None for run in runs):
        return dict.fromkeys((*times, "rss"), math.nan)
    done = [run for run in runs if run is not None]
    medians = {key: median([getattr(run, key) for run in done]) for key in times}
    return {**medians, "rss": max(run.rss for run in done) / 1024}


def figures(runs: Runs, label: str) -> dict[str, float]:
    """A command's figures on one trace for one build: the peer's medians and the build's
    first and cached runs' (`side_medians`, keyed peer_FIGURE, first_FIGURE and
    cached_FIGURE), with the build's ratios to the peer (×) and extra time outside the
    loop."""
    sides = {kind: side_medians(runs[side(label, kind)]) for kind in KINDS}
    peer = sides[PEER_SIDE] = side_medians(runs[PEER_SIDE])
    out = {f"{kind}_{key}": value for kind, m in sides.items() for key, value in m.items()}
    for kind in KINDS:
        for key in ("wall", "cpu", "loop"):
            out[f"{kind}_{key}_x"] = sides[kind][key] / peer[key]
        out[f"{kind}_extra"] = sides[kind]["outside"] - peer["outside"]
    peaks = (sides["first"]["rss"], sides["cached"]["rss"])
    out["rss"] = max(peaks) if all(p == p for p in peaks) else math.nan
    out["rss_x"] = out["rss"] / peer["rss"]
    return out


def ms(x: float) -> str:
    return "fail" if x != x else f"{x * 1000:.0f}"


def ratio(x: float) -> str:
    return "fail" if x != x else f"{x:.2f}"


def mib(x: float) -> str:
    return "fail" if x != x else f"{x:.0f}"


def signed_ms(x: float) -> str:
    return "fail" if x != x else f"{x * 1000:+.0f}"


# (heading, figure, format) of the two tables printed per command
WHOLE = (
    ("peer ms", "peer_wall", ms), ("first ms", "first_wall", ms), ("×", "first_wall_x", ratio),
    ("cached ms", "cached_wall", ms), ("×", "cached_wall_x", ratio),
    ("peer CPU ms", "peer_cpu", ms), ("cached CPU", "cached_cpu", ms), ("×", "cached_cpu_x", ratio),
    ("peer MiB", "peer_rss", mib), ("MiB", "rss", mib), ("×", "rss_x", ratio),
)  # fmt: skip
SPLIT = (
    ("peer loop", "peer_loop", ms), ("first loop", "first_loop", ms),
    ("×", "first_loop_x", ratio), ("cached loop", "cached_loop", ms),
    ("×", "cached_loop_x", ratio), ("peer out", "peer_outside", ms),
    ("first out", "first_outside", ms), ("+", "first_extra", signed_ms),
    ("cached out", "cached_outside", ms), ("+", "cached_extra", signed_ms),
)  # fmt: skip
ENDS = (
    ("peer before", "peer_before", ms), ("after", "peer_after", ms),
    ("first before", "first_before", ms), ("after", "first_after", ms),
    ("cached before", "cached_before", ms), ("after", "cached_after", ms),
)  # fmt: skip
SUMMARY = (
    ("first ×", "first_wall_x", ratio), ("cached ×", "cached_wall_x", ratio),
    ("CPU × (cached)", "cached_cpu_x", ratio),
    ("loop × (cached)", "cached_loop_x", ratio), ("outside + (cached)", "cached_extra", signed_ms),
    ("peer outside ms", "peer_outside", ms), ("before", "cached_before", ms),
    ("after", "cached_after", ms), ("peer before", "peer_before", ms),
    ("peer after", "peer_after", ms), ("RSS ×", "rss_x", ratio),
)  # fmt: skip
Column = tuple[str, str, Callable[[float], str]]


def table(per_trace: dict[str, dict[str, float]], columns: Sequence[Column]) -> str:
    """Per trace and as medians over the traces, the `columns` of `figures`."""
    rows = [[name, *(fmt(f[key]) for _, key, fmt in columns)] for name, f in per_trace.items()]
    medians = [median([f[key] for f in per_trace.values()]) for _, key, _ in columns]
    rows.append(["median", *(fmt(m) for (_, _, fmt), m in zip(columns, medians, strict=True))])
    return tabulate(rows, headers=["trace", *(h for h, _, _ in columns)], disable_numparse=True)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def report(results: dict[str, dict[str, Runs]], commands: Sequence[str], labels: list[str]) -> None:
    """The tables of every command and build, then the summary of medians."""
    summary = []
    for name in commands:
        for label in labels:
            per_trace = {trace: figures(runs[name], label) for trace, runs in results.items()}
            title = f"{name} ({label})" if label else name
            print(f"\n{title}: whole process, CPU time and peak RSS (× = retrace / peer)")
            print(table(per_trace, WHOLE))
            print(f"\n{title}: the loop and outside it (ms; + = retrace's extra time outside)")
            print(table(per_trace, SPLIT))
            print(
                f"\n{title}: outside the loop, from the start to the loop's and from its end (ms)"
            )
            print(table(per_trace, ENDS))
            medians = [median([f[key] for f in per_trace.values()]) for _, key, _ in SUMMARY]
            summary.append(
                [title, *(fmt(m) for (_, _, fmt), m in zip(SUMMARY, medians, strict=True))]
            )
    print("\nmedians over the traces")
    print(
        tabulate(summary, headers=["command", *(h for h, _, _ in SUMMARY)], disable_numparse=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--noop", action="store_true", help="GALLIUM_NOOP=1 on both sides")
    parser.add_argument(
        "--commands",
        default=",".join(COMMANDS),
        help=f"which of {', '.join(COMMANDS)} to run (comma-separated; default all)",
    )
    parser.add_argument(
        "--retrace", action="append", default=[], metavar="[LABEL=]PATH",
        help="a retrace program to time (default: the one beside this Python); given more "
        "than once, the builds are interleaved in the same run",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument(
        "--timeout",
        type=float,
        help=f"seconds after which a run is killed: a fail (default {TIMEOUT:g}, with --noop "
        f"{NOOP_TIMEOUT:g})",
    )
    args = parser.parse_args()
    if args.timeout is None:
        args.timeout = NOOP_TIMEOUT if args.noop else TIMEOUT
    commands = [c.strip() for c in args.commands.split(",")]
    if unknown := set(commands) - set(COMMANDS):
        sys.exit(f"benchmarks/corpus.py: no command {', '.join(sorted(unknown))}")
    need_peer("benchmarks/corpus.py")
    traces = corpus(args.traces)
    programs = builds(args.retrace)
    began = load()
    mode = "GALLIUM_NOOP=1" if args.noop else "llvmpipe"
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {mode}, {began}", flush=True)
    print(f"peer: {' '.join(PEER)} (WAFFLE_PLATFORM=surfaceless_egl)")
    for label, program in programs.items():
        print(f"retrace{f' {label}' if label else ''}: {program}")
    results: dict[str, dict[str, Runs]] = {}
    with tempfile.TemporaryDirectory(prefix="corpus-cache-") as caches:
        for trace in traces:
            runs = run_trace(
                trace, commands, args.repeat, programs, args.noop, Path(caches), args.timeout
            )
            results[trace.stem] = runs
            walls = {
                s: median([r.wall if r else math.nan for r in v])
                for s, v in runs[commands[0]].items()
            }
            done = ", ".join(f"{s} {ms(w)} ms" for s, w in walls.items())
            print(f"  {trace.stem}: {commands[0]} {done}", file=sys.stderr, flush=True)
    report(results, commands, list(programs))
    print(f"\n{args.repeat} interleaved runs per side; began at {began}; ended at {load()}")
    if args.json:
        raw = {
            trace: {
                c: {s: [asdict(r) if r else None for r in v] for s, v in runs[c].items()}
                for c in runs
            }
            for trace, runs in results.items()
        }
        args.json.write_text(json.dumps({"mode": mode, "load": [began, load()], "runs": raw}))


if __name__ == "__main__":
    main()
