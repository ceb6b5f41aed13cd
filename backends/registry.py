"""Finding backends: `MODULES` names every backend and the module of this package that
defines it, and a module is imported only when its backend is looked up (`Backends`), so
that a selection of opengl metrics imports none of the other four (6 ms of every profile's
start-up). Its MetricBackend subclass registers itself there (see base.py);
tests/unit/test_backends.py holds the table complete."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from retrace.backends.base import MetricBackend

T = TypeVar("T")

# Backend name -> its module, in the order backends are listed: opengl first, then by name
# regardless of case.
MODULES = {
    "opengl": "opengl",
    "cpu": "cpu",
    "GL_AMD_performance_monitor": "amd_perfmon",
    "GL_INTEL_performance_query": "intel_perfquery",
    "pipeline": "pipeline",
}


def backend_class(name: str) -> type[MetricBackend]:
    """The class of the backend `name` (a key of `MODULES`), its module imported."""
    importlib.import_module(f"{__package__}.{MODULES[name]}")
    return MetricBackend.registry[name]


def load_backends() -> dict[str, type[MetricBackend]]:
    """Every backend's class by name, every module imported (a warm worker's start-up)."""
    return {name: backend_class(name) for name in MODULES}


class Backends(Mapping[str, T]):
    """Every backend by name, made by `make` from its class when first looked up: names
    are known, and tested (`in`), without importing any backend."""

    def __init__(self, make: Callable[[type[MetricBackend]], T]) -> None:
        self._make = make
        self._made: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._made:
            if name not in MODULES:
                raise KeyError(name)
            self._made[name] = self._make(backend_class(name))
        return self._made[name]

    def __contains__(self, name: object) -> bool:
        return name in MODULES

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)
