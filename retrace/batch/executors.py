"""Where jobs run: here, one at a time, or as Ray tasks on a cluster.

Both executors take jobs with `submit` and hand back finished ones, in the
order they finish, with `next_done`; the scheduler retries and records.

Locally, profiles run one at a time by default: two profiles on one GPU (or
on the CPU cores llvmpipe renders with) slow each other down and skew both
timings. `jobs` > 1 runs several at once for work whose timings do not
matter (MD5 checks, deterministic counters such as Pixels Drawn).

On Ray, each job is a task that asks for the job's resources: ``GPU`` is
Ray's own GPU count, ``CPU`` its CPU count (1 by default), and any other name
a custom resource a node was started with (``ray start --resources
'{"radeonsi": 1}'``), so a trace runs only on the machines that can run it,
one at a time per unit of the resource. Ray's own retries are off: a
failed job comes back as a failed outcome and the scheduler decides.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any, Protocol

from retrace.batch.job import FAILED, Job, Outcome, first_line, run_job, stop_children
from retrace.errors import RetraceError, pip_install
from retrace.warm import WarmWorkers


class Executor(Protocol):
    """Runs jobs; `pending` counts those submitted and not yet handed back."""

    @property
    def pending(self) -> int: ...

    def submit(self, job: Job) -> None: ...

    def next_done(self) -> tuple[Job, Outcome]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Jobs in child processes of this machine, `jobs` at a time; with `warm`, forked from
    warm workers (`retrace.warm`: start-up paid once per environment and thread)."""

    def __init__(self, jobs: int = 1, warm: bool = True) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
        self._running: dict[concurrent.futures.Future[Outcome], Job] = {}
        self._workers = WarmWorkers() if warm else None

    @property
    def pending(self) -> int:
        return len(self._running)

    def submit(self, job: Job) -> None:
        self._running[self._pool.submit(run_job, job, self._workers)] = job

    def next_done(self) -> tuple[Job, Outcome]:
        done, _ = concurrent.futures.wait(
            self._running, return_when=concurrent.futures.FIRST_COMPLETED
        )
        future = next(iter(done))
        return self._running.pop(future), future.result()

    def close(self) -> None:
        for future in self._running:
            future.cancel()
        stop_children()  # an interrupted batch ends its profiles now, not when they finish
        self._pool.shutdown(wait=True)
        if self._workers is not None:
            self._workers.close()


class RayExecutor:
    """Jobs as Ray tasks on the cluster at `address` ("auto": the one `ray start` made here)."""

    def __init__(self, address: str) -> None:
        try:
            import ray
        except ImportError:
            raise RetraceError(f"--ray needs Ray: {pip_install('farm')}") from None
        self._ray = ray
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RetraceError(f"--ray {address}: cannot connect: {first_line(exc)}") from None
        self._task = ray.remote(max_retries=0)(run_job)
        self._largest: dict[str, float] = {}
        for node in ray.nodes():
            if node.get("Alive"):
                for name, amount in node.get("Resources", {}).items():
                    self._largest[name] = max(self._largest.get(name, 0.0), amount)
        self._running: dict[Any, Job] = {}
        self._infeasible: list[tuple[Job, Outcome]] = []

    @property
    def pending(self) -> int:
        return len(self._running) + len(self._infeasible)

    def submit(self, job: Job) -> None:
        wanted = {"CPU": 1.0, **dict(job.resources)}
        short = [n for n, amount in wanted.items() if self._largest.get(n, 0.0) < amount]
        if short:  # Ray would wait forever for a node that can take the task
            reason = "no node of the Ray cluster has " + ", ".join(
                f"{wanted[n]:g} {n}" for n in short
            )
            self._infeasible.append((job, Outcome(FAILED, reason)))
            return
        options: dict[str, Any] = {"num_cpus": wanted.pop("CPU")}
        if "GPU" in wanted:
            options["num_gpus"] = wanted.pop("GPU")
        if wanted:
            options["resources"] = wanted
        self._running[self._task.options(**options).remote(job)] = job

    def next_done(self) -> tuple[Job, Outcome]:
        if self._infeasible:
            return self._infeasible.pop()
        ray = self._ray
        (ref,), _ = ray.wait(list(self._running), num_returns=1)
        job = self._running.pop(ref)
        try:
            return job, ray.get(ref)
        except ray.exceptions.RayError as exc:  # the worker or its node died
            return job, Outcome(FAILED, f"Ray: {first_line(exc)}")

    def close(self) -> None:
        for ref in self._running:
            self._ray.cancel(ref)
        self._ray.shutdown()
