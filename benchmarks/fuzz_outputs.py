"""Crafted traces against the destinations retrace gives the driver: out-of-bounds writes
counted, beside glretrace's and eglretrace's outcomes on the same files.

    python benchmarks/fuzz_outputs.py [--cases 2000] [--seed 1] [--keep DIR] [--display :N]

Each case is a real trace of traces/ (those with calls a replay issues that write
through an output, or glPixelStore*) with one to three of those calls' numeric arguments
changed -- widths, heights, row lengths and skips, pnames, formats, bufSize, n -- or an
array recorded as an output shortened (`tests/fuzzing.py`'s `mutate_outputs`). Every
case goes through `retrace replay -b`, in whose replay every readback and every output
of unknown size writes into scratch memory followed by a guard of inaccessible address
space (`retrace/replay/_guard.c`): a write past what retrace sized faults there and is
reported as retrace's own error, counted here as "out-of-bounds write". The same file goes
through `eglretrace -b` (EGL traces, headless) or `glretrace -b` (GLX traces, on
--display). Outcomes:

  ok                    exit 0
  clean error           non-zero exit with one `retrace:` line (apitrace: any)
  out-of-bounds write   the driver wrote past memory retrace gave it (the target: none)
  driver crash          the driver crashed with retrace's arguments within bounds
  traceback, hang, crash  retrace's own failures (crash: apitrace killed by a signal)

Cases of the last four kinds are kept in --keep. Run by hand; a seeded subset runs in
tests/gl/test_fuzz_outputs.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fuzz import FuzzRun, arguments, outcome_table, reference_outcome, run_cases  # noqa: E402
from fuzzing import (  # noqa: E402
    Harness,
    Seed,
    Target,
    numbered_output_case,
    output_targets,
    replay_outcome,
)

OUTCOMES = (
    "ok",
    "clean error",
    "out-of-bounds write",
    "driver crash",
    "traceback",
    "hang",
    "crash",
)
KEPT = ("out-of-bounds write", "driver crash", "traceback", "hang", "crash")


def output_seeds() -> list[tuple[Seed, tuple[Target, ...]]]:
    """The traces of traces/ with calls to change that a replay issues (one per stream)."""
    seeds = []
    for path in sorted((ROOT / "traces").glob("*.trace")):
        if path.name.count(".") > 1:  # es2tri.gzip.trace...: the same stream again
            continue
        seed = Seed.load(path)
        targets = output_targets(seed)
        if any(t.issued for t in targets):
            seeds.append((seed, targets))
    return seeds


def reference_argv(path: Path, egl: bool) -> list[str]:
    return [shutil.which("eglretrace" if egl else "glretrace") or "", "-b", str(path)]


def main() -> None:
    parser = arguments(__doc__, 2_000)
    parser.add_argument(
        "--reference-timeout", type=float, default=10, help="the same for glretrace/eglretrace"
    )
    parser.add_argument("--display", default=os.environ.get("DISPLAY"), help="for glretrace")
    options = parser.parse_args()
    seeds = output_seeds()
    egl = {seed.name: b"eglMakeCurrent" in seed.stream for seed, _ in seeds}
    run = FuzzRun.start("retrace-fuzz-outputs-", options.keep)

    def run_case(harness: Harness, i: int) -> list[tuple[str, str]]:
        name, data = numbered_output_case(seeds, options.seed, i)
        reference = "eglretrace" if egl[name] else "glretrace"
        other = "not run"
        with run.case_file(i, data) as path:
            outcome, detail = replay_outcome(harness, path)
            if outcome in KEPT:
                run.keep_case(path, f"{i}.trace", f"{i} ({name}): {outcome}: {detail[-300:]}")
            if egl[name] or options.display:
                env = {**os.environ, "WAFFLE_PLATFORM": "surfaceless_egl"} if egl[name] else {
                    **os.environ, "DISPLAY": options.display}  # fmt: skip
                other = reference_outcome(reference_argv(path, egl[name]), env,
                                          options.reference_timeout)  # fmt: skip
        return [
            ("retrace replay", outcome),
            (f"retrace replay ({reference} traces)", outcome),
            (f"{reference} -b", other),
            ("seed", name),
        ]

    counts = run_cases(options.cases, options.jobs, options.timeout, run_case)
    commands = ("retrace replay", "retrace replay (eglretrace traces)", "eglretrace -b",
                "retrace replay (glretrace traces)", "glretrace -b")  # fmt: skip
    print(outcome_table(counts, commands, OUTCOMES))
    print(f"\ncases per seed: { {name: n for (c, name), n in counts.items() if c == 'seed'} }")
    run.print_kept()


if __name__ == "__main__":
    main()
