"""Self-describing results: the facts written beside a profile's tables.

A TSV says nothing of what it measured: no units, no driver, no trace. Two
results could be compared without anyone noticing that they came from different
traces or GPUs. So every profile written to a file (`-o OUT.tsv`) also writes
``OUT.tsv.json`` (or the `--metadata` file): the retrace version; the trace's
identity (path, size, SHA-256, calls, frames); the GL context and EGL display it
ran on; the host; the selection as given and as resolved, and the pass plan;
per column its backend, metric, boundary, kind, unit and numeric type; repeats
and warm-up; start time and duration; and how faithful the replay was. The
TSV itself stays byte for byte glretrace's.

The facts come from two processes: the replay child knows the GL context, the
pass plan and the replay's departures (`run_facts`, kept in the store's
manifest); the parent that writes the tables knows the rest (`describe`).
`retrace diff`, `summary` and `report` read the file back (`read_metadata`).
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from retrace import __version__
from retrace.errors import RetraceError
from retrace.vocabulary import TABLE_NAMES, Boundary, Metric
from retrace.writer.atomic import replaced

if TYPE_CHECKING:
    from pathlib import Path

    from retrace.profile.events import PassPlan
    from retrace.profile.results import Profile
    from retrace.replay.fidelity import Fidelity
    from retrace.replay.replayer import Replayer
    from retrace.writer.tsv import Table

FORMAT = "retrace-profile-metadata"
FORMAT_VERSION = 1
TABLE_KEYS = TABLE_NAMES  # the tables' names in the metadata, as in the API
GL_VENDOR = 0x1F00


class TraceFile(NamedTuple):
    """Which trace this is, whatever its path: two results of one trace share `sha256`."""

    path: str  # absolute
    size: int  # bytes
    sha256: str


class TraceIdentity(NamedTuple):
    """A trace's identity as a profile's metadata gives it: a `TraceFile`'s, with its calls
    and frames."""

    path: str
    size: int
    sha256: str
    calls: int
    frames: int  # frame-ending calls


def trace_file(path: str | Path) -> TraceFile:
    """The trace at `path`, named by its content (`cache.content_digest`: hashed once per
    version of the file); raises OSError if it cannot be read. The one place a trace's
    identity is computed (`retrace batch` too)."""
    from retrace.trace.cache import content_digest

    path = os.path.abspath(path)
    return TraceFile(path, os.stat(path).st_size, content_digest(path))


def trace_identity(path: str, counts: dict[str, int] | None = None) -> TraceIdentity:
    """Path, size, SHA-256, calls and frames of the trace at `path`; `counts`: its calls
    and frames as the replay counted them while reading it (`reader.TraceCounts`, kept in
    the store), else the trace is read again for them (a replay that never read it to the
    end: a crash, an interruption).

    Raises `RetraceError` if it cannot be read. Calls and frames of a damaged
    trace are those before the damage (the replay reports the damage itself).
    """
    try:
        file = trace_file(path)
    except OSError as e:
        raise RetraceError(f"{os.path.abspath(path)}: cannot read: {e.strerror}") from None
    if counts is None:
        from retrace.trace.reader import read_counts

        counts = read_counts(file.path)[0]._asdict()
    return TraceIdentity(*file, calls=counts["calls"], frames=counts["frames"])


def context_facts(replayer: Replayer) -> dict[str, Any]:
    """The GL context current now and the EGL display under it (called at the first one)."""
    current = replayer.state.current
    real = current.real if current is not None else None
    gl: dict[str, Any] = {}
    if current is not None and real is not None:
        try:
            get_string = replayer.dispatch.raw("glGetString", ctypes.c_char_p, ctypes.c_uint)
            vendor = (get_string(GL_VENDOR) or b"").decode(errors="replace")
        except LookupError:
            vendor = ""
        gl = {
            "api": real.api,
            "vendor": vendor,
            "renderer": real.renderer,
            "version": real.version,
            "profile": real.profile,
            "requested": current.request.describe(),
        }
    display = replayer.display
    egl = {
        "platform": display.platform,
        "device": display.device,
        "vendor": display.vendor,
        "version": display.version,
    }
    return {"gl": gl, "egl": egl}


def context_name(number: int, real: Any) -> str:
    """How the tables' metadata and the timeline name a replay context: `context 2 (GL 4.5
    core)`, from its number (in the order contexts were first current) and the real
    context's API, version and profile."""
    api = {"gl": "GL", "gles": "GLES"}.get(real.api, str(real.api))
    # (its version string's first N.M, as EGL parsed it: no regular expression to compile)
    version = f"{real.major}.{real.minor}" if (real.major, real.minor) != (0, 0) else ""
    profile = "" if api == "GLES" else real.profile or ""
    described = " ".join(p for p in (api, version, profile) if p)
    return f"context {number} ({described})"


def run_facts(context: dict[str, Any], plans: list[PassPlan], fidelity: Fidelity) -> dict[str, Any]:
    """What only the replay child knows, for the store's manifest: the context, the pass
    plan and how faithful the replay was."""
    passes = []
    for number, plan in enumerate(plans, 1):
        passes.append(
            {
                "backend": plan.backend.name,
                "index": plan.index,
                "boundaries": sorted(TABLE_KEYS[b] for b in plan.boundaries),
                "what": plan.describe(number),
            }
        )
    return {**context, "passes": passes, "fidelity": fidelity.as_dict()}


def host_facts() -> dict[str, str]:
    """CPU model, kernel and host name (from os.uname: platform costs a profile's child 2-6
    ms to import, and is imported only where /proc/cpuinfo names no CPU model)."""
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                if line.startswith("model name"):
                    cpu = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    if cpu is None:
        import platform

        cpu = platform.processor()
    host = os.uname()
    return {
        "cpu": cpu,
        "cpus": str(os.cpu_count() or 0),
        "kernel": f"{host.sysname} {host.release}",
        "host": host.nodename,  # (gethostname(); socket costs 3 ms to import)
    }


def column_facts(metric: Metric, boundary: Boundary, derived_from: str = "") -> dict[str, Any]:
    """One column: its backend, metric, boundary, kind, unit, numeric type and description
    (which says what a missing value, `-`, means where the metric can have one)."""
    facts = {
        "name": metric.name,
        "backend": metric.backend,
        "group": metric.group,
        "id": metric.id,
        "boundary": boundary.name.lower(),
        "kind": metric.kind.value,
        "unit": metric.unit,
        "num_type": metric.num_type.value,
        "description": metric.description,
    }
    if derived_from:
        facts["derived_from"] = derived_from  # a --stats spread of this column's repeats
    return facts


def describe(
    trace: TraceIdentity,
    selections: dict[str, str],
    profile: Profile,
    tables: list[Table],
    run: dict[str, Any] | None,
    options: dict[str, Any],
    outputs: dict[str, Any],
    started: float,
    finished: float,
    complete: bool,
) -> dict[str, Any]:
    """The metadata document of one profile.

    `selections`: Boundary name -> selection as given; `tables`: the profile's, as
    written; `run`: `run_facts` (None if the
    child never got that far); `options`: repeat, warm-up, stats, strict, frame range,
    call set and loops;
    `outputs`: where the tables and other outputs went; `complete`: whether every
    pass was measured (False after a crash or interruption).
    """
    import datetime

    from retrace.writer.tsv import context_runs

    columns_of: dict[str, list[dict[str, Any]]] = {}
    resolved: dict[str, list[str]] = {}
    for boundary, metrics in profile.metrics.items():
        key = TABLE_KEYS[boundary]
        columns = columns_of.setdefault(key, [])
        for metric in metrics:
            columns.append(column_facts(metric, boundary))
            for derived, _column in profile.stats.get((metric, boundary), ()):
                columns.append(column_facts(derived, boundary, derived_from=metric.name))
        resolved[key] = [f"{m.backend}: {m.name}" for m in metrics]
    run = run or {}
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "retrace": __version__,
        "trace": trace._asdict(),
        "gl": run.get("gl", {}),
        "egl": run.get("egl", {}),
        "host": host_facts(),
        "selection": {
            "given": {TABLE_KEYS[Boundary[b]]: spec for b, spec in selections.items()},
            "resolved": resolved,
        },
        "passes": run.get("passes", []),
        "tables": columns_of,
        "frames": profile.frames,
        "measured_frames": list(profile.window),  # after --frames and --calls
        # the replay contexts, and which one each row of the call tables ran in (the TSV
        # has no column for it): [first row, context number] at every change
        "contexts": {
            "names": list(profile.contexts),
            "rows": {
                TABLE_KEYS[t.boundary]: context_runs(t) for t in tables if t.contexts is not None
            },
        },
        **options,
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
        "duration_s": round(finished - started, 3),
        "complete": complete,
        "fidelity": run.get("fidelity"),
        "outputs": outputs,
    }


def write_metadata(path: str, document: dict[str, Any]) -> None:
    """Write `document` to `path` atomically (a reader never sees half a file)."""
    with replaced(path) as stream:
        json.dump(document, stream, indent=2)
        stream.write("\n")


def read_metadata(tables: str | Path) -> dict[str, Any]:
    """The metadata beside a tables file (``TABLES.json``); {} when there is none.

    Raises `RetraceError` for a file that is there but not a JSON object.
    """
    from pathlib import Path  # (here: a profile's start-up need not import it, 5 ms)

    beside = Path(f"{tables}.json")
    try:
        document = json.loads(beside.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RetraceError(f"{beside}: not readable JSON metadata ({exc})") from None
    if not isinstance(document, dict):
        raise RetraceError(f"{beside}: not readable JSON metadata (not an object)")
    return document


def units(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(table key, column name) -> unit, from a metadata document ({} without one)."""
    found = {}
    for table, columns in (document.get("tables") or {}).items():
        for column in columns if isinstance(columns, list) else ():
            if isinstance(column, dict) and column.get("unit"):
                found[table, str(column.get("name"))] = str(column["unit"])
    return found
