"""The options that several commands take (`retrace.commands`, `retrace.compare`,
`retrace.batch`), each declared once, so that a count, a flag or a call set reads the same
everywhere; where its help differs per command, the command gives it. Only click and the
standard library at import: the root command imports this at start-up."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

F = TypeVar("F", bound=Callable[..., object])

MAX_LOOPS = 1_000_000_000  # --loop: replays of the last frame (a negative N loops forever)

# A trace named on the command line: missing or a directory is a usage error (exit 2), as a
# mistyped option is; a file that is no trace fails the work (exit 1).
TRACE = click.Path(exists=True, dir_okay=False)


def gathered(into: str, build: Callable[..., object], **fields: str) -> Callable[[F], F]:
    """Hand the command one argument `into`, `build(field=value, ...)`, in place of the
    options `fields` names (its keyword -> the option's name): a command takes a few
    records, not a parameter per option. Put above the options, under `click.command`."""

    def decorate(command: F) -> F:
        @functools.wraps(command)  # (with click's list of the options)
        def with_record(*args: Any, **given: Any) -> object:
            given[into] = build(**{field: given.pop(name) for field, name in fields.items()})
            return command(*args, **given)

        return cast(F, with_record)

    return decorate


def count_option(
    *decls: str,
    low: int,
    high: int | None = None,
    default: int | None = None,
    metavar: str = "N",
    help: str,
) -> Callable[[F], F]:
    """A whole number of at least `low` (and at most `high`, where a larger one can only be
    a typo); its default, if it has one, shown in --help."""
    return click.option(
        *decls,
        type=click.IntRange(low, high),
        default=default,
        show_default=default is not None,
        metavar=metavar,
        help=help,
    )


def warm_option(help: str) -> Callable[[F], F]:
    """--warm/--no-warm: fork runs from a warm worker (`retrace.forkserver`), on by default."""
    return click.option("--warm/--no-warm", default=True, show_default=True, help=help)


def calls_option(help: str) -> Callable[[F], F]:
    """--calls CALLSET, in apitrace's call-set grammar (the text, parsed where it is used)."""
    return click.option("--calls", "calls_spec", metavar="CALLSET", help=help)


def frames_option(help: str) -> Callable[[F], F]:
    """--frames A-B, glretrace's frame range (0-based; the text, parsed where it is used)."""
    return click.option("--frames", "frames_spec", metavar="A-B", help=help)


def metrics_option(name: str, help: str) -> Callable[[F], F]:
    """--pframes, --pcalls or --pdrawcalls SPEC: a selection in glretrace's grammar."""
    return click.option(name, metavar="SPEC", help=help)


def strict_option(command: F) -> F:
    """--strict, for the commands that replay and can tell how faithfully."""
    return click.option(
        "--strict",
        is_flag=True,
        help="Exit 3 if the replay departed from the trace (calls not issued, lost buffer writes, "
        "GL errors the program did not get).",
    )(command)


def loop_option(help: str) -> Callable[[F], F]:
    """glretrace's --loop[=N] (N < 0: forever); `loop_forms` reads a bare --loop as
    --loop=-1 first."""
    return click.option(
        "--loop", type=click.IntRange(max=MAX_LOOPS), default=None, metavar="[=N]", help=help
    )


def loop_forms(args: list[str]) -> list[str]:
    """glretrace's forms of --loop, which click cannot take as they are: a bare --loop
    loops forever (click would take the trace after it as N), and --loop=-1 is N, not an
    option; `--loop N` with a number is N, as before."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        number = i + 1 < len(args) and re.fullmatch(r"[+-]?\d+", args[i + 1])
        out.append("--loop=-1" if arg == "--loop" and not number else arg)
    return out


def sandbox_option(command: F) -> F:
    """--sandbox[=best-effort], for the commands that replay (`retrace.replay.sandbox`)."""
    from retrace.replay.sandbox import MODES

    def request(ctx: click.Context, param: click.Parameter, mode: str | None) -> None:
        if mode is not None:
            from retrace.replay import sandbox

            sandbox.request(mode)

    return click.option(
        "--sandbox",
        type=click.Choice(MODES),
        is_flag=False,
        flag_value=MODES[0],
        expose_value=False,
        callback=request,
        help="Replay confined (Landlock, seccomp): write only the outputs, no network, no "
        "programs run; refused where the kernel lacks them, unless =best-effort.",
    )(command)


def bare_sandbox(args: list[str]) -> list[str]:
    """A bare --sandbox is --sandbox=on: click would take the argument after it (the trace)
    for its value."""
    if "--sandbox" not in args:  # (the sandbox's module is not imported for nothing)
        return args
    from retrace.replay.sandbox import MODES

    values = [[mode] for mode in MODES]
    end = args.index("--") if "--" in args else len(args)
    bare = [
        i
        for i, a in enumerate(args[:end])
        if a == "--sandbox" and args[i + 1 : i + 2] not in values
    ]
    return [f"{a}={MODES[0]}" if i in bare else a for i, a in enumerate(args)]


def cache_option(command: F) -> F:
    """--no-cache, for every command that reads a trace through the trace cache."""

    def switch_off(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            from retrace.trace import cache

            cache.switch_off()

    return click.option(
        "--no-cache",
        is_flag=True,
        expose_value=False,
        callback=switch_off,
        help="Read the trace itself: neither use nor fill the trace cache (`retrace cache`).",
    )(command)


def no_effect(*decls: str, why: str, metavar: str | None = None) -> Callable[[F], F]:
    """A glretrace option that means nothing to retrace: accepted, with one line saying why,
    so that a glretrace command line runs as it is."""

    def say_why(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value not in (None, False):
            click.echo(f"retrace: warning: {param.opts[0]} has no effect: {why}", err=True)

    return click.option(
        *decls,
        is_flag=metavar is None,
        metavar=metavar,
        expose_value=False,
        callback=say_why,
        help=f"Accepted for glretrace: {why}.",
    )


HEADLESS = no_effect("--headless", why="retrace always replays headless (EGL)")


def refuse_misspelt_command(word: str, commands: list[str]) -> None:
    """A first argument that reads as a command's name and is no file is a misspelt command,
    not a file to work on (which would fail on an option the command has, or on nothing
    to read)."""
    if not re.fullmatch(r"[a-z][a-z-]*", word) or os.path.exists(word):
        return
    import difflib

    close = difflib.get_close_matches(word, commands, n=1)
    hint = (
        f"did you mean '{close[0]}'?"
        if close
        else f"nor a file of that name (the commands: {', '.join(commands)})"
    )
    raise click.UsageError(f"no such command '{word}'; {hint}")
