"""`retrace compare`: profile one trace under two environments, run by run in turn.

Profiling all of base and then all of new lets the machine's drift (other
jobs, clocks, caches) pass for a change: on a shared machine glretrace against
retrace looked like +49% run in sequence and -33% interleaved. So, as Mesa's
gpu-trace-perf does, runs alternate after warm-up runs of each side that are
thrown away: base, new, new, base, base, new... A run can also depend on the
one before it (llvmpipe ran faster right after softpipe in the tests), so
each side goes first in every other pair. Sampling goes on until every cost
total's change is known to the precision asked (the half-width of its
interval) or the run budget is spent. The kept runs are then compared by
`retrace diff`'s own code.

Each run is a ``retrace`` profile in a process of its own, so that every run
starts the driver afresh as a user's run does, under the side's environment
variables and behind its command prefix (``taskset -c 2``, a wrapper
script...): forked from a warm worker of that side (`retrace.warm`), which
paid Python's, the imports' and the driver's start-up once, or with
`warm=False` (``--no-warm``) a ``python -m retrace`` of its own. Each run
writes its metadata beside its TSV, naming the trace's SHA-256 and the driver,
so that a later `retrace diff` of the kept runs knows they replayed one trace.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from retrace.child import python_command
from retrace.compare.diff import DiffResult, Direction
from retrace.errors import RetraceError, UsageError
from retrace.warm import WarmWorker

# `git bisect run` reads an exit status of 1-127 but 125 as "bad" and one above 127 as
# "stop bisecting": a mistake of the user's or of the environment (a misspelt option or
# metric, a damaged trace, an unwritable folder) must stop it, not name a commit. 128 is
# the first of those, and none a shell gives a process a signal killed (128 + N).
ABORT = 128


class Mistake(RetraceError):
    """What went wrong in `retrace compare` that is no build's fault: exit `ABORT`."""

    exit_code = ABORT


class RunFailed(RetraceError):
    """A profile run of one side could not be made (its build is broken: the command does not
    start, the driver crashes): the comparison has no answer. Exit 125, which `git bisect run`
    takes as "this commit cannot be tested": skip it."""

    exit_code = 125


class RunRefused(RunFailed):
    """A profile run refused its options (retrace's exit 2: a usage mistake, not the build)."""

    exit_code = ABORT


@dataclass(frozen=True)
class Side:
    """How to run one side: "base" or "new", its environment and command prefix."""

    name: str
    env: dict[str, str]
    prefix: tuple[str, ...] = ()


@dataclass(frozen=True)
class Budget:
    """When to stop: after `min_runs` per side once `precision` is reached, or at `max_runs`."""

    warmup: int
    min_runs: int
    max_runs: int
    precision: float


def parse_env(side: str, pairs: Sequence[str]) -> dict[str, str]:
    """KEY=VALUE pairs as a dict; anything else is a usage error."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or "\0" in pair:
            raise UsageError(f"--{side}: expected KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def widest_half_width(result: DiffResult) -> float:
    """The largest half-width of the cost totals' intervals (relative); inf if unbounded."""
    costs = [m for m in result.metrics if m.direction != Direction.NONE] or result.metrics
    widths = [(m.ci_high - m.ci_low) / 2 for m in costs]
    return max((math.inf if math.isnan(w) else w for w in widths), default=math.inf)


def alternate(
    trace: str,
    selection: Sequence[str],
    sides: tuple[Side, Side],
    budget: Budget,
    folder: Path,
    judge: Callable[[list[str], list[str]], DiffResult],
    warm: bool = True,
) -> DiffResult:
    """Run both sides in turn into `folder` until resolved; the last comparison. `warm`:
    fork the runs of each side from a warm worker of its own."""
    if budget.max_runs < budget.min_runs:
        raise UsageError("--max-runs must be at least --min-runs")
    _check_input(trace, folder)
    show = _progress()
    made = [0]  # runs made so far
    with ExitStack() as stack:
        workers: dict[str, WarmWorker] = {}
        if warm:
            for side in sides:
                workers[side.name] = worker = _start(side)
                stack.callback(worker.close)

        def profile(side: Side, out: Path) -> None:
            _profile(trace, selection, side, out, show, workers.get(side.name))
            made[0] += 1
            if made[0] == len(sides):  # (a side that cannot run says so first, alone)
                say(f"both sides run; {budget.min_runs} to {budget.max_runs} runs each")

        for i in range(budget.warmup):
            for side in sides:
                profile(side, folder / f"warmup-{side.name}-{i}.tsv")
        paths: tuple[list[str], list[str]] = ([], [])
        while True:
            turn = list(zip(sides, paths, strict=True))
            for side, kept in turn if len(paths[0]) % 2 == 0 else reversed(turn):
                out = folder / f"{side.name}-{len(kept) + 1}.tsv"
                profile(side, out)  # writes OUT.tsv.json too
                kept.append(str(out))
            runs = len(paths[0])
            if runs < budget.min_runs:
                continue
            result = judge(*paths)
            width = widest_half_width(result)
            say(f"{runs} runs per side: widest interval +-{width:.1%}, verdict {result.verdict}")
            if width <= budget.precision or runs >= budget.max_runs:
                return result


def _check_input(trace: str, folder: Path) -> None:
    """Refuse what would fail every run of both sides alike, which is no fault of a build:
    a trace damaged or cut short, a folder the runs cannot write into."""
    from retrace.trace.reader import read_counts

    _, damage = read_counts(trace)  # (into the trace cache, which the runs then read)
    if damage is not None:
        raise damage
    folder.mkdir(parents=True, exist_ok=True)
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(folder)) from None


def _start(side: Side) -> WarmWorker:
    try:
        return WarmWorker({**os.environ, **side.env}, side.prefix)
    except RetraceError as e:
        raise RunFailed(f"{side.name} run: {e}") from None


def _profile(
    trace: str,
    selection: Sequence[str],
    side: Side,
    out: Path,
    show: Callable[[str], None],
    worker: WarmWorker | None,
) -> None:
    """One profile run of `side` into `out` (forked from `worker`, else a process of its own);
    a failure is one line naming the side."""
    args = [*selection, "--quiet", "-o", str(out), trace]
    started = time.monotonic()
    if worker is not None:
        try:
            status, stderr = worker.run(args)
        except RetraceError as e:
            raise RunFailed(f"{side.name} run: {e}") from None
    else:
        command = [*side.prefix, *python_command("retrace", *args)]
        try:
            done = subprocess.run(
                command,
                env={**os.environ, **side.env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise RunFailed(f"{side.name} run: cannot start {command[0]}: {exc.strerror}") from None
        status, stderr = done.returncode, done.stderr
    if status != 0:
        last = (stderr.strip().splitlines() or ["no message"])[-1]
        failure = RunRefused if status == UsageError.exit_code else RunFailed
        raise failure(f"{side.name} run failed (exit {status}): {last}")
    show(f"{out.name}: {time.monotonic() - started:.1f} s")


def say(line: str) -> None:
    """A line of progress on stderr, terminal or not: a CI log shows the comparison is alive
    (its start, then each verdict so far)."""
    print(f"retrace compare: {line}", file=sys.stderr, flush=True)


def _progress() -> Callable[[str], None]:
    """A printer of each run's line on stderr when it is a terminal, else one that does
    nothing (a line per run would fill a CI log)."""
    return say if sys.stderr.isatty() else lambda line: None
