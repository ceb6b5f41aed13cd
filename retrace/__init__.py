"""retrace: replay apitrace OpenGL traces and profile them.

As a library, `retrace.api` is the typed entry point (``retrace.api.open_trace``);
``retrace.open`` is the same function. The API is imported on first use, so that
the command line, which starts with this package, pays nothing for it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"  # the one place (pyproject.toml reads it); cheap to read, unlike metadata
# The name pip knows retrace by (pyproject.toml's, held equal by tests/unit/test_packaging.py):
# `retrace` on PyPI is an unrelated project. The command and the package stay `retrace`.
DISTRIBUTION = "retrace-gl"
_LAZY = {
    "open": ("retrace.api", "open_trace"),
    "Trace": ("retrace.api", "Trace"),
    "ProfileResult": ("retrace.api", "ProfileResult"),
    "ReplayResult": ("retrace.api", "ReplayResult"),
    "RetraceError": ("retrace.errors", "RetraceError"),
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'retrace' has no attribute {name!r}")
    import importlib

    module, attribute = _LAZY[name]
    return getattr(importlib.import_module(module), attribute)
