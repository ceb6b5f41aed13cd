"""`retrace batch FILE.yml --device NAME`: a traces description file run as a batch.

The batch command hands a ``.yml``/``.yaml`` manifest here: `plan_run` reads
the file and piglit's environment (``PIGLIT_REPLAY_DESCRIPTION_FILE``,
``PIGLIT_REPLAY_DEVICE_NAME``, ``PIGLIT_REPLAY_EXTRA_ARGS``, and
``PIGLIT_REPLAY_SUBCOMMAND=profile`` with ``PIGLIT_REPLAY_LOOP_TIMES`` for a
performance job; the command line wins) into batch jobs, and `CiRun.finish`
writes piglit's results and, with ``--update-checksums``, the new checksums
into the file.
"""

from __future__ import annotations

import difflib
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrace.batch.ci.description import Description, Planned, plan, read_description
from retrace.batch.ci.jobs import DEFAULT_DB_PATH, Options, description_jobs
from retrace.batch.job import FINISHED, Job
from retrace.errors import UsageError

if TYPE_CHECKING:
    import duckdb

DESCRIPTION_FILE = "PIGLIT_REPLAY_DESCRIPTION_FILE"
DEVICE_NAME = "PIGLIT_REPLAY_DEVICE_NAME"
EXTRA_ARGS = "PIGLIT_REPLAY_EXTRA_ARGS"
SUBCOMMAND = "PIGLIT_REPLAY_SUBCOMMAND"  # "profile": a performance job
LOOP_TIMES = "PIGLIT_REPLAY_LOOP_TIMES"  # its loops, 150 unless set
SUFFIXES = (".yml", ".yaml")
# piglit replayer options PIGLIT_REPLAY_EXTRA_ARGS may carry: (names, Options field, takes a value)
_EXTRA = (
    (("-p", "--db-path"), "db_path", True),
    (("-k", "--keep-image"), "keep_image", False),
    (("-c", "--download-caching-proxy-url"), "proxy", True),
    (("-w", "--force-download"), "force_download", False),
)


def is_description(manifest: str | None) -> bool:
    """Whether the batch's manifest is a traces description file (or none: piglit's env)."""
    return manifest is None or Path(manifest).suffix in SUFFIXES


@dataclass
class CiRun:
    description: Description
    options: Options
    planned: list[Planned]
    jobs: list[Job]
    update: bool

    def finish(self, con: duckdb.DuckDBPyConnection, build: str, started: float) -> None:
        """Write piglit's results; with --update-checksums, the checksums measured."""
        from retrace.batch.ci.results import write_results

        o = self.options
        out = write_results(
            con, build, o.output, o.device, self.planned, started, performance=o.loop > 0
        )
        print(f"retrace batch: piglit results in {out}", file=sys.stderr)
        if not self.update:
            return
        from retrace.batch.ci.update import update_checksums

        replayed = {p.entry.path for p in self.planned if not p.skip}
        measured = {
            trace: checksum
            for trace, checksum in con.execute(
                "SELECT l.trace, l.checksum FROM last_frame l JOIN runs r ON r.build = l.build "
                "AND r.trace = l.trace AND r.run = 0 WHERE l.build = ? AND r.status IN (?, ?)",
                [build, *FINISHED],
            ).fetchall()
            if trace in replayed
        }  # (this run's, not a last frame an earlier run of the file left)
        changed = update_checksums(self.description.file, o.device, measured)
        print(
            f"retrace batch: {len(changed)} checksum(s) of {o.device} updated in "
            f"{self.description.file}",
            file=sys.stderr,
        )


def plan_run(
    manifest: str | None, given: dict[str, Any], update: bool, env: Mapping[str, str]
) -> CiRun:
    """Read the file and options (`given`: Options fields from the command line, None where
    not given) into the run's jobs."""
    path = manifest or env.get(DESCRIPTION_FILE)
    if not path:
        raise UsageError(
            f"give a manifest or a traces description file (or set {DESCRIPTION_FILE})"
        )
    device = given.get("device") or env.get(DEVICE_NAME)
    if not device:
        raise UsageError(f"{path}: give the device to run it for: --device NAME (or {DEVICE_NAME})")
    settings = _extra_args(env.get(EXTRA_ARGS, ""))
    if env.get(SUBCOMMAND) == "profile":
        try:
            settings["loop"] = int(env.get(LOOP_TIMES) or 150)
        except ValueError:
            message = f"{LOOP_TIMES} must be a whole number, not {env[LOOP_TIMES]!r}"
            raise UsageError(message) from None
    settings |= {k: v for k, v in given.items() if v}
    settings["device"] = device
    settings["db_path"] = Path(settings.get("db_path") or DEFAULT_DB_PATH)
    settings["output"] = Path(settings.get("output") or "results")
    description = read_description(path)
    if description.unknown:
        print(
            f"retrace: warning: {path}: fields retrace does not know, kept and ignored: "
            + ", ".join(description.unknown),
            file=sys.stderr,
        )
    _check_device(description, device)
    options = replace(Options(device, Path(), Path()), **settings)
    if options.loop and update:
        raise UsageError("--update-checksums needs a checksum run: leave --loop out")
    return CiRun(
        description,
        options,
        plan(description, device, performance=options.loop > 0),
        description_jobs(description, options),
        update,
    )


def _check_device(description: Description, device: str) -> None:
    """A device no trace lists is a mistake (a misspelt name would pass, every trace
    skipped), named with the devices the file has."""
    devices = sorted({d for entry in description.traces for d in entry.expectations})
    if device in devices:
        return
    close = difflib.get_close_matches(device, devices, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UsageError(
        f"{description.file}: no trace lists the device {device!r}; {hint}"
        f"the file's devices: {', '.join(devices) or 'none'}"
    )


def _extra_args(text: str) -> dict[str, Any]:
    """The replayer options of PIGLIT_REPLAY_EXTRA_ARGS that mean something here; a warning
    names the others (MinIO credentials and the like), which are ignored."""
    words = shlex.split(text)
    out: dict[str, Any] = {}
    ignored = []
    i = 0
    while i < len(words):
        name, _, inline = words[i].partition("=")
        known = next((entry for entry in _EXTRA if name in entry[0]), None)
        if known is None:
            ignored.append(words[i])
        elif known[2]:
            if not inline and i + 1 < len(words):
                i += 1
                inline = words[i]
            out[known[1]] = inline
        else:
            out[known[1]] = True
        i += 1
    if ignored:
        print(f"retrace: warning: {EXTRA_ARGS}: ignored: {' '.join(ignored)}", file=sys.stderr)
    return out
