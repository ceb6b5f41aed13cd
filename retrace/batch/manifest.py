"""The batch manifest: a TOML file naming traces and how to profile them.

    [defaults]                      # for every trace; each [[trace]] may override
    pframes = "opengl: GPU Duration, CPU Duration"
    runs = 4                        # separate profile processes per trace (diff tests 4+)
    timeout = 300                   # seconds per run
    retries = 1                     # more attempts of a failed or timed-out run
    env = { MESA_SHADER_CACHE_DISABLE = "true" }
    resources = { GPU = 1 }         # what a Ray task needs (GPU, or a custom resource)

    [[trace]]
    path = "glmark2-*.trace"        # a path or a glob, relative to the manifest
    pdrawcalls = "opengl: Pixels Drawn"

    [[trace]]
    path = "es2gears.trace"
    frames = "1-4"                  # rows kept (the whole trace still replays)
    expect = { md5 = ["C8242C5F...", ...], allowed_regression = 0.10 }
    sandbox = true                  # replay confined (--sandbox); or "best-effort"

Everything is checked before anything runs, and a mistake is one line naming
the file, the entry and the key (with the closest key for a misspelt one).
The selections' grammar is checked here too; whether the driver has the
metrics only a replay can tell, so an unknown metric fails its jobs.
"""

from __future__ import annotations

import difflib
import glob
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from retrace.batch.job import Expect, Job
from retrace.errors import UsageError
from retrace.profile.checks import check_profile
from retrace.profile.metadata import TraceFile, trace_file
from retrace.profile.options import ProfileOptions
from retrace.profile.selection import parse_selection
from retrace.vocabulary import Boundary

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SELECTIONS = {"pframes": Boundary.FRAME, "pcalls": Boundary.CALL, "pdrawcalls": Boundary.DRAWCALL}
# The defaults of the keys a [defaults] table or a [[trace]] entry may set.
DEFAULTS: dict[str, Any] = {
    "pframes": None,
    "pcalls": None,
    "pdrawcalls": None,
    "repeat": 1,
    "warmup": 0,
    "runs": 1,
    "frames": None,
    "calls": None,
    "timeout": 600.0,
    "retries": 1,
    "env": {},
    "resources": {"GPU": 1},
    "expect": {},
    "sandbox": False,
}
_TRACE_ONLY = ("path", "name")
_EXPECT_KEYS = ("md5", "allowed_regression")


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: its file and its jobs, trace by trace and run by run."""

    path: Path
    jobs: list[Job]


def load_manifest(path: str | Path, env: dict[str, str] | None = None) -> Manifest:
    """Read and check the manifest at `path`; `env` adds to (and overrides) every trace's
    environment, for the side of a comparison given on the command line."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    where = str(path)
    _known(document, ("defaults", "trace"), where)
    defaults = _table(document.get("defaults", {}), f"{where}: [defaults]")
    _known(defaults, tuple(DEFAULTS), f"{where}: [defaults]")
    entries = document.get("trace")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{where}: no [[trace]] entries")
    jobs: list[Job] = []
    identities: dict[Path, TraceFile] = {}
    for i, entry in enumerate(entries, 1):
        at = f"{where}: [[trace]] #{i}"
        entry = _table(entry, at)
        _known(entry, (*_TRACE_ONLY, *DEFAULTS), at)
        settings = {**DEFAULTS, **defaults, **entry}

        def origin(key: str, entry: dict[str, Any] = entry, at: str = at) -> str:
            """Where a setting was written: this entry, or [defaults] for all of them."""
            return f"{where}: [defaults]" if key in defaults and key not in entry else at

        for trace in _traces(path.parent, settings.get("path"), at):
            name = settings.get("name") or _relative(trace, path.parent)
            if not isinstance(name, str):
                raise UsageError(f"{at}: name must be a string")
            if "name" in entry and glob.has_magic(str(entry.get("path"))):
                raise UsageError(f"{at}: a name cannot name every trace of a glob")
            if any(job.name == name for job in jobs):
                raise UsageError(f"{at}: a second trace named {name!r} (give it a name)")
            if trace not in identities:
                try:
                    identities[trace] = trace_file(trace)
                except OSError as exc:
                    raise UsageError(f"{at}: {trace}: {exc.strerror or exc}") from None
            jobs += _jobs(name, identities[trace], settings, env or {}, origin)
    return Manifest(path, jobs)


