"""Replay in a child process, so that a crash of the GL driver cannot take retrace with it.

The driver runs inside whichever process replays: a segfault or abort in it (a
pointer in the trace that reaches the driver, a driver bug) kills that process.
So every command that replays forks first, before any EGL or GL is initialised;
the child does the replay (and, when profiling, streams its values into the
store's files on disk), and the parent only waits and reports.

The child's replay loop publishes the number of the call it is running in a
word shared with the parent (`_vm.publish`: one memory store per op, no
syscall). When the child dies of a signal, the parent reads that word and names
the call: ``driver crashed (SIGSEGV) at call 11 glDrawArrays(...)``. The driver
is blamed only when what retrace gave it was within bounds: memory the replay
sizes for the driver to write into ends at a guard (`_guard.c`), whose fault
handler tells the parent, through a second shared pair of words, that the crash
was a write past retrace's own destination -- retrace's error, said as such.

SIGINT and SIGTERM sent to the parent kill the child; `Ending.interrupted`
says which arrived, for the caller to report and keep what is complete. A
`graceful` child (a profile) is asked instead: it stops at its next frame end,
having saved everything up to there (`stop_requested`, `stop_here`), and is
killed only if it has not within `GRACE_SECONDS` or at a second signal. The
child dies with the parent too (PR_SET_PDEATHSIG), so a SIGKILL of the parent
leaves no replay running on its own. With --sandbox the child confines itself before
the body runs (`retrace.replay.sandbox`), to writing only the paths `writes` names.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple, NoReturn

from retrace.errors import Interrupted, RetraceError

_PR_SET_PDEATHSIG = 1
_STOPS = (signal.SIGINT, signal.SIGTERM)
_DESCRIPTION_CHARS = 200
GRACE_SECONDS = 5
_stopping: list[int] = []  # in a graceful child: the stop signals received
_channel: list[_Channel] = []  # in a child: its channel to the parent
_lingering: list[tuple[int, int]] = []  # children (pid, hold) that wait for this process's end
_linger: list[bool] = []  # whether children may (`let_children_linger`)


class _Channel:
    """A child's two pipes to its parent: on `said` it writes its exit status before it
    exits; `hold` keeps it from exiting once it has (it reads until the parent closes its
    end, or ends). The kernel's teardown of a child that exits (unmapping the driver and
    the memory it shares with the parent: 4-5 ms for llvmpipe, more with a GPU's) holds
    up a parent that touches that memory meanwhile; held, the child exits after the
    parent instead."""

    def __init__(self) -> None:
        self.said_r, self.said_w = os.pipe2(os.O_CLOEXEC)
        self.hold_r, self.hold_w = os.pipe2(os.O_CLOEXEC)

    def keep(self, *ends: int) -> None:
        """Close the ends but `ends` (the parent keeps said_r and hold_w, the child the
        others)."""
        for fd in (self.said_r, self.said_w, self.hold_r, self.hold_w):
            if fd not in ends:
                os.close(fd)


class Ending(NamedTuple):
    """How the child ended, and where its replay was."""

    code: int  # exit status (0 when a signal killed it)
    signal: int  # the signal that killed it, or 0
    interrupted: int  # SIGINT or SIGTERM received by the parent meanwhile, or 0
    call: int  # number of the call the loop ran last, -1 before the first
    in_call: bool  # whether the loop was running that call when the child died
    overrun: int = -1  # how far past retrace's scratch memory the fatal write was, or -1

    @property
    def crashed(self) -> bool:
        """Died of a signal the parent did not send (a driver crash, or `killed`)."""
        return self.signal != 0 and not self.interrupted

    @property
    def killed(self) -> bool:
        """Killed by something outside (the OOM killer, a user), not by its own fault."""
        return self.signal in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)


def supervise(
    body: Callable[[], None],
    errors_to: str | None = None,
    graceful: bool = False,
    writes: Sequence[str] = (),
    display: bool = False,
) -> Ending:
    """Run `body` in a forked child reporting its own errors as the CLI does (on stderr,
    or in the file `errors_to`); wait for it. `graceful`: see the module's docstring.
    Under --sandbox, the child may write only beneath `writes` (folders, written with a
    trailing separator, and files; made now where missing), and talk to a display server
    if `display`."""
    from retrace.replay import _guard, _vm, sandbox

    # anonymous and MAP_SHARED: the same page after fork
    words = mmap.mmap(-1, (_vm.PROGRESS_WORDS + _guard.OVERRUN_WORDS) * 8)
    progress = memoryview(words).cast("q")  # native int64, as _vm and _guard write them
    overrun = progress[_vm.PROGRESS_WORDS :]
    progress[_vm.PROGRESS_CALL], progress[_vm.PROGRESS_RUNNING] = -1, 0
    received: list[int] = []
    child: list[int] = []

    def kill(*_: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child[0], signal.SIGKILL)

    def stop(number: int, frame: object) -> None:
        received.append(number)
        if not child:
            return
        if graceful and len(received) == 1:  # ask; kill if it does not stop in time
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], number)
            signal.alarm(GRACE_SECONDS)
        else:
            kill()

    release_lingering()
    previous = {number: signal.signal(number, stop) for number in _STOPS}
    previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, kill)
    channel = _Channel()
    try:
        with sandbox.prepared(writes, display) as confine:
            try:
                child.append(_fork(body, words, errors_to, graceful, confine, channel))
            except BaseException:  # (no child: none of the pipes is kept)
                channel.keep()
                raise
            channel.keep(channel.said_r, channel.hold_w)
            if received:  # a signal came between the handler and the fork
                stop(received.pop(), None)
            status = _wait(child[0], channel)
    finally:
        signal.alarm(0)
        for number, handler in previous.items():
            signal.signal(number, handler)
    killed = os.WIFSIGNALED(status)
    return Ending(
        code=0 if killed else os.WEXITSTATUS(status),
        signal=os.WTERMSIG(status) if killed else 0,
        interrupted=received[0] if received else 0,
        call=int(progress[_vm.PROGRESS_CALL]),
        in_call=bool(progress[_vm.PROGRESS_RUNNING]),
        overrun=int(overrun[_guard.OVERRUN_PAST]) if overrun[_guard.OVERRUN_HIT] else -1,
    )


def _wait(child: int, channel: _Channel) -> int:
    """The child's wait status. One that said its exit status lingers where children may
    (`let_children_linger`), else is released and waited for."""
    said = os.read(channel.said_r, 1)
    os.close(channel.said_r)
    if said and _linger:
        _lingering.append((child, channel.hold_w))
        return said[0] << 8  # (an exit status, as a wait status says it)
    os.close(channel.hold_w)
    return os.waitpid(child, 0)[1]


def let_children_linger() -> None:
    """In a process that ends once its command is done (the command line's): a child that
    has said its exit status stays until this process ends, or forks the next child, and
    only then exits (`_Channel`). A longer-lived one (the Python API's caller) releases
    each at once, since it would keep the driver's memory."""
    _linger[:] = [True]


def release_lingering() -> None:
    """Let the children that linger exit, and reap them."""
    while _lingering:
        pid, hold = _lingering.pop()
        os.close(hold)
        os.waitpid(pid, 0)


def _fork(
    body: Callable[[], None],
    words: mmap.mmap,
    errors_to: str | None,
    graceful: bool,
    confine: Callable[[], None] | None,
    channel: _Channel,
) -> int:
    """Fork; the child publishes its replay progress in `words`, confines itself (`confine`,
    under --sandbox), runs `body`, says its exit status on `channel` and exits."""
    from retrace.replay import _guard, _vm

    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for number in _STOPS:  # die at once (the parent keeps the rest), or stop when ready
            signal.signal(number, _stopping_at if graceful else signal.SIG_DFL)
        _die_with(parent)
        _vm.publish(words)
        _guard.watch(memoryview(words)[_vm.PROGRESS_WORDS * 8 :])
        if errors_to is not None:
            sys.stderr = open(errors_to, "w")  # noqa: SIM115 - the child's until it exits
        channel.keep(channel.said_w, channel.hold_r)
        _channel.append(channel)
        code = _run_reporting(body if confine is None else partial(_confined, confine, body))
    finally:
        _exit(code)


def _exit(code: int) -> NoReturn:
    """End the child: its output flushed and closed (a reader of a pipe it shares sees the
    end when the parent exits), its exit status said to the parent, then held until the
    parent releases it (`_Channel`)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    if _channel:
        with contextlib.suppress(OSError):
            os.write(_channel[0].said_w, bytes([code & 0xFF]))
            os.read(_channel[0].hold_r, 1)
    os._exit(code)


def _confined(confine: Callable[[], None], body: Callable[[], None]) -> None:
    confine()
    body()


def _stopping_at(number: int, frame: object) -> None:
    _stopping.append(number)


def stop_requested() -> bool:
    """In a graceful child: whether the parent was asked to stop (stop at a safe point)."""
    return bool(_stopping)


def stop_here() -> NoReturn:
    """End a graceful child that has saved what it measured: the parent reports the stop."""
    _exit(0)


def contained(
    trace: str, body: Callable[[], None], writes: Sequence[str] = (), display: bool = False
) -> None:
    """Run `body`, which replays `trace`, in a child; raise what `check` raises."""
    check(supervise(body, writes=writes, display=display), trace)


def check(ending: Ending, trace: str) -> None:
    """Raise what the parent reports for an ending other than success: an interruption,
    a crash naming the call, or the child's own exit status (it has said why already)."""
    if ending.interrupted:
        raise Interrupted(ending.interrupted, f"interrupted by {signal_name(ending.interrupted)}")
    if ending.signal:
        raise RetraceError(crash_message(ending, trace))
    if ending.code:
        raise SystemExit(ending.code)


def _run_reporting(body: Callable[[], None]) -> int:
    """Run `body` as the CLI runs a command: an error is one stderr line; the exit status."""
    from retrace.exits import INTERNAL_ERROR, run_reporting

    try:
        run_reporting(body)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except Exception:  # a bug, re-raised under RETRACE_DEBUG: its traceback, not silence
        import traceback

        traceback.print_exc()
        return INTERNAL_ERROR
    return 0


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def crash_message(ending: Ending, trace: str) -> str:
    """``driver crashed (SIGSEGV) at call N glFoo(...)``; "killed" when something outside
    (the OOM killer, a user) sent the child SIGKILL or SIGTERM; retrace's own error when
    the driver wrote past memory retrace sized for it."""
    what = "the replay process was killed" if ending.killed else "driver crashed"
    if ending.overrun >= 0:
        what = (
            "retrace's own error (a bug in retrace, please report it): the driver wrote "
            f"{ending.overrun} bytes past the end of the memory retrace gave it"
        )
    if ending.call < 0:
        where = "before the first call"
    else:
        where = f"{'at' if ending.in_call else 'after'} call {describe_call(trace, ending.call)}"
    return f"{what} ({signal_name(ending.signal)}) {where}"


def describe_call(trace: str, call_no: int) -> str:
    """'N glFoo(args)' as `retrace dump` prints call N (shortened), or 'N' if unreadable."""
    from retrace.trace.callset import CallSet
    from retrace.trace.dump import dump_calls
    from retrace.trace.reader import TraceReader

    prefix = f"{call_no} "
    try:
        for text in dump_calls(TraceReader(trace), CallSet.parse(str(call_no)), verbose=True):
            if text.startswith(prefix):
                line = text.split("\n", 1)[0]
                if len(line) > _DESCRIPTION_CHARS:
                    line = line[: _DESCRIPTION_CHARS - 3] + "..."
                return line
    except (RetraceError, OSError, MemoryError):
        pass
    return str(call_no)


def _die_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    from retrace.libc import libc  # (ctypes: the child's, not the parent's before the fork)

    try:
        libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
