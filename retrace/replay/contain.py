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

The command line forks its replay child before it even imports click, where its words say
it replays (`spare_child`): the driver loads and the replayer imports there while the
parent parses the command line and prepares, on another core; `supervise` then hands that
child its body, pickled, instead of forking one. A body that does not pickle (a closure),
a --sandbox'ed one (the child confines itself before the driver loads) or a spare that
has died get a child forked as before.
"""

from __future__ import annotations

import contextlib
import io
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


class _Spare:
    """A replay child forked before the command line was parsed, waiting for its body."""

    def __init__(self, pid: int, words: mmap.mmap, channel: _Channel, request: int) -> None:
        self.pid = pid
        self.words = words  # its progress words, as `supervise` would make them
        self.channel = channel
        self.request = request  # the write end of the pipe its body comes down, pickled
        self.used = 0  # bytes of the memory it shares (`_shared`) given out (`SharedMemory`)


class SharedMemory:
    """`size` bytes (`view`) that this process shares with the replay child it starts next:
    anonymous MAP_SHARED memory, made now where that child will be forked, else taken from
    what the spare child mapped before it forked (`_shared`), where both see it. It then
    pickles as where it lies there, so the body handed to the spare finds it."""

    def __init__(self, size: int, at: int | None = None) -> None:
        spare = _spare[0] if _spare else None
        if at is None and spare is not None and spare.used + size <= _SHARED_BYTES:
            at, spare.used = spare.used, spare.used + size
        self._at = at  # where in `_shared`, or None: mapped for this object alone
        self.size = size
        self.view = memoryview(_shared[0] if at is not None else mmap.mmap(-1, size))
        if at is not None:
            self.view = self.view[at : at + size]

    def __reduce__(self) -> tuple[object, ...]:
        if self._at is None:  # (the body then goes to a child forked as before)
            raise TypeError("memory shared only with a child forked from here on")
        return (SharedMemory, (self.size, self._at))


# bytes the spare child maps before it forks, for its body's `SharedMemory` (a profile's
# `Live`: 0.9 MB): reserved, not resident until written
_SHARED_BYTES = 4 << 20
_shared: list[mmap.mmap] = []  # that memory, in the command line and in the spare child
SPARE_CHILD = "RETRACE_SPARE_CHILD"  # 1: always fork a spare child, 0: never (`spare_child`)
_spare: list[_Spare] = []  # in the command line: the child `spare_child` forked, until used


class _Work(NamedTuple):
    """What a replay child does (`supervise`'s arguments): pickled, for a spare child."""

    body: Callable[[], None]
    errors_to: str | None  # the file its errors go to, else stderr
    graceful: bool  # stopped at its next frame end when asked, rather than killed


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
    from retrace.replay.handlers import handling

    spare = _spare.pop() if _spare else None
    words, channel = (spare.words, spare.channel) if spare else (_progress_words(), _Channel())
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
    with handling({**dict.fromkeys(_STOPS, stop), signal.SIGALRM: kill}):
        try:
            with sandbox.prepared(writes, display) as confine:
                try:
                    work = _Work(body, errors_to, graceful)
                    child.append(_start(spare, work, words, confine, channel))
                except BaseException:  # (no child: none of the pipes is kept)
                    channel.keep()
                    raise
                channel.keep(channel.said_r, channel.hold_w)
                if received:  # a signal came between the handler and the fork
                    stop(received.pop(), None)
                status = _wait(child[0], channel)
        finally:
            signal.alarm(0)
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


def _progress_words() -> mmap.mmap:
    """The words a child publishes its progress in, and its guard a fatal overrun: anonymous
    and MAP_SHARED, the same pages after fork."""
    from retrace.replay import _guard, _vm

    return mmap.mmap(-1, (_vm.PROGRESS_WORDS + _guard.OVERRUN_WORDS) * 8)


def spare_child(modules: Sequence[str]) -> None:
    """In the command line, before click is imported, where the command replays: fork the
    replay child now. It starts loading the driver (`driver_process.open_ahead`) and
    imports `modules` (those of the command's work; "module:function" calls the function
    too) while this process parses the command line, then waits for the body `supervise`
    hands it; it ends at once where none comes (the pipe's end: this process ended, or
    forked another child).

    Only where a core is idle (`cores.idle`), or $RETRACE_SPARE_CHILD is 1 (0: never):
    the child imports again what this process imports too (the work's modules, pickle),
    5-10 ms of CPU, which a busy machine (a farm replaying a trace per core) pays in time,
    where an idle core hides it."""
    from retrace import cores

    switch = os.environ.get(SPARE_CHILD, "").strip()
    if switch == "0" or (switch != "1" and cores.idle() < 1):
        return
    parent = os.getpid()
    try:
        words, channel = _progress_words(), _Channel()
        _shared.append(mmap.mmap(-1, _SHARED_BYTES))  # (before the fork: the child's too)
        request, requested = os.pipe2(os.O_CLOEXEC)
        pid = _fork_holding_stops()
    except OSError:  # (no descriptors, memory or processes left: the command forks its
        _shared.clear()  # child as before, and says why in one line where that fails too)
        return
    if pid:
        os.close(request)
        _spare.append(_Spare(pid, words, channel, requested))
        return
    try:
        os.close(requested)
        _wait_for_work(parent, request, words, channel, modules)
    finally:  # (never back into the command line's code)
        os._exit(1)


def _wait_for_work(
    parent: int, request: int, words: mmap.mmap, channel: _Channel, modules: Sequence[str]
) -> NoReturn:
    """The spare child: get ready (the driver loading, `modules` imported), then run the
    body that comes down `request`, or end where none does."""
    failed: list[BaseException] = []  # (reported once a body comes, as the body's own)
    for number in _STOPS:  # until a body comes: die at once (the parent says why)
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    try:
        from retrace.trace.container import load_libraries

        load_libraries()
        from retrace.replay.ws.driver_process import open_ahead

        _die_with(parent)  # (before: its dlopen would wait for the driver's loading)
        open_ahead()  # first: the driver's loading is what the replay waits for
        from retrace.exits import outlive_stderr

        outlive_stderr()  # (as the command line's `main` does, after this fork)
        for name in modules:  # (not importlib's: -X importtime would not see them)
            module, _, function = name.partition(":")
            __import__(module)
            if function:
                getattr(sys.modules[module], function)()
    except Exception as e:
        failed.append(e)
    chunks = []
    while chunk := os.read(request, 1 << 16):
        chunks.append(chunk)
    if not chunks:  # the command did not replay, or forked another child
        os._exit(0)
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)  # (until the body's own handlers)
    os.close(request)
    import pickle

    unpickler = pickle.Unpickler(io.BytesIO(b"".join(chunks)))
    unpickler.persistent_load = _standard_stream_named  # type: ignore[method-assign]
    try:
        work = unpickler.load()
    except Exception as e:
        failed.append(e)
    if failed:
        work = _Work(partial(_raise, failed[0]), None, False)
    _child(parent, work, words, None, channel)


