"""What a backend may see of the replay: the current context, its GL functions, its extensions.

Backends never reach into the replayer; they get this narrow view instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from functools import cached_property

from retrace.replay.dispatch import Dispatch
from retrace.replay.program import QUERY_FUNCTIONS
from retrace.replay.state import ReplayState, TracedContext

GL_EXTENSIONS = 0x1F03
GL_NUM_EXTENSIONS = 0x821D


class ContextInfo:
    """API, version and extensions of one real context, asked once."""

    def __init__(self, context: TracedContext, dispatch: Dispatch) -> None:
        real = context.real
        self.api = context.request.api  # "gl" or "gles"
        self.major = real.major if real is not None else 0
        self.minor = real.minor if real is not None else 0
        self.profile = real.profile if real is not None else ""
        self._dispatch = dispatch

    def version_at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)

    @cached_property
    def extensions(self) -> frozenset[str]:
        get_integer = self._dispatch.raw(
            "glGetIntegerv", None, ctypes.c_uint, ctypes.POINTER(ctypes.c_int)
        )
        count = ctypes.c_int(0)
        get_integer(GL_NUM_EXTENSIONS, ctypes.byref(count))
        if count.value:
            get_stringi = self._dispatch.raw(
                "glGetStringi", ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint
            )
            return frozenset(get_stringi(GL_EXTENSIONS, i).decode() for i in range(count.value))
        get_string = self._dispatch.raw("glGetString", ctypes.c_char_p, ctypes.c_uint)
        return frozenset((get_string(GL_EXTENSIONS) or b"").decode().split())


class ReplayView:
    """The replay as backends see it."""

    def __init__(self, state: ReplayState, dispatch: Dispatch) -> None:
        self._state = state
        self.dispatch = dispatch
        self._infos: dict[int, ContextInfo] = {}
        # the call event about to begin is glEndList: GL is still compiling the display
        # list, so a query begun now would be compiled into it instead of run
        self.closing_list = False

    @property
    def context(self) -> ContextInfo | None:
        """The current context, or None between contexts."""
        current = self._state.current
        if current is None or current.real is None:
            return None
        key = current.real.handle
        info = self._infos.get(key)
        if info is None:
            info = self._infos[key] = ContextInfo(current, self.dispatch)
        return info

    @property
    def context_key(self) -> int:
        """Identifies the current real context (GL objects such as queries belong to one)."""
        current = self._state.current
        return current.real.handle if current is not None and current.real is not None else 0

    def query_functions(self) -> tuple[int, ...]:
        """Addresses of the functions the replay loop measures events with in the current
        context (`QUERY_FUNCTIONS`, by their OpenGL ES names there; 0 where missing), for
        `Program.enter_context`."""
        context = self.context
        if context is None:
            return (0,) * len(QUERY_FUNCTIONS)
        gles = context.api == "gles"
        return tuple(self.dispatch.address(es if gles else gl) for gl, es in QUERY_FUNCTIONS)

    def reserve_queries(self, targets: Iterable[int]) -> None:
        """The query targets this pass's own queries use: the program's queries of them are
        left out until the next pass (`replay.state.AppQueries`)."""
        self._state.app_queries.reserved = frozenset(targets)

    def forget_contexts(self) -> None:
        """A new pass creates new contexts."""
        self._infos.clear()
