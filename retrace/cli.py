"""The `retrace` command line.

The entry point only routes: each subcommand lives in its own module. Errors
of the project's own types become one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import click

from retrace import __version__
from retrace.command_line import count_option, refuse_misspelt_command
from retrace.exits import ReaderGone, outlive_stderr, run_reporting

F = TypeVar("F", bound=Callable[..., object])

# Bounds on counts where a larger number can only be a typo: it would replay for days
# (or forever) before anyone noticed. A trace calls fewer than 10,000 distinct functions.
MAX_RUNS = 10_000  # --repeat, --warmup: replays of every pass
MAX_LOOPS = 1_000_000_000  # --loop: replays of the last frame (a negative N loops forever)
MAX_TOP = 10_000  # info --top


# A trace named on the command line: missing or a directory is a usage error (exit 2), as a
# mistyped option is; a file that is no trace fails the work (exit 1).
TRACE = click.Path(exists=True, dir_okay=False)


def loop_option(help: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """glretrace's --loop[=N] (N < 0: forever); `loop_forms` reads a bare --loop as
    --loop=-1 first."""
    return click.option(
        "--loop", type=click.IntRange(max=MAX_LOOPS), default=None, metavar="[=N]", help=help
    )


def loop_forms(args: list[str]) -> list[str]:
    """glretrace's forms of --loop, which click cannot take as they are: a bare --loop
    loops forever (click would take the trace after it as N), and --loop=-1 is N, not an
    option; `--loop N` with a number is N, as before."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        number = i + 1 < len(args) and re.fullmatch(r"[+-]?\d+", args[i + 1])
        out.append("--loop=-1" if arg == "--loop" and not number else arg)
    return out


def _sandbox_option(command: Callable[..., None]) -> Callable[..., None]:
    """--sandbox[=best-effort], for the commands that replay (`retrace.replay.sandbox`)."""
    from retrace.replay.sandbox import MODES

    def request(ctx: click.Context, param: click.Parameter, mode: str | None) -> None:
        if mode is not None:
            from retrace.replay import sandbox

            sandbox.request(mode)

    return click.option(
        "--sandbox",
        type=click.Choice(MODES),
        is_flag=False,
        flag_value=MODES[0],
        expose_value=False,
        callback=request,
        help="Replay confined (Landlock, seccomp): write only the outputs, no network, no "
        "programs run; refused where the kernel lacks them, unless =best-effort.",
    )(command)


def _bare_sandbox(args: list[str]) -> list[str]:
    """A bare --sandbox is --sandbox=on: click would take the argument after it (the trace)
    for its value."""
    from retrace.replay.sandbox import MODES

    values = [[mode] for mode in MODES]
    end = args.index("--") if "--" in args else len(args)
    bare = [
        i
        for i, a in enumerate(args[:end])
        if a == "--sandbox" and args[i + 1 : i + 2] not in values
    ]
    return [f"{a}={MODES[0]}" if i in bare else a for i, a in enumerate(args)]


class _Cli(click.Group):
    """Routes glretrace-style invocations (`retrace --pframes SPEC TRACE`) to `profile`;
    imports the command groups of `_LAZY` only when they are used."""

    _LAZY = {"batch": "retrace.batch.command"}  # name -> module defining the group `name`

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-") or a in ("-", "--")), None)
        passthrough = {"-h", "--help", "--version"}
        known = first in self.commands or first in self._LAZY
        if args and not known and not passthrough & set(args[:1]):
            refuse_misspelt_command(args[0], self.list_commands(ctx))
            args = [self._glretrace_command(args), *args]
        return super().parse_args(ctx, _bare_sandbox(loop_forms(args)))

    def _glretrace_command(self, args: list[str]) -> str:
        """`replay` where every option given is replay's and none is profile's alone
        (`retrace -b TRACE`, as `glretrace -b TRACE`), else `profile`."""
        given = {a.split("=", 1)[0] for a in args if a.startswith("-") and a not in ("-", "--")}
        replay, profile = (
            {o for p in self.commands[name].params for o in (*p.opts, *p.secondary_opts)}
            for name in ("replay", "profile")
        )
        only_replay = given and given <= replay and not given & (profile - replay)
        return "replay" if only_replay else "profile"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self._LAZY and name not in self.commands:
            self.add_command(getattr(importlib.import_module(self._LAZY[name]), name))
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as e:
            raise ReaderGone from e


