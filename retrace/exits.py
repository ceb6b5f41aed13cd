"""How a command ends: retrace's own errors as one stderr line and an exit status.

Shared by the command line (`retrace.main.main`) and the replay child that runs a
command's work (`retrace.replay.contain`), which must end exactly as the command would.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TextIO

from retrace.errors import INTERRUPTED, RetraceError

DEBUG = "RETRACE_DEBUG"  # set: a bug in retrace ends with its traceback (the tests set it)
INTERNAL_ERROR = 70  # the exit status of a bug in retrace (sysexits.h's EX_SOFTWARE)


class ReaderGone(Exception):
    """The reader of standard output went away (`| head`); raised past click, which would
    otherwise exit 1 in silence on a broken pipe."""


class _Diagnostics:
    """Standard error that outlives its reader (`2>&1 | head -2`): what goes there is
    diagnostics, so once its reader has gone it goes to /dev/null and the work goes on
    (a resumed profile's tables to its file included), as it does when interrupted."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def outlive_stderr() -> None:
    """From here on (and in the children forked later), a closed stderr loses messages
    only."""
    if sys.stderr is not None and not isinstance(sys.stderr, _Diagnostics):
        sys.stderr = _Diagnostics(sys.stderr)


def run_reporting(run: Callable[[], object]) -> None:
    """Run `run`; an error it raises ends the process with one line and its exit status.

    A user sees one line even for a bug in retrace (an exception not foreseen here), so
    what was written before it stays readable; RETRACE_DEBUG=1 shows its traceback."""
    try:
        run()
    except _click_errors() as e:  # (evaluated only for an exception, not imported for it)
        _end_click(e)
    except KeyboardInterrupt:  # Ctrl-C outside click's parsing and a replay's supervision
        _say(INTERRUPTED[0])
        sys.exit(INTERRUPTED[1])
    except RetraceError as e:
        _flush_stdout()
        _say(f"retrace: {e.prefix}{e}")
        sys.exit(e.exit_code)
    except (ReaderGone, BrokenPipeError):
        # the reader of our output (head, less) went away: end quietly with the status a
        # Unix tool killed by SIGPIPE leaves (128 + 13), after our own cleanup has run
        _drop_stdout()
        sys.exit(128 + signal.SIGPIPE)
    except OSError as e:  # an unwritable path, a full disk
        _drop_stdout()
        _say(f"retrace: error: {os_error_message(e)}")
        sys.exit(1)
    except MemoryError:
        _drop_stdout()
        _say("retrace: error: out of memory")
        sys.exit(1)
    except Exception as e:  # a bug in retrace: one line too, the traceback when asked for
        if os.environ.get(DEBUG):
            raise
        _flush_stdout()
        _say(f"retrace: {internal_error(e)}")
        sys.exit(INTERNAL_ERROR)


def _click_errors() -> tuple[type[BaseException], ...]:
    """click's exceptions, where click is imported: only there can one be raised. A replay
    child forked before the command line was parsed (`contain.spare_child`) reports its
    errors here without importing click (20 ms of its start-up)."""
    if "click" not in sys.modules:
        return ()
    import click

    return (click.ClickException, click.exceptions.Exit, click.exceptions.Abort)


def _end_click(e: BaseException) -> NoReturn:
    """End as click's exception `e` asks: help, a usage error's line, Ctrl-C's."""
    import click

    if isinstance(e, click.exceptions.Exit):
        sys.exit(e.exit_code)
    if isinstance(e, click.exceptions.NoArgsIsHelpError):  # bare `retrace`, `retrace cache`
        click.echo(e.ctx.get_help() if e.ctx else e.format_message())
        sys.exit(0)
    if isinstance(e, click.UsageError):  # a bad option value: one line, click's status 2
        _say(f"retrace: error: {e.format_message()}")
        sys.exit(e.exit_code)
    if isinstance(e, click.ClickException):
        e.show()
        sys.exit(e.exit_code)
    _say(INTERRUPTED[0])  # (click.exceptions.Abort: Ctrl-C at a prompt)
    sys.exit(INTERRUPTED[1])


def _say(line: str) -> None:
    """A line on stderr (line-buffered: written at once), where there is one."""
    if sys.stderr is not None:  # (started with stderr closed: print would use stdout)
        print(line, file=sys.stderr)


def internal_error(e: Exception) -> str:
    """What a bug in retrace ends with, after "retrace: "."""
    return (
        f"internal error: {type(e).__name__}: {e} (a bug in retrace, please report it; "
        f"{DEBUG}=1 shows where)"
    )


def os_error_message(e: OSError) -> str:
    """An OSError as a message: the file it is about, and what went wrong."""
    where = f"{e.filename}: " if e.filename else ""
    return f"{where}{e.strerror or e}"


def _flush_stdout() -> None:
    """Flush what was written before an error; stdout itself may be what failed."""
    try:
        sys.stdout.flush()
    except OSError:
        _drop_stdout()


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit cannot fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def end_process(main: Callable[[], object]) -> NoReturn:
    """Run a process's `main` and end the process with its exit status, without the
    interpreter's teardown: freeing every module's objects costs each command 5-10 ms
    once its work is done. What teardown does that matters is done here: the atexit
    handlers run (temporary folders go) and the standard streams are flushed. Where a
    thread the interpreter would wait for is still running, or the status is a message,
    the process ends the ordinary way."""
    try:
        main()
        code: str | int | None = 0
    except SystemExit as e:
        code = e.code
    waited = [t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
    if not isinstance(code, int) or waited:  # (None: 0, a message: 1, said on stderr)
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # (closed or gone: the ordinary exit says so as it would)
        sys.exit(code)
    os._exit(code)
