"""The `retrace` program: the command line (`retrace.cli`), in a process that ends as soon
as the command is done (`exits.end_process`), with the driver loading ahead for a command
that replays.

A replay's fixed cost is serial in a single process: Python starts, the command line's
modules import (click among them) and parse the arguments, the replaying child forks and
imports the replay's modules, and only then the driver loads (its libraries, LLVM for
llvmpipe: 30-40 ms) while the child reads the trace. Here the driver starts loading on
another core as soon as the program knows the command replays, before the command line is
even imported: `headless.open_early` opens the display in a thread of this process, which
the child takes over at the fork. The thread holds the dynamic loader's lock while the
driver's libraries load, and an extension module imported meanwhile would wait for it, so
`LIBRARIES` are loaded first: what the command line and a replay's first steps import
that is a shared library (tests/unit/test_startup.py holds the list complete).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import NoReturn

# The commands that replay by name (trim replays to check what it wrote); glretrace's form
# (options, then a trace) runs replay or profile.
REPLAYING = ("replay", "profile", "trim")
# The shared-library modules the command line and a replay import before the driver is
# loaded, besides the reader's (standard ones that are built in on some Pythons import as
# cheaply; one a Python lacks is passed over).
LIBRARIES = (
    "_bisect", "_bz2", "_csv", "_ctypes", "_datetime", "_heapq", "_json", "_lzma", "_opcode",
    "_random", "_sha2", "_sha512", "_socket", "_struct", "_typing", "_uuid", "array", "fcntl",
    "math", "mmap", "select", "retrace.replay._guard", "retrace.replay._vm",
    "retrace.trace._scanner",
)  # fmt: skip
# What a crash of the driver while it loads says (its signal's name in between).
CRASH = ("retrace: error: driver crashed (", ") while loading, before the first call\n")


def command_line() -> NoReturn:
    """Run `retrace ARGS` (sys.argv) and exit with its status."""
    try:
        if replays(sys.argv[1:]):
            load_driver_early()
        from retrace.cli import main
        from retrace.exits import end_process
    except KeyboardInterrupt:  # (Ctrl-C while the modules import: `main` handles it after)
        from retrace.errors import INTERRUPTED

        print(INTERRUPTED[0], file=sys.stderr)
        os._exit(INTERRUPTED[1])
    end_process(main)


def replays(args: list[str]) -> bool:
    """Whether `retrace ARGS` replays a trace: `REPLAYING`, and glretrace's form, which runs
    replay or profile (`retrace -b T`, `retrace --pframes ... T`, `retrace T`). A
    wrong guess costs only a display opened for nothing, on another core."""
    if not args or {"-h", "--help", "--version"} & set(args):
        return False
    first = args[0]
    return first in REPLAYING or first.startswith("-") or os.path.isfile(first)


def load_driver_early() -> None:
    """Start loading the driver (`headless.open_early`), after the libraries the rest of
    the start-up imports; before a fork, the child's replay modules import while it may
    still be loading."""
    from retrace.trace.ahead import overlap_pays

    if not overlap_pays():  # (on one core the driver would load as late, with switches)
        return
    import_libraries()
    from retrace.replay.ws.headless import open_early

    open_early(CRASH)
    os.register_at_fork(before=_import_replay)  # (runs before open_early's join)


def import_libraries() -> None:
    """Import `LIBRARIES` (those this Python has: 3.12 names _sha512 _sha2), and the
    reader's (`container.load_libraries`, which a replaying child loads for itself)."""
    from retrace.trace.container import load_libraries

    load_libraries()
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _import_replay() -> None:
    """The child's first steps, taken before the fork: the replayer's modules and the GL
    registry, and a profile's profiler and backends."""
    import retrace.replay.replayer  # noqa: F401
    from retrace.gl.registry import load_registry

    load_registry()
    if "retrace.profile.commands" in sys.modules:
        import retrace.profile.driver  # noqa: F401
        from retrace.backends.registry import load_backends

        load_backends()
