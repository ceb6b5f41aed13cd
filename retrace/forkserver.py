"""A warm worker: `python -m retrace.forkserver`, a process that has paid retrace's start-up
once (Python, its modules and numpy, the GL registry) and forks every run of a command from there.

`retrace compare` runs a profile per side many times over; each cold run pays 150-250 ms
before its first GL call (the interpreter, the imports, loading the driver), which on a
short trace is more than the replay. A run forked from this worker starts where a cold
run would be after its start-up, and then does exactly what a cold run does: the CLI's
own `main` with the run's arguments, working directory and output files, its replay in a
child of its own (`retrace.replay.contain`), its tables written by numpy. The client is
`retrace.warm.WarmWorker`.

The worker never loads the GL driver: only the process that replays may
(`retrace.replay.ws.driver_process`; NVIDIA's EGL refuses contexts in a child forked from
a process that initialised a display), so each run opens its own, as a cold run does.

Protocol, over the worker's standard input and output, one JSON line each way: a request
``{"argv": [...], "cwd": DIR, "stdout": FILE, "stderr": FILE}``; the answers
``{"pid": N}`` once the run is forked, then ``{"status": S}`` (its exit status, or minus
the signal that killed it, as `subprocess` reports them). End of input ends the worker.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def warm_up() -> None:
    """Import what a profile and a replay import, and load what they load but the driver."""
    from retrace.main import one_blas_thread

    one_blas_thread()  # (before numpy)
    import numpy  # noqa: F401  (the tables')

    import retrace.commands.profile  # noqa: F401  (the commands runs are: glretrace's forms)
    import retrace.commands.replay  # noqa: F401
    import retrace.profile.commands  # noqa: F401
    import retrace.profile.driver  # noqa: F401
    import retrace.writer.arrays  # noqa: F401
    import retrace.writer.records  # noqa: F401
    from retrace.backends.registry import load_backends
    from retrace.gl.registry import load_registry
    from retrace.trace.container import load_libraries

    load_libraries()
    load_backends()
    load_registry()


def _run(request: dict[str, Any], channels: tuple[int, int]) -> int:
    """Fork one run of the CLI; its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for fd in channels:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh interpreter
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        for fd, path, flags in (
            (0, os.devnull, os.O_RDONLY),
            (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        sys.argv = ["retrace", *request["argv"]]
        from retrace.main import main

        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """Answer requests until the end of standard input."""
    # the protocol moves off fds 0 and 1, which every run gets as its own
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client ends the worker (end of input)
    warm_up()
    with os.fdopen(requests, "r", encoding="utf-8") as lines:
        for line in lines:
            pid = _run(json.loads(line), (requests, replies))
            os.write(replies, json.dumps({"pid": pid}).encode() + b"\n")
            _, status = os.waitpid(pid, 0)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            os.write(replies, json.dumps({"status": code}).encode() + b"\n")


if __name__ == "__main__":
    serve()
