"""User-facing errors.

Every failure a user can cause is raised as a `RetraceError`; the CLI turns it
into one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

from retrace import DISTRIBUTION

# Ctrl-C before a command's own handling of it: the line on stderr and the exit status.
INTERRUPTED = ("retrace: interrupted", 130)


def pip_install(extra: str) -> str:
    """The command that installs one of pyproject.toml's optional extras, for the error of a
    feature that needs it."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class RetraceError(Exception):
    """An error the user caused or can fix; its message is one complete line."""

    exit_code = 1
    prefix = "error: "  # after "retrace: " on stderr


class UsageError(RetraceError):
    """Bad command-line input (a malformed call set, an unknown option value)."""

    exit_code = 2


class TraceError(RetraceError):
    """A trace file that cannot be read (further): not a trace, corrupt, cut off."""

    def __init__(self, path: str, offset: int | None, problem: str, where: str = "") -> None:
        self.path = path
        self.offset = offset
        self.problem = problem
        self.where = where
        at = "" if offset is None else f" at byte {offset}{where}"
        super().__init__(f"{path}{at}: {problem}")

    @classmethod
    def in_stream(cls, path: str, offset: int, problem: str) -> TraceError:
        """Damage at an offset of the decompressed event stream."""
        return cls(path, offset, problem, " of the decompressed stream")


class Interrupted(RetraceError):
    """SIGINT or SIGTERM stopped the run; the message says what was kept and what is
    missing. Exits as a shell reports a process killed by that signal (130, 143)."""

    prefix = ""  # the message starts "interrupted by SIGINT"

    def __init__(self, signal_number: int, message: str) -> None:
        self.exit_code = 128 + signal_number
        super().__init__(message)
