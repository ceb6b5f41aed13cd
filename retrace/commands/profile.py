"""`retrace profile`: glretrace's profiling options (`--pframes/--pcalls/--pdrawcalls`, the
legacy `--pcpu/--pgpu/--ppd/--pmem`), `--list-metrics`, `--gen-passes` and `--resume`;
the jobs themselves are in `retrace.profile.commands`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from retrace.commands.options import (
    HEADLESS,
    TRACE,
    cache_option,
    calls_option,
    count_option,
    frames_option,
    gathered,
    loop_option,
    metrics_option,
    no_effect,
    sandbox_option,
    strict_option,
)

if TYPE_CHECKING:
    from retrace.profile.options import LegacyOptions, ProfileOptions, ProfileRun

MAX_RUNS = 10_000  # --repeat, --warmup: replays of every pass (more can only be a typo)

BENCHMARK = no_effect(
    "-b", "--benchmark", why="a profile ends with the Rendered line and checks no errors anyway"
)


# The records the command takes, built when it runs: glretrace's form of a replay imports
# this module (for the names of the options) and needs none of retrace.profile.


def _options(**given: Any) -> ProfileOptions:
    from retrace.profile.options import ProfileOptions

    return ProfileOptions.select(**given)


def _legacy(**given: Any) -> LegacyOptions:
    from retrace.profile.options import LegacyOptions

    return LegacyOptions(**given)


def _run(output: str | None, store_dir: str | None, keep_store: bool, quiet: bool) -> ProfileRun:
    """Where the run delivers: '-' is standard output, as everywhere; --quiet: no progress."""
    from retrace.profile.options import ProfileRun

    output = None if output == "-" else output
    return ProfileRun(output, store_dir, keep_store, None if quiet else sys.stderr)


def _refuse_idle(*cases: tuple[bool, str]) -> None:
    """An option that would do nothing where it is given is a usage error, not ignored: the
    user meant something by it."""
    for idle, why in cases:
        if idle:
            raise click.UsageError(why)


@click.command()
@gathered(
    "options",
    _options,
    per_frame="pframes",
    per_call="pcalls",
    per_drawcall="pdrawcalls",
    frames="frames_spec",
    calls="calls_spec",
    loop="loop",
    repeat="repeat",
    warmup="warmup",
    stats="stats",
    strict="strict",
)
@gathered(
    "legacy",
    _legacy,
    cpu="pcpu",
    gpu="pgpu",
    pixels="ppd",
    memory="pmem",
    frame_times="pframe_times",
    min_cpu_time="min_cpu_time",
)
@gathered(
    "run", _run, output="output", store_dir="store_dir", keep_store="keep_store", quiet="quiet"
)
@click.argument("trace", type=TRACE, required=False)
@metrics_option("--pframes", 'Metrics per frame: "backend: metric, [group, id]; ..."')
@metrics_option("--pcalls", "Metrics per call.")
@metrics_option("--pdrawcalls", "Metrics per draw call.")
@click.option(
    "--list-metrics", is_flag=True, help="List every backend's metrics on the trace's context."
)
@click.option("--gen-passes", is_flag=True, help="Print how many passes the selection takes.")
@click.option("--json", "as_json", is_flag=True, help="--list-metrics as JSON.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    help="Write the tables here ('-': standard output, the default).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tsv", "csv", "json"]),
    default="tsv",
    show_default=True,
    help="The tables as glretrace's TSV, or one CSV / JSON Lines record per event.",
)
@click.option(
    "--metadata",
    type=click.Path(dir_okay=False, writable=True),
    help="Write what the profile measured and on what here (default: OUTPUT.json with -o).",
)
@click.option(
    "--perfetto",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write a Perfetto timeline (default selection without --pframes/--pcalls/...).",
)
@click.option("--store-dir", type=click.Path(file_okay=False), help="Where the result store lives.")
@click.option("--keep-store", is_flag=True, help="Keep the result store after the run.")
@click.option(
    "--resume",
    metavar="STORE",
    type=click.Path(exists=True, file_okay=False),
    help="Finish the interrupted or killed profile kept in STORE (trace and options come "
    "from there; -o, --keep-store, --quiet and --sandbox may be given).",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="With --gen-passes: show which metrics go in which pass."
)
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@frames_option(
    "Measure only frames A to B (0-based; A- to the end, N one frame); the rest replays unmeasured."
)
@calls_option(
    "Measure only these calls (apitrace's call sets: 10-20,*/draw,@FILE); the frames table "
    "keeps the frames that hold them."
)
@loop_option(
    "Then replay the last frame (or the --frames range) N more times, after --warmup "
    "loops, and measure the loops only."
)
@count_option(
    "--repeat",
    low=1,
    high=MAX_RUNS,
    default=1,
    help="Replay every pass N times; each cell holds the median.",
)
@count_option(
    "--warmup",
    low=0,
    high=MAX_RUNS,
    default=0,
    metavar="K",
    help="Replays of every pass to run and discard first.",
)
@click.option("--stats", is_flag=True, help="With --repeat: add min, p95 and stddev columns.")
@click.option("--pcpu", is_flag=True, help="Legacy profiler: CPU time per call.")
@click.option("--pgpu", is_flag=True, help="Legacy profiler: GPU time per draw call.")
@click.option("--ppd", is_flag=True, help="Legacy profiler: pixels drawn per draw call.")
@click.option("--pmem", is_flag=True, help="Legacy profiler: VSIZE/RSS per call.")
@click.option(
    "--pframe-times", is_flag=True, help="Print rendering_finished <ns> after each frame."
)
@count_option(
    "--min-cpu-time",
    low=0,
    default=1000,
    metavar="NS",
    help="With --pcpu: leave out calls faster than NS ns.",
)
@strict_option
@HEADLESS
@BENCHMARK
@cache_option
@sandbox_option
def profile(
    trace: str | None,
    options: ProfileOptions,
    legacy: LegacyOptions,
    run: ProfileRun,
    list_metrics: bool,
    gen_passes: bool,
    as_json: bool,
    verbose: bool,
    fmt: str,
    metadata: str | None,
    perfetto: str | None,
    resume: str | None,
) -> None:
    """Profile TRACE: replay it once per pass and print glretrace's TSV tables
    (or, with --pcpu/--pgpu/--ppd/--pmem, its legacy per-call lines)."""
    from retrace.profile import commands, outputs
    from retrace.profile.checks import check_options, check_writable

    ctx = click.get_current_context()
    if resume is not None:
        given = [
            p.opts[-1] if isinstance(p, click.Option) else "TRACE"  # (the flag, not its name)
            for p in ctx.command.params
            if p.name not in ("resume", "output", "keep_store", "quiet", "no_cache", "sandbox")
            and ctx.get_parameter_source(p.name) != click.core.ParameterSource.DEFAULT
        ]
        if given:
            raise click.UsageError(
                f"--resume takes the trace and options from the store: drop {', '.join(given)}"
            )
        commands.resume_profile(resume, run)
        return
    if trace is None:
        raise click.UsageError("missing argument 'TRACE'")
    _refuse_idle(
        (as_json and not list_metrics, "--json is for --list-metrics (tables: --format json)"),
        (verbose and not gen_passes, "-v is for --gen-passes (it shows each pass's metrics)"),
    )
    if list_metrics:
        commands.list_metrics(trace, as_json)
    elif gen_passes:
        commands.gen_passes(trace, options, verbose)
    elif legacy.chosen:
        raw = ctx.params  # (as given: --frames 0- and --loop=0 are parts too)
        parts = raw["frames_spec"] or raw["calls_spec"] or raw["loop"] is not None
        if options.selections or fmt != "tsv" or metadata or perfetto or parts:
            raise click.UsageError(
                "--pcpu/--pgpu/--ppd/--pmem/--pframe-times cannot be combined with "
                "--pframes/--pcalls/--pdrawcalls, --format, --metadata, --perfetto, --frames, "
                "--calls or --loop"
            )
        check_writable(run.output)
        commands.run_legacy_profile(trace, legacy, run, options.strict)
    else:
        if perfetto:
            selections = outputs.timeline_selection(dict(options.selections))
            options = options.replace(selections=selections)
        if not options.selections:
            raise click.UsageError(
                "nothing to profile: give --pframes, --pcalls or --pdrawcalls "
                "(or the legacy --pcpu, --pgpu, --ppd, --pmem)"
            )
        chosen = outputs.Outputs.chosen(fmt, metadata, perfetto)
        check_writable(run.output, metadata, perfetto)
        check_options(options)  # (--frames and --calls: `commands.check_part_meanwhile`)
        commands.run_profile(trace, options, run, chosen)
