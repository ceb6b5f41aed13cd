"""The cores this process may run on, and about how many of them are idle: what decides
whether work overlapped on another core pays (reading ahead, the driver's loading on a
thread, the replay child forked before parsing). It imports nothing but os and time
(built in), for the command line to ask before it imports anything else."""

from __future__ import annotations

import os
import time


def usable() -> int:
    """The cores this process may run on (its affinity mask: `taskset`, cgroups' cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (no affinity masks on this platform)
        return os.cpu_count() or 1


# A task runnable for a moment (a kernel worker, the program that started this one) is no
# load: where the first look finds no core idle, `idle` looks again, LOOKS in all, APART s
# apart, and takes the idlest. (On this project's 2-core machines the first look found a
# second task runnable in a fifth of the starts of `retrace replay`; half a millisecond
# later it had always gone.) A machine that is busy pays APART s of sleep per look, which
# costs its other work nothing.
LOOKS, APART = 3, 0.0005


def idle() -> float:
    """About how many of the usable cores are idle now: the usable cores less the tasks
    runnable now, this one among them (Linux's /proc/loadavg), else less the 1-minute load
    average. Now, not the average: a script that runs retrace after retrace has a load of
    about one retrace (its own previous runs'), and a core idle beside each."""
    most = _idle_now()
    for _ in range(LOOKS - 1):
        if most >= 1:
            break
        time.sleep(APART)
        most = max(most, _idle_now())
    return most


def _idle_now() -> float:
    try:
        with open("/proc/loadavg", "rb") as f:
            runnable = int(f.read().split()[3].split(b"/")[0])  # (this process is one)
        return float(usable() - runnable)
    except (OSError, IndexError, ValueError):
        pass
    try:
        return usable() - os.getloadavg()[0]
    except (AttributeError, OSError):  # (no load average here: none taken for idle)
        return 0.0
