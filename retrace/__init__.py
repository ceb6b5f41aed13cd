"""retrace: replay apitrace OpenGL traces and profile them.

As a library (see `retrace.api`): ``retrace.open(path)`` gives a `Trace` to
replay or profile. The API is imported on first use, so that the command line,
which starts with this package, pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrace.api import ProfileResult, ReplayResult, Trace
    from retrace.api import open_trace as open  # noqa: A004 - retrace.open reads as intended
    from retrace.errors import RetraceError

__all__ = ["ProfileResult", "ReplayResult", "RetraceError", "Trace", "open"]
_FROM = {"open": ("retrace.api", "open_trace"), "RetraceError": ("retrace.errors", "RetraceError")}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'retrace' has no attribute {name!r}")
    import importlib

    module, attribute = _FROM.get(name, ("retrace.api", name))
    return getattr(importlib.import_module(module), attribute)
