"""Compile time: every window system's calls, read into entries on `WindowSystem`.

One table from function name to handler, joined from the readers of each
system (GLX, EGL, WGL, CGL), which keep what their calls tell for the calls
after them (the format a config stands for, the API bound, the drawable a CGL
context has). A trace normally uses one system; the table holds them all so
that a trace is read whatever machine recorded it.
"""

from __future__ import annotations

from typing import Any

from retrace.replay.values import BadValue
from retrace.replay.ws.cgl import CglReader
from retrace.replay.ws.core import Entry, Handler, WindowSystem
from retrace.replay.ws.egl import EglReader
from retrace.replay.ws.glx import GlxReader
from retrace.replay.ws.wgl import WglReader


class WsCompiler:
    """Compile-time half: reads window-system calls and emits runtime entries."""

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.egl = EglReader(ws)
        self.handlers: dict[str, Handler] = {
            **GlxReader(ws).handlers(),
            **self.egl.handlers(),
            **WglReader(ws).handlers(),
            **CglReader(ws).handlers(),
            "glFrameTerminatorGREMEDY": lambda args, ret, thread: (ws.frame_terminator, ()),
        }

    @property
    def gl_images(self) -> set[int]:
        """The traced EGLImages the replay makes again from its GL objects."""
        return self.egl.gl_images

    def compile(self, name: str, args: list[Any], ret: Any, thread: int) -> Entry | None:
        """The entry for a window-system call, or None when it needs no replay."""
        handler = self.handlers.get(name)
        if handler is None:
            return None
        try:
            return handler(args, ret, thread)
        except IndexError:  # handlers index only into the call's arguments and their values
            raise BadValue("fewer arguments or members than the call takes") from None
