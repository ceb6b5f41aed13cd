"""Finding backends: every module of this package is imported once, and each
MetricBackend subclass with a name registers itself (see base.py)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

import retrace.backends as backends
from retrace.backends.base import MetricBackend

_NOT_BACKENDS = {"base", "registry"}


@cache
def load_backends() -> dict[str, type[MetricBackend]]:
    """Backend classes by name, in a stable order (opengl first, then alphabetical)."""
    for module in pkgutil.iter_modules(backends.__path__):
        if module.name not in _NOT_BACKENDS:
            importlib.import_module(f"{backends.__name__}.{module.name}")
    found = MetricBackend.registry
    return {
        name: found[name] for name in sorted(found, key=lambda n: (n != "opengl", n.casefold()))
    }
