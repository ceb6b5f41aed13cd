"""The options of `retrace diff` and `retrace summary`.

`retrace diff` takes its two sides as ``BASE... -- NEW...``. click reads ``--``
as the end of the options and drops it, which would lose the split between the
sides. So `retrace.commands.forwarded` hands the arguments over unparsed, and `SidesCommand`
turns ``--`` into a marker before click parses them. The marker is a NUL
character, which no command-line argument can contain. ``--`` therefore does
not end the options here: a path that starts with "-" needs a "./" before it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import click

from retrace.commands.options import count_option, metrics_option, warm_option
from retrace.compare.render import FORMATS
from retrace.errors import UsageError

if TYPE_CHECKING:
    from retrace.compare.diff import DiffOptions, DiffResult

SIDE_BREAK = "\0"
_CONTEXT = {"help_option_names": ["-h", "--help"]}


class SidesCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = [SIDE_BREAK if a == "--" else a for a in args]
        return super().parse_args(ctx, args)


def diff_main(args: list[str], other: OtherSources | None = None) -> int:
    """Run `retrace diff` on unparsed arguments (`other`: sources besides runs); the exit
    status (1: a regression)."""
    return _diff.main(args, prog_name="retrace diff", standalone_mode=False, obj=other) or 0


def summary_main(args: list[str]) -> int:
    """Run `retrace summary` on unparsed arguments; the exit status."""
    return _summary.main(args, prog_name="retrace summary", standalone_mode=False) or 0


def _format_option(function: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="text",
        show_default=True,
        help="text: aligned tables; markdown: for CI comments; json and tsv: for scripts.",
    )(function)


def options_of(values: dict[str, Any]) -> DiffOptions:
    """The `DiffOptions` among a command's parsed options (those of `diff`)."""
    from retrace.compare.diff import DiffOptions

    names = {f.name for f in dataclasses.fields(DiffOptions)}
    return DiffOptions(**{k: v for k, v in values.items() if k in names})


# Sources of `retrace diff` other than runs, given by the entry point that knows them
# (retrace.batch.command: batch databases), so that compare depends on nothing above it:
# (whether a path is one, the report of two of them).
OtherSources: TypeAlias = (
    "tuple[Callable[[str], bool], Callable[[str, str, DiffOptions, str, str | None], int]]"
)


def report(
    base: Sequence[str],
    new: Sequence[str],
    options: DiffOptions,
    fmt: str,
    junit: str | None,
    other: OtherSources | None = None,
) -> int:
    """Compare the runs (or two `other` sources), print the report on stdout, write it as
    JUnit XML to `junit` if given, and return diff's exit status."""
    from retrace.compare.render import render_diff

    if other is not None and any(map(other[0], [*base, *new])):
        if len(base) != 1 or len(new) != 1 or not all(map(other[0], [*base, *new])):
            raise UsageError("compare two batch databases (DB or DB:BUILD), or runs, not both")
        return other[1](base[0], new[0], options, fmt, junit)
    result = judge(base, new, options)
    click.echo(render_diff(result, fmt), nl=False)
    if junit:
        from retrace.compare.junit import Case, write_junit

        failure = f"{result.verdict}" if result.exit_code else None
        write_junit(junit, "retrace diff", [Case("retrace diff", new[0], failure=failure)])
    return result.exit_code


def judge(base: Sequence[str], new: Sequence[str], options: DiffOptions) -> DiffResult:
    """Load and compare the runs of two sides."""
    from retrace.compare.diff import diff
    from retrace.compare.load import load_comparison

    return diff(load_comparison(base, new, options.metrics, options.force), options)


@click.command(cls=SidesCommand, context_settings=_CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="BASE... [--] NEW...")
@_format_option
@click.option(
    "--threshold",
    type=click.FloatRange(min=0),
    default=0.05,
    show_default=True,
    help="Smallest relative change of the median that counts (0.05: 5%).",
)
@click.option(
    "--min-abs",
    type=click.FloatRange(min=0),
    default=1000.0,
    show_default=True,
    metavar="NS",
    help="Smallest absolute change that counts, for Duration metrics (ns).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Significance level (of p adjusted for the tests at once); intervals are 1 - alpha.",
)
@count_option(
    "--top",
    low=0,
    default=10,
    help="Rows listed per table and metric in each of regressions and improvements.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Compare only this metric (repeatable); also brings in a Start metric.",
)
@click.option(
    "--lower-is-better",
    multiple=True,
    metavar="NAME",
    help="Treat a larger value of this metric as a regression (repeatable).",
)
@click.option(
    "--higher-is-better",
    multiple=True,
    metavar="NAME",
    help="Treat a smaller value of this metric as a regression (repeatable).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["totals", "rows"]),
    default="totals",
    show_default=True,
    help="What decides the exit status: table totals, or also single rows.",
)
@count_option(
    "--startup-frames", low=0, default=1, help="Frames reported apart as start-up, not judged."
)
@click.option(
    "--force",
    is_flag=True,
    help="Compare runs whose metadata name different traces, with a loud warning.",
)
@click.option("--junit", type=click.Path(dir_okay=False), help="Also write the verdict as "
              "JUnit XML (a case per trace when comparing batches).")  # fmt: skip
