"""The `retrace batch` commands: run a manifest, merge shards, export, query.

`retrace batch MANIFEST` is `retrace batch run MANIFEST`: the group routes a
first argument that is no subcommand's name to `run`, as `retrace` itself
routes glretrace's options to `profile`. Nothing heavy is imported until a
command runs.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import click

from retrace.commands.options import count_option, refuse_misspelt_command, warm_option
from retrace.errors import Interrupted, UsageError
from retrace.replay.handlers import handling

_CONTEXT = {"help_option_names": ["-h", "--help"]}


class _BatchGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands:
            refuse_misspelt_command(args[0], self.list_commands(ctx))
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("batch", cls=_BatchGroup, context_settings=_CONTEXT)
def batch() -> None:
    """Profile a corpus of traces from a TOML manifest, here or on a Ray cluster.

        retrace batch traces/batch.toml --db results.duckdb

    Results go to a DuckDB database (`pip install 'retrace-gl[farm]'`); compare
    two builds with `retrace diff A.duckdb B.duckdb` (or DB:BUILD1 DB:BUILD2).
    """


@batch.command("run", context_settings=_CONTEXT)
@click.argument("manifest", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--db", type=click.Path(dir_okay=False), help="The database [MANIFEST's name.duckdb]."
)
@click.option(
    "--build",
    default="default",
    show_default=True,
    help="Label of what is measured (a driver, an app build): one database can hold several.",
)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="An environment variable of every job (repeatable; over the manifest's).",
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="Run the jobs as tasks on this Ray cluster ('auto': the local one).",
)
@count_option(
    "--jobs",
    low=1,
    high=256,
    default=1,
    help="Local jobs at once; more than 1 skews timings (use for MD5s, counts).",
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Run only shard I of N (default: from CI_NODE_INDEX/CI_NODE_TOTAL or "
    "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT when set).",
)
@warm_option(
    "Fork local jobs from a worker that started once per environment, or start each afresh."
)
@click.option("--rerun", is_flag=True, help="Run every job, even those the database has.")
@click.option("--junit", type=click.Path(dir_okay=False), help="Write the jobs as JUnit XML.")
@click.option(
    "--device",
    metavar="NAME",
    help="A traces description file (.yml): the device to run it for [PIGLIT_REPLAY_DEVICE_NAME].",
)
@click.option(
    "--db-path",
    type=click.Path(file_okay=False),
    help="A .yml's traces folder (piglit's --db-path) [./replayer-db/].",
)
@click.option("--download", is_flag=True, help="Fetch a .yml's missing traces from its URL.")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    help="A .yml's results folder: results.json.bz2 and images [results].",
)
@click.option("--keep-image", is_flag=True, help="Keep every last-frame image, not only failures.")
@click.option(
    "--update-checksums", is_flag=True, help="Write the checksums measured into the .yml."
)
@count_option(
    "--loop",
    low=1,
    high=10**6,
    help="A .yml performance run: time the last frame N more times (no checksums).",
)
@count_option("--warmup", low=0, high=10**6, help="With --loop: N unmeasured loops first.")
@count_option("--runs", low=1, high=1000, help="A .yml's profile runs per trace [1].")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="A .yml's seconds per run [300].",
)
def run(
    manifest: str | None,
    db: str | None,
    build: str,
    env_pairs: tuple[str, ...],
    ray_address: str | None,
    jobs: int,
    shard: str | None,
    warm: bool,
    rerun: bool,
    junit: str | None,
    update_checksums: bool,
    **ci_options: Any,
) -> None:
    """Profile every trace of MANIFEST (`runs` times each), skipping the runs the database
    already has. Exit status: 0 every job ok, 1 a job failed, 2 bad usage.

    MANIFEST may be a Mesa traces description file (.yml, or PIGLIT_REPLAY_DESCRIPTION_FILE):
    with --device, each trace expected on it is profiled and its last frame's checksum
    compared with the file's, and piglit's results.json.bz2 is written (--output)."""
    from retrace.batch import database, schedule
    from retrace.batch.ci.command import is_description, plan_run
    from retrace.batch.executors import LocalExecutor, RayExecutor
    from retrace.batch.manifest import load_manifest
    from retrace.batch.shards import parse_shard, shard_from_environment, take_shard
    from retrace.compare.alternate import parse_env

    env = parse_env("env", env_pairs)
    part = parse_shard(shard) if shard else shard_from_environment(os.environ)
    ci = None
    if is_description(manifest):
        ci_options["env"] = tuple(sorted(env.items()))
        ci = plan_run(manifest, ci_options, update_checksums, os.environ)
        todo = take_shard(ci.jobs, part)
        manifest = str(ci.description.file)
    else:
        given = [k for k, v in ci_options.items() if v] + ["update_checksums"] * update_checksums
        if given:
            option = "--" + given[0].replace("_", "-")
            raise UsageError(f"{option} is for a traces description file (.yml), not {manifest}")
        todo = take_shard(load_manifest(str(manifest), env).jobs, part)
    if db is None:
        suffix = f".shard{part[0]}of{part[1]}" if part else ""
        db = f"{Path(str(manifest)).stem}{suffix}.duckdb"
    started = time.time()
    shard_text = f"{part[0]}/{part[1]}" if part else ""
    tally = schedule.Tally(len(todo))
    stopped = None
    with database.connect(db) as con:
        executor = RayExecutor(ray_address) if ray_address else LocalExecutor(jobs, warm)
        progress = _Progress(len(todo))
        try:
            with _signals_as_interrupts():
                schedule.run_batch(todo, executor, con, build, rerun, progress, tally)
        except _Stopped as stop:
            stopped = stop.signal
        finally:
            executor.close()
            progress.close()
        counts = (tally.jobs, tally.ran, tally.failed)
        database.record_batch(con, build, str(manifest), shard_text, started, counts)
        if ci is not None and stopped is None:
            ci.finish(con, build, started)
        if junit:
            _write_jobs_junit(con, junit, build, todo)
    if stopped is not None:
        raise Interrupted(
            stopped,
            f"interrupted by {signal.Signals(stopped).name}: {tally.ran} of {tally.jobs} jobs "
            f"recorded in {db}; run the same command again to resume",
        )
    reused = _counts(tally.reused)
    click.echo(
        f"{tally.jobs} jobs: {tally.skipped} already done{f' ({reused})' if reused else ''}, "
        f"ran {tally.ran} ({_counts(tally.statuses) or 'none'}) in {time.time() - started:.1f} s; "
        f"results in {db}"
    )
    if tally.failed:
        sys.exit(1)


def _counts(statuses: Any) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))


@batch.command("merge", context_settings=_CONTEXT)
@click.argument("out", type=click.Path(dir_okay=False))
@click.argument("shards", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def merge(out: str, shards: tuple[str, ...]) -> None:
    """Merge the databases of shards (or of any batches) into OUT."""
    from retrace.batch import database

    with database.connect(out) as con:
        count = database.merge(con, list(shards))
    click.echo(f"merged {count} runs from {len(shards)} databases into {out}")


@batch.command("export", context_settings=_CONTEXT)
@click.argument("db", type=click.Path(dir_okay=False, exists=True))
@click.argument("folder", type=click.Path(file_okay=False))
def export(db: str, folder: str) -> None:
    """Write every table of DB as FOLDER/<table>.parquet."""
    from retrace.batch import database

    with database.connect(db, read_only=True) as con:
        for path in database.export_parquet(con, Path(folder)):
            click.echo(str(path))


@batch.command("sql", context_settings=_CONTEXT)
@click.argument("db", type=click.Path(dir_okay=False, exists=True))
@click.argument("query")
def sql(db: str, query: str) -> None:
    """Run an SQL QUERY on DB (read-only) and print the result as a table."""
    from tabulate import tabulate

    from retrace.batch import database

    with database.connect(db, read_only=True) as con:
        cursor = con.execute(query)
        headers = [d[0] for d in cursor.description or []]
        click.echo(tabulate(cursor.fetchall(), headers, tablefmt="simple"))


class _Stopped(Exception):
    def __init__(self, number: int) -> None:
        self.signal = number


def _signals_as_interrupts() -> AbstractContextManager[None]:
    """SIGINT and SIGTERM stop the batch at the next job boundary of the main thread."""

    def stop(number: int, frame: Any) -> None:
        raise _Stopped(number)

    return handling(dict.fromkeys((signal.SIGINT, signal.SIGTERM), stop))


class _Progress:
    """Jobs done, failed and the ETA on stderr while it is a terminal; silent otherwise."""

    def __init__(self, total: int) -> None:
        self._failed = 0
        self._bar: Any = None  # click's ProgressBar, entered here and left in close()
        if sys.stderr.isatty() and total:
            self._bar = click.progressbar(
                length=total,
                label="retrace batch",
                file=sys.stderr,
                show_eta=True,
                item_show_func=lambda _: f"{self._failed} failed" if self._failed else None,
            )
            self._bar.__enter__()

    def __call__(self, job: Any, outcome: Any, tally: Any) -> None:
        self._failed = tally.failed
        if self._bar is not None:
            self._bar.update(1, job.name)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _write_jobs_junit(con: Any, path: str, build: str, jobs: list[Any]) -> None:
    """One case per job of this invocation, with its recorded status."""
    from retrace.compare.junit import Case, write_junit

    rows = {
        (trace, run): (status, reason, wall)
        for trace, run, status, reason, wall in con.execute(
            "SELECT trace, run, status, reason, wall_s FROM runs WHERE build = ?", [build]
        ).fetchall()
    }
    cases = []
    for job in jobs:
        status, reason, wall = rows.get(job.key, ("missing", "not run", 0.0))
        failure = None if status == "ok" else f"{status}: {reason}"
        cases.append(Case(build, f"{job.name} run {job.run}", wall or 0.0, failure, status))
    write_junit(path, f"retrace batch {build}", cases)


def diff_main(args: list[str]) -> int:
    """`retrace diff`: of runs (retrace.compare), or of two batch databases."""
    from retrace.batch.database import is_database
    from retrace.compare.command import diff_main as diff_runs

    return diff_runs(args, (is_database, diff_databases))


def diff_databases(base: str, new: str, options: Any, fmt: str, junit: str | None) -> int:
    """`retrace diff` of two batches: the corpus report on stdout; diff's exit status."""
    from retrace.batch.corpus import corpus_diff, render_corpus, write_corpus_junit

    result = corpus_diff(base, new, options)
    click.echo(render_corpus(result, fmt), nl=False)
    if junit:
        write_corpus_junit(junit, result)
    return result.exit_code
