"""The profiling commands behind `retrace --pframes/--pcalls/--pdrawcalls`, `--list-metrics`
and `--gen-passes`: each opens a `Profiler`, does its one job and reports."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from typing import IO

from retrace.backends.base import Boundary
from retrace.errors import RetraceError
from retrace.profile.driver import Profiler
from retrace.writer.tsv import MetricWriter


def selections(
    pframes: str | None, pcalls: str | None, pdrawcalls: str | None
) -> dict[Boundary, str]:
    given = {Boundary.FRAME: pframes, Boundary.CALL: pcalls, Boundary.DRAWCALL: pdrawcalls}
    return {b: spec for b, spec in given.items() if spec}


def list_metrics(trace: str, as_json: bool) -> None:
    """Every backend, supported or not (and why), with its metrics on the trace's first context."""
    with ExitStack() as stack:
        profiler = Profiler(trace, {})
        stack.callback(profiler.close)
        rows: list[dict] = []

        def collect() -> None:
            for backend in profiler.backends_now().values():
                ok, why = backend.support()
                if not backend.metrics():  # counters come from a driver that has none here
                    rows.append(
                        {
                            "backend": backend.name,
                            "supported": ok,
                            "backend_reason": why,
                            "name": None,
                            "available": False,
                            "reason": why,
                        }
                    )
                for metric in backend.metrics():
                    usable, reason = backend.available(metric) if ok else (False, why)
                    rows.append(
                        {
                            "backend": backend.name,
                            "supported": ok,
                            "backend_reason": why,
                            "group": metric.group,
                            "group_name": metric.group_name,
                            "id": metric.id,
                            "name": metric.name,
                            "type": metric.kind.value,
                            "num_type": metric.num_type.value,
                            "unit": metric.unit,
                            "available": usable,
                            "reason": "" if usable else reason,
                            "description": metric.description,
                        }
                    )

        profiler.until_first_context(collect)
    if as_json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from tabulate import tabulate  # only this command needs it: keep it off the profiling path

    table = [
        [
            r["backend"],
            f"[{r['group']}, {r['id']}]" if r["name"] else "",
            r["name"] or "(no metrics)",
            r.get("unit", ""),
            r.get("type", ""),
            "yes" if r["available"] else f"no ({r['reason']})",
            r.get("description", ""),
        ]
        for r in rows
    ]
    print(
        tabulate(
            table, headers=["backend", "id", "metric", "unit", "kind", "available", "description"]
        )
    )


def gen_passes(trace: str, chosen: dict[Boundary, str], verbose: bool) -> None:
    profiler = Profiler(trace, chosen)
    try:
        count = profiler.count_passes()
        print(count)
        if verbose:
            for plan in profiler.plan:
                lines = plan.backend.describe_passes()
                print(lines[plan.index] if plan.index < len(lines) else "", file=sys.stderr)
    finally:
        profiler.close()


def run_legacy_profile(trace: str, output: str | None, **options) -> None:
    """glretrace's legacy --pcpu/--pgpu/--ppd/--pmem lines (see `legacy.run_legacy`)."""
    from retrace.profile.legacy import run_legacy

    with ExitStack() as stack:
        out = stack.enter_context(open(output, "w")) if output else sys.stdout  # noqa: SIM115
        run_legacy(trace, out=out, **options)


def run_profile(
    trace: str,
    chosen: dict[Boundary, str],
    output: str | None,
    store_dir: str | None,
    keep_store: bool,
    progress: IO[str] | None,
    repeat: int = 1,
    warmup: int = 0,
    stats: bool = False,
    strict: bool = False,
) -> None:
    """Profile, then write the tables; a failure keeps and names what earlier passes stored."""
    profiler = Profiler(
        trace,
        chosen,
        store_dir=store_dir,
        keep_store=keep_store,
        progress=progress,
        repeat=repeat,
        warmup=warmup,
        stats=stats,
    )
    try:
        profiler.run()
        try:
            with ExitStack() as stack:
                stream = stack.enter_context(open(output, "w")) if output else sys.stdout
                MetricWriter(stream).write_all(profiler.tables())
        except BrokenPipeError:
            raise  # the reader went away: not an error (see cli.main)
        except OSError as e:  # a full disk, an unwritable path: keep what was measured
            profiler.store.keep = True
            raise RetraceError(
                f"cannot write the tables to {output or 'standard output'}: "
                f"{e.strerror or e}; the measurements are kept in {profiler.store.path}"
            ) from None
        print(profiler.summary())
        profiler.replayer.finish(strict)
    finally:
        profiler.close()
