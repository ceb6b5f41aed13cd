"""Command-line pieces that several command groups share (`retrace.cli`, `retrace.compare`,
`retrace.batch`): one definition of each, so that a count or a flag reads the same
everywhere. Only click and the standard library: the CLI imports this at start-up."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


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


def refuse_misspelt_command(word: str, commands: list[str]) -> None:
    """A first argument that reads as a command's name and is no file is a misspelt command,
    not a file to work on (which would fail on an option the command has, or on nothing
    to read)."""
    if not re.fullmatch(r"[a-z][a-z-]*", word) or os.path.exists(word):
        return
    close = difflib.get_close_matches(word, commands, n=1)
    hint = (
        f"did you mean '{close[0]}'?"
        if close
        else f"nor a file of that name (the commands: {', '.join(commands)})"
    )
    raise click.UsageError(f"no such command '{word}'; {hint}")
