"""`retrace info`: facts about a trace, as JSON."""

from __future__ import annotations

import click

from retrace.commands.options import TRACE, cache_option, count_option

MAX_TOP = 10_000  # --top: a trace calls fewer distinct functions; more can only be a typo


@click.command()
@click.argument("trace", type=TRACE)
@click.option("--dump-frames", is_flag=True, help="Add per-frame call ranges and sizes.")
@count_option(
    "--top",
    low=0,
    high=MAX_TOP,
    default=10,
    help="How many of the most frequent functions to list.",
)
@cache_option
def info(trace: str, dump_frames: bool, top: int) -> None:
    """Print facts about TRACE as JSON: apitrace info's fields plus call and thread counts."""
    import json

    from retrace.trace.info import trace_info

    summary, error = trace_info(trace, dump_frames=dump_frames, top=top)
    click.echo(json.dumps(summary, indent=2))
    if error is not None:
        raise error
