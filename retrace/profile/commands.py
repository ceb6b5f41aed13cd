"""The profiling commands behind `retrace --pframes/--pcalls/--pdrawcalls`, `--list-metrics`
and `--gen-passes`: each opens a `Profiler`, does its one job and reports."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import IO, TYPE_CHECKING, Any

import retrace.replay.contain as contain
from retrace.errors import Interrupted, RetraceError
from retrace.profile import outputs
from retrace.profile.checkpoint import Job, Live
from retrace.profile.checks import check_part_ahead, needs_counts
from retrace.profile.options import LegacyOptions, ProfileOptions, ProfileRun
from retrace.profile.results import Profile, meta_key  # (the child inherits it: one import)
from retrace.vocabulary import Boundary
from retrace.writer.store import Store

if TYPE_CHECKING:
    from retrace.profile.driver import Profiler


def _profiler(trace: str, options: ProfileOptions, **kwargs: Any) -> Profiler:
    """A `Profiler`, made in the child that measures: the parent imports none of the
    replay, and the display opens (`_open_ahead`) while the profiler's modules import."""
    _open_ahead()
    from retrace.profile.driver import Profiler

    return Profiler(trace, options, **kwargs)


def _open_ahead() -> None:
    """In the child, first thing: start opening the display (`driver_process.open_ahead`,
    once), whose driver's loading is what the replay waits for."""
    from retrace.replay.ws.driver_process import open_ahead
    from retrace.trace.container import load_libraries

    load_libraries()
    open_ahead()


def check_part_meanwhile(trace: str, options: ProfileOptions) -> None:
    """Check `--frames`/`--calls` against the trace before the replay child forks: counted
    on a thread (`check_part_ahead`) while the modules the child runs first import here
    (the launcher would import them at the fork anyway), the count filling the trace cache
    that the replay then reads. Prints the warnings; raises UsageError. Without a part to
    check, the child imports them itself (`_profiler`), while its display opens."""
    if not needs_counts(options):
        return
    checked = check_part_ahead(trace, options)
    import retrace.profile.driver  # noqa: F401

    for line in checked():
        print(line, file=sys.stderr)


def list_metrics(trace: str, as_json: bool) -> None:
    """Every backend, supported or not (and why), with its metrics on the trace's first context."""
    import shutil  # (not at the top: a profile's start-up need not import it)

    # the terminal's width, known before the driver loads (a library may set $COLUMNS)
    width = shutil.get_terminal_size().columns if _on_a_terminal() else None
    contain.contained(trace, partial(_list_metrics, trace, as_json, width))  # (it pickles)


def _on_a_terminal() -> bool:
    """Standard output is a terminal, or $COLUMNS says how wide one is."""
    return sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))


def _list_metrics(trace: str, as_json: bool, width: int | None) -> None:
    with ExitStack() as stack:
        profiler = _profiler(trace, ProfileOptions())
        stack.callback(profiler.close, driver=False)  # (this child ends)
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
                for metric in sorted(backend.metrics(), key=lambda m: (m.group, m.id)):
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
    headers = ["backend", "id", "metric", "unit", "kind", "available", "description"]
    if width is None:  # no terminal: whole lines, for grep
        print(tabulate(table, headers))
        return
    # on a terminal, a table per backend (its name above it) fitted to the width
    backends = dict.fromkeys(row[0] for row in table)
    for i, backend in enumerate(backends):
        own = [row[1:] for row in table if row[0] == backend]
        print(f"{'' if i == 0 else chr(10)}{backend}:")
        print(tabulate(own, headers[1:], maxcolwidths=_fitted(own, headers[1:], width)))


# The columns --list-metrics wraps to fit a terminal (by header), and their narrowest width.
_WRAPPED = {"metric": 10, "available": 10, "description": 16}


def _fitted(table: list[list[str]], headers: list[str], width: int) -> list[int | None]:
    """Widths that fit the table to `width` columns, wrapping the widest of `_WRAPPED`
    first."""
    room = width - 2 * (len(headers) - 1)
    # (tabulate makes a column at least 2 wider than its header)
    widths = [max(len(h) + 2, *(len(str(r[i])) for r in table)) for i, h in enumerate(headers)]
    wrapped = [i for i, h in enumerate(headers) if h in _WRAPPED]
    while sum(widths) > room:
        widest = max(wrapped, key=lambda i: widths[i] - _WRAPPED[headers[i]])
        if widths[widest] <= _WRAPPED[headers[widest]]:
            break  # as narrow as they go
        widths[widest] -= 1
    return [w if i in wrapped else None for i, w in enumerate(widths)]