def _no_effect(*decls: str, why: str, metavar: str | None = None) -> Callable[[F], F]:
    """A glretrace option that means nothing to retrace: accepted, with one line saying why,
    so that a glretrace command line runs as it is."""

    def say_why(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value not in (None, False):
            click.echo(f"retrace: warning: {param.opts[0]} has no effect: {why}", err=True)

    return click.option(
        *decls,
        is_flag=metavar is None,
        metavar=metavar,
        expose_value=False,
        callback=say_why,
        help=f"Accepted for glretrace: {why}.",
    )


HEADLESS = _no_effect("--headless", why="retrace always replays headless (EGL)")
BENCHMARK_IN_PROFILE = _no_effect(
    "-b", "--benchmark", why="a profile ends with the Rendered line and checks no errors anyway"
)


def _refuse_idle(*cases: tuple[bool, str]) -> None:
    """An option that would do nothing where it is given is a usage error, not ignored: the
    user meant something by it."""
    for idle, why in cases:
        if idle:
            raise click.UsageError(why)


def _cache_option(command: Callable[..., None]) -> Callable[..., None]:
    """--no-cache, for every command that reads a trace through the trace cache."""

    def switch_off(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            from retrace.trace import cache

            cache.switch_off()

    return click.option(
        "--no-cache",
        is_flag=True,
        expose_value=False,
        callback=switch_off,
        help="Read the trace itself: neither use nor fill the trace cache (`retrace cache`).",
    )(command)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)  # (the distribution is retrace-gl: no metadata look-up)
def cli() -> None:
    """Replay apitrace OpenGL traces and profile them per frame, call and draw call.

    Profiling takes glretrace's options at the top level:

        retrace --pframes "opengl: GPU Duration" TRACE

    (see `retrace profile --help`).
    """


class _BoolEquals(click.Command):
    """apitrace's `--name[=BOOL]` options as click flags: `--call-nos=no` is `--no-call-nos`
    (BOOL: yes/no, true/false, 1/0), bare `--call-nos` is the flag; bare `--color` is
    `--color=always`, as in apitrace."""

    BOOLS = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False}
    BARE = {"--color": "--color=always", "--colour": "--color=always"}  # apitrace's [=WHEN]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # --name=BOOL -> --name or --no-name, for the options that have both
        pairs = {
            p.opts[0]: p.secondary_opts[0]
            for p in self.params
            if isinstance(p, click.Option) and p.secondary_opts
        }
        rewritten = []
        for arg in args:
            name, equals, value = arg.partition("=")
            if equals and name in pairs:
                if value.lower() not in self.BOOLS:
                    raise click.UsageError(f"{name}: expected yes or no, not {value!r}")
                arg = name if self.BOOLS[value.lower()] else pairs[name]
            rewritten.append(self.BARE.get(arg, arg))
        return super().parse_args(ctx, rewritten)


@cli.command(cls=_BoolEquals)
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True, type=TRACE)
@click.option(
    "--calls",
    "calls_spec",
    metavar="CALLSET",
    help="Only dump these calls (apitrace call-set grammar).",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also dump calls apitrace hides (glGetError = GL_NO_ERROR, glGetString…).",
)
@click.option(
    "--color",
    "--colour",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    help="Accepted for apitrace compatibility: output is never coloured.",
)
@click.option("--thread-ids/--no-thread-ids", default=False, help="Put @THREAD before each call.")
@click.option("--call-nos/--no-call-nos", default=True, help="Put the call number first.")
@click.option("--arg-names/--no-arg-names", default=True, help="Name each argument.")
@click.option("--blobs", is_flag=True, help="Write blobs to blob_call<N>.bin files, named.")
@click.option(
    "--multiline/--no-multiline", default=True, help="Newlines in strings as they are (or \\n)."
)
@_cache_option
def dump(
    traces: tuple[str, ...],
    calls_spec: str | None,
    verbose: bool,
    color: str,
    thread_ids: bool,
    call_nos: bool,
    arg_names: bool,
    blobs: bool,
    multiline: bool,
) -> None:
    """Print every call of each TRACE as `apitrace dump --color=never` does (its options
    take `=BOOL` too: --call-nos=no)."""
    from retrace.trace.callset import CallSet
    from retrace.trace.dump import Style, write_dump
    from retrace.trace.reader import TraceReader

    if color == "always":
        click.echo(
            "retrace: warning: --color=always has no effect: retrace dump does not colour", err=True
        )
    chosen = [
        (call_nos, Style.CALL_NOS),
        (thread_ids, Style.THREAD_IDS),
        (not multiline, Style.ONELINE),
        (blobs, Style.BLOBS),
        (arg_names, Style.ARG_NAMES),
    ]
    style = Style(0)
    for on, bit in chosen:
        if on:
            style |= bit
    calls = CallSet.parse(calls_spec) if calls_spec else None
    try:
        for trace in traces:
            write_dump(TraceReader(trace), sys.stdout.buffer, calls, verbose, style)
    finally:
        sys.stdout.buffer.flush()


