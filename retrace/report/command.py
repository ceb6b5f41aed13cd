"""The options of `retrace report`.

`retrace report PROFILE... -o report.html` makes the page of one profile (or of
several runs of one, their median per frame); `retrace report BASE... -- NEW...`
of two sides, with `retrace diff`'s verdict, whose options it takes.
"""

from __future__ import annotations

import os
from typing import Any

import click

from retrace.compare.command import SIDE_BREAK, VERDICT_OPTIONS, SidesCommand, split_sides
from retrace.errors import RetraceError
from retrace.writer.atomic import replaced


@click.command(cls=SidesCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, metavar="PROFILE... [-- NEW...]")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default="report.html",
    show_default=True,
    help="The HTML file to write.",
)
@click.option(
    "--trace",
    type=click.Path(dir_okay=False),
    help="The trace to take shader sources from (default: the one the metadata names).",
)
def _report(paths: tuple[str, ...], output: str, trace: str | None, **options: Any) -> int:
    """One self-contained HTML page of a profile's plots and tables (TSV files with their
    metadata, or directories of them): frame times with p50/p95/p99 and spikes, a
    histogram, the top draw calls, functions and shader programs by GPU and CPU time,
    and a frames x calls heat map. With BASE... -- NEW..., both sides overlaid and
    `retrace diff`'s verdict. Needs matplotlib: pip install 'retrace-gl[report]'."""
    from retrace.compare.load import expand_paths, read_run
    from retrace.report.page import Side, render
    from retrace.report.shaders import program_sources

    given = list(paths)
    if SIDE_BREAK in given:
        groups = list(zip(("base", "new"), split_sides(given), strict=True))
    else:
        groups = [("profile", given)]
    sides = [Side(label, [read_run(p) for p in expand_paths(group)]) for label, group in groups]
    verdict = None
    if len(sides) == 2:
        from retrace.compare.command import judge, options_of
        from retrace.compare.render import render_diff

        result = judge(groups[0][1], groups[1][1], options_of(options))
        verdict = (result.verdict, render_diff(result, "text"))
    if trace is None:
        named = (sides[-1].metadata.get("trace") or {}).get("path")
        trace = named if named and os.path.isfile(named) else None
    sources = program_sources(trace) if trace else {}
    page = render(sides, verdict, sources)
    existed = os.path.exists(output)
    try:
        with replaced(output) as stream:
            stream.write(page)
    except OSError as e:
        raise RetraceError(f"cannot write {output}: {e.strerror or e}") from None
    if existed:  # (the default name makes it easy to lose an earlier page)
        click.echo(f"retrace: warning: overwrote {output}", err=True)
    return 0


# diff's options of the verdict; not --fail-on: a report's exit status says only whether
# the page was written
_report.params += [p for p in VERDICT_OPTIONS if p.name != "fail_on"]


def report_main(args: list[str]) -> int:
    """Run `retrace report` on unparsed arguments; the exit status."""
    return _report.main(args, prog_name="retrace report", standalone_mode=False) or 0
