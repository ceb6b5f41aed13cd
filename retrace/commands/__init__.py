"""The `retrace` command line's commands: `COMMANDS` names the module of each, and `cli`
(the click group) routes to them; each is imported when that command runs or its help
is asked, so that a command imports no other's modules.

This module imports nothing: the command line asks it, before click is imported,
whether the command replays (`replays`), so that the replaying child starts first.
"""

from __future__ import annotations

from collections.abc import Sequence

# Every command by name -> "module:attribute" that defines it, imported when it is used.
# The forwarded ones parse their own arguments in their own packages.
COMMANDS = {
    "batch": "retrace.batch.command:batch",
    "cache": "retrace.commands.cache:cache_group",
    "compare": "retrace.commands.forwarded:compare",
    "diff": "retrace.commands.forwarded:diff",
    "dump": "retrace.commands.dump:dump",
    "export": "retrace.commands.export:export",
    "info": "retrace.commands.info:info",
    "profile": "retrace.commands.profile:profile",
    "replay": "retrace.commands.replay:replay",
    "report": "retrace.commands.forwarded:report",
    "summary": "retrace.commands.forwarded:summary",
    "trim": "retrace.commands.trim:trim",
}
# the commands whose work runs in a replay child (`retrace.replay.contain`) -> the modules
# of that work, which a child forked before the command line is parsed imports meanwhile
# (a replay's body imports the replayer itself: the command line's process never does),
# and "module:function", what it calls meanwhile (the GL registry, which every replay
# loads: 2 ms)
_REGISTRY = "retrace.gl.registry:load_registry"
REPLAYING = {
    "replay": ("retrace.replay.run", "retrace.replay.replayer", "retrace.trace.callset", _REGISTRY),
    "profile": ("retrace.profile.commands", "retrace.profile.driver", _REGISTRY),
}
# the options that ask for help or the version, whatever comes after them
ASKING = ("-h", "--help", "--version")
# what asks for no work, or sets state that the replay child inherits from its parent
# at the fork (the cache switched off, the sandbox requested)
_NOT_SPARED = (*ASKING, "--no-cache", "--sandbox")


def first_word(args: Sequence[str]) -> str | None:
    """The first argument that is not an option: the command, or glretrace's forms' first
    operand (`retrace -b TRACE`, `retrace --pframes SPEC TRACE`), which is no command."""
    return next((a for a in args if not a.startswith("-") or a in ("-", "--")), None)


def replays(args: Sequence[str]) -> str | None:
    """The command of `REPLAYING` that `retrace ARGS` runs, by its words alone, where its
    replay child may fork before the command line is parsed (`contain.spare_child`):
    `replay`, `profile`, or glretrace's forms (taken for profiles; `-b TRACE` is a replay);
    None where it is another, or an option asks for help or sets state the child inherits."""
    first = first_word(args)
    if first is None or any(a.split("=", 1)[0] in _NOT_SPARED for a in args):
        return None
    if first in REPLAYING:
        return first
    return None if first in COMMANDS else "profile"