def _raise(error: BaseException) -> None:
    raise error


def _standard_stream(obj: object) -> str | None:
    """The standard stream `obj` is ("stdout", "stderr"), which a body handed to the spare
    child gets as the child's own; None for anything else (pickled by value)."""
    return next((name for name in ("stdout", "stderr") if obj is getattr(sys, name)), None)


def _standard_stream_named(name: str) -> object:
    return getattr(sys, name)


def _start(
    spare: _Spare | None,
    work: _Work,
    words: mmap.mmap,
    confine: Callable[[], None] | None,
    channel: _Channel,
) -> int:
    """The child that does `work`: the spare, handed it, else one forked now."""
    if spare is not None:
        handed = confine is None and _hand(spare.request, work)
        os.close(spare.request)
        if handed:
            return spare.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(spare.pid, signal.SIGKILL)  # (it may hold the driver half loaded)
        os.waitpid(spare.pid, 0)
    return _fork(work, words, confine, channel)


def _hand(request: int, work: _Work) -> bool:
    """Write `work` down the spare child's pipe, pickled; False where it does not pickle (a
    closure, an open file) or the spare has died (a driver that crashed while it loaded)."""
    import pickle

    out = io.BytesIO()
    pickler = pickle.Pickler(out, pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = _standard_stream  # type: ignore[method-assign]
    try:
        pickler.dump(work)
    except Exception:  # (whatever pickling raises: a child is forked, as before spares)
        return False
    data = out.getbuffer()
    sys.stdout.flush()  # (what this process wrote comes before the child's)
    sys.stderr.flush()
    try:
        while data:
            data = data[os.write(request, data) :]
    except OSError:  # EPIPE: it has died
        return False
    return True


def _fork(
    work: _Work, words: mmap.mmap, confine: Callable[[], None] | None, channel: _Channel
) -> int:
    """Fork the child that does `work` (`_child`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = _fork_holding_stops()
    if pid:
        return pid
    _child(parent, work, words, confine, channel)


def _fork_holding_stops() -> int:
    """`os.fork()` with SIGINT and SIGTERM blocked across it, unblocked again in the
    parent; the child unblocks them once it has set its own handlers. A stop that came
    before would reach the handler the child inherits (the parent's, which left it to a
    child not yet known there: a Ctrl-C at the fork was lost), or kill it half set up."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        pid = os.fork()
    except BaseException:  # (no child: this process's stops are not held for ever)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        raise
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    return pid


def _child(
    parent: int,
    work: _Work,
    words: mmap.mmap,
    confine: Callable[[], None] | None,
    channel: _Channel,
) -> NoReturn:
    """In the child: publish the replay's progress in `words`, confine this process
    (`confine`, under --sandbox), do `work`, say the exit status on `channel` and exit."""
    from retrace.replay import _guard, _vm

    body, errors_to, graceful = work
    code = 1
    try:
        for number in _STOPS:  # die at once (the parent keeps the rest), or stop when ready
            signal.signal(number, _stopping_at if graceful else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)  # (held across the fork)
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
