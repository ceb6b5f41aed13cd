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
    """The usable cores less the 1-minute load average: about how many are idle now."""
    try:
        return usable() - os.getloadavg()[0]
    except (AttributeError, OSError):  # (no load average here: none taken for idle)
        return 0.0