def _diff(paths: tuple[str, ...], fmt: str, junit: str | None, **options: Any) -> int:
    """Compare profiles of one trace made by two builds (retrace or glretrace TSV files).

    BASE and NEW are TSV files or directories of *.tsv files; with several runs
    per side, separate the sides with --: `retrace diff a1.tsv a2.tsv a3.tsv --
    b1.tsv b2.tsv b3.tsv`. Or two batch databases (`retrace batch`), DB or
    DB:BUILD, for a verdict per trace and one for the corpus. Frames are
    matched by index, calls and draw calls by call number and name; runs of
    different traces are refused (exit 2).

    Duration metrics are costs: larger is a regression. Start metrics and the
    min/p95/stddev columns of --stats are left out. Other metrics (Pixels Drawn,
    counters) are reported as changed, never as regressions, unless
    --lower-is-better or --higher-is-better says otherwise. A change counts if
    the median moves by more than --threshold (and --min-abs for Durations)
    and, with 4 or more runs per side, a two-sided Mann-Whitney U test finds it
    significant at --alpha once adjusted (Benjamini-Hochberg) for the number
    of rows, or of totals, tested. The first --startup-frames frames are
    reported apart and not judged.

    Exit status: 0 no regression, 1 a regression, 2 bad usage or input.
    """
    base, new = split_sides(list(paths))
    return report(base, new, options_of(options), fmt, junit, click.get_current_context().obj)


def _side_options(function: Callable[..., int]) -> Callable[..., int]:
    """--base/--new KEY=VALUE and --base-cmd/--new-cmd COMMAND."""
    for side in ("new", "base"):
        function = click.option(f"--{side}-cmd", default="", metavar="COMMAND",
                                help=f"A command the {side} runs start behind "
                                "(e.g. 'taskset -c 1').")(function)  # fmt: skip
        function = click.option(f"--{side}", f"{side}_env", multiple=True, metavar="KEY=VALUE",
                                help=f"An environment variable of the {side} runs "
                                "(repeatable).")(function)  # fmt: skip
    return function


@click.command(context_settings=_CONTEXT)
@click.argument("trace")
@_side_options
@metrics_option(
    "--pframes",
    "Per-frame metrics, as for profiling (default: CPU and GPU Duration); "
    '"opengl: GPU Busy" compares the GPU\'s work without its waits for the replayer.',
)
@metrics_option("--pcalls", "Per-call metrics, as for profiling.")
@metrics_option("--pdrawcalls", "Per-draw-call metrics, as for profiling.")
@count_option("--warmup", low=0, default=1, help="Runs of each side first, thrown away.")
@count_option(
    "--min-runs", low=4, default=5, help="Runs per side before stopping early (4: a test at 0.05)."
)
@count_option("--max-runs", low=4, default=20, help="Runs per side at most.")
@click.option("--precision", type=click.FloatRange(min=0, min_open=True), default=0.02,
              show_default=True, metavar="P",
              help="Stop once every cost total's change is known to +-P (0.02: 2%).")  # fmt: skip
@click.option("--keep", type=click.Path(file_okay=False), metavar="DIR",
              help="Keep the runs' TSV files in DIR (base-1.tsv, new-1.tsv...).")  # fmt: skip