def _jobs(
    name: str,
    identity: TraceFile,
    s: dict[str, Any],
    env: dict[str, str],
    origin: Callable[[str], str],
) -> list[Job]:
    """The runs of one trace, its settings checked (`origin`: where a key was written)."""
    selection: list[str] = []
    selections: dict[Boundary, str] = {}
    for option, boundary in SELECTIONS.items():
        spec = _check(s, option, str, origin, lambda v: True, "a string")
        if spec is not None:
            _checked(origin(option), partial(parse_selection, spec, option))
            selection += [f"--{option}", spec]
            selections[boundary] = spec
    if not selection:
        raise UsageError(
            f"{origin('pframes')}: nothing to profile: give pframes, pcalls or pdrawcalls"
        )
    whole = "a whole number"
    repeat = _check(s, "repeat", int, origin, lambda v: v >= 1, f"{whole} of at least 1")
    warmup = _check(s, "warmup", int, origin, lambda v: v >= 0, f"{whole} of at least 0")
    runs = _check(s, "runs", int, origin, lambda v: v >= 1, f"{whole} of at least 1")
    retries = _check(s, "retries", int, origin, lambda v: v >= 0, f"{whole} of at least 0")
    timeout = float(_check(s, "timeout", (int, float), origin, lambda v: v > 0, "seconds above 0"))
    calls = _check(s, "calls", str, origin, lambda v: True, "a call set")
    frames = _frames(s["frames"], origin("frames"))
    # the command line's checks, against the trace, before any job runs: field by field
    checks = {option: ProfileOptions({boundary: spec}) for boundary, spec in selections.items()
              for option in SELECTIONS if SELECTIONS[option] is boundary}  # fmt: skip
    if frames is not None:
        checks["frames"] = ProfileOptions(frames=frames)
    if calls is not None:
        checks["calls"] = ProfileOptions(call_range=calls)
    for key, options in checks.items():
        for line in _checked(origin(key), partial(check_profile, str(identity.path), options)):
            said = line.removeprefix("retrace: warning: --")
            print(f"retrace: warning: {origin(key)}: {said}", file=sys.stderr)
    return [
        Job(
            name,
            run,
            identity,
            tuple(selection),
            repeat,
            warmup,
            frames,
            calls,
            timeout,
            retries,
            tuple(sorted({**_strings(s["env"], f"{origin('env')}: env"), **env}.items())),
            _resources(s["resources"], origin("resources")),
            _expect(s["expect"], origin("expect")),
            _sandbox(s["sandbox"], origin("sandbox")),
        )
        for run in range(runs)
    ]


def _traces(folder: Path, spec: Any, at: str) -> list[Path]:
    if not isinstance(spec, str) or not spec:
        raise UsageError(f'{at}: give the trace\'s path (path = "...")')
    pattern = spec if Path(spec).is_absolute() else str(folder / spec)
    if glob.has_magic(spec):
        found = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
        if not found:
            raise UsageError(f"{at}: no trace matches {spec!r}")
        return found
    if not Path(pattern).is_file():
        raise UsageError(f"{at}: {spec}: no such file")
    return [Path(pattern)]


def _relative(trace: Path, folder: Path) -> str:
    try:
        return str(trace.relative_to(folder))
    except ValueError:
        return str(trace)


def _frames(spec: Any, at: str) -> tuple[int, int] | None:
    """The first and last frame kept, from "A-B" (or "A")."""
    if spec is None:
        return None
    first, _, last = str(spec).partition("-")
    try:
        span = (int(first), int(last or first))
    except ValueError:
        span = (-1, -1)
    if not isinstance(spec, (str, int)) or span[0] < 0 or span[1] < span[0]:
        raise UsageError(
            f'{at}: frames must be "FIRST-LAST" (0-based, FIRST <= LAST), not {spec!r}'
        )
    return span


def _resources(value: Any, at: str) -> tuple[tuple[str, float], ...]:
    table = _table(value, f"{at}: resources")
    for key, amount in table.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount <= 0:
            raise UsageError(f"{at}: resources: {key} must be a number above 0")
    return tuple(sorted((k, float(v)) for k, v in table.items()))


def _expect(value: Any, at: str) -> Expect:
    table = _table(value, f"{at}: expect")
    _known(table, _EXPECT_KEYS, f"{at}: expect")
    md5 = table.get("md5", [])
    if not isinstance(md5, list) or not all(
        isinstance(m, str) and len(m) == 32 and all(c in "0123456789abcdefABCDEF" for c in m)
        for m in md5
    ):
        raise UsageError(f"{at}: expect.md5 must be a list of 32-digit hex MD5s, one per frame")
    allowed = _check(
        table, "allowed_regression", (int, float), f"{at}: expect", lambda v: v >= 0, "at least 0"
    )
    return Expect(tuple(md5), None if allowed is None else float(allowed))


def _sandbox(value: Any, at: str) -> str | None:
    """`sandbox = true` (--sandbox), "best-effort" (--sandbox=best-effort) or false."""
    from retrace.replay.sandbox import MODES

    if value is True or value in MODES:
        return MODES[0] if value is True else str(value)
    if value is False:
        return None
    raise UsageError(f'{at}: sandbox must be true, false or "best-effort", not {value!r}')


def _check(
    s: dict[str, Any],
    key: str,
    kind: Any,
    at: str | Callable[[str], str],
    ok: Callable[[Any], bool],
    what: str,
) -> Any:
    """`s[key]` if it is None or of `kind` and `ok`; else a usage error saying `what` it must be
    (`at`: where, or where `key` was written)."""
    value = s.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kind) or not ok(value):
        where = at if isinstance(at, str) else at(key)
        raise UsageError(f"{where}: {key} must be {what}, not {value!r}")
    return value


T = TypeVar("T")


def _checked(at: str, check: Callable[[], T]) -> T:
    """`check()`, its usage error told where in the manifest (a field, as `--field`)."""
    try:
        return check()
    except UsageError as e:
        raise UsageError(f"{at}: {str(e).removeprefix('--')}") from None


def _table(value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{at}: expected a table, not {value!r}")
    return value


def _strings(value: Any, at: str) -> dict[str, str]:
    table = _table(value, at)
    for key, text in table.items():
        if not isinstance(text, str):
            raise UsageError(f"{at}: {key} must be a string, not {text!r}")
    return table


def _known(table: dict[str, Any], keys: tuple[str, ...], at: str) -> None:
    for key in table:
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{at}: unknown key {key!r}{hint}")
