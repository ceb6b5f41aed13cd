"""The `retrace` program: `command_line` is its entry (the console script, `python -m
retrace`), which runs the command line (`retrace.commands`) through `main` in a process
that ends as soon as the command is done (`exits.end_process`).

A command that replays forks the process that replays (`retrace.replay.contain`), and only
that process loads the GL driver (`retrace.replay.ws.driver_process`), on a thread, while
it imports the replayer and reads the trace. Where the command's words say it replays, that
child forks first of all, before click is imported (`contain.spare_child`): the driver
loads while this process parses the command line, which then hands the child its work.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable
from functools import partial
from typing import NoReturn

from retrace.errors import INTERRUPTED

# Container objects allocated (net) between two young-generation collections: CPython's 700
# has the collector traverse a command's objects over and over while the modules import and
# the replay compiles (objects that live as long as the command): 10% of a short replay's
# CPU, 5% of a long one's. Cyclic garbage waits longer to be freed; little is made.
GC_THRESHOLD = 100_000


def command_line() -> NoReturn:
    """Run `retrace ARGS` (sys.argv) and exit with its status."""
    gc.set_threshold(GC_THRESHOLD)
    one_blas_thread()  # (before the spare child forks: its environment too)
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    from retrace.commands import REPLAYING, replays

    command = replays(sys.argv[1:])
    if command is not None:
        from retrace.replay.contain import spare_child

        spare_child(REPLAYING[command])
    import retrace.commands.cli  # noqa: F401  (here, under the handler above)
    from retrace.exits import end_process

    signal.signal(signal.SIGINT, signal.default_int_handler)  # (`main` handles it from here)
    end_process(main)


def _interrupted_while_starting(number: int, frame: object) -> None:
    """Ctrl-C while the command line's modules import: end here and now. Raised as
    KeyboardInterrupt it could come inside an import's clean-up (the weakref callback of a
    module's lock), where Python prints it as an ignored exception, traceback and all,
    and carries on (2 in 40 runs of a Ctrl-C 5 ms into a profile's start)."""
    with contextlib.suppress(OSError):  # (stderr closed)
        os.write(2, f"{INTERRUPTED[0]}\n".encode())
    os._exit(INTERRUPTED[1])


def one_blas_thread() -> None:
    """retrace never multiplies matrices, but importing numpy starts an OpenBLAS thread per
    core that spins: 15-20 ms of CPU per command on 2 cores, more on bigger machines."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(run: Callable[[], object] | None = None) -> None:
    """Run the command line (or `run`: a replay child's work), turning retrace's own errors
    into one stderr line and an exit code."""
    import click

    from retrace.exits import outlive_stderr, run_reporting
    from retrace.replay.contain import let_children_linger

    one_blas_thread()
    if sys.stdout is None:  # started with stdout closed (`>&-`): Python leaves None there
        click.echo("retrace: error: standard output is closed", err=True)
        sys.exit(1)
    outlive_stderr()
    let_children_linger()  # (this process ends with the command)
    if run is None:
        from retrace.commands.cli import cli

        run = partial(cli.main, prog_name="retrace", standalone_mode=False)
    run_reporting(run)