def gen_passes(trace: str, options: ProfileOptions, verbose: bool) -> None:
    contain.contained(trace, partial(_gen_passes, trace, options, verbose))


def _gen_passes(trace: str, options: ProfileOptions, verbose: bool) -> None:
    profiler = _profiler(trace, options)
    try:
        count = profiler.count_passes()
        print(count)
        if verbose:
            for number, plan in enumerate(profiler.plan, 1):
                print(plan.describe(number), file=sys.stderr)
    finally:
        profiler.close(driver=False)  # (this child ends)


def run_legacy_profile(trace: str, legacy: LegacyOptions, run: ProfileRun, strict: bool) -> None:
    """glretrace's legacy --pcpu/--pgpu/--ppd/--pmem lines (see `legacy.run_legacy`), measured
    in a child into a store made here, so that a driver crash does not leave it behind."""
    import shutil

    made = Store(os.path.abspath(run.store_dir) if run.store_dir else None, keep=True)
    made.close()
    output = run.output
    body = partial(_legacy_profile, trace, legacy, made.path, run, strict)  # (it pickles)
    ending = contain.supervise(body, writes=[made.path, *([output] if output else [])])
    if ending.signal and not run.keep_store:  # else the child removed or kept it, and said so
        shutil.rmtree(made.path, ignore_errors=True)
    with contextlib.suppress(OSError):  # emptied by a --sandbox child, which cannot remove it
        os.rmdir(made.path)
    contain.check(ending, trace)


def _legacy_profile(
    trace: str, legacy: LegacyOptions, path: str, run: ProfileRun, strict: bool
) -> None:
    """In the child: the legacy lines, measured into the store at `path`."""
    from retrace.profile.legacy import run_legacy

    with ExitStack() as stack:  # closes (removes unless kept) the store even on errors
        store = stack.enter_context(Store.load(path, keep=run.keep_store))
        out = stack.enter_context(open(run.output, "w")) if run.output else sys.stdout  # noqa: SIM115
        run_legacy(trace, legacy, out=out, progress=run.progress, strict=strict, store=store)


def run_profile(
    trace: str,
    options: ProfileOptions,
    run: ProfileRun,
    chosen_outputs: outputs.Outputs | None = None,
) -> None:
    """Profile in a child process, then write the tables here (see `_measure_and_write`).

    The store is made here and kept until the tables are written, with the job in its
    manifest, so that even a SIGKILL of everything leaves a run `resume_profile` finishes.
    """
    job = Job.start(trace, options, run.output)
    check_part_meanwhile(job.trace, options)
    store = Store(os.path.abspath(run.store_dir) if run.store_dir else None, keep=True)
    store.meta["job"] = job.to_json()
    chosen = chosen_outputs or outputs.Outputs.chosen("tsv", None, None)
    outputs.save(store, chosen)
    store.close()  # writes the manifest: resumable from here on
    _measure_and_write(job, chosen, store.path, run.keep_store, run.progress)


def resume_profile(path: str, run: ProfileRun) -> None:
    """Finish the profile kept in the store at `path`: measure the runs its checkpoint
    lacks, then write the tables (to `run.output`, else where the run was to write them)."""
    store = Store.load(path)
    job = Job.from_json(store.meta.get("job"), path)
    chosen = outputs.of(store)
    store.close(flush=False)
    job.check_trace(path)
    if run.output:
        job = job._replace(output=os.path.abspath(run.output))
    _measure_and_write(job, chosen, path, run.keep_store, run.progress, resumed=True)


