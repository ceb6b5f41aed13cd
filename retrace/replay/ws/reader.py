"""Compile time: every window system's calls, read into entries on `WindowSystem`.

One table from function name to handler, joined from the readers of each
system (GLX, EGL, WGL, CGL), which keep what their calls tell for the calls
after them (the format a config stands for, the API bound, the drawable a CGL
context has). A trace normally uses one system, so a system's reader is imported
and made at the first call of that system (its prefix says which), and a trace is
still read whatever machine recorded it.
"""

from __future__ import annotations

import importlib
from typing import Any

from retrace.replay.values import BadValue
from retrace.replay.ws.core import Entry, Handler, WindowSystem

# the prefix of every call of a system -> (its reader's module in this package, class)
_READERS = {
    "glX": ("glx", "GlxReader"),
    "egl": ("egl", "EglReader"),
    "wgl": ("wgl", "WglReader"),
    "CGL": ("cgl", "CglReader"),
}


class WsCompiler:
    """Compile-time half: reads window-system calls and emits runtime entries."""

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.readers: dict[str, Any] = {}  # prefix -> the reader made at its first call
        self._interned: dict[Entry, Entry] = {}
        self.handlers: dict[str, Handler] = {
            "glFrameTerminatorGREMEDY": lambda args, ret, thread: (ws.frame_terminator, ()),
        }
        # functions whose entries depend on nothing but the call's arguments and result, and
        # whose handlers change nothing: the swaps (`pure`)
        self._pure = {"glFrameTerminatorGREMEDY"}

    def _reader(self, name: str) -> bool:
        """Make the reader of the system `name` belongs to, at its first call; whether
        there is one."""
        prefix = name[:3]
        where = _READERS.get(prefix)
        if where is None:
            return False
        if prefix not in self.readers:
            module = importlib.import_module(f"{__package__}.{where[0]}")
            reader = self.readers[prefix] = getattr(module, where[1])(self.ws)
            self.handlers.update(reader.handlers())
            self._pure.update(getattr(reader, "PURE", ()))
        return True

    def handles(self, name: str) -> bool:
        """Whether calls of `name` can compile to anything (else `compile` always gives
        None)."""
        if name not in self.handlers:
            self._reader(name)
        return name in self.handlers

    def pure(self, name: str) -> bool:
        """Whether `name`'s entries depend on nothing but the call's arguments and result,
        and compiling one changes nothing else (calls like one compiled before may reuse its
        entry)."""
        return self.handles(name) and name in self._pure

    @property
    def gl_images(self) -> set[int]:
        """The traced EGLImages the replay makes again from its GL objects."""
        egl = self.readers.get("egl")
        return egl.gl_images if egl is not None else set()

    def compile(self, name: str, args: list[Any], ret: Any, thread: int) -> Entry | None:
        """The entry for a window-system call, or None when it needs no replay."""
        handler = self.handlers.get(name)
        if handler is None:
            if name[:3] in self.readers or not self._reader(name):
                return None
            return self.compile(name, args, ret, thread)
        try:
            entry = handler(args, ret, thread)
        except IndexError:  # handlers index only into the call's arguments and their values
            raise BadValue("fewer arguments or members than the call takes") from None
        # One entry for the calls that give equal ones: a swap a frame, kept as long as the
        # compiled trace, cost 170 bytes of objects a frame (8 MiB for glmark2-scenes's
        # 47,390); of integers only, whose equals are alike (True == 1, 1.0 == 1)
        if entry is not None and all(type(a) is int for a in entry[1]):
            return self._interned.setdefault(entry, entry)
        return entry
