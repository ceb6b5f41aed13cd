"""piglit's results layout, written from the batch database, for the tools CI already runs.

``OUTPUT/results.json.bz2`` holds one test per trace the file expects on the
device, named as `piglit run replay` names it (``trace@DEVICE@dir@file.trace``)
with piglit's fields: ``result`` (pass, fail, crash, timeout, skip),
``images`` (``image_desc`` the trace, ``image_ref`` and ``image_render`` as
piglit fills them, ``checksum_render`` as newer piglit adds it, which Mesa's
update_traces_checksum.py reads; a performance run's ``frame_times``, and
retrace's own ``frame_busy_times``: the same frames' GPU Busy), the
command, return code, time and output. `piglit summary console|html|
aggregate` read it. Traces of other devices and those a label skips are not
tests there, as in piglit (so Mesa's `summary console | grep -v ": pass"`
finds only what failed); the database and JUnit have them as skipped. A
trace of another replayer (``.rdc``) is a test, skipped: it is not checked.
"""

from __future__ import annotations

import bz2
import json
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrace.batch.ci.description import Planned
from retrace.writer.atomic import replaced

if TYPE_CHECKING:
    import duckdb

RESULTS_FILE = "results.json.bz2"
RESULTS_VERSION = 10  # the layout version of piglit's results this writes
PIGLIT_STATUS = {
    "ok": "pass",
    "mismatch": "fail",
    "failed": "crash",
    "timeout": "timeout",
    "skip": "skip",
}


def test_name(device: str, path: str) -> str:
    return "@".join(["trace", device, *path.split("/")])


def write_results(
    con: duckdb.DuckDBPyConnection,
    build: str,
    output: Path,
    device: str,
    planned: list[Planned],
    started: float,
    performance: bool,
) -> Path:
    """Write `output`/results.json.bz2 for the traces of `planned` on `device`; its path."""
    tests: dict[str, Any] = {}
    for item in planned:
        if not item.test or item.expectation is None:  # another device's, or skipped by a label
            continue
        path = item.entry.path
        row = con.execute(
            "SELECT status, reason, exit_code, epoch(started), wall_s, warnings FROM runs "
            "WHERE build = ? AND trace = ? AND run = 0",
            [build, path],
        ).fetchone()
        if row is None:
            continue
        status, reason, exit_code, begun, wall, warnings = row
        image: dict[str, Any] = {"image_desc": path}
        if performance:
            image["frame_times"] = _frame_times(con, build, path, "GPU Duration")
            image["frame_busy_times"] = _frame_times(con, build, path, "GPU Busy")
        else:
            expected = item.expectation.checksum or ""
            frame = con.execute(
                "SELECT checksum, image FROM last_frame WHERE build = ? AND trace = ?",
                [build, path],
            ).fetchone()
            checksum, kept = frame if frame is not None else (None, None)
            image |= {
                "image_ref": f"{expected}.png",
                "image_render": kept or (f"{checksum}.png" if checksum else None),
                "checksum_render": checksum or ("error" if status != "skip" else None),
            }
        lines = [f"{status}: {reason}" if reason else status, *(warnings or [])]
        begun = float(begun or started)
        tests[test_name(device, path)] = {
            "__type__": "TestResult",
            "command": f"retrace batch --device {device} {path}",
            "environment": "",
            "err": "\n".join(lines) + "\n",
            "out": "",
            "result": PIGLIT_STATUS.get(status, "crash"),
            "returncode": exit_code if exit_code is not None else 0,
            "subtests": {"__type__": "Subtests"},
            "time": {"start": begun, "end": begun + (wall or 0.0), "__type__": "TimeAttribute"},
            "exception": None,
            "traceback": None,
            "dmesg": "",
            "images": [image],
            "pid": [],
        }
    output.mkdir(parents=True, exist_ok=True)
    document = {
        "__type__": "TestrunResult",
        "results_version": RESULTS_VERSION,
        "name": output.absolute().name,
        "info": {"system": {"uname": " ".join(platform.uname())}},
        "options": {"profile": ["replay"], "env": {}},
        "time_elapsed": {"start": started, "end": time.time(), "__type__": "TimeAttribute"},
        "tests": tests,
    }
    out = output / RESULTS_FILE
    with replaced(str(out), "wb") as stream:
        stream.write(bz2.compress(json.dumps(document, indent=1).encode()))
    return out


def _frame_times(con: duckdb.DuckDBPyConnection, build: str, path: str, metric: str) -> list[int]:
    """The measured frames' `metric` in ns, as piglit's profile jobs list GPU Duration."""
    rows = con.execute(
        "SELECT value FROM measurements WHERE build = ? AND trace = ? AND run = 0 "
        "AND tbl = 'frames' AND metric = ? AND value IS NOT NULL ORDER BY row",
        [build, path, metric],
    ).fetchall()
    return [round(v) for (v,) in rows]
