"""Running a batch: what is left to do, on an executor, retried, recorded as it finishes.

A job whose run the database already holds, finished (ok, or profiled with a
frame MD5 other than expected) on the same trace with the same settings, is
not run again unless `rerun`: re-running a batch resumes it. A failed or
timed-out attempt is tried again up to the job's `retries`; only the last
attempt is recorded, with the number of attempts. Each outcome is committed
as it arrives, so an interrupted batch loses no finished job.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrace.batch import database
from retrace.batch.job import FAILED, SKIP, TIMEOUT, Job, Outcome

if TYPE_CHECKING:
    import duckdb

    from retrace.batch.executors import Executor


@dataclass
class Tally:
    """What a batch did: jobs skipped as already finished, and outcomes by status."""

    jobs: int
    skipped: int = 0
    statuses: Counter[str] = field(default_factory=Counter)

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())

    @property
    def failed(self) -> int:
        return self.ran - self.statuses["ok"] - self.statuses[SKIP]


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
    done = {} if rerun else database.finished(con, build)
    attempts: Counter[tuple[str, int]] = Counter()
    for job in jobs:
        if job.preset is not None:  # decided when planned: recorded, never run
            _record(con, build, job, Outcome(*job.preset), tally, progress)
        elif database.is_done(done, job):
            tally.skipped += 1
            progress(job, None, tally)
        else:
            executor.submit(job)
    while executor.pending:
        job, outcome = executor.next_done()
        attempts[job.key] += 1
        outcome.attempts = attempts[job.key]
        if outcome.status in (FAILED, TIMEOUT) and outcome.attempts <= job.retries:
            _say(f"{job.name} run {job.run}: {outcome.reason}; trying again")
            executor.submit(job)
            continue
        _record(con, build, job, outcome, tally, progress)


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
    if outcome.status not in ("ok", SKIP):
        _say(f"{job.name} run {job.run}: {outcome.status}: {outcome.reason}")
    progress(job, outcome, tally)


def _say(line: str) -> None:
    print(f"retrace batch: {line}", file=sys.stderr, flush=True)
