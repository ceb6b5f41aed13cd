"""`retrace dump`: a trace's calls as text, as `apitrace dump --color=never` prints them."""

from __future__ import annotations

import sys

import click

from retrace.commands.options import TRACE, cache_option, calls_option


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


@click.command(cls=_BoolEquals)
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True, type=TRACE)
@calls_option("Only dump these calls (apitrace call-set grammar).")
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
@cache_option
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