def _measure_and_write(
    job: Job,
    chosen: outputs.Outputs,
    path: str,
    keep_store: bool,
    progress: IO[str] | None,
    resumed: bool = False,
) -> None:
    """Measure (`measure`), write the tables, then the `Rendered` line and the replay's
    warnings; raise the replay's error if it had one."""
    write = partial(_write_tables, job=job)
    finish = measure(job, path, keep_store, progress, write, resumed=resumed)
    if job.output is None or progress is not None:  # --quiet -o: nothing on stdout
        print(finish["summary"], file=outputs.summary_stream(chosen, job))
    for line in finish["warnings"]:
        print(line, file=sys.stderr)
    if finish["error"]:
        message, code = finish["error"]
        error = RetraceError(message)
        error.exit_code = code
        raise error


def measure(
    job: Job,
    path: str,
    keep_store: bool,
    progress: IO[str] | None,
    deliver: Callable[[Profile, Store], None],
    errors_to: str | None = None,
    resumed: bool = False,
) -> dict[str, Any]:
    """Measure in a child (`_measure`) into the store at `path`, then hand what was
    measured to `deliver` (which writes the tables, or reads them into arrays); returns
    the child's `finish` record (the `Rendered` line, the replay's warnings and error).

    Interrupted (SIGINT, SIGTERM): the complete passes are delivered, then the error says
    what is missing and how to resume. Driver crash: what was measured up to the crash is
    delivered, and the error names the call that crashed. An error the child reported:
    its exit status (SystemExit; the message is on stderr, or in the file `errors_to`).
    The reader of the tables gone (`| head`): an interruption too, after which the store
    goes unless it is kept or `resumed` (a store the user named stays until its tables
    are written).
    """
    live = Live()
    with _exclusive(path):
        body = partial(_measure, job, path, live, progress)
        ending = contain.supervise(body, errors_to, graceful=True, writes=[path])
    if progress is not None and progress.isatty():  # a live line the child left, if any
        from retrace.profile.progress import CLEAR_LINE

        progress.write(CLEAR_LINE)
    store = Store.load(path, keep=True)
    try:
        if (ending.interrupted and "finish" not in store.meta) or ending.signal:
            _deliver_what_is_kept(ending, job, store, live, keep_store, deliver)
        state = store.meta.get("progress")
        if ending.code:  # the child said what went wrong, and where earlier passes are kept
            store.keep = keep_store or resumed or (state is not None and state["pass"] > 0)
            raise SystemExit(ending.code)
        assert state is not None  # a child that ended well checkpointed at least once
        try:
            deliver(Profile.from_json(state["profile"], store), store)
        except BrokenPipeError:
            store.keep = keep_store or resumed
            raise
        store.keep = keep_store
        return dict(store.meta["finish"])
    finally:
        store.close(flush=False)  # the manifest stays the child's last checkpoint


