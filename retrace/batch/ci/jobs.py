"""A traces description file as batch jobs for one device.

Each trace the file expects on the device becomes `runs` jobs of the batch
(`retrace.batch.job.Job`): a profile of its frames (GPU and CPU Duration, kept
in the database) and, in run 0, the last frame's snapshot and checksum. A
trace the device does not run (no entry for it, a ``skip`` label, another
replayer's trace) or that is missing (not in the traces folder and not
downloadable) is a job whose outcome is decided here and recorded, never run.

A performance run (`loop` > 0) profiles the last frame `loop` more times after
`warmup` unmeasured loops, as piglit's profile jobs do (with ``no-perf``
traces left out), and takes no snapshot: its frames' GPU Duration are the
figures piglit keeps, and their GPU Busy the GPU's work without its waits for
the replayer. (piglit keeps the last `loop` rows of glretrace's frames table,
which end with the partial frame after the last swap and so leave out the
first loop; here they are the `loop` looped frames themselves.)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from retrace.batch.ci.description import Description, Planned, plan
from retrace.batch.ci.download import fetch
from retrace.batch.job import FAILED, SKIP, Expect, Job
from retrace.profile.metadata import TraceFile, trace_file

FRAME_TIMES = ("--pframes", "opengl: GPU Duration, CPU Duration")
# what piglit's profile jobs record, and the GPU's own work in those frames (one pass)
LOOP_TIMES = ("--pframes", "opengl: GPU Duration, GPU Busy")
DEFAULT_TIMEOUT = 300.0  # seconds per trace: Mesa's trace jobs run piglit with --timeout 300
DEFAULT_DB_PATH = "./replayer-db/"  # piglit replayer's default traces folder


@dataclass(frozen=True)
class Options:
    device: str
    db_path: Path
    output: Path  # results folder: images under trace/<device>/
    download: bool = False
    force_download: bool = False
    proxy: str | None = None
    runs: int = 1
    loop: int = 0
    warmup: int = 0
    timeout: float = DEFAULT_TIMEOUT
    keep_image: bool = False
    env: tuple[tuple[str, str], ...] = ()


def description_jobs(description: Description, options: Options) -> list[Job]:
    """The jobs of every trace of the file for the device, in the file's order."""
    jobs: list[Job] = []
    for planned in plan(description, options.device, performance=options.loop > 0):
        jobs += _jobs(description, planned, options)
    return jobs


def _jobs(description: Description, planned: Planned, o: Options) -> list[Job]:
    path = planned.entry.path
    local = o.db_path / path
    if planned.skip:
        return [_decided(path, local, SKIP, planned.skip)]
    url = description.download_url
    if o.download and url and (o.force_download or not local.is_file()):
        why = fetch(url, path, local, o.proxy)
        if why:  # the batch says it once, as this trace's failure
            return [_decided(path, local, FAILED, why)]
        _say(f"downloaded {path}")
    if not local.is_file():
        hint = f" (--download fetches it from {url})" if url and not o.download else ""
        return [_decided(path, local, FAILED, f"{local}: no such trace{hint}")]
    try:
        identity = trace_file(local)
    except OSError as exc:
        return [_decided(path, local, FAILED, f"{local}: {exc.strerror or exc}")]
    expected = planned.expectation.checksum if planned.expectation else None
    images = o.output / "trace" / o.device / str(PurePosixPath(path).parent)
    return [
        Job(
            path,
            run,
            identity,
            LOOP_TIMES if o.loop else FRAME_TIMES,
            warmup=o.warmup,
            timeout=o.timeout,
            env=o.env,
            retries=0,  # as piglit: a crash is the result, not a reason to try again
            resources=(("GPU", 1.0),),
            expect=Expect(checksum=expected or ""),
            loop=o.loop,
            last_frame=None if o.loop else str(images),
            keep_image=o.keep_image,
        )
        for run in range(o.runs)
    ]


def _decided(name: str, local: Path, status: str, reason: str) -> Job:
    return Job(name, 0, TraceFile(str(local.absolute()), 0, ""), (), preset=(status, reason))


def _say(line: str) -> None:
    print(f"retrace batch: {line}", file=sys.stderr, flush=True)
