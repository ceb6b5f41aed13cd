"""What `pip install .` installs: a regular install (a wheel) holds only the packages that
pyproject.toml lists, where an editable one finds every folder of the source tree, so a
package missing from the list breaks only the users' installs."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # (Python 3.11 on)
ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_the_source_tree_is_installed():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {folder: package for package, folder in setuptools["package-dir"].items()}
    found = set()
    for top, package in folders.items():
        for init in (ROOT / top).rglob("__init__.py"):
            inner = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((package, *inner)))
    assert sorted(found) == sorted(setuptools["packages"])


def test_the_distribution_name_is_the_one_the_errors_name():
    # Errors say `pip install 'retrace-gl[extra]'`: that must install this project.
    import retrace

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == (
        retrace.DISTRIBUTION
    )


def test_the_version_is_the_package_s_whatever_the_distribution_is_called():
    # (click would look `retrace` up among the installed distributions' metadata)
    import subprocess
    import sys

    import retrace

    version = subprocess.run(
        [sys.executable, "-m", "retrace", "--version"], capture_output=True, text=True
    )
    assert (version.returncode, version.stdout) == (0, f"retrace, version {retrace.__version__}\n")