@cli.command()
@click.argument("trace", type=TRACE)
@click.option("--dump-frames", is_flag=True, help="Add per-frame call ranges and sizes.")
@count_option(
    "--top",
    low=0,
    high=MAX_TOP,
    default=10,
    help="How many of the most frequent functions to list.",
)
@_cache_option
def info(trace: str, dump_frames: bool, top: int) -> None:
    """Print facts about TRACE as JSON: apitrace info's fields plus call and thread counts."""
    import json

    from retrace.trace.info import trace_info

    summary, error = trace_info(trace, dump_frames=dump_frames, top=top)
    click.echo(json.dumps(summary, indent=2))
    if error is not None:
        raise error


@cli.command()
@click.argument("trace", type=TRACE)
@click.option("-b", "--benchmark", is_flag=True, help="Print the frame rate, as glretrace -b.")
@click.option(
    "-s",
    "--snapshot-prefix",
    metavar="PREFIX",
    help="Write snapshots to PREFIX<call>.png ('-': to stdout, see --snapshot-format).",
)
@click.option(
    "-S",
    "--snapshot",
    "snapshot_spec",
    metavar="CALLSET",
    default="*/frame",
    show_default=True,
    help="Calls to snapshot (before a frame-ending call, after any other).",
)
@click.option(
    "--snapshot-format",
    type=click.Choice(["PNM", "RGB", "MD5"], case_sensitive=False),
    default="PNM",
    show_default=True,
    help="With -s -: a PPM stream (call number as comment), raw pixels, or one MD5 per line.",
)
@click.option(
    "--snapshot-interval",
    type=click.IntRange(0),
    default=0,
    metavar="N",
    help="Snapshot only in every Nth frame (frames 0, N, 2N...; 0: every frame).",
)
@click.option(
    "--calls",
    "calls_spec",
    metavar="CALLSET",
    help="Replay only these GL calls (window-system calls always run).",
)
@click.option(
    "--frames",
    "frames_spec",
    metavar="A-B",
    help="Replay up to the end of frame B; snapshots and -b count frames A to B (0-based).",
)
@loop_option(
    "Then replay the calls since the last frame end N more times, as glretrace (--loop or "
    "N < 0: until interrupted); -b counts the trace's frames and the loops'."
)
@click.option(
    "--sb", "single_buffer", is_flag=True, help="Single-buffered: glFlush/glFinish end frames."
)
@click.option("--db", "double_buffer", is_flag=True, help="Double-buffered (the default).")
@click.option(
    "--core", is_flag=True, help="Create desktop contexts as core profile (3.2 at least)."
)
@click.option(
    "--samples",
    type=click.IntRange(0, 256),
    metavar="N",
    help="Multisample the stand-in framebuffers with N samples.",
)
@click.option("-v", "--verbose", is_flag=True, help="Report GL errors after every call.")
@HEADLESS
@_no_effect(
    "--driver",
    metavar="DRIVER",
    why="retrace replays on the EGL device Mesa picks; choose the driver with Mesa's "
    "environment (LIBGL_ALWAYS_SOFTWARE=1, GALLIUM_DRIVER, MESA_LOADER_DRIVER_OVERRIDE)",
)
@_no_effect("--fullscreen", why="retrace shows no window of the trace's (see --window)")
@_no_effect("-w", "--wait", why="retrace shows no window of the trace's to wait on")
@_no_effect("--singlethread", why="retrace replays every thread's calls on one thread already")
@click.option("--window", is_flag=True, help="Also show the frames in a GLFW window.")
@click.option(
    "--query-handling",
    type=click.Choice(["skip", "run", "check"]),
    default="skip",
    show_default=True,
    help="The program's own query readbacks: leave out, run, or run and compare with the trace.",
)
@click.option(
    "--query-tolerance",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    metavar="N",
    help="With --query-handling check: how far a result may be from the trace's.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 3 if the replay departed from the trace (calls not issued, lost buffer writes, "
    "GL errors the program did not get).",
)
@_cache_option
@_sandbox_option
def replay(trace: str, **options) -> None:
    """Replay TRACE through the GL driver (headless EGL)."""
    if options["single_buffer"] and options["double_buffer"]:
        raise click.UsageError("--sb and --db contradict each other: give one")
    from retrace.replay.run import run_replay

    run_replay(trace, **options)


