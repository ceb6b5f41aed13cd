"""How the parent learns that the replaying child ended: the child says its exit status
on a pipe, and then waits to exit until the parent lets it: at once in a process that
replays many times (the Python API's caller: no zombie, no driver memory kept), else
when the parent ends or forks the next child (`let_children_linger`, the command line's).
A child that dies without saying is waited for, and its signal reported."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from retrace.replay import contain
from retrace.replay.contain import supervise


def _gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether `pid` is gone (reaped), waiting up to `seconds`; a zombie stays."""
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _exiting_with(code: int, said: Path):
    def body() -> None:
        said.write_text(str(os.getpid()))
        raise SystemExit(code)

    return body


def test_the_exit_status_said_and_the_child_reaped(tmp_path):
    for _ in range(3):  # each run's child reaped, not one zombie each
        ending = supervise(_exiting_with(3, tmp_path / "pid"), errors_to=str(tmp_path / "e"))
        assert (ending.code, ending.signal, ending.crashed) == (3, 0, False)
        assert not Path(f"/proc/{(tmp_path / 'pid').read_text()}").exists()


def test_a_child_lingers_until_released(tmp_path, monkeypatch):
    monkeypatch.setattr(contain, "_linger", [])
    contain.let_children_linger()
    pids = []
    for _ in range(2):
        ending = supervise(_exiting_with(4, tmp_path / "pid"), errors_to=str(tmp_path / "e"))
        assert (ending.code, ending.signal) == (4, 0)
        pids.append(int((tmp_path / "pid").read_text()))
        assert Path(f"/proc/{pids[-1]}").exists()  # said its status; not exited yet
    assert _gone(pids[0])  # released when the next child was forked
    contain.release_lingering()
    assert _gone(pids[1])


def test_a_child_that_dies_unsaid_is_waited_for(tmp_path):
    def body() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    ending = supervise(body, errors_to=str(tmp_path / "err"))
    assert (ending.code, ending.signal, ending.killed) == (0, signal.SIGKILL, True)


@pytest.fixture(autouse=True)
def _no_lingering():
    yield
    contain.release_lingering()
