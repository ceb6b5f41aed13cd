"""`retrace replay`: run a trace once through the driver, with glretrace's replay options."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrace.replay.options import ReplayOptions
    from retrace.replay.snapshot import Image


def run_replay(trace: str, options: ReplayOptions) -> None:
    """Replay in a child process: a driver crash is reported with the call that caused it."""
    import os

    import retrace.replay.contain as contain

    prefix = options.snapshot_prefix
    writes = []
    if prefix is not None and prefix != "-":  # (a file prefix: PNGs, whatever --snapshot-format)
        folder = os.path.abspath(os.path.dirname(prefix))
        writes.append(os.path.join(folder, ""))  # (a folder: made if missing, as glretrace)
    # (a partial: it pickles, for the child forked before the command line was parsed)
    contain.contained(trace, partial(_replay, trace, options), writes, options.window)


def _replay(trace: str, options: ReplayOptions) -> None:
    from retrace.replay.ws.driver_process import open_ahead
    from retrace.trace.container import load_libraries

    load_libraries()
    open_ahead()  # first: the driver's loading is what the replay waits for
    from retrace.trace.cache import digest_ahead

    digest_ahead(trace)  # (a first read's hashing, on a thread too)
    # Imported in the child that replays: the parent only waits, and exits sooner without them.
    from retrace.replay.replayer import LOOP_CAVEAT, Replayer, StopReplay, rendered
    from retrace.trace.callset import CallSet, frame_range

    first_frame, last_frame = frame_range(options.frames_spec)
    snapshots = (
        CallSet.parse(options.snapshot_spec)
        if options.snapshot_prefix is not None or options.window
        else None
    )
    with ExitStack() as stack:
        # Not closed: this process ends (`contain`'s os._exit) once the replay is done, and
        # the kernel frees the driver's all at once; destroying the contexts and terminating
        # the display first cost every replay 3-4 ms of the driver's work for nothing.
        replayer = Replayer(trace, snapshots=snapshots)
        replayer.compiler.limit(
            CallSet.parse(options.calls_spec) if options.calls_spec else None, options.single_buffer
        )
        replayer.compiler.handle_queries(options.query_handling, options.query_tolerance)
        replayer.ws.force_core = options.core
        replayer.ws.samples = options.samples
        replayer.last_frame = last_frame
        viewer = None
        if options.window:
            from retrace.replay.ws.viewer import FrameWindow

            viewer = stack.enter_context(FrameWindow(f"retrace: {trace}"))

        def on_snapshot(call_no: int, image: Image) -> None:
            if replayer.frame < first_frame or (
                options.snapshot_interval and replayer.frame % options.snapshot_interval
            ):
                return
            if viewer is not None and not viewer.show(image):
                raise StopReplay  # the user closed the window
            if options.snapshot_prefix is None:
                return
            if options.snapshot_prefix == "-":  # --snapshot-format says how, as in glretrace
                sys.stdout.buffer.write(image.on_stdout(options.snapshot_format, call_no))
            else:
                image.save_png(f"{options.snapshot_prefix}{call_no:010d}.png")

        replayer.on_snapshot = on_snapshot
        if not options.loop:  # (--loop runs the last frame's ops again)
            replayer.program.once(metadata=False)  # (no table reads it after)
        if options.verbose:
            replayer.check_errors()
        result = replayer.run_pass()
        frames, seconds = max(result.frames - first_frame, 0), result.seconds
        if options.loop:  # (glretrace's --loop=0 does not loop)
            print(
                "retrace: warning: --loop replays the calls since the last frame end again; "
                f"{LOOP_CAVEAT}",
                file=sys.stderr,
            )
            if options.verbose:  # (a pass's brackets end with it)
                replayer.check_errors()
            looped = replayer.loop_last_frame(options.loop)  # glretrace counts both
            frames, seconds = frames + looped.frames, seconds + looped.seconds
        if options.benchmark:
            print(rendered(frames, seconds), flush=True)  # (before the warnings after it)
        replayer.finish(options.strict)