@cli.command()
@click.argument("trace", type=TRACE, required=False)
@click.option(
    "--pframes", metavar="SPEC", help='Metrics per frame: "backend: metric, [group, id]; ..."'
)
@click.option("--pcalls", metavar="SPEC", help="Metrics per call.")
@click.option("--pdrawcalls", metavar="SPEC", help="Metrics per draw call.")
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
@click.option(
    "--frames",
    "frames_spec",
    metavar="A-B",
    help="Measure only frames A to B (0-based; A- to the end, N one frame); the rest "
    "replays unmeasured.",
)
@click.option(
    "--calls",
    "calls_spec",
    metavar="CALLSET",
    help="Measure only these calls (apitrace's call sets: 10-20,*/draw,@FILE); the frames "
    "table keeps the frames that hold them.",
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
@click.option(
    "--min-cpu-time",
    type=click.IntRange(0),
    default=1000,
    show_default=True,
    metavar="NS",
    help="With --pcpu: leave out calls faster than NS ns.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 3 if the replay departed from the trace (calls not issued, lost buffer writes, "
    "GL errors the program did not get).",
)
@HEADLESS
@BENCHMARK_IN_PROFILE
@_cache_option
@_sandbox_option
def profile(
    trace: str | None,
    pframes: str | None,
    pcalls: str | None,
    pdrawcalls: str | None,
    list_metrics: bool,
    gen_passes: bool,
    as_json: bool,
    output: str | None,
    fmt: str,
    metadata: str | None,
    perfetto: str | None,
    store_dir: str | None,
    keep_store: bool,
    verbose: bool,
    quiet: bool,
    pcpu: bool,
    pgpu: bool,
    ppd: bool,
    pmem: bool,
    pframe_times: bool,
    min_cpu_time: int,
    frames_spec: str | None,
    calls_spec: str | None,
    loop: int | None,
    repeat: int,
    warmup: int,
    stats: bool,
    strict: bool,
    resume: str | None,
) -> None:
    """Profile TRACE: replay it once per pass and print glretrace's TSV tables
    (or, with --pcpu/--pgpu/--ppd/--pmem, its legacy per-call lines)."""
    from retrace.profile import commands, outputs
    from retrace.profile.checks import check_options, check_writable
    from retrace.profile.options import ProfileOptions

    if output == "-":  # as everywhere: '-' is standard output
        output = None
    options = ProfileOptions.select(
        pframes,
        pcalls,
        pdrawcalls,
        frames=frames_spec,
        calls=calls_spec,
        loop=loop,
        repeat=repeat,
        warmup=warmup,
        stats=stats,
        strict=strict,
    )
    selections = options.selections
    legacy = pcpu or pgpu or ppd or pmem or pframe_times
    progress = None if quiet else sys.stderr
    if resume is not None:
        ctx = click.get_current_context()
        given = [
            f"--{p.name.replace('_', '-')}" if p.name != "trace" else "TRACE"
            for p in ctx.command.params
            if p.name not in ("resume", "output", "keep_store", "quiet", "no_cache", "sandbox")
            and ctx.get_parameter_source(p.name) != click.core.ParameterSource.DEFAULT
        ]
        if given:
            raise click.UsageError(
                f"--resume takes the trace and options from the store: drop {', '.join(given)}"
            )
        commands.resume_profile(resume, output, keep_store, progress)
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
    elif legacy:
        parts = frames_spec or calls_spec or loop is not None
        if selections or fmt != "tsv" or metadata or perfetto or parts:
            raise click.UsageError(
                "--pcpu/--pgpu/--ppd/--pmem/--pframe-times cannot be combined with "
                "--pframes/--pcalls/--pdrawcalls, --format, --metadata, --perfetto, --frames, "
                "--calls or --loop"
            )
        check_writable(output)
        commands.run_legacy_profile(
            trace,
            output,
            store_dir=store_dir,
            keep_store=keep_store,
            progress=progress,
            cpu=pcpu,
            gpu=pgpu,
            pixels=ppd,
            memory=pmem,
            frame_times=pframe_times,
            min_cpu_time=min_cpu_time,
            strict=strict,
        )
    else:
        if perfetto:
            from dataclasses import replace

            options = replace(options, selections=outputs.timeline_selection(dict(selections)))
        if not options.selections:
            raise click.UsageError(
                "nothing to profile: give --pframes, --pcalls or --pdrawcalls "
                "(or the legacy --pcpu, --pgpu, --ppd, --pmem)"
            )
        chosen = outputs.Outputs.chosen(fmt, metadata, perfetto)
        check_writable(output, metadata, perfetto)
        check_options(options)  # (--frames and --calls: `commands.check_part_meanwhile`)
        commands.run_profile(trace, options, output, store_dir, keep_store, progress, chosen)


@cli.command()
@click.argument("tables", metavar="PROFILE", type=click.Path(dir_okay=False))
@click.option(
    "--perfetto",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Write the profile's Perfetto timeline here.",
)
def export(tables: str, perfetto: str) -> None:
    """Write the Perfetto timeline of a kept profile (a TSV from -o, its metadata beside it)."""
    from retrace.profile.outputs import export_perfetto

    export_perfetto(tables, perfetto)


@cli.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--frames", "frames_spec", metavar="A-B", help="The frames to keep (0-based; A- to the end)."
)
@click.option(
    "--calls",
    "calls_spec",
    metavar="CALLSET",
    help="Instead of --frames: the calls from the set's lowest number to its highest.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="The trimmed trace to write (and OUT.json beside it).",
)
@click.option(
    "--verify/--no-verify",
    default=True,
    show_default=True,
    help="Replay the trim and the original, compare their frames, add back what they need.",
)
@click.option(
    "--tolerance",
    type=click.IntRange(0, 255),
    default=0,
    show_default=True,
    metavar="N",
    help="Frames are equal when no channel of any pixel differs by more than N (0: by MD5).",
)
def trim(**options: Any) -> None:
    """Write frames A-B of TRACE, with the setup they need, as a trace of their own; replay
    both and check the frames are equal (exit 1 if they never are)."""
    from retrace.trim.command import run_trim

    if (options["frames_spec"] is None) == (options["calls_spec"] is None):
        raise click.UsageError("give --frames A-B or --calls CALLSET")
    run_trim(**options)  # (its parameters are the options above)


