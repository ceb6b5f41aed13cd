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
