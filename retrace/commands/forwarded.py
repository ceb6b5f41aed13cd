"""`retrace diff`, `compare`, `summary` and `report`: commands that hand their arguments
unparsed to their own click programs (diff's `--` between sides), whose modules are
imported only when one runs."""

from __future__ import annotations

import importlib
import sys

import click


def _forward(name: str, entry: str, summary: str, module: str) -> click.Command:
    """The command `name`, which runs `module`'s `entry` on its arguments."""

    @click.command(
        name,
        help=summary,
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def forwarded(args: tuple[str, ...]) -> None:
        sys.exit(getattr(importlib.import_module(module), entry)(list(args)))

    return forwarded


diff = _forward(
    "diff",
    "diff_main",
    "Compare the profiles of two builds (or two batches); exit 1 on a regression.",
    "retrace.batch.command",
)
compare = _forward(
    "compare",
    "compare_main",
    "Profile a trace under two environments, alternating runs, and diff them.",
    "retrace.compare.command",
)
summary = _forward(
    "summary",
    "summary_main",
    "Statistics of profiles per table, metric, function, program.",
    "retrace.compare.command",
)
report = _forward(
    "report", "report_main", "One HTML page of plots from profiles.", "retrace.report.command"
)
