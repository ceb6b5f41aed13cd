"""Which process the GL driver lives in: only the one that replays.

NVIDIA's EGL refuses to create contexts (EGL_BAD_ALLOC) in a forked child of a process
that initialised the display; from the same process, or another thread of it, it works.
Mesa does not mind, which is how an earlier retrace, opening the display in the parent
before forking the replay, worked on llvmpipe and on no NVIDIA GPU. So, on every driver:

- a process that forks replays (the command line, `retrace.forkserver`'s warm worker,
  trim's self-check, the Python API's caller) never loads the driver: no EGL display,
  no driver library, crosses a `fork()`;
- the replaying child opens its own display, first thing (`open_ahead`): the driver
  loads and initialises on a thread (in C, without the GIL: 25-40 ms on llvmpipe) while
  the child imports the replayer and reads the trace, and `open_display` takes it.

`tests/models/nvidia_egl.c` models NVIDIA's rule over Mesa, so that CI catches a breach.
A process that had loaded the driver before retrace forked from it (a program using the
Python API after rendering with EGL itself) is told why its contexts fail
(`inherited_hint`).
"""

from __future__ import annotations

import ctypes
import os
import threading

from retrace.replay.ws.egl_api import EGL_LIBRARY
from retrace.replay.ws.headless import EglDisplay

__all__ = ["inherited_hint", "open_ahead", "open_display"]


class _OpeningDisplay(threading.Thread):
    """`EglDisplay.open()` in a thread of its own (see `open_ahead`)."""

    def __init__(self) -> None:
        super().__init__(name="retrace-egl-open", daemon=True)
        self._display: EglDisplay | None = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._display = EglDisplay.open()
        except BaseException as e:  # raised again in the thread that waits for it
            self._error = e

    def result(self) -> EglDisplay:
        self.join()
        if self._error is not None:
            raise self._error
        assert self._display is not None
        return self._display


# the display opening ahead in this process, until `open_display` takes it
_ahead: list[_OpeningDisplay] = []
# whether libEGL was loaded in this process before retrace first opened a display here
_preloaded: list[bool] = []


def open_ahead() -> None:
    """In the replaying process: start opening the display that `open_display` returns,
    on a thread, so that what the caller does meanwhile overlaps the driver's loading."""
    if not _ahead:
        _note_preloaded()
        _ahead.append(_OpeningDisplay())


def open_display() -> EglDisplay:
    """The replay's display: the one opening ahead, else one opened now."""
    if _ahead:
        return _ahead.pop().result()
    _note_preloaded()
    return EglDisplay.open()


def inherited_hint() -> str:
    """A sentence for an EGL error in a process that had libEGL loaded before retrace
    opened its display here: forked from a process that had initialised EGL, which
    NVIDIA's driver refuses. Empty otherwise."""
    if not (_preloaded and _preloaded[0]):
        return ""
    return (
        " (EGL was loaded in this process before retrace opened its display: if it was "
        "forked from a process that had initialised EGL, some drivers refuse that; call "
        "retrace from a process that has not)"
    )


def _note_preloaded() -> None:
    if not _preloaded:
        try:
            ctypes.CDLL(EGL_LIBRARY, mode=os.RTLD_NOLOAD)
        except OSError:
            _preloaded.append(False)
        else:
            _preloaded.append(True)
