"""The `retrace` command line's click group, `cli`: it only routes, to the commands of
`retrace.commands.COMMANDS` (`options` declares what several share).

`retrace.main` runs it; errors of the project's own types become one line on stderr
and a non-zero exit there.
"""

from __future__ import annotations

import importlib

import click

from retrace import __version__
from retrace.commands import ASKING, COMMANDS, first_word
from retrace.commands.options import bare_sandbox, loop_forms, refuse_misspelt_command
from retrace.exits import ReaderGone


class _Cli(click.Group):
    """Routes glretrace-style invocations (`retrace --pframes SPEC TRACE`) to `profile`;
    imports each command of `COMMANDS` only when it is used."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = first_word(args)
        if args and first not in COMMANDS and args[0] not in ASKING:
            refuse_misspelt_command(args[0], self.list_commands(ctx))
            args = [self._glretrace_command(ctx, args), *args]
        return super().parse_args(ctx, bare_sandbox(loop_forms(args)))

    def _glretrace_command(self, ctx: click.Context, args: list[str]) -> str:
        """`replay` where every option given is replay's and none is profile's alone
        (`retrace -b TRACE`, as `glretrace -b TRACE`), else `profile`."""
        given = {a.split("=", 1)[0] for a in args if a.startswith("-") and a not in ("-", "--")}
        replay, profile = (
            {o for p in self._command(ctx, name).params for o in (*p.opts, *p.secondary_opts)}
            for name in ("replay", "profile")
        )
        only_replay = given and given <= replay and not given & (profile - replay)
        return "replay" if only_replay else "profile"

    def _command(self, ctx: click.Context, name: str) -> click.Command:
        command = self.get_command(ctx, name)
        assert command is not None  # (a name of COMMANDS)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS and name not in self.commands:
            module, attribute = COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as e:
            raise ReaderGone from e


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)  # (the distribution is retrace-gl: no metadata look-up)
def cli() -> None:
    """Replay apitrace OpenGL traces and profile them per frame, call and draw call.

    Profiling takes glretrace's options at the top level:

        retrace --pframes "opengl: GPU Duration" TRACE

    (see `retrace profile --help`).
    """
