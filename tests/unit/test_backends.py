"""The backend table (`backends/registry.py`): every backend module listed, each imported
only when its backend is looked up."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import retrace.backends as package
from retrace.backends.base import MetricBackend
from retrace.backends.registry import MODULES, Backends, load_backends


def test_the_table_names_every_backend_of_the_package_and_its_module():
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    defined = {
        name: cls.__module__.rsplit(".", 1)[1] for name, cls in MetricBackend.registry.items()
    }
    assert defined == MODULES
    ordered = sorted(MODULES, key=lambda n: (n != "opengl", n.casefold()))
    assert list(load_backends()) == list(MODULES) == ordered


def test_a_backend_is_made_when_looked_up_and_once():
    made: list[str] = []
    backends = Backends(lambda cls: made.append(cls.name) or cls.name.upper())
    assert "cpu" in backends and "nosuch" not in backends and list(backends) == list(MODULES)
    assert made == []
    assert backends["cpu"] == backends["cpu"] == "CPU" and made == ["cpu"]


def test_an_opengl_selection_imports_no_other_backend():
    check = (
        "import sys\n"
        "from retrace.profile.checks import check_selection\n"
        "from retrace.vocabulary import Boundary\n"
        "check_selection({Boundary.FRAME: 'OpenGL: GPU Duration'})\n"
        "print(sorted(m for m in sys.modules if m.startswith('retrace.backends.')))"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(
        ["retrace.backends.base", "retrace.backends.opengl", "retrace.backends.registry"]
    )