@warm_option("Fork each side's runs from a worker that started once, or start each run afresh.")
def _compare(
    trace: str,
    base_env: tuple[str, ...],
    new_env: tuple[str, ...],
    base_cmd: str,
    new_cmd: str,
    pframes: str | None,
    pcalls: str | None,
    pdrawcalls: str | None,
    warmup: int,
    min_runs: int,
    max_runs: int,
    precision: float,
    keep: str | None,
    warm: bool,
    fmt: str,
    **options: Any,
) -> int:
    """Profile TRACE under two environments, alternating runs, and compare them as diff does.

    `retrace compare TRACE --base GALLIUM_DRIVER=llvmpipe --new GALLIUM_DRIVER=softpipe`

    After --warmup runs of each side, base and new are profiled in turn, one
    run each, so that a drift of the machine hits both alike, until every cost
    total's interval is within +-P (and at least --min-runs runs per side) or
    --max-runs is reached. Then the report of `retrace diff` on the kept runs.
    A line per run goes to stderr when it is a terminal; otherwise one once both
    sides have run, and one per verdict so far.

    Exit status, as `git bisect run` reads it: 0 no regression (good), 1 a regression (bad),
    125 a run could not be made (a broken build: the commit is skipped), 128 a mistake of
    the command's or the input's (a bad option or metric, a damaged trace, an unwritable
    --keep: the bisection stops).
    """
    import shlex
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from retrace.compare.alternate import Budget, Side, alternate, parse_env
    from retrace.compare.render import render_diff

    if not Path(trace).is_file():
        raise UsageError(f"{trace}: no such file")
    selection = [
        *(["--pframes", pframes] if pframes else []),
        *(["--pcalls", pcalls] if pcalls else []),
        *(["--pdrawcalls", pdrawcalls] if pdrawcalls else []),
    ] or ["--pframes", "opengl: CPU Duration, GPU Duration"]
    sides = (
        Side("base", parse_env("base", base_env), tuple(shlex.split(base_cmd))),
        Side("new", parse_env("new", new_env), tuple(shlex.split(new_cmd))),
    )
    diff_options = options_of(options)
    budget = Budget(warmup, min_runs, max_runs, precision)
    with tempfile.TemporaryDirectory(prefix="retrace-compare-") as scratch:
        folder = Path(keep) if keep else Path(scratch)
        result = alternate(
            trace,
            selection,
            sides,
            budget,
            folder,
            lambda b, n: judge(b, n, diff_options),
            warm,
        )
        if not keep:  # the runs go with the scratch folder: name none of its files
            gone = "not kept: --keep DIR keeps them"
            result = replace(
                result,
                base_sources=[gone] * len(result.base_sources),
                new_sources=[gone] * len(result.new_sources),
            )
        click.echo(render_diff(result, fmt), nl=False)
    return result.exit_code


# compare and report take every option of diff (its verdict): one definition of each.
VERDICT_OPTIONS = [p for p in _diff.params if p.name not in ("paths", "fmt", "junit")]
_compare.params += [p for p in _diff.params if p.name not in ("paths", "junit")]


def compare_main(args: list[str]) -> int:
    """Run `retrace compare` on unparsed arguments; the exit status (1: a regression). What
    goes wrong that is no build's fault exits `ABORT`, so that it stops a `git bisect run`."""
    from retrace.compare.alternate import ABORT, Mistake, RunFailed
    from retrace.errors import Interrupted, RetraceError
    from retrace.exits import DEBUG, internal_error, os_error_message

    try:
        return _compare.main(args, prog_name="retrace compare", standalone_mode=False) or 0
    except (RunFailed, Interrupted):
        raise
    except RetraceError as exc:
        exc.exit_code = ABORT
        raise
    except click.ClickException as exc:  # (a usage error's status is 2)
        raise Mistake(exc.format_message()) from None
    except OSError as exc:  # (exit 1 otherwise: "bad")
        raise Mistake(os_error_message(exc)) from None
    except Exception as exc:  # a bug in retrace is no build's fault either (70 reads "bad")
        if os.environ.get(DEBUG):
            raise
        bug = Mistake(internal_error(exc))
        bug.prefix = ""
        raise bug from None


@click.command(context_settings=_CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="TSV...")
@_format_option
@count_option(
    "--top",
    low=0,
    help="List only the N functions and programs with the largest sums (default: all).",
)
def _summary(paths: tuple[str, ...], fmt: str, top: int | None) -> int:
    """Statistics of profiles (retrace or glretrace TSV files, or directories of them).

    Per table and metric: count, sum, min, max, mean, median, p95 and standard
    deviation across frames, calls or draw calls; for call and draw-call tables
    also the sums per function name and per program. Each file is summarized on
    its own.
    """
    from retrace.compare.load import expand_paths, read_run
    from retrace.compare.render import render_summary
    from retrace.compare.summary import summarize

    summaries = [summarize(read_run(p), top) for p in expand_paths(paths)]
    click.echo(render_summary(summaries, fmt), nl=False)
    return 0


def split_sides(paths: list[str]) -> tuple[list[str], list[str]]:
    if SIDE_BREAK in paths:
        i = paths.index(SIDE_BREAK)
        base, new = paths[:i], paths[i + 1 :]
        if SIDE_BREAK in new:
            raise UsageError("more than one --: give BASE... -- NEW...")
    elif len(paths) == 2:
        base, new = paths[:1], paths[1:]
    else:
        raise UsageError(
            "give two paths (BASE NEW), or BASE... -- NEW... for several runs per side"
        )
    if not base or not new:
        raise UsageError("a side has no runs: give BASE... -- NEW...")
    return base, new
