"""One job of a batch: one profile run of one trace, isolated in a child process.

A job is a `python -m retrace profile` of its own, as a user would run it (or,
locally, the same forked from a warm worker of its environment: `retrace.warm`), so
a driver that crashes or hangs takes down only that job: retrace's child
already names the crashing call on stderr (`retrace: error: driver crashed
(SIGSEGV) at call 34 glDrawArrays(...)`), and that line becomes the job's
reason. A job that runs past its timeout gets SIGTERM, on which retrace writes
what it measured, then SIGKILL if it lingers; retrace's replay child dies with
it (PR_SET_PDEATHSIG, `retrace.replay.contain`).

`run_job` takes a `Job` and returns an `Outcome`: plain picklable data, so the
same function runs in a local thread or as a Ray task on another machine. The
trace is checked there against the SHA-256 taken when the batch was planned,
so a node whose copy of the corpus differs fails the job instead of measuring
another trace.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from retrace import __version__
from retrace.child import python_command
from retrace.errors import RetraceError
from retrace.profile.metadata import TraceFile, trace_file
from retrace.warm import WarmRun, WarmWorkers

if TYPE_CHECKING:
    from retrace.batch.lastframe import LastFrame

# Seconds between SIGTERM (retrace writes the tables measured so far) and SIGKILL.
_GRACE = 10.0

OK = "ok"
FAILED = "failed"  # retrace exited non-zero: a driver crash, a damaged trace, a bad selection
TIMEOUT = "timeout"
MISMATCH = "mismatch"  # profiled, but a frame's MD5 (or checksum) is not the one expected
SKIP = "skip"  # not run, by the plan: a label, another device, another replayer's trace
FINISHED = (OK, MISMATCH)

# The profiles this process runs now (from the local executor's threads).
_CHILDREN: set[subprocess.Popen[str] | WarmRun] = set()
_LOCK = threading.Lock()  # what a resumed batch does not run again: retrying cannot change it


@dataclass(frozen=True)
class Expect:
    """What the manifest expects of a trace: its frames' MD5s (in order, `retrace replay -s -
    --snapshot-format=MD5`'s), and how much its totals may regress before a diff fails."""

    md5: tuple[str, ...] = ()
    allowed_regression: float | None = None
    checksum: str | None = None  # piglit's checksum of the last frame ("": none given yet)


@dataclass(frozen=True)
class Job:
    """One profile run: run `run` (0-based) of the trace named `name` in the batch."""

    name: str
    run: int
    trace: TraceFile  # as planned: the job fails where the file found differs
    selection: tuple[str, ...]  # --pframes SPEC --pcalls SPEC ...
    repeat: int = 1
    warmup: int = 0
    frames: tuple[int, int] | None = None  # rows kept: frames first..last
    calls: str | None = None  # rows kept: calls in this call set
    timeout: float = 600.0
    retries: int = 1
    env: tuple[tuple[str, str], ...] = ()
    resources: tuple[tuple[str, float], ...] = ()
    expect: Expect = field(default_factory=Expect)
    sandbox: str | None = None  # --sandbox's mode, for the profile and the MD5 replay
    loop: int = 0  # --loop: the last frame replayed this many more times, measured
    last_frame: str | None = None  # a CI job: the folder for its last frame's image
    keep_image: bool = False  # keep that image when it has the expected checksum too
    preset: tuple[str, str] | None = None  # (status, reason) decided when planned: not run
    driver: str = "{}"  # what it runs on, as JSON (`retrace.batch.driver.fingerprint`)

    @property
    def key(self) -> tuple[str, int]:
        return (self.name, self.run)

    def profile_args(self) -> list[str]:
        """The profile's options, as `retrace` takes them."""
        loop = ["--loop", str(self.loop)] if self.loop else []
        return [*self.selection, "--repeat", str(self.repeat), "--warmup", str(self.warmup), *loop]

    def sandbox_args(self) -> list[str]:
        return [] if self.sandbox is None else [f"--sandbox={self.sandbox}"]

    def settings(self) -> str:
        """What decides the measurement besides the trace, as canonical JSON: a finished run
        is reused by a resumed batch only if this and the trace's SHA-256 are unchanged."""
        settings = {
            "retrace": __version__,
            "driver": json.loads(self.driver),
            "profile": self.profile_args(),
            "env": dict(self.env),
            "frames": self.frames,
            "calls": self.calls,
        }
        if self.last_frame is not None:
            settings["checksum"] = self.expect.checksum
        if self.sandbox is not None:  # (absent otherwise: earlier batches' runs still match)
            settings["sandbox"] = self.sandbox
        return json.dumps(settings, sort_keys=True)


@dataclass
class Outcome:
    """What one attempt of a job gave: `tsv` holds the tables (those measured before a crash
    too), `metadata` the ``OUT.tsv.json`` written beside them, if any."""

    status: str
    reason: str = ""
    exit_code: int | None = None
    wall_s: float = 0.0
    started: float = 0.0
    host: str = ""
    warnings: list[str] = field(default_factory=list)
    tsv: str = ""
    metadata: str | None = None
    md5: list[str] = field(default_factory=list)
    attempts: int = 1
    last_frame: LastFrame | None = None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a library's may run to many), for a reason."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def run_job(job: Job, workers: WarmWorkers | None = None) -> Outcome:
    """Profile `job` in a child process (and, where MD5s are expected, replay for them);
    with `workers`, forked from the warm worker of the job's environment."""
    started = time.time()
    host = socket.gethostname()
    try:
        found = trace_file(job.trace.path)
    except OSError as exc:
        return Outcome(
            FAILED, f"{job.trace.path}: {exc.strerror or exc}", started=started, host=host
        )
    if found.sha256 != job.trace.sha256:
        reason = f"{job.trace.path} on {host} is not the trace planned (SHA-256 differs)"
        return Outcome(FAILED, reason, started=started, host=host)
    with tempfile.TemporaryDirectory(prefix="retrace-job-") as scratch:
        out = Path(scratch) / "profile.tsv"
        command = ["profile", "--quiet", *job.sandbox_args(), *job.profile_args()]
        outcome = _child([*command, "-o", str(out), job.trace.path], job, workers)
        outcome.started, outcome.host = started, host
        outcome.tsv = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        beside = Path(f"{out}.json")
        outcome.metadata = beside.read_text(encoding="utf-8") if beside.exists() else None
    if outcome.status == OK and job.expect.md5 and job.run == 0:  # one replay per trace
        _check_md5(job, outcome, workers)
    if outcome.status == OK and job.last_frame is not None and job.run == 0:
        _check_last_frame(job, outcome, workers)
    outcome.wall_s = time.time() - started
    return outcome


def _start(
    args: list[str], env: dict[str, str], workers: WarmWorkers | None
) -> subprocess.Popen[str] | WarmRun:
    """`retrace ARGS` under `env`: forked from the warm worker of `env` where there is one
    (a worker that cannot start or died: a process of its own), else a process of its own."""
    if workers is not None:
        try:
            return workers.get(env).start(args)
        except RetraceError:
            pass
    return subprocess.Popen(
        python_command("retrace", *args),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )


def _child(args: list[str], job: Job, workers: WarmWorkers | None) -> Outcome:
    """Run `retrace ARGS` under the job's environment and timeout; its status and stderr."""
    try:
        child = _start(args, {**os.environ, **dict(job.env)}, workers)
    except OSError as exc:
        return Outcome(FAILED, f"cannot start {sys.executable}: {exc.strerror or exc}")
    with _LOCK:
        _CHILDREN.add(child)
    try:
        stdout, stderr = child.communicate(timeout=job.timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        stdout, stderr = _stop(child)
        timed_out = True
    except BaseException:  # a cancelled Ray task, an interrupted batch: leave no replay behind
        child.kill()
        child.wait()
        raise
    finally:
        with _LOCK:
            _CHILDREN.discard(child)
    lines = stderr.splitlines()
    warnings = [line for line in lines if line.startswith("retrace: warning")]
    outcome = Outcome(OK, exit_code=child.returncode, warnings=warnings)
    outcome.tsv = stdout  # replaced by the -o file where there is one
    if timed_out:
        outcome.status, outcome.reason = TIMEOUT, f"timed out after {job.timeout:g} s"
    elif child.returncode != 0:
        errors = [line for line in lines if line.startswith("retrace: ")] or lines or ["no message"]
        outcome.status = FAILED
        outcome.reason = errors[-1].removeprefix("retrace: ").removeprefix("error: ")
    return outcome


def stop_children() -> None:
    """SIGTERM every profile this process runs: an interrupted batch ends them now."""
    with _LOCK:
        for child in _CHILDREN:
            child.terminate()


def _stop(child: subprocess.Popen[str] | WarmRun) -> tuple[str, str]:
    """SIGTERM the child (retrace writes what it measured, and its replay child, which dies
    with it, ends too); SIGKILL if it lingers past `_GRACE` s. What it printed."""
    child.terminate()
    try:
        return child.communicate(timeout=_GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.communicate()


def _check_last_frame(job: Job, outcome: Outcome, workers: WarmWorkers | None) -> None:
    """Snapshot the last frame-ending call as piglit's replayer does, and compare its checksum
    with the one expected (`retrace.batch.lastframe`)."""
    from retrace.batch.lastframe import judge, last_frame_call
    from retrace.errors import RetraceError

    assert job.last_frame is not None
    try:
        call_no = last_frame_call(job.trace.path)
    except RetraceError as exc:
        outcome.status, outcome.reason = FAILED, str(exc)
        return
    if call_no is None:
        outcome.status, outcome.reason = FAILED, "the trace has no frame-ending call"
        return
    name = Path(job.name).name
    with tempfile.TemporaryDirectory(prefix="retrace-frame-") as scratch:
        prefix = f"{scratch}/{name}-"
        command = ["replay", "--snapshot", str(call_no)]
        replay = _child([*command, "--snapshot-prefix", prefix, job.trace.path], job, workers)
        shot = Path(f"{prefix}{call_no:010d}.png")
        if replay.status != OK or not shot.exists():
            outcome.status = replay.status if replay.status != OK else FAILED
            outcome.reason = f"last frame replay: {replay.reason or 'no image written'}"
            return
        expected = job.expect.checksum or ""
        frame = judge(shot, call_no, name, Path(job.last_frame), expected, job.keep_image)
    outcome.last_frame = frame
    if frame.checksum != expected:
        outcome.status = MISMATCH
        outcome.reason = f"checksum {frame.checksum}, expected {expected or 'none given'}"


def _check_md5(job: Job, outcome: Outcome, workers: WarmWorkers | None) -> None:
    """Replay for the frames' MD5s and compare them with the manifest's."""
    command = ["replay", "-s", "-", "--snapshot-format=MD5"]
    replay = _child([*command, *job.sandbox_args(), job.trace.path], job, workers)
    if replay.status != OK:
        outcome.status, outcome.reason = replay.status, f"MD5 replay: {replay.reason}"
        return
    outcome.md5 = replay.tsv.split()
    for frame, (want, got) in enumerate(zip(job.expect.md5, outcome.md5, strict=False)):
        if want.upper() != got.upper():
            outcome.status = MISMATCH
            outcome.reason = f"frame {frame}: MD5 {got}, expected {want}"
            return
    if len(outcome.md5) < len(job.expect.md5):
        outcome.status = MISMATCH
        outcome.reason = f"{len(outcome.md5)} frames, {len(job.expect.md5)} MD5s expected"
