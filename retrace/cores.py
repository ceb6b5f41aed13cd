"""The cores this process may run on, and about how many of them are idle: what decides
whether work overlapped on another core pays (reading ahead, the driver's loading on a
thread, the replay child forked before parsing). It imports nothing but os, for the
command line to ask before it imports anything else."""

from __future__ import annotations

import os


def usable() -> int:
    """The cores this process may run on (its affinity mask: `taskset`, cgroups' cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (no affinity masks on this platform)
        return os.cpu_count() or 1


def idle() -> float:
    """About how many of the usable cores are idle now: the usable cores less the tasks
    runnable now, this one among them (Linux's /proc/loadavg), else less the 1-minute load
    average. Now, not the average: a script that runs retrace after retrace has a load of
    about one retrace (its own previous runs'), and a core idle beside each."""
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
