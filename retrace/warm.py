"""Runs of `retrace ARGS` forked from a warm worker (`retrace.forkserver`), for commands
that run many (`retrace compare`, `retrace batch`): a run then starts in a few
milliseconds instead of paying Python's, the imports' and the driver's start-up again.
The runs are those a cold `python -m retrace` of this very retrace (`retrace.child`) would
do, under the same environment and command prefix."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from retrace.child import python_command
from retrace.errors import RetraceError


class WarmWorker:
    """A fork server started under `env` behind `prefix`; `start` forks one run from it, one
    run at a time."""

    def __init__(self, env: dict[str, str], prefix: Sequence[str] = ()) -> None:
        command = [*prefix, *python_command("retrace.forkserver")]
        try:
            self._process = subprocess.Popen(  # (its messages and the driver's are no run's)
                command,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise RetraceError(f"cannot start {command[0]}: {exc.strerror}") from None
        self._pending = b""  # answers read and not yet taken

    def start(self, argv: Sequence[str]) -> WarmRun:
        """Fork `retrace ARGV`; its standard output and error go to files `WarmRun` reads."""
        files = [
            tempfile.NamedTemporaryFile("r", prefix="retrace-run-", errors="replace")  # noqa: SIM115
            for _ in range(2)
        ]
        request = {"argv": list(argv), "cwd": os.getcwd(), **{
            name: f.name for name, f in zip(("stdout", "stderr"), files, strict=True)
        }}  # fmt: skip
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
            pid = int(self.answer(None)["pid"])
        except (BrokenPipeError, RetraceError):
            for f in files:
                f.close()
            raise RetraceError(f"the warm worker ended (exit {self._process.wait()})") from None
        return WarmRun(self, pid, files)

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        """`start` and wait: the run's exit status (minus the signal that killed it) and
        standard error."""
        run = self.start(argv)
        _, stderr = run.communicate()
        assert run.returncode is not None
        return run.returncode, stderr

    def answer(self, timeout: float | None) -> dict[str, Any]:
        """The worker's next answer line; `subprocess.TimeoutExpired` after `timeout` s."""
        out = self._process.stdout
        assert out is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([out], [], [], left)[0]:
                raise subprocess.TimeoutExpired("retrace", timeout or 0.0)
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                raise RetraceError(f"the warm worker ended (exit {self._process.wait()})")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the worker (at the end of its input)."""
        with self._process:  # (closes its pipes once it has ended)
            if self._process.stdin is not None:
                with contextlib.suppress(BrokenPipeError):  # (it ended: a request was left)
                    self._process.stdin.close()


class WarmRun:
    """One run forked from a `WarmWorker`, with what its callers use of `subprocess.Popen`."""

    def __init__(self, worker: WarmWorker, pid: int, files: list[Any]) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._worker, self._files = worker, files
        self._output: tuple[str, str] | None = None

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the run (`subprocess.TimeoutExpired` after `timeout` s); its standard
        output and error."""
        if self.returncode is None:
            self.returncode = int(self._worker.answer(timeout)["status"])
        if self._output is None:
            out, err = (f.read() for f in self._files)
            for f in self._files:
                f.close()
            self._output = out, err
        return self._output

    def wait(self) -> int:
        self.communicate()
        assert self.returncode is not None
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, number: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # ended: its status is on its way
                os.kill(self.pid, number)


class WarmWorkers:
    """Warm workers by environment, one per thread that asks (a worker runs one run at a
    time), for executors that run jobs from several threads."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._every: list[WarmWorker] = []

    def get(self, env: dict[str, str]) -> WarmWorker:
        """This thread's worker for `env`, started at first use (RetraceError if it cannot)."""
        mine: dict[tuple[tuple[str, str], ...], WarmWorker] = self._local.__dict__.setdefault(
            "workers", {}
        )
        key = tuple(sorted(env.items()))
        if key not in mine:
            mine[key] = worker = WarmWorker(env)
            with self._lock:
                self._every.append(worker)
        return mine[key]

    def close(self) -> None:
        with self._lock:
            every, self._every = self._every, []
        for worker in every:
            worker.close()
