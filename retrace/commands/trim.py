"""`retrace trim`: frames of a trace, with the setup they need, as a trace of their own."""

from __future__ import annotations

from typing import Any

import click

from retrace.commands.options import TRACE, calls_option, count_option, frames_option


@click.command()
@click.argument("trace", type=TRACE)
@frames_option("The frames to keep (0-based; A- to the end).")
@calls_option("Instead of --frames: the calls from the set's lowest number to its highest.")
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
@count_option(
    "--tolerance",
    low=0,
    high=255,
    default=0,
    help="Frames are equal when no channel of any pixel differs by more than N (0: by MD5).",
)
def trim(**options: Any) -> None:
    """Write frames A-B of TRACE, with the setup they need, as a trace of their own; replay
    both and check the frames are equal (exit 1 if they never are)."""
    from retrace.trim.command import run_trim

    if (options["frames_spec"] is None) == (options["calls_spec"] is None):
        raise click.UsageError("give --frames A-B or --calls CALLSET")
    run_trim(**options)  # (its parameters are the options above)
