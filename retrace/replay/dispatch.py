"""GL entry points as ctypes functions, typed from the Khronos registry.

Each function is resolved once per replay (through EGL, which hands out
context-independent dispatch stubs) and typed from its registry prototype, so
the replay loop calls it directly: no PyOpenGL wrapper and no per-call error
check sits between the trace and the driver.
"""

from __future__ import annotations

import ctypes
from _ctypes import CFuncPtr
from collections.abc import Callable
from typing import TypeAlias

from retrace.gl.registry import Command, Registry, ctypes_type, load_registry

# A C function called through ctypes, as `ctypes.CFUNCTYPE(...)(address)` makes it (ctypes
# names the class only privately, as _CFuncPtr).
CFunction: TypeAlias = CFuncPtr


class Dispatch:
    """Resolves and types GL functions by name, caching both."""

    def __init__(self, get_proc_address: Callable[[str], int], registry: Registry | None = None):
        self._resolve = get_proc_address
        self.registry = registry or load_registry()
        self._functions: dict[str, CFunction | None] = {}

    def command(self, name: str) -> Command | None:
        return self.registry.command(name)

    def function(self, name: str) -> CFunction | None:
        """The typed function for a GL command, or None when the registry or driver lacks it."""
        try:
            return self._functions[name]
        except KeyError:
            pass
        fn = None
        command = self.registry.command(name)
        address = self._resolve(name) if command is not None else 0
        if command is not None and address:
            restype = ctypes_type(command.return_ctype)
            argtypes = [ctypes_type(p) for p in command.params]
            fn = ctypes.CFUNCTYPE(restype, *argtypes)(address)
        self._functions[name] = fn
        return fn

    def address(self, name: str) -> int:
        """The driver's entry point for a GL function, 0 when it has none."""
        return self._resolve(name) or 0

    def raw(
        self, name: str, restype: type[ctypes._CData] | None, *argtypes: type[ctypes._CData]
    ) -> CFunction:
        """A function typed by the caller (for the replayer's own queries); raises if absent."""
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.raw_address(name))

    def raw_address(self, name: str) -> int:
        """A function's entry point, for the replayer's own calls from C; raises if absent."""
        address = self._resolve(name)
        if not address:
            raise LookupError(name)
        return address
