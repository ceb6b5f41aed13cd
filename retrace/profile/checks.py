"""What a profile's options are checked against before anything replays, so that a mistake
costs a second, not a whole replay: the selection against the backends whose metrics need
no driver, and `--frames`/`--calls` against the trace's frame and call counts (`retrace
info`'s: `reader.read_counts`, without numpy, through the trace cache, which the replay
then reads again for little).

The command line and the Python API check the selection (`check_options`), then count
the trace on a thread (`check_part_ahead`) while the replay's modules import, before the
fork (`commands.check_part_meanwhile`). A `retrace batch` manifest is checked whole before
any job runs (`check_profile`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from retrace.errors import UsageError
from retrace.vocabulary import Boundary

if TYPE_CHECKING:
    from retrace.backends.base import MetricBackend
    from retrace.backends.registry import Backends
    from retrace.profile.options import ProfileOptions
    from retrace.trace.reader import TraceCounts


def check_profile(trace: str, options: ProfileOptions, where: str = "") -> list[str]:
    """Raise UsageError (prefixed with `where`) for a selection no backend has or a part of
    the trace that does not exist; return the warnings for a part that reaches past the
    trace's end."""
    try:
        check_options(options)
        return _counted_part(trace, options)
    except UsageError as e:
        if not where:
            raise
        raise UsageError(f"{where}: {e}") from None


def check_options(options: ProfileOptions) -> None:
    """What needs no trace: the selection (`check_selection`) and a `--calls` with no set."""
    check_selection(options.selections)
    if options.call_range is not None and not options.call_range.strip():
        raise UsageError("--calls is empty: give a call set (10-20, */draw, @FILE)")


def check_selection(selections: Mapping[Boundary, str]) -> None:
    """Every backend named exists, and every metric of a backend that lists its metrics
    without a driver (opengl, cpu, pipeline) exists and is measurable at its boundary. The
    counters of GL_AMD_performance_monitor and GL_INTEL_performance_query come from the
    driver: only a replay can check them."""
    from retrace.profile.selection import OPTION, find_backend, find_metric, parse_selection

    backends = _driverless_backends()
    for boundary, spec in selections.items():
        option = OPTION[boundary]
        for name, refs in parse_selection(spec, option):
            backend = find_backend(name, backends, option)
            if backend is not None:
                for ref in refs:
                    find_metric(backend, ref, boundary, option)


def _driverless_backends() -> Backends[MetricBackend | None]:
    """Every backend by name, made without a replay when looked up; None for those that
    need one."""
    from retrace.backends.registry import Backends

    def made(backend: type[MetricBackend]) -> MetricBackend | None:
        instance = backend(None)
        try:
            instance.metrics()
        except RuntimeError:  # its metrics come from the driver ("made without a replay")
            return None
        return instance

    return Backends(made)


def check_part_ahead(trace: str, options: ProfileOptions) -> Callable[[], list[str]]:
    """Start counting the trace for `check_part` on a thread (the read fills the trace
    cache, which the replay then reads instead of the file); the function returned waits
    for it and returns the warnings, or raises UsageError (or the trace's own error)."""
    if not needs_counts(options):
        return list
    import threading

    done: list[list[str] | BaseException] = []

    def count() -> None:
        try:
            done.append(_counted_part(trace, options))
        except BaseException as e:  # raised on the caller's thread
            done.append(e)

    thread = threading.Thread(target=count, name="retrace-count", daemon=True)
    thread.start()

    def checked() -> list[str]:
        thread.join()
        (found,) = done
        if isinstance(found, BaseException):
            raise found
        return found

    return checked


def needs_counts(options: ProfileOptions) -> bool:
    """Whether `check_part` needs the trace's calls and frames counted (--frames, --calls)."""
    return options.frames != (0, None) or options.calls is not None


def _counted_part(trace: str, options: ProfileOptions) -> list[str]:
    if not needs_counts(options):
        return []
    from retrace.trace.reader import read_counts

    counts, damage = read_counts(trace)
    if damage is not None:  # the replay says where it is damaged, and measures what it can
        return []
    return check_part(counts, options)


def check_part(counts: TraceCounts, options: ProfileOptions) -> list[str]:
    """A `--frames` or `--calls` that selects nothing of the trace is a usage error; one that
    reaches past its end, a warning (returned). Frames count as `retrace info` and the
    `Rendered N frames` line count them: N frame-ending calls, frames 0 to N-1, and frame N
    for the calls after the last one."""
    first, last = options.frames
    calls = options.calls
    frame_count, call_count, after = counts.frames, counts.calls, counts.after_last_frame
    frames = f"{frame_count} frames (0-{frame_count - 1})" if frame_count else "no frame end"
    if after:
        frames += f" and {after} calls after the last one (frame {frame_count})"
    final = frame_count if after else frame_count - 1  # the last frame --frames can name
    spec = str(first) if last == first else f"{first}-{'' if last is None else last}"
    lines = []
    if first > final:
        raise UsageError(f"--frames {spec}: the trace has {frames}")
    if last is not None and last > final:
        lines.append(
            f"retrace: warning: --frames {spec} reaches past the trace's end: it has {frames}"
        )
    if calls is not None:
        from retrace.profile.window import last_call

        if calls.first >= call_count:
            raise UsageError(
                f"--calls {options.call_range}: the trace has {call_count} calls "
                f"(0-{call_count - 1})"
            )
        if (last_call(calls) or 0) >= call_count:
            lines.append(
                f"retrace: warning: --calls {options.call_range} reaches past the trace's end: "
                f"it has {call_count} calls (0-{call_count - 1})"
            )
    return lines


def check_writable(*paths: str | None) -> None:
    """Each file to write can be: its folder exists and is writable (checked before the
    replay, not found after it)."""
    for path in paths:
        if path is None or path == "-":
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"{path}: no such folder {folder}")
        if not os.access(folder, os.W_OK):
            raise UsageError(f"{path}: the folder {folder} is not writable")
