"""A long fuzzing run: damaged real traces through retrace and apitrace, outcomes counted.

    python benchmarks/fuzz.py [--cases 10000] [--replayed 1000] [--seed 1] [--keep DIR]

Makes --cases damaged traces from the real traces in traces/ with
`tests/fuzzing.py`'s mutator (truncation, damage to the decompressed event
stream wrapped again in a valid container, container damage), runs every one
through `retrace dump` and `retrace info` and the first --replayed through
`retrace replay` and `retrace profile`, and the same files through
`apitrace dump` and `apitrace info`; then prints, per command, how many ended
in each outcome:

  ok            exit 0, no traceback
  clean error   non-zero exit ending in one `retrace:` line (apitrace: any
                non-zero exit)
  traceback     a Python traceback, or retrace's error line missing
  hang          no answer within --timeout seconds
  crash         killed by a signal in retrace itself (or in apitrace)
  driver crash  killed by a signal in the GL driver (gdb's faulting frame)

Files of every case in the last three classes are kept in --keep (default:
a temporary directory, printed). Run by hand; the seeded bounded run in the
test suite is tests/gl/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock, local

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fuzzing import COMMANDS, FAILURES, OUTCOMES, Harness, Seed, numbered_case  # noqa: E402


def apitrace_outcome(apitrace: str, command: str, path: Path, timeout: float = 60) -> str:
    return reference_outcome([apitrace, command, str(path)], timeout=timeout)


def reference_outcome(
    argv: list[str], env: dict[str, str] | None = None, timeout: float = 60
) -> str:
    """apitrace's tools have no error-line convention: any non-zero exit counts as a clean
    error; death by a signal (or a shell's 128 + signal) as a crash."""
    try:
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "hang"
    if done.returncode == 0:
        return "ok"
    return "crash" if done.returncode < 0 or done.returncode > 128 else "clean error"


def run_cases(
    cases: int, jobs: int, timeout: float, case: Callable[[Harness, int], list[tuple[str, str]]]
) -> Counter[tuple[str, str]]:
    """Run `case(harness, i)` for every case number on `jobs` threads, each thread with a
    harness of its own; its (command, outcome) pairs counted."""
    counts: Counter[tuple[str, str]] = Counter()
    lock, mine, harnesses = Lock(), local(), []

    def run(i: int) -> None:
        if not hasattr(mine, "harness"):
            mine.harness = Harness(timeout)
            with lock:
                harnesses.append(mine.harness)
        outcomes = case(mine.harness, i)
        with lock:
            counts.update(outcomes)
        if i % 500 == 0:
            print(f"{i} of {cases}", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(run, range(cases)))
    for harness in harnesses:
        harness.close()
    return counts


def outcome_table(
    counts: Counter[tuple[str, str]], commands: tuple[str, ...], outcomes: tuple[str, ...]
) -> str:
    """One row per command that ran: its cases, and how many ended in each outcome."""
    rows = []
    for command in commands:
        total = sum(n for (c, _), n in counts.items() if c == command)
        if total:
            rows.append([command, total, *(counts[command, o] for o in outcomes)])
    return tabulate(rows, ["command", "cases", *outcomes], tablefmt="github")


def arguments(description: str, cases: int) -> argparse.ArgumentParser:
    """The options every fuzzing run takes (fuzz.py, fuzz_outputs.py)."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=cases, help="damaged traces")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a hang")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="where to keep the failing cases")
    return parser


@dataclass
class FuzzRun:
    """A run's folder of case files, and the failing cases kept in `keep` (a line each)."""

    work: Path
    keep: Path
    kept: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, prefix: str, keep: Path | None) -> FuzzRun:
        work = Path(tempfile.mkdtemp(prefix=prefix))
        keep = keep or work / "kept"
        keep.mkdir(parents=True, exist_ok=True)
        return cls(work, keep)

    @contextmanager
    def case_file(self, i: int, data: bytes) -> Iterator[Path]:
        """Case `i` as a trace file, removed once its commands have run."""
        path = self.work / f"{i}.trace"
        path.write_bytes(data)
        try:
            yield path
        finally:
            path.unlink()

    def keep_case(self, path: Path, name: str, line: str) -> None:
        shutil.copy(path, self.keep / name)
        self.kept.append(line)

    def print_kept(self) -> None:
        for line in self.kept:
            print(line)
        print(f"failing cases kept in {self.keep}")


def main() -> None:
    parser = arguments(__doc__, 10_000)
    parser.add_argument("--replayed", type=int, default=1_000, help="of them, replayed/profiled")
    options = parser.parse_args()
    apitrace = shutil.which("apitrace")
    seeds = [Seed.load(path) for path in sorted((ROOT / "traces").glob("*.trace"))]
    run = FuzzRun.start("retrace-fuzz-", options.keep)

    def run_case(harness: Harness, i: int) -> list[tuple[str, str]]:
        kind, data = numbered_case(seeds, options.seed, i)
        outcomes = [("damage", kind)]
        with run.case_file(i, data) as path:
            for command in ["dump", "info"] + ["replay", "profile"] * (i < options.replayed):
                outcome, detail = harness.run([*COMMANDS[command], str(path)])
                outcomes.append((f"retrace {command}", outcome))
                if outcome in FAILURES:
                    name = f"{i}-{kind}.trace"
                    run.keep_case(path, name, f"{command} {run.keep / name}: {outcome}: "
                                  f"{detail[-300:]}")  # fmt: skip
            for command in ("dump", "info") if apitrace else ():
                outcomes.append((f"apitrace {command}", apitrace_outcome(apitrace, command, path)))
        return outcomes

    counts = run_cases(options.cases, options.jobs, options.timeout, run_case)
    commands = ("retrace dump", "apitrace dump", "retrace info", "apitrace info",
                "retrace replay", "retrace profile")  # fmt: skip
    print(outcome_table(counts, commands, OUTCOMES))
    kinds = {kind: n for (c, kind), n in counts.items() if c == "damage"}
    print(f"\nkinds of damage: {kinds}")
    run.print_kept()


if __name__ == "__main__":
    main()
