"""The driver a batch job runs on, as a resumed batch compares it: a job recorded earlier
is reused only if the driver is the same one.

A CI job rebuilds Mesa in place, or selects another driver through the environment, and
runs the same `retrace batch` again: the trace and the options are unchanged, the
driver is not. So the driver is named three ways, each of which a change shows in:

* the environment that selects it or changes what it does (the dynamic loader's paths,
  glvnd's vendor files, Mesa's and Gallium's variables...);
* the files it is: the shared libraries that opening an EGL display and a context
  mapped into a probe process (path, size, modification time);
* what it says it is: GL_RENDERER and GL_VERSION of that context.

The probe is a child (`python -m retrace.batch.driver`, this module) under the job's
environment, one per distinct environment. With --ray it runs here, not on the nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from retrace.batch.job import Job
from retrace.child import python_command

# Variables that choose the driver or change what it renders, by exact name and by prefix.
NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "DRI_PRIME", "VK_ICD_FILENAMES", "VK_DRIVER_FILES")
PREFIXES = (
    "MESA_", "GALLIUM_", "LIBGL_", "LP_", "SOFTPIPE_", "ZINK_", "EGL_", "__EGL_", "__GLX_", "__GL_",
)  # fmt: skip
_PROBE_TIMEOUT = 120.0  # seconds: opening a display and a context, however slow the machine


def selecting(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` that select or change the driver."""
    return {k: v for k, v in sorted(env.items()) if k in NAMES or k.startswith(PREFIXES)}


def fingerprint(env: Mapping[str, str]) -> dict[str, Any]:
    """The driver of `env`: its selecting variables, and what the probe found (its files,
    renderer and version), or the probe's failure."""
    try:
        done = subprocess.run(
            python_command("retrace.batch.driver"),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_PROBE_TIMEOUT,
        )
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        done, found = None, {"probe": str(exc)}
    if found is None:
        assert done is not None
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        found = {"probe": lines[-1]}
    return {"env": selecting(env), **found}


def with_drivers(jobs: Sequence[Job]) -> list[Job]:
    """The jobs with the fingerprint of their driver (one probe per environment); jobs
    decided when planned, which never run, as they are."""
    found: dict[tuple[tuple[str, str], ...], str] = {}
    out = []
    for job in jobs:
        if job.preset is None:
            if job.env not in found:
                found[job.env] = json.dumps(fingerprint({**os.environ, **dict(job.env)}))
            job = replace(job, driver=found[job.env])
        out.append(job)
    return out


def changes(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between two fingerprints, as names: variables, files, GL strings."""
    out = []
    old_env, new_env = before.get("env", {}), now.get("env", {})
    out += [k for k in sorted({*old_env, *new_env}) if old_env.get(k) != new_env.get(k)]
    old_files = {f[0]: f for f in before.get("files", [])}
    new_files = {f[0]: f for f in now.get("files", [])}
    names = sorted({*old_files, *new_files})
    out += [os.path.basename(n) for n in names if old_files.get(n) != new_files.get(n)]
    out += [f"GL_{k.upper()}" for k in ("renderer", "version") if before.get(k) != now.get(k)]
    if before.get("probe") != now.get("probe"):
        out.append("the probe's failure")
    return out


def _mapped() -> set[str]:
    """The shared libraries this process has mapped (not the driver's caches, which change
    as it runs)."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        fields = (line.split(maxsplit=5) for line in maps)
        paths = {f[5].strip() for f in fields if len(f) == 6}
    return {p for p in paths if p.startswith("/") and ".so" in os.path.basename(p)}


def _probe() -> None:
    """Open a display and a context; print the files that mapped, and the GL strings."""
    from retrace.replay.ws.headless import ContextRequest, EglDisplay, PixelFormat

    before = _mapped()
    with EglDisplay.open() as display:
        context = display.create_context(ContextRequest(), PixelFormat())
        files = []
        for path in sorted(_mapped() - before):
            try:
                stat = os.stat(path)
            except OSError:  # (deleted since it was mapped: a driver being replaced)
                continue
            files.append([path, stat.st_size, stat.st_mtime_ns])
        facts = {"files": files, "renderer": context.renderer, "version": context.version}
    json.dump(facts, sys.stdout)


if __name__ == "__main__":
    from retrace.main import main

    main(_probe)
