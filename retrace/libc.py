"""The C library of this process, for the few Linux calls retrace makes (prctl, mallopt).

`ctypes.util.find_library("c")` runs ldconfig in a subprocess to find it, which cost
tens of milliseconds per command; the process's own symbols already include it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys


@functools.cache
def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def syscall(number: int, *args: object) -> int:
    """The raw system call `number` (for those glibc has no wrapper of); -1 and errno set
    (`ctypes.get_errno`) on failure."""
    call = libc().syscall
    call.restype = ctypes.c_long
    return int(call(ctypes.c_long(number), *args))


def no_new_privs() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS): nothing this process executes gains privileges; the
    kernel requires it before an unprivileged process confines itself (seccomp, Landlock)."""
    if libc().prctl(38, 1, 0, 0, 0) != 0:
        import os

        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def map_large_blocks() -> None:
    """Have glibc always map large blocks (the reader's batches, a few MB each) rather
    than move its threshold up to them: batches then go back to the system when freed
    instead of leaving a heap that only grows (about 20 MB on a 400k-call trace).

    A replaying child does it first (`load_libraries`): looking mallopt up (dlsym) takes
    the dynamic loader's lock, which the display opening on a thread holds while the driver
    loads; the replay waited for it up to 14 ms."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        libc().mallopt(_M_MMAP_THRESHOLD, 256 * 1024)
