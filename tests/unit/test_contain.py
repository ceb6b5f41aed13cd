"""How the parent learns that the replaying child ended: the child says its exit status
on a pipe, and then waits to exit until the parent lets it: at once in a process that
replays many times (the Python API's caller: no zombie, no driver memory kept), else
when the parent ends or forks the next child (`let_children_linger`, the command line's).
A child that dies without saying is waited for, and its signal reported."""

from __future__ import annotations

import os
import signal
import time
from functools import partial
from pathlib import Path

import pytest

from retrace.profile.checkpoint import Live
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
    while contain._spare:  # (a test that failed before using it)
        spare = contain._spare.pop()
        os.close(spare.request)
        os.waitpid(spare.pid, 0)


# --- the spare child, forked before the command line is parsed (`contain.spare_child`) ---


def _write_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))


def _spare_pid() -> int:
    contain.spare_child(())
    assert contain._spare, "RETRACE_SPARE_CHILD=1 (the tests') forks one whatever the load"
    return contain._spare[0].pid


def test_a_body_that_pickles_runs_in_the_spare_child(tmp_path):
    spare = _spare_pid()
    ending = supervise(partial(_write_pid, tmp_path / "pid"), errors_to=str(tmp_path / "e"))
    assert (ending.code, ending.signal) == (0, 0)
    assert int((tmp_path / "pid").read_text()) == spare
    assert not contain._spare


def test_a_body_that_does_not_pickle_gets_a_child_forked_as_before(tmp_path):
    spare = _spare_pid()
    pid = tmp_path / "pid"
    ending = supervise(lambda: _write_pid(pid), errors_to=str(tmp_path / "e"))
    assert (ending.code, ending.signal) == (0, 0)
    assert int(pid.read_text()) != spare
    assert _gone(spare)  # ended and reaped, not left waiting


def test_a_spare_that_died_is_replaced_by_a_child_forked_as_before(tmp_path):
    spare = _spare_pid()
    os.kill(spare, signal.SIGKILL)
    ending = supervise(_exiting_with(5, tmp_path / "pid"), errors_to=str(tmp_path / "e"))
    assert (ending.code, ending.signal) == (5, 0)
    assert int((tmp_path / "pid").read_text()) != spare
    assert _gone(spare)


def _publish(live: Live) -> None:
    live.publish(2, 7, [11, 12], ["glDrawArrays", "glClear"])


def test_memory_shared_with_a_spare_reaches_it_in_the_body(tmp_path):
    """A profile's `Live`, made once the spare has forked, pickles as where it lies in the
    memory the spare mapped before it forked: what the child writes, the parent reads."""
    spare = _spare_pid()
    live = Live()
    ending = supervise(partial(_publish, live), errors_to=str(tmp_path / "e"))
    assert (ending.code, ending.signal) == (0, 0) and not Path(f"/proc/{spare}/fd").exists()
    assert (live.pass_index, live.frames, live.length(0), live.length(1)) == (2, 7, 11, 12)
    assert live.names == ["glDrawArrays", "glClear"]


@pytest.mark.parametrize(
    ("switch", "idle", "forked"),
    [("0", 2.0, False), ("1", 0.0, True), ("", 0.0, False), ("", 0.5, False), ("", 1.0, True)],
)
def test_the_spare_child_forks_where_a_core_is_idle(monkeypatch, switch, idle, forked):
    """Its extra CPU (the modules both processes import) costs a busy machine time."""
    from retrace import cores

    monkeypatch.setenv(contain.SPARE_CHILD, switch)
    monkeypatch.setattr(cores, "idle", lambda: idle)
    contain.spare_child(())
    assert bool(contain._spare) == forked


def test_a_fork_that_fails_holds_no_stop_signal_and_forks_no_spare(monkeypatch, tmp_path):
    """Out of processes: no spare (the command forks later, and says why there); the
    supervised fork's error goes to the caller, with SIGINT and SIGTERM not left blocked."""
    import errno

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    contain.spare_child(())
    assert not contain._spare
    with pytest.raises(OSError):
        supervise(_exiting_with(0, tmp_path / "pid"), errors_to=str(tmp_path / "e"))
    held = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.SIGINT not in held and signal.SIGTERM not in held
