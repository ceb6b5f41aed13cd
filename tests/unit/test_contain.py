"""How the parent learns that the replaying child ended: the child says its exit status
before the kernel tears it down, and the parent reaps it meanwhile (no zombie is left in
a process that replays many times, as the Python API's callers do); a child that dies
without saying is waited for, and its signal reported."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from retrace.replay import contain
from retrace.replay.contain import supervise


def _reaped(pid: int, seconds: float = 10.0) -> bool:
    """Whether `pid` is gone (reaped), waiting up to `seconds`; a zombie stays."""
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_exit_status_said_and_the_child_reaped(tmp_path):
    said = tmp_path / "pid"

    def body() -> None:
        said.write_text(str(os.getpid()))
        raise SystemExit(3)

    for _ in range(3):  # each run's child reaped, not one zombie each
        ending = supervise(body, errors_to=str(tmp_path / "err"))
        assert (ending.code, ending.signal, ending.crashed) == (3, 0, False)
        assert _reaped(int(said.read_text()))


def test_a_child_that_dies_unsaid_is_waited_for(tmp_path):
    def body() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    ending = supervise(body, errors_to=str(tmp_path / "err"))
    assert (ending.code, ending.signal, ending.killed) == (0, signal.SIGKILL, True)


def test_the_parent_does_not_wait_for_the_teardown():
    done, said = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child whose exit takes long (a GPU driver's unmapping, say)
        os.write(said, bytes([5]))
        time.sleep(30)
        os._exit(0)
    os.close(said)
    try:
        status = contain._wait(pid, done)
        assert os.WEXITSTATUS(status) == 5
        assert Path(f"/proc/{pid}").exists()  # still running: its exit not waited for
    finally:
        os.kill(pid, signal.SIGKILL)
        os.close(done)
    assert _reaped(pid)  # by the thread `_wait` left waiting
