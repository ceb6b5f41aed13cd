"""The `retrace` program: `command_line` is its entry (the console script, `python -m
retrace`), which runs the command line (`retrace.commands`) through `main` in a process
that ends as soon as the command is done (`exits.end_process`).

A command that replays forks the process that replays (`retrace.replay.contain`), and only
that process loads the GL driver (`retrace.replay.ws.driver_process`): it opens the display
on a thread first thing, so that the driver loads (its libraries, LLVM for llvmpipe:
30-40 ms) on another core while the child imports the replayer and reads the trace. That
thread holds the dynamic loader's lock while the driver's libraries load, and an
extension module the child imported meanwhile would wait for it, so here, before the
command line is even imported, a command that replays loads `LIBRARIES`: what the command
line and a replay's first steps import that is a shared library (tests/unit/test_startup.py
holds the list complete). The child inherits them loaded.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Callable
from functools import partial
from typing import NoReturn

# Container objects allocated (net) between two young-generation collections: CPython's 700
# has the collector traverse a command's objects over and over while the modules import and
# the replay compiles (objects that live as long as the command): 10% of a short replay's
# CPU, 5% of a long one's. Cyclic garbage waits longer to be freed; little is made.
GC_THRESHOLD = 100_000
# The commands that replay by name (trim replays to check what it wrote); glretrace's form
# (options, then a trace) runs replay or profile.
REPLAYING = ("replay", "profile", "trim")
# The shared-library modules the command line and a replay import before the driver is
# loaded, besides the reader's (standard ones that are built in on some Pythons import as
# cheaply; one a Python lacks is passed over).
LIBRARIES = (
    "_bisect", "_bz2", "_csv", "_ctypes", "_datetime", "_json", "_lzma", "_opcode",
    "_random", "_sha2", "_sha512", "_socket", "_struct", "_typing", "_uuid", "array", "fcntl",
    "math", "mmap", "select", "retrace.replay._guard", "retrace.replay._vm",
    "retrace.trace._scanner",
)  # fmt: skip


def command_line() -> NoReturn:
    """Run `retrace ARGS` (sys.argv) and exit with its status."""
    gc.set_threshold(GC_THRESHOLD)
    try:
        if replays(sys.argv[1:]):
            import_libraries()
        import retrace.commands  # noqa: F401  (here, for the Ctrl-C below)
        from retrace.exits import end_process
    except KeyboardInterrupt:  # (Ctrl-C while the modules import: `main` handles it after)
        from retrace.errors import INTERRUPTED

        print(INTERRUPTED[0], file=sys.stderr)
        os._exit(INTERRUPTED[1])
    end_process(main)


def main(run: Callable[[], object] | None = None) -> None:
    """Run the command line (or `run`: a replay child's work), turning retrace's own errors
    into one stderr line and an exit code."""
    import click

    from retrace.exits import outlive_stderr, run_reporting
    from retrace.replay.contain import let_children_linger

    # retrace never multiplies matrices, but importing numpy starts an OpenBLAS thread per
    # core that spins: 15-20 ms of CPU per command on 2 cores, more on bigger machines
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if sys.stdout is None:  # started with stdout closed (`>&-`): Python leaves None there
        click.echo("retrace: error: standard output is closed", err=True)
        sys.exit(1)
    outlive_stderr()
    let_children_linger()  # (this process ends with the command)
    if run is None:
        from retrace.commands import cli

        run = partial(cli.main, prog_name="retrace", standalone_mode=False)
    run_reporting(run)


def replays(args: list[str]) -> bool:
    """Whether `retrace ARGS` replays a trace: `REPLAYING`, and glretrace's form, which runs
    replay or profile (`retrace -b T`, `retrace --pframes ... T`, `retrace T`). A
    wrong guess costs only a few libraries loaded for nothing."""
    if not args or {"-h", "--help", "--version"} & set(args):
        return False
    first = args[0]
    return first in REPLAYING or first.startswith("-") or os.path.isfile(first)


def import_libraries() -> None:
    """Import `LIBRARIES` (those this Python has: 3.12 names _sha512 _sha2), and the
    reader's (`container.load_libraries`, which a replaying child loads for itself), where
    the driver's loading can overlap the child's imports (more than one core)."""
    from retrace.trace.ahead import overlap_pays
    from retrace.trace.container import load_libraries

    if not overlap_pays():
        return

    load_libraries()
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