@cli.group("cache")
def cache_group() -> None:
    """The trace cache: what reading each trace produced, kept so that the next run of the
    same trace skips reading it ($RETRACE_CACHE_DIR, $RETRACE_CACHE_SIZE)."""


@cache_group.command("info")
def cache_info() -> None:
    """Print where the cache is, how many traces and bytes it holds and may hold, as JSON."""
    import json

    from retrace.trace import cache

    click.echo(json.dumps(cache.summary(), indent=2))


@cache_group.command("clear")
def cache_clear() -> None:
    """Remove everything the cache holds."""
    from retrace.trace import cache

    click.echo(f"removed {cache.clear()} cached traces from {cache.directory()}")


def _forward(name: str, entry: str, summary: str, module: str = "retrace.compare.command") -> None:
    """A subcommand that hands its arguments unparsed to `module`, which parses them itself
    (diff's `--` between sides) and is imported only when used."""

    @cli.command(
        name,
        help=summary,
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def forwarded(args: tuple[str, ...]) -> None:
        sys.exit(getattr(importlib.import_module(module), entry)(list(args)))


_forward(
    "diff",
    "diff_main",
    "Compare the profiles of two builds (or two batches); exit 1 on a regression.",
    "retrace.batch.command",
)
_forward(
    "compare",
    "compare_main",
    "Profile a trace under two environments, alternating runs, and diff them.",
)
_forward("summary", "summary_main", "Statistics of profiles per table, metric, function, program.")
_forward("report", "report_main", "One HTML page of plots from profiles.", "retrace.report.command")


def main(run: Callable[[], object] | None = None) -> None:
    """Run the CLI (or `run`: a replay child's work), turning retrace's own errors into one
    stderr line and an exit code."""
    # retrace never multiplies matrices, but importing numpy starts an OpenBLAS thread per
    # core that spins: 15-20 ms of CPU per command on 2 cores, more on bigger machines
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if sys.stdout is None:  # started with stdout closed (`>&-`): Python leaves None there
        click.echo("retrace: error: standard output is closed", err=True)
        sys.exit(1)
    outlive_stderr()
    run_reporting(run or partial(cli.main, prog_name="retrace", standalone_mode=False))
