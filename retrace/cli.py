"""The `retrace` command line.

The entry point only routes: each subcommand lives in its own module. Errors
of the project's own types become one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import sys

import click

from retrace.errors import RetraceError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="retrace")
def cli() -> None:
    """Replay apitrace OpenGL traces and profile them per frame, call and draw call."""


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False))
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
    type=click.Choice(["never"]),
    default="never",
    help="Accepted for apitrace compatibility; output is never coloured.",
)
def dump(trace: str, calls_spec: str | None, verbose: bool, color: str) -> None:
    """Print every call of TRACE as `apitrace dump --color=never` does."""
    from retrace.trace.callset import CallSet
    from retrace.trace.dump import write_dump
    from retrace.trace.reader import TraceReader

    calls = CallSet.parse(calls_spec) if calls_spec else None
    reader = TraceReader(trace)
    try:
        write_dump(reader, sys.stdout.buffer, calls, verbose)
    finally:
        sys.stdout.buffer.flush()


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--dump-frames", is_flag=True, help="Add per-frame call ranges and sizes.")
@click.option(
    "--top", default=10, show_default=True, help="How many of the most frequent functions to list."
)
def info(trace: str, dump_frames: bool, top: int) -> None:
    """Print facts about TRACE as JSON: apitrace info's fields plus call and thread counts."""
    import json

    from retrace.trace.info import trace_info

    summary, error = trace_info(trace, dump_frames=dump_frames, top=top)
    click.echo(json.dumps(summary, indent=2))
    if error is not None:
        raise error


def main() -> None:
    """Run the CLI, turning retrace's own errors into one stderr line and an exit code."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("retrace: interrupted", err=True)
        sys.exit(130)
    except RetraceError as e:
        sys.stdout.flush()
        click.echo(f"retrace: error: {e}", err=True)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        # the reader of our output (head, less) went away: not an error of ours
        sys.stderr.close()
        sys.exit(0)
