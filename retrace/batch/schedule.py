"""Running a batch: what is left to do, on an executor, retried, recorded as it finishes.

A job whose run the database already holds, finished (ok, or profiled with a
frame MD5 or checksum other than expected) on the same trace with the same
settings, by the same retrace on the same driver (`retrace.batch.driver`), is
not run again unless `rerun`: re-running a batch resumes it. A reused run counts
as what it was: a mismatch reused fails the batch again. A recorded run measured
again is named with why (the trace, the options, retrace or the driver changed).
A failed or
timed-out attempt is tried again up to the job's `retries`; only the last
attempt is recorded, with the number of attempts. Each outcome is committed
as it arrives, so an interrupted batch loses no finished job.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrace import __version__
from retrace.batch import database, driver
from retrace.batch.job import FAILED, OK, SKIP, TIMEOUT, Job, Outcome

if TYPE_CHECKING:
    import duckdb

    from retrace.batch.executors import Executor


@dataclass
class Tally:
    """What a batch did: outcomes by status, of the jobs run and of those reused as they
    were recorded earlier."""

    jobs: int
    statuses: Counter[str] = field(default_factory=Counter)
    reused: Counter[str] = field(default_factory=Counter)

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())

    @property
    def skipped(self) -> int:
        return sum(self.reused.values())

    @property
    def failed(self) -> int:
        every = self.statuses + self.reused
        return sum(every.values()) - every[OK] - every[SKIP]


def run_batch(
    jobs: Sequence[Job],
    executor: Executor,
    con: duckdb.DuckDBPyConnection,
    build: str,
    rerun: bool,
    progress: Callable[[Job, Outcome | None, Tally], None],
    tally: Tally,
) -> None:
    """Run the jobs `con` lacks for `build` (all with `rerun`), counting in `tally` as they
    finish (it stays right if an interrupt ends the loop); `progress` hears of each finished
    job, and of each skipped one with None.
    """
    jobs = driver.with_drivers(jobs)  # (in the batch's handling of SIGINT and SIGTERM)
    done = {} if rerun else database.finished(con, build)
    attempts: Counter[tuple[str, int]] = Counter()
    again: Counter[str] = Counter()  # recorded runs measured again, by why
    for job in jobs:
        recorded = done.get(job.key)
        why = None if recorded is None else changed(recorded, job)
        if job.preset is not None:  # decided when planned: recorded, never run
            _record(con, build, job, Outcome(*job.preset), tally, progress)
        elif recorded is not None and why is None:
            tally.reused[recorded.status] += 1
            if recorded.status != OK:
                _say(f"{job.name} run {job.run}: {recorded.status} (recorded earlier, reused): "
                     f"{recorded.reason}")  # fmt: skip
            progress(job, None, tally)
        else:
            again[why or ""] += 1
            executor.submit(job)
    for why, count in sorted(again.items()):
        if why:
            _say(f"{count} run(s) recorded earlier measured again: {why}")
    while executor.pending:
        job, outcome = executor.next_done()
        attempts[job.key] += 1
        outcome.attempts = attempts[job.key]
        if outcome.status in (FAILED, TIMEOUT) and outcome.attempts <= job.retries:
            _say(f"{job.name} run {job.run}: {outcome.reason}; trying again")
            executor.submit(job)
            continue
        _record(con, build, job, outcome, tally, progress)


def changed(recorded: database.Recorded, job: Job) -> str | None:
    """Why the run `recorded` is not `job`'s measurement (None: it is, and is reused)."""
    settings = json.loads(job.settings())
    if recorded.sha256 != job.trace.sha256:
        return "the trace changed"
    if recorded.settings.get("retrace") != settings["retrace"]:
        before = recorded.settings.get("retrace") or "unrecorded"
        return f"retrace changed (version {before} to {__version__})"
    if recorded.settings.get("driver") != settings["driver"]:
        what = driver.changes(recorded.settings.get("driver") or {}, settings["driver"])
        more = f" and {len(what) - 5} more" if len(what) > 5 else ""
        return f"the driver changed ({', '.join(what[:5]) or 'unnamed'}{more})"
    if recorded.settings != settings:
        return "the options changed"
    return None


def _record(
    con: duckdb.DuckDBPyConnection,
    build: str,
    job: Job,
    outcome: Outcome,
    tally: Tally,
    progress: Callable[[Job, Outcome | None, Tally], None],
) -> None:
    database.record(con, build, job, outcome)
    tally.statuses[outcome.status] += 1
    if outcome.status not in (OK, SKIP):
        _say(f"{job.name} run {job.run}: {outcome.status}: {outcome.reason}")
    progress(job, outcome, tally)


def _say(line: str) -> None:
    print(f"retrace batch: {line}", file=sys.stderr, flush=True)
