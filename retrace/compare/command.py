"""The options of `retrace diff` and `retrace summary`.

`retrace diff` takes its two sides as ``BASE... -- NEW...``. click reads ``--``
as the end of the options and drops it, which would lose the split between the
sides. So `retrace.cli` hands the arguments over unparsed, and `_SidesCommand`
turns ``--`` into a marker before click parses them. The marker is a NUL
character, which no command-line argument can contain. ``--`` therefore does
not end the options here: a path that starts with "-" needs a "./" before it.
"""

from __future__ import annotations

import click

from retrace.compare.render import FORMATS
from retrace.errors import UsageError

_SIDE_BREAK = "\0"
_CONTEXT = {"help_option_names": ["-h", "--help"]}


class _SidesCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = [_SIDE_BREAK if a == "--" else a for a in args]
        return super().parse_args(ctx, args)


def diff_main(args: list[str]) -> int:
    """Run `retrace diff` on unparsed arguments; the exit status (1: a regression)."""
    return _diff.main(args, prog_name="retrace diff", standalone_mode=False) or 0


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


@click.command(cls=_SidesCommand, context_settings=_CONTEXT)
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
    help="Significance level of the Mann-Whitney test (several runs per side).",
)
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
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
def _diff(
    paths: tuple[str, ...],
    fmt: str,
    threshold: float,
    min_abs: float,
    alpha: float,
    top: int,
    metrics: tuple[str, ...],
    lower_is_better: tuple[str, ...],
    higher_is_better: tuple[str, ...],
    fail_on: str,
) -> int:
    """Compare profiles of one trace made by two builds (retrace or glretrace TSV files).

    BASE and NEW are TSV files or directories of *.tsv files; with several runs
    per side, separate the sides with --: `retrace diff a1.tsv a2.tsv a3.tsv --
    b1.tsv b2.tsv b3.tsv`. Frames are matched by index, calls and draw calls by
    call number and name; runs of different traces are refused (exit 2).

    Duration metrics are costs: larger is a regression. Start metrics are left
    out. Other metrics (Pixels Drawn, counters) are reported as changed, never as
    regressions, unless --lower-is-better or --higher-is-better says otherwise.
    A change counts if the median moves by more than --threshold (and --min-abs
    for Durations) and, with 3 or more runs per side, a one-sided Mann-Whitney U
    test finds it significant at --alpha.

    Exit status: 0 no regression, 1 a regression, 2 bad usage or input.
    """
    from retrace.compare.diff import DiffOptions, diff
    from retrace.compare.load import load_comparison
    from retrace.compare.render import render_diff

    base, new = _split_sides(list(paths))
    opts = DiffOptions(
        threshold, min_abs, alpha, top, metrics, lower_is_better, higher_is_better, fail_on
    )
    comparison = load_comparison(base, new, metrics)
    result = diff(comparison, opts)
    click.echo(render_diff(result, fmt), nl=False)
    return result.exit_code


@click.command(context_settings=_CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="TSV...")
@_format_option
@click.option(
    "--top",
    type=click.IntRange(min=0),
    metavar="N",
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


def _split_sides(paths: list[str]) -> tuple[list[str], list[str]]:
    if _SIDE_BREAK in paths:
        i = paths.index(_SIDE_BREAK)
        base, new = paths[:i], paths[i + 1 :]
        if _SIDE_BREAK in new:
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
