"""`retrace export`: the Perfetto timeline of a profile kept as a TSV."""

from __future__ import annotations

import click


@click.command()
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
