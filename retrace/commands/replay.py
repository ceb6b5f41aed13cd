"""`retrace replay`: a trace once through the GL driver, with glretrace's replay options."""

from __future__ import annotations

from typing import Any

import click

from retrace.commands.options import (
    HEADLESS,
    TRACE,
    cache_option,
    calls_option,
    count_option,
    frames_option,
    loop_option,
    no_effect,
    sandbox_option,
    strict_option,
)


@click.command()
@click.argument("trace", type=TRACE)
@click.option("-b", "--benchmark", is_flag=True, help="Print the frame rate, as glretrace -b.")
@click.option(
    "-s",
    "--snapshot-prefix",
    metavar="PREFIX",
    help="Write snapshots to PREFIX<call>.png ('-': to stdout, see --snapshot-format).",
)
@click.option(
    "-S",
    "--snapshot",
    "snapshot_spec",
    metavar="CALLSET",
    default="*/frame",
    show_default=True,
    help="Calls to snapshot (before a frame-ending call, after any other).",
)
@click.option(
    "--snapshot-format",
    type=click.Choice(["PNM", "RGB", "MD5"], case_sensitive=False),
    default="PNM",
    show_default=True,
    help="With -s -: a PPM stream (call number as comment), raw pixels, or one MD5 per line.",
)
@click.option(
    "--snapshot-interval",
    type=click.IntRange(0),
    default=0,
    metavar="N",
    help="Snapshot only in every Nth frame (frames 0, N, 2N...; 0: every frame).",
)
@calls_option("Replay only these GL calls (window-system calls always run).")
@frames_option("Replay up to the end of frame B; snapshots and -b count frames A to B (0-based).")
@loop_option(
    "Then replay the calls since the last frame end N more times, as glretrace (--loop or "
    "N < 0: until interrupted); -b counts the trace's frames and the loops'."
)
@click.option(
    "--sb", "single_buffer", is_flag=True, help="Single-buffered: glFlush/glFinish end frames."
)
@click.option("--db", "double_buffer", is_flag=True, help="Double-buffered (the default).")
@click.option(
    "--core", is_flag=True, help="Create desktop contexts as core profile (3.2 at least)."
)
@click.option(
    "--samples",
    type=click.IntRange(0, 256),
    metavar="N",
    help="Multisample the stand-in framebuffers with N samples.",
)
@click.option("-v", "--verbose", is_flag=True, help="Report GL errors after every call.")
@HEADLESS
@no_effect(
    "--driver",
    metavar="DRIVER",
    why="retrace replays on the EGL device Mesa picks; choose the driver with Mesa's "
    "environment (LIBGL_ALWAYS_SOFTWARE=1, GALLIUM_DRIVER, MESA_LOADER_DRIVER_OVERRIDE)",
)
@no_effect("--fullscreen", why="retrace shows no window of the trace's (see --window)")
@no_effect("-w", "--wait", why="retrace shows no window of the trace's to wait on")
@no_effect("--singlethread", why="retrace replays every thread's calls on one thread already")
@click.option("--window", is_flag=True, help="Also show the frames in a GLFW window.")
@click.option(
    "--query-handling",
    type=click.Choice(["skip", "run", "check"]),
    default="skip",
    show_default=True,
    help="The program's own query readbacks: leave out, run, or run and compare with the trace.",
)
@count_option(
    "--query-tolerance",
    low=0,
    default=0,
    help="With --query-handling check: how far a result may be from the trace's.",
)
@strict_option
@cache_option
@sandbox_option
def replay(trace: str, double_buffer: bool, **options: Any) -> None:
    """Replay TRACE through the GL driver (headless EGL)."""
    if options["single_buffer"] and double_buffer:  # (--db is the default: it only contradicts)
        raise click.UsageError("--sb and --db contradict each other: give one")
    from retrace.replay.options import ReplayOptions
    from retrace.replay.run import run_replay

    run_replay(trace, ReplayOptions(**options))
