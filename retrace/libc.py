"""The C library of this process, for the few Linux calls retrace makes (prctl, mallopt).

`ctypes.util.find_library("c")` runs ldconfig in a subprocess to find it, which cost
tens of milliseconds per command; the process's own symbols already include it.
"""

from __future__ import annotations

import ctypes
import functools


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
