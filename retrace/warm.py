"""Runs of `retrace ARGS` forked from a warm worker (`retrace.forkserver`), for commands
that run many: a run then starts in a few milliseconds instead of paying Python's, the
imports' and the driver's start-up again. The runs are those a cold `python -m retrace`
would do, under the same environment and command prefix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from retrace.errors import RetraceError


class WarmWorker:
    """A fork server started under `env` behind `prefix`; `run` forks one run from it."""

    def __init__(self, env: dict[str, str], prefix: Sequence[str] = ()) -> None:
        command = [*prefix, sys.executable, "-m", "retrace.forkserver"]
        try:
            self._process = subprocess.Popen(
                command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        except OSError as exc:
            raise RetraceError(f"cannot start {command[0]}: {exc.strerror}") from None

    def run(self, argv: Sequence[str], stdout: str | None = None) -> tuple[int, str]:
        """Run `retrace ARGV` (its standard output into the file `stdout`, else nowhere);
        its exit status (minus the signal that killed it) and standard error."""
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        with tempfile.NamedTemporaryFile("r", prefix="retrace-run-", suffix=".err") as err:
            request = {"argv": list(argv), "cwd": os.getcwd(), "stdout": stdout, "stderr": err.name}
            try:
                process.stdin.write(json.dumps(request) + "\n")
                process.stdin.flush()
            except BrokenPipeError:
                pass  # (the worker is gone: said below)
            answers = [process.stdout.readline() for _ in range(2)]
            if not answers[1]:
                raise RetraceError(f"the warm worker ended (exit {process.wait()})")
            return int(json.loads(answers[1])["status"]), err.read()

    def close(self) -> None:
        """End the worker (at the end of its input), its pipes closed."""
        with self._process:  # closes its output and input, then waits for it
            pass
