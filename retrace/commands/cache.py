"""`retrace cache info` and `retrace cache clear`: the trace cache (`retrace.trace.cache`)."""

from __future__ import annotations

import click


@click.group("cache")
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