@contextmanager
def _exclusive(path: str) -> Iterator[None]:
    """Hold the store's lock while measuring: two runs writing one store (a --resume
    while the run is still going) would mix their passes. The kernel drops the lock
    when its holder dies, so a killed run leaves none. A POSIX record lock (lockf), which
    this process holds alone: flock's, shared with the descriptor the replay child
    inherits, stayed held by the child, which outlives the command by a few ms (it
    lingers: `contain.let_children_linger`), and a --resume started at once failed."""
    try:
        fd = os.open(os.path.join(path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise RetraceError(f"{path}: cannot lock the store: {e.strerror}") from None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                raise RetraceError(f"{path}: cannot lock the store: {e.strerror}") from None
            raise RetraceError(f"{path} is in use by another retrace still running") from None
        yield
    finally:
        os.close(fd)


def _deliver_what_is_kept(
    ending: contain.Ending,
    job: Job,
    store: Store,
    live: Live,
    keep_store: bool,
    deliver: Callable[[Profile, Store], None],
) -> None:
    """After a signal: the tables of what was measured, then the error that says what
    happened (and, where measuring again can help, how to resume)."""
    from retrace.profile.repeats import combine_runs_done

    state = store.meta.get("progress")
    complete = state is not None and state["expected"] is not None
    # a crash, or an interruption in the first pass: what it measured up to its last
    # frame end (the first pass's rows exist only so far)
    partial = state is not None and (ending.crashed or not complete) and live.pass_index >= 0
    if state is not None and partial:
        _recover(store, state, live)
    runs_done, held = 0, ""
    if state is not None and (complete or partial):
        profile = Profile.from_json(state["profile"], store)
        if complete:  # the runs of the pass interrupted, as a table of their own
            options = job.options
            runs_done = combine_runs_done(
                profile, store, state, options.repeat, options.warmup_runs, options.stats
            )
        elif profile.loops:  # the tables hold the loops measured, not '-' for the rest
            asked = f"of {profile.loops}" if profile.loops > 0 else "looping until interrupted"
            profile.loops = profile.loops_measured(store)
            held = f"the tables hold the {profile.loops} loops measured ({asked})"
        deliver(profile, store)
    resume = f"resume with: retrace profile --resume {store.path}"
    if ending.interrupted:
        runs = job.options.warmup_runs + job.options.repeat
        missing = held or _missing(state, runs, live.frames, runs_done)
        name = contain.signal_name(ending.interrupted)
        raise Interrupted(ending.interrupted, f"interrupted by {name}: {missing}; {resume}")
    message = contain.crash_message(ending, job.trace)
    if ending.killed:  # by something else than the driver: measuring again can work
        raise RetraceError(f"{message}; {resume}")
    store.keep = keep_store  # replaying again would crash again
    raise RetraceError(message)


def _measure(job: Job, path: str, live: Live, progress: IO[str] | None) -> None:
    """The child's part: the passes (those a checkpoint lacks), checkpointed as they end."""
    _open_ahead()  # (before the store's manifest is read)
    store = Store.load(path, keep=True)
    if "finish" in store.meta:  # measured to the end before: only the tables were missing
        store.close(flush=False)
        return
    profiler = _profiler(job.trace, job.options, progress=progress, store=store, live=live)
    try:
        state = store.meta.get("progress")
        if state is not None:
            profiler.resume(state)
        profiler.run()  # (whose last checkpoint records the `finish`)
    finally:
        profiler.close(driver=False)  # (this child ends)


def _recover(store: Store, state: dict[str, Any], live: Live) -> None:
    """After a crash: count what the child measured after its last checkpoint, up to its
    last frame end (and, if the first pass never completed, its frames and names)."""
    for index, key in enumerate(store):
        store[key].recover(live.length(index))
    live.ring.recover(store)  # the events the loop read, not moved into the store yet
    if state["expected"] is None and live.pass_index >= 0:
        profile = state["profile"]
        profile["frames"] = profile["frame_events"] = live.frames
        names = live.names or profile["names"]
        keys = [meta_key(b, "name") for b in (Boundary.CALL, Boundary.DRAWCALL)]
        ids = [store[k].view() for k in keys if k in store]
        known = max((int(v.max()) + 1 for v in ids if len(v)), default=0)
        profile["names"] = names + ["?"] * (known - len(names))  # if a table did not fit


def _missing(state: dict[str, Any] | None, runs: int, frames: int, runs_done: int = 0) -> str:
    """What an interrupted run lacks, in words; `frames`: those the run had ended;
    `runs_done`: the measured runs of the pass interrupted that its columns combine."""
    if state is None or state["expected"] is None:
        if frames <= 0:
            return "the first pass had not completed: nothing is measured yet"
        return f"the first pass had not completed: the tables hold its first {frames} frames"
    passes, done, run = state["passes"], state["pass"], state["run"]
    complete = {0: "no pass", 1: "pass 1"}.get(done, f"passes 1-{done}")
    have = f"{complete} of {passes} complete"
    if run:
        have += f", pass {done + 1} has {run} of its {runs} replays"
    if runs_done:
        have += f" (its columns hold the median of the {runs_done} measured)"
    return f"{have}; the cells of the rest read '-'"


def _write_tables(profile: Profile, store: Store, job: Job) -> None:
    try:
        outputs.write(profile, store, job)
    except BrokenPipeError:
        raise  # the reader went away: not an error (see retrace.main.main)
    except OSError as e:  # a full disk, an unwritable path: keep what was measured
        store.keep = True
        tables = f"the tables to {job.output or 'standard output'}"
        what = e.filename if e.filename and e.filename != job.output else tables  # the metadata?
        raise RetraceError(
            f"cannot write {what}: {e.strerror or e}; the measurements are kept: write the "
            f"tables with retrace profile --resume {store.path} -o FILE"
        ) from None
