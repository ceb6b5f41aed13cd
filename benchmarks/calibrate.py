"""How often `retrace compare` cries wolf, and what it finds for a real slowdown.

    python benchmarks/calibrate.py [--repeats 20] [--runs 5] [TRACE ...]

Needs only retrace and Mesa's llvmpipe and softpipe (GALLIUM_DRIVER).

- A/A: `--repeats` comparisons of llvmpipe against llvmpipe (`--runs` runs
  per side after one warm-up, `--fail-on rows`), cycling over the traces:
  every verdict other than "same" is a false positive.
- llvmpipe -> softpipe on every trace: the change of each frames total with its
  95% interval (the reference rasterizer is several times slower).

Run by hand; timings on a shared machine are not a test (tests/gl/test_compare.py
holds the calibration tests, with generous margins).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
TRACES = [ROOT / "traces" / f"glmark2-{name}.trace"
          for name in ("desktop-fbo", "es2-effect2d", "buffer-map", "texture-mipmap")]  # fmt: skip
SELECTION = ["--pframes", "opengl: CPU Duration, GPU Duration", "--pcalls", "opengl: CPU Duration"]


def compare(trace: Path, base: str, new: str, runs: int, *extra: str) -> tuple[int, dict]:
    """`retrace compare` of two drivers on `trace`: exit status and JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "retrace", "compare", str(trace), *SELECTION,
         "--base", f"GALLIUM_DRIVER={base}", "--new", f"GALLIUM_DRIVER={new}",
         "--min-runs", str(runs), "--format", "json", *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        sys.exit(f"calibrate: retrace compare failed: {done.stderr.strip()}")
    return done.returncode, json.loads(done.stdout)


def percent(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=TRACES)
    parser.add_argument("--repeats", type=int, default=20, help="A/A comparisons")
    parser.add_argument("--runs", type=int, default=5, help="runs per side")
    args = parser.parse_args()

    rows = []
    for i in range(args.repeats):
        trace = args.traces[i % len(args.traces)]
        code, report = compare(trace, "llvmpipe", "llvmpipe", args.runs,
                               "--max-runs", str(args.runs), "--fail-on", "rows")  # fmt: skip
        worse = sum(m["counts"]["regression"] for m in report["metrics"])
        better = sum(m["counts"]["improvement"] for m in report["metrics"])
        rows.append([trace.stem, report["verdict"], code, worse, better])
        print(f"A/A {i + 1}/{args.repeats}: {trace.stem}: {report['verdict']}", file=sys.stderr)
    false = sum(r[1] != "same" for r in rows)
    print(tabulate(rows, ["A/A trace", "verdict", "exit", "rows worse", "rows better"]))
    print(f"\nA/A false positives: {false} of {len(rows)} ({false / len(rows):.0%}); "
          f"exit 1: {sum(r[2] == 1 for r in rows)}\n")  # fmt: skip

    rows = []
    for trace in args.traces:
        code, report = compare(trace, "llvmpipe", "softpipe", args.runs,
                               "--max-runs", str(2 * args.runs), "--precision", "0.05")  # fmt: skip
        for m in report["metrics"]:
            if m["table"] == "frames":
                runs = len(report["base"])
                interval = f"{percent(m['ci_low'])} to {percent(m['ci_high'])}"
                rows.append([trace.stem, m["metric"], runs, percent(m["relative"]), interval,
                             m["p"], m["verdict"], code])  # fmt: skip
    print(tabulate(rows, ["llvmpipe -> softpipe", "frames total", "runs", "change",
                          "95% interval", "p", "verdict", "exit"]))  # fmt: skip


if __name__ == "__main__":
    main()
